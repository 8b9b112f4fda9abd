/*
 * bigbuf.c - large buffers and an engine's reusable per-call buffer
 * (bigbuf.h says why).  No spec section: where memory lies changes no bit.
 */
#include "bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define BIG_ALIGN ((size_t)2 << 20) /* a huge page on x86-64 and on 4 KiB-page aarch64 */

void *cis2_big_alloc(size_t bytes, size_t *cap)
{
    if (bytes > SIZE_MAX - BIG_ALIGN) return NULL;
    size_t n = (bytes + BIG_ALIGN - 1) / BIG_ALIGN * BIG_ALIGN;
    if (n == 0) n = BIG_ALIGN;
    void *p = aligned_alloc(BIG_ALIGN, n);
    if (!p) return NULL;
#if defined(MADV_HUGEPAGE)
    madvise(p, n, MADV_HUGEPAGE); /* a hint */
#endif
    if (cap) *cap = n;
    return p;
}

void cis2_reuse_init(cis2_reuse *r)
{
    pthread_mutex_init(&r->lock, NULL);
    r->buf = NULL;
    r->cap = 0;
    r->asked = 0;
    r->busy = 0;
}

void cis2_reuse_destroy(cis2_reuse *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
    pthread_mutex_destroy(&r->lock);
}

void *cis2_reuse_take(cis2_reuse *r, size_t bytes)
{
    pthread_mutex_lock(&r->lock);
    if (r->busy) { /* another call has it */
        pthread_mutex_unlock(&r->lock);
        return cis2_big_alloc(bytes, NULL);
    }
    if (r->cap < bytes) {
        free(r->buf);
        r->cap = 0;
        r->buf = cis2_big_alloc(bytes, &r->cap);
        if (!r->buf) r->cap = 0;
    }
    if (bytes > r->asked) r->asked = bytes;
    void *p = r->buf;
    r->busy = p != NULL;
    pthread_mutex_unlock(&r->lock);
    return p;
}

void cis2_reuse_give(cis2_reuse *r, void *p)
{
    if (!p) return;
    pthread_mutex_lock(&r->lock);
    if (p != r->buf) free(p); /* a call's own */
    else {
        r->busy = 0;
        if (r->asked > CIS2_REUSE_KEEP) { /* a rare huge vocabulary: not kept */
            free(r->buf);
            r->buf = NULL;
            r->cap = r->asked = 0;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

/*
 * bigbuf.h - large buffers: 2 MiB-aligned with the huge-page hint, and
 * the one reusable per-call buffer an engine keeps (engine.h).
 * Library-internal: kernels.c's weight memory, model.c's larger KV
 * caches, prefill.c's logits of a pass (scoring's and verification's).
 *
 * Why: a score or a verification writes every row's logits (49152 floats
 * a row on SmolLM2, a pass of 64 rows is 12.6 MB).  Fresh memory is
 * zero-filled by the kernel page by page on first write; on a virtual
 * machine a 4 KiB fault costs ~13 us, so a fresh 64-row buffer cost 40 ms
 * of a 120 ms score (perf: exc_page_fault).  Huge pages cut the faults
 * 512-fold (the zero-filling stays); reusing the buffer from the last
 * call removes both.  No arithmetic depends on where a buffer lies.
 */
#ifndef CIS2_BIGBUF_H
#define CIS2_BIGBUF_H

#include <pthread.h>
#include <stddef.h>

/* bytes rounded up to 2 MiB, aligned to 2 MiB, huge pages hinted (a hint:
 * refused, the pages stay small); *cap (if not NULL) gets the rounded
 * size.  NULL: out of memory or bytes absurd.  Free with free(). */
void *cis2_big_alloc(size_t bytes, size_t *cap);

/* One buffer kept between calls.  Take it for a call's duration; a call
 * that finds it taken (two calls at once) gets a buffer of its own, which
 * give frees.  It is kept while the largest size asked of it is at most
 * CIS2_REUSE_KEEP bytes (its rounding up to 2 MiB aside). */
#define CIS2_REUSE_KEEP ((size_t)64 << 20)

typedef struct cis2_reuse {
    pthread_mutex_t lock;
    void *buf;
    size_t cap;
    size_t asked;  /* the largest size asked of it */
    int busy;
} cis2_reuse;

void cis2_reuse_init(cis2_reuse *r);
void cis2_reuse_destroy(cis2_reuse *r); /* frees the kept buffer */
/* At least bytes (contents undefined); NULL: out of memory. */
void *cis2_reuse_take(cis2_reuse *r, size_t bytes);
/* Gives back what take returned (NULL: nothing). */
void cis2_reuse_give(cis2_reuse *r, void *p);

#endif

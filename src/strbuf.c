/*
 * strbuf.c - the growing text buffer of strbuf.h, for the library's
 * renderers (receipt.c, sample.c, synth.c).
 */
#include "strbuf.h"

#include "cis2_toolkit.h" /* and cis2.h */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cis2_sb_put(cis2_sb *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void cis2_sb_str(cis2_sb *b, const char *s) { cis2_sb_put(b, s, strlen(s)); }

void cis2_sb_hex(cis2_sb *b, const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char h[3];
        cis2_hex(&d[i], 1, h);
        cis2_sb_put(b, h, 2);
    }
}

void cis2_sb_csv(cis2_sb *b, const uint32_t *v, size_t n)
{
    char t[16];
    for (size_t i = 0; i < n; i++) cis2_sb_put(b, t, (size_t)snprintf(t, sizeof t, i ? ",%u" : "%u", v[i]));
}

void cis2_sb_printf(cis2_sb *b, const char *fmt, ...)
{
    if (b->oom) return;
    char t[256], *big = NULL;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = 1; return; }
    if ((size_t)k >= sizeof t) { /* longer than the stack buffer: format again into one that fits */
        if (!(big = malloc((size_t)k + 1))) { b->oom = 1; return; }
        va_start(ap, fmt);
        vsnprintf(big, (size_t)k + 1, fmt, ap);
        va_end(ap);
    }
    cis2_sb_put(b, big ? big : t, (size_t)k);
    free(big);
}

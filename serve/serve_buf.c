/*
 * serve_buf.c - the server's one growing text buffer (serve.h): chat
 * template rendering (serve_chat.c), the Prometheus page
 * (serve_metrics.c), server-sent events and the streamed text
 * (serve_stream.c, serve_http.c).  The server is a client of cis2.h only, so
 * it keeps this instead of the library's internal string builder.
 */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int serve_buf_reserve(serve_buf *b, size_t extra)
{
    if (b->oom) return -1;
    if (extra > SIZE_MAX / 2 - b->n) { b->oom = 1; return -1; }
    size_t need = b->n + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) { b->oom = 1; return -1; }
    b->p = np;
    b->cap = cap;
    return 0;
}

void serve_buf_put(serve_buf *b, const void *s, size_t n)
{
    if (serve_buf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void serve_buf_str(serve_buf *b, const char *s) { serve_buf_put(b, s, strlen(s)); }

void serve_buf_printf(serve_buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt); /* into the spare room; formatted again only if it did not fit */
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = 1; return; }
    if (!b->p || (size_t)k >= b->cap - b->n) {
        if (serve_buf_reserve(b, (size_t)k)) return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
        va_end(ap);
    }
    b->n += (size_t)k;
}

void serve_buf_cut(serve_buf *b, size_t k)
{
    if (k > b->n) k = b->n;
    if (!b->p) return;
    memmove(b->p, b->p + k, b->n - k);
    b->n -= k;
    b->p[b->n] = 0;
}

void serve_buf_free(serve_buf *b)
{
    free(b->p);
    *b = (serve_buf){0};
}

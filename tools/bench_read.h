/*
 * bench_read.h - what the kernel benchmarks (tools/bench-kernels.c,
 * tools/bench-mxfp4.c) share: a monotonic clock, and the streaming-read
 * speed their figures are measured against (a plain read of a buffer, the
 * bytes split among the threads of a context's pool).  Benchmarks only:
 * included by those two programs, never by the library.
 */
#ifndef CIS2_BENCH_READ_H
#define CIS2_BENCH_READ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One thread's share of the read: per bytes (a multiple of 128) xor-folded. */
struct rd { const uint8_t *buf; size_t bytes, chunks; unsigned long long sink[64]; };
#if defined(__x86_64__)
__attribute__((target("avx2")))
#endif
static void rd_chunk(void *vctx, size_t c)
{
    struct rd *r = vctx;
    size_t per = r->bytes / r->chunks / 128 * 128;
    const uint8_t *p = r->buf + c * per;
#if defined(__x86_64__)
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t k = 0; k < per; k += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(p + k)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + k + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(p + k + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(p + k + 96)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    r->sink[c % 64] += (unsigned long long)_mm256_extract_epi64(a0, 0);
#else
    unsigned long long a[4] = {0};
    const unsigned long long *q = (const unsigned long long *)p;
    for (size_t k = 0; k < per / 8; k += 4) { a[0] ^= q[k]; a[1] ^= q[k + 1]; a[2] ^= q[k + 2]; a[3] ^= q[k + 3]; }
    r->sink[c % 64] += a[0] ^ a[1] ^ a[2] ^ a[3];
#endif
}

/* GB/s of the best of reps reads of a bytes-long buffer across cx's pool
 * (threads chunks). */
static double stream_gbs(const cis2_ctx *cx, size_t bytes, int threads, int reps)
{
    uint8_t *buf = aligned_alloc(64, bytes);
    memset(buf, 1, bytes);
    struct rd r = {buf, bytes, (size_t)threads, {0}};
    double best = 1e9;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now();
        cis2_parallel_for(cx, r.chunks, rd_chunk, &r);
        double t = now() - t0;
        if (t < best) best = t;
    }
    free(buf);
    return (double)(bytes / r.chunks / 128 * 128 * r.chunks) / best / 1e9;
}

#endif

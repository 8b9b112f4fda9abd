/*
 * bench-mxfp4.c - the MXFP4 matvec against the bf16 one on gpt-oss-20b's
 * expert gate_up shape (src/kernels.h, at cis2_wtype).  Not a test: prints
 * numbers.  Built and run by tools/bench-mxfp4.
 *
 * One call is cis2_matmul of a [5760, 2880] matrix (gate_up of one expert)
 * with npos positions.  Decode reads each expert's weights from memory,
 * not from cache, so every call takes the next of enough copies of the
 * matrix (each a different random one) to span 4x the last-level cache
 * (BENCH_MB, default 256 MB per type).  Reported per kernel, thread count
 * and npos: the time of one call, the weight bytes it streams per second
 * (MXFP4 4.25 bits a weight with its scales, bf16 16), the weights per
 * second, and that time over the streaming-read bound (the same bytes at
 * the speed of a plain read of a buffer that size, same threads).  Each
 * figure is the best of BENCH_PASSES (default 3) passes over the copies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cis2.h"
#include "kernels.h"
#include "threadpool.h"
#include "bench_read.h" /* now(), stream_gbs(): the streaming-read bound */

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static cis2_ctx X;
static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }

static void use_threads(int n)
{
    cis2_error err = {0};
    cis2_pool_destroy(X.pool);
    X.pool = NULL;
    if (cis2_pool_create(&X.pool, n, &err)) fprintf(stderr, "threads %d: %s\n", n, err.msg);
}

#define ROWS 5760
#define COLS 2880

struct set { const char *name; cis2_pmat *m; size_t n; size_t bytes; };

static void make_set(struct set *s, cis2_wtype t, size_t budget)
{
    cis2_error err = {0};
    size_t per = cis2_wmem_need(t, ROWS, COLS);
    s->n = budget / per < 2 ? 2 : budget / per;
    s->m = calloc(s->n, sizeof *s->m);
    s->bytes = per;
    size_t srcb = t == CIS2_W_MXFP4 ? ROWS * COLS / 2 + ROWS * COLS / 32 : ROWS * COLS * 2;
    uint8_t *src = malloc(srcb);
    for (size_t k = 0; k < s->n; k++) {
        if (t == CIS2_W_MXFP4) {
            for (size_t q = 0; q < ROWS * COLS / 2; q++) src[q] = (uint8_t)(rnd() >> 32);
            for (size_t q = ROWS * COLS / 2; q < srcb; q++) src[q] = (uint8_t)(118 + (rnd() >> 40) % 13);
        } else {
            uint16_t *h = (uint16_t *)src; /* sign, exponent 0x70..0x8F, random mantissa */
            for (size_t q = 0; q < ROWS * COLS; q++) {
                uint64_t r = rnd();
                h[q] = (uint16_t)((r & 0x8000) | (0x70 + (r >> 20) % 32) << 7 | ((r >> 32) & 0x7F));
            }
        }
        if (cis2_pmat_pack(&X, &s->m[k], t, src, ROWS, COLS, &err)) { fprintf(stderr, "%s\n", err.msg); exit(1); }
    }
    free(src);
}

/* Best of reps passes over the set (each call the next matrix), per call. */
static double time_set(const struct set *s, const float *x, size_t npos, float *y, int passes)
{
    double best = 1e9;
    for (int rep = 0; rep < passes; rep++) {
        double t0 = now();
        for (size_t k = 0; k < s->n; k++) cis2_matmul(&X, &s->m[k], x, npos, y);
        double t = (now() - t0) / (double)s->n;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    cis2_error err = {0};
    if (cis2_fpenv_pin(&err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    int maxt = argc > 1 ? atoi(argv[1]) : 2;
    const char *mb = getenv("BENCH_MB"), *ps = getenv("BENCH_PASSES");
    int passes = ps && atoi(ps) > 0 ? atoi(ps) : 3;
    size_t budget = (size_t)(mb ? atoi(mb) : 256) << 20;
    X = cis2_ctx_solo();
    use_threads(maxt);
    struct set sets[2] = {{"mxfp4", 0, 0, 0}, {"bf16", 0, 0, 0}};
    make_set(&sets[0], CIS2_W_MXFP4, budget);
    make_set(&sets[1], CIS2_W_BF16, budget);
    printf("[%d, %d] matrices: mxfp4 %.2f MB each (%zu copies), bf16 %.2f MB each (%zu copies)\n", ROWS, COLS,
           sets[0].bytes / 1e6, sets[0].n, sets[1].bytes / 1e6, sets[1].n);
    double bw[65] = {0};
    for (int t = 1; t <= maxt && t < 65; t++) {
        use_threads(t);
        bw[t] = stream_gbs(&X, budget, t, 6);
        printf("streaming read, %d thread(s), %zu MB: %.1f GB/s\n", t, budget >> 20, bw[t]);
    }
    size_t maxpos = 16;
    float *x = malloc(maxpos * COLS * 4), *y = malloc(maxpos * ROWS * 4);
    for (size_t i = 0; i < maxpos * COLS; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    printf("\n%-7s %-6s thr npos  ms/call   GB/s  Gweights/s  x-bound\n", "kernel", "type");
    static const char *ks[] = {"scalar", "avx2", "avx512", "neon"};
    static const size_t NP[] = {1, 4, 16};
    for (int v = 0; v < 4; v++) {
        if (!cis2_kernel_available(ks[v]) || cis2_kernel_find(ks[v], &X.kern, &err)) continue;
        for (int t = 1; t <= maxt; t++) {
            use_threads(t);
            for (size_t q = 0; q < 3; q++) {
                size_t npos = NP[q];
                if (v == 0 && (t > 1 || npos > 1)) continue; /* the scalar reference: one line */
                for (int k = 0; k < 2; k++) {
                    const struct set *s = &sets[k];
                    double tc = time_set(s, x, npos, y, v == 0 ? 1 : passes);
                    printf("%-7s %-6s %3d %4zu %8.3f %6.1f %11.2f %8.2f\n", ks[v], s->name, t, npos, tc * 1e3,
                           s->bytes / tc / 1e9, (double)ROWS * COLS / tc / 1e9, tc / (s->bytes / (bw[t] * 1e9)));
                }
            }
        }
    }
    printf("\n(ms/call: one [%d, %d] matmul of npos positions, the best of %d passes over the copies;\n"
           " GB/s: its packed bytes / time; x-bound: time / (bytes / streaming read GB/s, same threads))\n",
           ROWS, COLS, passes);
    return 0;
}

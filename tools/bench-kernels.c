/*
 * bench-kernels.c - decode-shaped benchmark of the matrix kernels
 * (src/kernels.h).  Not a test: prints numbers.  Built and run by
 * tools/bench-kernels.
 *
 * One "token" is the whole set of matmuls of SmolLM2-135M (30 layers of
 * q 576x576, k/v 192x576, o 576x576, gate/up 1536x576, down 576x1536, then
 * the 49152x576 LM head; ~269 MB of bf16 weights).  The bandwidth bound is
 * that byte count divided by a streaming-read measurement over a buffer of
 * the same size with the same thread count.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cis2.h"
#include "kernels.h"
#include "threadpool.h"
#include "bench_read.h" /* now(), stream_gbs(): the streaming-read bound */

#define NL 30
static const size_t SHAPES[7][2] = {{576, 576}, {192, 576}, {192, 576}, {576, 576},
                                    {1536, 576}, {1536, 576}, {576, 1536}};
static cis2_pmat W[NL][7], HEAD;

/* The context every call runs on (kernels.h): its kernel and pool change
 * between measurements. */
static cis2_ctx X;

static void use_threads(int n)
{
    cis2_error err = {0};
    cis2_pool_destroy(X.pool);
    X.pool = NULL;
    if (cis2_pool_create(&X.pool, n, &err)) fprintf(stderr, "threads %d: %s\n", n, err.msg);
}

static void use_kernel(const char *name)
{
    cis2_error err = {0};
    if (cis2_kernel_find(name, &X.kern, &err)) fprintf(stderr, "%s\n", err.msg);
}

static double token(float **x, float **y, size_t npos)
{
    double t0 = now();
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < 7; k++) cis2_matmul(&X, &W[l][k], x[k], npos, y[k]);
    cis2_matmul(&X, &HEAD, x[0], npos, y[7]);
    return now() - t0;
}

int main(int argc, char **argv)
{
    cis2_error err = {0};
    if (cis2_fpenv_pin(&err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    int maxt = argc > 1 ? atoi(argv[1]) : 2;
    uint64_t s = 88172645463325252ull;
    size_t total = 0;
    /* random bf16 in a sane range: sign, exponent 0x70..0x8F, random mantissa */
    size_t maxw = 49152 * 576;
    uint16_t *src = malloc(maxw * 2);
    for (size_t k = 0; k < maxw; k++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        src[k] = (uint16_t)((s & 0x8000) | (0x70 + (s >> 20) % 32) << 7 | ((s >> 32) & 0x7F));
    }
    X = cis2_ctx_solo();
    use_threads(maxt);
    double t0 = now();
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < 7; k++) {
            cis2_pmat_pack(&X, &W[l][k], CIS2_W_BF16, (const uint8_t *)src, SHAPES[k][0], SHAPES[k][1], &err);
            total += cis2_pmat_bytes(&W[l][k]);
        }
    cis2_pmat_pack(&X, &HEAD, CIS2_W_BF16, (const uint8_t *)src, 49152, 576, &err);
    total += cis2_pmat_bytes(&HEAD);
    double tpack = now() - t0;
    printf("packed %.1f MB of bf16 weights (%zu weights) in %.3f s with %d threads\n", total / 1e6,
           total / 2, tpack, maxt);

    size_t maxpos = 16;
    float *x[7], *y[8];
    for (int k = 0; k < 7; k++) {
        x[k] = malloc(maxpos * 1536 * 4);
        for (size_t i = 0; i < maxpos * 1536; i++) x[k][i] = (float)((i * 37 + k) % 101) / 50.0f - 1.0f;
        y[k] = malloc(maxpos * 1536 * 4);
    }
    y[7] = malloc(maxpos * 49152 * 4);

    double bw[65] = {0};
    for (int t = 1; t <= maxt; t++) {
        use_threads(t);
        bw[t] = stream_gbs(&X, total, t, 8);
        printf("streaming read, %d thread(s), %.0f MB: %.1f GB/s\n", t, total / 1e6, bw[t]);
    }

    use_kernel("scalar");
    use_threads(1);
    double tscalar = token(x, y, 1);
    printf("\n%-7s thr npos  ms/call  ms/token   GB/s  x-bound  x-scalar\n", "kernel");
    printf("%-7s %3d %4d %8.1f %9.2f %6.1f %8.2f %9.1f\n", "scalar", 1, 1, tscalar * 1e3, tscalar * 1e3,
           total / tscalar / 1e9, tscalar / (total / (bw[1] * 1e9)), 1.0);
    const char *ks[] = {"avx2", "avx512", "neon"};
    for (int v = 0; v < 3; v++) {
        if (!cis2_kernel_available(ks[v])) continue;
        use_kernel(ks[v]);
        for (int t = 1; t <= maxt; t++) {
            use_threads(t);
            for (size_t npos = 1; npos <= 16; npos += 15) {
                double best = 1e9;
                for (int rep = 0; rep < (npos == 1 ? 10 : 4); rep++) {
                    double tt = token(x, y, npos);
                    if (tt < best) best = tt;
                }
                double per = best / npos;
                printf("%-7s %3d %4zu %8.1f %9.2f %6.1f %8.2f %9.1f\n", ks[v], t, npos, best * 1e3, per * 1e3,
                       total / best / 1e9, best / (total / (bw[t] * 1e9)), tscalar / per);
            }
        }
    }
    printf("\n(ms/call: one pass over all weights with npos positions; GB/s: weight bytes per pass /\n"
           " time; x-bound: time / (weight bytes / streaming read GB/s, same thread count);\n"
           " x-scalar: per-token speedup over the scalar kernel, 1 thread, npos 1)\n");
    return 0;
}

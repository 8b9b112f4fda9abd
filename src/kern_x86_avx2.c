/*
 * kern_x86_avx2.c - the AVX2 variant of the matrix kernel contract
 * (kernels.h; spec §4.1, §5.1, §5.2).  Compiled with -mavx2 only (never
 * -mfma); called only after a CPUID check.
 *
 * A 16-row group is two ymm (rows 0-7, 8-15); lane j of each accumulates
 * its own row with one separate multiply (vmulps) and one separate add
 * (vaddps) per element in index order, exactly §5.1.  Independent
 * accumulators hide the add latency: 4 groups at npos == 1, or one group
 * times up to 6 positions sharing each widened weight vector (12
 * accumulators, 2 weight halves and a broadcast: 15 of the 16 ymm; a
 * multiply-add costs 2 + 2/P instructions with P positions).  Each weight
 * stream is prefetched PF_COLS columns ahead.  bf16 is widened exactly
 * in-register: zero-extend u16 -> u32, shift left 16 (§4.1).
 */
#include "kernels.h"

#include <immintrin.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))
#ifndef PF_COLS
#define PF_COLS 32 /* columns ahead in each weight stream (never faults) */
#endif

AI __m256 load_w(const void *base, size_t k, int bf)
{
    if (bf) {
        __m128i h = _mm_load_si128((const __m128i *)((const uint16_t *)base + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); /* §4.1 */
    }
    return _mm256_load_ps((const float *)base + k);
}

AI void store_rows(float *dst, size_t nv, __m256 lo, __m256 hi)
{
    if (nv == CIS2_KG) {
        _mm256_storeu_ps(dst, lo);
        _mm256_storeu_ps(dst + 8, hi);
    } else {
        float t[CIS2_KG];
        _mm256_storeu_ps(t, lo);
        _mm256_storeu_ps(t + 8, hi);
        memcpy(dst, t, nv * sizeof(float));
    }
}

/* Groups g..g+G-1 (all exist), positions p..p+P-1; G*P <= 6. */
AI void block(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int G, int P, int bf)
{
    size_t cols = w->cols, rows = w->rows, gs = cols * CIS2_KG;
    const void *base = w->data;
    const float *xp = x + p * cols;
    __m256 acc[4][6][2];
#pragma GCC unroll 6
    for (int a = 0; a < G; a++)
#pragma GCC unroll 6
        for (int b = 0; b < P; b++) acc[a][b][0] = acc[a][b][1] = _mm256_setzero_ps();
    size_t k0 = g * gs;
    for (size_t i = 0; i < cols; i++) {
        __m256 wv[4][2];
#pragma GCC unroll 6
        for (int a = 0; a < G; a++) {
            _mm_prefetch((const char *)base + (k0 + a * gs + (i + PF_COLS) * CIS2_KG) * (bf ? 2 : 4), _MM_HINT_T0);
            wv[a][0] = load_w(base, k0 + a * gs + i * CIS2_KG, bf);
            wv[a][1] = load_w(base, k0 + a * gs + i * CIS2_KG + 8, bf);
        }
#pragma GCC unroll 6
        for (int b = 0; b < P; b++) {
            __m256 xb = _mm256_broadcast_ss(xp + b * cols + i);
#pragma GCC unroll 6
            for (int a = 0; a < G; a++) {
                __m256 p0 = _mm256_mul_ps(wv[a][0], xb); /* §5.1 separate multiply */
                __m256 p1 = _mm256_mul_ps(wv[a][1], xb);
                acc[a][b][0] = _mm256_add_ps(acc[a][b][0], p0); /* §5.1 separate add */
                acc[a][b][1] = _mm256_add_ps(acc[a][b][1], p1);
            }
        }
    }
#pragma GCC unroll 6
    for (int a = 0; a < G; a++) {
        size_t o = (g + a) * CIS2_KG;
        size_t nv = rows - o < CIS2_KG ? rows - o : CIS2_KG;
#pragma GCC unroll 6
        for (int b = 0; b < P; b++) store_rows(y + (p + b) * rows + o, nv, acc[a][b][0], acc[a][b][1]);
    }
}

#define BLOCKS(bf)                                                                       \
    static void blk4_##bf(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p) \
    {                                                                                    \
        block(w, x, y, g, p, 4, 1, bf);                                                  \
    }                                                                                    \
    static void blk1_##bf(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P) \
    {                                                                                    \
        switch (P) {                                                                     \
        case 1: block(w, x, y, g, p, 1, 1, bf); break;                                   \
        case 2: block(w, x, y, g, p, 1, 2, bf); break;                                   \
        case 3: block(w, x, y, g, p, 1, 3, bf); break;                                   \
        case 4: block(w, x, y, g, p, 1, 4, bf); break;                                   \
        case 5: block(w, x, y, g, p, 1, 5, bf); break;                                   \
        default: block(w, x, y, g, p, 1, 6, bf); break;                                  \
        }                                                                                \
    }
BLOCKS(0)
BLOCKS(1)

void cis2_kern_avx2(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0,
                    size_t g1)
{
    int bf = w->type == CIS2_W_BF16;
    size_t g = g0;
    if (npos == 1)
        for (; g + 4 <= g1; g += 4) {
            if (bf) blk4_1(w, x, y, g, 0); else blk4_0(w, x, y, g, 0);
        }
    for (; g < g1; g++) /* one group's weights stay in L1/L2 across position blocks */
        for (size_t p = 0; p < npos; p += 6) {
            int P = npos - p < 6 ? (int)(npos - p) : 6;
            if (bf) blk1_1(w, x, y, g, p, P); else blk1_0(w, x, y, g, p, P);
        }
}

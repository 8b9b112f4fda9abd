/*
 * kern_x86_avx512.c - the AVX-512 variant of the matrix kernel contract
 * (kernels.h; spec §4.1, §5.1, §5.2).  Compiled with -mavx512f -mavx512bw
 * -mavx512vl -mavx2 only (never -mfma); called only after a CPUID check.
 *
 * One zmm holds one 16-row group (CIS2_KG == 16 lanes): lane j accumulates
 * row g*16+j with one separate multiply (vmulps) and one separate add
 * (vaddps) per element in index order, exactly §5.1.  Independent
 * accumulators hide the add latency: G groups side by side, and P
 * positions sharing each widened weight vector (prefill/batches).
 * bf16 is widened exactly in-register: zero-extend u16 -> u32, shift 16.
 */
#include "kernels.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))
#ifndef PF_COLS
#define PF_COLS 32
#endif

AI __m512 load_w(const void *base, size_t k, int bf)
{
    if (bf) {
        __m256i h = _mm256_load_si256((const __m256i *)((const uint16_t *)base + k));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* §4.1 */
    }
    return _mm512_load_ps((const float *)base + k);
}

/* Groups g..g+G-1 (all exist), positions p..p+P-1. */
AI void block(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int G, int P, int bf)
{
    size_t cols = w->cols, rows = w->rows, gs = cols * CIS2_KG;
    const void *base = w->data;
    const float *xp = x + p * cols;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int a = 0; a < G; a++)
#pragma GCC unroll 4
        for (int b = 0; b < P; b++) acc[a][b] = _mm512_setzero_ps();
    size_t k0 = g * gs;
    for (size_t i = 0; i < cols; i++) {
        __m512 wv[4];
#pragma GCC unroll 4
        for (int a = 0; a < G; a++) {
            if (P == 1) /* memory-bound: fetch ahead in each of the G streams (never faults) */
                _mm_prefetch((const char *)base + (k0 + a * gs + (i + PF_COLS) * CIS2_KG) * (bf ? 2 : 4),
                             _MM_HINT_T0);
            wv[a] = load_w(base, k0 + a * gs + i * CIS2_KG, bf);
        }
#pragma GCC unroll 4
        for (int b = 0; b < P; b++) {
            __m512 xb = _mm512_set1_ps(xp[b * cols + i]);
#pragma GCC unroll 4
            for (int a = 0; a < G; a++) {
                __m512 prod = _mm512_mul_ps(wv[a], xb); /* §5.1 separate multiply */
                acc[a][b] = _mm512_add_ps(acc[a][b], prod); /* §5.1 separate add */
            }
        }
    }
#pragma GCC unroll 4
    for (int a = 0; a < G; a++) {
        size_t o = (g + a) * CIS2_KG;
        size_t nv = rows - o < CIS2_KG ? rows - o : CIS2_KG;
        __mmask16 mk = (__mmask16)((1u << nv) - 1u);
#pragma GCC unroll 4
        for (int b = 0; b < P; b++) _mm512_mask_storeu_ps(y + (p + b) * rows + o, mk, acc[a][b]);
    }
}

#define BLOCKS(bf)                                                                       \
    static void blk4_##bf(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P) \
    {                                                                                    \
        switch (P) {                                                                     \
        case 1: block(w, x, y, g, p, 4, 1, bf); break;                                   \
        case 2: block(w, x, y, g, p, 4, 2, bf); break;                                   \
        case 3: block(w, x, y, g, p, 4, 3, bf); break;                                   \
        default: block(w, x, y, g, p, 4, 4, bf); break;                                  \
        }                                                                                \
    }                                                                                    \
    static void blk1_##bf(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P) \
    {                                                                                    \
        switch (P) {                                                                     \
        case 1: block(w, x, y, g, p, 1, 1, bf); break;                                   \
        case 2: block(w, x, y, g, p, 1, 2, bf); break;                                   \
        case 3: block(w, x, y, g, p, 1, 3, bf); break;                                   \
        default: block(w, x, y, g, p, 1, 4, bf); break;                                  \
        }                                                                                \
    }
BLOCKS(0)
BLOCKS(1)

void cis2_kern_avx512(const cis2_pmat *w, const float *x, size_t npos, float *y, size_t g0, size_t g1)
{
    int bf = w->type == CIS2_W_BF16;
    size_t g = g0;
    for (; g + 4 <= g1; g += 4) /* the 4 groups' weights stay in L1/L2 across position blocks */
        for (size_t p = 0; p < npos; p += 4) {
            int P = npos - p < 4 ? (int)(npos - p) : 4;
            if (bf) blk4_1(w, x, y, g, p, P); else blk4_0(w, x, y, g, p, P);
        }
    for (; g < g1; g++)
        for (size_t p = 0; p < npos; p += 4) {
            int P = npos - p < 4 ? (int)(npos - p) : 4;
            if (bf) blk1_1(w, x, y, g, p, P); else blk1_0(w, x, y, g, p, P);
        }
}

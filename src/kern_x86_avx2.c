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
 * in-register: zero-extend u16 -> u32, shift left 16 (§4.1).  Also the
 * AVX2 attention halves (§9.2 scores, §9.4 V-mix; bottom of the file).
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

/* ---- attention (§9.2, §9.4) for the G query heads of one KV head ----
 * Same lanes as the generic versions (pmath.c) and the AVX-512 ones: a
 * score's lane is one key of a 16-key block, summed over d in order, then
 * scaled; a V-mix lane is one dim, summed over positions in order.
 * Register blocks of up to 3 heads x 2 key blocks (scores) or 3 heads x
 * 2 sixteen-dim chunks (V-mix): 12 accumulators, each key or value vector
 * loaded once per step for all the heads.  V-mix dims past the last whole
 * chunk run one at a time, as the generic version runs them. */

AI void scores_blk(const float *q, const float *kt, size_t len, size_t hd, float scale, float *s, size_t h0,
                   size_t b0, int NH, int NB)
{
    __m256 acc[3][2][2];
#pragma GCC unroll 3
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) acc[a][b][0] = acc[a][b][1] = _mm256_setzero_ps();
    const float *k0 = kt + b0 * 16 * hd;
    for (size_t d = 0; d < hd; d++) {
#pragma GCC unroll 3
        for (int a = 0; a < NH; a++) {
            __m256 qa = _mm256_broadcast_ss(q + (h0 + (size_t)a) * hd + d);
#pragma GCC unroll 2
            for (int b = 0; b < NB; b++) {
                const float *kd = k0 + (size_t)b * 16 * hd + d * 16;
                acc[a][b][0] = _mm256_add_ps(acc[a][b][0], _mm256_mul_ps(qa, _mm256_loadu_ps(kd))); /* §5.1 */
                acc[a][b][1] = _mm256_add_ps(acc[a][b][1], _mm256_mul_ps(qa, _mm256_loadu_ps(kd + 8)));
            }
        }
    }
    __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 2
    for (int b = 0; b < NB; b++) {
        size_t j0 = (b0 + (size_t)b) * 16, n = len - j0 < 16 ? len - j0 : 16;
#pragma GCC unroll 3
        for (int a = 0; a < NH; a++) {
            float *dst = s + (h0 + (size_t)a) * len + j0;
            __m256 lo = _mm256_mul_ps(acc[a][b][0], sc), hi = _mm256_mul_ps(acc[a][b][1], sc); /* §9.2 */
            store_rows(dst, n, lo, hi);
        }
    }
}

AI void vmix_blk(const float *s, const float *v, size_t v_stride, size_t len, size_t hd, float *out, size_t h0,
                 size_t c0, int NH, int NC)
{
    __m256 acc[3][2][2];
#pragma GCC unroll 3
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 2
        for (int c = 0; c < NC; c++) acc[a][c][0] = acc[a][c][1] = _mm256_setzero_ps();
    for (size_t j = 0; j < len; j++) {
        const float *vj = v + j * v_stride + c0 * 16;
#pragma GCC unroll 3
        for (int a = 0; a < NH; a++) {
            __m256 sa = _mm256_broadcast_ss(s + (h0 + (size_t)a) * len + j);
#pragma GCC unroll 2
            for (int c = 0; c < NC; c++) {
                acc[a][c][0] = _mm256_add_ps(acc[a][c][0], _mm256_mul_ps(sa, _mm256_loadu_ps(vj + c * 16))); /* §9.4 */
                acc[a][c][1] = _mm256_add_ps(acc[a][c][1], _mm256_mul_ps(sa, _mm256_loadu_ps(vj + c * 16 + 8)));
            }
        }
    }
#pragma GCC unroll 3
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 2
        for (int c = 0; c < NC; c++) store_rows(out + (h0 + (size_t)a) * hd + (c0 + (size_t)c) * 16, 16,
                                                acc[a][c][0], acc[a][c][1]);
}

/* F(args..., n1, n2) with n1 in 1..3, n2 in 1..2 as compile-time constants. */
#define C2(F, NH, N2, ...)                                                                              \
    if ((N2) == 1) F(__VA_ARGS__, NH, 1); else F(__VA_ARGS__, NH, 2);
#define C32(F, N1, N2, ...)                                                                             \
    switch (N1) {                                                                                       \
    case 1: C2(F, 1, N2, __VA_ARGS__) break;                                                            \
    case 2: C2(F, 2, N2, __VA_ARGS__) break;                                                            \
    default: C2(F, 3, N2, __VA_ARGS__) break;                                                           \
    }

void cis2_attn_scores_avx2(const float *q, size_t G, const float *kt, size_t len, size_t hd, float scale, float *s)
{
    size_t nblk = (len + 15) / 16;
    for (size_t h0 = 0; h0 < G; h0 += 3)
        for (size_t b0 = 0; b0 < nblk; b0 += 2) {
            int n1 = G - h0 < 3 ? (int)(G - h0) : 3, n2 = nblk - b0 < 2 ? (int)(nblk - b0) : 2;
            C32(scores_blk, n1, n2, q, kt, len, hd, scale, s, h0, b0)
        }
}

void cis2_attn_vmix_avx2(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t hd,
                         float *out)
{
    size_t nc = hd / 16; /* whole 16-dim chunks; the rest below */
    for (size_t h0 = 0; h0 < G; h0 += 3)
        for (size_t c0 = 0; c0 < nc; c0 += 2) {
            int n1 = G - h0 < 3 ? (int)(G - h0) : 3, n2 = nc - c0 < 2 ? (int)(nc - c0) : 2;
            C32(vmix_blk, n1, n2, s, v, v_stride, len, hd, out, h0, c0)
        }
    for (size_t h = 0; h < G; h++)
        for (size_t d = nc * 16; d < hd; d++) {
            float acc = 0.0f;
            for (size_t j = 0; j < len; j++) {
                float p = s[h * len + j] * v[j * v_stride + d]; /* §9.4 */
                acc = acc + p;
            }
            out[h * hd + d] = acc;
        }
}

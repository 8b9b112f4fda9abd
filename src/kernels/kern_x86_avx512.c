/*
 * kern_x86_avx512.c - the AVX-512 variant of the matrix kernel contract
 * (kernels.h; spec §4.1, §5.1, §5.2).  Compiled with -mavx512f -mavx512bw
 * -mavx512vl -mavx2 only (never -mfma); called only after a CPUID check.
 *
 * One zmm holds one 16-row group (CIS2_KG == 16 lanes): lane j accumulates
 * row g*16+j with one separate multiply (vmulps) and one separate add
 * (vaddps) per element in index order, exactly §5.1.  A register block is
 * G groups side by side times P positions sharing each widened weight
 * vector: per column it costs 2G widening uops and 2GP arithmetic uops for
 * GP multiply-adds, so the cost per multiply-add (2 + 2/P) falls with P
 * alone; G is only there to keep >= 8 independent add chains in flight
 * (4-cycle add latency, 2 ports).  Hence two paths:
 *
 *   wide   (from 4 positions, with xt): one group at a time, all
 *          positions of a block of 16 in accumulators.  The 16 positions'
 *          x values of a column are broadcast from one 64-byte line of the
 *          transposed copy xt (kernels.h), which cis2_matmul makes once per
 *          call with cis2_prep_avx512 (16x16 register transposes):
 *          broadcasting from 16 rows of x directly would need 16 pointer
 *          registers, and the compiler's spills cost more than the
 *          transpose.  The broadcasts ride in the multiplies' memory
 *          operands.  A group runs all its position blocks before the next
 *          group (wide_all), in ranges of TILE_COLS columns: the first
 *          block of a range widens the bf16 weights and also stores them
 *          in an f32 tile (32 KiB, in L1), the later blocks read the tile,
 *          so a 256-row prefill widens each weight once, not 16 times, and
 *          its column costs 2P arithmetic uops instead of 2P + 2; the
 *          weights come from memory once per call.  A row's partial sums
 *          cross a range edge through y (stored, reloaded: the same bits).
 *          A last block of 1..3 positions after others reads the tile too:
 *          its few add chains wait on the add latency, which still costs
 *          less than reading the weights again for the narrow path.
 *   narrow (1..7 positions without xt, or 1..3 in all): 4 groups (P < 4)
 *          or 2 groups (P = 4..7) from x as given.
 *
 * MXFP4 (kernels.h, at cis2_wtype): AVX2's MXFP4 loops (the scalar
 * reference's bits, run and tested on AVX2 CPUs).  A wide path that widens
 * each range into the tile and sums from it in zmm registers was written
 * (git history: "MXFP4 in the AVX-512 and NEON variants") but has not yet
 * run on an AVX-512 CPU, so it is not used: bits first.
 *
 * Memory: the weight streams are prefetched ahead (PF_COLS columns in each
 * of the G streams of the narrow path; PF_WIDE columns in the wide path's
 * single stream, which runs on into the next group).
 * bf16 is widened exactly in-register: zero-extend u16 -> u32, shift 16.
 * Also the AVX-512 attention halves and the 16-lane §6.2 exp and §6.4
 * SiLU and §11.2 argmax (pmath_lanes.h's one definition at this width;
 * bottom of the file).
 */
#include "variant.h"

#include <immintrin.h>

#define AI static inline __attribute__((always_inline))
#ifndef PF_COLS
#define PF_COLS 32
#endif
#ifndef PF_WIDE
#define PF_WIDE 192
#endif
#define WIDE 16 /* positions per wide block */

AI __m512 load_w(const void *base, size_t k, int bf)
{
    if (bf) {
        __m256i h = _mm256_load_si256((const __m256i *)((const uint16_t *)base + k));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* §4.1 */
    }
    return _mm512_load_ps((const float *)base + k);
}

AI __m512 load_group(const cis2_pmat *w, const float *y, size_t g, size_t p, int b)
{
    size_t o = g * CIS2_KG, nv = w->rows - o < CIS2_KG ? w->rows - o : CIS2_KG;
    return _mm512_maskz_loadu_ps((__mmask16)((1u << nv) - 1u), y + (p + (size_t)b) * w->rows + o);
}

AI void store_group(const cis2_pmat *w, float *y, size_t g, size_t p, int b, __m512 v)
{
    size_t o = g * CIS2_KG, nv = w->rows - o < CIS2_KG ? w->rows - o : CIS2_KG;
    _mm512_mask_storeu_ps(y + (p + (size_t)b) * w->rows + o, (__mmask16)((1u << nv) - 1u), v);
}

/* ---- narrow path: groups g..g+G-1 (all exist), positions p..p+P-1 ---- */
AI void block(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int G, int P, int bf)
{
    size_t cols = w->cols, gs = cols * CIS2_KG, es = bf ? 2 : 4;
    const char *base = w->data;
    const float *xp = x + p * cols;
    __m512 acc[4][8];
#pragma GCC unroll 8
    for (int a = 0; a < G; a++)
#pragma GCC unroll 8
        for (int b = 0; b < P; b++) acc[a][b] = _mm512_setzero_ps();
    size_t k0 = g * gs;
    for (size_t i = 0; i < cols; i++) {
        __m512 wv[4];
#pragma GCC unroll 8
        for (int a = 0; a < G; a++) {
            _mm_prefetch(base + (k0 + a * gs + (i + PF_COLS) * CIS2_KG) * es, _MM_HINT_T0); /* never faults */
            wv[a] = load_w(base, k0 + a * gs + i * CIS2_KG, bf);
        }
#pragma GCC unroll 8
        for (int b = 0; b < P; b++) {
            __m512 xb = _mm512_set1_ps(xp[b * cols + i]);
#pragma GCC unroll 8
            for (int a = 0; a < G; a++) {
                __m512 prod = _mm512_mul_ps(wv[a], xb); /* §5.1 separate multiply */
                acc[a][b] = _mm512_add_ps(acc[a][b], prod); /* §5.1 separate add */
            }
        }
    }
#pragma GCC unroll 8
    for (int a = 0; a < G; a++)
#pragma GCC unroll 8
        for (int b = 0; b < P; b++) store_group(w, y, g + a, p, b, acc[a][b]);
}

#define C(G, P) case P: block(w, x, y, g, p, G, P, BF); break;
#define NARROW(BF)                                                                                   \
    static void g1_##BF(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P)    \
    {                                                                                                \
        switch (P) { C(1, 1) C(1, 2) C(1, 3) C(1, 4) C(1, 5) C(1, 6) default: C(1, 7) }              \
    }                                                                                                \
    static void g2_##BF(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P)    \
    {                                                                                                \
        switch (P) { C(2, 4) C(2, 5) C(2, 6) default: C(2, 7) }                                      \
    }                                                                                                \
    static void g4_##BF(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P)    \
    {                                                                                                \
        switch (P) { C(4, 1) C(4, 2) default: C(4, 3) }                                              \
    }
#define BF 0
NARROW(0)
#undef BF
#define BF 1
NARROW(1)
#undef BF
#undef C

static void narrow(const cis2_pmat *w, const float *x, float *y, size_t g0, size_t g1, size_t p, int P)
{
    int bf = w->type == CIS2_W_BF16;
    size_t g = g0;
    if (P < 4)
        for (; g + 4 <= g1; g += 4) {
            if (bf) g4_1(w, x, y, g, p, P); else g4_0(w, x, y, g, p, P);
        }
    else
        for (; g + 2 <= g1; g += 2) {
            if (bf) g2_1(w, x, y, g, p, P); else g2_0(w, x, y, g, p, P);
        }
    for (; g < g1; g++) {
        if (bf) g1_1(w, x, y, g, p, P); else g1_0(w, x, y, g, p, P);
    }
}

/* ---- wide path ---- */

/* In-register transpose: r[c] becomes column c of the 16x16 tile. */
AI void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int k = 0; k < 8; k++) { /* lane L of t[2k], t[2k+1]: rows 2k, 2k+1 interleaved */
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) { /* lane L of u[4k+j]: rows 4k..4k+3 at column 4L+j */
        u[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
        u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) { /* column 4L+j = lane L of u[j], u[4+j], u[8+j], u[12+j] */
        __m512 s0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), s1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
        __m512 s2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), s3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
        r[4 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
    }
}

/* xt[i*16 + b] = x[b*cols + i] for b < P (other lanes: 0). */
static void transpose_x(const float *x, size_t cols, int P, float *xt)
{
    size_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        __m512 r[16];
        for (int b = 0; b < 16; b++) r[b] = b < P ? _mm512_loadu_ps(x + (size_t)b * cols + i) : _mm512_setzero_ps();
        transpose16(r);
        for (int c = 0; c < 16; c++) _mm512_store_ps(xt + (i + (size_t)c) * 16, r[c]);
    }
    for (; i < cols; i++)
        for (int b = 0; b < 16; b++) xt[i * 16 + (size_t)b] = b < P ? x[(size_t)b * cols + i] : 0.0f;
}

/* Group g, positions p..p+P-1, columns c0..c1-1, x values from xt.
 * TILE 1: widen the weights and also keep them in tile (f32); TILE 2: read
 * them from tile; TILE 0: widen only (the call's one position block).
 * From column c0 > 0 on the sums continue from y. */
AI void wide_block(const cis2_pmat *w, const float *xt, float *y, size_t g, size_t p, int P, int bf, size_t c0,
                   size_t c1, float *tile, int TILE)
{
    size_t cols = w->cols, es = bf ? 2 : 4;
    const char *base = w->data;
    __m512 acc[WIDE];
    if (c0) { /* a later column range: the sums so far are in y */
#pragma GCC unroll 16
        for (int b = 0; b < P; b++) acc[b] = load_group(w, y, g, p, b);
    } else {
#pragma GCC unroll 16
        for (int b = 0; b < P; b++) acc[b] = _mm512_setzero_ps();
    }
    size_t k0 = g * cols * CIS2_KG;
    for (size_t i = c0; i < c1; i++) {
        __m512 wv;
        if (TILE == 2) wv = _mm512_load_ps(tile + (i - c0) * CIS2_KG);
        else {
            _mm_prefetch(base + (k0 + (i + PF_WIDE) * CIS2_KG) * es, _MM_HINT_T0); /* never faults */
            wv = load_w(base, k0 + i * CIS2_KG, bf);
            if (TILE == 1) _mm512_store_ps(tile + (i - c0) * CIS2_KG, wv);
        }
#pragma GCC unroll 16
        for (int b = 0; b < P; b++) {
            __m512 prod = _mm512_mul_ps(wv, _mm512_set1_ps(xt[i * 16 + (size_t)b])); /* §5.1 separate multiply */
            acc[b] = _mm512_add_ps(acc[b], prod); /* §5.1 separate add */
        }
    }
#pragma GCC unroll 16
    for (int b = 0; b < P; b++) store_group(w, y, g, p, b, acc[b]);
}

#define TILE_COLS 512 /* 32 KiB of f32 weights: L1 */

#define C(P, T) case P: wide_block(w, xt, y, g, p, P, BF, c0, c1, tile, T); break;
#define CP(T) switch (P) { C(1, T) C(2, T) C(3, T) C(4, T) C(5, T) C(6, T) C(7, T) C(8, T) C(9, T) C(10, T) \
        C(11, T) C(12, T) C(13, T) C(14, T) C(15, T) default: C(16, T) }
#define WIDEFN(BF)                                                                                     \
    static void wide_##BF(const cis2_pmat *w, const float *xt, float *y, size_t g, size_t p, int P,     \
                          size_t c0, size_t c1, float *tile, int T)                                    \
    {                                                                                                  \
        if (T == 1) CP(1) else if (T == 2) CP(2) else CP(0)                                            \
    }
#define BF 0
WIDEFN(0)
#undef BF
#define BF 1
WIDEFN(1)
#undef BF
#undef C
#undef CP

/* Groups g0..g1 over positions 0..pw-1 (pw >= 4) in wide blocks of 16:
 * group by group, and within a group by ranges of TILE_COLS columns,
 * every position block of the range in turn; the first widens the weights
 * into the tile, the others read them there. */
static void wide_all(const cis2_pmat *w, const float *xt, float *y, size_t g0, size_t g1, size_t pw)
{
    float tile[TILE_COLS * CIS2_KG] __attribute__((aligned(64)));
    int bf = w->type == CIS2_W_BF16;
    size_t cols = w->cols;
    for (size_t g = g0; g < g1; g++)
        for (size_t c0 = 0; c0 < cols; c0 += TILE_COLS) {
            size_t c1 = cols - c0 < TILE_COLS ? cols : c0 + TILE_COLS;
            for (size_t p = 0; p < pw; p += WIDE) {
                int P = pw - p < WIDE ? (int)(pw - p) : WIDE;
                int T = pw <= WIDE ? 0 : p == 0 ? 1 : 2;
                if (bf) wide_1(w, xt + p * cols, y, g, p, P, c0, c1, tile, T);
                else wide_0(w, xt + p * cols, y, g, p, P, c0, c1, tile, T);
            }
        }
}

void cis2_prep_avx512(const float *x, size_t npos, size_t cols, float *xt)
{
    for (size_t p = 0; p < npos; p += WIDE)
        transpose_x(x + p * cols, cols, npos - p < WIDE ? (int)(npos - p) : WIDE, xt + p * cols);
}

void cis2_kern_avx512(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0,
                      size_t g1)
{
    if (w->type == CIS2_W_MXFP4) { /* AVX2's MXFP4 loops: a 512-bit path has not yet run on an AVX-512 CPU */
        cis2_mx_kern_avx2(w, x, npos, y, g0, g1);
        return;
    }
    size_t p = 0;
    if (xt && npos >= 4) { /* every position on the wide path */
        wide_all(w, xt, y, g0, g1, npos);
        p = npos;
    }
    for (; p < npos; p += 7) /* the narrow path takes at most 7 positions */
        narrow(w, x, y, g0, g1, p, npos - p < 7 ? (int)(npos - p) : 7);
}

/* ---- attention (§9.2, §9.4) for the G query heads of one KV head ----
 * Same lanes as the generic versions (pmath.c): a score's lane is one key,
 * summed over d in order; a V-mix lane is one dim, summed over positions in
 * order.  Register blocks of up to 4 heads x 4 key blocks (scores) or 4
 * heads x 4 dim chunks (V-mix) keep 16 add chains in flight and load each
 * key or value vector once for all the heads. */

AI void scores_blk(const float *q, const float *kt, size_t len, size_t hd, float scale, float *s, size_t h0,
                   size_t b0, int NH, int NB)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) acc[a][b] = _mm512_setzero_ps();
    const float *k0 = kt + b0 * 16 * hd;
    for (size_t d = 0; d < hd; d++) {
        __m512 kv[4];
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) kv[b] = _mm512_loadu_ps(k0 + (size_t)b * 16 * hd + d * 16);
#pragma GCC unroll 4
        for (int a = 0; a < NH; a++) {
            __m512 qa = _mm512_set1_ps(q[(h0 + (size_t)a) * hd + d]);
#pragma GCC unroll 4
            for (int b = 0; b < NB; b++) acc[a][b] = _mm512_add_ps(acc[a][b], _mm512_mul_ps(qa, kv[b])); /* §5.1 */
        }
    }
    __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++) {
        size_t j0 = (b0 + (size_t)b) * 16, n = len - j0 < 16 ? len - j0 : 16;
        __mmask16 mk = (__mmask16)((1u << n) - 1u);
#pragma GCC unroll 4
        for (int a = 0; a < NH; a++)
            _mm512_mask_storeu_ps(s + (h0 + (size_t)a) * len + j0, mk, _mm512_mul_ps(acc[a][b], sc)); /* §9.2 */
    }
}

AI void vmix_blk(const float *s, const float *v, size_t v_stride, size_t len, size_t hd, float *out, size_t h0,
                 size_t c0, int NH, int NC)
{
    __m512 acc[4][4];
    __mmask16 mk[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        size_t d0 = (c0 + (size_t)c) * 16, n = hd - d0 < 16 ? hd - d0 : 16;
        mk[c] = (__mmask16)((1u << n) - 1u);
    }
#pragma GCC unroll 4
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) acc[a][c] = _mm512_setzero_ps();
    for (size_t j = 0; j < len; j++) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) vv[c] = _mm512_maskz_loadu_ps(mk[c], v + j * v_stride + (c0 + (size_t)c) * 16);
#pragma GCC unroll 4
        for (int a = 0; a < NH; a++) {
            __m512 sa = _mm512_set1_ps(s[(h0 + (size_t)a) * len + j]);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) acc[a][c] = _mm512_add_ps(acc[a][c], _mm512_mul_ps(sa, vv[c])); /* §9.4 */
        }
    }
#pragma GCC unroll 4
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++)
            _mm512_mask_storeu_ps(out + (h0 + (size_t)a) * hd + (c0 + (size_t)c) * 16, mk[c], acc[a][c]);
}

/* F(args..., n1, n2) with n1, n2 in 1..4 as compile-time constants. */
#define C4(F, NH, N2, ...)                                                                              \
    switch (N2) {                                                                                       \
    case 1: F(__VA_ARGS__, NH, 1); break;                                                               \
    case 2: F(__VA_ARGS__, NH, 2); break;                                                               \
    case 3: F(__VA_ARGS__, NH, 3); break;                                                               \
    default: F(__VA_ARGS__, NH, 4); break;                                                              \
    }
#define C44(F, N1, N2, ...)                                                                             \
    switch (N1) {                                                                                       \
    case 1: C4(F, 1, N2, __VA_ARGS__) break;                                                            \
    case 2: C4(F, 2, N2, __VA_ARGS__) break;                                                            \
    case 3: C4(F, 3, N2, __VA_ARGS__) break;                                                            \
    default: C4(F, 4, N2, __VA_ARGS__) break;                                                           \
    }

void cis2_attn_scores_avx512(const float *q, size_t G, const float *kt, size_t len, size_t hd, float scale,
                             float *s)
{
    size_t nblk = (len + 15) / 16;
    for (size_t h0 = 0; h0 < G; h0 += 4)
        for (size_t b0 = 0; b0 < nblk; b0 += 4) {
            int n1 = G - h0 < 4 ? (int)(G - h0) : 4, n2 = nblk - b0 < 4 ? (int)(nblk - b0) : 4;
            C44(scores_blk, n1, n2, q, kt, len, hd, scale, s, h0, b0)
        }
}

void cis2_attn_vmix_avx512(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t hd,
                           float *out)
{
    size_t nc = (hd + 15) / 16;
    for (size_t h0 = 0; h0 < G; h0 += 4)
        for (size_t c0 = 0; c0 < nc; c0 += 4) {
            int n1 = G - h0 < 4 ? (int)(G - h0) : 4, n2 = nc - c0 < 4 ? (int)(nc - c0) : 4;
            C44(vmix_blk, n1, n2, s, v, v_stride, len, hd, out, h0, c0)
        }
}

/* ---- §6.2 exp, §6.4 SiLU, §M7.5 GELU and §11.2 argmax, 16 lanes (pmath_lanes.h), the rest by the
 * AVX2 8 (and pmath.c's 4) ---- */
#define LANES 16
#define LN(f) f##_v16
#include "pmath_lanes.h"

void cis2_exp_n_avx512(const float *x, float *out, size_t n) { exp_n_v16(x, out, n, cis2_exp_n_avx2); }

void cis2_silu_n_avx512(const float *x, float *out, size_t n) { silu_n_v16(x, out, n, cis2_silu_n_avx2); }

void cis2_gelu_n_avx512(const float *x, float *out, size_t n) { gelu_n_v16(x, out, n, cis2_gelu_n_avx2); }

size_t cis2_argmax_n_avx512(const float *v, size_t n) { return argmax_n_v16(v, n); } /* §11.2 */

/* The variant (variant.h): the wide path reads the transposed x that
 * kernels.c makes with cis2_prep_avx512.  It needs AVX2 too (the exp/SiLU
 * tails above). */
const struct cis2_variant cis2_variant_avx512 = {
    .name = "avx512",
    .cpu_needs = CIS2_CPU_AVX512F | CIS2_CPU_AVX512BW | CIS2_CPU_AVX512VL | CIS2_CPU_AVX2,
    .block = CIS2_BLOCK_SHAPE_DEFAULT,
    .matmul = cis2_kern_avx512,
    .prep = cis2_prep_avx512,
    .scores = cis2_attn_scores_avx512,
    .vmix = cis2_attn_vmix_avx512,
    .expn = cis2_exp_n_avx512,
    .silun = cis2_silu_n_avx512,
    .gelun = cis2_gelu_n_avx512,
    .argmax = cis2_argmax_n_avx512,
};

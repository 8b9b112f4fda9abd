/*
 * kern_neon.c - the NEON (Advanced SIMD) variant of the matrix kernel
 * contract (kernels.h; spec §4.1, §5.1, §5.2).  Built on aarch64 only; the
 * build has -ffp-contract=off, so vmulq/vaddq stay separate fmul/fadd
 * (never fmla: tools/check-no-fma checks the object).
 *
 * A 16-row group is four float32x4; lane j of each accumulates its own row
 * with one separate multiply and one separate add per element in index
 * order, exactly §5.1.  Independent accumulators hide the add latency: two
 * groups at npos == 1, or one group times 4 positions sharing each widened
 * weight vector.  bf16 is widened exactly: ushll by 16 (§4.1).  MXFP4
 * (kernels.h, at cis2_wtype) is widened in-register by table look-ups
 * (mx_pair, below).
 */
#include "variant.h"

#include <arm_neon.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

/* Rows 0..15 of column i of a group into w[0..3]. */
AI void load_w(const void *base, size_t k, int bf, float32x4_t w[4])
{
    if (bf) {
        const uint16_t *p = (const uint16_t *)base + k;
        uint16x8_t a = vld1q_u16(p), b = vld1q_u16(p + 8);
        w[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(a), 16)); /* §4.1 */
        w[1] = vreinterpretq_f32_u32(vshll_high_n_u16(a, 16));
        w[2] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(b), 16));
        w[3] = vreinterpretq_f32_u32(vshll_high_n_u16(b, 16));
    } else {
        const float *p = (const float *)base + k;
        w[0] = vld1q_f32(p); w[1] = vld1q_f32(p + 4); w[2] = vld1q_f32(p + 8); w[3] = vld1q_f32(p + 12);
    }
}

/* Groups g..g+G-1 (all exist), positions p..p+P-1; G*P <= 4. */
AI void block(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int G, int P, int bf)
{
    size_t cols = w->cols, rows = w->rows, gs = cols * CIS2_KG;
    const void *base = w->data;
    const float *xp = x + p * cols;
    float32x4_t acc[2][4][4];
#pragma GCC unroll 4
    for (int a = 0; a < G; a++)
#pragma GCC unroll 4
        for (int b = 0; b < P; b++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[a][b][q] = vdupq_n_f32(0.0f);
    size_t k0 = g * gs;
    for (size_t i = 0; i < cols; i++) {
        float32x4_t wv[2][4];
#pragma GCC unroll 4
        for (int a = 0; a < G; a++) load_w(base, k0 + a * gs + i * CIS2_KG, bf, wv[a]);
#pragma GCC unroll 4
        for (int b = 0; b < P; b++) {
            float32x4_t xb = vld1q_dup_f32(xp + b * cols + i);
#pragma GCC unroll 4
            for (int a = 0; a < G; a++)
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    float32x4_t prod = vmulq_f32(wv[a][q], xb);     /* §5.1 separate multiply */
                    acc[a][b][q] = vaddq_f32(acc[a][b][q], prod);  /* §5.1 separate add */
                }
        }
    }
#pragma GCC unroll 4
    for (int a = 0; a < G; a++) {
        size_t o = (g + a) * CIS2_KG;
        size_t nv = rows - o < CIS2_KG ? rows - o : CIS2_KG;
#pragma GCC unroll 4
        for (int b = 0; b < P; b++) {
            float *dst = y + (p + b) * rows + o;
            if (nv == CIS2_KG) {
                for (int q = 0; q < 4; q++) vst1q_f32(dst + 4 * q, acc[a][b][q]);
            } else {
                float t[CIS2_KG];
                for (int q = 0; q < 4; q++) vst1q_f32(t + 4 * q, acc[a][b][q]);
                memcpy(dst, t, nv * sizeof(float));
            }
        }
    }
}

#define BLOCKS(bf)                                                                       \
    static void blk2_##bf(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p) \
    {                                                                                    \
        block(w, x, y, g, p, 2, 1, bf);                                                  \
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

/* ---- MXFP4 (kernels.h, at cis2_wtype) ----
 * A column pair of a group is 16 bytes in the layout kernels.h gives: the
 * low nibbles are column 2j rows 0-3, 8-11 then column 2j+1 rows 0-3,
 * 8-11; the high nibbles the same for rows 4-7 and 12-15.  Two table
 * look-ups (tbl) per nibble vector give bits 24-31 and 16-23 of the f32
 * E2M1[code] (bits 0-15 are zero for every code), zipped into bf16-like
 * halfwords and widened by ushll #16 to the exact f32; then w = E2M1[code]
 * * P(s), the rule's one multiply, with P(s) the scale bytes widened and
 * shifted left 23.  From there §5.1's fmul and fadd per position, column
 * 2j before 2j+1.  One group times up to 4 positions a block. */

struct mx_const { uint8x16_t th, tl; };

AI struct mx_const mx_const(void)
{
    uint8_t th[16], tl[16];
    for (int c = 0; c < 16; c++) {
        uint32_t b;
        memcpy(&b, &cis2_e2m1[c], 4);
        th[c] = (uint8_t)(b >> 24);
        tl[c] = (uint8_t)(b >> 16);
    }
    struct mx_const k = {vld1q_u8(th), vld1q_u8(tl)};
    return k;
}

/* P(s) of rows 4q..4q+3, q = 0..3, from a tile's scale bytes. */
AI void mx_scales(const uint8_t *t, float32x4_t s[4])
{
    uint8x16_t b = vld1q_u8(t);
    uint16x8_t lo = vmovl_u8(vget_low_u8(b)), hi = vmovl_high_u8(b);
    s[0] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vget_low_u16(lo)), 23));
    s[1] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_high_u16(lo), 23));
    s[2] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vget_low_u16(hi)), 23));
    s[3] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_high_u16(hi), 23));
}

/* f32 E2M1 of halfwords' bits << 16: rows as the zip left them. */
#define MX_LO(h) vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16))
#define MX_HI(h) vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))

/* The column pair at q: w[0..3] column 2j rows 0-3, 4-7, 8-11, 12-15;
 * w[4..7] column 2j+1. */
AI void mx_pair(const uint8_t *q, const struct mx_const *k, const float32x4_t s[4], float32x4_t w[8])
{
    uint8x16_t v = vld1q_u8(q);
    uint8x16_t lo = vandq_u8(v, vdupq_n_u8(15)), hi = vshrq_n_u8(v, 4);
    uint8x16_t lh = vqtbl1q_u8(k->th, lo), ll = vqtbl1q_u8(k->tl, lo);
    uint8x16_t hh = vqtbl1q_u8(k->th, hi), hl = vqtbl1q_u8(k->tl, hi);
    uint16x8_t la = vreinterpretq_u16_u8(vzip1q_u8(ll, lh)); /* column 2j rows 0-3, 8-11 */
    uint16x8_t lb = vreinterpretq_u16_u8(vzip2q_u8(ll, lh)); /* column 2j+1 rows 0-3, 8-11 */
    uint16x8_t ha = vreinterpretq_u16_u8(vzip1q_u8(hl, hh)); /* column 2j rows 4-7, 12-15 */
    uint16x8_t hb = vreinterpretq_u16_u8(vzip2q_u8(hl, hh)); /* column 2j+1 rows 4-7, 12-15 */
    w[0] = vmulq_f32(MX_LO(la), s[0]); /* the rule's one multiply */
    w[1] = vmulq_f32(MX_LO(ha), s[1]);
    w[2] = vmulq_f32(MX_HI(la), s[2]);
    w[3] = vmulq_f32(MX_HI(ha), s[3]);
    w[4] = vmulq_f32(MX_LO(lb), s[0]);
    w[5] = vmulq_f32(MX_LO(hb), s[1]);
    w[6] = vmulq_f32(MX_HI(lb), s[2]);
    w[7] = vmulq_f32(MX_HI(hb), s[3]);
}
#undef MX_LO
#undef MX_HI

/* Group g x P positions (p..p+P-1, P <= 4). */
AI void mx_block(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P)
{
    size_t cols = w->cols, rows = w->rows, nb = cols / 32;
    const uint8_t *tl = cis2_mx_tile(w, g, 0);
    const float *xp = x + p * cols;
    struct mx_const kc = mx_const();
    float32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int b = 0; b < P; b++)
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) acc[b][q] = vdupq_n_f32(0.0f);
    for (size_t t = 0; t < nb; t++, tl += CIS2_MX_TILE) {
        float32x4_t s[4];
        mx_scales(tl, s);
        for (size_t j = 0; j < 16; j++) {
            float32x4_t wv[8];
            mx_pair(tl + 16 + j * 16, &kc, s, wv);
            const float *xi = xp + t * 32 + 2 * j;
#pragma GCC unroll 4
            for (int b = 0; b < P; b++) {
                float32x4_t x0 = vld1q_dup_f32(xi + b * cols), x1 = vld1q_dup_f32(xi + b * cols + 1);
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) acc[b][q] = vaddq_f32(acc[b][q], vmulq_f32(wv[q], x0)); /* §5.1: 2j */
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) acc[b][q] = vaddq_f32(acc[b][q], vmulq_f32(wv[4 + q], x1)); /* then 2j+1 */
            }
        }
    }
    size_t o = g * CIS2_KG, nv = rows - o < CIS2_KG ? rows - o : CIS2_KG;
#pragma GCC unroll 4
    for (int b = 0; b < P; b++) {
        float t[CIS2_KG];
        for (int q = 0; q < 4; q++) vst1q_f32(t + 4 * q, acc[b][q]);
        memcpy(y + (p + b) * rows + o, t, nv * sizeof(float));
    }
}

static void mx_kern(const cis2_pmat *w, const float *x, size_t npos, float *y, size_t g0, size_t g1)
{
    for (size_t g = g0; g < g1; g++)
        for (size_t p = 0; p < npos; p += 4) {
            switch (npos - p < 4 ? npos - p : 4) {
            case 1: mx_block(w, x, y, g, p, 1); break;
            case 2: mx_block(w, x, y, g, p, 2); break;
            case 3: mx_block(w, x, y, g, p, 3); break;
            default: mx_block(w, x, y, g, p, 4); break;
            }
        }
}

void cis2_kern_neon(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0,
                    size_t g1)
{
    if (w->type == CIS2_W_MXFP4) { mx_kern(w, x, npos, y, g0, g1); return; }
    int bf = w->type == CIS2_W_BF16;
    size_t g = g0;
    if (npos == 1)
        for (; g + 2 <= g1; g += 2) {
            if (bf) blk2_1(w, x, y, g, 0); else blk2_0(w, x, y, g, 0);
        }
    for (; g < g1; g++) /* one group's weights stay in L1/L2 across position blocks */
        for (size_t p = 0; p < npos; p += 4) {
            int P = npos - p < 4 ? (int)(npos - p) : 4;
            if (bf) blk1_1(w, x, y, g, p, P); else blk1_0(w, x, y, g, p, P);
        }
}

/* The variant (variant.h): Advanced SIMD is mandatory on aarch64, so any
 * CPU runs it; attention, exp, SiLU and argmax are the generic lanes. */
const struct cis2_variant cis2_variant_neon = {
    .name = "neon",
    .cpu_needs = 0, /* the rest NULL: the generic lanes */
    .block = CIS2_BLOCK_SHAPE_DEFAULT,
    .matmul = cis2_kern_neon,
};

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
 * weight vector.  bf16 is widened exactly: ushll by 16 (§4.1).
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

void cis2_kern_neon(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0,
                    size_t g1)
{
    if (w->type == CIS2_W_MXFP4) { cis2_kern_scalar(w, x, xt, npos, y, g0, g1); return; } /* for now */
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

/*
 * variant.h - one kernel variant, as its ISA file gives it to the
 * dispatch (internal to src/kernels.c and src/kernels/).
 *
 * Each ISA file (kern_x86_avx2.c, kern_x86_avx512.c, kern_neon.c) defines
 * its variant object beside its code, with designated initializers: its
 * name, what the CPU must have to run it, the register block shape the
 * pool's chunks must respect, and its functions (NULL: the generic code
 * of kernels.c / pmath.c, which gives the same bits).  kernels.c defines
 * the scalar reference's, lists every variant of the build (fastest first:
 * "auto" takes the first the CPU can run) and owns the loops around the
 * micro-kernels (splitting a matmul across the pool, the transposed copy
 * of x, softmax between the attention halves): they exist once, there.
 *
 * Availability is data, not code: the ISA files are compiled with their
 * instruction sets enabled (-mavx2, -mavx512f ...), so a check compiled
 * there could itself use them; kernels.c, compiled for the baseline,
 * tests cpu_needs against CPUID.
 */
#ifndef CIS2_KERNELS_VARIANT_H
#define CIS2_KERNELS_VARIANT_H

#include "kernels.h"

/* CPU features a variant may need (cpu_needs); x86-64 only: aarch64's
 * Advanced SIMD is mandatory. */
enum {
    CIS2_CPU_AVX2 = 1u << 0,
    CIS2_CPU_AVX512F = 1u << 1,
    CIS2_CPU_AVX512BW = 1u << 2,
    CIS2_CPU_AVX512VL = 1u << 3,
};

/* Where kernels.c may cut a matmul between the pool's threads: chunk
 * edges fall on whole register blocks, so no chunk splits a block the
 * variant would run as one (which would cost speed, never bits: no row's
 * sum is ever split, §5.2).  Row groups in blocks of groups[0] below
 * groups_wide_from positions, of groups[1] from there on; positions in
 * blocks of pos[0] below pos_wide_from positions, of pos[1] from there. */
typedef struct cis2_block_shape {
    unsigned groups[2];
    size_t groups_wide_from;
    unsigned pos[2];
    size_t pos_wide_from;
} cis2_block_shape;

/* Every variant's chunks today: 4 groups (the widest narrow block) below 8
 * positions, single groups from 8 on (every variant then runs one group at
 * a time); positions in blocks of 4, or 16 (the AVX-512 wide block) from
 * 16 positions on. */
#define CIS2_BLOCK_SHAPE_DEFAULT {.groups = {4, 1}, .groups_wide_from = 8, .pos = {4, 16}, .pos_wide_from = 16}

struct cis2_variant {
    const char *name;          /* what --kernel names */
    unsigned cpu_needs;        /* CIS2_CPU_* bits; 0: any CPU this build runs on */
    cis2_block_shape block;
    cis2_kern_fn matmul;       /* the contract over group ranges (kernels.h) */
    cis2_prep_fn prep;         /* NULL: the variant reads x only (no xt) */
    cis2_scores_fn scores;     /* attention halves; NULL: the generic ones (pmath.c) */
    cis2_vmix_fn vmix;
    cis2_map_fn expn, silun;   /* §6.2, §6.4 lanes; NULL: pmath.c's 4 */
    cis2_map_fn gelun;         /* docs/models.md §M7.5 lanes; NULL: pmath.c's 4 */
    cis2_argmax_fn argmax;     /* §11.2 lanes; NULL: pmath.c's 4 */
};

/* MXFP4 (kernels.h, at cis2_wtype), for every variant: the e2m1 values by
 * code (kernels.c), tile b of group g, P(s) from its bits (s << 23: a
 * normal 2^(s-127) for s in [1, 254]), and the layout's addressing. */
extern const float cis2_e2m1[16];
static inline const uint8_t *cis2_mx_tile(const cis2_pmat *w, size_t g, size_t b)
{
    return (const uint8_t *)w->data + (g * (w->cols / 32) + b) * CIS2_MX_TILE;
}
static inline float cis2_mx_scale(uint8_t s)
{
    uint32_t b = (uint32_t)s << 23;
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}
/* Where the code of row k (0..15) of a group, column i, lies in its tile:
 * the byte (from the tile's start) and the shift of its nibble. */
static inline size_t cis2_mx_byte(size_t k, size_t i)
{
    return 16 + 16 * (i % 32 / 2) + 8 * (i & 1) + 4 * (k / 8) + k % 4;
}
static inline unsigned cis2_mx_shift(size_t k) { return (unsigned)(k % 8 / 4) * 4; }

/* Each variant object, and the functions its file gives it (AVX-512's
 * exp/SiLU also call AVX2's for their tails, and its MXFP4 paths AVX2's
 * widening). */
#define KERN_ARGS const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0, size_t g1
extern const struct cis2_variant cis2_variant_scalar; /* kernels.c */
void cis2_kern_scalar(KERN_ARGS);
#if defined(__x86_64__)
extern const struct cis2_variant cis2_variant_avx2; /* kern_x86_avx2.c */
void cis2_kern_avx2(KERN_ARGS);
void cis2_attn_scores_avx2(const float *q, size_t G, const float *kt, size_t len, size_t hd, float scale, float *s);
void cis2_attn_vmix_avx2(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t hd,
                         float *out);
void cis2_exp_n_avx2(const float *x, float *out, size_t n);
void cis2_silu_n_avx2(const float *x, float *out, size_t n);
void cis2_gelu_n_avx2(const float *x, float *out, size_t n);
size_t cis2_argmax_n_avx2(const float *v, size_t n);
void cis2_mx_kern_avx2(const cis2_pmat *w, const float *x, size_t npos, float *y, size_t g0, size_t g1);
void cis2_mx_widen_avx2(const cis2_pmat *w, size_t g, size_t c0, size_t c1, float *tile);
extern const struct cis2_variant cis2_variant_avx512; /* kern_x86_avx512.c */
void cis2_kern_avx512(KERN_ARGS);
void cis2_prep_avx512(const float *x, size_t npos, size_t cols, float *xt);
void cis2_attn_scores_avx512(const float *q, size_t G, const float *kt, size_t len, size_t hd, float scale,
                             float *s);
void cis2_attn_vmix_avx512(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t hd,
                           float *out);
void cis2_exp_n_avx512(const float *x, float *out, size_t n);
void cis2_silu_n_avx512(const float *x, float *out, size_t n);
void cis2_gelu_n_avx512(const float *x, float *out, size_t n);
size_t cis2_argmax_n_avx512(const float *v, size_t n);
#endif
#if defined(__aarch64__)
extern const struct cis2_variant cis2_variant_neon; /* kern_neon.c */
void cis2_kern_neon(KERN_ARGS);
#endif
#undef KERN_ARGS

#endif

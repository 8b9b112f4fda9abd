/*
 * pmath_lanes.h - §6.2 exp_pinned, §6.4 silu_pinned and docs/models.md
 * §M7.5 gelu_tanh_pinned on a vector of lanes: the one definition that
 * every lane width is compiled from.
 *
 * Included by pmath.c (4 lanes, any target), kern_x86_avx2.c (8 lanes,
 * built with -mavx2) and kern_x86_avx512.c (16, -mavx512f); nothing else
 * includes it.  The includer defines
 *     LANES    the number of binary32 lanes (4, 8 or 16)
 *     LN(f)    the name of this width's function f (LN(exp) -> exp_v4)
 * and gets, static to its translation unit, the §6.2 constants and:
 *     LN(exp)(VF x)                          exp_pinned in every lane
 *     LN(exp_n)(x, out, n), LN(silu_n)(...), LN(gelu_n)(...)
 *                                            whole vectors of n, then tail(x, out, rest)
 *     LN(argmax_n)(v, n)                     §11.2's argmax index, lane by lane
 *
 * Every lane runs exactly the scalar function's operations (pmath.c): the
 * same constants (bit patterns), each multiply and add separate (GCC/Clang
 * vector extensions are element-wise IEEE ops and the build has
 * -ffp-contract=off), the scalar branches as masks.  So every width gives
 * the scalar bits; tests/unit/test_kernels.c checks each one against
 * exp_pinned, silu_pinned and gelu_tanh_pinned on every class of input.
 */
#ifndef LANES
#error "define LANES and LN before including pmath_lanes.h"
#endif

#include <stdint.h>
#include <string.h>

#include "pmath.h"

/* §6.2 exp constants (bit patterns, never decimal literals) */
#define EXP_LOG2E 0x3FB8AA3Bu
#define EXP_C1 0x3F318000u
#define EXP_C2 0xB95E8083u
static const uint32_t EXP_P[6] = {0x39506967u, 0x3AB743CEu, 0x3C088908u,
                                  0x3D2AA9C1u, 0x3E2AAAAAu, 0x3F000000u};
#define EXP_HI 0x42B00000u /* 88.0 */
#define EXP_LO 0xC2B00000u /* -88.0 */
#define F_ONE 0x3F800000u
#define F_HALF 0x3F000000u

#define LV_VF LN(vf)
#define LV_VI LN(vi)
typedef float LV_VF __attribute__((vector_size(4 * LANES)));
typedef int32_t LV_VI __attribute__((vector_size(4 * LANES)));

static inline LV_VF LN(load)(const float *p) { LV_VF r; memcpy(&r, p, sizeof r); return r; }
static inline void LN(store)(float *p, LV_VF v) { memcpy(p, &v, sizeof v); }
static inline LV_VF LN(from_bits)(LV_VI i) { LV_VF r; memcpy(&r, &i, sizeof r); return r; }
static inline LV_VI LN(bits)(LV_VF f) { LV_VI r; memcpy(&r, &f, sizeof r); return r; }
static inline LV_VF LN(splat)(uint32_t bits) /* a copy of the bits in every lane: no arithmetic */
{
    LV_VI r;
    for (int i = 0; i < LANES; i++) r[i] = (int32_t)bits;
    return LN(from_bits)(r);
}
static inline LV_VF LN(select)(LV_VI mask, LV_VF a, LV_VF b) /* mask lanes -1: a, 0: b */
{
    return LN(from_bits)((mask & LN(bits)(a)) | (~mask & LN(bits)(b)));
}

/* §6.2, step for step as exp_pinned (pmath.c). */
static inline __attribute__((always_inline)) LV_VF LN(exp)(LV_VF x)
{
    LV_VI nan = x != x, big = x > LN(splat)(EXP_HI), small = x < LN(splat)(EXP_LO);
    LV_VF xs = LN(select)(nan | big | small, LN(splat)(0), x); /* keep the int casts in range */
    LV_VF t = xs * LN(splat)(EXP_LOG2E);
    LV_VF z0 = t + LN(splat)(F_HALF);
    LV_VF tr = __builtin_convertvector(__builtin_convertvector(z0, LV_VI), LV_VF); /* trunc, exact */
    LV_VF k = tr - LN(select)(tr > z0, LN(splat)(F_ONE), LN(splat)(0));           /* floor_small */
    LV_VF kc1 = k * LN(splat)(EXP_C1);
    LV_VF r0 = xs - kc1;
    LV_VF kc2 = k * LN(splat)(EXP_C2);
    LV_VF r = r0 - kc2;
    LV_VF r2 = r * r;
    LV_VF poly = LN(splat)(EXP_P[0]);
    for (int i = 1; i <= 5; i++) {
        LV_VF m = poly * r;
        poly = m + LN(splat)(EXP_P[i]);
    }
    LV_VF m1 = poly * r2;
    LV_VF poly2 = m1 + r;
    LV_VF result = poly2 + LN(splat)(F_ONE);
    /* §6.2.1 ldexp_exact(result, k); result > 0 here, never 0 */
    LV_VI rb = LN(bits)(result), ki = __builtin_convertvector(k, LV_VI);
    LV_VI e = ((rb >> 23) & 0xFF) + ki;
    LV_VI scaled = (rb & ~(0xFF << 23)) | (e << 23);
    LV_VF y = LN(from_bits)(scaled);
    y = LN(select)(e <= 0, LN(splat)(0), y);
    y = LN(select)(e >= 0xFF, LN(from_bits)((rb & (int32_t)0x80000000) | 0x7F800000), y);
    y = LN(select)(small, LN(splat)(0), y);         /* 3. */
    y = LN(select)(big, LN(splat)(0x7F800000u), y); /* 2. */
    return LN(select)(nan, x, y);                   /* 1. */
}

/* Whole vectors of x, then tail() for the n % LANES left (out may be x). */
static inline void LN(exp_n)(const float *x, float *out, size_t n, void (*tail)(const float *, float *, size_t))
{
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) LN(store)(out + i, LN(exp)(LN(load)(x + i)));
    if (i < n) tail(x + i, out + i, n - i);
}

/* §6.4, step for step as silu_pinned (pmath.c). */
static inline void LN(silu_n)(const float *x, float *out, size_t n, void (*tail)(const float *, float *, size_t))
{
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        LV_VF xv = LN(load)(x + i);
        LV_VF neg = -xv;
        LV_VF e = LN(exp)(neg);
        LV_VF denom = LN(splat)(F_ONE) + e;
        LV_VF r = xv / denom;
        LN(store)(out + i, LN(select)(r != r, LN(splat)(CIS2_QNAN_BITS), r)); /* the canonical NaN */
    }
    if (i < n) tail(x + i, out + i, n - i);
}

/* docs/models.md §M7.5, step for step as gelu_tanh_pinned (pmath.c). */
#define GELU_B 0x3F4C422Au /* (f32) sqrt(2/pi) = 0.7978846 */
#define GELU_K 0x3D372713u /* (f32) 0.044715 */
static inline void LN(gelu_n)(const float *x, float *out, size_t n, void (*tail)(const float *, float *, size_t))
{
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        LV_VF xv = LN(load)(x + i);
        LV_VF x2 = xv * xv;
        LV_VF x3 = x2 * xv;
        LV_VF a = LN(splat)(GELU_K) * x3;
        LV_VF b = xv + a;
        LV_VF u = LN(splat)(GELU_B) * b;
        LV_VF t = u + u; /* 2u, exact (or +-inf) */
        LV_VF e = LN(exp)(-t);
        LV_VF denom = LN(splat)(F_ONE) + e;
        LV_VF r = xv / denom;
        LN(store)(out + i, LN(select)(r != r, LN(splat)(CIS2_QNAN_BITS), r)); /* the canonical NaN */
    }
    if (i < n) tail(x + i, out + i, n - i);
}

/* §11.2 argmax's index (pmath.c's argmax: strict >, the first maximum)
 * in LANES lanes: lane l folds v[0] and then the elements 1+l, 1+l+LANES,
 * ... with the same strict >, so it ends on the first element of its own
 * that reaches its maximum (or on v[0]: a NaN there wins everywhere, as in
 * argmax).  The lanes' winners are then merged, the greatest value and
 * among equals (-0 == +0) the lowest index, which is argmax's first
 * maximum; the tail continues argmax's fold.  No arithmetic, only
 * comparisons, so any width gives argmax's index. */
static inline size_t LN(argmax_n)(const float *v, size_t n)
{
    if (n < 2 * LANES + 1 || n > (size_t)INT32_MAX) return argmax(v, n);
    LV_VF bv;
    LV_VI bi, at, step;
    for (int l = 0; l < LANES; l++) {
        bv[l] = v[0];
        bi[l] = 0;
        at[l] = 1 + l;
        step[l] = LANES;
    }
    size_t i = 1;
    for (; i + LANES <= n; i += LANES, at += step) {
        LV_VF x = LN(load)(v + i);
        LV_VI gt = x > bv;
        bv = LN(select)(gt, x, bv);
        bi = (gt & at) | (~gt & bi);
    }
    size_t best = (size_t)bi[0];
    float m = bv[0];
    for (int l = 1; l < LANES; l++)
        if (bv[l] > m || (bv[l] == m && (size_t)bi[l] < best)) { m = bv[l]; best = (size_t)bi[l]; }
    for (; i < n; i++)
        if (v[i] > m) { m = v[i]; best = i; }
    return best;
}

#undef LV_VF
#undef LV_VI

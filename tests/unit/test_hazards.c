/*
 * test_hazards.c - the cross-ISA hazards of FACTS.md §1.13 that CIS-2 v0.3b
 * does not mention (docs/cross-isa.md), shown with the expected value on
 * each ISA, and the checks that cis2 itself never depends on them.
 *
 *   1. Flush-to-zero decision point.  x86 (MXCSR.FTZ) flushes a result that
 *      is tiny AFTER rounding; aarch64 (FPCR.FZ) flushes one that is tiny
 *      BEFORE rounding.  An exact result in [FLT_MIN*(1-2^-25), FLT_MIN)
 *      rounds up to FLT_MIN: x86 keeps it, aarch64 returns 0.
 *      0x3F7FFFFE * 0x00800001 = 2^-126 * (1-2^-23)(1+2^-23) = 2^-126(1-2^-46).
 *   2. Default NaN.  An invalid operation (0/0, inf-inf, 0*inf) returns
 *      0xFFC00000 on x86 and 0x7FC00000 on aarch64.
 *   3. cis2's own NaN-producing paths (§6.5 ln of a negative, §6.3 sin/cos
 *      of a non-finite) return the canonical 0x7FC00000 on both ISAs, never
 *      the hardware default NaN.
 *
 * This file builds as a cmocka test for both ISAs: `make check` runs it on
 * x86-64, `make CC=aarch64-linux-gnu-gcc check` and tests/build/t_aarch64.sh run
 * it under qemu-aarch64-static (which models FPCR.FZ and the default NaN).
 * Every operand passes through `volatile` so nothing is folded at compile
 * time, where the FP environment does not apply.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cis2_toolkit.h"

static float f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* ---- direct FP-control access, so the unpinned baseline can be shown ---- */
#if defined(__x86_64__)
#define FTZ_BITS ((1u << 15) | (1u << 6))
static uint64_t ctl_read(void) { uint32_t c; __asm__ volatile("stmxcsr %0" : "=m"(c)::"memory"); return c; }
static void ctl_write(uint64_t c) { uint32_t v = (uint32_t)c; __asm__ volatile("ldmxcsr %0" ::"m"(v) : "memory"); }
#define ISA_X86 1
#define ISA_A64 0
#elif defined(__aarch64__)
#define FTZ_BITS (1ull << 24)
static uint64_t ctl_read(void) { uint64_t c; __asm__ volatile("mrs %0, fpcr" : "=r"(c)::"memory"); return c; }
static void ctl_write(uint64_t c) { __asm__ volatile("msr fpcr, %0" ::"r"(c) : "memory"); }
#define ISA_X86 0
#define ISA_A64 1
#else
#error "test_hazards: x86-64 or aarch64 only (CIS-2 §1.3)"
#endif

static uint32_t mul(uint32_t a, uint32_t b)
{
    volatile float va = f32(a), vb = f32(b);
    volatile float r = va * vb;
    return bits(r);
}

static int pin(void **state)
{
    (void)state;
    cis2_error err = {0};
    return cis2_fpenv_pin(&err);
}

/* The exact products, computed in double (53 bits hold them exactly and
 * they are normal doubles, so DAZ/FTZ never touch them): the window case
 * lies in [FLT_MIN*(1-2^-25), FLT_MIN), the controls just outside it. */
static void test_window_is_where_we_say(void **state)
{
    (void)state;
    volatile double a = (double)f32(0x3F7FFFFEu), b = (double)f32(0x00800001u);
    double p = a * b;
    double flt_min = 0x1p-126, lo = flt_min * (1.0 - 0x1p-25);
    assert_true(p == 0x1p-126 * (1.0 - 0x1p-46)); /* exact: (1-2^-23)(1+2^-23) */
    assert_true(p >= lo && p < flt_min);
    volatile double c = (double)f32(0x3F7FFFFFu), d = (double)f32(0x00800000u);
    double q = c * d; /* 2^-126 (1-2^-24): below the window */
    assert_true(q < lo);
    volatile double e = (double)f32(0x3F7FFFFFu), f = (double)f32(0x00800001u);
    double r = e * f; /* 2^-126 (1+2^-24-2^-47): at or above FLT_MIN */
    assert_true(r >= flt_min);
}

/* Hazard 1, pinned (the CIS-2 environment): the ISAs disagree in the window. */
static void test_ftz_decision_point_pinned(void **state)
{
    (void)state;
    assert_true(cis2_fpenv_is_pinned());
    uint32_t got = mul(0x3F7FFFFEu, 0x00800001u);
    if (ISA_X86) assert_int_equal(got, 0x00800000u); /* tiny after rounding? no: kept */
    if (ISA_A64) assert_int_equal(got, 0x00000000u); /* tiny before rounding: flushed */
    /* commuted operands: same per ISA */
    assert_int_equal(mul(0x00800001u, 0x3F7FFFFEu), got);
    /* controls outside the window agree on both ISAs */
    assert_int_equal(mul(0x3F7FFFFFu, 0x00800000u), 0x00000000u); /* tiny either way */
    assert_int_equal(mul(0x3F7FFFFFu, 0x00800001u), 0x00800000u); /* never tiny */
    assert_int_equal(mul(0x3F800000u, 0x00800000u), 0x00800000u); /* FLT_MIN * 1 */
    /* negative side mirrors it */
    uint32_t neg = mul(0xBF7FFFFEu, 0x00800001u);
    if (ISA_X86) assert_int_equal(neg, 0x80800000u);
    if (ISA_A64) assert_int_equal(neg, 0x80000000u);
}

/* Unpinned, IEEE gradual underflow: both ISAs give FLT_MIN, so the
 * difference above is purely where FTZ decides, not the rounding. */
static void test_ftz_decision_point_unpinned(void **state)
{
    (void)state;
    uint64_t saved = ctl_read();
    ctl_write(saved & ~(uint64_t)FTZ_BITS);
    uint32_t got = mul(0x3F7FFFFEu, 0x00800001u);
    /* 2^-126(1-2^-24) is a tie at subnormal precision: even is FLT_MIN */
    uint32_t tie = mul(0x3F7FFFFFu, 0x00800000u);
    uint32_t sub = mul(0x3F000000u, 0x00800000u); /* FACTS §1.1 */
    ctl_write(saved);
    assert_true(cis2_fpenv_is_pinned());
    assert_int_equal(got, 0x00800000u);
    assert_int_equal(tie, 0x00800000u);
    assert_int_equal(sub, 0x00400000u); /* the subnormal FTZ would flush */
}

/* Hazard 2: the default NaN of an invalid operation. */
static void test_default_nan(void **state)
{
    (void)state;
    const uint32_t want = ISA_X86 ? 0xFFC00000u : 0x7FC00000u;
    volatile float zero = f32(0), inf = f32(0x7F800000u);
    volatile float r1 = zero / zero, r2 = inf - inf, r3 = zero * inf;
    assert_int_equal(bits(r1), want);
    assert_int_equal(bits(r2), want);
    assert_int_equal(bits(r3), want);
    /* a quiet NaN operand propagates unchanged on both ISAs */
    volatile float q = f32(0x7FC12345u), one = f32(0x3F800000u);
    volatile float r4 = q + one;
    assert_int_equal(bits(r4), 0x7FC12345u);
}

/* Hazard 3 does not reach cis2: its NaN-producing paths are canonical. */
static void test_cis2_nans_are_canonical(void **state)
{
    (void)state;
    const uint32_t inputs[] = {0xBF800000u, 0x80800000u, 0xFF800000u, 0xC2C80000u};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) /* §6.5, FACTS §1.7 */
        assert_int_equal(bits(cis2_ln_pinned(f32(inputs[i]))), 0x7FC00000u);
    /* ln of a NaN (either sign) is the canonical NaN too */
    assert_int_equal(bits(cis2_ln_pinned(f32(0xFFC00000u))), 0x7FC00000u);
    const uint32_t nonfinite[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u};
    for (size_t i = 0; i < sizeof nonfinite / sizeof nonfinite[0]; i++) { /* §6.3 */
        assert_int_equal(bits(cis2_sin_pinned(f32(nonfinite[i]))), 0x7FC00000u);
        assert_int_equal(bits(cis2_cos_pinned(f32(nonfinite[i]))), 0x7FC00000u);
    }
    /* ln's other specials, same on both ISAs */
    assert_int_equal(bits(cis2_ln_pinned(f32(0))), 0xFF800000u);
    assert_int_equal(bits(cis2_ln_pinned(f32(0x7F800000u))), 0x7F800000u);
    /* exp passes a NaN through (no invalid operation, no default NaN) */
    assert_int_equal(bits(cis2_exp_pinned(f32(0x7FC00000u))), 0x7FC00000u);
    /* SiLU of any finite input is finite: exp(-x) = +Inf for x < -88 gives
     * x/Inf = -0, not an invalid operation */
    assert_int_equal(bits(cis2_silu_pinned(f32(0xC2C80000u))), 0x80000000u); /* -100 */
}

/* silu(-inf) = -inf / (1 + exp(inf)) = -inf/inf would be the hardware
 * default NaN; silu_pinned returns the canonical one on both ISAs. */
static void test_nonfinite_activations_are_outside(void **state)
{
    (void)state;
    assert_int_equal(bits(cis2_silu_pinned(f32(0xFF800000u))), 0x7FC00000u);
}

/* The FTZ window cannot be reached by + or - (exact sums are multiples of
 * 2^-149; the largest subnormal FLT_MIN - 2^-149 is below the window), so
 * §5's sums never meet hazard 1: spot-check the closest sums. */
static void test_sums_never_hit_window(void **state)
{
    (void)state;
    volatile float a = f32(0x00800001u), b = f32(0x80800000u); /* 2^-149: flushed */
    volatile float s1 = a + b;
    assert_int_equal(bits(s1), 0u);
    volatile float c = f32(0x00FFFFFFu), d = f32(0x80800000u); /* FLT_MIN - 2^-149 */
    volatile float s2 = c + d;
    assert_int_equal(bits(s2), 0u); /* same on both: tiny before and after rounding */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_is_where_we_say),
        cmocka_unit_test(test_ftz_decision_point_pinned),
        cmocka_unit_test(test_ftz_decision_point_unpinned),
        cmocka_unit_test(test_default_nan),
        cmocka_unit_test(test_cis2_nans_are_canonical),
        cmocka_unit_test(test_sums_never_hit_window),
        cmocka_unit_test(test_nonfinite_activations_are_outside),
    };
    return cmocka_run_group_tests(tests, pin, NULL);
}

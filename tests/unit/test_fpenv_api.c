/*
 * test_fpenv_api.c - the library pins the FP environment for itself and
 * leaves the caller's as it was (include/cis2.h section 2; spec §1.2,
 * §1.3).
 *
 * This program never pins.  It sets its own control register to the
 * opposite of the pin (FTZ/DAZ or FZ off, rounding toward zero), then
 * checks that (a) the pinned functions give the FACTS.md §3 goldens (values
 * that differ without the pin or under another rounding mode), (b) a whole
 * generate gives the same witness as under a normal environment, (c) the
 * control register reads exactly as it was set after every call, status
 * flags included, and (d) the token callback runs with the caller's
 * register, not the library's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fenv.h>

#include "cis2_toolkit.h"

#if defined(__x86_64__)
typedef uint32_t ctl_t;
static ctl_t get_ctl(void) { ctl_t c; __asm__ volatile("stmxcsr %0" : "=m"(c)); return c; }
static void set_ctl(ctl_t c) { __asm__ volatile("ldmxcsr %0" : : "m"(c)); }
/* default MXCSR (all traps masked, RNE, no FTZ/DAZ) with rounding toward
 * zero (RC=11) and the precision flag set as a sticky status bit */
#define HOSTILE ((ctl_t)(0x1F80u | (3u << 13) | 0x20u))
#define PLAIN ((ctl_t)0x1F80u)
#elif defined(__aarch64__)
typedef uint64_t ctl_t;
static ctl_t get_ctl(void) { ctl_t c; __asm__ volatile("mrs %0, fpcr" : "=r"(c)); return c; }
static void set_ctl(ctl_t c) { __asm__ volatile("msr fpcr, %0" : : "r"(c)); }
#define HOSTILE ((ctl_t)(3ull << 22)) /* FZ off, round toward zero */
#define PLAIN ((ctl_t)0)
#endif

static float f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static void test_pinned_math_unpinned_caller(void **state)
{
    (void)state;
    set_ctl(HOSTILE);
    /* FACTS §3 denormal rows: 0 only with FTZ/DAZ */
    const float a[1] = {f32(0x20000000)}, b[1] = {f32(0x1F800000)};
    assert_int_equal(bits(cis2_dot_seq(a, b, 1)), 0x00000000u);
    assert_int_equal(get_ctl(), HOSTILE);
    const float s[2] = {f32(0x00800001), f32(0x80800000)};
    assert_int_equal(bits(cis2_sum_seq(s, 2)), 0x00000000u);
    assert_int_equal(get_ctl(), HOSTILE);
    /* FACTS §3 exp / ln / sin goldens (RNE-dependent) */
    static const uint32_t exps[][2] = {{0x3F800000, 0x402DF854}, {0xBF800000, 0x3EBC5AB2}, {0x41200000, 0x46AC14EE},
                                       {0xC2800003, 0x114B4D72}, {0x42AEAD6A, 0x7E8046AE}};
    for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++) {
        assert_int_equal(bits(cis2_exp_pinned(f32(exps[i][0]))), exps[i][1]);
        assert_int_equal(get_ctl(), HOSTILE);
    }
    assert_int_equal(bits(cis2_ln_pinned(f32(0x47C35000))), 0x413834F1u);
    assert_int_equal(bits(cis2_sin_pinned(f32(0x45034E6F))), 0x3F3BC37Au);
    assert_int_equal(bits(cis2_cos_pinned(f32(0x40400000))), 0xBF7D7026u);
    assert_int_equal(bits(cis2_rsqrt_cr(f32(0x41C00000))), 0x3E5105EBu); /* rsqrt(24) */
    assert_int_equal(get_ctl(), HOSTILE);
    /* the caller's own arithmetic is still unpinned and rounds toward zero */
    volatile float x = f32(0x00800000), half = 0.5f;
    volatile float y = x * half;
    assert_int_equal(bits(y), 0x00400000u);
    set_ctl(PLAIN);
}

typedef struct cb_ctx { ctl_t seen; int calls, wrong; } cb_ctx;

static int on_token(void *ctx, const cis2_token_event *ev)
{
    cb_ctx *c = ctx;
    (void)ev;
    c->calls++;
    if (get_ctl() != c->seen) c->wrong++;
    return 0;
}

static void generate_under(const char *dir, ctl_t env, uint8_t witness[32], int *calls, int *wrong)
{
    set_ctl(env);
    cis2_engine *e = NULL;
    cis2_error err = {0};
    cis2_engine_opts o = {.threads = 2};
    assert_int_equal(cis2_engine_open(&e, dir, &o, &err), CIS2_OK);
    assert_int_equal(get_ctl(), env);
    uint32_t ids[] = {3, 1, 4, 1, 5};
    cis2_request q = {.ids = ids, .n_ids = 5, .max_tokens = 6};
    cb_ctx cb = {.seen = env};
    cis2_gen_opts go = {.twice = 1, .on_token = on_token, .on_token_ctx = &cb};
    cis2_result *r;
    assert_int_equal(cis2_generate(e, &q, 1, &go, &r, &err), CIS2_OK);
    assert_int_equal(get_ctl(), env);
    memcpy(witness, r->witness, 32);
    cis2_receipt *rc;
    assert_int_equal(cis2_receipt_make(e, r, &rc, &err), CIS2_OK);
    assert_int_equal(get_ctl(), env);
    cis2_verdict *v;
    assert_int_equal(cis2_verify(e, &rc, 1, NULL, &v, &err), CIS2_OK);
    assert_int_equal(v->kind, CIS2_VERDICT_OK);
    assert_int_equal(get_ctl(), env);
    cis2_verdicts_free(v, 1);
    cis2_receipt_free(rc);
    cis2_results_free(r, 1);
    cis2_engine_close(e);
    assert_int_equal(get_ctl(), env);
    *calls = cb.calls;
    *wrong = cb.wrong;
    set_ctl(PLAIN);
}

static void test_generate_unpinned_caller(void **state)
{
    (void)state;
    char dir[4096];
    cis2_error err = {0};
    assert_int_equal(cis2_mkdtemp(dir, sizeof dir, "cis2-test-fpenv", &err), CIS2_OK);
    assert_int_equal(cis2_synth_write("tiny", 7, dir, NULL, &err), CIS2_OK);
    uint8_t w_plain[32], w_hostile[32];
    int calls, wrong;
    generate_under(dir, PLAIN, w_plain, &calls, &wrong);
    assert_int_equal(calls, 6);
    assert_int_equal(wrong, 0);
    generate_under(dir, HOSTILE, w_hostile, &calls, &wrong);
    assert_int_equal(calls, 6);
    assert_int_equal(wrong, 0); /* callbacks saw the caller's register */
    assert_memory_equal(w_plain, w_hostile, 32);
    cis2_rmtree_tmp(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned_math_unpinned_caller),
        cmocka_unit_test(test_generate_unpinned_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

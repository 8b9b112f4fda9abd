/*
 * test_limits.c - the library at the edges of its parameters, through the
 * public API on a synthetic checkpoint
 * written by cis2_synth_write into $TMPDIR.
 *
 *   - cis2_gen_opts.max_batch of any size (SIZE_MAX, 2^63, 2^62, ...) is
 *     "all of the requests" (include/cis2.h) and gives the default run's
 *     results; it once wrapped to 0 when doubled for the §12.4 second copy
 *     and the call stepped forever.  Each call runs under an alarm, so a
 *     spinning call fails the test instead of hanging it.
 *   - docs/sampling.md §S2.2 for the request path: -0.0, subnormal, NaN and
 *     > 1 top_p are refused (CIS2_E_USAGE, one line naming top_p), never
 *     taken as "off"; the struct's "not set" (+0.0 bits, include/cis2.h)
 *     is 1.0 and records 0x3F800000, the same receipt as an explicit 1.0.
 *     The oracle is the table of §S2.2, not the code under test.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cis2.h"
#include "cis2_toolkit.h" /* cis2_mkdtemp, cis2_synth_write */

static char root[4096], dir_tiny[4200];

static int setup(void **state)
{
    (void)state;
    cis2_error err = {0};
    if (cis2_mkdtemp(root, sizeof root, "cis2-test-limits", &err)) return -1;
    snprintf(dir_tiny, sizeof dir_tiny, "%s/tiny", root);
    if (cis2_synth_write("tiny", 7, dir_tiny, NULL, &err)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static cis2_engine *open_engine(void)
{
    cis2_engine *e = NULL;
    cis2_error err = {0};
    cis2_engine_opts o = {.threads = 1};
    int rc = cis2_engine_open(&e, dir_tiny, &o, &err);
    if (rc) fprintf(stderr, "open %s: %s\n", dir_tiny, err.msg);
    assert_int_equal(rc, CIS2_OK);
    return e;
}

/* A call that does not return within the alarm ends the test binary with
 * a message (run.sh reports it failed) instead of hanging `make check`. */
static const char *alarm_what = "";

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_limits: a cis2_generate call did not return within 60 s (spinning?): ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    w = write(2, alarm_what, strlen(alarm_what));
    w = write(2, "\n", 1);
    (void)w;
    _exit(1);
}

static int generate_bounded(cis2_engine *e, const cis2_request *q, size_t n, const cis2_gen_opts *o,
                            cis2_result **r, cis2_error *err, const char *what)
{
    alarm_what = what;
    signal(SIGALRM, on_alarm);
    alarm(60);
    int rc = cis2_generate(e, q, n, o, r, err);
    alarm(0);
    return rc;
}

/* ------------------------------------------------------- max_batch */

static void test_max_batch_huge(void **state)
{
    (void)state;
    cis2_engine *e = open_engine();
    const char *prompts[3] = {"Once upon a time", "The quick brown fox", "odd"};
    cis2_request q[3];
    for (int i = 0; i < 3; i++)
        q[i] = (cis2_request){.text = prompts[i], .text_len = strlen(prompts[i]), .max_tokens = 3};
    cis2_error err = {0};
    cis2_result *ref;
    cis2_gen_opts dflt = {.twice = 1};
    assert_int_equal(generate_bounded(e, q, 3, &dflt, &ref, &err, "max_batch 0"), CIS2_OK);
    const size_t sizes[] = {SIZE_MAX, (size_t)1 << 63, ((size_t)1 << 63) + 1, (size_t)1 << 62, SIZE_MAX / 2,
                            SIZE_MAX / 2 + 2, 4, 3, 2, 1};
    char what[96];
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int twice = 0; twice < 2; twice++) {
            snprintf(what, sizeof what, "max_batch %zu, twice %d", sizes[k], twice);
            cis2_gen_opts o = {.twice = twice, .max_batch = sizes[k]};
            cis2_result *r = NULL;
            err = (cis2_error){0};
            int rc = generate_bounded(e, q, 3, &o, &r, &err, what);
            if (rc) fail_msg("%s: %s", what, err.msg);
            for (int i = 0; i < 3; i++) {
                assert_int_equal(r[i].n_tokens, 3);
                if (memcmp(r[i].witness, ref[i].witness, 32) || memcmp(r[i].tokens, ref[i].tokens, 3 * sizeof(uint32_t)))
                    fail_msg("%s: request %d differs from the default run", what, i);
            }
            cis2_results_free(r, 3);
        }
    cis2_results_free(ref, 3);
    cis2_engine_close(e);
}

/* A session takes any max_batch too (it only compares against it). */
static void test_session_max_batch_huge(void **state)
{
    (void)state;
    cis2_engine *e = open_engine();
    const size_t sizes[] = {SIZE_MAX, (size_t)1 << 63};
    for (size_t k = 0; k < 2; k++) {
        cis2_session *s;
        cis2_error err = {0};
        cis2_session_opts so = {.max_batch = sizes[k], .prefill_chunk = SIZE_MAX};
        assert_int_equal(cis2_session_open(&s, e, &so, &err), CIS2_OK);
        cis2_request q = {.text = "Once upon a time", .text_len = 16, .max_tokens = 2};
        uint64_t id;
        assert_int_equal(cis2_session_add(s, &q, &id, &err), CIS2_OK);
        size_t left = 1;
        for (int steps = 0; left && steps < 100; steps++) assert_int_equal(cis2_session_step(s, &left, &err), CIS2_OK);
        assert_int_equal(left, 0);
        cis2_result *r;
        assert_int_equal(cis2_session_take(s, id, &r, &err), CIS2_OK);
        assert_int_equal(r->n_tokens, 2);
        cis2_results_free(r, 1);
        cis2_session_close(s);
    }
    cis2_engine_close(e);
}

/* ------------------------------------------------------------ top_p */

static float f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* One sampled request's receipt text (cis2_free it), or NULL with *rc set. */
static char *sampled_receipt(cis2_engine *e, uint32_t t_bits, uint32_t top_p_bits, int *rc, cis2_error *err)
{
    cis2_sampling s = {.temperature = f32(t_bits), .top_p = f32(top_p_bits), .seed = 5};
    cis2_request q = {.text = "Once upon a time", .text_len = 16, .max_tokens = 3, .sampling = &s};
    cis2_result *r = NULL;
    *err = (cis2_error){0};
    if ((*rc = generate_bounded(e, &q, 1, NULL, &r, err, "top_p"))) return NULL;
    cis2_receipt *rec;
    char *text = NULL;
    size_t len;
    assert_int_equal(cis2_receipt_make(e, &r[0], &rec, err), CIS2_OK);
    assert_int_equal(cis2_receipt_render(rec, &text, &len, err), CIS2_OK);
    cis2_receipt_free(rec);
    cis2_results_free(r, 1);
    return text;
}

static void test_top_p_refused(void **state)
{
    (void)state;
    cis2_engine *e = open_engine();
    /* §S2.2: top_p's valid bit patterns are 0x00800000..0x3F800000 */
    const uint32_t bad[] = {0x80000000u, 0x00000001u, 0x007FFFFFu, 0x80800000u, 0xBF800000u, 0x3F800001u,
                            0x7F800000u, 0x7FC00000u, 0xFFC00000u};
    const uint32_t temps[] = {0x3F4CCCCDu /* 0.8: sampled */, 0x00000000u /* greedy: still validated, §S2.4 */};
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            cis2_error err;
            int rc;
            char *text = sampled_receipt(e, temps[t], bad[k], &rc, &err);
            if (text) fail_msg("top_p 0x%08x (temperature 0x%08x) was accepted:\n%s", bad[k], temps[t], text);
            assert_int_equal(rc, CIS2_E_USAGE);
            assert_int_equal(err.code, CIS2_E_USAGE);
            if (!strstr(err.msg, "top_p")) fail_msg("top_p 0x%08x: the message does not name top_p: %s", bad[k], err.msg);
            assert_null(strchr(err.msg, '\n'));
        }
    /* valid ones run and are recorded as given */
    const uint32_t good[] = {0x00800000u, 0x3F000000u, 0x3F7FFFFFu, 0x3F800000u};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        cis2_error err;
        int rc;
        char *text = sampled_receipt(e, 0x3F4CCCCDu, good[k], &rc, &err);
        if (!text) fail_msg("top_p 0x%08x refused: %s", good[k], err.msg);
        char line[32];
        snprintf(line, sizeof line, "\ntop-p %08x\n", good[k]);
        if (!strstr(text, line)) fail_msg("top_p 0x%08x: no '%s' in\n%s", good[k], line + 1, text);
        cis2_free(text);
    }
    cis2_engine_close(e);
}

/* include/cis2.h: +0.0's bits are the zeroed struct's "not set", off: the
 * receipt is byte for byte that of an explicit 1.0. */
/* +0.0 is no "not set" either: §S2.2 refuses it like every zero (the
 * defaults, CIS2_SAMPLING_GREEDY, say 1.0). */
static void test_top_p_zero_refused(void **state)
{
    (void)state;
    cis2_engine *e = open_engine();
    cis2_error err;
    int rc;
    char *zero = sampled_receipt(e, 0x3F4CCCCDu, 0x00000000u, &rc, &err);
    if (zero) fail_msg("top_p +0.0 was accepted: %s", strstr(zero, "top-p") ? strstr(zero, "top-p") : zero);
    assert_int_equal(rc, CIS2_E_USAGE);
    assert_non_null(strstr(err.msg, "top_p"));
    char *one = sampled_receipt(e, 0x3F4CCCCDu, 0x3F800000u, &rc, &err);
    assert_non_null(one);
    assert_non_null(strstr(one, "\ntop-p 3f800000\n"));
    cis2_free(one);
    cis2_engine_close(e);
}

/* The other parameters on the same path, for completeness (§S2.2). */
static void test_temperature_min_p_refused(void **state)
{
    (void)state;
    cis2_engine *e = open_engine();
    struct { const char *name; uint32_t t, min_p; } bad[] = {
        {"temperature", 0x80000000u, 0}, {"temperature", 0x00000001u, 0}, {"temperature", 0x007FFFFFu, 0},
        {"min_p", 0x3F4CCCCDu, 0x80000000u}, {"min_p", 0x3F4CCCCDu, 0x00000001u}, {"min_p", 0x3F4CCCCDu, 0x1F7FFFFFu},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cis2_sampling s = {.temperature = f32(bad[k].t), .top_p = 1.0f, .min_p = f32(bad[k].min_p)};
        cis2_request q = {.text = "Once upon a time", .text_len = 16, .max_tokens = 2, .sampling = &s};
        cis2_result *r = NULL;
        cis2_error err = {0};
        assert_int_equal(generate_bounded(e, &q, 1, NULL, &r, &err, bad[k].name), CIS2_E_USAGE);
        if (!strstr(err.msg, bad[k].name)) fail_msg("%s: the message does not name it: %s", bad[k].name, err.msg);
    }
    cis2_engine_close(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_batch_huge),
        cmocka_unit_test(test_session_max_batch_huge),
        cmocka_unit_test(test_top_p_refused),
        cmocka_unit_test(test_top_p_zero_refused),
        cmocka_unit_test(test_temperature_min_p_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

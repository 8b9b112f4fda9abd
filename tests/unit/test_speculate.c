/*
 * test_speculate.c - src/speculate.c: prompt-lookup drafting and the
 * --speculate forms (docs/speculate.md).  Expected drafts are worked out by
 * hand from the rule "the latest earlier occurrence of the last 3, else 2,
 * else 1 tokens of prompt ++ generated, and up to k tokens after it".
 * That drafts never change a bit is tests/cli/t_speculate.sh's and
 * python/tests/test_speculate.py's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "speculate.h"

#include <stdlib.h>
#include <string.h>

static size_t draft(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, size_t k, uint32_t *out)
{
    memset(out, 0xff, CIS2_SPEC_K_MAX * sizeof *out);
    return cis2_spec_lookup(a, na, b, nb, k, out);
}

static void test_lookup(void **state)
{
    (void)state;
    uint32_t out[CIS2_SPEC_K_MAX];
    const uint32_t a1[] = {1, 2, 3, 4, 1, 2, 3}; /* last 3 (1 2 3) at 0: then 4 1 2 3 */
    assert_int_equal(draft(a1, 7, NULL, 0, 4, out), 4);
    assert_true(out[0] == 4 && out[1] == 1 && out[2] == 2 && out[3] == 3);
    assert_int_equal(draft(a1, 7, NULL, 0, 2, out), 2); /* at most k */
    assert_true(out[0] == 4 && out[1] == 1 && out[2] == UINT32_MAX);
    assert_int_equal(draft(a1, 7, NULL, 0, 16, out), 4); /* never past the text */
    const uint32_t a2[] = {1, 2, 3}; /* nothing earlier */
    assert_int_equal(draft(a2, 3, NULL, 0, 4, out), 0);
    const uint32_t a3[] = {5, 6, 7, 9, 7}; /* 7 9 7, 9 7 unseen; 7 at 2: then 9 7 */
    assert_int_equal(draft(a3, 5, NULL, 0, 4, out), 2);
    assert_true(out[0] == 9 && out[1] == 7);
    const uint32_t a4[] = {1, 8, 1, 9, 1}; /* the latest earlier 1 (index 2): then 9 1 */
    assert_int_equal(draft(a4, 5, NULL, 0, 4, out), 2);
    assert_true(out[0] == 9 && out[1] == 1);
    const uint32_t a5[] = {1, 2}, b5[] = {3, 1, 2}; /* across prompt and generated: 1 2 at 0, then 3 1 2 */
    assert_int_equal(draft(a5, 2, b5, 3, 8, out), 3);
    assert_true(out[0] == 3 && out[1] == 1 && out[2] == 2);
    const uint32_t a6[] = {4, 4, 4, 4}; /* 4 4 4 at 0 (latest earlier): then 4 */
    assert_int_equal(draft(a6, 4, NULL, 0, 4, out), 1);
    assert_int_equal(out[0], 4);
    const uint32_t a7[] = {7}; /* one token: no earlier text */
    assert_int_equal(draft(a7, 1, NULL, 0, 4, out), 0);
    assert_int_equal(draft(NULL, 0, NULL, 0, 4, out), 0);
    const uint32_t a8[] = {1, 2, 3, 9, 2, 3, 5, 1, 2, 3}; /* 1 2 3 beats the later 2 3: then 9 2 */
    assert_int_equal(draft(a8, 10, NULL, 0, 2, out), 2);
    assert_true(out[0] == 9 && out[1] == 2);
}

static void test_parse(void **state)
{
    (void)state;
    int kind;
    unsigned k;
    char *dir;
    cis2_error err = {0};
    assert_int_equal(cis2_spec_parse("lookup", &kind, &k, &dir, &err), CIS2_OK);
    assert_true(kind == CIS2_SPEC_LOOKUP && k == 4);
    assert_int_equal(cis2_spec_parse("lookup:1", &kind, &k, &dir, &err), CIS2_OK);
    assert_int_equal(k, 1);
    assert_int_equal(cis2_spec_parse("lookup:16", &kind, &k, &dir, &err), CIS2_OK);
    assert_int_equal(k, 16);
    assert_int_equal(cis2_spec_parse("off", &kind, &k, &dir, &err), CIS2_OK);
    assert_int_equal(kind, CIS2_SPEC_OFF);
    assert_int_equal(cis2_spec_parse(NULL, &kind, &k, &dir, &err), CIS2_OK);
    assert_int_equal(kind, CIS2_SPEC_OFF);
    assert_null(dir);
    /* draft:DIR[:K]: K is the last ':' part when all digits */
    static const struct { const char *spec, *dir; unsigned k; } D[] = {
        {"draft:m", "m", 4}, {"draft:/a/b:8", "/a/b", 8}, {"draft:x:y", "x:y", 4}, {"draft:x:y:16", "x:y", 16},
        {"draft:dir:", "dir:", 4}, {"draft:a:4:2", "a:4", 2},
    };
    for (size_t i = 0; i < sizeof D / sizeof *D; i++) {
        assert_int_equal(cis2_spec_parse(D[i].spec, &kind, &k, &dir, &err), CIS2_OK);
        assert_int_equal(kind, CIS2_SPEC_DRAFT);
        assert_int_equal(k, D[i].k);
        assert_string_equal(dir, D[i].dir);
        free(dir);
        assert_int_equal(cis2_speculate_check(D[i].spec, &err), CIS2_OK); /* the clients' check: the same grammar */
    }
    assert_int_equal(cis2_speculate_check("lookup:16", &err), CIS2_OK);
    assert_int_equal(cis2_speculate_check(NULL, &err), CIS2_OK);
    const char *bad[] = {"lookup:0", "lookup:17", "lookup:", "lookup:x", "lookup:4x", "lookupx", "draft", "", "lookup:-1",
                         "draft:", "draft::4", "draft:m:0", "draft:m:17", "draft:m:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cis2_error e = {0};
        assert_int_equal(cis2_spec_parse(bad[i], &kind, &k, &dir, &e), CIS2_E_USAGE);
        assert_non_null(strstr(e.msg, "speculate"));
        assert_null(dir);
        cis2_error e2 = {0};
        assert_int_equal(cis2_speculate_check(bad[i], &e2), CIS2_E_USAGE);
        assert_string_equal(e2.msg, e.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_lookup), cmocka_unit_test(test_parse)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

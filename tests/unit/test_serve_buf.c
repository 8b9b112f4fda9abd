/*
 * test_serve_buf.c - serve/serve_buf.c, the server's growing text buffer
 * (serve.h): appends keep every byte and the NUL after them, serve_buf_cut
 * keeps the rest at the front (the SSE stream's pending raw bytes; the
 * stopper checkpoint in t_serve streams only "A" tokens, so stale bytes
 * there would go unseen), printf appends what vsnprintf would write, and a
 * size that cannot be allocated sets oom and ignores later writes.  The
 * module is the server's (outside the library), so it is compiled in here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../serve/serve_buf.c"

static void test_put_and_cut(void **state)
{
    (void)state;
    serve_buf b = {0};
    serve_buf_str(&b, "hello, ");
    serve_buf_put(&b, "world\0!", 7); /* bytes, not a C string */
    assert_int_equal(b.n, 14);
    assert_memory_equal(b.p, "hello, world\0!", 14);
    assert_int_equal(b.p[b.n], 0);
    serve_buf_cut(&b, 7);
    assert_int_equal(b.n, 7);
    assert_memory_equal(b.p, "world\0!", 7);
    assert_int_equal(b.p[b.n], 0);
    serve_buf_cut(&b, 7);
    assert_int_equal(b.n, 0);
    assert_int_equal(b.p[0], 0);
    /* many small appends cross several reallocations */
    char want[5000];
    for (int i = 0; i < 5000; i++) {
        char c = (char)('a' + i % 26);
        serve_buf_put(&b, &c, 1);
        want[i] = c;
    }
    assert_int_equal(b.n, 5000);
    assert_memory_equal(b.p, want, 5000);
    assert_false(b.oom);
    serve_buf_free(&b);
    assert_null(b.p);
    assert_int_equal(b.n, 0);
}

static void test_printf(void **state)
{
    (void)state;
    serve_buf b = {0};
    serve_buf_printf(&b, "%s_bucket{le=\"%g\"} %llu\n", "x", 0.25, 7ull);
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = 0;
    serve_buf_printf(&b, "[%s]", big); /* longer than the first allocation */
    char want[4000];
    int k = snprintf(want, sizeof want, "x_bucket{le=\"0.25\"} 7\n[%s]", big);
    assert_int_equal(b.n, (size_t)k);
    assert_string_equal(b.p, want);
    /* a short one into the spare room (formatted once, in place) */
    serve_buf_printf(&b, "%d|%s", -12, "ok");
    strcat(want, "-12|ok");
    assert_int_equal(b.n, (size_t)k + 6);
    assert_string_equal(b.p, want);
    serve_buf_free(&b);
}

static void test_oom_sticks(void **state)
{
    (void)state;
    serve_buf b = {0};
    serve_buf_str(&b, "abc");
    assert_int_equal(serve_buf_reserve(&b, SIZE_MAX - 2), -1);
    assert_true(b.oom);
    serve_buf_str(&b, "def"); /* ignored: the renderer checks oom once */
    assert_int_equal(b.n, 3);
    assert_string_equal(b.p, "abc");
    assert_int_equal(serve_buf_reserve(&b, 1), -1);
    serve_buf_free(&b);
    assert_false(b.oom);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_and_cut),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_oom_sticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

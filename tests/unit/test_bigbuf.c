/*
 * test_bigbuf.c - src/bigbuf.c: large buffers are 2 MiB-aligned and
 * rounded up; an engine's kept buffer comes back to the next call, a
 * second call at once gets its own (freed when given back: ASan in `make
 * check SAN=1` sees a leak or a double free), a size above
 * CIS2_REUSE_KEEP is not kept, and two threads taking and giving at once
 * never share a buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bigbuf.h"

#define MIB ((size_t)1 << 20)

static void test_big_alloc(void **state)
{
    (void)state;
    size_t cap = 0;
    void *p = cis2_big_alloc(3 * MIB + 1, &cap);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % (2 * MIB), 0);
    assert_int_equal(cap, 4 * MIB);
    memset(p, 1, cap); /* all of it is ours */
    free(p);
    assert_null(cis2_big_alloc(SIZE_MAX - MIB, &cap)); /* absurd: refused, not wrapped */
}

static void test_reuse_between_calls(void **state)
{
    (void)state;
    cis2_reuse r;
    cis2_reuse_init(&r);
    void *a = cis2_reuse_take(&r, 5 * MIB);
    assert_non_null(a);
    void *b = cis2_reuse_take(&r, 5 * MIB); /* a call at once: its own */
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    cis2_reuse_give(&r, b);
    cis2_reuse_give(&r, a);
    assert_ptr_equal(cis2_reuse_take(&r, 4 * MIB), a); /* the next call: the same memory */
    cis2_reuse_give(&r, a);
    void *c = cis2_reuse_take(&r, 9 * MIB); /* larger: replaced */
    assert_non_null(c);
    memset(c, 2, 9 * MIB);
    cis2_reuse_give(&r, c);
    void *d = cis2_reuse_take(&r, CIS2_REUSE_KEEP + 1); /* above the limit: given, then not kept */
    assert_non_null(d);
    cis2_reuse_give(&r, d);
    assert_null(r.buf);
    void *e = cis2_reuse_take(&r, CIS2_REUSE_KEEP); /* at the limit, rounded: kept */
    cis2_reuse_give(&r, e);
    assert_ptr_equal(r.buf, e);
    cis2_reuse_give(&r, NULL);
    cis2_reuse_destroy(&r);
}

/* Two threads take, fill with their own byte, check it and give, many
 * times: a buffer handed to both at once would show the other's byte. */
struct racer { cis2_reuse *r; unsigned char mark; int bad; };

static void *race(void *arg)
{
    struct racer *t = arg;
    for (int i = 0; i < 200; i++) {
        unsigned char *p = cis2_reuse_take(t->r, MIB);
        if (!p) { t->bad = 1; break; }
        memset(p, t->mark, MIB);
        for (size_t k = 0; k < MIB; k += 4096)
            if (p[k] != t->mark) t->bad = 1;
        cis2_reuse_give(t->r, p);
    }
    return NULL;
}

static void test_reuse_two_threads(void **state)
{
    (void)state;
    cis2_reuse r;
    cis2_reuse_init(&r);
    struct racer t[2] = {{&r, 0xA5, 0}, {&r, 0x5A, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, race, &t[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_false(t[0].bad);
    assert_false(t[1].bad);
    cis2_reuse_destroy(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_alloc),
        cmocka_unit_test(test_reuse_between_calls),
        cmocka_unit_test(test_reuse_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

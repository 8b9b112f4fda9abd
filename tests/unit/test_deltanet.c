/*
 * test_deltanet.c - the recurrent state of the Gated DeltaNet layers
 * (docs/models.md §M10.4): a sequence's logits are the same bits whether
 * its rows run as one prefill pass, token by token (decode), or in passes
 * of any sizes; together with another sequence's rows, in blocks or
 * interleaved row by row; on 1, 2 or 3 threads; and on every kernel
 * variant this CPU runs.  The reference is the plainest route: token by
 * token, the scalar kernel, no pool.  Also: a row at a position other than
 * where its sequence's state stands is refused (CIS2_E_INTERNAL, never a
 * silent wrong answer), and position 0 starts the state afresh (what a
 * recomputation or a rewind relies on).
 *
 * The model is `cis2 synth --config tests/families/q35.json` (qwen3_5: 4
 * layers, three Gated DeltaNet and one gated full attention, GQA on both
 * kinds, dk 24 != dv 16), written with cis2_synth_write_config.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels.h"
#include "model.h"
#include "synth.h"
#include "threadpool.h"

#define TA 37 /* sequence A's tokens */
#define TB 29 /* sequence B's */

static char dir[4096];
static cis2_model M;
static size_t V;
static uint32_t tokA[TA], tokB[TB];
static float *refA, *refB; /* [T][V] each */

static void tokens(uint32_t *t, size_t n, uint32_t mul, uint32_t add)
{
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)((i * mul + add) % 509 + 1);
}

/* Feeds tok[from, to) of one sequence at their positions in passes of
 * sizes[0], sizes[1], ... (cycled), every row's logits into out + pos * V. */
static void run_passes(const cis2_ctx *cx, cis2_kv *kv, const uint32_t *tok, size_t from, size_t to,
                       const size_t *sizes, size_t nsizes, float *out)
{
    cis2_ws ws = {0};
    cis2_row rows[64];
    cis2_error err = {0};
    for (size_t p = from, k = 0; p < to; k++) {
        size_t n = sizes[k % nsizes];
        if (n > to - p) n = to - p;
        for (size_t i = 0; i < n; i++)
            rows[i] = (cis2_row){.kv = kv, .pos = p + i, .token = tok[p + i], .logits = out + (p + i) * V};
        assert_int_equal(cis2_forward(cx, &M, &ws, rows, n, NULL, NULL, &err), CIS2_OK);
        p += n;
    }
    cis2_ws_free(&ws);
}

static void same(const float *a, const float *b, size_t n, const char *what)
{
    if (memcmp(a, b, n * sizeof(float))) {
        size_t i = 0;
        while (i < n && !memcmp(a + i, b + i, sizeof(float))) i++;
        fail_msg("%s: logits differ at row %zu, element %zu", what, i / V, i % V);
    }
}

static int setup(void **state)
{
    (void)state;
    cis2_error err = {0};
    if (cis2_fpenv_pin(&err)) return -1;
    char root[4000];
    if (cis2_mkdtemp(root, sizeof root, "cis2-test-deltanet", &err)) return -1;
    snprintf(dir, sizeof dir, "%s/q35", root);
    if (cis2_synth_write_config("tests/families/q35.json", 3, dir, NULL, &err)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return -1;
    }
    cis2_ctx cx = cis2_ctx_solo();
    if (cis2_model_load(&cx, &M, dir, &err)) { fprintf(stderr, "load: %s\n", err.msg); return -1; }
    if (!M.state_floats || M.n_kv_layers != 1) { fprintf(stderr, "not the hybrid shape\n"); return -1; }
    V = M.vocab;
    tokens(tokA, TA, 37, 11);
    tokens(tokB, TB, 53, 5);
    refA = malloc(TA * V * sizeof(float));
    refB = malloc(TB * V * sizeof(float));
    if (!refA || !refB || cis2_kernel_find("scalar", &cx.kern, &err)) return -1;
    static const size_t one[1] = {1}; /* the reference: decode, token by token */
    cis2_kv kv;
    if (cis2_kv_init(&kv, &M, TA, &err)) return -1;
    run_passes(&cx, &kv, tokA, 0, TA, one, 1, refA);
    cis2_kv_free(&kv);
    if (cis2_kv_init(&kv, &M, TB, &err)) return -1;
    run_passes(&cx, &kv, tokB, 0, TB, one, 1, refB);
    cis2_kv_free(&kv);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cis2_model_free(&M);
    free(refA);
    free(refB);
    cis2_rmtree_tmp(dir);
    return 0;
}

/* One prefill pass, and passes of several sizes, on every kernel and 1-3
 * threads: the reference's bits. */
static void prefill_equals_decode(void **state)
{
    (void)state;
    static const char *const kernels[4] = {"scalar", "avx2", "avx512", "neon"};
    static const size_t whole[1] = {64}, mixed[4] = {3, 1, 7, 2}, fives[1] = {5};
    const size_t *plans[3] = {whole, mixed, fives};
    const size_t nplans[3] = {1, 4, 1};
    float *got = malloc(TA * V * sizeof(float));
    assert_non_null(got);
    int ran = 0;
    for (int k = 0; k < 4; k++) {
        if (!cis2_kernel_available(kernels[k])) continue;
        for (int t = 1; t <= 3; t++) {
            cis2_error err = {0};
            cis2_ctx cx = cis2_ctx_solo();
            assert_int_equal(cis2_kernel_find(kernels[k], &cx.kern, &err), CIS2_OK);
            if (t > 1) assert_int_equal(cis2_pool_create(&cx.pool, t, &err), CIS2_OK);
            for (int p = 0; p < 3; p++) {
                cis2_kv kv;
                assert_int_equal(cis2_kv_init(&kv, &M, TA, &err), CIS2_OK);
                memset(got, 0, TA * V * sizeof(float));
                run_passes(&cx, &kv, tokA, 0, TA, plans[p], nplans[p], got);
                char what[96];
                snprintf(what, sizeof what, "kernel %s, %d threads, plan %d", kernels[k], t, p);
                same(got, refA, TA * V, what);
                cis2_kv_free(&kv);
                ran++;
            }
            cis2_pool_destroy(cx.pool);
        }
    }
    assert_true(ran >= 9);
    free(got);
}

/* Two sequences in the same passes: in blocks (A's rows, then B's), and
 * interleaved row by row; each gets its reference's bits. */
static void batch_equals_solo(void **state)
{
    (void)state;
    cis2_error err = {0};
    cis2_ctx cx = cis2_ctx_solo();
    assert_int_equal(cis2_pool_create(&cx.pool, 2, &err), CIS2_OK);
    float *ga = malloc(TA * V * sizeof(float)), *gb = malloc(TB * V * sizeof(float));
    float *lg = malloc(64 * V * sizeof(float));
    assert_true(ga && gb && lg);
    for (int interleave = 0; interleave < 2; interleave++) {
        cis2_kv a, b;
        assert_int_equal(cis2_kv_init(&a, &M, TA, &err), CIS2_OK);
        assert_int_equal(cis2_kv_init(&b, &M, TB, &err), CIS2_OK);
        cis2_ws ws = {0};
        size_t pa = 0, pb = 0, step = 0;
        while (pa < TA || pb < TB) {
            size_t na = 1 + step % 6, nb = 1 + (step * 5) % 7; /* this pass's rows of each */
            if (na > TA - pa) na = TA - pa;
            if (nb > TB - pb) nb = TB - pb;
            cis2_row rows[16];
            size_t n = 0, ia = 0, ib = 0;
            while (ia < na || ib < nb) {
                int takeA = ia < na && (!interleave ? 1 : (ib >= nb || (ia + ib) % 2 == 0));
                if (takeA) { rows[n] = (cis2_row){.kv = &a, .pos = pa + ia, .token = tokA[pa + ia]}; ia++; }
                else { rows[n] = (cis2_row){.kv = &b, .pos = pb + ib, .token = tokB[pb + ib]}; ib++; }
                rows[n].logits = lg + n * V;
                n++;
            }
            assert_int_equal(cis2_forward(&cx, &M, &ws, rows, n, NULL, NULL, &err), CIS2_OK);
            for (size_t r = 0; r < n; r++)
                memcpy((rows[r].kv == &a ? ga : gb) + rows[r].pos * V, lg + r * V, V * sizeof(float));
            pa += na;
            pb += nb;
            step++;
        }
        same(ga, refA, TA * V, interleave ? "A interleaved with B" : "A beside B");
        same(gb, refB, TB * V, interleave ? "B interleaved with A" : "B beside A");
        cis2_ws_free(&ws);
        cis2_kv_free(&a);
        cis2_kv_free(&b);
    }
    cis2_pool_destroy(cx.pool);
    free(ga);
    free(gb);
    free(lg);
}

/* A row that does not continue its state is refused; position 0 starts
 * afresh, whatever the state held. */
static void state_positions(void **state)
{
    (void)state;
    cis2_error err = {0};
    cis2_ctx cx = cis2_ctx_solo();
    cis2_kv kv;
    assert_int_equal(cis2_kv_init(&kv, &M, TA, &err), CIS2_OK);
    float *got = malloc(TA * V * sizeof(float));
    assert_non_null(got);
    static const size_t four[1] = {4};
    run_passes(&cx, &kv, tokA, 0, 10, four, 1, got);
    assert_int_equal(kv.state_pos, 10);
    cis2_row r = {.kv = &kv, .pos = 8, .token = tokA[8], .logits = got};
    err = (cis2_error){0};
    assert_int_equal(cis2_forward(&cx, &M, NULL, &r, 1, NULL, NULL, &err), CIS2_E_INTERNAL);
    assert_non_null(strstr(err.msg, "recurrent state"));
    r.pos = 11; /* a gap */
    assert_int_equal(cis2_forward(&cx, &M, NULL, &r, 1, NULL, NULL, &err), CIS2_E_INTERNAL);
    cis2_row two[2] = {{.kv = &kv, .pos = 10, .token = 1}, {.kv = &kv, .pos = 12, .token = 1}}; /* a gap inside */
    assert_int_equal(cis2_forward(&cx, &M, NULL, two, 2, NULL, NULL, &err), CIS2_E_INTERNAL);
    /* from 0 again, over the same cache: the reference */
    memset(got, 0, TA * V * sizeof(float));
    run_passes(&cx, &kv, tokA, 0, TA, four, 1, got);
    same(got, refA, TA * V, "again from position 0");
    cis2_kv_free(&kv);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prefill_equals_decode),
        cmocka_unit_test(batch_equals_solo),
        cmocka_unit_test(state_positions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

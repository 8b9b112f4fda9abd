/*
 * test_engine.c - the engine API in process (include/cis2.h sections 3-7),
 * on synthetic checkpoints written by cis2_synth_write into $TMPDIR.
 *
 * Oracles, none of them the code under test:
 *   - the witness chain (§12.1) and argmax digest (§12.2) recomputed here
 *     with OpenSSL from the logits the token callback streams, in the
 *     order the spec (and FACTS §1.11) gives;
 *   - §11.2's argmax written out here, against every chosen token;
 *   - one request decoded alone is the reference for the same request in
 *     a batch, in a session it joins or leaves mid-decode, in a recompute
 *     run without the KV cache, and at other thread counts and kernels;
 *   - verify's decode replay (the run again, token by token) is the
 *     reference for its prefill replay in many small passes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "cis2.h"
#include "verify.h"  /* cis2_verify_ex: pass limits, rows computed */
#include "receipt.h" /* struct cis2_receipt: claims doctored in place */
#include "model.h"   /* cis2_kv_bytes, cis2_kv_fits */

static char root[4096], dir_tiny[4200], dir_qwen[4200], dir_odd[4200];

static int setup(void **state)
{
    (void)state;
    cis2_error err = {0};
    if (cis2_mkdtemp(root, sizeof root, "cis2-test-engine", &err)) return -1;
    snprintf(dir_tiny, sizeof dir_tiny, "%s/tiny", root);
    snprintf(dir_qwen, sizeof dir_qwen, "%s/qwen", root);
    snprintf(dir_odd, sizeof dir_odd, "%s/odd", root);
    if (cis2_synth_write("tiny", 7, dir_tiny, NULL, &err) || cis2_synth_write("tiny-qwen", 3, dir_qwen, NULL, &err) ||
        cis2_synth_write("odd", 5, dir_odd, NULL, &err)) {
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

static cis2_engine *open_engine(const char *dir, int threads, const char *kernel)
{
    cis2_engine *e = NULL;
    cis2_error err = {0};
    cis2_engine_opts o = {.threads = threads, .kernel = kernel};
    int rc = cis2_engine_open(&e, dir, &o, &err);
    if (rc) fprintf(stderr, "open %s: %s\n", dir, err.msg);
    assert_int_equal(rc, CIS2_OK);
    return e;
}

/* ------------------------------------------- the independent witness */

typedef struct witness_cb {
    EVP_MD_CTX *w[8];        /* per request */
    size_t vocab;
    int argmax_bad;          /* a chosen token that is not §11.2's argmax */
    size_t events;
} witness_cb;

static size_t argmax_here(const float *v, size_t n) /* §11.2: strict >, first occurrence */
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* The one KV-size formula (docs/inputs.md "Memory"), by hand: k and v, 4
 * bytes each, per attention layer, per position rounded up to 16, per
 * kv_dim; plus a recurrent state's floats (docs/models.md §M10.4). */
static void test_kv_bytes(void **state)
{
    (void)state;
    cis2_model m;
    memset(&m, 0, sizeof m);
    m.n_layers = m.n_kv_layers = 30;
    m.kv_dim = 192; /* SmolLM2-135M: 3 kv heads of 64 */
    assert_int_equal(cis2_kv_bytes(&m, 1), 2 * 4 * 30 * 16 * 192);
    assert_int_equal(cis2_kv_bytes(&m, 16), 2 * 4 * 30 * 16 * 192);
    assert_int_equal(cis2_kv_bytes(&m, 17), 2 * 4 * 30 * 32 * 192);
    assert_int_equal(cis2_kv_bytes(&m, 0), 0);
    assert_true(cis2_kv_bytes(&m, SIZE_MAX) == SIZE_MAX);       /* the rounding would wrap */
    assert_true(cis2_kv_bytes(&m, SIZE_MAX / 64) == SIZE_MAX);  /* the product would */
    m.n_layers = m.n_kv_layers = 1;
    m.kv_dim = 1;
    assert_true(cis2_kv_bytes(&m, SIZE_MAX / 8 - 15) == (SIZE_MAX / 8 - 15 + 15) / 16 * 16 * 8);
    /* Qwen3.5-0.8B: 24 layers of which 6 attend (kv_dim 512), and 18 linear layers' state of 280576 floats */
    m.n_layers = 24;
    m.n_kv_layers = 6;
    m.kv_dim = 512;
    m.state_floats = 18 * 280576;
    assert_int_equal(cis2_kv_bytes(&m, 1), 2 * 4 * 6 * 16 * 512 + 4 * 18 * 280576);
    assert_int_equal(cis2_kv_bytes(&m, 0), 4 * 18 * 280576);
    m.state_floats = SIZE_MAX / 2;
    assert_true(cis2_kv_bytes(&m, 1) == SIZE_MAX);
    assert_true(cis2_kv_fits(0, 10, 10) && !cis2_kv_fits(1, 10, 10) && !cis2_kv_fits(11, 0, 10));
    assert_true(!cis2_kv_fits(5, SIZE_MAX, SIZE_MAX - 1) && !cis2_kv_fits(SIZE_MAX, 1, SIZE_MAX));
}

static void put_u32(EVP_MD_CTX *c, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    EVP_DigestUpdate(c, b, 4);
}

static int wcb(void *ctx, const cis2_token_event *ev)
{
    witness_cb *c = ctx;
    c->events++;
    if (ev->token != argmax_here(ev->logits, ev->vocab)) c->argmax_bad = 1;
    EVP_MD_CTX *w = c->w[ev->seq];
    for (size_t i = 0; i < ev->vocab; i++) { /* §12.1 7a: bits LE; NaN as 0x7FC00000 (docs/arithmetic.md) */
        uint32_t b;
        memcpy(&b, &ev->logits[i], 4);
        if (ev->logits[i] != ev->logits[i]) b = 0x7FC00000u;
        put_u32(w, b);
    }
    put_u32(w, ev->token); /* 7b */
    return 0;
}

static void witness_start(EVP_MD_CTX *w, const cis2_model_info *mi, const uint32_t *ids, size_t n)
{
    EVP_DigestInit_ex(w, EVP_sha256(), NULL);
    EVP_DigestUpdate(w, mi->weights_sha256, 32);   /* items 1-5, FACTS §1.11 order */
    EVP_DigestUpdate(w, mi->tokenizer_sha256, 32);
    EVP_DigestUpdate(w, mi->config_sha256, 32);
    EVP_DigestUpdate(w, mi->table_digest, 32);
    EVP_DigestUpdate(w, mi->inv_freq_table_digest, 32);
    for (size_t i = 0; i < n; i++) put_u32(w, ids[i]); /* item 6 */
}

static void test_witness_independent(void **state)
{
    (void)state;
    cis2_engine *e = open_engine(dir_tiny, 2, NULL);
    const cis2_model_info *mi = cis2_engine_info(e);
    uint32_t p0[] = {5, 6, 7}, p1[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    cis2_request q[2] = {{.ids = p0, .n_ids = 3, .max_tokens = 9}, {.ids = p1, .n_ids = 10, .max_tokens = 4}};
    witness_cb cb = {.vocab = mi->vocab_size};
    for (int i = 0; i < 2; i++) {
        cb.w[i] = EVP_MD_CTX_new();
        witness_start(cb.w[i], mi, q[i].ids, q[i].n_ids);
    }
    cis2_gen_opts o = {.twice = 1, .on_token = wcb, .on_token_ctx = &cb};
    cis2_result *r;
    cis2_error err = {0};
    assert_int_equal(cis2_generate(e, q, 2, &o, &r, &err), CIS2_OK);
    assert_int_equal(cb.events, 13); /* the §12.4 copy is silent */
    assert_false(cb.argmax_bad);
    for (int i = 0; i < 2; i++) {
        unsigned char d[32], a[32];
        unsigned len;
        EVP_DigestFinal_ex(cb.w[i], d, &len);
        EVP_MD_CTX_free(cb.w[i]);
        assert_memory_equal(d, r[i].witness, 32);
        EVP_MD_CTX *ac = EVP_MD_CTX_new(); /* §12.2: prompt ++ generated, u32 LE */
        EVP_DigestInit_ex(ac, EVP_sha256(), NULL);
        for (size_t k = 0; k < r[i].n_prompt; k++) put_u32(ac, r[i].prompt_ids[k]);
        for (size_t k = 0; k < r[i].n_tokens; k++) put_u32(ac, r[i].tokens[k]);
        EVP_DigestFinal_ex(ac, a, &len);
        EVP_MD_CTX_free(ac);
        assert_memory_equal(a, r[i].argmax_digest, 32);
        assert_int_equal(r[i].n_tokens, q[i].max_tokens);
        assert_int_equal(r[i].finish, CIS2_FINISH_LENGTH);
    }
    cis2_results_free(r, 2);
    cis2_engine_close(e);
}

/* ----------------------------------------------- solo is the reference */

static void solo(cis2_engine *e, const cis2_request *q, cis2_result **r)
{
    cis2_error err = {0};
    int rc = cis2_generate(e, q, 1, NULL, r, &err);
    if (rc) fprintf(stderr, "solo: %s\n", err.msg);
    assert_int_equal(rc, CIS2_OK);
}

static void same(const cis2_result *a, const cis2_result *b)
{
    assert_int_equal(a->n_tokens, b->n_tokens);
    assert_memory_equal(a->tokens, b->tokens, a->n_tokens * sizeof(uint32_t));
    assert_memory_equal(a->witness, b->witness, 32);
    assert_memory_equal(a->argmax_digest, b->argmax_digest, 32);
    assert_int_equal(a->n_prompt, b->n_prompt);
    assert_memory_equal(a->prompt_ids, b->prompt_ids, a->n_prompt * sizeof(uint32_t));
}

#define NREQ 6
static uint32_t prompts[NREQ][40];
static cis2_request reqs[NREQ];

static void make_requests(size_t vocab)
{
    static const size_t lens[NREQ] = {1, 3, 17, 40, 5, 9}, gens[NREQ] = {7, 1, 12, 3, 20, 6};
    uint64_t s = 12345;
    for (int i = 0; i < NREQ; i++) {
        for (size_t k = 0; k < lens[i]; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            prompts[i][k] = (uint32_t)((s >> 33) % vocab);
        }
        reqs[i] = (cis2_request){.ids = prompts[i], .n_ids = lens[i], .max_tokens = gens[i]};
    }
}

static void check_batch_equals_solo(const char *dir)
{
    cis2_engine *e = open_engine(dir, 2, NULL);
    make_requests(cis2_engine_info(e)->vocab_size);
    cis2_result *ref[NREQ], *batch;
    for (int i = 0; i < NREQ; i++) solo(e, &reqs[i], &ref[i]);
    cis2_error err = {0};
    /* one batch; a batch of 2 at a time (continuous admission); recompute */
    cis2_gen_opts o1 = {0}, o2 = {.max_batch = 2}, o3 = {.recompute = 1, .twice = 1};
    const cis2_gen_opts *os[3] = {&o1, &o2, &o3};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(cis2_generate(e, reqs, NREQ, os[k], &batch, &err), CIS2_OK);
        for (int i = 0; i < NREQ; i++) same(ref[i], &batch[i]);
        cis2_results_free(batch, NREQ);
    }
    cis2_engine_close(e);
    /* other thread counts and kernels: the same bits */
    static const char *kernels[] = {"scalar", "avx2", "avx512", "neon"};
    for (int k = 0; k < 4; k++) {
        if (!cis2_kernel_available(kernels[k])) continue;
        e = open_engine(dir, k % 2 ? 1 : 3, kernels[k]);
        assert_int_equal(cis2_generate(e, reqs, NREQ, NULL, &batch, &err), CIS2_OK);
        for (int i = 0; i < NREQ; i++) same(ref[i], &batch[i]);
        cis2_results_free(batch, NREQ);
        cis2_engine_close(e);
    }
    for (int i = 0; i < NREQ; i++) cis2_results_free(ref[i], 1);
}

static void test_batch_equals_solo(void **state)
{
    (void)state;
    check_batch_equals_solo(dir_tiny);
    check_batch_equals_solo(dir_qwen);
    check_batch_equals_solo(dir_odd);
}

/* Sequences join a running session at different steps, one is cancelled,
 * prompts are prefilled in small chunks: every finished one equals its
 * solo run. */
static int count_cb(void *ctx, const cis2_token_event *ev)
{
    size_t *n = ctx;
    (void)ev;
    (*n)++;
    return 0;
}

static void test_session_join_leave(void **state)
{
    (void)state;
    cis2_engine *e = open_engine(dir_qwen, 2, NULL);
    make_requests(cis2_engine_info(e)->vocab_size);
    cis2_result *ref[NREQ];
    for (int i = 0; i < NREQ; i++) solo(e, &reqs[i], &ref[i]);
    size_t events = 0;
    cis2_session_opts so = {.max_batch = 3, .prefill_chunk = 7, .on_token = count_cb, .on_token_ctx = &events};
    cis2_session *s;
    cis2_error err = {0};
    assert_int_equal(cis2_session_open(&s, e, &so, &err), CIS2_OK);
    uint64_t id[NREQ + 1];
    size_t running = 0, added = 0;
    int step = 0;
    uint32_t extra[] = {9, 9, 9};
    cis2_request doomed = {.ids = extra, .n_ids = 3, .max_tokens = 50};
    assert_int_equal(cis2_session_add(s, &doomed, &id[NREQ], &err), CIS2_OK);
    while (added < NREQ || cis2_session_pending(s)) {
        if (added < NREQ && step % 3 == 0) { /* a new request every third step */
            assert_int_equal(cis2_session_add(s, &reqs[added], &id[added], &err), CIS2_OK);
            added++;
        }
        if (step == 5) assert_int_equal(cis2_session_cancel(s, id[NREQ]), CIS2_OK);
        assert_int_equal(cis2_session_step(s, &running, &err), CIS2_OK);
        step++;
        assert_true(step < 1000);
    }
    assert_int_equal(running, 0);
    for (int i = 0; i < NREQ; i++) {
        assert_int_equal(cis2_session_done(s, id[i]), 1);
        cis2_result *r;
        assert_int_equal(cis2_session_take(s, id[i], &r, &err), CIS2_OK);
        same(ref[i], r);
        cis2_results_free(r, 1);
        cis2_results_free(ref[i], 1);
    }
    cis2_result *c;
    assert_int_equal(cis2_session_take(s, id[NREQ], &c, &err), CIS2_OK);
    assert_int_equal(c->finish, CIS2_FINISH_CANCELLED);
    assert_true(c->n_tokens < 50);
    cis2_results_free(c, 1);
    assert_int_equal(cis2_session_done(s, id[NREQ]), -1); /* taken */
    cis2_session_close(s);
    cis2_engine_close(e);
}

/* Receipts made in process verify in process, by both replays; a doctored
 * token is named at its step by both. */
static void test_receipt_round_trip(void **state)
{
    (void)state;
    cis2_engine *e = open_engine(dir_tiny, 2, NULL);
    cis2_request q = {.text = "Once upon a time", .text_len = 16, .max_tokens = 8};
    cis2_result *r;
    cis2_error err = {0};
    assert_int_equal(cis2_generate(e, &q, 1, NULL, &r, &err), CIS2_OK);
    cis2_receipt *rc;
    assert_int_equal(cis2_receipt_make(e, r, &rc, &err), CIS2_OK);
    char *text;
    size_t len;
    assert_int_equal(cis2_receipt_render(rc, &text, &len, &err), CIS2_OK);
    assert_true(!strncmp(text, "CIS-2-RECEIPT v1\n", 17));
    char hex[65];
    cis2_hex(r->witness, 32, hex);
    assert_string_equal(cis2_receipt_get(rc, "witness-digest"), hex);
    assert_null(cis2_receipt_get(rc, "no-such-key"));
    for (int mode = 0; mode < 2; mode++) {
        cis2_verify_opts vo = {.replay = mode};
        cis2_verdict *v;
        assert_int_equal(cis2_verify(e, &rc, 1, &vo, &v, &err), CIS2_OK);
        assert_int_equal(v->kind, CIS2_VERDICT_OK);
        assert_int_equal(v->code, 0);
        assert_int_equal(v->first_bad_step, -1);
        cis2_verdicts_free(v, 1);
    }
    /* doctor step 3's token in the text and parse it back */
    char *gen = strstr(text, "generated-token-ids ");
    assert_non_null(gen);
    char *p = gen + strlen("generated-token-ids ");
    for (int k = 0; k < 3; k++) p = strchr(p, ',') + 1;
    char *q2 = p;
    while (*q2 != ',' && *q2 != '\n') q2++;
    char doctored[4096];
    snprintf(doctored, sizeof doctored, "%.*s%u%s", (int)(p - text), text, r->tokens[3] == 1 ? 2u : 1u, q2);
    cis2_receipt *bad;
    assert_int_equal(cis2_receipt_parse(doctored, strlen(doctored), "doctored", &bad, &err), CIS2_OK);
    for (int mode = 0; mode < 2; mode++) {
        cis2_verify_opts vo = {.replay = mode};
        cis2_verdict *v;
        assert_int_equal(cis2_verify(e, &bad, 1, &vo, &v, &err), CIS2_OK);
        assert_int_equal(v->kind, CIS2_VERDICT_OUTPUT_MISMATCH);
        assert_int_equal(v->code, CIS2_E_MISMATCH);
        assert_int_equal(v->first_bad_step, 3);
        assert_int_equal(v->expected_token, r->tokens[3]);
        assert_string_equal(v->summary, "OUTPUT-MISMATCH (generated-token-ids)"); /* the digests are the true decode's */
        cis2_verdicts_free(v, 1);
    }
    cis2_receipt_free(bad);
    cis2_free(text);
    cis2_receipt_free(rc);
    cis2_results_free(r, 1);
    cis2_engine_close(e);
}

static void test_bad_requests(void **state)
{
    (void)state;
    cis2_engine *e = open_engine(dir_tiny, 1, NULL);
    cis2_error err = {0};
    cis2_result *r;
    uint32_t ids[] = {1, 2}, big[] = {1, 999999};
    cis2_request q0 = {.ids = ids, .n_ids = 2, .max_tokens = 0};
    assert_int_equal(cis2_generate(e, &q0, 1, NULL, &r, &err), CIS2_E_USAGE);
    err = (cis2_error){0};
    cis2_request q1 = {.ids = big, .n_ids = 2, .max_tokens = 1};
    assert_int_equal(cis2_generate(e, &q1, 1, NULL, &r, &err), CIS2_E_USAGE);
    err = (cis2_error){0};
    cis2_request q2 = {.ids = ids, .n_ids = 2, .max_tokens = 100000};
    assert_int_equal(cis2_generate(e, &q2, 1, NULL, &r, &err), CIS2_E_UNSUPPORTED);
    err = (cis2_error){0};
    cis2_request q3 = {.text = "\xff", .text_len = 1, .max_tokens = 1};
    assert_int_equal(cis2_generate(e, &q3, 1, NULL, &r, &err), CIS2_E_FORMAT);
    err = (cis2_error){0};
    assert_int_equal(cis2_generate(e, &q0, 0, NULL, &r, &err), CIS2_E_USAGE);
    err = (cis2_error){0};
    cis2_engine *none = NULL;
    assert_int_equal(cis2_engine_open(&none, "/nonexistent/dir", NULL, &err), CIS2_E_IO);
    assert_null(none);
    err = (cis2_error){0};
    assert_int_equal(cis2_engine_open(&none, "", NULL, &err), CIS2_E_USAGE);
    err = (cis2_error){0};
    uint8_t wrong[32] = {0};
    cis2_engine_opts o = {.expect_weights_sha256 = wrong};
    assert_int_equal(cis2_engine_open(&none, dir_tiny, &o, &err), CIS2_E_HASH);
    assert_non_null(strstr(err.msg, "model.safetensors"));
    cis2_engine_close(e);
}

/* The prefill replay in many small passes (cis2_verify_ex's limits): claims
 * judged across pass edges, the decode after a bad step, stop rules, and
 * each pass's §12.1 hashing on the hasher thread while the next pass
 * computes.  Every verdict, field by field, is the decode replay's (the
 * run again, token by token, no passes), alone and in a batch. */
static void same_verdict(const cis2_verdict *a, const cis2_verdict *b)
{
    assert_string_equal(a->summary, b->summary);
    assert_int_equal(a->code, b->code);
    assert_int_equal(a->first_bad_step, b->first_bad_step);
    assert_int_equal(a->claimed_token, b->claimed_token);
    assert_int_equal(a->expected_token, b->expected_token);
    assert_int_equal(a->claimed_logit_bits, b->claimed_logit_bits);
    assert_int_equal(a->expected_logit_bits, b->expected_logit_bits);
    assert_int_equal(a->n_fields, b->n_fields);
    for (size_t i = 0; i < a->n_fields; i++) {
        assert_string_equal(a->fields[i].key, b->fields[i].key);
        assert_string_equal(a->fields[i].detail, b->fields[i].detail);
    }
}

static cis2_receipt *receipt_copy(const cis2_receipt *r, const char *name)
{
    char *text;
    size_t len;
    cis2_receipt *c;
    cis2_error err = {0};
    assert_int_equal(cis2_receipt_render(r, &text, &len, &err), CIS2_OK);
    assert_int_equal(cis2_receipt_parse(text, len, name, &c, &err), CIS2_OK);
    cis2_free(text);
    return c;
}

static void test_verify_passes(void **state)
{
    (void)state;
    cis2_engine *e = open_engine(dir_tiny, 2, NULL);
    cis2_error err = {0};
    uint32_t p0[] = {5, 6, 7}, p1[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, p2[] = {42};
    cis2_sampling hot = {.temperature = 0.8f, .top_p = 0.9f, .seed = 11};
    cis2_request q[4] = {{.ids = p0, .n_ids = 3, .max_tokens = 61},
                         {.ids = p1, .n_ids = 10, .max_tokens = 17},
                         {.ids = p2, .n_ids = 1, .max_tokens = 40, .sampling = &hot},
                         {.ids = p1, .n_ids = 10, .max_tokens = 45, .sampling = &hot}};
    cis2_result *r;
    assert_int_equal(cis2_generate(e, q, 4, NULL, &r, &err), CIS2_OK);
    /* the last one again, stopping at its own 21st token: a stop rule that fires in a late pass */
    uint32_t stop_id = r[3].tokens[20];
    cis2_stop st = {.ids = &stop_id, .n_ids = 1};
    q[3].stop = &st;
    cis2_result *r3;
    assert_int_equal(cis2_generate(e, &q[3], 1, NULL, &r3, &err), CIS2_OK);
    assert_int_equal(r3->finish, CIS2_FINISH_STOP_ID);
    enum { NR = 12 };
    cis2_receipt *rc[NR];
    for (int i = 0; i < 3; i++) assert_int_equal(cis2_receipt_make(e, &r[i], &rc[i], &err), CIS2_OK);
    assert_int_equal(cis2_receipt_make(e, r3, &rc[3], &err), CIS2_OK);
    /* doctored claims: receipt 0 at steps 0, 7, 8, 30 and 60 (its last); the
     * sampled one at step 25; the stopped one's stop token; a witness */
    static const int from[] = {0, 0, 0, 0, 0, 2, 3}, step[] = {0, 7, 8, 30, 60, 25, -1};
    for (int k = 0; k < 7; k++) {
        char name[32];
        snprintf(name, sizeof name, "doctored-%d", k);
        cis2_receipt *c = rc[4 + k] = receipt_copy(rc[from[k]], name);
        size_t s = step[k] >= 0 ? (size_t)step[k] : c->gen_toks - 1;
        c->generated[s] = c->generated[s] == 1 ? 2 : 1;
    }
    rc[11] = receipt_copy(rc[1], "doctored-witness");
    rc[11]->witness[5] ^= 0x10;
    cis2_verdict *ref[NR];
    cis2_verify_opts dec = {.replay = CIS2_REPLAY_DECODE};
    for (int i = 0; i < NR; i++) assert_int_equal(cis2_verify(e, &rc[i], 1, &dec, &ref[i], &err), CIS2_OK);
    assert_int_equal(ref[0]->kind, CIS2_VERDICT_OK);
    assert_int_equal(ref[3]->kind, CIS2_VERDICT_OK);
    assert_int_equal(ref[6]->first_bad_step, 8);
    assert_int_equal(ref[11]->kind, CIS2_VERDICT_OUTPUT_MISMATCH);
    static const size_t limits[][2] = {{0, 0}, {16, 5}, {7, 3}, {40, 1}, {256, 16}};
    for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
        const cis2_verify_limits lim = {limits[l][0], limits[l][1]};
        cis2_verdict *v;
        assert_int_equal(cis2_verify_ex(e, rc, NR, NULL, &lim, NULL, &v, &err), CIS2_OK); /* all together */
        for (int i = 0; i < NR; i++) same_verdict(&v[i], ref[i]);
        cis2_verdicts_free(v, NR);
        for (int i = 0; i < NR; i++) { /* and each alone */
            assert_int_equal(cis2_verify_ex(e, &rc[i], 1, NULL, &lim, NULL, &v, &err), CIS2_OK);
            same_verdict(v, ref[i]);
            cis2_verdicts_free(v, 1);
        }
    }
    cis2_engine *one = open_engine(dir_tiny, 1, NULL); /* one thread: the hashing inline */
    const cis2_verify_limits small = {16, 5};
    cis2_verdict *v1;
    assert_int_equal(cis2_verify_ex(one, rc, NR, NULL, &small, NULL, &v1, &err), CIS2_OK);
    for (int i = 0; i < NR; i++) same_verdict(&v1[i], ref[i]);
    cis2_verdicts_free(v1, NR);
    cis2_engine_close(one);
    for (int i = 0; i < NR; i++) {
        cis2_verdicts_free(ref[i], 1);
        cis2_receipt_free(rc[i]);
    }
    cis2_results_free(r, 4);
    cis2_results_free(r3, 1);
    cis2_engine_close(e);
}

/* Shared prompt prefixes (verify_plan.c's rule, share.h's plan, run by
 * prefill.c): a batch whose prompts begin alike computes the common prefix
 * once.  The rule, from verify_plan.c's comment: in a run of prompts
 * sorted by ids, the longest one donates the positions before either's
 * last prompt token, when they are at least 16.
 * Every verdict, field by field, is the decode replay's alone (honest,
 * doctored, sampled, pass edges inside the prefix), and the rows the batch
 * computes are the rows of each alone (prompt + tokens - 1) less the
 * shares this rule gives, worked out here by hand. */
static void test_verify_shared_prefix(void **state)
{
    (void)state;
    cis2_engine *e = open_engine(dir_tiny, 2, NULL);
    cis2_error err = {0};
    uint32_t A[40], B[34], C[12];
    /* letters: tiny's byte-level tokenizer (no merges) has id = byte, so they round-trip */
    for (uint32_t i = 0; i < 40; i++) A[i] = 'a' + i * 7 % 26;
    memcpy(B, A, 30 * sizeof *B);
    for (uint32_t i = 30; i < 34; i++) B[i] = 'A' + i - 30; /* B[30] = 'A' < A[30] = 'c' */
    for (uint32_t i = 0; i < 12; i++) C[i] = 'Z' - i;
    cis2_sampling s[4];
    for (int i = 0; i < 4; i++) s[i] = (cis2_sampling){.temperature = 0.9f, .top_p = 1.0f, .seed = (uint64_t)i + 1};
    enum { NH = 9, NR = 13 };
    const cis2_request q[NH] = {
        {.ids = A, .n_ids = 40, .max_tokens = 20},                    /* the donor: longest, first */
        {.ids = A, .n_ids = 40, .max_tokens = 25, .sampling = &s[0]}, /* shares 39 */
        {.ids = A, .n_ids = 40, .max_tokens = 9, .sampling = &s[1]},  /* 39 */
        {.ids = A, .n_ids = 40, .max_tokens = 30, .sampling = &s[2]}, /* 39 */
        {.ids = A, .n_ids = 17, .max_tokens = 12},                    /* 16 */
        {.ids = A, .n_ids = 16, .max_tokens = 12},                    /* 15: too few, none */
        {.ids = A, .n_ids = 20, .max_tokens = 15, .sampling = &s[3]}, /* 19 */
        {.ids = B, .n_ids = 34, .max_tokens = 14},                    /* 30 */
        {.ids = C, .n_ids = 12, .max_tokens = 10},                    /* its own run */
    };
    const size_t share = 39 * 3 + 16 + 19 + 30;
    size_t alone = 0;
    for (int i = 0; i < NH; i++) alone += q[i].n_ids + q[i].max_tokens - 1;
    cis2_result *r;
    assert_int_equal(cis2_generate(e, q, NH, NULL, &r, &err), CIS2_OK);
    cis2_receipt *rc[NR];
    for (int i = 0; i < NH; i++) assert_int_equal(cis2_receipt_make(e, &r[i], &rc[i], &err), CIS2_OK);
    rc[9] = receipt_copy(rc[1], "doctored-step-0");
    rc[9]->generated[0] ^= 1;
    rc[10] = receipt_copy(rc[3], "doctored-step-12");
    rc[10]->generated[12] ^= 1;
    rc[11] = receipt_copy(rc[0], "doctored-witness");
    rc[11]->witness[0] ^= 1;
    rc[12] = receipt_copy(rc[6], "doctored-last");
    rc[12]->generated[14] ^= 1;
    cis2_verdict *ref[NR];
    cis2_verify_opts dec = {.replay = CIS2_REPLAY_DECODE};
    for (int i = 0; i < NR; i++) assert_int_equal(cis2_verify(e, &rc[i], 1, &dec, &ref[i], &err), CIS2_OK);
    for (int i = 0; i < NH; i++) assert_int_equal(ref[i]->kind, CIS2_VERDICT_OK);
    assert_int_equal(ref[9]->first_bad_step, 0);
    assert_int_equal(ref[10]->first_bad_step, 12);
    assert_int_equal(ref[11]->kind, CIS2_VERDICT_OUTPUT_MISMATCH);
    assert_int_equal(ref[12]->first_bad_step, 14);
    static const size_t limits[][2] = {{0, 0}, {16, 5}, {7, 3}, {40, 1}};
    cis2_engine *one = open_engine(dir_tiny, 1, NULL); /* and on one thread */
    for (size_t l = 0; l < 2 * sizeof limits / sizeof limits[0]; l++) {
        cis2_engine *x = l % 2 ? one : e;
        const cis2_verify_limits lim = {limits[l / 2][0], limits[l / 2][1]};
        cis2_verdict *v;
        size_t rows = 0;
        assert_int_equal(cis2_verify_ex(x, rc, NH, NULL, &lim, &rows, &v, &err), CIS2_OK); /* the honest ones */
        assert_int_equal(rows, alone - share);
        for (int i = 0; i < NH; i++) same_verdict(&v[i], ref[i]);
        cis2_verdicts_free(v, NH);
        assert_int_equal(cis2_verify_ex(x, rc, NR, NULL, &lim, NULL, &v, &err), CIS2_OK); /* with the doctored */
        for (int i = 0; i < NR; i++) same_verdict(&v[i], ref[i]);
        cis2_verdicts_free(v, NR);
    }
    cis2_engine_close(one);
    for (int i = 0; i < NR; i++) {
        cis2_verdicts_free(ref[i], 1);
        cis2_receipt_free(rc[i]);
    }
    cis2_results_free(r, NH);
    cis2_engine_close(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_bytes),
        cmocka_unit_test(test_witness_independent),
        cmocka_unit_test(test_batch_equals_solo),
        cmocka_unit_test(test_session_join_leave),
        cmocka_unit_test(test_receipt_round_trip),
        cmocka_unit_test(test_verify_passes),
        cmocka_unit_test(test_verify_shared_prefix),
        cmocka_unit_test(test_bad_requests),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_concurrency.c - one engine, every kind of public call against every
 * other from two threads at once (include/cis2.h Conventions, "Threads";
 * docs/architecture.md "Rules of the house"), and all of them together
 * from four.
 *
 * The oracle is the same call made alone on the engine before any thread
 * starts: a generate's or a session's witness (§12.1) and tokens, a
 * verify's verdicts (kind, summary, first bad step), a tokenize's ids, a
 * receipt's rendered text, a score's logprob bits and sums and its score
 * receipts' text (docs/sampling.md §S11, docs/receipts.md "Score
 * receipts"), and their verification.  Results never depend on what else runs
 * (§3.5), so every concurrent call must give its reference's bits; a data
 * race that corrupts shared state (the verifier's background hashing once
 * rode the engine's shared pool and crashed the server) shows as a
 * mismatch, a crash, or under `make tsan` as a ThreadSanitizer report.
 *
 * Bounded: each thread of a pair repeats its call ROUNDS times on a tiny
 * synthetic checkpoint, so the test takes seconds (tens under TSan).
 *
 * Also here, since a server stops a verification from another thread:
 * cis2_verify_opts.should_stop and on_step cancel a verify at a pass (or
 * decode step) boundary, counted against the passes the
 * pass limits imply.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cis2.h"
#include "verify.h"  /* cis2_verify_ex: many small passes, so the hasher runs */
#include "receipt.h" /* struct cis2_receipt: a claim doctored in place */

#define ROUNDS 3
#define NPROMPT 2

static char root[4096], dir_tiny[4200];
/* Every verify here runs in many passes (cis2_verify_ex's limits, per
 * call): the hashing runs in the background of the next pass. */
static const cis2_verify_limits small = {16, 4};
static cis2_engine *eng;
static atomic_int failures;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            fprintf(stderr, "FAIL %s: ", __func__);       \
            fprintf(stderr, __VA_ARGS__);                 \
            fputc('\n', stderr);                          \
            atomic_fetch_add(&failures, 1);               \
            return;                                       \
        }                                                 \
    } while (0)

/* ------------------------------------------------------------ requests */

static const char *texts[NPROMPT] = {"Once upon a time, in a land far away, there lived a small dragon.",
                                     "The quick brown fox jumps over the lazy dog again and again."};
static cis2_sampling samp = {.temperature = 0.75f, .top_k = 40, .top_p = 0.9f, .seed = 1234};
static cis2_request reqs[NPROMPT];

static void make_requests(void)
{
    for (int i = 0; i < NPROMPT; i++)
        reqs[i] = (cis2_request){.text = texts[i], .text_len = strlen(texts[i]), .max_tokens = 12,
                                 .sampling = i == 1 ? &samp : NULL, .logprobs = 1, .top_logprobs = 2};
}

/* -------------------------------------------------------- the references */

static uint8_t ref_witness[NPROMPT][32];
static uint32_t *ref_ids[NPROMPT];
static size_t ref_nids[NPROMPT];
static char *ref_receipt_text;
static cis2_receipt *rcpts[3]; /* greedy, sampled, sampled with a doctored claim */
static struct { int kind; long long bad; char summary[256]; } ref_verdict[3], ref_verdict_dec[3];

static int count_tokens(void *ctx, const cis2_token_event *ev)
{
    (void)ev;
    (*(size_t *)ctx)++;
    return 0;
}

/* ---------------------------------------------------- the kinds of call */

static void call_generate(void)
{
    cis2_result *res = NULL;
    cis2_error err = {0};
    size_t events = 0;
    cis2_gen_opts o = {.on_token = count_tokens, .on_token_ctx = &events};
    int rc = cis2_generate(eng, reqs, NPROMPT, &o, &res, &err);
    CHECK(rc == CIS2_OK, "generate: %s", err.msg);
    for (int i = 0; i < NPROMPT; i++)
        if (memcmp(res[i].witness, ref_witness[i], 32)) {
            cis2_results_free(res, NPROMPT);
            CHECK(0, "generate: request %d's witness differs from its reference", i);
        }
    cis2_results_free(res, NPROMPT);
    CHECK(events == 2 * 12, "generate: %zu token events, want 24", events);
}

static void call_session(void)
{
    cis2_session *s = NULL;
    cis2_error err = {0};
    cis2_session_opts so = {.max_batch = 4, .prefill_chunk = 8};
    CHECK(cis2_session_open(&s, eng, &so, &err) == CIS2_OK, "session_open: %s", err.msg);
    uint64_t id[NPROMPT];
    for (int i = 0; i < NPROMPT; i++)
        if (cis2_session_add(s, &reqs[i], &id[i], &err)) { cis2_session_close(s); CHECK(0, "session_add: %s", err.msg); }
    size_t running = 1;
    while (running)
        if (cis2_session_step(s, &running, &err)) { cis2_session_close(s); CHECK(0, "session_step: %s", err.msg); }
    for (int i = 0; i < NPROMPT; i++) {
        cis2_result *r = NULL;
        if (cis2_session_take(s, id[i], &r, &err)) { cis2_session_close(s); CHECK(0, "session_take: %s", err.msg); }
        int same = !memcmp(r->witness, ref_witness[i], 32);
        cis2_results_free(r, 1);
        if (!same) { cis2_session_close(s); CHECK(0, "session: request %d's witness differs", i); }
    }
    cis2_session_close(s);
}

static void check_verdicts(const cis2_verdict *v, size_t n, int decode)
{
    for (size_t i = 0; i < n; i++) {
        int kind = decode ? ref_verdict_dec[i].kind : ref_verdict[i].kind;
        long long bad = decode ? ref_verdict_dec[i].bad : ref_verdict[i].bad;
        const char *sum = decode ? ref_verdict_dec[i].summary : ref_verdict[i].summary;
        CHECK(v[i].kind == kind && v[i].first_bad_step == bad && !strcmp(v[i].summary, sum),
              "verify%s: receipt %zu: %s (bad step %lld), want %s (%lld)", decode ? " decode" : "", i, v[i].summary,
              v[i].first_bad_step, sum, bad);
    }
}

static void call_verify_with(int replay)
{
    cis2_verdict *v = NULL;
    cis2_error err = {0};
    cis2_verify_opts o = {.replay = replay};
    int rc = cis2_verify_ex(eng, rcpts, 3, &o, &small, NULL, &v, &err);
    CHECK(rc == CIS2_OK, "verify: %s", err.msg);
    check_verdicts(v, 3, replay == CIS2_REPLAY_DECODE);
    cis2_verdicts_free(v, 3);
}

static void call_verify(void) { call_verify_with(CIS2_REPLAY_PREFILL); }
static void call_verify_decode(void) { call_verify_with(CIS2_REPLAY_DECODE); }

static void call_tokens(void)
{
    for (int i = 0; i < NPROMPT; i++) {
        uint32_t *ids = NULL;
        size_t n = 0;
        char *text = NULL;
        size_t len = 0;
        cis2_error err = {0};
        CHECK(cis2_engine_tokenize(eng, texts[i], strlen(texts[i]), &ids, &n, &err) == CIS2_OK, "tokenize: %s", err.msg);
        int same = n == ref_nids[i] && !memcmp(ids, ref_ids[i], n * sizeof *ids);
        int rc = cis2_engine_detokenize(eng, ids, n, 1, &text, &len, &err);
        int round = !rc && len == strlen(texts[i]) && !memcmp(text, texts[i], len);
        cis2_free(ids);
        cis2_free(text);
        CHECK(same && round, "tokenize/detokenize of prompt %d differ from the reference", i);
    }
}

static void call_receipt(void)
{
    cis2_result *res = NULL;
    cis2_receipt *r = NULL;
    char *text = NULL;
    size_t len = 0;
    cis2_error err = {0};
    int rc = cis2_generate(eng, reqs, 1, NULL, &res, &err);
    if (!rc) rc = cis2_receipt_make(eng, res, &r, &err);
    if (!rc) rc = cis2_receipt_render(r, &text, &len, &err);
    int same = !rc && !strcmp(text, ref_receipt_text);
    cis2_free(text);
    cis2_receipt_free(r);
    cis2_results_free(res, 1);
    CHECK(rc == CIS2_OK, "receipt: %s", err.msg);
    CHECK(same, "receipt: the rendered receipt differs from the reference");
}

static void call_info(void)
{
    const cis2_model_info *mi = cis2_engine_info(eng);
    CHECK(mi->vocab_size == 512 && mi->num_layers == 2, "engine_info: vocab %zu layers %zu", mi->vocab_size,
          mi->num_layers);
}

static void call_set_threads(void)
{
    cis2_error err = {0};
    static atomic_int flip;
    int n = 1 + (atomic_fetch_add(&flip, 1) & 1);
    CHECK(cis2_engine_set_threads(eng, n, &err) == CIS2_OK, "set_threads %d: %s", n, err.msg);
}

static void call_set_kernel(void)
{
    cis2_error err = {0};
    static atomic_int flip;
    const char *k = atomic_fetch_add(&flip, 1) & 1 ? "scalar" : "auto";
    CHECK(cis2_engine_set_kernel(eng, k, &err) == CIS2_OK, "set_kernel %s: %s", k, err.msg);
}

/* Speculation never changes a bit, so every other call's references
 * hold whatever is set: off, prompt lookup, a drafter whose drafts are
 * mostly wrong (it repeats the last token, or proposes 7, 8, ...), or a
 * draft model (the checkpoint itself: loaded while other calls compute,
 * replaced between a session's steps). */
static size_t odd_drafter(void *ctx, const uint32_t *prompt, size_t n_prompt, const uint32_t *gen, size_t n_gen,
                          size_t max_k, uint32_t *out)
{
    (void)ctx;
    for (size_t i = 0; i < max_k; i++)
        out[i] = n_gen ? gen[n_gen - 1] : (n_prompt ? prompt[n_prompt - 1] : 7) + (uint32_t)i;
    return max_k;
}

static void call_set_speculate(void)
{
    cis2_error err = {0};
    static atomic_int flip;
    int f = atomic_fetch_add(&flip, 1) % 4;
    char spec[sizeof dir_tiny + 16];
    snprintf(spec, sizeof spec, "draft:%s:3", dir_tiny);
    int rc = f == 0 ? cis2_engine_set_speculate(eng, "lookup:4", &err)
           : f == 1 ? cis2_engine_set_drafter(eng, odd_drafter, NULL, 3, &err)
           : f == 2 ? cis2_engine_set_speculate(eng, spec, &err)
                    : cis2_engine_set_speculate(eng, "off", &err);
    CHECK(rc == CIS2_OK, "set_speculate/set_drafter (%d): %s", f, err.msg);
}

/* cis2_score: two continuations of one context (computed once) and one
 * without a context, with their score receipts; and their verification. */
#define NSCORE 3
static const uint32_t score_cont_ids[4] = {7, 300, 41, 42};
static cis2_score_request score_reqs[NSCORE];
static char *ref_score_text[NSCORE];
static uint32_t ref_score_bits[NSCORE][64];
static cis2_receipt *score_rcpts[NSCORE];

static void make_score_requests(void)
{
    const char *ctx = texts[0];
    score_reqs[0] = (cis2_score_request){.context = ctx, .context_len = strlen(ctx), .continuation = " there lived",
                                         .continuation_len = 12, .top_logprobs = 2};
    score_reqs[1] = (cis2_score_request){.context = ctx, .context_len = strlen(ctx), .continuation_ids = score_cont_ids,
                                         .n_continuation_ids = 4, .top_logprobs = 2};
    score_reqs[2] = (cis2_score_request){.continuation = texts[1], .continuation_len = strlen(texts[1])};
}

/* 1 if results and receipts are the references'. */
static int score_matches(const cis2_score_result *res, cis2_receipt *const *rs)
{
    for (int i = 0; i < NSCORE; i++) {
        char *text = NULL;
        size_t len = 0;
        if (cis2_receipt_render(rs[i], &text, &len, NULL)) return 0;
        int same = !strcmp(text, ref_score_text[i]);
        cis2_free(text);
        if (!same) return 0;
        for (size_t k = 0; k < res[i].n_ids && k < 64; k++)
            if (memcmp(&res[i].logprobs[k], &ref_score_bits[i][k], 4)) return 0;
    }
    return 1;
}

static void call_score(void)
{
    cis2_score_result *res = NULL, *plain = NULL;
    cis2_receipt *rs[NSCORE] = {0};
    cis2_error err = {0};
    int rc = cis2_score_receipts(eng, score_reqs, NSCORE, &res, rs, &err);
    if (!rc) rc = cis2_score(eng, score_reqs, NSCORE, &plain, &err);
    int same = !rc && score_matches(res, rs) && score_matches(plain, rs);
    for (int i = 0; i < NSCORE; i++) cis2_receipt_free(rs[i]);
    cis2_score_results_free(res, NSCORE);
    cis2_score_results_free(plain, NSCORE);
    CHECK(rc == CIS2_OK, "score: %s", err.msg);
    CHECK(same, "score: a logprob or a score receipt differs from the reference");
}

static void call_score_verify(void)
{
    cis2_verdict *v = NULL;
    cis2_error err = {0};
    int rc = cis2_verify(eng, score_rcpts, NSCORE, NULL, &v, &err);
    int ok = !rc;
    for (int i = 0; ok && i < NSCORE; i++) ok = v[i].kind == CIS2_VERDICT_OK;
    cis2_verdicts_free(v, NSCORE);
    CHECK(rc == CIS2_OK, "score verify: %s", err.msg);
    CHECK(ok, "score verify: a score receipt did not verify");
}

static const struct { const char *name; void (*fn)(void); } kinds[] = {
    {"generate", call_generate},     {"session", call_session},       {"verify", call_verify},
    {"verify-decode", call_verify_decode}, {"tokens", call_tokens},  {"receipt", call_receipt},
    {"info", call_info},             {"set_threads", call_set_threads}, {"set_kernel", call_set_kernel},
    {"score", call_score},           {"score-verify", call_score_verify},
    {"set_speculate", call_set_speculate},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* ------------------------------------------------------------- set-up */

static void save_verdicts(const cis2_verdict *v, int decode)
{
    for (int i = 0; i < 3; i++) {
        if (decode) {
            ref_verdict_dec[i].kind = v[i].kind;
            ref_verdict_dec[i].bad = v[i].first_bad_step;
            snprintf(ref_verdict_dec[i].summary, sizeof ref_verdict_dec[i].summary, "%s", v[i].summary);
        } else {
            ref_verdict[i].kind = v[i].kind;
            ref_verdict[i].bad = v[i].first_bad_step;
            snprintf(ref_verdict[i].summary, sizeof ref_verdict[i].summary, "%s", v[i].summary);
        }
    }
}

static int setup(void **state)
{
    (void)state;
    cis2_error err = {0};
    if (cis2_mkdtemp(root, sizeof root, "cis2-test-concurrency", &err)) return -1;
    snprintf(dir_tiny, sizeof dir_tiny, "%s/tiny", root);
    if (cis2_synth_write("tiny", 11, dir_tiny, NULL, &err)) { fprintf(stderr, "synth: %s\n", err.msg); return -1; }
    cis2_engine_opts o = {.threads = 2};
    if (cis2_engine_open(&eng, dir_tiny, &o, &err)) { fprintf(stderr, "open: %s\n", err.msg); return -1; }
    make_requests();
    /* the references, each call alone */
    cis2_result *res = NULL;
    if (cis2_generate(eng, reqs, NPROMPT, NULL, &res, &err)) { fprintf(stderr, "generate: %s\n", err.msg); return -1; }
    for (int i = 0; i < NPROMPT; i++) {
        memcpy(ref_witness[i], res[i].witness, 32);
        if (cis2_receipt_make(eng, &res[i], &rcpts[i], &err)) return -1;
        if (cis2_engine_tokenize(eng, texts[i], strlen(texts[i]), &ref_ids[i], &ref_nids[i], &err)) return -1;
    }
    size_t len = 0;
    if (cis2_receipt_render(rcpts[0], &ref_receipt_text, &len, &err)) return -1;
    char *t1 = NULL;
    if (cis2_receipt_render(rcpts[1], &t1, &len, &err)) return -1;
    if (cis2_receipt_parse(t1, len, "doctored", &rcpts[2], &err)) return -1;
    cis2_free(t1);
    rcpts[2]->generated[5] ^= 1; /* a claim the sampler does not make at step 5 */
    cis2_results_free(res, NPROMPT);
    make_score_requests();
    cis2_score_result *sres = NULL;
    if (cis2_score_receipts(eng, score_reqs, NSCORE, &sres, score_rcpts, &err)) { fprintf(stderr, "score: %s\n", err.msg); return -1; }
    for (int i = 0; i < NSCORE; i++) {
        if (cis2_receipt_render(score_rcpts[i], &ref_score_text[i], &len, &err)) return -1;
        for (size_t k = 0; k < sres[i].n_ids && k < 64; k++) memcpy(&ref_score_bits[i][k], &sres[i].logprobs[k], 4);
    }
    cis2_score_results_free(sres, NSCORE);
    cis2_verdict *v = NULL;
    if (cis2_verify_ex(eng, rcpts, 3, NULL, &small, NULL, &v, &err)) { fprintf(stderr, "verify: %s\n", err.msg); return -1; }
    save_verdicts(v, 0);
    cis2_verdicts_free(v, 3);
    cis2_verify_opts dec = {.replay = CIS2_REPLAY_DECODE};
    if (cis2_verify_ex(eng, rcpts, 3, &dec, &small, NULL, &v, &err)) { fprintf(stderr, "verify: %s\n", err.msg); return -1; }
    save_verdicts(v, 1);
    cis2_verdicts_free(v, 3);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cis2_engine_close(eng);
    for (int i = 0; i < 3; i++) cis2_receipt_free(rcpts[i]);
    for (int i = 0; i < NPROMPT; i++) cis2_free(ref_ids[i]);
    cis2_free(ref_receipt_text);
    for (int i = 0; i < NSCORE; i++) {
        cis2_receipt_free(score_rcpts[i]);
        cis2_free(ref_score_text[i]);
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------- the tests */

static void *loop(void *arg)
{
    size_t k = (size_t)(uintptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) kinds[k].fn();
    return NULL;
}

/* The references hold: the oracle itself is sound (a doctored receipt is
 * caught, the others are OK), else every comparison below means nothing. */
static void test_references(void **state)
{
    (void)state;
    assert_int_equal(ref_verdict[0].kind, CIS2_VERDICT_OK);
    assert_int_equal(ref_verdict[1].kind, CIS2_VERDICT_OK);
    assert_int_equal(ref_verdict[2].kind, CIS2_VERDICT_OUTPUT_MISMATCH);
    assert_int_equal(ref_verdict[2].bad, 5);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ref_verdict_dec[i].kind, ref_verdict[i].kind);
        assert_int_equal(ref_verdict_dec[i].bad, ref_verdict[i].bad);
    }
    /* the score references: the receipts verify, and a doctored logprob is caught */
    cis2_verdict *v = NULL;
    cis2_error err = {0};
    assert_int_equal(cis2_verify(eng, score_rcpts, NSCORE, NULL, &v, &err), CIS2_OK);
    for (int i = 0; i < NSCORE; i++) assert_int_equal(v[i].kind, CIS2_VERDICT_OK);
    cis2_verdicts_free(v, NSCORE);
    score_rcpts[1]->lp_bits[0] ^= 1;
    assert_int_equal(cis2_verify(eng, &score_rcpts[1], 1, NULL, &v, &err), CIS2_OK);
    score_rcpts[1]->lp_bits[0] ^= 1;
    free(score_rcpts[1]->get_text); /* cis2_receipt_get's cache of the doctored text */
    score_rcpts[1]->get_text = NULL;
    assert_int_equal(v[0].kind, CIS2_VERDICT_OUTPUT_MISMATCH);
    assert_string_equal(v[0].summary, "OUTPUT-MISMATCH (logprob-bits)");
    cis2_verdicts_free(v, 1);
}

static void test_every_pair(void **state)
{
    (void)state;
    for (size_t a = 0; a < NKINDS; a++)
        for (size_t b = a; b < NKINDS; b++) {
            int before = atomic_load(&failures);
            pthread_t ta, tb;
            assert_int_equal(pthread_create(&ta, NULL, loop, (void *)(uintptr_t)a), 0);
            assert_int_equal(pthread_create(&tb, NULL, loop, (void *)(uintptr_t)b), 0);
            pthread_join(ta, NULL);
            pthread_join(tb, NULL);
            if (atomic_load(&failures) != before) fprintf(stderr, "  in the pair %s x %s\n", kinds[a].name, kinds[b].name);
        }
    assert_int_equal(atomic_load(&failures), 0);
}

/* Four threads, each going through every kind in its own order. */
static void *medley(void *arg)
{
    size_t off = (size_t)(uintptr_t)arg;
    for (size_t i = 0; i < NKINDS; i++) kinds[(i * 5 + off) % NKINDS].fn();
    return NULL;
}

static void test_all_at_once(void **state)
{
    (void)state;
    pthread_t t[4];
    for (size_t i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, medley, (void *)(uintptr_t)(i * 2)), 0);
    for (size_t i = 0; i < 4; i++) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&failures), 0);
}

/* A change of the engine from inside one of its own calls would wait for
 * itself: it is refused instead. */
static int change_inside(void *ctx, const cis2_token_event *ev)
{
    cis2_error err = {0};
    int *rc = ctx;
    if (ev->step == 0) {
        rc[0] = cis2_engine_set_threads(eng, 1, &err);
        rc[1] = cis2_engine_set_kernel(eng, "auto", &err);
    }
    return 0;
}

static void test_change_from_callback(void **state)
{
    (void)state;
    int rc[2] = {-1, -1};
    cis2_gen_opts o = {.on_token = change_inside, .on_token_ctx = rc};
    cis2_result *res = NULL;
    cis2_error err = {0};
    assert_int_equal(cis2_generate(eng, reqs, 1, &o, &res, &err), CIS2_OK);
    assert_memory_equal(res[0].witness, ref_witness[0], 32);
    cis2_results_free(res, 1);
    assert_int_equal(rc[0], CIS2_E_USAGE);
    assert_int_equal(rc[1], CIS2_E_USAGE);
}

/* ------------------------------------------------------- cancellation */

typedef struct stopper { atomic_int polls; int stop_at; atomic_int *flag; } stopper;

static int stop_after(void *ctx)
{
    stopper *s = ctx;
    int polls = atomic_fetch_add(&s->polls, 1) + 1;
    if (s->flag) {
        /* the second poll waits (5 s at most) for the other thread's flag,
         * so the verify is surely still running when it is raised */
        for (int i = 0; polls == 2 && !atomic_load(s->flag) && i < 5000; i++) {
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        return atomic_load(s->flag);
    }
    return s->stop_at >= 0 && polls > s->stop_at;
}

static int step_stop(void *ctx, const cis2_token_event *ev)
{
    (void)ev;
    return ++*(int *)ctx == 3; /* the third step */
}

static void test_verify_cancel(void **state)
{
    (void)state;
    cis2_error err = {0};
    cis2_verdict *v = NULL;
    for (int replay = 0; replay < 2; replay++) {
        /* never stopping: polled at every pass or step, the verdicts unchanged */
        stopper never = {0, -1, NULL};
        cis2_verify_opts o = {.replay = replay, .should_stop = stop_after, .should_stop_ctx = &never};
        assert_int_equal(cis2_verify_ex(eng, rcpts, 3, &o, &small, NULL, &v, &err), CIS2_OK);
        check_verdicts(v, 3, replay == CIS2_REPLAY_DECODE);
        cis2_verdicts_free(v, 3);
        assert_int_equal(atomic_load(&failures), 0);
        /* 3 receipts of 12 tokens after ~15-id prompts, at most 16 rows and 4
         * logits rows a pass: at least 9 passes; the decode: 12+ steps */
        assert_true(never.polls >= 9);
        /* stopping at the second poll: cancelled, no verdicts */
        stopper two = {0, 1, NULL};
        o.should_stop_ctx = &two;
        v = NULL;
        memset(&err, 0, sizeof err);
        assert_int_equal(cis2_verify_ex(eng, rcpts, 3, &o, &small, NULL, &v, &err), CIS2_E_CANCELLED);
        assert_null(v);
        assert_int_equal(two.polls, 2);
        assert_non_null(strstr(err.msg, "cancelled"));
        /* on_step's nonzero cancels too */
        int steps = 0;
        cis2_verify_opts os = {.replay = replay, .on_step = step_stop, .on_step_ctx = &steps};
        memset(&err, 0, sizeof err);
        assert_int_equal(cis2_verify_ex(eng, rcpts, 3, &os, &small, NULL, &v, &err), CIS2_E_CANCELLED);
        assert_int_equal(steps, 3);
    }
}

/* cis2_score_ex's should_stop (the server's echo scoring and
 * score-receipt verification must end at shutdown or past their time):
 * never stopping gives cis2_score's bits; stopping at the first poll gives
 * CIS2_E_CANCELLED and no results; and a verify of score receipts stops
 * where its own should_stop says so. */
static void test_score_cancel(void **state)
{
    (void)state;
    cis2_score_result *plain = NULL, *res = NULL;
    cis2_error err = {0};
    assert_int_equal(cis2_score(eng, score_reqs, NSCORE, &plain, &err), CIS2_OK);
    stopper never = {0, -1, NULL};
    cis2_score_opts o = {.should_stop = stop_after, .should_stop_ctx = &never};
    assert_int_equal(cis2_score_ex(eng, score_reqs, NSCORE, &o, &res, &err), CIS2_OK);
    assert_true(atomic_load(&never.polls) >= 1);
    for (int i = 0; i < NSCORE; i++) {
        assert_int_equal(res[i].n_ids, plain[i].n_ids);
        assert_memory_equal(res[i].logprobs, plain[i].logprobs, res[i].n_ids * sizeof(float));
        assert_memory_equal(&res[i].sum, &plain[i].sum, sizeof(float));
    }
    cis2_score_results_free(res, NSCORE);
    cis2_score_results_free(plain, NSCORE);
    stopper first = {0, 0, NULL};
    o.should_stop_ctx = &first;
    res = NULL;
    memset(&err, 0, sizeof err);
    assert_int_equal(cis2_score_ex(eng, score_reqs, NSCORE, &o, &res, &err), CIS2_E_CANCELLED);
    assert_null(res);
    assert_int_equal(atomic_load(&first.polls), 1);
    assert_non_null(strstr(err.msg, "cancelled"));
    stopper vfirst = {0, 0, NULL};
    cis2_verify_opts vo = {.should_stop = stop_after, .should_stop_ctx = &vfirst};
    cis2_verdict *v = NULL;
    memset(&err, 0, sizeof err);
    assert_int_equal(cis2_verify_ex(eng, score_rcpts, NSCORE, &vo, NULL, NULL, &v, &err), CIS2_E_CANCELLED);
    assert_null(v);
}

/* Another thread raises the flag while a long verification runs (what
 * the server does for a client that has gone, or at shutdown). */
static void *raise_flag(void *arg)
{
    stopper *s = arg;
    while (atomic_load(&s->polls) < 2) { /* the verify has begun its passes */
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(s->flag, 1);
    return NULL;
}

static void test_verify_cancel_from_thread(void **state)
{
    (void)state;
    enum { N = 24 };
    cis2_receipt *many[N];
    for (int i = 0; i < N; i++) many[i] = rcpts[i % 3];
    atomic_int flag = 0;
    stopper s = {0, -1, &flag};
    cis2_verify_opts o = {.should_stop = stop_after, .should_stop_ctx = &s};
    const cis2_verify_limits tiny = {4, 2}; /* many passes */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, raise_flag, &s), 0);
    cis2_verdict *v = NULL;
    cis2_error err = {0};
    int rc = cis2_verify_ex(eng, many, N, &o, &tiny, NULL, &v, &err);
    pthread_join(t, NULL);
    if (rc == CIS2_OK) cis2_verdicts_free(v, N);
    assert_int_equal(rc, CIS2_E_CANCELLED);
    assert_int_equal(atomic_load(&s.polls), 2); /* stopped at the pass the flag was raised before */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_references),
        cmocka_unit_test(test_every_pair),
        cmocka_unit_test(test_all_at_once),
        cmocka_unit_test(test_change_from_callback),
        cmocka_unit_test(test_verify_cancel),
        cmocka_unit_test(test_verify_cancel_from_thread),
        cmocka_unit_test(test_score_cancel),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

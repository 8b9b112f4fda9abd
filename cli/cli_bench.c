/*
 * cli_bench.c - `cis2 bench`: how fast this machine runs the pinned
 * arithmetic, against the memory-bandwidth bound, through the library's
 * public API only.
 *
 * On a synthetic checkpoint by default (--shape, default smollm2-135m, in
 * a fresh directory under $TMPDIR removed afterwards, also on SIGINT) or a
 * real one (--model-dir).  Prints the streaming read bandwidth (same
 * threads), weight bytes read per decoded token, decode ms/token and its
 * bound (bytes / bandwidth), prefill tokens/s, batched decode tokens/s at
 * batch 1/4/8/16, the wall time of a §13.1-shaped run (hash + load + both
 * decodes of 4+16 tokens), the scalar kernel's decode speed and the
 * speedup, receipt verification against generation (one 256-token receipt,
 * the best of 3 runs of each;
 * 16 receipts of 64 tokens together and one at a time, of 16 prompts and
 * as 16 samples of one prompt of 32 and of 128 tokens), peak RSS;
 * --gen-toks N adds decode tokens/s at positions 16, 512, 2048 (those
 * below N); scoring (docs/sampling.md §S11): 64 tokens
 * scored (cis2_score) against the prefill of 64 and (not with --quick)
 * against the verification prefill of a 64-token receipt (which, as a
 * score, computes every row's logits), and (not with --quick) 4 continuations of 8 tokens after one 200-token context scored
 * together (the context computed once) against each alone; speculative
 * decoding (docs/speculate.md "Speed"): greedy tokens/s of plain decode
 * and of lookup:2, 4, 8 on a repetitive prompt, and (not with --quick) at
 * forced acceptance rates 100, 80, 50, 0% x K 2, 4, 8 (a drafter, through
 * cis2_engine_set_drafter, proposing the known continuation with that
 * share of its tokens right), and whether their tokens are the same (they
 * must be).  A benchmark prints numbers; it
 * asserts nothing.
 *
 * --quick (docs/performance.md "Measure it yourself") measures the headline figures only, once
 * each: bandwidth, decode, prefill, scoring, batched decode, the
 * §13.1-shaped run and peak RSS (seconds, not minutes: no receipt verification, no scalar
 * kernel, no long positions; JSON "quick": true and without those keys).
 * While it runs, one line per phase goes to stderr with the seconds so
 * far, and after the first measurement a line estimates the rest.
 */
#include "cli.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- progress on stderr: one line per phase, the seconds since the start ---- */
static double t_start;

static void phase(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void phase(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: %6.1f s  ", now() - t_start);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- streaming read bandwidth, one plain reader per engine thread ---- */
typedef struct bw_arg { const uint64_t *buf; size_t lo, hi; uint64_t sum; } bw_arg;

static void *bw_thread(void *p)
{
    bw_arg *a = p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t k = a->lo; k + 4 <= a->hi; k += 4) { s0 += a->buf[k]; s1 += a->buf[k + 1]; s2 += a->buf[k + 2]; s3 += a->buf[k + 3]; }
    a->sum += s0 + s1 + s2 + s3;
    return NULL;
}

#define BW_BYTES ((size_t)256 << 20)
#define BW_REPS(quick) ((quick) ? 2 : 5)

static double read_bandwidth(int threads, int reps)
{
    size_t bytes = BW_BYTES, words = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf || threads < 1) { free(buf); return 0; }
    if (threads > 64) threads = 64;
    memset(buf, 1, bytes);
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        pthread_t th[64];
        bw_arg args[64];
        double t0 = now();
        for (int i = 0; i < threads; i++) {
            args[i] = (bw_arg){buf, words * (size_t)i / (size_t)threads, words * (size_t)(i + 1) / (size_t)threads, 0};
            if (i && pthread_create(&th[i], NULL, bw_thread, &args[i])) { args[i].hi = args[i].lo; }
        }
        bw_thread(&args[0]);
        for (int i = 1; i < threads; i++) if (args[i].hi != args[i].lo) pthread_join(th[i], NULL);
        double dt = now() - t0;
        if (dt > 0 && (double)bytes / dt > best) best = (double)bytes / dt;
    }
    free(buf);
    return best;
}

/* ---- decode timing through the token callback (sequence 0's steps) ---- */
typedef struct timing { double t0, t_first, t_end, at[3]; size_t marks[3], total; } timing;

static int on_token(void *ctx, const cis2_token_event *ev)
{
    timing *t = ctx;
    if (ev->seq != 0) return 0;
    double x = now();
    size_t step = ev->step + 1;
    if (step == 1) t->t_first = x;
    for (int i = 0; i < 3; i++)
        if (t->marks[i] && step == t->marks[i]) t->at[i] = x;
    if (step == t->total) t->t_end = x;
    return 0;
}

static int decode_timed(cis2_engine *e, size_t nseq, size_t nprompt, size_t gen, timing *t, cis2_error *err)
{
    size_t V = cis2_engine_info(e)->vocab_size;
    uint32_t *ids = malloc(nseq * nprompt * sizeof(uint32_t));
    cis2_request *q = calloc(nseq, sizeof *q);
    if (!ids || !q) { free(ids); free(q); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    for (size_t s = 0; s < nseq; s++) {
        for (size_t i = 0; i < nprompt; i++) ids[s * nprompt + i] = (uint32_t)((s * 131 + i * 7919 + 13) % V);
        q[s] = (cis2_request){.ids = ids + s * nprompt, .n_ids = nprompt, .max_tokens = gen};
    }
    t->total = gen;
    cis2_gen_opts o = {.on_token = on_token, .on_token_ctx = t};
    cis2_result *r = NULL;
    t->t0 = now();
    int rc = cis2_generate(e, q, nseq, &o, &r, err);
    cis2_results_free(r, nseq);
    free(q);
    free(ids);
    return rc;
}

static uint32_t bench_id(size_t s, size_t i, size_t V);

/* ---- speculative decoding (docs/speculate.md) against plain decode ---- */
#define SPEC_GEN 64      /* tokens decoded per figure (--quick: 32) */
#define SPEC_PROMPT 48   /* a pattern of 8 ids, 6 times: lookup finds it at once */
static const unsigned spec_ks[3] = {2, 4, 8};

static const unsigned spec_rates[4] = {100, 80, 50, 0}; /* forced acceptance, percent */

typedef struct spbench {
    double plain_tps, tps[3];  /* greedy tokens/s over the steps after the first */
    int same;                  /* every speculative run's tokens are the plain run's */
    /* forced acceptance (not --quick): a drafter proposing the known
     * continuation with a set share of its tokens changed, rate x K */
    double forced_plain_tps, forced_tps[4][3];
    int forced;
} spbench;

/* The forced-acceptance drafter (cis2_draft_fn): the known greedy
 * continuation, its token at each absolute step changed unless the step's
 * fixed hash falls below the rate, so a share `rate` of drafted tokens is
 * right whatever the step. */
typedef struct forced_drafter { const uint32_t *known; size_t n; unsigned rate; size_t V; } forced_drafter;

static size_t forced_draft(void *ctx, const uint32_t *prompt, size_t n_prompt, const uint32_t *gen, size_t n_gen,
                           size_t max_k, uint32_t *out)
{
    const forced_drafter *f = ctx;
    (void)prompt; (void)n_prompt; (void)gen;
    size_t n = 0;
    for (size_t s = n_gen; s < f->n && n < max_k; s++, n++) {
        uint32_t h = (uint32_t)(s * 2654435761u) >> 7;
        out[n] = h % 100 < f->rate ? f->known[s] : (f->known[s] + 1) % (uint32_t)f->V;
    }
    return n;
}

/* One greedy decode of the prompt ids[0..n) with the engine's speculation
 * as set: the tokens/s of the steps after the first, and its gen tokens. */
static int greedy_timed(cis2_engine *e, const uint32_t *ids, size_t n, size_t gen, double *tps, uint32_t *out,
                        cis2_error *err)
{
    cis2_request q = {.ids = ids, .n_ids = n, .max_tokens = gen};
    timing t = {.total = gen};
    cis2_gen_opts o = {.on_token = on_token, .on_token_ctx = &t};
    cis2_result *r = NULL;
    t.t0 = now();
    int rc = cis2_generate(e, &q, 1, &o, &r, err);
    if (!rc) {
        *tps = (double)(gen - 1) / (t.t_end - t.t_first);
        memcpy(out, r->tokens, gen * sizeof *out);
    }
    cis2_results_free(r, 1);
    return rc;
}

/* One greedy decode of the repetitive prompt with `spec` ("off",
 * "lookup:K"): its tokens/s and its `gen` tokens into out. */
static int spec_timed(cis2_engine *e, const char *spec, size_t gen, double *tps, uint32_t *out, cis2_error *err)
{
    size_t V = cis2_engine_info(e)->vocab_size;
    uint32_t ids[SPEC_PROMPT];
    for (size_t i = 0; i < SPEC_PROMPT; i++) ids[i] = bench_id(0, i % 8, V);
    int rc = cis2_engine_set_speculate(e, spec, err);
    if (!rc) rc = greedy_timed(e, ids, SPEC_PROMPT, gen, tps, out, err);
    int rc2 = cis2_engine_set_speculate(e, "off", err);
    return rc ? rc : rc2;
}

/* One greedy decode of a 16-id prompt of distinct ids with drafter f
 * (NULL: plain): its tokens/s and its tokens. */
static int forced_timed(cis2_engine *e, forced_drafter *f, unsigned k, size_t gen, double *tps, uint32_t *out,
                        cis2_error *err)
{
    size_t V = cis2_engine_info(e)->vocab_size;
    uint32_t ids[16];
    for (size_t i = 0; i < 16; i++) ids[i] = bench_id(5, i, V);
    int rc = cis2_engine_set_drafter(e, f ? forced_draft : NULL, f, k, err);
    if (!rc) rc = greedy_timed(e, ids, 16, gen, tps, out, err);
    int rc2 = cis2_engine_set_drafter(e, NULL, NULL, 0, err);
    return rc ? rc : rc2;
}

/* Plain, then every rate x K; the best of 2 each. */
static int bench_forced(cis2_engine *e, spbench *b, cis2_error *err)
{
    size_t gen = SPEC_GEN, V = cis2_engine_info(e)->vocab_size;
    uint32_t known[SPEC_GEN], got[SPEC_GEN];
    phase("speculative decode: forced acceptance 100, 80, 50, 0%% x K 2, 4, 8");
    double t;
    b->forced_plain_tps = 0;
    int rc = CIS2_OK;
    for (int rep = 0; rep < 2 && !rc; rep++)
        if (!(rc = forced_timed(e, NULL, 0, gen, &t, known, err)) && t > b->forced_plain_tps) b->forced_plain_tps = t;
    for (int r = 0; r < 4 && !rc; r++)
        for (int k = 0; k < 3 && !rc; k++) {
            forced_drafter f = {known, gen, spec_rates[r], V};
            b->forced_tps[r][k] = 0;
            for (int rep = 0; rep < 2 && !rc; rep++) {
                if ((rc = forced_timed(e, &f, spec_ks[k], gen, &t, got, err))) break;
                if (t > b->forced_tps[r][k]) b->forced_tps[r][k] = t;
                if (memcmp(known, got, gen * sizeof *got)) b->same = 0;
            }
        }
    b->forced = !rc;
    return rc;
}

static int bench_speculate(cis2_engine *e, int quick, spbench *b, cis2_error *err)
{
    size_t gen = quick ? SPEC_GEN / 2 : SPEC_GEN;
    uint32_t plain[SPEC_GEN], got[SPEC_GEN];
    phase("speculative decode: plain and lookup:2, 4, 8 on a repetitive prompt");
    int rc = spec_timed(e, "off", gen, &b->plain_tps, plain, err);
    b->same = 1;
    for (int k = 0; k < 3 && !rc; k++) {
        char spec[16];
        snprintf(spec, sizeof spec, "lookup:%u", spec_ks[k]);
        rc = spec_timed(e, spec, gen, &b->tps[k], got, err);
        if (!rc && memcmp(plain, got, gen * sizeof *got)) b->same = 0;
    }
    b->forced = 0;
    if (!rc && !quick) rc = bench_forced(e, b, err);
    return rc;
}

/* ---- scoring (docs/sampling.md §S11) against prefill ---- */
#define SCORE_TOKS 64   /* rows of the scoring and prefill figures */
#define SCORE_CTX 200   /* the shared context (less on a short-context model) */
#define SCORE_NCONT 4
#define SCORE_CONT 8

typedef struct sbench {
    double score_tps;                  /* SCORE_TOKS tokens scored after 1 context token, per s */
    double verify_tps;                 /* a SCORE_TOKS-token receipt's verification prefill, rows per s */
    double together_s, alone_s;        /* SCORE_NCONT continuations: one call, and one call each */
    size_t ctx;
    double mac_ratio;                  /* prefill's multiply-adds / scoring's (mac_ratio) */
} sbench;

static uint32_t bench_id(size_t s, size_t i, size_t V) { return (uint32_t)((s * 131 + i * 7919 + 13) % V); }

static int score_timed(cis2_engine *e, const cis2_score_request *q, size_t n, double *secs, cis2_error *err)
{
    cis2_score_result *r = NULL;
    double t0 = now();
    int rc = cis2_score(e, q, n, &r, err);
    *secs = now() - t0;
    cis2_score_results_free(r, n);
    return rc;
}

static int make_receipts(cis2_engine *e, size_t n, size_t gen, cis2_receipt **rs, double *secs, cis2_error *err);
static int verify_timed(cis2_engine *e, cis2_receipt **rs, size_t n, double *secs, int *all_ok, cis2_error *err);

/* The rows per second of verifying one receipt of ntok generated tokens:
 * a prefill that computes every row's logits (and hashes them), the work
 * a score's rows need; the best of reps. */
static int bench_verify_rows(cis2_engine *e, size_t ntok, int reps, double *tps, cis2_error *err)
{
    cis2_receipt *r[1] = {0};
    double t, best = 1e30;
    int ok = 1, rc = make_receipts(e, 1, ntok, r, &t, err);
    for (int k = 0; k < reps && !rc; k++) {
        if (!(rc = verify_timed(e, r, 1, &t, &ok, err)) && t < best) best = t;
    }
    cis2_receipt_free(r[0]);
    *tps = rc ? 0 : (double)ntok / best;
    return rc;
}

/* What scoring's rate can be at most against prefill's if every
 * multiply-add costs the same (docs/sampling.md §S11 "Speed"): the
 * prefill of n tokens computes n rows of the layers' matrices and one of
 * the LM head, a score of n tokens after one context token n of each
 * (attention's few multiply-adds at 64 positions left out). */
static double mac_ratio(const cis2_model_info *mi, size_t n)
{
    double H = (double)mi->hidden_size, q = (double)(mi->num_heads * mi->head_dim);
    double kv = (double)(mi->num_kv_heads * mi->head_dim), I = (double)mi->intermediate_size;
    double body = (double)mi->num_layers * (H * (q + 2 * kv) + q * H + 3 * H * I); /* §9.1, §9.5, §10 */
    double head = (double)mi->vocab_size * H; /* §11.1 */
    return ((double)n * body + head) / ((double)n * (body + head));
}

static int bench_score(cis2_engine *e, int quick, sbench *b, cis2_error *err)
{
    const cis2_model_info *mi = cis2_engine_info(e);
    size_t V = mi->vocab_size, maxpos = mi->max_position_embeddings;
    b->ctx = SCORE_CTX + SCORE_CONT <= maxpos ? SCORE_CTX : maxpos > SCORE_CONT + 1 ? maxpos - SCORE_CONT : 1;
    size_t ntok = SCORE_TOKS + 1 <= maxpos ? SCORE_TOKS : maxpos - 1;
    uint32_t ids[SCORE_CTX + SCORE_TOKS + SCORE_NCONT * SCORE_CONT];
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) ids[i] = bench_id(3, i, V);
    int rc = CIS2_OK, reps = quick ? 3 : 5;
    double t;
    if (quick) phase("scoring: %zu tokens", ntok);
    else
        phase("scoring: %zu tokens; %d continuations of %d after a %zu-token context, together and alone", ntok,
              SCORE_NCONT, SCORE_CONT, b->ctx);
    cis2_score_request one = {.context_ids = ids, .n_context_ids = 1, .continuation_ids = ids + 1,
                              .n_continuation_ids = ntok};
    cis2_score_request q[SCORE_NCONT];
    for (size_t k = 0; k < SCORE_NCONT; k++)
        q[k] = (cis2_score_request){.context_ids = ids, .n_context_ids = b->ctx,
                                    .continuation_ids = ids + SCORE_CTX + SCORE_TOKS + k * SCORE_CONT,
                                    .n_continuation_ids = SCORE_CONT};
    b->score_tps = 0;
    b->mac_ratio = mac_ratio(mi, ntok);
    b->together_s = b->alone_s = 1e30;
    for (int rep = 0; rep < reps && !rc; rep++) { /* the best of reps each */
        if ((rc = score_timed(e, &one, 1, &t, err))) break;
        if ((double)ntok / t > b->score_tps) b->score_tps = (double)ntok / t;
        if (quick) { b->together_s = b->alone_s = 0; continue; } /* --quick: the ratio to prefill only */
        if ((rc = score_timed(e, q, SCORE_NCONT, &t, err))) break;
        if (t < b->together_s) b->together_s = t;
        double sum = 0;
        for (size_t k = 0; k < SCORE_NCONT && !rc; k++) {
            rc = score_timed(e, &q[k], 1, &t, err);
            sum += t;
        }
        if (sum < b->alone_s) b->alone_s = sum;
    }
    b->verify_tps = 0;
    if (!rc && !quick) {
        phase("scoring: the verification prefill of a %zu-token receipt", ntok);
        rc = bench_verify_rows(e, ntok, reps, &b->verify_tps, err);
    }
    return rc;
}

/* ---- receipts: generation against verification (docs/receipts.md "Verification: faster than generation") ---- */
typedef struct vbench {
    double gen256, ver256, gen16x64, ver16_together, ver16_each;
    double ver16s_together, ver16s_each; /* 16 short receipts (len3 tokens): where sharing pays */
    /* an RL group: 16 samples (len2 tokens) of one prompt of about
     * group_target[k] tokens (group_prompt[k] exactly), whose prefix a batch computes once */
    double verg_together[2], verg_each[2];
    size_t group_prompt[2];
    size_t len1, len2, len3; /* the receipts' lengths: 256, 64 and 4 unless the context is shorter */
    int ok;
} vbench;

static int make_receipts(cis2_engine *e, size_t n, size_t gen, cis2_receipt **rs, double *secs, cis2_error *err)
{
    static const char *texts[4] = {"Once upon a time", "The quick brown fox", "1234567890 + 9876543210 =",
                                   "def f(x): return x * 2"};
    char buf[16][64];
    cis2_request q[16];
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], sizeof buf[i], "%zu %s", i, texts[i % 4]); /* no two share 16 leading ids (verify.c) */
        q[i] = (cis2_request){.text = buf[i], .text_len = strlen(buf[i]), .max_tokens = gen};
    }
    cis2_result *r = NULL;
    double t0 = now();
    int rc = cis2_generate(e, q, n, NULL, &r, err);
    *secs = now() - t0;
    for (size_t i = 0; !rc && i < n; i++) rc = cis2_receipt_make(e, &r[i], &rs[i], err);
    cis2_results_free(r, r ? n : 0); /* NULL when cis2_generate failed */
    return rc;
}

static const size_t group_target[2] = {32, 128};

/* 16 samples (temperature 1, one seed, sequence 0..15, as OpenAI's n) of
 * one prompt of words, grown until the engine's tokenizer gives it at
 * least `target` tokens. */
static int make_group(cis2_engine *e, size_t target, size_t gen, cis2_receipt **rs, size_t *nprompt,
                      cis2_error *err)
{
    static const char *const words[] = {"a ", "baker ", "sells ", "48 ", "loaves ", "on ", "Monday ", "and ",
                                        "half ", "as ", "many ", "on ", "Tuesday; ", "how ", "many ", "in ", "all? "};
    char text[4096] = "";
    size_t len = 0, n = 0;
    for (size_t w = 0; n < target; w++) {
        const char *x = words[w % (sizeof words / sizeof words[0])];
        if (len + strlen(x) >= sizeof text) return cis2_fail(err, CIS2_E_USAGE, "bench: the group prompt is too long");
        memcpy(text + len, x, strlen(x) + 1);
        len += strlen(x);
        uint32_t *ids;
        int rc = cis2_engine_tokenize(e, text, len, &ids, &n, err);
        if (rc) return rc;
        cis2_free(ids);
    }
    *nprompt = n;
    cis2_sampling s[16];
    cis2_request q[16];
    for (size_t i = 0; i < 16; i++) {
        s[i] = (cis2_sampling){.temperature = 1.0f, .top_p = 1.0f, .seed = 7, .sequence = (uint32_t)i};
        q[i] = (cis2_request){.text = text, .text_len = len, .max_tokens = gen, .sampling = &s[i]};
    }
    cis2_result *r = NULL;
    int rc = cis2_generate(e, q, 16, NULL, &r, err);
    for (size_t i = 0; !rc && i < 16; i++) rc = cis2_receipt_make(e, &r[i], &rs[i], err);
    cis2_results_free(r, r ? 16 : 0); /* NULL when cis2_generate failed */
    return rc;
}

static int verify_timed(cis2_engine *e, cis2_receipt **rs, size_t n, double *secs, int *all_ok, cis2_error *err)
{
    cis2_verdict *v;
    double t0 = now();
    int rc = cis2_verify(e, rs, n, NULL, &v, err);
    *secs = now() - t0;
    for (size_t i = 0; !rc && i < n; i++) *all_ok &= v[i].kind == CIS2_VERDICT_OK;
    if (!rc) cis2_verdicts_free(v, n);
    return rc;
}

#define REPS 3

static int bench_verify(cis2_engine *e, vbench *b, cis2_error *err)
{
    cis2_receipt *one[1] = {0}, *many[16] = {0}, *shorts[16] = {0}, *group[16] = {0};
    int rc;
    b->ok = 1;
    /* 256 and 64 tokens, or what the context leaves beside a short prompt */
    size_t room = cis2_engine_info(e)->max_position_embeddings, g1 = 256, g2 = 64, g3 = 4;
    room = room > 40 ? room - 40 : 1;
    if (g1 > room) g1 = room;
    if (g2 > room) g2 = room;
    if (g3 > room) g3 = room;
    b->len1 = g1;
    b->len2 = g2;
    b->len3 = g3;
    /* generation against verification: the best of REPS each, as this
     * shared machine's other load moves single runs by 10% and more */
    b->gen256 = b->ver256 = 1e30;
    phase("receipts: generate one of %zu tokens, %d times", g1, REPS);
    for (int k = 0; k < REPS; k++) {
        cis2_receipt *again[1] = {0};
        double s;
        if ((rc = make_receipts(e, 1, g1, k ? again : one, &s, err))) goto out;
        cis2_receipt_free(again[0]);
        if (s < b->gen256) b->gen256 = s;
    }
    phase("receipts: verify it, %d times", REPS);
    for (int k = 0; k < REPS; k++) {
        double s;
        if ((rc = verify_timed(e, one, 1, &s, &b->ok, err))) goto out;
        if (s < b->ver256) b->ver256 = s;
    }
    phase("receipts: generate 16 of %zu tokens together", g2);
    if ((rc = make_receipts(e, 16, g2, many, &b->gen16x64, err))) goto out;
    phase("receipts: verify the 16 together, then one at a time");
    if ((rc = verify_timed(e, many, 16, &b->ver16_together, &b->ok, err))) goto out;
    b->ver16_each = 0;
    for (size_t i = 0; i < 16; i++) {
        double s;
        if ((rc = verify_timed(e, many + i, 1, &s, &b->ok, err))) goto out;
        b->ver16_each += s;
    }
    /* a short receipt's prefill reads every weight for a few rows: memory-bound,
     * so verifying 16 together shares the reads (a 64-token one is compute-bound) */
    double gs;
    phase("receipts: 16 of %zu tokens, together and one at a time", g3);
    if ((rc = make_receipts(e, 16, g3, shorts, &gs, err))) goto out;
    if ((rc = verify_timed(e, shorts, 16, &b->ver16s_together, &b->ok, err))) goto out;
    b->ver16s_each = 0;
    for (size_t i = 0; i < 16; i++) {
        double s;
        if ((rc = verify_timed(e, shorts + i, 1, &s, &b->ok, err))) goto out;
        b->ver16s_each += s;
    }
    /* an RL group: the prompt's rows once, each sample's own rows after it */
    for (int k = 0; k < 2; k++) {
        b->verg_together[k] = b->verg_each[k] = 0;
        size_t room2 = cis2_engine_info(e)->max_position_embeddings;
        if (group_target[k] + 16 + g2 > room2) continue; /* the prompt may pass its target by a word */
        phase("receipts: 16 samples of one %zu-token prompt", group_target[k]);
        if ((rc = make_group(e, group_target[k], g2, group, &b->group_prompt[k], err))) goto out;
        if ((rc = verify_timed(e, group, 16, &b->verg_together[k], &b->ok, err))) goto out;
        for (size_t i = 0; i < 16; i++) {
            double s;
            if ((rc = verify_timed(e, group + i, 1, &s, &b->ok, err))) goto out;
            b->verg_each[k] += s;
        }
        for (int i = 0; i < 16; i++) {
            cis2_receipt_free(group[i]);
            group[i] = NULL;
        }
    }
out:
    cis2_receipt_free(one[0]);
    for (int i = 0; i < 16; i++) {
        cis2_receipt_free(many[i]);
        cis2_receipt_free(shorts[i]);
        cis2_receipt_free(group[i]);
    }
    return rc;
}

/* ---------------------------------------------------------------- main */

typedef struct bench_res {
    const char *model, *kernel;
    int threads, quick;
    double bw, ms_tok, bound_ms, prefill_tps, batch_tps[4], long_tps[3], t_full, t_open, scalar_ms, rss_mb;
    size_t weight_bytes;
    vbench vb;
    sbench sb;
    spbench sp;
} bench_res;

static const size_t batches[4] = {1, 4, 8, 16};
static const size_t long_pos[3] = {16, 512, 2048};

static int measure(cis2_engine *e, size_t long_gen, int quick, bench_res *b, cis2_error *err)
{
    int rc;
    const cis2_model_info *mi = cis2_engine_info(e);
    b->weight_bytes = mi->weight_bytes;
    b->threads = mi->threads;
    b->kernel = mi->kernel;
    phase("read bandwidth (%d threads)", b->threads);
    b->bw = read_bandwidth(b->threads, BW_REPS(quick));
    timing t1 = {0};
    size_t gen = quick ? 17 : 33;
    phase("decode: %zu tokens", gen);
    if ((rc = decode_timed(e, 1, 4, gen, &t1, err))) return rc;
    b->ms_tok = (t1.t_end - t1.t_first) * 1e3 / (double)(gen - 1);
    b->bound_ms = b->bw > 0 ? (double)b->weight_bytes / b->bw * 1e3 : 0;
    size_t npre = 64;
    phase("prefill: %zu tokens, the best of 5", npre);
    b->prefill_tps = 0;
    for (int k = 0; k < 5; k++) { /* as scoring's figure: one run moves by 20% on a shared machine */
        timing tp = {0};
        if ((rc = decode_timed(e, 1, npre, 1, &tp, err))) return rc;
        if ((double)npre / (tp.t_first - tp.t0) > b->prefill_tps) b->prefill_tps = (double)npre / (tp.t_first - tp.t0);
    }
    if ((rc = bench_score(e, quick, &b->sb, err))) return rc;
    phase("batched decode: batch 1, 4, 8, 16%s", quick ? "" : ", the better of two runs each");
    for (int k = 0; k < 4; k++) { /* the better of two runs: batch 1 is the noisiest figure */
        b->batch_tps[k] = 0;
        for (int rep = 0; rep < (quick ? 1 : 2); rep++) {
            timing tb = {0};
            size_t g = quick ? 5 : 9;
            if ((rc = decode_timed(e, batches[k], 4, g, &tb, err))) return rc;
            double tps = (double)(batches[k] * (g - 1)) / (tb.t_end - tb.t_first);
            if (tps > b->batch_tps[k]) b->batch_tps[k] = tps;
        }
    }
    for (int i = 0; i < 3 && long_gen; i++) { /* tokens/s over the 8 steps ending at each mark */
        if (long_pos[i] > long_gen) continue;
        phase("decode up to position %zu", long_pos[i]);
        timing w = {0};
        w.marks[0] = long_pos[i] - 8;
        w.marks[1] = long_pos[i];
        if ((rc = decode_timed(e, 1, 4, long_pos[i], &w, err))) return rc;
        b->long_tps[i] = 8.0 / (w.at[1] - w.at[0]);
    }
    if ((rc = bench_speculate(e, quick, &b->sp, err))) return rc;
    if (!quick && (rc = bench_verify(e, &b->vb, err))) return rc;
    if (!quick && cis2_kernel_available("scalar") && cis2_engine_set_kernel(e, "scalar", err) == CIS2_OK) {
        phase("the scalar kernel: 3 tokens");
        timing ts = {0};
        if ((rc = decode_timed(e, 1, 4, 3, &ts, err))) return rc;
        b->scalar_ms = (ts.t_end - ts.t_first) * 1e3 / 2.0;
        if ((rc = cis2_engine_set_kernel(e, b->kernel, err))) return rc;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    b->rss_mb = (double)ru.ru_maxrss / 1024.0;
    return CIS2_OK;
}

static json_t *verify_json(const bench_res *b);

static void print_json(const bench_res *b, size_t long_gen)
{
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(b->model));
    json_object_set_new(o, "quick", json_boolean(b->quick)); /* --quick: no scalar_* and no verify */
    json_object_set_new(o, "kernel", json_string(b->kernel));
    json_object_set_new(o, "threads", json_integer(b->threads));
    json_object_set_new(o, "read_bandwidth_gb_s", json_real(b->bw / 1e9));
    json_object_set_new(o, "weight_bytes_per_token", json_integer((json_int_t)b->weight_bytes));
    json_object_set_new(o, "decode_ms_per_token", json_real(b->ms_tok));
    json_object_set_new(o, "decode_tokens_per_s", json_real(1e3 / b->ms_tok));
    json_object_set_new(o, "bound_ms_per_token", json_real(b->bound_ms));
    json_object_set_new(o, "ratio_to_bound", json_real(b->ms_tok / b->bound_ms));
    json_object_set_new(o, "prefill_tokens_per_s", json_real(b->prefill_tps));
    json_t *sc = json_object(); /* docs/sampling.md §S11: goals >= 0.9x prefill, >= 2.5x by the shared context */
    json_object_set_new(sc, "tokens", json_integer(SCORE_TOKS));
    json_object_set_new(sc, "score_tokens_per_s", json_real(b->sb.score_tps));
    json_object_set_new(sc, "ratio_to_prefill", json_real(b->sb.score_tps / b->prefill_tps));
    json_object_set_new(sc, "ratio_by_multiply_adds", json_real(b->sb.mac_ratio));
    if (!b->quick) {
        json_object_set_new(sc, "verify_prefill_rows_per_s", json_real(b->sb.verify_tps));
        json_object_set_new(sc, "ratio_to_verify_prefill", json_real(b->sb.score_tps / b->sb.verify_tps));
        json_object_set_new(sc, "context_tokens", json_integer((json_int_t)b->sb.ctx));
        json_object_set_new(sc, "continuations", json_integer(SCORE_NCONT));
        json_object_set_new(sc, "continuation_tokens", json_integer(SCORE_CONT));
        json_object_set_new(sc, "together_s_per_continuation", json_real(b->sb.together_s / SCORE_NCONT));
        json_object_set_new(sc, "alone_s_per_continuation", json_real(b->sb.alone_s / SCORE_NCONT));
        json_object_set_new(sc, "shared_context_gain", json_real(b->sb.alone_s / b->sb.together_s));
    }
    json_object_set_new(o, "score", sc);
    json_t *sp = json_object(); /* docs/speculate.md: the same tokens, fewer passes */
    json_object_set_new(sp, "prompt", json_string("48 ids, a pattern of 8 repeated"));
    json_object_set_new(sp, "plain_tokens_per_s", json_real(b->sp.plain_tps));
    for (int k = 0; k < 3; k++) {
        char key[32];
        snprintf(key, sizeof key, "lookup_%u_tokens_per_s", spec_ks[k]);
        json_object_set_new(sp, key, json_real(b->sp.tps[k]));
    }
    json_object_set_new(sp, "same_tokens", json_boolean(b->sp.same));
    if (b->sp.forced) { /* docs/speculate.md "Speed": goals 2x plain at 80%, at most 10% slower at 0% */
        json_t *fo = json_object();
        json_object_set_new(fo, "plain_tokens_per_s", json_real(b->sp.forced_plain_tps));
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 3; k++) {
                char key[48];
                snprintf(key, sizeof key, "accept_%u_k%u_tokens_per_s", spec_rates[r], spec_ks[k]);
                json_object_set_new(fo, key, json_real(b->sp.forced_tps[r][k]));
            }
        json_object_set_new(sp, "forced", fo);
    }
    json_object_set_new(o, "speculate", sp);
    json_t *bt = json_object();
    for (int k = 0; k < 4; k++) {
        char key[8];
        snprintf(key, sizeof key, "%zu", batches[k]);
        json_object_set_new(bt, key, json_real(b->batch_tps[k]));
    }
    json_object_set_new(o, "batched_tokens_per_s", bt);
    json_object_set_new(o, "full_run_s", json_real(b->t_full));
    if (!b->quick) {
        json_object_set_new(o, "scalar_ms_per_token", json_real(b->scalar_ms));
        json_object_set_new(o, "speedup_vs_scalar", json_real(b->scalar_ms / b->ms_tok));
        json_object_set_new(o, "verify", verify_json(b));
    }
    json_object_set_new(o, "peak_rss_mb", json_real(b->rss_mb));
    if (long_gen) {
        json_t *lt = json_object();
        for (int i = 0; i < 3; i++)
            if (b->long_tps[i] > 0) {
                char key[8];
                snprintf(key, sizeof key, "%zu", long_pos[i]);
                json_object_set_new(lt, key, json_real(b->long_tps[i]));
            }
        json_object_set_new(o, "decode_tokens_per_s_at_position", lt);
    }
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    printf("%s\n", s ? s : "null");
    free(s);
    json_decref(o);
}

static json_t *verify_json(const bench_res *b)
{
    json_t *v = json_object();
    json_object_set_new(v, "tokens_long", json_integer((json_int_t)b->vb.len1));
    json_object_set_new(v, "tokens_short", json_integer((json_int_t)b->vb.len2));
    json_object_set_new(v, "best_of", json_integer(REPS)); /* generate_256_s and verify_256_s */
    json_object_set_new(v, "generate_256_s", json_real(b->vb.gen256));
    json_object_set_new(v, "verify_256_s", json_real(b->vb.ver256));
    json_object_set_new(v, "verify_speedup_256", json_real(b->vb.gen256 / b->vb.ver256));
    json_object_set_new(v, "generate_16x64_s", json_real(b->vb.gen16x64));
    json_object_set_new(v, "verify_16x64_together_s_per_receipt", json_real(b->vb.ver16_together / 16));
    json_object_set_new(v, "verify_16x64_one_at_a_time_s_per_receipt", json_real(b->vb.ver16_each / 16));
    json_object_set_new(v, "batch_verify_gain", json_real(b->vb.ver16_each / b->vb.ver16_together));
    /* a user verifying one receipt per `cis2 verify R` pays a model open each time */
    json_object_set_new(v, "open_s", json_real(b->t_open));
    json_object_set_new(v, "verify_16x64_open_each_s_per_receipt", json_real(b->t_open + b->vb.ver16_each / 16));
    json_object_set_new(v, "verify_16x64_open_once_s_per_receipt", json_real((b->t_open + b->vb.ver16_together) / 16));
    json_object_set_new(v, "batch_verify_gain_with_open",
                        json_real((16 * b->t_open + b->vb.ver16_each) / (b->t_open + b->vb.ver16_together)));
    json_object_set_new(v, "tokens_shortest", json_integer((json_int_t)b->vb.len3));
    json_object_set_new(v, "verify_16_shortest_together_s_per_receipt", json_real(b->vb.ver16s_together / 16));
    json_object_set_new(v, "verify_16_shortest_one_at_a_time_s_per_receipt", json_real(b->vb.ver16s_each / 16));
    json_object_set_new(v, "batch_verify_gain_shortest", json_real(b->vb.ver16s_each / b->vb.ver16s_together));
    json_t *ga = json_array();
    for (int k = 0; k < 2; k++) {
        if (b->vb.verg_together[k] <= 0) continue;
        json_t *g = json_object();
        json_object_set_new(g, "prompt_tokens", json_integer((json_int_t)b->vb.group_prompt[k]));
        json_object_set_new(g, "samples", json_integer(16));
        json_object_set_new(g, "tokens", json_integer((json_int_t)b->vb.len2));
        json_object_set_new(g, "together_s_per_receipt", json_real(b->vb.verg_together[k] / 16));
        json_object_set_new(g, "one_at_a_time_s_per_receipt", json_real(b->vb.verg_each[k] / 16));
        json_object_set_new(g, "gain", json_real(b->vb.verg_each[k] / b->vb.verg_together[k]));
        json_array_append_new(ga, g);
    }
    json_object_set_new(v, "one_prompt_groups", ga);
    json_object_set_new(v, "all_ok", json_boolean(b->vb.ok));
    return v;
}

static void print_table(const bench_res *b)
{
    printf("model                     %s\n", b->model);
    printf("kernel / threads          %s / %d\n", b->kernel, b->threads);
    printf("read bandwidth            %.2f GB/s\n", b->bw / 1e9);
    printf("weight bytes per token    %.1f MB\n", (double)b->weight_bytes / 1e6);
    printf("decode                    %.2f ms/token (%.1f tokens/s)\n", b->ms_tok, 1e3 / b->ms_tok);
    printf("bandwidth bound           %.2f ms/token (achieved/bound = %.2fx)\n", b->bound_ms, b->ms_tok / b->bound_ms);
    printf("prefill (64 tokens)       %.1f tokens/s\n", b->prefill_tps);
    printf("scoring (%d tokens)       %.1f tokens/s (%.2fx prefill; %.2fx by multiply-adds: each row's LM head)\n",
           SCORE_TOKS, b->sb.score_tps, b->sb.score_tps / b->prefill_tps, b->sb.mac_ratio);
    if (!b->quick)
        printf("verification prefill      %.1f rows/s, every row's logits as scoring (scoring %.2fx it)\n",
               b->sb.verify_tps, b->sb.score_tps / b->sb.verify_tps);
    if (!b->quick)
        printf("score %d x %d-token continuations of one %zu-token context: %.4f s each together, %.4f s alone (%.1fx)\n",
           SCORE_NCONT, SCORE_CONT, b->sb.ctx, b->sb.together_s / SCORE_NCONT, b->sb.alone_s / SCORE_NCONT,
           b->sb.alone_s / b->sb.together_s);
    printf("speculative decode        plain %.1f tokens/s; lookup:2 %.1f (%.2fx), :4 %.1f (%.2fx), :8 %.1f (%.2fx)%s\n",
           b->sp.plain_tps, b->sp.tps[0], b->sp.tps[0] / b->sp.plain_tps, b->sp.tps[1], b->sp.tps[1] / b->sp.plain_tps,
           b->sp.tps[2], b->sp.tps[2] / b->sp.plain_tps, b->sp.same ? "" : " TOKENS DIFFER");
    if (b->sp.forced) {
        printf("forced acceptance         plain %.1f tokens/s; K = 2, 4, 8 (x plain):\n", b->sp.forced_plain_tps);
        for (int r = 0; r < 4; r++)
            printf("  %3u%% of drafts right     %.1f (%.2fx), %.1f (%.2fx), %.1f (%.2fx)\n", spec_rates[r],
                   b->sp.forced_tps[r][0], b->sp.forced_tps[r][0] / b->sp.forced_plain_tps, b->sp.forced_tps[r][1],
                   b->sp.forced_tps[r][1] / b->sp.forced_plain_tps, b->sp.forced_tps[r][2],
                   b->sp.forced_tps[r][2] / b->sp.forced_plain_tps);
    }
    for (int k = 0; k < 4; k++)
        printf("batched decode, batch %-3zu %.1f tokens/s (%.2fx batch 1)\n", batches[k], b->batch_tps[k],
               b->batch_tps[k] / b->batch_tps[0]);
    for (int i = 0; i < 3; i++)
        if (b->long_tps[i] > 0) printf("decode at position %-6zu %.1f tokens/s\n", long_pos[i], b->long_tps[i]);
    printf("full §13.1-shaped run     %.3f s (hash + load + 2 x (4+16 tokens))\n", b->t_full);
    if (b->quick) {
        printf("peak RSS                  %.0f MB\n", b->rss_mb);
        printf("(--quick: each figure once; no scalar kernel, no receipt verification)\n");
        return;
    }
    printf("scalar kernel             %.1f ms/token (speedup %.1fx)\n", b->scalar_ms, b->scalar_ms / b->ms_tok);
    printf("verify %zu-token receipt   %.3f s vs generating it %.3f s (%.1fx faster; best of %d each)%s\n", b->vb.len1,
           b->vb.ver256, b->vb.gen256, b->vb.gen256 / b->vb.ver256, REPS, b->vb.ok ? "" : " [a verdict was not OK]");
    printf("verify 16 x %zu-token      %.4f s per receipt together, %.4f s one at a time (%.1fx)\n", b->vb.len2,
           b->vb.ver16_together / 16, b->vb.ver16_each / 16, b->vb.ver16_each / b->vb.ver16_together);
    printf("  with a model open each   %.4f s per receipt (one `verify R1..R16`), %.4f s (16 `verify R`): %.1fx\n",
           (b->t_open + b->vb.ver16_together) / 16, b->t_open + b->vb.ver16_each / 16,
           (16 * b->t_open + b->vb.ver16_each) / (b->t_open + b->vb.ver16_together));
    printf("verify 16 x %zu-token       %.4f s per receipt together, %.4f s one at a time (%.1fx)\n", b->vb.len3,
           b->vb.ver16s_together / 16, b->vb.ver16s_each / 16, b->vb.ver16s_each / b->vb.ver16s_together);
    for (int k = 0; k < 2; k++)
        if (b->vb.verg_together[k] > 0)
            printf("verify 16 x %zu-token samples of one %zu-token prompt: %.4f s per receipt together, %.4f s one at a "
                   "time (%.1fx)\n",
                   b->vb.len2, b->vb.group_prompt[k], b->vb.verg_together[k] / 16, b->vb.verg_each[k] / 16,
                   b->vb.verg_each[k] / b->vb.verg_together[k]);
    printf("peak RSS                  %.0f MB\n", b->rss_mb);
}

/* What is left after the §13.1-shaped run, from how long its two decodes
 * of 4+16 tokens took (t, about 20 decode steps): the later phases cost
 * about K_QUICK and K_FULL times that (smollm2-135m on 2 busy cores: the
 * full run 399 s, 390 s of it after the estimate with t = 1.2 s; the
 * phases --quick keeps about 5 t), plus the bandwidth phase, and
 * --gen-toks's long decodes (about N / 16 t each). */
#define K_QUICK 5.0
#define K_FULL 330.0

static void estimate(double t, int quick, size_t long_gen)
{
    /* the bandwidth phase: fresh pages written once, then read; a 16 MiB
     * probe of the same, scaled */
    size_t pb = (size_t)16 << 20;
    double t0 = now();
    volatile unsigned char *p = malloc(pb);
    if (p) {
        memset((void *)p, 1, pb);
        for (size_t i = 0; i < pb; i += 4096) p[0] = (unsigned char)(p[0] + p[i]);
        free((void *)p);
    }
    double rest = (now() - t0) * (double)(BW_BYTES / pb) * (1.0 + BW_REPS(quick) / 2.0);
    rest += t * (quick ? K_QUICK : K_FULL);
    for (int i = 0; i < 3 && long_gen; i++)
        if (long_pos[i] <= long_gen) rest += t * (double)long_pos[i] / 16.0;
    char full[64];
    if (rest < 1) snprintf(full, sizeof full, "1 s");
    else snprintf(full, sizeof full, rest < 120 ? "%.0f s" : "%.0f min", rest < 120 ? rest : rest / 60);
    phase("estimate: about %s more%s", full,
          quick ? " (--quick)" : "; `cis2 bench --quick` measures the headline figures in a fraction of that");
}

int cmd_bench(int argc, char **argv)
{
    cli_engine eng = {0};
    const char *shape = NULL;
    size_t long_gen = 0;
    int json = 0, quick = 0, rc;
    cli_opt opts[] = {CLI_ENGINE_OPTS(eng),
                      {"--shape", OPT_STR, &shape, 0, 0},
                      {"--gen-toks", OPT_SIZE, &long_gen, 1u << 20, 0},
                      {"--json", OPT_FLAG, &json, 0, 0},
                      {"--quick", OPT_FLAG, &quick, 0, 0},
                      {0}};
    if ((rc = cli_parse("bench", argc, argv, opts, NULL, 0, NULL))) return rc < 0 ? 0 : rc;
    if (shape && eng.model_dir) return cli_usage_error("bench", "give --model-dir or --shape, not both");
    if (!shape) shape = "smollm2-135m";
    cis2_error err = {0};
    char tmpdir[4200] = "";
    bench_res b = {.quick = quick};
    cis2_engine *e = NULL;
    t_start = now();
    if (!eng.model_dir) {
        if (!cis2_synth_find_shape(shape)) return cli_usage_error("bench", "unknown shape '%s'", shape);
        if ((rc = cis2_mkdtemp(tmpdir, sizeof tmpdir, "cis2-bench", &err))) return cli_report(&err);
        phase("synthesizing a %s checkpoint in %s", shape, tmpdir);
        if ((rc = cis2_synth_write(shape, 1, tmpdir, NULL, &err))) goto out;
        eng.model_dir = tmpdir;
    }
    b.model = tmpdir[0] ? shape : eng.model_dir;
    /* §13.1-shaped run: hash + load + both decodes of 4+16 tokens */
    double t0 = now();
    phase("the §13.1-shaped run: sha256 of the files, load, both decodes of 4+16 tokens");
    if ((rc = cli_engine_open(&eng, &e, &err))) goto out;
    b.t_open = now() - t0; /* sha256 of all three files, load, pack */
    {
        size_t V = cis2_engine_info(e)->vocab_size;
        uint32_t p[4];
        for (int i = 0; i < 4; i++) p[i] = (uint32_t)((i * 7919 + 13) % V);
        cis2_request q = {.ids = p, .n_ids = 4, .max_tokens = 16};
        cis2_gen_opts o = {.twice = 1};
        cis2_result *r;
        if ((rc = cis2_generate(e, &q, 1, &o, &r, &err))) goto out;
        cis2_results_free(r, 1);
    }
    b.t_full = now() - t0;
    estimate(b.t_full - b.t_open, quick, long_gen);
    if ((rc = measure(e, long_gen, quick, &b, &err))) goto out;
    phase("done");
    if (json) print_json(&b, long_gen);
    else print_table(&b);
out:
    cis2_engine_close(e);
    if (tmpdir[0]) cis2_rmtree_tmp(tmpdir);
    return rc ? cli_report(&err) : cli_finish_stdout(CIS2_OK);
}

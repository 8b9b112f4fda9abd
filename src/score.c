/*
 * score.c - cis2_score (include/cis2.h section 9, docs/sampling.md §S11):
 * the logprob of every token of a given continuation after a given
 * context, by one teacher-forced prefill of context ++ continuation.
 * Spec §3.4, §3.5 (prefill rows and the cached decode give the same
 * bits), §11.1, §11.2; docs/sampling.md §S3.3 (rank), §S4 (logprobs),
 * §S11 (which row scores which token, sums).
 *
 * Which row scores which token (§S11.2): the input at position p is the
 * sequence's token p (context ids, then continuation ids); its logits row
 * is the one a decode would choose token p+1 from, so it scores token p+1
 * when that is a continuation token.  Rows are fed for positions
 * [0, len-1): the last token is never an input.  Each row's figures come
 * from the functions decoding uses on its row: cis2_logprobs (§S4, the
 * same call session.c makes, hence the same bits cis2_generate reports),
 * cis2_argmax_lanes (§11.2: greedy or not) and the candidate order of
 * §S3.3 (rank).
 *
 * Passes (§S11.4): the prefill planner (prefill.h, verification's too)
 * packs every request's rows into shared weight passes, and requests whose
 * contexts begin with the same ids compute them once (share.h): the
 * longest such context's request (the donor) computes them, the others
 * wait for it and copy that KV prefix (cis2_kv_copy_prefix, §3.5: a
 * position's keys and values are a function of the ids up to it) up to at
 * most their own position nctx-1, whose logits score their first
 * continuation token, and feed their own rows from there.  Every row
 * computed is the same arithmetic as without sharing.  What is this
 * file's: which rows a request has and which want logits (job_plan), and
 * each logits row's figures.
 *
 * Score receipts (docs/receipts.md "Score receipts"): with a witness
 * asked for (cis2_score_run), each request also keeps one SHA-256 stream,
 * begun with §12.1 items 1-6 over context ++ continuation ids and the
 * context's length (u32 LE), then fed, for every scored token in token
 * order, its row's V logits (witness.h: canonical NaN) and the token (u32
 * LE); the rows of one request lie together in a pass, so requests hash
 * in parallel, each its rows in order.  Without it nothing is hashed.
 *
 * Memory (docs/inputs.md "Memory"; the bounds the planner keeps for this
 * file): a pass holds at most SCORE_ROWS rows and SCORE_LOGIT_BYTES of
 * logits, in the buffer the engine keeps between calls (bigbuf.h: fresh
 * memory, zero-filled page by page, cost a third of a short score);
 * requests are admitted while their KV caches fit in SCORE_KV_BUDGET
 * (always at least one).
 */
#include "api.h"
#include "engine.h"
#include "kernels.h"
#include "model.h"
#include "prefill.h"
#include "sample.h"
#include "score.h"
#include "witness.h"

#include <stdlib.h>
#include <string.h>

#define SCORE_ROWS 256
#define SCORE_LOGIT_BYTES ((size_t)64 << 20)
#define SCORE_KV_BUDGET ((size_t)1 << 30)
#define SCORE_CHUNKS 8 /* parallel figures: items, each its own sampler workspace */

typedef struct sjob {
    cis2_score_result *res;
    size_t index;            /* in the call */
    size_t len;              /* n_context + n_ids */
    cis2_prefill_job pj;     /* its rows and cache in the passes (prefill.h) */
    cis2_sha w;              /* the receipt's witness (w_on) */
    int w_on;
} sjob;

/* The input at position p: context ids, then continuation ids. */
static uint32_t job_token(const void *job, size_t p)
{
    const cis2_score_result *r = ((const sjob *)job)->res;
    return p < r->n_context ? r->context_ids[p] : r->ids[p - r->n_context];
}

/* ------------------------------------------------------------ requests */

/* Text or ids into *ids (owned); `what` names the part in errors. */
static int take_part(const cis2_engine *e, size_t k, const char *what, const char *text, size_t len,
                     const uint32_t *in, size_t n_in, size_t maxpos, uint32_t **ids, size_t *n, cis2_error *err)
{
    *ids = NULL;
    *n = 0;
    if (text && in) return cis2_fail(err, CIS2_E_USAGE, "score request %zu: give the %s as text or as ids, not both", k, what);
    if (text) {
        if (!len) return CIS2_OK;
        cis2_error te = {0};
        int rc = cis2_engine_encode_max(e, text, len, maxpos, ids, n, &te);
        if (rc == CIS2_E_USAGE && e->tok)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "score request %zu: the %s is longer than max_position_embeddings (%zu)",
                             k, what, maxpos);
        if (rc) return cis2_fail(err, rc, "score request %zu: %s: %s", k, what, te.msg);
        for (size_t i = 0; i < *n; i++)
            if ((*ids)[i] >= e->m.vocab)
                return cis2_fail(err, CIS2_E_FORMAT,
                                 "score request %zu: the tokenizer gives id %u, outside the model's vocabulary (%zu)", k,
                                 (*ids)[i], e->m.vocab);
        return CIS2_OK;
    }
    if (!n_in) return CIS2_OK;
    if (!in) return cis2_fail(err, CIS2_E_USAGE, "score request %zu: %zu %s ids but no array", k, n_in, what);
    for (size_t i = 0; i < n_in; i++)
        if (in[i] >= e->m.vocab)
            return cis2_fail(err, CIS2_E_USAGE, "score request %zu: %s id %u is outside the vocabulary (%zu)", k, what,
                             in[i], e->m.vocab);
    if (!(*ids = malloc(n_in * sizeof **ids))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    memcpy(*ids, in, n_in * sizeof **ids);
    *n = n_in;
    return CIS2_OK;
}

/* A request's ids and the result's arrays. */
static int prepare(const cis2_engine *e, const cis2_score_request *q, size_t k, cis2_score_result *r, cis2_error *err)
{
    size_t maxpos = (size_t)e->m.cfg.max_position_embeddings;
    if (q->top_logprobs > CIS2_MAX_TOP_LOGPROBS)
        return cis2_fail(err, CIS2_E_USAGE, "score request %zu: top_logprobs %u is more than %d", k, q->top_logprobs,
                         CIS2_MAX_TOP_LOGPROBS);
    int rc = take_part(e, k, "context", q->context, q->context_len, q->context_ids, q->n_context_ids, maxpos,
                       &r->context_ids, &r->n_context, err);
    if (!rc)
        rc = take_part(e, k, "continuation", q->continuation, q->continuation_len, q->continuation_ids,
                       q->n_continuation_ids, maxpos, &r->ids, &r->n_ids, err);
    if (rc) return rc;
    if (!r->n_ids) return cis2_fail(err, CIS2_E_USAGE, "score request %zu: the continuation has no tokens", k);
    if (r->n_context + r->n_ids > maxpos)
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "score request %zu: context (%zu tokens) + continuation (%zu) exceeds max_position_embeddings (%zu)",
                         k, r->n_context, r->n_ids, maxpos);
    size_t n = r->n_ids, t = q->top_logprobs;
    r->first = r->n_context ? 0 : 1;
    r->n_scored = n - r->first;
    r->n_top = t;
    r->logprobs = calloc(n, sizeof *r->logprobs);
    r->ranks = calloc(n, sizeof *r->ranks);
    r->greedy = calloc(n, 1);
    if (t) {
        r->top_ids = malloc(n * t * sizeof *r->top_ids);
        r->top_logprobs = calloc(n * t, sizeof *r->top_logprobs);
    }
    if (!r->logprobs || !r->ranks || !r->greedy || (t && (!r->top_ids || !r->top_logprobs)))
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n * t; i++) r->top_ids[i] = UINT32_MAX; /* padding, as cis2_token_event */
    return CIS2_OK;
}

/* ------------------------------------------------------------- figures */

/* A pass's figures: each logits row scores the token after its position
 * (§S11.2), in parallel chunks of rows, each chunk its sampler workspace. */
typedef struct fig_ctx {
    const cis2_ctx *cx;
    const cis2_prefill_lrow *rows;
    size_t n, nchunks, V;
    cis2_sample_ws *ws;
    int rc[SCORE_CHUNKS];
} fig_ctx;

static void fig_task(void *vctx, size_t c)
{
    fig_ctx *f = vctx;
    for (size_t i = f->n * c / f->nchunks; i < f->n * (c + 1) / f->nchunks; i++) {
        const cis2_prefill_lrow *lr = &f->rows[i];
        cis2_score_result *r = ((sjob *)lr->job)->res;
        const float *x = lr->logits;
        size_t k = lr->pos + 1 - r->n_context, t = r->n_top, nt; /* the continuation token it scores */
        uint32_t tok = r->ids[k];
        int rc = cis2_logprobs(f->cx, x, f->V, tok, t, &f->ws[c], &r->logprobs[k], t ? r->top_ids + k * t : NULL,
                               t ? r->top_logprobs + k * t : NULL, &nt); /* §S4, as decoding reports it */
        if (rc) { f->rc[c] = rc; continue; }
        for (size_t q = nt; q < t; q++) { r->top_ids[k * t + q] = UINT32_MAX; r->top_logprobs[k * t + q] = 0.0f; }
        r->greedy[k] = cis2_argmax_lanes(f->cx, x, f->V) == tok; /* §11.2 */
        r->ranks[k] = cis2_candidate_rank(x, f->V, tok); /* §S3.3; 0 for a NaN logit */
    }
}

/* The witness of a pass's rows: task c hashes slot c's, one request's rows
 * in order (requests in parallel). */
typedef struct hash_ctx { const cis2_prefill *pf; size_t V; } hash_ctx;

static void hash_task(void *vctx, size_t c)
{
    const hash_ctx *h = vctx;
    const cis2_prefill_slot *s = &h->pf->slots[c];
    sjob *j = s->job;
    for (size_t i = s->lrow0; i < s->lrow0 + s->nlog; i++) {
        const cis2_prefill_lrow *lr = &h->pf->lrows[i];
        cis2_witness_logits(&j->w, lr->logits, h->V);
        cis2_witness_token(&j->w, j->res->ids[lr->pos + 1 - j->res->n_context]);
    }
}

/* §S11.3: the sums over the scored tokens, in token order. */
static void sums(cis2_score_result *r)
{
    float s = 0.0f;
    double d = 0.0;
    int all = 1;
    for (size_t k = r->first; k < r->n_ids; k++) {
        s = s + r->logprobs[k];
        d = d + (double)r->logprobs[k];
        all &= r->greedy[k];
    }
    r->sum = s;
    r->sum_f64 = d;
    r->all_greedy = all;
}

/* -------------------------------------------------------------- passes */

/* A request's rows (§S11.2): positions [0, len-1), its last token never an
 * input; the rows from position nctx-1 on want logits, each scoring the
 * continuation token after it.  Its cache holds len positions.  Sharing
 * (share.h): requests are planned by their context ids; the positions
 * before a context's last id give no logits and may come from a donor. */
static void job_plan(sjob *j)
{
    size_t nc = j->res->n_context;
    j->pj = (cis2_prefill_job){.job = j, .positions = j->len, .next = 0, .end = j->len - 1, .lfrom = nc ? nc - 1 : 0};
    j->pj.sh = (cis2_share){.ids = j->res->context_ids, .len = nc, .cap = nc ? nc - 1 : 0, .index = j->index};
}

/* The caller's cancellation point (cis2_score_opts.should_stop): its code,
 * so with the caller's floating-point environment (api.h). */
static int should_stop(const cis2_score_opts *o)
{
    if (!o || !o->should_stop) return 0;
    uint64_t pinned = cis2_api_callout_begin();
    int stop = o->should_stop(o->should_stop_ctx);
    cis2_api_callout_end(pinned);
    return stop;
}

/* Every request's rows through the planner's passes (prefill.h), each
 * pass's figures and, with hashing on, its witness rows. */
static int run_jobs(cis2_engine *e, const cis2_ctx *cx, sjob *jobs, size_t n, int hashing,
                    const cis2_score_opts *opts, cis2_error *err)
{
    const size_t V = e->m.vocab;
    const cis2_prefill_cfg cfg = {.m = &e->m, .keep = &e->logits, .rows = SCORE_ROWS, .logit_bytes = SCORE_LOGIT_BYTES,
                                  .buffers = 1, .kv_budget = SCORE_KV_BUDGET, .share_min = 1, .token = job_token};
    cis2_prefill pf;
    cis2_sample_ws sws[SCORE_CHUNKS] = {{0}};
    int rc = cis2_prefill_open(&pf, &cfg, n, err);
    for (size_t i = 0; i < n && !rc; i++) {
        job_plan(&jobs[i]);
        cis2_prefill_add(&pf, &jobs[i].pj);
    }
    while (!rc && !(rc = cis2_prefill_next(&pf, err)) && pf.nrows) {
        if (should_stop(opts)) { /* between passes: nothing half done */
            rc = cis2_fail(err, CIS2_E_CANCELLED, "score: cancelled by the caller");
            break;
        }
        if ((rc = cis2_prefill_forward(&pf, cx, err))) break;
        size_t nch = pf.nlog < SCORE_CHUNKS ? pf.nlog : SCORE_CHUNKS;
        if (!nch) continue;
        fig_ctx fc = {.cx = cx, .rows = pf.lrows, .n = pf.nlog, .nchunks = nch, .V = V, .ws = sws};
        cis2_parallel_for(cx, nch, fig_task, &fc);
        for (size_t c = 0; c < nch && !rc; c++)
            if (fc.rc[c]) rc = cis2_fail(err, fc.rc[c], "out of memory in score");
        if (!rc && hashing) {
            hash_ctx h = {&pf, V};
            cis2_parallel_for(cx, pf.nslots, hash_task, &h);
        }
    }
    for (size_t c = 0; c < SCORE_CHUNKS; c++) cis2_sample_ws_free(&sws[c]);
    cis2_prefill_close(&pf);
    return rc;
}

/* ---------------------------------------------------------------- API */

static void result_clear(cis2_score_result *r)
{
    free(r->context_ids);
    free(r->ids);
    free(r->logprobs);
    free(r->ranks);
    free(r->greedy);
    free(r->top_ids);
    free(r->top_logprobs);
    memset(r, 0, sizeof *r);
}

void cis2_score_results_free(cis2_score_result *results, size_t n)
{
    if (!results) return;
    for (size_t i = 0; i < n; i++) result_clear(&results[i]);
    free(results);
}

/* §12.1 items 1-6 over context ++ continuation, then the context's length. */
static int witness_begin(const cis2_model *m, sjob *j)
{
    const cis2_score_result *r = j->res;
    uint32_t *all = malloc((j->len ? j->len : 1) * sizeof *all);
    if (!all) return -1;
    for (size_t p = 0; p < j->len; p++) all[p] = job_token(j, p);
    int bad = cis2_witness_begin(&j->w, m, all, j->len, NULL);
    free(all);
    if (bad) return -1;
    cis2_sha_u32le(&j->w, (uint32_t)r->n_context);
    j->w_on = 1;
    return 0;
}

int cis2_score(cis2_engine *e, const cis2_score_request *reqs, size_t n, cis2_score_result **results,
               cis2_error *err)
{
    return cis2_score_run(e, reqs, n, NULL, NULL, results, err);
}

int cis2_score_ex(cis2_engine *e, const cis2_score_request *reqs, size_t n, const cis2_score_opts *opts,
                  cis2_score_result **results, cis2_error *err)
{
    return cis2_score_run(e, reqs, n, NULL, opts, results, err);
}

int cis2_score_run(cis2_engine *e, const cis2_score_request *reqs, size_t n, uint8_t (*witness)[32],
                   const cis2_score_opts *opts, cis2_score_result **results, cis2_error *err)
{
    if (results) *results = NULL;
    if (!e || !results) return cis2_fail(err, CIS2_E_USAGE, "score: no engine or no place for the results");
    if (n == 0 || !reqs) return cis2_fail(err, CIS2_E_USAGE, "score: no requests");
    cis2_score_result *res = calloc(n, sizeof *res);
    sjob *jobs = calloc(n, sizeof *jobs);
    cis2_frame f;
    cis2_ctx cx;
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    cx = cis2_engine_ctx(e);
    if (!res || !jobs) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n && !rc; i++) {
        rc = prepare(e, &reqs[i], i, &res[i], err);
        jobs[i] = (sjob){.res = &res[i], .index = i, .len = res[i].n_context + res[i].n_ids};
        if (!rc && witness && witness_begin(&e->m, &jobs[i])) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    if (!rc) rc = run_jobs(e, &cx, jobs, n, witness != NULL, opts, err);
    if (!rc)
        for (size_t i = 0; i < n; i++) sums(&res[i]);
out:
    ENGINE_LEAVE(f);
    for (size_t i = 0; jobs && i < n; i++) { /* finalizing also frees a stream */
        uint8_t dummy[32];
        if (jobs[i].w_on) cis2_sha_final(&jobs[i].w, rc ? dummy : witness[i]);
    }
    free(jobs);
    if (rc) {
        cis2_score_results_free(res, n);
        return rc;
    }
    *results = res;
    return CIS2_OK;
}

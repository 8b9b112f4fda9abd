/*
 * verify.c - cis2_verify (include/cis2.h section 7): a receipt's every
 * field recomputed from the engine's files.  This file owns the replays
 * and the call; verify_plan.c plans them (preparing each receipt's run,
 * which prompt prefixes may be shared) and judges the verdicts (verify.h);
 * the prefill replay's passes (admission, shared prefixes, the row caps)
 * are the prefill planner's (prefill.h), scoring's too.  Spec §3.4, §3.5,
 * §11.2, §12.1, §12.2, §12.4; docs/sampling.md §S3, §S5.
 *
 * verify trusts nothing in a receipt but its inputs (prompt-hex, the
 * number of tokens, and for the extension the sampling parameters and stop
 * rules): hashes come from the files, prompt ids from the tokenizer,
 * outputs from the model.  The run the inputs describe is recomputed in
 * one of two ways:
 *
 *   prefill (default): the prompt ++ the claimed tokens go through the
 *     model as teacher-forced prefill rows, in chunks, many receipts per
 *     weight pass.  Every row is the single-sequence arithmetic and the KV
 *     cache is memoization (§3.5), so the logits at position
 *     n_prompt-1+s equal decode step s's logits whenever the claimed
 *     tokens before s are the decode's.  Each step's token is then chosen
 *     as the run would choose it (§11.2's argmax, or the seeded sampler of
 *     §S3 with the receipt's parameters) and the stop rules evaluated
 *     (§S5.3).  While those tokens are the claimed ones the rows are the
 *     decode's; at the first step whose claim differs, the receipt is wrong
 *     there (first-bad-step names it, with both tokens' logits), and the
 *     run continues from the true token as an ordinary decode, so every
 *     field reported is exactly what the decode replay reports.
 *   decode: the whole run again (cis2_generate), token by token.
 *
 * §12.4's double run (a property of the run, not of the receipt) is
 * optional (`twice`): a verify is itself an independent recomputation.
 *
 * After a prefill pass, every logits row's token is chosen in parallel
 * (each is a pure function of its row and step, §11.2 / §S3), the claims
 * and stop rules are then judged in step order, and the §12.1 hashing of
 * the pass's rows, one SHA-256 stream per receipt that nothing else reads
 * until the end, runs in the background of the next pass (the pool's
 * threads take it between the matrix items, see the hasher below): the
 * logits live in two halves, one being hashed while the other fills.
 *
 * Execution context (kernels.h): the call computes on a copy of the
 * engine's (cis2_engine_ctx) whose bg is the call's own hasher, so only
 * this call's matrix jobs carry its hashing, never another caller's on
 * the shared pool.
 *
 * Memory (docs/inputs.md "Memory"; the bounds the planner keeps for this
 * file): a prefill pass holds at most VERIFY_ROWS rows and half of
 * VERIFY_LOGIT_BYTES of logits (the engine's kept buffer, bigbuf.h, as a
 * score's); receipts are admitted while their KV caches fit in
 * VERIFY_KV_BUDGET (always at least one).
 */
#include "verify.h"
#include "score.h"
#include "digest.h"
#include "kernels.h"
#include "pmath.h"
#include "session.h"
#include "threadpool.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERIFY_ROWS 256
#define VERIFY_LOGIT_BYTES ((size_t)64 << 20)
#define VERIFY_KV_BUDGET ((size_t)1 << 30)
#define CHOOSE_CHUNKS 8 /* parallel token choice: items (each its sampler workspace) */

static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* The token fed at position p: the prompt's, then the claimed tokens
 * (teacher forcing), or once decoding the run's own. */
static uint32_t job_token(const void *job, size_t p)
{
    const vjob *j = job;
    if (p < j->nids) return j->ids[p];
    return j->decoding ? j->decoded[p - j->nids] : j->r->generated[p - j->nids];
}

static void note_bad(vjob *j, size_t step, const float *lg, size_t V, uint32_t best)
{
    if (j->bad_step >= 0) return;
    uint32_t claim = step < j->claimed ? j->r->generated[step] : UINT32_MAX;
    j->bad_step = (long long)step;
    j->claimed_tok = claim;
    j->expected_tok = best;
    j->claimed_bits = claim < V ? bits(lg[claim]) : 0;
    j->expected_bits = bits(lg[best]);
}

/* One step of the run, given its token as the run chooses it (choose_task):
 * the claim, the stop rules (§S5.3); the step's witness item 7 is the
 * hasher's.  A step past the claimed tokens, or a run that stops before
 * them, is a mismatch at that step. */
static void decide(vjob *j, const cis2_engine *e, const float *lg, size_t V, uint32_t tok)
{
    size_t step = j->ndec;
    if (step >= j->claimed || tok != j->r->generated[step]) note_bad(j, step, lg, V, tok);
    j->decoded[j->ndec++] = tok;
    size_t len = 0;
    const char *b = j->stop.n_strings && e->tok ? cis2_tokenizer_token_bytes(e->tok, tok, &len) : NULL;
    int why = cis2_stop_after(&j->stop, &j->sst, step, tok, (const uint8_t *)(b ? b : ""), b ? len : 0);
    if (why < 0) { j->rc = CIS2_E_NOMEM; return; }
    if (why) {
        j->finish = why;
        if (j->ndec < j->claimed) { /* it stops before the claimed tokens end */
            uint32_t claim = j->r->generated[j->ndec];
            if (j->bad_step < 0) {
                j->bad_step = (long long)j->ndec;
                j->claimed_tok = claim;
                j->expected_tok = UINT32_MAX; /* none: the run has stopped */
            }
        }
    }
}

/* The token the run chooses at every logits row of a pass: §11.2's argmax,
 * or §S3's sampler keyed by the step, a function of the row and the step
 * alone, so rows go in parallel (rows past a receipt's first bad step are
 * chosen too, and dropped by check). */
typedef struct choose_ctx {
    const cis2_ctx *cx;
    const cis2_prefill_lrow *rows; /* the pass's logits rows */
    size_t V, nrows, nchunks;
    uint32_t *tok;
    cis2_sample_ws *ws;    /* nchunks */
    int rc[CHOOSE_CHUNKS];
} choose_ctx;

/* The step a logits row decides: the row at position nids-1+s decides step s. */
static size_t row_step(const vjob *j, size_t pos) { return pos + 1 - j->nids; }

static void choose_task(void *vctx, size_t c)
{
    choose_ctx *x = vctx;
    for (size_t r = x->nrows * c / x->nchunks; r < x->nrows * (c + 1) / x->nchunks; r++) {
        const cis2_prefill_lrow *lr = &x->rows[r];
        const vjob *j = lr->job;
        int rc = cis2_sample_step(x->cx, lr->logits, x->V, &j->samp, (uint32_t)row_step(j, lr->pos), &x->ws[c],
                                  &x->tok[r], NULL);
        if (rc) x->rc[c] = rc;
    }
}

/* This pass's nlog logits rows of one receipt (from lg0, end to end), in
 * step order, their tokens at tok.  While the claims hold, each row is the
 * run's (teacher forcing is exact); after the first that does not, the
 * rest of this pass's rows were fed a wrong token and are dropped: the
 * receipt continues as a decode from the true token. */
static void check(vjob *j, const cis2_engine *e, size_t V, const float *lg0, size_t nlog, const uint32_t *tok)
{
    for (size_t k = 0; k < nlog && !j->finish && !j->rc; k++) {
        decide(j, e, lg0 + k * V, V, tok[k]);
        if (j->bad_step >= 0 && !j->decoding) { j->decoding = 1; break; }
    }
}

/* ---- the hasher: §12.1 item 7 of a pass's decided rows, in the
 * background of the next pass.  One pass is hashed at a time, in pass
 * order, so each receipt's stream takes its steps in order; its rows'
 * logits half is not refilled until the hasher is joined.  The hashing is
 * the call's background work (threadpool.h), set in the call's own
 * context: the next pass's matrix jobs each carry a step of it, taken by
 * whichever pool thread is free, and hasher_join finishes what is left on
 * the caller.  A step
 * hashes a budget of bytes from a cursor (item, row, offset), splitting a
 * row where the budget ends: the stream is the same bytes. ---- */
typedef struct hash_item { vjob *j; const float *lg; size_t step0, n; } hash_item;
typedef struct hasher {
    cis2_bg bg;            /* first: step() gets &h->bg */
    cis2_ctx *cx;          /* the call's context: bg is set there while hashing */
    int set;               /* cx->bg is this hasher's */
    hash_item *items;
    size_t n, V;
    size_t i, k, off;      /* cursor: item, its row, the floats of the row hashed */
} hasher;

/* Moves the cursor past finished (and empty) items. */
static void hash_skip(hasher *h)
{
    while (h->i < h->n && h->k == h->items[h->i].n) { h->i++; h->k = 0; }
}

static void hash_step(cis2_bg *bg, size_t budget)
{
    hasher *h = (hasher *)bg;
    size_t left = budget / sizeof(float);
    hash_skip(h);
    while (h->i < h->n && left) {
        const hash_item *it = &h->items[h->i];
        size_t take = h->V - h->off < left ? h->V - h->off : left;
        cis2_witness_logits(&it->j->w, it->lg + h->k * h->V + h->off, take); /* §12.1 7a */
        h->off += take;
        left -= take;
        if (h->off == h->V) { /* the row is whole */
            cis2_witness_token(&it->j->w, it->j->decoded[it->step0 + h->k]); /* 7b */
            h->off = 0;
            h->k++;
            hash_skip(h);
        }
    }
    h->bg.more = h->i < h->n;
}

static void hasher_join(hasher *h)
{
    if (!h->set) return;
    while (h->bg.more) hash_step(&h->bg, SIZE_MAX);
    h->cx->bg = NULL;
    h->set = 0;
}

/* Hashes h->items (filled by the caller after hasher_join) in the
 * background of the next pass; here instead when the engine runs on one
 * thread (the pool runs no jobs beside the caller). */
static void hasher_start(hasher *h)
{
    h->i = h->k = h->off = 0;
    h->bg.step = hash_step;
    h->bg.more = h->n > 0;
    if (!h->bg.more) return;
    if (cis2_pool_size(h->cx->pool) > 1) {
        h->cx->bg = &h->bg; /* this call's jobs only (threadpool.h) */
        h->set = 1;
    } else
        while (h->bg.more) hash_step(&h->bg, SIZE_MAX);
}

/* The witness, once the hasher has taken every step (hasher_join). */
static void job_witness(vjob *j)
{
    if (j->w_open) {
        cis2_sha_final(&j->w, j->witness);
        j->w_open = 0;
    }
}

/* Admission (prefill.h's start, the cache already held): the run's
 * state, its witness begun (§12.1 items 1-6), and its teacher-forced rows:
 * positions 0 .. nids+claimed-2 (the last claimed token is never an
 * input; a claimed id outside the vocabulary is never fed), those from
 * nids-1 on giving logits, one row per step. */
static int job_start(void *ctx, void *job, cis2_error *err)
{
    const cis2_model *m = ctx;
    vjob *j = job;
    if (!(j->decoded = malloc(j->stop.max_tokens * sizeof(uint32_t))))
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (cis2_witness_begin(&j->w, m, j->ids, j->nids, j->ext ? j->params : NULL))
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    j->w_open = 1;
    j->bad_step = -1;
    j->ndec = 0;
    j->finish = CIS2_FINISH_NONE;
    j->decoding = 0;
    j->pj.next = 0;
    j->pj.end = j->nids + j->claimed - 1;
    if (j->nids + j->oov_step < j->pj.end) j->pj.end = j->nids + j->oov_step;
    j->pj.lfrom = j->nids - 1;
    return CIS2_OK;
}

/* A receipt's part in the passes: its cache holds the whole run, prompt
 * and max tokens, as a session's would; its prefix may be shared
 * (verify_plan.c). */
static void job_plan(vjob *j)
{
    size_t pos = j->nids + j->stop.max_tokens;
    cis2_verify_share_rule(j);
    j->pj.job = j;
    j->pj.positions = pos < j->nids ? SIZE_MAX : pos;
}

/* The caller's cancellation point (cis2_verify_opts.should_stop): its
 * code, so with the caller's floating-point environment (api.h). */
static int should_stop(const cis2_verify_opts *o)
{
    if (!o->should_stop) return 0;
    uint64_t pinned = cis2_api_callout_begin();
    int stop = o->should_stop(o->should_stop_ctx);
    cis2_api_callout_end(pinned);
    return stop;
}

#define CANCELLED(err) cis2_fail(err, CIS2_E_CANCELLED, "verify: cancelled by the caller")

/* After a pass, one receipt's next rows: none once its run has finished
 * (the planner retires it), else the teacher-forced rows still to come, or
 * once it decodes (after a mismatch, or past the claimed tokens with every
 * claim matched) one row a pass: its last decided token. */
static void next_rows(vjob *j)
{
    cis2_prefill_job *pj = &j->pj;
    if (j->finish) { pj->end = pj->next; return; }
    if (!j->decoding && pj->next == pj->end && j->ndec == pj->end + 1 - j->nids)
        j->decoding = 1; /* every claim matched, and the run goes on past them */
    if (j->decoding) {
        pj->next = j->nids + j->ndec - 1;
        pj->end = pj->next + 1;
    }
}

/* Teacher-forced replay of every job (see the top of the file), the
 * decodes after a bad step included, in the prefill planner's passes
 * (prefill.h).  After each pass: every logits row's token chosen in
 * parallel, each receipt's rows judged in step order (check), the decided
 * rows handed to the hasher, the caller's on_step in step order per
 * receipt, and each receipt's next rows (next_rows). */
static int replay_prefill(cis2_engine *e, cis2_ctx *cx, vjob *jobs, size_t n, const cis2_verify_opts *o,
                          const cis2_verify_limits *lim, size_t *rows_computed, cis2_error *err)
{
    const cis2_model *m = &e->m;
    const size_t V = m->vocab;
    const cis2_prefill_cfg cfg = {
        .m = m, .keep = &e->logits, .rows = lim->rows && lim->rows < VERIFY_ROWS ? lim->rows : VERIFY_ROWS,
        .logit_bytes = VERIFY_LOGIT_BYTES / 2, .logit_rows = lim->logit_rows,
        .buffers = 2, /* one pass's logits hashed while the next pass fills the other */
        .kv_budget = VERIFY_KV_BUDGET, .share_min = CIS2_VERIFY_SHARE_MIN, .token = job_token, .start = job_start,
        .ctx = (void *)m};
    cis2_prefill pf;
    int rc = cis2_prefill_open(&pf, &cfg, n, err);
    uint32_t *tok = malloc(pf.max_log * sizeof *tok);
    hash_item *items = malloc((n ? n : 1) * sizeof *items);
    cis2_sample_ws sws[CHOOSE_CHUNKS] = {{0}};
    hasher h = {.cx = cx, .items = items, .V = V};
    if (!rc && (!tok || !items)) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (rc) goto out;
    for (size_t i = 0; i < n; i++) {
        job_plan(&jobs[i]);
        cis2_prefill_add(&pf, &jobs[i].pj);
    }
    for (;;) {
        if (should_stop(o)) { rc = CANCELLED(err); goto out; } /* between passes: nothing half done */
        if ((rc = cis2_prefill_next(&pf, err))) goto out;
        if (!pf.nrows) break;
        if ((rc = cis2_prefill_forward(&pf, cx, err))) goto out;
        size_t nch = pf.nlog < CHOOSE_CHUNKS ? pf.nlog : CHOOSE_CHUNKS;
        choose_ctx cc = {.cx = cx, .rows = pf.lrows, .V = V, .nrows = pf.nlog, .nchunks = nch, .tok = tok, .ws = sws};
        cis2_parallel_for(cx, nch, choose_task, &cc);
        for (size_t c = 0; c < nch; c++)
            if (cc.rc[c]) { rc = cis2_fail(err, cc.rc[c], "out of memory in verify"); goto out; }
        for (size_t i = 0; i < pf.nslots; i++) {
            const cis2_prefill_slot *s = &pf.slots[i];
            if (s->nlog) check(s->job, e, V, pf.lrows[s->lrow0].logits, s->nlog, tok + s->lrow0);
        }
        hasher_join(&h); /* the previous pass's hashing, overlapped with this pass */
        h.n = 0;
        for (size_t i = 0; i < pf.nslots; i++) { /* the steps each receipt decided, in its stream's order */
            const cis2_prefill_slot *s = &pf.slots[i];
            vjob *j = s->job;
            if (!s->nlog) continue;
            const cis2_prefill_lrow *lr = &pf.lrows[s->lrow0];
            size_t step0 = row_step(j, lr->pos);
            if (j->ndec > step0) h.items[h.n++] = (hash_item){j, lr->logits, step0, j->ndec - step0};
        }
        hasher_start(&h);
        for (size_t i = 0; i < pf.nslots; i++) {
            const cis2_prefill_slot *s = &pf.slots[i];
            vjob *j = s->job;
            if (j->rc) { rc = cis2_fail(err, j->rc, "out of memory in verify"); goto out; }
            if (o->on_step && s->nlog) { /* the caller's code, in step order per receipt */
                const cis2_prefill_lrow *lr = &pf.lrows[s->lrow0];
                size_t step0 = row_step(j, lr->pos);
                for (size_t k = step0; k < j->ndec; k++) {
                    cis2_token_event ev = {.seq = j->index, .step = k,
                                           .token = k < j->claimed ? j->r->generated[k] : j->decoded[k],
                                           .logits = lr->logits + (k - step0) * V, .vocab = V};
                    uint64_t pinned = cis2_api_callout_begin();
                    int stop = o->on_step(o->on_step_ctx, &ev);
                    cis2_api_callout_end(pinned);
                    if (stop) { rc = CANCELLED(err); goto out; }
                }
            }
            next_rows(j);
        }
    }
    hasher_join(&h);
    if (rows_computed) *rows_computed = pf.computed;
    for (size_t i = 0; i < n; i++) { /* §12.2 over prompt ++ the run's ids */
        vjob *j = &jobs[i];
        job_witness(j);
        if (!j->skip && cis2_argmax_digest(j->ids, j->nids, j->decoded, j->ndec, j->argmax)) {
            rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            goto out;
        }
    }
out:
    hasher_join(&h); /* before the logits it reads are given back */
    for (size_t i = 0; i < n; i++) job_witness(&jobs[i]); /* frees the stream */
    for (size_t c = 0; c < CHOOSE_CHUNKS; c++) cis2_sample_ws_free(&sws[c]);
    cis2_prefill_close(&pf);
    free(tok);
    free(items);
    return rc;
}

/* Decode replay: the whole run again (§3.4), every receipt in one
 * cis2_generate; the token callback notes the first bad step. */
typedef struct dec_cb { vjob *jobs; const size_t *which; const cis2_verify_opts *o; int stopped; } dec_cb;

static int dec_on_token(void *ctx, const cis2_token_event *ev)
{
    dec_cb *c = ctx;
    if (c->stopped) return 1; /* the rest of the step's tokens: asked once is enough */
    vjob *j = &c->jobs[c->which[ev->seq]];
    if (ev->step >= j->claimed || ev->token != j->r->generated[ev->step])
        note_bad(j, ev->step, ev->logits, ev->vocab, ev->token);
    else if (ev->finish && ev->step + 1 < j->claimed && j->bad_step < 0) { /* stops before the claims end */
        j->bad_step = (long long)ev->step + 1;
        j->claimed_tok = j->r->generated[ev->step + 1];
        j->expected_tok = UINT32_MAX;
    }
    if (c->o->on_step) { /* generate's callout already restored the caller's environment */
        cis2_token_event e2 = *ev;
        e2.seq = j->index;
        e2.token = ev->step < j->claimed ? j->r->generated[ev->step] : ev->token;
        if (c->o->on_step(c->o->on_step_ctx, &e2)) return c->stopped = 1;
    }
    if (c->o->should_stop && c->o->should_stop(c->o->should_stop_ctx)) return c->stopped = 1;
    return 0;
}

static int replay_decode(cis2_engine *e, vjob *jobs, size_t n, const cis2_verify_opts *o, cis2_error *err)
{
    size_t k = 0;
    cis2_request *reqs = calloc(n ? n : 1, sizeof *reqs);
    cis2_stop *stops = calloc(n ? n : 1, sizeof *stops);
    size_t *which = calloc(n ? n : 1, sizeof *which);
    int rc = CIS2_OK;
    if (!reqs || !stops || !which) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        vjob *j = &jobs[i];
        if (j->skip) continue;
        reqs[k] = (cis2_request){.ids = j->ids, .n_ids = j->nids, .max_tokens = j->stop.max_tokens};
        if (j->ext) {
            reqs[k].sampling = &j->samp;
            stops[k] = (cis2_stop){.eos = j->stop.eos != NULL, .ids = j->stop.ids, .n_ids = j->stop.n_ids,
                                   .strings = (const char *const *)j->stop.strings, .string_lens = j->stop.lens,
                                   .n_strings = j->stop.n_strings};
            reqs[k].stop = &stops[k];
        }
        j->bad_step = -1;
        which[k++] = i;
    }
    if (k) {
        dec_cb cb = {jobs, which, o, 0};
        cis2_gen_opts go = {.twice = o->twice, .on_token = dec_on_token, .on_token_ctx = &cb};
        cis2_result *res;
        if (should_stop(o)) { rc = CANCELLED(err); goto out; }
        cis2_error ge = {0};
        if ((rc = cis2_generate(e, reqs, k, &go, &res, &ge))) {
            rc = cb.stopped ? CANCELLED(err) : cis2_fail(err, rc, "%s", ge.msg);
            goto out;
        }
        for (size_t q = 0; q < k; q++) {
            vjob *j = &jobs[which[q]];
            memcpy(j->witness, res[q].witness, 32);
            memcpy(j->argmax, res[q].argmax_digest, 32);
            j->decoded = res[q].tokens;
            j->ndec = res[q].n_tokens;
            j->finish = res[q].finish;
            res[q].tokens = NULL;
        }
        cis2_results_free(res, k);
    }
out:
    free(reqs);
    free(stops);
    free(which);
    return rc;
}

static int same_replay(const vjob *a, const vjob *b)
{
    return a->ndec == b->ndec && a->bad_step == b->bad_step && a->finish == b->finish &&
           !memcmp(a->witness, b->witness, 32) && !memcmp(a->argmax, b->argmax, 32) &&
           !memcmp(a->decoded, b->decoded, a->ndec * sizeof(uint32_t));
}

static void job_free(vjob *j)
{
    free(j->decoded);
    cis2_stop_state_free(&j->sst);
}

/* Score receipts (verify_score.c) and the others (below), each verdict in
 * its receipt's place. */
static int verify_mixed(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *o,
                        const cis2_verify_limits *limits, size_t *rows_computed, cis2_verdict **verdicts,
                        cis2_error *err)
{
    size_t ns = 0, nc = 0;
    for (size_t i = 0; i < n; i++) ns += receipts[i]->score != 0;
    cis2_verdict *v = calloc(n, sizeof *v), *sv = calloc(ns, sizeof *sv), *cv = NULL;
    cis2_receipt **sr = calloc(ns, sizeof *sr), **cr = calloc(n - ns + 1, sizeof *cr);
    int rc = CIS2_OK;
    if (!v || !sv || !sr || !cr) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    ns = 0;
    for (size_t i = 0; i < n; i++) {
        if (!receipts[i]->score) { cr[nc++] = receipts[i]; continue; }
        const char *name = receipts[i]->source && receipts[i]->source[0] ? receipts[i]->source : "receipt";
        if (cis2_vd_init(&sv[ns], name)) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        sr[ns++] = receipts[i];
    }
    if (nc && (rc = cis2_verify_ex(e, cr, nc, o, limits, rows_computed, &cv, err))) goto out;
    /* score receipts stop where verify's should_stop says so too */
    cis2_score_opts so = {.should_stop = o ? o->should_stop : NULL, .should_stop_ctx = o ? o->should_stop_ctx : NULL};
    if ((rc = cis2_verify_scores(e, sr, ns, o ? o->twice : 0, &so, sv, err))) goto out;
    for (size_t i = 0; i < ns && !rc; i++) rc = cis2_vd_finish(&sv[i], err);
    if (rc) goto out;
    for (size_t i = 0, a = 0, b = 0; i < n; i++) v[i] = receipts[i]->score ? sv[a++] : cv[b++];
    free(sv);
    free(cv);
    free(sr);
    free(cr);
    *verdicts = v;
    return CIS2_OK;
out:
    free(v);
    cis2_verdicts_free(sv, ns);
    cis2_verdicts_free(cv, nc);
    free(sr);
    free(cr);
    return rc;
}

int cis2_verify_ex(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *opts,
                   const cis2_verify_limits *limits, size_t *rows_computed, cis2_verdict **verdicts,
                   cis2_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (receipts[i]->score) {
            *verdicts = NULL;
            if (rows_computed) *rows_computed = 0;
            return verify_mixed(e, receipts, n, opts, limits, rows_computed, verdicts, err);
        }
    *verdicts = NULL;
    if (rows_computed) *rows_computed = 0;
    cis2_verify_opts dflt = {0};
    const cis2_verify_opts *o = opts ? opts : &dflt;
    const cis2_verify_limits no_limits = {0, 0};
    const cis2_verify_limits *lim = limits ? limits : &no_limits;
    if (n == 0) return cis2_fail(err, CIS2_E_USAGE, "verify: no receipts");
    cis2_verdict *v = calloc(n, sizeof *v);
    vjob *jobs = calloc(n, sizeof *jobs), *again = NULL;
    cis2_frame f;
    cis2_ctx cx; /* this call's own copy: its bg is the call's hasher (replay_prefill) */
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    cx = cis2_engine_ctx(e);
    if (!v || !jobs) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        const char *name = receipts[i]->source && receipts[i]->source[0] ? receipts[i]->source : "receipt";
        if (cis2_vd_init(&v[i], name)) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        jobs[i].r = receipts[i];
        jobs[i].v = &v[i];
        jobs[i].index = i;
        cis2_verify_prepare(e, &jobs[i]);
    }
    if (o->replay == CIS2_REPLAY_DECODE) rc = replay_decode(e, jobs, n, o, err);
    else {
        rc = replay_prefill(e, &cx, jobs, n, o, lim, rows_computed, err);
        if (!rc && o->twice) { /* §12.4 on the verifier's own recomputation */
            if (!(again = calloc(n, sizeof *again))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
            for (size_t i = 0; i < n; i++) {
                again[i] = jobs[i];
                again[i].decoded = NULL;
                memset(&again[i].sst, 0, sizeof again[i].sst);
                again[i].w_open = 0;
            }
            cis2_verify_opts quiet = *o;
            quiet.on_step = NULL;
            if (!(rc = replay_prefill(e, &cx, again, n, &quiet, lim, rows_computed, err)))
                for (size_t i = 0; i < n && !rc; i++)
                    if (!jobs[i].skip && !same_replay(&jobs[i], &again[i]))
                        rc = cis2_fail(err, CIS2_E_NONDET, "§12.4 determinism check failed: the two replays of %s differ",
                                       v[i].source);
        }
    }
    if (rc) goto out;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].skip) cis2_verify_judge(e, &jobs[i]);
    for (size_t i = 0; i < n && !rc; i++) rc = cis2_vd_finish(&v[i], err);
out:
    ENGINE_LEAVE(f);
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i].ids);
        job_free(&jobs[i]);
    }
    for (size_t i = 0; again && i < n; i++) job_free(&again[i]);
    free(jobs);
    free(again);
    if (rc) {
        cis2_verdicts_free(v, n);
        return rc;
    }
    *verdicts = v;
    return CIS2_OK;
}

int cis2_verify(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *opts,
                cis2_verdict **verdicts, cis2_error *err)
{
    return cis2_verify_ex(e, receipts, n, opts, NULL, NULL, verdicts, err);
}

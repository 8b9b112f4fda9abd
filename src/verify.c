/*
 * verify.c - cis2_verify (include/cis2.h section 7): a receipt's every
 * field recomputed from the engine's files.  This file owns the replays
 * and the call; verify_plan.c plans them (preparing each receipt's run,
 * shared prompt prefixes) and judges the verdicts (verify.h).  Spec §3.4,
 * §3.5, §11.2, §12.1, §12.2, §12.4; docs/sampling.md §S3, §S5.
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
 * Memory (docs/inputs.md): a prefill pass holds at most VERIFY_ROWS rows
 * and half of VERIFY_LOGIT_BYTES of logits (the engine's kept buffer,
 * bigbuf.h, as a score's); receipts are admitted while
 * their KV caches fit in VERIFY_KV_BUDGET (always at least one).
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

/* The claimed token at position p of prompt ++ generated. */
static uint32_t job_token(const vjob *j, size_t p)
{
    return p < j->nids ? j->ids[p] : j->r->generated[p - j->nids];
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
    const float *logits;
    size_t V, nrows, nchunks;
    vjob *const *rowjob;   /* each row's receipt */
    const size_t *rowstep; /* and step */
    uint32_t *tok;
    cis2_sample_ws *ws;    /* nchunks */
    int rc[CHOOSE_CHUNKS];
} choose_ctx;

static void choose_task(void *vctx, size_t c)
{
    choose_ctx *x = vctx;
    for (size_t r = x->nrows * c / x->nchunks; r < x->nrows * (c + 1) / x->nchunks; r++) {
        int rc = cis2_sample_step(x->cx, x->logits + r * x->V, x->V, &x->rowjob[r]->samp, (uint32_t)x->rowstep[r],
                                  &x->ws[c], &x->tok[r], NULL);
        if (rc) x->rc[c] = rc;
    }
}

/* This pass's logits rows of one receipt, in step order, their tokens at
 * tok.  While the claims hold, each row is the run's (teacher forcing is
 * exact); after the first that does not, the rest of this pass's rows were
 * fed a wrong token and are dropped: the receipt continues as a decode
 * from the true token. */
static void check(vjob *j, const cis2_engine *e, size_t V, const uint32_t *tok)
{
    for (size_t k = 0; k < j->nlog && !j->finish && !j->rc; k++) {
        decide(j, e, j->lg0 + k * V, V, tok[k]);
        if (j->bad_step >= 0 && j->state == J_FORCED) { j->state = J_DECODE; break; }
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

static void job_stop(vjob *j, size_t *kv_used)
{
    cis2_kv_free(&j->kv);
    *kv_used -= j->kv_bytes;
    j->kv_bytes = 0;
    j->state = J_DONE;
}

static int job_start(const cis2_model *m, vjob *j, size_t *kv_used, cis2_error *err)
{
    size_t maxs = j->stop.max_tokens;
    int rc = cis2_kv_init(&j->kv, m, j->nids + maxs, err);
    if (rc) return rc;
    if (!(j->decoded = malloc(maxs * sizeof(uint32_t)))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (cis2_witness_begin(&j->w, m, j->ids, j->nids, j->ext ? j->params : NULL))
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    j->w_open = 1;
    j->bad_step = -1;
    j->ndec = 0;
    j->finish = CIS2_FINISH_NONE;
    j->next_pos = 0;
    /* positions 0 .. nids+claimed-2 (the last claimed token is never an
     * input); a claimed id outside the vocabulary is never fed */
    j->forced_end = j->nids + j->claimed - 1;
    if (j->nids + j->oov_step < j->forced_end) j->forced_end = j->nids + j->oov_step;
    j->kv_bytes = cis2_kv_bytes(m, j->kv.cap);
    *kv_used += j->kv_bytes;
    j->state = J_FORCED;
    return CIS2_OK;
}

static size_t kv_need(const cis2_model *m, const vjob *j)
{
    size_t pos = j->nids + j->stop.max_tokens;
    return pos < j->nids ? SIZE_MAX : cis2_kv_bytes(m, pos);
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

/* Teacher-forced replay of every job (see the top of the file), the
 * decodes after a bad step included; VERIFY_ROWS rows per weight pass. */
static int replay_prefill(cis2_engine *e, cis2_ctx *cx, vjob *jobs, size_t n, const cis2_verify_opts *o,
                          const cis2_verify_limits *lim, size_t *rows_computed, cis2_error *err)
{
    const cis2_model *m = &e->m;
    const size_t V = m->vocab;
    size_t max_rows = lim->rows && lim->rows < VERIFY_ROWS ? lim->rows : VERIFY_ROWS;
    size_t max_log = VERIFY_LOGIT_BYTES / 2 / (V * sizeof(float)); /* per half */
    if (max_log < 8) max_log = 8; /* the largest vocabulary (2^22): 2 x 8 rows, 256 MiB */
    if (lim->logit_rows) max_log = lim->logit_rows;
    if (max_log > max_rows) max_log = max_rows;
    cis2_row *rows = malloc(VERIFY_ROWS * sizeof *rows);
    float *logits = cis2_reuse_take(&e->logits, 2 * max_log * V * sizeof(float)); /* bigbuf.h */
    vjob **act = malloc((n ? n : 1) * sizeof *act), **ord = malloc((n ? n : 1) * sizeof *ord);
    cis2_share **sord = malloc((n ? n : 1) * sizeof *sord);
    vjob **rowjob = malloc(max_log * sizeof *rowjob);
    size_t *rowstep = malloc(max_log * sizeof *rowstep);
    uint32_t *tok = malloc(max_log * sizeof *tok);
    hash_item *items = malloc((n ? n : 1) * sizeof *items);
    cis2_sample_ws sws[CHOOSE_CHUNKS] = {{0}};
    hasher h = {.cx = cx, .items = items, .V = V};
    cis2_ws ws = {0};
    size_t kv_used = 0, running = 0, pass = 0, computed = 0;
    int rc = CIS2_OK;
    if (!rows || !logits || !act || !ord || !sord || !rowjob || !rowstep || !tok || !items) {
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) jobs[i].state = jobs[i].skip ? J_DONE : J_WAIT;
    cis2_verify_plan_sharing(jobs, n, sord, ord);
    for (;;) {
        if (should_stop(o)) { rc = CANCELLED(err); goto out; } /* between passes: nothing half done */
        float *half = logits + (pass & 1) * max_log * V; /* the other half may be the hasher's */
        for (size_t i = 0; i < n; i++) { /* admit while the KV caches fit (always one) */
            vjob *j = ord[i];
            if (j->state != J_WAIT) continue;
            if (running && !cis2_kv_fits(kv_used, kv_need(m, j), VERIFY_KV_BUDGET)) break;
            if ((rc = job_start(m, j, &kv_used, err))) goto out;
            cis2_verify_share_take(j, m);
            running++;
        }
        size_t nact = 0, nrows = 0, nlog = 0;
        for (size_t i = 0; i < n && nrows < max_rows && nlog < max_log; i++) {
            vjob *j = ord[i];
            if (j->state != J_FORCED && j->state != J_DECODE) continue;
            if (j->sh.donor) continue; /* waits for its prefix */
            j->nlog = 0;
            j->lg0 = NULL;
            size_t first = nrows;
            if (j->state == J_DECODE) { /* one row: the last decided token */
                cis2_row *r = &rows[nrows++];
                *r = (cis2_row){.kv = &j->kv, .pos = j->nids + j->ndec - 1, .token = j->decoded[j->ndec - 1]};
                r->logits = j->lg0 = half + nlog * V;
                j->step0 = j->ndec;
                rowjob[nlog] = j;
                rowstep[nlog] = j->ndec;
                nlog++;
                j->nlog = 1;
            }
            while (j->state == J_FORCED && j->next_pos < j->forced_end && nrows < max_rows) {
                size_t p = j->next_pos;
                int wants = p + 1 >= j->nids; /* the logits of every step: positions nids-1 .. */
                if (wants && nlog == max_log) break;
                cis2_row *r = &rows[nrows++];
                *r = (cis2_row){.kv = &j->kv, .pos = p, .token = job_token(j, p)};
                if (wants) {
                    r->logits = half + nlog * V;
                    if (!j->lg0) { j->lg0 = r->logits; j->step0 = p + 1 - j->nids; }
                    rowjob[nlog] = j;
                    rowstep[nlog] = p + 1 - j->nids;
                    nlog++;
                    j->nlog++;
                }
                j->next_pos++;
            }
            if (nrows > first) act[nact++] = j;
        }
        if (nrows == 0) {
            /* Every job is done, or (never seen: a donor always has rows
             * until it has passed the prefix) only waiting ones are left,
             * which then compute their prefixes themselves. */
            int waiting = 0;
            for (size_t i = 0; i < n; i++)
                if (jobs[i].sh.donor && jobs[i].state == J_FORCED) { jobs[i].sh.donor = NULL; waiting = 1; }
            if (!waiting) break;
            continue;
        }
        if ((rc = cis2_forward(cx, m, &ws, rows, nrows, NULL, NULL, err))) goto out;
        computed += nrows;
        for (size_t i = 0; i < n; i++) cis2_verify_share_take(ord[i], m); /* before any donor stops */
        size_t nch = nlog < CHOOSE_CHUNKS ? nlog : CHOOSE_CHUNKS;
        choose_ctx cc = {.cx = cx, .logits = half, .V = V, .nrows = nlog, .nchunks = nch, .rowjob = rowjob,
                         .rowstep = rowstep, .tok = tok, .ws = sws};
        cis2_parallel_for(cx, nch, choose_task, &cc);
        for (size_t c = 0; c < nch; c++)
            if (cc.rc[c]) { rc = cis2_fail(err, cc.rc[c], "out of memory in verify"); goto out; }
        for (size_t i = 0; i < nact; i++)
            if (act[i]->nlog) check(act[i], e, V, tok + (size_t)(act[i]->lg0 - half) / V);
        hasher_join(&h); /* the previous pass's hashing, overlapped with this pass */
        h.n = 0;
        for (size_t i = 0; i < nact; i++)
            if (act[i]->nlog && act[i]->ndec > act[i]->step0)
                h.items[h.n++] = (hash_item){act[i], act[i]->lg0, act[i]->step0, act[i]->ndec - act[i]->step0};
        hasher_start(&h);
        for (size_t i = 0; i < nact; i++) {
            vjob *j = act[i];
            if (j->rc) { rc = cis2_fail(err, j->rc, "out of memory in verify"); goto out; }
            if (o->on_step) { /* the caller's code, in step order per receipt */
                size_t k0 = j->step0, k1 = j->ndec;
                for (size_t k = k0; k < k1; k++) {
                    cis2_token_event ev = {.seq = j->index, .step = k,
                                           .token = k < j->claimed ? j->r->generated[k] : j->decoded[k],
                                           .logits = j->lg0 + (k - k0) * V, .vocab = V};
                    uint64_t pinned = cis2_api_callout_begin();
                    int stop = o->on_step(o->on_step_ctx, &ev);
                    cis2_api_callout_end(pinned);
                    if (stop) { rc = CANCELLED(err); goto out; }
                }
            }
            if (j->finish) { job_stop(j, &kv_used); running--; }
            else if (j->state == J_FORCED && j->next_pos == j->forced_end && j->ndec == j->forced_end + 1 - j->nids)
                j->state = J_DECODE; /* every claim matched, and the run goes on past them */
        }
        pass++;
    }
    hasher_join(&h);
    if (rows_computed) *rows_computed = computed;
    for (size_t i = 0; i < n; i++) { /* §12.2 over prompt ++ the run's ids */
        vjob *j = &jobs[i];
        job_witness(j);
        if (!j->skip && cis2_argmax_digest(j->ids, j->nids, j->decoded, j->ndec, j->argmax)) {
            rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            goto out;
        }
    }
out:
    hasher_join(&h); /* before the logits it reads are freed */
    for (size_t i = 0; i < n; i++) {
        job_witness(&jobs[i]); /* frees the stream */
        if (jobs[i].state == J_FORCED || jobs[i].state == J_DECODE) job_stop(&jobs[i], &kv_used);
    }
    for (size_t c = 0; c < CHOOSE_CHUNKS; c++) cis2_sample_ws_free(&sws[c]);
    cis2_ws_free(&ws);
    free(rows);
    cis2_reuse_give(&e->logits, logits);
    free(act);
    free(ord);
    free(sord);
    free(rowjob);
    free(rowstep);
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
                memset(&again[i].kv, 0, sizeof again[i].kv);
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

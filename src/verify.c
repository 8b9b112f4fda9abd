/*
 * verify.c - cis2_verify (include/cis2.h section 7): a receipt's every
 * field recomputed from the engine's files.  Spec §2.1 (artifact hashes),
 * §3.1 (the prompt's ids come from its bytes), §6.6/§7.2 (table digests),
 * §11.2, §12.1, §12.2, §12.4; docs/sampling.md §S8 for extension receipts.
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
 * Receipts that begin with the same prompt ids (the samples of one prompt)
 * compute those positions once: one of them does, the others copy its KV
 * there (plan_sharing below).
 *
 * Memory (docs/inputs.md): a prefill pass holds at most VERIFY_ROWS rows
 * and half of VERIFY_LOGIT_BYTES of logits; receipts are admitted while
 * their KV caches fit in VERIFY_KV_BUDGET (always at least one).
 */
#include "digest.h"
#include "engine.h"
#include "kernels.h"
#include "pmath.h"
#include "receipt.h"
#include "sample.h"
#include "session.h"
#include "threadpool.h"
#include "tokenizer.h"
#include "verdict.h"
#include "witness.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERIFY_ROWS 256
#define VERIFY_LOGIT_BYTES ((size_t)64 << 20)
#define VERIFY_KV_BUDGET ((size_t)1 << 30)
#define CHOOSE_CHUNKS 8 /* parallel token choice: items (each its sampler workspace) */

typedef struct vjob {
    const cis2_receipt *r;
    cis2_verdict *v;
    size_t index;              /* in the cis2_verify call */
    int skip;                  /* the verdict is final already */
    uint32_t *ids;             /* the prompt's recomputed ids */
    size_t nids;
    /* the run the receipt's inputs describe */
    cis2_sampling samp;        /* greedy for v1 */
    cis2_stop_rule stop;       /* max_tokens: gen-toks (v1) or max-toks (ext) */
    int ext;
    uint8_t params[32];        /* ext: the digest of the run's parameter block (§S7.5) */
    uint8_t params_lines[32];  /* ext: of the receipt's own lines */
    size_t claimed;            /* gen-toks */
    size_t oov_step;           /* first claimed id >= vocab (claimed: none) */
    /* replay outputs */
    uint32_t *decoded;         /* the run's tokens */
    size_t ndec;
    int finish;
    long long bad_step;        /* first step whose claim is not the run's token */
    uint32_t claimed_tok, expected_tok, claimed_bits, expected_bits;
    uint8_t witness[32], argmax[32];
    /* prefill replay state */
    int state;                 /* J_WAIT, J_FORCED, J_DECODE, J_DONE */
    cis2_kv kv;
    cis2_sha w;
    int w_open;
    cis2_stop_state sst;
    int rc;                    /* CIS2_E_NOMEM inside a task */
    size_t next_pos, forced_end; /* teacher-forced rows: positions [next_pos, forced_end) */
    size_t kv_bytes;
    float *lg0;                /* this pass's first logits row */
    size_t step0, nlog;
    /* a prompt prefix shared with another receipt (plan_sharing): while
     * donor is set, this job waits, then takes positions [0, shared) of
     * its KV from donor's cache and starts its rows there */
    struct vjob *donor;
    size_t shared;
} vjob;

enum { J_WAIT, J_FORCED, J_DECODE, J_DONE };

/* Tests only (engine.h): smaller passes, so that small models take many. */
static size_t test_rows, test_logit_rows;

void cis2_verify_limits(size_t rows, size_t logit_rows)
{
    test_rows = rows <= VERIFY_ROWS ? rows : VERIFY_ROWS;
    test_logit_rows = logit_rows;
}

static _Atomic size_t rows_computed;
size_t cis2_verify_rows_computed(void) { return rows_computed; }

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
        int rc = cis2_sample_step(x->logits + r * x->V, x->V, &x->rowjob[r]->samp, (uint32_t)x->rowstep[r],
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
 * the calling thread's background work (threadpool.h): the next pass's
 * matrix jobs each carry a step of it, taken by whichever pool thread is
 * free, and hasher_join finishes what is left on the caller.  A step
 * hashes a budget of bytes from a cursor (item, row, offset), splitting a
 * row where the budget ends: the stream is the same bytes. ---- */
typedef struct hash_item { vjob *j; const float *lg; size_t step0, n; } hash_item;
typedef struct hasher {
    cis2_bg bg;            /* first: step() gets &h->bg */
    int set;               /* it is this thread's background work */
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
    cis2_bg_swap(NULL);
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
    if (cis2_threads_get() > 1) {
        cis2_bg_swap(&h->bg); /* this thread's jobs only (threadpool.h) */
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
    j->kv_bytes = 2 * m->n_layers * j->kv.cap * m->kv_dim * sizeof(float);
    *kv_used += j->kv_bytes;
    j->state = J_FORCED;
    return CIS2_OK;
}

static size_t kv_need(const cis2_model *m, const vjob *j)
{
    return 2 * m->n_layers * ((j->nids + j->stop.max_tokens + 15) / 16 * 16) * m->kv_dim * sizeof(float);
}

/* ---- shared prompt prefixes.  Receipts of one prompt (an RL group: many
 * samples of one prompt; or one system prompt before many questions) have
 * the same KV over their common prefix (§3.5), so a batch computes it
 * once.  Sorted by their prompts' ids, jobs fall into runs whose
 * neighbours share at least SHARE_MIN leading ids.  A run's longest prompt
 * is its donor and is admitted first; every other job of the run that
 * shares SHARE_MIN ids with it waits until the donor has computed them,
 * copies them (cis2_kv_copy_prefix) and goes on from there.  Only
 * positions before either's last prompt token are shared: they give no
 * logits, so each job's steps, hashing and verdict are its own, and every
 * row computed is the same arithmetic as without sharing. ---- */
#define SHARE_MIN 16

static size_t common_prefix(const vjob *a, const vjob *b)
{
    size_t n = a->nids < b->nids ? a->nids : b->nids, i = 0;
    while (i < n && a->ids[i] == b->ids[i]) i++;
    return i;
}

static int by_prompt(const void *pa, const void *pb)
{
    const vjob *a = *(vjob *const *)pa, *b = *(vjob *const *)pb;
    size_t i = common_prefix(a, b);
    if (i < a->nids && i < b->nids) return a->ids[i] < b->ids[i] ? -1 : 1;
    if (a->nids != b->nids) return a->nids < b->nids ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index; /* the caller's order among equals */
}

/* Fills ord with every job in admission order, and sets the donors. */
static void plan_sharing(vjob *jobs, size_t n, vjob **ord)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        jobs[i].donor = NULL;
        jobs[i].shared = 0;
        if (!jobs[i].skip) ord[k++] = &jobs[i];
    }
    qsort(ord, k, sizeof *ord, by_prompt);
    for (size_t a = 0, b; a < k; a = b) {
        size_t top = a; /* the run [a, b) and its longest prompt */
        for (b = a + 1; b < k && common_prefix(ord[b - 1], ord[b]) >= SHARE_MIN; b++)
            if (ord[b]->nids > ord[top]->nids) top = b;
        vjob *d = ord[top];
        ord[top] = ord[a];
        ord[a] = d;
        for (size_t i = a + 1; i < b; i++) {
            vjob *j = ord[i];
            size_t c = common_prefix(d, j);
            if (c > j->nids - 1) c = j->nids - 1;
            if (c > d->nids - 1) c = d->nids - 1;
            if (c >= SHARE_MIN) {
                j->donor = d;
                j->shared = c;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (jobs[i].skip) ord[k++] = &jobs[i];
}

/* A waiting job takes its prefix once the donor's completed passes hold
 * it; a donor that has stopped (freed before this job was admitted) leaves
 * the job to compute every row itself.  Called only between passes. */
static void share_take(vjob *j, const cis2_model *m)
{
    vjob *d = j->donor;
    if (!d || j->state != J_FORCED) return;
    if (d->state != J_FORCED && d->state != J_DECODE) { j->donor = NULL; return; }
    if (d->next_pos < j->shared) return;
    cis2_kv_copy_prefix(&j->kv, &d->kv, m, j->shared);
    j->next_pos = j->shared;
    j->donor = NULL;
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
static int replay_prefill(cis2_engine *e, vjob *jobs, size_t n, const cis2_verify_opts *o, cis2_error *err)
{
    const cis2_model *m = &e->m;
    const size_t V = m->vocab;
    size_t max_rows = test_rows ? test_rows : VERIFY_ROWS;
    size_t max_log = VERIFY_LOGIT_BYTES / 2 / (V * sizeof(float)); /* per half */
    if (max_log < 8) max_log = 8; /* the largest vocabulary (2^22): 2 x 8 rows, 256 MiB */
    if (test_logit_rows) max_log = test_logit_rows;
    if (max_log > max_rows) max_log = max_rows;
    cis2_row *rows = malloc(VERIFY_ROWS * sizeof *rows);
    float *logits = malloc(2 * max_log * V * sizeof(float));
    vjob **act = malloc((n ? n : 1) * sizeof *act), **ord = malloc((n ? n : 1) * sizeof *ord);
    vjob **rowjob = malloc(max_log * sizeof *rowjob);
    size_t *rowstep = malloc(max_log * sizeof *rowstep);
    uint32_t *tok = malloc(max_log * sizeof *tok);
    hash_item *items = malloc((n ? n : 1) * sizeof *items);
    cis2_sample_ws sws[CHOOSE_CHUNKS] = {{0}};
    hasher h = {.items = items, .V = V};
    cis2_ws ws = {0};
    size_t kv_used = 0, running = 0, pass = 0, computed = 0;
    int rc = CIS2_OK;
    if (!rows || !logits || !act || !ord || !rowjob || !rowstep || !tok || !items) {
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) jobs[i].state = jobs[i].skip ? J_DONE : J_WAIT;
    plan_sharing(jobs, n, ord);
    for (;;) {
        if (should_stop(o)) { rc = CANCELLED(err); goto out; } /* between passes: nothing half done */
        float *half = logits + (pass & 1) * max_log * V; /* the other half may be the hasher's */
        for (size_t i = 0; i < n; i++) { /* admit while the KV caches fit (always one) */
            vjob *j = ord[i];
            if (j->state != J_WAIT) continue;
            if (running && kv_used + kv_need(m, j) > VERIFY_KV_BUDGET) break;
            if ((rc = job_start(m, j, &kv_used, err))) goto out;
            share_take(j, m);
            running++;
        }
        size_t nact = 0, nrows = 0, nlog = 0;
        for (size_t i = 0; i < n && nrows < max_rows && nlog < max_log; i++) {
            vjob *j = ord[i];
            if (j->state != J_FORCED && j->state != J_DECODE) continue;
            if (j->donor) continue; /* waits for its prefix */
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
                if (jobs[i].donor && jobs[i].state == J_FORCED) { jobs[i].donor = NULL; waiting = 1; }
            if (!waiting) break;
            continue;
        }
        if ((rc = cis2_forward(m, &ws, rows, nrows, NULL, NULL, err))) goto out;
        computed += nrows;
        for (size_t i = 0; i < n; i++) share_take(ord[i], m); /* before any donor stops */
        size_t nch = nlog < CHOOSE_CHUNKS ? nlog : CHOOSE_CHUNKS;
        choose_ctx cc = {.logits = half, .V = V, .nrows = nlog, .nchunks = nch, .rowjob = rowjob,
                         .rowstep = rowstep, .tok = tok, .ws = sws};
        cis2_parallel_for(nch, choose_task, &cc);
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
    rows_computed = computed;
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
    free(logits);
    free(act);
    free(ord);
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

/* --------------------------------------------------------------- verdicts */

#define ART(key, w, g) do { if (cis2_vd_digest(v, key, w, g)) cis2_vd_name(art, sizeof art, key); } while (0)
#define OUT(cond, key) do { if (cond) cis2_vd_name(outs, sizeof outs, key); } while (0)

static void bad_step_note(cis2_verdict *v, const vjob *j)
{
    if (j->bad_step < 0) return;
    if (j->expected_tok == UINT32_MAX)
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE, "%lld: claimed %u, but the run stops before it",
                      j->bad_step, j->claimed_tok);
    else if (j->claimed_tok == UINT32_MAX)
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE, "%lld: no token claimed, but the run goes on with %u (logit 0x%08x)",
                      j->bad_step, j->expected_tok, j->expected_bits);
    else
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE,
                      "%lld: claimed %u (logit 0x%08x), the run's token %u (logit 0x%08x)", j->bad_step,
                      j->claimed_tok, j->claimed_bits, j->expected_tok, j->expected_bits);
}

/* The verdict of one replayed receipt: every field as the run gives it. */
static void judge(const cis2_engine *e, vjob *j)
{
    const cis2_model *m = &e->m;
    const cis2_receipt *r = j->r;
    cis2_verdict *v = j->v;
    char art[256] = "", outs[512] = "";
    ART("weights-sha256", r->weights_sha, m->weights_sha); /* recomputed from the files, never trusted */
    ART("config-sha256", r->config_sha, m->config_sha);
    ART("tokenizer-sha256", r->tokenizer_sha, m->tokenizer_sha);
    cis2_vd_field(v, "prompt-hex", CIS2_FIELD_INPUT, "input (%zu bytes)", r->prompt_len);
    OUT(cis2_vd_ids(v, "prompt-token-ids", r->prompt_ids, r->n_prompt, j->ids, j->nids), "prompt-token-ids");
    if (!r->ext) {
        cis2_vd_field(v, "gen-toks", CIS2_FIELD_INPUT, "input (%u)", r->gen_toks);
        cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    } else { /* docs/sampling.md §S8 */
        cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
        cis2_vd_field(v, "max-toks", CIS2_FIELD_INPUT, "input (%u)", r->max_toks);
        static const char *const ins[] = {"sampler", "temperature"};
        for (int k = 0; k < 2; k++) cis2_vd_field(v, ins[k], CIS2_FIELD_INPUT, "input");
        if (r->samp.top_k > m->vocab) {
            cis2_vd_field(v, "top-k", CIS2_FIELD_MISMATCH, "MISMATCH %u is larger than the vocabulary (%zu)", r->samp.top_k,
                          m->vocab);
            cis2_vd_name(outs, sizeof outs, "top-k");
        } else cis2_vd_field(v, "top-k", CIS2_FIELD_INPUT, "input");
        static const char *const ins2[] = {"top-p", "min-p", "seed", "sequence"};
        for (int k = 0; k < 4; k++) cis2_vd_field(v, ins2[k], CIS2_FIELD_INPUT, "input");
        if (r->has_eos)
            OUT(cis2_vd_ids(v, "stop-eos", r->stop_eos, r->n_stop_eos, e->info.eos_ids, e->info.n_eos), "stop-eos");
        else cis2_vd_field(v, "stop-eos", CIS2_FIELD_INPUT, "input (none)");
        cis2_vd_field(v, "stop-ids", CIS2_FIELD_INPUT, "input");
        cis2_vd_field(v, "stop-strings", CIS2_FIELD_INPUT, "input");
        OUT(cis2_vd_digest(v, "params-digest", r->params_digest, j->params_lines), "params-digest");
    }
    OUT(cis2_vd_digest(v, "table-digest", r->table_digest, m->table_digest), "table-digest");
    OUT(cis2_vd_digest(v, "inv-freq-table-digest", r->inv_freq_digest, m->inv_freq_digest), "inv-freq-table-digest");
    if (r->ext) {
        uint32_t got = (uint32_t)j->ndec;
        if (got == r->gen_toks) cis2_vd_field(v, "gen-toks", CIS2_FIELD_OK, "ok");
        else {
            cis2_vd_field(v, "gen-toks", CIS2_FIELD_MISMATCH, "MISMATCH expected=%u got=%u", r->gen_toks, got);
            cis2_vd_name(outs, sizeof outs, "gen-toks");
        }
        const char *want = cis2_finish_name(r->finish), *gotf = cis2_finish_name(j->finish);
        if (r->finish == j->finish) cis2_vd_field(v, "finish-reason", CIS2_FIELD_OK, "ok");
        else {
            cis2_vd_field(v, "finish-reason", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", want, gotf);
            cis2_vd_name(outs, sizeof outs, "finish-reason");
        }
    }
    OUT(cis2_vd_ids(v, "generated-token-ids", r->generated, r->gen_toks, j->decoded, j->ndec), "generated-token-ids");
    bad_step_note(v, j);
    const char *dk = r->ext ? "token-digest" : "argmax-digest";
    OUT(cis2_vd_digest(v, dk, r->argmax, j->argmax), dk);
    int wbad = cis2_vd_digest(v, "witness-digest", r->witness, j->witness);
    OUT(wbad, "witness-digest");
    if (wbad && j->bad_step < 0)
        cis2_vd_field(v, "note", CIS2_FIELD_NOTE, "every claimed token is the decode's; the witness differs");
    v->first_bad_step = j->bad_step;
    v->claimed_token = j->claimed_tok;
    v->expected_token = j->expected_tok;
    v->claimed_logit_bits = j->claimed_bits;
    v->expected_logit_bits = j->expected_bits;
    if (art[0])
        cis2_vd_set(v, CIS2_VERDICT_ARTIFACT_MISMATCH, CIS2_E_HASH, "ARTIFACT-MISMATCH", "(%s)%s%s", art,
                    outs[0] ? "; outputs differ too: " : "", outs);
    else if (outs[0])
        cis2_vd_set(v, CIS2_VERDICT_OUTPUT_MISMATCH, CIS2_E_MISMATCH, "OUTPUT-MISMATCH", "(%s)", outs);
    else
        cis2_vd_set(v, CIS2_VERDICT_OK, CIS2_OK, "OK", "(all fields recomputed from %s)", e->dir);
}

/* ------------------------------------------------------------ preparing */

static void malformed(cis2_verdict *v, int code, const char *msg)
{
    v->n_fields = 0; /* no field report: the receipt cannot be replayed */
    cis2_vd_set(v, CIS2_VERDICT_MALFORMED, code, "MALFORMED", "(%s)", msg);
}

/* A receipt's run: its spec version and dtype, recomputed prompt ids, the
 * sampling and stop rules its inputs give (docs/sampling.md §S8). */
static void prepare(const cis2_engine *e, vjob *j)
{
    const cis2_receipt *r = j->r;
    cis2_verdict *v = j->v;
    char msg[700];
    if (cis2_vd_supported(v, r)) { j->skip = 1; return; }
    cis2_error e2 = {0};
    /* §3.1: the prompt bytes are the input; their ids are recomputed */
    if (cis2_engine_encode(e, (const char *)r->prompt, r->prompt_len, &j->ids, &j->nids, &e2)) {
        if (e2.code == CIS2_E_UNSUPPORTED) { /* a tokenizer.json outside what this engine runs */
            v->n_fields = 0;
            cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED", "(%s)", e2.msg);
        } else {
            snprintf(msg, sizeof msg, "%s: prompt-hex: %s", v->source, e2.msg);
            malformed(v, e2.code == CIS2_E_USAGE ? CIS2_E_FORMAT : e2.code, msg);
        }
        j->skip = 1;
        return;
    }
    size_t maxpos = (size_t)e->m.cfg.max_position_embeddings;
    if (j->nids == 0) {
        snprintf(msg, sizeof msg, "%s: prompt-hex encodes to no tokens", v->source);
        malformed(v, CIS2_E_FORMAT, msg);
        j->skip = 1;
        return;
    }
    for (size_t i = 0; i < j->nids; i++)
        if (j->ids[i] >= e->m.vocab) {
            malformed(v, CIS2_E_FORMAT, "the tokenizer gives ids outside the model's vocabulary");
            j->skip = 1;
            return;
        }
    j->claimed = r->gen_toks;
    j->ext = r->ext;
    j->stop = (cis2_stop_rule){.max_tokens = r->ext ? r->max_toks : r->gen_toks};
    if (r->ext) {
        j->samp = r->samp;
        if (r->has_eos) { j->stop.eos = e->info.eos_ids; j->stop.n_eos = e->info.n_eos; } /* the config's list */
        j->stop.ids = r->stop_ids;
        j->stop.n_ids = r->n_stop_ids;
        j->stop.strings = (char *const *)r->stop_str;
        j->stop.lens = r->stop_len;
        j->stop.n_strings = r->n_stop_str;
        if (r->n_stop_str && !e->tok) {
            v->n_fields = 0;
            cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                        "(stop strings need the model's tokenizer: %s)", e->tok_err.msg);
            j->skip = 1;
            return;
        }
        char *lines = cis2_receipt_params_block(r), *run = cis2_params_block(&j->samp, &j->stop);
        if (!lines || !run) { free(lines); free(run); malformed(v, CIS2_E_NOMEM, "out of memory"); j->skip = 1; return; }
        cis2_sha256(lines, strlen(lines), j->params_lines); /* §S7.5 */
        cis2_sha256(run, strlen(run), j->params);
        free(lines);
        free(run);
        if (r->samp.top_k > e->m.vocab) j->samp.top_k = 0; /* reported as a mismatch; the run needs a valid k */
    }
    if (j->nids + j->stop.max_tokens > maxpos) {
        v->n_fields = 0;
        cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                    "(%zu prompt tokens + %zu tokens exceed max_position_embeddings %zu)", j->nids,
                    j->stop.max_tokens, maxpos);
        j->skip = 1;
        return;
    }
    j->oov_step = j->claimed;
    for (size_t i = 0; i < j->claimed; i++)
        if (r->generated[i] >= e->m.vocab) { j->oov_step = i; break; }
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

int cis2_verify(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *opts,
                cis2_verdict **verdicts, cis2_error *err)
{
    *verdicts = NULL;
    cis2_verify_opts dflt = {0};
    const cis2_verify_opts *o = opts ? opts : &dflt;
    if (n == 0) return cis2_fail(err, CIS2_E_USAGE, "verify: no receipts");
    cis2_verdict *v = calloc(n, sizeof *v);
    vjob *jobs = calloc(n, sizeof *jobs), *again = NULL;
    cis2_frame f;
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    if (!v || !jobs) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        const char *name = receipts[i]->source && receipts[i]->source[0] ? receipts[i]->source : "receipt";
        if (cis2_vd_init(&v[i], name)) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        jobs[i].r = receipts[i];
        jobs[i].v = &v[i];
        jobs[i].index = i;
        prepare(e, &jobs[i]);
    }
    if (o->replay == CIS2_REPLAY_DECODE) rc = replay_decode(e, jobs, n, o, err);
    else {
        rc = replay_prefill(e, jobs, n, o, err);
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
            if (!(rc = replay_prefill(e, again, n, &quiet, err)))
                for (size_t i = 0; i < n && !rc; i++)
                    if (!jobs[i].skip && !same_replay(&jobs[i], &again[i]))
                        rc = cis2_fail(err, CIS2_E_NONDET, "§12.4 determinism check failed: the two replays of %s differ",
                                       v[i].source);
        }
    }
    if (rc) goto out;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].skip) judge(e, &jobs[i]);
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

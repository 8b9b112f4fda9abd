/*
 * prefill.c - the one planner of prefill passes (prefill.h), for scoring
 * (score.c, docs/sampling.md §S11.4) and verification's prefill replay
 * (verify.c, docs/receipts.md "Verification: faster than generation",
 * "Receipts of one prompt, verified together").  It computes no float of
 * its own: every row goes through cis2_forward, whose rows are each the
 * single-sequence arithmetic (spec §3.5), so the plan below decides the
 * time and the memory (docs/inputs.md "Memory"), never a bit.
 *
 * A call runs in rounds until every job is done.  Each round:
 *
 *   1. retire: a running job that waits on no donor and has no rows left
 *      (next >= end) frees its cache;
 *   2. admit: in the planned order (share.h: sorted by the ids they may
 *      share, each run's donor first) waiting jobs allocate their caches
 *      while the caches fit cfg.kv_budget, one always; the first that does
 *      not fit stops admission, so none jumps the queue.  A job whose donor
 *      already holds the shared prefix copies it at once;
 *   3. fill: the running jobs in that order, each from its next position,
 *      until the pass has cfg.rows rows or max_log logits rows; a job whose
 *      next row wants logits when none are left ends the pass's rows for
 *      itself, and the rows of one job stay together;
 *   4. the caller runs the pass (cis2_prefill_forward), after which waiting
 *      jobs take the prefixes their donors now hold, then reads the
 *      logits rows and may move each job's next and end.
 *
 * A job of a model with recurrent state (docs/models.md §M10.4) whose
 * next moved back behind what its state has absorbed (verification's
 * decode after a claim that differs) feeds positions [0, next) again
 * first, without logits: a state cannot be cut back to a prefix.
 *
 * A round with no rows (every running job waits on a donor, or has none
 * to feed: a score's one-token continuation after no context) retires
 * what it can, and then every job, admitted or not, computes its prefix
 * itself from then on: never a hang.
 *
 * Who does not call it: a decoding session (session.c) is one step per
 * call over sequences that join, stop and are taken between calls; every
 * running sequence steps every call (a decode row is never held back), its
 * prompt rows share one prefill_chunk, and a sequence's rows carry its
 * step for traces.  Its loop stays its own.
 */
#include "prefill.h"

#include <stdlib.h>

int cis2_prefill_open(cis2_prefill *p, const cis2_prefill_cfg *cfg, size_t n, cis2_error *err)
{
    const size_t V = cfg->m->vocab;
    *p = (cis2_prefill){.c = *cfg};
    if (p->c.buffers < 1) p->c.buffers = 1;
    size_t max_log = cfg->logit_bytes / (V * sizeof(float));
    if (max_log < 8) max_log = 8;
    if (cfg->logit_rows) max_log = cfg->logit_rows;
    if (max_log > cfg->rows) max_log = cfg->rows;
    p->max_log = max_log;
    size_t nj = n ? n : 1, nslots = nj < cfg->rows ? nj : cfg->rows; /* a slot has a row */
    p->ord = malloc(nj * sizeof *p->ord);
    p->sord = malloc(nj * sizeof *p->sord);
    p->rows = malloc(cfg->rows * sizeof *p->rows);
    p->slots = malloc(nslots * sizeof *p->slots);
    p->lrows = malloc(max_log * sizeof *p->lrows);
    p->logits = cis2_reuse_take(cfg->keep, (size_t)cfg->buffers * max_log * V * sizeof(float)); /* bigbuf.h */
    if (!p->ord || !p->sord || !p->rows || !p->slots || !p->lrows || !p->logits)
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    return CIS2_OK;
}

void cis2_prefill_add(cis2_prefill *p, cis2_prefill_job *j)
{
    j->state = j->sh.skip ? CIS2_PREFILL_DONE : CIS2_PREFILL_WAIT;
    j->kv = (cis2_kv){0};
    j->kv_bytes = 0;
    j->sh.job = j;
    p->ord[p->n] = j;
    p->sord[p->n++] = &j->sh;
}

/* share.h's admission order and donors. */
static void plan(cis2_prefill *p)
{
    cis2_share_plan(p->sord, p->n, p->c.share_min);
    for (size_t i = 0; i < p->n; i++) p->ord[i] = p->sord[i]->job;
    p->planned = 1;
}

/* A running job waiting on its donor copies the shared prefix once the
 * donor's passes have computed it; a donor no longer running leaves the
 * job to compute every row itself (share.h). */
static void take(cis2_prefill *p, cis2_prefill_job *j)
{
    if (!j->sh.donor || j->state != CIS2_PREFILL_RUN) return;
    cis2_prefill_job *d = j->sh.donor->job;
    if (cis2_share_take(&j->sh, d->state == CIS2_PREFILL_RUN, d->next, &j->kv, &d->kv, p->c.m))
        j->next = j->sh.shared;
}

/* A running job's cache freed: it is done. */
static void release(cis2_prefill *p, cis2_prefill_job *j)
{
    cis2_kv_free(&j->kv);
    p->kv_used -= j->kv_bytes;
    j->kv_bytes = 0;
    j->state = CIS2_PREFILL_DONE;
    p->running--;
}

/* 1: the running jobs with nothing left to feed. */
static void retire(cis2_prefill *p)
{
    for (size_t i = 0; i < p->n; i++) {
        cis2_prefill_job *j = p->ord[i];
        if (j->state == CIS2_PREFILL_RUN && !j->sh.donor && j->next >= j->end) release(p, j);
    }
}

/* 2: waiting jobs in order while their caches fit (always one). */
static int admit(cis2_prefill *p, cis2_error *err)
{
    for (size_t i = 0; i < p->n; i++) {
        cis2_prefill_job *j = p->ord[i];
        if (j->state != CIS2_PREFILL_WAIT) continue;
        size_t need = cis2_kv_bytes(p->c.m, j->positions);
        if (p->running && !cis2_kv_fits(p->kv_used, need, p->c.kv_budget)) break;
        int rc = cis2_kv_init(&j->kv, p->c.m, j->positions, err);
        if (rc) return rc;
        j->kv_bytes = need;
        p->kv_used += need;
        j->state = CIS2_PREFILL_RUN;
        p->running++;
        if (p->c.start && (rc = p->c.start(p->c.ctx, j->job, err))) return rc;
        take(p, j);
    }
    return CIS2_OK;
}

/* 3: the pass's rows, into this pass's logits buffer. */
static void fill(cis2_prefill *p)
{
    const size_t V = p->c.m->vocab;
    float *buf = p->logits + p->passes % (size_t)p->c.buffers * p->max_log * V;
    p->nrows = p->nslots = p->nlog = 0;
    for (size_t i = 0; i < p->n && p->nrows < p->c.rows && p->nlog < p->max_log; i++) {
        cis2_prefill_job *j = p->ord[i];
        if (j->state != CIS2_PREFILL_RUN || j->sh.donor) continue; /* waiting, done, or waiting for its prefix */
        cis2_prefill_slot *s = &p->slots[p->nslots];
        *s = (cis2_prefill_slot){.job = j->job, .lrow0 = p->nlog};
        if (p->c.m->state_floats && j->rnext == j->rend && j->next > 0 && j->next < j->kv.state_pos) {
            j->rnext = 0; /* the state holds positions past next (verify's claims after a mismatch): again from 0 */
            j->rend = j->next;
        }
        while (j->rnext < j->rend && p->nrows < p->c.rows) {
            p->rows[p->nrows++] = (cis2_row){.kv = &j->kv, .pos = j->rnext, .token = p->c.token(j->job, j->rnext)};
            s->nrows++;
            j->rnext++;
        }
        while (j->rnext == j->rend && j->next < j->end && p->nrows < p->c.rows) {
            size_t pos = j->next;
            int wants = pos >= j->lfrom;
            if (wants && p->nlog == p->max_log) break;
            cis2_row *r = &p->rows[p->nrows++];
            *r = (cis2_row){.kv = &j->kv, .pos = pos, .token = p->c.token(j->job, pos)};
            if (wants) {
                r->logits = buf + p->nlog * V;
                p->lrows[p->nlog++] = (cis2_prefill_lrow){.job = j->job, .pos = pos, .logits = r->logits};
                s->nlog++;
            }
            s->nrows++;
            j->next++;
        }
        if (s->nrows) p->nslots++;
    }
}

/* Whether a job is still waiting or running. */
static int any_left(const cis2_prefill *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ord[i]->state != CIS2_PREFILL_DONE) return 1;
    return 0;
}

int cis2_prefill_next(cis2_prefill *p, cis2_error *err)
{
    if (!p->planned) plan(p);
    for (int empty = 0;; empty = 1) {
        retire(p);
        if (!any_left(p)) {
            p->nrows = p->nslots = p->nlog = 0;
            return CIS2_OK;
        }
        if (empty) /* the last round had no rows: nobody waits for a donor any more */
            for (size_t i = 0; i < p->n; i++) p->ord[i]->sh.donor = NULL;
        int rc = admit(p, err);
        if (rc) return rc;
        fill(p);
        if (p->nrows) return CIS2_OK;
        for (size_t i = 0; i < p->n; i++) take(p, p->ord[i]); /* as after a pass */
    }
}

int cis2_prefill_forward(cis2_prefill *p, const cis2_ctx *cx, cis2_error *err)
{
    int rc = cis2_forward(cx, p->c.m, &p->ws, p->rows, p->nrows, NULL, NULL, err);
    if (rc) return rc;
    p->passes++;
    p->computed += p->nrows;
    for (size_t i = 0; i < p->n; i++) take(p, p->ord[i]); /* before any donor is retired */
    return CIS2_OK;
}

void cis2_prefill_close(cis2_prefill *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ord[i]->state == CIS2_PREFILL_RUN) release(p, p->ord[i]);
    cis2_ws_free(&p->ws);
    cis2_reuse_give(p->c.keep, p->logits);
    free(p->ord);
    free(p->sord);
    free(p->rows);
    free(p->slots);
    free(p->lrows);
    *p = (cis2_prefill){0};
}

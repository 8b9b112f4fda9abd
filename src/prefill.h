/*
 * prefill.h - the one planner of prefill passes: the rows of many
 * independent sequences, each fed tokens it already knows, packed into
 * weight passes.  Scoring (score.c, docs/sampling.md §S11.4) and
 * verification's prefill replay (verify.c, docs/receipts.md "Verification:
 * faster than generation") run every pass through it; docs/inputs.md
 * "Memory" gives the bounds it keeps.  Decoding sessions (session.c) plan
 * their own steps: see the top of prefill.c.
 *
 * A job is one sequence and its KV cache.  The planner owns what every
 * such caller used to write for itself: admission in a planned order while
 * the caches fit a budget (one job always runs), shared prompt prefixes
 * (share.h), filling each pass up to a row cap and a logits-row cap, the
 * logits buffers, the forward pass itself, and retiring each job once it
 * has nothing left to feed.  The caller keeps what its rows mean: which
 * token a position is fed, what it does with each logits row, and when a
 * job's rows end.
 *
 * A caller's loop:
 *
 *     cis2_prefill_open(&pf, &cfg, n, err);
 *     for each job: set its fields below, cis2_prefill_add(&pf, &job->pj);
 *     while (!(rc = cis2_prefill_next(&pf, err)) && pf.nrows) {
 *         (a cancellation point: nothing is half done here)
 *         rc = cis2_prefill_forward(&pf, cx, err);
 *         the pass's logits rows: pf.lrows[0 .. pf.nlog), per job pf.slots;
 *         (between passes a job's next/end may move)
 *     }
 *     cis2_prefill_close(&pf);
 *
 * Every row is the single-sequence arithmetic (model.h: cis2_forward's
 * rows are independent), so how rows are packed into passes changes the
 * time and the memory, never a bit.
 */
#ifndef CIS2_PREFILL_H
#define CIS2_PREFILL_H

#include "bigbuf.h"
#include "model.h"
#include "share.h"

#include <stddef.h>
#include <stdint.h>

enum { CIS2_PREFILL_WAIT, CIS2_PREFILL_RUN, CIS2_PREFILL_DONE };

/* One job, inside the caller's own job structure. */
typedef struct cis2_prefill_job {
    /* the caller's, before cis2_prefill_add */
    void *job;                 /* the caller's job: cfg.token and cfg.start get it, slots and lrows name it */
    size_t positions;          /* its KV cache's positions: what admission weighs (cis2_kv_bytes); SIZE_MAX:
                                * more than size_t holds */
    cis2_share sh;             /* share.h: ids, len, cap, index (the caller's order, also among equal ids) and
                                * skip (never run: done from the start); the planner sets the rest */
    /* the caller's, at the latest in cfg.start, and between passes: the
     * rows still to feed are positions [next, end); a job with next >= end
     * after a pass is retired (its cache freed) before the next one */
    size_t next, end;
    size_t lfrom;              /* the rows at positions >= lfrom want logits */
    /* the planner's */
    int state;                 /* CIS2_PREFILL_WAIT, _RUN (its cache held), _DONE */
    size_t rnext, rend;        /* a model with recurrent state whose next moved back: positions [rnext, rend)
                                * fed again first, without logits (docs/models.md §M10.4) */
    cis2_kv kv;
    size_t kv_bytes;
} cis2_prefill_job;

typedef struct cis2_prefill_cfg {
    const cis2_model *m;
    cis2_reuse *keep;          /* where the logits buffers come from (bigbuf.h: the engine's kept buffer) */
    size_t rows;               /* a pass's most rows */
    size_t logit_bytes;        /* a logits buffer's bytes: that many rows of the vocabulary, at least 8 (the
                                * largest vocabulary, 2^22, gets 8 rows), at most `rows` */
    size_t logit_rows;         /* nonzero: this many logits rows instead (at most `rows`) */
    int buffers;               /* 1, or 2: passes alternate between two logits buffers, so one pass's logits
                                * stay whole while the next pass fills the other (verify.c hashes them then) */
    size_t kv_budget;          /* the running jobs' caches' bytes */
    size_t share_min;          /* share.h's min: the fewest leading ids worth sharing */
    uint32_t (*token)(const void *job, size_t pos); /* the token the job is fed at pos */
    /* at admission, its cache allocated and before it takes a shared
     * prefix: sets next, end and lfrom if it has not yet; nonzero fails the
     * call (NULL: nothing to do) */
    int (*start)(void *ctx, void *job, cis2_error *err);
    void *ctx;
} cis2_prefill_cfg;

/* One job's part of a pass: its rows are consecutive, and so are its
 * logits rows, lrows[lrow0 .. lrow0 + nlog). */
typedef struct cis2_prefill_slot {
    void *job;
    size_t nrows, lrow0, nlog;
} cis2_prefill_slot;

/* One row that wants logits: its job, its position (its logits are those
 * a decode at position pos would choose token pos + 1 from) and the row. */
typedef struct cis2_prefill_lrow {
    void *job;
    size_t pos;
    float *logits;             /* vocab floats; a pass's rows lie end to end */
} cis2_prefill_lrow;

typedef struct cis2_prefill {
    cis2_prefill_cfg c;
    size_t max_log;            /* a pass's most logits rows (cfg.logit_bytes or logit_rows) */
    size_t computed;           /* rows computed by every pass so far */
    /* the pass cis2_prefill_next planned (nrows 0: every job is done) */
    size_t nrows, nslots, nlog;
    cis2_prefill_slot *slots;  /* in row order */
    cis2_prefill_lrow *lrows;  /* in row order */
    /* the planner's own */
    cis2_prefill_job **ord;    /* the jobs added, in admission order once planned */
    cis2_share **sord;
    size_t n;
    int planned;
    cis2_row *rows;
    float *logits;             /* buffers x max_log rows */
    size_t passes;             /* forward passes run: which buffer is next */
    size_t kv_used, running;
    cis2_ws ws;
} cis2_prefill;

/* Room for n jobs and one pass (cfg.rows rows, the logits buffers): out
 * of memory is CIS2_E_NOMEM.  cis2_prefill_close must follow, whatever
 * this returns. */
int cis2_prefill_open(cis2_prefill *p, const cis2_prefill_cfg *cfg, size_t n, cis2_error *err);
/* One job (at most n), in the caller's order. */
void cis2_prefill_add(cis2_prefill *p, cis2_prefill_job *j);
/* The next pass: retires the jobs the last pass finished, admits waiting
 * ones, fills p->rows and sets nrows, slots and lrows; nrows 0 when every
 * job is done.  The first call plans the admission order (share.h).
 * Fails only where a cache or cfg.start does. */
int cis2_prefill_next(cis2_prefill *p, cis2_error *err);
/* Runs the planned rows on cx (model.h), then lets the jobs waiting on a
 * donor take their prefix once the donor's cache holds it. */
int cis2_prefill_forward(cis2_prefill *p, const cis2_ctx *cx, cis2_error *err);
/* Frees every cache still held, the pass and the buffers (the logits go
 * back to cfg.keep: nothing may read them after). */
void cis2_prefill_close(cis2_prefill *p);

#endif

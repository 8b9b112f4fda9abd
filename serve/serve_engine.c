/*
 * serve_engine.c - the engine thread of `cis2 serve` (continuous batching,
 * docs/serving.md "Scheduling").  It owns the one cis2_session (include/cis2.h
 * section 6) of the server's engine; no other thread calls cis2_session_*.
 *
 * HTTP threads submit jobs (one per request, a sequence per choice) to a
 * bounded inbox (serve_engine_submit: 429 beyond max_batch + max_queue
 * sequences, 503 once stopping).  The thread loops:
 *
 *   1. admit the inbox: cis2_session_add for every sequence (a failure
 *      ends the whole job with the library's error);
 *   2. cancel what was asked (a client went away, or shutdown):
 *      cis2_session_cancel;
 *   3. one cis2_session_step while anything is pending: every running
 *      sequence advances one token and queued ones join (while their KV
 *      caches fit kv_budget: the library's admission), their prompts
 *      prefilled at most prefill_chunk rows per step in all (so a long
 *      prompt never stalls the decoding ones for more than one chunk);
 *      each chosen token reaches on_token (below), which appends it (and
 *      its logprobs, when asked) to its sequence and wakes the request's
 *      HTTP thread;
 *   4. take every finished sequence (cis2_session_take) and hand the
 *      result to its job;
 *   5. copy the session's counts (cis2_session_stats_get: running, queued,
 *      prefill rows, KV bytes) to the metrics, which /metrics reads;
 *
 * and sleeps on its condition variable when nothing is pending.  Every
 * sequence's bits are those of the same request run alone (the library
 * guarantees it), so what else is batched never shows in a response.
 *
 * A job is shared by its HTTP thread and this thread (refs = 2): each side
 * drops its reference when done with it, and the last one frees it, so a
 * client that disconnects mid-stream leaves its sequence to be cancelled
 * and freed here.
 *
 * Who calls it: serve_main.c (start, stop), serve_request.c (jobs),
 * serve_http.c (submit, wait, cancel, release).  It calls serve_err.c (a
 * refused submit) and serve_metrics.c, and no request or response code:
 * a job's owner is freed through the owner_free pointer it carries.
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct serve_engine {
    cis2_engine *e;
    cis2_session *s;
    serve_metrics *met;
    size_t max_batch, max_inflight;
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* the engine thread sleeps here */
    serve_job *inbox, *inbox_tail;
    serve_job *active;          /* admitted jobs (engine thread's list) */
    size_t seqs_inflight;       /* submitted and not yet taken */
    size_t jobs_live;           /* submitted and not yet freed */
    int refuse, quit, cancel_all, cancel_dirty;
    size_t kv_budget;           /* bytes, for /metrics */
    size_t step_tokens;         /* events of the current step */
};

double serve_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------------ jobs */

serve_job *serve_job_new(size_t n)
{
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->seqs = calloc(n ? n : 1, sizeof *j->seqs);
    if (!j->seqs) { free(j); return NULL; }
    j->n = n;
    pthread_cond_init(&j->cv, NULL);
    for (size_t i = 0; i < n; i++) j->seqs[i].job = j;
    return j;
}

int serve_job_seqs_ready(serve_job *j)
{
    for (size_t i = 0; i < j->n; i++) {
        serve_seq *q = &j->seqs[i];
        size_t cap = q->req.max_tokens ? q->req.max_tokens : 1;
        q->req.user = q;
        q->toks = malloc(cap * sizeof *q->toks);
        if (!q->toks) return -1;
        if (q->req.logprobs || q->req.top_logprobs) {
            q->top_n = q->req.top_logprobs;
            q->lp = malloc(cap * sizeof *q->lp);
            q->top_ids = malloc((q->top_n ? q->top_n * cap : 1) * sizeof *q->top_ids);
            q->top_lp = malloc((q->top_n ? q->top_n * cap : 1) * sizeof *q->top_lp);
            if (!q->lp || !q->top_ids || !q->top_lp) return -1;
        }
    }
    return 0;
}

static void job_free(serve_job *j);
void serve_job_free(serve_job *j) { job_free(j); }

static void job_free(serve_job *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        free(j->seqs[i].toks);
        free(j->seqs[i].lp);
        free(j->seqs[i].top_ids);
        free(j->seqs[i].top_lp);
        cis2_results_free(j->seqs[i].res, 1);
    }
    free(j->seqs);
    pthread_cond_destroy(&j->cv);
    void *owner = j->owner;
    void (*f)(void *) = j->owner_free;
    free(j);
    if (f) f(owner);
}

/* Drops one reference under the lock; 1 if the caller must free the job. */
static int job_unref_locked(serve_engine *se, serve_job *j)
{
    if (--j->refs > 0) return 0;
    se->jobs_live--;
    return 1;
}

/* --------------------------------------------------------------- events */

/* The session's on_token, on the engine thread inside cis2_session_step. */
static int on_token(void *ctx, const cis2_token_event *ev)
{
    serve_engine *se = ctx;
    serve_seq *q = ev->user;
    serve_job *j = q->job;
    double t = serve_now(), first = -1, gap = -1;
    pthread_mutex_lock(&se->mu);
    if (q->n_toks < q->req.max_tokens) {
        size_t k = q->n_toks;
        if (q->lp) { /* the logprobs a stream sends with the token (docs/sampling.md §S4) */
            q->lp[k] = ev->logprob;
            for (size_t t = 0; t < q->top_n; t++) {
                int have = t < ev->n_top && ev->top_ids;
                q->top_ids[k * q->top_n + t] = have ? ev->top_ids[t] : UINT32_MAX;
                q->top_lp[k * q->top_n + t] = have ? ev->top_logprobs[t] : 0.0f;
            }
        }
        q->toks[q->n_toks++] = ev->token;
    }
    if (ev->finish) q->finish = ev->finish;
    if (!j->first_token_seen) {
        j->first_token_seen = 1;
        first = t - j->t_submit;
    } else if (q->n_toks > 1) {
        gap = t - q->t_last;
    }
    q->t_last = t;
    int cancel = j->cancel;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&se->mu);
    if (first >= 0) serve_metrics_first_token(se->met, first);
    if (gap >= 0) serve_metrics_token_gap(se->met, gap);
    se->step_tokens++;
    return cancel; /* nonzero ends just this sequence (CIS2_FINISH_CANCELLED) */
}

/* ------------------------------------------------------------ the thread */

/* Ends sequences [0, k) of a job that could not be admitted whole. */
static void unwind(serve_engine *se, serve_job *j, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        cis2_result *r = NULL;
        cis2_session_cancel(se->s, j->seqs[i].id);
        if (cis2_session_take(se->s, j->seqs[i].id, &r, NULL) == CIS2_OK) cis2_results_free(r, 1);
    }
}

static void fail_job_locked(serve_engine *se, serve_job *j, int rc, const cis2_error *err)
{
    j->state = JOB_FAILED;
    j->admit_rc = rc ? rc : CIS2_E_INTERNAL;
    if (err) j->admit_err = *err;
    se->seqs_inflight -= j->n - j->n_done;
    pthread_cond_broadcast(&j->cv);
}

static void admit(serve_engine *se, serve_job *in)
{
    while (in) {
        serve_job *j = in, *freeme = NULL;
        in = in->next;
        j->next = NULL;
        cis2_error err = {0};
        int rc = CIS2_OK;
        size_t k = 0;
        pthread_mutex_lock(&se->mu);
        int stop = se->cancel_all || j->cancel;
        pthread_mutex_unlock(&se->mu);
        if (stop) rc = cis2_fail(&err, CIS2_E_CANCELLED, "cancelled before it started");
        for (; !rc && k < j->n; k++)
            if ((rc = cis2_session_add(se->s, &j->seqs[k].req, &j->seqs[k].id, &err))) break;
        if (rc) unwind(se, j, k);
        pthread_mutex_lock(&se->mu);
        if (rc) {
            if (stop && se->cancel_all) j->shutdown_cancel = 1;
            fail_job_locked(se, j, rc, &err);
            j->in_engine = 0;
            if (job_unref_locked(se, j)) freeme = j;
        } else {
            j->state = JOB_ADMITTED;
            j->next = se->active;
            se->active = j;
            pthread_cond_broadcast(&j->cv);
        }
        pthread_mutex_unlock(&se->mu);
        job_free(freeme);
    }
}

/* Cancels the sequences of jobs whose client left (or all of them). */
static void cancel_requested(serve_engine *se)
{
    pthread_mutex_lock(&se->mu);
    int all = se->cancel_all;
    for (serve_job *j = se->active; j; j = j->next) {
        if (!j->cancel && !all) continue;
        if (all && !j->cancel) j->shutdown_cancel = 1;
        j->cancel = 1;
        for (size_t i = 0; i < j->n; i++)
            if (!j->seqs[i].taken) cis2_session_cancel(se->s, j->seqs[i].id); /* only marks it */
    }
    pthread_mutex_unlock(&se->mu);
}

/* Moves a finished sequence's result to its job. */
static void take_seq(serve_engine *se, serve_job *j, serve_seq *q)
{
    cis2_result *r = NULL;
    cis2_error err = {0};
    int rc = cis2_session_take(se->s, q->id, &r, &err);
    pthread_mutex_lock(&se->mu);
    q->taken = 1;
    if (rc) { /* cannot happen for a done sequence; the job reports it */
        q->finish = CIS2_FINISH_CANCELLED;
        if (j->state != JOB_FAILED) {
            j->state = JOB_FAILED;
            j->admit_rc = rc;
            j->admit_err = err;
        }
        j->cancel = 1;
        se->cancel_dirty = 1;
    } else {
        q->res = r;
        q->finish = r->finish;
    }
    j->n_done++;
    se->seqs_inflight--;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&se->mu);
}

/* Takes every finished sequence; finished jobs leave the active list. */
static void collect(serve_engine *se)
{
    serve_job **pp = &se->active, *dead = NULL;
    while (*pp) {
        serve_job *j = *pp;
        for (size_t i = 0; i < j->n; i++) {
            serve_seq *q = &j->seqs[i];
            if (!q->taken && cis2_session_done(se->s, q->id) != 0) take_seq(se, j, q);
        }
        pthread_mutex_lock(&se->mu);
        if (j->n_done == j->n) {
            if (j->state != JOB_FAILED) j->state = JOB_DONE;
            j->in_engine = 0;
            pthread_cond_broadcast(&j->cv);
            *pp = j->next;
            j->next = NULL;
            if (job_unref_locked(se, j)) { j->next = dead; dead = j; }
        } else {
            pp = &j->next;
        }
        pthread_mutex_unlock(&se->mu);
    }
    while (dead) {
        serve_job *n = dead->next;
        job_free(dead);
        dead = n;
    }
}

/* A step failed (memory, FP environment, a bug): every running job ends
 * with that error; the session holds nothing afterwards. */
static void step_failed(serve_engine *se, int rc, const cis2_error *err)
{
    fprintf(stderr, "cis2 serve: a decode step failed: %s\n", err->msg);
    pthread_mutex_lock(&se->mu);
    for (serve_job *j = se->active; j; j = j->next) {
        j->cancel = 1;
        if (j->state != JOB_FAILED) {
            j->state = JOB_FAILED;
            j->admit_rc = rc;
            j->admit_err = *err;
        }
        for (size_t i = 0; i < j->n; i++)
            if (!j->seqs[i].taken) cis2_session_cancel(se->s, j->seqs[i].id);
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&se->mu);
}

static void *engine_main(void *arg)
{
    serve_engine *se = arg;
    size_t pending = 0;
    pthread_mutex_lock(&se->mu);
    for (;;) {
        while (!se->quit && !se->inbox && !se->cancel_dirty && pending == 0) pthread_cond_wait(&se->cv, &se->mu);
        if (se->quit && !se->inbox && pending == 0 && !se->active) break;
        serve_job *in = se->inbox;
        se->inbox = se->inbox_tail = NULL;
        se->cancel_dirty = 0;
        pthread_mutex_unlock(&se->mu);

        admit(se, in);
        cancel_requested(se);
        collect(se); /* cancelled ones are done at once */
        if (cis2_session_pending(se->s) > 0) {
            cis2_error err = {0};
            size_t left = 0;
            se->step_tokens = 0;
            int rc = cis2_session_step(se->s, &left, &err);
            if (rc) step_failed(se, rc, &err);
            pthread_mutex_lock(&se->mu);
            size_t inflight = se->seqs_inflight;
            pthread_mutex_unlock(&se->mu);
            serve_metrics_step(se->met, se->step_tokens, left, inflight);
            collect(se);
        }
        pending = cis2_session_pending(se->s);
        cis2_session_stats st;
        cis2_session_stats_get(se->s, &st); /* this thread owns the session: /metrics reads the copy */
        serve_metrics_session(se->met, &st, se->kv_budget);
        pthread_mutex_lock(&se->mu);
        if (pending == 0 && se->active) se->cancel_dirty = 1; /* collect what is left next round */
    }
    pthread_mutex_unlock(&se->mu);
    return NULL;
}

/* ------------------------------------------------------------ start/stop */

int serve_engine_start(serve_engine **out, cis2_engine *e, const serve_engine_opts *o, serve_metrics *m,
                       cis2_error *err)
{
    *out = NULL;
    serve_engine *se = calloc(1, sizeof *se);
    if (!se) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    se->e = e;
    se->met = m;
    se->max_batch = o->max_batch;
    se->max_inflight = o->max_batch + o->max_queue;
    pthread_mutex_init(&se->mu, NULL);
    pthread_cond_init(&se->cv, NULL);
    cis2_session_opts so = {.max_batch = o->max_batch, .prefill_chunk = o->prefill_chunk, .on_token = on_token,
                            .on_token_ctx = se, .kv_budget = o->kv_budget};
    se->kv_budget = o->kv_budget ? o->kv_budget : (size_t)1 << 30; /* the library's default */
    int rc = cis2_session_open(&se->s, e, &so, err);
    if (!rc && pthread_create(&se->th, NULL, engine_main, se) != 0)
        rc = cis2_fail(err, CIS2_E_NOMEM, "cannot start the engine thread");
    if (rc) {
        cis2_session_close(se->s);
        pthread_cond_destroy(&se->cv);
        pthread_mutex_destroy(&se->mu);
        free(se);
        return rc;
    }
    se->started = 1;
    *out = se;
    return CIS2_OK;
}

int serve_engine_submit(serve_engine *se, serve_job *j, serve_err *e)
{
    pthread_mutex_lock(&se->mu);
    int rc = 0;
    if (se->refuse) {
        rc = serve_fail(e, 503, "shutting_down", NULL, "the server is shutting down");
    } else if (se->seqs_inflight + j->n > se->max_inflight) {
        rc = serve_fail(e, 429, "queue_full", NULL,
                        "too many requests in progress (%zu sequences running or queued, at most %zu): retry later",
                        se->seqs_inflight, se->max_inflight);
    } else {
        j->refs = 2;
        j->in_engine = 1;
        j->state = JOB_NEW;
        j->t_submit = serve_now();
        j->next = NULL;
        if (se->inbox_tail) se->inbox_tail->next = j;
        else se->inbox = j;
        se->inbox_tail = j;
        se->seqs_inflight += j->n;
        se->jobs_live++;
        pthread_cond_signal(&se->cv);
    }
    pthread_mutex_unlock(&se->mu);
    return rc;
}

void serve_engine_lock(serve_engine *se) { pthread_mutex_lock(&se->mu); }
void serve_engine_unlock(serve_engine *se) { pthread_mutex_unlock(&se->mu); }

int serve_engine_wait(serve_engine *se, serve_job *j, int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) { t.tv_sec++; t.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&j->cv, &se->mu, &t);
    return j->state;
}

void serve_engine_cancel(serve_engine *se, serve_job *j)
{
    pthread_mutex_lock(&se->mu);
    if (!j->cancel) {
        j->cancel = 1;
        se->cancel_dirty = 1;
        pthread_cond_signal(&se->cv);
    }
    pthread_mutex_unlock(&se->mu);
}

void serve_engine_release(serve_engine *se, serve_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&se->mu);
    if (j->in_engine && !j->cancel) { /* the client is gone before the end */
        j->cancel = 1;
        se->cancel_dirty = 1;
        pthread_cond_signal(&se->cv);
    }
    int last = job_unref_locked(se, j);
    pthread_mutex_unlock(&se->mu);
    if (last) job_free(j);
}

void serve_engine_cancel_all(serve_engine *se)
{
    pthread_mutex_lock(&se->mu);
    se->refuse = 1;
    se->cancel_all = 1;
    se->cancel_dirty = 1;
    pthread_cond_signal(&se->cv);
    pthread_mutex_unlock(&se->mu);
}

void serve_engine_refuse(serve_engine *se)
{
    pthread_mutex_lock(&se->mu);
    se->refuse = 1;
    pthread_mutex_unlock(&se->mu);
}

void serve_engine_load(serve_engine *se, size_t *seqs, size_t *jobs)
{
    pthread_mutex_lock(&se->mu);
    if (seqs) *seqs = se->seqs_inflight;
    if (jobs) *jobs = se->jobs_live;
    pthread_mutex_unlock(&se->mu);
}

void serve_engine_stop(serve_engine *se)
{
    if (!se) return;
    pthread_mutex_lock(&se->mu);
    se->refuse = 1;
    se->cancel_all = 1;
    se->quit = 1;
    se->cancel_dirty = 1;
    pthread_cond_signal(&se->cv);
    pthread_mutex_unlock(&se->mu);
    if (se->started) pthread_join(se->th, NULL);
    cis2_session_close(se->s);
    pthread_cond_destroy(&se->cv);
    pthread_mutex_destroy(&se->mu);
    free(se);
}

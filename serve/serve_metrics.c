/*
 * serve_metrics.c - GET /metrics of `cis2 serve` (docs/serving.md "Endpoints"), in the
 * Prometheus text exposition format 0.0.4: requests by endpoint and
 * status, prompt and generated tokens, decode steps, batch occupancy (the
 * sequences that advance in a step), sequences in flight, the session's
 * own counts (running, queued, prompt rows left to prefill, KV-cache bytes
 * against the budget: cis2_session_stats_get, copied by the engine thread
 * after every step), and histograms of time to first token, time between
 * tokens and request duration.  Updated by the engine thread (tokens,
 * steps, session counts) and HTTP threads (requests); one mutex guards it
 * all.
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hist {
    const double *le;
    size_t n;
    uint64_t counts[24];       /* per bucket (not cumulative), then +Inf */
    double sum;
    uint64_t count;
} hist;

typedef struct reqcount { char endpoint[32]; int status; uint64_t n; } reqcount;

struct serve_metrics {
    pthread_mutex_t mu;
    reqcount req[64];
    size_t n_req;
    uint64_t tokens, prompt_tokens, steps;
    size_t last_batch, inflight;
    cis2_session_stats sess;   /* the engine thread's last copy */
    size_t kv_budget;
    hist ttft, gap, occupancy, duration;
};

static const double le_ttft[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double le_gap[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56};
static const double le_batch[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static const double le_dur[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

serve_metrics *serve_metrics_new(void)
{
    serve_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->ttft = (hist){le_ttft, sizeof le_ttft / sizeof *le_ttft, {0}, 0, 0};
    m->gap = (hist){le_gap, sizeof le_gap / sizeof *le_gap, {0}, 0, 0};
    m->occupancy = (hist){le_batch, sizeof le_batch / sizeof *le_batch, {0}, 0, 0};
    m->duration = (hist){le_dur, sizeof le_dur / sizeof *le_dur, {0}, 0, 0};
    return m;
}

void serve_metrics_free(serve_metrics *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(hist *h, double v)
{
    size_t i = 0;
    while (i < h->n && v > h->le[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void serve_metrics_request(serve_metrics *m, const char *endpoint, int status)
{
    pthread_mutex_lock(&m->mu);
    size_t i = 0;
    while (i < m->n_req && !(m->req[i].status == status && !strcmp(m->req[i].endpoint, endpoint))) i++;
    if (i == m->n_req && i < sizeof m->req / sizeof m->req[0]) {
        snprintf(m->req[i].endpoint, sizeof m->req[i].endpoint, "%s", endpoint);
        m->req[i].status = status;
        m->n_req++;
    }
    if (i < m->n_req) m->req[i].n++;
    pthread_mutex_unlock(&m->mu);
}

#define LOCKED(m, stmt) do { pthread_mutex_lock(&(m)->mu); stmt; pthread_mutex_unlock(&(m)->mu); } while (0)

void serve_metrics_first_token(serve_metrics *m, double s) { LOCKED(m, observe(&m->ttft, s)); }
void serve_metrics_token_gap(serve_metrics *m, double s) { LOCKED(m, observe(&m->gap, s)); }
void serve_metrics_prompt_tokens(serve_metrics *m, size_t n) { LOCKED(m, m->prompt_tokens += n); }
void serve_metrics_request_done(serve_metrics *m, double s) { LOCKED(m, observe(&m->duration, s)); }
void serve_metrics_inflight(serve_metrics *m, size_t n) { LOCKED(m, m->inflight = n); }

void serve_metrics_session(serve_metrics *m, const cis2_session_stats *st, size_t kv_budget)
{
    LOCKED(m, (m->sess = *st, m->kv_budget = kv_budget));
}

void serve_metrics_step(serve_metrics *m, size_t tokens, size_t running, size_t inflight)
{
    (void)running;
    (void)inflight;
    pthread_mutex_lock(&m->mu);
    m->steps++;
    m->tokens += tokens;
    m->last_batch = tokens;
    if (tokens) observe(&m->occupancy, (double)tokens);
    pthread_mutex_unlock(&m->mu);
}

static void put_hist(serve_buf *o, const char *name, const char *help, const hist *h)
{
    serve_buf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->n; i++) {
        cum += h->counts[i];
        serve_buf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    serve_buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
        name, (unsigned long long)h->count);
}

char *serve_metrics_render(serve_metrics *m, size_t *len)
{
    serve_buf o = {0};
    pthread_mutex_lock(&m->mu);
    serve_buf_printf(&o, "# HELP cis2_requests_total HTTP requests by endpoint and status.\n# TYPE cis2_requests_total counter\n");
    for (size_t i = 0; i < m->n_req; i++)
        serve_buf_printf(&o, "cis2_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", m->req[i].endpoint, m->req[i].status,
            (unsigned long long)m->req[i].n);
    serve_buf_printf(&o, "# HELP cis2_generated_tokens_total Tokens generated.\n# TYPE cis2_generated_tokens_total counter\n"
            "cis2_generated_tokens_total %llu\n", (unsigned long long)m->tokens);
    serve_buf_printf(&o, "# HELP cis2_prompt_tokens_total Prompt tokens of requests the engine took (not 429 / 503 ones).\n"
            "# TYPE cis2_prompt_tokens_total counter\ncis2_prompt_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens);
    serve_buf_printf(&o, "# HELP cis2_decode_steps_total Model passes (cis2_session_step calls with work).\n"
            "# TYPE cis2_decode_steps_total counter\ncis2_decode_steps_total %llu\n", (unsigned long long)m->steps);
    serve_buf_printf(&o, "# HELP cis2_batch_occupancy_last Sequences that advanced in the last step.\n"
            "# TYPE cis2_batch_occupancy_last gauge\ncis2_batch_occupancy_last %zu\n", m->last_batch);
    serve_buf_printf(&o, "# HELP cis2_sequences_inflight Sequences accepted and not yet finished (running or queued).\n"
            "# TYPE cis2_sequences_inflight gauge\ncis2_sequences_inflight %zu\n", m->inflight);
    serve_buf_printf(&o, "# HELP cis2_session_running Sequences the session is decoding or prefilling.\n"
            "# TYPE cis2_session_running gauge\ncis2_session_running %zu\n", m->sess.running);
    serve_buf_printf(&o, "# HELP cis2_session_queued Sequences added to the session and waiting for a place (batch or KV budget).\n"
            "# TYPE cis2_session_queued gauge\ncis2_session_queued %zu\n", m->sess.queued);
    serve_buf_printf(&o, "# HELP cis2_prefill_rows_pending Prompt rows the running sequences have still to prefill.\n"
            "# TYPE cis2_prefill_rows_pending gauge\ncis2_prefill_rows_pending %zu\n", m->sess.prefill_rows);
    serve_buf_printf(&o, "# HELP cis2_kv_cache_bytes KV-cache bytes held by the running sequences.\n"
            "# TYPE cis2_kv_cache_bytes gauge\ncis2_kv_cache_bytes %zu\n", m->sess.kv_bytes);
    serve_buf_printf(&o, "# HELP cis2_kv_budget_bytes The KV-cache budget (--kv-budget).\n"
            "# TYPE cis2_kv_budget_bytes gauge\ncis2_kv_budget_bytes %zu\n", m->kv_budget);
    put_hist(&o, "cis2_batch_occupancy", "Sequences that advanced by one token in a step.", &m->occupancy);
    put_hist(&o, "cis2_time_to_first_token_seconds", "From a request's admission to the queue to its first token.",
             &m->ttft);
    put_hist(&o, "cis2_time_per_output_token_seconds", "Time between consecutive tokens of a sequence.", &m->gap);
    put_hist(&o, "cis2_request_duration_seconds", "Generation requests, from the whole body received to the response's end.",
             &m->duration);
    pthread_mutex_unlock(&m->mu);
    if (o.oom || !o.p) { serve_buf_free(&o); return NULL; }
    *len = o.n;
    return o.p;
}

/*
 * serve_http.c - the HTTP side of `cis2 serve` (docs/serving.md; docs/inputs.md "HTTP requests"),
 * on GNU libmicrohttpd (Debian's libmicrohttpd-dev) in thread-per-
 * connection mode: each connection's thread parses, validates and
 * tokenizes its request (serve_request.c), submits the job to the engine
 * thread (serve_engine.c) and blocks on the job until there is something
 * to send (a whole response, serve_response.c, or the events of a stream,
 * serve_stream.c), so no HTTP thread ever runs the model and the engine
 * thread never waits for a client.
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions, GET
 * /v1/models, GET /health, GET /metrics, POST /v1/verify, and at the root
 * vLLM's tokenizer endpoints (serve_tok.c): GET /tokenizer_info, POST
 * /tokenize, POST /detokenize, behind the API key as /v1 is.
 *
 * Hygiene: bodies over --max-body get 413 (from Content-Length before the
 * upload, else once it ends; a client that keeps sending far beyond is
 * disconnected); JSON nested deeper than 64 levels is refused before it is
 * parsed; with --api-key-file the /v1 endpoints need `Authorization:
 * Bearer KEY` (compared as sha256 digests, in constant time) else 401;
 * idle connections close after --timeout seconds; a stream writes an SSE
 * comment when it has been quiet for a third of that, so a slow prefill
 * never looks idle, while a client that stops reading still times out; a
 * client that disconnects (seen by poll() on its socket every 100 ms, or a
 * failed write) has its sequences cancelled, which frees their batch
 * slots.  Every error is an OpenAI-style JSON error (serve_err.c).
 *
 * Start-up (docs/serving.md "Starting it"): serve_http_bind binds and listens before
 * the model loads, so a busy port fails at once and connections made
 * while it loads wait in the kernel's backlog (answered once it is
 * loaded, never refused); serve_http_start hands that socket to
 * libmicrohttpd.  Every finished request is one access-log line
 * (serve_log.c) from on_completed.
 */
#define _GNU_SOURCE
#include "serve.h"

#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>

#ifdef CIS2_HAVE_MHD
#include <microhttpd.h>

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_JSON_DEPTH 64

enum { EP_COMPLETIONS, EP_CHAT, EP_MODELS, EP_HEALTH, EP_METRICS, EP_VERIFY, EP_TOKENIZE, EP_DETOKENIZE,
       EP_TOKENIZER_INFO, EP_OTHER };
static const char *ep_label[] = {"completions", "chat_completions", "models", "health", "metrics", "verify",
                                 "tokenize", "detokenize", "tokenizer_info", "other"};
static int ep_post(int ep)
{
    return ep == EP_COMPLETIONS || ep == EP_CHAT || ep == EP_VERIFY || ep == EP_TOKENIZE || ep == EP_DETOKENIZE;
}

/* One open connection, as the request-time watchdog sees it. */
typedef struct conn_watch {
    int fd;
    double since;              /* when the request being received was due to begin */
    int receiving;             /* waiting for (the rest of) a request */
    int cut;                   /* shut down by the watchdog */
    struct conn_watch *prev, *next;
} conn_watch;

struct serve_http {
    serve_ctx *sc;
    struct MHD_Daemon *d;
    pthread_mutex_t mu;        /* everything below */
    size_t active;             /* requests in progress */
    int quiesced;
    conn_watch *conns;         /* open connections */
    pthread_t watchdog;
    pthread_cond_t wake;
    int watchdog_on, quit;
};

typedef struct req_ctx {
    serve_http *h;
    conn_watch *w;             /* its connection's watch (NULL: none) */
    int ep;
    char *body;
    size_t len, cap;
    int too_big;
    int close;                 /* answer with Connection: close */
    size_t discarded;
    double t0;
    /* for the access line (serve_log.c) */
    double wall;               /* arrival, seconds since the epoch */
    int status;                /* sent (0: none yet; 499: the client went away) */
    unsigned long long bytes;  /* body bytes handed to the connection */
    char id[48];               /* the completion's id */
    char method[17];
    char path[260];            /* the first 259 bytes (the log cuts at 256) */
    char client[80];
} req_ctx;

/* ------------------------------------------------------------- responses */

static enum MHD_Result send_bytes(struct MHD_Connection *c, req_ctx *r, int status, const char *type, char *data,
                                  size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(data); return MHD_NO; }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 405) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, ep_post(r->ep) ? "POST" : "GET");
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 429 || status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (r->close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result q = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    serve_metrics_request(r->h->sc->met, ep_label[r->ep], status);
    if (q == MHD_YES) {
        r->status = status;
        r->bytes = len;
    }
    return q;
}

static enum MHD_Result send_json(struct MHD_Connection *c, req_ctx *r, int status, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return MHD_NO;
    size_t n = strlen(s);
    char *t = realloc(s, n + 2); /* a final newline, for curl users */
    if (t) { s = t; s[n++] = '\n'; s[n] = 0; }
    return send_bytes(c, r, status, "application/json", s, n);
}

static enum MHD_Result send_err(struct MHD_Connection *c, req_ctx *r, const serve_err *e)
{
    return send_json(c, r, e->status ? e->status : 500, serve_err_json(e));
}

#define FAIL(c, r, status, code, param, ...)                                                                        \
    do {                                                                                                            \
        serve_err e_ = {0};                                                                                         \
        serve_fail(&e_, status, code, param, __VA_ARGS__);                                                          \
        return send_err(c, r, &e_);                                                                                 \
    } while (0)

/* ---------------------------------------------------------------- helpers */

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static int json_too_deep(const char *s, size_t n)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = 0;
        } else if (ch == '"') in_str = 1;
        else if (ch == '{' || ch == '[') { if (++depth > MAX_JSON_DEPTH) return 1; }
        else if (ch == '}' || ch == ']') depth--;
    }
    return 0;
}

static int authorized(const serve_ctx *sc, struct MHD_Connection *c)
{
    if (!sc->cfg.have_key) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncasecmp(a, "Bearer ", 7)) return 0;
    const char *k = a + 7;
    while (*k == ' ') k++;
    size_t n = strlen(k);
    while (n && (k[n - 1] == ' ' || k[n - 1] == '\t')) n--;
    uint8_t d[32];
    cis2_sha256(k, n, d);
    unsigned diff = 0;
    for (int i = 0; i < 32; i++) diff |= (unsigned)(d[i] ^ sc->cfg.key_sha256[i]); /* constant time */
    return diff == 0;
}

static int route(const char *url, const char *method, int *ep)
{
    static const struct { const char *url; int ep; int post; } t[] = {
        {"/v1/completions", EP_COMPLETIONS, 1}, {"/v1/chat/completions", EP_CHAT, 1}, {"/v1/models", EP_MODELS, 0},
        {"/health", EP_HEALTH, 0}, {"/metrics", EP_METRICS, 0}, {"/v1/verify", EP_VERIFY, 1},
        {"/tokenize", EP_TOKENIZE, 1}, {"/detokenize", EP_DETOKENIZE, 1}, {"/tokenizer_info", EP_TOKENIZER_INFO, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(url, t[i].url)) {
            *ep = t[i].ep;
            if (t[i].post) return !strcmp(method, "POST") ? 200 : 405;
            return !strcmp(method, "GET") || !strcmp(method, "HEAD") ? 200 : 405;
        }
    *ep = EP_OTHER;
    return 404;
}

/* --------------------------------------------------------- GET endpoints */

static json_t *eos_json(const cis2_model_info *mi)
{
    json_t *a = json_array();
    for (size_t i = 0; i < mi->n_eos; i++) json_array_append_new(a, json_integer(mi->eos_ids[i]));
    return a;
}

static enum MHD_Result do_models(struct MHD_Connection *c, req_ctx *r)
{
    const serve_ctx *sc = r->h->sc;
    const cis2_model_info *mi = sc->mi;
    char h[65];
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(sc->cfg.model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(sc->created));
    json_object_set_new(m, "owned_by", json_string("cis2"));
    json_object_set_new(m, "max_model_len", json_integer((json_int_t)mi->max_position_embeddings)); /* vLLM's key */
    json_t *x = json_object();
    cis2_hex(mi->weights_sha256, 32, h);
    json_object_set_new(x, "weights_sha256", json_string(h));
    cis2_hex(mi->config_sha256, 32, h);
    json_object_set_new(x, "config_sha256", json_string(h));
    cis2_hex(mi->tokenizer_sha256, 32, h);
    json_object_set_new(x, "tokenizer_sha256", json_string(h));
    json_object_set_new(x, "model_type", json_string(mi->model_type));
    json_object_set_new(x, "max_context", json_integer((json_int_t)mi->max_position_embeddings));
    json_object_set_new(x, "vocab_size", json_integer((json_int_t)mi->vocab_size));
    json_object_set_new(x, "spec_version", json_string(CIS2_SPEC_VERSION));
    json_object_set_new(x, "chat_template", sc->chat ? json_string(serve_chat_kind(sc->chat)) : json_null());
    json_object_set_new(x, "chat_template_sha256", sc->chat ? json_string(serve_chat_sha256(sc->chat)) : json_null());
    unsigned f = cis2_features();
    json_object_set_new(x, "sampling", json_boolean(f & CIS2_FEATURE_SAMPLING));
    json_object_set_new(x, "stop_rules", json_boolean(f & CIS2_FEATURE_STOP_RULES));
    json_object_set_new(x, "logprobs", json_boolean(f & CIS2_FEATURE_LOGPROBS));
    json_object_set_new(x, "eos_token_ids", eos_json(mi));
    json_t *cs = json_array();
    for (size_t i = 0; sc->chat && i < sc->n_chat_stop; i++) json_array_append_new(cs, json_integer(sc->chat_stop[i]));
    json_object_set_new(x, "chat_stop_token_id", json_array_size(cs) ? json_integer(sc->chat_stop[0]) : json_null());
    json_object_set_new(x, "chat_stop_token_ids", cs);
    json_object_set_new(m, "cis2", x);
    json_t *a = json_array();
    json_array_append_new(a, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", a);
    return send_json(c, r, 200, o);
}

static enum MHD_Result do_health(struct MHD_Connection *c, req_ctx *r)
{
    serve_http *h = r->h;
    size_t seqs = 0;
    serve_engine_load(h->sc->eng, &seqs, NULL);
    pthread_mutex_lock(&h->mu);
    int q = h->quiesced;
    pthread_mutex_unlock(&h->mu);
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(q ? "shutting_down" : "ok"));
    json_object_set_new(o, "model", json_string(h->sc->cfg.model_name));
    json_object_set_new(o, "sequences_inflight", json_integer((json_int_t)seqs));
    return send_json(c, r, q ? 503 : 200, o);
}

static enum MHD_Result do_metrics(struct MHD_Connection *c, req_ctx *r)
{
    size_t n = 0;
    serve_engine_load(r->h->sc->eng, &n, NULL);
    serve_metrics_inflight(r->h->sc->met, n);
    n = 0;
    char *s = serve_metrics_render(r->h->sc->met, &n);
    if (!s) FAIL(c, r, 500, NULL, NULL, "out of memory");
    return send_bytes(c, r, 200, "text/plain; version=0.0.4; charset=utf-8", s, n);
}

/* ------------------------------------------------------------ tokenizer */

static enum MHD_Result do_tokenizer_info(struct MHD_Connection *c, req_ctx *r)
{
    const serve_ctx *sc = r->h->sc;
    char *s = malloc(sc->tok_info_len + 1);
    if (!s) FAIL(c, r, 503, NULL, NULL, "out of memory");
    memcpy(s, sc->tok_info, sc->tok_info_len + 1);
    return send_bytes(c, r, 200, "application/json", s, sc->tok_info_len);
}

/* POST /tokenize, /detokenize (serve_tok.c) */
static enum MHD_Result do_tok(struct MHD_Connection *c, req_ctx *r)
{
    serve_err e = {0};
    if (json_too_deep(r->body ? r->body : "", r->len))
        FAIL(c, r, 400, "invalid_json", NULL, "the JSON body is nested deeper than %d levels", MAX_JSON_DEPTH);
    json_t *o = r->ep == EP_TOKENIZE ? serve_tokenize(r->h->sc, r->body, r->len, &e)
                                     : serve_detokenize(r->h->sc, r->body, r->len, &e);
    return o ? send_json(c, r, 200, o) : send_err(c, r, &e);
}

/* --------------------------------------------------------------- verify */

/* The body: a receipt's text, {"receipt": "..."}, or {"receipts": [...]}
 * (serve_verify.c). */
static enum MHD_Result do_verify(struct MHD_Connection *c, req_ctx *r)
{
    serve_err e = {0};
    json_t *o = serve_verify(r->h->sc, r->body, r->len, conn_fd(c), &e);
    if (o) return send_json(c, r, 200, o);
    if (e.status == 499) { /* the client left: nobody to answer */
        serve_metrics_request(r->h->sc->met, ep_label[r->ep], 499);
        r->status = 499;
        return MHD_NO;
    }
    return send_err(c, r, &e);
}

/* ------------------------------------------------------------ generation */

typedef struct stream {
    serve_http *h;
    req_ctx *r;                /* its request (bytes for the access line; read only before on_completed) */
    serve_call *call;
    serve_job *job;
    serve_sse *sse;
    serve_buf out;             /* events formatted, out.p[off..out.n) not yet sent */
    size_t off;
    int done, fd;
    double t_write, t0;
} stream;

static void stream_free(void *cls)
{
    stream *st = cls;
    serve_engine_release(st->h->sc->eng, st->job); /* cancels it if it has not ended */
    serve_metrics_request_done(st->h->sc->met, serve_now() - st->t0);
    serve_sse_free(st->sse);
    serve_buf_free(&st->out);
    free(st);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *st = cls;
    serve_ctx *sc = st->h->sc;
    double keepalive = sc->cfg.timeout_s ? sc->cfg.timeout_s / 3.0 : 10.0;
    (void)pos;
    while (st->off == st->out.n) {
        if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
        serve_buf_cut(&st->out, st->out.n); /* all sent: empty, as serve_buf keeps it */
        st->off = 0;
        serve_engine_lock(sc->eng);
        int changed = serve_sse_collect(st->sse);
        while (!changed && serve_now() - st->t_write < keepalive) {
            if (serve_client_gone(st->fd)) {
                serve_engine_unlock(sc->eng);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            serve_engine_wait(sc->eng, st->job, 100);
            changed = serve_sse_collect(st->sse);
        }
        serve_engine_unlock(sc->eng);
        if (changed && serve_sse_format(st->sse, &st->out, &st->done))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->out.n == 0 && !st->done && !changed) { /* quiet for a while: an SSE comment keeps it alive */
            serve_buf_str(&st->out, ": keep-alive\n\n");
            if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = st->out.n - st->off;
    if (n > max) n = max;
    memcpy(buf, st->out.p + st->off, n);
    st->off += n;
    st->r->bytes += n;
    st->t_write = serve_now();
    return (ssize_t)n;
}

/* Waits (the engine lock held) until the job is admitted (stream) or out
 * of the engine (whole response); 0, or -1 if the client went away. */
static int wait_job(serve_engine *eng, serve_job *j, int fd, int whole)
{
    while (whole ? j->in_engine || j->state == JOB_NEW : j->state == JOB_NEW) {
        serve_engine_wait(eng, j, 100);
        if ((whole ? j->in_engine || j->state == JOB_NEW : j->state == JOB_NEW) && serve_client_gone(fd)) return -1;
    }
    return 0;
}

static enum MHD_Result do_generate(struct MHD_Connection *c, req_ctx *r, int kind)
{
    serve_ctx *sc = r->h->sc;
    serve_err e = {0};
    serve_call *call = NULL;
    if (json_too_deep(r->body, r->len))
        FAIL(c, r, 400, "invalid_json", NULL, "the JSON body is nested deeper than %d levels", MAX_JSON_DEPTH);
    if (serve_call_parse(sc, kind, r->body ? r->body : "", r->len, conn_fd(c), &call, &e)) {
        if (e.status == 499) { /* echo's scoring ended: the client left */
            serve_metrics_request(sc->met, ep_label[r->ep], 499);
            r->status = 499;
            return MHD_NO;
        }
        return send_err(c, r, &e);
    }
    snprintf(r->id, sizeof r->id, "%s", call->id);
    serve_job *j = serve_call_peek_job(call);
    if (!j) { /* echo with max_tokens 0: the prompt's scores, no generation */
        json_t *o = serve_call_response(sc, call, &e);
        serve_call_free(call);
        serve_metrics_request_done(sc->met, serve_now() - r->t0);
        return o ? send_json(c, r, 200, o) : send_err(c, r, &e);
    }
    if (serve_engine_submit(sc->eng, j, &e)) {
        serve_call_free(call);
        return send_err(c, r, &e);
    }
    j = serve_call_job(call); /* the job owns the call now */
    int fd = conn_fd(c), stream_it = serve_call_stream(call);
    serve_engine_lock(sc->eng);
    int gone = wait_job(sc->eng, j, fd, !stream_it);
    int state = j->state;
    serve_engine_unlock(sc->eng);
    if (gone) {
        serve_engine_release(sc->eng, j);
        serve_metrics_request(sc->met, ep_label[r->ep], 499); /* nginx's "client closed request" */
        r->status = 499;
        return MHD_NO;
    }
    if (!stream_it || state == JOB_FAILED) {
        json_t *o = serve_call_response(sc, call, &e); /* or the job's error */
        serve_engine_release(sc->eng, j);
        serve_metrics_request_done(sc->met, serve_now() - r->t0);
        return o ? send_json(c, r, 200, o) : send_err(c, r, &e);
    }
    stream *st = calloc(1, sizeof *st);
    if (st) st->sse = serve_sse_new(sc, call);
    if (!st || !st->sse) {
        if (st) free(st);
        serve_engine_release(sc->eng, j);
        FAIL(c, r, 503, NULL, NULL, "out of memory");
    }
    st->h = r->h;
    st->r = r;
    st->call = call;
    st->job = j;
    st->fd = fd;
    st->t0 = r->t0;
    st->t_write = serve_now();
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!resp) { stream_free(st); return MHD_NO; }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result q = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    serve_metrics_request(sc->met, ep_label[r->ep], 200);
    if (q == MHD_YES) r->status = 200;
    return q;
}

/* --------------------------------------------------- the request clock
 *
 * libmicrohttpd's --timeout is an idle timeout: a client that sends one
 * byte a second (slowloris) is never idle, and --max-connections of them
 * lock every other client out.  So each connection is also on a clock
 * that runs while a request is being received: from the connection's
 * start, and again from the end of each response (keep-alive), a whole
 * request, headers and body, must arrive within --request-timeout; once
 * it has (the handler's last upload call), the clock stops until the
 * response is done.  A watchdog thread shuts down the socket of a
 * connection past its time (shutdown(2) wakes the connection's thread,
 * which then closes it); the socket stays open until libmicrohttpd's
 * "closed" notification has removed the watch, which happens before it
 * closes the descriptor, so the watchdog never touches a reused one. */

static void watch_set(serve_http *h, conn_watch *w, int receiving)
{
    if (!w) return;
    pthread_mutex_lock(&h->mu);
    w->receiving = receiving;
    w->since = serve_now();
    pthread_mutex_unlock(&h->mu);
}

/* The connection's request is past its time (checked on each upload too,
 * so a slow body ends as soon as its next bytes arrive). */
static int watch_late(serve_http *h, const conn_watch *w)
{
    if (!w) return 0;
    pthread_mutex_lock(&h->mu);
    int late = w->receiving && serve_now() - w->since > h->sc->cfg.request_timeout_s;
    pthread_mutex_unlock(&h->mu);
    return late;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    serve_http *h = cls;
    conn_watch *w = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        if (!(w = calloc(1, sizeof *w))) return; /* no watch: only the idle timeout */
        w->fd = conn_fd(c);
        w->since = serve_now();
        w->receiving = 1;
        pthread_mutex_lock(&h->mu);
        w->next = h->conns;
        if (h->conns) h->conns->prev = w;
        h->conns = w;
        pthread_mutex_unlock(&h->mu);
        *socket_context = w;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && w) {
        pthread_mutex_lock(&h->mu);
        if (w->prev) w->prev->next = w->next;
        else h->conns = w->next;
        if (w->next) w->next->prev = w->prev;
        pthread_mutex_unlock(&h->mu);
        free(w);
        *socket_context = NULL;
    }
}

static void *watchdog_main(void *arg)
{
    serve_http *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->quit) {
        double now = serve_now();
        for (conn_watch *w = h->conns; w; w = w->next)
            if (w->receiving && !w->cut && w->fd >= 0 && now - w->since > h->sc->cfg.request_timeout_s) {
                shutdown(w->fd, SHUT_RDWR);
                w->cut = 1;
            }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&h->wake, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static conn_watch *conn_watch_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* ---------------------------------------------------------------- handler */

/* Content-Length and Transfer-Encoding headers as sent (libmicrohttpd
 * keeps every copy). */
typedef struct framing { int n_cl, cl_differ, te; const char *cl; } framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    framing *f = cls;
    (void)kind;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->n_cl++ && strcmp(f->cl, value ? value : "")) f->cl_differ = 1;
        f->cl = value ? value : "";
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) f->te = 1;
    return MHD_YES;
}

/* A body whose length two headers tell differently (two disagreeing
 * Content-Lengths, or one beside Transfer-Encoding) is where a proxy in
 * front and this server could split the stream differently (request
 * smuggling, RFC 9112 §6.3): refused, and the connection closed.  NULL,
 * or why, in one line. */
static const char *ambiguous_length(struct MHD_Connection *c)
{
    framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    if (f.cl_differ) return "the request has Content-Length headers that disagree";
    return f.n_cl && f.te ? "the request has both Content-Length and Transfer-Encoding" : NULL;
}

static enum MHD_Result first_call(serve_http *h, struct MHD_Connection *c, req_ctx *r, const char *url,
                                  const char *method)
{
    serve_ctx *sc = h->sc;
    int st = route(url, method, &r->ep);
    if (st == 404) FAIL(c, r, 404, "not_found", NULL, "no such endpoint: %s %.200s", method, url);
    if (st == 405) FAIL(c, r, 405, "method_not_allowed", NULL, "%s is not allowed on %.200s", method, url);
    const char *why = ambiguous_length(c);
    if (why) {
        r->close = 1; /* the stream's framing cannot be trusted past this request */
        FAIL(c, r, 400, "invalid_request", NULL, "%s", why);
    }
    if (r->ep == EP_HEALTH) return do_health(c, r);
    if (r->ep == EP_METRICS) return do_metrics(c, r);
    if (!authorized(sc, c)) FAIL(c, r, 401, "invalid_api_key", NULL, "Incorrect API key provided");
    pthread_mutex_lock(&h->mu);
    int q = h->quiesced;
    pthread_mutex_unlock(&h->mu);
    if (q) FAIL(c, r, 503, "shutting_down", NULL, "the server is shutting down");
    if (r->ep == EP_MODELS) return do_models(c, r);
    if (r->ep == EP_TOKENIZER_INFO) return do_tokenizer_info(c, r);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        if (*end || n > sc->cfg.max_body)
            FAIL(c, r, 413, "request_too_large", NULL, "the request body is larger than %zu bytes", sc->cfg.max_body);
        if (n && !(r->body = malloc((size_t)n + 1)))
            FAIL(c, r, 503, NULL, NULL, "out of memory");
        r->cap = n ? (size_t)n + 1 : 0;
    }
    return MHD_YES;
}

/* What the access line says of a request, noted when it arrives. */
static void note_request(req_ctx *r, struct MHD_Connection *c, const char *url, const char *method)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->wall = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    snprintf(r->method, sizeof r->method, "%s", method ? method : "");
    snprintf(r->path, sizeof r->path, "%s", url ? url : "");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char host[64], port[16];
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    socklen_t len = sa && sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (sa && !getnameinfo(sa, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV))
        snprintf(r->client, sizeof r->client, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    serve_http *h = cls;
    req_ctx *r = *con_cls;
    (void)version;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        r->h = h;
        r->t0 = serve_now();
        r->w = conn_watch_of(c);
        note_request(r, c, url, method);
        *con_cls = r;
        pthread_mutex_lock(&h->mu);
        h->active++;
        pthread_mutex_unlock(&h->mu);
        return first_call(h, c, r, url, method);
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (watch_late(h, r->w)) return MHD_NO; /* a body dribbled past --request-timeout */
        if (r->too_big || r->len + n > h->sc->cfg.max_body) {
            r->too_big = 1;
            r->discarded += n;
            return r->discarded > 8 * h->sc->cfg.max_body + (1u << 20) ? MHD_NO : MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t cap = r->cap ? r->cap : 4096;
            while (cap < r->len + n + 1) cap *= 2;
            char *nb = realloc(r->body, cap);
            if (!nb) return MHD_NO;
            r->body = nb;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload, n);
        r->len += n;
        r->body[r->len] = 0;
        return MHD_YES;
    }
    watch_set(h, r->w, 0); /* the whole request is here: its clock stops */
    if (r->too_big)
        FAIL(c, r, 413, "request_too_large", NULL, "the request body is larger than %zu bytes", h->sc->cfg.max_body);
    if (r->ep == EP_VERIFY) return do_verify(c, r);
    if (r->ep == EP_TOKENIZE || r->ep == EP_DETOKENIZE) return do_tok(c, r);
    return do_generate(c, r, r->ep == EP_CHAT ? CALL_CHAT : CALL_COMPLETION);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    serve_http *h = cls;
    req_ctx *r = *con_cls;
    (void)c;
    if (!r) return;
    static const char *ends[] = {"ok", "error", "timeout", "shutdown", "read_error", "client_abort"};
    serve_log_entry en = {.wall = r->wall, .client = r->client, .method = r->method, .path = r->path,
                          .status = r->status, .bytes = r->bytes, .ms = (serve_now() - r->t0) * 1000.0,
                          .id = r->id[0] ? r->id : NULL,
                          .end = (unsigned)toe < sizeof ends / sizeof ends[0] ? ends[toe] : "other"};
    serve_log_request(h->sc->log, &en);
    watch_set(h, r->w, 1); /* the next request on this connection is due from now */
    free(r->body);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&h->mu);
    h->active--;
    pthread_mutex_unlock(&h->mu);
}

/* libmicrohttpd's messages, at most 10 a second (a flood of bad clients
 * must not become a flood of log lines). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static double window;
    static unsigned in_window, dropped;
    (void)cls;
    double now = serve_now();
    pthread_mutex_lock(&mu);
    if (now - window >= 1.0) {
        if (dropped) fprintf(stderr, "cis2 serve: http: %u more messages suppressed\n", dropped);
        window = now;
        in_window = dropped = 0;
    }
    int drop = ++in_window > 10;
    dropped += (unsigned)drop;
    pthread_mutex_unlock(&mu);
    if (drop) return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    fprintf(stderr, "cis2 serve: http: %s\n", line);
}

/* ------------------------------------------------------------- lifecycle */

int serve_http_bind(const serve_config *cfg, int *fd, unsigned *port, cis2_error *err)
{
    *fd = -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%u", cfg->port);
    int g = getaddrinfo(cfg->host, ps, &hints, &ai);
    if (g || !ai) return cis2_fail(err, CIS2_E_USAGE, "--host %s: %s", cfg->host, gai_strerror(g));
    int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, e = 0;
    if (s < 0) e = errno;
    else {
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a restart need not wait out TIME_WAIT */
        if (ai->ai_family == AF_INET6) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, SOMAXCONN)) e = errno;
    }
    freeaddrinfo(ai);
    if (e) {
        if (s >= 0) close(s);
        return cis2_fail(err, CIS2_E_IO, "cannot listen on %s port %u: %s%s", cfg->host, cfg->port, strerror(e),
                         e == EADDRINUSE      ? " (another server has it: stop it, or choose another --port; "
                                                "--port 0 takes any free one)"
                         : e == EADDRNOTAVAIL ? " (not an address of this machine: see --host)"
                         : e == EACCES        ? " (ports below 1024 need privileges)"
                                              : "");
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *port = cfg->port;
    if (!getsockname(s, (struct sockaddr *)&ss, &sl))
        *port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd = s;
    return CIS2_OK;
}

int serve_http_start(serve_http **out, serve_ctx *sc, int fd, cis2_error *err)
{
    *out = NULL;
    serve_http *h = calloc(1, sizeof *h);
    if (!h) { close(fd); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    h->sc = sc;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->wake, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)sc->cfg.timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)sc->cfg.max_connections,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)1 << 20,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_END);
    if (!h->d) {
        close(fd);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->wake);
        free(h);
        return cis2_fail(err, CIS2_E_IO, "cannot serve on %s port %u (libmicrohttpd did not start; see its message above)",
                         sc->cfg.host, sc->cfg.port);
    }
    if (pthread_create(&h->watchdog, NULL, watchdog_main, h) == 0) h->watchdog_on = 1;
    else fprintf(stderr, "cis2 serve: warning: no request-time watchdog (thread start failed): only --timeout bounds slow clients\n");
    *out = h;
    return CIS2_OK;
}
void serve_http_quiesce(serve_http *h)
{
    pthread_mutex_lock(&h->mu);
    int was = h->quiesced;
    h->quiesced = 1;
    pthread_mutex_unlock(&h->mu);
    if (!was) {
        MHD_socket s = MHD_quiesce_daemon(h->d);
        if (s != MHD_INVALID_SOCKET) close(s);
    }
}

size_t serve_http_active(serve_http *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->active;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void serve_http_stop(serve_http *h)
{
    if (!h) return;
    if (h->watchdog_on) {
        pthread_mutex_lock(&h->mu);
        h->quit = 1;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->watchdog, NULL);
    }
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->wake);
    free(h);
}

#else /* built without libmicrohttpd (e.g. a cross build): serve refuses to start */

struct serve_http { int unused; };
int serve_http_bind(const serve_config *cfg, int *fd, unsigned *port, cis2_error *err)
{
    (void)cfg;
    *fd = -1;
    *port = 0;
    return cis2_fail(err, CIS2_E_UNSUPPORTED, "this cis2 was built without libmicrohttpd: `serve` is not available");
}
int serve_http_start(serve_http **out, serve_ctx *sc, int fd, cis2_error *err)
{
    (void)sc;
    (void)fd;
    *out = NULL;
    return cis2_fail(err, CIS2_E_UNSUPPORTED, "this cis2 was built without libmicrohttpd: `serve` is not available");
}
void serve_http_quiesce(serve_http *h) { (void)h; }
size_t serve_http_active(serve_http *h) { (void)h; return 0; }
void serve_http_stop(serve_http *h) { (void)h; }
#endif


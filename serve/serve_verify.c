/*
 * serve_verify.c - what `cis2 serve` computes on a request's own thread,
 * beside the engine thread: /v1/verify (receipts verified by prefill, as
 * `cis2 verify R1..Rn`; docs/serving.md "/v1/verify") and the prompt
 * scores of echo and prompt_logprobs (docs/sampling.md §S11).  Both are
 * bounded before any work by --verify-max-tokens and stopped between
 * weight passes by a serve_guard: shutdown past its drain, the client gone
 * (a 499: nobody to answer), or --verify-timeout spent.
 *
 * Who calls it: serve_http.c (/v1/verify: serve_verify), serve_request.c
 * (serve_score_prompts while it parses a completion).  It calls the library,
 * serve_err.c and serve_engine.c's clock only, so the HTTP layer and the
 * request parser each depend on it and not on each other's internals.
 * Built with or without libmicrohttpd (the aarch64 cross build has none).
 */
#define _GNU_SOURCE
#include "serve.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define FAIL(status, code, param, ...)                                                                              \
    do {                                                                                                            \
        serve_fail(e, status, code, param, __VA_ARGS__);                                                            \
        return NULL;                                                                                                \
    } while (0)

/* ----------------------------------------------------------------- guard */

/* The peer closed its end (or the socket failed)? (serve.h)  Asked by the
 * guard below and by serve_http.c's watch of waiting requests. */
int serve_client_gone(int fd)
{
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return 1;
    if (p.revents & POLLIN) {
        char b;
        ssize_t k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return k == 0;
    }
    return 0;
}

serve_guard serve_guard_begin(const serve_ctx *sc, int fd)
{
    return (serve_guard){sc, fd, serve_now() + sc->cfg.verify_timeout_s, SERVE_GUARD_NONE};
}

int serve_guard_should_stop(void *guard)
{
    serve_guard *g = guard;
    if (atomic_load(&((serve_ctx *)g->sc)->stopping)) g->why = SERVE_GUARD_STOPPING;
    else if (serve_client_gone(g->fd)) g->why = SERVE_GUARD_GONE;
    else if (serve_now() > g->deadline) g->why = SERVE_GUARD_TIMEOUT;
    return g->why != SERVE_GUARD_NONE;
}

/* ------------------------------------------------------------ /v1/verify */

static const char *field_status(int s)
{
    static const char *n[] = {"ok", "mismatch", "input", "unverified", "same", "differs", "note"};
    return s >= 0 && s <= 6 ? n[s] : "unknown";
}

#define SERVE_VERIFY_BATCH 256 /* receipts in one /v1/verify */

/* One verdict as /v1/verify reports it (docs/serving.md). */
static json_t *verdict_json(const cis2_verdict *v)
{
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(v->name));
    json_object_set_new(o, "summary", json_string(v->summary));
    json_object_set_new(o, "ok", json_boolean(v->kind == CIS2_VERDICT_OK));
    json_object_set_new(o, "exit_code", json_integer(v->code));
    json_t *f = json_array();
    for (size_t i = 0; i < v->n_fields; i++) {
        json_t *x = json_object();
        json_object_set_new(x, "key", json_string(v->fields[i].key));
        json_object_set_new(x, "status", json_string(field_status(v->fields[i].status)));
        json_object_set_new(x, "detail", json_string(v->fields[i].detail));
        json_array_append_new(f, x);
    }
    json_object_set_new(o, "fields", f);
    json_object_set_new(o, "first_bad_step", v->first_bad_step < 0 ? json_null() : json_integer(v->first_bad_step));
    return o;
}

/* The positions a receipt makes the verifier compute, at most: its prompt's
 * bytes (no token is shorter than a byte) and the tokens it may run
 * (max-toks of an extension receipt, else gen-toks).  Known before any
 * work, so /v1/verify is bounded in work as well as in bytes. */
/* the elements of a CSV value ("none": 0) */
static size_t csv_count(const char *v)
{
    if (!v || !strcmp(v, "none")) return 0;
    size_t n = 1;
    for (; *v; v++) n += *v == ',';
    return n;
}

static size_t receipt_work(const cis2_receipt *r)
{
    const char *cont = cis2_receipt_get(r, "continuation-token-ids"); /* a score receipt: the ids it scores */
    if (cont) return csv_count(cont) + csv_count(cis2_receipt_get(r, "context-token-ids"));
    const char *hex = cis2_receipt_get(r, "prompt-hex"), *mt = cis2_receipt_get(r, "max-toks");
    const char *gt = cis2_receipt_get(r, "gen-toks");
    size_t bytes = hex ? strlen(hex) / 2 : 0;
    unsigned long long toks = strtoull(mt ? mt : gt ? gt : "0", NULL, 10);
    return bytes + (toks > SIZE_MAX / 4 ? SIZE_MAX / 4 : (size_t)toks);
}

static void receipts_free(cis2_receipt **rs, size_t n)
{
    for (size_t i = 0; rs && i < n; i++) cis2_receipt_free(rs[i]);
    free(rs);
}

/* The body: a receipt's text, {"receipt": "..."}, or {"receipts": [...]}
 * (at most SERVE_VERIFY_BATCH, verified together as `cis2 verify R1..Rn`:
 * one weight pass for all, a shared prompt prefix computed once). */
json_t *serve_verify(serve_ctx *sc, const char *body_text, size_t body_len, int fd, serve_err *e)
{
    const char *text = body_text ? body_text : "";
    size_t len = body_len, n = 1;
    json_t *body = NULL, *list = NULL; /* list: borrowed from body until the receipts are parsed */
    size_t k = 0;
    while (k < len && (text[k] == ' ' || text[k] == '\n' || text[k] == '\r' || text[k] == '\t')) k++;
    if (k < len && text[k] == '{') {
        json_error_t je;
        body = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!body)
            FAIL(400, "invalid_json", NULL, "We could not parse the JSON body of your request (line %d, column %d: %s)",
                 je.line, je.column, je.text);
        json_t *one = json_object_get(body, "receipt");
        list = json_object_get(body, "receipts");
        if (one && list) {
            json_decref(body);
            FAIL(400, "invalid_value", "receipts", "give \"receipt\" or \"receipts\", not both");
        }
        if (list) {
            n = json_is_array(list) ? json_array_size(list) : 0;
            if (n == 0 || n > SERVE_VERIFY_BATCH) {
                json_decref(body);
                FAIL(400, "invalid_value", "receipts", "\"receipts\" must be an array of 1 to %d receipts",
                     SERVE_VERIFY_BATCH);
            }
        } else if (!json_is_string(one)) {
            json_decref(body);
            FAIL(400, "invalid_value", "receipt",
                 "the body must be a receipt, {\"receipt\": \"...\"} or {\"receipts\": [...]}");
        } else {
            text = json_string_value(one);
            len = json_string_length(one);
        }
    }
    cis2_receipt **rs = calloc(n, sizeof *rs);
    cis2_error err = {0};
    if (!rs) {
        json_decref(body);
        FAIL(500, NULL, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        char name[48] = "receipt";
        if (list) {
            json_t *x = json_array_get(list, i);
            snprintf(name, sizeof name, "receipts[%zu]", i);
            if (!json_is_string(x)) {
                receipts_free(rs, n);
                json_decref(body);
                FAIL(400, "invalid_value", "receipts", "%s is not a string", name);
            }
            text = json_string_value(x);
            len = json_string_length(x);
        }
        if (cis2_receipt_parse(text, len, name, &rs[i], &err)) {
            receipts_free(rs, n);
            json_decref(body);
            FAIL(400, "invalid_receipt", list ? "receipts" : "receipt", "%s", err.msg);
        }
    }
    int batch = list != NULL;
    json_decref(body);
    size_t work = 0;
    for (size_t i = 0; i < n; i++) work += receipt_work(rs[i]);
    if (work > sc->cfg.verify_max_tokens) {
        receipts_free(rs, n);
        FAIL(413, "verify_too_large", NULL,
             "the receipts claim %zu prompt bytes and tokens in all; this server verifies at most %zu in one "
             "request (--verify-max-tokens): send fewer receipts at a time", work, sc->cfg.verify_max_tokens);
    }
    pthread_mutex_lock(&sc->vmu);
    int busy = sc->verifying >= sc->verify_max;
    if (!busy) sc->verifying++;
    pthread_mutex_unlock(&sc->vmu);
    if (busy) {
        receipts_free(rs, n);
        FAIL(429, "verify_busy", NULL, "%zu verifications are already running: retry later", sc->verify_max);
    }
    cis2_verdict *v = NULL;
    serve_guard g = serve_guard_begin(sc, fd);
    cis2_verify_opts vo = {.should_stop = serve_guard_should_stop, .should_stop_ctx = &g};
    int rc = cis2_verify(sc->e, rs, n, &vo, &v, &err); /* the prefill replay; concurrent with the engine thread */
    pthread_mutex_lock(&sc->vmu);
    sc->verifying--;
    pthread_mutex_unlock(&sc->vmu);
    receipts_free(rs, n);
    if (rc == CIS2_E_CANCELLED && g.why == SERVE_GUARD_GONE)
        FAIL(499, "client_gone", NULL, "the client left while its receipts were verified"); /* nobody to answer */
    if (rc == CIS2_E_CANCELLED && g.why == SERVE_GUARD_STOPPING)
        FAIL(503, "shutting_down", NULL, "the server is shutting down: verification cancelled");
    if (rc == CIS2_E_CANCELLED && g.why == SERVE_GUARD_TIMEOUT)
        FAIL(413, "verify_timeout", NULL,
             "verification took longer than %u s (--verify-timeout): send fewer receipts at a time",
             sc->cfg.verify_timeout_s);
    if (rc) FAIL(serve_status_for(rc), NULL, NULL, "verify failed: %s", err.msg);
    json_t *o;
    if (!batch) o = verdict_json(v);
    else { /* every verdict in order, and the batch's: all OK, the highest exit code (as the CLI's) */
        o = json_object();
        json_t *a = json_array();
        int all = 1, worst = 0;
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(a, verdict_json(&v[i]));
            all &= v[i].kind == CIS2_VERDICT_OK;
            if (v[i].code > worst) worst = v[i].code;
        }
        json_object_set_new(o, "verdicts", a);
        json_object_set_new(o, "ok", json_boolean(all));
        json_object_set_new(o, "exit_code", json_integer(worst));
    }
    cis2_verdicts_free(v, n);
    return o;
}

/* ------------------------------------------------------ prompt scoring */

/* echo: the prompt's scores (docs/sampling.md §S11: each prompt scored as
 * a continuation with no context, its ids the job's, the first token
 * unscored) when logprobs are asked with echo, or prompt_logprobs.
 *
 * With score receipts (the request's score_receipt, or --receipt-log:
 * docs/serving.md "Score receipts") the prompts are scored by
 * cis2_score_receipts_ex, without by cis2_score_ex: either asks the guard
 * before every weight pass, so a scoring stops within one pass when the
 * client leaves, the drain ends or --verify-timeout is spent.  The
 * receipts go to the receipt log with the answer (serve_response.c), not
 * before: a request refused after its scoring (429, 503) leaves none. */
static int score_fail(const serve_ctx *sc, const serve_call *c, const serve_guard *g, int rc, const cis2_error *err,
                      serve_err *e)
{
    if (rc == CIS2_E_CANCELLED && g->why == SERVE_GUARD_GONE)
        return serve_fail(e, 499, "client_gone", NULL, "the client left while its prompts were scored");
    if (rc == CIS2_E_CANCELLED && g->why == SERVE_GUARD_TIMEOUT)
        return serve_fail(e, 413, "score_timeout", c->echo ? "echo" : "prompt_logprobs",
                          "scoring the prompts took longer than this server's --verify-timeout (%u s): send fewer or "
                          "shorter prompts at a time", sc->cfg.verify_timeout_s);
    if (rc == CIS2_E_CANCELLED)
        return serve_fail(e, 503, "shutting_down", NULL, "the server is shutting down; scoring was stopped");
    return serve_fail(e, serve_status_for(rc), NULL, "prompt", "scoring the prompt failed: %s", err->msg);
}

/* Every prompt with its score receipt (each receipt's text kept). */
static int score_with_receipts(const serve_ctx *sc, serve_call *c, const cis2_score_request *rq,
                               const cis2_score_opts *so, cis2_error *err)
{
    size_t n = c->n_prompts;
    cis2_receipt **rs = calloc(n, sizeof *rs);
    if (!rs || !(c->score_text = calloc(n, sizeof *c->score_text)) || !(c->score_len = calloc(n, sizeof *c->score_len))) {
        free(rs);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    int rc = cis2_score_receipts_ex(sc->e, rq, n, so, &c->scores, rs, err); /* concurrent with the engine, as /v1/verify */
    for (size_t i = 0; i < n && !rc; i++) rc = cis2_receipt_render(rs[i], &c->score_text[i], &c->score_len[i], err);
    for (size_t i = 0; i < n; i++) cis2_receipt_free(rs[i]);
    free(rs);
    return rc;
}

int serve_score_prompts(const serve_ctx *sc, serve_call *c, int fd, serve_err *e)
{
    if (!(c->echo && c->logprobs) && !c->prompt_lp) return 0;
    unsigned top = c->prompt_lp ? c->prompt_lp_top : 0;
    if (c->echo && c->logprobs && c->top_logprobs > top) top = c->top_logprobs;
    size_t work = 0; /* the positions the scoring computes: bounded as /v1/verify's (docs/inputs.md "Memory") */
    for (size_t i = 0; i < c->n_prompts; i++) work += c->prompts[i].n_tokens;
    if (work > sc->cfg.verify_max_tokens)
        return serve_fail(e, 413, "score_too_large", c->echo ? "echo" : "prompt_logprobs",
                          "scoring the prompts takes %zu tokens in all; this server scores at most %zu in one request "
                          "(--verify-max-tokens): send fewer or shorter prompts at a time", work,
                          sc->cfg.verify_max_tokens);
    cis2_score_request *rq = calloc(c->n_prompts, sizeof *rq);
    if (!rq) return serve_fail(e, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; i < c->n_prompts; i++) {
        const serve_prompt *p = &c->prompts[i];
        rq[i] = (cis2_score_request){.continuation = p->text, .continuation_len = p->text ? p->len : 0,
                                     .continuation_ids = p->text ? NULL : p->ids,
                                     .n_continuation_ids = p->text ? 0 : p->n_ids, .top_logprobs = top};
    }
    cis2_error err = {0};
    serve_guard g = serve_guard_begin(sc, fd); /* as /v1/verify's */
    cis2_score_opts so = {.should_stop = serve_guard_should_stop, .should_stop_ctx = &g};
    int rc = c->score_receipt || sc->rlog ? score_with_receipts(sc, c, rq, &so, &err)
                                          : cis2_score_ex(sc->e, rq, c->n_prompts, &so, &c->scores, &err);
    free(rq);
    return rc ? score_fail(sc, c, &g, rc, &err, e) : 0;
}

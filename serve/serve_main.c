/*
 * serve_main.c - `cis2 serve` (docs/serving.md): options, start-up, signals and
 * shutdown of the OpenAI-compatible server (serve.h lists its modules).
 *
 * Start-up (docs/serving.md "Starting it"): checks what needs no model first (the key
 * file, that the library runs sampling, stop rules and logprobs
 * (cis2_features()), the access log, the chat template's file), then binds
 * and listens, so a busy port or a bad --access-log fails at once with one
 * line; prints `cis2 serve: loading DIR (http://HOST:PORT is bound; ...)`
 * on stderr, opens the engine (once: the server keeps no other state
 * across requests, so replicas behind any load balancer serve one model;
 * connections made meanwhile wait in the kernel's backlog and are answered
 * once it is loaded), starts the engine thread, then serves and prints
 * `cis2 serve: listening on http://HOST:PORT (model NAME, ...)` on stdout
 * (with --port 0 the kernel's choice), the line scripts wait for.  A
 * SIGTERM/SIGINT that came while loading stops it there (exit 0).  SIGTERM or SIGINT (taken with sigwait by
 * this thread; every other thread blocks them): stop accepting, let
 * in-flight requests finish for up to --drain-timeout seconds, cancel what
 * is left (their clients get 503 or a final error event), stop, exit 0.
 *
 * `--render-chat` renders chat requests read from stdin (one JSON object
 * per line, a chat body: {"messages": [...], "tools": [...],
 * "chat_template_kwargs": {...}, ...}) with the template the server would
 * use and prints one JSON line each, {"text": "..."} or {"error": {...}}:
 * exactly the text the server tokenizes (tests/server/t_serve_chat.sh
 * compares it with python3-jinja2).
 */
#include "../cli/cli.h"
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct serve_opts {
    cli_engine eng;
    const char *host, *api_key_file, *chat_template, *model_name, *access_log, *speculate, *receipt_log;
    size_t port, max_batch, max_queue, prefill_chunk, max_tokens, max_body, max_connections, timeout, drain;
    size_t request_timeout, verify_timeout, verify_max_tokens;
    size_t kv_budget_mib;
    int render_chat;
} serve_opts;

static int parse_serve(int argc, char **argv, serve_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_batch = 16;
    o->max_queue = 64;
    o->prefill_chunk = 256;
    o->max_tokens = 4096;
    o->max_body = (size_t)1 << 20;
    o->max_connections = 256;
    o->timeout = 60;
    o->drain = 10;
    o->request_timeout = 30;
    o->verify_timeout = 300;
    o->verify_max_tokens = 131072;
    cli_opt opts[] = {
        CLI_ENGINE_OPTS(o->eng),
        {"--host", OPT_STR, &o->host, 0, 0},
        {"--port", OPT_SIZE, &o->port, 65535, 0},
        {"--max-batch", OPT_SIZE, &o->max_batch, 1024, 0},
        {"--max-queue", OPT_SIZE, &o->max_queue, 65536, 0},
        {"--prefill-chunk", OPT_SIZE, &o->prefill_chunk, 1u << 20, 0},
        {"--kv-budget", OPT_SIZE, &o->kv_budget_mib, (size_t)1 << 24, 0},
        {"--max-tokens", OPT_SIZE, &o->max_tokens, 1u << 24, 0},
        {"--max-body", OPT_SIZE, &o->max_body, (size_t)1 << 30, 0},
        {"--max-connections", OPT_SIZE, &o->max_connections, 65536, 0},
        {"--timeout", OPT_SIZE, &o->timeout, 86400, 0},
        {"--drain-timeout", OPT_SIZE, &o->drain, 86400, 0},
        {"--request-timeout", OPT_SIZE, &o->request_timeout, 86400, 0},
        {"--verify-timeout", OPT_SIZE, &o->verify_timeout, 86400, 0},
        {"--verify-max-tokens", OPT_SIZE, &o->verify_max_tokens, (size_t)1 << 30, 0},
        {"--api-key-file", OPT_STR, &o->api_key_file, 0, 0},
        {"--chat-template", OPT_STR, &o->chat_template, 0, 0},
        {"--model-name", OPT_STR, &o->model_name, 0, 0},
        {"--access-log", OPT_STR, &o->access_log, 0, 0},
        {"--receipt-log", OPT_STR, &o->receipt_log, 0, 0},
        {"--speculate", OPT_STR, &o->speculate, 0, 0},
        {"--render-chat", OPT_FLAG, &o->render_chat, 0, 0},
        {0}};
    int rc = cli_parse("serve", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc;
    if (o->max_batch == 0) return cli_usage_error("serve", "--max-batch must be at least 1");
    if (o->max_tokens == 0) return cli_usage_error("serve", "--max-tokens must be at least 1");
    if (o->max_connections < 2) return cli_usage_error("serve", "--max-connections must be at least 2");
    if (o->prefill_chunk == 0) return cli_usage_error("serve", "--prefill-chunk must be at least 1");
    if (o->request_timeout == 0) return cli_usage_error("serve", "--request-timeout must be at least 1");
    if (o->verify_timeout == 0) return cli_usage_error("serve", "--verify-timeout must be at least 1");
    if (!*o->host) return cli_usage_error("serve", "--host is empty");
    if (o->speculate && (rc = cli_speculate_check("serve", o->speculate))) return rc;
    if (o->model_name && !*o->model_name) return cli_usage_error("serve", "--model-name is empty");
    if (o->access_log && !*o->access_log) return cli_usage_error("serve", "--access-log is empty (a FILE, - or off)");
    if (o->receipt_log && !*o->receipt_log) return cli_usage_error("serve", "--receipt-log is empty (a directory)");
    return CIS2_OK;
}

/* ------------------------------------------------------------ templates */

/* Reads DIR/tokenizer_config.json once (*tcfg, NULL when absent) and
 * the chat template into sc (chat NULL with chat_error when there is
 * none).  Fails for unreadable or malformed files and for a template that
 * cannot render (serve_chat_open). */
static int load_chat(serve_ctx *sc, const char *dir, const char *file, json_t **tcfg, cis2_error *err)
{
    int rc = serve_tokcfg_load(dir, tcfg, err);
    if (!rc) rc = serve_chat_open(dir, file, *tcfg, &sc->chat, err);
    if (!rc && !sc->chat)
        snprintf(sc->chat_error, sizeof sc->chat_error,
                 "this model has no chat template (%.200s has no chat_template.jinja nor a chat_template in "
                 "tokenizer_config.json): start the server with --chat-template FILE, or use /v1/completions",
                 dir);
    return rc;
}

/* --render-chat: each stdin line a chat body, each stdout line what the
 * server would tokenize for it, {"text": ...}, or its error. */
static int render_chat_lines(const serve_opts *o)
{
    serve_ctx sc;
    memset(&sc, 0, sizeof sc);
    cis2_error err = {0};
    const char *dir = o->eng.model_dir ? o->eng.model_dir : "models/SmolLM2-135M";
    json_t *tcfg = NULL;
    int lrc = load_chat(&sc, dir, o->chat_template, &tcfg, &err);
    json_decref(tcfg);
    if (lrc) return cli_report(&err);
    if (!sc.chat) {
        fprintf(stderr, "cis2 serve: %s\n", sc.chat_error);
        return CIS2_E_USAGE;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_error_t je;
        json_t *req = json_loadb(line, (size_t)n, 0, &je), *out = NULL;
        serve_err e = {0};
        char *text = NULL;
        size_t len = 0;
        if (!json_is_object(req)) serve_fail(&e, 400, "invalid_json", NULL, "line is not a JSON object");
        else serve_chat_render(sc.chat, req, &text, &len, &e);
        if (e.status) {
            out = serve_err_json(&e);
            json_object_set_new(json_object_get(out, "error"), "status", json_integer(e.status));
        } else {
            out = json_object();
            json_object_set_new(out, "text", json_stringn(text, len));
        }
        char *s = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s ? s : "null");
        free(s);
        cis2_free(text);
        json_decref(out);
        json_decref(req);
    }
    free(line);
    serve_chat_free(sc.chat);
    return cli_finish_stdout(CIS2_OK);
}

/* ------------------------------------------------------------- start-up */

/* --api-key-file: the key is the file's first line (docs/serving.md),
 * without its LF or CR LF and without surrounding spaces and tabs, which
 * the Authorization header's value cannot carry either (serve_http.c
 * `authorized` trims them).  An empty first line, or one holding a NUL,
 * could match no header: a malformed file (4), not a server nobody can use. */
static int read_api_key(const char *path, serve_config *cfg, cis2_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = cis2_read_file(path, 4096, "--api-key-file", &buf, &len, err);
    if (rc) return rc;
    char *nl = memchr(buf, '\n', len);
    size_t end = nl ? (size_t)(nl - buf) : len, start = 0;
    while (end && (buf[end - 1] == '\r' || buf[end - 1] == ' ' || buf[end - 1] == '\t')) end--;
    while (start < end && (buf[start] == ' ' || buf[start] == '\t')) start++;
    if (start == end)
        rc = cis2_fail(err, CIS2_E_FORMAT, "--api-key-file %s: the first line (the key) is empty", path);
    else if (memchr(buf + start, 0, end - start))
        rc = cis2_fail(err, CIS2_E_FORMAT, "--api-key-file %s: the key holds a NUL byte", path);
    else {
        cis2_sha256(buf + start, end - start, cfg->key_sha256);
        cfg->have_key = 1;
    }
    memset(buf, 0, len);
    cis2_free(buf);
    return rc;
}

static void default_name(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    snprintf(out, cap, "%.*s", (int)(n - s), dir + s);
    if (!out[0]) snprintf(out, cap, "cis2");
}

/* The id of a text that is one token, or -1. */
static long long single_id(const serve_ctx *sc, const char *text, size_t len)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    long long id = -1;
    if (len && cis2_engine_tokenize(sc->e, text, len, &ids, &n, NULL) == CIS2_OK && n == 1) id = ids[0];
    cis2_free(ids);
    return id;
}

/* Chat's stop ids (docs/serving.md "Chat templates"): <|im_end|> when the
 * template writes it and it is one token (ChatML's end of turn), then
 * tokenizer_config.json's eos_token when it is one token. */
static void setup_chat_stop(serve_ctx *sc, const json_t *tcfg)
{
    if (!sc->chat) return;
    size_t tl = 0;
    const char *tpl = serve_chat_text(sc->chat, &tl);
    long long im = strstr(tpl, "<|im_end|>") ? single_id(sc, "<|im_end|>", 10) : -1;
    if (im >= 0) sc->chat_stop[sc->n_chat_stop++] = (uint32_t)im;
    json_t *eos = tcfg ? json_object_get(tcfg, "eos_token") : NULL;
    if (json_is_object(eos)) eos = json_object_get(eos, "content");
    long long id = json_is_string(eos) ? single_id(sc, json_string_value(eos), json_string_length(eos)) : -1;
    if (id >= 0 && id != im) sc->chat_stop[sc->n_chat_stop++] = (uint32_t)id;
    if (!sc->n_chat_stop)
        fprintf(stderr, "cis2 serve: note: the chat template has no end-of-turn token this server knows (no "
                        "<|im_end|>, no eos_token in tokenizer_config.json): chat answers run to max_tokens unless "
                        "a request's stop rules end them\n");
}

/* Waits for SIGTERM/SIGINT (blocked in every thread): the signal, or 0
 * when none came within seconds.  Without a limit (seconds < 0) it waits
 * through EINTR: SIGSTOP then SIGCONT (Ctrl-Z and fg, a paused container,
 * a debugger) interrupts sigwaitinfo on Linux, and is no shutdown. */
static int wait_signal(const sigset_t *set, double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    int s;
    do s = seconds < 0 ? sigwaitinfo(set, NULL) : sigtimedwait(set, NULL, &ts);
    while (s < 0 && errno == EINTR && seconds < 0);
    return s > 0 ? s : 0;
}

/* Requests still running: engine jobs and verifications (which are not jobs). */
static size_t in_flight(serve_ctx *sc)
{
    size_t jobs = 0;
    serve_engine_load(sc->eng, NULL, &jobs);
    pthread_mutex_lock(&sc->vmu);
    size_t v = sc->verifying;
    pthread_mutex_unlock(&sc->vmu);
    return jobs + v;
}

/* Stop accepting, let in-flight requests finish for up to drain_s (a
 * second signal cuts it short), then cancel generation and verification
 * alike and give them 5 s to end at their next step. */
static void drain(serve_ctx *sc, serve_http *http, const sigset_t *set, unsigned drain_s)
{
    serve_http_quiesce(http);
    serve_engine_refuse(sc->eng);
    double end = serve_now() + drain_s;
    size_t left = 0;
    for (;;) {
        left = in_flight(sc);
        if (left == 0 || serve_now() >= end) break;
        if (wait_signal(set, 0.05)) {
            fprintf(stderr, "cis2 serve: second signal: cancelling in-flight requests now\n");
            break;
        }
    }
    if (left) {
        fprintf(stderr, "cis2 serve: cancelling %zu in-flight request(s)\n", left);
        atomic_store(&sc->stopping, 1); /* verifications stop at their next pass */
        serve_engine_cancel_all(sc->eng);
        end = serve_now() + 5;
        while (serve_now() < end && in_flight(sc)) wait_signal(set, 0.02);
    }
}

int cmd_serve(int argc, char **argv)
{
    serve_opts o;
    int rc = parse_serve(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.render_chat) return render_chat_lines(&o);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts: they all inherit it */
    signal(SIGPIPE, SIG_IGN);

    cis2_error err = {0};
    serve_ctx sc;
    memset(&sc, 0, sizeof sc);
    serve_http *http = NULL;
    int fd = -1;
    char name[256];
    json_t *tcfg = NULL;       /* DIR/tokenizer_config.json, until /tokenizer_info is built */
    if (!o.eng.model_dir) o.eng.model_dir = "models/SmolLM2-135M"; /* cli_engine_open's default */
    sc.cfg = (serve_config){.host = o.host, .port = (unsigned)o.port, .max_batch = o.max_batch,
                            .max_queue = o.max_queue, .prefill_chunk = o.prefill_chunk,
                            .kv_budget = o.kv_budget_mib << 20, .max_tokens = o.max_tokens,
                            .max_body = o.max_body, .max_connections = o.max_connections,
                            .timeout_s = (unsigned)o.timeout, .drain_s = (unsigned)o.drain,
                            .request_timeout_s = (unsigned)o.request_timeout,
                            .verify_timeout_s = (unsigned)o.verify_timeout,
                            .verify_max_tokens = o.verify_max_tokens};
    sc.created = (long long)time(NULL);
    sc.verify_max = 2;
    pthread_mutex_init(&sc.vmu, NULL);
    /* what needs no model first: each fails at once, in one line */
    if (o.api_key_file && (rc = read_api_key(o.api_key_file, &sc.cfg, &err))) goto out;
    /* the library this binary links runs sampling, stop rules and logprobs
     * (docs/sampling.md); the request paths rely on it */
    unsigned need = CIS2_FEATURE_SAMPLING | CIS2_FEATURE_STOP_RULES | CIS2_FEATURE_LOGPROBS;
    if ((cis2_features() & need) != need) {
        rc = cis2_fail(&err, CIS2_E_UNSUPPORTED, "serve: the library lacks sampling, stop rules or logprobs "
                                                 "(cis2_features() = 0x%x, needs 0x%x)", cis2_features(), need);
        goto out;
    }
    struct stat log_st;
    if (o.access_log && strcmp(o.access_log, "-") && strcmp(o.access_log, "off") && stat(o.access_log, &log_st) == 0) {
        /* an append log, never one of the files it serves from (docs/inputs.md "Outputs"); one that does not
         * exist yet is none of them, and serve_log_open names why it cannot be made */
        char in[3][4200], tc[4200], ct[4200];
        cli_engine_inputs(&o.eng, in);
        snprintf(tc, sizeof tc, "%s/tokenizer_config.json", o.eng.model_dir);
        snprintf(ct, sizeof ct, "%s/chat_template.jinja", o.eng.model_dir);
        const char *inputs[7] = {in[0], in[1], in[2], tc, ct, o.api_key_file, o.chat_template};
        if ((rc = cis2_check_output_path(o.access_log, inputs, 7, NULL, 0, &err)) ||
            (rc = cli_check_not_weights(&o.eng, o.access_log, &err)))
            goto out;
    }
    if ((rc = serve_log_open(o.access_log, &sc.log, &err))) goto out;
    if (o.receipt_log) { /* receipts go beside their manifest, never over a file the server reads */
        char in[3][4200], tc[4200], ct[4200], man[4300];
        cli_engine_inputs(&o.eng, in);
        snprintf(tc, sizeof tc, "%s/tokenizer_config.json", o.eng.model_dir);
        snprintf(ct, sizeof ct, "%s/chat_template.jinja", o.eng.model_dir);
        snprintf(man, sizeof man, "%s/manifest.txt", o.receipt_log);
        const char *inputs[7] = {in[0], in[1], in[2], tc, ct, o.api_key_file, o.chat_template};
        const char *outs[1] = {o.access_log};
        int log_file = o.access_log && strcmp(o.access_log, "-") && strcmp(o.access_log, "off");
        if ((rc = serve_rlog_open(o.receipt_log, &sc.rlog, &err)) ||
            (rc = cis2_check_output_path(man, inputs, 7, outs, log_file ? 1 : 0, &err)) ||
            (rc = cli_check_not_weights(&o.eng, man, &err)))
            goto out;
    }
    if ((rc = load_chat(&sc, o.eng.model_dir, o.chat_template, &tcfg, &err))) goto out;
    unsigned port = 0;
    if ((rc = serve_http_bind(&sc.cfg, &fd, &port, &err))) goto out;
    int v6 = strchr(o.host, ':') != NULL;
    fprintf(stderr, "cis2 serve: loading %s (http://%s%s%s:%u is bound; requests wait until the model is loaded)\n",
            o.eng.model_dir, v6 ? "[" : "", o.host, v6 ? "]" : "", port);
    double t_load = serve_now();
    if ((rc = cli_engine_open(&o.eng, &sc.e, &err))) goto out;
    if (o.speculate && (rc = cis2_engine_set_speculate(sc.e, o.speculate, &err))) goto out; /* docs/speculate.md */
    sc.mi = cis2_engine_info(sc.e);
    if (!sc.mi->has_tokenizer) {
        uint32_t *ids = NULL;
        size_t n = 0;
        cis2_engine_tokenize(sc.e, "a", 1, &ids, &n, &err); /* the loader's reason */
        cis2_free(ids);
        rc = err.code ? err.code : CIS2_E_UNSUPPORTED;
        goto out;
    }
    default_name(o.eng.model_dir, name, sizeof name);
    sc.cfg.model_name = o.model_name ? o.model_name : name;
    setup_chat_stop(&sc, tcfg);
    if ((rc = serve_tok_info_build(&sc, tcfg, &err))) goto out;
    json_decref(tcfg);
    tcfg = NULL;
    if (!(sc.met = serve_metrics_new())) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto out; }
    serve_engine_opts eo = {.max_batch = o.max_batch, .prefill_chunk = o.prefill_chunk, .max_queue = o.max_queue,
                            .kv_budget = sc.cfg.kv_budget};
    if ((rc = serve_engine_start(&sc.eng, sc.e, &eo, sc.met, &err))) goto out;
    if (wait_signal(&set, 0) > 0) { /* a signal while loading: nothing was served, nothing to drain */
        fprintf(stderr, "cis2 serve: a signal came while loading: not serving\n");
        rc = CIS2_OK;
        goto out;
    }
    rc = serve_http_start(&http, &sc, fd, &err);
    fd = -1; /* taken over */
    if (rc) goto out;
    printf("cis2 serve: listening on http://%s%s%s:%u (model %s, chat template %s, max batch %zu; loaded in %.1f s)\n",
           v6 ? "[" : "", o.host, v6 ? "]" : "", port, sc.cfg.model_name,
           sc.chat ? serve_chat_kind(sc.chat) : "none", o.max_batch, serve_now() - t_load);
    fflush(stdout);
    if (!sc.chat) fprintf(stderr, "cis2 serve: note: chat completions are off: %s\n", sc.chat_error);
    int s = wait_signal(&set, -1);
    fprintf(stderr, "cis2 serve: %s: draining (up to %zu s)\n", s == SIGINT ? "SIGINT" : "SIGTERM", o.drain);
    drain(&sc, http, &set, (unsigned)o.drain);
    rc = CIS2_OK;
out:
    if (fd >= 0) close(fd);
    serve_http_stop(http);
    serve_engine_stop(sc.eng);
    serve_chat_free(sc.chat);
    serve_metrics_free(sc.met);
    serve_log_close(sc.log);
    serve_rlog_close(sc.rlog);
    json_decref(tcfg);
    free(sc.tok_info);
    cis2_engine_close(sc.e);
    pthread_mutex_destroy(&sc.vmu);
    if (rc) return cli_report(&err);
    fprintf(stderr, "cis2 serve: stopped\n");
    return CIS2_OK;
}

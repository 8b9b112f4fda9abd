/*
 * serve.h - `cis2 serve`, the OpenAI-compatible HTTP server (docs/serving.md): a
 * client of the library like the rest of the `cis2` program (it includes
 * no cis2 header but cis2.h, cis2_toolkit.h and this one, and links only
 * the public libcis2.a), declared here for its modules, grouped by module
 * below in the order of this map (serve_main.c's serve_ctx, which every
 * request path reads, before the request paths):
 *
 *   serve_buf.c      the growing text buffer the modules render into
 *   serve_err.c      OpenAI-style errors: serve_fail, the HTTP status of a
 *                    library code, the error object
 *   serve_metrics.c  Prometheus counters and histograms
 *   serve_log.c      the access log: one line per finished request, written
 *                    whole (stderr, a file, or off)
 *   serve_rlog.c     the receipt log (--receipt-log DIR): every receipt
 *                    handed out, as a file written whole, and a manifest
 *   serve_logprobs.c logprobs in OpenAI's completions and chat schemas, with
 *                    their exact binary32 bits
 *   serve_engine.c   the one engine thread that owns the cis2_session
 *                    (continuous batching) and the bounded job queue the
 *                    HTTP threads submit to
 *   serve_chat.c     chat templates: finding the checkpoint's, and rendering
 *                    a request's messages with it (the library's renderer)
 *   serve_body.c     a body's text beneath jansson: exact decimals
 *                    (docs/sampling.md §S2.3), numbers jansson refuses, NULs
 *   serve_request.c  the OpenAI schema's requests: parameters -> a
 *                    serve_call and its serve_job (serve_call_parse)
 *   serve_response.c finished jobs -> whole JSON responses, and the pieces
 *                    a stream shares (envelope, `cis2` object, usage)
 *   serve_stream.c   server-sent events as tokens arrive
 *   serve_tok.c      the tokenizer endpoints at the root, in vLLM's shapes:
 *                    /tokenizer_info, /tokenize, /detokenize
 *   serve_verify.c   /v1/verify and echo's prompt scores (and their score
 *                    receipts), on the request's thread, and the guard
 *                    that stops them
 *   serve_http.c     GNU libmicrohttpd: routing, bodies, auth, errors,
 *                    JSON and server-sent-event responses
 *   serve_main.c     cmd_serve: options, start-up, signals, shutdown
 *
 * Which modules' functions each one calls (from the objects' symbols; a
 * module calls only modules above it, in the map and here: no circle
 * (docs/architecture.md "Rules of the house"); serve_buf.c and
 * serve_err.c are leaves, so a module that only has to say "400" depends
 * on nothing else; serve_main.c's cmd_serve is called by cli/main.c):
 *
 *   serve_buf       -> (none)
 *   serve_err       -> (none)
 *   serve_metrics   -> serve_buf
 *   serve_log       -> serve_buf
 *   serve_rlog      -> (none)
 *   serve_logprobs  -> (none)
 *   serve_engine    -> serve_err, serve_metrics
 *   serve_chat      -> serve_err
 *   serve_body      -> serve_err
 *   serve_verify    -> serve_err, serve_engine (serve_now)
 *   serve_request   -> serve_err, serve_body, serve_chat, serve_engine,
 *                      serve_metrics, serve_verify
 *   serve_response  -> serve_err, serve_logprobs, serve_buf, serve_rlog,
 *                      serve_request (serve_call_score)
 *   serve_stream    -> serve_err, serve_response, serve_logprobs, serve_buf
 *   serve_tok       -> serve_err, serve_body, serve_chat, serve_request
 *   serve_http      -> serve_err, serve_request, serve_response,
 *                      serve_stream, serve_engine, serve_chat,
 *                      serve_metrics, serve_log, serve_buf, serve_verify,
 *                      serve_tok
 *   serve_main      -> serve_err, serve_http, serve_engine, serve_chat,
 *                      serve_metrics, serve_log, serve_rlog, serve_tok
 *
 * The rules are the library's, each in one home: §S2.2's parameter ranges
 * (cis2_sampling_validate), §S7.1's "extension run or the spec's run"
 * (decided by the library from the request; cis2_result_is_extension),
 * UTF-8 decoding (cis2_utf8_unit, cis2_utf8_chars), receipts; the server
 * converts, refuses in OpenAI's shape and renders.
 *
 * Threads: HTTP connection threads parse, validate and tokenize (the
 * engine is read-only after open, so they may), then hand a serve_job to
 * the engine thread through serve_engine_submit and wait on the job's
 * condition variable; only the engine thread calls cis2_session_*.  Every
 * field of a job that both sides touch is guarded by the engine's mutex.
 */
#ifndef CIS2_SERVE_H
#define CIS2_SERVE_H

#include "cis2_toolkit.h" /* and cis2.h */

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* -------------------------------------------------- buffers (serve_buf.c) */

/* A growing byte buffer for rendering text (serve_buf.c): p[0..n), kept
 * NUL-terminated once anything is in it.  A failed allocation sets oom,
 * after which every write is ignored, so a renderer checks once at the
 * end.  Zero-initialized is empty; p is malloc'd (free it, or hand it on). */
typedef struct serve_buf {
    char *p;
    size_t n, cap;
    int oom;
} serve_buf;
/* Room for extra more bytes and the NUL; 0, or -1 (oom) if there is none. */
int serve_buf_reserve(serve_buf *b, size_t extra);
void serve_buf_put(serve_buf *b, const void *s, size_t n);
void serve_buf_str(serve_buf *b, const char *s);
void serve_buf_printf(serve_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Drops bytes [0, k) (k <= n), keeping the rest at the front. */
void serve_buf_cut(serve_buf *b, size_t k);
void serve_buf_free(serve_buf *b);

/* --------------------------------------------------- errors (serve_err.c) */

/* An OpenAI-style error: {"error": {"message", "type", "param", "code"}}
 * sent with HTTP `status`. */
typedef struct serve_err {
    int status;
    const char *type;          /* "invalid_request_error", "server_error", ... */
    const char *code;          /* NULL: JSON null */
    char param[64];            /* "" : JSON null */
    char msg[600];
} serve_err;

/* Fills e (first error wins) and returns status. */
int serve_fail(serve_err *e, int status, const char *code, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* The HTTP status and OpenAI error type for a library status code. */
int serve_status_for(int cis2_code);
json_t *serve_err_json(const serve_err *e);

/* ---------------------------------------------- metrics (serve_metrics.c) */

typedef struct serve_metrics serve_metrics;
serve_metrics *serve_metrics_new(void);
void serve_metrics_free(serve_metrics *m);
void serve_metrics_request(serve_metrics *m, const char *endpoint, int status);
void serve_metrics_first_token(serve_metrics *m, double seconds);
void serve_metrics_token_gap(serve_metrics *m, double seconds);
void serve_metrics_step(serve_metrics *m, size_t tokens, size_t running, size_t queued);
void serve_metrics_prompt_tokens(serve_metrics *m, size_t n);
void serve_metrics_request_done(serve_metrics *m, double seconds);
/* The in-flight gauge, set from the engine's count when /metrics is read. */
void serve_metrics_inflight(serve_metrics *m, size_t n);
/* The session's own counts (cis2_session_stats_get, on the engine thread
 * after every step) and its KV budget in bytes. */
void serve_metrics_session(serve_metrics *m, const cis2_session_stats *st, size_t kv_budget);
/* Prometheus text format 0.0.4 (malloc'ed). */
char *serve_metrics_render(serve_metrics *m, size_t *len);

/* ------------------------------------------------ access log (serve_log.c) */

typedef struct serve_log serve_log;
/* --access-log: "-" (or NULL) stderr, "off" none (*out NULL), else FILE
 * opened for appending (CIS2_E_IO naming it when it cannot be). */
int serve_log_open(const char *spec, serve_log **out, cis2_error *err);
void serve_log_close(serve_log *l);
/* One finished request (serve_log.c says what each field means). */
typedef struct serve_log_entry {
    double wall;               /* when it arrived, seconds since the epoch */
    const char *client;        /* "ADDR:PORT" */
    const char *method, *path;
    int status;                /* 0: none sent */
    unsigned long long bytes;  /* body bytes sent */
    double ms;                 /* arrival to end */
    const char *id;            /* the completion's id, or NULL */
    const char *end;           /* "ok", "client_abort", ... */
} serve_log_entry;
/* Writes the entry's line whole (one write); nothing when l is NULL. */
void serve_log_request(serve_log *l, const serve_log_entry *en);

/* ------------------------------------------ receipt log (serve_rlog.c) */

typedef struct serve_rlog serve_rlog;
/* --receipt-log DIR: makes DIR when absent and opens DIR/manifest.txt for
 * appending (a torn last line of an earlier run cut back); CIS2_E_IO
 * naming what fails. */
int serve_rlog_open(const char *dir, serve_rlog **out, cis2_error *err);
void serve_rlog_close(serve_rlog *l);
/* Writes text as DIR/name, whole or not at all, then appends name's line
 * to the manifest (whole or not at all); CIS2_OK when l is NULL. */
int serve_rlog_write(serve_rlog *l, const char *name, const char *text, size_t len, cis2_error *err);

/* -------------------------------------------- logprobs (serve_logprobs.c) */

/* The logprobs of n consecutive tokens of one choice (ids[i], lp[i], and
 * n_top alternatives each, UINT32_MAX marking none). */
typedef struct serve_lp_span {
    const uint32_t *ids;
    const float *lp;
    const uint32_t *top_ids;
    const float *top_lp;
    size_t n_top;
    size_t n;
    size_t base;               /* code points of the choice's text before the span */
    size_t clip;               /* text_offset is at most this (SIZE_MAX: no clip) */
} serve_lp_span;
/* The OpenAI `logprobs` object of a span: chat's {content, refusal} or
 * completions' {tokens, token_logprobs, top_logprobs, text_offset}. */
json_t *serve_lp_json(const cis2_engine *e, int chat, const serve_lp_span *sp);
/* Adds `logprob_bits` (and `top_logprob_bits`) of a result to a cis2 object. */
void serve_lp_bits(json_t *cis2_obj, const cis2_result *r);
/* A scored prompt (echo, prompt_logprobs): vLLM's `prompt_logprobs` list
 * (null, then {"ID": {logprob, rank, decoded_token}} per token: the token
 * and its first n_top alternatives), and the bits of every figure into a
 * cis2 object (`prompt_logprob_bits`, `prompt_ranks`, `prompt_greedy`,
 * `prompt_top_logprob_bits`; null for the unscored first token). */
json_t *serve_lp_prompt_json(const cis2_engine *e, const cis2_score_result *s, size_t n_top);
void serve_lp_score_bits(json_t *cis2_obj, const cis2_score_result *s);

/* -------------------------------------------------- jobs (serve_engine.c) */

enum { JOB_NEW = 0, JOB_ADMITTED, JOB_FAILED, JOB_DONE };

/* One choice of a request: one sequence of the session. */
typedef struct serve_seq {
    cis2_request req;          /* prompt, max_tokens, rules; user = this seq */
    cis2_sampling samp;
    cis2_stop stop;
    size_t prompt_idx;         /* which prompt of the request */
    size_t choice;             /* OpenAI choices[].index */
    /* engine thread, under the engine mutex: */
    uint64_t id;               /* session id once admitted */
    uint32_t *toks;            /* generated ids so far (capacity max_tokens) */
    size_t n_toks;
    float *lp;                 /* with logprobs: each token's (capacity max_tokens) */
    uint32_t *top_ids;         /* and its top_n alternatives (UINT32_MAX: none) */
    float *top_lp;
    size_t top_n;              /* = req.top_logprobs */
    int finish;                /* enum cis2_finish once ended */
    cis2_result *res;          /* taken from the session when it ended */
    int taken;                 /* res taken (or its take failed) */
    double t_last;             /* monotonic time of the last token */
    struct serve_job *job;
} serve_seq;

typedef struct serve_job {
    serve_seq *seqs;
    size_t n;
    /* under the engine mutex: */
    int state;                 /* JOB_* */
    int admit_rc;              /* JOB_FAILED: a cis2 status */
    cis2_error admit_err;
    size_t n_done;             /* sequences whose result is taken */
    int cancel;                /* the HTTP side asks to end it */
    int shutdown_cancel;       /* cancelled because the server stops */
    int refs;                  /* HTTP side + engine side */
    int in_engine;             /* the engine thread lists it */
    pthread_cond_t cv;         /* signalled on every change */
    double t_submit;
    int first_token_seen;
    struct serve_job *next;    /* engine lists */
    void *owner;               /* what serve_request.c allocated for it (the serve_call) */
    void (*owner_free)(void *owner);
} serve_job;

/* A job of n sequences, each seq's toks (and logprobs when asked) sized by
 * its req.max_tokens (set them with serve_job_seqs_ready after filling the
 * requests). */
serve_job *serve_job_new(size_t n);
int serve_job_seqs_ready(serve_job *j);
/* Frees a job that never reached the engine (then its owner_free). */
void serve_job_free(serve_job *j);

/* ------------------------------------------------ engine (serve_engine.c) */

typedef struct serve_engine serve_engine;

typedef struct serve_engine_opts {
    size_t max_batch;          /* cis2_session_opts.max_batch */
    size_t prefill_chunk;      /* cis2_session_opts.prefill_chunk */
    size_t max_queue;          /* sequences waiting beyond max_batch */
    size_t kv_budget;          /* cis2_session_opts.kv_budget (bytes; 0: the library's 1 GiB) */
} serve_engine_opts;

int serve_engine_start(serve_engine **out, cis2_engine *e, const serve_engine_opts *o, serve_metrics *m,
                       cis2_error *err);
/* Hands a job to the engine thread (429 when the queue is full, 503 when
 * stopping).  On success the job holds two references. */
int serve_engine_submit(serve_engine *se, serve_job *j, serve_err *e);
/* HTTP side: waits until the job leaves JOB_NEW or until `ms` elapse;
 * returns its state.  The caller holds the lock (serve_engine_lock). */
void serve_engine_lock(serve_engine *se);
void serve_engine_unlock(serve_engine *se);
int serve_engine_wait(serve_engine *se, serve_job *j, int ms);
/* Asks the engine to end every sequence of the job (a client went away). */
void serve_engine_cancel(serve_engine *se, serve_job *j);
/* Drops the HTTP side's reference (the job is freed with the last one). */
void serve_engine_release(serve_engine *se, serve_job *j);
/* Ends every sequence now (shutdown past its drain bound). */
void serve_engine_cancel_all(serve_engine *se);
/* Sequences running or queued, and jobs not yet released. */
void serve_engine_load(serve_engine *se, size_t *seqs, size_t *jobs);
/* Refuses new jobs from now on (503). */
void serve_engine_refuse(serve_engine *se);
/* Stops the thread (cancelling what is left) and frees everything. */
void serve_engine_stop(serve_engine *se);
/* monotonic seconds */
double serve_now(void);

/* ------------------------------------------ chat templates (serve_chat.c) */

typedef struct serve_chat serve_chat;
/* DIR/tokenizer_config.json read once, as published (its memory bounded
 * before parsing, integers beyond 64 bits read as the numbers they are:
 * docs/inputs.md "JSON numbers"): *root NULL (CIS2_OK) when there is no
 * such file; a file that is there but unreadable, not a regular file or
 * not a JSON object fails (CIS2_E_IO, CIS2_E_FORMAT). */
int serve_tokcfg_load(const char *model_dir, json_t **root, cis2_error *err);
/* The checkpoint's chat template (docs/serving.md "Chat templates"): FILE
 * if given, else DIR/chat_template.jinja, else tcfg's chat_template (tcfg:
 * the parsed tokenizer_config.json, NULL for none; its special tokens are
 * the templates' bos_token, eos_token, ...), parsed and rendered once with
 * a one-message conversation.  *out NULL (CIS2_OK) when there is none; a
 * file that cannot be read, or a template that cannot render, fails with
 * one line naming it (CIS2_E_IO, CIS2_E_FORMAT). */
int serve_chat_open(const char *model_dir, const char *file, const json_t *tcfg, serve_chat **out, cis2_error *err);
void serve_chat_free(serve_chat *c);
/* Where it was found (a path), which source that is ("--chat-template",
 * "chat_template.jinja", "tokenizer_config.json"), the sha256 (hex) and
 * text of the default template. */
const char *serve_chat_origin(const serve_chat *c);
const char *serve_chat_kind(const serve_chat *c);
const char *serve_chat_sha256(const serve_chat *c);
const char *serve_chat_text(const serve_chat *c, size_t *len);
/* The prompt of a chat body (its messages, tools, tool_choice, documents,
 * chat_template_kwargs, add_generation_prompt; other keys are the
 * caller's): *out (cis2_free) the rendered text, exactly what is
 * tokenized; else a 400 in e (the template's raise_exception message, a
 * render error, a limit, a malformed field). */
int serve_chat_render(const serve_chat *c, const json_t *body, char **out, size_t *len, serve_err *e);

/* -------- the server (filled by serve_main.c, read by every request path) */

typedef struct serve_config {
    const char *host;
    unsigned port;
    size_t max_batch, max_queue, prefill_chunk;
    size_t kv_budget;          /* --kv-budget, bytes (0: the library's default) */
    size_t max_tokens;         /* the largest max_tokens a request may ask */
    size_t max_body;           /* request body bytes (413 beyond) */
    size_t max_connections;
    unsigned timeout_s;        /* connection idle timeout */
    unsigned request_timeout_s;/* a whole request (headers and body) must arrive in this */
    unsigned verify_timeout_s; /* a /v1/verify may compute this long */
    size_t verify_max_tokens;  /* positions a /v1/verify may claim in all (413 beyond) */
    unsigned drain_s;          /* SIGTERM: in-flight requests may finish this long */
    const char *model_name;    /* the `model` clients name */
    int have_key;
    uint8_t key_sha256[32];    /* --api-key-file, hashed */
} serve_config;

/* What the request handlers share (read-only while serving). */
typedef struct serve_ctx {
    serve_config cfg;
    cis2_engine *e;
    const cis2_model_info *mi;
    serve_engine *eng;
    serve_metrics *met;
    serve_log *log;            /* the access log (NULL: off) */
    serve_rlog *rlog;          /* the receipt log (NULL: off) */
    char *tok_info;            /* GET /tokenizer_info's body (serve_tok.c) */
    size_t tok_info_len;
    serve_chat *chat;          /* NULL: chat_error says why */
    char chat_error[600];
    uint32_t chat_stop[2];     /* chat's stop ids (serve_main.c: <|im_end|>, eos_token) */
    size_t n_chat_stop;
    long long created;         /* start time, for /v1/models */
    pthread_mutex_t vmu;       /* verify slots */
    size_t verifying, verify_max;
    _Atomic int stopping;      /* shutdown past its drain: verifications end now */
} serve_ctx;

/* ----------------------------------------------- body text (serve_body.c) */

/* The first number literal of a body that jansson would refuse (an
 * integer beyond int64, a real beyond a double), zeroed before parsing. */
typedef struct serve_big_num {
    size_t count;
    char key[64];              /* the top-level key of the first one */
    char text[48];             /* its first digits */
} serve_big_num;
/* Parses a body's text (the numbers in big zeroed in a copy first):
 * 0 with *body, or 400 invalid_json. */
int serve_body_load(const char *raw, size_t len, json_t **body, serve_big_num *big, serve_err *e);
/* 400 invalid_value for a number big noted, or for a NUL (\u0000) in a
 * string anywhere but in stop strings. */
int serve_body_check(json_t *body, const serve_big_num *big, serve_err *e);
/* Exact binary32 from a JSON number's text (docs/sampling.md §S2.3,
 * cis2_decimal_to_f32): finds top-level key `key` in the raw object text.
 * 1 found, 0 absent, -1 refused (not a number, overflow, or a nonzero
 * number below the smallest normal), the reason in err. */
int serve_raw_float(const char *raw, size_t len, const char *key, float *out, cis2_error *err);

/* -------------------------- a parsed request (built by serve_request.c) */

/* A parsed request: the job and what the response needs.  Built by
 * serve_request.c, read by serve_response.c and serve_stream.c; the
 * other modules hold it opaque (through the functions below). */
typedef struct serve_call serve_call;
enum { CALL_COMPLETION = 0, CALL_CHAT };

#define SERVE_MAX_STOP_STRINGS 16
#define SERVE_MAX_STOP_IDS 64      /* the library's limits (docs/sampling.md §S5.1) */

typedef struct serve_prompt {
    char *text;                /* UTF-8 bytes, or NULL for ids */
    size_t len;
    uint32_t *ids;
    size_t n_ids;
    size_t n_tokens;           /* the prompt's length in tokens */
} serve_prompt;

struct serve_call {
    int kind, stream, include_usage;
    char id[48];
    long long created;
    serve_prompt *prompts;
    size_t n_prompts, n_choices;
    serve_job *job;
    int submitted;
    /* rules shared by every sequence */
    cis2_sampling samp;        /* always passed: the library decides greedy or not (§S7.1) */
    uint32_t stop_ids[SERVE_MAX_STOP_IDS + 1];
    size_t n_stop_ids;
    char *stop_str[SERVE_MAX_STOP_STRINGS];
    size_t stop_len[SERVE_MAX_STOP_STRINGS];
    size_t n_stop_str, max_stop_len;
    int stop_eos, any_stop;
    char stop_desc[256];       /* the stop rule in words, "" for none */
    int logprobs;
    unsigned top_logprobs;
    size_t max_tokens;         /* 0 only with echo: then no job (job NULL) */
    /* echo and vLLM's prompt_logprobs (completions; docs/sampling.md §S11):
     * each prompt scored as a continuation without context, on the HTTP
     * thread before the job is submitted */
    int echo;
    int prompt_lp;             /* prompt_logprobs given */
    unsigned prompt_lp_top;    /* its alternatives per token */
    cis2_score_result *scores; /* n_prompts (NULL: nothing to score) */
    /* score receipts (`score_receipt`, or the server's --receipt-log):
     * the prompts scored by cis2_score_receipts_ex, each receipt's text */
    int score_receipt;         /* asked for in the response */
    char **score_text;         /* n_prompts receipts' text (cis2_free; NULL: none) */
    size_t *score_len;
    serve_metrics *met;        /* counts the prompt tokens once the engine admits the job */
    /* chat: what the answer's parsing needs (docs/serving.md "Chat
     * templates"); the rendered prompt is prompts[0].text */
    json_t *tools;             /* the request's tools (a reference), NULL: none */
    int tools_on;              /* tools given and tool_choice not "none" */
};

/* --------------------------------------------- requests (serve_request.c) */

/* The scores of prompt p of a call (NULL: none were computed). */
const cis2_score_result *serve_call_score(const serve_call *c, size_t p);
/* `model` of a body: the served model's name, or (required 0) absent or
 * null; 400 / 404 naming what to send otherwise. */
int serve_check_model(const serve_ctx *sc, json_t *body, int required, serve_err *e);
/* Parses and validates a body (json) for CALL_COMPLETION / CALL_CHAT;
 * raw is the body text (for exact decimal floats).  client_fd is the
 * connection's socket (-1: none), watched while echo scores the prompts
 * (a client that leaves ends the scoring: status 499, nothing to send). */
int serve_call_parse(const serve_ctx *sc, int kind, const char *raw, size_t raw_len, int client_fd,
                     serve_call **out, serve_err *e);
void serve_call_free(serve_call *c);
/* The job, before it is submitted. */
serve_job *serve_call_peek_job(serve_call *c);
/* After a successful submit: marks the job the call's owner, returns it. */
serve_job *serve_call_job(serve_call *c);
int serve_call_stream(const serve_call *c);

/* ------------------------------------------- responses (serve_response.c) */

/* The whole response of a finished job (status 200), or an error. */
json_t *serve_call_response(const serve_ctx *sc, serve_call *c, serve_err *e);
/* The pieces a stream shares: the object's envelope (id, object, created,
 * model, system_fingerprint); choice `choice`'s `cis2` object (NULL, with
 * e, when its receipt cannot be made or logged); usage; OpenAI's
 * finish_reason of a cis2_finish. */
json_t *serve_call_envelope(const serve_ctx *sc, const serve_call *c, const char *object);
json_t *serve_call_cis2(const serve_ctx *sc, const serve_call *c, size_t choice, const cis2_result *r, serve_err *e);
json_t *serve_call_usage(const serve_call *c, const serve_job *j);
const char *serve_finish_reason(int finish);
/* The error of a job that did not finish normally, in e (0: none). */
int serve_job_error(const serve_job *j, serve_err *e);

/* ----------------------------------------------- streams (serve_stream.c) */

/* Streaming: the text not yet sent of every choice, as SSE bytes. */
typedef struct serve_sse serve_sse;
serve_sse *serve_sse_new(const serve_ctx *sc, serve_call *c);
void serve_sse_free(serve_sse *s);
/* Under the engine lock: copies the tokens that arrived; returns 1 if
 * anything changed (new tokens or a sequence ended). */
int serve_sse_collect(serve_sse *s);
/* Outside the lock: appends the events for what was collected to out;
 * *done once `data: [DONE]` is written. */
int serve_sse_format(serve_sse *s, serve_buf *out, int *done);

/* ------------------------------------------ tokenizer (serve_tok.c) */

/* GET /tokenizer_info's body, built once into sc->tok_info (after the
 * engine is open and sc->chat set): tcfg the parsed tokenizer_config.json
 * (NULL: none). */
int serve_tok_info_build(serve_ctx *sc, const json_t *tcfg, cis2_error *err);
/* POST /tokenize and /detokenize: the response object, or NULL with e. */
json_t *serve_tokenize(const serve_ctx *sc, const char *body, size_t len, serve_err *e);
json_t *serve_detokenize(const serve_ctx *sc, const char *body, size_t len, serve_err *e);

/* ---------------------------------------------------- http (serve_http.c) */

typedef struct serve_http serve_http;
/* Binds and listens on cfg.host:cfg.port before the model loads
 * (docs/serving.md "Starting it"), so a busy port fails at once (CIS2_E_IO) and connections made
 * while the model loads wait in the kernel's backlog; *port is the port
 * bound (--port 0: the kernel's choice). */
int serve_http_bind(const serve_config *cfg, int *fd, unsigned *port, cis2_error *err);
/* Starts answering on the bound socket (taken over, even on failure). */
int serve_http_start(serve_http **out, serve_ctx *sc, int fd, cis2_error *err);
/* Stops accepting connections; requests on open ones get 503. */
void serve_http_quiesce(serve_http *h);
/* Requests (HTTP side) still in progress. */
size_t serve_http_active(serve_http *h);
/* Has the peer of socket fd closed its end (or has the socket failed)?
 * Never blocks; 0 for fd < 0. */
int serve_client_gone(int fd);
/* What ends a verification or a scoring early (the should_stop of
 * cis2_verify_opts / cis2_score_opts, asked between weight passes, ctx a
 * serve_guard): shutdown past its drain, the client gone, or
 * --verify-timeout spent; why says which once it said stop. */
typedef struct serve_guard {
    const serve_ctx *sc;
    int fd;                    /* the client's socket, -1 for none */
    double deadline;
    int why;                   /* SERVE_GUARD_* */
} serve_guard;
enum { SERVE_GUARD_NONE, SERVE_GUARD_STOPPING, SERVE_GUARD_GONE, SERVE_GUARD_TIMEOUT };
serve_guard serve_guard_begin(const serve_ctx *sc, int fd);
int serve_guard_should_stop(void *guard);
/* POST /v1/verify's body (a receipt's text, {"receipt": "..."} or
 * {"receipts": [...]}) verified: the response object, or NULL with e set
 * (status 499: the client left, nothing to send).  serve_verify.c. */
json_t *serve_verify(serve_ctx *sc, const char *body, size_t len, int fd, serve_err *e);
/* echo / prompt_logprobs: c's prompts scored into c->scores (docs/sampling.md
 * §S11), with score receipts (c->score_receipt, or the receipt log,
 * where serve_call_response writes them) also into c->score_text; 0, or
 * e's status.
 * serve_verify.c. */
int serve_score_prompts(const serve_ctx *sc, serve_call *c, int fd, serve_err *e);
void serve_http_stop(serve_http *h);

#endif

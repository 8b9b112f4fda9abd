/*
 * serve_api.c - the OpenAI schema of `cis2 serve` (issue 19 items 1, 5):
 * /v1/completions and /v1/chat/completions bodies are validated and turned
 * into a serve_job (one sequence per prompt and choice), and finished jobs
 * into responses: whole JSON objects, or server-sent events as tokens
 * arrive.  Called on HTTP threads (serve_http.c); the engine is used only
 * through its read-only calls (tokenize, detokenize, receipts).
 *
 * Parameters and cis2's choices (README "Serving"):
 *   - unknown parameters are refused (400), as OpenAI does; known ones with
 *     a value cis2 does not implement (echo, best_of > n, penalties, a
 *     logit_bias, suffix, tools) are refused naming them;
 *   - temperature absent or 0 is greedy (§11.2), so a default request is
 *     bit for bit `cis2 run`; temperature/top_p/min_p are read from the
 *     body's own decimal text, one correctly rounded conversion to binary32
 *     (docs/sampling.md §S2.3), checked against §S2.2 here (400 naming the
 *     parameter, never clamped), and with top_k, seed (default 0) and n
 *     (sequence k of a prompt is its choice k) go to cis2_sampling; a
 *     greedy request without stop rules passes no sampling at all (its
 *     receipt is the v1 receipt whatever they are, §S7.1);
 *   - stop (strings), stop_token_ids and stop_at_eos (cis2 extensions) go
 *     to cis2_stop; EOS is not special unless asked (§3.4, as `cis2 run`);
 *     chat adds <|im_end|>'s id to the stop ids (after the request's own),
 *     so a chat receipt is `cis2 run --stop-id ...` of the rendered prompt;
 *     finish_reason is "stop" for any stop rule, "length" otherwise, and
 *     cis2.finish says which rule;
 *   - logprobs (completions: 0..5 alternatives; chat: logprobs true and
 *     top_logprobs 0..20) go to cis2_request and are rendered by
 *     serve_logprobs.c, whole or per streamed chunk;
 *   - a stream sends a token's text once no stop string can still cut it:
 *     the bytes that are a proper prefix of some stop string wait, like an
 *     incomplete UTF-8 sequence; the finishing token waits for the result.
 *
 * Every choice carries a `cis2` object: the receipt text, its sha256, the
 * witness (CIS2_REF) and argmax digests, the prompt and generated ids, the
 * finish reason and the stop rule; in a stream it comes in the choice's
 * finishing chunk.
 */
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define CHAT_DEFAULT_MAX_TOKENS 256
#define MAX_STOP_STRINGS 16
#define MAX_STOP_STRING_LEN 256
#define MAX_STOP_IDS 64        /* the library's limits (docs/sampling.md §S5.1) */
#define MAX_CHOICES 16

/* ---------------------------------------------------------------- errors */

int serve_fail(serve_err *e, int status, const char *code, const char *param, const char *fmt, ...)
{
    if (!e || e->status) return e ? e->status : status;
    e->status = status;
    e->code = code;
    e->type = status == 401 ? "authentication_error"
              : status == 429 ? "rate_limit_error"
              : status == 501 ? "not_implemented_error"
              : status >= 500 ? "server_error"
              : status == 404 ? "not_found_error"
                              : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

int serve_status_for(int code)
{
    switch (code) {
    case CIS2_E_USAGE: case CIS2_E_FORMAT: case CIS2_E_MISMATCH: return 400;
    case CIS2_E_UNSUPPORTED: return 501;
    case CIS2_E_NOMEM: case CIS2_E_CANCELLED: return 503;
    default: return 500;
    }
}

json_t *serve_err_json(const serve_err *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "message", json_string(e->msg));
    json_object_set_new(o, "type", json_string(e->type ? e->type : "server_error"));
    json_object_set_new(o, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(o, "code", e->code ? json_string(e->code) : json_null());
    json_t *r = json_object();
    json_object_set_new(r, "error", o);
    return r;
}

/* ---------------------------------------------------- raw decimal floats */

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static size_t skip_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n && s[i] != '"'; i++)
        if (s[i] == '\\') i++;
    return i < n ? i + 1 : n;
}

static size_t skip_value(const char *s, size_t i, size_t n)
{
    if (i < n && s[i] == '"') return skip_string(s, i, n);
    if (i < n && (s[i] == '{' || s[i] == '[')) {
        int depth = 0;
        while (i < n) {
            if (s[i] == '"') { i = skip_string(s, i, n); continue; }
            if (s[i] == '{' || s[i] == '[') depth++;
            else if (s[i] == '}' || s[i] == ']') { if (--depth == 0) return i + 1; }
            i++;
        }
        return n;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' &&
           s[i] != '\r')
        i++;
    return i;
}

int serve_raw_float(const char *raw, size_t n, const char *key, float *out)
{
    size_t i = skip_ws(raw, 0, n);
    if (i >= n || raw[i] != '{') return 0;
    i++;
    for (;;) {
        i = skip_ws(raw, i, n);
        if (i >= n || raw[i] != '"') return 0;
        size_t ks = i;
        i = skip_string(raw, i, n);
        json_t *k = json_loadb(raw + ks, i - ks, JSON_DECODE_ANY, NULL);
        int match = json_is_string(k) && !strcmp(json_string_value(k), key) && json_string_length(k) == strlen(key);
        json_decref(k);
        i = skip_ws(raw, i, n);
        if (i >= n || raw[i] != ':') return 0;
        i = skip_ws(raw, i + 1, n);
        size_t vs = i;
        i = skip_value(raw, i, n);
        if (match) {
            char buf[128];
            size_t len = i - vs;
            if (len == 0 || len >= sizeof buf) return -1;
            memcpy(buf, raw + vs, len);
            buf[len] = 0;
            if (!strchr("-0123456789", buf[0])) return -1;
            char *end;
            errno = 0;
            float f = strtof(buf, &end); /* correctly rounded, round to nearest even */
            if (*end) return -1;
            int nonzero_digit = 0;
            for (const char *p = buf; *p && *p != 'e' && *p != 'E'; p++) nonzero_digit |= *p >= '1' && *p <= '9';
            if ((f == 0.0f && nonzero_digit) || (f != 0.0f && fabsf(f) < 1.17549435e-38f)) return -2; /* underflow */
            *out = f;
            return 1;
        }
        i = skip_ws(raw, i, n);
        if (i >= n || raw[i] != ',') return 0;
        i++;
    }
}

/* ------------------------------------------- numbers jansson refuses */

/* jansson refuses, while parsing, an integer beyond int64 ("seed":
 * 1e30 written out) and a real that overflows a double (1e999): the whole
 * body would be invalid_json with no param, though such a value is only
 * out of range (README: 400 invalid_value naming the parameter).  So
 * before parsing, body_numbers finds every number literal (outside
 * strings, starting after a delimiter) that jansson would refuse and, in
 * a copy, writes a 0 padded with spaces over it: a number token for a
 * number token, so the body stays exactly as valid or invalid as it was.
 * The first one's top-level key is kept; once the body parses (and its
 * keys are known), that key is refused as invalid_value. */
typedef struct big_num {
    size_t count;
    char key[64];              /* the top-level key of the first one */
    char text[48];             /* its first digits */
} big_num;

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The length of the JSON number at s[i..n), as jansson's lexer reads it
 * (0: not a complete number there). */
static size_t number_len(const char *s, size_t i, size_t n)
{
    size_t j = i + (i < n && s[i] == '-');
    if (j >= n || !is_digit(s[j])) return 0;
    if (s[j] == '0') j++;
    else while (j < n && is_digit(s[j])) j++;
    if (j < n && s[j] == '.') {
        if (++j >= n || !is_digit(s[j])) return 0;
        while (j < n && is_digit(s[j])) j++;
    }
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
        if (++j < n && (s[j] == '+' || s[j] == '-')) j++;
        if (j >= n || !is_digit(s[j])) return 0;
        while (j < n && is_digit(s[j])) j++;
    }
    return j - i;
}

/* Whether jansson refuses the number s[0..len): an integer outside int64
 * (strtoll's ERANGE), a real whose strtod overflows. */
static int number_overflows(const char *s, size_t len)
{
    int neg = s[0] == '-', real = memchr(s, '.', len) || memchr(s, 'e', len) || memchr(s, 'E', len);
    if (!real) {
        size_t digits = len - (size_t)neg;
        const char *lim = neg ? "9223372036854775808" : "9223372036854775807";
        return digits > 19 || (digits == 19 && memcmp(s + neg, lim, 19) > 0);
    }
    char small[64], *t = len < sizeof small ? small : malloc(len + 1);
    if (!t) return 0; /* jansson then says so itself */
    memcpy(t, s, len);
    t[len] = 0;
    errno = 0;
    double v = strtod(t, NULL);
    int over = errno == ERANGE && isinf(v);
    if (t != small) free(t);
    return over;
}

static void note_big(big_num *b, const char *raw, size_t key_at, size_t key_end, const char *num, size_t len)
{
    if (b->count++) return;
    json_t *k = key_end > key_at ? json_loadb(raw + key_at, key_end - key_at, JSON_DECODE_ANY, NULL) : NULL;
    snprintf(b->key, sizeof b->key, "%s", json_is_string(k) ? json_string_value(k) : "");
    json_decref(k);
    snprintf(b->text, sizeof b->text, "%.*s%s", len > 40 ? 40 : (int)len, num, len > 40 ? "..." : "");
}

/* Scans raw; returns a malloc'ed copy with every refused number zeroed
 * (NULL when there is none, or out of memory: then the body is parsed as
 * it is). */
static char *body_numbers(const char *raw, size_t n, big_num *b)
{
    char *copy = NULL;
    size_t depth = 0, key_at = 0, key_end = 0;
    int want_key = 0;
    for (size_t i = 0; i < n;) {
        char c = raw[i];
        if (c == '"') {
            size_t e = skip_string(raw, i, n);
            if (depth == 1 && want_key) { key_at = i; key_end = e; want_key = 0; }
            i = e;
            continue;
        }
        if (c == '{' || c == '[') { depth++; want_key = c == '{' && depth == 1; }
        else if (c == '}' || c == ']') depth -= depth > 0;
        else if (c == ',' && depth == 1) want_key = 1;
        size_t len = (c == '-' || is_digit(c)) && (i == 0 || strchr(" \t\r\n:,[", raw[i - 1])) ? number_len(raw, i, n) : 0;
        if (len && number_overflows(raw + i, len)) {
            note_big(b, raw, key_at, key_end, raw + i, len);
            if (!copy && !(copy = malloc(n + 1))) return NULL;
            if (b->count == 1) memcpy(copy, raw, n);
            copy[i] = '0';
            memset(copy + i + 1, ' ', len - 1);
        }
        i += len ? len : 1;
    }
    return copy;
}

/* A NUL (\u0000) is an ordinary byte in a stop string (docs/inputs.md);
 * everywhere else (prompts, messages, the model's name...) it is refused,
 * and strings are then safe to compare with strcmp. */
static int has_nul(json_t *v)
{
    if (json_is_string(v)) return memchr(json_string_value(v), 0, json_string_length(v)) != NULL;
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_object(v)) json_object_foreach(v, k, x) if (has_nul(x)) return 1;
    if (json_is_array(v)) json_array_foreach(v, i, x) if (has_nul(x)) return 1;
    return 0;
}

static int check_values(json_t *body, const big_num *b, serve_err *e)
{
    if (b->count)
        return serve_fail(e, 400, "invalid_value", b->key[0] ? b->key : NULL,
                          "%s: the number %s is out of range (beyond a 64-bit integer, or a double's range)",
                          b->key[0] ? b->key : "the body", b->text);
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        if (strcmp(k, "stop") && has_nul(v))
            return serve_fail(e, 400, "invalid_value", k, "%.60s: a string holds a NUL (\\u0000): only stop strings may",
                              k);
    }
    return 0;
}

/* ------------------------------------------------------------------ calls */

typedef struct cprompt {
    char *text;                /* UTF-8 bytes, or NULL for ids */
    size_t len;
    uint32_t *ids;
    size_t n_ids;
    size_t n_tokens;           /* the prompt's length in tokens */
} cprompt;

struct serve_call {
    int kind, stream, include_usage;
    char id[48];
    long long created;
    cprompt *prompts;
    size_t n_prompts, n_choices;
    serve_job *job;
    int submitted;
    /* rules shared by every sequence */
    int greedy_plain;          /* no sampling struct passed */
    cis2_sampling samp;
    uint32_t stop_ids[MAX_STOP_IDS + 1];
    size_t n_stop_ids;
    char *stop_str[MAX_STOP_STRINGS];
    size_t stop_len[MAX_STOP_STRINGS];
    size_t n_stop_str, max_stop_len;
    int stop_eos, any_stop;
    char stop_desc[256];       /* the stop rule in words, "" for none */
    int logprobs;
    unsigned top_logprobs;
    size_t max_tokens;
    serve_metrics *met;        /* counts the prompt tokens once the engine admits the job */
};

static void call_free_owner(void *p);

void serve_call_free(serve_call *c)
{
    if (!c) return;
    if (c->job && !c->submitted) { /* never reached the engine: free it here */
        serve_job *j = c->job;
        c->job = NULL;
        j->owner = NULL;
        j->owner_free = NULL;
        serve_job_free(j);
    }
    call_free_owner(c);
}

static void call_free_owner(void *p)
{
    serve_call *c = p;
    if (!c) return;
    for (size_t i = 0; i < c->n_prompts; i++) {
        free(c->prompts[i].text);
        free(c->prompts[i].ids);
    }
    free(c->prompts);
    for (size_t i = 0; i < c->n_stop_str; i++) free(c->stop_str[i]);
    free(c);
}

serve_job *serve_call_peek_job(serve_call *c) { return c->job; }

/* Called only after serve_engine_submit took the job: a request refused
 * with 429 or 503 never counts in cis2_prompt_tokens_total. */
serve_job *serve_call_job(serve_call *c)
{
    c->submitted = 1; /* from now on the job owns the call */
    size_t toks = 0;
    for (size_t i = 0; i < c->n_prompts; i++) toks += c->prompts[i].n_tokens;
    serve_metrics_prompt_tokens(c->met, toks);
    return c->job;
}
int serve_call_stream(const serve_call *c) { return c->stream; }

/* ------------------------------------------------------------ validation */

static const char *completion_keys[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "logprobs", "echo",
    "stop", "presence_penalty", "frequency_penalty", "best_of", "logit_bias", "user", "suffix", "seed",
    /* cis2 extensions */
    "top_k", "min_p", "stop_token_ids", "stop_at_eos", NULL};
static const char *chat_keys[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stream",
    "stream_options", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "user", "seed", "tools", "tool_choice", "parallel_tool_calls", "response_format", "store", "metadata",
    /* cis2 extensions */
    "top_k", "min_p", "stop_token_ids", "stop_at_eos", "add_generation_prompt", NULL};

static int known_keys(json_t *body, const char **keys, serve_err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        int ok = 0;
        for (size_t i = 0; keys[i] && !ok; i++) ok = !strcmp(keys[i], k);
        if (!ok) return serve_fail(e, 400, "unknown_parameter", k, "Unrecognized request argument supplied: %.60s", k);
    }
    return 0;
}

/* The value of key, NULL when absent or null. */
static json_t *opt(json_t *body, const char *key)
{
    json_t *v = json_object_get(body, key);
    return json_is_null(v) ? NULL : v;
}

static int get_bool(json_t *body, const char *key, int dflt, int *out, serve_err *e)
{
    json_t *v = opt(body, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_boolean(v)) return serve_fail(e, 400, "invalid_type", key, "%s must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int get_int(json_t *body, const char *key, long long lo, long long hi, long long dflt, long long *out,
                   serve_err *e)
{
    json_t *v = opt(body, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_integer(v)) return serve_fail(e, 400, "invalid_type", key, "%s must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return serve_fail(e, 400, "invalid_value", key, "%s must be between %lld and %lld (got %lld)", key, lo, hi, x);
    *out = x;
    return 0;
}

/* A float parameter: JSON type from jansson, bits from the body's text. */
static int get_float(json_t *body, const char *raw, size_t raw_len, const char *key, float *out, int *present,
                     serve_err *e)
{
    json_t *v = opt(body, key);
    *present = 0;
    if (!v) return 0;
    if (!json_is_number(v)) return serve_fail(e, 400, "invalid_type", key, "%s must be a number", key);
    float f = 0;
    int r = serve_raw_float(raw, raw_len, key, &f);
    if (r == -2)
        return serve_fail(e, 400, "invalid_value", key, "%s underflows binary32 (docs/sampling.md S2.3)", key);
    if (r != 1) return serve_fail(e, 400, "invalid_value", key, "%s: cannot read the number", key);
    if (!isfinite(f) || f < 0.0f || signbit(f))
        return serve_fail(e, 400, "invalid_value", key, "%s must be a finite number >= 0 (and not -0)", key);
    *out = f;
    *present = 1;
    return 0;
}

/* Parameters whose only accepted value is their neutral one. */
static int neutral_params(json_t *body, size_t n, serve_err *e)
{
    json_t *v;
    if ((v = opt(body, "echo")) && !json_is_false(v))
        return serve_fail(e, json_is_true(v) ? 501 : 400, "unsupported_parameter", "echo",
                          "echo: only false is supported");
    if ((v = opt(body, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0))
        return serve_fail(e, 501, "unsupported_parameter", "suffix", "suffix is not supported");
    if ((v = opt(body, "best_of")) && !(json_is_integer(v) && (size_t)json_integer_value(v) == n))
        return serve_fail(e, 501, "unsupported_parameter", "best_of", "best_of: only best_of == n is supported");
    const char *pen[] = {"presence_penalty", "frequency_penalty"};
    for (int i = 0; i < 2; i++)
        if ((v = opt(body, pen[i])) && !(json_is_number(v) && json_number_value(v) == 0.0))
            return serve_fail(e, json_is_number(v) ? 501 : 400, "unsupported_parameter", pen[i],
                              "%s: only 0 is supported", pen[i]);
    if ((v = opt(body, "logit_bias")) && !(json_is_object(v) && json_object_size(v) == 0))
        return serve_fail(e, json_is_object(v) ? 501 : 400, "unsupported_parameter", "logit_bias",
                          "logit_bias: only an empty object is supported");
    if ((v = opt(body, "user")) && !json_is_string(v))
        return serve_fail(e, 400, "invalid_type", "user", "user must be a string");
    if ((v = opt(body, "response_format"))) {
        json_t *t = json_object_get(v, "type");
        if (!json_is_object(v) || !json_is_string(t) || strcmp(json_string_value(t), "text"))
            return serve_fail(e, 501, "unsupported_parameter", "response_format",
                              "response_format: only {\"type\": \"text\"} is supported");
    }
    if ((v = opt(body, "tool_choice")) && !(json_is_string(v) && !strcmp(json_string_value(v), "none")))
        return serve_fail(e, 501, "unsupported_parameter", "tool_choice", "tool_choice: only \"none\" is supported");
    if ((v = opt(body, "parallel_tool_calls")) && !json_is_boolean(v))
        return serve_fail(e, 400, "invalid_type", "parallel_tool_calls", "parallel_tool_calls must be a boolean");
    if ((v = opt(body, "store")) && !json_is_false(v))
        return serve_fail(e, 501, "unsupported_parameter", "store", "store: only false is supported");
    if ((v = opt(body, "metadata")) && !json_is_object(v))
        return serve_fail(e, 400, "invalid_type", "metadata", "metadata must be an object");
    return 0;
}

static int check_model(const serve_ctx *sc, json_t *body, serve_err *e)
{
    json_t *m = json_object_get(body, "model");
    if (!m) return serve_fail(e, 400, "missing_parameter", "model", "you must provide a model parameter");
    if (!json_is_string(m)) return serve_fail(e, 400, "invalid_type", "model", "model must be a string");
    if (strcmp(json_string_value(m), sc->cfg.model_name))
        return serve_fail(e, 404, "model_not_found", "model",
                          "The model '%.100s' does not exist (this server serves '%.100s')", json_string_value(m),
                          sc->cfg.model_name);
    return 0;
}

/* ------------------------------------------------------------- prompts */

static int text_prompt(const serve_ctx *sc, const char *s, size_t len, cprompt *p, const char *param, serve_err *e)
{
    if (len == 0) return serve_fail(e, 400, "invalid_value", param, "%s: the prompt is empty", param);
    uint32_t *ids = NULL;
    size_t n = 0;
    cis2_error err = {0};
    if (cis2_engine_tokenize(sc->e, s, len, &ids, &n, &err))
        return serve_fail(e, serve_status_for(err.code), NULL, param, "%s: %s", param, err.msg);
    cis2_free(ids);
    if (n == 0) return serve_fail(e, 400, "invalid_value", param, "%s: the prompt encodes to no tokens", param);
    if (!(p->text = malloc(len + 1))) return serve_fail(e, 500, NULL, NULL, "out of memory");
    memcpy(p->text, s, len);
    p->text[len] = 0;
    p->len = len;
    p->n_tokens = n;
    return 0;
}

/* Ids must be in the vocabulary and round-trip through the tokenizer:
 * the receipt records the bytes they decode to (README "Receipts"). */
static int ids_prompt(const serve_ctx *sc, json_t *a, cprompt *p, const char *param, serve_err *e)
{
    size_t n = json_array_size(a);
    if (n == 0) return serve_fail(e, 400, "invalid_value", param, "%s: the prompt is empty", param);
    if (!(p->ids = malloc(n * sizeof *p->ids))) return serve_fail(e, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || (size_t)json_integer_value(x) >= sc->mi->vocab_size)
            return serve_fail(e, 400, "invalid_value", param, "%s[%zu] is not a token id of this model (0..%zu)", param,
                              i, sc->mi->vocab_size - 1);
        p->ids[i] = (uint32_t)json_integer_value(x);
    }
    p->n_ids = p->n_tokens = n;
    char *t = NULL;
    size_t l = 0;
    uint32_t *back = NULL;
    size_t nb = 0;
    int ok = cis2_engine_detokenize(sc->e, p->ids, n, 0, &t, &l, NULL) == CIS2_OK && l > 0 &&
             cis2_engine_tokenize(sc->e, t, l, &back, &nb, NULL) == CIS2_OK && nb == n &&
             !memcmp(back, p->ids, n * sizeof *back);
    cis2_free(t);
    cis2_free(back);
    if (!ok)
        return serve_fail(e, 400, "invalid_value", param,
                          "%s: these ids do not round-trip through the tokenizer (decoding then encoding gives other "
                          "ids), so no prompt bytes reproduce them for the receipt; send the text instead",
                          param);
    return 0;
}

static int is_id_array(json_t *a)
{
    if (!json_is_array(a) || json_array_size(a) == 0) return 0;
    return json_is_integer(json_array_get(a, 0));
}

static int completion_prompts(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    json_t *p = json_object_get(body, "prompt");
    if (!p || json_is_null(p)) return serve_fail(e, 400, "missing_parameter", "prompt", "you must provide a prompt");
    size_t n = json_is_string(p) || is_id_array(p) ? 1 : json_is_array(p) ? json_array_size(p) : 0;
    if (!json_is_string(p) && !json_is_array(p))
        return serve_fail(e, 400, "invalid_type", "prompt",
                          "prompt must be a string, an array of token ids, or an array of those");
    if (n == 0) return serve_fail(e, 400, "invalid_value", "prompt", "the prompt is empty");
    if (n > sc->cfg.max_batch)
        return serve_fail(e, 400, "invalid_value", "prompt", "at most %zu prompts in one request", sc->cfg.max_batch);
    if (!(c->prompts = calloc(n, sizeof *c->prompts))) return serve_fail(e, 500, NULL, NULL, "out of memory");
    c->n_prompts = n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_string(p) || is_id_array(p) ? p : json_array_get(p, i);
        char param[32];
        snprintf(param, sizeof param, n > 1 ? "prompt[%zu]" : "prompt", i);
        int rc;
        if (json_is_string(x)) rc = text_prompt(sc, json_string_value(x), json_string_length(x), &c->prompts[i], param, e);
        else if (json_is_array(x) && (json_array_size(x) == 0 || is_id_array(x))) rc = ids_prompt(sc, x, &c->prompts[i], param, e);
        else rc = serve_fail(e, 400, "invalid_type", param, "%s must be a string or an array of token ids", param);
        if (rc) return rc;
    }
    return 0;
}

static int chat_prompt(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    if (!sc->chat)
        return serve_fail(e, sc->chat_status ? sc->chat_status : 501, "unsupported_chat_template", NULL, "%s",
                          sc->chat_error);
    json_t *m = json_object_get(body, "messages");
    if (!m) return serve_fail(e, 400, "missing_parameter", "messages", "you must provide messages");
    int agp = 1;
    if (get_bool(body, "add_generation_prompt", 1, &agp, e)) return e->status;
    char *text = NULL;
    size_t len = 0;
    int rc = serve_chat_render(sc->chat, m, agp, opt(body, "tools"), &text, &len, e);
    if (rc) return rc;
    if (!(c->prompts = calloc(1, sizeof *c->prompts))) { free(text); return serve_fail(e, 500, NULL, NULL, "out of memory"); }
    c->n_prompts = 1;
    rc = text_prompt(sc, text, len, &c->prompts[0], "messages", e);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- rules */

static int parse_stop(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    json_t *s = opt(body, "stop");
    if (s) {
        size_t n = json_is_string(s) ? 1 : json_is_array(s) ? json_array_size(s) : 0;
        if (!json_is_string(s) && !json_is_array(s))
            return serve_fail(e, 400, "invalid_type", "stop", "stop must be a string or an array of strings");
        if (n > MAX_STOP_STRINGS)
            return serve_fail(e, 400, "invalid_value", "stop", "at most %d stop strings", MAX_STOP_STRINGS);
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_is_string(s) ? s : json_array_get(s, i);
            if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > MAX_STOP_STRING_LEN)
                return serve_fail(e, 400, "invalid_value", "stop", "each stop string must be 1..%d bytes",
                                  MAX_STOP_STRING_LEN);
            size_t len = json_string_length(x); /* raw bytes: a \u0000 is one of them */
            if (!(c->stop_str[i] = malloc(len + 1))) return serve_fail(e, 500, NULL, NULL, "out of memory");
            memcpy(c->stop_str[i], json_string_value(x), len + 1);
            c->stop_len[i] = len;
            c->n_stop_str = i + 1;
            if (c->stop_len[i] > c->max_stop_len) c->max_stop_len = c->stop_len[i];
        }
    }
    json_t *ids = opt(body, "stop_token_ids");
    size_t max_ids = c->kind == CALL_CHAT ? MAX_STOP_IDS - 1 : MAX_STOP_IDS; /* chat adds <|im_end|>'s */
    if (ids) {
        if (!json_is_array(ids))
            return serve_fail(e, 400, "invalid_type", "stop_token_ids", "stop_token_ids must be an array of ids");
        if (json_array_size(ids) > max_ids)
            return serve_fail(e, 400, "invalid_value", "stop_token_ids", "at most %zu stop_token_ids%s", max_ids,
                              c->kind == CALL_CHAT ? " in chat (<|im_end|> is the 64th)" : "");
        for (size_t i = 0; i < json_array_size(ids); i++) {
            json_t *x = json_array_get(ids, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > UINT32_MAX)
                return serve_fail(e, 400, "invalid_value", "stop_token_ids", "stop_token_ids[%zu] is not a u32", i);
            c->stop_ids[c->n_stop_ids++] = (uint32_t)json_integer_value(x);
        }
    }
    if (get_bool(body, "stop_at_eos", 0, &c->stop_eos, e)) return e->status;
    if (c->stop_eos && (sc->mi->eos_malformed || sc->mi->n_eos == 0))
        return serve_fail(e, 400, "invalid_value", "stop_at_eos",
                          "stop_at_eos: this model's config.json has %s eos_token_id", sc->mi->eos_malformed ? "a malformed" : "no");
    if (c->kind == CALL_CHAT && sc->has_im_end)
        c->stop_ids[c->n_stop_ids++] = sc->im_end; /* the end of the assistant's turn (chat needs it, serve_main.c) */
    c->any_stop = c->stop_eos || c->n_stop_ids || c->n_stop_str;
    size_t k = 0;
    c->stop_desc[0] = 0;
    if (c->stop_eos) k += (size_t)snprintf(c->stop_desc + k, sizeof c->stop_desc - k, "eos");
    for (size_t i = 0; i < c->n_stop_ids && k < sizeof c->stop_desc - 16; i++)
        k += (size_t)snprintf(c->stop_desc + k, sizeof c->stop_desc - k, "%sstop-id %u", k ? ", " : "", c->stop_ids[i]);
    if (c->n_stop_str && k < sizeof c->stop_desc - 32)
        k += (size_t)snprintf(c->stop_desc + k, sizeof c->stop_desc - k, "%s%zu stop string%s", k ? ", " : "",
                              c->n_stop_str, c->n_stop_str > 1 ? "s" : "");
    return 0;
}

static int parse_sampling(const serve_ctx *sc, json_t *body, const char *raw, size_t raw_len, serve_call *c,
                          serve_err *e)
{
    float t = 0, top_p = 1.0f, min_p = 0;
    int has_t, has_p, has_m;
    long long top_k, seed;
    if (get_float(body, raw, raw_len, "temperature", &t, &has_t, e)) return e->status;
    if (get_float(body, raw, raw_len, "top_p", &top_p, &has_p, e)) return e->status;
    if (get_float(body, raw, raw_len, "min_p", &min_p, &has_m, e)) return e->status;
    if (has_p && (top_p == 0.0f || top_p > 1.0f))
        return serve_fail(e, 400, "invalid_value", "top_p", "top_p must be in (0, 1]");
    if (has_m && (min_p > 1.0f || (min_p != 0.0f && min_p < 0x1p-64f)))
        return serve_fail(e, 400, "invalid_value", "min_p", "min_p must be 0 or in [2^-64, 1] (docs/sampling.md S2.2)");
    if (get_int(body, "top_k", -1, (long long)sc->mi->vocab_size, 0, &top_k, e)) return e->status;
    if (get_int(body, "seed", 0, INT64_MAX, 0, &seed, e)) return e->status;
    c->samp.temperature = t;
    c->samp.top_p = top_p; /* 1.0 (also when absent): off, docs/sampling.md §S2.1 */
    c->samp.min_p = min_p;
    c->samp.top_k = top_k < 0 ? 0 : (uint32_t)top_k; /* -1 (vLLM's off) is off */
    c->samp.seed = (uint64_t)seed;
    /* greedy without stop rules: exactly §11.2 and a v1 receipt, whatever
     * the other parameters are (docs/sampling.md §S2.4, §S7.1) */
    c->greedy_plain = t == 0.0f && !c->any_stop;
    return 0;
}

static int parse_logprobs(json_t *body, serve_call *c, serve_err *e)
{
    json_t *lp = opt(body, "logprobs");
    long long top = 0;
    if (c->kind == CALL_COMPLETION) {
        if (lp && !json_is_integer(lp))
            return serve_fail(e, 400, "invalid_type", "logprobs", "logprobs must be an integer (0..5) for completions");
        if (get_int(body, "logprobs", 0, 5, 0, &top, e)) return e->status;
        c->logprobs = lp != NULL;
    } else {
        if (get_bool(body, "logprobs", 0, &c->logprobs, e)) return e->status;
        if (get_int(body, "top_logprobs", 0, CIS2_MAX_TOP_LOGPROBS, 0, &top, e)) return e->status;
        if (top && !c->logprobs)
            return serve_fail(e, 400, "invalid_value", "top_logprobs", "top_logprobs needs logprobs: true");
    }
    c->top_logprobs = (unsigned)top;
    return 0;
}

static int parse_max_tokens(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    const char *key = c->kind == CALL_CHAT && opt(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    long long mt;
    long long limit = (long long)sc->cfg.max_tokens;
    if (get_int(body, key, 1, limit, -1, &mt, e)) {
        json_t *v = opt(body, key);
        if (json_is_integer(v) && json_integer_value(v) > limit) {
            memset(e, 0, sizeof *e);
            return serve_fail(e, 400, "invalid_value", key, "%s is %lld, more than this server's limit of %lld", key,
                              (long long)json_integer_value(v), limit);
        }
        return e->status;
    }
    size_t ctx = sc->mi->max_position_embeddings, longest = 0;
    for (size_t i = 0; i < c->n_prompts; i++)
        if (c->prompts[i].n_tokens > longest) longest = c->prompts[i].n_tokens;
    if (mt < 0) { /* the default */
        size_t room = longest < ctx ? ctx - longest : 0;
        size_t d = c->kind == CALL_CHAT ? CHAT_DEFAULT_MAX_TOKENS : 16;
        if (d > sc->cfg.max_tokens) d = sc->cfg.max_tokens;
        mt = (long long)(c->kind == CALL_CHAT && room < d ? (room ? room : 1) : d);
    }
    if (longest + (size_t)mt > ctx)
        return serve_fail(e, 400, "context_length_exceeded", c->kind == CALL_CHAT ? "messages" : "prompt",
                          "This model's maximum context length is %zu tokens. However, you requested %zu tokens (%zu "
                          "in your prompt; %lld for the completion). Please reduce your prompt; or completion length.",
                          ctx, longest + (size_t)mt, longest, mt);
    c->max_tokens = (size_t)mt;
    return 0;
}

static void make_id(char *out, size_t cap, const char *prefix)
{
    uint8_t r[12] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        double t = serve_now();
        memcpy(r, &t, sizeof t);
    }
    char h[25];
    for (int i = 0; i < 12; i++) snprintf(h + 2 * i, 3, "%02x", r[i]);
    snprintf(out, cap, "%s-%s", prefix, h);
}

static int build_job(serve_call *c, serve_err *e)
{
    size_t n = c->n_prompts * c->n_choices;
    serve_job *j = serve_job_new(n);
    if (!j) return serve_fail(e, 500, NULL, NULL, "out of memory");
    c->job = j;
    j->owner = c;
    j->owner_free = call_free_owner;
    for (size_t p = 0; p < c->n_prompts; p++)
        for (size_t k = 0; k < c->n_choices; k++) {
            serve_seq *q = &j->seqs[p * c->n_choices + k];
            cprompt *pr = &c->prompts[p];
            q->prompt_idx = p;
            q->choice = p * c->n_choices + k;
            q->req.text = pr->text;
            q->req.text_len = pr->len;
            q->req.ids = pr->text ? NULL : pr->ids;
            q->req.n_ids = pr->n_ids;
            q->req.max_tokens = c->max_tokens;
            q->samp = c->samp;
            q->samp.sequence = (uint32_t)k;
            q->req.sampling = c->greedy_plain ? NULL : &q->samp;
            q->stop = (cis2_stop){.eos = c->stop_eos, .ids = c->stop_ids, .n_ids = c->n_stop_ids,
                                  .strings = (const char *const *)c->stop_str, .string_lens = c->stop_len,
                                  .n_strings = c->n_stop_str};
            q->req.stop = c->any_stop ? &q->stop : NULL;
            q->req.logprobs = c->logprobs;
            q->req.top_logprobs = c->top_logprobs;
        }
    if (serve_job_seqs_ready(j)) return serve_fail(e, 500, NULL, NULL, "out of memory");
    return 0;
}

int serve_call_parse(const serve_ctx *sc, int kind, const char *raw, size_t raw_len, serve_call **out, serve_err *e)
{
    *out = NULL;
    json_error_t je;
    big_num big = {0};
    char *fixed = body_numbers(raw, raw_len, &big);
    json_t *body = json_loadb(fixed ? fixed : raw, raw_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    free(fixed);
    if (!body)
        return serve_fail(e, 400, "invalid_json", NULL,
                          "We could not parse the JSON body of your request (line %d, column %d: %s)", je.line,
                          je.column, je.text);
    serve_call *c = calloc(1, sizeof *c);
    if (!c) { json_decref(body); return serve_fail(e, 500, NULL, NULL, "out of memory"); }
    c->kind = kind;
    c->created = (long long)time(NULL);
    make_id(c->id, sizeof c->id, kind == CALL_CHAT ? "chatcmpl" : "cmpl");
    long long n = 1;
    int rc = 0;
    if (!json_is_object(body)) rc = serve_fail(e, 400, "invalid_type", NULL, "the request body must be a JSON object");
    if (!rc) rc = known_keys(body, kind == CALL_CHAT ? chat_keys : completion_keys, e);
    if (!rc) rc = check_values(body, &big, e);
    if (!rc) rc = check_model(sc, body, e);
    if (!rc) rc = get_int(body, "n", 1, MAX_CHOICES, 1, &n, e);
    if (!rc) rc = neutral_params(body, (size_t)n, e);
    if (!rc) rc = get_bool(body, "stream", 0, &c->stream, e);
    json_t *so = opt(body, "stream_options");
    if (!rc && so) {
        if (!json_is_object(so)) rc = serve_fail(e, 400, "invalid_type", "stream_options", "stream_options must be an object");
        else if (!c->stream) rc = serve_fail(e, 400, "invalid_value", "stream_options", "stream_options needs stream: true");
        else rc = get_bool(so, "include_usage", 0, &c->include_usage, e);
    }
    if (!rc) rc = parse_logprobs(body, c, e);
    if (!rc) rc = parse_stop(sc, body, c, e);
    if (!rc) rc = parse_sampling(sc, body, raw, raw_len, c, e);
    if (!rc) rc = kind == CALL_CHAT ? chat_prompt(sc, body, c, e) : completion_prompts(sc, body, c, e);
    c->n_choices = (size_t)n;
    if (!rc && c->n_prompts * c->n_choices > sc->cfg.max_batch)
        rc = serve_fail(e, 400, "invalid_value", "n", "prompts x n is %zu, more than --max-batch (%zu)",
                        c->n_prompts * c->n_choices, sc->cfg.max_batch);
    if (!rc) rc = parse_max_tokens(sc, body, c, e);
    if (!rc) rc = build_job(c, e);
    json_decref(body);
    if (rc) { serve_call_free(c); return rc; }
    c->met = sc->met;
    *out = c;
    return 0;
}

/* -------------------------------------------------------------- results */

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static const char *finish_reason(int f)
{
    return f == CIS2_FINISH_LENGTH ? "length" : f == CIS2_FINISH_CANCELLED ? "cancelled" : "stop";
}

/* The choice's `cis2` object: receipt and digests (NULL on failure). */
static json_t *cis2_json(const serve_ctx *sc, const serve_call *c, const cis2_result *r, serve_err *e)
{
    cis2_receipt *rc = NULL;
    char *text = NULL;
    size_t len = 0;
    cis2_error err = {0};
    if (cis2_receipt_make(sc->e, r, &rc, &err) || cis2_receipt_render(rc, &text, &len, &err)) {
        cis2_receipt_free(rc);
        serve_fail(e, 500, NULL, NULL, "making the receipt failed: %s", err.msg);
        return NULL;
    }
    uint8_t d[32];
    char h[65];
    json_t *o = json_object();
    json_object_set_new(o, "receipt", json_stringn(text, len));
    cis2_sha256(text, len, d);
    cis2_hex(d, 32, h);
    json_object_set_new(o, "receipt_sha256", json_string(h));
    cis2_hex(r->witness, 32, h);
    json_object_set_new(o, "witness_digest", json_string(h));
    cis2_hex(r->argmax_digest, 32, h);
    json_object_set_new(o, "argmax_digest", json_string(h));
    json_object_set_new(o, "prompt_token_ids", ids_json(r->prompt_ids, r->n_prompt));
    json_object_set_new(o, "generated_token_ids", ids_json(r->tokens, r->n_tokens));
    json_object_set_new(o, "finish", json_string(cis2_finish_name(r->finish)));
    if (c->stop_desc[0]) json_object_set_new(o, "stop_rule", json_string(c->stop_desc));
    else json_object_set_new(o, "stop_rule", json_null());
    if (c->kind == CALL_CHAT)
        json_object_set_new(o, "prompt", json_stringn(r->prompt ? r->prompt : "", r->prompt ? r->prompt_len : 0));
    serve_lp_bits(o, r);
    cis2_receipt_free(rc);
    cis2_free(text);
    return o;
}

static json_t *usage_json(const serve_call *c, const serve_job *j)
{
    size_t pt = 0, ct = 0;
    for (size_t i = 0; i < c->n_prompts; i++) pt += c->prompts[i].n_tokens;
    for (size_t i = 0; i < j->n; i++) ct += j->seqs[i].res ? j->seqs[i].res->n_tokens : j->seqs[i].n_toks;
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer((json_int_t)pt));
    json_object_set_new(u, "completion_tokens", json_integer((json_int_t)ct));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)(pt + ct)));
    return u;
}

static json_t *envelope(const serve_ctx *sc, const serve_call *c, const char *object)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(c->created));
    json_object_set_new(o, "model", json_string(sc->cfg.model_name));
    json_object_set_new(o, "system_fingerprint", json_string("cis2-" CIS2_VERSION));
    return o;
}

/* The error of a job that did not finish normally, in e. */
static int job_error(const serve_job *j, serve_err *e)
{
    if (j->shutdown_cancel) return serve_fail(e, 503, "shutting_down", NULL, "the server is shutting down");
    if (j->state == JOB_FAILED) {
        int st = serve_status_for(j->admit_rc);
        if (j->admit_rc == CIS2_E_UNSUPPORTED)
            return serve_fail(e, 501, "unsupported_parameter", NULL, "%s", j->admit_err.msg);
        if (st == 400)
            return serve_fail(e, 400, "invalid_value", NULL, "%s", j->admit_err.msg[0] ? j->admit_err.msg : "invalid request");
        return serve_fail(e, st, NULL, NULL, "%s", j->admit_err.msg[0] ? j->admit_err.msg : cis2_status_name(j->admit_rc));
    }
    for (size_t i = 0; i < j->n; i++)
        if (!j->seqs[i].res || j->seqs[i].res->finish == CIS2_FINISH_CANCELLED)
            return serve_fail(e, 503, "cancelled", NULL, "the request was cancelled");
    return 0;
}

/* A whole choice's OpenAI logprobs object (null when not asked). */
static json_t *result_logprobs(const serve_ctx *sc, const serve_call *c, const cis2_result *r)
{
    if (!c->logprobs || !r->logprobs) return json_null();
    serve_lp_span sp = {.ids = r->tokens, .lp = r->logprobs, .top_ids = r->top_ids, .top_lp = r->top_logprobs,
                        .n_top = r->n_top, .n = r->n_tokens, .base = 0,
                        .clip = serve_utf8_chars(r->text ? r->text : "", r->text ? r->text_len : 0)};
    return serve_lp_json(sc->e, c->kind == CALL_CHAT, &sp);
}

json_t *serve_call_response(const serve_ctx *sc, serve_call *c, serve_err *e)
{
    serve_job *j = c->job;
    if (job_error(j, e)) return NULL;
    int chat = c->kind == CALL_CHAT;
    json_t *o = envelope(sc, c, chat ? "chat.completion" : "text_completion");
    json_t *choices = json_array();
    for (size_t i = 0; i < j->n; i++) {
        const cis2_result *r = j->seqs[i].res;
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer((json_int_t)j->seqs[i].choice));
        json_t *text = json_stringn(r->text ? r->text : "", r->text ? r->text_len : 0);
        if (chat) {
            json_t *m = json_object();
            json_object_set_new(m, "role", json_string("assistant"));
            json_object_set_new(m, "content", text);
            json_object_set_new(m, "refusal", json_null());
            json_object_set_new(ch, "message", m);
        } else {
            json_object_set_new(ch, "text", text);
        }
        json_object_set_new(ch, "logprobs", result_logprobs(sc, c, r));
        json_object_set_new(ch, "finish_reason", json_string(finish_reason(r->finish)));
        json_t *x = cis2_json(sc, c, r, e);
        if (!x) { json_decref(ch); json_decref(choices); json_decref(o); return NULL; }
        json_object_set_new(ch, "cis2", x);
        json_array_append_new(choices, ch);
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage_json(c, j));
    return o;
}

/* ------------------------------------------------------------ streaming */

typedef struct sse_seq {
    uint32_t *ids;             /* every token so far (copied under the lock) */
    size_t n_ids;
    float *lp;                 /* and their logprobs, when asked (copied too) */
    uint32_t *top_ids;
    float *top_lp;
    int finishing;             /* the last token ended it (copied under the lock) */
    size_t clean;              /* ids[0..clean) are sent as text */
    serve_buf raw;             /* the raw bytes of ids[clean..clean+n_known) */
    size_t *ends;              /* ends[k]: raw bytes of ids[clean..clean+k+1), k < n_known */
    size_t n_known, ends_cap;
    serve_buf sent;            /* the text sent so far */
    size_t sent_chars;         /* its code points (the text goes out in whole UTF-8 units) */
    int ended;                 /* the sequence's result is there */
    int final_sent, role_sent;
} sse_seq;

struct serve_sse {
    const serve_ctx *sc;
    serve_call *c;
    sse_seq *s;
    size_t n;
    int failed, done_sent, usage_sent, admitted;
    serve_err err;             /* why it failed (taken under the lock) */
};

serve_sse *serve_sse_new(const serve_ctx *sc, serve_call *c)
{
    serve_sse *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->sc = sc;
    s->c = c;
    s->n = c->job->n;
    s->s = calloc(s->n, sizeof *s->s);
    if (!s->s) { free(s); return NULL; }
    size_t nt = c->top_logprobs;
    for (size_t i = 0; i < s->n; i++) {
        sse_seq *t = &s->s[i];
        if (!(t->ids = malloc(c->max_tokens * sizeof(uint32_t)))) { serve_sse_free(s); return NULL; }
        if (c->logprobs && (!(t->lp = malloc(c->max_tokens * sizeof(float))) ||
                            !(t->top_ids = malloc((nt ? nt * c->max_tokens : 1) * sizeof(uint32_t))) ||
                            !(t->top_lp = malloc((nt ? nt * c->max_tokens : 1) * sizeof(float))))) {
            serve_sse_free(s);
            return NULL;
        }
    }
    return s;
}

void serve_sse_free(serve_sse *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->s[i].ids);
        free(s->s[i].lp);
        free(s->s[i].top_ids);
        free(s->s[i].top_lp);
        serve_buf_free(&s->s[i].raw);
        free(s->s[i].ends);
        serve_buf_free(&s->s[i].sent);
    }
    free(s->s);
    free(s);
}

int serve_sse_collect(serve_sse *s)
{
    serve_job *j = s->c->job;
    int changed = 0;
    if (!s->failed && (j->state == JOB_FAILED || j->shutdown_cancel)) {
        s->failed = 1;
        if (!job_error(j, &s->err)) serve_fail(&s->err, 500, NULL, NULL, "the request failed");
        changed = 1;
    }
    if (!s->admitted && j->state != JOB_NEW) {
        s->admitted = 1;
        changed = 1;
    }
    for (size_t i = 0; i < s->n; i++) {
        serve_seq *q = &j->seqs[i];
        sse_seq *t = &s->s[i];
        if (q->n_toks > t->n_ids) {
            size_t a = t->n_ids, k = q->n_toks - a, nt = q->top_n;
            memcpy(t->ids + a, q->toks + a, k * sizeof(uint32_t));
            if (t->lp && q->lp) {
                memcpy(t->lp + a, q->lp + a, k * sizeof(float));
                if (nt) {
                    memcpy(t->top_ids + a * nt, q->top_ids + a * nt, k * nt * sizeof(uint32_t));
                    memcpy(t->top_lp + a * nt, q->top_lp + a * nt, k * nt * sizeof(float));
                }
            }
            t->n_ids = q->n_toks;
            changed = 1;
        }
        t->finishing = q->finish != 0;
        if (q->taken && !t->ended) {
            t->ended = 1;
            changed = 1;
        }
    }
    return changed;
}

/* One server-sent event carrying o (consumed). */
static int emit(serve_buf *out, json_t *o)
{
    char *js = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!js) return -1;
    serve_buf_str(out, "data: ");
    serve_buf_str(out, js);
    serve_buf_str(out, "\n\n");
    free(js);
    return out->oom ? -1 : 0;
}

/* A chunk for one choice: text (may be NULL), finish reason, cis2. */
static json_t *chunk(const serve_sse *s, size_t i, const char *text, size_t tlen, int role, const char *finish,
                     json_t *cis2, json_t *lp)
{
    int chat = s->c->kind == CALL_CHAT;
    json_t *o = envelope(s->sc, s->c, chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer((json_int_t)s->c->job->seqs[i].choice));
    if (chat) {
        json_t *d = json_object();
        if (role) json_object_set_new(d, "role", json_string("assistant"));
        if (text) json_object_set_new(d, "content", json_stringn(text, tlen));
        json_object_set_new(ch, "delta", d);
    } else {
        json_object_set_new(ch, "text", json_stringn(text ? text : "", text ? tlen : 0));
    }
    json_object_set_new(ch, "logprobs", lp ? lp : json_null());
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    if (cis2) json_object_set_new(ch, "cis2", cis2);
    json_t *a = json_array();
    json_array_append_new(a, ch);
    json_object_set_new(o, "choices", a);
    if (s->c->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

/* Where the bytes' last UTF-8 unit starts if it is a valid sequence cut
 * short by the end (more bytes could complete it), else n. */
static size_t incomplete_tail(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int v;
        size_t u = serve_utf8_unit(s + i, n - i, &v);
        if (v < 0) return i;
        i += u;
    }
    return n;
}

/* Where bytes that may still begin a stop string start: the earliest j
 * such that raw[j..n) is a proper prefix of some stop string (n: none).
 * An occurrence that a later token completes starts there or later, so
 * raw[0..j) can never be cut (docs/sampling.md §S5.3, §S5.4). */
static size_t stop_hold(const serve_call *c, const char *raw, size_t n)
{
    if (!c->max_stop_len) return n;
    for (size_t j = n >= c->max_stop_len ? n - c->max_stop_len + 1 : 0; j < n; j++)
        for (size_t i = 0; i < c->n_stop_str; i++)
            if (c->stop_len[i] > n - j && !memcmp(raw + j, c->stop_str[i], n - j)) return j;
    return n;
}

/* The text of the tokens that can be shown now: every new token's raw
 * bytes are appended; the longest token prefix that ends on a complete
 * UTF-8 sequence and before any bytes that may begin a stop string
 * (stop_hold) is rendered by the library (U+FFFD for invalid bytes, which
 * never changes at such a boundary) and sent.  *from and *k: the tokens
 * sent (ids[*from..*from+*k)); *base: the code points sent before them. */
static int stream_text(serve_sse *s, sse_seq *t, char **out, size_t *olen, size_t *from, size_t *k_out,
                       size_t *base)
{
    *out = NULL;
    *olen = 0;
    *from = t->clean;
    *k_out = 0;
    *base = t->sent_chars;
    const cis2_engine *e = s->sc->e;
    while (t->clean + t->n_known < t->n_ids) {
        char *b = NULL;
        size_t l = 0;
        if (cis2_engine_detokenize(e, &t->ids[t->clean + t->n_known], 1, 0, &b, &l, NULL)) return -1;
        if (t->n_known + 1 > t->ends_cap) {
            size_t nc = t->ends_cap ? 2 * t->ends_cap : 64;
            size_t *ne = realloc(t->ends, nc * sizeof *ne);
            if (!ne) { cis2_free(b); return -1; }
            t->ends = ne;
            t->ends_cap = nc;
        }
        serve_buf_put(&t->raw, b, l);
        cis2_free(b);
        if (t->raw.oom) return -1;
        t->ends[t->n_known++] = t->raw.n;
    }
    size_t limit = incomplete_tail((const unsigned char *)t->raw.p, t->raw.n);
    size_t h = stop_hold(s->c, t->raw.p, t->raw.n);
    if (h < limit) limit = h;
    size_t k = 0;
    while (k < t->n_known && t->ends[k] <= limit) k++;
    if (k == 0) return 0;
    size_t cut = t->ends[k - 1];
    char *txt = NULL;
    size_t tl = 0;
    if (cis2_engine_detokenize(e, &t->ids[t->clean], k, 1, &txt, &tl, NULL)) return -1;
    serve_buf_put(&t->sent, txt, tl);
    if (t->sent.oom) { cis2_free(txt); return -1; }
    t->sent_chars += serve_utf8_chars(txt, tl);
    serve_buf_cut(&t->raw, cut);
    for (size_t m = k; m < t->n_known; m++) t->ends[m - k] = t->ends[m] - cut;
    t->n_known -= k;
    t->clean += k;
    *out = txt;
    *olen = tl;
    *k_out = k;
    return 0;
}

/* The logprobs object of tokens [from, from + k) of a stream (NULL when
 * not asked): from the copies of the events, or from the result. */
static json_t *span_logprobs(const serve_sse *s, const sse_seq *t, const cis2_result *r, size_t from, size_t k,
                             size_t base, size_t clip)
{
    const serve_call *c = s->c;
    if (!c->logprobs || k == 0) return NULL;
    size_t nt = c->top_logprobs;
    serve_lp_span sp = {.n_top = nt, .n = k, .base = base, .clip = clip};
    if (r) {
        if (!r->logprobs) return NULL;
        sp.ids = r->tokens + from;
        sp.lp = r->logprobs + from;
        sp.top_ids = r->top_ids ? r->top_ids + from * r->n_top : NULL;
        sp.top_lp = r->top_logprobs ? r->top_logprobs + from * r->n_top : NULL;
        sp.n_top = r->n_top;
    } else {
        sp.ids = t->ids + from;
        sp.lp = t->lp + from;
        sp.top_ids = t->top_ids + from * nt;
        sp.top_lp = t->top_lp + from * nt;
    }
    return serve_lp_json(s->sc->e, c->kind == CALL_CHAT, &sp);
}

int serve_sse_format(serve_sse *s, serve_buf *out, int *done)
{
    serve_job *j = s->c->job;
    *done = 0;
    if (s->done_sent) { *done = 1; return 0; }
    if (s->failed) {
        if (!s->err.status) serve_fail(&s->err, 500, NULL, NULL, "the request failed");
        if (emit(out, serve_err_json(&s->err))) return -1;
        s->done_sent = 1;
        *done = 1;
        return 0;
    }
    int all = 1;
    for (size_t i = 0; i < s->n; i++) {
        sse_seq *t = &s->s[i];
        if (s->c->kind == CALL_CHAT && !t->role_sent && s->admitted) {
            if (emit(out, chunk(s, i, "", 0, 1, NULL, NULL, NULL))) return -1;
            t->role_sent = 1;
        }
        if (t->final_sent) continue;
        if (!t->ended) {
            all = 0;
            if (t->finishing) continue; /* its last token may be cut (a stop rule): wait for the result */
            char *txt = NULL;
            size_t tl = 0, from, k, base;
            if (stream_text(s, t, &txt, &tl, &from, &k, &base)) return -1;
            json_t *lp = span_logprobs(s, t, NULL, from, k, base, SIZE_MAX);
            if ((tl || lp) && emit(out, chunk(s, i, txt, tl, 0, NULL, NULL, lp))) { cis2_free(txt); return -1; }
            cis2_free(txt);
            continue;
        }
        /* ended: the rest of the result's text, then the finishing chunk */
        const cis2_result *r = j->seqs[i].res;
        if (!r || r->finish == CIS2_FINISH_CANCELLED) {
            s->failed = 1;
            serve_fail(&s->err, 503, "cancelled", NULL, "the request was cancelled");
            return serve_sse_format(s, out, done);
        }
        size_t rl = r->text ? r->text_len : 0, rest = 0;
        if (t->sent.n <= rl && !memcmp(r->text ? r->text : "", t->sent.p ? t->sent.p : "", t->sent.n)) {
            rest = rl - t->sent.n;
        } else {
            fprintf(stderr, "cis2 serve: %s: streamed text is not a prefix of the result's text\n", s->c->id);
        }
        /* the tokens not sent yet (the finishing one among them) with their logprobs */
        size_t from = t->clean < r->n_tokens ? t->clean : r->n_tokens;
        json_t *lp = span_logprobs(s, t, r, from, r->n_tokens - from, t->sent_chars,
                                   serve_utf8_chars(r->text ? r->text : "", rl));
        if ((rest || lp) && emit(out, chunk(s, i, rest ? r->text + t->sent.n : "", rest, 0, NULL, NULL, lp)))
            return -1;
        serve_err e = {0};
        json_t *x = cis2_json(s->sc, s->c, r, &e);
        if (!x) {
            if (emit(out, serve_err_json(&e))) return -1;
            s->done_sent = 1;
            *done = 1;
            return 0;
        }
        if (emit(out, chunk(s, i, s->c->kind == CALL_CHAT ? NULL : "", 0, 0, finish_reason(r->finish), x, NULL)))
            return -1;
        t->final_sent = 1;
    }
    if (!all) return 0;
    if (s->c->include_usage && !s->usage_sent) {
        json_t *o = envelope(s->sc, s->c, s->c->kind == CALL_CHAT ? "chat.completion.chunk" : "text_completion");
        json_object_set_new(o, "choices", json_array());
        json_object_set_new(o, "usage", usage_json(s->c, j));
        if (emit(out, o)) return -1;
        s->usage_sent = 1;
    }
    serve_buf_str(out, "data: [DONE]\n\n");
    if (out->oom) return -1;
    s->done_sent = 1;
    *done = 1;
    return 0;
}

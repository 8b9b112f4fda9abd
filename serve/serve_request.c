/*
 * serve_request.c - OpenAI request bodies to jobs (docs/serving.md "Parameters"):
 * /v1/completions and /v1/chat/completions bodies are validated and turned
 * into a serve_call holding a serve_job (one sequence per prompt and
 * choice).  Called on HTTP threads (serve_http.c: serve_call_parse, then
 * serve_call_job once the engine took the job); the engine is used only
 * through its read-only calls (tokenize, detokenize, the §S2.2 check).
 * Calls serve_err.c, serve_body.c (the body's text), serve_chat.c (chat
 * prompts), serve_engine.c (jobs), serve_metrics.c (prompt tokens) and
 * serve_verify.c (echo's prompt scores); never serve_http.c.
 *
 * Parameters and cis2's choices (docs/serving.md; docs/inputs.md "HTTP
 * requests"):
 *   - unknown parameters are refused (400), as OpenAI does; known ones with
 *     a value cis2 does not implement (echo with stream, best_of > n, penalties, a
 *     logit_bias, suffix, tool_choice "required") are refused naming them: 400
 *     unsupported_parameter with `param`, never a 5xx that clients retry;
 *   - temperature absent or 0 is greedy (§11.2), so a default request is
 *     bit for bit `cis2 run`; temperature/top_p/min_p are read from the
 *     body's own decimal text, one correctly rounded conversion to binary32
 *     (docs/sampling.md §S2.3, serve_body.c), and with top_k, seed (default
 *     0) and n (sequence k of a prompt is its choice k) go to cis2_sampling,
 *     which the library checks against §S2.2 (cis2_sampling_validate: 400
 *     invalid_value naming the parameter, never clamped).  Every sequence
 *     carries its sampling; the library decides whether a run is an
 *     extension run (§S7.1: T > 0 or a stop rule), so a greedy request
 *     without stop rules gets the v1 receipt whatever the other parameters
 *     are;
 *   - stop (strings), stop_token_ids and stop_at_eos (cis2 extensions) go
 *     to cis2_stop; EOS is not special unless asked (§3.4, as `cis2 run`);
 *     chat adds the chat's stop ids (serve_main.c: <|im_end|>, the
 *     eos_token) after the request's own, so a chat receipt is `cis2 run
 *     --prompt-ids ... --stop-id ...` of the rendered prompt's ids;
 *   - chat: the checkpoint's chat template renders the messages, tools,
 *     documents and chat_template_kwargs (serve_chat.c), and the text is
 *     tokenized as transformers tokenizes a chat (chat_prompt);
 *   - logprobs (completions: 0..5 alternatives; chat: logprobs true and
 *     top_logprobs 0..20) go to cis2_request;
 *   - echo (completions, whole responses) puts the prompt before the
 *     completion and, with logprobs, its scores; max_tokens may then be 0
 *     (no job).  vLLM's prompt_logprobs (0..20) asks for the scores in its
 *     shape.  The scores are cis2_score's (docs/sampling.md §S11: the
 *     prompt as a continuation without context), computed here on the HTTP
 *     thread (serve_score_prompts, serve_verify.c), as /v1/verify computes its
 *     prefills, and
 *     bounded as /v1/verify is: more than --verify-max-tokens prompt tokens
 *     in all is 413 score_too_large before any work; a client that leaves
 *     ends it at the next weight pass (499, nothing sent).  score_receipt
 *     (a cis2 extension, only with scored prompts) asks for each prompt's
 *     score receipt in the response (docs/serving.md "Logprobs");
 *   - n: choice p*n+k is sample (seed, sequence k) of prompt p, whatever
 *     the request's other prompts (docs/serving.md "Samples of one
 *     prompt"); prompts x n within --max-batch, the 400 naming it.
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define CHAT_DEFAULT_MAX_TOKENS 256
#define MAX_STOP_STRING_LEN 256 /* the library's limits (docs/sampling.md §S5.1) */
#define MAX_CHOICES 16

/* ------------------------------------------------------------------ calls */

static void call_free_owner(void *p)
{
    serve_call *c = p;
    if (!c) return;
    for (size_t i = 0; i < c->n_prompts; i++) {
        free(c->prompts[i].text);
        free(c->prompts[i].ids);
    }
    free(c->prompts);
    cis2_score_results_free(c->scores, c->n_prompts);
    for (size_t i = 0; c->score_text && i < c->n_prompts; i++) cis2_free(c->score_text[i]);
    free(c->score_text);
    free(c->score_len);
    json_decref(c->tools);
    for (size_t i = 0; i < c->n_stop_str; i++) free(c->stop_str[i]);
    free(c);
}

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

const cis2_score_result *serve_call_score(const serve_call *c, size_t p)
{
    return p < c->n_prompts && c->scores ? &c->scores[p] : NULL;
}

/* ------------------------------------------------------------ validation */

static const char *completion_keys[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "logprobs", "echo",
    "stop", "presence_penalty", "frequency_penalty", "best_of", "logit_bias", "user", "suffix", "seed",
    /* cis2 extensions */
    "top_k", "min_p", "stop_token_ids", "stop_at_eos", "prompt_logprobs", "score_receipt", NULL};
static const char *chat_keys[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stream",
    "stream_options", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "user", "seed", "tools", "tool_choice", "parallel_tool_calls", "response_format", "store", "metadata",
    /* vLLM's */
    "chat_template_kwargs", "documents", "add_generation_prompt",
    /* cis2 extensions */
    "top_k", "min_p", "stop_token_ids", "stop_at_eos", NULL};

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

/* A float parameter: its JSON type from jansson, its bits from the body's
 * text (docs/sampling.md §S2.3; serve_body.c); *out is left as it is when
 * the key is absent or null.  Its range is the library's (§S2.2,
 * parse_sampling). */
static int get_float(json_t *body, const char *raw, size_t raw_len, const char *key, float *out, serve_err *e)
{
    json_t *v = opt(body, key);
    if (!v) return 0;
    if (!json_is_number(v)) return serve_fail(e, 400, "invalid_type", key, "%s must be a number", key);
    float f = 0;
    cis2_error err = {0};
    int r = serve_raw_float(raw, raw_len, key, &f, &err);
    if (r != 1)
        return serve_fail(e, 400, "invalid_value", key, "%s: %s (docs/sampling.md S2.3)", key,
                          r ? err.msg : "cannot find the number in the body");
    *out = f;
    return 0;
}

/* Parameters whose only accepted value is their neutral one. */
static int neutral_params(json_t *body, size_t n, serve_err *e)
{
    json_t *v;
    if ((v = opt(body, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0))
        return serve_fail(e, 400, "unsupported_parameter", "suffix", "suffix is not supported");
    if ((v = opt(body, "best_of")) && !(json_is_integer(v) && (size_t)json_integer_value(v) == n))
        return serve_fail(e, 400, "unsupported_parameter", "best_of", "best_of: only best_of == n is supported");
    const char *pen[] = {"presence_penalty", "frequency_penalty"};
    for (int i = 0; i < 2; i++)
        if ((v = opt(body, pen[i])) && !(json_is_number(v) && json_number_value(v) == 0.0))
            return serve_fail(e, 400, "unsupported_parameter", pen[i],
                              "%s: only 0 is supported", pen[i]);
    if ((v = opt(body, "logit_bias")) && !(json_is_object(v) && json_object_size(v) == 0))
        return serve_fail(e, 400, "unsupported_parameter", "logit_bias",
                          "logit_bias: only an empty object is supported");
    if ((v = opt(body, "user")) && !json_is_string(v))
        return serve_fail(e, 400, "invalid_type", "user", "user must be a string");
    if ((v = opt(body, "response_format"))) {
        json_t *t = json_object_get(v, "type");
        if (!json_is_object(v) || !json_is_string(t) || strcmp(json_string_value(t), "text"))
            return serve_fail(e, 400, "unsupported_parameter", "response_format",
                              "response_format: only {\"type\": \"text\"} is supported");
    }
    if ((v = opt(body, "parallel_tool_calls")) && !json_is_boolean(v))
        return serve_fail(e, 400, "invalid_type", "parallel_tool_calls", "parallel_tool_calls must be a boolean");
    if ((v = opt(body, "store")) && !json_is_false(v))
        return serve_fail(e, 400, "unsupported_parameter", "store", "store: only false is supported");
    if ((v = opt(body, "metadata")) && !json_is_object(v))
        return serve_fail(e, 400, "invalid_type", "metadata", "metadata must be an object");
    return 0;
}

/* A server serves one model, named after --model-dir's last component
 * unless --model-name says otherwise (docs/serving.md "Starting it"): every
 * refusal of `model` says which name to send, so a user who guessed it
 * wrong sees what to put.  The tokenizer endpoints (serve_tok.c) let it be
 * left out, as vLLM does. */
int serve_check_model(const serve_ctx *sc, json_t *body, int required, serve_err *e)
{
    const char *name = sc->cfg.model_name;
    json_t *m = json_object_get(body, "model");
    if (!required && (!m || json_is_null(m))) return 0;
    if (!m)
        return serve_fail(e, 400, "missing_parameter", "model",
                          "you must provide a model parameter (this server serves \"%.100s\")", name);
    if (!json_is_string(m))
        return serve_fail(e, 400, "invalid_type", "model", "model must be a string (this server serves \"%.100s\")",
                          name);
    if (strcmp(json_string_value(m), name))
        return serve_fail(e, 404, "model_not_found", "model",
                          "The model '%.100s' does not exist: this server serves one model, \"%.100s\" (named after "
                          "--model-dir's last component unless --model-name says otherwise; GET /v1/models lists it)",
                          json_string_value(m), name);
    return 0;
}

/* ------------------------------------------------------------- prompts */

static int text_prompt(const serve_ctx *sc, const char *s, size_t len, serve_prompt *p, const char *param, serve_err *e)
{
    if (len == 0) return serve_fail(e, 400, "invalid_value", param, "%s: the prompt is empty", param);
    uint32_t *ids = NULL;
    size_t n = 0;
    cis2_error err = {0};
    /* counted as the run will tokenize it: with the tokenizer's special tokens */
    if (cis2_engine_tokenize_prompt(sc->e, s, len, &ids, &n, &err))
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

/* Ids must be in the vocabulary; any such ids run, and the receipt records
 * the bytes they decode to, or the ids themselves when no bytes reproduce
 * them (docs/receipts.md "Prompts given as ids"). */
static int ids_prompt(const serve_ctx *sc, json_t *a, serve_prompt *p, const char *param, serve_err *e)
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
        return serve_fail(e, 400, "invalid_value", "prompt",
                          "%zu prompts, more than this server's --max-batch (%zu): send at most %zu prompts in one "
                          "request", n, sc->cfg.max_batch, sc->cfg.max_batch);
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

/* A chat request's prompt (docs/serving.md "Chat templates"): the
 * template's text, tokenized as transformers tokenizes a rendered chat
 * (apply_chat_template: add_special_tokens false): the special tokens the
 * text holds are matched as special tokens, and none is added, so a
 * template that writes the BOS gets one BOS.  The job runs on these ids;
 * the text is kept for the response's cis2.prompt. */
static int chat_prompt(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    if (!sc->chat) return serve_fail(e, 400, "unsupported_chat_template", "messages", "%s", sc->chat_error);
    char *text = NULL;
    size_t len = 0;
    if (serve_chat_render(sc->chat, body, &text, &len, e)) return e->status;
    if (!(c->prompts = calloc(1, sizeof *c->prompts))) {
        cis2_free(text);
        return serve_fail(e, 500, NULL, NULL, "out of memory");
    }
    c->n_prompts = 1;
    serve_prompt *p = &c->prompts[0];
    p->text = text;
    p->len = len;
    uint32_t *ids = NULL;
    size_t n = 0;
    cis2_error err = {0};
    if (cis2_engine_tokenize(sc->e, text, len, &ids, &n, &err))
        return serve_fail(e, serve_status_for(err.code), NULL, "messages", "messages: %s", err.msg);
    if (n == 0 || !(p->ids = malloc(n * sizeof *ids))) {
        cis2_free(ids);
        return n ? serve_fail(e, 500, NULL, NULL, "out of memory")
                 : serve_fail(e, 400, "invalid_value", "messages", "messages: the prompt encodes to no tokens");
    }
    memcpy(p->ids, ids, n * sizeof *ids);
    cis2_free(ids);
    p->n_ids = p->n_tokens = n;
    json_t *tools = opt(body, "tools"), *tc = opt(body, "tool_choice");
    if (tools) c->tools = json_incref(tools);
    c->tools_on = tools && json_array_size(tools) && !(json_is_string(tc) && !strcmp(json_string_value(tc), "none"));
    return 0;
}

/* ---------------------------------------------------------------- rules */

/* stop: a string or an array of them, each 1..256 raw bytes (a \u0000 is
 * one of them), at most 16 (docs/sampling.md §S5.1). */
static int stop_strings(json_t *body, serve_call *c, serve_err *e)
{
    json_t *s = opt(body, "stop");
    if (!s) return 0;
    size_t n = json_is_string(s) ? 1 : json_is_array(s) ? json_array_size(s) : 0;
    if (!json_is_string(s) && !json_is_array(s))
        return serve_fail(e, 400, "invalid_type", "stop", "stop must be a string or an array of strings");
    if (n > SERVE_MAX_STOP_STRINGS)
        return serve_fail(e, 400, "invalid_value", "stop", "at most %d stop strings", SERVE_MAX_STOP_STRINGS);
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
    return 0;
}

/* stop_token_ids: u32s, at most 64 with chat's own (§S5.1). */
static int stop_ids(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    json_t *ids = opt(body, "stop_token_ids");
    size_t max_ids = SERVE_MAX_STOP_IDS - (c->kind == CALL_CHAT ? sc->n_chat_stop : 0); /* chat adds its own */
    if (!ids) return 0;
    if (!json_is_array(ids))
        return serve_fail(e, 400, "invalid_type", "stop_token_ids", "stop_token_ids must be an array of ids");
    if (json_array_size(ids) > max_ids)
        return serve_fail(e, 400, "invalid_value", "stop_token_ids", "at most %zu stop_token_ids%s", max_ids,
                          c->kind == CALL_CHAT && sc->n_chat_stop ? " in chat (the chat's own stop ids are the rest)" : "");
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > UINT32_MAX)
            return serve_fail(e, 400, "invalid_value", "stop_token_ids", "stop_token_ids[%zu] is not a u32", i);
        c->stop_ids[c->n_stop_ids++] = (uint32_t)json_integer_value(x);
    }
    return 0;
}

/* The stop rule in words for the `cis2` object ("" for none). */
static void stop_words(serve_call *c)
{
    size_t k = 0;
    c->stop_desc[0] = 0;
    if (c->stop_eos) k += (size_t)snprintf(c->stop_desc + k, sizeof c->stop_desc - k, "eos");
    for (size_t i = 0; i < c->n_stop_ids && k < sizeof c->stop_desc - 16; i++)
        k += (size_t)snprintf(c->stop_desc + k, sizeof c->stop_desc - k, "%sstop-id %u", k ? ", " : "", c->stop_ids[i]);
    if (c->n_stop_str && k < sizeof c->stop_desc - 32)
        k += (size_t)snprintf(c->stop_desc + k, sizeof c->stop_desc - k, "%s%zu stop string%s", k ? ", " : "",
                              c->n_stop_str, c->n_stop_str > 1 ? "s" : "");
}

static int parse_stop(const serve_ctx *sc, json_t *body, serve_call *c, serve_err *e)
{
    if (stop_strings(body, c, e) || stop_ids(sc, body, c, e)) return e->status;
    if (get_bool(body, "stop_at_eos", 0, &c->stop_eos, e)) return e->status;
    if (c->stop_eos && (sc->mi->eos_malformed || sc->mi->n_eos == 0))
        return serve_fail(e, 400, "invalid_value", "stop_at_eos",
                          "stop_at_eos: this model's config.json has %s eos_token_id", sc->mi->eos_malformed ? "a malformed" : "no");
    for (size_t i = 0; c->kind == CALL_CHAT && i < sc->n_chat_stop; i++)
        c->stop_ids[c->n_stop_ids++] = sc->chat_stop[i]; /* the end of the assistant's turn (serve_main.c) */
    c->any_stop = c->stop_eos || c->n_stop_ids || c->n_stop_str;
    stop_words(c);
    return 0;
}

/* The server reads the JSON types and the decimals (§S2.3, get_float);
 * the §S2.2 ranges are the library's one check (cis2_sampling_validate),
 * refused as 400 invalid_value naming the parameter it names.  top_k -1
 * (vLLM's "off") is 0; top_k and seed must fit their integer types. */
static int parse_sampling(const serve_ctx *sc, json_t *body, const char *raw, size_t raw_len, serve_call *c,
                          serve_err *e)
{
    cis2_sampling s = CIS2_SAMPLING_GREEDY; /* §S2.1: top_p 1.0 (also when absent) is off */
    long long top_k, seed;
    if (get_float(body, raw, raw_len, "temperature", &s.temperature, e)) return e->status;
    if (get_float(body, raw, raw_len, "top_p", &s.top_p, e)) return e->status;
    if (get_float(body, raw, raw_len, "min_p", &s.min_p, e)) return e->status;
    if (get_int(body, "top_k", -1, UINT32_MAX, 0, &top_k, e)) return e->status;
    s.top_k = top_k < 0 ? 0 : (uint32_t)top_k;
    const char *param = NULL;
    cis2_error err = {0};
    int rc = cis2_sampling_validate(sc->e, &s, &param, &err);
    if (rc == CIS2_E_USAGE) return serve_fail(e, 400, "invalid_value", param, "%s", err.msg);
    if (rc) return serve_fail(e, serve_status_for(rc), NULL, param, "%s", err.msg);
    if (get_int(body, "seed", 0, INT64_MAX, 0, &seed, e)) return e->status;
    s.seed = (uint64_t)seed;
    c->samp = s;
    return 0;
}

/* ---------------------------------------------- logprobs and length */

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
    json_t *zero = opt(body, key);
    if (json_is_integer(zero) && json_integer_value(zero) == 0 && !c->echo)
        return serve_fail(e, 400, "invalid_value", key, "%s 0 needs echo: true (the prompt's scores alone)", key);
    if (get_int(body, key, c->echo ? 0 : 1, limit, -1, &mt, e)) {
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


/* ------------------------------------------------------------------- job */

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

/* Sequence k of prompt p: the request's sampling with sequence k (the
 * library decides from it whether the run is an extension run, §S7.1)
 * and its stop rules (NULL for none). */
static void fill_seq(serve_call *c, serve_seq *q, size_t p, size_t k)
{
    serve_prompt *pr = &c->prompts[p];
    q->prompt_idx = p;
    q->choice = p * c->n_choices + k;
    q->req.text = pr->ids ? NULL : pr->text; /* a chat prompt runs on its ids, its text kept beside */
    q->req.text_len = pr->ids ? 0 : pr->len;
    q->req.ids = pr->ids;
    q->req.n_ids = pr->n_ids;
    q->req.max_tokens = c->max_tokens;
    q->samp = c->samp;
    q->samp.sequence = (uint32_t)k;
    q->req.sampling = &q->samp;
    q->stop = (cis2_stop){.eos = c->stop_eos, .ids = c->stop_ids, .n_ids = c->n_stop_ids,
                          .strings = (const char *const *)c->stop_str, .string_lens = c->stop_len,
                          .n_strings = c->n_stop_str};
    q->req.stop = c->any_stop ? &q->stop : NULL;
    q->req.logprobs = c->logprobs;
    q->req.top_logprobs = c->top_logprobs;
}

static int build_job(serve_call *c, serve_err *e)
{
    if (c->max_tokens == 0) return 0; /* echo alone: the response is the scores, no job */
    serve_job *j = serve_job_new(c->n_prompts * c->n_choices);
    if (!j) return serve_fail(e, 500, NULL, NULL, "out of memory");
    c->job = j;
    j->owner = c;
    j->owner_free = call_free_owner;
    for (size_t p = 0; p < c->n_prompts; p++)
        for (size_t k = 0; k < c->n_choices; k++) fill_seq(c, &j->seqs[p * c->n_choices + k], p, k);
    if (serve_job_seqs_ready(j)) return serve_fail(e, 500, NULL, NULL, "out of memory");
    return 0;
}

/* -------------------------------------------------------------- parsing */

/* echo (the prompt before the completion, with its logprobs when asked)
 * and vLLM's prompt_logprobs (0..20 alternatives): whole responses only. */
static int parse_echo(json_t *body, serve_call *c, serve_err *e)
{
    long long top = 0;
    if (get_bool(body, "echo", 0, &c->echo, e)) return e->status;
    if (get_int(body, "prompt_logprobs", 0, CIS2_MAX_TOP_LOGPROBS, 0, &top, e)) return e->status;
    c->prompt_lp = opt(body, "prompt_logprobs") != NULL;
    c->prompt_lp_top = (unsigned)top;
    if (get_bool(body, "score_receipt", 0, &c->score_receipt, e)) return e->status;
    if (c->score_receipt && !(c->echo && c->logprobs) && !c->prompt_lp)
        return serve_fail(e, 400, "invalid_value", "score_receipt",
                          "score_receipt needs scored prompts: echo with logprobs, or prompt_logprobs");
    if (c->stream && (c->echo || c->prompt_lp))
        return serve_fail(e, 400, "unsupported_parameter", c->echo ? "echo" : "prompt_logprobs",
                          "%s with stream is not supported: ask for a whole response",
                          c->echo ? "echo" : "prompt_logprobs");
    return 0;
}

static int parse_stream(json_t *body, serve_call *c, serve_err *e)
{
    if (get_bool(body, "stream", 0, &c->stream, e)) return e->status;
    json_t *so = opt(body, "stream_options");
    if (!so) return 0;
    if (!json_is_object(so)) return serve_fail(e, 400, "invalid_type", "stream_options", "stream_options must be an object");
    if (!c->stream) return serve_fail(e, 400, "invalid_value", "stream_options", "stream_options needs stream: true");
    return get_bool(so, "include_usage", 0, &c->include_usage, e);
}

/* Every parameter of a parsed body, in the order their errors are
 * reported (the first one wins), then the job. */
static int parse_params(const serve_ctx *sc, json_t *body, const char *raw, size_t raw_len,
                        const serve_big_num *big, int fd, serve_call *c, serve_err *e)
{
    int chat = c->kind == CALL_CHAT;
    long long n = 1;
    if (!json_is_object(body)) return serve_fail(e, 400, "invalid_type", NULL, "the request body must be a JSON object");
    int rc = known_keys(body, chat ? chat_keys : completion_keys, e);
    if (!rc) rc = serve_body_check(body, big, e);
    if (!rc) rc = serve_check_model(sc, body, 1, e);
    if (!rc) rc = get_int(body, "n", 1, MAX_CHOICES, 1, &n, e);
    if (!rc) rc = neutral_params(body, (size_t)n, e);
    if (!rc) rc = parse_stream(body, c, e);
    if (!rc) rc = parse_logprobs(body, c, e);
    if (!rc && !chat) rc = parse_echo(body, c, e);
    if (!rc) rc = parse_stop(sc, body, c, e);
    if (!rc) rc = parse_sampling(sc, body, raw, raw_len, c, e);
    if (!rc) rc = chat ? chat_prompt(sc, body, c, e) : completion_prompts(sc, body, c, e);
    c->n_choices = (size_t)n;
    if (!rc && c->n_prompts * c->n_choices > sc->cfg.max_batch)
        rc = serve_fail(e, 400, "invalid_value", "n", "prompts x n is %zu, more than --max-batch (%zu)",
                        c->n_prompts * c->n_choices, sc->cfg.max_batch);
    if (!rc) rc = parse_max_tokens(sc, body, c, e);
    if (!rc) rc = build_job(c, e);
    if (!rc) rc = serve_score_prompts(sc, c, fd, e);
    return rc;
}

int serve_call_parse(const serve_ctx *sc, int kind, const char *raw, size_t raw_len, int fd, serve_call **out,
                     serve_err *e)
{
    *out = NULL;
    json_t *body = NULL;
    serve_big_num big;
    if (serve_body_load(raw, raw_len, &body, &big, e)) return e->status;
    serve_call *c = calloc(1, sizeof *c);
    if (!c) { json_decref(body); return serve_fail(e, 500, NULL, NULL, "out of memory"); }
    c->kind = kind;
    c->created = (long long)time(NULL);
    make_id(c->id, sizeof c->id, kind == CALL_CHAT ? "chatcmpl" : "cmpl");
    int rc = parse_params(sc, body, raw, raw_len, &big, fd, c, e);
    json_decref(body);
    if (rc) { serve_call_free(c); return rc; }
    c->met = sc->met;
    *out = c;
    return 0;
}

/*
 * serve_tok.c - the tokenizer endpoints of `cis2 serve`, at the server's
 * root in vLLM's shapes (docs/serving.md "Tokenizer endpoints"), so that
 * an evaluation harness tokenizes with the served model's own tokenizer
 * instead of a copy of its own (lm-evaluation-harness's `remote`
 * tokenizer, docs/eval.md):
 *
 *   GET  /tokenizer_info  what tokenizer_config.json says of the special
 *                         tokens (bos_token, eos_token, pad_token,
 *                         unk_token: their text), the context the server
 *                         enforces (model_max_length, max_model_len), the
 *                         chat template the server found, and a `cis2`
 *                         object with the ids those texts tokenize to;
 *   POST /tokenize        {"prompt": TEXT} or {"messages": [...]} (the
 *                         server's chat template), add_special_tokens ->
 *                         {"count", "max_model_len", "tokens", "token_strs"};
 *   POST /detokenize      {"tokens": [ids]} -> {"prompt": TEXT}.
 *
 * The ids are the library's (cis2_engine_tokenize: added tokens matched
 * first, so a special token's text is its id; with add_special_tokens,
 * cis2_engine_tokenize_prompt, the ids a completion of that text runs on);
 * the text is cis2_engine_detokenize's display text (U+FFFD for bytes that
 * are not UTF-8, as Hugging Face's decode).  A body is refused as the
 * completions' are (one-line OpenAI errors, serve_err.c): unknown keys,
 * wrong types, ids outside the vocabulary, NULs in text; `model` may be
 * left out (vLLM's and lm-evaluation-harness's requests have none) but
 * must name the served model when given.
 *
 * tokenizer_info is built once at start-up (serve_tok_info_build) as
 * text, so requests share no JSON object.
 *
 * Who calls it: serve_main.c (serve_tok_info_build), serve_http.c (the
 * endpoints).  It calls serve_err.c, serve_body.c, serve_chat.c and
 * serve_request.c (serve_check_model).
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ /tokenizer_info */

/* A special token as tokenizer_config.json gives it: a string, or an
 * AddedToken object {"content": ...}; NULL otherwise. */
static const char *special_text(const json_t *tcfg, const char *key, size_t *len)
{
    json_t *v = tcfg ? json_object_get(tcfg, key) : NULL;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

/* The id text tokenizes to, when it is exactly one token; -1 otherwise. */
static long long one_id(const serve_ctx *sc, const char *text, size_t len)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    long long id = -1;
    if (len && cis2_engine_tokenize(sc->e, text, len, &ids, &n, NULL) == CIS2_OK && n == 1) id = ids[0];
    cis2_free(ids);
    return id;
}

/* config.json's first eos id as text, when that text is the token's own
 * (it tokenizes back to exactly that id): the eos_token of a checkpoint
 * without tokenizer_config.json.  *text malloc'ed, NULL when none. */
static char *eos_from_config(const serve_ctx *sc, size_t *len)
{
    if (sc->mi->n_eos == 0 || sc->mi->eos_malformed) return NULL;
    uint32_t id = sc->mi->eos_ids[0];
    char *t = NULL, *out = NULL;
    size_t n = 0;
    if (cis2_engine_detokenize(sc->e, &id, 1, 0, &t, &n, NULL) == CIS2_OK && n &&
        cis2_utf8_chars(t, n) && one_id(sc, t, n) == (long long)id) {
        json_t *probe = json_stringn(t, n); /* valid UTF-8 only */
        if (probe && (out = malloc(n + 1))) { memcpy(out, t, n + 1); *len = n; }
        json_decref(probe);
    }
    cis2_free(t);
    return out;
}

int serve_tok_info_build(serve_ctx *sc, const json_t *tcfg, cis2_error *err)
{
    static const char *const keys[] = {"bos_token", "eos_token", "pad_token", "unk_token"};
    json_t *o = json_object(), *x = json_object();
    json_t *cls = tcfg ? json_object_get(tcfg, "tokenizer_class") : NULL;
    json_object_set_new(o, "tokenizer_class", json_string(json_is_string(cls) ? json_string_value(cls)
                                                                              : "PreTrainedTokenizerFast"));
    for (size_t k = 0; k < 4; k++) {
        size_t len = 0;
        const char *t = special_text(tcfg, keys[k], &len);
        char *own = NULL;
        if (!t && k == 1 && !(tcfg && json_object_get(tcfg, "eos_token")))
            t = own = eos_from_config(sc, &len); /* no tokenizer_config.json eos_token: config.json's */
        json_object_set_new(o, keys[k], t ? json_stringn(t, len) : json_null());
        char idkey[32];
        snprintf(idkey, sizeof idkey, "%s_id", keys[k]);
        long long id = t ? one_id(sc, t, len) : -1;
        json_object_set_new(x, idkey, id >= 0 ? json_integer(id) : json_null());
        free(own);
    }
    json_t *abt = tcfg ? json_object_get(tcfg, "add_bos_token") : NULL;
    if (json_is_boolean(abt)) json_object_set_new(o, "add_bos_token", json_boolean(json_is_true(abt)));
    json_int_t ctx = (json_int_t)sc->mi->max_position_embeddings;
    json_object_set_new(o, "model_max_length", json_integer(ctx));
    json_object_set_new(o, "max_model_len", json_integer(ctx));
    if (sc->chat) {
        size_t chat_len = 0;
        const char *chat_src = serve_chat_text(sc->chat, &chat_len);
        json_object_set_new(o, "chat_template", json_stringn(chat_src, chat_len));
    }
    json_t *eos = json_array();
    for (size_t i = 0; i < sc->mi->n_eos; i++) json_array_append_new(eos, json_integer(sc->mi->eos_ids[i]));
    json_object_set_new(x, "eos_token_ids", eos);
    char h[65];
    cis2_hex(sc->mi->tokenizer_sha256, 32, h);
    json_object_set_new(x, "tokenizer_sha256", json_string(h));
    json_object_set_new(x, "vocab_size", json_integer((json_int_t)sc->mi->vocab_size));
    json_object_set_new(x, "chat_template", sc->chat ? json_string(serve_chat_kind(sc->chat)) : json_null());
    json_object_set_new(x, "chat_template_sha256", sc->chat ? json_string(serve_chat_sha256(sc->chat)) : json_null());
    json_object_set_new(o, "cis2", x);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) return cis2_fail(err, CIS2_E_NOMEM, "out of memory (tokenizer_info)");
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) { free(s); return cis2_fail(err, CIS2_E_NOMEM, "out of memory (tokenizer_info)"); }
    t[n] = '\n';
    t[n + 1] = 0;
    sc->tok_info = t;
    sc->tok_info_len = n + 1;
    return CIS2_OK;
}

/* --------------------------------------------------- request bodies */

#define FAIL(status, code, param, ...)                                                                              \
    do {                                                                                                            \
        serve_fail(e, status, code, param, __VA_ARGS__);                                                            \
        goto out;                                                                                                   \
    } while (0)

static int known(json_t *body, const char *const *keys, serve_err *e)
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

/* key absent or null: dflt; else a boolean */
static int flag(json_t *body, const char *key, int dflt, int *out, serve_err *e)
{
    json_t *v = json_object_get(body, key);
    *out = dflt;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return serve_fail(e, 400, "invalid_type", key, "%s must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* The body as a JSON object with only `keys`, checked as the completions'
 * (numbers jansson refuses, NULs) and naming this model when it names one. */
static json_t *load_body(const serve_ctx *sc, const char *raw, size_t len, const char *const *keys, serve_err *e)
{
    json_t *body = NULL;
    serve_big_num big;
    if (serve_body_load(raw ? raw : "", len, &body, &big, e)) return NULL;
    int rc = !json_is_object(body) ? serve_fail(e, 400, "invalid_type", NULL, "the request body must be a JSON object")
                                   : known(body, keys, e);
    if (!rc) rc = serve_body_check(body, &big, e);
    if (!rc) rc = serve_check_model(sc, body, 0, e);
    if (rc) { json_decref(body); return NULL; }
    return body;
}

/* ------------------------------------------------------------ /tokenize */

json_t *serve_tokenize(const serve_ctx *sc, const char *raw, size_t len, serve_err *e)
{
    static const char *const keys[] = {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt",
                                       "continue_final_message", "return_token_strs", "chat_template",
                                       "chat_template_kwargs", "tools", "documents", NULL};
    json_t *body = load_body(sc, raw, len, keys, e), *out = NULL, *v;
    char *text = NULL;
    uint32_t *ids = NULL;
    size_t n = 0;
    if (!body) return NULL;
    json_t *prompt = json_object_get(body, "prompt"), *msgs = json_object_get(body, "messages");
    if (json_is_null(prompt)) prompt = NULL;
    if (json_is_null(msgs)) msgs = NULL;
    if (prompt && msgs) FAIL(400, "invalid_value", "messages", "give prompt or messages, not both");
    if (!prompt && !msgs) FAIL(400, "missing_parameter", "prompt", "you must provide a prompt (or messages)");
    int special, strs, cont; /* add_generation_prompt: serve_chat_render's */
    if (flag(body, "add_special_tokens", prompt != NULL, &special, e) || flag(body, "return_token_strs", 0, &strs, e) ||
        flag(body, "continue_final_message", 0, &cont, e))
        goto out;
    if (strs)
        FAIL(400, "unsupported_parameter", "return_token_strs",
             "return_token_strs: the vocabulary's token strings are not served; POST /detokenize gives the text of ids");
    if ((v = json_object_get(body, "chat_template")) && !json_is_null(v))
        FAIL(400, "unsupported_parameter", "chat_template",
             "chat_template: this server renders its own chat template only (GET /tokenizer_info has it)");
    if (prompt && (json_object_get(body, "add_generation_prompt") || json_object_get(body, "continue_final_message") ||
                   json_object_get(body, "tools") || json_object_get(body, "documents") ||
                   json_object_get(body, "chat_template_kwargs")))
        FAIL(400, "invalid_value", "prompt",
             "add_generation_prompt, continue_final_message, tools, documents and chat_template_kwargs go with "
             "messages, not with prompt");
    if (cont) FAIL(400, "unsupported_parameter", "continue_final_message", "continue_final_message: only false is supported");
    const char *param = prompt ? "prompt" : "messages";
    const char *s;
    size_t sl;
    if (prompt) {
        if (!json_is_string(prompt)) FAIL(400, "invalid_type", "prompt", "prompt must be a string");
        s = json_string_value(prompt);
        sl = json_string_length(prompt);
    } else {
        if (!sc->chat) FAIL(400, "unsupported_chat_template", "messages", "%s", sc->chat_error);
        if (serve_chat_render(sc->chat, body, &text, &sl, e)) goto out; /* as a chat completion renders it */
        s = text;
    }
    cis2_error err = {0};
    int rc = special ? cis2_engine_tokenize_prompt(sc->e, s, sl, &ids, &n, &err)
                     : cis2_engine_tokenize(sc->e, s, sl, &ids, &n, &err);
    if (rc) FAIL(serve_status_for(rc), serve_status_for(rc) == 400 ? "invalid_value" : NULL, param, "%s: %s", param, err.msg);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    out = json_object();
    json_object_set_new(out, "count", json_integer((json_int_t)n));
    json_object_set_new(out, "max_model_len", json_integer((json_int_t)sc->mi->max_position_embeddings));
    json_object_set_new(out, "tokens", a);
    json_object_set_new(out, "token_strs", json_null());
out:
    cis2_free(ids);
    cis2_free(text);
    json_decref(body);
    return out;
}

/* ---------------------------------------------------------- /detokenize */

json_t *serve_detokenize(const serve_ctx *sc, const char *raw, size_t len, serve_err *e)
{
    static const char *const keys[] = {"model", "tokens", NULL};
    json_t *body = load_body(sc, raw, len, keys, e), *out = NULL;
    uint32_t *ids = NULL;
    char *text = NULL;
    if (!body) return NULL;
    json_t *a = json_object_get(body, "tokens");
    if (!a || json_is_null(a)) FAIL(400, "missing_parameter", "tokens", "you must provide tokens (an array of token ids)");
    if (!json_is_array(a)) FAIL(400, "invalid_type", "tokens", "tokens must be an array of token ids");
    size_t n = json_array_size(a), vocab = sc->mi->vocab_size, tl = 0;
    if (!(ids = malloc((n ? n : 1) * sizeof *ids))) FAIL(503, NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x)) FAIL(400, "invalid_type", "tokens", "tokens[%zu] is not an integer token id", i);
        json_int_t id = json_integer_value(x);
        if (id < 0 || (unsigned long long)id >= vocab)
            FAIL(400, "invalid_value", "tokens", "tokens[%zu] = %lld is not a token id of this model (0..%zu)", i,
                 (long long)id, vocab - 1);
        ids[i] = (uint32_t)id;
    }
    cis2_error err = {0};
    int rc = cis2_engine_detokenize(sc->e, ids, n, 1, &text, &tl, &err); /* display text: U+FFFD for non-UTF-8 */
    if (rc) FAIL(serve_status_for(rc), NULL, "tokens", "tokens: %s", err.msg);
    out = json_object();
    json_object_set_new(out, "prompt", json_stringn(text, tl));
out:
    free(ids);
    cis2_free(text);
    json_decref(body);
    return out;
}

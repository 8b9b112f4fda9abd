/*
 * serve_chat.c - chat templates for /v1/chat/completions, /tokenize's
 * messages and `--render-chat` (docs/serving.md "Chat templates"): the
 * checkpoint's own Jinja template, rendered by the library
 * (cis2_chat_template_*, cis2_toolkit.h section 6, docs/chat.md) with the
 * variables transformers' apply_chat_template passes it.
 *
 * Where the template comes from, first found wins (serve_chat_open):
 * `--chat-template FILE`; DIR/chat_template.jinja; tokenizer_config.json's
 * `chat_template`, a string or transformers' named list
 * [{"name": "default", "template": ...}, {"name": "tool_use", ...}] (the
 * tool_use one for a request with tools, when there is one, as
 * transformers picks).  A file that is there but unreadable fails the
 * start rather than falling through to the next source.  Each template is
 * parsed once and rendered with a one-message conversation at start-up,
 * so a template that cannot render refuses the start in one line.
 *
 * The variables of a render (serve_chat_render), as transformers builds
 * them: tokenizer_config.json's special tokens as text (bos_token,
 * eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: a
 * string or an AddedToken object's "content", left out when null or
 * empty; additional_special_tokens as a list of texts); then the request's
 * chat_template_kwargs spread over them (enable_thinking,
 * reasoning_effort, ...); then messages, tools (null when absent),
 * documents (null when absent) and add_generation_prompt (default true).
 * The messages as OpenAI's API sends them become what templates expect:
 * an assistant tool call's function.arguments, a JSON string in the API,
 * is parsed into the object it holds (as vLLM and transformers' own
 * examples do), and content given as a list of text parts is their texts
 * joined with "\n" (vLLM's "string" content format); every other key
 * (tool_call_id, name, reasoning_content, ...) passes as given, and any
 * role passes (the template decides).  strftime_now formats the time of
 * SOURCE_DATE_EPOCH (UTC) when the environment sets it, so a receipt's
 * prompt can be reproduced; the local time otherwise.
 *
 * Errors are 400s (no retry can succeed): the template's raise_exception
 * gives its message itself (code chat_template_refused); a render that
 * fails (code chat_template_error) or reaches a limit (chat_template_limit)
 * says where.
 *
 * Who calls it: serve_main.c (serve_tokcfg_load, serve_chat_open),
 * serve_request.c (a chat request's prompt), serve_tok.c (/tokenize of
 * messages, /tokenizer_info), serve_http.c (/v1/models).  It calls
 * serve_err.c only.
 */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct serve_chat {
    cis2_chat_template *dflt, *tool_use; /* tool_use NULL: the default serves tools too */
    char *src;                 /* the default template's text (/tokenizer_info) */
    size_t len;
    char origin[4400];         /* where it was found */
    const char *kind;          /* "--chat-template", "chat_template.jinja", "tokenizer_config.json" */
    char sha256[65];
    json_t *specials;          /* the special tokens' text, as transformers' special_tokens_map */
    int pinned;                /* SOURCE_DATE_EPOCH: now is its time */
    struct tm now;
};

/* ------------------------------------------------------------ finding it */

/* Whether a name exists in the model directory (a dangling link does: it
 * is read, and refused, rather than skipped).  Only an absent file passes
 * to the next source; one that is there but unreadable, a FIFO or a
 * directory fails the start (cis2_read_file: exit 3, never blocking), so
 * the server never silently runs another template than the one it was
 * given. */
static int present(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 || errno != ENOENT;
}

int serve_tokcfg_load(const char *model_dir, json_t **root, cis2_error *err)
{
    *root = NULL;
    char path[4200];
    char *buf = NULL;
    size_t n = 0;
    int rc;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir);
    if (!present(path)) return CIS2_OK;
    if ((rc = cis2_read_file(path, (size_t)16 << 20, "tokenizer_config.json", &buf, &n, err))) return rc;
    /* as published: its memory bounded before parsing, and an integer
     * beyond 64 bits (Llama-2's and Llama-3's "model_max_length":
     * 1000000000000000019884624838656) read as the number it is, not a
     * refusal of the file (inputs.md "JSON numbers") */
    char *wide = NULL;
    size_t wlen = 0;
    if ((rc = cis2_json_cost_check(buf, n, (uint64_t)64 << 20, path, "a tokenizer_config.json", err)) ||
        (rc = cis2_json_wide_ints(buf, n, &wide, &wlen, err))) {
        cis2_free(buf);
        return rc;
    }
    json_error_t je;
    json_t *r = json_loadb(wide ? wide : buf, wide ? wlen : n, JSON_REJECT_DUPLICATES, &je);
    cis2_free(buf);
    cis2_free(wide);
    if (!r) return cis2_fail(err, CIS2_E_FORMAT, "%s: not valid JSON (line %d: %s)", path, je.line, je.text);
    if (!json_is_object(r)) {
        json_decref(r);
        return cis2_fail(err, CIS2_E_FORMAT, "%s: not a JSON object", path);
    }
    *root = r;
    return CIS2_OK;
}

/* A template file, at most 1 MiB (docs/chat.md "Limits"), into *src
 * (malloc'ed). */
static int read_template(const char *path, const char *what, char **src, size_t *len, cis2_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    int rc = cis2_read_file(path, (size_t)1 << 20, what, &buf, &n, err);
    if (rc) return rc;
    if (!(*src = malloc(n + 1))) { cis2_free(buf); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    memcpy(*src, buf, n + 1);
    *len = n;
    cis2_free(buf);
    return CIS2_OK;
}

/* tokenizer_config.json's chat_template: a string (*dflt), or the named
 * list (*dflt its "default", *tool_use its "tool_use"; either may be
 * NULL).  Texts point into tcfg. */
static int config_templates(const json_t *ct, const char *path, json_t **dflt, json_t **tool_use, cis2_error *err)
{
    *dflt = *tool_use = NULL;
    if (json_is_string(ct)) { *dflt = (json_t *)ct; return CIS2_OK; }
    if (!json_is_array(ct))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: chat_template is neither a string nor a list of named templates", path);
    for (size_t i = 0; i < json_array_size(ct); i++) {
        json_t *o = json_array_get(ct, i), *nm = json_object_get(o, "name"), *t = json_object_get(o, "template");
        if (!json_is_string(nm) || !json_is_string(t))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: chat_template[%zu] is not {\"name\": TEXT, \"template\": TEXT}",
                             path, i);
        if (!strcmp(json_string_value(nm), "default")) *dflt = t;
        else if (!strcmp(json_string_value(nm), "tool_use")) *tool_use = t;
    }
    if (!*dflt)
        return cis2_fail(err, CIS2_E_FORMAT,
                         "%s: chat_template is a list without a \"default\" template (transformers refuses it too); "
                         "start the server with --chat-template FILE",
                         path);
    return CIS2_OK;
}

/* --------------------------------------------------------- the variables */

/* A special token as tokenizer_config.json gives it: a string, or an
 * AddedToken object {"content": ...}; NULL otherwise. */
static json_t *token_text(const json_t *v)
{
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? (json_t *)v : NULL;
}

/* transformers' special_tokens_map: the special tokens that are set (a
 * non-empty text), by their attribute names. */
static json_t *special_tokens(const json_t *tcfg)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
    json_t *o = json_object();
    for (size_t k = 0; tcfg && k < sizeof keys / sizeof keys[0]; k++) {
        json_t *t = token_text(json_object_get(tcfg, keys[k]));
        if (t && json_string_length(t)) json_object_set(o, keys[k], t);
    }
    json_t *add = tcfg ? json_object_get(tcfg, "additional_special_tokens") : NULL, *list = json_array();
    for (size_t i = 0; json_is_array(add) && i < json_array_size(add); i++) {
        json_t *t = token_text(json_array_get(add, i));
        if (t) json_array_append(list, t);
    }
    if (json_array_size(list)) json_object_set(o, "additional_special_tokens", list);
    json_decref(list);
    return o;
}

/* --------------------------------------------------------------- loading */

static const char *code_name(int rc)
{
    return rc == CIS2_E_USAGE ? "it raised" : rc == CIS2_E_NOMEM ? "a limit" : "an error";
}

/* Parses one template and renders a one-message conversation with it. */
static int load_one(serve_chat *c, const char *src, size_t len, const char *which, cis2_chat_template **out,
                    cis2_error *err)
{
    cis2_error e = {0};
    int rc = cis2_chat_template_parse(src, len, out, &e);
    if (rc) return cis2_fail(err, CIS2_E_FORMAT, "the chat template%s of %.300s does not parse: %s", which, c->origin, e.msg);
    json_t *vars = json_deep_copy(c->specials);
    json_object_set_new(vars, "messages", json_pack("[{s:s,s:s}]", "role", "user", "content", "Hello"));
    json_object_set_new(vars, "tools", json_null());
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_true());
    char *v = json_dumps(vars, JSON_COMPACT);
    json_decref(vars);
    char *text = NULL;
    size_t n = 0;
    rc = v ? cis2_chat_template_render(*out, v, strlen(v), c->pinned ? &c->now : NULL, &text, &n, &e)
           : cis2_fail(&e, CIS2_E_NOMEM, "out of memory");
    free(v);
    cis2_free(text);
    if (rc)
        return cis2_fail(err, CIS2_E_FORMAT,
                         "the chat template%s of %.300s cannot render a one-message conversation (%s): %s", which,
                         c->origin, code_name(rc), e.msg);
    return CIS2_OK;
}

/* SOURCE_DATE_EPOCH: seconds since the epoch, the time strftime_now
 * formats (in UTC); unset or empty: the local time of each render. */
static int source_date(serve_chat *c, cis2_error *err)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    if (!s || !*s) return CIS2_OK;
    char *end = NULL;
    errno = 0;
    long long t = strtoll(s, &end, 10);
    time_t tt = (time_t)t;
    if (errno || *end || t < 0 || !gmtime_r(&tt, &c->now))
        return cis2_fail(err, CIS2_E_USAGE, "SOURCE_DATE_EPOCH=%.40s is not a number of seconds since 1970", s);
    c->pinned = 1;
    return CIS2_OK;
}

int serve_chat_open(const char *model_dir, const char *file, const json_t *tcfg, serve_chat **out, cis2_error *err)
{
    *out = NULL;
    char path[4300];
    char *src = NULL, *tool_src = NULL;
    size_t len = 0, tool_len = 0;
    int rc = CIS2_OK;
    serve_chat *c = calloc(1, sizeof *c);
    if (!c) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/chat_template.jinja", model_dir);
    json_t *ct = tcfg ? json_object_get(tcfg, "chat_template") : NULL;
    if (file) {
        snprintf(c->origin, sizeof c->origin, "%s", file);
        c->kind = "--chat-template";
        rc = read_template(file, "--chat-template", &src, &len, err);
    } else if (present(path)) {
        snprintf(c->origin, sizeof c->origin, "%s", path);
        c->kind = "chat_template.jinja";
        rc = read_template(path, "chat_template.jinja", &src, &len, err);
    } else if (ct && !json_is_null(ct)) {
        json_t *d = NULL, *tu = NULL;
        snprintf(c->origin, sizeof c->origin, "%s/tokenizer_config.json", model_dir);
        c->kind = "tokenizer_config.json";
        rc = config_templates(ct, c->origin, &d, &tu, err);
        if (!rc && !(src = strdup(json_string_value(d)))) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        len = d ? json_string_length(d) : 0;
        if (!rc && tu && !(tool_src = strdup(json_string_value(tu)))) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        tool_len = tu ? json_string_length(tu) : 0;
    } else {
        free(c);
        return CIS2_OK; /* none: chat requests say how to give one */
    }
    c->specials = special_tokens(tcfg);
    if (!rc) rc = source_date(c, err);
    if (!rc) {
        c->src = src;
        c->len = len;
        src = NULL;
        uint8_t d[32];
        cis2_sha256(c->src, c->len, d);
        cis2_hex(d, 32, c->sha256);
        rc = load_one(c, c->src, c->len, "", &c->dflt, err);
    }
    if (!rc && tool_src) rc = load_one(c, tool_src, tool_len, " \"tool_use\"", &c->tool_use, err);
    free(src);
    free(tool_src);
    if (rc) { serve_chat_free(c); return rc; }
    *out = c;
    return CIS2_OK;
}

void serve_chat_free(serve_chat *c)
{
    if (!c) return;
    cis2_chat_template_free(c->dflt);
    cis2_chat_template_free(c->tool_use);
    json_decref(c->specials);
    free(c->src);
    free(c);
}

const char *serve_chat_origin(const serve_chat *c) { return c->origin; }
const char *serve_chat_kind(const serve_chat *c) { return c->kind; }
const char *serve_chat_sha256(const serve_chat *c) { return c->sha256; }
const char *serve_chat_text(const serve_chat *c, size_t *len)
{
    *len = c->len;
    return c->src;
}

/* -------------------------------------------------------------- messages */

/* content as templates expect it: a string or null as given; a list of
 * text parts joined with "\n" (vLLM's "string" content format). */
static int norm_content(json_t *m, const char *param, serve_err *e)
{
    json_t *ct = json_object_get(m, "content");
    if (!ct || json_is_null(ct) || json_is_string(ct)) return 0;
    if (!json_is_array(ct))
        return serve_fail(e, 400, "invalid_type", param,
                          "%s.content must be a string, null or a list of text parts", param);
    size_t total = 0, n = json_array_size(ct);
    for (size_t j = 0; j < n; j++) {
        json_t *p = json_array_get(ct, j), *ty = json_object_get(p, "type"), *tx = json_object_get(p, "text");
        if (!json_is_object(p) || !json_is_string(ty))
            return serve_fail(e, 400, "invalid_type", param, "%s.content[%zu] must be an object with a type", param, j);
        if (strcmp(json_string_value(ty), "text"))
            return serve_fail(e, 400, "unsupported_parameter", param,
                              "%s.content[%zu]: '%.40s' parts are not supported (text only)", param, j,
                              json_string_value(ty));
        if (!json_is_string(tx))
            return serve_fail(e, 400, "invalid_type", param, "%s.content[%zu].text must be a string", param, j);
        total += json_string_length(tx) + 1;
    }
    char *s = malloc(total + 1), *q = s;
    if (!s) return serve_fail(e, 503, NULL, NULL, "out of memory");
    for (size_t j = 0; j < n; j++) {
        json_t *tx = json_object_get(json_array_get(ct, j), "text");
        if (j) *q++ = '\n';
        memcpy(q, json_string_value(tx), json_string_length(tx));
        q += json_string_length(tx);
    }
    json_object_set_new(m, "content", json_stringn(s, (size_t)(q - s)));
    free(s);
    return 0;
}

/* An assistant's tool_calls: function.arguments, a JSON string in
 * OpenAI's API, becomes the value it holds. */
static int norm_tool_calls(json_t *m, const char *param, serve_err *e)
{
    json_t *tc = json_object_get(m, "tool_calls");
    if (!tc || json_is_null(tc)) return 0;
    if (!json_is_array(tc)) return serve_fail(e, 400, "invalid_type", param, "%s.tool_calls must be a list", param);
    for (size_t j = 0; j < json_array_size(tc); j++) {
        json_t *call = json_array_get(tc, j), *fn = json_object_get(call, "function");
        if (!json_is_object(call) || !json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return serve_fail(e, 400, "invalid_type", param,
                              "%s.tool_calls[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ..., "
                              "\"arguments\": ...}}", param, j);
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_string(args)) continue; /* already an object (or absent): as given */
        json_error_t je;
        json_t *v = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, &je);
        if (!v)
            return serve_fail(e, 400, "invalid_value", param,
                              "%s.tool_calls[%zu].function.arguments is not valid JSON (%s)", param, j, je.text);
        json_object_set_new(fn, "arguments", v);
    }
    return 0;
}

/* The request's messages, checked, as the template reads them (a new
 * array; the body is left as it is). */
static json_t *norm_messages(const json_t *messages, serve_err *e)
{
    if (!messages || json_is_null(messages))
        return serve_fail(e, 400, "missing_parameter", "messages", "you must provide messages"), NULL;
    if (!json_is_array(messages))
        return serve_fail(e, 400, "invalid_type", "messages", "messages must be an array"), NULL;
    if (json_array_size(messages) == 0)
        return serve_fail(e, 400, "invalid_value", "messages", "messages must not be empty"), NULL;
    json_t *out = json_deep_copy(messages);
    if (!out) return serve_fail(e, 503, NULL, NULL, "out of memory"), NULL;
    for (size_t i = 0; i < json_array_size(out); i++) {
        json_t *m = json_array_get(out, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        int bad = 0;
        if (!json_is_object(m)) bad = serve_fail(e, 400, "invalid_type", param, "%s must be an object", param);
        else if (!json_is_string(json_object_get(m, "role")))
            bad = serve_fail(e, 400, "invalid_type", param, "%s.role must be a string", param);
        if (!bad) bad = norm_content(m, param, e);
        if (!bad) bad = norm_tool_calls(m, param, e);
        if (bad) { json_decref(out); return NULL; }
    }
    return out;
}

/* --------------------------------------------------------------- render */

/* The value of key, NULL when absent or null. */
static json_t *opt(const json_t *body, const char *key)
{
    json_t *v = json_object_get(body, key);
    return json_is_null(v) ? NULL : v;
}

/* tools, tool_choice, documents, chat_template_kwargs, add_generation_prompt. */
static int check_fields(const json_t *body, int *agp, serve_err *e)
{
    json_t *tools = opt(body, "tools"), *tc = opt(body, "tool_choice"), *docs = opt(body, "documents"),
           *kw = opt(body, "chat_template_kwargs"), *a = opt(body, "add_generation_prompt");
    *agp = 1;
    if (a && !json_is_boolean(a))
        return serve_fail(e, 400, "invalid_type", "add_generation_prompt", "add_generation_prompt must be a boolean");
    if (a) *agp = json_is_true(a);
    if (tools && !json_is_array(tools)) return serve_fail(e, 400, "invalid_type", "tools", "tools must be a list");
    for (size_t i = 0; tools && i < json_array_size(tools); i++)
        if (!json_is_object(json_array_get(tools, i)))
            return serve_fail(e, 400, "invalid_type", "tools", "tools[%zu] must be an object", i);
    if (docs && !json_is_array(docs)) return serve_fail(e, 400, "invalid_type", "documents", "documents must be a list");
    /* tool_choice: "none" and "auto" are what the template and the model
     * decide alone (the tools are in the prompt either way, as vLLM does
     * by default); "required" and a named function need constrained
     * decoding, which cis2 does not do */
    if (tc && !(json_is_string(tc) && (!strcmp(json_string_value(tc), "none") || !strcmp(json_string_value(tc), "auto"))))
        return serve_fail(e, 400, "unsupported_parameter", "tool_choice",
                          "tool_choice: only \"none\" and \"auto\" are supported (\"required\" and a named function "
                          "need constrained decoding)");
    if (tc && !strcmp(json_string_value(tc), "auto") && !(tools && json_array_size(tools)))
        return serve_fail(e, 400, "invalid_value", "tool_choice", "tool_choice \"auto\" needs tools");
    if (kw && !json_is_object(kw))
        return serve_fail(e, 400, "invalid_type", "chat_template_kwargs", "chat_template_kwargs must be an object");
    static const char *const own[] = {"messages", "tools", "documents", "add_generation_prompt"};
    for (size_t i = 0; kw && i < 4; i++)
        if (json_object_get(kw, own[i]))
            return serve_fail(e, 400, "invalid_value", "chat_template_kwargs",
                              "chat_template_kwargs.%s: give %s as the request's own field", own[i], own[i]);
    return 0;
}

int serve_chat_render(const serve_chat *c, const json_t *body, char **out, size_t *len, serve_err *e)
{
    *out = NULL;
    *len = 0;
    int agp;
    if (check_fields(body, &agp, e)) return e->status;
    json_t *msgs = norm_messages(json_object_get(body, "messages"), e);
    if (!msgs) return e->status;
    json_t *tools = opt(body, "tools"), *docs = opt(body, "documents"), *kw = opt(body, "chat_template_kwargs");
    json_t *vars = json_deep_copy(c->specials);
    if (kw) json_object_update(vars, kw);
    json_object_set_new(vars, "messages", msgs);
    json_object_set(vars, "tools", tools ? tools : json_null());
    json_object_set(vars, "documents", docs ? docs : json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(agp));
    char *v = json_dumps(vars, JSON_COMPACT | JSON_ALLOW_NUL);
    json_decref(vars);
    if (!v) return serve_fail(e, 503, NULL, NULL, "out of memory");
    const cis2_chat_template *t = tools && c->tool_use ? c->tool_use : c->dflt;
    cis2_error err = {0};
    char *text = NULL;
    size_t n = 0;
    int rc = cis2_chat_template_render(t, v, strlen(v), c->pinned ? &c->now : NULL, &text, &n, &err);
    free(v);
    if (rc == CIS2_E_USAGE) return serve_fail(e, 400, "chat_template_refused", "messages", "%s", err.msg);
    if (rc == CIS2_E_NOMEM)
        return serve_fail(e, 400, "chat_template_limit", "messages", "the chat template cannot render these messages "
                          "within its limits (docs/chat.md \"Limits\"): %s", err.msg);
    if (rc)
        return serve_fail(e, 400, "chat_template_error", "messages", "the chat template failed on these messages: %s",
                          err.msg);
    if (n == 0) {
        cis2_free(text);
        return serve_fail(e, 400, "invalid_value", "messages", "the chat template rendered no text for these messages");
    }
    *out = text;
    *len = n;
    return 0;
}

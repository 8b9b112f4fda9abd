/*
 * serve_parse.c - a chat model's generated text -> content,
 * reasoning_content and tool_calls (serve_parse.h; docs/chat-output.md
 * "Tool calls and reasoning", whose rules this file implements section
 * by section).
 *
 * Three layers, each a state machine over a buffer of the bytes it has
 * not decided yet:
 *
 *   think    (SERVE_REASON_THINK)   <think>...</think> -> reasoning; the
 *            rest goes on to the tool layer
 *   tool     (hermes, llama3_json, mistral) the content stream -> content
 *            and tool calls
 *   harmony  (gpt-oss) one machine for both: headers, channels, bodies
 *
 * and one output stage: every byte that is decided goes through out_text
 * (which holds an incomplete UTF-8 sequence back) into rec, which appends
 * it to the whole parse (content, reasoning, a call's arguments) and to
 * the delta list.  finish runs each layer once more with `final` set (a
 * partial tag can no longer complete) and then flushes what waited, so a
 * whole response and any split of it into pieces give the same fields.
 *
 * Who calls it: the server's chat responses (serve_response.c,
 * serve_stream.c) once hooked up; tests/unit/test_serve_parse.c (compiled
 * in) and tests/oracle/t_tool_parse.sh through it.  It calls serve_buf.c,
 * jansson and cis2_utf8_unit.
 */
#include "serve_parse.h"
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* chat-output.md "Which convention": first matching row wins. */
static const struct { const char *needle; serve_tool_style t; } tool_rows[] = {
    {"<|channel|>", SERVE_TOOLS_HARMONY},
    {"<tool_call>", SERVE_TOOLS_HERMES},
    {"[TOOL_CALLS]", SERVE_TOOLS_MISTRAL},
    {"<|python_tag|>", SERVE_TOOLS_LLAMA3_JSON},
    {"\"parameters\": ", SERVE_TOOLS_LLAMA3_JSON},
};
static const struct { const char *needle; serve_reason_style r; } reason_rows[] = {
    {"<|channel|>", SERVE_REASON_HARMONY},
    {"<think>", SERVE_REASON_THINK},
};
/* The option values (vLLM's names for the same conventions beside ours). */
static const struct { const char *name; serve_tool_style t; } tool_names[] = {
    {"none", SERVE_TOOLS_NONE},       {"hermes", SERVE_TOOLS_HERMES},   {"qwen3_xml", SERVE_TOOLS_HERMES},
    {"qwen3_coder", SERVE_TOOLS_HERMES}, {"llama3_json", SERVE_TOOLS_LLAMA3_JSON},
    {"mistral", SERVE_TOOLS_MISTRAL}, {"harmony", SERVE_TOOLS_HARMONY}, {"openai", SERVE_TOOLS_HARMONY},
};
static const struct { const char *name; serve_reason_style r; } reason_names[] = {
    {"none", SERVE_REASON_NONE},     {"think", SERVE_REASON_THINK},     {"qwen3", SERVE_REASON_THINK},
    {"deepseek_r1", SERVE_REASON_THINK}, {"harmony", SERVE_REASON_HARMONY},
    {"openai_gptoss", SERVE_REASON_HARMONY},
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A harmony header longer than this is not one (chat-output.md, harmony). */
#define HDR_MAX 512

static int has(const char *s, size_t n, const char *needle)
{
    size_t l = strlen(needle);
    for (size_t i = 0; l <= n && i <= n - l; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, l)) return 1;
    return 0;
}

void serve_parse_detect(const char *tmpl, size_t len, serve_parse_cfg *out)
{
    out->tools = SERVE_TOOLS_NONE;
    out->reasoning = SERVE_REASON_NONE;
    for (size_t i = 0; i < COUNT(tool_rows); i++)
        if (has(tmpl, len, tool_rows[i].needle)) { out->tools = tool_rows[i].t; break; }
    for (size_t i = 0; i < COUNT(reason_rows); i++)
        if (has(tmpl, len, reason_rows[i].needle)) { out->reasoning = reason_rows[i].r; break; }
}

int serve_parse_tool_name(const char *name, serve_tool_style *out)
{
    for (size_t i = 0; i < COUNT(tool_names); i++)
        if (!strcmp(name, tool_names[i].name)) { *out = tool_names[i].t; return 0; }
    return -1;
}

int serve_parse_reason_name(const char *name, serve_reason_style *out)
{
    for (size_t i = 0; i < COUNT(reason_names); i++)
        if (!strcmp(name, reason_names[i].name)) { *out = reason_names[i].r; return 0; }
    return -1;
}

const char *serve_parse_tool_str(serve_tool_style t)
{
    static const char *const s[] = {"none", "hermes", "llama3_json", "mistral", "harmony"};
    return (unsigned)t < COUNT(s) ? s[t] : "?";
}

const char *serve_parse_reason_str(serve_reason_style r)
{
    static const char *const s[] = {"none", "think", "harmony"};
    return (unsigned)r < COUNT(s) ? s[r] : "?";
}

const char *serve_parse_cfg_check(const serve_parse_cfg *cfg)
{
    if ((unsigned)cfg->tools > SERVE_TOOLS_HARMONY || (unsigned)cfg->reasoning > SERVE_REASON_HARMONY)
        return "unknown tool or reasoning parser";
    if (cfg->tools == SERVE_TOOLS_HARMONY && cfg->reasoning == SERVE_REASON_THINK)
        return "tool parser harmony needs reasoning parser harmony or none";
    if (cfg->reasoning == SERVE_REASON_HARMONY && cfg->tools != SERVE_TOOLS_HARMONY && cfg->tools != SERVE_TOOLS_NONE)
        return "reasoning parser harmony needs tool parser harmony or none";
    return NULL;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int serve_parse_prompt_in_think(const char *prompt, size_t len)
{
    while (len && is_ws(prompt[len - 1])) len--;
    return len >= 7 && !memcmp(prompt + len - 7, "<think>", 7);
}

/* --------------------------------------------------------------- state */

typedef struct pcall {
    char *id, *name;
    serve_buf args;
} pcall;

typedef struct drec {
    serve_delta_kind kind;
    size_t tool, off, len;
} drec;

enum { T_PASS, T_START, T_LEAD, T_REASON, T_CLEAD };   /* think layer */
enum { L_PASS, L_TEXT, L_BLOCK, L_START };              /* tool layer */
enum { G_HEAD, G_BODY, G_OUT };                         /* harmony */
enum { K_CONTENT, K_REASONING, K_TOOL };                /* a harmony body's kind */

struct serve_parse {
    serve_parse_cfg cfg;
    int tools_on, harmony;
    const json_t *tools;
    char *id_prefix;
    int finished, oom, taken;

    int ts;            /* think layer */
    serve_buf tp;
    size_t t_held;     /* tp[0..t_held): white space (newlines in T_REASON) that
                        * waits, already scanned: each byte is looked at once */
    int ls;            /* tool layer */
    serve_buf lp, lead;
    size_t l_held;     /* the same for lp */
    size_t scan_from;
    int after_call;
    int hs, h_first, h_kind, h_args; /* harmony */
    size_t h_tool;
    const char *h_open;
    serve_buf hp;

    unsigned char ub[4]; /* an incomplete UTF-8 sequence held back */
    size_t un, ut;
    serve_delta_kind uk;

    serve_buf content, reasoning;
    pcall *calls;
    size_t n_calls, cap_calls;
    drec *dr;
    size_t n_dr, cap_dr;
    serve_buf dtext;
    serve_parse_delta *pub;
    size_t cap_pub;
};

/* ------------------------------------------------------ output stage */

/* An empty buffer with memory: p is never NULL, and NUL-terminated. */
static int buf_init(serve_buf *b)
{
    if (serve_buf_reserve(b, 64)) return -1;
    b->p[0] = 0;
    return 0;
}

/* Drops b[0..k): nothing to move when k is 0 (a buffer that waits is not
 * moved once per piece). */
static void cut(serve_buf *b, size_t k)
{
    if (k) serve_buf_cut(b, k);
}

/* One more record in the delta list. */
static void dr_push(serve_parse *p, drec d)
{
    if (p->n_dr == p->cap_dr) {
        size_t nc = p->cap_dr ? 2 * p->cap_dr : 16;
        drec *nd = realloc(p->dr, nc * sizeof *nd);
        if (!nd) { p->oom = 1; return; }
        p->dr = nd;
        p->cap_dr = nc;
    }
    p->dr[p->n_dr++] = d;
}

/* Appends decided bytes to the whole parse and the delta list. */
static void rec(serve_parse *p, serve_delta_kind kind, size_t tool, const void *s, size_t n)
{
    if (!n) return;
    if (kind == SERVE_DELTA_CONTENT) serve_buf_put(&p->content, s, n);
    else if (kind == SERVE_DELTA_REASONING) serve_buf_put(&p->reasoning, s, n);
    else serve_buf_put(&p->calls[tool].args, s, n);
    if (p->n_dr && p->dr[p->n_dr - 1].kind == kind && p->dr[p->n_dr - 1].tool == tool &&
        p->dr[p->n_dr - 1].off + p->dr[p->n_dr - 1].len == p->dtext.n) {
        p->dr[p->n_dr - 1].len += n;
    } else {
        dr_push(p, (drec){kind, tool, p->dtext.n, n});
    }
    serve_buf_put(&p->dtext, s, n);
}

static void utf8_flush(serve_parse *p)
{
    if (p->un) rec(p, p->uk, p->ut, p->ub, p->un);
    p->un = 0;
}

/* How many bytes at the end of s[0..n) are a valid UTF-8 start that the
 * end cut short (the library's decoder decides). */
static size_t utf8_tail(const unsigned char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && n - i < 3 && (s[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0 || s[i - 1] < 0xC0) return 0;
    uint32_t cp;
    int v;
    cis2_utf8_unit(s + i - 1, n - i + 1, &cp, &v);
    return v < 0 ? n - i + 1 : 0;
}

/* Decided text of one kind: all of it but an incomplete UTF-8 sequence at
 * its end, which waits for the next text of the same kind (or a flush). */
static void out_text(serve_parse *p, serve_delta_kind kind, size_t tool, const char *s, size_t n)
{
    if (!n) return;
    const unsigned char *u = (const unsigned char *)s;
    if (kind == SERVE_DELTA_TOOL_ARGS) p->h_args = 1;
    if (p->un && (p->uk != kind || p->ut != tool)) utf8_flush(p);
    if (p->un) {
        int v = -1;
        while (n && p->un < 4) {
            p->ub[p->un++] = *u++;
            n--;
            uint32_t cp;
            cis2_utf8_unit(p->ub, p->un, &cp, &v);
            if (v >= 0) break;
        }
        if (v < 0 && !n) return;
        utf8_flush(p);
        if (!n) return;
    }
    size_t t = utf8_tail(u, n);
    rec(p, kind, tool, u, n - t);
    memcpy(p->ub, u + n - t, t);
    p->un = t;
    p->uk = kind;
    p->ut = tool;
}

/* A tool call begins: its index. */
static size_t out_call(serve_parse *p, const char *name, size_t nlen)
{
    utf8_flush(p);
    if (p->n_calls == p->cap_calls) {
        size_t nc = p->cap_calls ? 2 * p->cap_calls : 4;
        pcall *ncalls = realloc(p->calls, nc * sizeof *ncalls);
        if (!ncalls) { p->oom = 1; return 0; }
        p->calls = ncalls;
        p->cap_calls = nc;
    }
    size_t k = p->n_calls;
    pcall *c = &p->calls[k];
    memset(c, 0, sizeof *c);
    c->name = malloc(nlen + 1);
    size_t il = strlen(p->id_prefix) + 24;
    c->id = malloc(il);
    if (!c->name || !c->id) {
        free(c->name);
        free(c->id);
        p->oom = 1;
        return 0;
    }
    memcpy(c->name, name, nlen);
    c->name[nlen] = 0;
    if (buf_init(&c->args)) {
        free(c->name);
        free(c->id);
        p->oom = 1;
        return 0;
    }
    snprintf(c->id, il, "%s%zu", p->id_prefix, k);
    p->n_calls++;
    dr_push(p, (drec){SERVE_DELTA_TOOL_START, k, 0, 0});
    return k;
}

/* ------------------------------------------------------ marker scan */

/* The first place in s[0..n) where one of mk[0..nm) occurs, or (unless
 * final) may still occur once more bytes come: the marker's index with
 * *at its start, or -1 with *at where a proper prefix of a marker runs to
 * the end (n when none, or final).  Bytes before *at are decided. */
static int scan(const char *s, size_t n, const char *const *mk, int nm, size_t *at, int final)
{
    for (size_t i = 0; i < n; i++) {
        int part = 0;
        for (int k = 0; k < nm; k++) {
            if (s[i] != mk[k][0]) continue;
            size_t l = strlen(mk[k]), r = n - i;
            if (r >= l) {
                if (!memcmp(s + i, mk[k], l)) { *at = i; return k; }
            } else if (!final && !memcmp(s + i, mk[k], r)) {
                part = 1;
            }
        }
        if (part) { *at = i; return -1; }
    }
    *at = n;
    return -1;
}

static int starts(const char *s, size_t n, const char *w)
{
    size_t l = strlen(w);
    return n >= l && !memcmp(s, w, l);
}

/* s[0..n) is a proper prefix of w (empty included): w may still come. */
static int may_start(const char *s, size_t n, const char *w)
{
    return n < strlen(w) && !memcmp(s, w, n);
}

/* ---------------------------------------------------- JSON, by span */

/* jansson validates and decodes; these find where a value's text lies,
 * so that arguments pass on as the model wrote them (chat-output.md
 * "Arguments").  Each returns the index after what it skipped, 0 when
 * the text is not there. */
static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return 0;
}

static size_t skip_value(const char *s, size_t n, size_t i)
{
    if (i >= n) return 0;
    if (s[i] == '"') return skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        size_t depth = 0;
        for (; i < n; i++) {
            char c = s[i];
            if (c == '"') {
                size_t e = skip_string(s, n, i);
                if (!e) return 0;
                i = e - 1;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
        }
        return 0;
    }
    size_t b = i;
    while (i < n && !strchr(",}]; \t\r\n", s[i])) i++;
    return i > b ? i : 0;
}

/* The key at s[ks..ke) (with its quotes) is `want`. */
static int key_is(const char *s, size_t ks, size_t ke, const char *want)
{
    size_t wl = strlen(want);
    if (!memchr(s + ks, '\\', ke - ks)) return ke - ks == wl + 2 && !memcmp(s + ks + 1, want, wl);
    json_t *k = json_loadb(s + ks, ke - ks, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    int r = json_is_string(k) && json_string_length(k) == wl && !memcmp(json_string_value(k), want, wl);
    json_decref(k);
    return r;
}

/* The span of the last member `key` of the (valid) object s[0..n). */
static int member_span(const char *s, size_t n, const char *key, size_t *vs, size_t *ve)
{
    int found = 0;
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') return 0;
    i = skip_ws(s, n, i + 1);
    while (i < n && s[i] != '}') {
        size_t ke = skip_string(s, n, i);
        if (!ke) return 0;
        size_t v = skip_ws(s, n, ke);
        if (v >= n || s[v] != ':') return 0;
        v = skip_ws(s, n, v + 1);
        size_t e = skip_value(s, n, v);
        if (!e) return 0;
        if (key_is(s, i, ke, key)) { *vs = v; *ve = e; found = 1; }
        i = skip_ws(s, n, e);
        if (i < n && s[i] == ',') i = skip_ws(s, n, i + 1);
    }
    return found;
}

/* --------------------------------------------------- calls found */

typedef struct found {
    struct { serve_buf name, args; } *c;
    size_t n, cap;
    int oom;
} found;

static void found_free(found *f)
{
    for (size_t i = 0; i < f->n; i++) {
        serve_buf_free(&f->c[i].name);
        serve_buf_free(&f->c[i].args);
    }
    free(f->c);
    memset(f, 0, sizeof *f);
}

static int found_add(found *f)
{
    if (f->n == f->cap) {
        size_t nc = f->cap ? 2 * f->cap : 4;
        void *nv = realloc(f->c, nc * sizeof *f->c);
        if (!nv) { f->oom = 1; return -1; }
        f->c = nv;
        f->cap = nc;
    }
    memset(&f->c[f->n], 0, sizeof f->c[f->n]);
    f->n++;
    return 0;
}

/* One call written as the JSON object s[0..n): {"name": a non-empty
 * string, K: an object (its text) or a string (its value)} for the first
 * key K of keys[] that the object has; other members are ignored.  0, or
 * -1: not a call. */
static int json_call(found *f, const char *s, size_t n, const char *const *keys, int nk)
{
    json_t *o = json_loadb(s, n, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, NULL);
    int rc = -1;
    if (!json_is_object(o)) goto out;
    json_t *nm = json_object_get(o, "name");
    if (!json_is_string(nm) || !json_string_length(nm) || strlen(json_string_value(nm)) != json_string_length(nm))
        goto out;
    for (int k = 0; k < nk; k++) {
        json_t *a = json_object_get(o, keys[k]);
        if (!a) continue;
        size_t vs, ve;
        if (json_is_object(a) && member_span(s, n, keys[k], &vs, &ve)) {
            if (found_add(f)) goto out;
            serve_buf_put(&f->c[f->n - 1].args, s + vs, ve - vs);
        } else if (json_is_string(a)) {
            if (found_add(f)) goto out;
            serve_buf_put(&f->c[f->n - 1].args, json_string_value(a), json_string_length(a));
        } else {
            goto out;
        }
        serve_buf_put(&f->c[f->n - 1].name, json_string_value(nm), json_string_length(nm));
        rc = 0;
        break;
    }
out:
    json_decref(o);
    return rc;
}

static void trim(const char **s, size_t *n)
{
    while (*n && is_ws(**s)) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

/* The schema's type of parameter `key` of function `fn` in the request's
 * tools (a string or a list of them), or NULL. */
static const json_t *param_type(const json_t *tools, const char *fn, const char *key, size_t klen)
{
    size_t i;
    json_t *t;
    if (!json_is_array(tools)) return NULL;
    json_array_foreach((json_t *)tools, i, t) {
        json_t *f = json_object_get(t, "function");
        json_t *nm = json_object_get(f, "name");
        if (!json_is_string(nm) || strcmp(json_string_value(nm), fn)) continue;
        json_t *props = json_object_get(json_object_get(f, "parameters"), "properties");
        if (!json_is_object(props)) return NULL;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)props, k, v) {
            if (strlen(k) == klen && !memcmp(k, key, klen)) return json_object_get(v, "type");
        }
        return NULL;
    }
    return NULL;
}

/* A <parameter=K> value v[0..n) as JSON text, by the schema's type
 * (chat-output.md "Qwen3.5's XML form"): a string unless the type is a
 * number, boolean, null, object or array type and the value reads as one. */
static void param_value(serve_buf *out, const json_t *type, const char *v, size_t n)
{
    const char *t = v;
    size_t tn = n;
    trim(&t, &tn);
    size_t nt = json_is_array(type) ? json_array_size(type) : 1;
    for (size_t i = 0; i < nt; i++) {
        const json_t *ti = json_is_array(type) ? json_array_get(type, i) : type;
        const char *ty = json_string_value(ti);
        if (!ty || !tn) continue;
        if (!strcmp(ty, "boolean")) {
            if ((tn == 4 && (!memcmp(t, "true", 4) || !memcmp(t, "True", 4)))) { serve_buf_str(out, "true"); return; }
            if ((tn == 5 && (!memcmp(t, "false", 5) || !memcmp(t, "False", 5)))) { serve_buf_str(out, "false"); return; }
        } else if (!strcmp(ty, "null")) {
            if ((tn == 4 && (!memcmp(t, "null", 4) || !memcmp(t, "None", 4)))) { serve_buf_str(out, "null"); return; }
        } else if (!strcmp(ty, "integer") || !strcmp(ty, "number") || !strcmp(ty, "object") || !strcmp(ty, "array")) {
            json_t *j = json_loadb(t, tn, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, NULL);
            int ok = (ty[0] == 'o' && json_is_object(j)) || (ty[0] == 'a' && json_is_array(j)) ||
                     ((ty[0] == 'i' || ty[0] == 'n') && json_is_number(j));
            json_decref(j);
            if (ok) { serve_buf_put(out, t, tn); return; }
        }
    }
    json_t *s = json_stringn(v, n);
    char *d = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    if (d) serve_buf_str(out, d);
    else out->oom = 1; /* invalid UTF-8 or no memory: xml_call refuses it */
    free(d);
    json_decref(s);
}

/* find s[i..n) for w: its index, or n. */
static size_t find(const char *s, size_t n, size_t i, const char *w)
{
    size_t l = strlen(w);
    for (; l <= n && i <= n - l; i++)
        if (s[i] == w[0] && !memcmp(s + i, w, l)) return i;
    return n;
}

/* <function=NAME> (<parameter=K>\nVALUE\n</parameter>)* </function> */
static int xml_call(const serve_parse *p, found *f, const char *s, size_t n)
{
    if (!starts(s, n, "<function=")) return -1;
    size_t gt = find(s, n, 10, ">");
    const char *nm = s + 10;
    size_t nl = gt - 10;
    if (gt >= n || memchr(nm, '<', nl) || memchr(nm, '\n', nl)) return -1;
    trim(&nm, &nl);
    if (!nl || memchr(nm, 0, nl)) return -1;
    serve_buf name = {0}, args = {0};
    serve_buf_put(&name, nm, nl);
    serve_buf_str(&args, "{");
    size_t i = gt + 1;
    int first = 1;
    for (;;) {
        i = skip_ws(s, n, i);
        if (starts(s + i, n - i, "</function>")) { i += 11; break; }
        if (!starts(s + i, n - i, "<parameter=")) goto out;
        size_t kg = find(s, n, i + 11, ">");
        const char *k = s + i + 11;
        size_t kl = kg - (i + 11);
        if (kg >= n || memchr(k, '<', kl) || memchr(k, '\n', kl)) goto out;
        trim(&k, &kl);
        if (!kl) goto out;
        size_t vs = kg + 1, ve = find(s, n, vs, "</parameter>");
        if (ve >= n) goto out;
        i = ve + 12;
        if (vs < ve && s[vs] == '\n') vs++;
        if (ve > vs && s[ve - 1] == '\n') ve--;
        json_t *ks = json_stringn(k, kl);
        char *kd = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (!kd) goto out;
        if (!first) serve_buf_str(&args, ", ");
        first = 0;
        serve_buf_str(&args, kd);
        serve_buf_str(&args, ": ");
        free(kd);
        param_value(&args, param_type(p->tools, name.p, k, kl), s + vs, ve - vs);
        if (args.oom) goto out;
    }
    if (skip_ws(s, n, i) != n) goto out;
    serve_buf_str(&args, "}");
    if (name.oom || args.oom || found_add(f)) goto out;
    f->c[f->n - 1].name = name;
    f->c[f->n - 1].args = args;
    return 0;
out:
    serve_buf_free(&name);
    serve_buf_free(&args);
    return -1;
}

static const char *const ARGS_HERMES[] = {"arguments"};
static const char *const ARGS_LLAMA[] = {"parameters", "arguments"};

/* The calls that the text s[0..n) of a block is, by the tool style; 0, or
 * -1 when it is not entirely calls (then it stays content). */
static int parse_block(const serve_parse *p, found *f, const char *s, size_t n)
{
    trim(&s, &n);
    if (p->cfg.tools == SERVE_TOOLS_HERMES) {
        if (n && s[0] == '{') return json_call(f, s, n, ARGS_HERMES, 1);
        return xml_call(p, f, s, n);
    }
    if (p->cfg.tools == SERVE_TOOLS_MISTRAL) {
        json_t *a = json_loadb(s, n, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, NULL);
        int ok = json_is_array(a) && json_array_size(a) > 0;
        json_decref(a);
        if (!ok) return -1;
        size_t i = skip_ws(s, n, 1);
        while (i < n && s[i] != ']') {
            size_t e = skip_value(s, n, i);
            if (!e || json_call(f, s + i, e - i, ARGS_HERMES, 1)) return -1;
            i = skip_ws(s, n, e);
            if (i < n && s[i] == ',') i = skip_ws(s, n, i + 1);
        }
        return 0;
    }
    /* llama3_json: [<|python_tag|>] {...} (; {...})* */
    if (starts(s, n, "<|python_tag|>")) {
        s += 14;
        n -= 14;
    }
    size_t i = skip_ws(s, n, 0);
    if (i >= n) return -1;
    while (i < n) {
        if (s[i] != '{') return -1;
        size_t e = skip_value(s, n, i);
        if (!e || json_call(f, s + i, e - i, ARGS_LLAMA, 2)) return -1;
        i = skip_ws(s, n, e);
        if (i < n) {
            if (s[i] != ';') return -1;
            i = skip_ws(s, n, i + 1);
            if (i >= n) return -1;
        }
    }
    return 0;
}

/* A block is decided: its calls, or (not calls) its whole text as content:
 * the whitespace before it, the opening tag, the body, the closing tag. */
static void block_done(serve_parse *p, const char *open, const char *body, size_t n, const char *close)
{
    found f = {0};
    if (!parse_block(p, &f, body, n) && !f.oom) {
        for (size_t i = 0; i < f.n; i++) {
            if (f.c[i].name.oom || f.c[i].args.oom) { p->oom = 1; break; }
            size_t k = out_call(p, f.c[i].name.p, f.c[i].name.n);
            if (p->oom) break;
            out_text(p, SERVE_DELTA_TOOL_ARGS, k, f.c[i].args.p ? f.c[i].args.p : "{}",
                     f.c[i].args.p ? f.c[i].args.n : 2);
        }
        p->after_call = 1;
    } else {
        if (f.oom) p->oom = 1;
        p->after_call = 0;
        out_text(p, SERVE_DELTA_CONTENT, 0, p->lead.p, p->lead.n);
        out_text(p, SERVE_DELTA_CONTENT, 0, open, strlen(open));
        out_text(p, SERVE_DELTA_CONTENT, 0, body, n);
        if (close) out_text(p, SERVE_DELTA_CONTENT, 0, close, strlen(close));
    }
    p->lead.n = 0;
    found_free(&f);
}

/* ------------------------------------------------------- tool layer */

/* chat-output.md "Hermes / Qwen", "Mistral", "Llama 3.x". */
static void tool_process(serve_parse *p, int final)
{
    serve_buf *b = &p->lp;
    const char *open = p->cfg.tools == SERVE_TOOLS_HERMES ? "<tool_call>" : "[TOOL_CALLS]";
    for (;;) {
        if (p->oom || b->oom) { p->oom = 1; return; }
        switch (p->ls) {
        case L_PASS:
            out_text(p, SERVE_DELTA_CONTENT, 0, b->p, b->n);
            cut(b, b->n);
            return;
        case L_START: { /* llama3_json: does the answer open a call? */
            size_t i = skip_ws(b->p, b->n, p->l_held), r = b->n - i;
            p->l_held = 0;
            if ((r && b->p[i] == '{') || starts(b->p + i, r, "<|python_tag|>")) { p->ls = L_BLOCK; continue; }
            if (!final && may_start(b->p + i, r, "<|python_tag|>")) {
                p->l_held = i;
                return;
            }
            p->ls = L_PASS;
            continue;
        }
        case L_TEXT: {
            size_t at, h = p->l_held;
            int k = scan(b->p + h, b->n - h, &open, 1, &at, final);
            at += h;
            size_t w = at; /* where the white space before `at` begins */
            while (w > h && is_ws(b->p[w - 1])) w--;
            if (w == h) w = 0;
            p->l_held = 0;
            if (k < 0 && final) {
                if (p->after_call && w == 0) cut(b, b->n); /* white space that ends the answer */
                w = b->n;
            }
            if (w) p->after_call = 0;
            out_text(p, SERVE_DELTA_CONTENT, 0, b->p, w);
            if (k < 0) {
                cut(b, w);
                p->l_held = final ? 0 : at - w;
                return;
            }
            p->lead.n = 0;
            serve_buf_put(&p->lead, b->p + w, at - w);
            cut(b, at + strlen(open));
            p->ls = L_BLOCK;
            p->scan_from = 0;
            continue;
        }
        case L_BLOCK:
            if (p->cfg.tools != SERVE_TOOLS_HERMES) { /* the rest of the answer is the block */
                if (!final) return;
                block_done(p, p->cfg.tools == SERVE_TOOLS_MISTRAL ? open : "", b->p, b->n, NULL);
                cut(b, b->n);
                return;
            } else {
                static const char *const close[] = {"</tool_call>"};
                size_t at;
                int k = scan(b->p + p->scan_from, b->n - p->scan_from, close, 1, &at, final);
                at += p->scan_from;
                if (k < 0 && !final) {
                    p->scan_from = at;
                    return;
                }
                block_done(p, open, b->p, at, k < 0 ? NULL : close[0]);
                cut(b, k < 0 ? b->n : at + strlen(close[0]));
                p->ls = L_TEXT;
                continue;
            }
        }
    }
}

static void tools_in(serve_parse *p, const char *s, size_t n)
{
    if (p->ls == L_PASS) {
        out_text(p, SERVE_DELTA_CONTENT, 0, s, n);
        return;
    }
    serve_buf_put(&p->lp, s, n);
    tool_process(p, 0);
}

/* ------------------------------------------------------ think layer */

/* chat-output.md "Reasoning: <think>". */
static void think_process(serve_parse *p, int final)
{
    serve_buf *b = &p->tp;
    static const char *const close[] = {"</think>"};
    for (;;) {
        if (p->oom || b->oom) { p->oom = 1; return; }
        switch (p->ts) {
        case T_PASS:
            tools_in(p, b->p, b->n);
            cut(b, b->n);
            return;
        case T_START: {
            size_t i = skip_ws(b->p, b->n, p->t_held), r = b->n - i;
            p->t_held = 0;
            if (starts(b->p + i, r, "<think>")) {
                cut(b, i + 7);
                p->ts = T_LEAD;
                continue;
            }
            if (!final && may_start(b->p + i, r, "<think>")) {
                p->t_held = i;
                return;
            }
            p->ts = T_PASS;
            continue;
        }
        case T_LEAD:
        case T_CLEAD: {
            size_t i = 0;
            while (i < b->n && b->p[i] == '\n') i++;
            cut(b, i);
            if (!b->n) return;
            p->ts = p->ts == T_LEAD ? T_REASON : T_PASS;
            continue;
        }
        case T_REASON: {
            size_t at, h = p->t_held;
            int k = scan(b->p + h, b->n - h, close, 1, &at, final);
            at += h;
            size_t e = at; /* where the newlines before `at` begin */
            while (e > h && b->p[e - 1] == '\n') e--;
            if (e == h) e = 0;
            p->t_held = 0;
            if (k < 0 && final) e = b->n;
            out_text(p, SERVE_DELTA_REASONING, 0, b->p, e);
            if (k < 0) {
                cut(b, e);
                p->t_held = at - e;
                return;
            }
            cut(b, at + 8);
            p->ts = T_CLEAD;
            continue;
        }
        }
    }
}

/* ---------------------------------------------------------- harmony */

/* chat-output.md "gpt-oss (harmony)". */
static const char *const H_HEAD[] = {"<|message|>", "<|start|>", "<|end|>", "<|return|>", "<|call|>"};
static const char *const H_BODY[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>", "<|channel|>"};
static const char *const H_OUT[] = {"<|start|>", "<|channel|>"};
static const char *const H_OPENERS[] = {"<|channel|>", " to=", "to=", "<|constrain|>"};

/* Can b[0..n) begin the header of the answer's first message (whose role
 * the prompt wrote)?  1 yes, 0 no, -1 not yet known. */
static int opener(const char *s, size_t n)
{
    int maybe = 0;
    for (size_t i = 0; i < COUNT(H_OPENERS); i++) {
        size_t l = strlen(H_OPENERS[i]);
        if (!memcmp(s, H_OPENERS[i], n < l ? n : l)) {
            if (n >= l) return 1;
            maybe = 1;
        }
    }
    return maybe ? -1 : 0;
}

/* The word after `w` in header h[0..n) (up to white space or "<|"), where
 * w is at the start or after white space or '>' (when `bounded`). */
static int header_word(const char *h, size_t n, const char *w, int bounded, const char **v, size_t *vl)
{
    size_t l = strlen(w);
    for (size_t i = 0; l <= n && i <= n - l; i++) {
        if (memcmp(h + i, w, l)) continue;
        if (bounded && i > 0 && !is_ws(h[i - 1]) && h[i - 1] != '>') continue;
        size_t j = i + l;
        while (j < n && !is_ws(h[j]) && h[j] != '<') j++;
        *v = h + i + l;
        *vl = j - i - l;
        return 1;
    }
    return 0;
}

static void head_done(serve_parse *p, const char *h, size_t n)
{
    const char *rcp = NULL, *ch = NULL;
    size_t rl = 0, cl = 0;
    header_word(h, n, "to=", 1, &rcp, &rl);
    header_word(h, n, "<|channel|>", 0, &ch, &cl);
    int reason = p->cfg.reasoning == SERVE_REASON_HARMONY;
    if (rl > 10 && !memcmp(rcp, "functions.", 10) && p->tools_on && p->cfg.tools == SERVE_TOOLS_HARMONY) {
        p->h_kind = K_TOOL;
        p->h_tool = out_call(p, rcp + 10, rl - 10);
        p->h_args = 0;
    } else if (reason && ((rl && !(rl > 10 && !memcmp(rcp, "functions.", 10))) ||
                          (cl == 8 && !memcmp(ch, "analysis", 8)))) {
        p->h_kind = K_REASONING;
    } else {
        p->h_kind = K_CONTENT;
    }
}

static void body_text(serve_parse *p, const char *s, size_t n)
{
    if (p->h_kind == K_TOOL) out_text(p, SERVE_DELTA_TOOL_ARGS, p->h_tool, s, n);
    else out_text(p, p->h_kind == K_REASONING ? SERVE_DELTA_REASONING : SERVE_DELTA_CONTENT, 0, s, n);
}

static void body_end(serve_parse *p)
{
    if (p->h_kind == K_TOOL && !p->h_args) out_text(p, SERVE_DELTA_TOOL_ARGS, p->h_tool, "{}", 2);
    p->h_kind = K_CONTENT;
}

static void harmony_process(serve_parse *p, int final)
{
    serve_buf *b = &p->hp;
    for (;;) {
        if (p->oom || b->oom) { p->oom = 1; return; }
        size_t at;
        int k;
        switch (p->hs) {
        case G_HEAD:
            if (p->h_first) {
                int o = opener(b->p, b->n);
                if (o < 0 && !final) return;
                if (o <= 0) { p->hs = G_OUT; continue; }
                p->h_first = 0;
            }
            k = scan(b->p, b->n, H_HEAD, (int)COUNT(H_HEAD), &at, final);
            if (k == 0) {
                head_done(p, b->p, at);
                cut(b, at + strlen(H_HEAD[0]));
                p->hs = G_BODY;
                continue;
            }
            if (k < 0 && !final && at <= HDR_MAX) return;
            /* not a header: its text is content */
            out_text(p, SERVE_DELTA_CONTENT, 0, p->h_open, strlen(p->h_open));
            out_text(p, SERVE_DELTA_CONTENT, 0, b->p, at);
            cut(b, at);
            p->hs = G_OUT;
            continue;
        case G_BODY:
            k = scan(b->p, b->n, H_BODY, (int)COUNT(H_BODY), &at, final);
            body_text(p, b->p, at);
            if (k < 0) {
                cut(b, at);
                if (final) {
                    body_end(p);
                    p->hs = G_OUT;
                }
                return;
            }
            body_end(p);
            if (k <= 2) {
                cut(b, at + strlen(H_BODY[k]));
                p->hs = G_OUT;
            } else if (k == 3) {
                cut(b, at + strlen(H_BODY[k]));
                p->hs = G_HEAD;
                p->h_first = 0;
                p->h_open = "<|start|>";
            } else {
                cut(b, at);
                p->hs = G_HEAD;
                p->h_first = 1;
                p->h_open = "";
            }
            continue;
        case G_OUT:
            k = scan(b->p, b->n, H_OUT, (int)COUNT(H_OUT), &at, final);
            out_text(p, SERVE_DELTA_CONTENT, 0, b->p, at);
            if (k < 0) {
                cut(b, at);
                return;
            }
            if (k == 0) {
                cut(b, at + strlen(H_OUT[0]));
                p->h_first = 0;
                p->h_open = "<|start|>";
            } else {
                cut(b, at);
                p->h_first = 1;
                p->h_open = "";
            }
            p->hs = G_HEAD;
            continue;
        }
    }
}

/* ---------------------------------------------------------------- API */

serve_parse *serve_parse_new(const serve_parse_cfg *cfg, const serve_parse_opts *opts)
{
    if (serve_parse_cfg_check(cfg)) return NULL;
    serve_parse *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    serve_parse_opts o = opts ? *opts : (serve_parse_opts){0};
    p->cfg = *cfg;
    p->tools_on = o.tools_on;
    p->tools = o.tools;
    p->id_prefix = strdup(o.id_prefix ? o.id_prefix : "call_");
    if (!p->id_prefix) { free(p); return NULL; }
    /* every buffer has memory from the start (no NULL + 0 anywhere) */
    serve_buf *bufs[] = {&p->tp, &p->lp, &p->lead, &p->hp, &p->content, &p->reasoning, &p->dtext};
    for (size_t i = 0; i < COUNT(bufs); i++)
        if (buf_init(bufs[i])) { serve_parse_free(p); return NULL; }
    p->harmony = cfg->tools == SERVE_TOOLS_HARMONY || cfg->reasoning == SERVE_REASON_HARMONY;
    p->hs = G_HEAD;
    p->h_first = 1;
    p->h_open = "";
    p->ts = cfg->reasoning != SERVE_REASON_THINK ? T_PASS : o.in_think ? T_LEAD : T_START;
    if (!p->tools_on || cfg->tools == SERVE_TOOLS_NONE || cfg->tools == SERVE_TOOLS_HARMONY) p->ls = L_PASS;
    else p->ls = cfg->tools == SERVE_TOOLS_LLAMA3_JSON ? L_START : L_TEXT;
    return p;
}

static int any_oom(const serve_parse *p)
{
    if (p->oom || p->tp.oom || p->lp.oom || p->lead.oom || p->hp.oom || p->content.oom || p->reasoning.oom ||
        p->dtext.oom)
        return 1;
    for (size_t i = 0; i < p->n_calls; i++)
        if (p->calls[i].args.oom) return 1;
    return 0;
}

/* A take's list is emptied when the next feed or finish begins. */
static void untake(serve_parse *p)
{
    if (!p->taken) return;
    p->n_dr = 0;
    p->dtext.n = 0;
    p->taken = 0;
}

int serve_parse_feed(serve_parse *p, const char *s, size_t n)
{
    if (p->finished || p->oom) return -1;
    untake(p);
    if (p->harmony) {
        serve_buf_put(&p->hp, s, n);
        harmony_process(p, 0);
    } else if (p->ts == T_PASS) {
        tools_in(p, s, n);
    } else {
        serve_buf_put(&p->tp, s, n);
        think_process(p, 0);
    }
    if (any_oom(p)) p->oom = 1;
    return p->oom ? -1 : 0;
}

int serve_parse_finish(serve_parse *p)
{
    if (p->finished || p->oom) return -1;
    untake(p);
    p->finished = 1;
    if (p->harmony) {
        harmony_process(p, 1);
    } else {
        think_process(p, 1);
        tool_process(p, 1);
    }
    utf8_flush(p);
    if (any_oom(p)) p->oom = 1;
    return p->oom ? -1 : 0;
}

const serve_parse_delta *serve_parse_take(serve_parse *p, size_t *n)
{
    untake(p);
    *n = 0;
    if (p->n_dr > p->cap_pub) {
        serve_parse_delta *np = realloc(p->pub, p->n_dr * sizeof *np);
        if (!np) { p->oom = 1; return NULL; }
        p->pub = np;
        p->cap_pub = p->n_dr;
    }
    for (size_t i = 0; i < p->n_dr; i++) {
        const drec *d = &p->dr[i];
        serve_parse_delta *o = &p->pub[i];
        o->kind = d->kind;
        o->tool = d->tool;
        if (d->kind == SERVE_DELTA_TOOL_START) {
            o->text = p->calls[d->tool].name;
            o->len = strlen(o->text);
            o->id = p->calls[d->tool].id;
        } else {
            o->text = p->dtext.p + d->off;
            o->len = d->len;
            o->id = NULL;
        }
    }
    *n = p->n_dr;
    p->taken = 1;
    return p->pub;
}

/* A JSON string of s[0..n); bytes that are not UTF-8 become U+FFFD (as
 * the library's display text has them). */
static json_t *jstr(const char *s, size_t n)
{
    json_t *j = json_stringn(s ? s : "", n);
    if (j || !s) return j;
    serve_buf b = {0};
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int v;
        size_t u = cis2_utf8_unit((const unsigned char *)s + i, n - i, &cp, &v);
        if (v == 1) serve_buf_put(&b, s + i, u);
        else serve_buf_put(&b, "\xEF\xBF\xBD", 3);
        i += u;
    }
    j = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.n);
    serve_buf_free(&b);
    return j;
}

/* Sets key of o to a new value v (NULL: no memory): 0, or -1. */
static int put(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : -1;
}

/* The tool_calls entry of a stream chunk for call d->tool, starting at
 * delta d: {index, id, type, function: {name, arguments}} when d starts
 * the call, {index, function: {arguments}} else; args: its arguments. */
static json_t *chunk_call(const serve_parse_delta *d, const serve_buf *args)
{
    json_t *c = json_object(), *fn = json_object();
    int bad = !c || !fn || put(c, "index", json_integer((json_int_t)d->tool));
    if (!bad && d->kind == SERVE_DELTA_TOOL_START)
        bad = put(c, "id", json_string(d->id)) || put(c, "type", json_string("function")) ||
              put(fn, "name", jstr(d->text, d->len));
    if (!bad) bad = put(fn, "arguments", jstr(args->p, args->n));
    if (!bad) {
        bad = json_object_set(c, "function", fn);
    }
    json_decref(fn);
    if (bad) { json_decref(c); return NULL; }
    return c;
}

json_t *serve_parse_delta_json(const serve_parse_delta *d, size_t n)
{
    if (!n) return NULL;
    serve_buf c = {0}, r = {0}, args = {0};
    json_t *o = json_object(), *calls = json_array();
    int bad = !o || !calls;
    /* the calls: each run of deltas of one call is one entry */
    for (size_t i = 0; i < n && !bad;) {
        if (d[i].kind == SERVE_DELTA_CONTENT || d[i].kind == SERVE_DELTA_REASONING) {
            serve_buf_put(d[i].kind == SERVE_DELTA_CONTENT ? &c : &r, d[i].text, d[i].len);
            i++;
            continue;
        }
        size_t j = d[i].kind == SERVE_DELTA_TOOL_START ? i + 1 : i;
        args.n = 0;
        for (; j < n && d[j].kind == SERVE_DELTA_TOOL_ARGS && d[j].tool == d[i].tool; j++)
            serve_buf_put(&args, d[j].text, d[j].len);
        if (args.oom) { bad = 1; break; }
        json_t *e = chunk_call(&d[i], &args);
        bad = !e || json_array_append_new(calls, e);
        i = j;
    }
    bad = bad || c.oom || r.oom;
    if (!bad && c.n) bad = put(o, "content", jstr(c.p, c.n));
    if (!bad && r.n) bad = put(o, "reasoning_content", jstr(r.p, r.n));
    if (!bad && json_array_size(calls)) bad = json_object_set(o, "tool_calls", calls);
    json_decref(calls);
    serve_buf_free(&c);
    serve_buf_free(&r);
    serve_buf_free(&args);
    if (bad) { json_decref(o); return NULL; }
    return o;
}

const char *serve_parse_content(const serve_parse *p, size_t *len)
{
    *len = p->content.n;
    return p->content.p ? p->content.p : "";
}

const char *serve_parse_reasoning(const serve_parse *p, size_t *len)
{
    *len = p->reasoning.n;
    return p->reasoning.p ? p->reasoning.p : "";
}

size_t serve_parse_n_calls(const serve_parse *p) { return p->n_calls; }
const char *serve_parse_call_id(const serve_parse *p, size_t k) { return k < p->n_calls ? p->calls[k].id : NULL; }
const char *serve_parse_call_name(const serve_parse *p, size_t k) { return k < p->n_calls ? p->calls[k].name : NULL; }

const char *serve_parse_call_args(const serve_parse *p, size_t k, size_t *len)
{
    *len = 0;
    if (k >= p->n_calls) return NULL;
    *len = p->calls[k].args.n;
    return p->calls[k].args.p ? p->calls[k].args.p : "";
}

json_t *serve_parse_message(const serve_parse *p)
{
    json_t *m = json_object(), *calls = json_array();
    int bad = !m || !calls || put(m, "role", json_string("assistant")) ||
              put(m, "content", !p->content.n && p->n_calls ? json_null() : jstr(p->content.p, p->content.n));
    if (!bad && p->reasoning.n) bad = put(m, "reasoning_content", jstr(p->reasoning.p, p->reasoning.n));
    for (size_t k = 0; k < p->n_calls && !bad; k++) {
        json_t *c = json_object(), *fn = json_object();
        bad = !c || !fn || put(fn, "name", jstr(p->calls[k].name, strlen(p->calls[k].name))) ||
              put(fn, "arguments", jstr(p->calls[k].args.p, p->calls[k].args.n)) ||
              put(c, "id", json_string(p->calls[k].id)) || put(c, "type", json_string("function")) ||
              json_object_set(c, "function", fn) || json_array_append(calls, c);
        json_decref(fn);
        json_decref(c);
    }
    if (!bad && p->n_calls) bad = json_object_set(m, "tool_calls", calls);
    json_decref(calls);
    if (bad) { json_decref(m); return NULL; }
    return m;
}

const char *serve_parse_finish_reason(const serve_parse *p, const char *reason)
{
    return p->n_calls && reason && !strcmp(reason, "stop") ? "tool_calls" : reason;
}

void serve_parse_free(serve_parse *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_calls; i++) {
        free(p->calls[i].id);
        free(p->calls[i].name);
        serve_buf_free(&p->calls[i].args);
    }
    free(p->calls);
    free(p->dr);
    free(p->pub);
    free(p->id_prefix);
    serve_buf_free(&p->tp);
    serve_buf_free(&p->lp);
    serve_buf_free(&p->lead);
    serve_buf_free(&p->hp);
    serve_buf_free(&p->content);
    serve_buf_free(&p->reasoning);
    serve_buf_free(&p->dtext);
    free(p);
}

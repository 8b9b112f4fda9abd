/*
 * serve_chat.c - chat templates for /v1/chat/completions (docs/serving.md
 * "Chat templates").
 *
 * A checkpoint's chat template is a Jinja program (tokenizer_config.json's
 * `chat_template`) that Hugging Face renders with
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).
 * cis2 does not interpret Jinja: it recognizes the templates it can render
 * exactly and renders those in C, and refuses every other template (HTTP
 * 400 unsupported_chat_template naming it: a 4xx, since no retry can
 * succeed), never guessing.
 *
 * Recognition is structural.  The template is lexed as Jinja lexes it
 * (newlines normalized, one trailing newline dropped, `-` trim markers,
 * trim_blocks, lstrip_blocks, comments dropped), giving a stream of
 * literal text and tag tokens (names, operators, numbers, and string
 * literals by their decoded value); so indentation, spacing inside tags,
 * quote style and escapes do not matter, and everything else does.  The
 * stream must equal one of the patterns below token for token, where a
 * pattern string holding "@SYS@" matches any literal with the same text
 * around it and captures the default system prompt.  Families:
 *
 *   chatml                 every message as <|im_start|>ROLE\nCONTENT<|im_end|>\n
 *   chatml-default-system  the same, a default system turn first unless the
 *                          first message is a system one (SmolLM2-Instruct,
 *                          Qwen1.5-Chat)
 *   qwen2.5                Qwen2.5-Instruct's template, without its tools
 *                          branch: requests with tools or tool_calls get 400
 *                          unsupported_parameter
 *
 * Messages must be objects with a string role (system, developer, user,
 * assistant, tool) and string content; the rendering is byte for byte
 * what the template renders (tests/server/t_serve_chat.sh compares it with
 * python3-jinja2 rendering the template itself).
 *
 * Who calls it: serve_main.c (reading tokenizer_config.json once:
 * serve_tokcfg_load; finding and loading the template), serve_request.c
 * (rendering a chat request's messages), serve_tok.c (/tokenize of
 * messages, /tokenizer_info), serve_http.c (/v1/models).  It calls
 * serve_err.c and serve_buf.c only.
 */
#include "serve.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- lexer */

enum { K_TEXT, K_STMT, K_EXPR, K_END, K_NAME, K_STR, K_NUM, K_OP };

typedef struct jtok { int kind; char *s; size_t n; } jtok;
typedef struct jstream { jtok *t; size_t n, cap; } jstream;

static void js_free(jstream *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->t[i].s);
    free(s->t);
    memset(s, 0, sizeof *s);
}

static int js_push(jstream *s, int kind, const char *p, size_t n)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        jtok *nt = realloc(s->t, cap * sizeof *nt);
        if (!nt) return -1;
        s->t = nt;
        s->cap = cap;
    }
    char *c = malloc(n + 1);
    if (!c) return -1;
    memcpy(c, p, n);
    c[n] = 0;
    s->t[s->n++] = (jtok){kind, c, n};
    return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static void utf8_put(serve_buf *b, unsigned long cp)
{
    char o[4];
    size_t k;
    if (cp < 0x80) { o[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); k = 2; }
    else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63)); k = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 63));
        o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63)); k = 4;
    }
    serve_buf_put(b, o, k);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A Jinja string literal's value (Python unicode-escape).  p points at the
 * opening quote; *end receives the index after the closing one.  -1 for
 * what cis2 does not decode (\N{...}, surrogates, an unterminated literal). */
static int lex_string(const char *p, size_t len, size_t *end, serve_buf *out)
{
    char q = p[0];
    size_t i = 1;
    while (i < len && p[i] != q) {
        if (p[i] != '\\') { serve_buf_put(out, p + i, 1); i++; continue; }
        if (i + 1 >= len) return -1;
        char c = p[i + 1];
        i += 2;
        const char *simple = strchr("\\'\"abfnrtv", c);
        if (c && simple) {
            static const char map[] = "\\'\"\a\b\f\n\r\t\v";
            serve_buf_put(out, &map[simple - "\\'\"abfnrtv"], 1);
        } else if (c == '\n') {
            /* a backslash-newline continues the line */
        } else if (c == 'x' || c == 'u' || c == 'U') {
            int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            unsigned long cp = 0;
            for (int k = 0; k < nd; k++) {
                int h = i < len ? hexval(p[i]) : -1;
                if (h < 0) return -1;
                cp = cp * 16 + (unsigned long)h;
                i++;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
            utf8_put(out, cp);
        } else if (c >= '0' && c <= '7') {
            unsigned long cp = (unsigned long)(c - '0');
            for (int k = 0; k < 2 && i < len && p[i] >= '0' && p[i] <= '7'; k++) cp = cp * 8 + (unsigned long)(p[i++] - '0');
            utf8_put(out, cp);
        } else if (c == 'N') {
            return -1;
        } else {
            char two[2] = {'\\', c};
            serve_buf_put(out, two, 2);
        }
    }
    if (i >= len) return -1;
    *end = i + 1;
    return out->oom ? -1 : 0;
}

/* Tokens inside a tag, up to its end delimiter ("%}" or "}}", with an
 * optional '-' or '+' right before).  *pos moves past the delimiter;
 * *trim_right gets 1 for '-', 2 for '+'. */
static int lex_tag(const char *p, size_t len, size_t *pos, const char *close, jstream *out, int *trim_right)
{
    size_t i = *pos;
    int depth = 0;
    for (;;) {
        while (i < len && is_ws(p[i])) i++;
        if (i >= len) return -1;
        if (depth == 0) {
            size_t k = i;
            int mark = 0;
            if (p[k] == '-' || p[k] == '+') { mark = p[k] == '-' ? 1 : 2; k++; }
            if (k + 2 <= len && p[k] == close[0] && p[k + 1] == close[1]) {
                *trim_right = mark;
                *pos = k + 2;
                return js_push(out, K_END, "", 0);
            }
        }
        char c = p[i];
        if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            size_t s = i;
            while (i < len && (p[i] == '_' || (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
                               (p[i] >= '0' && p[i] <= '9')))
                i++;
            if (js_push(out, K_NAME, p + s, i - s)) return -1;
        } else if (c >= '0' && c <= '9') {
            size_t s = i;
            while (i < len && ((p[i] >= '0' && p[i] <= '9') || p[i] == '_' || p[i] == '.')) i++;
            if (js_push(out, K_NUM, p + s, i - s)) return -1;
        } else if (c == '\'' || c == '"') {
            serve_buf v = {0};
            size_t e = 0;
            if (lex_string(p + i, len - i, &e, &v)) { free(v.p); return -1; }
            int rc = js_push(out, K_STR, v.p ? v.p : "", v.n);
            free(v.p);
            if (rc) return -1;
            i += e;
        } else {
            static const char *two[] = {"==", "!=", "<=", ">=", "//", "**"};
            size_t n = 1;
            for (size_t k = 0; k < 6; k++)
                if (i + 1 < len && p[i] == two[k][0] && p[i + 1] == two[k][1]) n = 2;
            if (n == 1 && (c == '(' || c == '[' || c == '{')) depth++;
            if (n == 1 && (c == ')' || c == ']' || c == '}')) {
                if (depth == 0) return -1;
                depth--;
            }
            if ((unsigned char)c >= 0x80) return -1;
            if (js_push(out, K_OP, p + i, n)) return -1;
            i += n;
        }
    }
}

/* Raw pieces of the template: text, or a tag with its whitespace marks. */
typedef struct piece {
    int kind;          /* K_TEXT, K_STMT, K_EXPR, or -1 for a comment */
    size_t a, b;       /* text: [a, b) of the normalized source */
    int trim_l, trim_r;/* 1 '-', 2 '+' */
    jstream toks;      /* tag tokens (ends with K_END) */
} piece;

static void pieces_free(piece *ps, size_t n)
{
    for (size_t i = 0; i < n; i++) js_free(&ps[i].toks);
    free(ps);
}

/* \r\n and \r to \n, one trailing \n dropped (keep_trailing_newline=False). */
static char *normalize_newlines(const char *src, size_t len, size_t *out_len)
{
    char *s = malloc(len + 1);
    if (!s) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n') k--;
    s[k] = 0;
    *out_len = k;
    return s;
}

static int split_pieces(const char *s, size_t len, piece **out, size_t *np)
{
    size_t cap = 64, n = 0, i = 0;
    piece *ps = calloc(cap, sizeof *ps);
    if (!ps) return -1;
    while (i <= len) {
        size_t j = i;
        while (j + 1 < len && !(s[j] == '{' && (s[j + 1] == '%' || s[j + 1] == '{' || s[j + 1] == '#'))) j++;
        if (j + 1 >= len) j = len;
        if (n + 2 > cap) {
            cap *= 2;
            piece *nps = realloc(ps, cap * sizeof *ps);
            if (!nps) goto fail;
            ps = nps;
        }
        ps[n++] = (piece){.kind = K_TEXT, .a = i, .b = j};
        if (j >= len) break;
        piece *t = &ps[n];
        memset(t, 0, sizeof *t);
        char open = s[j + 1];
        size_t k = j + 2;
        if (k < len && (s[k] == '-' || s[k] == '+')) { t->trim_l = s[k] == '-' ? 1 : 2; k++; }
        if (open == '#') {
            const char *e = NULL;
            for (size_t m = k; m + 1 < len; m++)
                if (s[m] == '#' && s[m + 1] == '}') { e = s + m; break; }
            if (!e) goto fail;
            size_t m = (size_t)(e - s);
            if (m > k && (s[m - 1] == '-' || s[m - 1] == '+')) t->trim_r = s[m - 1] == '-' ? 1 : 2;
            t->kind = -1;
            i = m + 2;
        } else {
            t->kind = open == '%' ? K_STMT : K_EXPR;
            if (lex_tag(s, len, &k, open == '%' ? "%}" : "}}", &t->toks, &t->trim_r)) { js_free(&t->toks); goto fail; }
            i = k;
        }
        n++;
    }
    *out = ps;
    *np = n;
    return 0;
fail:
    pieces_free(ps, n);
    return -1;
}

/* Applies `-`, trim_blocks and lstrip_blocks to the text pieces, then
 * flattens everything into one token stream (comments dropped, adjacent
 * texts merged, empty texts gone). */
static int flatten(const char *s, piece *ps, size_t n, jstream *out)
{
    for (size_t i = 0; i < n; i++) {
        piece *t = &ps[i];
        if (t->kind == K_TEXT) continue;
        int block = t->kind != K_EXPR; /* statements and comments */
        piece *before = i > 0 ? &ps[i - 1] : NULL, *after = i + 1 < n ? &ps[i + 1] : NULL;
        if (before && before->kind == K_TEXT) {
            if (t->trim_l == 1) {
                while (before->b > before->a && is_ws(s[before->b - 1])) before->b--;
            } else if (block && t->trim_l == 0) { /* lstrip_blocks */
                size_t e = before->b, k = e;
                while (k > before->a && (s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
                int line_start = (k > before->a && s[k - 1] == '\n') || (k == before->a && (i == 1 || ps[i - 2].trim_r == 3));
                if (line_start) before->b = k;
            }
        }
        if (after && after->kind == K_TEXT) {
            if (t->trim_r == 1) {
                while (after->a < after->b && is_ws(s[after->a])) after->a++;
            } else if (block && t->trim_r == 0 && after->a < after->b && s[after->a] == '\n') { /* trim_blocks */
                after->a++;
                t->trim_r = 3; /* the next line starts here (lstrip_blocks) */
            }
        }
    }
    serve_buf text = {0};
    for (size_t i = 0; i < n; i++) {
        piece *t = &ps[i];
        if (t->kind == K_TEXT) { serve_buf_put(&text, s + t->a, t->b - t->a); continue; }
        if (t->kind < 0) continue;
        if (text.n) {
            if (js_push(out, K_TEXT, text.p, text.n)) { free(text.p); return -1; }
            text.n = 0;
        }
        if (js_push(out, t->kind, "", 0)) { free(text.p); return -1; }
        for (size_t k = 0; k < t->toks.n; k++)
            if (js_push(out, t->toks.t[k].kind, t->toks.t[k].s, t->toks.t[k].n)) { free(text.p); return -1; }
    }
    int rc = text.oom ? -1 : 0;
    if (!rc && text.n) rc = js_push(out, K_TEXT, text.p, text.n);
    free(text.p);
    return rc;
}

static int lex_template(const char *src, size_t len, jstream *out)
{
    size_t n = 0, np = 0;
    char *s = normalize_newlines(src, len, &n);
    if (!s) return -1;
    piece *ps = NULL;
    int rc = split_pieces(s, n, &ps, &np);
    if (!rc) rc = flatten(s, ps, np, out);
    if (!rc) pieces_free(ps, np);
    free(s);
    return rc;
}

/* -------------------------------------------------------------- patterns */

#define SYS "@SYS@"

static const char P_CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
/* the same behind `add_generation_prompt` defaulting to false */
static const char P_CHATML_AGP[] =
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
/* SmolLM2-Instruct (../shared/models/smollm2-135m-instruct/chat_template.jinja), Qwen1.5-Chat */
static const char P_DEFAULT_SYSTEM[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" SYS "<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
/* Qwen2.5-Instruct's tokenizer_config.json chat_template */
static const char P_QWEN25[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- '" SYS "' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided "
    "with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\n" SYS "<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == "
    "\"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

enum { F_CHATML, F_DEFAULT_SYSTEM, F_QWEN25 };
static const struct { const char *src; int family; } patterns[] = {
    {P_CHATML, F_CHATML},
    {P_CHATML_AGP, F_CHATML},
    {P_DEFAULT_SYSTEM, F_DEFAULT_SYSTEM},
    {P_QWEN25, F_QWEN25},
};
static const char *family_names[] = {"chatml", "chatml-default-system", "qwen2.5"};

struct serve_chat {
    int family;
    char *system;        /* the captured default system prompt, or NULL */
    size_t system_len;
};

/* Does template token c match pattern token p?  A pattern string with
 * @SYS@ captures the middle into *cap (all captures must agree). */
static int tok_match(const jtok *p, const jtok *c, serve_buf *cap, int *have)
{
    if (p->kind != c->kind) return 0;
    const char *m = p->kind == K_STR ? strstr(p->s, SYS) : NULL;
    if (!m) return p->n == c->n && !memcmp(p->s, c->s, p->n);
    size_t pre = (size_t)(m - p->s), post = p->n - pre - strlen(SYS);
    if (c->n < pre + post || memcmp(c->s, p->s, pre) || memcmp(c->s + c->n - post, p->s + p->n - post, post))
        return 0;
    size_t k = c->n - pre - post;
    if (*have) return cap->n == k && !memcmp(cap->p, c->s + pre, k);
    serve_buf_put(cap, c->s + pre, k);
    *have = 1;
    return !cap->oom;
}

static int stream_match(const jstream *pat, const jstream *t, serve_buf *cap, int *have)
{
    if (pat->n != t->n) return 0;
    for (size_t i = 0; i < pat->n; i++)
        if (!tok_match(&pat->t[i], &t->t[i], cap, have)) return 0;
    return 1;
}

int serve_chat_load(const char *src, size_t len, serve_chat **out, char *why, size_t why_cap)
{
    *out = NULL;
    jstream t = {0};
    if (lex_template(src, len, &t)) {
        js_free(&t);
        snprintf(why, why_cap, "it does not lex as the Jinja cis2 reads");
        return CIS2_E_UNSUPPORTED;
    }
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        jstream p = {0};
        if (lex_template(patterns[i].src, strlen(patterns[i].src), &p)) { js_free(&p); continue; }
        serve_buf cap = {0};
        int have = 0;
        int ok = stream_match(&p, &t, &cap, &have);
        js_free(&p);
        if (!ok) { free(cap.p); continue; }
        serve_chat *c = calloc(1, sizeof *c);
        if (!c) { free(cap.p); js_free(&t); return CIS2_E_NOMEM; }
        c->family = patterns[i].family;
        if (have) {
            c->system = cap.p ? cap.p : strdup("");
            c->system_len = cap.n;
        } else {
            free(cap.p);
        }
        js_free(&t);
        *out = c;
        return CIS2_OK;
    }
    js_free(&t);
    snprintf(why, why_cap,
             "it is not one of the templates cis2 renders exactly (the ChatML family: plain ChatML, "
             "SmolLM2-Instruct's with its default system prompt, Qwen2.5-Instruct's without tools)");
    return CIS2_E_UNSUPPORTED;
}

void serve_chat_free(serve_chat *c)
{
    if (!c) return;
    free(c->system);
    free(c);
}

const char *serve_chat_family(const serve_chat *c) { return family_names[c->family]; }
const char *serve_chat_default_system(const serve_chat *c) { return c->system; }

/* -------------------------------------------------------------- messages */

typedef struct msg { const char *role, *content; size_t role_len, content_len; } msg;

static int check_messages(const serve_chat *c, const json_t *messages, const json_t *tools, msg **out, size_t *n,
                          serve_err *e)
{
    if (tools && !json_is_null(tools) && !(json_is_array(tools) && json_array_size(tools) == 0))
        return serve_fail(e, 400, "unsupported_parameter", "tools",
                          c->family == F_QWEN25 ? "tools: this server renders Qwen2.5's chat template without its "
                                                  "tools branch"
                                                : "tools: this model's chat template (%s) has no tool calling",
                          family_names[c->family]);
    if (!json_is_array(messages)) return serve_fail(e, 400, "invalid_type", "messages", "messages must be an array");
    size_t k = json_array_size(messages);
    if (k == 0) return serve_fail(e, 400, "invalid_value", "messages", "messages must not be empty");
    msg *m = calloc(k, sizeof *m);
    if (!m) return serve_fail(e, 500, NULL, NULL, "out of memory");
    static const char *roles[] = {"system", "developer", "user", "assistant", "tool"};
    for (size_t i = 0; i < k; i++) {
        json_t *o = json_array_get(messages, i), *r = json_object_get(o, "role"), *ct = json_object_get(o, "content");
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        int bad = 0;
        if (!json_is_object(o)) bad = serve_fail(e, 400, "invalid_type", param, "%s must be an object", param);
        else if (!json_is_string(r)) bad = serve_fail(e, 400, "invalid_type", param, "%s.role must be a string", param);
        else {
            int known = 0;
            for (size_t q = 0; q < 5; q++) known |= !strcmp(json_string_value(r), roles[q]) && strlen(roles[q]) == json_string_length(r);
            json_t *tc = json_object_get(o, "tool_calls"), *fc = json_object_get(o, "function_call");
            if (!known)
                bad = serve_fail(e, 400, "invalid_value", param,
                                 "%s.role '%.40s' is not one of system, developer, user, assistant, tool", param,
                                 json_string_value(r));
            else if ((tc && !json_is_null(tc) && !(json_is_array(tc) && json_array_size(tc) == 0)) ||
                     (fc && !json_is_null(fc)))
                bad = serve_fail(e, 400, "unsupported_parameter", param,
                                 "%s: tool calls are not supported by this server's chat templates", param);
            else if (!json_is_string(ct))
                bad = serve_fail(e, 400, "invalid_type", param,
                                 "%s.content must be a string (cis2 renders text messages only)", param);
        }
        if (bad) { free(m); return bad; }
        m[i] = (msg){json_string_value(r), json_string_value(ct), json_string_length(r), json_string_length(ct)};
    }
    *out = m;
    *n = k;
    return 0;
}

static int role_is(const msg *m, const char *r) { return m->role_len == strlen(r) && !memcmp(m->role, r, m->role_len); }

static void turn(serve_buf *b, const char *role, size_t rl, const char *content, size_t cl)
{
    serve_buf_str(b, "<|im_start|>");
    serve_buf_put(b, role, rl);
    serve_buf_str(b, "\n");
    serve_buf_put(b, content, cl);
    serve_buf_str(b, "<|im_end|>\n");
}

/* chatml and chatml-default-system: P_CHATML, P_DEFAULT_SYSTEM */
static void render_chatml(const serve_chat *c, const msg *m, size_t n, serve_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && c->family == F_DEFAULT_SYSTEM && !role_is(&m[0], "system"))
            turn(b, "system", 6, c->system, c->system_len);
        turn(b, m[i].role, m[i].role_len, m[i].content, m[i].content_len);
    }
}

/* qwen2.5 without tools: P_QWEN25's else-branch and message loop */
static void render_qwen25(const serve_chat *c, const msg *m, size_t n, serve_buf *b)
{
    if (role_is(&m[0], "system")) turn(b, "system", 6, m[0].content, m[0].content_len);
    else turn(b, "system", 6, c->system, c->system_len);
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "user") || (role_is(&m[i], "system") && i > 0) || role_is(&m[i], "assistant")) {
            turn(b, m[i].role, m[i].role_len, m[i].content, m[i].content_len);
        } else if (role_is(&m[i], "tool")) {
            if (i == 0 || !role_is(&m[i - 1], "tool")) serve_buf_str(b, "<|im_start|>user");
            serve_buf_str(b, "\n<tool_response>\n");
            serve_buf_put(b, m[i].content, m[i].content_len);
            serve_buf_str(b, "\n</tool_response>");
            if (i + 1 == n || !role_is(&m[i + 1], "tool")) serve_buf_str(b, "<|im_end|>\n");
        } /* other roles (developer, a first system turn) render nothing */
    }
}

int serve_chat_render(const serve_chat *c, const json_t *messages, int add_generation_prompt, const json_t *tools,
                      char **out, size_t *len, serve_err *e)
{
    msg *m = NULL;
    size_t n = 0;
    int rc = check_messages(c, messages, tools, &m, &n, e);
    if (rc) return rc;
    serve_buf b = {0};
    if (c->family == F_QWEN25) render_qwen25(c, m, n, &b);
    else render_chatml(c, m, n, &b);
    if (add_generation_prompt) serve_buf_str(&b, "<|im_start|>assistant\n");
    free(m);
    if (b.oom || !b.p) { free(b.p); return serve_fail(e, 500, NULL, NULL, "out of memory"); }
    *out = b.p;
    *len = b.n;
    return 0;
}

/* ------------------------------------------------------------ finding it */

/* A malloc'ed copy (the caller frees with free()). */
static int copy_out(const char *p, size_t n, char **src, size_t *len, cis2_error *err)
{
    if (!(*src = malloc(n + 1))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    memcpy(*src, p, n);
    (*src)[n] = 0;
    *len = n;
    return CIS2_OK;
}

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

int serve_chat_find(const char *model_dir, const char *file, const json_t *tcfg, char **src, size_t *len,
                    char *origin, size_t origin_cap, cis2_error *err)
{
    *src = NULL;
    *len = 0;
    char path[4200];
    char *buf = NULL;
    size_t n = 0;
    int rc;
    if (file) {
        snprintf(origin, origin_cap, "%s", file);
        if ((rc = cis2_read_file(file, (size_t)1 << 20, "--chat-template", &buf, &n, err))) return rc;
        rc = copy_out(buf, n, src, len, err);
        cis2_free(buf);
        return rc;
    }
    snprintf(path, sizeof path, "%s/chat_template.jinja", model_dir);
    if (present(path)) {
        if ((rc = cis2_read_file(path, (size_t)1 << 20, "chat_template.jinja", &buf, &n, err))) return rc;
        snprintf(origin, origin_cap, "%s", path);
        rc = copy_out(buf, n, src, len, err);
        cis2_free(buf);
        return rc;
    }
    if (!tcfg) return CIS2_OK;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir);
    json_t *ct = json_object_get(tcfg, "chat_template"), *pick = NULL;
    if (json_is_array(ct)) { /* [{"name": "default", "template": ...}, ...] */
        for (size_t i = 0; i < json_array_size(ct); i++) {
            json_t *o = json_array_get(ct, i), *nm = json_object_get(o, "name");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default")) pick = json_object_get(o, "template");
        }
    } else {
        pick = ct;
    }
    rc = CIS2_OK;
    if (ct && !json_is_string(pick)) {
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: chat_template is not a string (nor a list with a \"default\" one)", path);
    } else if (pick) {
        rc = copy_out(json_string_value(pick), json_string_length(pick), src, len, err);
        snprintf(origin, origin_cap, "%s (chat_template)", path);
    }
    return rc;
}

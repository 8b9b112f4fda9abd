/*
 * serve_body.c - a request body's text beneath jansson (docs/serving.md;
 * docs/inputs.md "HTTP requests"): what the server
 * reads from the bytes themselves because a parsed JSON value has lost
 * it, or because jansson would refuse the whole body for one value.
 *
 *   - exact decimals (docs/sampling.md §S2.3): temperature, top_p and
 *     min_p are converted once, correctly rounded, from the body's own
 *     decimal text to binary32 (serve_raw_float), never through a double;
 *   - numbers jansson refuses (an integer beyond int64, a real beyond a
 *     double) are out of range, not invalid JSON (serve_body_load,
 *     serve_body_check: 400 invalid_value naming the parameter);
 *   - a NUL (\u0000) is an ordinary byte in a stop string (docs/inputs.md)
 *     and refused everywhere else (serve_body_check).
 *
 * Who calls it: serve_request.c, while it parses a body (HTTP threads).
 * It calls serve_err.c only.
 */
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------- the scanner */

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

/* Whether the JSON string literal s[0..len) is exactly key. */
static int key_is(const char *s, size_t len, const char *key)
{
    json_t *k = json_loadb(s, len, JSON_DECODE_ANY, NULL);
    int match = json_is_string(k) && !strcmp(json_string_value(k), key) && json_string_length(k) == strlen(key);
    json_decref(k);
    return match;
}

/* The text of top-level key's value in the raw object: 1 with
 * raw[*vs..*ve), 0 when the key is absent (or the text is not an object). */
static int raw_value(const char *raw, size_t n, const char *key, size_t *vs, size_t *ve)
{
    size_t i = skip_ws(raw, 0, n);
    if (i >= n || raw[i] != '{') return 0;
    i++;
    for (;;) {
        i = skip_ws(raw, i, n);
        if (i >= n || raw[i] != '"') return 0;
        size_t ks = i;
        i = skip_string(raw, i, n);
        int match = key_is(raw + ks, i - ks, key);
        i = skip_ws(raw, i, n);
        if (i >= n || raw[i] != ':') return 0;
        i = skip_ws(raw, i + 1, n);
        *vs = i;
        i = skip_value(raw, i, n);
        *ve = i;
        if (match) return 1;
        i = skip_ws(raw, i, n);
        if (i >= n || raw[i] != ',') return 0;
        i++;
    }
}

/* ---------------------------------------------------- raw decimal floats */

int serve_raw_float(const char *raw, size_t n, const char *key, float *out, cis2_error *err)
{
    size_t vs, ve;
    if (!raw_value(raw, n, key, &vs, &ve)) return 0;
    /* docs/sampling.md §S2.3: the library's one correctly rounded conversion */
    return cis2_decimal_to_f32(raw + vs, ve - vs, out, err) ? -1 : 1;
}

/* ------------------------------------------- numbers jansson refuses */

/* jansson refuses, while parsing, an integer beyond int64 ("seed":
 * 1e30 written out) and a real that overflows a double (1e999): the whole
 * body would be invalid_json with no param, though such a value is only
 * out of range (docs/serving.md: 400 invalid_value naming the parameter).  So
 * before parsing, body_numbers finds every number literal (outside
 * strings, starting after a delimiter) that jansson would refuse and, in
 * a copy, writes a 0 padded with spaces over it: a number token for a
 * number token, so the body stays exactly as valid or invalid as it was.
 * The first one's top-level key is kept; once the body parses (and its
 * keys are known), that key is refused as invalid_value
 * (serve_body_check). */

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

static void note_big(serve_big_num *b, const char *raw, size_t key_at, size_t key_end, const char *num, size_t len)
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
static char *body_numbers(const char *raw, size_t n, serve_big_num *b)
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

int serve_body_load(const char *raw, size_t n, json_t **body, serve_big_num *big, serve_err *e)
{
    json_error_t je;
    memset(big, 0, sizeof *big);
    char *fixed = body_numbers(raw, n, big);
    *body = json_loadb(fixed ? fixed : raw, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    free(fixed);
    if (!*body)
        return serve_fail(e, 400, "invalid_json", NULL,
                          "We could not parse the JSON body of your request (line %d, column %d: %s)", je.line,
                          je.column, je.text);
    return 0;
}

/* ------------------------------------------------------------ NULs */

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

int serve_body_check(json_t *body, const serve_big_num *b, serve_err *e)
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

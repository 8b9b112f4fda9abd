/*
 * jinja_value.c - the chat-template renderer's values (jinja_impl.h):
 * the arena, errors and limits, buffers, strings, lists and dicts, the
 * variables' copy from JSON, and the Python semantics templates see:
 * truth, str() and repr() (floats as Python's shortest repr), ==, <, and
 * transformers' tojson (json.dumps with ensure_ascii=False, keys in their
 * order, indent, separators, sort_keys).  Called by the other jinja_*.c
 * files only.  docs/chat.md "Semantics" says what matches Python, "Where
 * cis2 differs from Jinja2" what is approximated (repr's printable
 * characters).
 */
#include "jinja_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

struct jj_chunk {
    jj_chunk *next;
    size_t cap, used;
    max_align_t data[];
};

#define JJ_CHUNK 65536

void *jj_alloc(jj_arena *a, size_t n)
{
    if (n > SIZE_MAX / 4) { a->over = 1; return NULL; }
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    jj_chunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > JJ_CHUNK ? n : JJ_CHUNK;
        if (a->limit && a->total + cap + sizeof *h > a->limit) { a->over = 1; return NULL; }
        jj_chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        a->total += cap + sizeof *c;
        if (h && cap == n && h->cap - h->used >= 256) {
            /* a big block of its own: keep serving small ones from the head */
            c->next = h->next;
            h->next = c;
            h = c;
        } else {
            c->next = h;
            a->head = h = c;
        }
    }
    void *r = (char *)h->data + h->used;
    h->used += n;
    memset(r, 0, n);
    return r;
}

void jj_arena_free(jj_arena *a)
{
    for (jj_chunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

/* ------------------------------------------------------ errors, limits */

int jj_fail(jctx *c, const jnode *at, const char *fmt, ...)
{
    if (c->err->code == CIS2_OK) {
        char m[440];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        if (!at) at = c->at;
        if (at) cis2_fail(c->err, CIS2_E_FORMAT, "template line %u:%u: %s", at->line, at->col, m);
        else cis2_fail(c->err, CIS2_E_FORMAT, "template: %s", m);
    }
    return -1;
}

int jj_limit(jctx *c, const char *what)
{
    if (c->err->code == CIS2_OK) {
        if (c->at) cis2_fail(c->err, CIS2_E_NOMEM, "template line %u:%u: %s", c->at->line, c->at->col, what);
        else cis2_fail(c->err, CIS2_E_NOMEM, "template: %s", what);
    }
    return -1;
}

int jj_nomem(jctx *c)
{
    if (c->mem.over) {
        char m[160];
        snprintf(m, sizeof m, "the render needs more than %zu bytes of memory (cis2_jinja_limits.max_memory)", c->mem.limit);
        return jj_limit(c, m);
    }
    return jj_limit(c, "out of memory");
}

int jj_cost(jctx *c, uint64_t n)
{
    c->steps += n;
    if (c->steps <= c->max_steps) return 0;
    char m[160];
    snprintf(m, sizeof m, "the render takes more than %" PRIu64 " steps (cis2_jinja_limits.max_steps)", c->max_steps);
    return jj_limit(c, m);
}

/* -------------------------------------------------------------- buffers */

int jb_put(jctx *c, jj_buf *b, const char *s, size_t n)
{
    if (!n) return 0;
    if (b->cap - b->n < n) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc - b->n < n) {
            if (nc > SIZE_MAX / 4) return jj_nomem(c);
            nc *= 2;
        }
        char *p;
        if (b->heap) {
            if (c->mem.limit && c->mem.total + (nc - b->cap) > c->mem.limit) {
                c->mem.over = 1;
                return jj_nomem(c);
            }
            p = realloc(b->p, nc);
            if (!p) return jj_nomem(c);
            c->mem.total += nc - b->cap;
        } else {
            p = jj_alloc(&c->mem, nc);
            if (!p) return jj_nomem(c);
            if (b->n) memcpy(p, b->p, b->n);
        }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

int jb_str(jctx *c, jj_buf *b, const char *s) { return jb_put(c, b, s, strlen(s)); }

int jb_printf(jctx *c, jj_buf *b, const char *fmt, ...)
{
    char t[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (k < 0) k = 0;
    if ((size_t)k >= sizeof t) k = (int)sizeof t - 1;
    return jb_put(c, b, t, (size_t)k);
}

int jj_emit(jctx *c, const char *s, size_t n)
{
    if (c->out == c->top && c->top->n + n > c->max_output) {
        char m[160];
        snprintf(m, sizeof m, "the rendered text would exceed %zu bytes (cis2_jinja_limits.max_output)", c->max_output);
        return jj_limit(c, m);
    }
    if (jj_cost(c, JJ_COPY(n))) return -1;
    return jb_put(c, c->out, s, n);
}

int jb_take(jctx *c, jj_buf *b, jv *out)
{
    (void)c;
    *out = jv_strn(b->p ? b->p : "", b->n);
    return 0;
}

/* ------------------------------------------------------ strings, lists */

int jv_copystr(jctx *c, const char *p, size_t n, jv *out)
{
    char *d = jj_alloc(&c->mem, n + 1);
    if (!d) return jj_nomem(c);
    if (n) memcpy(d, p, n);
    *out = jv_strn(d, n);
    return 0;
}

int jv_newlist(jctx *c, size_t n, jv *out)
{
    jj_list *l = jj_alloc(&c->mem, sizeof *l);
    if (!l) return jj_nomem(c);
    if (n) {
        if (n > SIZE_MAX / sizeof(jv) / 2) return jj_nomem(c);
        l->v = jj_alloc(&c->mem, n * sizeof(jv));
        if (!l->v) return jj_nomem(c);
        for (size_t i = 0; i < n; i++) l->v[i].t = JT_NONE;
    }
    l->n = n;
    memset(out, 0, sizeof *out);
    out->t = JT_LIST;
    out->u.l = l;
    return 0;
}

int jv_newdict(jctx *c, jv *out)
{
    jj_dict *d = jj_alloc(&c->mem, sizeof *d);
    if (!d) return jj_nomem(c);
    memset(out, 0, sizeof *out);
    out->t = JT_DICT;
    out->u.d = d;
    return 0;
}

static int key_eq(jctx *c, const jv *a, const jv *b)
{
    if (a->t == JT_STR && b->t == JT_STR) return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
    if (a->t == JT_STR || b->t == JT_STR) return 0;
    return jv_equal(c, a, b, 0);
}

int jd_get(jctx *c, const jj_dict *d, jv key, jv *val)
{
    if (jj_cost(c, JJ_ITEMS(d->n))) return -1;
    for (size_t i = 0; i < d->n; i++) {
        int e = key_eq(c, &d->k[i], &key);
        if (e < 0) return -1;
        if (e) {
            *val = d->v[i];
            return 1;
        }
    }
    return 0;
}

int jd_getn(const jj_dict *d, const char *name, size_t n, jv *val)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JT_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, name, n) == 0) {
            *val = d->v[i];
            return 1;
        }
    return 0;
}

int jd_set(jctx *c, jj_dict *d, jv key, jv val)
{
    if (jj_cost(c, JJ_ITEMS(d->n))) return -1;
    for (size_t i = 0; i < d->n; i++) {
        int e = key_eq(c, &d->k[i], &key);
        if (e < 0) return -1;
        if (e) {
            d->v[i] = val;
            return 0;
        }
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        jv *k = jj_alloc(&c->mem, nc * sizeof *k), *v = jj_alloc(&c->mem, nc * sizeof *v);
        if (!k || !v) return jj_nomem(c);
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof *k);
            memcpy(v, d->v, d->n * sizeof *v);
        }
        d->k = k;
        d->v = v;
        d->cap = nc;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->n++;
    return 0;
}

/* The variables: JSON values become values; strings are used in place. */
int jv_from_json(jctx *c, const json_t *j, int depth, jv *out)
{
    if (depth > JJ_MAX_VALUE_NEST) return jj_fail(c, NULL, "the variables nest deeper than %d", JJ_MAX_VALUE_NEST);
    if (jj_cost(c, 1)) return -1;
    switch (json_typeof(j)) {
    case JSON_NULL: *out = jv_none(); return 0;
    case JSON_TRUE: *out = jv_bool(1); return 0;
    case JSON_FALSE: *out = jv_bool(0); return 0;
    case JSON_INTEGER: *out = jv_int((int64_t)json_integer_value(j)); return 0;
    case JSON_REAL: *out = jv_float(json_real_value(j)); return 0;
    case JSON_STRING: *out = jv_strn(json_string_value(j), json_string_length(j)); return 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (jv_newlist(c, n, out)) return -1;
        for (size_t i = 0; i < n; i++)
            if (jv_from_json(c, json_array_get(j, i), depth + 1, &out->u.l->v[i])) return -1;
        return 0;
    }
    case JSON_OBJECT: {
        if (jv_newdict(c, out)) return -1;
        jj_dict *d = out->u.d;
        size_t n = json_object_size(j);
        d->k = jj_alloc(&c->mem, (n ? n : 1) * sizeof(jv));
        d->v = jj_alloc(&c->mem, (n ? n : 1) * sizeof(jv));
        if (!d->k || !d->v) return jj_nomem(c);
        d->cap = n ? n : 1;
        const char *key;
        json_t *val;
        void *it = json_object_iter((json_t *)j);
        for (; it; it = json_object_iter_next((json_t *)j, it)) {
            key = json_object_iter_key(it);
            val = json_object_iter_value(it);
            if (d->n == d->cap) return jj_fail(c, NULL, "internal: object size");
#if JANSSON_VERSION_HEX >= 0x020e00
            d->k[d->n] = jv_strn(key, json_object_iter_key_len(it));
#else
            d->k[d->n] = jv_strn(key, strlen(key));
#endif
            if (jv_from_json(c, val, depth + 1, &d->v[d->n])) return -1;
            d->n++;
        }
        return 0;
    }
    }
    return jj_fail(c, NULL, "internal: unknown JSON type");
}

/* ---------------------------------------------------------------- UTF-8 */

uint32_t jj_u8dec(const char *s, size_t n, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    if (!n) { *len = 0; return 0; }
    if (u[0] < 0x80 || n < 2) { *len = 1; return u[0]; }
    if (u[0] < 0xE0) { *len = 2; return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); }
    if (u[0] < 0xF0 || n < 4) {
        *len = n < 3 ? n : 3;
        return n < 3 ? 0xFFFD : ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}

size_t jj_u8enc(uint32_t cp, char *o)
{
    unsigned char *u = (unsigned char *)o;
    if (cp < 0x80) { u[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { u[0] = (unsigned char)(0xC0 | (cp >> 6)); u[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | (cp >> 18));
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t jj_u8len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t jj_u8off(const char *s, size_t n, size_t cp)
{
    size_t i = 0;
    while (i < n && cp) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        cp--;
    }
    return i;
}

int jj_isspace_cp(uint32_t cp)
{
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Python 3.11's str.isprintable for a non-ASCII code point, approximated:
 * the Zs, Zl, Zp, Cc, Cf and Co characters of Unicode 14 and the large
 * unassigned ranges are not printable (repr escapes them); unassigned
 * code points inside assigned blocks are taken as printable. */
static int printable_cp(uint32_t cp)
{
    static const uint32_t no[][2] = {
        {0x80, 0xA0}, {0xAD, 0xAD}, {0x600, 0x605}, {0x61C, 0x61C}, {0x6DD, 0x6DD}, {0x70F, 0x70F},
        {0x890, 0x891}, {0x8E2, 0x8E2}, {0x1680, 0x1680}, {0x180E, 0x180E}, {0x2000, 0x200F},
        {0x2028, 0x202F}, {0x205F, 0x2064}, {0x2066, 0x206F}, {0x3000, 0x3000}, {0xD800, 0xF8FF},
        {0xFDD0, 0xFDEF}, {0xFEFF, 0xFEFF}, {0xFFF0, 0xFFFB}, {0xFFFE, 0xFFFF}, {0x110BD, 0x110BD},
        {0x110CD, 0x110CD}, {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0x3134B, 0xDFFFF},
        {0xE0000, 0xE00FF}, {0xE01F0, 0x10FFFF},
    };
    if ((cp & 0xFFFE) == 0xFFFE) return 0;
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (cp >= no[i][0] && cp <= no[i][1]) return 0;
    return 1;
}

/* ------------------------------------------------------- Python basics */

int jv_truth(const jv *v)
{
    switch (v->t) {
    case JT_UNDEF:
    case JT_NONE:
    case JT_MISSING: return 0;
    case JT_BOOL:
    case JT_INT: return v->u.i != 0;
    case JT_FLOAT: return v->u.f != 0.0;
    case JT_STR: return v->u.s.n != 0;
    case JT_LIST: return v->view == LV_ITER || v->u.l->n != 0;
    case JT_DICT: return v->u.d->n != 0;
    default: return 1;
    }
}

int jv_isnum(const jv *v) { return v->t == JT_BOOL || v->t == JT_INT || v->t == JT_FLOAT; }

const char *jv_typename(const jv *v)
{
    switch (v->t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return "str";
    case JT_LIST:
        switch (v->view) {
        case LV_ITER: return "generator";
        case LV_KEYS: return "dict_keys";
        case LV_VALUES: return "dict_values";
        case LV_ITEMS: return "dict_items";
        default: return v->tuple ? "tuple" : "list";
        }
    case JT_DICT: return "dict";
    case JT_NS: return "Namespace";
    case JT_MACRO: return "Macro";
    case JT_LOOP: return "LoopContext";
    case JT_CYCLER: return "Cycler";
    default: return "builtin_function_or_method";
    }
}

/* floor and fmod without libm (the library links none): exact */
double jj_floor(double x)
{
    if (!(x > -4503599627370496.0 && x < 4503599627370496.0) || x == 0) return x; /* |x| >= 2^52: integral */
    double d = (double)(int64_t)x;
    return d > x ? d - 1.0 : d;
}

double jj_fmod(double x, double y)
{
    if (x != x || y != y || isinf(x) || y == 0) return NAN;
    if (isinf(y)) return x;
    double r = x < 0 ? -x : x, ay = y < 0 ? -y : y;
    while (r >= ay) {
        double t = ay;
        while (t <= r / 2) t *= 2; /* the largest ay * 2^k <= r */
        r -= t;                    /* exact: t <= r < 2t */
    }
    return x < 0 ? -r : r;
}

size_t jj_float_repr(double f, char *buf)
{
    if (f != f) return (size_t)snprintf(buf, 32, "nan");
    if (isinf(f)) return (size_t)snprintf(buf, 32, f < 0 ? "-inf" : "inf");
    if (f == 0) return (size_t)snprintf(buf, 32, signbit(f) ? "-0.0" : "0.0");
    char t[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*e", prec - 1, f);
        if (strtod(t, NULL) == f) break;
    }
    /* t is [-]d[<point>ddd]e(+|-)dd: take the digits and the exponent */
    char dig[24];
    int nd = 0, neg = t[0] == '-';
    const char *q = t + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < 20) dig[nd++] = *q;
    int ex = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    size_t o = 0;
    if (neg) buf[o++] = '-';
    if (ex < -4 || ex >= 16) {
        buf[o++] = dig[0];
        if (nd > 1) {
            buf[o++] = '.';
            for (int i = 1; i < nd; i++) buf[o++] = dig[i];
        }
        o += (size_t)snprintf(buf + o, 12, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    } else if (ex >= 0) {
        for (int i = 0; i <= ex; i++) buf[o++] = i < nd ? dig[i] : '0';
        buf[o++] = '.';
        if (nd > ex + 1)
            for (int i = ex + 1; i < nd; i++) buf[o++] = dig[i];
        else
            buf[o++] = '0';
    } else {
        buf[o++] = '0';
        buf[o++] = '.';
        for (int i = 0; i < -ex - 1; i++) buf[o++] = '0';
        for (int i = 0; i < nd; i++) buf[o++] = dig[i];
    }
    buf[o] = 0;
    return o;
}

static int repr_str(jctx *c, jj_buf *b, const char *s, size_t n)
{
    int sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    if (jj_cost(c, JJ_SCAN(n)) || jb_put(c, b, &q, 1)) return -1;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t l;
        uint32_t cp = jj_u8dec(s + i, n - i, &l);
        char e[12];
        int en = 0;
        if (cp == (uint32_t)q || cp == '\\') en = snprintf(e, sizeof e, "\\%c", (char)cp);
        else if (cp == '\n') en = snprintf(e, sizeof e, "\\n");
        else if (cp == '\r') en = snprintf(e, sizeof e, "\\r");
        else if (cp == '\t') en = snprintf(e, sizeof e, "\\t");
        else if (cp < 0x20 || cp == 0x7F) en = snprintf(e, sizeof e, "\\x%02x", cp);
        else if (cp >= 0x80 && !printable_cp(cp))
            en = cp < 0x100 ? snprintf(e, sizeof e, "\\x%02x", cp) : cp < 0x10000 ? snprintf(e, sizeof e, "\\u%04x", cp)
                                                                              : snprintf(e, sizeof e, "\\U%08x", cp);
        if (en) {
            if (jb_put(c, b, s + run, i - run) || jb_put(c, b, e, (size_t)en)) return -1;
            run = i + l;
        }
        i += l;
    }
    if (jb_put(c, b, s + run, n - run)) return -1;
    return jb_put(c, b, &q, 1);
}

/* seen: the containers being printed around this one, as Python's repr
 * tracks them: one met again prints as [...] or {...} */
static int repr_in(jctx *c, jj_buf *b, const jv *v, int depth, const void **seen)
{
    if (depth > JJ_MAX_VALUE_NEST) return jj_fail(c, NULL, "a value nests deeper than %d", JJ_MAX_VALUE_NEST);
    switch (v->t) {
    case JT_UNDEF: return jb_str(c, b, "Undefined");
    case JT_STR:
        if (!v->safe) return repr_str(c, b, v->u.s.p, v->u.s.n);
        return jb_str(c, b, "Markup(") || repr_str(c, b, v->u.s.p, v->u.s.n) || jb_str(c, b, ")") ? -1 : 0;
    case JT_LIST: {
        const jj_list *l = v->u.l;
        if (v->view == LV_ITER) return jb_str(c, b, "<generator object>");
        for (int i = 0; i < depth; i++)
            if (seen[i] == l) return jb_str(c, b, v->tuple ? "(...)" : "[...]");
        seen[depth] = l;
        if (v->view && (jb_str(c, b, jv_typename(v)) || jb_str(c, b, "("))) return -1;
        if (jj_cost(c, l->n / 16) || jb_str(c, b, v->tuple ? "(" : "[")) return -1;
        for (size_t i = 0; i < l->n; i++)
            if ((i && jb_str(c, b, ", ")) || repr_in(c, b, &l->v[i], depth + 1, seen)) return -1;
        if (v->tuple && l->n == 1 && jb_str(c, b, ",")) return -1;
        if (jb_str(c, b, v->tuple ? ")" : "]")) return -1;
        return v->view ? jb_str(c, b, ")") : 0;
    }
    case JT_DICT:
    case JT_NS: {
        const jj_dict *d = v->u.d;
        if (v->t == JT_NS && jb_str(c, b, "<Namespace ")) return -1;
        int again = 0;
        for (int i = 0; i < depth; i++) again |= seen[i] == d;
        if (again) return jb_str(c, b, v->t == JT_NS ? "{...}>" : "{...}");
        seen[depth] = d;
        if (jj_cost(c, d->n / 16) || jb_str(c, b, "{")) return -1;
        for (size_t i = 0; i < d->n; i++)
            if ((i && jb_str(c, b, ", ")) || repr_in(c, b, &d->k[i], depth + 1, seen) || jb_str(c, b, ": ") ||
                repr_in(c, b, &d->v[i], depth + 1, seen))
                return -1;
        return jb_str(c, b, v->t == JT_NS ? "}>" : "}");
    }
    default: return jv_str(c, b, v);
    }
}

int jv_repr(jctx *c, jj_buf *b, const jv *v, int depth)
{
    const void *seen[JJ_MAX_VALUE_NEST + 2];
    (void)depth;
    return repr_in(c, b, v, 0, seen);
}

int jv_str(jctx *c, jj_buf *b, const jv *v)
{
    char t[40];
    switch (v->t) {
    case JT_UNDEF:
    case JT_MISSING: return 0;
    case JT_NONE: return jb_str(c, b, "None");
    case JT_BOOL: return jb_str(c, b, v->u.i ? "True" : "False");
    case JT_INT: return jb_printf(c, b, "%" PRId64, v->u.i);
    case JT_FLOAT: jj_float_repr(v->u.f, t); return jb_str(c, b, t);
    case JT_STR: return jb_put(c, b, v->u.s.p, v->u.s.n);
    case JT_LIST:
    case JT_DICT:
    case JT_NS: return jv_repr(c, b, v, 0);
    case JT_MACRO:
        return jb_printf(c, b, "<Macro '%.*s'>", (int)v->u.m->def->name.n, v->u.m->def->name.p);
    case JT_LOOP: return jb_printf(c, b, "<LoopContext %zu/%zu>", v->u.lp->i + 1, v->u.lp->n);
    default: return jb_str(c, b, "<built-in function>");
    }
}

int jv_tostr(jctx *c, const jv *v, jv *out)
{
    if (v->t == JT_STR) { *out = *v; return 0; }
    jj_buf b = {0};
    if (jv_str(c, &b, v)) return -1;
    return jb_take(c, &b, out);
}

/* ------------------------------------------------------------ == and < */

static int num_eq(const jv *a, const jv *b)
{
    if (a->t != JT_FLOAT && b->t != JT_FLOAT) return a->u.i == b->u.i;
    double x = a->t == JT_FLOAT ? a->u.f : (double)a->u.i, y = b->t == JT_FLOAT ? b->u.f : (double)b->u.i;
    return x == y;
}

int jv_equal(jctx *c, const jv *a, const jv *b, int depth)
{
    if (depth > JJ_MAX_VALUE_NEST) return jj_fail(c, NULL, "a value nests deeper than %d", JJ_MAX_VALUE_NEST);
    if (jv_isnum(a) && jv_isnum(b)) return num_eq(a, b);
    if (a->t != b->t) return 0;
    switch (a->t) {
    case JT_UNDEF:
    case JT_NONE: return 1;
    case JT_STR: return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
    case JT_LIST: {
        if (a->view || b->view) return a->view == b->view && a->u.l == b->u.l;
        if (a->tuple != b->tuple || a->u.l->n != b->u.l->n) return 0;
        if (jj_cost(c, JJ_ITEMS(a->u.l->n))) return -1;
        for (size_t i = 0; i < a->u.l->n; i++) {
            int e = jv_equal(c, &a->u.l->v[i], &b->u.l->v[i], depth + 1);
            if (e <= 0) return e;
        }
        return 1;
    }
    case JT_DICT: {
        const jj_dict *x = a->u.d, *y = b->u.d;
        if (x->n != y->n) return 0;
        for (size_t i = 0; i < x->n; i++) {
            jv w;
            int f = jd_get(c, y, x->k[i], &w);
            if (f <= 0) return f;
            int e = jv_equal(c, &x->v[i], &w, depth + 1);
            if (e <= 0) return e;
        }
        return 1;
    }
    case JT_NS: return a->u.d == b->u.d;
    case JT_FUNC: return a->u.i == b->u.i;
    default: return memcmp(&a->u, &b->u, sizeof a->u) == 0;
    }
}

int jv_compare(jctx *c, const jv *a, const jv *b, int *res)
{
    if (jv_isnum(a) && jv_isnum(b)) {
        if (a->t != JT_FLOAT && b->t != JT_FLOAT) *res = (a->u.i > b->u.i) - (a->u.i < b->u.i);
        else {
            double x = a->t == JT_FLOAT ? a->u.f : (double)a->u.i, y = b->t == JT_FLOAT ? b->u.f : (double)b->u.i;
            *res = (x > y) - (x < y);
        }
        return 0;
    }
    if (a->t == JT_STR && b->t == JT_STR) {
        size_t m = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        int r = m ? memcmp(a->u.s.p, b->u.s.p, m) : 0;
        *res = r ? (r > 0 ? 1 : -1) : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
        return 0;
    }
    if (a->t == JT_LIST && b->t == JT_LIST && a->tuple == b->tuple && !a->view && !b->view) {
        const jj_list *x = a->u.l, *y = b->u.l;
        size_t m = x->n < y->n ? x->n : y->n;
        for (size_t i = 0; i < m; i++) {
            int e = jv_equal(c, &x->v[i], &y->v[i], 0);
            if (e < 0) return -1;
            if (!e) return jv_compare(c, &x->v[i], &y->v[i], res);
        }
        *res = (x->n > y->n) - (x->n < y->n);
        return 0;
    }
    return 1;
}

/* --------------------------------------------------------------- tojson */

static int json_str(jctx *c, jj_buf *b, const char *s, size_t n, int ascii)
{
    if (jj_cost(c, JJ_SCAN(n)) || jb_put(c, b, "\"", 1)) return -1;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t l;
        uint32_t cp = jj_u8dec(s + i, n - i, &l);
        char e[16];
        int en = 0;
        switch (cp) {
        case '"': en = snprintf(e, sizeof e, "\\\""); break;
        case '\\': en = snprintf(e, sizeof e, "\\\\"); break;
        case '\n': en = snprintf(e, sizeof e, "\\n"); break;
        case '\r': en = snprintf(e, sizeof e, "\\r"); break;
        case '\t': en = snprintf(e, sizeof e, "\\t"); break;
        case '\b': en = snprintf(e, sizeof e, "\\b"); break;
        case '\f': en = snprintf(e, sizeof e, "\\f"); break;
        default:
            if (cp < 0x20) en = snprintf(e, sizeof e, "\\u%04x", cp);
            else if (ascii && cp >= 0x80) {
                if (cp < 0x10000) en = snprintf(e, sizeof e, "\\u%04x", cp);
                else {
                    uint32_t v = cp - 0x10000;
                    en = snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                }
            }
        }
        if (en) {
            if (jb_put(c, b, s + run, i - run) || jb_put(c, b, e, (size_t)en)) return -1;
            run = i + l;
        }
        i += l;
    }
    if (jb_put(c, b, s + run, n - run)) return -1;
    return jb_put(c, b, "\"", 1);
}

static int json_newline(jctx *c, jj_buf *b, const jj_json_opts *o, int level)
{
    if (!o->indent_on) return 0;
    if (jb_put(c, b, "\n", 1)) return -1;
    for (int i = 0; i < level; i++)
        if (jb_put(c, b, o->indent, o->indent_n)) return -1;
    return 0;
}

static int not_serializable(jctx *c, const jv *v)
{
    return jj_fail(c, NULL, "tojson: Object of type %s is not JSON serializable", jv_typename(v));
}

int jv_tojson(jctx *c, jj_buf *b, const jv *v, const jj_json_opts *o, int level)
{
    char t[40];
    if (level > JJ_MAX_VALUE_NEST) return jj_fail(c, NULL, "tojson: a value nests deeper than %d", JJ_MAX_VALUE_NEST);
    if (jj_cost(c, 1)) return -1;
    switch (v->t) {
    case JT_NONE: return jb_str(c, b, "null");
    case JT_BOOL: return jb_str(c, b, v->u.i ? "true" : "false");
    case JT_INT: return jb_printf(c, b, "%" PRId64, v->u.i);
    case JT_FLOAT:
        if (v->u.f != v->u.f) return jb_str(c, b, "NaN");
        if (isinf(v->u.f)) return jb_str(c, b, v->u.f < 0 ? "-Infinity" : "Infinity");
        jj_float_repr(v->u.f, t);
        return jb_str(c, b, t);
    case JT_STR: return json_str(c, b, v->u.s.p, v->u.s.n, o->ensure_ascii);
    case JT_LIST: {
        const jj_list *l = v->u.l;
        if (v->view) return not_serializable(c, v);
        if (!l->n) return jb_str(c, b, "[]");
        if (jb_str(c, b, "[") || json_newline(c, b, o, level + 1)) return -1;
        for (size_t i = 0; i < l->n; i++) {
            if (i && (jb_put(c, b, o->item_sep.p, o->item_sep.n) || json_newline(c, b, o, level + 1))) return -1;
            if (jv_tojson(c, b, &l->v[i], o, level + 1)) return -1;
        }
        if (json_newline(c, b, o, level)) return -1;
        return jb_str(c, b, "]");
    }
    case JT_DICT: {
        const jj_dict *d = v->u.d;
        if (!d->n) return jb_str(c, b, "{}");
        size_t *ord = jj_alloc(&c->mem, d->n * sizeof *ord);
        if (!ord) return jj_nomem(c);
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (o->sort_keys) {
            if (jj_cost(c, (uint64_t)d->n * d->n / 4 + 1)) return -1;
            for (size_t i = 1; i < d->n; i++) /* insertion sort: stable, dicts are small */
                for (size_t j = i; j > 0; j--) {
                    int r;
                    int e = jv_compare(c, &d->k[ord[j - 1]], &d->k[ord[j]], &r);
                    if (e < 0) return -1;
                    if (e) return jj_fail(c, NULL, "tojson: '<' not supported between instances of '%s' and '%s'",
                                          jv_typename(&d->k[ord[j]]), jv_typename(&d->k[ord[j - 1]]));
                    if (r <= 0) break;
                    size_t x = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = x;
                }
        }
        if (jb_str(c, b, "{") || json_newline(c, b, o, level + 1)) return -1;
        for (size_t k = 0; k < d->n; k++) {
            const jv *key = &d->k[ord[k]];
            if (k && (jb_put(c, b, o->item_sep.p, o->item_sep.n) || json_newline(c, b, o, level + 1))) return -1;
            int r;
            switch (key->t) {
            case JT_STR: r = json_str(c, b, key->u.s.p, key->u.s.n, o->ensure_ascii); break;
            case JT_INT: r = jb_printf(c, b, "\"%" PRId64 "\"", key->u.i); break;
            case JT_BOOL: r = jb_str(c, b, key->u.i ? "\"true\"" : "\"false\""); break;
            case JT_NONE: r = jb_str(c, b, "\"null\""); break;
            case JT_FLOAT:
                if (key->u.f != key->u.f) r = jb_str(c, b, "\"NaN\"");
                else if (isinf(key->u.f)) r = jb_str(c, b, key->u.f < 0 ? "\"-Infinity\"" : "\"Infinity\"");
                else {
                    jj_float_repr(key->u.f, t);
                    r = jb_printf(c, b, "\"%s\"", t);
                }
                break;
            default:
                return jj_fail(c, NULL, "tojson: keys must be str, int, float, bool or None, not %s", jv_typename(key));
            }
            if (r || jb_put(c, b, o->key_sep.p, o->key_sep.n) || jv_tojson(c, b, &d->v[ord[k]], o, level + 1)) return -1;
        }
        if (json_newline(c, b, o, level)) return -1;
        return jb_str(c, b, "}");
    }
    default: return not_serializable(c, v);
    }
}

int jj_html_escape(jctx *c, const jv *v, jv *out)
{
    if (v->t == JT_STR && v->safe) { *out = *v; return 0; }
    jv s;
    if (jv_tostr(c, v, &s)) return -1;
    jj_buf b = {0};
    size_t run = 0;
    if (jj_cost(c, JJ_SCAN(s.u.s.n))) return -1;
    for (size_t i = 0; i < s.u.s.n; i++) {
        const char *r = NULL;
        switch (s.u.s.p[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        }
        if (r) {
            if (jb_put(c, &b, s.u.s.p + run, i - run) || jb_str(c, &b, r)) return -1;
            run = i + 1;
        }
    }
    if (run == 0) {
        *out = s;
    } else {
        if (jb_put(c, &b, s.u.s.p + run, s.u.s.n - run)) return -1;
        jb_take(c, &b, out);
    }
    out->safe = 1;
    return 0;
}

const char *jj_memmem(const char *h, size_t hn, const char *n, size_t nn)
{
    if (!nn) return h;
    if (nn > hn) return NULL;
    const char *end = h + (hn - nn) + 1;
    for (const char *p = h; p < end; p++) {
        p = memchr(p, n[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, n, nn) == 0) return p;
    }
    return NULL;
}

/*
 * jinja_lib.c - the chat-template renderer's library: Jinja's filters and
 * tests, the methods of str, list and dict a sandboxed template may call,
 * the loop object, and the globals (range, dict, namespace, cycler,
 * joiner, and transformers' raise_exception and strftime_now).  Called by
 * jinja_parse.c (names to ids) and jinja_eval.c only.
 *
 * Semantics are those of the Jinja2 documentation's "List of Builtin
 * Filters", "List of Builtin Tests" and "List of Global Functions", and of
 * Python's str/list/dict methods, as Debian's python3-jinja2 runs them in
 * transformers' ImmutableSandboxedEnvironment: methods that change a list
 * or dict are "unsafe" (an Undefined that fails when called); tojson is
 * transformers' (json.dumps(x, ensure_ascii=False, indent=..., separators
 * =..., sort_keys=...)).  docs/chat.md "The renderer" lists what is here
 * and what is approximated: case mapping beyond ASCII, Latin-1, Latin
 * Extended-A, Greek, Cyrillic, Armenian and fullwidth Latin is identity.
 */
#include "jinja_impl.h"

#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tables/unicode_tables.h"

/* ---------------------------------------------------------------- names */

enum {
    F_ABS, F_ATTR, F_BATCH, F_CAPITALIZE, F_CENTER, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST,
    F_FLOAT, F_FORCEESCAPE, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP,
    F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT,
    F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER, F_WORDCOUNT, F_N
};
static const char *const FILTERS[F_N] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list", "lower", "map",
    "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort",
    "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_ESCAPED, T_EVEN, T_FALSE, T_FILTER, T_FLOAT,
    T_GE, T_GT, T_GREATERTHAN, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LESSTHAN, T_LOWER, T_LT, T_MAPPING, T_NE,
    T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TEST, T_TRUE, T_UNDEFINED, T_UPPER, T_OPEQ, T_OPNE,
    T_OPLT, T_OPLE, T_OPGT, T_OPGE, T_N
};
static const char *const TESTS[T_N] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter", "float",
    "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne",
    "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper", "==", "!=",
    "<", "<=", ">", ">="};

static int find_name(const char *const *tab, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(tab[i]) == len && memcmp(tab[i], s, len) == 0) return i;
    return -1;
}
int jl_filter_id(const char *name, size_t n) { return find_name(FILTERS, F_N, name, n); }
int jl_test_id(const char *name, size_t n) { return find_name(TESTS, T_N, name, n); }

/* --------------------------------------------------------------- helpers */

/* Binds positional and keyword arguments to names; slots not given are
 * JT_MISSING. */
static int bind(jctx *c, const jnode *at, const char *fn, const char *const *names, size_t np, jv *args, size_t na,
                jj_kw *kw, size_t nk, jv *slot)
{
    for (size_t i = 0; i < np; i++) slot[i] = jv_missing();
    if (na > np) return jj_fail(c, at, "%s() takes at most %zu argument(s) (%zu given)", fn, np, na);
    for (size_t i = 0; i < na; i++) slot[i] = args[i];
    for (size_t j = 0; j < nk; j++) {
        size_t i;
        for (i = 0; i < np; i++)
            if (strlen(names[i]) == kw[j].name.n && memcmp(names[i], kw[j].name.p, kw[j].name.n) == 0) break;
        if (i == np)
            return jj_fail(c, at, "%s() got an unexpected keyword argument '%.*s'", fn, (int)kw[j].name.n, kw[j].name.p);
        if (slot[i].t != JT_MISSING)
            return jj_fail(c, at, "%s() got multiple values for argument '%s'", fn, names[i]);
        slot[i] = kw[j].v;
    }
    return 0;
}

static int arg_int(jctx *c, const jnode *at, const char *fn, const jv *v, int64_t def, int64_t *out)
{
    *out = def;
    if (v->t == JT_MISSING) return 0;
    if (v->t == JT_INT || v->t == JT_BOOL) { *out = v->u.i; return 0; }
    return jj_fail(c, at, "%s(): '%s' object cannot be interpreted as an integer", fn, jv_typename(v));
}
static int arg_bool(const jv *v, int def) { return v->t == JT_MISSING ? def : jv_truth(v); }
static int arg_str(jctx *c, const jnode *at, const char *fn, const jv *v, jv *out)
{
    *out = jv_strn("", 0);
    if (v->t == JT_STR) { *out = *v; return 0; }
    return jj_fail(c, at, "%s(): expected a string, got %s", fn, jv_typename(v));
}

static int newstr(jctx *c, jj_buf *b, jv *out) { return jb_take(c, b, out); }

static int make_iter(jctx *c, jv *items, size_t n, int view, jv *out)
{
    if (jv_newlist(c, n, out)) return -1;
    if (n) memcpy(out->u.l->v, items, n * sizeof *items);
    out->view = (uint8_t)view;
    return 0;
}

static int tuple2(jctx *c, jv a, jv b, jv *out)
{
    if (jv_newlist(c, 2, out)) return -1;
    out->u.l->v[0] = a;
    out->u.l->v[1] = b;
    out->tuple = 1;
    return 0;
}

static int len_of(jctx *c, const jnode *at, const jv *v, int64_t *n)
{
    switch (v->t) {
    case JT_UNDEF: *n = 0; return 0;
    case JT_STR: *n = (int64_t)jj_u8len(v->u.s.p, v->u.s.n); return jj_cost(c, v->u.s.n / 256);
    case JT_LIST:
        if (v->view == LV_ITER) return jj_fail(c, at, "object of type 'generator' has no len()");
        *n = (int64_t)v->u.l->n;
        return 0;
    case JT_DICT: *n = (int64_t)v->u.d->n; return 0;
    case JT_LOOP: *n = (int64_t)v->u.lp->n; return 0;
    default: return jj_fail(c, at, "object of type '%s' has no len()", jv_typename(v));
    }
}

/* Jinja's attribute paths: "a.b.0" item by item (digits as integers) */
static int attr_path(jctx *c, const jnode *at, const jv *item, const jv *attr, jv *out)
{
    if (attr->t != JT_STR) return jj_getitem(c, at, item, attr, out);
    jv cur = *item;
    const char *p = attr->u.s.p, *end = p + attr->u.s.n;
    for (;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        jv key = jv_strn(p, n);
        int digits = n > 0;
        int64_t iv = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] < '0' || p[i] > '9' || iv > INT64_MAX / 10 - 10) { digits = 0; break; }
            iv = iv * 10 + (p[i] - '0');
        }
        if (digits) key = jv_int(iv);
        if (jj_getitem(c, at, &cur, &key, &cur)) return -1;
        if (!dot) break;
        p = dot + 1;
    }
    *out = cur;
    return 0;
}

/* ------------------------------------------------------------ case maps */

static uint32_t cp_upper(uint32_t c)
{
    if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
    if (c == 0xB5) return 0x39C;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x131) return 'I';
        if (c == 0x17F) return 'S';
        if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & 1 ? c - 1 : c;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return c & 1 ? c : c - 1;
        return c;
    }
    if ((c >= 0x1C4 && c <= 0x1CC) || (c >= 0x1F1 && c <= 0x1F3)) return c - (c - (c < 0x1F1 ? 0x1C4 : 0x1F1)) % 3;
    if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
    if (c == 0x3AC) return 0x386;
    if (c >= 0x3AD && c <= 0x3AF) return c - 37;
    if (c == 0x3CC) return 0x38C;
    if (c == 0x3CD || c == 0x3CE) return c - 63;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return c & 1 ? c - 1 : c;
    if (c >= 0x561 && c <= 0x586) return c - 48;
    if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
    return c;
}

static uint32_t cp_lower(uint32_t c)
{
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x130) return 'i';
        if (c == 0x178) return 0xFF;
        if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & 1 ? c : c + 1;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return c & 1 ? c + 1 : c;
        return c;
    }
    if ((c >= 0x1C4 && c <= 0x1CC) || (c >= 0x1F1 && c <= 0x1F3)) return c + 2 - (c - (c < 0x1F1 ? 0x1C4 : 0x1F1)) % 3;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return c & 1 ? c : c + 1;
    if (c >= 0x531 && c <= 0x556) return c + 48;
    if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
    return c;
}

static int is_cased(uint32_t c) { return cp_upper(c) != c || cp_lower(c) != c || c == 0xDF; }
static int is_upper_cp(uint32_t c) { return cp_lower(c) != c; }
static int is_lower_cp(uint32_t c) { return cp_upper(c) != c || c == 0xDF; }

static int uclass(uint32_t cp)
{
    if (cp < 128) return cis2_uclass_ascii[cp];
    size_t lo = 0, hi = CIS2_UCLASS_NRANGES;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (cp < cis2_uclass_ranges[m].lo) hi = m;
        else if (cp > cis2_uclass_ranges[m].hi) lo = m + 1;
        else return cis2_uclass_ranges[m].cls;
    }
    return UC_OTHER;
}

/* mode: 0 upper, 1 lower, 2 capitalize, 3 str.title, 4 swapcase */
static int case_map(jctx *c, const jv *s, int mode, jv *out)
{
    jj_buf b = {0};
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    if (jj_cost(c, n / 32)) return -1;
    int prev_cased = 0, first = 1;
    uint32_t prev = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = jj_u8dec(p + i, n - i, &l), r;
        int up;
        switch (mode) {
        case 0: up = 1; break;
        case 1: up = 0; break;
        case 2: up = first; break;
        case 3: up = !prev_cased; break;
        default: up = is_lower_cp(cp); break;
        }
        char e[8];
        size_t en;
        if (up && cp == 0xDF) {
            en = (size_t)snprintf(e, sizeof e, mode == 0 || mode == 4 ? "SS" : "Ss");
        } else if (!up && cp == 0x130) {
            en = jj_u8enc('i', e);
            en += jj_u8enc(0x307, e + en);
        } else if (!up && cp == 0x3A3) {
            /* Final_Sigma: after a cased letter and not before one */
            size_t l2;
            uint32_t nx = i + l < n ? jj_u8dec(p + i + l, n - i - l, &l2) : 0;
            r = (prev && is_cased(prev) && !(nx && is_cased(nx))) ? 0x3C2 : 0x3C3;
            en = jj_u8enc(r, e);
        } else {
            r = up ? cp_upper(cp) : cp_lower(cp);
            en = jj_u8enc(r, e);
        }
        if (jb_put(c, &b, e, en)) return -1;
        prev_cased = is_cased(cp);
        prev = cp;
        first = 0;
        i += l;
    }
    return newstr(c, &b, out);
}

/* ------------------------------------------------------ string helpers */

static int cp_in(uint32_t cp, const jv *chars)
{
    for (size_t i = 0; i < chars->u.s.n;) {
        size_t l;
        if (jj_u8dec(chars->u.s.p + i, chars->u.s.n - i, &l) == cp) return 1;
        i += l;
    }
    return 0;
}

/* str.strip family: which 1 left, 2 right, 3 both; chars NULL = whitespace */
static void strip(const jv *s, const jv *chars, int which, jv *out)
{
    const char *p = s->u.s.p;
    size_t a = 0, b = s->u.s.n;
    if (which & 1)
        while (a < b) {
            size_t l;
            uint32_t cp = jj_u8dec(p + a, b - a, &l);
            if (chars ? !cp_in(cp, chars) : !jj_isspace_cp(cp)) break;
            a += l;
        }
    if (which & 2)
        while (b > a) {
            size_t q = b - 1, l;
            while (q > a && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
            uint32_t cp = jj_u8dec(p + q, b - q, &l);
            if (chars ? !cp_in(cp, chars) : !jj_isspace_cp(cp)) break;
            b = q;
        }
    *out = jv_strn(p + a, b - a);
    out->safe = s->safe;
}

static int str_replace(jctx *c, const jv *s, const jv *old, const jv *new, int64_t count, jv *out)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, on = old->u.s.n;
    if (jj_cost(c, n / 32)) return -1;
    jj_buf b = {0};
    if (on == 0) { /* "abc".replace("", "-") == "-a-b-c-" */
        size_t i = 0;
        while (count != 0) {
            if (jb_put(c, &b, new->u.s.p, new->u.s.n)) return -1;
            count--;
            if (i >= n) break;
            size_t l;
            jj_u8dec(p + i, n - i, &l);
            if (jb_put(c, &b, p + i, l)) return -1;
            i += l;
        }
        if (jb_put(c, &b, p + i, n - i)) return -1;
        return newstr(c, &b, out);
    }
    size_t i = 0;
    while (count != 0) {
        const char *f = jj_memmem(p + i, n - i, old->u.s.p, on);
        if (!f) break;
        if (jb_put(c, &b, p + i, (size_t)(f - (p + i))) || jb_put(c, &b, new->u.s.p, new->u.s.n)) return -1;
        i = (size_t)(f - p) + on;
        count--;
    }
    if (i == 0 && b.n == 0) { *out = *s; out->safe = 0; return 0; }
    if (jb_put(c, &b, p + i, n - i)) return -1;
    return newstr(c, &b, out);
}

static int push(jctx *c, jv **v, size_t *n, size_t *cap, jv x)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        jv *nv = jj_alloc(&c->mem, nc * sizeof *nv);
        if (!nv) return jj_nomem(c);
        if (*n) memcpy(nv, *v, *n * sizeof *nv);
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int list_of(jctx *c, jv *items, size_t n, jv *out)
{
    if (jv_newlist(c, n, out)) return -1;
    if (n) memcpy(out->u.l->v, items, n * sizeof *items);
    return 0;
}

/* str.split / str.rsplit */
static int str_split(jctx *c, const jnode *at, const jv *s, const jv *sep, int64_t maxsplit, int right, jv *out)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, cap = 0, k = 0;
    jv *parts = NULL;
    if (jj_cost(c, n / 32)) return -1;
    if (sep && sep->t == JT_STR && sep->u.s.n == 0) return jj_fail(c, at, "empty separator");
    if (!sep || sep->t == JT_NONE || sep->t == JT_MISSING) {
        /* runs of whitespace; leading/trailing runs give no empty parts */
        if (!right) {
            size_t i = 0;
            for (;;) {
                size_t l;
                while (i < n && jj_isspace_cp(jj_u8dec(p + i, n - i, &l))) i += l;
                if (i >= n) break;
                if (maxsplit >= 0 && (int64_t)k == maxsplit) { /* the rest, as it is */
                    if (push(c, &parts, &k, &cap, jv_strn(p + i, n - i))) return -1;
                    break;
                }
                size_t st = i;
                while (i < n && !jj_isspace_cp(jj_u8dec(p + i, n - i, &l))) i += l;
                if (push(c, &parts, &k, &cap, jv_strn(p + st, i - st))) return -1;
            }
        } else {
            size_t e = n;
            for (;;) {
                while (e > 0) {
                    size_t q = e - 1, l;
                    while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
                    if (!jj_isspace_cp(jj_u8dec(p + q, e - q, &l))) break;
                    e = q;
                }
                if (e == 0) break;
                if (maxsplit >= 0 && (int64_t)k == maxsplit) {
                    if (push(c, &parts, &k, &cap, jv_strn(p, e))) return -1;
                    break;
                }
                size_t st = e;
                while (st > 0) {
                    size_t q = st - 1, l;
                    while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
                    if (jj_isspace_cp(jj_u8dec(p + q, st - q, &l))) break;
                    st = q;
                }
                if (push(c, &parts, &k, &cap, jv_strn(p + st, e - st))) return -1;
                e = st;
            }
        }
    } else {
        if (sep->t != JT_STR) return jj_fail(c, at, "must be str or None, not %s", jv_typename(sep));
        const char *q = sep->u.s.p;
        size_t qn = sep->u.s.n;
        if (!right) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                const char *f = (maxsplit < 0 || splits < maxsplit) ? jj_memmem(p + i, n - i, q, qn) : NULL;
                if (!f) {
                    if (push(c, &parts, &k, &cap, jv_strn(p + i, n - i))) return -1;
                    break;
                }
                if (push(c, &parts, &k, &cap, jv_strn(p + i, (size_t)(f - p) - i))) return -1;
                i = (size_t)(f - p) + qn;
                splits++;
            }
        } else {
            size_t e = n;
            int64_t splits = 0;
            for (;;) {
                const char *f = NULL;
                if (maxsplit < 0 || splits < maxsplit)
                    for (size_t j = e >= qn ? e - qn + 1 : 0; j-- > 0;)
                        if (memcmp(p + j, q, qn) == 0) { f = p + j; break; }
                if (!f) {
                    if (push(c, &parts, &k, &cap, jv_strn(p, e))) return -1;
                    break;
                }
                if (push(c, &parts, &k, &cap, jv_strn(f + qn, e - (size_t)(f - p) - qn))) return -1;
                e = (size_t)(f - p);
                splits++;
            }
        }
    }
    if (right)
        for (size_t i = 0; i < k / 2; i++) {
            jv t = parts[i];
            parts[i] = parts[k - 1 - i];
            parts[k - 1 - i] = t;
        }
    return list_of(c, parts, k, out);
}

/* the line boundaries of str.splitlines: their length at p[i], or 0 */
static size_t line_break(const char *p, size_t n, size_t i)
{
    unsigned char ch = (unsigned char)p[i];
    if (ch == '\r') return i + 1 < n && p[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == 0x0B || ch == 0x0C || (ch >= 0x1C && ch <= 0x1E)) return 1;
    if (ch >= 0x80) {
        size_t l;
        uint32_t cp = jj_u8dec(p + i, n - i, &l);
        if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) return l;
    }
    return 0;
}

static int splitlines(jctx *c, const jv *s, int keepends, jv **parts, size_t *k)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, cap = 0, st = 0;
    *parts = NULL;
    *k = 0;
    if (jj_cost(c, n / 32)) return -1;
    for (size_t i = 0; i < n;) {
        size_t bl = line_break(p, n, i);
        if (!bl) { i++; continue; }
        if (push(c, parts, k, &cap, jv_strn(p + st, (keepends ? i + bl : i) - st))) return -1;
        i += bl;
        st = i;
    }
    if (st < n && push(c, parts, k, &cap, jv_strn(p + st, n - st))) return -1;
    return 0;
}

/* ---------------------------------------------------------- the filters */

static int key_of(jctx *c, const jnode *at, const jv *item, const jv *attr, int ignore_case, jv *out)
{
    if (attr && attr->t != JT_MISSING && attr->t != JT_NONE) {
        if (attr_path(c, at, item, attr, out)) return -1;
    } else {
        *out = *item;
    }
    if (ignore_case && out->t == JT_STR) return case_map(c, out, 1, out);
    return 0;
}

static int cmp_or_fail(jctx *c, const jnode *at, const jv *a, const jv *b, int *r)
{
    int e = jv_compare(c, a, b, r);
    if (e < 0) return -1;
    if (e) return jj_fail(c, at, "'<' not supported between instances of '%s' and '%s'", jv_typename(a), jv_typename(b));
    return 0;
}

/* a stable merge sort of idx by keys[] (reverse: descending, ties kept in order) */
static int msort(jctx *c, const jnode *at, const jv *keys, size_t *idx, size_t *tmp, size_t n, int rev)
{
    if (n < 2) return 0;
    size_t h = n / 2;
    if (msort(c, at, keys, idx, tmp, h, rev) || msort(c, at, keys, idx + h, tmp, n - h, rev)) return -1;
    if (jj_cost(c, n / 8 + 1)) return -1;
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int r;
        if (rev ? cmp_or_fail(c, at, &keys[idx[i]], &keys[idx[j]], &r) : cmp_or_fail(c, at, &keys[idx[j]], &keys[idx[i]], &r))
            return -1;
        /* take the right one only when it is strictly before */
        if (rev ? r < 0 : r < 0) tmp[o++] = idx[j++];
        else tmp[o++] = idx[i++];
    }
    while (i < h) tmp[o++] = idx[i++];
    while (j < n) tmp[o++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return 0;
}

static int sort_items(jctx *c, const jnode *at, jv *items, size_t n, jv *keys, int rev, jv *out)
{
    size_t *idx = jj_alloc(&c->mem, (n ? n : 1) * sizeof *idx), *tmp = jj_alloc(&c->mem, (n ? n : 1) * sizeof *tmp);
    if (!idx || !tmp) return jj_nomem(c);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    if (msort(c, at, keys, idx, tmp, n, rev)) return -1;
    if (jv_newlist(c, n, out)) return -1;
    for (size_t i = 0; i < n; i++) out->u.l->v[i] = items[idx[i]];
    return 0;
}

static int f_tojson(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys"};
    jv a[4];
    if (bind(c, at, "tojson", names, 4, args, na, kw, nk, a)) return -1;
    jj_json_opts o;
    memset(&o, 0, sizeof o);
    o.ensure_ascii = arg_bool(&a[0], 0);
    o.sort_keys = arg_bool(&a[3], 0);
    char sp[64];
    if (a[1].t == JT_INT || a[1].t == JT_BOOL) {
        int64_t w = a[1].u.i < 0 ? 0 : a[1].u.i > 64 ? -1 : a[1].u.i;
        if (w < 0) return jj_fail(c, at, "tojson: indent wider than 64 spaces");
        memset(sp, ' ', (size_t)w);
        o.indent = sp;
        o.indent_n = (size_t)w;
        o.indent_on = 1;
    } else if (a[1].t == JT_STR) {
        o.indent = a[1].u.s.p;
        o.indent_n = a[1].u.s.n;
        o.indent_on = 1;
    } else if (a[1].t != JT_MISSING && a[1].t != JT_NONE) {
        return jj_fail(c, at, "tojson: indent must be an integer or a string");
    }
    o.item_sep = o.indent_on ? (jj_str){",", 1} : (jj_str){", ", 2};
    o.key_sep = (jj_str){": ", 2};
    if (a[2].t != JT_MISSING && a[2].t != JT_NONE) {
        if (a[2].t != JT_LIST || a[2].u.l->n != 2 || a[2].u.l->v[0].t != JT_STR || a[2].u.l->v[1].t != JT_STR)
            return jj_fail(c, at, "tojson: separators must be a pair of strings");
        o.item_sep = a[2].u.l->v[0].u.s;
        o.key_sep = a[2].u.l->v[1].u.s;
    }
    jj_buf b = {0};
    if (jv_tojson(c, &b, val, &o, 0)) return -1;
    return newstr(c, &b, out);
}

static int f_indent(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    static const char *const names[] = {"width", "first", "blank"};
    jv a[3], s, ind;
    if (bind(c, at, "indent", names, 3, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
    char sp[256];
    if (a[0].t == JT_STR) ind = a[0];
    else {
        int64_t w;
        if (arg_int(c, at, "indent", &a[0], 4, &w)) return -1;
        if (w > (int64_t)sizeof sp) return jj_fail(c, at, "indent: width over %zu", sizeof sp);
        if (w < 0) w = 0;
        memset(sp, ' ', (size_t)w);
        ind = jv_strn(sp, (size_t)w);
    }
    int first = arg_bool(&a[1], 0), blank = arg_bool(&a[2], 0);
    /* s + "\n", split into lines; lines after the first indented (blank
     * ones only with blank=True), joined with "\n" */
    jj_buf t = {0};
    if (jb_put(c, &t, s.u.s.p, s.u.s.n) || jb_put(c, &t, "\n", 1)) return -1;
    jv sl = jv_strn(t.p, t.n), *lines;
    size_t k;
    if (splitlines(c, &sl, 0, &lines, &k)) return -1;
    jj_buf b = {0};
    if (first && jb_put(c, &b, ind.u.s.p, ind.u.s.n)) return -1;
    for (size_t i = 0; i < k; i++) {
        if (i && jb_put(c, &b, "\n", 1)) return -1;
        if (i && (blank || lines[i].u.s.n) && jb_put(c, &b, ind.u.s.p, ind.u.s.n)) return -1;
        if (jb_put(c, &b, lines[i].u.s.p, lines[i].u.s.n)) return -1;
    }
    return newstr(c, &b, out);
}

/* select/reject/selectattr/rejectattr: attr_mode takes the attribute first */
static int f_select(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, int attr_mode,
                    int keep, jv *out)
{
    jv *items, attr = jv_missing();
    size_t n, base = 0;
    if (attr_mode) {
        if (na < 1) return jj_fail(c, at, "selectattr/rejectattr need an attribute");
        attr = args[0];
        base = 1;
    }
    int tid = -1;
    if (na > base) {
        if (args[base].t != JT_STR) return jj_fail(c, at, "the test's name must be a string");
        tid = jl_test_id(args[base].u.s.p, args[base].u.s.n);
        if (tid < 0) return jj_fail(c, at, "No test named '%.*s'", (int)args[base].u.s.n, args[base].u.s.p);
    }
    if (jj_iter(c, at, val, &items, &n)) return -1;
    jv *kept = jj_alloc(&c->mem, (n ? n : 1) * sizeof *kept);
    if (!kept) return jj_nomem(c);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        jv x = items[i];
        int r;
        if (attr_mode && attr_path(c, at, &items[i], &attr, &x)) return -1;
        if (tid >= 0) {
            if (jl_test(c, at, tid, &x, args + base + 1, na - base - 1, kw, nk, &r)) return -1;
        } else {
            r = jv_truth(&x);
        }
        if (r == keep) kept[k++] = items[i];
    }
    return make_iter(c, kept, k, LV_ITER, out);
}

static int f_map(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv *items;
    size_t n;
    if (jj_iter(c, at, val, &items, &n)) return -1;
    jv *res = jj_alloc(&c->mem, (n ? n : 1) * sizeof *res);
    if (!res) return jj_nomem(c);
    if (na == 0) { /* map(attribute=..., default=...) */
        jv attr = jv_missing(), def = jv_missing();
        for (size_t j = 0; j < nk; j++) {
            if (kw[j].name.n == 9 && !memcmp(kw[j].name.p, "attribute", 9)) attr = kw[j].v;
            else if (kw[j].name.n == 7 && !memcmp(kw[j].name.p, "default", 7)) def = kw[j].v;
            else return jj_fail(c, at, "map(): unexpected keyword argument '%.*s'", (int)kw[j].name.n, kw[j].name.p);
        }
        if (attr.t == JT_MISSING) return jj_fail(c, at, "map(): give a filter's name or attribute=");
        for (size_t i = 0; i < n; i++) {
            if (attr_path(c, at, &items[i], &attr, &res[i])) return -1;
            if (res[i].t == JT_UNDEF && def.t != JT_MISSING && def.t != JT_NONE) res[i] = def;
        }
    } else {
        if (args[0].t != JT_STR) return jj_fail(c, at, "map(): the filter's name must be a string");
        int fid = jl_filter_id(args[0].u.s.p, args[0].u.s.n);
        if (fid < 0) return jj_fail(c, at, "No filter named '%.*s'", (int)args[0].u.s.n, args[0].u.s.p);
        for (size_t i = 0; i < n; i++)
            if (jl_filter(c, at, fid, &items[i], args + 1, na - 1, kw, nk, &res[i])) return -1;
    }
    return make_iter(c, res, n, LV_ITER, out);
}

static int f_minmax(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, int max, jv *out)
{
    static const char *const names[] = {"case_sensitive", "attribute"};
    jv a[2], *items;
    size_t n;
    if (bind(c, at, max ? "max" : "min", names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
    if (!n) { *out = jv_undef("No aggregated item, sequence was empty."); return 0; }
    int ic = !arg_bool(&a[0], 0);
    jv best, bk;
    if (key_of(c, at, &items[0], &a[1], ic, &bk)) return -1;
    best = items[0];
    for (size_t i = 1; i < n; i++) {
        jv k;
        int r;
        if (key_of(c, at, &items[i], &a[1], ic, &k) || cmp_or_fail(c, at, &k, &bk, &r)) return -1;
        if (max ? r > 0 : r < 0) { best = items[i]; bk = k; }
    }
    *out = best;
    return 0;
}

/* Python's float() syntax (no hex): [sign] digits [. digits] [e [sign]
 * digits], or inf, infinity, nan; underscores between digits */
static int py_float_parse(const char *s, size_t n, double *out)
{
    char b[96];
    size_t bn = 0, i = 0;
    if (n >= sizeof b - 1) return 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) b[bn++] = s[i++];
    const char *w = s + i;
    size_t wn = n - i;
    static const char *const words[] = {"inf", "infinity", "nan"};
    for (int k = 0; k < 3; k++)
        if (wn == strlen(words[k]) && strncasecmp(w, words[k], wn) == 0) {
            *out = k == 2 ? NAN : (bn && b[0] == '-' ? -INFINITY : INFINITY);
            return 1;
        }
    int digits = 0, prev_digit = 0;
    for (; i < n; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9') { b[bn++] = ch; digits++; prev_digit = 1; continue; }
        if (ch == '_' && prev_digit && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9') continue;
        if (ch == '.' && !strchr(b, '.') && !strchr(b, 'e')) { b[bn++] = '.'; prev_digit = 0; continue; }
        if ((ch == 'e' || ch == 'E') && digits && !strchr(b, 'e')) {
            b[bn++] = 'e';
            if (i + 1 < n && (s[i + 1] == '+' || s[i + 1] == '-')) b[bn++] = s[++i];
            if (i + 1 >= n || s[i + 1] < '0' || s[i + 1] > '9') return 0;
            prev_digit = 0;
            continue;
        }
        return 0;
    }
    if (!digits) return 0;
    b[bn] = 0;
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1])
        for (char *q = b; *q; q++)
            if (*q == '.') *q = dp[0];
    *out = strtod(b, NULL);
    return 1;
}

/* Python's int(s, base): [sign] digits with underscores between them, an
 * optional 0x/0o/0b prefix matching the base (any, for base 0) */
static int py_int_parse(const char *s, size_t n, int base, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i + 1 < n && s[i] == '0') {
        char x = (char)(s[i + 1] | 0x20);
        int pb = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
        if (pb && (base == 0 || base == pb)) { base = pb; i += 2; if (i < n && s[i] == '_') i++; }
    }
    if (base == 0) {
        base = 10;
        if (i + 1 < n && s[i] == '0') { /* base 0: no leading zeros but 0 itself */
            for (size_t j = i; j < n; j++) if (s[j] != '0' && s[j] != '_') return 0;
        }
    }
    uint64_t v = 0;
    int digits = 0;
    for (; i < n; i++) {
        char ch = s[i];
        if (ch == '_' && digits && i + 1 < n && s[i + 1] != '_') continue;
        int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10 : 99;
        if (d >= base) return 0;
        if (v > ((uint64_t)INT64_MAX + 1 - (uint64_t)d) / (uint64_t)base) return -1;
        v = v * (uint64_t)base + (uint64_t)d;
        digits++;
    }
    if (!digits || (!neg && v > (uint64_t)INT64_MAX)) return digits ? -1 : 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

static int to_int(jctx *c, const jnode *at, const jv *v, const jv *def, int64_t base, jv *out)
{
    if (v->t == JT_INT || v->t == JT_BOOL) { *out = jv_int(v->u.i); return 0; }
    if (v->t == JT_FLOAT && isfinite(v->u.f) && (v->u.f < 0 ? -v->u.f : v->u.f) < 9.2e18) { *out = jv_int((int64_t)v->u.f); return 0; }
    if (v->t == JT_STR) {
        /* int(s, base), else int(float(s)) */
        jv t;
        strip(v, NULL, 3, &t);
        int64_t iv;
        double d;
        int r = py_int_parse(t.u.s.p, t.u.s.n, (int)base, &iv);
        if (r < 0) return jj_fail(c, at, "integer overflow (cis2 keeps integers in 64 bits)");
        if (r) { *out = jv_int(iv); return 0; }
        if (py_float_parse(t.u.s.p, t.u.s.n, &d)) {
            if (isfinite(d) && (d < 0 ? -d : d) < 9.2e18) { *out = jv_int((int64_t)d); return 0; }
            if (isinf(d)) return jj_fail(c, at, "cannot convert float infinity to integer");
        }
    }
    *out = def->t == JT_MISSING ? jv_int(0) : *def;
    return 0;
}

static int to_float(const jv *v, const jv *def, jv *out)
{
    if (v->t == JT_FLOAT) { *out = *v; return 0; }
    if (v->t == JT_INT || v->t == JT_BOOL) { *out = jv_float((double)v->u.i); return 0; }
    if (v->t == JT_STR) {
        jv t;
        double d;
        strip(v, NULL, 3, &t);
        if (py_float_parse(t.u.s.p, t.u.s.n, &d)) { *out = jv_float(d); return 0; }
    }
    *out = def->t == JT_MISSING ? jv_float(0.0) : *def;
    return 0;
}

static int f_round(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    static const char *const names[] = {"precision", "method"};
    jv a[2];
    int64_t prec;
    if (bind(c, at, "round", names, 2, args, na, kw, nk, a) || arg_int(c, at, "round", &a[0], 0, &prec)) return -1;
    int method = 0;
    if (a[1].t == JT_STR) {
        if (a[1].u.s.n == 5 && !memcmp(a[1].u.s.p, "floor", 5)) method = 1;
        else if (a[1].u.s.n == 4 && !memcmp(a[1].u.s.p, "ceil", 4)) method = 2;
        else if (!(a[1].u.s.n == 6 && !memcmp(a[1].u.s.p, "common", 6)))
            return jj_fail(c, at, "method must be common, ceil or floor");
    }
    if (!jv_isnum(val)) return jj_fail(c, at, "type %s doesn't define __round__ method", jv_typename(val));
    if (prec < -20 || prec > 20) return jj_fail(c, at, "round: precision out of range");
    if (method == 0 && val->t != JT_FLOAT) { *out = jv_int(val->u.i); return 0; }
    double x = val->t == JT_FLOAT ? val->u.f : (double)val->u.i;
    if (prec < 0) return jj_fail(c, at, "round: a negative precision is not supported");
    if (method) { /* floor(x * 10**p) / 10**p */
        double m = 1;
        for (int64_t i = 0; i < prec; i++) m *= 10;
        double y = x * m, f = jj_floor(y);
        if (method == 2 && f != y) f += 1;
        *out = jv_float(f / m);
        return 0;
    }
    if (!isfinite(x)) { *out = jv_float(x); return 0; }
    /* correctly rounded, ties to even on the exact value (printf's, as
     * Python's round) */
    char b[400];
    snprintf(b, sizeof b, "%.*f", (int)prec, x);
    for (char *q = b; *q; q++)
        if (*q == ',') *q = '.';
    double r;
    if (!py_float_parse(b, strlen(b), &r)) return jj_fail(c, at, "round: internal");
    *out = jv_float(r);
    return 0;
}

int jl_filter(jctx *c, const jnode *at, int id, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv a[4], s, *items;
    size_t n;
    int64_t k = 0;
    const char *fn = FILTERS[id];
    if (jj_cost(c, 1)) return -1;
    switch (id) {
    case F_ABS:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_FLOAT) *out = jv_float(val->u.f < 0 || (val->u.f == 0 && signbit(val->u.f)) ? -val->u.f : val->u.f);
        else if (val->t == JT_INT || val->t == JT_BOOL) {
            if (val->u.i == INT64_MIN) return jj_fail(c, at, "integer overflow");
            *out = jv_int(val->u.i < 0 ? -val->u.i : val->u.i);
        } else return jj_fail(c, at, "bad operand type for abs(): '%s'", jv_typename(val));
        return 0;
    case F_ATTR: {
        static const char *const names[] = {"name"};
        if (bind(c, at, fn, names, 1, args, na, kw, nk, a) || arg_str(c, at, fn, &a[0], &s)) return -1;
        if (val->t == JT_UNDEF) { *out = *val; return 0; }
        if (val->t == JT_LOOP) return jl_loop_attr(c, val, s.u.s.p, s.u.s.n, out);
        if (val->t == JT_NS && jd_getn(val->u.d, s.u.s.p, s.u.s.n, out)) return 0;
        if (jl_method_lookup(c, val, s.u.s.p, s.u.s.n, out)) return 0;
        *out = jv_undef("no such attribute");
        return 0;
    }
    case F_BATCH: {
        static const char *const names[] = {"linecount", "fill_with"};
        if (bind(c, at, fn, names, 2, args, na, kw, nk, a) || arg_int(c, at, fn, &a[0], 1, &k)) return -1;
        if (k <= 0) return jj_fail(c, at, "batch: linecount must be positive");
        if (jj_iter(c, at, val, &items, &n)) return -1;
        size_t nb = (n + (size_t)k - 1) / (size_t)k;
        jv *rows = jj_alloc(&c->mem, (nb ? nb : 1) * sizeof *rows);
        if (!rows) return jj_nomem(c);
        for (size_t b = 0; b < nb; b++) {
            size_t st = b * (size_t)k, m = n - st < (size_t)k ? n - st : (size_t)k;
            size_t w = a[1].t != JT_MISSING && a[1].t != JT_NONE ? (size_t)k : m;
            if (jv_newlist(c, w, &rows[b])) return -1;
            for (size_t i = 0; i < w; i++) rows[b].u.l->v[i] = i < m ? items[st + i] : a[1];
        }
        return make_iter(c, rows, nb, LV_ITER, out);
    }
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
    case F_TITLE:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
        if (id == F_TITLE) {
            /* words start after '-', whitespace, '(', '{', '[' or '<' */
            jj_buf b = {0};
            int start = 1;
            for (size_t i = 0; i < s.u.s.n;) {
                size_t l;
                uint32_t cp = jj_u8dec(s.u.s.p + i, s.u.s.n - i, &l);
                int sepc = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jj_isspace_cp(cp);
                jv ch = jv_strn(s.u.s.p + i, l), m;
                if (sepc) m = ch;
                else if (case_map(c, &ch, start ? 0 : 1, &m)) return -1;
                if (jb_put(c, &b, m.u.s.p, m.u.s.n)) return -1;
                start = sepc;
                i += l;
            }
            return newstr(c, &b, out);
        }
        return case_map(c, &s, id == F_UPPER ? 0 : id == F_LOWER ? 1 : 2, out);
    case F_CENTER: {
        static const char *const names[] = {"width"};
        if (bind(c, at, fn, names, 1, args, na, kw, nk, a) || arg_int(c, at, fn, &a[0], 80, &k) || jv_tostr(c, val, &s))
            return -1;
        int64_t len = (int64_t)jj_u8len(s.u.s.p, s.u.s.n);
        if (k <= len) { *out = s; return 0; }
        if (k > (int64_t)c->max_output) return jj_limit(c, "center: width over max_output");
        int64_t pad = k - len, left = pad / 2 + (pad & k & 1);
        jj_buf b = {0};
        for (int64_t i = 0; i < left; i++) if (jb_put(c, &b, " ", 1)) return -1;
        if (jb_put(c, &b, s.u.s.p, s.u.s.n)) return -1;
        for (int64_t i = 0; i < pad - left; i++) if (jb_put(c, &b, " ", 1)) return -1;
        return newstr(c, &b, out);
    }
    case F_COUNT:
    case F_LENGTH:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || len_of(c, at, val, &k)) return -1;
        *out = jv_int(k);
        return 0;
    case F_D:
    case F_DEFAULT: {
        static const char *const names[] = {"default_value", "boolean"};
        if (bind(c, at, fn, names, 2, args, na, kw, nk, a)) return -1;
        int use = val->t == JT_UNDEF || (arg_bool(&a[1], 0) && !jv_truth(val));
        *out = use ? (a[0].t == JT_MISSING ? jv_strn("", 0) : a[0]) : *val;
        return 0;
    }
    case F_DICTSORT: {
        static const char *const names[] = {"case_sensitive", "by", "reverse"};
        if (bind(c, at, fn, names, 3, args, na, kw, nk, a)) return -1;
        if (val->t != JT_DICT) return jj_fail(c, at, "dictsort: expected a mapping, got %s", jv_typename(val));
        int by_value = 0;
        if (a[1].t == JT_STR) {
            if (a[1].u.s.n == 5 && !memcmp(a[1].u.s.p, "value", 5)) by_value = 1;
            else if (!(a[1].u.s.n == 3 && !memcmp(a[1].u.s.p, "key", 3)))
                return jj_fail(c, at, "You can only sort by either \"key\" or \"value\"");
        }
        n = val->u.d->n;
        jv *pairs = jj_alloc(&c->mem, (n ? n : 1) * sizeof *pairs), *keys = jj_alloc(&c->mem, (n ? n : 1) * sizeof *keys);
        if (!pairs || !keys) return jj_nomem(c);
        for (size_t i = 0; i < n; i++) {
            if (tuple2(c, val->u.d->k[i], val->u.d->v[i], &pairs[i])) return -1;
            if (key_of(c, at, by_value ? &val->u.d->v[i] : &val->u.d->k[i], NULL, !arg_bool(&a[0], 0), &keys[i])) return -1;
        }
        return sort_items(c, at, pairs, n, keys, arg_bool(&a[2], 0), out);
    }
    case F_E:
    case F_ESCAPE:
    case F_FORCEESCAPE:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (id == F_FORCEESCAPE && val->t == JT_STR && val->safe) {
            jv t = *val;
            t.safe = 0;
            return jj_html_escape(c, &t, out);
        }
        return jj_html_escape(c, val, out);
    case F_FIRST:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_LIST && val->view == LV_ITER) {
            jj_list *l = val->u.l;
            *out = l->pos < l->n ? l->v[l->pos++] : jv_undef("No first item, sequence was empty.");
            return 0;
        }
        if (val->t == JT_STR) {
            if (!val->u.s.n) { *out = jv_undef("No first item, sequence was empty."); return 0; }
            size_t l;
            jj_u8dec(val->u.s.p, val->u.s.n, &l);
            *out = jv_strn(val->u.s.p, l);
            return 0;
        }
        if (jj_iter(c, at, val, &items, &n)) return -1;
        *out = n ? items[0] : jv_undef("No first item, sequence was empty.");
        return 0;
    case F_LAST:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_LIST && val->view == LV_ITER) return jj_fail(c, at, "'generator' object is not reversible");
        if (val->t == JT_UNDEF) { *out = jv_undef("No last item, sequence was empty."); return 0; }
        if (val->t == JT_STR) {
            if (!val->u.s.n) { *out = jv_undef("No last item, sequence was empty."); return 0; }
            size_t q = val->u.s.n - 1;
            while (q > 0 && ((unsigned char)val->u.s.p[q] & 0xC0) == 0x80) q--;
            *out = jv_strn(val->u.s.p + q, val->u.s.n - q);
            return 0;
        }
        if (jj_iter(c, at, val, &items, &n)) return -1;
        *out = n ? items[n - 1] : jv_undef("No last item, sequence was empty.");
        return 0;
    case F_FLOAT: {
        static const char *const names[] = {"default"};
        if (bind(c, at, fn, names, 1, args, na, kw, nk, a)) return -1;
        return to_float(val, &a[0], out);
    }
    case F_INT: {
        static const char *const names[] = {"default", "base"};
        if (bind(c, at, fn, names, 2, args, na, kw, nk, a) || arg_int(c, at, fn, &a[1], 10, &k)) return -1;
        if (k != 0 && (k < 2 || k > 36)) return jj_fail(c, at, "int() base must be >= 2 and <= 36, or 0");
        return to_int(c, at, val, &a[0], k, out);
    }
    case F_FORMAT: {
        if (jv_tostr(c, val, &s)) return -1;
        jv tup;
        if (nk && na) return jj_fail(c, at, "can't handle positional and keyword arguments at the same time");
        if (nk) {
            if (jv_newdict(c, &tup)) return -1;
            for (size_t j = 0; j < nk; j++)
                if (jd_set(c, tup.u.d, jv_strn(kw[j].name.p, kw[j].name.n), kw[j].v)) return -1;
        } else {
            if (jv_newlist(c, na, &tup)) return -1;
            if (na) memcpy(tup.u.l->v, args, na * sizeof *args);
            tup.tuple = 1;
        }
        return jl_percent_format(c, at, &s, &tup, out);
    }
    case F_INDENT: return f_indent(c, at, val, args, na, kw, nk, out);
    case F_ITEMS:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_UNDEF) return make_iter(c, NULL, 0, LV_ITER, out);
        if (val->t != JT_DICT) return jj_fail(c, at, "Can only get item pairs from a mapping.");
        n = val->u.d->n;
        if (jv_newlist(c, n, out)) return -1;
        for (size_t i = 0; i < n; i++)
            if (tuple2(c, val->u.d->k[i], val->u.d->v[i], &out->u.l->v[i])) return -1;
        out->view = LV_ITER;
        return 0;
    case F_JOIN: {
        static const char *const names[] = {"d", "attribute"};
        if (bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv sep = jv_strn("", 0);
        if (a[0].t != JT_MISSING && jv_tostr(c, &a[0], &sep)) return -1;
        jj_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            jv x = items[i];
            if (a[1].t != JT_MISSING && a[1].t != JT_NONE && attr_path(c, at, &items[i], &a[1], &x)) return -1;
            if ((i && jb_put(c, &b, sep.u.s.p, sep.u.s.n)) || jv_str(c, &b, &x)) return -1;
        }
        return newstr(c, &b, out);
    }
    case F_LIST:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        if (val->t == JT_LIST && val->view == LV_NONE && !val->tuple) { *out = *val; return 0; }
        return list_of(c, items, n, out);
    case F_MAP: return f_map(c, at, val, args, na, kw, nk, out);
    case F_MAX:
    case F_MIN: return f_minmax(c, at, val, args, na, kw, nk, id == F_MAX, out);
    case F_REJECT: return f_select(c, at, val, args, na, kw, nk, 0, 0, out);
    case F_SELECT: return f_select(c, at, val, args, na, kw, nk, 0, 1, out);
    case F_REJECTATTR: return f_select(c, at, val, args, na, kw, nk, 1, 0, out);
    case F_SELECTATTR: return f_select(c, at, val, args, na, kw, nk, 1, 1, out);
    case F_REPLACE: {
        static const char *const names[] = {"old", "new", "count"};
        jv o, nw;
        if (bind(c, at, fn, names, 3, args, na, kw, nk, a) || jv_tostr(c, val, &s) || arg_str(c, at, fn, &a[0], &o) ||
            arg_str(c, at, fn, &a[1], &nw))
            return -1;
        k = -1;
        if (a[2].t != JT_MISSING && a[2].t != JT_NONE && arg_int(c, at, fn, &a[2], -1, &k)) return -1;
        return str_replace(c, &s, &o, &nw, k, out);
    }
    case F_REVERSE:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_STR) {
            jj_buf b = {0};
            if (jj_cost(c, val->u.s.n / 32)) return -1;
            for (size_t e = val->u.s.n; e > 0;) {
                size_t q = e - 1;
                while (q > 0 && ((unsigned char)val->u.s.p[q] & 0xC0) == 0x80) q--;
                if (jb_put(c, &b, val->u.s.p + q, e - q)) return -1;
                e = q;
            }
            return newstr(c, &b, out);
        }
        if (jj_iter(c, at, val, &items, &n) || jv_newlist(c, n, out)) return -1;
        for (size_t i = 0; i < n; i++) out->u.l->v[i] = items[n - 1 - i];
        out->view = LV_ITER;
        return 0;
    case F_ROUND: return f_round(c, at, val, args, na, kw, nk, out);
    case F_SAFE:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jv_tostr(c, val, out)) return -1;
        out->safe = 1;
        return 0;
    case F_SORT: {
        static const char *const names[] = {"reverse", "case_sensitive", "attribute"};
        if (bind(c, at, fn, names, 3, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv *keys = jj_alloc(&c->mem, (n ? n : 1) * sizeof *keys);
        if (!keys) return jj_nomem(c);
        for (size_t i = 0; i < n; i++)
            if (key_of(c, at, &items[i], &a[2], !arg_bool(&a[1], 0), &keys[i])) return -1;
        return sort_items(c, at, items, n, keys, arg_bool(&a[0], 0), out);
    }
    case F_STRING:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        return jv_tostr(c, val, out);
    case F_SUM: {
        static const char *const names[] = {"attribute", "start"};
        if (bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv acc = a[1].t == JT_MISSING ? jv_int(0) : a[1];
        for (size_t i = 0; i < n; i++) {
            jv x = items[i];
            if (a[0].t != JT_MISSING && a[0].t != JT_NONE && attr_path(c, at, &items[i], &a[0], &x)) return -1;
            if (!jv_isnum(&acc) || !jv_isnum(&x))
                return jj_fail(c, at, "unsupported operand type(s) for +: '%s' and '%s'", jv_typename(&acc), jv_typename(&x));
            if (acc.t == JT_FLOAT || x.t == JT_FLOAT)
                acc = jv_float((acc.t == JT_FLOAT ? acc.u.f : (double)acc.u.i) + (x.t == JT_FLOAT ? x.u.f : (double)x.u.i));
            else if (__builtin_add_overflow(acc.u.i, x.u.i, &acc.u.i))
                return jj_fail(c, at, "integer overflow (cis2 keeps integers in 64 bits)");
            else
                acc.t = JT_INT;
        }
        *out = acc;
        return 0;
    }
    case F_TOJSON: return f_tojson(c, at, val, args, na, kw, nk, out);
    case F_TRIM: {
        static const char *const names[] = {"chars"};
        if (bind(c, at, fn, names, 1, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
        if (a[0].t == JT_STR) strip(&s, &a[0], 3, out);
        else strip(&s, NULL, 3, out);
        return 0;
    }
    case F_UNIQUE: {
        static const char *const names[] = {"case_sensitive", "attribute"};
        if (bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv *keys = jj_alloc(&c->mem, (n ? n : 1) * sizeof *keys), *kept = jj_alloc(&c->mem, (n ? n : 1) * sizeof *kept);
        if (!keys || !kept) return jj_nomem(c);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            jv key;
            if (key_of(c, at, &items[i], &a[1], !arg_bool(&a[0], 0), &key)) return -1;
            if ((key.t == JT_LIST && !key.tuple) || key.t == JT_DICT) return jj_fail(c, at, "unhashable type: '%s'", jv_typename(&key));
            int seen = 0;
            if (jj_cost(c, m / 16)) return -1;
            for (size_t j = 0; j < m && !seen; j++) {
                int e = jv_equal(c, &keys[j], &key, 0);
                if (e < 0) return -1;
                seen = e;
            }
            if (!seen) {
                keys[m] = key;
                kept[m++] = items[i];
            }
        }
        return make_iter(c, kept, m, LV_ITER, out);
    }
    case F_WORDCOUNT: {
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
        int64_t words = 0;
        int in = 0;
        for (size_t i = 0; i < s.u.s.n;) {
            size_t l;
            uint32_t cp = jj_u8dec(s.u.s.p + i, s.u.s.n - i, &l);
            int w = cp == '_' || uclass(cp) & (UC_L | UC_N);
            if (w && !in) words++;
            in = w;
            i += l;
        }
        *out = jv_int(words);
        return 0;
    }
    }
    return jj_fail(c, at, "internal: filter %d", id);
}

/* ------------------------------------------------------------ the tests */

int jl_test(jctx *c, const jnode *at, int id, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, int *res)
{
    jv a[1];
    const char *fn = TESTS[id];
    static const char *const one[] = {"other"};
    int takes_arg = id == T_DIVISIBLEBY || id == T_EQ || id == T_EQUALTO || id == T_GE || id == T_GT ||
                    id == T_GREATERTHAN || id == T_IN || id == T_LE || id == T_LESSTHAN || id == T_LT || id == T_NE ||
                    id == T_SAMEAS || id >= T_OPEQ;
    if (bind(c, at, fn, one, takes_arg ? 1 : 0, args, na, kw, nk, a)) return -1;
    if (takes_arg && a[0].t == JT_MISSING) return jj_fail(c, at, "test '%s' needs an argument", fn);
    switch (id) {
    case T_BOOLEAN: *res = val->t == JT_BOOL; return 0;
    case T_CALLABLE:
        *res = val->t == JT_MACRO || val->t == JT_FUNC || val->t == JT_METHOD || (val->t == JT_CYCLER && val->u.cy->joiner);
        return 0;
    case T_DEFINED: *res = val->t != JT_UNDEF; return 0;
    case T_UNDEFINED: *res = val->t == JT_UNDEF; return 0;
    case T_DIVISIBLEBY: {
        jv m;
        if (!jv_isnum(val) || !jv_isnum(&a[0])) return jj_fail(c, at, "divisibleby: numbers only");
        if ((a[0].t == JT_FLOAT ? a[0].u.f : (double)a[0].u.i) == 0) return jj_fail(c, at, "integer division or modulo by zero");
        if (val->t == JT_FLOAT || a[0].t == JT_FLOAT) {
            double x = val->t == JT_FLOAT ? val->u.f : (double)val->u.i, y = a[0].t == JT_FLOAT ? a[0].u.f : (double)a[0].u.i;
            *res = jj_fmod(x, y) == 0;
        } else {
            m = jv_int(a[0].u.i == -1 ? 0 : val->u.i % a[0].u.i);
            *res = m.u.i == 0;
        }
        return 0;
    }
    case T_EQ:
    case T_EQUALTO:
    case T_OPEQ:
    case T_NE:
    case T_OPNE: {
        int e = jv_equal(c, val, &a[0], 0);
        if (e < 0) return -1;
        *res = (id == T_NE || id == T_OPNE) ? !e : e;
        return 0;
    }
    case T_GE:
    case T_GT:
    case T_GREATERTHAN:
    case T_LE:
    case T_LESSTHAN:
    case T_LT:
    case T_OPLT:
    case T_OPLE:
    case T_OPGT:
    case T_OPGE: {
        int r;
        if (val->t == JT_UNDEF || a[0].t == JT_UNDEF) return jj_fail(c, at, "an undefined value was compared");
        if (cmp_or_fail(c, at, val, &a[0], &r)) return -1;
        switch (id) {
        case T_GE: case T_OPGE: *res = r >= 0; break;
        case T_GT: case T_GREATERTHAN: case T_OPGT: *res = r > 0; break;
        case T_LE: case T_OPLE: *res = r <= 0; break;
        default: *res = r < 0; break;
        }
        return 0;
    }
    case T_ESCAPED: *res = val->t == JT_STR && val->safe; return 0;
    case T_EVEN:
    case T_ODD:
        if (val->t == JT_INT || val->t == JT_BOOL) *res = (int)((val->u.i % 2 + 2) % 2) == (id == T_ODD);
        else if (val->t == JT_FLOAT) {
            double m = jj_fmod(val->u.f, 2.0);
            if (m < 0) m += 2.0;
            *res = id == T_ODD ? m == 1.0 : m == 0.0;
        } else return jj_fail(c, at, "unsupported operand type(s) for %%: '%s' and 'int'", jv_typename(val));
        return 0;
    case T_FALSE: *res = val->t == JT_BOOL && !val->u.i; return 0;
    case T_TRUE: *res = val->t == JT_BOOL && val->u.i; return 0;
    case T_FILTER: *res = val->t == JT_STR && jl_filter_id(val->u.s.p, val->u.s.n) >= 0; return 0;
    case T_TEST: *res = val->t == JT_STR && jl_test_id(val->u.s.p, val->u.s.n) >= 0; return 0;
    case T_FLOAT: *res = val->t == JT_FLOAT; return 0;
    case T_INTEGER: *res = val->t == JT_INT; return 0;
    case T_NUMBER: *res = jv_isnum(val); return 0;
    case T_IN: {
        jv tmp;
        if (a[0].t == JT_STR) {
            if (val->t != JT_STR) return jj_fail(c, at, "'in <string>' requires string as left operand, not %s", jv_typename(val));
            *res = val->u.s.n == 0 || jj_memmem(a[0].u.s.p, a[0].u.s.n, val->u.s.p, val->u.s.n) != NULL;
            return 0;
        }
        if (a[0].t == JT_DICT) {
            int f = jd_get(c, a[0].u.d, *val, &tmp);
            if (f < 0) return -1;
            *res = f;
            return 0;
        }
        if (a[0].t == JT_LIST) {
            for (size_t i = 0; i < a[0].u.l->n; i++) {
                int e = jv_equal(c, val, &a[0].u.l->v[i], 0);
                if (e < 0) return -1;
                if (e) { *res = 1; return 0; }
            }
            *res = 0;
            return 0;
        }
        if (a[0].t == JT_UNDEF) { *res = 0; return 0; }
        return jj_fail(c, at, "argument of type '%s' is not iterable", jv_typename(&a[0]));
    }
    case T_ITERABLE:
        *res = val->t == JT_STR || val->t == JT_LIST || val->t == JT_DICT || val->t == JT_UNDEF || val->t == JT_LOOP;
        return 0;
    case T_SEQUENCE:
        *res = val->t == JT_STR || (val->t == JT_LIST && (val->view == LV_NONE)) || val->t == JT_DICT || val->t == JT_UNDEF;
        return 0;
    case T_MAPPING: *res = val->t == JT_DICT; return 0;
    case T_NONE: *res = val->t == JT_NONE; return 0;
    case T_STRING: *res = val->t == JT_STR; return 0;
    case T_LOWER:
    case T_UPPER: {
        jv s;
        if (jv_tostr(c, val, &s)) return -1;
        int cased = 0, bad = 0;
        for (size_t i = 0; i < s.u.s.n;) {
            size_t l;
            uint32_t cp = jj_u8dec(s.u.s.p + i, s.u.s.n - i, &l);
            if (is_upper_cp(cp)) { if (id == T_LOWER) bad = 1; else cased = 1; }
            else if (is_lower_cp(cp)) { if (id == T_UPPER) bad = 1; else cased = 1; }
            i += l;
        }
        *res = cased && !bad;
        return 0;
    }
    case T_SAMEAS:
        if (val->t != a[0].t) *res = 0;
        else if (val->t == JT_NONE || val->t == JT_UNDEF) *res = 1;
        else if (val->t == JT_BOOL || val->t == JT_INT) *res = val->u.i == a[0].u.i;
        else if (val->t == JT_STR) *res = val->u.s.p == a[0].u.s.p && val->u.s.n == a[0].u.s.n;
        else *res = memcmp(&val->u, &a[0].u, sizeof val->u) == 0;
        return 0;
    }
    return jj_fail(c, at, "internal: test %d", id);
}

/* -------------------------------------------------------------- methods */

enum {
    M_CAPITALIZE, M_CASEFOLD, M_CENTER, M_COUNT, M_ENDSWITH, M_FIND, M_FORMAT, M_INDEX, M_ISALNUM, M_ISALPHA,
    M_ISDIGIT, M_ISLOWER, M_ISSPACE, M_ISUPPER, M_JOIN, M_LJUST, M_LOWER, M_LSTRIP, M_PARTITION, M_REMOVEPREFIX,
    M_REMOVESUFFIX, M_REPLACE, M_RFIND, M_RINDEX, M_RJUST, M_RPARTITION, M_RSPLIT, M_RSTRIP, M_SPLIT, M_SPLITLINES,
    M_STARTSWITH, M_STRIP, M_SWAPCASE, M_TITLE, M_UPPER, M_ZFILL, M_STR_N,
    M_L_COUNT = M_STR_N, M_L_INDEX, M_LIST_N,
    M_D_GET = M_LIST_N, M_D_ITEMS, M_D_KEYS, M_D_VALUES, M_D_COPY, M_DICT_N,
    M_LOOP_CYCLE = M_DICT_N, M_LOOP_CHANGED, M_CY_NEXT, M_CY_RESET
};
static const char *const STR_M[M_STR_N] = {
    "capitalize", "casefold", "center", "count", "endswith", "find", "format", "index", "isalnum", "isalpha",
    "isdigit", "islower", "isspace", "isupper", "join", "ljust", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "swapcase", "title", "upper", "zfill"};
static const char *const LIST_M[] = {"count", "index"};
static const char *const DICT_M[] = {"get", "items", "keys", "values", "copy"};
/* what ImmutableSandboxedEnvironment refuses: they would change the value */
static const char *const LIST_UNSAFE[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort", NULL};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", "fromkeys", NULL};

static int bound(jctx *c, const jv *self, int id, jv *out)
{
    jj_bound *b = jj_alloc(&c->mem, sizeof *b);
    if (!b) return jj_nomem(c);
    b->self = *self;
    b->id = id;
    memset(out, 0, sizeof *out);
    out->t = JT_METHOD;
    out->u.bm = b;
    return 1;
}

static int unsafe(jctx *c, const jv *obj, const char *name, size_t n, jv *out)
{
    size_t cap = n + 80;
    char *h = jj_alloc(&c->mem, cap);
    if (!h) { *out = jv_undef("unsafe attribute"); return 1; }
    snprintf(h, cap, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, name, jv_typename(obj));
    *out = jv_undef(h);
    return 1;
}

int jl_method_lookup(jctx *c, const jv *obj, const char *name, size_t n, jv *out)
{
    int i;
    if (n && name[0] == '_') return 0;
    switch (obj->t) {
    case JT_STR:
        if ((i = find_name(STR_M, M_STR_N, name, n)) >= 0) return bound(c, obj, i, out);
        return 0;
    case JT_LIST:
        if (obj->view != LV_NONE) return 0;
        if ((i = find_name(LIST_M, 2, name, n)) >= 0) return bound(c, obj, M_STR_N + i, out);
        if (!obj->tuple)
            for (i = 0; LIST_UNSAFE[i]; i++)
                if (strlen(LIST_UNSAFE[i]) == n && !memcmp(LIST_UNSAFE[i], name, n)) return unsafe(c, obj, name, n, out);
        return 0;
    case JT_DICT:
        if ((i = find_name(DICT_M, 5, name, n)) >= 0) return bound(c, obj, M_LIST_N + i, out);
        for (i = 0; DICT_UNSAFE[i]; i++)
            if (strlen(DICT_UNSAFE[i]) == n && !memcmp(DICT_UNSAFE[i], name, n)) return unsafe(c, obj, name, n, out);
        return 0;
    case JT_CYCLER:
        if (n == 4 && !memcmp(name, "next", 4) && !obj->u.cy->joiner) return bound(c, obj, M_CY_NEXT, out);
        if (n == 5 && !memcmp(name, "reset", 5) && !obj->u.cy->joiner) return bound(c, obj, M_CY_RESET, out);
        if (n == 7 && !memcmp(name, "current", 7) && !obj->u.cy->joiner) {
            jj_cycler *cy = obj->u.cy;
            *out = cy->items->n ? cy->items->v[cy->pos] : jv_undef("empty cycler");
            return 1;
        }
        return 0;
    default: return 0;
    }
}

int jl_loop_attr(jctx *c, const jv *loop, const char *name, size_t n, jv *out)
{
    const jj_loop *lp = loop->u.lp;
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    if (IS("index")) *out = jv_int((int64_t)lp->i + 1);
    else if (IS("index0")) *out = jv_int((int64_t)lp->i);
    else if (IS("revindex")) *out = jv_int((int64_t)(lp->n - lp->i));
    else if (IS("revindex0")) *out = jv_int((int64_t)(lp->n - lp->i - 1));
    else if (IS("first")) *out = jv_bool(lp->i == 0);
    else if (IS("last")) *out = jv_bool(lp->i + 1 == lp->n);
    else if (IS("length")) *out = jv_int((int64_t)lp->n);
    else if (IS("depth")) *out = jv_int(1);
    else if (IS("depth0")) *out = jv_int(0);
    else if (IS("previtem")) *out = lp->i ? lp->items[lp->i - 1] : jv_undef("there is no previous item");
    else if (IS("nextitem")) *out = lp->i + 1 < lp->n ? lp->items[lp->i + 1] : jv_undef("there is no next item");
    else if (IS("cycle")) return bound(c, loop, M_LOOP_CYCLE, out) < 0 ? -1 : 0;
    else if (IS("changed")) return bound(c, loop, M_LOOP_CHANGED, out) < 0 ? -1 : 0;
    else *out = jv_undef("'LoopContext' object has no such attribute");
#undef IS
    return 0;
}

/* str.format: {} {0} {name} and {{ }}, no conversions or format specs */
static int str_format(jctx *c, const jnode *at, const jv *s, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jj_buf b = {0};
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, auto_i = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '}' ) {
            if (i + 1 < n && p[i + 1] == '}') { i++; if (jb_put(c, &b, "}", 1)) return -1; continue; }
            return jj_fail(c, at, "Single '}' encountered in format string");
        }
        if (p[i] != '{') { if (jb_put(c, &b, p + i, 1)) return -1; continue; }
        if (i + 1 < n && p[i + 1] == '{') { i++; if (jb_put(c, &b, "{", 1)) return -1; continue; }
        const char *e = memchr(p + i, '}', n - i);
        if (!e) return jj_fail(c, at, "Single '{' encountered in format string");
        const char *f = p + i + 1;
        size_t fl = (size_t)(e - f);
        if (memchr(f, ':', fl) || memchr(f, '!', fl) || memchr(f, '.', fl) || memchr(f, '[', fl))
            return jj_fail(c, at, "str.format: conversions, format specs and attribute fields are not supported");
        jv v;
        if (fl == 0) {
            if (auto_i >= na) return jj_fail(c, at, "Replacement index %zu out of range for positional args tuple", auto_i);
            v = args[auto_i++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            size_t idx = (size_t)strtoul(f, NULL, 10);
            if (idx >= na) return jj_fail(c, at, "Replacement index %zu out of range for positional args tuple", idx);
            v = args[idx];
        } else {
            size_t j;
            for (j = 0; j < nk; j++)
                if (kw[j].name.n == fl && !memcmp(kw[j].name.p, f, fl)) break;
            if (j == nk) return jj_fail(c, at, "KeyError: '%.*s'", (int)fl, f);
            v = kw[j].v;
        }
        if (jv_str(c, &b, &v)) return -1;
        i = (size_t)(e - p);
    }
    return newstr(c, &b, out);
}

static int find_sub(const jv *s, const jv *sub, int right, size_t *byte_off)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, m = sub->u.s.n;
    if (m > n) return 0;
    if (!right) {
        const char *f = m ? jj_memmem(p, n, sub->u.s.p, m) : p;
        if (!f) return 0;
        *byte_off = (size_t)(f - p);
        return 1;
    }
    for (size_t j = n - m + 1; j-- > 0;)
        if (memcmp(p + j, sub->u.s.p, m) == 0) { *byte_off = j; return 1; }
    return 0;
}

static int pad_str(jctx *c, const jv *s, int64_t width, const jv *fill, int mode, jv *out)
{
    int64_t len = (int64_t)jj_u8len(s->u.s.p, s->u.s.n);
    if (width <= len) { *out = *s; return 0; }
    if (width > (int64_t)c->max_output) return jj_limit(c, "a padding width exceeds max_output");
    int64_t pad = width - len, left = mode == 0 ? 0 : mode == 1 ? pad : pad / 2 + (pad & width & 1);
    jj_buf b = {0};
    const char *fp = fill ? fill->u.s.p : " ";
    size_t fn = fill ? fill->u.s.n : 1;
    for (int64_t i = 0; i < left; i++) if (jb_put(c, &b, fp, fn)) return -1;
    if (jb_put(c, &b, s->u.s.p, s->u.s.n)) return -1;
    for (int64_t i = 0; i < pad - left; i++) if (jb_put(c, &b, fp, fn)) return -1;
    return newstr(c, &b, out);
}

static int str_method(jctx *c, const jnode *at, int id, const jv *s, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv a[3], t;
    int64_t k;
    const char *fn = STR_M[id];
    static const char *const chars_n[] = {"chars"};
    static const char *const split_n[] = {"sep", "maxsplit"};
    static const char *const sub_n[] = {"sub"};
    static const char *const pre_n[] = {"prefix"};
    static const char *const repl_n[] = {"old", "new", "count"};
    static const char *const pad_n[] = {"width", "fillchar"};
    if (jj_cost(c, 1 + s->u.s.n / 256)) return -1;
    switch (id) {
    case M_CAPITALIZE: case M_CASEFOLD: case M_LOWER: case M_UPPER: case M_SWAPCASE: case M_TITLE:
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        return case_map(c, s, id == M_UPPER ? 0 : id == M_CAPITALIZE ? 2 : id == M_TITLE ? 3 : id == M_SWAPCASE ? 4 : 1, out);
    case M_STRIP: case M_LSTRIP: case M_RSTRIP:
        if (bind(c, at, fn, chars_n, 1, args, na, kw, nk, a)) return -1;
        if (a[0].t != JT_MISSING && a[0].t != JT_NONE && a[0].t != JT_STR)
            return jj_fail(c, at, "%s arg must be None or str", fn);
        strip(s, a[0].t == JT_STR ? &a[0] : NULL, id == M_STRIP ? 3 : id == M_LSTRIP ? 1 : 2, out);
        out->safe = 0;
        return 0;
    case M_SPLIT: case M_RSPLIT:
        if (bind(c, at, fn, split_n, 2, args, na, kw, nk, a) || arg_int(c, at, fn, &a[1], -1, &k)) return -1;
        return str_split(c, at, s, &a[0], k, id == M_RSPLIT, out);
    case M_SPLITLINES: {
        static const char *const names[] = {"keepends"};
        jv *parts;
        size_t m;
        if (bind(c, at, fn, names, 1, args, na, kw, nk, a) || splitlines(c, s, arg_bool(&a[0], 0), &parts, &m)) return -1;
        return list_of(c, parts, m, out);
    }
    case M_STARTSWITH: case M_ENDSWITH: {
        if (bind(c, at, fn, sub_n, 1, args, na, kw, nk, a)) return -1;
        jv *cands = &a[0];
        size_t nc = 1;
        if (a[0].t == JT_LIST && a[0].tuple) { cands = a[0].u.l->v; nc = a[0].u.l->n; }
        *out = jv_bool(0);
        for (size_t i = 0; i < nc; i++) {
            if (cands[i].t != JT_STR)
                return jj_fail(c, at, "%s first arg must be str or a tuple of str, not %s", fn, jv_typename(&cands[i]));
            size_t m = cands[i].u.s.n;
            if (m <= s->u.s.n &&
                memcmp(id == M_STARTSWITH ? s->u.s.p : s->u.s.p + s->u.s.n - m, cands[i].u.s.p, m) == 0) {
                *out = jv_bool(1);
                break;
            }
        }
        return 0;
    }
    case M_REPLACE: {
        jv o, nw;
        if (bind(c, at, fn, repl_n, 3, args, na, kw, nk, a) || arg_str(c, at, fn, &a[0], &o) || arg_str(c, at, fn, &a[1], &nw) ||
            arg_int(c, at, fn, &a[2], -1, &k))
            return -1;
        return str_replace(c, s, &o, &nw, k, out);
    }
    case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX: case M_COUNT: {
        size_t off;
        if (bind(c, at, fn, sub_n, 1, args, na, kw, nk, a) || arg_str(c, at, fn, &a[0], &t)) return -1;
        if (id == M_COUNT) {
            int64_t cnt = 0;
            if (!t.u.s.n) cnt = (int64_t)jj_u8len(s->u.s.p, s->u.s.n) + 1;
            else
                for (size_t i = 0; i + t.u.s.n <= s->u.s.n;) {
                    const char *f = jj_memmem(s->u.s.p + i, s->u.s.n - i, t.u.s.p, t.u.s.n);
                    if (!f) break;
                    cnt++;
                    i = (size_t)(f - s->u.s.p) + t.u.s.n;
                }
            *out = jv_int(cnt);
            return 0;
        }
        if (!find_sub(s, &t, id == M_RFIND || id == M_RINDEX, &off)) {
            if (id == M_INDEX || id == M_RINDEX) return jj_fail(c, at, "substring not found");
            *out = jv_int(-1);
            return 0;
        }
        *out = jv_int((int64_t)jj_u8len(s->u.s.p, off));
        return 0;
    }
    case M_FORMAT: return str_format(c, at, s, args, na, kw, nk, out);
    case M_ISALNUM: case M_ISALPHA: case M_ISDIGIT: case M_ISSPACE: case M_ISLOWER: case M_ISUPPER: {
        if (bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        int ok = s->u.s.n > 0, cased = 0;
        for (size_t i = 0; i < s->u.s.n && ok;) {
            size_t l;
            uint32_t cp = jj_u8dec(s->u.s.p + i, s->u.s.n - i, &l);
            int cls = uclass(cp);
            switch (id) {
            case M_ISALNUM: ok = (cls & (UC_L | UC_N)) != 0; break;
            case M_ISALPHA: ok = (cls & UC_L) != 0; break;
            case M_ISDIGIT: ok = cp >= '0' && cp <= '9'; break;
            case M_ISSPACE: ok = jj_isspace_cp(cp); break;
            case M_ISLOWER: if (is_upper_cp(cp)) ok = 0; else if (is_lower_cp(cp)) cased = 1; break;
            default: if (is_lower_cp(cp)) ok = 0; else if (is_upper_cp(cp)) cased = 1; break;
            }
            i += l;
        }
        if (id == M_ISLOWER || id == M_ISUPPER) ok = ok && cased;
        *out = jv_bool(ok);
        return 0;
    }
    case M_JOIN: {
        static const char *const names[] = {"iterable"};
        jv *items;
        size_t n;
        if (bind(c, at, fn, names, 1, args, na, kw, nk, a) || jj_iter(c, at, &a[0], &items, &n)) return -1;
        jj_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (items[i].t != JT_STR)
                return jj_fail(c, at, "sequence item %zu: expected str instance, %s found", i, jv_typename(&items[i]));
            if ((i && jb_put(c, &b, s->u.s.p, s->u.s.n)) || jb_put(c, &b, items[i].u.s.p, items[i].u.s.n)) return -1;
        }
        return newstr(c, &b, out);
    }
    case M_LJUST: case M_RJUST: case M_CENTER: case M_ZFILL: {
        jv fill = jv_strn(" ", 1);
        if (bind(c, at, fn, pad_n, id == M_ZFILL ? 1 : 2, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "%s() takes at least 1 argument", fn);
        if (arg_int(c, at, fn, &a[0], 0, &k)) return -1;
        if (id != M_ZFILL && a[1].t != JT_MISSING) {
            if (a[1].t != JT_STR || jj_u8len(a[1].u.s.p, a[1].u.s.n) != 1)
                return jj_fail(c, at, "The fill character must be exactly one character long");
            fill = a[1];
        }
        if (id == M_ZFILL) {
            int64_t len = (int64_t)jj_u8len(s->u.s.p, s->u.s.n);
            if (k <= len) { *out = *s; return 0; }
            if (k > (int64_t)c->max_output) return jj_limit(c, "zfill: width exceeds max_output");
            jj_buf b = {0};
            size_t sign = s->u.s.n && (s->u.s.p[0] == '+' || s->u.s.p[0] == '-');
            if (sign && jb_put(c, &b, s->u.s.p, 1)) return -1;
            for (int64_t i = 0; i < k - len; i++) if (jb_put(c, &b, "0", 1)) return -1;
            if (jb_put(c, &b, s->u.s.p + sign, s->u.s.n - sign)) return -1;
            return newstr(c, &b, out);
        }
        return pad_str(c, s, k, &fill, id == M_LJUST ? 0 : id == M_RJUST ? 1 : 2, out);
    }
    case M_PARTITION: case M_RPARTITION: {
        size_t off;
        if (bind(c, at, fn, sub_n, 1, args, na, kw, nk, a) || arg_str(c, at, fn, &a[0], &t)) return -1;
        if (!t.u.s.n) return jj_fail(c, at, "empty separator");
        if (jv_newlist(c, 3, out)) return -1;
        out->tuple = 1;
        jv *v = out->u.l->v;
        if (!find_sub(s, &t, id == M_RPARTITION, &off)) {
            v[0] = id == M_PARTITION ? *s : jv_strn("", 0);
            v[1] = jv_strn("", 0);
            v[2] = id == M_PARTITION ? jv_strn("", 0) : *s;
            return 0;
        }
        v[0] = jv_strn(s->u.s.p, off);
        v[1] = jv_strn(s->u.s.p + off, t.u.s.n);
        v[2] = jv_strn(s->u.s.p + off + t.u.s.n, s->u.s.n - off - t.u.s.n);
        return 0;
    }
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
        if (bind(c, at, fn, pre_n, 1, args, na, kw, nk, a) || arg_str(c, at, fn, &a[0], &t)) return -1;
        size_t m = t.u.s.n;
        *out = *s;
        if (m <= s->u.s.n) {
            if (id == M_REMOVEPREFIX && !memcmp(s->u.s.p, t.u.s.p, m)) *out = jv_strn(s->u.s.p + m, s->u.s.n - m);
            if (id == M_REMOVESUFFIX && m && !memcmp(s->u.s.p + s->u.s.n - m, t.u.s.p, m)) *out = jv_strn(s->u.s.p, s->u.s.n - m);
        }
        return 0;
    }
    }
    return jj_fail(c, at, "internal: str method %d", id);
}

int jl_call_method(jctx *c, const jnode *at, jj_bound *bm, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv *self = &bm->self, a[2];
    if (bm->id < M_STR_N) return str_method(c, at, bm->id, self, args, na, kw, nk, out);
    switch (bm->id) {
    case M_L_COUNT:
    case M_L_INDEX: {
        static const char *const names[] = {"value"};
        if (bind(c, at, bm->id == M_L_COUNT ? "count" : "index", names, 1, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "takes exactly one argument (0 given)");
        int64_t cnt = 0;
        for (size_t i = 0; i < self->u.l->n; i++) {
            int e = jv_equal(c, &self->u.l->v[i], &a[0], 0);
            if (e < 0) return -1;
            if (e && bm->id == M_L_INDEX) { *out = jv_int((int64_t)i); return 0; }
            cnt += e;
        }
        if (bm->id == M_L_INDEX) return jj_fail(c, at, "list.index(x): x not in list");
        *out = jv_int(cnt);
        return 0;
    }
    case M_D_GET: {
        static const char *const names[] = {"key", "default"};
        if (bind(c, at, "get", names, 2, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "get expected at least 1 argument, got 0");
        int f = jd_get(c, self->u.d, a[0], out);
        if (f < 0) return -1;
        if (!f) *out = a[1].t == JT_MISSING ? jv_none() : a[1];
        return 0;
    }
    case M_D_ITEMS:
    case M_D_KEYS:
    case M_D_VALUES:
    case M_D_COPY: {
        if (bind(c, at, "items", NULL, 0, args, na, kw, nk, a)) return -1;
        const jj_dict *d = self->u.d;
        if (bm->id == M_D_COPY) {
            if (jv_newdict(c, out)) return -1;
            for (size_t i = 0; i < d->n; i++)
                if (jd_set(c, out->u.d, d->k[i], d->v[i])) return -1;
            return 0;
        }
        if (jv_newlist(c, d->n, out)) return -1;
        for (size_t i = 0; i < d->n; i++) {
            if (bm->id == M_D_ITEMS) {
                if (tuple2(c, d->k[i], d->v[i], &out->u.l->v[i])) return -1;
            } else {
                out->u.l->v[i] = bm->id == M_D_KEYS ? d->k[i] : d->v[i];
            }
        }
        out->view = bm->id == M_D_ITEMS ? LV_ITEMS : bm->id == M_D_KEYS ? LV_KEYS : LV_VALUES;
        return 0;
    }
    case M_LOOP_CYCLE: {
        if (nk) return jj_fail(c, at, "loop.cycle() takes no keyword arguments");
        if (!na) return jj_fail(c, at, "no items for cycling given");
        *out = args[self->u.lp->i % na];
        return 0;
    }
    case M_LOOP_CHANGED: {
        jj_loop *lp = self->u.lp;
        jv cur;
        if (jv_newlist(c, na, &cur)) return -1;
        if (na) memcpy(cur.u.l->v, args, na * sizeof *args);
        cur.tuple = 1;
        int same = 0;
        if (lp->changed_set) {
            same = jv_equal(c, &lp->last_changed, &cur, 0);
            if (same < 0) return -1;
        }
        lp->last_changed = cur;
        lp->changed_set = 1;
        *out = jv_bool(!same);
        return 0;
    }
    case M_CY_NEXT:
    case M_CY_RESET: return jl_call_cycler(c, at, self, bm->id == M_CY_NEXT ? "next" : "reset", args, na, out);
    }
    return jj_fail(c, at, "internal: method %d", bm->id);
}

int jl_call_cycler(jctx *c, const jnode *at, jv *self, const char *name, jv *args, size_t na, jv *out)
{
    jj_cycler *cy = self->u.cy;
    (void)args;
    if (na) return jj_fail(c, at, "%s() takes no arguments", name);
    if (cy->joiner) {
        *out = cy->used ? jv_strn(cy->sep.p, cy->sep.n) : jv_strn("", 0);
        cy->used = 1;
        return 0;
    }
    if (!strcmp(name, "reset")) {
        cy->pos = 0;
        *out = jv_none();
        return 0;
    }
    if (!cy->items->n) return jj_fail(c, at, "the cycler has no items");
    *out = cy->items->v[cy->pos];
    cy->pos = (cy->pos + 1) % cy->items->n;
    return 0;
}

/* ------------------------------------------------------------- globals */

int jl_global(const char *name, size_t n, jv *out)
{
    static const char *const names[] = {"range", "dict", "namespace", "raise_exception", "strftime_now", "cycler", "joiner"};
    int i = find_name(names, 7, name, n);
    if (i < 0) return 0;
    memset(out, 0, sizeof *out);
    out->t = JT_FUNC;
    out->u.i = i;
    return 1;
}

/* strftime_now(fmt): the platform's strftime in the C locale, as
 * Python's datetime.strftime calls it, for a naive datetime (%z and %Z
 * empty, %f the microseconds: 000000 here) */
static int strftime_now(jctx *c, const jnode *at, const jv *fmt, jv *out)
{
    jj_buf b = {0};
    locale_t loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!loc) return jj_nomem(c);
    int rc = 0;
    const char *p = fmt->u.s.p;
    size_t n = fmt->u.s.n;
    if (jj_cost(c, n)) { freelocale(loc); return -1; }
    for (size_t i = 0; i < n && !rc; i++) {
        if (p[i] != '%' || i + 1 >= n) { rc = jb_put(c, &b, p + i, 1); continue; }
        size_t j = i + 1;
        char spec[16];
        size_t sn = 0;
        spec[sn++] = '%';
        while (j < n && strchr("-_0^#", p[j]) && sn < 4) spec[sn++] = p[j++];
        while (j < n && p[j] >= '0' && p[j] <= '9' && sn < 8) spec[sn++] = p[j++];
        if (j < n && (p[j] == 'E' || p[j] == 'O')) spec[sn++] = p[j++];
        if (j >= n) { rc = jb_put(c, &b, p + i, n - i); break; }
        char conv = p[j];
        spec[sn++] = conv;
        spec[sn] = 0;
        if (conv == 'f') rc = jb_str(c, &b, "000000");
        else if (conv == 'z' || conv == 'Z') { /* naive: empty */ }
        else if (conv == '%') rc = jb_put(c, &b, "%", 1);
        else if (!strchr("aAbBcdDeFgGhHIjmMnprRStTuUVwWxXyYCs", conv)) {
            freelocale(loc);
            return jj_fail(c, at, "strftime_now: the directive %%%c is not supported", conv);
        } else {
            char t[256];
            size_t k = strftime_l(t, sizeof t, spec, &c->now, loc);
            rc = jb_put(c, &b, t, k);
        }
        i = j;
    }
    freelocale(loc);
    if (rc) return -1;
    return newstr(c, &b, out);
}

int jl_call_func(jctx *c, const jnode *at, int fnid, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    switch (fnid) {
    case JF_RANGE: {
        int64_t v[3] = {0, 0, 1};
        if (nk) return jj_fail(c, at, "range() takes no keyword arguments");
        if (na < 1 || na > 3) return jj_fail(c, at, "range expected 1 to 3 arguments, got %zu", na);
        for (size_t i = 0; i < na; i++)
            if (args[i].t != JT_INT && args[i].t != JT_BOOL)
                return jj_fail(c, at, "'%s' object cannot be interpreted as an integer", jv_typename(&args[i]));
        if (na == 1) v[1] = args[0].u.i;
        else {
            v[0] = args[0].u.i;
            v[1] = args[1].u.i;
            if (na == 3) v[2] = args[2].u.i;
        }
        if (v[2] == 0) return jj_fail(c, at, "range() arg 3 must not be zero");
        uint64_t cnt = 0;
        if (v[2] > 0 && v[1] > v[0]) cnt = ((uint64_t)v[1] - (uint64_t)v[0] - 1) / (uint64_t)v[2] + 1;
        if (v[2] < 0 && v[1] < v[0]) cnt = ((uint64_t)v[0] - (uint64_t)v[1] - 1) / (0 - (uint64_t)v[2]) + 1;
        if (cnt > JJ_MAX_RANGE)
            return jj_fail(c, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", JJ_MAX_RANGE);
        size_t m = (size_t)cnt;
        if (jj_cost(c, m / 16) || jv_newlist(c, m, out)) return -1;
        for (size_t i = 0; i < m; i++) out->u.l->v[i] = jv_int(v[0] + (int64_t)i * v[2]);
        return 0;
    }
    case JF_DICT:
    case JF_NAMESPACE: {
        if (na > 1) return jj_fail(c, at, "%s expected at most 1 argument, got %zu", fnid == JF_DICT ? "dict" : "namespace", na);
        if (jv_newdict(c, out)) return -1;
        if (na) {
            if (args[0].t != JT_DICT) return jj_fail(c, at, "%s: the argument must be a mapping", fnid == JF_DICT ? "dict" : "namespace");
            for (size_t i = 0; i < args[0].u.d->n; i++)
                if (jd_set(c, out->u.d, args[0].u.d->k[i], args[0].u.d->v[i])) return -1;
        }
        for (size_t j = 0; j < nk; j++)
            if (jd_set(c, out->u.d, jv_strn(kw[j].name.p, kw[j].name.n), kw[j].v)) return -1;
        if (fnid == JF_NAMESPACE) out->t = JT_NS;
        return 0;
    }
    case JF_RAISE: {
        jv m;
        if (na != 1 || nk) return jj_fail(c, at, "raise_exception() takes exactly one argument");
        if (jv_tostr(c, &args[0], &m)) return -1;
        /* the template's own message, cut at a character boundary */
        size_t len = m.u.s.n;
        if (len > sizeof c->err->msg - 1) {
            len = sizeof c->err->msg - 1;
            while (len > 0 && ((unsigned char)m.u.s.p[len] & 0xC0) == 0x80) len--;
        }
        if (c->err->code == CIS2_OK) cis2_fail(c->err, CIS2_E_USAGE, "%.*s", (int)len, m.u.s.p);
        return -1;
    }
    case JF_STRFTIME:
        if (na != 1 || nk || args[0].t != JT_STR) return jj_fail(c, at, "strftime_now() takes one format string");
        return strftime_now(c, at, &args[0], out);
    case JF_CYCLER:
    case JF_JOINER: {
        jj_cycler *cy = jj_alloc(&c->mem, sizeof *cy);
        if (!cy) return jj_nomem(c);
        jv l;
        if (fnid == JF_CYCLER) {
            if (nk) return jj_fail(c, at, "cycler() takes no keyword arguments");
            if (list_of(c, args, na, &l)) return -1;
            cy->items = l.u.l;
        } else {
            static const char *const names[] = {"sep"};
            jv a[1];
            if (bind(c, at, "joiner", names, 1, args, na, kw, nk, a)) return -1;
            cy->joiner = 1;
            cy->sep = a[0].t == JT_STR ? a[0].u.s : (jj_str){", ", 2};
        }
        memset(out, 0, sizeof *out);
        out->t = JT_CYCLER;
        out->u.cy = cy;
        return 0;
    }
    }
    return jj_fail(c, at, "internal: function %d", fnid);
}

/* ------------------------------------------------- printf-style format */

int jl_percent_format(jctx *c, const jnode *at, const jv *fmt, const jv *args, jv *out)
{
    const char *p = fmt->u.s.p;
    size_t n = fmt->u.s.n, ai = 0, nargs = 1;
    const jv *av = args;
    int mapping = args->t == JT_DICT;
    if (args->t == JT_LIST && args->tuple) { av = args->u.l->v; nargs = args->u.l->n; }
    jj_buf b = {0};
    if (jj_cost(c, n / 32)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { if (jb_put(c, &b, p + i, 1)) return -1; continue; }
        size_t j = i + 1;
        jv v;
        int have = 0;
        if (j < n && p[j] == '(') {
            const char *e = memchr(p + j, ')', n - j);
            if (!e || !mapping) return jj_fail(c, at, "format requires a mapping");
            if (!jd_getn(args->u.d, p + j + 1, (size_t)(e - p - j - 1), &v))
                return jj_fail(c, at, "KeyError: '%.*s'", (int)(e - p - j - 1), p + j + 1);
            have = 1;
            j = (size_t)(e - p) + 1;
        }
        char spec[32];
        size_t sn = 0;
        spec[sn++] = '%';
        while (j < n && strchr("-+ 0#", p[j]) && sn < 8) spec[sn++] = p[j++];
        while (j < n && p[j] >= '0' && p[j] <= '9' && sn < 14) spec[sn++] = p[j++];
        if (j < n && p[j] == '.') {
            spec[sn++] = p[j++];
            while (j < n && p[j] >= '0' && p[j] <= '9' && sn < 20) spec[sn++] = p[j++];
        }
        if (j >= n) return jj_fail(c, at, "incomplete format");
        char conv = p[j];
        if (conv == '%') {
            if (jb_put(c, &b, "%", 1)) return -1;
            i = j;
            continue;
        }
        if (!have) {
            if (mapping) { v = *args; }
            else {
                if (ai >= nargs) return jj_fail(c, at, "not enough arguments for format string");
                v = av[ai++];
            }
        }
        char t[512];
        int tn;
        switch (conv) {
        case 's':
        case 'r': {
            jj_buf sb = {0};
            if (conv == 's' ? jv_str(c, &sb, &v) : jv_repr(c, &sb, &v, 0)) return -1;
            spec[sn++] = 's';
            spec[sn] = 0;
            if (sn == 2) { if (jb_put(c, &b, sb.p, sb.n)) return -1; }
            else {
                /* width/precision count characters; pad around the text */
                int64_t width = 0, prec = -1;
                int left = 0;
                const char *q = spec + 1;
                while (*q && strchr("-+ 0#", *q)) left |= *q++ == '-';
                while (*q >= '0' && *q <= '9') width = width * 10 + (*q++ - '0');
                if (*q == '.') { prec = 0; q++; while (*q >= '0' && *q <= '9') prec = prec * 10 + (*q++ - '0'); }
                size_t bytes = sb.n, chars = jj_u8len(sb.p, sb.n);
                if (prec >= 0 && (size_t)prec < chars) { bytes = jj_u8off(sb.p, sb.n, (size_t)prec); chars = (size_t)prec; }
                int64_t pad = width > (int64_t)chars ? width - (int64_t)chars : 0;
                for (int64_t k = 0; !left && k < pad; k++) if (jb_put(c, &b, " ", 1)) return -1;
                if (jb_put(c, &b, sb.p, bytes)) return -1;
                for (int64_t k = 0; left && k < pad; k++) if (jb_put(c, &b, " ", 1)) return -1;
            }
            break;
        }
        case 'd':
        case 'i':
        case 'x':
        case 'X':
        case 'o': {
            int64_t iv;
            if (v.t == JT_INT || v.t == JT_BOOL) iv = v.u.i;
            else if (v.t == JT_FLOAT && (conv == 'd' || conv == 'i') && isfinite(v.u.f) && (v.u.f < 0 ? -v.u.f : v.u.f) < 9.2e18) iv = (int64_t)v.u.f;
            else return jj_fail(c, at, "%%%c format: a real number is required, not %s", conv, jv_typename(&v));
            memcpy(spec + sn, PRId64, strlen(PRId64) - 1);
            sn += strlen(PRId64) - 1;
            spec[sn++] = conv == 'i' ? 'd' : conv;
            spec[sn] = 0;
            tn = snprintf(t, sizeof t, spec, iv);
            if (tn < 0 || (size_t)tn >= sizeof t || jb_put(c, &b, t, (size_t)tn)) return tn < 0 || (size_t)tn >= sizeof t ? jj_fail(c, at, "format too wide") : -1;
            break;
        }
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G': {
            if (!jv_isnum(&v)) return jj_fail(c, at, "must be real number, not %s", jv_typename(&v));
            double d = v.t == JT_FLOAT ? v.u.f : (double)v.u.i;
            spec[sn++] = conv;
            spec[sn] = 0;
            tn = snprintf(t, sizeof t, spec, d);
            if (tn < 0 || (size_t)tn >= sizeof t) return jj_fail(c, at, "format too wide");
            /* the locale's decimal point is never Python's */
            for (int k = 0; k < tn; k++)
                if (t[k] == ',' ) t[k] = '.';
            if (jb_put(c, &b, t, (size_t)tn)) return -1;
            break;
        }
        default: return jj_fail(c, at, "unsupported format character '%c'", conv);
        }
        i = j;
    }
    if (!mapping && ai < nargs) return jj_fail(c, at, "not all arguments converted during string formatting");
    return newstr(c, &b, out);
}

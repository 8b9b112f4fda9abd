/*
 * jinja_filters.c - the chat-template renderer's filters and tests: the
 * Jinja2 documentation's "List of Builtin Filters" and "List of Builtin
 * Tests" as Debian's python3-jinja2 runs them, with transformers' tojson
 * (json.dumps(x, ensure_ascii=False, indent=..., separators=...,
 * sort_keys=...)) in place of Jinja's.  Called by jinja_parse.c (names to
 * ids, unknown names refused at parse time, as Jinja does) and
 * jinja_eval.c.  Filters that return generators in Jinja (map, select,
 * reject, selectattr, rejectattr, unique, items, batch, reverse of a
 * list) return LV_ITER values: always true, no length, used up once
 * iterated (docs/chat.md "Semantics").
 */
#include "jinja_impl.h"

#include <inttypes.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <math.h>

#include "tables/unicode_tables.h"

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

int jl_filter_id(const char *name, size_t n) { return jj_find_name(FILTERS, F_N, name, n); }
int jl_test_id(const char *name, size_t n) { return jj_find_name(TESTS, T_N, name, n); }

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


/* ---------------------------------------------------------- the filters */

static int key_of(jctx *c, const jnode *at, const jv *item, const jv *attr, int ignore_case, jv *out)
{
    if (attr && attr->t != JT_MISSING && attr->t != JT_NONE) {
        if (attr_path(c, at, item, attr, out)) return -1;
    } else {
        *out = *item;
    }
    if (ignore_case && out->t == JT_STR) return jj_case_map(c, out, 1, out);
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
    if (jj_cost(c, n / 2 + 1)) return -1;
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
    if (jj_bind(c, at, "tojson", names, 4, args, na, kw, nk, a)) return -1;
    jj_json_opts o;
    memset(&o, 0, sizeof o);
    o.ensure_ascii = jj_arg_bool(&a[0], 0);
    o.sort_keys = jj_arg_bool(&a[3], 0);
    char sp[64];
    if (val->t == JT_STR) { /* json.dumps encodes a str before it looks at indent */
        a[1] = jv_missing();
    }
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
    return jj_newstr(c, &b, out);
}

static int f_indent(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    static const char *const names[] = {"width", "first", "blank"};
    jv a[3], s, ind;
    if (jj_bind(c, at, "indent", names, 3, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
    char sp[256];
    if (a[0].t == JT_STR) ind = a[0];
    else {
        int64_t w;
        if (jj_arg_int(c, at, "indent", &a[0], 4, &w)) return -1;
        if (w > (int64_t)sizeof sp) return jj_fail(c, at, "indent: width over %zu", sizeof sp);
        if (w < 0) w = 0;
        memset(sp, ' ', (size_t)w);
        ind = jv_strn(sp, (size_t)w);
    }
    int first = jj_arg_bool(&a[1], 0), blank = jj_arg_bool(&a[2], 0);
    /* s + "\n", split into lines; lines after the first indented (blank
     * ones only with blank=True), joined with "\n" */
    jj_buf t = {0};
    if (jb_put(c, &t, s.u.s.p, s.u.s.n) || jb_put(c, &t, "\n", 1)) return -1;
    jv sl = jv_strn(t.p, t.n), *lines;
    size_t k;
    if (jj_splitlines(c, &sl, 0, &lines, &k)) return -1;
    jj_buf b = {0};
    if (first && jb_put(c, &b, ind.u.s.p, ind.u.s.n)) return -1;
    for (size_t i = 0; i < k; i++) {
        if (i && jb_put(c, &b, "\n", 1)) return -1;
        if (i && (blank || lines[i].u.s.n) && jb_put(c, &b, ind.u.s.p, ind.u.s.n)) return -1;
        if (jb_put(c, &b, lines[i].u.s.p, lines[i].u.s.n)) return -1;
    }
    jj_newstr(c, &b, out);
    out->safe = s.safe; /* Markup in, Markup out (markupsafe) */
    return 0;
}

/* select/reject/selectattr/rejectattr: attr_mode takes the attribute first */
static int f_select(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, int attr_mode,
                    int keep, jv *out)
{
    jv *items, attr = jv_missing();
    size_t n, base = 0;
    if (!jv_truth(val)) return jj_make_iter(c, NULL, 0, LV_ITER, out); /* Jinja: "if value:" first */
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
    return jj_make_iter(c, kept, k, LV_ITER, out);
}

static int f_map(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv *items;
    size_t n;
    if (!jv_truth(val)) return jj_make_iter(c, NULL, 0, LV_ITER, out); /* Jinja: "if value:" first */
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
    return jj_make_iter(c, res, n, LV_ITER, out);
}

static int f_minmax(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, int max, jv *out)
{
    static const char *const names[] = {"case_sensitive", "attribute"};
    jv a[2], *items;
    size_t n;
    if (jj_bind(c, at, max ? "max" : "min", names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
    if (!n) { *out = jv_undef("No aggregated item, sequence was empty."); return 0; }
    int ic = !jj_arg_bool(&a[0], 0);
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

static int to_int(jctx *c, const jnode *at, const jv *v, const jv *def, int64_t base, jv *out)
{
    if (v->t == JT_INT || v->t == JT_BOOL) { *out = jv_int(v->u.i); return 0; }
    if (v->t == JT_FLOAT && isfinite(v->u.f) && (v->u.f < 0 ? -v->u.f : v->u.f) < 9.2e18) { *out = jv_int((int64_t)v->u.f); return 0; }
    if (v->t == JT_STR) {
        /* int(s, base), else int(float(s)) */
        jv t;
        jj_strip(v, NULL, 3, &t);
        int64_t iv;
        double d;
        int r = base < 0 ? 0 : jj_py_int_parse(t.u.s.p, t.u.s.n, (int)base, &iv);
        if (r < 0) return jj_fail(c, at, "integer overflow (cis2 keeps integers in 64 bits)");
        if (r) { *out = jv_int(iv); return 0; }
        if (jj_py_float_parse(t.u.s.p, t.u.s.n, &d)) {
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
        jj_strip(v, NULL, 3, &t);
        if (jj_py_float_parse(t.u.s.p, t.u.s.n, &d)) { *out = jv_float(d); return 0; }
    }
    *out = def->t == JT_MISSING ? jv_float(0.0) : *def;
    return 0;
}

/* Python's round(x, -nd): x's exact decimal expansion rounded to a
 * multiple of 10^nd, ties to even */
static int round_tens(jctx *c, const jnode *at, double x, int nd, jv *out)
{
    char b[1500], keep[400];
    int neg = signbit(x);
    snprintf(b, sizeof b, "%.1080f", neg ? -x : x);
    size_t il = 0;
    while (b[il] >= '0' && b[il] <= '9') il++;
    const char *frac = b[il] ? b + il + 1 : b + il;
    /* the integer digits, with leading zeros so that at least one is kept */
    size_t pad = il <= (size_t)nd ? (size_t)nd + 1 - il : 0, kl = il + pad - (size_t)nd;
    if (il + pad >= sizeof keep) return jj_fail(c, at, "round: internal");
    char digits[400];
    memset(digits, '0', pad);
    memcpy(digits + pad, b, il);
    memcpy(keep, digits, kl);
    const char *drop = digits + kl;
    int up = drop[0] > '5', rest = 0;
    for (int i = 1; i < nd && !rest; i++) rest = drop[i] != '0';
    for (const char *q = frac; *q && !rest; q++) rest = *q != '0';
    if (drop[0] == '5') up = rest || (keep[kl - 1] - '0') % 2 == 1;
    if (up) {
        size_t i = kl;
        while (i > 0 && keep[i - 1] == '9') keep[--i] = '0';
        if (i > 0) keep[i - 1]++;
        else { memmove(keep + 1, keep, kl++); keep[0] = '1'; }
    }
    char r[500];
    size_t rn = 0;
    memcpy(r, keep, kl), rn = kl;
    memset(r + rn, '0', (size_t)nd), rn += (size_t)nd;
    r[rn] = 0;
    double v = strtod(r, NULL); /* digits only: no decimal point, any locale */
    *out = jv_float(neg ? -v : v);
    (void)c, (void)at;
    return 0;
}

static int f_round(jctx *c, const jnode *at, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    static const char *const names[] = {"precision", "method"};
    jv a[2];
    int64_t prec;
    if (jj_bind(c, at, "round", names, 2, args, na, kw, nk, a) || jj_arg_int(c, at, "round", &a[0], 0, &prec)) return -1;
    int method = 0;
    if (a[1].t == JT_STR) {
        if (a[1].u.s.n == 5 && !memcmp(a[1].u.s.p, "floor", 5)) method = 1;
        else if (a[1].u.s.n == 4 && !memcmp(a[1].u.s.p, "ceil", 4)) method = 2;
        else if (!(a[1].u.s.n == 6 && !memcmp(a[1].u.s.p, "common", 6)))
            return jj_fail(c, at, "method must be common, ceil or floor");
    }
    if (!jv_isnum(val)) return jj_fail(c, at, "type %s doesn't define __round__ method", jv_typename(val));
    if (method == 0 && val->t != JT_FLOAT) { /* round(int, n) is an int, ties to even */
        int64_t x = val->u.i, m = 1;
        for (int64_t i = 0; i < -prec; i++) {
            if (m > INT64_MAX / 10) { *out = jv_int(0); return 0; }
            m *= 10;
        }
        int64_t q = x / m, r = x % m;
        if (r < 0) { r += m; q -= 1; }
        if (2 * (uint64_t)r > (uint64_t)m || (2 * (uint64_t)r == (uint64_t)m && (q & 1))) q += 1;
        if (__builtin_mul_overflow(q, m, &x)) return jj_fail(c, at, "integer overflow (cis2 keeps integers in 64 bits)");
        *out = jv_int(x);
        return 0;
    }
    double x = val->t == JT_FLOAT ? val->u.f : (double)val->u.i;
    if (prec > 330 || (prec < -330 && !method)) { /* beyond a double's digits */
        *out = jv_float(prec > 0 || !isfinite(x) ? x : signbit(x) ? -0.0 : 0.0);
        return 0;
    }
    if (method && (prec < -22 || prec > 22)) return jj_fail(c, at, "round: precision out of range for floor and ceil");
    if (prec < 0 && method) return jj_fail(c, at, "round: a negative precision with floor or ceil is not supported");
    if (prec < 0 && isfinite(x)) return round_tens(c, at, x, (int)-prec, out);
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
    char b[1500];
    snprintf(b, sizeof b, "%.*f", (int)prec, x);
    *out = jv_float(strtod(b, NULL)); /* printf and strtod share the locale's decimal point */
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
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_FLOAT) *out = jv_float(val->u.f < 0 || (val->u.f == 0 && signbit(val->u.f)) ? -val->u.f : val->u.f);
        else if (val->t == JT_INT || val->t == JT_BOOL) {
            if (val->u.i == INT64_MIN) return jj_fail(c, at, "integer overflow");
            *out = jv_int(val->u.i < 0 ? -val->u.i : val->u.i);
        } else return jj_fail(c, at, "bad operand type for abs(): '%s'", jv_typename(val));
        return 0;
    case F_ATTR: {
        static const char *const names[] = {"name"};
        if (jj_bind(c, at, fn, names, 1, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "attr() needs a name");
        if (jj_arg_str(c, at, fn, &a[0], &s)) return -1;
        if (val->t == JT_UNDEF) { *out = *val; return 0; }
        if (val->t == JT_LOOP) return jl_loop_attr(c, val, s.u.s.p, s.u.s.n, out);
        if (val->t == JT_NS && jd_getn(val->u.d, s.u.s.p, s.u.s.n, out)) return 0;
        if (jl_method_lookup(c, val, s.u.s.p, s.u.s.n, out)) return 0;
        *out = jv_undef("no such attribute");
        return 0;
    }
    case F_BATCH: {
        static const char *const names[] = {"linecount", "fill_with"};
        /* Jinja's loop: a row is given out when its length equals
         * linecount (compared with ==, whatever linecount is), then the
         * rest, padded with fill_with when it is given */
        if (jj_bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "batch() missing 1 required positional argument: 'linecount'");
        jv *rows = jj_alloc(&c->mem, (n + 1) * sizeof *rows);
        if (!rows) return jj_nomem(c);
        size_t nb = 0, st = 0;
        for (size_t i = 0; i <= n; i++) {
            jv len = jv_int((int64_t)(i - st));
            int full = i < n ? jv_equal(c, &len, &a[0], 0) : 0;
            if (full < 0) return -1;
            if (full || (i == n && i > st)) {
                size_t w = i - st;
                int pad = i == n && a[1].t != JT_MISSING && a[1].t != JT_NONE && (a[0].t == JT_INT || a[0].t == JT_BOOL) &&
                          a[0].u.i > (int64_t)w;
                if (pad && a[0].u.i - (int64_t)w > (int64_t)c->max_output) return jj_limit(c, "batch: padding exceeds max_output");
                size_t total = pad ? (size_t)a[0].u.i : w;
                if (jv_newlist(c, total, &rows[nb])) return -1;
                for (size_t j = 0; j < total; j++) rows[nb].u.l->v[j] = j < w ? items[st + j] : a[1];
                nb++;
                st = i;
            }
        }
        return jj_make_iter(c, rows, nb, LV_ITER, out);
    }
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
    case F_TITLE:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
        if (id == F_TITLE) {
            /* words start after '-', whitespace, '(', '{', '[' or '<' */
            /* each word: its first character upper, the rest lower */
            jj_buf b = {0};
            if (jj_cost(c, JJ_SCAN(s.u.s.n) * 4)) return -1;
            for (size_t i = 0; i < s.u.s.n;) {
                size_t l, w = i;
                uint32_t cp = jj_u8dec(s.u.s.p + i, s.u.s.n - i, &l);
                if (cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jj_isspace_cp(cp)) {
                    if (jb_put(c, &b, s.u.s.p + i, l)) return -1;
                    i += l;
                    continue;
                }
                for (w = i + l; w < s.u.s.n;) {
                    size_t l2;
                    uint32_t c2 = jj_u8dec(s.u.s.p + w, s.u.s.n - w, &l2);
                    if (c2 == '-' || c2 == '(' || c2 == '{' || c2 == '[' || c2 == '<' || jj_isspace_cp(c2)) break;
                    w += l2;
                }
                jv first = jv_strn(s.u.s.p + i, l), rest = jv_strn(s.u.s.p + i + l, w - i - l), m1, m2;
                if (jj_case_map(c, &first, 0, &m1) || jj_case_map(c, &rest, 1, &m2) || jb_put(c, &b, m1.u.s.p, m1.u.s.n) ||
                    jb_put(c, &b, m2.u.s.p, m2.u.s.n))
                    return -1;
                i = w;
            }
            return jj_newstr(c, &b, out);
        }
        if (jj_case_map(c, &s, id == F_UPPER ? 0 : id == F_LOWER ? 1 : 2, out)) return -1;
        out->safe = s.safe;
        return 0;
    case F_CENTER: {
        static const char *const names[] = {"width"};
        if (jj_bind(c, at, fn, names, 1, args, na, kw, nk, a) || jj_arg_int(c, at, fn, &a[0], 80, &k) || jv_tostr(c, val, &s))
            return -1;
        int64_t len = (int64_t)jj_u8len(s.u.s.p, s.u.s.n);
        if (k <= len) { *out = s; return 0; }
        if (k > (int64_t)c->max_output) return jj_limit(c, "center: width over max_output");
        int64_t pad = k - len, left = pad / 2 + (pad & k & 1);
        jj_buf b = {0};
        for (int64_t i = 0; i < left; i++) if (jb_put(c, &b, " ", 1)) return -1;
        if (jb_put(c, &b, s.u.s.p, s.u.s.n)) return -1;
        for (int64_t i = 0; i < pad - left; i++) if (jb_put(c, &b, " ", 1)) return -1;
        jj_newstr(c, &b, out);
        out->safe = s.safe;
        return 0;
    }
    case F_COUNT:
    case F_LENGTH:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jj_len_of(c, at, val, &k)) return -1;
        *out = jv_int(k);
        return 0;
    case F_D:
    case F_DEFAULT: {
        static const char *const names[] = {"default_value", "boolean"};
        if (jj_bind(c, at, fn, names, 2, args, na, kw, nk, a)) return -1;
        int use = val->t == JT_UNDEF || (jj_arg_bool(&a[1], 0) && !jv_truth(val));
        *out = use ? (a[0].t == JT_MISSING ? jv_strn("", 0) : a[0]) : *val;
        return 0;
    }
    case F_DICTSORT: {
        static const char *const names[] = {"case_sensitive", "by", "reverse"};
        if (jj_bind(c, at, fn, names, 3, args, na, kw, nk, a)) return -1;
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
            if (jj_tuple2(c, val->u.d->k[i], val->u.d->v[i], &pairs[i])) return -1;
            if (key_of(c, at, by_value ? &val->u.d->v[i] : &val->u.d->k[i], NULL, !jj_arg_bool(&a[0], 0), &keys[i])) return -1;
        }
        if (a[2].t != JT_MISSING && a[2].t != JT_INT && a[2].t != JT_BOOL) /* sorted(reverse=...) takes an int */
            return jj_fail(c, at, "'%s' object cannot be interpreted as an integer", jv_typename(&a[2]));
        return sort_items(c, at, pairs, n, keys, jj_arg_bool(&a[2], 0), out);
    }
    case F_E:
    case F_ESCAPE:
    case F_FORCEESCAPE:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (id == F_FORCEESCAPE && val->t == JT_STR && val->safe) {
            jv t = *val;
            t.safe = 0;
            return jj_html_escape(c, &t, out);
        }
        return jj_html_escape(c, val, out);
    case F_FIRST:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
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
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
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
        if (jj_bind(c, at, fn, names, 1, args, na, kw, nk, a)) return -1;
        if (val->t == JT_UNDEF) return jj_undef_error(c, at, val); /* float(Undefined) raises */
        return to_float(val, &a[0], out);
    }
    case F_INT: {
        static const char *const names[] = {"default", "base"};
        if (jj_bind(c, at, fn, names, 2, args, na, kw, nk, a)) return -1;
        /* a base that is not an int: TypeError, so the fallbacks */
        k = a[1].t == JT_MISSING ? 10 : (a[1].t == JT_INT || a[1].t == JT_BOOL) ? a[1].u.i : -1;
        if (val->t == JT_UNDEF) return jj_undef_error(c, at, val); /* int(Undefined) raises */
        if (k != 0 && (k < 2 || k > 36)) k = -1; /* int() refuses the base: ValueError, so the default */
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
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_UNDEF) return jj_make_iter(c, NULL, 0, LV_ITER, out);
        if (val->t != JT_DICT) return jj_fail(c, at, "Can only get item pairs from a mapping.");
        n = val->u.d->n;
        if (jv_newlist(c, n, out)) return -1;
        for (size_t i = 0; i < n; i++)
            if (jj_tuple2(c, val->u.d->k[i], val->u.d->v[i], &out->u.l->v[i])) return -1;
        out->view = LV_ITER;
        return 0;
    case F_JOIN: {
        static const char *const names[] = {"d", "attribute"};
        if (jj_bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv sep = jv_strn("", 0);
        if (a[0].t != JT_MISSING && jv_tostr(c, &a[0], &sep)) return -1;
        jj_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            jv x = items[i];
            if (a[1].t != JT_MISSING && a[1].t != JT_NONE && attr_path(c, at, &items[i], &a[1], &x)) return -1;
            if ((i && jb_put(c, &b, sep.u.s.p, sep.u.s.n)) || jv_str(c, &b, &x)) return -1;
        }
        return jj_newstr(c, &b, out);
    }
    case F_LIST:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        if (val->t == JT_LIST && val->view == LV_NONE && !val->tuple) { *out = *val; return 0; }
        return jj_list_of(c, items, n, out);
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
        /* str(s).replace(str(old), str(new), count) */
        if (jj_bind(c, at, fn, names, 3, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING || a[1].t == JT_MISSING) return jj_fail(c, at, "replace() needs old and new");
        if (jv_tostr(c, val, &s) || jv_tostr(c, &a[0], &o) || jv_tostr(c, &a[1], &nw)) return -1;
        k = -1;
        if (a[2].t != JT_MISSING && a[2].t != JT_NONE && jj_arg_int(c, at, fn, &a[2], -1, &k)) return -1;
        return jj_str_replace(c, &s, &o, &nw, k, out);
    }
    case F_REVERSE:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        if (val->t == JT_STR) {
            jj_buf b = {0};
            if (jj_cost(c, JJ_SCAN(val->u.s.n))) return -1;
            for (size_t e = val->u.s.n; e > 0;) {
                size_t q = e - 1;
                while (q > 0 && ((unsigned char)val->u.s.p[q] & 0xC0) == 0x80) q--;
                if (jb_put(c, &b, val->u.s.p + q, e - q)) return -1;
                e = q;
            }
            jj_newstr(c, &b, out);
            out->safe = val->safe;
            return 0;
        }
        if (jj_iter(c, at, val, &items, &n) || jv_newlist(c, n, out)) return -1;
        for (size_t i = 0; i < n; i++) out->u.l->v[i] = items[n - 1 - i];
        out->view = LV_ITER;
        return 0;
    case F_ROUND: return f_round(c, at, val, args, na, kw, nk, out);
    case F_SAFE:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jv_tostr(c, val, out)) return -1;
        out->safe = 1;
        return 0;
    case F_SORT: {
        static const char *const names[] = {"reverse", "case_sensitive", "attribute"};
        if (jj_bind(c, at, fn, names, 3, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv *keys = jj_alloc(&c->mem, (n ? n : 1) * sizeof *keys);
        if (!keys) return jj_nomem(c);
        for (size_t i = 0; i < n; i++)
            if (key_of(c, at, &items[i], &a[2], !jj_arg_bool(&a[1], 0), &keys[i])) return -1;
        if (a[0].t != JT_MISSING && a[0].t != JT_INT && a[0].t != JT_BOOL)
            return jj_fail(c, at, "'%s' object cannot be interpreted as an integer", jv_typename(&a[0]));
        return sort_items(c, at, items, n, keys, jj_arg_bool(&a[0], 0), out);
    }
    case F_STRING:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        return jv_tostr(c, val, out);
    case F_SUM: {
        static const char *const names[] = {"attribute", "start"};
        if (jj_bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
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
        if (jj_bind(c, at, fn, names, 1, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
        if (a[0].t != JT_STR && a[0].t != JT_MISSING && a[0].t != JT_NONE) return jj_fail(c, at, "strip arg must be None or str");
        if (a[0].t == JT_STR && jj_cost(c, JJ_SCAN(s.u.s.n) * (1 + a[0].u.s.n / 16))) return -1;
        if (a[0].t == JT_STR) jj_strip(&s, &a[0], 3, out);
        else jj_strip(&s, NULL, 3, out);
        return 0;
    }
    case F_UNIQUE: {
        static const char *const names[] = {"case_sensitive", "attribute"};
        if (jj_bind(c, at, fn, names, 2, args, na, kw, nk, a) || jj_iter(c, at, val, &items, &n)) return -1;
        jv *keys = jj_alloc(&c->mem, (n ? n : 1) * sizeof *keys), *kept = jj_alloc(&c->mem, (n ? n : 1) * sizeof *kept);
        if (!keys || !kept) return jj_nomem(c);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            jv key;
            if (key_of(c, at, &items[i], &a[1], !jj_arg_bool(&a[0], 0), &key)) return -1;
            if ((key.t == JT_LIST && !key.tuple) || key.t == JT_DICT) return jj_fail(c, at, "unhashable type: '%s'", jv_typename(&key));
            int seen = 0;
            if (jj_cost(c, JJ_ITEMS(m) + 1)) return -1;
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
        return jj_make_iter(c, kept, m, LV_ITER, out);
    }
    case F_WORDCOUNT: {
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a) || jv_tostr(c, val, &s)) return -1;
        int64_t words = 0;
        int in = 0;
        if (jj_cost(c, JJ_SCAN(s.u.s.n))) return -1;
        for (size_t i = 0; i < s.u.s.n;) {
            size_t l;
            uint32_t cp = jj_u8dec(s.u.s.p + i, s.u.s.n - i, &l);
            int w = cp == '_' || jj_uclass(cp) & (UC_L | UC_N);
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
    if (jj_bind(c, at, fn, one, takes_arg ? 1 : 0, args, na, kw, nk, a)) return -1;
    if (takes_arg && a[0].t == JT_MISSING) return jj_fail(c, at, "test '%s' needs an argument", fn);
    switch (id) {
    case T_BOOLEAN: *res = val->t == JT_BOOL; return 0;
    case T_CALLABLE: /* Undefined has __call__ (it raises) */
        *res = val->t == JT_MACRO || val->t == JT_FUNC || val->t == JT_METHOD || val->t == JT_UNDEF ||
               (val->t == JT_CYCLER && val->u.cy->joiner);
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
            if (jj_is_upper_cp(cp)) { if (id == T_LOWER) bad = 1; else cased = 1; }
            else if (jj_is_lower_cp(cp)) { if (id == T_UPPER) bad = 1; else cased = 1; }
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


/*
 * jinja_methods.c - the chat-template renderer's methods and globals: the
 * methods of str, list/tuple and dict a template may call in transformers'
 * ImmutableSandboxedEnvironment (the ones that would change a list or dict
 * are "unsafe": an Undefined that fails when called), the loop object,
 * cycler/joiner, printf-style formatting (%, the format filter), and the
 * global functions: range (at most 100,000 items, as Jinja's sandbox),
 * dict, namespace, and transformers' raise_exception and strftime_now.
 * Called by jinja_eval.c and jinja_filters.c.  docs/chat.md "The
 * language" lists them.
 */
#include "jinja_impl.h"

#include <inttypes.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <math.h>
#include <time.h>

#include "tables/unicode_tables.h"

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
        if ((i = jj_find_name(STR_M, M_STR_N, name, n)) >= 0) return bound(c, obj, i, out);
        return 0;
    case JT_LIST:
        if (obj->view != LV_NONE) return 0;
        if ((i = jj_find_name(LIST_M, 2, name, n)) >= 0) return bound(c, obj, M_STR_N + i, out);
        if (!obj->tuple)
            for (i = 0; LIST_UNSAFE[i]; i++)
                if (strlen(LIST_UNSAFE[i]) == n && !memcmp(LIST_UNSAFE[i], name, n)) return unsafe(c, obj, name, n, out);
        return 0;
    case JT_DICT:
        if ((i = jj_find_name(DICT_M, 5, name, n)) >= 0) return bound(c, obj, M_LIST_N + i, out);
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
    int manual = 0, automatic = 0;
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
        if (memchr(f, '{', fl)) return jj_fail(c, at, "unexpected '{' in field name");
        int all_digits = 1;
        for (size_t q = 0; q < fl; q++) all_digits &= f[q] >= '0' && f[q] <= '9';
        if (fl && f[0] >= '0' && f[0] <= '9' && !all_digits) return jj_fail(c, at, "KeyError: '%.*s'", (int)fl, f);
        jv v;
        if (fl == 0 || (f[0] >= '0' && f[0] <= '9')) {
            if (fl == 0 ? manual : automatic)
                return jj_fail(c, at, fl == 0 ? "cannot switch from manual field specification to automatic field numbering"
                                              : "cannot switch from automatic field numbering to manual field specification");
            if (fl == 0) automatic = 1;
            else manual = 1;
        }
        if (fl == 0) {
            if (auto_i >= na) return jj_fail(c, at, "Replacement index %zu out of range for positional args tuple", auto_i);
            v = args[auto_i++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            size_t idx = (size_t)strtoul(f, NULL, 10);
            if (idx >= na) return jj_fail(c, at, "Replacement index %zu out of range for positional args tuple", idx);
            v = args[idx];
        } else {
            size_t j;
            if (jj_cost(c, JJ_ITEMS(nk))) return -1;
            for (j = 0; j < nk; j++)
                if (kw[j].name.n == fl && !memcmp(kw[j].name.p, f, fl)) break;
            if (j == nk) return jj_fail(c, at, "KeyError: '%.*s'", (int)fl, f);
            v = kw[j].v;
        }
        if (jv_str(c, &b, &v)) return -1;
        i = (size_t)(e - p);
    }
    return jj_newstr(c, &b, out);
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
    return jj_newstr(c, &b, out);
}

/* the start/end arguments of find, count, startswith ...: slice indices
 * (negative from the end, clamped) in characters; *none when the range is
 * empty past its start (start beyond the string, or end before start) */
static int sub_range(jctx *c, const jnode *at, const char *fn, const jv *s, const jv *st, const jv *en, jv *part, size_t *cp0,
                     int *none)
{
    int64_t n = (int64_t)jj_u8len(s->u.s.p, s->u.s.n), a = 0, e = n;
    const jv *arg[2] = {st, en};
    int64_t *dst[2] = {&a, &e};
    for (int i = 0; i < 2; i++) {
        if (arg[i]->t == JT_MISSING || arg[i]->t == JT_NONE) continue;
        if (arg[i]->t != JT_INT && arg[i]->t != JT_BOOL)
            return jj_fail(c, at, "%s: slice indices must be integers or None", fn);
        int64_t x = arg[i]->u.i;
        if (x < 0) { x += n; if (x < 0) x = 0; }
        *dst[i] = x;
    }
    if (e > n) e = n;
    *none = a > n || e < a;
    if (*none) return 0;
    size_t b0 = jj_u8off(s->u.s.p, s->u.s.n, (size_t)a), b1 = b0 + jj_u8off(s->u.s.p + b0, s->u.s.n - b0, (size_t)(e - a));
    *part = jv_strn(s->u.s.p + b0, b1 - b0);
    *cp0 = (size_t)a;
    return 0;
}

static int str_method_plain(jctx *c, const jnode *at, int id, const jv *s, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv a[3], t;
    int64_t k;
    const char *fn = STR_M[id];
    static const char *const chars_n[] = {"chars"};
    static const char *const split_n[] = {"sep", "maxsplit"};
    static const char *const sub_n[] = {"sub"};
    static const char *const range_n[] = {"sub", "start", "end"};
    static const char *const pre_n[] = {"prefix"};
    static const char *const repl_n[] = {"old", "new", "count"};
    static const char *const pad_n[] = {"width", "fillchar"};
    if (jj_cost(c, 1 + JJ_SCAN(s->u.s.n) * (1 + (na && args[0].t == JT_STR ? args[0].u.s.n / 64 : 0)))) return -1;
    switch (id) {
    case M_CAPITALIZE: case M_CASEFOLD: case M_LOWER: case M_UPPER: case M_SWAPCASE: case M_TITLE:
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        return jj_case_map(c, s, id == M_UPPER ? 0 : id == M_CAPITALIZE ? 2 : id == M_TITLE ? 3 : id == M_SWAPCASE ? 4 : 1, out);
    case M_STRIP: case M_LSTRIP: case M_RSTRIP:
        if (jj_bind(c, at, fn, chars_n, 1, args, na, kw, nk, a)) return -1;
        if (a[0].t != JT_MISSING && a[0].t != JT_NONE && a[0].t != JT_STR)
            return jj_fail(c, at, "%s arg must be None or str", fn);
        jj_strip(s, a[0].t == JT_STR ? &a[0] : NULL, id == M_STRIP ? 3 : id == M_LSTRIP ? 1 : 2, out);
        out->safe = 0;
        return 0;
    case M_SPLIT: case M_RSPLIT:
        if (jj_bind(c, at, fn, split_n, 2, args, na, kw, nk, a) || jj_arg_int(c, at, fn, &a[1], -1, &k)) return -1;
        return jj_str_split(c, at, s, &a[0], k, id == M_RSPLIT, out);
    case M_SPLITLINES: {
        static const char *const names[] = {"keepends"};
        jv *parts;
        size_t m;
        if (jj_bind(c, at, fn, names, 1, args, na, kw, nk, a)) return -1;
        if (a[0].t != JT_MISSING && a[0].t != JT_INT && a[0].t != JT_BOOL)
            return jj_fail(c, at, "'%s' object cannot be interpreted as an integer", jv_typename(&a[0]));
        if (jj_splitlines(c, s, jj_arg_bool(&a[0], 0), &parts, &m)) return -1;
        return jj_list_of(c, parts, m, out);
    }
    case M_STARTSWITH: case M_ENDSWITH: {
        jv part;
        size_t cp0;
        int none;
        if (jj_bind(c, at, fn, range_n, 3, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "%s() takes at least 1 argument (0 given)", fn);
        jv *cands = &a[0];
        size_t nc = 1;
        if (a[0].t == JT_LIST && a[0].tuple) { cands = a[0].u.l->v; nc = a[0].u.l->n; }
        *out = jv_bool(0);
        if (sub_range(c, at, fn, s, &a[1], &a[2], &part, &cp0, &none)) return -1;
        for (size_t i = 0; i < nc; i++) {
            if (cands[i].t != JT_STR)
                return jj_fail(c, at, "%s first arg must be str or a tuple of str, not %s", fn, jv_typename(&cands[i]));
            size_t m = cands[i].u.s.n;
            if (!none && m <= part.u.s.n &&
                memcmp(id == M_STARTSWITH ? part.u.s.p : part.u.s.p + part.u.s.n - m, cands[i].u.s.p, m) == 0) {
                *out = jv_bool(1);
                break;
            }
        }
        return 0;
    }
    case M_REPLACE: {
        jv o, nw;
        if (jj_bind(c, at, fn, repl_n, 3, args, na, kw, nk, a) || jj_arg_str(c, at, fn, &a[0], &o) || jj_arg_str(c, at, fn, &a[1], &nw) ||
            jj_arg_int(c, at, fn, &a[2], -1, &k))
            return -1;
        return jj_str_replace(c, s, &o, &nw, k, out);
    }
    case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX: case M_COUNT: {
        size_t off, cp0;
        jv part;
        int none;
        if (jj_bind(c, at, fn, range_n, 3, args, na, kw, nk, a) || jj_arg_str(c, at, fn, &a[0], &t) ||
            sub_range(c, at, fn, s, &a[1], &a[2], &part, &cp0, &none))
            return -1;
        if (id == M_COUNT) {
            int64_t cnt = 0;
            if (none) cnt = 0;
            else if (!t.u.s.n) cnt = (int64_t)jj_u8len(part.u.s.p, part.u.s.n) + 1;
            else
                for (size_t i = 0; i + t.u.s.n <= part.u.s.n;) {
                    const char *f = jj_memmem(part.u.s.p + i, part.u.s.n - i, t.u.s.p, t.u.s.n);
                    if (!f) break;
                    cnt++;
                    i = (size_t)(f - part.u.s.p) + t.u.s.n;
                }
            *out = jv_int(cnt);
            return 0;
        }
        if (none || !find_sub(&part, &t, id == M_RFIND || id == M_RINDEX, &off)) {
            if (id == M_INDEX || id == M_RINDEX) return jj_fail(c, at, "substring not found");
            *out = jv_int(-1);
            return 0;
        }
        *out = jv_int((int64_t)(cp0 + jj_u8len(part.u.s.p, off)));
        return 0;
    }
    case M_FORMAT: return str_format(c, at, s, args, na, kw, nk, out);
    case M_ISALNUM: case M_ISALPHA: case M_ISDIGIT: case M_ISSPACE: case M_ISLOWER: case M_ISUPPER: {
        if (jj_bind(c, at, fn, NULL, 0, args, na, kw, nk, a)) return -1;
        int ok = s->u.s.n > 0, cased = 0;
        for (size_t i = 0; i < s->u.s.n && ok;) {
            size_t l;
            uint32_t cp = jj_u8dec(s->u.s.p + i, s->u.s.n - i, &l);
            int cls = jj_uclass(cp);
            switch (id) {
            case M_ISALNUM: ok = (cls & (UC_L | UC_N)) != 0; break;
            case M_ISALPHA: ok = (cls & UC_L) != 0; break;
            case M_ISDIGIT: ok = cp >= '0' && cp <= '9'; break;
            case M_ISSPACE: ok = jj_isspace_cp(cp); break;
            case M_ISLOWER: if (jj_is_upper_cp(cp)) ok = 0; else if (jj_is_lower_cp(cp)) cased = 1; break;
            default: if (jj_is_lower_cp(cp)) ok = 0; else if (jj_is_upper_cp(cp)) cased = 1; break;
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
        if (jj_bind(c, at, fn, names, 1, args, na, kw, nk, a) || jj_iter(c, at, &a[0], &items, &n)) return -1;
        jj_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (items[i].t != JT_STR)
                return jj_fail(c, at, "sequence item %zu: expected str instance, %s found", i, jv_typename(&items[i]));
            if ((i && jb_put(c, &b, s->u.s.p, s->u.s.n)) || jb_put(c, &b, items[i].u.s.p, items[i].u.s.n)) return -1;
        }
        return jj_newstr(c, &b, out);
    }
    case M_LJUST: case M_RJUST: case M_CENTER: case M_ZFILL: {
        jv fill = jv_strn(" ", 1);
        if (jj_bind(c, at, fn, pad_n, id == M_ZFILL ? 1 : 2, args, na, kw, nk, a)) return -1;
        if (a[0].t == JT_MISSING) return jj_fail(c, at, "%s() takes at least 1 argument", fn);
        if (jj_arg_int(c, at, fn, &a[0], 0, &k)) return -1;
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
            return jj_newstr(c, &b, out);
        }
        return pad_str(c, s, k, &fill, id == M_LJUST ? 0 : id == M_RJUST ? 1 : 2, out);
    }
    case M_PARTITION: case M_RPARTITION: {
        size_t off;
        if (jj_bind(c, at, fn, sub_n, 1, args, na, kw, nk, a) || jj_arg_str(c, at, fn, &a[0], &t)) return -1;
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
        if (jj_bind(c, at, fn, pre_n, 1, args, na, kw, nk, a) || jj_arg_str(c, at, fn, &a[0], &t)) return -1;
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

/* A Markup string's methods (markupsafe): most escape their string
 * arguments (join its items) and return Markup; split and its kin return
 * Markup pieces; the others (find, startswith, ...) are str's. */
static int str_method(jctx *c, const jnode *at, int id, const jv *s, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    if (!s->safe) return str_method_plain(c, at, id, s, args, na, kw, nk, out);
    int wrapped = 0, pieces = id == M_SPLIT || id == M_RSPLIT || id == M_SPLITLINES;
    switch (id) {
    case M_CAPITALIZE: case M_TITLE: case M_LOWER: case M_UPPER: case M_REPLACE: case M_LJUST: case M_RJUST:
    case M_LSTRIP: case M_RSTRIP: case M_CENTER: case M_STRIP: case M_SWAPCASE: case M_ZFILL: case M_CASEFOLD:
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: case M_JOIN: case M_FORMAT: case M_PARTITION: case M_RPARTITION:
        wrapped = 1;
        break;
    }
    if (!wrapped && !pieces) return str_method_plain(c, at, id, s, args, na, kw, nk, out);
    jv *ea = args;
    jj_kw *ek = kw;
    if (wrapped && (na || nk)) {
        ea = jj_alloc(&c->mem, (na ? na : 1) * sizeof *ea);
        ek = jj_alloc(&c->mem, (nk ? nk : 1) * sizeof *ek);
        if (!ea || !ek) return jj_nomem(c);
        for (size_t i = 0; i < na; i++) {
            ea[i] = args[i];
            if (id == M_JOIN) {
                jv *items;
                size_t n;
                if (jj_iter(c, at, &args[i], &items, &n) || jv_newlist(c, n, &ea[i])) return -1;
                for (size_t j = 0; j < n; j++)
                    if (jj_html_escape(c, &items[j], &ea[i].u.l->v[j])) return -1;
            } else if (args[i].t == JT_STR && jj_html_escape(c, &args[i], &ea[i])) {
                return -1;
            }
        }
        for (size_t j = 0; j < nk; j++) {
            ek[j] = kw[j];
            if (kw[j].v.t == JT_STR && jj_html_escape(c, &kw[j].v, &ek[j].v)) return -1;
        }
    }
    if (str_method_plain(c, at, id, s, ea, na, ek, nk, out)) return -1;
    if (out->t == JT_STR) out->safe = 1;
    if (out->t == JT_LIST)
        for (size_t i = 0; i < out->u.l->n; i++)
            if (out->u.l->v[i].t == JT_STR) out->u.l->v[i].safe = 1;
    return 0;
}

int jl_call_method(jctx *c, const jnode *at, jj_bound *bm, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    jv *self = &bm->self, a[2];
    if (bm->id < M_STR_N) return str_method(c, at, bm->id, self, args, na, kw, nk, out);
    switch (bm->id) {
    case M_L_COUNT:
    case M_L_INDEX: {
        static const char *const names[] = {"value"};
        if (jj_bind(c, at, bm->id == M_L_COUNT ? "count" : "index", names, 1, args, na, kw, nk, a)) return -1;
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
        if (jj_bind(c, at, "get", names, 2, args, na, kw, nk, a)) return -1;
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
        if (jj_bind(c, at, "items", NULL, 0, args, na, kw, nk, a)) return -1;
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
                if (jj_tuple2(c, d->k[i], d->v[i], &out->u.l->v[i])) return -1;
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
    int i = jj_find_name(names, 7, name, n);
    if (i < 0) return 0;
    memset(out, 0, sizeof *out);
    out->t = JT_FUNC;
    out->u.i = i;
    return 1;
}

/* strftime_now(fmt) as Python's datetime.strftime does it for a naive
 * datetime: %f, %z and %Z are replaced first (000000, '', ''), then the
 * platform's strftime runs in the C locale (glibc copies directives it
 * does not know), on the format up to its first NUL as C reads it */
static int strftime_now(jctx *c, const jnode *at, const jv *fmt, jv *out)
{
    const char *p = fmt->u.s.p;
    size_t n = fmt->u.s.n;
    const char *nul = memchr(p, 0, n);
    if (nul) n = (size_t)(nul - p);
    if (jj_cost(c, n)) return -1;
    jj_buf f = {0};
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (p[i] != '%' || i + 1 >= n) rc = jb_put(c, &f, p + i, 1);
        else {
            char ch = p[++i];
            rc = ch == 'f' ? jb_str(c, &f, "000000") : ch == 'z' || ch == 'Z' ? 0 : jb_put(c, &f, p + i - 1, 2);
        }
        if (rc) return -1;
    }
    if (!f.n) { *out = jv_strn("", 0); return 0; }
    if (jb_put(c, &f, "", 1)) return -1; /* NUL-terminated for strftime */
    locale_t loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!loc) return jj_nomem(c);
    /* as Python's time.strftime: a bigger buffer until 256 bytes a format byte */
    for (size_t cap = 1024;; cap *= 2) {
        if (cap > c->max_output) {
            freelocale(loc);
            return jj_limit(c, "strftime_now: the result exceeds max_output");
        }
        char *t = jj_alloc(&c->mem, cap);
        if (!t) { freelocale(loc); return jj_nomem(c); }
        size_t k = strftime_l(t, cap, f.p, &c->now, loc);
        if (k || cap > 256 * f.n) {
            freelocale(loc);
            *out = jv_strn(t, k);
            return 0;
        }
    }
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
        if (jj_cost(c, JJ_ITEMS(m)) || jv_newlist(c, m, out)) return -1;
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
        if (c->err->code == CIS2_OK) {
            char msg[sizeof c->err->msg];
            memcpy(msg, m.u.s.p, len);
            for (size_t i = 0; i < len; i++)
                if (!msg[i]) msg[i] = ' '; /* one C string: NULs, like newlines, become spaces */
            msg[len] = 0;
            cis2_fail(c->err, CIS2_E_USAGE, "%s", msg);
        }
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
            if (jj_list_of(c, args, na, &l)) return -1;
            cy->items = l.u.l;
        } else {
            static const char *const names[] = {"sep"};
            jv a[1];
            if (jj_bind(c, at, "joiner", names, 1, args, na, kw, nk, a)) return -1;
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

/* A numeric conversion's width or precision of n or more characters:
 * checked before snprintf formats it, which would write every character
 * of a '%999999999d' (and allocate them all for a '%.999999999f') only to
 * find that they do not fit */
static int spec_wider_than(const char *spec, int64_t n)
{
    const char *q = spec + 1;
    int64_t w = 0, pr = 0;
    while (*q && strchr("-+ 0#", *q)) q++;
    while (*q >= '0' && *q <= '9') w = w * 10 + (*q++ - '0'); /* 13 digits at most: no overflow */
    if (*q == '.') {
        q++;
        while (*q >= '0' && *q <= '9') pr = pr * 10 + (*q++ - '0');
    }
    return w >= n || pr >= n;
}

int jl_percent_format(jctx *c, const jnode *at, const jv *fmt, const jv *args, jv *out)
{
    const char *p = fmt->u.s.p;
    size_t n = fmt->u.s.n, ai = 0, nargs = 1;
    const jv *av = args;
    int mapping = args->t == JT_DICT, keyed = 0;
    if (args->t == JT_LIST && args->tuple) { av = args->u.l->v; nargs = args->u.l->n; }
    jj_buf b = {0};
    if (jj_cost(c, JJ_SCAN(n))) return -1;
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
            have = keyed = 1;
            j = (size_t)(e - p) + 1;
        }
        char spec[32];
        size_t sn = 0;
        spec[sn++] = '%';
        while (j < n && p[j] && strchr("-+ 0#", p[j]) && sn < 8) spec[sn++] = p[j++];
        while (j < n && p[j] >= '0' && p[j] <= '9' && sn < 14) spec[sn++] = p[j++];
        if (j < n && p[j] == '.') {
            spec[sn++] = p[j++];
            while (j < n && p[j] >= '0' && p[j] <= '9' && sn < 20) spec[sn++] = p[j++];
        }
        while (j < n && (p[j] == 'h' || p[j] == 'l' || p[j] == 'L')) j++; /* length modifiers: Python ignores them */
        if (j >= n) return jj_fail(c, at, "incomplete format");
        char conv = p[j];
        if (conv == '%') {
            if (sn > 1 || have) return jj_fail(c, at, "unsupported format character '%%'");
            if (jb_put(c, &b, "%", 1)) return -1;
            i = j;
            continue;
        }
        if (!have) {
            if (mapping) { /* the mapping is one argument, before any %(key) */
                if (ai || keyed) return jj_fail(c, at, "not enough arguments for format string");
                v = *args;
                ai++;
            } else {
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
            if (fmt->safe && !(v.t == JT_STR && v.safe && conv == 's')) { /* Markup % args escapes them */
                jv e, raw = jv_strn(sb.p ? sb.p : "", sb.n);
                if (jj_html_escape(c, &raw, &e)) return -1;
                sb.p = (char *)e.u.s.p;
                sb.n = sb.cap = e.u.s.n;
            }
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
                if (width > (int64_t)c->max_output) return jj_limit(c, "a format width exceeds max_output");
                if (jj_cost(c, (uint64_t)width / 16)) return -1;
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
            else if (v.t == JT_FLOAT && (conv == 'd' || conv == 'i') && isfinite(v.u.f) && (v.u.f < 0 ? -v.u.f : v.u.f) < 9.2e18)
                iv = (int64_t)v.u.f;
            else return jj_fail(c, at, "%%%c format: a real number is required, not %s", conv, jv_typename(&v));
            memcpy(spec + sn, PRId64, strlen(PRId64) - 1);
            sn += strlen(PRId64) - 1;
            spec[sn++] = conv == 'i' ? 'd' : conv;
            spec[sn] = 0;
            if (spec_wider_than(spec, (int64_t)sizeof t)) return jj_fail(c, at, "format too wide");
            tn = snprintf(t, sizeof t, spec, iv);
            if (tn < 0 || (size_t)tn >= sizeof t) return jj_fail(c, at, "format too wide");
            if (jb_put(c, &b, t, (size_t)tn)) return -1;
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
            if (spec_wider_than(spec, (int64_t)sizeof t)) return jj_fail(c, at, "format too wide");
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
    /* Python skips this check for any mapping-like argument (a list too) */
    if (!mapping && !(args->t == JT_LIST && !args->tuple) && ai < nargs)
        return jj_fail(c, at, "not all arguments converted during string formatting");
    jj_newstr(c, &b, out);
    out->safe = fmt->safe;
    return 0;
}

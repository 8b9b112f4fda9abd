/*
 * jinja_str.c - what the chat-template renderer's filters and methods
 * share (jinja_filters.c, jinja_methods.c; prototypes in jinja_impl.h):
 * binding call arguments to parameters, Python's string operations on
 * UTF-8 (case maps, strip, split, splitlines, replace, the line breaks
 * and whitespace of Python's str), and Python's int()/float() syntax.
 * docs/chat.md "Where cis2 differs from Jinja2" says what is
 * approximated: case mapping outside the scripts listed there (Latin,
 * Greek, Cyrillic, Armenian, fullwidth Latin) is the identity.
 */
#include "jinja_impl.h"

#include <inttypes.h>
#include <math.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tables/unicode_tables.h"

int jj_find_name(const char *const *tab, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(tab[i]) == len && memcmp(tab[i], s, len) == 0) return i;
    return -1;
}

/* Binds positional and keyword arguments to names; slots not given are
 * JT_MISSING. */
int jj_bind(jctx *c, const jnode *at, const char *fn, const char *const *names, size_t np, jv *args, size_t na,
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

int jj_arg_int(jctx *c, const jnode *at, const char *fn, const jv *v, int64_t def, int64_t *out)
{
    *out = def;
    if (v->t == JT_MISSING) return 0;
    if (v->t == JT_INT || v->t == JT_BOOL) { *out = v->u.i; return 0; }
    return jj_fail(c, at, "%s(): '%s' object cannot be interpreted as an integer", fn, jv_typename(v));
}
int jj_arg_bool(const jv *v, int def) { return v->t == JT_MISSING ? def : jv_truth(v); }
int jj_arg_str(jctx *c, const jnode *at, const char *fn, const jv *v, jv *out)
{
    *out = jv_strn("", 0);
    if (v->t == JT_STR) { *out = *v; return 0; }
    return jj_fail(c, at, "%s(): expected a string, got %s", fn, jv_typename(v));
}

int jj_newstr(jctx *c, jj_buf *b, jv *out) { return jb_take(c, b, out); }

int jj_make_iter(jctx *c, jv *items, size_t n, int view, jv *out)
{
    if (jv_newlist(c, n, out)) return -1;
    if (n) memcpy(out->u.l->v, items, n * sizeof *items);
    out->view = (uint8_t)view;
    return 0;
}

int jj_tuple2(jctx *c, jv a, jv b, jv *out)
{
    if (jv_newlist(c, 2, out)) return -1;
    out->u.l->v[0] = a;
    out->u.l->v[1] = b;
    out->tuple = 1;
    return 0;
}

int jj_len_of(jctx *c, const jnode *at, const jv *v, int64_t *n)
{
    switch (v->t) {
    case JT_UNDEF: *n = 0; return 0;
    case JT_STR: *n = (int64_t)jj_u8len(v->u.s.p, v->u.s.n); return jj_cost(c, JJ_SCAN(v->u.s.n));
    case JT_LIST:
        if (v->view == LV_ITER) return jj_fail(c, at, "object of type 'generator' has no len()");
        *n = (int64_t)v->u.l->n;
        return 0;
    case JT_DICT: *n = (int64_t)v->u.d->n; return 0;
    case JT_LOOP: *n = (int64_t)v->u.lp->n; return 0;
    default: return jj_fail(c, at, "object of type '%s' has no len()", jv_typename(v));
    }
}

/* ------------------------------------------------------------ case maps */

uint32_t jj_cp_upper(uint32_t c)
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
    if (c >= 0x1CD && c <= 0x1DC) return c & 1 ? c : c - 1;
    if ((c >= 0x1DE && c <= 0x1EF) || c == 0x1F5 || (c >= 0x1F8 && c <= 0x21F) || (c >= 0x222 && c <= 0x233) ||
        (c >= 0x246 && c <= 0x24F) || (c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF))
        return c & 1 ? c - 1 : c;
    if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
    if (c == 0x3AC) return 0x386;
    if (c >= 0x3AD && c <= 0x3AF) return c - 37;
    if (c == 0x3CC) return 0x38C;
    if (c == 0x3CD || c == 0x3CE) return c - 63;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F)) return c & 1 ? c - 1 : c;
    if (c >= 0x4C1 && c <= 0x4CE) return c & 1 ? c : c - 1;
    if (c == 0x4CF) return 0x4C0;
    if (c >= 0x561 && c <= 0x586) return c - 48;
    if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
    return c;
}

uint32_t jj_cp_lower(uint32_t c)
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
    if (c >= 0x1CD && c <= 0x1DC) return c & 1 ? c + 1 : c;
    if ((c >= 0x1DE && c <= 0x1EF) || c == 0x1F4 || (c >= 0x1F8 && c <= 0x21F) || (c >= 0x222 && c <= 0x233) ||
        (c >= 0x246 && c <= 0x24F) || (c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF))
        return c & 1 ? c : c + 1;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F)) return c & 1 ? c : c + 1;
    if (c >= 0x4C1 && c <= 0x4CE) return c & 1 ? c + 1 : c;
    if (c == 0x4C0) return 0x4CF;
    if (c >= 0x531 && c <= 0x556) return c + 48;
    if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
    return c;
}

/* the titlecase letters (Lt) of the ranges above: the digraphs' middle
 * forms U+01C5 U+01C8 U+01CB U+01F2, neither upper nor lower for Python */
static int is_title_cp(uint32_t c) { return c == 0x1C5 || c == 0x1C8 || c == 0x1CB || c == 0x1F2; }
/* Python's titlecase mapping (capitalize, str.title): the digraphs' middle
 * form, else the uppercase one */
static uint32_t cp_title(uint32_t c)
{
    if ((c >= 0x1C4 && c <= 0x1CC) || (c >= 0x1F1 && c <= 0x1F3)) return jj_cp_upper(c) + 1;
    return jj_cp_upper(c);
}

int jj_is_cased(uint32_t c) { return jj_cp_upper(c) != c || jj_cp_lower(c) != c || c == 0xDF; }
int jj_is_upper_cp(uint32_t c) { return jj_cp_lower(c) != c && !is_title_cp(c); }
int jj_is_lower_cp(uint32_t c) { return (jj_cp_upper(c) != c && !is_title_cp(c)) || c == 0xDF; }

int jj_uclass(uint32_t cp)
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
int jj_case_map(jctx *c, const jv *s, int mode, jv *out)
{
    jj_buf b = {0};
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    if (jj_cost(c, JJ_SCAN(n))) return -1;
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
        default: up = jj_is_lower_cp(cp); break;
        }
        char e[8];
        size_t en;
        if (mode == 4 && !up && !jj_is_upper_cp(cp)) {
            /* swapcase leaves what is neither upper nor lower (titlecase too) */
            en = jj_u8enc(cp, e);
        } else if (up && cp == 0xDF) {
            en = (size_t)snprintf(e, sizeof e, mode == 0 || mode == 4 ? "SS" : "Ss");
        } else if (!up && cp == 0x130) {
            en = jj_u8enc('i', e);
            en += jj_u8enc(0x307, e + en);
        } else if (!up && cp == 0x3A3) {
            /* Final_Sigma: after a cased letter and not before one */
            size_t l2;
            uint32_t nx = i + l < n ? jj_u8dec(p + i + l, n - i - l, &l2) : 0;
            r = (prev && jj_is_cased(prev) && !(nx && jj_is_cased(nx))) ? 0x3C2 : 0x3C3;
            en = jj_u8enc(r, e);
        } else {
            r = !up ? jj_cp_lower(cp) : mode == 2 || mode == 3 ? cp_title(cp) : jj_cp_upper(cp);
            en = jj_u8enc(r, e);
        }
        if (jb_put(c, &b, e, en)) return -1;
        prev_cased = jj_is_cased(cp);
        prev = cp;
        first = 0;
        i += l;
    }
    return jj_newstr(c, &b, out);
}

/* ------------------------------------------------------ string helpers */

int jj_cp_in(uint32_t cp, const jv *chars)
{
    for (size_t i = 0; i < chars->u.s.n;) {
        size_t l;
        if (jj_u8dec(chars->u.s.p + i, chars->u.s.n - i, &l) == cp) return 1;
        i += l;
    }
    return 0;
}

/* str.strip family: which 1 left, 2 right, 3 both; chars NULL = whitespace */
void jj_strip(const jv *s, const jv *chars, int which, jv *out)
{
    const char *p = s->u.s.p;
    size_t a = 0, b = s->u.s.n;
    if (which & 1)
        while (a < b) {
            size_t l;
            uint32_t cp = jj_u8dec(p + a, b - a, &l);
            if (chars ? !jj_cp_in(cp, chars) : !jj_isspace_cp(cp)) break;
            a += l;
        }
    if (which & 2)
        while (b > a) {
            size_t q = b - 1, l;
            while (q > a && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
            uint32_t cp = jj_u8dec(p + q, b - q, &l);
            if (chars ? !jj_cp_in(cp, chars) : !jj_isspace_cp(cp)) break;
            b = q;
        }
    *out = jv_strn(p + a, b - a);
    out->safe = s->safe;
}

int jj_str_replace(jctx *c, const jv *s, const jv *old, const jv *new, int64_t count, jv *out)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, on = old->u.s.n;
    if (jj_cost(c, JJ_SCAN(n) * (1 + on / 64) + JJ_SCAN(new->u.s.n))) return -1;
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
        return jj_newstr(c, &b, out);
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
    return jj_newstr(c, &b, out);
}

int jj_push(jctx *c, jv **v, size_t *n, size_t *cap, jv x)
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

int jj_list_of(jctx *c, jv *items, size_t n, jv *out)
{
    if (jv_newlist(c, n, out)) return -1;
    if (n) memcpy(out->u.l->v, items, n * sizeof *items);
    return 0;
}

/* str.split / str.rsplit */
int jj_str_split(jctx *c, const jnode *at, const jv *s, const jv *sep, int64_t maxsplit, int right, jv *out)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, cap = 0, k = 0;
    jv *parts = NULL;
    if (jj_cost(c, JJ_SCAN(n))) return -1;
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
                    if (jj_push(c, &parts, &k, &cap, jv_strn(p + i, n - i))) return -1;
                    break;
                }
                size_t st = i;
                while (i < n && !jj_isspace_cp(jj_u8dec(p + i, n - i, &l))) i += l;
                if (jj_push(c, &parts, &k, &cap, jv_strn(p + st, i - st))) return -1;
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
                    if (jj_push(c, &parts, &k, &cap, jv_strn(p, e))) return -1;
                    break;
                }
                size_t st = e;
                while (st > 0) {
                    size_t q = st - 1, l;
                    while (q > 0 && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
                    if (jj_isspace_cp(jj_u8dec(p + q, st - q, &l))) break;
                    st = q;
                }
                if (jj_push(c, &parts, &k, &cap, jv_strn(p + st, e - st))) return -1;
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
                    if (jj_push(c, &parts, &k, &cap, jv_strn(p + i, n - i))) return -1;
                    break;
                }
                if (jj_push(c, &parts, &k, &cap, jv_strn(p + i, (size_t)(f - p) - i))) return -1;
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
                    if (jj_push(c, &parts, &k, &cap, jv_strn(p, e))) return -1;
                    break;
                }
                if (jj_push(c, &parts, &k, &cap, jv_strn(f + qn, e - (size_t)(f - p) - qn))) return -1;
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
    return jj_list_of(c, parts, k, out);
}

/* the line boundaries of str.splitlines: their length at p[i], or 0 */
size_t jj_line_break(const char *p, size_t n, size_t i)
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

int jj_splitlines(jctx *c, const jv *s, int keepends, jv **parts, size_t *k)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, cap = 0, st = 0;
    *parts = NULL;
    *k = 0;
    if (jj_cost(c, JJ_SCAN(n))) return -1;
    for (size_t i = 0; i < n;) {
        size_t bl = jj_line_break(p, n, i);
        if (!bl) { i++; continue; }
        if (jj_push(c, parts, k, &cap, jv_strn(p + st, (keepends ? i + bl : i) - st))) return -1;
        i += bl;
        st = i;
    }
    if (st < n && jj_push(c, parts, k, &cap, jv_strn(p + st, n - st))) return -1;
    return 0;
}

/* Python's float() syntax (no hex): [sign] digits [. digits] [e [sign]
 * digits], or inf, infinity, nan; underscores between digits */
int jj_py_float_parse(const char *s, size_t n, double *out)
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
    int digits = 0, prev_digit = 0, dot = 0, exp = 0;
    for (; i < n; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9') { b[bn++] = ch; digits++; prev_digit = 1; continue; }
        if (ch == '_' && prev_digit && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9') continue;
        if (ch == '.' && !dot && !exp) { b[bn++] = '.'; dot = 1; prev_digit = 0; continue; }
        if ((ch == 'e' || ch == 'E') && digits && !exp) {
            exp = 1;
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
int jj_py_int_parse(const char *s, size_t n, int base, int64_t *out)
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


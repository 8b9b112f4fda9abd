/*
 * jinja_eval.c - the chat-template renderer's evaluator and its API
 * (jinja.h): scopes, statements, expressions, calls, macros.  Callers:
 * jinja_api.c (the public entry points the server uses) and the unit
 * test.  docs/chat.md ("The API", "Semantics") is the contract; the
 * semantics are the Jinja2 template designer documentation's
 * ("Assignments", "Scoping Behavior", "For", "Macros", "Call",
 * "Expressions") as Debian's python3-jinja2 renders them in transformers'
 * sandbox:
 *
 *   - a for loop's body runs in a scope of its own, fresh each turn
 *     (a set inside it is gone at the next turn and after the loop); if
 *     blocks share their scope; a macro's body sees its parameters, then
 *     the scope it was defined in (as it is at call time), then the
 *     caller's variables and the globals; namespace() objects are the one
 *     thing a loop body can change for the outside (set ns.x = ...).
 *   - obj.name looks for an attribute (a method of str, list, dict) and
 *     then an item; obj[key] an item and then an attribute; what is not
 *     there is Undefined: printed as '', false, iterable as empty, and an
 *     error when used further (attribute, arithmetic, call).
 *   - the operators are Python's (int + int, str + str, list + list, str
 *     * int, 7 // 2, -7 % 3, 2 ** 10, chained comparisons, in), on 64-bit
 *     integers (an overflow is an error, where Python would grow).
 *
 * Every evaluation counts a step and a level of recursion against the
 * limits (cis2_jinja_limits), so a template that loops or recurses
 * without end is refused with one line, never a hang or a crash.
 */
#include "jinja_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jj_scope {
    jj_scope *parent;
    size_t n, cap;
    jj_str *names;
    jv *vals;
};

static int ev(jctx *c, jj_scope *s, const jnode *e, jv *out);
static int ex(jctx *c, jj_scope *s, const jnode *e);

/* ---------------------------------------------------------------- scopes */

static jj_scope *scope_new(jctx *c, jj_scope *parent)
{
    jj_scope *s = jj_alloc(&c->mem, sizeof *s);
    if (!s) { jj_nomem(c); return NULL; }
    s->parent = parent;
    return s;
}

/* Scopes are searched name by name: each search is charged by the names
 * it passes (a template that sets thousands of names, or a macro of
 * thousands of parameters, pays for its quadratic lookups) */
static int scope_set(jctx *c, jj_scope *s, const char *name, size_t n, jv v)
{
    if (jj_cost(c, JJ_ITEMS(s->n))) return -1;
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i].n == n && memcmp(s->names[i].p, name, n) == 0) {
            s->vals[i] = v;
            return 0;
        }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 4;
        jj_str *nn = jj_alloc(&c->mem, nc * sizeof *nn);
        jv *nv = jj_alloc(&c->mem, nc * sizeof *nv);
        if (!nn || !nv) return jj_nomem(c);
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n].p = name;
    s->names[s->n].n = n;
    s->vals[s->n] = v;
    s->n++;
    return 0;
}

/* 1 found, 0 not, -1 over max_steps */
static int scope_find(jctx *c, const jj_scope *s, const char *name, size_t n, jv *out)
{
    uint64_t passed = 0;
    int found = 0;
    for (; s && !found; s = s->parent) {
        for (size_t i = s->n; i-- > 0;)
            if (s->names[i].n == n && memcmp(s->names[i].p, name, n) == 0) {
                *out = s->vals[i];
                found = 1;
                break;
            }
        passed += s->n + 1;
    }
    return jj_cost(c, JJ_ITEMS(passed)) ? -1 : found;
}

static int lookup(jctx *c, jj_scope *s, const jnode *e, jv *out)
{
    int f = scope_find(c, s, e->name.p, e->name.n, out);
    if (f) return f < 0 ? -1 : 0;
    if (jj_cost(c, JJ_ITEMS(c->vars.u.d->n))) return -1;
    if (jd_getn(c->vars.u.d, e->name.p, e->name.n, out)) return 0;
    if (jl_global(e->name.p, e->name.n, out)) return 0;
    char *h = jj_alloc(&c->mem, e->name.n + 20);
    if (!h) return jj_nomem(c);
    snprintf(h, e->name.n + 20, "'%.*s' is undefined", (int)e->name.n, e->name.p);
    *out = jv_undef(h);
    return 0;
}

/* the error of using an undefined value: its hint */
int jj_undef_error(jctx *c, const jnode *at, const jv *u)
{
    if (u->u.s.n) return jj_fail(c, at, "%.*s", (int)u->u.s.n, u->u.s.p);
    return jj_fail(c, at, "an undefined value was used");
}

static jv undef_attr(jctx *c, const jv *obj, const char *name, size_t n)
{
    const char *tn = obj->t == JT_NONE ? "None" : NULL;
    char t[64];
    if (!tn) {
        snprintf(t, sizeof t, "'%s object'", jv_typename(obj));
        tn = t;
    } else {
        tn = "'None'";
    }
    size_t cap = strlen(tn) + n + 40;
    char *h = jj_alloc(&c->mem, cap);
    if (!h) return jv_undef("undefined attribute");
    snprintf(h, cap, "%s has no attribute '%.*s'", tn, (int)n, name);
    return jv_undef(h);
}

/* ------------------------------------------------- attributes and items */

int jj_getattr(jctx *c, const jnode *at, const jv *obj, const char *name, size_t n, jv *out)
{
    switch (obj->t) {
    case JT_UNDEF: return jj_undef_error(c, at, obj);
    case JT_DICT:
        if (jl_method_lookup(c, obj, name, n, out)) return 0;
        if (jj_cost(c, JJ_ITEMS(obj->u.d->n))) return -1;
        if (jd_getn(obj->u.d, name, n, out)) return 0;
        break;
    case JT_NS:
        if (jj_cost(c, JJ_ITEMS(obj->u.d->n))) return -1;
        if (jd_getn(obj->u.d, name, n, out)) return 0;
        break;
    case JT_LOOP: return jl_loop_attr(c, obj, name, n, out);
    default:
        if (jl_method_lookup(c, obj, name, n, out)) return 0;
        break;
    }
    *out = undef_attr(c, obj, name, n);
    return 0;
}

/* a list/str index as Python takes it: bool and int; -1 if none */
static int as_index(const jv *k, int64_t *i)
{
    if (k->t != JT_INT && k->t != JT_BOOL) return 0;
    *i = k->u.i;
    return 1;
}

int jj_getitem(jctx *c, const jnode *at, const jv *obj, const jv *key, jv *out)
{
    int64_t i;
    switch (obj->t) {
    case JT_UNDEF: return jj_undef_error(c, at, obj);
    case JT_DICT: {
        int f = jd_get(c, obj->u.d, *key, out);
        if (f) return f < 0 ? -1 : 0;
        break;
    }
    case JT_NS:
        if (jj_cost(c, JJ_ITEMS(obj->u.d->n))) return -1;
        if (key->t == JT_STR && jd_getn(obj->u.d, key->u.s.p, key->u.s.n, out)) return 0;
        break;
    case JT_LIST:
        if (obj->view) break;
        if (as_index(key, &i)) {
            int64_t n = (int64_t)obj->u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) { *out = obj->u.l->v[i]; return 0; }
        }
        break;
    case JT_STR:
        if (as_index(key, &i)) {
            size_t n = jj_u8len(obj->u.s.p, obj->u.s.n);
            if (jj_cost(c, JJ_SCAN(obj->u.s.n))) return -1;
            if (i < 0) i += (int64_t)n;
            if (i >= 0 && (size_t)i < n) {
                size_t o = jj_u8off(obj->u.s.p, obj->u.s.n, (size_t)i), l;
                jj_u8dec(obj->u.s.p + o, obj->u.s.n - o, &l);
                *out = jv_strn(obj->u.s.p + o, l);
                out->safe = obj->safe;
                return 0;
            }
        }
        break;
    case JT_LOOP:
        if (key->t == JT_STR) return jl_loop_attr(c, obj, key->u.s.p, key->u.s.n, out);
        break;
    default: break;
    }
    if (key->t == JT_STR) {
        if (obj->t != JT_NS && obj->t != JT_LOOP && jl_method_lookup(c, obj, key->u.s.p, key->u.s.n, out)) return 0;
        *out = undef_attr(c, obj, key->u.s.p, key->u.s.n);
        return 0;
    }
    jj_buf b = {0};
    if (jv_repr(c, &b, key, 0)) return -1;
    *out = undef_attr(c, obj, b.p ? b.p : "", b.n);
    return 0;
}

/* Python's slice.indices for a sequence of length n */
static int slice_bounds(jctx *c, const jnode *at, const jv *st, const jv *sp, const jv *sc, int64_t n, int64_t *a,
                        int64_t *b, int64_t *step)
{
    int64_t x;
    *step = 1;
    if (sc->t != JT_NONE) {
        if (!as_index(sc, step)) return jj_fail(c, at, "slice indices must be integers or None");
        if (*step == 0) return jj_fail(c, at, "slice step cannot be zero");
    }
    int64_t lower = *step < 0 ? -1 : 0, upper = *step < 0 ? n - 1 : n;
    if (st->t == JT_NONE) *a = *step < 0 ? upper : lower;
    else {
        if (!as_index(st, &x)) return jj_fail(c, at, "slice indices must be integers or None");
        if (x < 0) { x += n; if (x < lower) x = lower; }
        else if (x > upper) x = upper;
        *a = x;
    }
    if (sp->t == JT_NONE) *b = *step < 0 ? lower : upper;
    else {
        if (!as_index(sp, &x)) return jj_fail(c, at, "slice indices must be integers or None");
        if (x < 0) { x += n; if (x < lower) x = lower; }
        else if (x > upper) x = upper;
        *b = x;
    }
    return 0;
}

/* x[a:b:c] is Python's own subscript in Jinja's generated code: a value
 * that is not a sequence is an error (a literal's is folded at compile
 * time into Undefined) */
static int do_slice(jctx *c, const jnode *at, const jv *obj, const jv *st, const jv *sp, const jv *sc, int literal, jv *out)
{
    int64_t a, b, step;
    if (obj->t == JT_UNDEF) return jj_undef_error(c, at, obj);
    if (!literal && !((obj->t == JT_LIST && !obj->view) || obj->t == JT_STR))
        return jj_fail(c, at, obj->t == JT_DICT ? "unhashable type: 'slice'" : "'%s' object is not subscriptable",
                       obj->t == JT_NONE ? "NoneType" : jv_typename(obj));
    if (obj->t == JT_LIST && !obj->view) {
        const jj_list *l = obj->u.l;
        if (slice_bounds(c, at, st, sp, sc, (int64_t)l->n, &a, &b, &step)) return -1;
        size_t cnt = 0;
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) cnt++;
        if (jj_cost(c, JJ_ITEMS(cnt)) || jv_newlist(c, cnt, out)) return -1;
        size_t k = 0;
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) out->u.l->v[k++] = l->v[i];
        out->tuple = obj->tuple;
        return 0;
    }
    if (obj->t == JT_STR) {
        const char *p = obj->u.s.p;
        size_t n = obj->u.s.n, ncp = jj_u8len(p, n);
        if (jj_cost(c, JJ_SCAN(n))) return -1;
        if (slice_bounds(c, at, st, sp, sc, (int64_t)ncp, &a, &b, &step)) return -1;
        if (step == 1) {
            size_t o1 = jj_u8off(p, n, (size_t)a), o2 = b <= a ? o1 : o1 + jj_u8off(p + o1, n - o1, (size_t)(b - a));
            *out = jv_strn(p + o1, o2 - o1);
            out->safe = obj->safe;
            return 0;
        }
        size_t *off = jj_alloc(&c->mem, (ncp + 1) * sizeof *off);
        if (!off) return jj_nomem(c);
        for (size_t i = 0, o = 0; i <= ncp; i++) {
            off[i] = o;
            if (o < n) { o++; while (o < n && ((unsigned char)p[o] & 0xC0) == 0x80) o++; }
        }
        jj_buf buf = {0};
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
            if (jb_put(c, &buf, p + off[i], off[i + 1] - off[i])) return -1;
        jb_take(c, &buf, out);
        out->safe = obj->safe;
        return 0;
    }
    *out = undef_attr(c, obj, "slice", 5);
    return 0;
}

/* ------------------------------------------------------------- iterating */

int jj_iter(jctx *c, const jnode *at, const jv *v, jv **items, size_t *n)
{
    switch (v->t) {
    case JT_UNDEF: *items = NULL; *n = 0; return 0;
    case JT_LIST:
        *items = v->u.l->v ? v->u.l->v + v->u.l->pos : NULL;
        *n = v->u.l->n - v->u.l->pos;
        if (v->view == LV_ITER) v->u.l->pos = v->u.l->n; /* a generator is used up */
        return 0;
    case JT_DICT: *items = v->u.d->k; *n = v->u.d->n; return 0;
    case JT_STR: {
        size_t k = jj_u8len(v->u.s.p, v->u.s.n);
        if (jj_cost(c, JJ_ITEMS(k) + JJ_SCAN(v->u.s.n))) return -1;
        jv *it = jj_alloc(&c->mem, (k ? k : 1) * sizeof *it);
        if (!it) return jj_nomem(c);
        for (size_t i = 0, o = 0; i < k; i++) {
            size_t l;
            jj_u8dec(v->u.s.p + o, v->u.s.n - o, &l);
            it[i] = jv_strn(v->u.s.p + o, l);
            o += l;
        }
        *items = it;
        *n = k;
        return 0;
    }
    case JT_LOOP: *items = v->u.lp->items; *n = v->u.lp->n; return 0;
    default: return jj_fail(c, at, "'%s' object is not iterable", jv_typename(v));
    }
}

/* ---------------------------------------------------------- assignment */

static int assign(jctx *c, jj_scope *s, const jnode *t, jv v)
{
    if (t->k == N_NAME) return scope_set(c, s, t->name.p, t->name.n, v);
    if (t->k == N_GETATTR) {
        jv ns;
        int f = scope_find(c, s, t->a->name.p, t->a->name.n, &ns);
        if (f < 0 || (!f && jj_cost(c, JJ_ITEMS(c->vars.u.d->n)))) return -1;
        if (!f && !jd_getn(c->vars.u.d, t->a->name.p, t->a->name.n, &ns)) ns.t = JT_UNDEF;
        if (ns.t != JT_NS) return jj_fail(c, t, "cannot assign attribute on non-namespace object");
        jv key = jv_strn(t->name.p, t->name.n);
        return jd_set(c, ns.u.d, key, v);
    }
    /* N_TUPLE: unpack */
    if (v.t != JT_LIST && v.t != JT_STR && v.t != JT_DICT)
        return jj_fail(c, t, "cannot unpack non-iterable %s object", jv_typename(&v));
    jv *items;
    size_t n;
    if (jj_iter(c, t, &v, &items, &n)) return -1;
    if (n > t->n) return jj_fail(c, t, "too many values to unpack (expected %zu)", t->n);
    if (n < t->n) return jj_fail(c, t, "not enough values to unpack (expected %zu, got %zu)", t->n, n);
    for (size_t i = 0; i < n; i++)
        if (assign(c, s, t->v[i], items[i])) return -1;
    return 0;
}

/* ---------------------------------------------------------- operators */

static int need_defined(jctx *c, const jnode *at, const jv *a, const jv *b)
{
    if (a->t == JT_UNDEF) return jj_undef_error(c, at, a);
    if (b && b->t == JT_UNDEF) return jj_undef_error(c, at, b);
    return 0;
}

static int unsupported(jctx *c, const jnode *at, const char *op, const jv *a, const jv *b)
{
    return jj_fail(c, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_typename(a), jv_typename(b));
}

static double fl(const jv *v) { return v->t == JT_FLOAT ? v->u.f : (double)v->u.i; }

static int overflow(jctx *c, const jnode *at)
{
    return jj_fail(c, at, "integer overflow (cis2 keeps integers in 64 bits)");
}

/* Python's float divmod: the floor quotient and the modulo with the
 * divisor's sign */
static void py_fdivmod(double x, double y, double *q, double *m)
{
    double mod = jj_fmod(x, y), div = (x - mod) / y;
    if (mod != 0) {
        if ((y < 0) != (mod < 0)) { mod += y; div -= 1.0; }
    } else {
        mod = y < 0 ? -0.0 : 0.0;
    }
    double fq;
    if (div != 0) {
        fq = jj_floor(div);
        if (div - fq > 0.5) fq += 1.0;
    } else {
        fq = signbit(x / y) ? -0.0 : 0.0;
    }
    *q = fq;
    *m = mod;
}

/* str * n, list * n */
static int repeat(jctx *c, const jnode *at, const jv *seq, int64_t k, jv *out)
{
    if (k < 0) k = 0;
    if (seq->t == JT_STR) {
        size_t n = seq->u.s.n;
        if (n && (uint64_t)k > (c->max_output + (uint64_t)n) / n) return jj_limit(c, "a string repetition exceeds max_output");
        if (jj_cost(c, JJ_COPY((uint64_t)k * n) + JJ_ITEMS(k))) return -1;
        jj_buf b = {0};
        for (int64_t i = 0; i < k; i++)
            if (jb_put(c, &b, seq->u.s.p, n)) return -1;
        return jb_take(c, &b, out);
    }
    size_t n = seq->u.l->n;
    if (!n) k = 0; /* [] * k is [] at once, whatever k */
    if (n && (uint64_t)k > (uint64_t)c->mem.limit / (n * sizeof(jv))) {
        c->mem.over = 1; /* the message names max_memory */
        return jj_nomem(c);
    }
    if (jj_cost(c, JJ_ITEMS((uint64_t)k * n)) || jv_newlist(c, (size_t)k * n, out)) return -1;
    for (int64_t i = 0; i < k; i++) memcpy(out->u.l->v + (size_t)i * n, seq->u.l->v, n * sizeof(jv));
    out->tuple = seq->tuple;
    (void)at;
    return 0;
}

static int binop(jctx *c, const jnode *e, int op, jv *a, jv *b, jv *out)
{
    static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OPB_CONCAT || (op == OPB_ADD && a->t == JT_STR && b->t == JT_STR && !a->safe && !b->safe)) {
        jv x, y;
        if (op == OPB_CONCAT && (jv_tostr(c, a, &x) || jv_tostr(c, b, &y))) return -1;
        if (op == OPB_ADD) x = *a, y = *b;
        if (!x.u.s.n || !y.u.s.n) { /* one side empty: the other as it is */
            *out = x.u.s.n ? x : y;
            out->safe = 0;
            return 0;
        }
        char *p = jj_alloc(&c->mem, x.u.s.n + y.u.s.n);
        if (!p) return jj_nomem(c);
        memcpy(p, x.u.s.p, x.u.s.n);
        memcpy(p + x.u.s.n, y.u.s.p, y.u.s.n);
        if (jj_cost(c, JJ_COPY(x.u.s.n + y.u.s.n))) return -1;
        *out = jv_strn(p, x.u.s.n + y.u.s.n);
        return 0;
    }
    if (op == OPB_MOD && a->t == JT_STR) return jl_percent_format(c, e, a, b, out);
    if (need_defined(c, e, a, b)) return -1;
    if (jv_isnum(a) && jv_isnum(b)) {
        int fp = a->t == JT_FLOAT || b->t == JT_FLOAT;
        int64_t x = a->u.i, y = b->u.i, r;
        switch (op) {
        case OPB_ADD:
            if (fp) { *out = jv_float(fl(a) + fl(b)); return 0; }
            if (__builtin_add_overflow(x, y, &r)) return overflow(c, e);
            *out = jv_int(r);
            return 0;
        case OPB_SUB:
            if (fp) { *out = jv_float(fl(a) - fl(b)); return 0; }
            if (__builtin_sub_overflow(x, y, &r)) return overflow(c, e);
            *out = jv_int(r);
            return 0;
        case OPB_MUL:
            if (fp) { *out = jv_float(fl(a) * fl(b)); return 0; }
            if (__builtin_mul_overflow(x, y, &r)) return overflow(c, e);
            *out = jv_int(r);
            return 0;
        case OPB_DIV:
            if (fl(b) == 0) return jj_fail(c, e, fp ? "float division by zero" : "division by zero");
            *out = jv_float(fl(a) / fl(b));
            return 0;
        case OPB_FLOORDIV:
        case OPB_MOD:
            if (fp) {
                double q, m;
                if (fl(b) == 0) return jj_fail(c, e, op == OPB_MOD ? "float modulo" : "float floor division by zero");
                py_fdivmod(fl(a), fl(b), &q, &m);
                *out = jv_float(op == OPB_MOD ? m : q);
                return 0;
            }
            if (y == 0) return jj_fail(c, e, op == OPB_MOD ? "integer division or modulo by zero" : "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return overflow(c, e);
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) { q -= 1; m += y; }
                *out = jv_int(op == OPB_MOD ? m : q);
            }
            return 0;
        case OPB_POW:
            if (!fp && y >= 0) {
                int64_t acc = 1, base = x;
                for (int64_t k = y; k > 0; k >>= 1) {
                    if ((k & 1) && __builtin_mul_overflow(acc, base, &acc)) return overflow(c, e);
                    if (k > 1 && __builtin_mul_overflow(base, base, &base)) return overflow(c, e);
                }
                *out = jv_int(acc);
                return 0;
            }
            if (!fp) { /* int ** negative int: 1 / x**-y, when that power is exact */
                if (x == 0) return jj_fail(c, e, "0.0 cannot be raised to a negative power");
                int64_t acc = 1;
                for (int64_t k = 0; k < -y; k++)
                    if (__builtin_mul_overflow(acc, x, &acc) || acc > (INT64_C(1) << 53) || acc < -(INT64_C(1) << 53))
                        return jj_fail(c, e, "this power is not supported (cis2 computes exact powers only)");
                *out = jv_float(1.0 / (double)acc);
                return 0;
            }
            return jj_fail(c, e, "powers of floats are not supported (cis2 computes exact powers only)");
        }
    }
    if (op == OPB_ADD && a->t == JT_STR && b->t == JT_STR) {
        jv x = *a, y = *b;
        int safe = a->safe || b->safe;
        if (safe && !x.safe && jj_html_escape(c, &x, &x)) return -1;
        if (safe && !y.safe && jj_html_escape(c, &y, &y)) return -1;
        jj_buf buf = {0};
        if (jb_put(c, &buf, x.u.s.p, x.u.s.n) || jb_put(c, &buf, y.u.s.p, y.u.s.n)) return -1;
        jb_take(c, &buf, out);
        out->safe = (uint8_t)safe;
        return 0;
    }
    if (op == OPB_ADD && a->t == JT_LIST && b->t == JT_LIST && a->tuple == b->tuple) {
        size_t n = a->u.l->n, m = b->u.l->n;
        if (jj_cost(c, JJ_ITEMS(n + m)) || jv_newlist(c, n + m, out)) return -1;
        if (n) memcpy(out->u.l->v, a->u.l->v, n * sizeof(jv));
        if (m) memcpy(out->u.l->v + n, b->u.l->v, m * sizeof(jv));
        out->tuple = a->tuple;
        return 0;
    }
    if (op == OPB_ADD && a->t == JT_STR)
        return jj_fail(c, e, "can only concatenate str (not \"%s\") to str", jv_typename(b));
    if (op == OPB_ADD && a->t == JT_LIST)
        return jj_fail(c, e, "can only concatenate %s (not \"%s\") to %s", jv_typename(a), jv_typename(b), jv_typename(a));
    if (op == OPB_MUL) {
        if ((a->t == JT_STR || a->t == JT_LIST) && (b->t == JT_INT || b->t == JT_BOOL)) return repeat(c, e, a, b->u.i, out);
        if ((b->t == JT_STR || b->t == JT_LIST) && (a->t == JT_INT || a->t == JT_BOOL)) return repeat(c, e, b, a->u.i, out);
    }
    return unsupported(c, e, sym[op], a, b);
}

/* item in container */
static int contains(jctx *c, const jnode *at, const jv *item, const jv *cont, int *res)
{
    switch (cont->t) {
    case JT_UNDEF: *res = 0; return 0;
    case JT_STR:
        if (item->t != JT_STR)
            return jj_fail(c, at, "'in <string>' requires string as left operand, not %s", jv_typename(item));
        if (jj_cost(c, JJ_SCAN(cont->u.s.n) * (1 + item->u.s.n / 64))) return -1;
        *res = item->u.s.n == 0 || (item->u.s.n <= cont->u.s.n &&
                                    jj_memmem(cont->u.s.p, cont->u.s.n, item->u.s.p, item->u.s.n) != NULL);
        return 0;
    case JT_LIST:
        if (jj_cost(c, JJ_ITEMS(cont->u.l->n))) return -1;
        for (size_t i = 0; i < cont->u.l->n; i++) {
            int e = jv_equal(c, item, &cont->u.l->v[i], 0);
            if (e < 0) return -1;
            if (e) { *res = 1; return 0; }
        }
        *res = 0;
        return 0;
    case JT_DICT: {
        jv tmp;
        if ((item->t == JT_LIST && !item->tuple) || item->t == JT_DICT || item->t == JT_NS)
            return jj_fail(c, at, "unhashable type: '%s'", jv_typename(item));
        int f = jd_get(c, cont->u.d, *item, &tmp);
        if (f < 0) return -1;
        *res = f;
        return 0;
    }
    default: return jj_fail(c, at, "argument of type '%s' is not iterable", jv_typename(cont));
    }
}

static int compare(jctx *c, const jnode *at, int op, const jv *a, const jv *b, int *res)
{
    static const char *const sym[] = {"==", "!=", "<", "<=", ">", ">="};
    if (op == OPC_EQ || op == OPC_NE) {
        int e = jv_equal(c, a, b, 0);
        if (e < 0) return -1;
        *res = op == OPC_EQ ? e : !e;
        return 0;
    }
    if (op == OPC_IN || op == OPC_NOTIN) {
        if (contains(c, at, a, b, res)) return -1;
        if (op == OPC_NOTIN) *res = !*res;
        return 0;
    }
    if (need_defined(c, at, a, b)) return -1;
    int r, e = jv_compare(c, a, b, &r);
    if (e < 0) return -1;
    if (e)
        return jj_fail(c, at, "'%s' not supported between instances of '%s' and '%s'", sym[op - OPC_EQ], jv_typename(a),
                       jv_typename(b));
    switch (op) {
    case OPC_LT: *res = r < 0; break;
    case OPC_LE: *res = r <= 0; break;
    case OPC_GT: *res = r > 0; break;
    default: *res = r >= 0; break;
    }
    return 0;
}

/* --------------------------------------------------------------- calls */

#define SMALL_ARGS 6
#define SMALL_KW 4

/* the arguments of a call or filter: positional, name=, *list, **dict.
 * Small calls use the caller's buffers (abuf, kbuf), larger ones the arena. */
static int grow_args(jctx *c, jv **A, size_t *cap, size_t need, size_t have)
{
    if (need <= *cap) return 0;
    size_t nc = need * 2;
    jv *n = jj_alloc(&c->mem, nc * sizeof *n);
    if (!n) return jj_nomem(c);
    if (have) memcpy(n, *A, have * sizeof *n);
    *A = n;
    *cap = nc;
    return 0;
}
static int grow_kw(jctx *c, jj_kw **K, size_t *cap, size_t need, size_t have)
{
    if (need <= *cap) return 0;
    size_t nc = need * 2;
    jj_kw *n = jj_alloc(&c->mem, nc * sizeof *n);
    if (!n) return jj_nomem(c);
    if (have) memcpy(n, *K, have * sizeof *n);
    *K = n;
    *cap = nc;
    return 0;
}

static int eval_args(jctx *c, jj_scope *s, const jnode *e, jv *abuf, jj_kw *kbuf, jv **args, size_t *na, jj_kw **kw,
                     size_t *nk)
{
    jv *A = abuf;
    jj_kw *K = kbuf;
    size_t acap = SMALL_ARGS, kcap = SMALL_KW;
    *na = *nk = 0;
    for (size_t i = 0; i < e->n; i++) {
        const jnode *x = e->v[i];
        int star = x->k == N_STARARG || x->k == N_STARKW;
        jv v;
        if (ev(c, s, (star || x->k == N_KWARG) ? x->a : x, &v)) return -1;
        if (x->k == N_STARKW) {
            if (v.t != JT_DICT) return jj_fail(c, x, "argument after ** must be a mapping, not %s", jv_typename(&v));
            if (jj_cost(c, JJ_ITEMS(v.u.d->n)) || grow_kw(c, &K, &kcap, *nk + v.u.d->n, *nk)) return -1;
            for (size_t j = 0; j < v.u.d->n; j++) {
                if (v.u.d->k[j].t != JT_STR) return jj_fail(c, x, "keywords must be strings");
                K[*nk].name = v.u.d->k[j].u.s;
                K[(*nk)++].v = v.u.d->v[j];
            }
        } else if (x->k == N_STARARG) {
            jv *items;
            size_t n;
            if (jj_iter(c, x, &v, &items, &n) || jj_cost(c, JJ_ITEMS(n)) || grow_args(c, &A, &acap, *na + n, *na)) return -1;
            for (size_t j = 0; j < n; j++) A[(*na)++] = items[j];
        } else if (x->k == N_KWARG) {
            if (grow_kw(c, &K, &kcap, *nk + 1, *nk)) return -1;
            K[*nk].name = x->name;
            K[(*nk)++].v = v;
        } else {
            if (grow_args(c, &A, &acap, *na + 1, *na)) return -1;
            A[(*na)++] = v;
        }
    }
    *args = A;
    *kw = K;
    return 0;
}

/* Runs body in scope s with the output captured: the text as a string. */
static int capture(jctx *c, jj_scope *s, const jnode *body, jv *out)
{
    jj_buf buf = {0}, *saved = c->out;
    c->out = &buf;
    int r = ex(c, s, body);
    c->out = saved;
    if (r) return -1;
    return jb_take(c, &buf, out);
}

static int call_macro(jctx *c, const jnode *at, jj_macro *m, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    const jnode *def = m->def;
    jj_scope *s = scope_new(c, m->closure);
    if (!s) return -1;
    const char *mname = def->k == N_MACRO ? def->name.p : "caller";
    int mlen = def->k == N_MACRO ? (int)def->name.n : 6;
    unsigned refs = def->op;
    /* each keyword is looked for among the parameters, twice at most */
    if (jj_cost(c, JJ_ITEMS((uint64_t)nk * def->n * 2) + JJ_ITEMS(na))) return -1;
    for (size_t j = 0; j < nk; j++) {
        size_t i;
        for (i = 0; i < def->n; i++)
            if (def->v[i]->name.n == kw[j].name.n && memcmp(def->v[i]->name.p, kw[j].name.p, kw[j].name.n) == 0) break;
        if (i < def->n && i < na)
            return jj_fail(c, at, "macro '%.*s' got multiple values for argument '%.*s'", mlen, mname, (int)kw[j].name.n,
                           kw[j].name.p);
        if (i == def->n && !(refs & 2))
            return jj_fail(c, at, "macro '%.*s' takes no keyword argument '%.*s'", mlen, mname, (int)kw[j].name.n,
                           kw[j].name.p);
    }
    if (na > def->n && !(refs & 1))
        return jj_fail(c, at, "macro '%.*s' takes not more than %zu argument(s)", mlen, mname, def->n);
    for (size_t i = 0; i < def->n; i++) {
        const jnode *p = def->v[i];
        jv v;
        int have = 0;
        if (i < na) { v = args[i]; have = 1; }
        for (size_t j = 0; !have && j < nk; j++)
            if (p->name.n == kw[j].name.n && memcmp(p->name.p, kw[j].name.p, p->name.n) == 0) { v = kw[j].v; have = 1; }
        if (!have) {
            if (p->a) {
                if (ev(c, s, p->a, &v)) return -1;
            } else {
                char *h = jj_alloc(&c->mem, p->name.n + 40);
                if (!h) return jj_nomem(c);
                snprintf(h, p->name.n + 40, "parameter '%.*s' was not provided", (int)p->name.n, p->name.p);
                v = jv_undef(h);
            }
        }
        if (scope_set(c, s, p->name.p, p->name.n, v)) return -1;
    }
    if (refs & 1) {
        jv va;
        size_t extra = na > def->n ? na - def->n : 0;
        if (jv_newlist(c, extra, &va)) return -1;
        for (size_t i = 0; i < extra; i++) va.u.l->v[i] = args[def->n + i];
        va.tuple = 1;
        if (scope_set(c, s, "varargs", 7, va)) return -1;
    }
    if (refs & 2) {
        jv kd;
        if (jv_newdict(c, &kd)) return -1;
        for (size_t j = 0; j < nk; j++) {
            size_t i;
            for (i = 0; i < def->n; i++)
                if (def->v[i]->name.n == kw[j].name.n && memcmp(def->v[i]->name.p, kw[j].name.p, kw[j].name.n) == 0) break;
            if (i == def->n && jd_set(c, kd.u.d, jv_strn(kw[j].name.p, kw[j].name.n), kw[j].v)) return -1;
        }
        if (scope_set(c, s, "kwargs", 6, kd)) return -1;
    }
    if (m->caller.t == JT_MACRO && scope_set(c, s, "caller", 6, m->caller)) return -1;
    return capture(c, s, def->b, out);
}

int jj_call_value(jctx *c, const jnode *at, jv *fn, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out)
{
    switch (fn->t) {
    case JT_MACRO: return call_macro(c, at, fn->u.m, args, na, kw, nk, out);
    case JT_FUNC: return jl_call_func(c, at, (int)fn->u.i, args, na, kw, nk, out);
    case JT_METHOD: return jl_call_method(c, at, fn->u.bm, args, na, kw, nk, out);
    case JT_CYCLER:
        if (fn->u.cy->joiner) return jl_call_cycler(c, at, fn, "__call__", args, na, out);
        break;
    case JT_UNDEF: return jj_undef_error(c, at, fn);
    default: break;
    }
    return jj_fail(c, at, "'%s' object is not callable", jv_typename(fn));
}

__attribute__((noinline)) static int eval_call(jctx *c, jj_scope *s, const jnode *e, jv *caller, jv *out)
{
    jv fn, abuf[SMALL_ARGS], *args;
    jj_kw kbuf[SMALL_KW], *kw;
    size_t na, nk;
    if (ev(c, s, e->a, &fn) || eval_args(c, s, e, abuf, kbuf, &args, &na, &kw, &nk)) return -1;
    if (nk > 1 && jj_cost(c, JJ_ITEMS((uint64_t)nk * (nk - 1) / 2))) return -1; /* the pairs compared below */
    for (size_t i = 0; i < nk; i++)
        for (size_t j = i + 1; j < nk; j++)
            if (kw[i].name.n == kw[j].name.n && memcmp(kw[i].name.p, kw[j].name.p, kw[i].name.n) == 0)
                return jj_fail(c, e, "keyword argument repeated: %.*s", (int)kw[i].name.n, kw[i].name.p);
    if (caller) {
        if (fn.t != JT_MACRO) return jj_fail(c, e, "a call block calls a macro, not a %s", jv_typename(&fn));
        jj_macro m = *fn.u.m;
        m.caller = *caller;
        return call_macro(c, e, &m, args, na, kw, nk, out);
    }
    return jj_call_value(c, e, &fn, args, na, kw, nk, out);
}

/* a filter's or test's repeated keyword: the last one counts (Jinja passes
 * them as a dict) */
static int last_keyword_wins(jctx *c, jj_kw *kw, size_t *nk)
{
    if (*nk > 1 && jj_cost(c, JJ_ITEMS((uint64_t)*nk * (*nk - 1) / 2))) return -1;
    size_t o = 0;
    for (size_t i = 0; i < *nk; i++) {
        size_t j;
        for (j = i + 1; j < *nk; j++)
            if (kw[i].name.n == kw[j].name.n && memcmp(kw[i].name.p, kw[j].name.p, kw[i].name.n) == 0) break;
        if (j == *nk) kw[o++] = kw[i];
    }
    *nk = o;
    return 0;
}

__attribute__((noinline)) static int eval_filter(jctx *c, jj_scope *s, const jnode *e, const jv *body, jv *out)
{
    jv val, abuf[SMALL_ARGS], *args;
    jj_kw kbuf[SMALL_KW], *kw;
    size_t na, nk;
    if (e->a) {
        if (e->a->k == N_FILTER && !e->a->a && body) {
            if (eval_filter(c, s, e->a, body, &val)) return -1;
        } else if (ev(c, s, e->a, &val)) {
            return -1;
        }
    } else {
        val = *body;
    }
    if (eval_args(c, s, e, abuf, kbuf, &args, &na, &kw, &nk) || last_keyword_wins(c, kw, &nk)) return -1;
    return jl_filter(c, e, e->op, &val, args, na, kw, nk, out);
}

/* a filter chain over a captured body ({% filter %}, {% set x | f %}) */
static int apply_chain(jctx *c, jj_scope *s, const jnode *f, jv *body, jv *out)
{
    if (f->a) {
        jv inner;
        if (apply_chain(c, s, f->a, body, &inner)) return -1;
        jv abuf[SMALL_ARGS], *args;
        jj_kw kbuf[SMALL_KW], *kw;
        size_t na, nk;
        if (eval_args(c, s, f, abuf, kbuf, &args, &na, &kw, &nk) || last_keyword_wins(c, kw, &nk)) return -1;
        return jl_filter(c, f, f->op, &inner, args, na, kw, nk, out);
    }
    return eval_filter(c, s, f, body, out);
}

__attribute__((noinline)) static int eval_test(jctx *c, jj_scope *s, const jnode *e, jv *out)
{
    jv val, abuf[SMALL_ARGS], *args;
    jj_kw kbuf[SMALL_KW], *kw;
    size_t na, nk;
    int r;
    if (ev(c, s, e->a, &val) || eval_args(c, s, e, abuf, kbuf, &args, &na, &kw, &nk) || last_keyword_wins(c, kw, &nk))
        return -1;
    if (jl_test(c, e, e->op, &val, args, na, kw, nk, &r)) return -1;
    *out = jv_bool(r);
    return 0;
}

/* ---------------------------------------------------------- expressions */

/* kept out of ev and ex, so their frames stay small (the C stack a
 * render needs is about max_depth times theirs) */
__attribute__((noinline)) static int too_deep(jctx *c, const jnode *e)
{
    char m[160];
    c->at = e;
    c->depth--;
    snprintf(m, sizeof m, "nesting or recursion deeper than %u (cis2_jinja_limits.max_depth)", c->max_depth);
    return jj_limit(c, m);
}

static int ev(jctx *c, jj_scope *s, const jnode *e, jv *out)
{
    if (++c->depth > c->max_depth) return too_deep(c, e);
    c->at = e;
    int r = jj_cost(c, 1);
    jv a, b;
    if (r) goto done;
    switch (e->k) {
    case N_LIT: *out = e->lit; break;
    case N_NAME: r = lookup(c, s, e, out); break;
    case N_LIST:
    case N_TUPLE:
        if ((r = jv_newlist(c, e->n, out))) break;
        out->tuple = e->k == N_TUPLE;
        for (size_t i = 0; i < e->n && !r; i++) r = ev(c, s, e->v[i], &out->u.l->v[i]);
        break;
    case N_DICT:
        if ((r = jv_newdict(c, out))) break;
        for (size_t i = 0; i + 1 < e->n && !r; i += 2)
            if (!(r = ev(c, s, e->v[i], &a)) && !(r = ev(c, s, e->v[i + 1], &b))) {
                if (a.t == JT_LIST && !a.tuple) r = jj_fail(c, e->v[i], "unhashable type: 'list'");
                else if (a.t == JT_DICT) r = jj_fail(c, e->v[i], "unhashable type: 'dict'");
                else r = jd_set(c, out->u.d, a, b);
            }
        break;
    case N_GETATTR:
        if (!(r = ev(c, s, e->a, &a))) r = jj_getattr(c, e, &a, e->name.p, e->name.n, out);
        break;
    case N_GETITEM:
        if (!(r = ev(c, s, e->a, &a)) && !(r = ev(c, s, e->b, &b))) r = jj_getitem(c, e, &a, &b, out);
        break;
    case N_SLICE: {
        jv st = jv_none(), sp = jv_none(), sc = jv_none();
        if (!(r = ev(c, s, e->a, &a)) && !(e->b && (r = ev(c, s, e->b, &st))) && !(e->c && (r = ev(c, s, e->c, &sp))) &&
            !(e->d && (r = ev(c, s, e->d, &sc))))
            r = do_slice(c, e, &a, &st, &sp, &sc, e->a->k == N_LIT, out);
        break;
    }
    case N_CALL: r = eval_call(c, s, e, NULL, out); break;
    case N_FILTER: r = eval_filter(c, s, e, NULL, out); break;
    case N_TEST: r = eval_test(c, s, e, out); break;
    case N_BIN:
        if (!(r = ev(c, s, e->a, &a)) && !(r = ev(c, s, e->b, &b))) r = binop(c, e, e->op, &a, &b, out);
        break;
    case N_NEG:
    case N_POS:
        if ((r = ev(c, s, e->a, &a))) break;
        if (a.t == JT_UNDEF) { r = jj_undef_error(c, e, &a); break; }
        if (!jv_isnum(&a)) {
            r = jj_fail(c, e, "bad operand type for unary %c: '%s'", e->k == N_NEG ? '-' : '+', jv_typename(&a));
            break;
        }
        if (e->k == N_POS) *out = a.t == JT_BOOL ? jv_int(a.u.i) : a;
        else if (a.t == JT_FLOAT) *out = jv_float(-a.u.f);
        else if (a.u.i == INT64_MIN) r = overflow(c, e);
        else *out = jv_int(-a.u.i);
        break;
    case N_NOT:
        if (!(r = ev(c, s, e->a, &a))) *out = jv_bool(!jv_truth(&a));
        break;
    case N_AND:
    case N_OR:
        if ((r = ev(c, s, e->a, &a))) break;
        if (jv_truth(&a) == (e->k == N_OR)) *out = a;
        else r = ev(c, s, e->b, out);
        break;
    case N_COND:
        if ((r = ev(c, s, e->a, &a))) break;
        if (jv_truth(&a)) r = ev(c, s, e->b, out);
        else if (e->c) r = ev(c, s, e->c, out);
        else *out = jv_undef("the inline if-expression evaluated to false and no else section was defined");
        break;
    case N_COMPARE: {
        if ((r = ev(c, s, e->a, &a))) break;
        int res = 1;
        for (size_t i = 0; i < e->n && res && !r; i++) {
            if ((r = ev(c, s, e->v[i]->b, &b))) break;
            r = compare(c, e->v[i], e->v[i]->op, &a, &b, &res);
            a = b;
        }
        if (!r) *out = jv_bool(res);
        break;
    }
    default: r = jj_fail(c, e, "internal: not an expression (%d)", e->k); break;
    }
done:
    c->depth--;
    return r ? -1 : 0;
}

/* ----------------------------------------------------------- statements */

static int emit_value(jctx *c, const jv *v)
{
    if (v->t == JT_STR) return jj_emit(c, v->u.s.p, v->u.s.n);
    jj_buf b = {0};
    if (jv_str(c, &b, v)) return -1;
    return jj_emit(c, b.p, b.n);
}

__attribute__((noinline)) static int exec_for(jctx *c, jj_scope *s, const jnode *e)
{
    jv seq, *items;
    size_t n;
    if (ev(c, s, e->b, &seq)) return -1;
    c->at = e->b;
    if (jj_iter(c, e->b, &seq, &items, &n)) return -1;
    jj_scope *it = scope_new(c, s);
    if (!it) return -1;
    if (e->c) { /* {% for x in xs if cond %}: the loop sees the kept items */
        jv *kept = jj_alloc(&c->mem, (n ? n : 1) * sizeof *kept);
        if (!kept) return jj_nomem(c);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            jv t;
            it->n = 0;
            if (jj_cost(c, 1) || assign(c, it, e->a, items[i]) || ev(c, it, e->c, &t)) return -1;
            if (jv_truth(&t)) kept[k++] = items[i];
        }
        items = kept;
        n = k;
    }
    if (!n) {
        if (!e->d) return 0;
        jj_scope *es = scope_new(c, s);
        return es ? ex(c, es, e->d) : -1;
    }
    jj_loop *lp = jj_alloc(&c->mem, sizeof *lp);
    if (!lp) return jj_nomem(c);
    lp->items = items;
    lp->n = n;
    jv lv = {0};
    lv.t = JT_LOOP;
    lv.u.lp = lp;
    for (size_t i = 0; i < n; i++) {
        lp->i = i;
        it->n = 0; /* a fresh scope each turn (its arrays reused: a loop's
                    * memory does not grow with its turns) */
        c->at = e;
        if (jj_cost(c, 1) || assign(c, it, e->a, items[i]) || scope_set(c, it, "loop", 4, lv)) return -1;
        if (ex(c, it, e->v[0])) return -1;
        if (c->flow == JJ_FLOW_BREAK) { c->flow = JJ_FLOW_NONE; break; }
        c->flow = JJ_FLOW_NONE;
    }
    return 0;
}

static int ex(jctx *c, jj_scope *s, const jnode *e)
{
    if (++c->depth > c->max_depth) return too_deep(c, e);
    c->at = e;
    int r = jj_cost(c, 1);
    jv v;
    if (r) goto done;
    switch (e->k) {
    case N_BODY:
        for (size_t i = 0; i < e->n && !r && c->flow == JJ_FLOW_NONE; i++) r = ex(c, s, e->v[i]);
        break;
    case N_DATA: r = jj_emit(c, e->lit.u.s.p, e->lit.u.s.n); break;
    case N_OUTPUT:
        if (!(r = ev(c, s, e->a, &v))) r = emit_value(c, &v);
        break;
    case N_IF:
        if ((r = ev(c, s, e->a, &v))) break;
        if (jv_truth(&v)) r = ex(c, s, e->b);
        else if (e->c) r = ex(c, s, e->c);
        break;
    case N_FOR: r = exec_for(c, s, e); break;
    case N_SET:
        if (!(r = ev(c, s, e->b, &v))) r = assign(c, s, e->a, v);
        break;
    case N_SETBLOCK: {
        jj_scope *in = scope_new(c, s);
        if (!in || (r = capture(c, in, e->b, &v))) { r = -1; break; }
        if (e->d) {
            jv f;
            if ((r = apply_chain(c, s, e->d, &v, &f))) break;
            v = f;
        }
        r = assign(c, s, e->a, v);
        break;
    }
    case N_MACRO: {
        jj_macro *m = jj_alloc(&c->mem, sizeof *m);
        if (!m) { r = jj_nomem(c); break; }
        m->def = e;
        m->closure = s;
        m->caller.t = JT_MISSING;
        memset(&v, 0, sizeof v);
        v.t = JT_MACRO;
        v.u.m = m;
        r = scope_set(c, s, e->name.p, e->name.n, v);
        break;
    }
    case N_CALLBLOCK: {
        jj_macro *m = jj_alloc(&c->mem, sizeof *m);
        if (!m) { r = jj_nomem(c); break; }
        m->def = e;
        m->closure = s;
        m->caller.t = JT_MISSING;
        jv cv = {0};
        cv.t = JT_MACRO;
        cv.u.m = m;
        if (!(r = eval_call(c, s, e->a, &cv, &v))) r = emit_value(c, &v);
        break;
    }
    case N_FILTERBLOCK: {
        jj_scope *in = scope_new(c, s);
        jv f;
        if (!in || capture(c, in, e->b, &v) || apply_chain(c, s, e->a, &v, &f)) { r = -1; break; }
        r = emit_value(c, &f);
        break;
    }
    case N_WITH: {
        jj_scope *in = scope_new(c, s);
        if (!in) { r = -1; break; }
        jv *vals = jj_alloc(&c->mem, (e->n ? e->n : 1) * sizeof *vals);
        if (!vals) { r = jj_nomem(c); break; }
        for (size_t i = 0; i < e->n && !r; i++) r = ev(c, s, e->v[i]->b, &vals[i]);
        for (size_t i = 0; i < e->n && !r; i++) r = assign(c, in, e->v[i]->a, vals[i]);
        if (!r) r = ex(c, in, e->b);
        break;
    }
    case N_SCOPE: {
        jj_scope *in = scope_new(c, s);
        r = in ? ex(c, in, e->b) : -1;
        break;
    }
    case N_BREAK: c->flow = JJ_FLOW_BREAK; break;
    case N_CONTINUE: c->flow = JJ_FLOW_CONTINUE; break;
    default: r = jj_fail(c, e, "internal: not a statement (%d)", e->k); break;
    }
done:
    c->depth--;
    return r ? -1 : 0;
}

/* ------------------------------------------------------------------ API */

void cis2_jinja_limits_resolve(cis2_jinja_limits *out, const cis2_jinja_limits *in)
{
    out->max_source = in && in->max_source ? in->max_source : (size_t)1 << 20;
    out->max_output = in && in->max_output ? in->max_output : (size_t)16 << 20;
    out->max_memory = in && in->max_memory ? in->max_memory : (size_t)256 << 20;
    out->max_steps = in && in->max_steps ? in->max_steps : 20000000u;
    out->max_depth = in && in->max_depth ? in->max_depth : 400u;
}

int cis2_jinja_parse(const char *src, size_t len, const cis2_jinja_limits *lim, cis2_jinja **out, cis2_error *err)
{
    cis2_jinja_limits L;
    cis2_jinja_limits_resolve(&L, lim);
    *out = NULL;
    if (len > L.max_source)
        return cis2_fail(err, CIS2_E_NOMEM, "template: %zu bytes, more than %zu (cis2_jinja_limits.max_source)", len,
                         L.max_source);
    cis2_jinja *t = calloc(1, sizeof *t);
    if (!t) return cis2_fail(err, CIS2_E_NOMEM, "template: out of memory");
    t->mem.limit = L.max_memory;
    int rc = jj_parse(t, src ? src : "", len, err);
    if (rc) {
        if (t->mem.over && err->code == CIS2_E_NOMEM)
            snprintf(err->msg, sizeof err->msg, "template: parsing needs more than %zu bytes (cis2_jinja_limits.max_memory)",
                     L.max_memory);
        cis2_jinja_free(t);
        return rc;
    }
    *out = t;
    return CIS2_OK;
}

void cis2_jinja_free(cis2_jinja *t)
{
    if (!t) return;
    jj_arena_free(&t->mem);
    free(t);
}

int cis2_jinja_render(const cis2_jinja *t, const json_t *vars, const struct tm *now, const cis2_jinja_limits *lim,
                      char **out, size_t *out_len, cis2_error *err)
{
    cis2_jinja_limits L;
    cis2_jinja_limits_resolve(&L, lim);
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !json_is_object(vars)) return cis2_fail(err, CIS2_E_INTERNAL, "template: the variables are not a JSON object");
    jctx c;
    memset(&c, 0, sizeof c);
    c.err = err;
    c.mem.limit = L.max_memory;
    c.max_steps = L.max_steps;
    c.max_depth = L.max_depth;
    c.max_output = L.max_output;
    if (now) {
        c.now = *now;
    } else {
        time_t tt = time(NULL);
        localtime_r(&tt, &c.now);
    }
    jj_buf top = {0};
    top.heap = 1;
    c.out = c.top = &top;
    int rc = CIS2_OK;
    c.root = scope_new(&c, NULL);
    if (!c.root || jv_from_json(&c, vars, 0, &c.vars) || ex(&c, c.root, t->root) || jb_put(&c, &top, "", 1)) {
        rc = err->code ? err->code : CIS2_E_INTERNAL;
        free(top.p);
    } else {
        *out = top.p; /* NUL-terminated by the last put */
        if (out_len) *out_len = top.n - 1;
    }
    jj_arena_free(&c.mem);
    return rc;
}

int cis2_jinja_render_string(const char *src, size_t len, const json_t *vars, const struct tm *now,
                             const cis2_jinja_limits *lim, char **out, size_t *out_len, cis2_error *err)
{
    cis2_jinja *t;
    *out = NULL;
    int rc = cis2_jinja_parse(src, len, lim, &t, err);
    if (rc) return rc;
    rc = cis2_jinja_render(t, vars, now, lim, out, out_len, err);
    cis2_jinja_free(t);
    return rc;
}

/*
 * jinja_impl.h - what the renderer's files share (docs/chat.md "The
 * files"): the arena, the values, the syntax tree and the render
 * context.  Only src/jinja_*.c include it.
 *
 *   jinja_parse.c  the lexer (whitespace control, trim_blocks,
 *                  lstrip_blocks) and the parser: source -> tree
 *   jinja_eval.c   scopes, statements, expressions, calls; the API
 *   jinja_value.c  values: arena, strings, lists, dicts, the variables'
 *                  copy, Python's str()/repr(), ==, <, tojson
 *   jinja_filters.c  the filters and tests
 *   jinja_methods.c  str/list/dict methods, the loop object, globals, %
 *   jinja_str.c    what those two share: argument binding, Python's
 *                  string operations on UTF-8, int()/float() syntax
 *
 * Every value of a render lives in the render's arena (freed at once at
 * the end), strings are byte slices (never NUL-terminated; the JSON
 * variables' strings are used in place), lists and dicts are never changed
 * once built (the sandbox is immutable) except namespaces.
 */
#ifndef CIS2_JINJA_IMPL_H
#define CIS2_JINJA_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jinja.h"

#define JJ_MAX_NEST 256      /* syntax tree depth (parse) */
#define JJ_MAX_PARSE_NEST 200 /* the parser's own recursion: nested expressions and blocks */
#define JJ_MAX_VALUE_NEST 200 /* nesting of values repr/tojson/== walk */
#define JJ_MAX_RANGE 100000  /* range()'s items, as Jinja's sandbox */

/* ---- arena: chunks, everything freed at once ---- */
typedef struct jj_chunk jj_chunk;
typedef struct jj_arena {
    jj_chunk *head;
    size_t total, limit; /* bytes taken from malloc, and their bound (0: none) */
    int over;            /* an allocation was refused by the limit */
} jj_arena;
void *jj_alloc(jj_arena *a, size_t n); /* zeroed; NULL over the limit or out of memory */
void jj_arena_free(jj_arena *a);

/* ---- values ---- */
enum {
    JT_UNDEF,   /* Jinja's Undefined: u.s is the hint for errors */
    JT_NONE,
    JT_BOOL,    /* u.i 0/1 */
    JT_INT,     /* u.i */
    JT_FLOAT,   /* u.f */
    JT_STR,     /* u.s; safe = Markup (the safe/escape filters) */
    JT_LIST,    /* u.l; tuple = a tuple; view = LV_* */
    JT_DICT,    /* u.d */
    JT_NS,      /* namespace(): u.d, assignable with set ns.x */
    JT_MACRO,   /* u.m */
    JT_FUNC,    /* a global function: u.i (JF_*) */
    JT_METHOD,  /* a bound method: u.bm */
    JT_LOOP,    /* the loop object: u.lp */
    JT_CYCLER,  /* cycler()/joiner(): u.cy */
    JT_MISSING  /* internal: an argument not passed */
};

typedef struct jj_str { const char *p; size_t n; } jj_str;
typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_macro jj_macro;
typedef struct jj_bound jj_bound;
typedef struct jj_loop jj_loop;
typedef struct jj_cycler jj_cycler;

/* what kind of sequence a JT_LIST is beyond list/tuple: Jinja's filters
 * map, select, selectattr, unique, items, reverse ... return generators
 * (always true, no length, consumed by iterating: jj_list.pos), and
 * dict.keys()/values()/items() return views (printed as dict_keys([...])) */
enum { LV_NONE, LV_ITER, LV_KEYS, LV_VALUES, LV_ITEMS };

typedef struct jv {
    uint8_t t, safe, tuple, view;
    union {
        int64_t i;
        double f;
        jj_str s;
        jj_list *l;
        jj_dict *d;
        jj_macro *m;
        jj_bound *bm;
        jj_loop *lp;
        jj_cycler *cy;
    } u;
} jv;

struct jj_list { size_t n, pos; jv *v; };
struct jj_dict { size_t n, cap; jv *k, *v; };
typedef struct jj_kw { jj_str name; jv v; } jj_kw;

/* ---- syntax tree ---- */
enum {
    /* expressions */
    N_LIT, N_NAME, N_LIST, N_TUPLE, N_DICT, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_KWARG, N_STARARG, N_STARKW,
    N_FILTER, N_TEST, N_BIN, N_NEG, N_POS, N_NOT, N_AND, N_OR, N_COND, N_COMPARE,
    /* statements */
    N_BODY, N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_PARAM, N_CALLBLOCK, N_FILTERBLOCK,
    N_WITH, N_BREAK, N_CONTINUE, N_SCOPE
};
/* N_BIN / N_COMPARE operators */
enum { OPB_ADD, OPB_SUB, OPB_MUL, OPB_DIV, OPB_FLOORDIV, OPB_MOD, OPB_POW, OPB_CONCAT,
       OPC_EQ, OPC_NE, OPC_LT, OPC_LE, OPC_GT, OPC_GE, OPC_IN, OPC_NOTIN };

typedef struct jnode jnode;
/* Layout by kind (unused members are NULL/0):
 *   N_LIT lit | N_NAME name | N_LIST/N_TUPLE v[n] items | N_DICT v[n] key,value,...
 *   N_GETATTR a.name | N_GETITEM a[b] | N_SLICE a[b:c:d] (each may be NULL)
 *   N_CALL a(v[n]) with N_KWARG (name=a), N_STARARG (*a), N_STARKW (**a) among v
 *   N_FILTER a|name(v[n]) (a NULL in a filter block: the body), op = filter id
 *   N_TEST a is name(v[n]), op = test id | N_BIN a op b | N_NEG/N_POS/N_NOT a
 *   N_AND/N_OR a b | N_COND b if a else c (c may be NULL)
 *   N_COMPARE a then v[n] N_BIN nodes (op, b = operand)
 *   N_BODY v[n] statements | N_DATA lit | N_OUTPUT a
 *   N_IF if a: b else c (c: N_BODY, N_IF for elif, or NULL)
 *   N_FOR for a (N_NAME or N_TUPLE of them) in b [if c]: v[0] body, d else body
 *   N_SET a (N_NAME, N_TUPLE, N_GETATTR ns.x) = b | N_SETBLOCK a = body b | filter d
 *   N_MACRO name(v[n] N_PARAM name=a default) body b; op bits 1 varargs 2 kwargs 4 caller
 *   N_CALLBLOCK call a, caller params v[n], body b
 *   N_FILTERBLOCK filters a over body b | N_WITH v[n] N_SET then body b
 *   N_SCOPE body b in a scope of its own ({% generation %}) */
struct jnode {
    uint16_t k, op;
    uint32_t line, col, depth;
    jnode *a, *b, *c, *d;
    jnode **v;
    size_t n;
    jj_str name;
    jv lit;
};

struct cis2_jinja {
    jj_arena mem;
    jnode *root;
};

/* the parser (jinja_parse.c) */
int jj_parse(cis2_jinja *t, const char *src, size_t len, cis2_error *err);
/* Python's string escapes in a literal, into dst (room for n bytes): its
 * length, or (size_t)-1 with *why set */
size_t jj_unescape(const char *s, size_t n, char *dst, const char **why);

/* ---- the render ---- */
/* a growing buffer: in the arena, or (heap) malloc'ed and counted against
 * max_memory: the result, which is handed to the caller as it is */
typedef struct jj_buf { char *p; size_t n, cap; int heap; } jj_buf;
typedef struct jj_scope jj_scope;

typedef struct jctx {
    jj_arena mem;
    cis2_error *err;
    uint64_t steps, max_steps;
    unsigned depth, max_depth;
    size_t max_output;
    jj_buf *out;           /* where output goes now (the result, or a capture) */
    jj_buf *top;           /* the result */
    jj_scope *root;        /* the template's own variables */
    jv vars;               /* the caller's variables (a dict) */
    struct tm now;
    int flow;              /* JJ_FLOW_*: break/continue unwinding */
    const jnode *at;       /* the construct being evaluated (error position) */
} jctx;
enum { JJ_FLOW_NONE, JJ_FLOW_BREAK, JJ_FLOW_CONTINUE };

/* errors: each returns -1 after recording the first error */
int jj_fail(jctx *c, const jnode *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int jj_nomem(jctx *c);
int jj_limit(jctx *c, const char *what);
/* counts n steps of work; -1 past max_steps.  A step is about 100 ns of
 * work on a 2020s core, so max_steps bounds a render's time: a node
 * evaluated or a loop turn is one step, and bulk work is charged by these
 * (bytes walked character by character, bytes copied, values compared) */
int jj_cost(jctx *c, uint64_t n);
#define JJ_SCAN(n) ((uint64_t)(n) / 16)
#define JJ_COPY(n) ((uint64_t)(n) / 256)
#define JJ_ITEMS(n) ((uint64_t)(n) / 4)

/* buffers (in the arena) */
int jb_put(jctx *c, jj_buf *b, const char *s, size_t n);
int jb_str(jctx *c, jj_buf *b, const char *s);
int jb_printf(jctx *c, jj_buf *b, const char *fmt, ...);
int jj_emit(jctx *c, const char *s, size_t n); /* to c->out, bounded by max_output */

/* value constructors */
static inline jv jv_undef(const char *hint) { jv v = {0}; v.t = JT_UNDEF; v.u.s.p = hint; v.u.s.n = hint ? strlen(hint) : 0; return v; }
static inline jv jv_none(void) { jv v = {0}; v.t = JT_NONE; return v; }
static inline jv jv_bool(int b) { jv v = {0}; v.t = JT_BOOL; v.u.i = b != 0; return v; }
static inline jv jv_int(int64_t i) { jv v = {0}; v.t = JT_INT; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {0}; v.t = JT_FLOAT; v.u.f = f; return v; }
static inline jv jv_strn(const char *p, size_t n) { jv v = {0}; v.t = JT_STR; v.u.s.p = p; v.u.s.n = n; return v; }
static inline jv jv_missing(void) { jv v = {0}; v.t = JT_MISSING; return v; }

int jv_copystr(jctx *c, const char *p, size_t n, jv *out);   /* into the arena */
int jv_newlist(jctx *c, size_t n, jv *out);                  /* n items, all JT_NONE */
int jv_newdict(jctx *c, jv *out);
int jd_set(jctx *c, jj_dict *d, jv key, jv val);             /* replaces an equal key */
int jd_get(jctx *c, const jj_dict *d, jv key, jv *val);      /* 1 found, 0 not, -1 error */
int jd_getn(const jj_dict *d, const char *name, size_t n, jv *val); /* string key */
int jb_take(jctx *c, jj_buf *b, jv *out);                    /* the buffer as a string value */
int jv_from_json(jctx *c, const json_t *j, int depth, jv *out);

/* Python semantics */
int jv_truth(const jv *v);
const char *jv_typename(const jv *v); /* "str", "int", "dict", ... as Python names them */
int jv_isnum(const jv *v);            /* bool, int or float */
int jv_str(jctx *c, jj_buf *b, const jv *v);   /* str(v) appended */
int jv_repr(jctx *c, jj_buf *b, const jv *v, int depth);
int jv_tostr(jctx *c, const jv *v, jv *out);   /* str(v) as a string value (strings as they are) */
int jv_equal(jctx *c, const jv *a, const jv *b, int depth); /* 1 equal, 0 not, -1 error */
int jv_compare(jctx *c, const jv *a, const jv *b, int *res); /* <0 =0 >0, -1 on a type error */
size_t jj_float_repr(double f, char *buf); /* Python's repr(float) into buf[32] */
double jj_floor(double x);
double jj_fmod(double x, double y);
const char *jj_memmem(const char *h, size_t hn, const char *n, size_t nn);
typedef struct jj_json_opts { int ensure_ascii, sort_keys; const char *indent; size_t indent_n; int indent_on;
                              jj_str item_sep, key_sep; } jj_json_opts;
int jv_tojson(jctx *c, jj_buf *b, const jv *v, const jj_json_opts *o, int level);
int jj_html_escape(jctx *c, const jv *v, jv *out);

/* UTF-8 helpers (the strings are valid UTF-8) */
size_t jj_u8len(const char *s, size_t n);                         /* code points */
size_t jj_u8off(const char *s, size_t n, size_t cp);              /* byte offset of code point cp (n if past) */
uint32_t jj_u8dec(const char *s, size_t n, size_t *len);          /* one code point */
size_t jj_u8enc(uint32_t cp, char *o);
int jj_isspace_cp(uint32_t cp);                                   /* Python's str.isspace */

/* jinja_filters.c and jinja_methods.c: filters, tests, methods, functions */
int jl_filter_id(const char *name, size_t n);  /* -1 unknown */
int jl_test_id(const char *name, size_t n);
int jl_filter(jctx *c, const jnode *at, int id, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out);
int jl_test(jctx *c, const jnode *at, int id, jv *val, jv *args, size_t na, jj_kw *kw, size_t nk, int *res);
/* obj.name: 1 with *out a bound method (or Jinja's unsafe undefined), 0 not a method */
int jl_method_lookup(jctx *c, const jv *obj, const char *name, size_t n, jv *out);
int jl_call_method(jctx *c, const jnode *at, jj_bound *bm, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out);
enum { JF_RANGE, JF_DICT, JF_NAMESPACE, JF_RAISE, JF_STRFTIME, JF_CYCLER, JF_JOINER };
int jl_global(const char *name, size_t n, jv *out); /* 1 found */
int jl_call_func(jctx *c, const jnode *at, int fn, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out);
int jl_loop_attr(jctx *c, const jv *loop, const char *name, size_t n, jv *out);
int jl_call_cycler(jctx *c, const jnode *at, jv *self, const char *name, jv *args, size_t na, jv *out);
/* printf-style fmt % args (the % operator, the format filter) */
int jl_percent_format(jctx *c, const jnode *at, const jv *fmt, const jv *args, jv *out);

struct jj_bound { jv self; int id; };
struct jj_loop {
    jv *items;            /* the sequence looped over (after the if filter) */
    size_t n, i;          /* length, index0 */
    unsigned depth0;
    jv last_changed; int changed_set;
};
struct jj_cycler { jj_list *items; size_t pos; int joiner; int used; jj_str sep; };
struct jj_macro {
    const jnode *def;      /* N_MACRO, or N_CALLBLOCK for caller() */
    jj_scope *closure;     /* the scope it was defined in */
    jv caller;             /* the caller() of a call block (JT_MISSING if none) */
};

/* jinja_str.c, for jinja_filters.c and jinja_methods.c */
int jj_find_name(const char *const *tab, int n, const char *s, size_t len); /* index in tab, or -1 */
/* Binds positional and keyword arguments to the parameter names; the
 * slots of those not given are JT_MISSING.  Unknown or doubled names, or
 * too many positionals, are errors naming fn. */
int jj_bind(jctx *c, const jnode *at, const char *fn, const char *const *names, size_t np, jv *args, size_t na,
            jj_kw *kw, size_t nk, jv *slot);
int jj_arg_int(jctx *c, const jnode *at, const char *fn, const jv *v, int64_t def, int64_t *out); /* int/bool, def if missing */
int jj_arg_bool(const jv *v, int def);                                                           /* truth, def if missing */
int jj_arg_str(jctx *c, const jnode *at, const char *fn, const jv *v, jv *out);                  /* a string, else an error */
int jj_newstr(jctx *c, jj_buf *b, jv *out);
int jj_make_iter(jctx *c, jv *items, size_t n, int view, jv *out); /* a copy of items, of LV_* kind view */
int jj_tuple2(jctx *c, jv a, jv b, jv *out);
int jj_list_of(jctx *c, jv *items, size_t n, jv *out);
int jj_push(jctx *c, jv **v, size_t *n, size_t *cap, jv x);
int jj_len_of(jctx *c, const jnode *at, const jv *v, int64_t *n);  /* Python's len() */
uint32_t jj_cp_upper(uint32_t c);
uint32_t jj_cp_lower(uint32_t c);
int jj_is_cased(uint32_t c);
int jj_is_upper_cp(uint32_t c);
int jj_is_lower_cp(uint32_t c);
int jj_uclass(uint32_t cp); /* UC_L / UC_N / UC_S of src/tables/unicode_tables.h */
/* mode: 0 upper, 1 lower, 2 capitalize, 3 str.title, 4 swapcase */
int jj_case_map(jctx *c, const jv *s, int mode, jv *out);
int jj_cp_in(uint32_t cp, const jv *chars);
/* str.strip family: which 1 left, 2 right, 3 both; chars NULL: whitespace */
void jj_strip(const jv *s, const jv *chars, int which, jv *out);
int jj_str_replace(jctx *c, const jv *s, const jv *old, const jv *new, int64_t count, jv *out); /* count < 0: all */
int jj_str_split(jctx *c, const jnode *at, const jv *s, const jv *sep, int64_t maxsplit, int right, jv *out);
size_t jj_line_break(const char *p, size_t n, size_t i); /* a str.splitlines boundary's length at p[i], or 0 */
int jj_splitlines(jctx *c, const jv *s, int keepends, jv **parts, size_t *k);
int jj_py_float_parse(const char *s, size_t n, double *out);        /* 1 parsed, 0 not Python float() syntax */
int jj_py_int_parse(const char *s, size_t n, int base, int64_t *out); /* 1 parsed, 0 not, -1 over 64 bits */

/* the evaluator (jinja_eval.c), for filters that call back (map with a
 * filter name, select with a test name) and macros */
int jj_call_value(jctx *c, const jnode *at, jv *fn, jv *args, size_t na, jj_kw *kw, size_t nk, jv *out);
/* Jinja's environment.getitem / getattr on a value (attribute paths of
 * map, selectattr, sort, ...) */
int jj_getitem(jctx *c, const jnode *at, const jv *obj, const jv *key, jv *out);
int jj_getattr(jctx *c, const jnode *at, const jv *obj, const char *name, size_t n, jv *out);
/* the error an Undefined raises when used (its hint: "'x' is undefined") */
int jj_undef_error(jctx *c, const jnode *at, const jv *u);
/* the items an iterable yields (str: characters, dict: keys); undefined
 * yields nothing; else a type error */
int jj_iter(jctx *c, const jnode *at, const jv *v, jv **items, size_t *n);

#endif

/*
 * jinja_parse.c - the chat-template renderer's lexer and parser: template
 * source -> syntax tree (jinja_impl.h says the tree's layout).  Called by
 * cis2_jinja_parse (jinja_eval.c) only.  docs/chat.md "The language"
 * lists what is parsed; the rules are the Jinja2 template designer
 * documentation's ("Whitespace Control", "Expressions", "List of Control
 * Structures") in the environment transformers uses: trim_blocks,
 * lstrip_blocks, keep_trailing_newline off, the loopcontrols extension and
 * transformers' {% generation %} block.
 *
 * The lexer first normalises newlines ("\r\n" and "\r" become "\n", as
 * Jinja's newline_sequence does), drops one trailing newline, then cuts
 * the source into data and tags.  Whitespace control, as the docs define
 * it and Debian's python3-jinja2 renders it:
 *   {%- {{- {#-   strip all whitespace (Unicode's) before the tag;
 *   -%} -}} -#}   strip all whitespace after it;
 *   lstrip_blocks  spaces and tabs between a line's start and {% or {#
 *                  are dropped ({%+ keeps them);
 *   trim_blocks    the first newline after %} or #} is dropped (+%} keeps it).
 * Errors are "template line L:C: ..." (CIS2_E_FORMAT); nesting deeper
 * than JJ_MAX_NEST is refused (CIS2_E_NOMEM) so the evaluator's recursion
 * is bounded by the tree's depth.
 */
#include "jinja_impl.h"

#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

enum { K_EOF, K_DATA, K_VBEGIN, K_VEND, K_BBEGIN, K_BEND, K_NAME, K_STR, K_INT, K_FLOAT, K_OP };
enum { O_ADD, O_SUB, O_MUL, O_DIV, O_FLOORDIV, O_MOD, O_POW, O_TILDE, O_LPAREN, O_RPAREN, O_LBRACK, O_RBRACK,
       O_LBRACE, O_RBRACE, O_COMMA, O_DOT, O_COLON, O_PIPE, O_ASSIGN, O_EQ, O_NE, O_LT, O_LE, O_GT, O_GE };
static const char *const OPS[] = {"+", "-", "*", "/", "//", "%", "**", "~", "(", ")", "[", "]",
                                  "{", "}", ",", ".", ":", "|", "=", "==", "!=", "<", "<=", ">", ">="};

typedef struct jtok {
    uint8_t k, op;
    uint32_t line, col;
    const char *p; /* text (K_DATA, K_NAME, K_STR: unescaped) */
    size_t n;
    int64_t i;
    double f;
} jtok;

typedef struct P {
    jj_arena *mem;
    cis2_error *err;
    const char *s; /* normalised source */
    size_t len;
    jtok *t;
    size_t nt, cap, i;
    /* line/column of offsets, advanced monotonically */
    size_t lc_off;
    uint32_t lc_line, lc_col;
    int loops;      /* enclosing for loops (break/continue) */
    int nest;       /* the parser's recursion (JJ_MAX_PARSE_NEST) */
    unsigned refs;  /* varargs/kwargs/caller seen in the current macro */
    int failed;
} P;

static void *palloc(P *p, size_t n)
{
    void *r = jj_alloc(p->mem, n);
    if (!r && !p->failed) {
        p->failed = 1;
        cis2_fail(p->err, CIS2_E_NOMEM, "template: out of memory while parsing");
    }
    return r;
}

static void linecol(P *p, size_t off, uint32_t *line, uint32_t *col)
{
    if (off < p->lc_off) { p->lc_off = 0; p->lc_line = 1; p->lc_col = 1; }
    for (; p->lc_off < off && p->lc_off < p->len; p->lc_off++) {
        unsigned char ch = (unsigned char)p->s[p->lc_off];
        if (ch == '\n') { p->lc_line++; p->lc_col = 1; }
        else if ((ch & 0xC0) != 0x80) p->lc_col++;
    }
    *line = p->lc_line;
    *col = p->lc_col;
}

static int perr_at(P *p, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr_at(P *p, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (!p->failed) {
        char m[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        cis2_fail(p->err, CIS2_E_FORMAT, "template line %u:%u: %s", line, col, m);
        p->failed = 1;
    }
    return -1;
}
#define PERR_OFF(p, off, ...) (linecol((p), (off), &el_, &ec_), perr_at((p), el_, ec_, __VA_ARGS__))

/* ---------------------------------------------------------------- lexer */

static int push_tok(P *p, int k, size_t off, const char *s, size_t n)
{
    if (p->nt == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        jtok *t = palloc(p, nc * sizeof *t);
        if (!t) return -1;
        if (p->nt) memcpy(t, p->t, p->nt * sizeof *t);
        p->t = t;
        p->cap = nc;
    }
    jtok *t = &p->t[p->nt++];
    memset(t, 0, sizeof *t);
    t->k = (uint8_t)k;
    t->p = s;
    t->n = n;
    linecol(p, off, &t->line, &t->col);
    return 0;
}

/* Unicode whitespace (Python's \s for str patterns) at s[i], its length or 0 */
static size_t ws_at(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) ? 1 : 0;
    size_t l;
    uint32_t cp = jj_u8dec(s + i, n - i, &l);
    return jj_isspace_cp(cp) ? l : 0;
}
static size_t lstrip_ws(const char *s, size_t from, size_t to)
{
    size_t l;
    while (from < to && (l = ws_at(s, to, from)) != 0) from += l;
    return from;
}
static size_t rstrip_ws(const char *s, size_t from, size_t to)
{
    while (to > from) {
        size_t b = to - 1;
        while (b > from && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
        if (ws_at(s, to, b) != to - b) break;
        to = b;
    }
    return to;
}

/* Python's unicode-escape rules for a string literal's body (Jinja decodes
 * literals with them): \n \t \r \a \b \f \v \\ \' \" \<newline>, \ooo,
 * \xhh, \uhhhh, \Uhhhhhhhh; any other backslash stays as it is.  \N{name}
 * is refused (no name table here). */
size_t jj_unescape(const char *s, size_t n, char *dst, const char **why)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\' || i + 1 >= n) { dst[o++] = s[i++]; continue; }
        char e = s[i + 1];
        if ((unsigned char)e >= 0x80) {
            /* Jinja decodes a literal as s.encode("ascii", "backslashreplace")
             * .decode("unicode-escape"): the character became \xhh, \uhhhh or
             * \Uhhhhhhhh, and this backslash escapes that one's backslash */
            size_t l;
            uint32_t cp = jj_u8dec(s + i + 1, n - i - 1, &l);
            o += (size_t)sprintf(dst + o, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
            i += 1 + l;
            continue;
        }
        static const char keys[] = "ntrabfv\\'\"\n", map[] = "\n\t\r\a\b\f\v\\'\"";
        const char *simple = e ? strchr(keys, e) : NULL;
        if (simple) {
            if (e != '\n') dst[o++] = map[simple - keys]; /* backslash-newline: nothing */
            i += 2;
            continue;
        }
        if (e >= '0' && e <= '7') {
            uint32_t v = 0;
            size_t j = i + 1;
            for (int d = 0; d < 3 && j < n && s[j] >= '0' && s[j] <= '7'; d++, j++) v = v * 8 + (uint32_t)(s[j] - '0');
            o += jj_u8enc(v, dst + o);
            i = j;
            continue;
        }
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            size_t j = i + 2;
            for (int d = 0; d < digits; d++, j++) {
                char h = j < n ? s[j] : 0;
                int x = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (x < 0) {
                    *why = e == 'x' ? "truncated \\xXX escape" : e == 'u' ? "truncated \\uXXXX escape" : "truncated \\UXXXXXXXX escape";
                    return (size_t)-1;
                }
                v = v * 16 + (uint32_t)x;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
                *why = "escape is not a Unicode scalar value";
                return (size_t)-1;
            }
            o += jj_u8enc(v, dst + o);
            i = j;
            continue;
        }
        if (e == 'N') { *why = "\\N{...} escapes are not supported"; return (size_t)-1; }
        dst[o++] = s[i++]; /* unknown escape: the backslash stays */
    }
    return o;
}

static double c_strtod(const char *s)
{
    /* the literal uses '.', whatever LC_NUMERIC says */
    char b[128];
    size_t n = strlen(s);
    if (n >= sizeof b) n = sizeof b - 1;
    memcpy(b, s, n);
    b[n] = 0;
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1])
        for (char *q = b; *q; q++)
            if (*q == '.') *q = dp[0];
    return strtod(b, NULL);
}

/* a number at s[i]; after_dot: the previous token was '.', so only an
 * integer (x.0.1 is two subscripts, as Jinja lexes it) */
static int lex_number(P *p, size_t *pi, int after_dot)
{
    const char *s = p->s;
    size_t i = *pi, n = p->len, st = i;
    uint32_t el_, ec_;
    char b[128];
    size_t bn = 0;
    int isf = 0;
    if (s[i] == '0' && i + 1 < n && s[i + 1] && strchr("xXoObB", s[i + 1])) {
        int base = (s[i + 1] | 0x20) == 'x' ? 16 : (s[i + 1] | 0x20) == 'o' ? 8 : 2;
        uint64_t v = 0;
        i += 2;
        size_t dstart = i;
        for (; i < n; i++) {
            char h = s[i];
            if (h == '_') continue;
            int x = h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : 99;
            if (x >= base) break;
            if (v > (UINT64_MAX - (uint64_t)x) / (uint64_t)base || v * (uint64_t)base + (uint64_t)x > (uint64_t)INT64_MAX)
                return PERR_OFF(p, st, "integer literal out of range");
            v = v * (uint64_t)base + (uint64_t)x;
        }
        if (i == dstart) return PERR_OFF(p, st, "malformed number");
        if (push_tok(p, K_INT, st, s + st, i - st)) return -1;
        p->t[p->nt - 1].i = (int64_t)v;
        *pi = i;
        return 0;
    }
    for (; i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_'); i++)
        if (s[i] != '_' && bn < sizeof b - 8) b[bn++] = s[i];
    if (!after_dot && i + 1 < n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        isf = 1;
        b[bn++] = '.';
        for (i++; i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_'); i++)
            if (s[i] != '_' && bn < sizeof b - 8) b[bn++] = s[i];
    }
    if (!after_dot && i < n && (s[i] | 0x20) == 'e') {
        size_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-')) j++;
        if (j < n && s[j] >= '0' && s[j] <= '9') {
            isf = 1;
            b[bn++] = 'e';
            if (s[i + 1] == '-') b[bn++] = '-';
            for (i = j; i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_'); i++)
                if (s[i] != '_' && bn < sizeof b - 2) b[bn++] = s[i];
        }
    }
    b[bn] = 0;
    if (!isf && b[0] == '0' && strspn(b, "0") != bn)
        return PERR_OFF(p, st, "leading zeros in a decimal integer literal");
    if (push_tok(p, isf ? K_FLOAT : K_INT, st, s + st, i - st)) return -1;
    jtok *t = &p->t[p->nt - 1];
    if (isf) {
        t->f = c_strtod(b);
    } else {
        errno = 0;
        long long v = strtoll(b, NULL, 10);
        if (errno == ERANGE) return PERR_OFF(p, st, "integer literal out of range (cis2 keeps integers in 64 bits)");
        t->i = v;
    }
    *pi = i;
    return 0;
}

/* The tokens of one tag from s[*pi] to its end marker; kind '{' or '%'. */
static int lex_tag(P *p, size_t *pi, char kind, int *strip_next)
{
    const char *s = p->s;
    size_t i = *pi, n = p->len;
    uint32_t el_, ec_;
    int bal = 0;
    for (;;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\f' || s[i] == '\v')) i++;
        if (i >= n) return PERR_OFF(p, n, "unexpected end of template inside a %s tag", kind == '%' ? "{% %}" : "{{ }}");
        size_t rest = n - i;
        if (kind == '%') {
            size_t m = 0;
            if (rest >= 3 && (s[i] == '-' || s[i] == '+') && s[i + 1] == '%' && s[i + 2] == '}') m = 3;
            else if (rest >= 2 && s[i] == '%' && s[i + 1] == '}') m = 2;
            if (m) {
                if (push_tok(p, K_BEND, i, s + i, m)) return -1;
                char modc = m == 3 ? s[i] : 0;
                *strip_next = modc == '-';
                i += m;
                if (!modc && i < n && s[i] == '\n') i++; /* trim_blocks; +%} keeps it */
                *pi = i;
                return 0;
            }
        } else if (bal == 0) {
            size_t m = 0;
            if (rest >= 3 && s[i] == '-' && s[i + 1] == '}' && s[i + 2] == '}') m = 3;
            else if (rest >= 2 && s[i] == '}' && s[i + 1] == '}') m = 2;
            if (m) {
                if (push_tok(p, K_VEND, i, s + i, m)) return -1;
                *strip_next = m == 3;
                *pi = i + m;
                return 0;
            }
        }
        char ch = s[i];
        if (ch == '\'' || ch == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != ch) j += s[j] == '\\' ? 2 : 1;
            if (j >= n) return PERR_OFF(p, i, "unterminated string literal");
            char *d = palloc(p, 2 * (j - i) + 16); /* \é becomes \xe9 */
            if (!d) return -1;
            const char *why = NULL;
            size_t dn = jj_unescape(s + i + 1, j - i - 1, d, &why);
            if (dn == (size_t)-1) return PERR_OFF(p, i, "%s", why);
            if (push_tok(p, K_STR, i, d, dn)) return -1;
            i = j + 1;
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            int after_dot = p->nt && p->t[p->nt - 1].k == K_OP && p->t[p->nt - 1].op == O_DOT;
            if (lex_number(p, &i, after_dot)) return -1;
            continue;
        }
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            size_t j = i;
            while (j < n && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= '0' && s[j] <= '9') || s[j] == '_')) j++;
            if (push_tok(p, K_NAME, i, s + i, j - i)) return -1;
            i = j;
            continue;
        }
        int op = -1;
        for (int o = 0; o < (int)(sizeof OPS / sizeof OPS[0]); o++) {
            size_t l = strlen(OPS[o]);
            if (l <= rest && memcmp(s + i, OPS[o], l) == 0 && (op < 0 || l > strlen(OPS[op]))) op = o;
        }
        if (op < 0) return PERR_OFF(p, i, "unexpected character '%.*s'", (int)(((unsigned char)ch < 0x80) ? 1 : 0), s + i);
        if (op == O_LPAREN || op == O_LBRACK || op == O_LBRACE) bal++;
        if (op == O_RPAREN || op == O_RBRACK || op == O_RBRACE) {
            if (bal == 0) return PERR_OFF(p, i, "unexpected '%s'", OPS[op]);
            bal--;
        }
        if (push_tok(p, K_OP, i, s + i, strlen(OPS[op]))) return -1;
        p->t[p->nt - 1].op = (uint8_t)op;
        i += strlen(OPS[op]);
    }
}

/* {% raw %} at s[t] (the tag's name found after it): its body as data */
static int lex_raw(P *p, size_t t, size_t after_open, int *strip_next, size_t *pi)
{
    const char *s = p->s;
    size_t n = p->len, i = after_open;
    uint32_t el_, ec_;
    int open_strip = s[after_open - 3] == '-';
    size_t body = open_strip ? lstrip_ws(s, i, n) : i;
    for (size_t q = body; q + 1 < n; q++) {
        if (s[q] != '{' || s[q + 1] != '%') continue;
        size_t r = q + 2;
        int close_strip = r < n && s[r] == '-';
        int close_plus = r < n && s[r] == '+';
        if (close_strip || close_plus) r++;
        while (r < n && (s[r] == ' ' || s[r] == '\t' || s[r] == '\n')) r++;
        if (r + 6 > n || memcmp(s + r, "endraw", 6) != 0) continue;
        r += 6;
        while (r < n && (s[r] == ' ' || s[r] == '\t' || s[r] == '\n')) r++;
        int end_strip = r < n && s[r] == '-', end_plus = r < n && s[r] == '+';
        if (end_strip || end_plus) r++;
        if (r + 2 > n || s[r] != '%' || s[r + 1] != '}') continue;
        size_t de = q;
        if (close_strip) de = rstrip_ws(s, body, de);
        else if (!close_plus) {
            size_t b = de;
            while (b > body && (s[b - 1] == ' ' || s[b - 1] == '\t')) b--;
            if (b == 0 || s[b - 1] == '\n') de = b;
        }
        if (de > body && push_tok(p, K_DATA, body, s + body, de - body)) return -1;
        r += 2;
        *strip_next = end_strip;
        if (!end_strip && !end_plus && r < n && s[r] == '\n') r++;
        *pi = r;
        return 0;
    }
    if (body >= n) { /* "{% raw %}" ends the template: nothing to copy */
        *pi = n;
        return 0;
    }
    return PERR_OFF(p, t, "'raw' is not closed by 'endraw'");
}

static int lex(P *p)
{
    const char *s = p->s;
    size_t n = p->len, pos = 0;
    uint32_t el_, ec_;
    int strip_next = 0;
    for (;;) {
        size_t t = pos;
        while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#'))) t++;
        if (t + 1 >= n) t = n;
        size_t ds = pos, de = t;
        if (strip_next) ds = lstrip_ws(s, ds, de);
        strip_next = 0;
        char kind = t < n ? s[t + 1] : 0, mod = t + 2 < n ? s[t + 2] : 0;
        if (t < n) {
            if (mod == '-') de = rstrip_ws(s, ds, de);
            else if (kind != '{' && mod != '+') { /* lstrip_blocks */
                size_t q = de;
                while (q > ds && (s[q - 1] == ' ' || s[q - 1] == '\t')) q--;
                if (q == 0 || s[q - 1] == '\n') de = q;
            }
        }
        if (de > ds && push_tok(p, K_DATA, ds, s + ds, de - ds)) return -1;
        if (t >= n) break;
        if (kind == '#') {
            size_t e = t + 2;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) return PERR_OFF(p, t, "comment is not closed by '#}'");
            pos = e + 2;
            if (e > t + 2 && s[e - 1] == '-') strip_next = 1;
            else if (!(e > t + 2 && s[e - 1] == '+') && pos < n && s[pos] == '\n') pos++;
            continue;
        }
        size_t i = t + 2 + ((mod == '-' || (mod == '+' && kind == '%')) ? 1 : 0);
        if (kind == '%') { /* {% raw %} ? */
            size_t r = i;
            while (r < n && (s[r] == ' ' || s[r] == '\t' || s[r] == '\n')) r++;
            if (r + 3 <= n && memcmp(s + r, "raw", 3) == 0) {
                size_t e = r + 3;
                while (e < n && (s[e] == ' ' || s[e] == '\t' || s[e] == '\n')) e++;
                if (e < n && (s[e] == '-' || s[e] == '+')) e++;
                if (e + 2 <= n && s[e] == '%' && s[e + 1] == '}') {
                    if (lex_raw(p, t, e + 2, &strip_next, &pos)) return -1;
                    continue;
                }
            }
        }
        if (push_tok(p, kind == '%' ? K_BBEGIN : K_VBEGIN, t, s + t, i - t)) return -1;
        pos = i;
        if (lex_tag(p, &pos, kind, &strip_next)) return -1;
    }
    return push_tok(p, K_EOF, n, s + n, 0);
}

/* --------------------------------------------------------------- parser */

static jtok *cur(P *p) { return &p->t[p->i]; }
static jtok *peekn(P *p, size_t k) { return p->i + k < p->nt ? &p->t[p->i + k] : &p->t[p->nt - 1]; }
static void adv(P *p) { if (p->t[p->i].k != K_EOF) p->i++; }
static int is_op(const jtok *t, int op) { return t->k == K_OP && t->op == op; }
static int is_name(const jtok *t, const char *w)
{
    return t->k == K_NAME && t->n == strlen(w) && memcmp(t->p, w, t->n) == 0;
}

static const char *describe(const jtok *t, char *b, size_t cap)
{
    switch (t->k) {
    case K_EOF: return "end of template";
    case K_DATA: return "template text";
    case K_VBEGIN: return "'{{'";
    case K_VEND: return "end of print statement";
    case K_BBEGIN: return "'{%'";
    case K_BEND: return "end of statement block";
    case K_STR: return "string";
    case K_INT: return "integer";
    case K_FLOAT: return "float";
    default: snprintf(b, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); return b;
    }
}

static jnode *perr(P *p, const jtok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static jnode *perr(P *p, const jtok *t, const char *fmt, ...)
{
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    perr_at(p, t->line, t->col, "%s", m);
    return NULL;
}
static jnode *unexpected(P *p)
{
    char b[64];
    return perr(p, cur(p), "unexpected %s", describe(cur(p), b, sizeof b));
}
static int expect_op(P *p, int op)
{
    if (is_op(cur(p), op)) { adv(p); return 0; }
    char b[64];
    perr(p, cur(p), "expected '%s', got %s", OPS[op], describe(cur(p), b, sizeof b));
    return -1;
}
static int expect_k(P *p, int k, const char *what)
{
    if (cur(p)->k == k) { adv(p); return 0; }
    char b[64];
    perr(p, cur(p), "expected %s, got %s", what, describe(cur(p), b, sizeof b));
    return -1;
}

static jnode *mk(P *p, int k, const jtok *at)
{
    jnode *e = palloc(p, sizeof *e);
    if (!e) return NULL;
    e->k = (uint16_t)k;
    e->line = at->line;
    e->col = at->col;
    e->depth = 1;
    return e;
}
/* depth from the children; refuses trees deeper than JJ_MAX_NEST */
static jnode *fin(P *p, jnode *e)
{
    if (!e) return NULL;
    uint32_t d = 0;
    const jnode *ch[4] = {e->a, e->b, e->c, e->d};
    for (int i = 0; i < 4; i++)
        if (ch[i] && ch[i]->depth > d) d = ch[i]->depth;
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i] && e->v[i]->depth > d) d = e->v[i]->depth;
    e->depth = d + 1;
    if (e->depth > JJ_MAX_NEST && !p->failed) {
        p->failed = 1;
        cis2_fail(p->err, CIS2_E_NOMEM, "template line %u:%u: nesting deeper than %d", e->line, e->col, JJ_MAX_NEST);
        return NULL;
    }
    return e;
}

/* a growing node list */
typedef struct nlist { jnode **v; size_t n, cap; } nlist;
static int nl_push(P *p, nlist *l, jnode *e)
{
    if (!e) return -1;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        jnode **v = palloc(p, nc * sizeof *v);
        if (!v) return -1;
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = nc;
    }
    l->v[l->n++] = e;
    return 0;
}
static void nl_give(jnode *e, nlist *l) { e->v = l->v; e->n = l->n; }

/* bounds the parser's own recursion before it recurses (the tree's depth
 * is checked after, in fin) */
static int enter(P *p)
{
    if (++p->nest <= JJ_MAX_PARSE_NEST) return 0;
    if (!p->failed) {
        p->failed = 1;
        cis2_fail(p->err, CIS2_E_NOMEM, "template line %u:%u: nesting deeper than %d", cur(p)->line, cur(p)->col,
                  JJ_MAX_PARSE_NEST);
    }
    return -1;
}

static jnode *parse_expr(P *p, int condexpr);
static jnode *parse_tuple(P *p, int condexpr, int explicit, const char *extra_end);
static jnode *parse_unary(P *p, int with_filter);
static jnode *parse_primary(P *p);
static jnode *parse_postfix(P *p, jnode *e);

static int tuple_end(P *p, const char *extra)
{
    const jtok *t = cur(p);
    if (t->k == K_VEND || t->k == K_BEND || t->k == K_EOF || is_op(t, O_RPAREN)) return 1;
    return extra && is_name(t, extra);
}

/* call arguments after '(' up to ')' into l */
static int parse_args(P *p, nlist *l)
{
    int kinds = 0; /* 1 name=, 2 *args, 4 **kwargs seen: what may follow them is Jinja's rule */
    adv(p); /* ( */
    while (!is_op(cur(p), O_RPAREN)) {
        if (l->n) {
            if (expect_op(p, O_COMMA)) return -1;
            if (is_op(cur(p), O_RPAREN)) break;
        }
        jtok *t = cur(p);
        jnode *e;
        if (is_op(t, O_MUL) || is_op(t, O_POW)) {
            int k = is_op(t, O_MUL) ? N_STARARG : N_STARKW;
            adv(p);
            e = mk(p, k, t);
            if (!e || !(e->a = parse_expr(p, 1))) return -1;
            e = fin(p, e);
        } else if (t->k == K_NAME && is_op(peekn(p, 1), O_ASSIGN)) {
            e = mk(p, N_KWARG, t);
            if (!e) return -1;
            e->name.p = t->p;
            e->name.n = t->n;
            adv(p);
            adv(p);
            if (!(e->a = parse_expr(p, 1))) return -1;
            e = fin(p, e);
        } else {
            if (kinds) { perr(p, t, "invalid syntax for function call expression"); return -1; }
            e = parse_expr(p, 1);
        }
        if (e && ((e->k == N_KWARG && (kinds & 4)) || (e->k == N_STARARG && (kinds & 6)) || (e->k == N_STARKW && (kinds & 4)))) {
            perr(p, t, "invalid syntax for function call expression");
            return -1;
        }
        if (e) kinds |= e->k == N_KWARG ? 1 : e->k == N_STARARG ? 2 : e->k == N_STARKW ? 4 : 0;
        if (nl_push(p, l, e)) return -1;
    }
    adv(p); /* ) */
    return 0;
}

/* a dotted name after | or is: its text (dots kept) */
static int dotted_name(P *p, jj_str *out)
{
    jtok *t = cur(p);
    if (t->k != K_NAME) { unexpected(p); return -1; }
    out->p = t->p;
    out->n = t->n;
    adv(p);
    while (is_op(cur(p), O_DOT) && peekn(p, 1)->k == K_NAME) {
        adv(p);
        out->n = (size_t)(cur(p)->p + cur(p)->n - out->p);
        adv(p);
    }
    return 0;
}

static jnode *parse_filter(P *p, jnode *operand)
{
    jtok *t = cur(p);
    jnode *e = mk(p, N_FILTER, t);
    if (!e) return NULL;
    e->a = operand;
    if (dotted_name(p, &e->name)) return NULL;
    int id = jl_filter_id(e->name.p, e->name.n);
    if (id < 0) return perr(p, t, "no filter named '%.*s'", (int)e->name.n, e->name.p);
    e->op = (uint16_t)id;
    if (is_op(cur(p), O_LPAREN)) {
        nlist l = {0};
        if (parse_args(p, &l)) return NULL;
        nl_give(e, &l);
    }
    return fin(p, e);
}

static jnode *parse_test(P *p, jnode *operand)
{
    jtok *ist = cur(p);
    adv(p); /* is */
    int neg = 0;
    if (is_name(cur(p), "not")) { neg = 1; adv(p); }
    jtok *t = cur(p);
    jnode *e = mk(p, N_TEST, t);
    if (!e) return NULL;
    e->a = operand;
    if (dotted_name(p, &e->name)) return NULL;
    int id = jl_test_id(e->name.p, e->name.n);
    if (id < 0) return perr(p, t, "no test named '%.*s'", (int)e->name.n, e->name.p);
    e->op = (uint16_t)id;
    jtok *c = cur(p);
    if (is_op(c, O_LPAREN)) {
        nlist l = {0};
        if (parse_args(p, &l)) return NULL;
        nl_give(e, &l);
    } else if ((c->k == K_NAME || c->k == K_STR || c->k == K_INT || c->k == K_FLOAT || is_op(c, O_LBRACK) || is_op(c, O_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) return perr(p, c, "you cannot chain multiple tests with is");
        jnode *arg = parse_primary(p);
        if (!arg || !(arg = parse_postfix(p, arg))) return NULL;
        nlist l = {0};
        if (nl_push(p, &l, arg)) return NULL;
        nl_give(e, &l);
    }
    e = fin(p, e);
    if (!e || !neg) return e;
    jnode *n = mk(p, N_NOT, ist);
    if (!n) return NULL;
    n->a = e;
    return fin(p, n);
}

static jnode *parse_subscript(P *p, jnode *obj)
{
    jtok *t = cur(p);
    adv(p); /* [ */
    jnode *idx[3] = {NULL, NULL, NULL};
    int slice = 0;
    if (!is_op(cur(p), O_COLON)) {
        if (!(idx[0] = parse_expr(p, 1))) return NULL;
    }
    if (is_op(cur(p), O_COLON)) {
        slice = 1;
        adv(p);
        if (!is_op(cur(p), O_RBRACK) && !is_op(cur(p), O_COLON) && !(idx[1] = parse_expr(p, 1))) return NULL;
        if (is_op(cur(p), O_COLON)) {
            adv(p);
            if (!is_op(cur(p), O_RBRACK) && !(idx[2] = parse_expr(p, 1))) return NULL;
        }
    }
    if (expect_op(p, O_RBRACK)) return NULL;
    jnode *e = mk(p, slice ? N_SLICE : N_GETITEM, t);
    if (!e) return NULL;
    e->a = obj;
    e->b = idx[0];
    e->c = idx[1];
    e->d = idx[2];
    return fin(p, e);
}

/* e(args...): a call node on e, at token t (the "(") */
static jnode *parse_call(P *p, jnode *e, jtok *t)
{
    jnode *c = mk(p, N_CALL, t);
    nlist l = {0};
    if (!c || parse_args(p, &l)) return NULL;
    c->a = e;
    nl_give(c, &l);
    return fin(p, c);
}

static jnode *parse_postfix(P *p, jnode *e)
{
    for (;;) {
        jtok *t = cur(p);
        if (is_op(t, O_DOT)) {
            adv(p);
            jtok *nt = cur(p);
            jnode *g;
            if (nt->k == K_NAME) {
                g = mk(p, N_GETATTR, t);
                if (!g) return NULL;
                g->name.p = nt->p;
                g->name.n = nt->n;
            } else if (nt->k == K_INT) {
                g = mk(p, N_GETITEM, t);
                jnode *k = mk(p, N_LIT, nt);
                if (!g || !k) return NULL;
                k->lit = jv_int(nt->i);
                g->b = k;
            } else {
                return perr(p, nt, "expected a name after '.'");
            }
            adv(p);
            g->a = e;
            e = fin(p, g);
        } else if (is_op(t, O_LBRACK)) {
            e = parse_subscript(p, e);
        } else if (is_op(t, O_LPAREN)) {
            e = parse_call(p, e, t);
        } else {
            return e;
        }
        if (!e) return NULL;
    }
}

static jnode *parse_filter_expr(P *p, jnode *e)
{
    for (;;) {
        jtok *t = cur(p);
        if (is_op(t, O_PIPE)) {
            adv(p);
            e = parse_filter(p, e);
        } else if (is_name(t, "is")) {
            e = parse_test(p, e);
        } else if (is_op(t, O_LPAREN)) {
            e = parse_call(p, e, t);
        } else {
            return e;
        }
        if (!e) return NULL;
    }
}

static jnode *parse_primary(P *p)
{
    jtok *t = cur(p);
    jnode *e;
    switch (t->k) {
    case K_NAME:
        e = mk(p, N_LIT, t);
        if (!e) return NULL;
        if (is_name(t, "true") || is_name(t, "True")) e->lit = jv_bool(1);
        else if (is_name(t, "false") || is_name(t, "False")) e->lit = jv_bool(0);
        else if (is_name(t, "none") || is_name(t, "None")) e->lit = jv_none();
        else {
            e->k = N_NAME;
            e->name.p = t->p;
            e->name.n = t->n;
            if (is_name(t, "varargs")) p->refs |= 1;
            if (is_name(t, "kwargs")) p->refs |= 2;
            if (is_name(t, "caller")) p->refs |= 4;
        }
        adv(p);
        return e;
    case K_STR: {
        size_t total = 0, k = 0;
        while (peekn(p, k)->k == K_STR) total += peekn(p, k++)->n;
        e = mk(p, N_LIT, t);
        if (!e) return NULL;
        if (k == 1) {
            e->lit = jv_strn(t->p, t->n);
        } else {
            char *b = palloc(p, total + 1);
            if (!b) return NULL;
            size_t o = 0;
            for (size_t j = 0; j < k; j++) memcpy(b + o, peekn(p, j)->p, peekn(p, j)->n), o += peekn(p, j)->n;
            e->lit = jv_strn(b, total);
        }
        while (k--) adv(p);
        return e;
    }
    case K_INT:
    case K_FLOAT:
        e = mk(p, N_LIT, t);
        if (!e) return NULL;
        e->lit = t->k == K_INT ? jv_int(t->i) : jv_float(t->f);
        adv(p);
        return e;
    case K_OP:
        if (t->op == O_LPAREN) {
            adv(p);
            e = parse_tuple(p, 1, 1, NULL);
            if (!e || expect_op(p, O_RPAREN)) return NULL;
            return e;
        }
        if (t->op == O_LBRACK || t->op == O_LBRACE) {
            int dict = t->op == O_LBRACE, close = dict ? O_RBRACE : O_RBRACK;
            adv(p);
            e = mk(p, dict ? N_DICT : N_LIST, t);
            nlist l = {0};
            if (!e) return NULL;
            while (!is_op(cur(p), close)) {
                if (l.n) {
                    if (expect_op(p, O_COMMA)) return NULL;
                    if (is_op(cur(p), close)) break;
                }
                if (nl_push(p, &l, parse_expr(p, 1))) return NULL;
                if (dict) {
                    if (expect_op(p, O_COLON) || nl_push(p, &l, parse_expr(p, 1))) return NULL;
                }
            }
            adv(p);
            nl_give(e, &l);
            return fin(p, e);
        }
        break;
    default:
        break;
    }
    return unexpected(p);
}

static jnode *parse_unary(P *p, int with_filter)
{
    jtok *t = cur(p);
    jnode *e;
    if (is_op(t, O_SUB) || is_op(t, O_ADD)) {
        adv(p);
        e = mk(p, is_op(t, O_SUB) ? N_NEG : N_POS, t);
        if (!e || enter(p)) return NULL;
        e->a = parse_unary(p, 0);
        p->nest--;
        if (!e->a) return NULL;
        e = fin(p, e);
    } else {
        e = parse_primary(p);
    }
    if (!e || !(e = parse_postfix(p, e))) return NULL;
    return with_filter ? parse_filter_expr(p, e) : e;
}

static jnode *binop(P *p, const jtok *t, int k, int op, jnode *a, jnode *b)
{
    if (!a || !b) return NULL;
    jnode *e = mk(p, k, t);
    if (!e) return NULL;
    e->op = (uint16_t)op;
    e->a = a;
    e->b = b;
    return fin(p, e);
}

static jnode *parse_pow(P *p)
{
    jnode *e = parse_unary(p, 1);
    while (e && is_op(cur(p), O_POW)) {
        jtok *t = cur(p);
        adv(p);
        e = binop(p, t, N_BIN, OPB_POW, e, parse_unary(p, 1));
    }
    return e;
}
static jnode *parse_math2(P *p)
{
    jnode *e = parse_pow(p);
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, O_MUL) ? OPB_MUL : is_op(t, O_DIV) ? OPB_DIV : is_op(t, O_FLOORDIV) ? OPB_FLOORDIV
               : is_op(t, O_MOD) ? OPB_MOD : -1;
        if (!e || op < 0) return e;
        adv(p);
        e = binop(p, t, N_BIN, op, e, parse_pow(p));
    }
}
static jnode *parse_concat(P *p)
{
    jnode *e = parse_math2(p);
    while (e && is_op(cur(p), O_TILDE)) {
        jtok *t = cur(p);
        adv(p);
        e = binop(p, t, N_BIN, OPB_CONCAT, e, parse_math2(p));
    }
    return e;
}
static jnode *parse_math1(P *p)
{
    jnode *e = parse_concat(p);
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, O_ADD) ? OPB_ADD : is_op(t, O_SUB) ? OPB_SUB : -1;
        if (!e || op < 0) return e;
        adv(p);
        e = binop(p, t, N_BIN, op, e, parse_concat(p));
    }
}
static jnode *parse_compare(P *p)
{
    jtok *t0 = cur(p);
    jnode *e = parse_math1(p);
    if (!e) return NULL;
    nlist l = {0};
    for (;;) {
        jtok *t = cur(p);
        int op = -1;
        if (t->k == K_OP) {
            switch (t->op) {
            case O_EQ: op = OPC_EQ; break;
            case O_NE: op = OPC_NE; break;
            case O_LT: op = OPC_LT; break;
            case O_LE: op = OPC_LE; break;
            case O_GT: op = OPC_GT; break;
            case O_GE: op = OPC_GE; break;
            }
            if (op >= 0) adv(p);
        } else if (is_name(t, "in")) {
            op = OPC_IN;
            adv(p);
        } else if (is_name(t, "not") && is_name(peekn(p, 1), "in")) {
            op = OPC_NOTIN;
            adv(p);
            adv(p);
        }
        if (op < 0) break;
        jnode *c = mk(p, N_BIN, t);
        if (!c) return NULL;
        c->op = (uint16_t)op;
        if (!(c->b = parse_math1(p)) || nl_push(p, &l, fin(p, c))) return NULL;
    }
    if (!l.n) return e;
    jnode *c = mk(p, N_COMPARE, t0);
    if (!c) return NULL;
    c->a = e;
    nl_give(c, &l);
    return fin(p, c);
}
static jnode *parse_not(P *p)
{
    jtok *t = cur(p);
    if (is_name(t, "not")) {
        adv(p);
        jnode *e = mk(p, N_NOT, t);
        if (!e || enter(p)) return NULL;
        e->a = parse_not(p);
        p->nest--;
        if (!e->a) return NULL;
        return fin(p, e);
    }
    return parse_compare(p);
}
static jnode *parse_and(P *p)
{
    jnode *e = parse_not(p);
    while (e && is_name(cur(p), "and")) {
        jtok *t = cur(p);
        adv(p);
        e = binop(p, t, N_AND, 0, e, parse_not(p));
    }
    return e;
}
static jnode *parse_or(P *p)
{
    jnode *e = parse_and(p);
    while (e && is_name(cur(p), "or")) {
        jtok *t = cur(p);
        adv(p);
        e = binop(p, t, N_OR, 0, e, parse_and(p));
    }
    return e;
}
static jnode *parse_expr_in(P *p, int condexpr);
static jnode *parse_expr(P *p, int condexpr)
{
    if (enter(p)) return NULL;
    jnode *e = parse_expr_in(p, condexpr);
    p->nest--;
    return e;
}
static jnode *parse_expr_in(P *p, int condexpr)
{
    jnode *e = parse_or(p);
    if (!condexpr) return e;
    while (e && is_name(cur(p), "if")) {
        jtok *t = cur(p);
        adv(p);
        jnode *c = mk(p, N_COND, t);
        if (!c || !(c->a = parse_or(p))) return NULL;
        c->b = e;
        if (is_name(cur(p), "else")) {
            adv(p);
            if (!(c->c = parse_expr(p, 1))) return NULL;
        }
        e = fin(p, c);
    }
    return e;
}

static jnode *parse_tuple(P *p, int condexpr, int explicit, const char *extra_end)
{
    jtok *t = cur(p);
    nlist l = {0};
    int is_tuple = 0;
    for (;;) {
        if (l.n && expect_op(p, O_COMMA)) return NULL;
        if (tuple_end(p, extra_end)) break;
        if (nl_push(p, &l, parse_expr(p, condexpr))) return NULL;
        if (is_op(cur(p), O_COMMA)) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (l.n) return l.v[0];
        if (!explicit) {
            char b[64];
            return perr(p, cur(p), "expected an expression, got %s", describe(cur(p), b, sizeof b));
        }
    }
    jnode *e = mk(p, N_TUPLE, t);
    if (!e) return NULL;
    nl_give(e, &l);
    return fin(p, e);
}

/* ---------------------------------------------------------- statements */

static jnode *parse_body(P *p, const char *const *ends, int *which, const jtok *opener);

/* a for/set target: name, name.attr (set only), or names with commas */
static jnode *parse_target(P *p, int allow_ns, const char *stop)
{
    jtok *t0 = cur(p);
    int paren = is_op(t0, O_LPAREN);
    if (paren) adv(p);
    nlist l = {0};
    for (;;) {
        jtok *t = cur(p);
        if (t->k != K_NAME) {
            char b[64];
            return perr(p, t, "expected a name to assign to, got %s", describe(t, b, sizeof b));
        }
        jnode *e = mk(p, N_NAME, t);
        if (!e) return NULL;
        e->name.p = t->p;
        e->name.n = t->n;
        adv(p);
        if (allow_ns && !l.n && !paren && is_op(cur(p), O_DOT)) {
            adv(p);
            jtok *a = cur(p);
            if (a->k != K_NAME) return perr(p, a, "expected an attribute name after '.'");
            jnode *g = mk(p, N_GETATTR, t);
            if (!g) return NULL;
            g->a = e;
            g->name.p = a->p;
            g->name.n = a->n;
            adv(p);
            return fin(p, g);
        }
        if (nl_push(p, &l, e)) return NULL;
        if (!is_op(cur(p), O_COMMA)) break;
        adv(p);
        if ((paren && is_op(cur(p), O_RPAREN)) || (!paren && ((stop && is_name(cur(p), stop)) || is_op(cur(p), O_ASSIGN)))) break;
    }
    if (paren && expect_op(p, O_RPAREN)) return NULL;
    if (l.n == 1 && !paren && !is_op(&p->t[p->i - 1], O_COMMA)) return l.v[0];
    jnode *e = mk(p, N_TUPLE, t0);
    if (!e) return NULL;
    nl_give(e, &l);
    return fin(p, e);
}

/* "{% name %}" closing a block: the cursor is at its '{%' */
static int close_tag(P *p)
{
    adv(p); /* {% */
    adv(p); /* the name */
    return expect_k(p, K_BEND, "end of statement block");
}

static jnode *parse_if(P *p, const jtok *kw)
{
    jnode *e = mk(p, N_IF, kw);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    int which;
    if (!e || !(e->a = parse_tuple(p, 0, 0, NULL)) || expect_k(p, K_BEND, "end of statement block")) return NULL;
    if (!(e->b = parse_body(p, ends, &which, kw))) return NULL;
    if (which == 0) {
        adv(p); /* {% */
        jtok *t = cur(p);
        adv(p); /* elif */
        if (!(e->c = parse_if(p, t))) return NULL;
        return fin(p, e);
    }
    if (which == 1) {
        static const char *const ends2[] = {"endif", NULL};
        if (close_tag(p) || !(e->c = parse_body(p, ends2, &which, kw))) return NULL;
    }
    if (close_tag(p)) return NULL;
    return fin(p, e);
}

static jnode *parse_for(P *p, const jtok *kw)
{
    jnode *e = mk(p, N_FOR, kw);
    if (!e || !(e->a = parse_target(p, 0, "in"))) return NULL;
    if (!is_name(cur(p), "in")) return perr(p, cur(p), "expected 'in' in the for loop");
    adv(p);
    if (!(e->b = parse_tuple(p, 0, 0, "recursive"))) return NULL;
    if (is_name(cur(p), "if")) {
        adv(p);
        if (!(e->c = parse_expr(p, 1))) return NULL;
    }
    if (is_name(cur(p), "recursive")) return perr(p, cur(p), "recursive for loops are not supported");
    if (expect_k(p, K_BEND, "end of statement block")) return NULL;
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const ends2[] = {"endfor", NULL};
    int which;
    p->loops++;
    jnode *body = parse_body(p, ends, &which, kw);
    p->loops--;
    if (!body) return NULL;
    nlist l = {0};
    if (nl_push(p, &l, body)) return NULL;
    nl_give(e, &l);
    if (which == 0) {
        if (close_tag(p) || !(e->d = parse_body(p, ends2, &which, kw))) return NULL;
    }
    if (close_tag(p)) return NULL;
    return fin(p, e);
}

/* filters after | for {% set x | f %} and {% filter f %}: a chain whose
 * innermost operand is NULL (the captured body) */
static jnode *parse_filter_chain(P *p)
{
    jnode *e = parse_filter(p, NULL);
    while (e && is_op(cur(p), O_PIPE)) {
        adv(p);
        e = parse_filter(p, e);
    }
    return e;
}

static jnode *parse_set(P *p, const jtok *kw)
{
    jnode *tgt = parse_target(p, 1, NULL);
    if (!tgt) return NULL;
    if (is_op(cur(p), O_ASSIGN)) {
        adv(p);
        jnode *e = mk(p, N_SET, kw);
        if (!e) return NULL;
        e->a = tgt;
        if (!(e->b = parse_tuple(p, 1, 0, NULL)) || expect_k(p, K_BEND, "end of statement block")) return NULL;
        return fin(p, e);
    }
    if (tgt->k != N_NAME) return perr(p, kw, "a block set assigns one name");
    jnode *e = mk(p, N_SETBLOCK, kw);
    if (!e) return NULL;
    e->a = tgt;
    if (is_op(cur(p), O_PIPE)) {
        adv(p);
        if (!(e->d = parse_filter_chain(p))) return NULL;
    }
    if (expect_k(p, K_BEND, "end of statement block")) return NULL;
    static const char *const ends[] = {"endset", NULL};
    int which;
    if (!(e->b = parse_body(p, ends, &which, kw)) || close_tag(p)) return NULL;
    return fin(p, e);
}

static int parse_params(P *p, nlist *l)
{
    if (expect_op(p, O_LPAREN)) return -1;
    while (!is_op(cur(p), O_RPAREN)) {
        if (l->n && expect_op(p, O_COMMA)) return -1;
        if (is_op(cur(p), O_RPAREN)) break;
        jtok *t = cur(p);
        if (t->k != K_NAME) { unexpected(p); return -1; }
        jnode *e = mk(p, N_PARAM, t);
        if (!e) return -1;
        e->name.p = t->p;
        e->name.n = t->n;
        adv(p);
        if (is_op(cur(p), O_ASSIGN)) {
            adv(p);
            if (!(e->a = parse_expr(p, 1))) return -1;
        } else if (l->n && l->v[l->n - 1]->a) {
            perr(p, t, "parameter without a default after one with a default");
            return -1;
        }
        if (nl_push(p, l, fin(p, e))) return -1;
    }
    adv(p);
    return 0;
}

static jnode *parse_macro(P *p, const jtok *kw)
{
    jtok *t = cur(p);
    if (t->k != K_NAME) return perr(p, t, "expected the macro's name");
    jnode *e = mk(p, N_MACRO, kw);
    if (!e) return NULL;
    e->name.p = t->p;
    e->name.n = t->n;
    adv(p);
    nlist l = {0};
    unsigned saved_refs = p->refs;
    int saved_loops = p->loops;
    p->refs = 0;
    p->loops = 0;
    if (parse_params(p, &l) || expect_k(p, K_BEND, "end of statement block")) return NULL;
    nl_give(e, &l);
    static const char *const ends[] = {"endmacro", NULL};
    int which;
    if (!(e->b = parse_body(p, ends, &which, kw)) || close_tag(p)) return NULL;
    e->op = (uint16_t)p->refs;
    p->refs = saved_refs;
    p->loops = saved_loops;
    return fin(p, e);
}

static jnode *parse_callblock(P *p, const jtok *kw)
{
    jnode *e = mk(p, N_CALLBLOCK, kw);
    if (!e) return NULL;
    nlist l = {0};
    if (is_op(cur(p), O_LPAREN) && parse_params(p, &l)) return NULL;
    nl_give(e, &l);
    if (!(e->a = parse_expr(p, 1))) return NULL;
    if (e->a->k != N_CALL) return perr(p, kw, "expected a call after 'call'");
    if (expect_k(p, K_BEND, "end of statement block")) return NULL;
    static const char *const ends[] = {"endcall", NULL};
    int which, saved_loops = p->loops;
    unsigned saved_refs = p->refs;
    p->loops = 0;
    if (!(e->b = parse_body(p, ends, &which, kw)) || close_tag(p)) return NULL;
    e->op = (uint16_t)p->refs;
    p->refs = saved_refs;
    p->loops = saved_loops;
    return fin(p, e);
}

static jnode *parse_stmt(P *p)
{
    adv(p); /* {% */
    jtok *kw = cur(p);
    if (kw->k != K_NAME) return perr(p, kw, "expected a statement name after '{%%'");
    adv(p);
    if (is_name(kw, "if")) return parse_if(p, kw);
    if (is_name(kw, "for")) return parse_for(p, kw);
    if (is_name(kw, "set")) return parse_set(p, kw);
    if (is_name(kw, "macro")) return parse_macro(p, kw);
    if (is_name(kw, "call")) return parse_callblock(p, kw);
    if (is_name(kw, "break") || is_name(kw, "continue")) {
        if (!p->loops) return perr(p, kw, "'%.*s' outside of a for loop", (int)kw->n, kw->p);
        jnode *e = mk(p, is_name(kw, "break") ? N_BREAK : N_CONTINUE, kw);
        if (!e || expect_k(p, K_BEND, "end of statement block")) return NULL;
        return e;
    }
    if (is_name(kw, "filter")) {
        jnode *e = mk(p, N_FILTERBLOCK, kw);
        static const char *const ends[] = {"endfilter", NULL};
        int which;
        if (!e || !(e->a = parse_filter_chain(p)) || expect_k(p, K_BEND, "end of statement block")) return NULL;
        if (!(e->b = parse_body(p, ends, &which, kw)) || close_tag(p)) return NULL;
        return fin(p, e);
    }
    if (is_name(kw, "with")) {
        jnode *e = mk(p, N_WITH, kw);
        nlist l = {0};
        if (!e) return NULL;
        while (cur(p)->k != K_BEND) {
            if (l.n && expect_op(p, O_COMMA)) return NULL;
            jtok *t = cur(p);
            jnode *s = mk(p, N_SET, t);
            if (!s || !(s->a = parse_target(p, 0, NULL)) || expect_op(p, O_ASSIGN) || !(s->b = parse_expr(p, 1)))
                return NULL;
            if (nl_push(p, &l, fin(p, s))) return NULL;
        }
        adv(p);
        nl_give(e, &l);
        static const char *const ends[] = {"endwith", NULL};
        int which;
        if (!(e->b = parse_body(p, ends, &which, kw)) || close_tag(p)) return NULL;
        return fin(p, e);
    }
    if (is_name(kw, "generation")) {
        jnode *e = mk(p, N_SCOPE, kw);
        static const char *const ends[] = {"endgeneration", NULL};
        int which;
        if (!e || expect_k(p, K_BEND, "end of statement block")) return NULL;
        if (!(e->b = parse_body(p, ends, &which, kw)) || close_tag(p)) return NULL;
        return fin(p, e);
    }
    static const char *const unsupported[] = {"include", "import", "from", "extends", "block", "autoescape", NULL};
    for (int i = 0; unsupported[i]; i++)
        if (is_name(kw, unsupported[i]))
            return perr(p, kw, "'%s' is not supported (chat templates have no loader)", unsupported[i]);
    return perr(p, kw, "unknown or misplaced tag '%.*s'", (int)(kw->n > 40 ? 40 : kw->n), kw->p);
}

static jnode *parse_body_in(P *p, const char *const *ends, int *which, const jtok *opener);
static jnode *parse_body(P *p, const char *const *ends, int *which, const jtok *opener)
{
    if (enter(p)) return NULL;
    jnode *b = parse_body_in(p, ends, which, opener);
    p->nest--;
    return b;
}
static jnode *parse_body_in(P *p, const char *const *ends, int *which, const jtok *opener)
{
    jnode *body = mk(p, N_BODY, cur(p));
    nlist l = {0};
    if (!body) return NULL;
    for (;;) {
        jtok *t = cur(p);
        jnode *e = NULL;
        if (t->k == K_EOF) {
            if (ends) {
                size_t last = 0;
                while (ends[last + 1]) last++;
                return perr(p, t, "unexpected end of template: '%.*s' at line %u:%u is not closed (expected '%s')",
                            (int)opener->n, opener->p, opener->line, opener->col, ends[last]);
            }
            break;
        }
        if (t->k == K_DATA) {
            e = mk(p, N_DATA, t);
            if (e) e->lit = jv_strn(t->p, t->n);
            adv(p);
        } else if (t->k == K_VBEGIN) {
            adv(p);
            e = mk(p, N_OUTPUT, t);
            if (!e || !(e->a = parse_tuple(p, 1, 0, NULL)) || expect_k(p, K_VEND, "'}}'")) return NULL;
            e = fin(p, e);
        } else if (t->k == K_BBEGIN) {
            jtok *kw = peekn(p, 1);
            if (ends && kw->k == K_NAME)
                for (int i = 0; ends[i]; i++)
                    if (is_name(kw, ends[i])) {
                        *which = i;
                        nl_give(body, &l);
                        return fin(p, body);
                    }
            e = parse_stmt(p);
        } else {
            return unexpected(p);
        }
        if (nl_push(p, &l, e)) return NULL;
    }
    nl_give(body, &l);
    return fin(p, body);
}

int jj_parse(cis2_jinja *t, const char *src, size_t len, cis2_error *err)
{
    P p;
    memset(&p, 0, sizeof p);
    p.mem = &t->mem;
    p.err = err;
    p.lc_line = p.lc_col = 1;
    size_t bad;
    if (cis2_utf8_validate((const unsigned char *)src, len, &bad)) {
        p.s = src;
        p.len = len;
        uint32_t el_, ec_;
        return PERR_OFF(&p, bad, "the template is not valid UTF-8"), CIS2_E_FORMAT;
    }
    char *s = palloc(&p, len + 1);
    if (!s) return err->code;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--; /* keep_trailing_newline off */
    p.s = s;
    p.len = n;
    if (lex(&p)) return err->code;
    p.i = 0;
    int which;
    t->root = parse_body(&p, NULL, &which, NULL);
    if (!t->root) return err->code ? err->code : CIS2_E_INTERNAL;
    return CIS2_OK;
}

/*
 * pretok.c - the pre-tokenizer scanner (CIS-2 §3.1.4 a-b; FACTS §1.14, §2).
 *
 * Digits (§3.1.4.a) splits at Unicode general category N (Rust's
 * char::is_numeric); ByteLevel (§3.1.4.b) then applies the GPT-2 pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * as the reference's Oniguruma does: at each position the first
 * alternative that matches wins, each quantifier is greedy, and the
 * pattern matches every character, so the matches tile the piece.  \s is
 * White_Space, ' ?' is U+0020 only, the contractions are case-sensitive
 * (FACTS §2).  Every match is one pre-token ("isolated" delimiters).
 *
 * Also the NON-NORMATIVE Split patterns of Qwen2.5/Qwen3 and Llama-3
 * (cis2_pretok_split_qwen, cis2_pretok_split_llama3, at the end), a second
 * scanner over the same Unicode 16.0 tables; gpt-oss's o200k pattern
 * (cis2_pretok_split_o200k), a third, over the tables' general-category
 * classes; and the literal-string Split (cis2_pretok_split_literal, Gemma-3).
 */
#include "pretok.h"
#include "tables/unicode_tables.h"

#include <string.h>

int cis2_uclass(uint32_t cp)
{
    if (cp < 128) return cis2_uclass_ascii[cp];
    size_t lo = 0, hi = CIS2_UCLASS_NRANGES;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < cis2_uclass_ranges[mid].lo) hi = mid;
        else if (cp > cis2_uclass_ranges[mid].hi) lo = mid + 1;
        else return cis2_uclass_ranges[mid].cls;
    }
    return UC_OTHER;
}

/* Class of the character at p (< end), its byte length in *len. */
static inline int cls_at(const unsigned char *p, size_t *len)
{
    if (*p < 0x80) { *len = 1; return cis2_uclass_ascii[*p]; }
    return cis2_uclass(cis2_utf8_next(p, len));
}

/* End of the run of characters of class k starting at p. */
static const unsigned char *run_of(const unsigned char *p, const unsigned char *end, int k)
{
    while (p < end) {
        size_t l;
        if (cls_at(p, &l) != k) break;
        p += l;
    }
    return p;
}

/* Length of the GPT-2 pattern's match at p (p < end). */
static size_t gpt2_match(const unsigned char *p, const unsigned char *end)
{
    size_t rem = (size_t)(end - p);
    if (p[0] == '\'' && rem >= 2) {                       /* 's 't 're 've 'm 'll 'd */
        unsigned char a = p[1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (rem >= 3 && ((a == 'r' && p[2] == 'e') || (a == 'v' && p[2] == 'e') ||
                         (a == 'l' && p[2] == 'l')))
            return 3;
    }
    const unsigned char *q = p + (p[0] == ' ');           /* ' ?' */
    if (q < end) {
        size_t l;
        int k = cls_at(q, &l);
        /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': greedy, and the
         * optional space backtracking to empty cannot help (space is \s). */
        if (k == UC_L || k == UC_N || k == UC_OTHER)
            return (size_t)(run_of(q + l, end, k) - p);
    }
    /* p is whitespace: '\s+(?!\S)' gives back the last character when a
     * non-space follows (if the run has two or more), else '\s+'. */
    const unsigned char *r = p, *last = p;
    size_t nchars = 0;
    while (r < end) {
        size_t l;
        if (cls_at(r, &l) != UC_S) break;
        last = r; r += l; nchars++;
    }
    if (r < end && nchars >= 2) return (size_t)(last - p);
    return (size_t)(r - p);
}

/* Digits' char::is_numeric: general category N.  The oracle (npm
 * tokenizers 0.23.2) was built by a Rust whose tables are Unicode 17.0,
 * which adds exactly these N code points to 16.0's (FACTS §1.14; checked
 * against the oracle by tests/tokenizer/diff.js).  The regex's \p{N}
 * (Oniguruma) stays at 16.0, where they are unassigned. */
static inline int is_numeric17(uint32_t cp, int cls)
{
    return cls == UC_N || (cp >= 0x11DE0 && cp <= 0x11DE9) || (cp >= 0x16FF4 && cp <= 0x16FF6);
}

/* Class for the Digits step at p: 1 if numeric; *len its byte length. */
static inline int digit_at(const unsigned char *p, size_t *len)
{
    if (*p < 0x80) { *len = 1; return *p >= '0' && *p <= '9'; }
    uint32_t cp = cis2_utf8_next(p, len);
    return is_numeric17(cp, cis2_uclass(cp));
}

/* Returns nonzero when cb asked to stop. */
static int regex_split(const char *s, size_t n, int use_regex, cis2_pretok_cb cb, void *ctx)
{
    if (n == 0) return 0;
    if (!use_regex) return cb(ctx, s, n);
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        size_t m = gpt2_match(p, end);
        if (cb(ctx, (const char *)p, m)) return 1;
        p += m;
    }
    return 0;
}

void cis2_pretok_split(const char *s, size_t n, int digits_mode, int use_regex,
                       cis2_pretok_cb cb, void *ctx)
{
    if (digits_mode == CIS2_DIGITS_NONE) { regex_split(s, n, use_regex, cb, ctx); return; }
    const unsigned char *u = (const unsigned char *)s;
    size_t seg = 0, i = 0;
    while (i < n) {
        size_t l;
        if (!digit_at(u + i, &l)) { i += l; continue; }
        if (regex_split(s + seg, i - seg, use_regex, cb, ctx)) return;   /* text before */
        size_t j = i + l;
        if (digits_mode == CIS2_DIGITS_CONTIGUOUS)
            while (j < n && digit_at(u + j, &l)) j += l;
        if (regex_split(s + i, j - i, use_regex, cb, ctx)) return;       /* §3.1.4.a: isolated */
        seg = i = j;
    }
    regex_split(s + seg, n - seg, use_regex, cb, ctx);
}

/* ---- NON-NORMATIVE: Qwen2.5's Split pre-tokenizer (outside CIS-2 v0.3b §3) ----
 * The pattern (CIS2_QWEN_SPLIT_REGEX), alternatives in Oniguruma's order:
 *   1 (?i:'s|'t|'re|'ve|'m|'ll|'d)   case-insensitive: s also matches U+017F
 *                                    (its case fold), the others ASCII only
 *   2 [^\r\n\p{L}\p{N}]?\p{L}+       one optional non-letter/number/CR/LF
 *   3 \p{N}                          one number character (Llama-3:
 *                                    \p{N}{1,3}, up to three, greedy)
 *   4 ' '?[^\s\p{L}\p{N}]+[\r\n]*    symbols, then any CR/LF run
 *   5 \s*[\r\n]+                     greedy \s* backtracks to the last CR/LF
 *                                    of the whitespace run
 *   6 \s+(?!\S)                      a run before a non-space gives up its
 *                                    last character
 *   7 \s+
 * Every character starts some match, so the matches tile the piece. */
static inline int is_crlf(unsigned char c) { return c == '\r' || c == '\n'; }

static size_t qwen_match(const unsigned char *p, const unsigned char *end, int nmax)
{
    size_t rem = (size_t)(end - p);
    if (p[0] == '\'' && rem >= 2) {                                   /* 1 */
        unsigned char a = p[1], b = rem >= 3 ? p[2] : 0;
        if (a == 0xC5 && b == 0xBF) return 3;                         /* 'ſ */
        a |= 0x20; b |= 0x20;                                         /* ASCII fold */
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (rem >= 3 && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')))
            return 3;
    }
    size_t l0;
    int k0 = cls_at(p, &l0);
    if (k0 == UC_L) return (size_t)(run_of(p + l0, end, UC_L) - p);  /* 2, no prefix */
    if (k0 != UC_N && !is_crlf(p[0]) && p + l0 < end) {              /* 2, with prefix */
        size_t l1;
        if (cls_at(p + l0, &l1) == UC_L) return (size_t)(run_of(p + l0 + l1, end, UC_L) - p);
    }
    if (k0 == UC_N) {                                                 /* 3 */
        const unsigned char *q = p + l0;
        for (int k = 1; k < nmax && q < end; k++) {
            size_t l;
            if (cls_at(q, &l) != UC_N) break;
            q += l;
        }
        return (size_t)(q - p);
    }
    const unsigned char *q = p + (p[0] == ' ');                       /* 4 */
    if (q < end) {
        size_t l;
        if (cls_at(q, &l) == UC_OTHER) {
            q = run_of(q + l, end, UC_OTHER);
            while (q < end && is_crlf(*q)) q++;
            return (size_t)(q - p);
        }
    }
    /* p is whitespace (k0 == UC_S) */
    const unsigned char *r = p, *last = p, *nl = NULL;
    size_t nchars = 0;
    while (r < end) {
        size_t l;
        if (cls_at(r, &l) != UC_S) break;
        if (is_crlf(*r)) nl = r;
        last = r; r += l; nchars++;
    }
    if (nl) return (size_t)(nl + 1 - p);                              /* 5 */
    if (r < end && nchars >= 2) return (size_t)(last - p);           /* 6 */
    return (size_t)(r - p);                                           /* 6 at the end, or 7 */
}

static void split_qwen_n(const char *s, size_t n, int nmax, cis2_pretok_cb cb, void *ctx)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        size_t m = qwen_match(p, end, nmax);
        if (cb(ctx, (const char *)p, m)) return;
        p += m;
    }
}
void cis2_pretok_split_qwen(const char *s, size_t n, cis2_pretok_cb cb, void *ctx)
{
    split_qwen_n(s, n, 1, cb, ctx);
}
void cis2_pretok_split_llama3(const char *s, size_t n, cis2_pretok_cb cb, void *ctx)
{
    split_qwen_n(s, n, 3, cb, ctx);
}

/* ---- NON-NORMATIVE: the o200k pattern (gpt-oss's Split; docs/tokenizer.md
 * "The o200k pattern") ----
 * CIS2_O200K_SPLIT_REGEX, alternatives in Oniguruma's order, with
 * A = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], B = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
 * P = [^\r\n\p{L}\p{N}] and C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
 *   1 P?A*B+C?    2 P?A+B*C?    3 \p{N}{1,3}    4 ' '?[^\s\p{L}\p{N}]+[\r\n/]*
 *   5 \s*[\r\n]+  6 \s+(?!\S)   7 \s+
 * Oniguruma backtracks: the first way through the alternatives, each
 * optional or repeated part taking the most it can first, that matches is
 * the match (not the longest one).  Lm, Lo and the marks are in both A and
 * B; a mark is also in P (it is not \p{L}).  Every character starts some
 * match, so the matches tile the piece. */
static inline int ug_at(const unsigned char *p, size_t *len)
{
    if (*p < 0x80) { *len = 1; return cis2_ug_ascii[*p]; }
    uint32_t cp = cis2_utf8_next(p, len);
    size_t lo = 0, hi = CIS2_UG_NRANGES;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < cis2_ug_ranges[mid].lo) hi = mid;
        else if (cp > cis2_ug_ranges[mid].hi) lo = mid + 1;
        else return cis2_ug_ranges[mid].cls;
    }
    return 0;
}

/* End of the run of characters that have one of the bits in `any`. */
static const unsigned char *ug_run(const unsigned char *p, const unsigned char *end, int any)
{
    while (p < end) {
        size_t l;
        if (!(ug_at(p, &l) & any)) break;
        p += l;
    }
    return p;
}

/* A*B+ from s (alternative 1 after its prefix): its end, NULL if none.  A*
 * takes the run of A; if a B follows (an Ll: it is not A), B+ takes the
 * run of B from there.  Else B+ needs A* to give back a character that is
 * also B (Lm, Lo, a mark): the last one of the run, which B+ takes alone
 * (what follows it is an Lu/Lt, or ends the run and is not B). */
static const unsigned char *o200k_ab(const unsigned char *s, const unsigned char *end)
{
    const unsigned char *q = s, *both = NULL;
    while (q < end) {
        size_t l;
        int g = ug_at(q, &l);
        if (!(g & UG_A)) {
            if (g & UG_B) return ug_run(q + l, end, UG_B);
            break;
        }
        q += l;
        if (g & UG_B) both = q;
    }
    return both;
}

/* A+B* from s (alternative 2 after its prefix): its end, NULL if none. */
static const unsigned char *o200k_ab2(const unsigned char *s, const unsigned char *end)
{
    size_t l;
    if (s >= end || !(ug_at(s, &l) & UG_A)) return NULL;
    return ug_run(ug_run(s + l, end, UG_A), end, UG_B);
}

/* Length of C = (?i:'s|'t|'re|'ve|'m|'ll|'d) at p, 0 if none: case-
 * insensitive, so s also matches U+017F (its case fold), the others ASCII
 * only (as alternative 1 of Qwen's pattern). */
static size_t o200k_contraction(const unsigned char *p, const unsigned char *end)
{
    size_t rem = (size_t)(end - p);
    if (rem < 2 || p[0] != '\'') return 0;
    unsigned char a = p[1], b = rem >= 3 ? p[2] : 0;
    if (a == 0xC5 && b == 0xBF) return 3;                             /* 'ſ */
    a |= 0x20; b |= 0x20;                                             /* ASCII fold */
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (rem >= 3 && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')))
        return 3;
    return 0;
}

static size_t o200k_match(const unsigned char *p, const unsigned char *end)
{
    size_t l0;
    int g0 = ug_at(p, &l0);
    int pfx = !(g0 & (UG_L | UG_N)) && !is_crlf(p[0]);                /* p[0] is a P */
    if (pfx || (g0 & (UG_A | UG_B))) {
        const unsigned char *e = NULL;
        if (pfx) e = o200k_ab(p + l0, end);                           /* 1, with the prefix */
        if (!e) e = o200k_ab(p, end);                                 /* 1, without */
        if (!e && pfx) e = o200k_ab2(p + l0, end);                    /* 2, with the prefix */
        if (!e) e = o200k_ab2(p, end);                                /* 2, without */
        if (e) return (size_t)(e - p) + o200k_contraction(e, end);
    }
    if (g0 & UG_N) {                                                  /* 3 */
        const unsigned char *q = p + l0;
        for (int k = 1; k < 3 && q < end; k++) {
            size_t l;
            if (!(ug_at(q, &l) & UG_N)) break;
            q += l;
        }
        return (size_t)(q - p);
    }
    const unsigned char *q = p + (p[0] == ' ');                       /* 4 */
    if (q < end) {
        size_t l;
        if (!(ug_at(q, &l) & (UG_L | UG_N | UG_S))) {
            while (q < end) {
                int g = ug_at(q, &l);
                if (g & (UG_L | UG_N | UG_S)) break;
                q += l;
            }
            while (q < end && (is_crlf(*q) || *q == '/')) q++;
            return (size_t)(q - p);
        }
    }
    /* p is whitespace (g0 == UG_S) */
    const unsigned char *r = p, *last = p, *nl = NULL;
    size_t nchars = 0;
    while (r < end) {
        size_t l;
        if (!(ug_at(r, &l) & UG_S)) break;
        if (is_crlf(*r)) nl = r;
        last = r; r += l; nchars++;
    }
    if (nl) return (size_t)(nl + 1 - p);                              /* 5 */
    if (r < end && nchars >= 2) return (size_t)(last - p);           /* 6 */
    return (size_t)(r - p);                                           /* 6 at the end, or 7 */
}

void cis2_pretok_split_o200k(const char *s, size_t n, cis2_pretok_cb cb, void *ctx)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        size_t m = o200k_match(p, end);
        if (cb(ctx, (const char *)p, m)) return;
        p += m;
    }
}

/* ---- NON-NORMATIVE: Split on a literal string, behavior MergedWithPrevious
 * (Gemma-3) ----
 * Each occurrence of the delimiter (leftmost, non-overlapping) is appended
 * to the piece before it, unless that piece is itself a delimiter (then it
 * stands alone), as the reference's SplitDelimiterBehavior::MergedWithPrevious. */
void cis2_pretok_split_literal(const char *s, size_t n, const char *d, size_t dl, cis2_pretok_cb cb, void *ctx)
{
    size_t start = 0, i = 0;
    int prev_match = 0;
    while (dl && i + dl <= n) {
        if (memcmp(s + i, d, dl)) { i++; continue; }
        if (i > start) {                          /* text, then this delimiter merged into it */
            if (cb(ctx, s + start, i + dl - start)) return;
        } else if (prev_match || start == 0) {    /* a delimiter after a delimiter, or first */
            if (cb(ctx, s + i, dl)) return;
        }
        prev_match = 1;
        i += dl;
        start = i;
    }
    if (start < n) cb(ctx, s + start, n - start);
}

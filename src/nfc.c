/*
 * nfc.c - Unicode Normalization Form C (UAX #15) for the NON-NORMATIVE
 * Qwen2.5 tokenizer extension (tokenizer_load.c, tokenizer.c, CIS2_TOK_ALLOW_NONNORMATIVE);
 * CIS-2 v0.3b §3.1.3 itself has no normalizer.
 *
 * Owns: the three NFC steps, exactly as the reference library's normalizer
 * (Rust crate unicode-normalization-alignments) runs them:
 *   1. full canonical decomposition (tables; Hangul syllables
 *      algorithmically, UAX #15 §16 / Unicode ch. 3.12);
 *   2. canonical ordering: each run of non-starters stably sorted by
 *      Canonical_Combining_Class;
 *   3. canonical composition: each character C after the last starter S
 *      composes with S when not blocked (no character between them with
 *      ccc 0 or ccc >= ccc(C)) and (S, C) is a primary composite (not
 *      Full_Composition_Exclusion); Hangul LV / LVT algorithmically.
 * The data is Unicode 9.0 (unicode_nfc.c), the version the reference
 * carries; checked against it by tests/oracle/t_tokenizer_qwen.sh.  The text is
 * normalized segment by segment (see "segments" below), so the scratch is
 * bounded by the longest segment and the output grows with the text.
 * Callers: tokenizer_load.c (added tokens), tokenizer.c (encoding).
 */
#include "nfc.h"
#include "pretok.h"
#include "tables/unicode_nfc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Hangul constants (Unicode ch. 3.12). */
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
       LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

int cis2_nfc_ccc(uint32_t cp)
{
    if (cp < CIS2_NFC_QUICK_BELOW) return 0;
    size_t lo = 0, hi = CIS2_NFC_NCCC;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < cis2_nfc_ccc_ranges[mid].lo) hi = mid;
        else if (cp > cis2_nfc_ccc_ranges[mid].hi) lo = mid + 1;
        else return cis2_nfc_ccc_ranges[mid].ccc;
    }
    return 0;
}

static const cis2_nfc_dec *find_decomp(uint32_t cp)
{
    size_t lo = 0, hi = CIS2_NFC_NDECOMP;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < cis2_nfc_decomp[mid].cp) hi = mid;
        else if (cp > cis2_nfc_decomp[mid].cp) lo = mid + 1;
        else return &cis2_nfc_decomp[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = CIS2_NFC_NCOMP;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cis2_nfc_pair *p = &cis2_nfc_comp[mid];
        if (a < p->a || (a == p->a && b < p->b)) hi = mid;
        else if (a > p->a || b > p->b) lo = mid + 1;
        else return p->c;
    }
    return 0;
}

typedef struct { uint32_t cp; uint8_t ccc; } uch;

/* Stable sort of r[0..n) by ccc (all non-zero): insertion sort for short
 * runs, a counting sort for long ones (no quadratic time on hostile input). */
static int sort_run(uch *r, size_t n, uch **tmp, size_t *tmpcap)
{
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uch x = r[i];
            size_t j = i;
            for (; j > 0 && r[j - 1].ccc > x.ccc; j--) r[j] = r[j - 1];
            r[j] = x;
        }
        return 0;
    }
    if (n > *tmpcap) {
        uch *t = realloc(*tmp, n * sizeof *t);
        if (!t) return -1;
        *tmp = t; *tmpcap = n;
    }
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[r[i].ccc + 1]++;
    for (int k = 1; k < 257; k++) start[k] += start[k - 1];
    for (size_t i = 0; i < n; i++) (*tmp)[start[r[i].ccc]++] = r[i];
    memcpy(r, *tmp, n * sizeof *r);
    return 0;
}

/* ---- segments (memory bounded by the longest segment, not the text; docs/inputs.md "Memory") ----
 * NFC(A B) = NFC(A) NFC(B) when B starts with a code point X that is a
 * starter (ccc 0), never the second character of a primary composite, and
 * whose full decomposition also starts with such a starter: nothing in A
 * can reorder past X or compose with it, and X's decomposition cannot reach
 * back into A.  Every code point below U+0300 qualifies, and so do most
 * letters of other scripts, so real text is normalized a few characters at
 * a time; only a run of marks (or of second characters) is one segment. */
static uint32_t *seconds;   /* sorted, unique b of every (a, b) -> c */
static size_t nseconds;
static pthread_once_t seconds_once = PTHREAD_ONCE_INIT;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void build_seconds(void)
{
    uint32_t *v = malloc(CIS2_NFC_NCOMP * sizeof *v);
    if (!v) return; /* then every code point >= U+0300 counts as unsafe: one segment, still exact */
    for (size_t i = 0; i < CIS2_NFC_NCOMP; i++) v[i] = cis2_nfc_comp[i].b;
    qsort(v, CIS2_NFC_NCOMP, sizeof *v, cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < CIS2_NFC_NCOMP; i++)
        if (!k || v[k - 1] != v[i]) v[k++] = v[i];
    seconds = v;
    nseconds = k;
}

static int is_second(uint32_t cp)
{
    if ((cp >= VBASE && cp < VBASE + VCOUNT) || (cp > TBASE && cp < TBASE + TCOUNT)) return 1;
    size_t lo = 0, hi = nseconds;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (seconds[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < nseconds && seconds[lo] == cp;
}

static int stable_starter(uint32_t cp)
{
    return cis2_nfc_ccc(cp) == 0 && !is_second(cp);
}

/* May a segment start at cp (see above)? */
static int safe_start(uint32_t cp)
{
    if (cp < CIS2_NFC_QUICK_BELOW) return 1;
    if (!seconds || !stable_starter(cp)) return 0;
    if (cp >= SBASE && cp < SBASE + SCOUNT) return 1;          /* decomposes to an L jamo: a stable starter */
    const cis2_nfc_dec *e = cp >= cis2_nfc_decomp[0].cp ? find_decomp(cp) : NULL;
    return !e || stable_starter(cis2_nfc_pool[e->off]);
}

typedef struct { char *p; size_t len, cap; } obuf;

static int put_cp(obuf *o, uint32_t cp)
{
    if (o->len + 4 > o->cap) {
        size_t nc = o->cap ? 2 * o->cap : 256;
        char *np = realloc(o->p, nc);
        if (!np) return -1;
        o->p = np; o->cap = nc;
    }
    char *w = o->p + o->len;
    if (cp < 0x80) { w[0] = (char)cp; o->len += 1; }
    else if (cp < 0x800) { w[0] = (char)(0xC0 | (cp >> 6)); w[1] = (char)(0x80 | (cp & 0x3F)); o->len += 2; }
    else if (cp < 0x10000) {
        w[0] = (char)(0xE0 | (cp >> 12)); w[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        w[2] = (char)(0x80 | (cp & 0x3F)); o->len += 3;
    } else {
        w[0] = (char)(0xF0 | (cp >> 18)); w[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        w[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); w[3] = (char)(0x80 | (cp & 0x3F)); o->len += 4;
    }
    return 0;
}

/* The three NFC steps on one segment u[0..n), appended to o; d/tmp are
 * scratch kept across segments. */
static int nfc_segment(const unsigned char *u, size_t n, uch **d, size_t *dcap, uch **tmp, size_t *tmpcap, obuf *o)
{
    size_t ncp = 0;
    for (size_t i = 0; i < n; ncp++) { size_t l; cis2_utf8_next(u + i, &l); i += l; }
    if (4 * ncp + 1 > *dcap) {                      /* 1. decomposition: each code point becomes at most 4 */
        uch *nd = realloc(*d, (4 * ncp + 1) * sizeof *nd);
        if (!nd) return -1;
        *d = nd; *dcap = 4 * ncp + 1;
    }
    uch *D = *d;
    size_t nd = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = cis2_utf8_next(u + i, &l);
        i += l;
        const cis2_nfc_dec *e;
        if (cp >= SBASE && cp < SBASE + SCOUNT) {
            uint32_t si = cp - SBASE;
            D[nd++] = (uch){LBASE + si / NCOUNT, 0};
            D[nd++] = (uch){VBASE + (si % NCOUNT) / TCOUNT, 0};
            if (si % TCOUNT) D[nd++] = (uch){TBASE + si % TCOUNT, 0};
        } else if (cp >= cis2_nfc_decomp[0].cp && (e = find_decomp(cp))) {
            for (unsigned k = 0; k < e->len; k++) {
                uint32_t c = cis2_nfc_pool[e->off + k];
                D[nd++] = (uch){c, (uint8_t)cis2_nfc_ccc(c)};
            }
        } else {
            D[nd++] = (uch){cp, (uint8_t)cis2_nfc_ccc(cp)};
        }
    }
    for (size_t a = 0; a < nd;) {                   /* 2. canonical ordering */
        if (!D[a].ccc) { a++; continue; }
        size_t b = a;
        while (b < nd && D[b].ccc) b++;
        if (b - a > 1 && sort_run(D + a, b - a, tmp, tmpcap)) return -1;
        a = b;
    }
    size_t k = 0;                                   /* 3. composition, in place (k = output length) */
    long starter = -1;
    int last = 256;                                 /* ccc of the last kept character */
    for (size_t j = 0; j < nd; j++) {
        uch c = D[j];
        if (starter >= 0 && (last < c.ccc || (last == 0 && k - 1 == (size_t)starter))) {
            uint32_t p = compose(D[starter].cp, c.cp);
            if (p) { D[starter].cp = p; continue; }
        }
        if (c.ccc == 0) { starter = (long)k; last = 0; }
        else last = c.ccc;
        D[k++] = c;
    }
    for (size_t j = 0; j < k; j++)
        if (put_cp(o, D[j].cp)) return -1;
    return 0;
}

int cis2_nfc(const char *s, size_t n, char **out, size_t *outlen)
{
    const unsigned char *u = (const unsigned char *)s;
    *out = NULL; *outlen = n;
    int quick = 1;
    for (size_t i = 0; i < n && quick;) {           /* quick test */
        size_t l = 1;
        if (u[i] >= 0x80 && cis2_utf8_next(u + i, &l) >= CIS2_NFC_QUICK_BELOW) quick = 0;
        i += l;
    }
    if (quick) return 0;
    pthread_once(&seconds_once, build_seconds);
    obuf o = {0};
    uch *d = NULL, *tmp = NULL;
    size_t dcap = 0, tmpcap = 0;
    int rc = 0;
    if (n + 16 > o.cap) {
        o.p = malloc(n + 16);
        if (!o.p) return -1;
        o.cap = n + 16;
    }
    for (size_t i = 0; i < n && !rc;) {
        size_t l, j;
        cis2_utf8_next(u + i, &l);
        for (j = i + l; j < n; j += l) {
            if (u[j] < 0x80) { l = 1; break; }      /* ASCII: always a safe start */
            if (safe_start(cis2_utf8_next(u + j, &l))) break;
        }
        rc = nfc_segment(u + i, j - i, &d, &dcap, &tmp, &tmpcap, &o);
        i = j;
    }
    free(d);
    free(tmp);
    if (rc) { free(o.p); return -1; }
    *out = o.p; *outlen = o.len;
    return 0;
}

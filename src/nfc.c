/*
 * nfc.c - Unicode Normalization Form C (UAX #15) for the NON-NORMATIVE
 * Qwen2.5 tokenizer extension (tokenizer.c, CIS2_TOK_ALLOW_NONNORMATIVE);
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
 * carries; checked against it by tests/t_tokenizer_qwen.sh.
 */
#include "nfc.h"
#include "pretok.h"
#include "unicode_nfc.h"

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

static size_t utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

int cis2_nfc(const char *s, size_t n, char **out, size_t *outlen)
{
    const unsigned char *u = (const unsigned char *)s;
    *out = NULL; *outlen = n;
    size_t i = 0, ncp = 0;
    int quick = 1;
    for (; i < n; ncp++) {                          /* quick test */
        size_t l = 1;
        if (u[i] >= 0x80 && cis2_utf8_next(u + i, &l) >= CIS2_NFC_QUICK_BELOW) quick = 0;
        i += l;
    }
    if (quick) return 0;
    /* 1. decomposition: each code point becomes at most 4 */
    uch *d = malloc((4 * ncp + 1) * sizeof *d), *tmp = NULL;
    size_t tmpcap = 0, nd = 0;
    if (!d) return -1;
    for (i = 0; i < n;) {
        size_t l;
        uint32_t cp = cis2_utf8_next(u + i, &l);
        i += l;
        const cis2_nfc_dec *e;
        if (cp >= SBASE && cp < SBASE + SCOUNT) {
            uint32_t si = cp - SBASE;
            d[nd++] = (uch){LBASE + si / NCOUNT, 0};
            d[nd++] = (uch){VBASE + (si % NCOUNT) / TCOUNT, 0};
            if (si % TCOUNT) d[nd++] = (uch){TBASE + si % TCOUNT, 0};
        } else if (cp >= cis2_nfc_decomp[0].cp && (e = find_decomp(cp))) {
            for (unsigned k = 0; k < e->len; k++) {
                uint32_t c = cis2_nfc_pool[e->off + k];
                d[nd++] = (uch){c, (uint8_t)cis2_nfc_ccc(c)};
            }
        } else {
            d[nd++] = (uch){cp, (uint8_t)cis2_nfc_ccc(cp)};
        }
    }
    /* 2. canonical ordering */
    for (size_t a = 0; a < nd;) {
        if (!d[a].ccc) { a++; continue; }
        size_t b = a;
        while (b < nd && d[b].ccc) b++;
        if (b - a > 1 && sort_run(d + a, b - a, &tmp, &tmpcap)) { free(d); free(tmp); return -1; }
        a = b;
    }
    free(tmp);
    /* 3. composition, in place (k = output length) */
    size_t k = 0;
    long starter = -1;
    int last = 256;                                 /* ccc of the last kept character */
    for (size_t j = 0; j < nd; j++) {
        uch c = d[j];
        if (starter >= 0 && (last < c.ccc || (last == 0 && k - 1 == (size_t)starter))) {
            uint32_t p = compose(d[starter].cp, c.cp);
            if (p) { d[starter].cp = p; continue; }
        }
        if (c.ccc == 0) { starter = (long)k; last = 0; }
        else last = c.ccc;
        d[k++] = c;
    }
    size_t bytes = 0;
    for (size_t j = 0; j < k; j++) bytes += utf8_len(d[j].cp);
    char *o = malloc(bytes ? bytes : 1);
    if (!o) { free(d); return -1; }
    size_t w = 0;
    for (size_t j = 0; j < k; j++) {
        uint32_t cp = d[j].cp;
        if (cp < 0x80) o[w++] = (char)cp;
        else if (cp < 0x800) { o[w++] = (char)(0xC0 | (cp >> 6)); o[w++] = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) {
            o[w++] = (char)(0xE0 | (cp >> 12)); o[w++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            o[w++] = (char)(0x80 | (cp & 0x3F));
        } else {
            o[w++] = (char)(0xF0 | (cp >> 18)); o[w++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            o[w++] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[w++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    free(d);
    *out = o; *outlen = w;
    return 0;
}

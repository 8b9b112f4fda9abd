/*
 * utf8.c - the one UTF-8 decoder of the library and its clients (RFC 3629;
 * Unicode §3.9 for invalid input).  Who calls it: the pre-tokenizer
 * (validation of prompts, §3.1, and decoding of validated text), the
 * detokenizer's display text (cis2_utf8_lossy: each maximal subpart of an
 * ill-formed sequence becomes one U+FFFD, as Hugging Face's decode and
 * Python's errors="replace" do), and through cis2_toolkit.h the server
 * (token strings, text offsets, streamed text held back until a sequence
 * is whole).  One table of valid lead and second bytes decides all of it,
 * so "valid" means the same everywhere.
 */
#include "cis2_toolkit.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* The lead byte's sequence length (0: never a lead) and the range of the
 * second byte (Unicode Table 3-7: no overlongs, surrogates or > U+10FFFF). */
static size_t lead(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c == 0xE0) { *lo = 0xA0; return 3; }
    if (c == 0xED) { *hi = 0x9F; return 3; }
    if (c >= 0xE1 && c <= 0xEF) return 3;
    if (c == 0xF0) { *lo = 0x90; return 4; }
    if (c == 0xF4) { *hi = 0x8F; return 4; }
    if (c >= 0xF1 && c <= 0xF3) return 4;
    return 0;
}

size_t cis2_utf8_unit(const unsigned char *s, size_t n, uint32_t *cp, int *valid)
{
    unsigned char lo, hi;
    size_t need = lead(s[0], &lo, &hi), j = 1;
    *valid = 1;
    if (need == 1) { *cp = s[0]; return 1; }
    *cp = 0xFFFD;
    if (need == 0) { *valid = 0; return 1; }
    uint32_t v = s[0] & (0x7F >> need);
    for (; j < need && j < n; j++) {
        unsigned char d = s[j];
        if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xBF)) break;
        v = v << 6 | (d & 0x3F);
    }
    if (j < need) *valid = j == n ? -1 : 0; /* -1: every byte so far fits, the input ended */
    else *cp = v;
    return j;
}

uint32_t cis2_utf8_next(const unsigned char *s, size_t *len)
{
    unsigned char c = s[0];
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F); }
    if (c < 0xF0) {
        *len = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
           (s[3] & 0x3F);
}

int cis2_utf8_validate(const unsigned char *s, size_t n, size_t *bad)
{
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) { i++; continue; } /* ASCII: no call (prompts can be 100 MB) */
        uint32_t cp;
        int valid;
        size_t k = cis2_utf8_unit(s + i, n - i, &cp, &valid);
        if (valid != 1) {
            if (bad) *bad = i;
            return -1;
        }
        i += k;
    }
    return 0;
}

size_t cis2_utf8_chars(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t cis2_utf8_lossy_into(const unsigned char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int valid;
        size_t u = cis2_utf8_unit(s + i, n - i, &cp, &valid);
        if (valid == 1) memcpy(o + k, s + i, u), k += u;
        else memcpy(o + k, "\xEF\xBF\xBD", 3), k += 3; /* U+FFFD */
        i += u;
    }
    return k;
}

char *cis2_utf8_lossy(const char *s, size_t n, size_t *len)
{
    char *o = malloc(3 * n + 1); /* each bad byte -> 3 bytes */
    if (!o) return NULL;
    *len = cis2_utf8_lossy_into((const unsigned char *)s, n, o);
    o[*len] = 0;
    return o;
}

/*
 * nfc.h - Unicode NFC (canonical decomposition, canonical ordering,
 * canonical composition, UAX #15) for the tokenizer's NON-NORMATIVE
 * Qwen2.5 extension: CIS-2 v0.3b §3.1.3 admits no normalizer (FACTS §2).
 * Exact to the reference library's NFC normalizer, which carries Unicode
 * 9.0 data (tables in unicode_nfc.c, see tools/gen-unicode-tables).
 */
#ifndef CIS2_NFC_H
#define CIS2_NFC_H

#include <stddef.h>
#include <stdint.h>

/* Canonical_Combining_Class of cp (0 for starters and unknown code points). */
int cis2_nfc_ccc(uint32_t cp);

/* NFC of s[0..n) (valid UTF-8).  Returns 0 with *out = NULL when s is
 * already NFC by the quick test (no code point >= CIS2_NFC_QUICK_BELOW),
 * 0 with *out a malloc'd buffer of *outlen bytes otherwise, -1 when out of
 * memory. */
int cis2_nfc(const char *s, size_t n, char **out, size_t *outlen);

#endif

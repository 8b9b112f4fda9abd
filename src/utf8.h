/*
 * utf8.h - UTF-8 inside the library (utf8.c; the public cis2_utf8_unit and
 * cis2_utf8_chars are in cis2_toolkit.h).
 */
#ifndef CIS2_UTF8_H
#define CIS2_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The code point at s of already validated UTF-8, its length in *len. */
uint32_t cis2_utf8_next(const unsigned char *s, size_t *len);
/* 0 if s[0..n) is valid UTF-8, else -1 with the offset of the first
 * ill-formed or cut-short sequence in *bad (may be NULL). */
int cis2_utf8_validate(const unsigned char *s, size_t n, size_t *bad);

/* s[0..n) as UTF-8 with one U+FFFD for each maximal ill-formed subpart
 * (Rust's String::from_utf8_lossy, which the reference's decode uses):
 * into o (room for 3n bytes), returning its length; or malloc'ed and
 * NUL-terminated, NULL when out of memory. */
size_t cis2_utf8_lossy_into(const unsigned char *s, size_t n, char *o);
char *cis2_utf8_lossy(const char *s, size_t n, size_t *len);

#endif

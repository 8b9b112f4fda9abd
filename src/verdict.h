/*
 * verdict.h - building cis2_verdict values (include/cis2.h section 7):
 * fields appended in report order, every string owned by the verdict.
 * Used by verify.c (verify, check, compare) and trace_diff.c.
 */
#ifndef CIS2_VERDICT_H
#define CIS2_VERDICT_H

#include "cis2_toolkit.h" /* and cis2.h */

/* Starts an empty verdict (kind OK, code 0, no fields); source is copied. */
int cis2_vd_init(cis2_verdict *v, const char *source);
/* Appends a field with a printf-formatted detail.  Out of memory marks the
 * verdict (cis2_vd_finish reports it). */
void cis2_vd_field(cis2_verdict *v, const char *key, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Sets kind, code and summary ("NAME" or "NAME (details)"). */
void cis2_vd_set(cis2_verdict *v, int kind, int code, const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* CIS2_E_NOMEM if any allocation failed along the way, else CIS2_OK. */
int cis2_vd_finish(cis2_verdict *v, cis2_error *err);
/* Frees what one verdict owns (not the struct). */
void cis2_vd_clear(cis2_verdict *v);

/* "a b c": space-separated names of the fields with this status. */
char *cis2_vd_names(const cis2_verdict *v, int status);

#endif

/* ---- the field lines every judgment shares ---- */
/* `KEY ok` or `KEY MISMATCH expected=A got=B` (hex); returns 1 on a mismatch. */
int cis2_vd_digest(cis2_verdict *v, const char *key, const uint8_t want[32], const uint8_t got[32]);
/* The same for id lists (decimal CSV). */
int cis2_vd_ids(cis2_verdict *v, const char *key, const uint32_t *want, size_t nw, const uint32_t *got, size_t ng);
/* Appends " key" (or "key") to a space-separated list of names. */
void cis2_vd_name(char *list, size_t cap, const char *key);
/* "1,2,3", malloc'ed (NULL when out of memory). */
char *cis2_vd_csv(const uint32_t *ids, size_t n);
/* The receipt's spec version and dtype must be what this build runs: if
 * not, sets the verdict UNSUPPORTED and returns 1; else records the
 * spec-version (and, for the extension, extension) line. */
struct cis2_receipt;
int cis2_vd_supported(cis2_verdict *v, const struct cis2_receipt *r);

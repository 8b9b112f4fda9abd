/*
 * receipt.h - the "CIS-2-RECEIPT v1" text format (FACTS.md §6): render and
 * strict parse.  The receipt records one run's inputs and every §12 digest
 * so that `cis2 verify` can recompute it and `cis2 compare` can judge two.
 *
 * Format (LF line ends, the last line ends with LF too): the first line is
 * `CIS-2-RECEIPT v1`, then exactly one `key value` line per key, separated
 * by one space, in this order:
 *   spec-version tokens        (e.g. 0.3b)
 *   weights-sha256 / config-sha256 / tokenizer-sha256   (§2.1, 64 lowercase hex)
 *   prompt-hex                 raw prompt bytes, lowercase hex, non-empty
 *   prompt-token-ids           decimal u32 CSV (§3.1 encode of the prompt)
 *   gen-toks                   decimal, >= 1
 *   dtype                      (fp32)
 *   table-digest               §6.6
 *   inv-freq-table-digest      §7.2
 *   generated-token-ids        decimal u32 CSV, exactly gen-toks ids
 *   argmax-digest              §12.2
 *   witness-digest             §12.1 (CIS2_REF)
 * CSV elements are non-empty, have no leading zeros ("0" itself is fine),
 * and are at most 4294967295.  Values contain no whitespace.
 */
#ifndef CIS2_RECEIPT_H
#define CIS2_RECEIPT_H

#include <stddef.h>
#include <stdint.h>

#include "cis2.h"

#define CIS2_RECEIPT_MAGIC "CIS-2-RECEIPT v1"
#define CIS2_RECEIPT_MAX_FILE (64u << 20) /* larger files are refused (CIS2_E_FORMAT) */
#define CIS2_RECEIPT_NKEYS 13

struct cis2_receipt {
    char spec_version[32];          /* printable ASCII, no whitespace */
    uint8_t weights_sha[32], config_sha[32], tokenizer_sha[32];
    uint8_t *prompt;                /* raw bytes (malloc'ed) */
    size_t prompt_len;
    uint32_t *prompt_ids;           /* malloc'ed */
    size_t n_prompt;
    uint32_t gen_toks;
    char dtype[16];
    uint8_t table_digest[32], inv_freq_digest[32];
    uint32_t *generated;            /* malloc'ed, gen_toks ids */
    uint8_t argmax[32], witness[32];
    char *source;                   /* the name it was parsed under ("" if made) */
    char *get_text;                 /* cis2_receipt_get's cache: the rendered text, */
    const char *get_val[CIS2_RECEIPT_NKEYS]; /* its values NUL-terminated in place */
};

/* The public, allocating API (cis2_receipt_parse, _load, _save, _get, _free,
 * include/cis2.h) wraps these, which work on a caller's struct. */

/* Key names in receipt order (index 0..CIS2_RECEIPT_NKEYS-1). */
const char *cis2_receipt_key(size_t i);

/* Renders r as receipt text: *out is malloc'ed and NUL-terminated, *len its
 * length.  Fails (CIS2_E_FORMAT) if r could not be parsed back: empty prompt
 * or id list, gen_toks 0, whitespace in spec_version or dtype. */
int cis2_receipt_render(const cis2_receipt *r, char **out, size_t *len, cis2_error *err);

/* Strict parse of `len` bytes; name prefixes every message, which names the
 * line number and the reason.  On failure *r is left empty (free-able). */
int cis2_receipt_parse_into(const char *buf, size_t len, const char *name, cis2_receipt *r, cis2_error *err);

int cis2_receipt_load_into(const char *path, cis2_receipt *r, cis2_error *err);
int cis2_receipt_save_to(const char *path, const cis2_receipt *r, cis2_error *err);

/* 1 if every field is equal. */
int cis2_receipt_equal(const cis2_receipt *a, const cis2_receipt *b);
/* Deep copy (CIS2_E_NOMEM on failure). */
int cis2_receipt_copy_into(cis2_receipt *dst, const cis2_receipt *src, cis2_error *err);
/* Frees the fields and zeroes *r (the struct itself stays). */
void cis2_receipt_clear(cis2_receipt *r);
/* A zeroed receipt on the heap (NULL when out of memory). */
cis2_receipt *cis2_receipt_new(void);

#endif

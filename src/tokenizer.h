/*
 * tokenizer.h - internal interface of the byte-level BPE tokenizer
 * (CIS-2 §3.1; the public API is in include/cis2.h).
 */
#ifndef CIS2_TOKENIZER_H
#define CIS2_TOKENIZER_H

#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "utf8.h"

/* Limits (docs/inputs.md): a tokenizer.json larger than CIS2_TOK_MAX_FILE
 * or whose JSON would cost more than CIS2_TOK_MAX_JSON_COST of jansson
 * heap (jsonlim.h) is refused before it is parsed (CIS2_E_FORMAT); so are
 * more than CIS2_TOK_MAX_ADDED added tokens or more than
 * CIS2_TOK_MAX_ADDED_BYTES of added-token content.  Real files are far
 * below: SmolLM2's is 2.1 MB, Qwen2.5's 7 MB, Llama-3's 9 MB, with at most
 * a few hundred added tokens of a few dozen bytes. */
#define CIS2_TOK_MAX_FILE (64u << 20)
#define CIS2_TOK_MAX_JSON_COST (384ull << 20)
#define CIS2_TOK_MAX_ADDED (1u << 20)
#define CIS2_TOK_MAX_ADDED_BYTES (8u << 20)
/* The patterns added tokens are matched by (a normalized token's content
 * after the normalizer) hold at most this many bytes in all (the automata
 * cost about 30 bytes per byte of pattern). */
#define CIS2_TOK_MAX_ADDED_PATTERN_BYTES (16u << 20)
/* A normalizer that could make a text more than this many times longer
 * (Replace content longer than its pattern, chained) is refused at load
 * (docs/tokenizer.md "Normalizers"): Llama-2's Prepend + Replace needs 12,
 * Gemma-3's Replace and Qwen's NFC 3. */
#define CIS2_TOK_MAX_NORM_GROWTH 32

/* Loads a tokenizer.json already in memory (e.g. cis2_model's
 * tokenizer_json, the bytes that were hashed): name prefixes messages. */
int cis2_tokenizer_load_mem(cis2_tokenizer **out, const char *json, size_t len, const char *name, unsigned flags,
                            cis2_error *err);
/* cis2_tokenizer_load_ext that also gives the sha256 of exactly the bytes
 * parsed (§2.1), from the one read; sha may be NULL. */
int cis2_tokenizer_load_file(cis2_tokenizer **out, const char *path, unsigned flags, uint8_t sha[32],
                             cis2_error *err);

/* cis2_tokenizer_encode that stops as soon as the ids would exceed
 * max_ids: CIS2_E_USAGE "prompt is longer than MAX tokens", after work and
 * memory bounded by max_ids, not by len (a 100 MB prompt is refused at
 * once: each pre-token of k bytes with a token gives at least
 * k / (longest token in bytes) ids, checked before it is merged).
 * max_ids SIZE_MAX: no limit (= cis2_tokenizer_encode). */
int cis2_tokenizer_encode_max(const cis2_tokenizer *t, const char *text, size_t len, size_t max_ids,
                              uint32_t **ids, size_t *n, cis2_error *err);

/* cis2_tokenizer_encode_max with cis2_tokenizer_encode_ext's flags. */
int cis2_tokenizer_encode_flags(const cis2_tokenizer *t, const char *text, size_t len, unsigned flags,
                                size_t max_ids, uint32_t **ids, size_t *n, cis2_error *err);

/* The post-processor's ids before and after the text with
 * CIS2_TOK_ADD_SPECIAL (TemplateProcessing single; none: 0 and 0). */
void cis2_tokenizer_special_ids(const cis2_tokenizer *t, const uint32_t **pre, size_t *npre, const uint32_t **post,
                                size_t *npost);

/* The 256-entry byte -> code point map of §3.1.5.a. */
uint32_t cis2_byte_to_unicode(uint8_t b);

/* The bytes token `id` stands for (for decode); NULL if the id is unknown. */
const char *cis2_tokenizer_token_bytes(const cis2_tokenizer *t, uint32_t id, size_t *len);

/* cis2_utf8_lossy, the display text of bytes: utf8.h. */

/* cis2_tokenizer_decode, also giving the length (the text may hold NULs). */
char *cis2_tokenizer_decode_n(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);

#endif

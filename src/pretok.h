/*
 * pretok.h - the byte-level BPE pre-tokenizer scanner (CIS-2 §3.1.4,
 * FACTS §2): the Digits split and the GPT-2 pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with Oniguruma (leftmost-first alternation) semantics, hand-written over
 * the Unicode 16.0 tables in unicode_tables.c.  Input must be valid UTF-8
 * (the caller validates); output is byte ranges of the input.
 */
#ifndef CIS2_PRETOK_H
#define CIS2_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#include "utf8.h"

enum cis2_digits_mode {
    CIS2_DIGITS_NONE = 0,       /* no Digits pre-tokenizer                */
    CIS2_DIGITS_INDIVIDUAL = 1, /* individual_digits=true: each digit alone */
    CIS2_DIGITS_CONTIGUOUS = 2  /* individual_digits=false: digit runs     */
};

/* Class of a code point: UC_L, UC_N, UC_S or UC_OTHER (unicode_tables.h). */
int cis2_uclass(uint32_t cp);

/* cis2_utf8_next and cis2_utf8_validate: utf8.h, the one decoder. */

/* Splits s[0..n) (valid UTF-8) into pre-tokens: first the Digits split
 * (mode), then, if use_regex, the GPT-2 pattern on each piece; calls
 * cb(ctx, start, len) for every non-empty pre-token in order, until cb
 * returns nonzero (the scan then stops: encode_max's limit). */
typedef int (*cis2_pretok_cb)(void *ctx, const char *start, size_t len);
void cis2_pretok_split(const char *s, size_t n, int digits_mode, int use_regex,
                       cis2_pretok_cb cb, void *ctx);

/* NON-NORMATIVE extension (outside CIS-2 v0.3b §3): Qwen2.5's Split
 * pre-tokenizer, behavior Isolated, with the pattern CIS2_QWEN_SPLIT_REGEX
 * (Oniguruma semantics, see pretok.c); calls cb for every match in order
 * (the matches tile s), until cb returns nonzero. */
#define CIS2_QWEN_SPLIT_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
void cis2_pretok_split_qwen(const char *s, size_t n, cis2_pretok_cb cb, void *ctx);
/* The same scanner with Llama-3's pattern, which differs only in \p{N}{1,3}
 * for \p{N} (CIS2_LLAMA3_SPLIT_REGEX). */
#define CIS2_LLAMA3_SPLIT_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
void cis2_pretok_split_llama3(const char *s, size_t n, cis2_pretok_cb cb, void *ctx);
/* The same for gpt-oss's o200k pattern (o200k_harmony's tokenizer.json),
 * a scanner of its own (pretok.c; docs/tokenizer.md "The o200k pattern"). */
#define CIS2_O200K_SPLIT_REGEX \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
void cis2_pretok_split_o200k(const char *s, size_t n, cis2_pretok_cb cb, void *ctx);
/* Split on the literal d[0..dl), behavior MergedWithPrevious (Gemma-3's
 * pre-tokenizer): calls cb for every piece in order (they tile s). */
void cis2_pretok_split_literal(const char *s, size_t n, const char *d, size_t dl, cis2_pretok_cb cb, void *ctx);

#endif

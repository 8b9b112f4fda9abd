/*
 * tokenizer.h - internal interface of the byte-level BPE tokenizer
 * (CIS-2 §3.1; the public API is in include/cis2.h).
 */
#ifndef CIS2_TOKENIZER_H
#define CIS2_TOKENIZER_H

#include "cis2.h"

/* The 256-entry byte -> code point map of §3.1.5.a. */
uint32_t cis2_byte_to_unicode(uint8_t b);

/* The bytes token `id` stands for (for decode); NULL if the id is unknown. */
const char *cis2_tokenizer_token_bytes(const cis2_tokenizer *t, uint32_t id, size_t *len);

/* Bytes rendered as UTF-8 with U+FFFD for each invalid sequence, as
 * cis2_tokenizer_decode renders the ids' bytes (malloc'ed, NUL-terminated). */
char *cis2_utf8_lossy(const char *s, size_t n, size_t *len);

/* cis2_tokenizer_decode, also giving the length (the text may hold NULs). */
char *cis2_tokenizer_decode_n(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);

#endif

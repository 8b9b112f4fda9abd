/*
 * jsonlim.h - a memory bound for JSON inputs, checked before jansson
 * allocates anything (docs/inputs.md "Memory").
 *
 * jansson turns 3 bytes of `{},` into about 250 bytes of heap, so a size
 * limit alone does not bound memory: 40 MB of `[{},{},...]` would need
 * 3 GB.  cis2_json_cost_check scans the text once (linear, no allocation),
 * counts the values jansson would build and refuses the input when their
 * estimated heap cost exceeds the caller's budget.  The cost model is an
 * upper bound of jansson 2.14's allocations with glibc malloc overheads
 * (measured on x86-64 and aarch64, tests/unit/test_fileio.c checks it against
 * the real heap):
 *   object 256 + per value 32, array 160 + per value 32,
 *   string 96 + its raw length (keys too, held in the hash table),
 *   number 48, true/false/null 0 (shared singletons).
 * The scan does not validate: malformed JSON is jansson's to reject.
 * Callers: config.c, genconfig.c, tokenizer_load.c, safetensors.c; the
 * CLI's prompt files.
 *
 * cis2_json_loadb_wide is json_loadb for the files of a model directory
 * (config.json, tokenizer.json, the shard index; serve reads
 * tokenizer_config.json through cis2_json_wide_ints itself): an integer
 * beyond int64 is read as the real number it is, never a refusal of the
 * whole file (docs/inputs.md "JSON numbers").  safetensors headers keep
 * plain json_loadb: every integer there is a size or an offset, and one
 * beyond int64 cannot describe a file.
 */
#ifndef CIS2_JSONLIM_H
#define CIS2_JSONLIM_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cis2_toolkit.h" /* and cis2.h */

typedef struct cis2_json_cost {
    uint64_t objects, arrays, strings, string_bytes, numbers, literals;
    uint64_t bytes;  /* the estimate */
} cis2_json_cost;

/* Fills *c (may be NULL) for buf[0..len). */
void cis2_json_cost_of(const char *buf, size_t len, cis2_json_cost *c);
/* cis2_json_cost_check and cis2_json_wide_ints are in cis2_toolkit.h (the
 * program's JSON inputs use them too). */

/* json_loadb(buf, len, flags, je) of the text with cis2_json_wide_ints
 * applied; NULL with je->text "out of memory" when the copy cannot be
 * made. */
json_t *cis2_json_loadb_wide(const char *buf, size_t len, size_t flags, json_error_t *je);

/* A model directory's JSON file (config.json, generation_config.json):
 * cis2_json_cost_check against budget, then cis2_json_loadb_wide with
 * duplicate keys refused, into *root (the caller's to json_decref);
 * CIS2_OK, or the cost check's error or CIS2_E_FORMAT "NAME: invalid JSON
 * (...)" with *root NULL. */
int cis2_json_load_model_file(const char *buf, size_t len, uint64_t budget, const char *name, const char *what,
                              json_t **root, cis2_error *err);

#endif

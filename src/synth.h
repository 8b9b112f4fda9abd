/*
 * synth.h - deterministic synthetic checkpoints (`cis2 synth`): a
 * model.safetensors with the §2.5 tensor names (plus §9.1 q/k/v biases and
 * §11.1's untied lm_head where the shape has them), a config.json that
 * cis2_config_load reads back to the same shape, and a tokenizer.json.
 */
#ifndef CIS2_SYNTH_H
#define CIS2_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */

/* cis2_synth_shape and the functions below are public: include/cis2_toolkit.h, section 4. */

size_t cis2_synth_shape_count(void);
const cis2_synth_shape *cis2_synth_shape_at(size_t i);
const cis2_synth_shape *cis2_synth_find_shape(const char *name); /* NULL if unknown */

/* Writes out_dir/{model.safetensors,config.json,tokenizer.json} (creating
 * out_dir and its parents if missing).  tokenizer_src: a tokenizer.json to
 * copy byte for byte, or NULL for the minimal 256-symbol byte-level BPE one.
 * The weights depend only on (shape, seed, tensor name): bit-identical on
 * every ISA and compiler.  Returns CIS2_OK or an error code. */
int cis2_synth_write(const char *shape, uint64_t seed, const char *out_dir, const char *tokenizer_src,
                     cis2_error *err);

/* The same for the shape a real config.json describes (copied byte for
 * byte, so config_sha256 is the real one): Qwen2 configs get q/k/v biases,
 * an untied config gets lm_head.weight. */
int cis2_synth_write_config(const char *config_path, uint64_t seed, const char *out_dir, const char *tokenizer_src,
                            cis2_error *err);

/* The config.json text cis2_synth_write writes for a built-in shape
 * (malloc'ed, NUL-terminated, *len its length), or NULL (unknown shape,
 * out of memory). */
char *cis2_synth_shape_config(const char *shape, size_t *len);

/* The minimal tokenizer.json (NUL-terminated, caller frees), or NULL. */
char *cis2_synth_min_tokenizer_json(void);

#endif

/*
 * cis2_toolkit.h - the toolkit beside the engine: what the `cis2` program,
 * the tests and tools use around an engine, installed with include/cis2.h
 * and exported by the same libraries (`pkg-config cis2`).  The engine's
 * contract is cis2.h alone; nothing here is needed to open a checkpoint,
 * generate, verify or make receipts.
 *
 * Contents
 *   1. Files: inputs read once, outputs written whole or not at all
 *   2. Pinned arithmetic, SHA-256 and the self-test (the spec's §5-§7
 *      functions one by one, for tests and independent checks)
 *   3. The tokenizer on its own (§3.1), without weights
 *   4. Synthetic checkpoints (for tests and benchmarks)
 *   5. UTF-8: the library's one decoder
 *   6. Chat templates: a checkpoint's Jinja chat template rendered as
 *      Hugging Face transformers renders it
 *
 * The conventions of cis2.h hold (status codes, cis2_error, cis2_free,
 * the floating-point environment restored on return).
 */
#ifndef CIS2_TOOLKIT_H
#define CIS2_TOOLKIT_H

#include "cis2.h"

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * 1. Files
 * ====================================================================== */

/* Reads a regular file exactly once (a FIFO or device is CIS2_E_IO, larger
 * than limit CIS2_E_FORMAT naming `what`); *buf is NUL-terminated. */
CIS2_API int cis2_read_file(const char *path, size_t limit, const char *what, char **buf, size_t *len,
                            cis2_error *err);
/* Output files, whole or not at all: a temporary file beside the target,
 * renamed over it by commit (which fsyncs); abort removes it. */
typedef struct cis2_out cis2_out;
CIS2_API int cis2_out_open(cis2_out **o, const char *path, cis2_error *err);
CIS2_API FILE *cis2_out_stream(cis2_out *o);
CIS2_API int cis2_out_commit(cis2_out *o, cis2_error *err);
CIS2_API void cis2_out_abort(cis2_out *o);
CIS2_API int cis2_write_file(const char *path, const void *data, size_t len, cis2_error *err);
/* Before any work: path's directory exists and is writable, path is not a
 * directory, not one of `inputs` (same file) and not one of `outputs`. */
CIS2_API int cis2_check_output_path(const char *path, const char *const *inputs, size_t n_inputs,
                                    const char *const *outputs, size_t n_outputs, cis2_error *err);
/* JSON inputs (docs/inputs.md "Memory" and "JSON numbers"), both before
 * parsing.  cis2_json_cost_check: CIS2_OK, or CIS2_E_FORMAT "NAME: its
 * JSON would take about N MiB of memory to parse, over the M MiB limit
 * for WHAT" when the text's jansson tree would take more than max_bytes
 * of heap (a linear scan, no allocation).  cis2_json_wide_ints: jansson
 * refuses a whole file for one integer beyond 64 bits ("too big
 * integer"), as real files have them (Llama-3's tokenizer_config.json
 * "model_max_length": 1000000000000000019884624838656); *out (cis2_free)
 * is a copy of the text in which each such integer is written as the real
 * number it is (beyond a double's range: the largest double, same sign),
 * so the file parses and a reader that wants an integer finds a number
 * too big for one.  *out is NULL when there is none (parse buf as it is);
 * strings are left alone.  CIS2_E_NOMEM. */
CIS2_API int cis2_json_cost_check(const char *buf, size_t len, uint64_t max_bytes, const char *name,
                                  const char *what, cis2_error *err);
/* The estimate itself (bytes of jansson heap) for callers that share one
 * budget among many texts (`cis2 score --batch`'s lines). */
CIS2_API uint64_t cis2_json_cost_bytes(const char *buf, size_t len);
CIS2_API int cis2_json_wide_ints(const char *buf, size_t len, char **out, size_t *out_len, cis2_error *err);
/* A prompt file (`cis2 run --prompt-file`): a JSON array of strings, or
 * one prompt per line (LF or CR LF).  Read once, at most 256 MiB, a JSON
 * array's memory bounded before it is parsed; an empty prompt, a NUL or
 * more than max prompts are CIS2_E_FORMAT naming the line or element.
 * text[i] (len[i] bytes, not NUL-terminated) stay valid until
 * cis2_prompts_free. */
typedef struct cis2_prompts {
    size_t n;
    const char **text;
    size_t *len;
    void *priv;
} cis2_prompts;
CIS2_API int cis2_prompts_load(const char *path, size_t max, cis2_prompts **out, cis2_error *err);
CIS2_API void cis2_prompts_free(cis2_prompts *p);
/* For programs: SIGINT/SIGTERM remove every temporary file and directory
 * the library has open, then the signal takes its default action. */
CIS2_API void cis2_cleanup_install(void);
/* A fresh directory in $TMPDIR (else /tmp) named PREFIX.XXXXXX, removed by
 * the handlers above if the program is interrupted; cis2_rmtree_tmp
 * removes it (and its files). */
CIS2_API int cis2_mkdtemp(char *out, size_t cap, const char *prefix, cis2_error *err);
CIS2_API void cis2_rmtree_tmp(const char *dir);

/* ======================================================================
 * 2. Pinned arithmetic, SHA-256 and the self-test
 * ====================================================================== */

CIS2_API float cis2_dot_seq(const float *a, const float *b, size_t n);    /* §5.1 */
CIS2_API float cis2_sum_seq(const float *a, size_t n);                    /* §5.3 */
CIS2_API float cis2_exp_pinned(float x);                                  /* §6.2 */
CIS2_API float cis2_ldexp_exact(float x, int k);                          /* §6.2.1 */
CIS2_API float cis2_ln_pinned(float x);                                   /* §6.5 */
CIS2_API float cis2_frexp_exact(float x, int *exponent);                  /* §6.5.1 */
CIS2_API float cis2_sin_pinned(float x);                                  /* §6.3 */
CIS2_API float cis2_cos_pinned(float x);                                  /* §6.3 */
CIS2_API float cis2_rsqrt_cr(float x);                                    /* §6.1 */
CIS2_API float cis2_silu_pinned(float x);                                 /* §6.4 */
CIS2_API float cis2_gelu_tanh_pinned(float x);       /* docs/models.md §M7.5 (Gemma-3) */
CIS2_API float cis2_sigmoid_pinned(float x);         /* docs/models.md §M10.6 (Qwen3.5) */
CIS2_API float cis2_softplus_pinned(float x);        /* docs/models.md §M10.6 (Qwen3.5) */
/* The same functions over arrays, four lanes at a time: the scalar bits. */
CIS2_API void cis2_exp_pinned_n(const float *x, float *out, size_t n);
CIS2_API void cis2_silu_pinned_n(const float *x, float *out, size_t n);
CIS2_API size_t cis2_argmax(const float *v, size_t n);                    /* §11.2 */
/* §8 RMSNorm: out[i] = (x[i]*inv)*w[i], inv = rsqrt(sum_seq(x*x)/n + eps). */
CIS2_API void cis2_rmsnorm(const float *x, const float *w, float eps, size_t n, float *out);
/* §9.3 softmax_seq in place: strict-> max, exp_pinned(v-max), sum_seq, divide. */
CIS2_API void cis2_softmax_seq(float *v, size_t n);
/* §7.4 rotate-half RoPE of one head in place (cos/sin of length half). */
CIS2_API void cis2_rope_rotate(float *head, const float *cosv, const float *sinv, size_t half);
/* §9.2-§9.4 for one query head over len cached positions: k and v rows are
 * `stride` floats apart; scores (len floats) receives the probabilities. */
CIS2_API void cis2_attend_head(const float *q, const float *k, const float *v, size_t stride, size_t len,
                               size_t head_dim, float *scores, float *out);
/* The same with keys in the KV cache's blocked layout: key j, dim d at
 * kt[(j / 16) * (16 * head_dim) + d * 16 + j % 16]; the bits equal
 * cis2_attend_head's. */
CIS2_API void cis2_attend_head_kt(const float *q, const float *kt, const float *v, size_t v_stride, size_t len,
                                  size_t head_dim, float *scores, float *out);
/* §7.1: inv_freq[0..head_dim/2) for rope_theta (as f32). */
CIS2_API void cis2_rope_inv_freq(float rope_theta, size_t head_dim, float *inv_freq);
/* §6.6 and §7.2 digests, 32 raw bytes each. */
CIS2_API void cis2_table_digest(uint8_t out[32]);
CIS2_API void cis2_inv_freq_table_digest(const float *inv_freq, size_t half, uint8_t out[32]);

/* SHA-256 (OpenSSL EVP). */
CIS2_API void cis2_sha256(const void *data, size_t len, uint8_t out[32]);
/* Hashes a regular file read once (CIS2_E_IO for FIFOs, devices, errors). */
CIS2_API int cis2_sha256_file(const char *path, uint8_t out[32], cis2_error *err);
CIS2_API void cis2_hex(const uint8_t *bytes, size_t n, char *out /* 2n+1 */);
CIS2_API int cis2_unhex32(const char *hex, uint8_t out[32]); /* 0 ok, -1 bad */

/* `cis2 selftest`: the §1.3 pin and probes plus the §6.6/§7.2 and
 * §5.1/§6.1 checks, one line per check to `out` (may be NULL). */
CIS2_API int cis2_selftest(FILE *out, cis2_error *err);

/* ======================================================================
 * 3. The tokenizer on its own (§3.1): byte-level BPE from tokenizer.json,
 * exact to Hugging Face `tokenizers` 0.23.1.
 * ====================================================================== */

typedef struct cis2_tokenizer cis2_tokenizer;
/* Reads and validates tokenizer.json; CIS2_E_IO / _FORMAT / _UNSUPPORTED. */
CIS2_API int cis2_tokenizer_load(cis2_tokenizer **out, const char *path, cis2_error *err);
/* With flags: CIS2_TOK_ALLOW_NONNORMATIVE is accepted and has no effect
 * (the families' shapes load by default, docs/tokenizer.md). */
#define CIS2_TOK_ALLOW_NONNORMATIVE 1u
CIS2_API int cis2_tokenizer_load_ext(cis2_tokenizer **out, const char *path, unsigned flags, cis2_error *err);
CIS2_API void cis2_tokenizer_free(cis2_tokenizer *t);
/* As cis2_engine_tokenize; *ids is cis2_free()d. */
CIS2_API int cis2_tokenizer_encode(const cis2_tokenizer *t, const char *text, size_t len, uint32_t **ids,
                                   size_t *n, cis2_error *err);
/* For display: the ids' bytes as UTF-8 with U+FFFD for invalid sequences,
 * unknown ids skipped; NULL only when out of memory. */
CIS2_API char *cis2_tokenizer_decode(const cis2_tokenizer *t, const uint32_t *ids, size_t n);
/* The same, giving the length (the text may hold NULs). */
CIS2_API char *cis2_tokenizer_decode_n(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);
/* Max id + 1 over the model vocab and the added tokens. */
CIS2_API size_t cis2_tokenizer_vocab_size(const cis2_tokenizer *t);
/* 0 when the file uses the non-normative extension (the shapes of Qwen,
 * Llama-3, Llama-2 / Mistral / TinyLlama, Gemma-3). */
CIS2_API int cis2_tokenizer_is_normative(const cis2_tokenizer *t);
/* cis2_tokenizer_encode with flags: CIS2_TOK_ADD_SPECIAL adds the
 * post-processor's special tokens (TemplateProcessing, e.g. Llama-2's
 * BOS), as Hugging Face's encode(text, add_special_tokens=True); without
 * it, encode(text, add_special_tokens=False) (= cis2_tokenizer_encode). */
#define CIS2_TOK_ADD_SPECIAL 1u
CIS2_API int cis2_tokenizer_encode_ext(const cis2_tokenizer *t, const char *text, size_t len, unsigned flags,
                                       uint32_t **ids, size_t *n, cis2_error *err);
/* 1 when add_special_tokens changes the ids (the file's post-processor
 * adds tokens), 0 otherwise (SmolLM2, Qwen, this Llama-3 file). */
CIS2_API int cis2_tokenizer_adds_special(const cis2_tokenizer *t);

/* ======================================================================
 * 4. Synthetic checkpoints (`cis2 synth`): deterministic weights of a
 * given shape, bit-identical on every ISA and compiler, for tests and
 * benchmarks where the real weights are not at hand.
 * ====================================================================== */

typedef struct cis2_synth_shape {
    const char *name;
    const char *model_type;     /* "llama" or "qwen2" */
    int64_t hidden, inter, layers, heads, kv_heads, vocab, max_pos;
    int64_t head_dim;           /* written to config.json when nonzero */
    const char *eps_json;       /* rms_norm_eps exactly as written */
    const char *theta_json;     /* rope_theta exactly as written */
    int tied;                   /* tie_word_embeddings; untied shapes get lm_head.weight */
    int qkv_bias;               /* self_attn.{q,k,v}_proj.bias tensors */
    int odd_data_offset;        /* the data area starts at an odd byte */
} cis2_synth_shape;

CIS2_API size_t cis2_synth_shape_count(void);
CIS2_API const cis2_synth_shape *cis2_synth_shape_at(size_t i);
CIS2_API const cis2_synth_shape *cis2_synth_find_shape(const char *name); /* NULL if unknown */
/* Writes out_dir/{model.safetensors,config.json,tokenizer.json} (making
 * out_dir).  tokenizer_src: a tokenizer.json to copy, or NULL for a minimal
 * byte-level one whose ids 0..255 are the bytes.  A shape modelled on a
 * real checkpoint (smollm2-135m, smollm2-360m, qwen2.5-0.5b) has its real
 * config.json's bos/eos (and pad) token ids. */
CIS2_API int cis2_synth_write(const char *shape, uint64_t seed, const char *out_dir, const char *tokenizer_src,
                              cis2_error *err);
/* The same for the shape a real config.json describes (copied byte for byte). */
CIS2_API int cis2_synth_write_config(const char *config_path, uint64_t seed, const char *out_dir,
                                     const char *tokenizer_src, cis2_error *err);

/* ======================================================================
 * 5. UTF-8: the library's one decoder, for clients that show or cut text
 * ====================================================================== */

/* The unit at s[0..n) (n >= 1): its length, *cp and *valid 1 for a valid
 * sequence; else *cp U+FFFD and *valid 0 for an ill-formed one, whose
 * length is its maximal subpart (at least 1 byte: the library's lossy
 * display text replaces each with one U+FFFD), or -1 for a valid start
 * that the end of the input cut short (its length: the bytes there). */
CIS2_API size_t cis2_utf8_unit(const unsigned char *s, size_t n, uint32_t *cp, int *valid);
/* Code points of valid UTF-8 text (the bytes that are not continuations). */
CIS2_API size_t cis2_utf8_chars(const char *s, size_t n);

/* ======================================================================
 * 6. Chat templates (docs/chat.md): the Jinja2 subset published chat
 * templates use, rendered byte for byte as transformers'
 * apply_chat_template renders them with python3-jinja2 (its sandbox,
 * trim_blocks, lstrip_blocks, loopcontrols, {% generation %}, its tojson,
 * raise_exception, strftime_now).  Which template, which variables and
 * what a server does with the text are the caller's (docs/serving.md
 * "Chat templates").  Bounded: docs/chat.md "Limits" (the defaults).
 * ====================================================================== */

typedef struct cis2_chat_template cis2_chat_template;
/* Parses a template (UTF-8, at most 1 MiB) once; the result is immutable
 * and may be rendered by any number of threads at once.  CIS2_E_FORMAT
 * "template line L:C: ..." for a syntax error, CIS2_E_NOMEM over a limit. */
CIS2_API int cis2_chat_template_parse(const char *src, size_t len, cis2_chat_template **out, cis2_error *err);
CIS2_API void cis2_chat_template_free(cis2_chat_template *t);
/* Renders t with the variables of a JSON object's text (vars_json, len
 * bytes: messages, tools, add_generation_prompt, bos_token, ... as the
 * caller builds them; its objects keep their key order).  now is the time
 * strftime_now formats (NULL: the local time at the call).  *out (free
 * with cis2_free) is NUL-terminated, *out_len its length.  Codes:
 *   CIS2_E_USAGE   the template called raise_exception(message): msg is
 *                  the template's message (one line);
 *   CIS2_E_FORMAT  the render failed ("template line L:C: what"), or
 *                  vars_json is not a JSON object;
 *   CIS2_E_NOMEM   a limit was reached (the message names it). */
CIS2_API int cis2_chat_template_render(const cis2_chat_template *t, const char *vars_json, size_t len,
                                       const struct tm *now, char **out, size_t *out_len, cis2_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CIS2_TOOLKIT_H */

/*
 * receipt.h - the receipt formats: render and strict parse (internal; the
 * public, allocating API of include/cis2.h section 7 wraps these).
 *
 *   "CIS-2-RECEIPT v1" (FACTS.md §6): a greedy run without stop rules,
 *   byte for byte the existing verifiers' format.  13 keys:
 *     spec-version weights-sha256 config-sha256 tokenizer-sha256 prompt-hex
 *     prompt-token-ids gen-toks dtype table-digest inv-freq-table-digest
 *     generated-token-ids argmax-digest witness-digest
 *   "CIS-2-RECEIPT ext-sampling-1" (docs/sampling.md §S7): every other run.
 *     27 keys: spec-version extension weights-sha256 config-sha256
 *     tokenizer-sha256 prompt-hex prompt-token-ids dtype max-toks sampler
 *     temperature top-k top-p min-p seed sequence stop-eos stop-ids
 *     stop-strings params-digest table-digest inv-freq-table-digest gen-toks
 *     finish-reason generated-token-ids token-digest witness-digest
 *   "CIS-2-RECEIPT ext-score-1" (docs/receipts.md "Score receipts"): a
 *     scoring request (docs/sampling.md §S11).  22 keys: spec-version
 *     extension weights-sha256 config-sha256 tokenizer-sha256 dtype
 *     table-digest inv-freq-table-digest context-from context-hex
 *     context-token-ids continuation-from continuation-hex
 *     continuation-token-ids first-scored top-logprobs logprob-bits
 *     all-greedy sum-bits sum-f64-bits logprob-digest witness-digest
 *   A v1 or ext-sampling-1 receipt of a prompt given as ids that no bytes
 *   reproduce (docs/receipts.md "Prompts given as ids") has one more line,
 *   `prompt-from ids`, just before prompt-hex, whose value is then the
 *   ids' raw bytes (`none` for no bytes); every other receipt lacks it.
 * LF line ends (the last line too), one `key value` line per key in that
 * order, one space between.  CSV elements are non-empty, have no leading
 * zeros ("0" itself is fine), and are at most 4294967295.  Values contain
 * no whitespace.  The parser refuses anything render would not produce
 * (docs/receipts.md, docs/sampling.md §S7.3-§S7.4).
 */
#ifndef CIS2_RECEIPT_H
#define CIS2_RECEIPT_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */

#define CIS2_RECEIPT_MAGIC "CIS-2-RECEIPT v1"
#define CIS2_RECEIPT_EXT_MAGIC "CIS-2-RECEIPT ext-sampling-1"
#define CIS2_RECEIPT_SCORE_MAGIC "CIS-2-RECEIPT ext-score-1"
#define CIS2_RECEIPT_MAX_FILE (64u << 20) /* larger files are refused (CIS2_E_FORMAT) */
#define CIS2_RECEIPT_NKEYS 14             /* v1, the optional prompt-from line included */
#define CIS2_RECEIPT_EXT_NKEYS 28         /* ext-sampling-1, likewise */
#define CIS2_RECEIPT_SCORE_NKEYS 22

/* where a score receipt's part came from (context-from, continuation-from) */
enum { CIS2_FROM_NONE = 0, CIS2_FROM_TEXT, CIS2_FROM_IDS };

struct cis2_receipt {
    int ext;                        /* 0: v1 (or ext-score-1), 1: ext-sampling-1 */
    int score;                      /* 1: ext-score-1 (ext is 0) */
    char spec_version[32];          /* printable ASCII, no whitespace */
    uint8_t weights_sha[32], config_sha[32], tokenizer_sha[32];
    int prompt_from_ids;            /* 1: the `prompt-from ids` line: prompt_ids is the input and prompt
                                     * the ids' raw bytes (NULL and 0 for none) */
    uint8_t *prompt;                /* raw bytes (malloc'ed) */
    size_t prompt_len;
    uint32_t *prompt_ids;           /* malloc'ed */
    size_t n_prompt;
    uint32_t gen_toks;
    char dtype[16];
    uint8_t table_digest[32], inv_freq_digest[32];
    uint32_t *generated;            /* malloc'ed, gen_toks ids */
    uint8_t argmax[32];             /* v1 argmax-digest; ext token-digest (the same §12.2 construction) */
    uint8_t witness[32];
    /* ext-sampling-1 only (docs/sampling.md §S7.2) */
    uint32_t max_toks;
    cis2_sampling samp;             /* the floats as their recorded bits */
    int has_eos;                    /* stop-eos is not `none` */
    uint32_t stop_eos[64];
    size_t n_stop_eos;
    uint32_t stop_ids[64];
    size_t n_stop_ids;
    uint8_t *stop_str[16];
    size_t stop_len[16];
    size_t n_stop_str;
    uint8_t params_digest[32];
    int finish;                     /* enum cis2_finish */
    /* ext-score-1 only (docs/receipts.md "Score receipts"); weights..inv-freq
     * and witness above are shared.  Parts: the context (may be none) and
     * the continuation; bytes malloc'ed (NULL when none), ids malloc'ed. */
    int ctx_from, cont_from;        /* CIS2_FROM_* */
    uint8_t *ctx_bytes, *cont_bytes;
    size_t ctx_len, cont_len;
    uint32_t *ctx_ids, *cont_ids;
    size_t n_ctx, n_cont;
    uint32_t first_scored;          /* 1 with no context, else 0 (§S11.2) */
    uint32_t top_n;                 /* top-logprobs, 0..20 */
    uint32_t *lp_bits;              /* the scored tokens' logprob bits (n_cont - first_scored) */
    size_t n_lp;
    int all_greedy;
    uint32_t sum_bits;
    uint64_t sum_f64_bits;
    uint8_t logprob_digest[32];
    /* bookkeeping */
    char *source;                   /* the name it was parsed under ("" if made) */
    char *get_text;                 /* cis2_receipt_get's cache: the rendered text, */
    const char *get_val[CIS2_RECEIPT_EXT_NKEYS]; /* its values NUL-terminated in place */
};

/* Key names in receipt order (index 0.. of the receipt's format), NULL past the end. */
const char *cis2_receipt_key(const cis2_receipt *r, size_t i);

/* Renders r as receipt text: *out is malloc'ed and NUL-terminated, *len its
 * length.  Fails (CIS2_E_FORMAT) if r could not be parsed back. */
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
struct cis2_model;
/* The lines every receipt kind takes from its engine's model: the spec
 * version, dtype, the three artifact hashes and the two table digests. */
void cis2_receipt_set_model(cis2_receipt *r, const struct cis2_model *m);

/* docs/receipts.md "Prompts given as ids": the prompt bytes whose
 * tokenization as a text prompt (with the post-processor's special
 * tokens) is exactly ids[0..n), or NULL when none does (or out of memory):
 * the bytes a receipt records as prompt-hex without a prompt-from line.
 * Malloc'ed and NUL-terminated, its length in *len.  cis2_engine_prompt_bytes
 * is this over the engine's tokenizer. */
char *cis2_ids_text_bytes(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);
/* The ids' raw bytes: every id's bytes (cis2_tokenizer_token_bytes)
 * concatenated, an id without an entry adding none.  Malloc'ed (never
 * NULL on success, NUL-terminated), its length in *len; NULL when out of
 * memory. */
char *cis2_ids_raw_bytes(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);

/* docs/receipts.md "Prompts given as ids", judged for cis2_verify and
 * cis2_check (verify_plan.c): appends r's prompt-from, prompt-hex and
 * prompt-token-ids fields to v (the ids the input, their raw bytes and the
 * absence of a text form checked with tok) and names each mismatch in
 * outs (cap bytes).  Nonzero when out of memory. */
int cis2_receipt_judge_ids_prompt(cis2_verdict *v, const cis2_receipt *r, const cis2_tokenizer *tok, char *outs,
                                  size_t cap);

/* docs/sampling.md §S7.5: the parameter block of an ext receipt's own
 * fields (malloc'ed, NUL-terminated), or NULL when out of memory. */
char *cis2_receipt_params_block(const cis2_receipt *r);

#endif

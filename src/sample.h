/*
 * sample.h - the cis2 sampling extension, version 1 (docs/sampling.md,
 * cited §S..): choosing one step's token from its logits, logprobs, stop
 * rules and the parameter block.  Internal: session.c calls it per
 * sequence and step, verify.c to redo a receipt's steps.  Greedy (§S3.2)
 * is §11.2's argmax exactly, so a greedy run stays a v0.3b run.
 */
#ifndef CIS2_SAMPLE_H
#define CIS2_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "kernels.h"

/* §S3.5: Philox4x32-10, counter c[4] and key k[2] -> out[4]. */
void cis2_philox4x32_10(const uint32_t c[4], const uint32_t k[2], uint32_t out[4]);

/* Working memory of one sequence's choices (sized to the vocabulary on
 * first use, kept across steps).  Zeroed to start; cis2_sample_ws_free. */
typedef struct cis2_sample_ws {
    uint32_t *ids;             /* candidate order */
    uint64_t *items, *itmp;    /* radix sort: key << 32 | id, and scratch */
    float *w;                  /* weights / exp arguments */
    unsigned char *keep;
    size_t cap;
} cis2_sample_ws;
void cis2_sample_ws_free(cis2_sample_ws *ws);

/* What one step did, for the record (tests; §S10). */
typedef struct cis2_sample_info {
    int greedy, drew;
    uint32_t philox_out[4];
    float u, S, S_prime, target;
    size_t n_candidates, n_after_top_k, n_after_top_p, n_kept;
} cis2_sample_info;

/* §S2.2: refuses (CIS2_E_USAGE, naming the parameter) what the sampling
 * parameters may not be, for a vocabulary of V: exactly the bit patterns
 * outside §S2.2's sets (top_p +0.0 included). */
int cis2_sampling_check(const cis2_sampling *p, size_t V, cis2_error *err);
/* §S2.4: greedy iff T is +0.0 or top_k is 1. */
int cis2_sampling_greedy(const cis2_sampling *p);

/* §S3: the token of generation step `step`.  info may be NULL.  Returns
 * CIS2_OK or CIS2_E_NOMEM (scratch).  cx's kernel variant runs the argmax
 * and exp lanes (the scalar bits whatever the variant; no pool: the
 * calling thread). */
int cis2_sample_step(const cis2_ctx *cx, const float *x, size_t V, const cis2_sampling *p, uint32_t step,
                     cis2_sample_ws *ws, uint32_t *token, cis2_sample_info *info);

/* docs/sampling.md §S3.3: token's 1-based place in the candidate order
 * (1 + the logits larger than its, or equal at a smaller id); 0 when its
 * logit is NaN (no candidate).  A NaN logit is never counted. */
uint32_t cis2_candidate_rank(const float *x, size_t V, uint32_t token);

/* §S4: the logprob of `token` and of the first top_n candidates (ids and
 * logprobs into top_ids / top_lp; *n_top gets how many). */
int cis2_logprobs(const cis2_ctx *cx, const float *x, size_t V, uint32_t token, size_t top_n, cis2_sample_ws *ws,
                  float *lp, uint32_t *top_ids, float *top_lp, size_t *n_top);

#endif

/* ---- §S5 stop rules, evaluated after each step ---- */
typedef struct cis2_stop_rule {
    const uint32_t *eos;        /* the eos ids when stop-at-eos is on, else NULL */
    size_t n_eos;
    const uint32_t *ids;        /* stop ids */
    size_t n_ids;
    char *const *strings;       /* stop strings (raw bytes) */
    const size_t *lens;
    size_t n_strings;
    size_t max_tokens;          /* N */
} cis2_stop_rule;

/* The running state of §S5.3 step 3: the last bytes generated so far (as
 * many as the longest stop string can need) and the total. */
typedef struct cis2_stop_state {
    uint8_t *tail;
    size_t tail_len, cap;
    uint64_t total;             /* bytes of every generated token so far */
    uint64_t cut;               /* stop-string: offset of the occurrence's first byte */
} cis2_stop_state;
void cis2_stop_state_free(cis2_stop_state *st);

/* §S5.3 after step `step` chose `token` whose raw bytes are bytes[0..len):
 * the finish reason (enum cis2_finish), CIS2_FINISH_NONE to go on, or -1
 * when out of memory. */
int cis2_stop_after(const cis2_stop_rule *r, cis2_stop_state *st, size_t step, uint32_t token, const uint8_t *bytes,
                    size_t len);

/* §S7.5: the 11 receipt lines max-toks .. stop-strings (each with its LF),
 * NUL-terminated, malloc'ed; NULL when out of memory. */
char *cis2_params_block(const cis2_sampling *p, const cis2_stop_rule *r);

/*
 * score.h - scoring inside the library (score.c; include/cis2.h section 9,
 * docs/sampling.md §S11) and its receipts (verify_score.c,
 * docs/receipts.md "Score receipts").
 */
#ifndef CIS2_SCORE_H
#define CIS2_SCORE_H

#include "cis2_toolkit.h" /* and cis2.h */
#include "receipt.h"

/* cis2_score, and with witness != NULL also each request's score-receipt
 * witness (docs/receipts.md "Score receipts": §12.1 items 1-6 over context
 * ++ continuation ids, the context's length as u32 LE, then per scored
 * token its row's logits and the token) into witness[i]. */
int cis2_score_run(cis2_engine *e, const cis2_score_request *reqs, size_t n, uint8_t (*witness)[32],
                   const cis2_score_opts *opts, cis2_score_result **results, cis2_error *err);

/* logprob-digest: SHA-256 over every scored token in order of its logprob
 * bits (u32 LE), rank (u32 LE), greedy flag (one byte 0/1) and its
 * n_top (id u32 LE, logprob bits u32 LE) pairs, padding included.
 * -1 out of memory. */
int cis2_score_logprob_digest(const cis2_score_result *r, uint8_t out[32]);

/* Verdicts of score receipts (verify_score.c): v[i] for rs[i], each
 * already cis2_vd_init'ed; every receipt is re-scored in one cis2_score
 * call (shared weight passes, equal contexts once). */
int cis2_verify_scores(cis2_engine *e, cis2_receipt *const *rs, size_t n, int twice, const cis2_score_opts *opts,
                       cis2_verdict *v, cis2_error *err);

/* cis2_check's fields and verdict for a score receipt (judge.c has read
 * the files): tok (with its sha) and cfg_sha/inv may be NULL (not given).
 * The sums are recomputed from logprob-bits; what needs weights is
 * unverified. */
void cis2_check_score(cis2_verdict *v, const cis2_receipt *r, const cis2_tokenizer *tok, const uint8_t *tok_sha,
                      const uint8_t *cfg_sha, const uint8_t *inv);

#endif

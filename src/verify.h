/*
 * verify.h - the inside of cis2_verify (internal to verify.c and
 * verify_plan.c; the tests call cis2_verify_ex).
 *
 * verify_plan.c plans: what run each receipt's inputs describe (prepare),
 * which prompt prefixes receipts may share (share_rule), and, once the
 * run is replayed, every field of the verdict (judge).  verify.c replays:
 * the prefill replay (its passes planned by prefill.h, the hasher in the
 * background of the next pass) or the decode replay, and cis2_verify
 * itself.  A vjob is one receipt's state across both.
 */
#ifndef CIS2_VERIFY_H
#define CIS2_VERIFY_H

#include "engine.h"
#include "prefill.h"
#include "receipt.h"
#include "sample.h"
#include "verdict.h"
#include "witness.h"

typedef struct vjob {
    const cis2_receipt *r;
    cis2_verdict *v;
    size_t index;              /* in the cis2_verify call */
    int skip;                  /* the verdict is final already */
    uint32_t *ids;             /* the prompt's recomputed ids */
    size_t nids;
    /* the run the receipt's inputs describe */
    cis2_sampling samp;        /* greedy for v1 */
    cis2_stop_rule stop;       /* max_tokens: gen-toks (v1) or max-toks (ext) */
    int ext;
    uint8_t params[32];        /* ext: the digest of the run's parameter block (§S7.5) */
    uint8_t params_lines[32];  /* ext: of the receipt's own lines */
    size_t claimed;            /* gen-toks */
    size_t oov_step;           /* first claimed id >= vocab (claimed: none) */
    /* replay outputs */
    uint32_t *decoded;         /* the run's tokens */
    size_t ndec;
    int finish;
    long long bad_step;        /* first step whose claim is not the run's token */
    uint32_t claimed_tok, expected_tok, claimed_bits, expected_bits;
    uint8_t witness[32], argmax[32];
    /* prefill replay state */
    cis2_prefill_job pj;       /* its rows and cache in the passes (prefill.h) */
    int decoding;              /* 0: teacher-forced rows (the claims); 1: one decode row a pass, after a
                                * mismatch or past the claimed tokens */
    cis2_sha w;
    int w_open;
    cis2_stop_state sst;
    int rc;                    /* CIS2_E_NOMEM inside a task */
} vjob;

/* Per call (tests): a prefill pass's most rows and logits rows (0: the
 * defaults; rows at most the default), so that small models take many
 * passes. */
typedef struct cis2_verify_limits {
    size_t rows, logit_rows;
} cis2_verify_limits;

/* cis2_verify with limits (NULL: the defaults) and, if rows_computed is
 * not NULL, the rows its prefill replay computed (0 for a decode replay). */
int cis2_verify_ex(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *opts,
                   const cis2_verify_limits *limits, size_t *rows_computed, cis2_verdict **verdicts,
                   cis2_error *err);

/* ---- verify_plan.c ---- */

/* A receipt's run: its spec version and dtype, recomputed prompt ids, the
 * sampling and stop rules its inputs give (docs/sampling.md §S8); sets
 * j->skip with the verdict final when it cannot be replayed. */
void cis2_verify_prepare(const cis2_engine *e, vjob *j);
/* Which prompt prefix a receipt may share with another (share.h): sets
 * j->pj.sh; receipts with at least CIS2_VERIFY_SHARE_MIN leading ids in
 * common share them. */
#define CIS2_VERIFY_SHARE_MIN 16
void cis2_verify_share_rule(vjob *j);
/* The verdict of one replayed receipt: every field as the run gives it. */
void cis2_verify_judge(const cis2_engine *e, vjob *j);

#endif

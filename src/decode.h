/*
 * decode.h - greedy decode and the witness chain (spec §3.4, §12).
 */
#ifndef CIS2_DECODE_H
#define CIS2_DECODE_H

#include <stdio.h>

#include "model.h"

typedef struct cis2_seq {
    const uint32_t *prompt;  /* input */
    size_t n_prompt;
    uint32_t *generated;     /* output, gen_toks ids (malloc'ed) */
    uint8_t witness[32];     /* §12.1 CIS2_REF */
    uint8_t argmax[32];      /* §12.2 */
} cis2_seq;

typedef struct cis2_decode_opts {
    size_t gen_toks;
    FILE *dump_logits;        /* optional: raw f32 LE logits, step-major (sequence 0 only) */
    /* optional observer of every intermediate tensor; only for nseq == 1 */
    void (*trace)(void *ctx, size_t step, size_t pos, int layer, const char *tensor, const float *v, size_t n);
    void *trace_ctx;
    int recompute;            /* test mode: no KV reuse, recompute every step from scratch */
    void (*progress)(void *ctx, size_t step, size_t total);
    void *progress_ctx;
} cis2_decode_opts;

/* Decodes every sequence together (sharing each weight pass) and computes
 * its witness chain and argmax digest.  One pass only: see cis2_run. */
int cis2_decode(const cis2_model *m, cis2_seq *seqs, size_t nseq, const cis2_decode_opts *o, cis2_error *err);

/* §12.4: decodes twice in this process (as one batch of both copies),
 * compares witness, argmax digest and tokens of every sequence, and fails
 * with CIS2_E_NONDET if any differs.  dump_logits/trace see the first run. */
int cis2_run(const cis2_model *m, cis2_seq *seqs, size_t nseq, const cis2_decode_opts *o, cis2_error *err);

void cis2_seq_free(cis2_seq *s);

#endif

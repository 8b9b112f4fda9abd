/*
 * draft.h - draft-model drafting for speculative decoding (draft.c;
 * docs/speculate.md "A draft model").  A smaller checkpoint with the same
 * tokenizer proposes the next K tokens by its own greedy decoding; like
 * every drafter (speculate.h) it only proposes: session.c checks each
 * draft against the target model's own choice, so the draft model can
 * never change a bit of any output, only the time.
 *
 * Callers: engine.c (cis2_engine_set_speculate "draft:DIR[:K]" loads and
 * owns one cis2_dmodel) and session.c (one cis2_dstate per decoding
 * sequence, on the stepping thread, inside the engine call's frame).
 */
#ifndef CIS2_DRAFT_H
#define CIS2_DRAFT_H

#include "kernels.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

/* A loaded draft model (read-only once loaded: shared by every sequence). */
typedef struct cis2_dmodel {
    cis2_model m;
    char *dir;
    uint64_t id;            /* unique in the process: which model a cis2_dstate was made for */
} cis2_dmodel;

/* Loads DIR as a draft model for `target` (cis2_model_load, its own pool
 * cx): its tokenizer.json must be byte for byte the target's (the same
 * sha256, §2.1), else CIS2_E_USAGE naming both, since drafts are token ids
 * of the target's vocabulary. */
int cis2_dmodel_load(const cis2_ctx *cx, cis2_dmodel **out, const char *dir, const cis2_model *target,
                     cis2_error *err);
void cis2_dmodel_free(cis2_dmodel *d);

/* One sequence's drafting state: the draft model's KV cache and the
 * tokens whose keys and values it holds (positions 0..nfed-1).  Made for
 * one draft model (model_id); the engine's setting may change between a
 * session's steps, and a state met by another model starts again. */
typedef struct cis2_dstate {
    uint64_t model_id;
    cis2_kv kv;
    uint32_t *fed;
    size_t nfed, cap;       /* cap: positions of kv and fed (0: not yet set up) */
    cis2_ws ws;
    float *logits;          /* one row of the draft model's vocabulary */
    cis2_row *rows;
    size_t rows_cap;
    int broken;             /* out of memory once: no more drafts for this sequence */
} cis2_dstate;
void cis2_dstate_free(cis2_dstate *st);

/* Up to k (>= 1) draft tokens into out after the context a ++ b (the
 * prompt and the tokens generated so far; na + nb >= 1, and na + nb + k - 1
 * <= cap, the positions the sequence may use): the draft model's §11.2
 * argmax decoding from that context, reusing the cached positions that
 * still match it.  Returns how many (0 if drafting failed: out of memory
 * is never an error of the run, only no draft). */
size_t cis2_dmodel_draft(const cis2_ctx *cx, const cis2_dmodel *d, cis2_dstate *st, const uint32_t *a, size_t na,
                         const uint32_t *b, size_t nb, size_t cap, size_t k, uint32_t *out);

#endif

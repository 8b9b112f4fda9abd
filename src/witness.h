/*
 * witness.h - the witness chain of §12.1 (CIS2_REF) in one place, for
 * everything that computes one: session.c (decoding) and verify.c (replay).
 *
 * One continuous SHA-256 stream, fed in exactly this order (FACTS §1.11):
 *   1-3  weights, tokenizer, config sha256 (raw 32 bytes each)
 *   4-5  table_digest, inv_freq_table_digest (raw 32 bytes each)
 *   6    every prompt id, u32 LE
 *   (6b) for an extension run, the params digest (docs/sampling.md)
 *   7    per step: the full logit vector (f32 bits, u32 LE, vocab order;
 *        a NaN as the canonical 0x7FC00000, so the witness does not depend
 *        on the ISA's default NaN, docs/cross-isa.md), then the chosen id.
 */
#ifndef CIS2_WITNESS_H
#define CIS2_WITNESS_H

#include "digest.h"
#include "model.h"

/* Items 1-6 (and 6b when params_digest is not NULL). -1 out of memory. */
int cis2_witness_begin(cis2_sha *w, const cis2_model *m, const uint32_t *prompt, size_t n,
                       const uint8_t *params_digest);
/* Item 7 for one step. */
void cis2_witness_step(cis2_sha *w, const float *logits, size_t vocab, uint32_t token);
/* The same item in pieces: 7a's logits as consecutive runs of any length
 * (a whole row, or a row in parts: the stream is the same bytes), then 7b's
 * chosen id.  cis2_witness_step is exactly logits(all) then token. */
void cis2_witness_logits(cis2_sha *w, const float *logits, size_t n);
void cis2_witness_token(cis2_sha *w, uint32_t token);
/* §12.2: sha256 over prompt ++ generated ids, u32 LE.  -1 out of memory. */
int cis2_argmax_digest(const uint32_t *prompt, size_t n_prompt, const uint32_t *gen, size_t n_gen,
                       uint8_t out[32]);

#endif

/*
 * speculate.h - drafting for speculative decoding (speculate.c;
 * docs/speculate.md).  A drafter only proposes tokens; session.c checks
 * them against the model's own choices (each row of a multi-row pass is
 * the single-sequence arithmetic, §3.5, docs/arithmetic.md), so no draft
 * can change a bit of the output: a bad draft only costs time.
 */
#ifndef CIS2_SPECULATE_H
#define CIS2_SPECULATE_H

#include "cis2_toolkit.h" /* and cis2.h */

#include <stddef.h>
#include <stdint.h>

#define CIS2_SPEC_K_MAX 16   /* drafted tokens per step at most */
#define CIS2_SPEC_K_DEFAULT 4

/* LOOKUP: cis2_spec_lookup; CALLER: the caller's cis2_draft_fn
 * (cis2_engine_set_drafter); DRAFT: a draft model (draft.h). */
enum cis2_spec_kind { CIS2_SPEC_OFF = 0, CIS2_SPEC_LOOKUP = 1, CIS2_SPEC_CALLER = 2, CIS2_SPEC_DRAFT = 3 };

/* "off", "lookup", "lookup:K", "draft:DIR" or "draft:DIR:K" (K 1..16,
 * default 4) into kind, k and, for a draft model, its directory (*dir, the
 * caller frees; NULL otherwise); CIS2_E_USAGE with a one-line message
 * otherwise. */
int cis2_spec_parse(const char *spec, int *kind, unsigned *k, char **dir, cis2_error *err);

/* Prompt lookup: in the context a ++ b (the prompt and the tokens made so
 * far), the latest earlier occurrence of its last n tokens (n = 3, 2, 1,
 * the first that matches) and the up to k tokens that followed it, into
 * out.  Returns how many (0: no match). */
size_t cis2_spec_lookup(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, size_t k, uint32_t *out);

#endif

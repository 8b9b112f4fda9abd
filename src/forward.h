/*
 * forward.h - what the rooms of the forward pass share: the state of one
 * cis2_forward call and the way a room runs per-row work across the pool.
 * Internal to model.c (the decoder: embedding, norms, residuals, the LM
 * head, and the dispatch on each layer's kinds), attention.c and
 * deltanet.c (the token mixers), ffn.c and moe.c (the feed-forwards).
 * Nothing here computes a float.
 *
 * A decoder layer is a token mixer and a feed-forward (model.h,
 * cis2_mixer_kind and cis2_ffn_kind).  model.c norms each block's input
 * (§8), calls the block's room, and adds the room's output to the residual
 * stream (docs/arithmetic.md §8-§10, docs/models.md §M4, §M7.2 for the norms
 * after the blocks).  A room reads its input rows (n rows of `hidden`
 * floats), computes in the order docs/arithmetic.md and docs/models.md pin
 * for its kind, and writes its output rows (n x hidden), using the call's
 * scratch buffers below as it documents.
 */
#ifndef CIS2_FORWARD_H
#define CIS2_FORWARD_H

#include "model.h"

#include <stdatomic.h>

typedef struct cis2_fwd {
    const cis2_ctx *cx;    /* the call's pool and kernel (kernels.h) */
    const cis2_model *m;
    cis2_row *rows;
    size_t n, layer;
    const cis2_layer *ly;  /* layer `layer` */
    /* scratch, each n rows (model.c carves them): x the residual stream,
     * xn a block's normed input (and the MLP's output), q k v att (width
     * q_dim / kv_dim), g (the widest of hidden, intermediate, q_dim) and
     * u (intermediate); cs per row cos[half], sin[half] of each RoPE table */
    float *x, *xn, *q, *k, *v, *att, *g, *u, *cs;
    size_t cs_w;           /* floats of cs per row: 2 * half * m->n_rope_tables */
    float *fin;            /* final-norm rows, compact: the rows that want logits */
    float *probs;          /* per row n_heads * (pos+1) when tracing, else NULL */
    size_t probs_stride;
    size_t *lrow;          /* per row: its index among the rows that want logits */
    float *moe;            /* the mixture of experts' scratch (cis2_moe_scratch floats), or NULL */
    float *qg;             /* q_proj's output with the output gate (docs/models.md §M10.5), n x 2 q_dim, or NULL */
    float *dn;             /* the Gated DeltaNet layers' scratch (cis2_deltanet_scratch floats), or NULL */
    /* a model with recurrent state (model.h state_floats): the rows grouped
     * by sequence, each sequence's in position order: seq_rows[seq_start[s]
     * .. seq_start[s + 1]) are sequence s's row indices (model.c), nseq of them */
    size_t *seq_rows, *seq_start, nseq;
    cis2_trace_fn trace;   /* the observer (model.h), or NULL */
    void *trace_ctx;
    _Atomic int oom;
} cis2_fwd;

/* Per-row work on rows [r0, r1): touches only those rows' slices. */
typedef void (*cis2_row_fn)(cis2_fwd *F, size_t r0, size_t r1);

/* a (then b, if not NULL) on every block of rows, across the pool when
 * there are two blocks or more; every row's arithmetic is the same either
 * way.  Two stages run as one pass unless tracing, which needs every
 * row's tensors of the first stage before the second changes them. */
void cis2_fwd_rows(cis2_fwd *F, cis2_row_fn a, cis2_row_fn b);

/* Reports tensor `name` of every traced row to the observer: row r's
 * `width` floats at base + r * width (nothing when not tracing). */
void cis2_fwd_trace(const cis2_fwd *F, const char *name, const float *base, size_t width);

/* ---- the rooms ---- */

/* Token mixers (attention.c): CIS2_MIXER_ATTENTION and
 * CIS2_MIXER_ATTENTION_WINDOW, §9 (docs/models.md §M2-§M7 for the
 * families' changes).  Reads `in`, fills the rows' KV caches, writes the
 * o_proj output to F->g; uses q, k, v, att, cs, probs. */
int cis2_attention(cis2_fwd *F, const float *in, cis2_error *err);

/* CIS2_MIXER_DELTANET (deltanet.c), docs/models.md §M10.3-§M10.4.  Reads
 * `in`, advances the rows' sequences' recurrent states (cis2_kv.state, at
 * the layer's state_off) in position order, writes out_proj's output to
 * F->g; uses F->dn, whose size for n rows is cis2_deltanet_scratch(m, n)
 * floats (0 without such layers), and seq_rows. */
void cis2_deltanet(cis2_fwd *F, const float *in);
size_t cis2_deltanet_scratch(const cis2_model *m, size_t n);

/* Feed-forwards (ffn.c): CIS2_FFN_DENSE, §10 (docs/models.md §M7.5's
 * GELU for gemma3_text).  Reads `in`, writes down_proj's output to `out`
 * (F->xn: `in` may be it); uses g and u. */
void cis2_ffn_dense(cis2_fwd *F, const float *in, float *out);

/* CIS2_FFN_MOE (moe.c), docs/models.md §M8.  Reads `in`, writes the
 * combined output to F->xn (`in` may be it); uses F->moe, whose size for
 * n rows is cis2_moe_scratch(m, n) floats (0 without experts). */
void cis2_ffn_moe(cis2_fwd *F, const float *in);
size_t cis2_moe_scratch(const cis2_model *m, size_t n);

#endif

/*
 * model.h - a loaded checkpoint and the forward pass (spec §2, §7-§11).
 *
 * The forward pass works on "rows": each row is one token of one sequence
 * at one position.  A prefill is the rows of one prompt; a batched decode
 * step is one row per sequence.  Every row's arithmetic is exactly the
 * single-sequence arithmetic of the spec: batching only shares the weight
 * passes (kernels.h), it never changes any sum's order.
 */
#ifndef CIS2_MODEL_H
#define CIS2_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "config.h"
#include "kernels.h"

/* A decoder layer is a token mixer and a feed-forward, each of a kind
 * with its own room (forward.h): cis2_forward dispatches on the kinds. */
typedef enum {
    CIS2_MIXER_ATTENTION,       /* §9: every earlier position (attention.c) */
    CIS2_MIXER_ATTENTION_WINDOW, /* docs/models.md §M5, §M7.1: the last `window` keys (attention.c) */
    CIS2_MIXER_DELTANET         /* docs/models.md §M10.3-§M10.4: Gated DeltaNet, a recurrent state per
                                   sequence (deltanet.c) */
} cis2_mixer_kind;
typedef enum {
    CIS2_FFN_DENSE,             /* §10's gated MLP (ffn.c) */
    CIS2_FFN_MOE                /* docs/models.md §M8: a router and k of E gated MLPs per token (moe.c) */
} cis2_ffn_kind;

typedef struct cis2_layer {
    cis2_mixer_kind mixer;
    cis2_ffn_kind ffn;
    /* the attention mixers' weights */
    cis2_pmat q, k, v, o;
    /* the dense feed-forward's */
    cis2_pmat gate, up, down;
    /* the mixture of experts' (docs/models.md §M8.2): the router
     * [E, hidden], and expert e's gate, up, down at experts[3e .. 3e+2];
     * gpt_oss's (§M9.5): expert e's fused gate/up [2I, hidden] (rows
     * interleaved: gate, up, gate, ...) at experts[3e], its down at
     * experts[3e+2] (MXFP4, kernels.h), their biases eb_gu [E x 2I] and
     * eb_down [E x hidden], and the router's bias [E] */
    cis2_pmat router;
    cis2_pmat *experts;
    float *router_bias, *eb_gu, *eb_down;
    /* §8's norms, NULL where the family has none: ln1 before attention
     * (input_layernorm; none in olmo2), ln2 before the MLP (llama's
     * post_attention_layernorm, gemma3_text's pre_feedforward_layernorm;
     * none in olmo2), and on the blocks' outputs before each residual add
     * ln_ao (olmo2's and gemma3_text's post_attention_layernorm) and ln_mo
     * (their post_feedforward_layernorm) (docs/models.md §M4, §M7.2). */
    float *ln1, *ln2, *ln_ao, *ln_mo;
    float *bq, *bk, *bv;    /* §9.1 optional biases (NULL when absent) */
    float *bo;              /* gpt_oss's o_proj bias (docs/models.md §M9.2), else NULL */
    float *sinks;           /* gpt_oss's learned logit per query head (§M9.3), else NULL */
    float *qn, *kn;         /* per head, head_dim each: qwen3's and gemma3_text's q_norm/k_norm (docs/models.md
                               §M2, §M7); over the projection, q_dim and kv_dim: olmo2's (§M4); else NULL */
    int no_rope;            /* smollm3: this layer skips RoPE (docs/models.md §M3) */
    size_t window;          /* docs/models.md §M5, §M7.1: each row attends to its last `window` keys; 0 = all (§9) */
    int rope_local;         /* gemma3_text's sliding layers rotate with the local table (§M7.4) */
    /* a Gated DeltaNet layer's (docs/models.md §M10.2): in_proj_qkv [C, hidden], in_proj_z [Hv*dv, hidden],
     * in_proj_b and in_proj_a [Hv, hidden], out_proj [hidden, Hv*dv]; the conv's weights transposed to
     * [K][C] (lin_conv[j*C + c] = conv1d.weight[c, 0, j]); lin_na[h] = -exp_pinned(A_log[h]) (§M10.3);
     * dt_bias [Hv]; the gated norm's plain weight [dv]; where its state begins in a sequence's
     * cis2_kv.state (floats: the conv window [K-1][C], then S [Hv][dk][dv], §M10.4) */
    cis2_pmat lin_qkv, lin_z, lin_b, lin_a, lin_out;
    /* qwen3_5_moe's shared expert (docs/models.md §M10.10): gate, up [SI, hidden], down [hidden, SI], and its
     * gate's row [1, hidden] */
    cis2_pmat sh_gate, sh_up, sh_down, sh_router;
    float *lin_conv, *lin_na, *lin_dt_bias, *lin_norm;
    size_t state_off;
    size_t kv_layer;        /* an attention layer's index among the layers with a KV cache (cis2_kv) */
} cis2_layer;

typedef struct cis2_model {
    cis2_config cfg;
    size_t hidden, inter, n_layers, n_heads, n_kv, head_dim, vocab, q_dim, kv_dim;
    size_t n_kv_layers;     /* the layers with a KV cache: the attention ones (all but §M10's linear layers) */
    int qk_whole;           /* olmo2: qn/kn span the whole projection (§M4), not a head */
    float attn_scale;       /* §9.2's scale: rsqrt_cr(head_dim), gemma3_text's rsqrt_cr(query_pre_attn_scalar) */
    float embed_scale;      /* gemma3_text's embedding scale (docs/models.md §M7.2); 0 = none */
    int gelu;               /* gemma3_text: §10's activation is gelu_tanh_pinned (§M7.5), not silu */
    /* the mixture of experts (docs/models.md §M8): E experts, k per token,
     * each an MLP of moe_inter; norm_topk: the k weights renormalised */
    size_t n_experts, top_k, moe_inter;
    int norm_topk;
    cis2_moe_rule moe;      /* family.h: how the sparse layers route */
    size_t shared_inter;    /* qwen3_5_moe's shared expert's width (§M10.10); 0 = none */
    float swiglu_limit;     /* gpt_oss's experts' clamp (§M9.5) */
    float rope_mscale;      /* YaRN's attention factor on cos and sin (§M9.4); 0 = none */
    size_t rot_half;        /* half the rotated dims of a head: head_dim / 2, or rotary_dim / 2 (§M10.5) */
    int attn_gate;          /* q_proj gives each head's query and its output gate (§M10.5) */
    int lin_fused;          /* qwen3_next: lin_qkv is in_proj_qkvz and lin_b in_proj_ba, grouped per key head
                               (§M10.11); lin_z and lin_a unused */
    /* the Gated DeltaNet layers (docs/models.md §M10): key heads, value heads, their dims, the conv's
     * kernel and channels (C = 2 Hk dk + Hv dv), and the q scale rsqrt_cr(dk) (§M10.3) */
    size_t lin_hk, lin_hv, lin_dk, lin_dv, lin_kernel, lin_c;
    float lin_qscale;
    cis2_layer *layers;
    cis2_wmem wmem;         /* every packed matrix below (kernels.h: huge pages) */
    cis2_pmat embed;        /* [vocab, hidden] */
    cis2_pmat lm_head;      /* untied head; unused when tied */
    int tied;               /* §11.1: LM head = embed */
    float *norm;            /* model.norm.weight */
    float *inv_freq;        /* §7.1 (and docs/models.md §M1 for llama3), rot_half; gemma3_text: then the
                               local table, rot_half more (§M7.4) */
    size_t n_rope_tables;   /* 1, or 2 for gemma3_text */
    uint8_t weights_sha[32], config_sha[32], tokenizer_sha[32];
    uint8_t table_digest[32], inv_freq_digest[32];
    size_t weight_bytes;    /* packed bytes read per decoded token */
    /* Floats of per-sequence state that is not a KV cache: the fixed-size
     * state recurrent mixers carry from position to position (their rooms
     * say its layout; docs/models.md §M10.4).  0 but for the families
     * with Gated DeltaNet layers; sessions,
     * scoring, verification and speculation budget it through
     * cis2_kv_bytes and keep it beside the sequence's KV cache (cis2_kv). */
    size_t state_floats;    /* §M10.4: per linear layer (K-1) C + Hv dk dv */
    /* tokenizer.json exactly as read and hashed into tokenizer_sha (NUL-
     * terminated; len excludes the NUL): parse it from here
     * (cis2_tokenizer_load_mem, tokenizer.h), not from the path again, so
     * the tokenizer run is the one hashed.  Freed by cis2_model_free. */
    char *tokenizer_json;
    size_t tokenizer_json_len;
} cis2_model;

/* Loads DIR/{model.safetensors,config.json,tokenizer.json} (or, for the
 * weights, DIR/model.safetensors.index.json and its shards: shards.h),
 * each read once (fileio.h): hashes all three from the bytes read (§2.1), validates every
 * tensor name and shape against the config and its family's semantics
 * (config.h) before reading any weight, then packs the weights from a
 * bounded staging buffer as they stream in, across cx's pool. */
int cis2_model_load(const cis2_ctx *cx, cis2_model *m, const char *dir, cis2_error *err);
/* The same, calling before_weights(ctx, m, err) once config.json and
 * tokenizer.json are read, hashed and config.json validated, before the
 * weights are opened (what refuses the small files refuses before any
 * weight is read: docs/inputs.md "config.json", "tokenizer.json"); its
 * nonzero return fails the load. */
int cis2_model_load_hooked(const cis2_ctx *cx, cis2_model *m, const char *dir,
                           int (*before_weights)(void *ctx, cis2_model *m, cis2_error *err), void *ctx,
                           cis2_error *err);
void cis2_model_free(cis2_model *m);

/* Per-sequence KV cache of post-RoPE keys and values (§3.5), each KV
 * head's contiguous: v[layer][kv_head][pos][dim], and keys blocked for SIMD
 * across positions: k[layer][kv_head][pos / 16][dim][pos % 16]
 * (cis2_attend_head_kt); `layer` counts the attention layers only
 * (cis2_layer.kv_layer: a linear layer keeps a state instead, §M10.4). */
typedef struct cis2_kv {
    size_t cap;             /* positions, a multiple of 16 */
    float *k, *v;
    /* m->state_floats of recurrent state (NULL when 0), zero before
     * position 0; state_pos: how many positions it has absorbed.  Unlike
     * keys and values, a state is the state of one prefix only (its
     * state_pos): a prefix shorter than that cannot be read back from it,
     * so a caller that rolls back (speculation) or shares a shorter prefix
     * keeps a copy taken at that position. */
    float *state;
    size_t state_pos;
} cis2_kv;
/* The bytes of a cache of `positions` positions, rounded up to whole key
 * blocks of 16, k and v: 2 * n_kv_layers * cap * kv_dim * 4, plus the recurrent
 * state's state_floats * 4; SIZE_MAX when that is beyond size_t.  The one
 * formula behind every KV budget (sessions, scoring, verification) and
 * cis2_kv_init (docs/inputs.md "Memory"). */
size_t cis2_kv_bytes(const cis2_model *m, size_t positions);
/* Whether `need` more bytes fit beside `used` within `budget` (neither sum
 * wraps: a SIZE_MAX need never fits). */
static inline int cis2_kv_fits(size_t used, size_t need, size_t budget)
{
    return need <= budget && used <= budget - need;
}
int cis2_kv_init(cis2_kv *kv, const cis2_model *m, size_t cap, cis2_error *err);
void cis2_kv_free(cis2_kv *kv);
/* Positions [0, n) of src's cache into dst's (their caps may differ; n <=
 * both).  Two sequences that begin with the same n tokens have the same KV
 * there (§3.5: a position's keys and values are a function of the tokens
 * up to it), so a verifier computes a shared prompt prefix once.  The
 * recurrent state comes too when src's has absorbed exactly n positions;
 * otherwise dst's stays as it was (share.c shares no prefix of a model
 * with state). */
void cis2_kv_copy_prefix(cis2_kv *dst, const cis2_kv *src, const cis2_model *m, size_t n);

typedef struct cis2_row {
    cis2_kv *kv;            /* the row's sequence */
    size_t pos;             /* its position (§3.4) */
    uint32_t token;         /* input token id */
    float *logits;          /* if non-NULL: receives the vocab logits */
    size_t step;            /* the decode step the row belongs to (for traces) */
    int traced;             /* report this row's tensors to the trace observer */
} cis2_row;

/* The observer of intermediate tensors is include/cis2.h's cis2_trace_fn:
 * called for each traced row (identified by its step and position), layer
 * (-1 after the last layer) and tensor name, in a fixed order.  Names: ln1
 * q k v (after bias; for qwen3 and gemma3_text before q/k norm) q_rope
 * k_rope (for them after the norm and RoPE) scores (softmax probabilities,
 * all heads) attn_out o_proj resid_attn ln2 gate up act down resid_mlp;
 * then final_norm, logits.  Where a family norms a block's output (olmo2,
 * gemma3_text), o_proj and down are reported before that norm and act is
 * the activation the family uses (silu, or gemma3_text's GELU).  A layer
 * with a mixture of experts reports router (its E logits) and down (the
 * combined output, docs/models.md §M8.6) in place of gate up act down.
 * With qwen3_5's output gate (§M10.5) q is each head's query (the gate
 * split off) and attn_out is after the gate.  A Gated DeltaNet layer
 * (§M10.3) reports, in place of q .. attn_out: lin_qkv lin_z lin_b lin_a
 * (the projections), lin_conv (after the conv and SiLU), lin_qk (after
 * the l2 norms and q's scale), lin_beta, lin_decay, lin_core (the delta
 * rule's read-out), lin_gnorm (after the gated norm), then o_proj (its
 * out_proj). */

/* Scratch memory of the forward pass, kept across calls (the steps of a
 * decode) so that a step neither allocates nor faults in fresh pages.
 * Starts zeroed; cis2_ws_free releases it. */
typedef struct cis2_ws {
    void *buf;
    size_t cap;             /* bytes */
} cis2_ws;
void cis2_ws_free(cis2_ws *ws);

/* Runs the rows through the model.  Rows of one sequence must be in
 * increasing position order and their earlier positions already cached (or
 * in this call).  Fills each row's KV slot and its logits if requested:
 * the rows that want logits must have their buffers end to end in row
 * order (the LM head writes them in place).  ws may be NULL (scratch for
 * this call only).  Every stage runs on cx (kernels.h): its pool, its
 * kernel variant, and its background work between the matrix items. */
int cis2_forward(const cis2_ctx *cx, const cis2_model *m, cis2_ws *ws, cis2_row *rows, size_t n,
                 cis2_trace_fn trace, void *trace_ctx, cis2_error *err);

#endif

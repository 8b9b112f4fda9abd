/*
 * family.h - the model families cis2 runs, one row each: what a
 * config.json's model_type means (docs/models.md, docs/inputs.md "The key
 * table"), and the tensors a config calls for.
 *
 * A family is data: a row of FAMILIES in family.c says which config keys
 * its transformers config class reads and their defaults, which it refuses
 * and why, and which features its forward pass has (biases, q/k norms,
 * where the norms sit, fused tensors, windows, layers without RoPE, the
 * activation, the embedding scale, ...).  config.c parses a config.json
 * against its row; cis2_family_tensors lists the tensors (names, shapes,
 * roles) that the loader (model.c) expects and `cis2 synth` (synth.c)
 * writes.  Every model_type string of src/ is in family.c; a new family is
 * a row there, plus the operations it adds (docs/architecture.md "Adding a
 * family").
 *
 * Callers: config.c (parsing), model.c (the tensor plan), synth.c.
 */
#ifndef CIS2_FAMILY_H
#define CIS2_FAMILY_H

#include <stddef.h>
#include <stdint.h>

/* attention_bias: what the family's modeling code does with the key. */
typedef enum {
    CIS2_BIAS_KEY,      /* llama: q/k/v and o_proj biases exactly when true (the o_proj bias refused at load,
                           but where the row's o_bias says the family runs it: gpt_oss) */
    CIS2_BIAS_QKV,      /* qwen2: q/k/v biases always, no o_proj bias; the key is not read */
    CIS2_BIAS_REFUSED   /* true is refused (bias_refusal says why) */
} cis2_bias_rule;

/* q_norm / k_norm (docs/models.md §M2, §M4, §M7). */
typedef enum {
    CIS2_QKN_NONE,
    CIS2_QKN_HEAD,      /* qwen3, gemma3_text: §8's rmsnorm of each head, head_dim weights */
    CIS2_QKN_WHOLE      /* olmo2: over the whole projection, q_dim and kv_dim weights */
} cis2_qk_norm;

/* Where the norms sit around a layer's two blocks (docs/models.md §M4, §M7.2). */
typedef enum {
    CIS2_NORMS_PRE,     /* §8: input_layernorm before attention, post_attention_layernorm before the MLP */
    CIS2_NORMS_POST,    /* olmo2: post_attention_ and post_feedforward_layernorm on the blocks' outputs only */
    CIS2_NORMS_SANDWICH /* gemma3_text: both, four norms per layer */
} cis2_norm_place;

/* Which layers attend within a window (docs/models.md §M5, §M7.1). */
typedef enum {
    CIS2_WINDOW_NONE,   /* §9: every earlier position */
    CIS2_WINDOW_ALL,    /* mistral, phi3: every layer, when sliding_window is set */
    CIS2_WINDOW_LAYERS  /* gemma3_text: the "sliding_attention" layers (layer_types or the pattern) */
} cis2_window_rule;

/* The feed-forward of the family's sparse layers (docs/models.md §M8). */
typedef enum {
    CIS2_MOE_NONE,      /* §10's dense MLP in every layer */
    CIS2_MOE_SOFTMAX_TOPK, /* qwen3_moe: softmax over all experts, the top k, optionally renormalised (§M8.3) */
    CIS2_MOE_TOPK_SOFTMAX  /* gpt_oss: the top k of the biased logits, a softmax over those k; each expert a
                              clamped SwiGLU with biases, in MXFP4 (§M9.5, §M9.6) */
} cis2_moe_rule;

/* The Gated DeltaNet layers of a hybrid family (docs/models.md §M10). */
typedef enum {
    CIS2_LIN_NONE,      /* every layer is attention */
    CIS2_LIN_SPLIT,     /* qwen3_5: layer_types' "linear_attention" layers, with in_proj_qkv, in_proj_z,
                           in_proj_b and in_proj_a (§M10.2) */
    CIS2_LIN_FUSED      /* qwen3_next: the same layers with in_proj_qkvz and in_proj_ba, grouped per key head
                           (§M10.11) */
} cis2_linear_rule;

/* A mixture of experts' defaults for absent keys (its transformers config
 * class's): num_experts, num_experts_per_tok, moe_intermediate_size (0:
 * intermediate_size, gpt_oss), shared_expert_intermediate_size,
 * norm_topk_prob. */
typedef struct cis2_moe_defaults {
    int64_t experts, per_tok, inter, shared_inter;
    int norm_topk;
} cis2_moe_defaults;

typedef struct cis2_family {
    const char *model_type;     /* config.json's model_type ("llama" also stands for none) */
    const char *architecture;   /* the transformers class `cis2 synth` names in "architectures" */
    const char *section;        /* its section of docs/models.md ("" for §2-§11 alone) */
    /* defaults of the family's transformers config class, for absent keys */
    double rope_theta;          /* the RoPE base */
    int64_t head_dim;           /* 0: hidden_size / num_attention_heads */
    int64_t max_position_embeddings;
    double rms_norm_eps;        /* 0: rms_norm_eps is required */
    int tie_word_embeddings;
    /* the forward pass */
    const char *activation;     /* hidden_act (and hidden_activation) must be this: "silu", "gelu_pytorch_tanh" */
    cis2_bias_rule attention_bias;
    const char *bias_refusal;   /* CIS2_BIAS_REFUSED: the message's tail after "attention_bias is true" */
    int mlp_bias_unread;        /* the MLP has no biases and never reads mlp_bias (else true is refused) */
    cis2_qk_norm qk_norm;
    cis2_norm_place norms;
    int norm_plus_one;          /* every RMSNorm multiplies by (1 + w) (docs/models.md §M7.2) */
    int embed_scaled;           /* the embedding times sqrt(hidden) as f32 (§M7.2) */
    int free_head_dim;          /* heads * head_dim may differ from hidden_size (§M2, §M7) */
    int fused;                  /* qkv_proj and gate_up_proj, split by rows as they load (§M6) */
    cis2_window_rule window;
    int64_t window_default;     /* CIS2_WINDOW_LAYERS: sliding_window when absent (gemma3_text 4096, gpt_oss 128) */
    int64_t window_pattern;     /* CIS2_WINDOW_LAYERS without layer_types: layer L slides iff (L + 1) % this != 0 */
    int window_pattern_key;     /* sliding_window_pattern is read (gemma3_text) */
    int window_off_default;     /* use_sliding_window defaults to false: sliding_window alone cannot act */
    int nope;                   /* no_rope_layers / no_rope_layer_interval read (§M3) */
    int gemma3_keys;            /* query_pre_attn_scalar and rope_local_base_freq read, a second RoPE table
                                   for the sliding layers (§M7.1, §M7.4) */
    cis2_moe_rule moe;          /* the sparse layers' routing, and the MoE keys read (§M8.1, §M9.1) */
    cis2_moe_defaults moe_def;  /* with moe: the defaults of its keys */
    int attention_bias_default; /* attention_bias when absent (GptOssConfig's true) */
    int o_bias;                 /* attention_bias also gives o_proj a bias, which the family runs (§M9.2) */
    int sinks;                  /* a learned logit per head in every softmax of attention (§M9.3) */
    int rope_yarn;              /* rope_type "yarn" is read (§M9.4) */
    int mxfp4;                  /* the experts are published in MXFP4 (quantization_config, §M9.6) */
    /* a multimodal wrapper (docs/models.md §M10.1): the text model's keys are in text_config, whose
     * model_type is this (NULL: the config is the text model's own), and its tensors are named
     * text_prefix + what follows "model." (NULL: "model.") */
    const char *text_config;
    const char *text_prefix;
    const char *const *skip;    /* NULL-terminated tensor-name prefixes read (hashed) but not used: the vision
                                   tower, multi-token prediction (§M10.2); NULL: none */
    cis2_linear_rule linear;    /* linear-attention layers (§M10) and their keys */
    int attn_gate;              /* q_proj gives each head's query and an output gate (§M10.5) */
    double partial_rotary;      /* partial_rotary_factor when absent, RoPE over the first head_dim * it dims of a
                                   head (§M10.5); 0: the key must be 1 (§7 rotates every dimension) */
    int mrope;                  /* rope_parameters' mrope_section, mrope_interleaved read: inert for text (§M10.5) */
    /* qwen3_5_moe's mixture of experts (docs/models.md §M10.10): every layer sparse and its k weights always
     * renormalised (norm_topk_prob, decoder_sparse_step and mlp_only_layers not read, no intermediate_size);
     * the experts as two tensors of all E (gate_up [E, 2 Im, hidden]: each expert's gate rows, then its up
     * rows; down [E, hidden, Im]); a shared expert of shared_expert_intermediate_size added, times the
     * sigmoid of its gate */
    int moe_every_layer;
    int experts_fused;
    int shared_expert;
} cis2_family;

/* The row of `model_type`, or NULL when cis2 does not run it. */
const cis2_family *cis2_family_find(const char *model_type);
/* Whether the loader reads tensor `name` without using it (the row's skip
 * prefixes: docs/models.md §M10.2). */
int cis2_family_skips(const cis2_family *f, const char *name);
/* The row a config.json without model_type gets: llama's. */
const cis2_family *cis2_family_default(void);
/* "llama, qwen2, ... or gemma3_text" into out (cap > 0 bytes, truncated
 * to fit): the model_types cis2 runs, for messages. */
void cis2_family_list(char *out, size_t cap);

/* ---- the tensor plan ---- */

/* What a tensor is to the forward pass.  The post_attention_layernorm of
 * a pre-norm family is its MLP's input norm (CIS2_T_FFN_NORM), of olmo2
 * and gemma3_text the attention block's output norm (CIS2_T_ATTN_OUT_NORM). */
typedef enum {
    CIS2_T_EMBED, CIS2_T_FINAL_NORM, CIS2_T_LM_HEAD,
    CIS2_T_ATTN_NORM, CIS2_T_ATTN_OUT_NORM, CIS2_T_FFN_NORM, CIS2_T_FFN_OUT_NORM,
    CIS2_T_Q, CIS2_T_K, CIS2_T_V, CIS2_T_QKV, CIS2_T_O,
    CIS2_T_Q_BIAS, CIS2_T_K_BIAS, CIS2_T_V_BIAS, CIS2_T_Q_NORM, CIS2_T_K_NORM,
    CIS2_T_GATE, CIS2_T_UP, CIS2_T_GATE_UP, CIS2_T_DOWN,
    /* a sparse layer's (docs/models.md §M8.2): the router, and each expert's gated MLP */
    CIS2_T_ROUTER, CIS2_T_EXPERT_GATE, CIS2_T_EXPERT_UP, CIS2_T_EXPERT_DOWN,
    /* gpt_oss's (§M9.2, §M9.6): o_proj's bias, the sinks, the router's bias; every expert's fused
     * gate/up and down as MXFP4 blocks and scales, and their biases, one tensor each for all experts */
    CIS2_T_O_BIAS, CIS2_T_SINKS, CIS2_T_ROUTER_BIAS,
    CIS2_T_EXPERTS_GU_BLOCKS, CIS2_T_EXPERTS_GU_SCALES, CIS2_T_EXPERTS_GU_BIAS,
    CIS2_T_EXPERTS_DOWN_BLOCKS, CIS2_T_EXPERTS_DOWN_SCALES, CIS2_T_EXPERTS_DOWN_BIAS,
    /* a Gated DeltaNet layer's (docs/models.md §M10.2): in_proj_qkv, in_proj_z, in_proj_b, in_proj_a,
     * conv1d [C, 1, K], A_log, dt_bias, the gated norm's weight, out_proj */
    CIS2_T_LIN_QKV, CIS2_T_LIN_Z, CIS2_T_LIN_B, CIS2_T_LIN_A, CIS2_T_LIN_CONV, CIS2_T_LIN_A_LOG,
    CIS2_T_LIN_DT_BIAS, CIS2_T_LIN_NORM, CIS2_T_LIN_OUT,
    /* qwen3_5_moe's (§M10.10): all experts' gate_up [E, 2 Im, hidden] and down [E, hidden, Im]; the shared
     * expert's gate, up, down, and its gate's one row [1, hidden] */
    CIS2_T_EXPERTS_GATE_UP, CIS2_T_EXPERTS_DOWN, CIS2_T_SHARED_GATE, CIS2_T_SHARED_UP, CIS2_T_SHARED_DOWN,
    CIS2_T_SHARED_ROUTER,
    /* qwen3_next's (§M10.11): in_proj_qkvz [2 KD + 2 VD, hidden] and in_proj_ba [2 Hv, hidden], grouped per key head */
    CIS2_T_LIN_QKVZ, CIS2_T_LIN_BA
} cis2_tensor_role;

typedef struct cis2_tensor_spec {
    char name[96];
    cis2_tensor_role role;
    int64_t layer;              /* -1 outside the layers */
    int64_t expert;             /* the expert of CIS2_T_EXPERT_*, else -1 */
    int ndim;                   /* 1 to 4 */
    uint64_t d0, d1, d2, d3;    /* the shape: [d0], [d0, d1] (rows, columns), ... */
    int u8;                     /* dtype U8 (MXFP4 blocks and scales), else a float dtype */
} cis2_tensor_spec;

struct cis2_config;
/* Calls fn once per tensor the config calls for, in `cis2 synth`'s file
 * order (the embedding; per layer its norms, attention and MLP tensors;
 * the final norm; an untied lm_head), stopping at fn's first nonzero
 * return, which it returns (0 when every call returned 0). */
int cis2_family_tensors(const struct cis2_config *c, int (*fn)(void *ctx, const cis2_tensor_spec *t), void *ctx);

#endif

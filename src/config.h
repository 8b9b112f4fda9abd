/*
 * config.h - reads a Hugging Face config.json into the architecture
 * parameters cis2 runs (spec §2.2, the §2.3 eps cast, §7.1's theta cast).
 */
#ifndef CIS2_CONFIG_H
#define CIS2_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "family.h"

/* Limits (see config.c): anything larger is refused as CIS2_E_FORMAT. */
#define CIS2_CFG_MAX_HIDDEN 65536
#define CIS2_CFG_MAX_INTER (1 << 20)
#define CIS2_CFG_MAX_LAYERS 1024
#define CIS2_CFG_MAX_VOCAB (1 << 22)
#define CIS2_CFG_MAX_POS (1 << 20)
#define CIS2_CFG_MAX_EXPERTS 1024
#define CIS2_CFG_MAX_PARAMS 1000000000000ull
#define CIS2_CFG_MAX_FILE (16u << 20)
/* jansson heap budget for config.json (jsonlim.h); real files need < 64 KiB. */
#define CIS2_CFG_MAX_JSON_COST (64ull << 20)

typedef struct cis2_config {
    int64_t hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
            num_key_value_heads, head_dim, vocab_size, max_position_embeddings;
    double rms_norm_eps_f64;   /* as parsed */
    float rms_norm_eps;        /* §2.3: one RNE cast f64->f32; 1e-05 -> 0x3727C5AC */
    double rope_theta_f64;
    float rope_theta;          /* (float)rope_theta_f64: `rope_theta as f32` of §7.1 */
    /* rope_type "llama3" (docs/models.md §M1): its four members as parsed,
     * and the f32 parameters of the rescaled table derived from them. */
    int rope_llama3;
    double l3_factor, l3_low_ff, l3_high_ff;
    int64_t l3_old_ctx;        /* original_max_position_embeddings, <= 2^24 */
    int tie_word_embeddings;
    /* smollm3 (docs/models.md §M3): no_rope[L] = 1 where layer L skips RoPE
     * (no_rope_layers' 0); all 0 for every other family. */
    uint8_t no_rope[CIS2_CFG_MAX_LAYERS];
    /* mistral, phi3 (docs/models.md §M5), gemma3_text (§M7): sliding_window
     * as written (gemma3_text: 4096 if absent), in [1, 2^31]; 0 where no
     * window acts (null, absent, other families).  slides[L] = 1 where
     * layer L has the window: every layer for mistral and phi3, gemma3_text's
     * "sliding_attention" layers (§M7.1). */
    int64_t sliding_window;
    uint8_t slides[CIS2_CFG_MAX_LAYERS];
    /* gemma3_text (docs/models.md §M7): query_pre_attn_scalar (an integer in
     * [1, 2^24], default 256) and the local layers' RoPE base
     * (rope_local_base_freq, default 10000) as parsed and as f32. */
    int64_t query_pre_attn_scalar;
    double rope_local_theta_f64;
    float rope_local_theta;
    /* a family with a mixture of experts (docs/models.md §M8.1): its
     * experts, how many each token uses, their MLP width, whether the k
     * weights are renormalised; sparse[L] = 1 where layer L's feed-forward
     * is the mixture (else §10's dense MLP of intermediate_size) */
    int64_t num_experts, num_experts_per_tok, moe_intermediate_size;
    int64_t shared_inter;      /* qwen3_5_moe's shared_expert_intermediate_size (§M10.10), else 0 */
    int norm_topk_prob;
    double swiglu_limit_f64;   /* gpt_oss (§M9.5): the experts' clamp, as parsed and as f32 */
    float swiglu_limit;
    /* rope_type "yarn" (docs/models.md §M9.4): its members as parsed */
    int rope_yarn, yarn_truncate;
    double yarn_factor, yarn_beta_fast, yarn_beta_slow;
    int64_t yarn_old_ctx;
    uint8_t sparse[CIS2_CFG_MAX_LAYERS];
    /* RoPE rotates the first rotary_dim dimensions of a head: head_dim, or
     * in a family with partial_rotary (docs/models.md §M10.5)
     * int(head_dim * partial_rotary_factor), even and in [2, head_dim] */
    double partial_rotary_f64;
    int64_t rotary_dim;
    /* a hybrid family's Gated DeltaNet layers (docs/models.md §M10.1):
     * linear[L] = 1 where layer L is "linear_attention"; the key and value
     * heads and their dims, the causal conv's kernel */
    uint8_t linear[CIS2_CFG_MAX_LAYERS];
    int64_t lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel;
    char model_type[32];       /* as written: a row of family.c, or "" (= llama) */
    const cis2_family *family; /* its row (family.h); never NULL once parsed */
    int attention_bias;        /* as written (false if absent); Qwen2 ignores it */
    int mlp_bias;              /* as written (false if absent); Qwen2 ignores it */
    /* eos_token_id, for stop-at-eos (docs/sampling.md §S5.1): an integer or
     * a list of at most 64, each a u32; absent, null or [] give n_eos 0;
     * anything else sets eos_malformed (refused only when stop-at-eos is
     * asked for).  A model directory's generation_config.json appends its
     * own (genconfig.h). */
    uint32_t eos_ids[64];
    size_t n_eos;
    int eos_malformed;
} cis2_config;


/* Reads `path` once (fileio.h: a regular file, at most CIS2_CFG_MAX_FILE
 * bytes, unchanged while read) and parses it (CIS2_E_IO if unreadable). */
int cis2_config_load(cis2_config *c, const char *path, cis2_error *err);
/* The same, also giving the sha256 of exactly the bytes parsed (§2.1);
 * sha may be NULL. */
int cis2_config_load_sha(cis2_config *c, const char *path, uint8_t sha[32], cis2_error *err);
/* An eos_token_id value (docs/sampling.md §S5.1) as ids: NULL or null give
 * none; an integer 0..2^32-1 one; a list of at most 64 such integers its
 * ids in order.  0, or -1 for anything else. */
struct json_t;
int cis2_config_eos_list(const struct json_t *v, uint32_t ids[64], size_t *n);
/* Parses `len` bytes of JSON; name_for_errors prefixes every message. */
int cis2_config_parse(cis2_config *c, const char *json, size_t len, const char *name_for_errors, cis2_error *err);
/* The family's tensor semantics (its row, family.h):
 * q/k/v biases exist for qwen2 always, for llama when attention_bias is
 * true; llama's attention_bias also gives o_proj a bias (which §9 does not
 * have: the loader refuses it, CIS2_E_UNSUPPORTED). */
int cis2_config_qkv_bias(const cis2_config *c);
int cis2_config_o_bias(const cis2_config *c);
/* qwen3, gemma3_text: per-head RMSNorm of q and k (q_norm, k_norm;
 * docs/models.md §M2, §M7). */
int cis2_config_qk_norm(const cis2_config *c);
/* olmo2 (docs/models.md §M4): norms after the attention and MLP blocks, no
 * pre-norms, q_norm [heads*head_dim] and k_norm [kv_heads*head_dim] over
 * the whole projections. */
int cis2_config_post_norm(const cis2_config *c);
/* phi3 (docs/models.md §M6): q/k/v as one qkv_proj and gate/up as one
 * gate_up_proj tensor per layer, split by rows as they load. */
int cis2_config_fused(const cis2_config *c);
/* gemma3_text (docs/models.md §M7): the embedding scaled, RMSNorm weights
 * used as (1 + w), four norms per layer, per-head q/k norms, GELU-tanh,
 * query_pre_attn_scalar, and local layers with their own RoPE base. */
int cis2_config_gemma3(const cis2_config *c);
/* The RoPE inverse-frequency table the config asks for, head_dim/2
 * entries: §7.1, then for rope_type "llama3" docs/models.md §M1's
 * rescaling.  What model.c rotates with and what §7.2's
 * inv_freq_table_digest hashes (model.c, judge.c). */
void cis2_config_inv_freq(const cis2_config *c, float *inv_freq);
/* How many entries cis2_config_inv_freq writes: head_dim/2, or for
 * gemma3_text the global table then the local one (docs/models.md §M7.4),
 * head_dim each.  §7.2's digest hashes them all, in that order. */
size_t cis2_config_inv_freq_len(const cis2_config *c);
/* YaRN's attention factor (docs/models.md §M9.4) that multiplies every
 * cos and sin; 1 without YaRN. */
float cis2_config_rope_mscale(const cis2_config *c);
/* Total parameter count of the checkpoint this config describes: the
 * elements of every tensor cis2_family_tensors lists (family.h). */
uint64_t cis2_config_param_count(const cis2_config *c);

#endif

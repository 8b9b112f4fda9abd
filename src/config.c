/*
 * config.c - config.json -> cis2_config (spec §2.2 architecture fields, §2.3
 * rms_norm_eps f64 -> f32 cast, §7.1 rope_theta as f32).
 *
 * Every architecture field is read from the file (§2.2: never hard-coded).
 * Optional fields take the family's config class's defaults (its row of
 * the family table, family.c; LlamaConfig's for llama):
 *   num_key_value_heads = num_attention_heads, head_dim = hidden/heads
 *   (128 for qwen3 and qwen3_moe, 256 for gemma3_text, 64 for gpt_oss;
 *   docs/arithmetic.md section 2),
 *   max_position_embeddings = 2048, rope_theta = 10000.0 (given at the top
 *   level, in rope_parameters (transformers 5) or in rope_scaling),
 *   tie_word_embeddings = false, hidden_act = "silu".
 * A JSON null counts as absent.
 *
 * Every top-level key must be in the key table (KEYS below: read, inert,
 * or neutral at one value); an unknown key is refused, never ignored
 * (docs/inputs.md "The key table"), since cis2 cannot tell whether it
 * changes the forward pass.
 *
 * Refused as CIS2_E_UNSUPPORTED (outside what the spec's forward pass
 * describes), one line naming the file and the key: a key not in the
 * table; a neutral key at another value (rope_interleaved or use_mrope
 * true, soft-capping, partial_rotary_factor != 1, ...); a model_type that
 * is no row of the family table; hidden_act
 * other than silu (gelu_pytorch_tanh for gemma3_text); RoPE other
 * than §7's plain construction, Llama 3.1's "llama3" rescaling or (gpt_oss)
 * "yarn" (docs/models.md §M9.4)
 * (docs/models.md §M1: rope_parameters / rope_scaling with another
 * rope_type, or any member but rope_type, rope_theta, partial_rotary_factor
 * 1 and llama3's four); two RoPE bases that disagree (rope_theta,
 * rope_parameters.rope_theta, rope_scaling.rope_theta); sliding-window
 * attention but mistral's, phi3's and gemma3_text's (docs/models.md §M5,
 * §M7: use_sliding_window true, a sliding_window that could act, layer_types
 * other than "full_attention"); Gemma 3's keys (query_pre_attn_scalar,
 * rope_local_base_freq, sliding_window_pattern) in any other family;
 * a mixture of experts' keys (docs/models.md §M8.1, §M9.1) in a family
 * without one; quantization_config but gpt_oss's MXFP4 (§M9.1);
 * llama mlp_bias true (§10 has
 * no MLP biases); and an explicit head_dim with heads*head_dim !=
 * hidden_size (§2.5 pins q_proj/o_proj as [hidden, hidden]) except for
 * qwen3 and gemma3_text (docs/models.md §M2, §M7: q_proj [heads*head_dim,
 * hidden]).
 * pretraining_tp (any positive integer) is accepted: it split a training
 * run's matmuls, and §5 fixes every sum's order whatever it says.
 *
 * Each family's defaults, refusals and features are its row of the
 * family table (family.c); this file reads a config against its row.
 * Family semantics for which tensors exist (Hugging Face's modeling code;
 * family.c lists them, the loader in model.c enforces them): llama (also a config without
 * model_type) has q/k/v and o_proj biases exactly when attention_bias is
 * true, MLP biases when mlp_bias is true; qwen2 always has q/k/v biases and
 * never o_proj or MLP biases, whatever attention_bias / mlp_bias say (its
 * modeling code does not read them); qwen3 has q_norm/k_norm weights per
 * layer, no MLP biases whatever mlp_bias says, and attention_bias true
 * (q/k/v and o_proj biases) refused; smollm3 is llama's tensors, with
 * no_rope_layers / no_rope_layer_interval read (docs/models.md §M3);
 * olmo2 has no input_layernorm, a post_attention_layernorm and a
 * post_feedforward_layernorm after the blocks, q_norm/k_norm over the
 * whole projections, and attention_bias true refused (§M4); phi3 is
 * llama's arithmetic with q/k/v fused into one qkv_proj and gate/up into
 * one gate_up_proj (split as they load, §M6) and mistral's window, and
 * attention_bias true refused; gemma3_text (§M7) has q_norm/k_norm per
 * head, four norms per layer (input, post_attention, pre_feedforward,
 * post_feedforward), every norm multiplying by 1 + w, a scaled
 * embedding, tied weights by default, Gemma3TextConfig's defaults
 * (head_dim 256, rope_theta 1e6, rope_local_base_freq 1e4,
 * query_pre_attn_scalar 256, sliding_window 4096, pattern 6), and
 * attention_bias / mlp_bias true refused.
 * Both must be booleans when present.
 * qwen3_5 (docs/models.md §M10) is a multimodal wrapper: the text model's
 * keys are in text_config (parse_wrapper; vision_config and the vision
 * token ids are not read: text only), its layers are Gated DeltaNet
 * ("linear_attention") or gated full attention (parse_hybrid), RoPE turns
 * the first partial_rotary_factor of each head (parse_rotary), and
 * rope_parameters' mrope_section / mrope_interleaved are checked and inert
 * for text.
 *
 * Memory: the file is read once (fileio.h, at most 16 MiB) and its JSON
 * cost bounded before parsing (jsonlim.h, CIS2_CFG_MAX_JSON_COST).
 *
 * Size limits (CIS2_E_FORMAT beyond them) keep every later product within
 * size_t and every allocation sane: hidden <= 65536, intermediate <= 2^20,
 * layers <= 1024, vocab <= 2^22, max_position_embeddings <= 2^20, total
 * parameters <= 1e12 (Qwen3-Next-80B-A3B has 80e9).  With these, hidden*inter < 2^37, vocab*hidden < 2^38
 * and the parameter sum stays far below 2^63.
 */
#include "config.h"
#include "digest.h"
#include "fileio.h"
#include "jsonlim.h"
#include "pmath.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The member, or NULL when absent or null. */
static json_t *opt(json_t *root, const char *key)
{
    json_t *v = json_object_get(root, key);
    return json_is_null(v) ? NULL : v;
}

static int finite_pos(double d) { return d == d && d - d == 0.0 && d > 0.0; }

/* A positive integer <= max from `key`; *out untouched if absent and !required. */
static int get_size(json_t *root, const char *key, int required, int64_t max, int64_t *out, const char *name,
                    cis2_error *err)
{
    json_t *v = opt(root, key);
    if (!v) {
        if (required) return cis2_fail(err, CIS2_E_FORMAT, "%s: missing required field %s", name, key);
        return CIS2_OK;
    }
    if (json_is_real(v) && json_real_value(v) >= 9223372036854775808.0) /* inputs.md "JSON numbers" */
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s = %.17g is beyond 64 bits (the limit is %lld)", name, key,
                         json_real_value(v), (long long)max);
    if (!json_is_integer(v))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be a positive integer", name, key);
    json_int_t x = json_integer_value(v);
    if (x <= 0) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be a positive integer, got %lld", name, key,
                                 (long long)x);
    if (x > max) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s = %lld exceeds the limit %lld", name, key,
                                  (long long)x, (long long)max);
    *out = (int64_t)x;
    return CIS2_OK;
}

/* An optional boolean; *out untouched if absent. */
static int get_bool(json_t *root, const char *key, int *out, const char *name, cis2_error *err)
{
    json_t *v = opt(root, key);
    if (!v) return CIS2_OK;
    if (!json_is_boolean(v)) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be true or false", name, key);
    *out = json_is_true(v);
    return CIS2_OK;
}

static int count_elements(void *ctx, const cis2_tensor_spec *t)
{
    uint64_t n = t->d0; /* < 2^38 each within the size limits */
    if (t->ndim > 1) n *= t->d1;
    if (t->ndim > 2) n *= t->d2;
    if (t->ndim > 3) n *= t->d3;
    *(uint64_t *)ctx += t->u8 && t->ndim == 4 ? 2 * n : n; /* an MXFP4 block byte holds two parameters */
    return 0;
}

uint64_t cis2_config_param_count(const cis2_config *c)
{
    uint64_t n = 0;
    cis2_family_tensors(c, count_elements, &n);
    return n;
}

static int eos_value(const json_t *v, uint32_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) return -1;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

int cis2_config_eos_list(const json_t *v, uint32_t ids[64], size_t *n)
{
    *n = 0;
    if (!v || json_is_null(v)) return 0;
    if (json_is_array(v)) {
        size_t k = json_array_size(v);
        if (k > 64) return -1;
        for (size_t i = 0; i < k; i++)
            if (eos_value(json_array_get(v, i), &ids[i])) return -1;
        *n = k;
        return 0;
    }
    if (eos_value(v, &ids[0])) return -1;
    *n = 1;
    return 0;
}

/* eos_token_id (docs/sampling.md §S5.1), kept for stop-at-eos. */
static void parse_eos(cis2_config *c, const json_t *v)
{
    c->eos_malformed = cis2_config_eos_list(v, c->eos_ids, &c->n_eos) != 0;
    if (c->eos_malformed) c->n_eos = 0;
}

/* ---- the key table (docs/inputs.md "The key table") ----
 *
 * Every top-level key cis2 knows, in one of three classes; any other key is
 * refused (CIS2_E_UNSUPPORTED, naming it): cis2 cannot tell whether an
 * unknown key changes the forward pass, so it never ignores one.
 *   READ     read by parse_root below (sizes, norms, RoPE, biases, eos, ...)
 *   INERT    accepted with any value: the forward pass of §4-§11 does not
 *            depend on it (token ids for generation defaults, dtypes (the
 *            weights' dtype is the file's, compute is fp32), dropout,
 *            initialisation, caching, bookkeeping)
 *   NEUTRAL  accepted only at the value cis2 implements (absent, null, or
 *            the neutral value named); any other value is refused
 * docs/inputs.md lists the table; tests/unit/test_config.c checks that the
 * real configs in $SHARED/models/families are refused, if at all, for a
 * reason of substance, never for an unknown key. */
typedef enum { KEY_READ, KEY_INERT, KEY_NEUTRAL } key_class;
typedef int (*neutral_fn)(const cis2_family *f, const json_t *root, const json_t *v); /* 1: the implemented value */
typedef struct key_rule {
    const char *key;
    key_class cls;
    neutral_fn neutral; /* KEY_NEUTRAL only */
    const char *why;    /* KEY_NEUTRAL: what another value would ask for */
} key_rule;

static int is_false(const cis2_family *f, const json_t *root, const json_t *v)
{
    (void)f, (void)root;
    return json_is_false(v);
}
static int is_one(const cis2_family *f, const json_t *root, const json_t *v)
{
    (void)f, (void)root;
    return json_is_number(v) && json_number_value(v) == 1.0;
}
static int is_never(const cis2_family *f, const json_t *root, const json_t *v) { (void)f, (void)root, (void)v; return 0; }
/* partial_rotary_factor: 1 (§7 rotates every dimension), or any value in a
 * family that reads it (parse_rope, docs/models.md §M10.5). */
static int rotary_one(const cis2_family *f, const json_t *root, const json_t *v)
{
    return f->partial_rotary != 0.0 || is_one(f, root, v);
}
/* SmolLM3's no_rope_layers: 1 = this layer uses RoPE; all 1 is §7 everywhere.
 * A family with `nope` reads it (parse_nope, docs/models.md §M3). */
static int all_rope(const cis2_family *f, const json_t *root, const json_t *v)
{
    (void)root;
    if (f->nope) return 1;
    if (!json_is_array(v)) return 0;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_integer(json_array_get(v, i)) || json_integer_value(json_array_get(v, i)) != 1) return 0;
    return 1;
}
/* no_rope_layer_interval only derives no_rope_layers when that is absent. */
static int interval_unused(const cis2_family *f, const json_t *root, const json_t *v)
{
    (void)v;
    if (f->nope) return 1; /* parse_nope reads it */
    const json_t *l = json_object_get(root, "no_rope_layers");
    return l && !json_is_null(l);
}

static const key_rule KEYS[] = {
    /* read (§2.2 sizes, §2.3 eps, §7.1 theta, §9/§10 structure, eos for §S5.1) */
    {"model_type", KEY_READ, NULL, NULL},
    {"hidden_size", KEY_READ, NULL, NULL},
    {"intermediate_size", KEY_READ, NULL, NULL},
    {"num_hidden_layers", KEY_READ, NULL, NULL},
    {"num_attention_heads", KEY_READ, NULL, NULL},
    {"num_key_value_heads", KEY_READ, NULL, NULL},
    {"head_dim", KEY_READ, NULL, NULL},
    {"vocab_size", KEY_READ, NULL, NULL},
    {"max_position_embeddings", KEY_READ, NULL, NULL},
    {"rms_norm_eps", KEY_READ, NULL, NULL},
    {"rope_theta", KEY_READ, NULL, NULL},
    {"rope_parameters", KEY_READ, NULL, NULL},
    {"rope_scaling", KEY_READ, NULL, NULL},
    {"tie_word_embeddings", KEY_READ, NULL, NULL},
    {"attention_bias", KEY_READ, NULL, NULL},
    {"mlp_bias", KEY_READ, NULL, NULL},
    {"hidden_act", KEY_READ, NULL, NULL},
    {"hidden_activation", KEY_READ, NULL, NULL},      /* gemma3_text's; silu elsewhere (parse_features) */
    {"query_pre_attn_scalar", KEY_READ, NULL, NULL},  /* gemma3_text only (parse_gemma3) */
    {"rope_local_base_freq", KEY_READ, NULL, NULL},   /* gemma3_text only */
    {"sliding_window_pattern", KEY_READ, NULL, NULL}, /* gemma3_text only (parse_layout) */
    {"layer_types", KEY_READ, NULL, NULL},
    {"use_sliding_window", KEY_READ, NULL, NULL},
    {"sliding_window", KEY_READ, NULL, NULL},
    {"pretraining_tp", KEY_READ, NULL, NULL}, /* checked a positive integer; a training detail, §5 fixes every sum */
    {"num_experts", KEY_READ, NULL, NULL},           /* the mixture of experts (parse_moe, docs/models.md §M8.1) */
    {"num_local_experts", KEY_READ, NULL, NULL},     /* gpt_oss's (§M9.1) */
    {"experts_per_token", KEY_READ, NULL, NULL},
    {"swiglu_limit", KEY_READ, NULL, NULL},
    {"quantization_config", KEY_READ, NULL, NULL},   /* parse_quant: gpt_oss's MXFP4 experts only */
    {"num_experts_per_tok", KEY_READ, NULL, NULL},
    {"moe_intermediate_size", KEY_READ, NULL, NULL},
    {"norm_topk_prob", KEY_READ, NULL, NULL},
    {"shared_expert_intermediate_size", KEY_READ, NULL, NULL}, /* qwen3_5_moe's shared expert (§M10.10) */
    {"decoder_sparse_step", KEY_READ, NULL, NULL},
    {"mlp_only_layers", KEY_READ, NULL, NULL},
    {"eos_token_id", KEY_READ, NULL, NULL},
    /* a multimodal wrapper's (parse_wrapper, docs/models.md §M10.1): refused in a text model's config */
    {"text_config", KEY_READ, NULL, NULL},
    {"vision_config", KEY_READ, NULL, NULL},
    {"image_token_id", KEY_READ, NULL, NULL},
    {"video_token_id", KEY_READ, NULL, NULL},
    {"vision_start_token_id", KEY_READ, NULL, NULL},
    {"vision_end_token_id", KEY_READ, NULL, NULL},
    /* the Gated DeltaNet layers of a hybrid family (parse_hybrid, docs/models.md §M10.1) */
    {"full_attention_interval", KEY_READ, NULL, NULL},
    {"linear_conv_kernel_dim", KEY_READ, NULL, NULL},
    {"linear_key_head_dim", KEY_READ, NULL, NULL},
    {"linear_num_key_heads", KEY_READ, NULL, NULL},
    {"linear_num_value_heads", KEY_READ, NULL, NULL},
    {"linear_value_head_dim", KEY_READ, NULL, NULL},
    {"attn_output_gate", KEY_READ, NULL, NULL},
    {"mamba_ssm_dtype", KEY_READ, NULL, NULL},
    {"mtp_num_hidden_layers", KEY_READ, NULL, NULL},
    {"mtp_use_dedicated_embeddings", KEY_READ, NULL, NULL},
    /* neutral: refused unless the value is the one cis2 implements */
    {"rope_interleaved", KEY_NEUTRAL, is_false, "interleaved RoPE is not §7's rotate-half"},
    {"use_mrope", KEY_NEUTRAL, is_false, "multimodal RoPE is not §7"},
    {"partial_rotary_factor", KEY_NEUTRAL, rotary_one, "§7 rotates every dimension of a head"},
    {"attn_logit_softcapping", KEY_NEUTRAL, is_never, "§9 has no score soft-capping"},
    {"final_logit_softcapping", KEY_NEUTRAL, is_never, "§11 has no logit soft-capping"},
    {"no_rope_layers", KEY_NEUTRAL, all_rope, "§7 rotates q and k in every layer"},
    {"no_rope_layer_interval", KEY_NEUTRAL, interval_unused, "§7 rotates q and k in every layer"},
    {"qk_norm", KEY_NEUTRAL, is_false, "§9 has no q/k norm"},
    {"use_qk_norm", KEY_NEUTRAL, is_false, "§9 has no q/k norm"},
    {"qk_layernorm", KEY_NEUTRAL, is_false, "§9 has no q/k norm"},
    /* inert: the forward pass does not depend on them */
    {"architectures", KEY_INERT, NULL, NULL},
    {"auto_map", KEY_INERT, NULL, NULL},
    {"_name_or_path", KEY_INERT, NULL, NULL},
    {"_commit_hash", KEY_INERT, NULL, NULL},
    {"_attn_implementation", KEY_INERT, NULL, NULL},
    {"_attn_implementation_autoset", KEY_INERT, NULL, NULL},
    {"transformers_version", KEY_INERT, NULL, NULL},
    {"torch_dtype", KEY_INERT, NULL, NULL},
    {"dtype", KEY_INERT, NULL, NULL},
    {"use_bfloat16", KEY_INERT, NULL, NULL},
    {"bos_token_id", KEY_INERT, NULL, NULL},
    {"pad_token_id", KEY_INERT, NULL, NULL},
    {"sep_token_id", KEY_INERT, NULL, NULL},
    {"unk_token_id", KEY_INERT, NULL, NULL},
    {"decoder_start_token_id", KEY_INERT, NULL, NULL},
    {"tokenizer_class", KEY_INERT, NULL, NULL},
    {"use_cache", KEY_INERT, NULL, NULL},
    {"cache_implementation", KEY_INERT, NULL, NULL},
    {"initializer_range", KEY_INERT, NULL, NULL},
    {"attention_dropout", KEY_INERT, NULL, NULL},
    {"hidden_dropout", KEY_INERT, NULL, NULL},
    {"embd_pdrop", KEY_INERT, NULL, NULL},
    {"resid_pdrop", KEY_INERT, NULL, NULL},
    {"is_llama_config", KEY_INERT, NULL, NULL},
    {"router_aux_loss_coef", KEY_INERT, NULL, NULL},  /* training's load-balancing loss */
    {"output_router_logits", KEY_INERT, NULL, NULL},  /* what a training forward returns */
    {"max_window_layers", KEY_INERT, NULL, NULL},             /* acts only with use_sliding_window true (refused) */
    {"original_max_position_embeddings", KEY_INERT, NULL, NULL}, /* llama3 reads rope_scaling's, not this */
    {"initial_context_length", KEY_INERT, NULL, NULL},           /* gpt_oss's; YaRN reads rope_scaling's */
    {"output_attentions", KEY_INERT, NULL, NULL},
    {"output_hidden_states", KEY_INERT, NULL, NULL},
    {"return_dict", KEY_INERT, NULL, NULL},
    {"torchscript", KEY_INERT, NULL, NULL},
    {"tie_encoder_decoder", KEY_INERT, NULL, NULL},
    {"is_encoder_decoder", KEY_INERT, NULL, NULL},
    {"is_decoder", KEY_INERT, NULL, NULL},
    {"add_cross_attention", KEY_INERT, NULL, NULL},
    {"chunk_size_feed_forward", KEY_INERT, NULL, NULL},
    {"pruned_heads", KEY_INERT, NULL, NULL},
    {"id2label", KEY_INERT, NULL, NULL},
    {"label2id", KEY_INERT, NULL, NULL},
    {"problem_type", KEY_INERT, NULL, NULL},
    {"finetuning_task", KEY_INERT, NULL, NULL},
    {"task_specific_params", KEY_INERT, NULL, NULL},
    {"prefix", KEY_INERT, NULL, NULL},
    {"tf_legacy_loss", KEY_INERT, NULL, NULL},
    /* generation defaults: cis2 takes its sampling from the request (docs/sampling.md) */
    {"max_length", KEY_INERT, NULL, NULL},
    {"min_length", KEY_INERT, NULL, NULL},
    {"do_sample", KEY_INERT, NULL, NULL},
    {"early_stopping", KEY_INERT, NULL, NULL},
    {"num_beams", KEY_INERT, NULL, NULL},
    {"num_beam_groups", KEY_INERT, NULL, NULL},
    {"diversity_penalty", KEY_INERT, NULL, NULL},
    {"temperature", KEY_INERT, NULL, NULL},
    {"top_k", KEY_INERT, NULL, NULL},
    {"top_p", KEY_INERT, NULL, NULL},
    {"typical_p", KEY_INERT, NULL, NULL},
    {"repetition_penalty", KEY_INERT, NULL, NULL},
    {"length_penalty", KEY_INERT, NULL, NULL},
    {"no_repeat_ngram_size", KEY_INERT, NULL, NULL},
    {"encoder_no_repeat_ngram_size", KEY_INERT, NULL, NULL},
    {"bad_words_ids", KEY_INERT, NULL, NULL},
    {"num_return_sequences", KEY_INERT, NULL, NULL},
    {"output_scores", KEY_INERT, NULL, NULL},
    {"return_dict_in_generate", KEY_INERT, NULL, NULL},
    {"forced_bos_token_id", KEY_INERT, NULL, NULL},
    {"forced_eos_token_id", KEY_INERT, NULL, NULL},
    {"remove_invalid_values", KEY_INERT, NULL, NULL},
    {"exponential_decay_length_penalty", KEY_INERT, NULL, NULL},
    {"suppress_tokens", KEY_INERT, NULL, NULL},
    {"begin_suppress_tokens", KEY_INERT, NULL, NULL},
};

static const key_rule *key_find(const char *key)
{
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (!strcmp(KEYS[i].key, key)) return &KEYS[i];
    return NULL;
}

/* A JSON value for a message, at most 40 characters. */
static void show(const json_t *v, char out[48])
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(out, 48, "%.40s%s", s ? s : "?", s && strlen(s) > 40 ? "..." : "");
    free(s);
}

/* Every key is in the table; a neutral one has its implemented value. */
static int check_keys(const cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const key_rule *r = key_find(key);
        char val[48];
        if (!r)
            return cis2_fail(err, CIS2_E_UNSUPPORTED,
                             "%s: key '%.60s' is not known to cis2 (a key that may change the forward pass is "
                             "refused, never ignored)", name, key);
        if (r->cls != KEY_NEUTRAL || json_is_null(v) || r->neutral(c->family, root, v)) continue;
        show(v, val);
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s = %s is not implemented (%s)", name, key, val, r->why);
    }
    return CIS2_OK;
}

/* ---- RoPE (§7): the base, and only the plain construction ----
 * The base may be given as rope_theta, inside rope_parameters (transformers
 * 5) or inside rope_scaling (its older name); every one given must agree.
 * rope_parameters / rope_scaling may name only rope_type (or type)
 * "default", rope_theta, and partial_rotary_factor 1. */
typedef struct theta_src { double v; const char *from; } theta_src;

static int theta_take(theta_src *t, const json_t *v, const char *from, const char *name, cis2_error *err)
{
    if (!json_is_number(v)) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be a number", name, from);
    double x = json_number_value(v);
    if (t->from && x != t->v)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s (%.17g) and %s (%.17g) disagree: which base is meant?",
                         name, t->from, t->v, from, x);
    if (!t->from) { t->v = x; t->from = from; }
    return CIS2_OK;
}

/* rope_type "llama3" (docs/models.md §M1): transformers'
 * _compute_llama3_parameters reads exactly these four members, all
 * required.  Checked so that the f32 table of §M1 is finite and its
 * medium band well defined: factor >= 1, 0 < low_freq_factor <
 * high_freq_factor, each finite also as f32, and
 * original_max_position_embeddings an integer in [1, 2^24] (exact in f32). */
static int llama3_params(cis2_config *c, json_t *o, const char *key, const char *name, cis2_error *err)
{
    static const char *const need[4] = {"factor", "low_freq_factor", "high_freq_factor",
                                        "original_max_position_embeddings"};
    double *dst[3] = {&c->l3_factor, &c->l3_low_ff, &c->l3_high_ff};
    for (int i = 0; i < 4; i++) {
        json_t *v = opt(o, need[i]);
        if (!v)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.%s is missing (rope_type \"llama3\" needs factor, "
                             "low_freq_factor, high_freq_factor and original_max_position_embeddings)", name, key,
                             need[i]);
        if (i == 3) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
                return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.original_max_position_embeddings must be an integer "
                                 "in [1, 16777216]", name, key);
            c->l3_old_ctx = (int64_t)json_integer_value(v);
            continue;
        }
        if (!json_is_number(v) || !finite_pos(json_number_value(v)) || !finite_pos((double)(float)json_number_value(v)))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.%s must be a finite number > 0 (also as f32)", name, key,
                             need[i]);
        *dst[i] = json_number_value(v);
    }
    if (!(c->l3_factor >= 1.0))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.factor %.17g must be >= 1", name, key, c->l3_factor);
    if (!(c->l3_low_ff < c->l3_high_ff) || !((float)(c->l3_high_ff - c->l3_low_ff) > 0.0f))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.low_freq_factor (%.17g) must be below high_freq_factor (%.17g)",
                         name, key, c->l3_low_ff, c->l3_high_ff);
    c->rope_llama3 = 1;
    return CIS2_OK;
}

/* rope_type "yarn" (docs/models.md §M9.4), for a family that reads it
 * (gpt_oss): factor (required, finite, >= 1 also as f32),
 * original_max_position_embeddings (required, an integer in [1, 2^24]),
 * beta_fast (default 32), beta_slow (default 1), each finite and > 0 also
 * as f32, and truncate (default true).  transformers derives the factor
 * from max_position_embeddings / original_max_position_embeddings in some
 * versions and reads factor in others: the two must agree. */
static int yarn_params(cis2_config *c, json_t *o, const char *key, const char *name, cis2_error *err)
{
    static const char *const num[3] = {"factor", "beta_fast", "beta_slow"};
    double *dst[3] = {&c->yarn_factor, &c->yarn_beta_fast, &c->yarn_beta_slow};
    c->yarn_beta_fast = 32.0;
    c->yarn_beta_slow = 1.0;
    for (int i = 0; i < 3; i++) {
        json_t *v = opt(o, num[i]);
        if (!v && i == 0)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.factor is missing (rope_type \"yarn\" needs it)", name, key);
        if (!v) continue;
        if (!json_is_number(v) || !finite_pos(json_number_value(v)) || !finite_pos((double)(float)json_number_value(v)))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.%s must be a finite number > 0 (also as f32)", name, key,
                             num[i]);
        *dst[i] = json_number_value(v);
    }
    if (!(c->yarn_factor >= 1.0))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.factor %.17g must be >= 1", name, key, c->yarn_factor);
    json_t *v = opt(o, "original_max_position_embeddings");
    if (!v || !json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.original_max_position_embeddings must be an integer in "
                         "[1, 16777216] (rope_type \"yarn\" needs it)", name, key);
    c->yarn_old_ctx = (int64_t)json_integer_value(v);
    if ((double)c->max_position_embeddings / (double)c->yarn_old_ctx != c->yarn_factor)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s.factor %.17g and max_position_embeddings / "
                         "original_max_position_embeddings (%lld / %lld) disagree: which factor is meant?", name, key,
                         c->yarn_factor, (long long)c->max_position_embeddings, (long long)c->yarn_old_ctx);
    c->yarn_truncate = 1;
    if ((v = opt(o, "truncate"))) {
        if (!json_is_boolean(v)) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.truncate must be true or false", name, key);
        c->yarn_truncate = json_is_true(v);
    }
    c->rope_yarn = 1;
    return CIS2_OK;
}

static int is_yarn_member(const char *sub)
{
    return !strcmp(sub, "factor") || !strcmp(sub, "beta_fast") || !strcmp(sub, "beta_slow") ||
           !strcmp(sub, "original_max_position_embeddings") || !strcmp(sub, "truncate");
}

static int is_llama3_member(const char *sub)
{
    return !strcmp(sub, "factor") || !strcmp(sub, "low_freq_factor") || !strcmp(sub, "high_freq_factor") ||
           !strcmp(sub, "original_max_position_embeddings");
}

static int rope_object(cis2_config *c, json_t *root, const char *key, theta_src *th, const char *name,
                       cis2_error *err)
{
    const char *from = !strcmp(key, "rope_scaling") ? "rope_scaling.rope_theta" : "rope_parameters.rope_theta";
    json_t *o = opt(root, key);
    if (!o) return CIS2_OK;
    if (!json_is_object(o)) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be an object or null", name, key);
    const char *type = NULL, *sub;
    json_t *v;
    char val[48];
    const char *spelling = NULL;
    for (int i = 0; i < 2; i++) { /* rope_type, or its older spelling type; both must agree */
        const char *k = i ? "type" : "rope_type";
        json_t *t = opt(o, k);
        if (!t) continue;
        if (!json_is_string(t)) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.%s must be a string", name, key, k);
        if (type && strcmp(type, json_string_value(t)))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.rope_type and %s.type disagree", name, key, key);
        type = json_string_value(t);
        spelling = k;
    }
    int llama3 = type && !strcmp(type, "llama3");
    if (llama3 && c->family->partial_rotary != 0.0)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s.%s \"llama3\" is not implemented for model_type %s (its "
                         "RoPE is the default one over part of each head, docs/models.md §M10.5)", name, key, spelling,
                         c->family->model_type);
    int yarn = type && !strcmp(type, "yarn") && c->family->rope_yarn; /* docs/models.md §M9.4 */
    if ((yarn && c->rope_yarn) || (yarn && c->rope_llama3) || (llama3 && c->rope_yarn))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: rope_parameters and rope_scaling both ask for scaling: which "
                         "is meant?", name);
    if (type && strcmp(type, "default") && !llama3 && !yarn)
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: %s.%s \"%.40s\" is not implemented (cis2 runs plain RoPE, §7: rope_type \"default\", "
                         "and Llama 3.1's \"llama3\")", name, key, spelling, type);
    if (llama3 && c->rope_llama3)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: rope_parameters and rope_scaling both ask for \"llama3\" "
                         "scaling: which is meant?", name);
    json_object_foreach(o, sub, v) {
        if (!strcmp(sub, "rope_type") || !strcmp(sub, "type") || json_is_null(v)) continue;
        if (!strcmp(sub, "rope_theta")) {
            int rc = theta_take(th, v, from, name, err);
            if (rc) return rc;
            continue;
        }
        if (!strcmp(sub, "partial_rotary_factor") && rotary_one(c->family, root, v)) continue; /* parse_rope */
        if (c->family->mrope && (!strcmp(sub, "mrope_section") || !strcmp(sub, "mrope_interleaved")))
            continue; /* parse_rotary */
        if (llama3 && is_llama3_member(sub)) continue; /* llama3_params */
        if (yarn && is_yarn_member(sub)) continue;     /* yarn_params */
        show(v, val);
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s.%.40s = %s is not implemented (%s takes only "
                         "rope_theta%s)", name, key, sub, val, llama3 ? "\"llama3\" RoPE" : yarn ? "\"yarn\" RoPE" : "plain RoPE, §7,",
                         llama3 ? " and its four scaling members" : yarn ? " and its five scaling members" : "");
    }
    return llama3 ? llama3_params(c, o, key, name, err) : yarn ? yarn_params(c, o, key, name, err) : CIS2_OK;
}

static int parse_rope(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    theta_src th = {c->family->rope_theta, NULL}; /* the config class's default base (§M3.1, §M7.1) */
    json_t *top = opt(root, "rope_theta");
    int rc;
    if ((top && (rc = theta_take(&th, top, "rope_theta", name, err))) ||
        (rc = rope_object(c, root, "rope_parameters", &th, name, err)) ||
        (rc = rope_object(c, root, "rope_scaling", &th, name, err)))
        return rc;
    c->rope_theta_f64 = th.v;
    c->rope_theta = (float)c->rope_theta_f64; /* §7.1: rope_theta as f32 */
    if (!finite_pos(c->rope_theta_f64) || !finite_pos((double)c->rope_theta))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be finite and > 0 (also as f32)", name,
                         th.from ? th.from : "rope_theta");
    return CIS2_OK;
}

/* The rotated dimensions of a head (docs/models.md §M10.5):
 * partial_rotary_factor at the top level, in rope_parameters or in
 * rope_scaling (each one given must agree), by default the family's (0.25
 * for qwen3_5; 1 elsewhere, where the key table and rope_object accept only
 * 1); rotary_dim = int(head_dim * factor) as Python computes it (one f64
 * product, truncated toward zero), even and in [2, head_dim].  A family
 * with M-RoPE (qwen3_5) has rope_parameters' mrope_section (three
 * non-negative integers) and mrope_interleaved (a boolean) checked and
 * unused: text positions give its three position streams one value, which
 * is §7's RoPE (§M10.5). */
static int parse_rotary(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    static const char *const where[3] = {"partial_rotary_factor", "rope_parameters", "rope_scaling"};
    const cis2_family *f = c->family;
    double prf = f->partial_rotary != 0.0 ? f->partial_rotary : 1.0;
    int given = 0;
    for (int i = 0; i < 3; i++) {
        json_t *o = i ? opt(root, where[i]) : root;
        if (!json_is_object(o)) continue;
        json_t *v = opt(o, "partial_rotary_factor");
        if (v) {
            if (!json_is_number(v))
                return cis2_fail(err, CIS2_E_FORMAT, "%s: %s%spartial_rotary_factor must be a number", name,
                                 i ? where[i] : "", i ? "." : "");
            if (given && json_number_value(v) != prf)
                return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: partial_rotary_factor is given twice with different "
                                 "values: which is meant?", name);
            prf = json_number_value(v);
            given = 1;
        }
        json_t *ms = i && f->mrope ? opt(o, "mrope_section") : NULL, *mi = i && f->mrope ? opt(o, "mrope_interleaved") : NULL;
        if (mi && !json_is_boolean(mi))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.mrope_interleaved must be true or false", name, where[i]);
        if (ms && (!json_is_array(ms) || json_array_size(ms) != 3))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.mrope_section must be a list of three integers", name,
                             where[i]);
        for (size_t k = 0; ms && k < 3; k++) {
            json_t *e = json_array_get(ms, k);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > CIS2_CFG_MAX_HIDDEN)
                return cis2_fail(err, CIS2_E_FORMAT, "%s: %s.mrope_section[%zu] must be an integer in [0, %d]", name,
                                 where[i], k, CIS2_CFG_MAX_HIDDEN);
        }
    }
    if (!(prf > 0.0 && prf <= 1.0))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: partial_rotary_factor must be in (0, 1]", name);
    c->partial_rotary_f64 = prf;
    c->rotary_dim = (int64_t)((double)c->head_dim * prf); /* Python's int(head_dim * factor) */
    if (c->rotary_dim < 2 || c->rotary_dim % 2)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: head_dim %lld x partial_rotary_factor %.17g gives %lld rotated "
                         "dimensions: RoPE needs an even number >= 2 (§7.4 rotates halves)", name,
                         (long long)c->head_dim, prf, (long long)c->rotary_dim);
    return CIS2_OK;
}

/* ---- attention layout (§9 attends to every earlier position) ----
 * mistral and phi3 (docs/models.md §M5): their modeling code slides
 * whenever sliding_window is set and has no use_sliding_window switch, so
 * a set sliding_window (an integer >= 1) is their window, whatever
 * use_sliding_window says.  gemma3_text (§M7.1): sliding_window (default
 * 4096; null refused: its sliding layers need one) is the window of the
 * layers layer_types calls "sliding_attention", or, without layer_types,
 * of every layer but each sliding_window_pattern-th (default 6).  Other
 * families: use_sliding_window true is refused; sliding_window is inert
 * only where it cannot act: use_sliding_window present and false, or
 * qwen2/qwen3/smollm3 (whose default is false).  layer_types must be
 * num_hidden_layers entries, all "full_attention" but for gemma3_text. */
static int window_value(cis2_config *c, const json_t *sw, const char *name, cis2_error *err)
{
    if (!json_is_integer(sw) || json_integer_value(sw) < 1 || json_integer_value(sw) > ((int64_t)1 << 31))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: sliding_window must be %san integer in [1, 2^31]", name,
                         c->family->window == CIS2_WINDOW_LAYERS ? "" : "null or ");
    c->sliding_window = json_integer_value(sw);
    return CIS2_OK;
}

/* The layer pattern of a family whose sliding layers layer_types names
 * (gemma3_text, gpt_oss), as their configs derive layer_types without it:
 * layer L slides unless (L + 1) % pattern == 0 (gemma3_text's
 * sliding_window_pattern, default 6; gpt_oss's 2). */
static int layer_pattern(cis2_config *c, json_t *root, int from_types, const char *name, cis2_error *err)
{
    int64_t every = c->family->window_pattern, L = c->num_hidden_layers;
    json_t *p = c->family->window_pattern_key ? opt(root, "sliding_window_pattern") : NULL;
    if (!p && from_types) return CIS2_OK;
    if (p && (!json_is_integer(p) || json_integer_value(p) < 1))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: sliding_window_pattern must be a positive integer", name);
    if (p) every = json_integer_value(p);
    for (int64_t i = 0; i < L; i++) {
        uint8_t want = (i + 1) % every != 0;
        if (from_types && c->slides[i] != want)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: layer_types[%lld] and sliding_window_pattern %lld "
                             "disagree: which layers slide?", name, (long long)i, (long long)every);
        c->slides[i] = want;
    }
    return CIS2_OK;
}

static int parse_layout(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    const cis2_family *f = c->family;
    int use = -1, rc, gemma = f->window == CIS2_WINDOW_LAYERS; /* gemma3_text's and gpt_oss's rule */
    if ((rc = get_bool(root, "use_sliding_window", &use, name, err))) return rc;
    json_t *sw = opt(root, "sliding_window");
    int slides = f->window != CIS2_WINDOW_NONE;
    if (gemma && !sw && json_object_get(root, "sliding_window"))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: sliding_window is null, but a %s model's sliding layers "
                         "need a window", name, f->model_type);
    if (gemma) c->sliding_window = f->window_default; /* Gemma3TextConfig's 4096, GptOssConfig's 128 */
    if (slides && sw && (rc = window_value(c, sw, name, err))) return rc;
    if (use == 1 && !slides)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: use_sliding_window is true: sliding-window attention is not "
                         "implemented for model_type %s (docs/models.md §M5, §M7: mistral, phi3, gemma3_text)",
                         name, f->model_type);
    if (sw && !slides && use != 0 && !f->window_off_default) {
        char val[48];
        show(sw, val);
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: sliding_window = %s is not implemented for model_type %s "
                         "(§9 attends to every earlier position; docs/models.md §M5: mistral and phi3 slide)", name,
                         val, f->model_type);
    }
    if (!f->window_pattern_key && opt(root, "sliding_window_pattern"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: sliding_window_pattern is not implemented for model_type %s "
                         "(gemma3_text's, docs/models.md §M7)", name, f->model_type);
    for (int64_t i = 0; i < c->num_hidden_layers; i++) c->slides[i] = c->sliding_window != 0; /* mistral, phi3 */
    json_t *lt = opt(root, "layer_types");
    if (!lt) return gemma ? layer_pattern(c, root, 0, name, err) : CIS2_OK;
    if (!json_is_array(lt) || (int64_t)json_array_size(lt) != c->num_hidden_layers)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: layer_types must be a list of num_hidden_layers (%lld) strings",
                         name, (long long)c->num_hidden_layers);
    for (size_t i = 0; i < json_array_size(lt); i++) {
        json_t *t = json_array_get(lt, i);
        if (!json_is_string(t))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: layer_types[%zu] must be a string", name, i);
        const char *ty = json_string_value(t);
        if (f->linear != CIS2_LIN_NONE) { /* docs/models.md §M10.1, with transformers' legacy names */
            int lin = !strcmp(ty, "linear_attention") || !strcmp(ty, "mamba");
            if (lin || !strcmp(ty, "full_attention") || !strcmp(ty, "attention")) {
                c->linear[i] = (uint8_t)lin;
                continue;
            }
        }
        int full = !strcmp(ty, "full_attention");
        if (gemma && (full || !strcmp(json_string_value(t), "sliding_attention"))) {
            c->slides[i] = !full;
            continue;
        }
        if (!full)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: layer_types[%zu] \"%.40s\" is not implemented (§9 is "
                             "full attention: \"full_attention\" only%s)", name, i, json_string_value(t),
                             gemma ? ", and gemma3_text's and gpt_oss's \"sliding_attention\""
                             : f->linear != CIS2_LIN_NONE ? ", and qwen3_5's \"linear_attention\"" : "");
    }
    return gemma ? layer_pattern(c, root, 1, name, err) : CIS2_OK;
}

/* gemma3_text (docs/models.md §M7.1): query_pre_attn_scalar, an integer
 * in [1, 2^24] (exact in f32; default 256), and rope_local_base_freq, the
 * local layers' RoPE base (default 10000; finite and > 0, also as f32).
 * Other families: either key set is refused (§9's scale is head_dim's, §7
 * has one base). */
static int parse_gemma3(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    json_t *qs = opt(root, "query_pre_attn_scalar"), *lb = opt(root, "rope_local_base_freq");
    if (!c->family->gemma3_keys) {
        if (qs || lb)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s is not implemented for model_type %s (gemma3_text's, "
                             "docs/models.md §M7)", name, qs ? "query_pre_attn_scalar" : "rope_local_base_freq",
                             c->family->model_type);
        return CIS2_OK;
    }
    c->query_pre_attn_scalar = 256;
    if (qs) {
        double d = json_is_number(qs) ? json_number_value(qs) : 0.0;
        if (!(d >= 1.0 && d <= 16777216.0 && d == (double)(int64_t)d))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: query_pre_attn_scalar must be an integer in [1, 16777216]",
                             name);
        c->query_pre_attn_scalar = (int64_t)d;
    }
    c->rope_local_theta_f64 = 10000.0;
    if (lb) {
        if (!json_is_number(lb)) return cis2_fail(err, CIS2_E_FORMAT, "%s: rope_local_base_freq must be a number", name);
        c->rope_local_theta_f64 = json_number_value(lb);
    }
    c->rope_local_theta = (float)c->rope_local_theta_f64; /* as §7.1 casts rope_theta */
    if (!finite_pos(c->rope_local_theta_f64) || !finite_pos((double)c->rope_local_theta))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: rope_local_base_freq must be finite and > 0 (also as f32)", name);
    return CIS2_OK;
}

/* SmolLM3's layers without RoPE (docs/models.md §M3.1): no_rope_layers,
 * one integer per layer (1 = RoPE, 0 = none), at least num_hidden_layers
 * of them (later ones unused, as transformers indexes it by layer); absent
 * or null, every no_rope_layer_interval-th layer (default 4) has none:
 * layer L skips RoPE iff (L + 1) % interval == 0.  Both given: the list
 * wins and the interval is not read.  Other families: none
 * (the key table holds them to "every layer rotates"). */
static int parse_nope(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    if (!c->family->nope) return CIS2_OK;
    int64_t L = c->num_hidden_layers;
    json_t *l = opt(root, "no_rope_layers");
    if (l) {
        if (!json_is_array(l) || (int64_t)json_array_size(l) < L)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: no_rope_layers must be a list of at least num_hidden_layers "
                             "(%lld) integers 0 or 1", name, (long long)L);
        for (size_t i = 0; i < json_array_size(l); i++) {
            json_t *e = json_array_get(l, i);
            if (!json_is_integer(e) || (json_integer_value(e) != 0 && json_integer_value(e) != 1))
                return cis2_fail(err, CIS2_E_FORMAT, "%s: no_rope_layers[%zu] must be 0 or 1", name, i);
            if ((int64_t)i < L) c->no_rope[i] = json_integer_value(e) == 0;
        }
        return CIS2_OK;
    }
    int64_t every = 4; /* SmolLM3Config's no_rope_layer_interval */
    json_t *iv = opt(root, "no_rope_layer_interval");
    if (iv) {
        if (!json_is_integer(iv) || json_integer_value(iv) < 1)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: no_rope_layer_interval must be a positive integer", name);
        every = json_integer_value(iv);
    }
    for (int64_t i = 0; i < L; i++) c->no_rope[i] = (i + 1) % every == 0;
    return CIS2_OK;
}

/* model_type: a row of the family table (family.c); absent, llama's.
 * Mistral's forward pass is Llama's (no biases, RMSNorm, SwiGLU,
 * default RoPE) with a sliding window when sliding_window is set
 * (parse_layout, docs/models.md §M5); its modeling code has no attention
 * or MLP biases whatever the config says, so a config that asks for them
 * is refused rather than followed or ignored.  Phi-3's is Mistral's with
 * fused tensors (§M6).  Gemma-3's text model is §M7. */
static int parse_family(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    json_t *mt = opt(root, "model_type");
    c->family = cis2_family_default();
    if (!mt) return CIS2_OK;
    if (!json_is_string(mt)) return cis2_fail(err, CIS2_E_FORMAT, "%s: model_type must be a string", name);
    const char *s = json_string_value(mt);
    c->family = cis2_family_find(s);
    if (!c->family) {
        char list[256];
        cis2_family_list(list, sizeof list);
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: model_type '%.40s' not supported (%s only)", name, s, list);
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", s);
    return CIS2_OK;
}

/* hidden_act, the biases, pretraining_tp. */
static int parse_features(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    int rc;
    /* §10's silu; gemma3_text's gelu_pytorch_tanh (docs/models.md §M7.5), which
     * Gemma3MLP reads from hidden_activation (hidden_act, an older Gemma key,
     * is held to the same value rather than ignored) */
    const cis2_family *f = c->family;
    const char *want = f->activation;
    for (int i = 0; i < 2; i++) {
        const char *key = i ? "hidden_activation" : "hidden_act";
        json_t *act = opt(root, key);
        if (!act) continue;
        if (!json_is_string(act)) return cis2_fail(err, CIS2_E_FORMAT, "%s: %s must be a string", name, key);
        if (strcmp(json_string_value(act), want))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s '%.40s' not supported (a %s model's activation is %s)",
                             name, key, json_string_value(act), f->model_type, want);
    }
    c->attention_bias = f->attention_bias_default; /* GptOssConfig's true; false elsewhere */
    if ((rc = get_bool(root, "attention_bias", &c->attention_bias, name, err)) ||
        (rc = get_bool(root, "mlp_bias", &c->mlp_bias, name, err)))
        return rc;
    if (c->mlp_bias && !f->mlp_bias_unread) /* Qwen2/Qwen3's MLP has no biases and never reads mlp_bias */
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: mlp_bias is true: MLP biases are not part of §10", name);
    /* Mistral, Phi-3, Gemma-3: no attention biases; Qwen3's and OLMo-2's
     * attention_bias gives q/k/v and o_proj biases (§9.5 has none; docs/models.md §M4.1) */
    if (c->attention_bias && f->attention_bias == CIS2_BIAS_REFUSED)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: attention_bias is true%s", name, f->bias_refusal);
    json_t *tp = opt(root, "pretraining_tp"); /* any value computes the same: §5 fixes every sum's order */
    if (tp && (!json_is_integer(tp) || json_integer_value(tp) < 1))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: pretraining_tp must be a positive integer", name);
    return CIS2_OK;
}

/* §2.2 sizes and the derived head_dim. */
static int parse_sizes(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    int rc, dense = !c->family->moe_every_layer; /* qwen3_5_moe has no dense MLP, and no key for one (§M10.10) */
    if (!dense && opt(root, "intermediate_size"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: intermediate_size is not read for model_type %s (every layer "
                         "is a mixture of experts, docs/models.md §M10.10)", name, c->family->model_type);
    if ((rc = get_size(root, "hidden_size", 1, CIS2_CFG_MAX_HIDDEN, &c->hidden_size, name, err)) ||
        (rc = get_size(root, "intermediate_size", dense, CIS2_CFG_MAX_INTER, &c->intermediate_size, name, err)) ||
        (rc = get_size(root, "num_hidden_layers", 1, CIS2_CFG_MAX_LAYERS, &c->num_hidden_layers, name, err)) ||
        (rc = get_size(root, "num_attention_heads", 1, CIS2_CFG_MAX_HIDDEN, &c->num_attention_heads, name, err)) ||
        (rc = get_size(root, "vocab_size", 1, CIS2_CFG_MAX_VOCAB, &c->vocab_size, name, err)))
        return rc;
    c->num_key_value_heads = c->num_attention_heads;
    c->max_position_embeddings = c->family->max_position_embeddings; /* the config class's default */
    c->head_dim = 0;
    if ((rc = get_size(root, "num_key_value_heads", 0, CIS2_CFG_MAX_HIDDEN, &c->num_key_value_heads, name, err)) ||
        (rc = get_size(root, "max_position_embeddings", 0, CIS2_CFG_MAX_POS, &c->max_position_embeddings, name,
                       err)) ||
        (rc = get_size(root, "head_dim", 0, CIS2_CFG_MAX_HIDDEN, &c->head_dim, name, err)))
        return rc;
    int64_t H = c->hidden_size, nh = c->num_attention_heads, kv = c->num_key_value_heads;
    int free_hd = c->family->free_head_dim; /* docs/models.md §M2, §M7 */
    if (c->head_dim == 0) c->head_dim = c->family->head_dim; /* Qwen3Config's 128, Gemma3TextConfig's 256 */
    if (c->head_dim == 0) {
        if (H % nh)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: hidden_size %lld is not divisible by num_attention_heads %lld",
                             name, (long long)H, (long long)nh);
        c->head_dim = H / nh;
    } else if (c->head_dim * nh != H && !free_hd) {
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: head_dim %lld x num_attention_heads %lld != hidden_size %lld (§2.5 needs q_proj "
                         "[hidden, hidden])", name, (long long)c->head_dim, (long long)nh, (long long)H);
    }
    if (kv > nh || nh % kv)
        return cis2_fail(err, CIS2_E_FORMAT,
                         "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", name,
                         (long long)nh, (long long)kv);
    if (c->head_dim % 2)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: head_dim %lld is odd (RoPE §7 rotates halves)", name,
                         (long long)c->head_dim);
    return CIS2_OK;
}

/* The mixture of experts.  qwen3_moe (docs/models.md §M8.1): num_experts
 * (in [1, 1024]; default 128), num_experts_per_tok (in [1, num_experts];
 * default 8), moe_intermediate_size (default 768), norm_topk_prob (default
 * false), decoder_sparse_step (default 1) and mlp_only_layers (default []),
 * with Qwen3MoeConfig's defaults; layer L is sparse unless mlp_only_layers
 * names it, when (L + 1) % decoder_sparse_step == 0.  gpt_oss (§M9.1):
 * num_local_experts (default 128), num_experts_per_tok (default 4; its
 * experts_per_token alias must agree), swiglu_limit (default 7.0, finite
 * and > 0 also as f32); every layer sparse, each expert intermediate_size
 * wide.  A key of the other kind, or any of them in a family without
 * experts, is refused (their feed-forward is another). */
static int parse_moe(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    static const char *const qwen_keys[6] = {"num_experts", "moe_intermediate_size", "norm_topk_prob",
                                             "decoder_sparse_step", "mlp_only_layers", "num_experts_per_tok"};
    static const char *const oss_keys[4] = {"num_local_experts", "experts_per_token", "swiglu_limit",
                                            "num_experts_per_tok"};
    const cis2_family *f = c->family;
    int rc, oss = f->moe == CIS2_MOE_TOPK_SOFTMAX, qwen = f->moe == CIS2_MOE_SOFTMAX_TOPK;
    json_t *mol = opt(root, "mlp_only_layers");
    int empty_mol = f->linear != CIS2_LIN_NONE && json_is_array(mol) && json_array_size(mol) == 0; /* §M10.1 */
    for (int i = 0; i < 6; i++) /* the last entries are shared: refused only in a family without experts */
        if (((!qwen && i < 5) || f->moe == CIS2_MOE_NONE) && opt(root, qwen_keys[i]) && !(i == 4 && empty_mol))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s is not implemented for model_type %s (a mixture "
                             "of experts, docs/models.md §M8: qwen3_moe)", name, qwen_keys[i], f->model_type);
    for (int i = 0; i < 3; i++)
        if (!oss && opt(root, oss_keys[i]))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s is not implemented for model_type %s (gpt_oss's, "
                             "docs/models.md §M9)", name, oss_keys[i], f->model_type);
    if (!f->shared_expert && opt(root, "shared_expert_intermediate_size"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: shared_expert_intermediate_size is not implemented for "
                         "model_type %s (a shared expert: qwen3_5_moe's, docs/models.md §M10.10)", name, f->model_type);
    if (f->moe == CIS2_MOE_NONE) return CIS2_OK;
    int64_t step = 1, L = c->num_hidden_layers;
    c->num_experts = f->moe_def.experts; /* the config class's defaults (the family's row) */
    c->num_experts_per_tok = f->moe_def.per_tok;
    c->moe_intermediate_size = f->moe_def.inter ? f->moe_def.inter : c->intermediate_size;
    c->shared_inter = f->shared_expert ? f->moe_def.shared_inter : 0;
    c->norm_topk_prob = f->moe_def.norm_topk;
    if (f->shared_expert &&
        (rc = get_size(root, "shared_expert_intermediate_size", 0, CIS2_CFG_MAX_INTER, &c->shared_inter, name, err)))
        return rc;
    if (f->moe_every_layer) { /* Qwen3_5MoeTextConfig's defaults, and its rules (§M10.10) */
        json_t *ntp = opt(root, "norm_topk_prob"), *ds = opt(root, "decoder_sparse_step");
        if (ntp && !json_is_true(ntp))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: norm_topk_prob must be true for model_type %s (its router "
                             "always renormalises, docs/models.md §M10.10)", name, f->model_type);
        if (ds && !(json_is_integer(ds) && json_integer_value(ds) == 1))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: decoder_sparse_step must be 1 for model_type %s (every "
                             "layer is sparse, docs/models.md §M10.10)", name, f->model_type);
    }
    if ((rc = get_size(root, oss ? "num_local_experts" : "num_experts", 0, CIS2_CFG_MAX_EXPERTS, &c->num_experts,
                       name, err)) ||
        (rc = get_size(root, "num_experts_per_tok", 0, CIS2_CFG_MAX_EXPERTS, &c->num_experts_per_tok, name, err)) ||
        (rc = get_size(root, "moe_intermediate_size", 0, CIS2_CFG_MAX_INTER, &c->moe_intermediate_size, name, err)) ||
        (rc = get_size(root, "decoder_sparse_step", 0, CIS2_CFG_MAX_LAYERS, &step, name, err)) ||
        (rc = get_bool(root, "norm_topk_prob", &c->norm_topk_prob, name, err)))
        return rc;
    if (oss) {
        int64_t alias = c->num_experts_per_tok;
        if ((rc = get_size(root, "experts_per_token", 0, CIS2_CFG_MAX_EXPERTS, &alias, name, err))) return rc;
        if (opt(root, "num_experts_per_tok") && alias != c->num_experts_per_tok)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: experts_per_token %lld and num_experts_per_tok %lld disagree",
                             name, (long long)alias, (long long)c->num_experts_per_tok);
        c->num_experts_per_tok = alias;
        json_t *lim = opt(root, "swiglu_limit");
        c->swiglu_limit_f64 = 7.0; /* GptOssConfig's */
        if (lim && !json_is_number(lim))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: swiglu_limit must be a number", name);
        if (lim) c->swiglu_limit_f64 = json_number_value(lim);
        c->swiglu_limit = (float)c->swiglu_limit_f64;
        if (!finite_pos(c->swiglu_limit_f64) || !finite_pos((double)c->swiglu_limit))
            return cis2_fail(err, CIS2_E_FORMAT, "%s: swiglu_limit must be finite and > 0 (also as f32)", name);
        if (c->intermediate_size % 32 || c->hidden_size % 32)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: hidden_size and intermediate_size must be multiples of 32 "
                             "(MXFP4 blocks, docs/models.md §M9.6)", name);
    }
    if (c->num_experts_per_tok > c->num_experts)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: num_experts_per_tok %lld exceeds num_experts %lld", name,
                         (long long)c->num_experts_per_tok, (long long)c->num_experts);
    for (int64_t i = 0; i < L; i++) c->sparse[i] = (i + 1) % step == 0;
    json_t *dense = opt(root, "mlp_only_layers");
    if (dense && !json_is_array(dense))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: mlp_only_layers must be a list of layer indices", name);
    if (f->moe_every_layer && dense && json_array_size(dense))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: mlp_only_layers must be [] for model_type %s (every layer is "
                         "sparse, docs/models.md §M10.10)", name, f->model_type);
    for (size_t i = 0; dense && i < json_array_size(dense); i++) {
        json_t *e = json_array_get(dense, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= L)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: mlp_only_layers[%zu] must be a layer index in [0, %lld)", name,
                             i, (long long)L);
        c->sparse[json_integer_value(e)] = 0;
    }
    return CIS2_OK;
}

/* A hybrid family's Gated DeltaNet layers (docs/models.md §M10.1), with
 * Qwen3_5TextConfig's defaults: linear_num_key_heads 16,
 * linear_num_value_heads 32 (a multiple of the key heads), linear_key_head_dim
 * and linear_value_head_dim 128 (each at most CIS2_CFG_MAX_LIN_DIM),
 * linear_conv_kernel_dim 4 (at most 64); which layers: layer_types
 * (parse_layout), or without it every layer but each
 * full_attention_interval-th (default 4), and both given must agree.
 * attn_output_gate must be true when given (transformers' attention always
 * gates, §M10.5), mamba_ssm_dtype "float32" (the state is f32, §M10.4);
 * mtp_num_hidden_layers and mtp_use_dedicated_embeddings are inert (the
 * multi-token prediction head is not read, §M10.2).  Every family without
 * such layers refuses the keys. */
#define CIS2_CFG_MAX_LIN_DIM 1024
static int parse_hybrid(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    static const char *const keys[10] = {"full_attention_interval", "linear_conv_kernel_dim", "linear_key_head_dim",
                                         "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim",
                                         "attn_output_gate", "mamba_ssm_dtype", "mtp_num_hidden_layers",
                                         "mtp_use_dedicated_embeddings"};
    const cis2_family *f = c->family;
    int rc;
    if (f->linear == CIS2_LIN_NONE) {
        for (int i = 0; i < 10; i++)
            if (opt(root, keys[i]))
                return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s is not implemented for model_type %s (Gated "
                                 "DeltaNet layers and their attention: qwen3_5's, docs/models.md §M10)", name,
                                 keys[i], f->model_type);
        return CIS2_OK;
    }
    int64_t every = 4, L = c->num_hidden_layers;
    c->lin_k_heads = 16, c->lin_v_heads = 32, c->lin_k_dim = 128, c->lin_v_dim = 128, c->conv_kernel = 4;
    if ((rc = get_size(root, "linear_num_key_heads", 0, CIS2_CFG_MAX_HIDDEN, &c->lin_k_heads, name, err)) ||
        (rc = get_size(root, "linear_num_value_heads", 0, CIS2_CFG_MAX_HIDDEN, &c->lin_v_heads, name, err)) ||
        (rc = get_size(root, "linear_key_head_dim", 0, CIS2_CFG_MAX_LIN_DIM, &c->lin_k_dim, name, err)) ||
        (rc = get_size(root, "linear_value_head_dim", 0, CIS2_CFG_MAX_LIN_DIM, &c->lin_v_dim, name, err)) ||
        (rc = get_size(root, "linear_conv_kernel_dim", 0, 64, &c->conv_kernel, name, err)) ||
        (rc = get_size(root, "full_attention_interval", 0, CIS2_CFG_MAX_LAYERS, &every, name, err)))
        return rc;
    if (c->lin_v_heads % c->lin_k_heads)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: linear_num_value_heads %lld is not a multiple of "
                         "linear_num_key_heads %lld", name, (long long)c->lin_v_heads, (long long)c->lin_k_heads);
    /* a layer's state, (K-1) C + Hv dk dv floats (docs/models.md §M10.4), at most 2^26 (256 MiB): Qwen3.5's are
     * under 2^20; with heads and dims each within their limits the products stay far inside 64 bits */
    uint64_t C = 2 * (uint64_t)c->lin_k_heads * (uint64_t)c->lin_k_dim + (uint64_t)c->lin_v_heads * (uint64_t)c->lin_v_dim;
    uint64_t state = (uint64_t)(c->conv_kernel - 1) * C + (uint64_t)c->lin_v_heads * (uint64_t)c->lin_k_dim *
                     (uint64_t)c->lin_v_dim;
    if (state > ((uint64_t)1 << 26))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: a linear layer's recurrent state of %llu floats exceeds the limit "
                         "of 2^26", name, (unsigned long long)state);
    json_t *g = opt(root, "attn_output_gate");
    if (g && !json_is_boolean(g)) return cis2_fail(err, CIS2_E_FORMAT, "%s: attn_output_gate must be true or false", name);
    if (g && !json_is_true(g))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: attn_output_gate false is not implemented (a %s model's "
                         "attention always has its output gate, docs/models.md §M10.5)", name, f->model_type);
    json_t *dt = opt(root, "mamba_ssm_dtype");
    if (dt && (!json_is_string(dt) || strcmp(json_string_value(dt), "float32")))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: mamba_ssm_dtype must be \"float32\" (the recurrent state is "
                         "f32, docs/models.md §M10.4)", name);
    json_t *lt = opt(root, "layer_types");
    for (int64_t i = 0; i < L; i++) {
        uint8_t lin = (i + 1) % every != 0; /* Qwen3_5TextConfig's layer_types without the key */
        if (lt && opt(root, "full_attention_interval") && c->linear[i] != lin)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: layer_types[%lld] and full_attention_interval %lld "
                             "disagree: which layers are linear?", name, (long long)i, (long long)every);
        if (!lt) c->linear[i] = lin;
    }
    return CIS2_OK;
}

/* A multimodal wrapper (docs/models.md §M10.1: qwen3_5): the text model's
 * config is the object text_config, whose model_type (if given) is the
 * family's text_config name; *text is it.  The wrapper's own keys: the
 * vision tower's vision_config and its token ids, which cis2 does not read
 * (text only: the vision tower's tensors are skipped, §M10.2), and
 * tie_word_embeddings, which must agree with text_config's where both are
 * given; any key but those, model_type, architectures and the key table's
 * inert keys is refused.  Any other family: *text is root, and the
 * wrapper's keys are refused. */
static const char *const wrapper_keys[6] = {"text_config", "vision_config", "image_token_id", "video_token_id",
                                            "vision_start_token_id", "vision_end_token_id"};
static int parse_wrapper(cis2_config *c, json_t *root, json_t **text, int *tie, const char *name, cis2_error *err)
{
    const cis2_family *f = c->family;
    *text = root;
    *tie = -1;
    if (!f->text_config) {
        for (int i = 0; i < 6; i++)
            if (opt(root, wrapper_keys[i]))
                return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s is not implemented for model_type %s (a multimodal "
                                 "wrapper's key: qwen3_5's, docs/models.md §M10.1)", name, wrapper_keys[i],
                                 f->model_type);
        return CIS2_OK;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        int ok = !strcmp(key, "model_type") || !strcmp(key, "architectures") || !strcmp(key, "tie_word_embeddings");
        for (int i = 0; i < 6 && !ok; i++) ok = !strcmp(key, wrapper_keys[i]);
        const key_rule *r = key_find(key);
        if (!ok && !(r && r->cls == KEY_INERT))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: key '%.60s' of the %s wrapper is not known to cis2 (the "
                             "text model's keys belong in text_config)", name, key, f->model_type);
    }
    json_t *t = opt(root, "text_config");
    if (!json_is_object(t))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: a %s config needs the object text_config (the text model's keys)",
                         name, f->model_type);
    json_t *mt = opt(t, "model_type");
    if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), f->text_config)))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: text_config.model_type must be \"%s\" in a %s config", name,
                         f->text_config, f->model_type);
    for (int i = 0; i < 6; i++)
        if (opt(t, wrapper_keys[i]))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: text_config.%s is not implemented (a wrapper's key)", name,
                             wrapper_keys[i]);
    json_t *a = opt(root, "tie_word_embeddings"), *b = opt(t, "tie_word_embeddings");
    if ((a && !json_is_boolean(a)) || (b && !json_is_boolean(b)))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tie_word_embeddings must be true or false", name);
    if (a && b && json_is_true(a) != json_is_true(b))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: tie_word_embeddings differs between the wrapper and "
                         "text_config: which is meant?", name);
    if (a) *tie = json_is_true(a);
    *text = t;
    return CIS2_OK;
}

/* quantization_config: absent, or (a family whose experts are published in
 * MXFP4, docs/models.md §M9.6) {"quant_method": "mxfp4",
 * "modules_to_not_convert": [strings]}, which such a family requires; any
 * other method or member is refused naming it. */
static int parse_quant(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    json_t *q = opt(root, "quantization_config");
    const cis2_family *f = c->family;
    if (!q) {
        if (f->mxfp4)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: a %s model without quantization_config (unquantised "
                             "experts) is not implemented: its experts are read as published, in MXFP4 "
                             "(docs/models.md §M9.6)", name, f->model_type);
        return CIS2_OK;
    }
    if (!json_is_object(q)) return cis2_fail(err, CIS2_E_FORMAT, "%s: quantization_config must be an object", name);
    json_t *m = opt(q, "quant_method");
    if (!json_is_string(m))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: quantization_config.quant_method must be a string", name);
    if (strcmp(json_string_value(m), "mxfp4") || !f->mxfp4)
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: quantization_config.quant_method '%.40s' is not implemented "
                         "for model_type %s (cis2 reads gpt_oss's MXFP4 experts, docs/models.md §M9.6)", name,
                         json_string_value(m), f->model_type);
    const char *k;
    json_t *v;
    json_object_foreach(q, k, v) {
        if (!strcmp(k, "quant_method")) continue;
        if (!strcmp(k, "modules_to_not_convert") && json_is_array(v)) continue; /* the tensor plan says which */
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: quantization_config.%.40s is not implemented", name, k);
    }
    return CIS2_OK;
}

static int parse_root(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    int rc;
    if (!json_is_object(root)) return cis2_fail(err, CIS2_E_FORMAT, "%s: not a JSON object", name);
    /* The family first, then a wrapper's text model (§M10.1), then every key
     * against the table, then each part. */
    json_t *wrap = root;
    int wrap_tie; /* the wrapper's tie_word_embeddings (-1: none) */
    if ((rc = parse_family(c, root, name, err)) || (rc = parse_wrapper(c, wrap, &root, &wrap_tie, name, err)) ||
        (rc = check_keys(c, root, name, err)) ||
        (rc = parse_features(c, root, name, err)) || (rc = parse_sizes(c, root, name, err)) ||
        (rc = parse_layout(c, root, name, err)) || (rc = parse_rope(c, root, name, err)) ||
        (rc = parse_rotary(c, root, name, err)) || (rc = parse_hybrid(c, root, name, err)) ||
        (rc = parse_nope(c, root, name, err)) || (rc = parse_gemma3(c, root, name, err)) ||
        (rc = parse_moe(c, root, name, err)) || (rc = parse_quant(c, root, name, err)))
        return rc;

    /* §2.3 eps */
    json_t *eps = opt(root, "rms_norm_eps");
    if (!eps && c->family->rms_norm_eps == 0.0)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: missing required field rms_norm_eps", name);
    if (eps && !json_is_number(eps)) return cis2_fail(err, CIS2_E_FORMAT, "%s: rms_norm_eps must be a number", name);
    c->rms_norm_eps_f64 = eps ? json_number_value(eps) : c->family->rms_norm_eps; /* Gemma3TextConfig's 1e-6 */
    c->rms_norm_eps = (float)c->rms_norm_eps_f64; /* §2.3: one RNE f64 -> f32 narrowing */
    if (!finite_pos(c->rms_norm_eps_f64) || !finite_pos((double)c->rms_norm_eps))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: rms_norm_eps must be finite and > 0 (also as f32)", name);

    c->tie_word_embeddings = c->family->tie_word_embeddings; /* LlamaConfig's false; Gemma3TextConfig's true */
    if (wrap_tie >= 0) c->tie_word_embeddings = wrap_tie;      /* a wrapper's (§M10.1), as text_config's if both */
    if ((rc = get_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, name, err))) return rc;
    parse_eos(c, json_object_get(root, "eos_token_id"));

    uint64_t params = cis2_config_param_count(c);
    if (params > CIS2_CFG_MAX_PARAMS)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %llu parameters exceed the limit of %llu", name,
                         (unsigned long long)params, (unsigned long long)CIS2_CFG_MAX_PARAMS);
    return CIS2_OK;
}

float cis2_config_rope_mscale(const cis2_config *c)
{
    return c->rope_yarn ? rope_yarn_mscale((float)c->yarn_factor) : 1.0f; /* docs/models.md §M9.4 */
}

int cis2_config_qkv_bias(const cis2_config *c)
{
    return c->family->attention_bias == CIS2_BIAS_QKV || (c->family->attention_bias == CIS2_BIAS_KEY && c->attention_bias);
}
int cis2_config_o_bias(const cis2_config *c) { return c->family->attention_bias == CIS2_BIAS_KEY && c->attention_bias; }
int cis2_config_qk_norm(const cis2_config *c) { return c->family->qk_norm == CIS2_QKN_HEAD; }
int cis2_config_post_norm(const cis2_config *c) { return c->family->norms == CIS2_NORMS_POST; }
int cis2_config_fused(const cis2_config *c) { return c->family->fused; }
int cis2_config_gemma3(const cis2_config *c) { return c->family->gemma3_keys; }

/* rotary_dim / 2 entries (head_dim / 2 but for a partial rotary, §M10.5),
 * two tables of them for gemma3_text (§M7.4) */
size_t cis2_config_inv_freq_len(const cis2_config *c)
{
    return (size_t)c->rotary_dim / 2 * (c->family->gemma3_keys ? 2 : 1);
}

/* §7.1's table, then docs/models.md §M1 for "llama3": the f32 parameters
 * are the f64 members narrowed once (RNE), and the two wavelength bounds
 * and the denominator each one f64 operation narrowed once, as Python
 * computes them before torch casts them to the table's f32. */
void cis2_config_inv_freq(const cis2_config *c, float *inv_freq)
{
    rope_inv_freq(c->rope_theta, (size_t)c->rotary_dim, inv_freq); /* §7.1 (over the rotated dims: §M10.5) */
    if (c->family->gemma3_keys) /* docs/models.md §M7.4: the local layers' §7.1 table follows */
        rope_inv_freq(c->rope_local_theta, (size_t)c->head_dim, inv_freq + c->head_dim / 2);
    if (c->rope_yarn) { /* docs/models.md §M9.4 */
        rope_yarn y = {(float)c->yarn_factor, (float)c->yarn_beta_fast, (float)c->yarn_beta_slow,
                       (float)c->yarn_old_ctx, c->yarn_truncate};
        rope_yarn_scale(inv_freq, (size_t)c->head_dim / 2, (float)c->head_dim, ln_pinned(c->rope_theta), &y);
    }
    if (!c->rope_llama3) return;
    double old = (double)c->l3_old_ctx;
    rope_llama3 p = {(float)c->l3_factor, (float)c->l3_low_ff, (float)old, (float)(old / c->l3_low_ff),
                     (float)(old / c->l3_high_ff), (float)(c->l3_high_ff - c->l3_low_ff)};
    rope_llama3_scale(inv_freq, (size_t)c->rotary_dim / 2, &p);
}

int cis2_config_parse(cis2_config *c, const char *json, size_t len, const char *name, cis2_error *err)
{
    memset(c, 0, sizeof *c);
    if (!name) name = "config.json";
    json_t *root;
    int rc = cis2_json_load_model_file(json, len, CIS2_CFG_MAX_JSON_COST, name, "a config.json", &root, err);
    if (rc) return rc;
    rc = parse_root(c, root, name, err);
    json_decref(root);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}

int cis2_config_load_sha(cis2_config *c, const char *path, uint8_t sha[32], cis2_error *err)
{
    memset(c, 0, sizeof *c);
    char *buf;
    size_t n;
    int rc = cis2_read_file(path, CIS2_CFG_MAX_FILE, "a config.json", &buf, &n, err);
    if (rc) return rc;
    if (sha) cis2_sha256(buf, n, sha); /* §2.1: the bytes parsed below */
    rc = cis2_config_parse(c, buf, n, path, err);
    free(buf);
    return rc;
}

int cis2_config_load(cis2_config *c, const char *path, cis2_error *err)
{
    return cis2_config_load_sha(c, path, NULL, err);
}

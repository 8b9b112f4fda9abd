/*
 * family.c - the family table and the tensor plan (family.h).
 *
 * FAMILIES holds one row per model_type, in the order messages list them.
 * Each row is read from its transformers config and modeling classes
 * (LlamaConfig, Qwen2Config, MistralConfig, Qwen3Config, SmolLM3Config,
 * Olmo2Config, Phi3Config, Gemma3TextConfig and their decoders) as
 * docs/models.md pins them: §2-§11 for llama and qwen2, §M2 qwen3, §M3
 * smollm3, §M4 olmo2, §M5 mistral, §M6 phi3, §M7 gemma3_text.
 *
 * cis2_family_tensors is the one list of tensor names and shapes: the
 * loader matches a checkpoint against it (every tensor it lists must be
 * there with its shape, and nothing else may be) and `cis2 synth` writes
 * it.  Names follow Hugging Face's checkpoints (spec §2.5).
 */
#include "family.h"
#include "config.h"

#include <stdio.h>
#include <string.h>

/* Qwen3.5's checkpoints hold a vision tower and a multi-token prediction
 * head that the text model's forward pass never reads
 * (Qwen3_5ForConditionalGeneration's model.visual.*, and mtp.*, which
 * transformers drops at load): docs/models.md §M10.2. */
static const char *const qwen3_5_skip[] = {"model.visual.", "mtp.", NULL};

#define PRE CIS2_NORMS_PRE
static const cis2_family FAMILIES[] = {
    {.model_type = "llama", .architecture = "LlamaForCausalLM", .section = "", .rope_theta = 10000.0,
     .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_KEY, .norms = PRE},
    {.model_type = "qwen2", .architecture = "Qwen2ForCausalLM", .section = "", .rope_theta = 10000.0,
     .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_QKV, .mlp_bias_unread = 1,
     .norms = PRE, .window_off_default = 1},
    {.model_type = "mistral", .architecture = "MistralForCausalLM", .section = "§M5", .rope_theta = 10000.0,
     .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ", but a mistral model has no attention biases", .norms = PRE, .window = CIS2_WINDOW_ALL},
    {.model_type = "qwen3", .architecture = "Qwen3ForCausalLM", .section = "§M2", .rope_theta = 10000.0,
     .head_dim = 128, .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ": a qwen3 model's o_proj bias is not implemented (§9.5)", .mlp_bias_unread = 1,
     .qk_norm = CIS2_QKN_HEAD, .norms = PRE, .free_head_dim = 1, .window_off_default = 1},
    {.model_type = "qwen3_moe", .architecture = "Qwen3MoeForCausalLM", .section = "§M8", .rope_theta = 10000.0,
     .head_dim = 128, .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ": a qwen3_moe model's o_proj bias is not implemented (§9.5)", .mlp_bias_unread = 1,
     .qk_norm = CIS2_QKN_HEAD, .norms = PRE, .free_head_dim = 1, .window_off_default = 1,
     .moe = CIS2_MOE_SOFTMAX_TOPK, .moe_def = {128, 8, 768, 0, 0}},
    {.model_type = "smollm3", .architecture = "SmolLM3ForCausalLM", .section = "§M3", .rope_theta = 2000000.0,
     .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_KEY, .norms = PRE,
     .window_off_default = 1, .nope = 1},
    {.model_type = "olmo2", .architecture = "Olmo2ForCausalLM", .section = "§M4", .rope_theta = 10000.0,
     .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ": an olmo2 model's attention biases are not implemented", .qk_norm = CIS2_QKN_WHOLE,
     .norms = CIS2_NORMS_POST},
    {.model_type = "phi3", .architecture = "Phi3ForCausalLM", .section = "§M6", .rope_theta = 10000.0,
     .max_position_embeddings = 2048, .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ", but a phi3 model has no attention biases", .norms = PRE, .fused = 1,
     .window = CIS2_WINDOW_ALL},
    {.model_type = "gemma3_text", .architecture = "Gemma3ForCausalLM", .section = "§M7", .rope_theta = 1000000.0,
     .head_dim = 256, .max_position_embeddings = 131072, .rms_norm_eps = 1e-6, .tie_word_embeddings = 1,
     .activation = "gelu_pytorch_tanh", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ", but a gemma3_text model has no attention biases", .qk_norm = CIS2_QKN_HEAD,
     .norms = CIS2_NORMS_SANDWICH, .norm_plus_one = 1, .embed_scaled = 1, .free_head_dim = 1,
     .window = CIS2_WINDOW_LAYERS, .window_default = 4096, .window_pattern = 6, .window_pattern_key = 1,
     .gemma3_keys = 1},
    {.model_type = "gpt_oss", .architecture = "GptOssForCausalLM", .section = "§M9", .rope_theta = 150000.0,
     .head_dim = 64, .max_position_embeddings = 131072, .rms_norm_eps = 1e-5, .activation = "silu",
     .attention_bias = CIS2_BIAS_KEY, .attention_bias_default = 1, .o_bias = 1, .mlp_bias_unread = 1,
     .norms = PRE, .free_head_dim = 1, .window = CIS2_WINDOW_LAYERS, .window_default = 128, .window_pattern = 2,
     .moe = CIS2_MOE_TOPK_SOFTMAX, .moe_def = {128, 4, 0, 0, 0}, .sinks = 1, .rope_yarn = 1, .mxfp4 = 1},
    {.model_type = "qwen3_5", .architecture = "Qwen3_5ForConditionalGeneration", .section = "§M10",
     .rope_theta = 10000.0, .head_dim = 256, .max_position_embeddings = 32768, .rms_norm_eps = 1e-6,
     .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ": a qwen3_5 model's attention biases are not implemented", .qk_norm = CIS2_QKN_HEAD,
     .norms = PRE, .norm_plus_one = 1, .free_head_dim = 1, .text_config = "qwen3_5_text",
     .text_prefix = "model.language_model.", .skip = qwen3_5_skip, .linear = CIS2_LIN_SPLIT, .attn_gate = 1,
     .partial_rotary = 0.25, .mrope = 1},
    {.model_type = "qwen3_5_moe", .architecture = "Qwen3_5MoeForConditionalGeneration", .section = "§M10.10",
     .rope_theta = 10000.0, .head_dim = 256, .max_position_embeddings = 32768, .rms_norm_eps = 1e-6,
     .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ": a qwen3_5_moe model's attention biases are not implemented", .mlp_bias_unread = 1,
     .qk_norm = CIS2_QKN_HEAD, .norms = PRE, .norm_plus_one = 1, .free_head_dim = 1,
     .moe = CIS2_MOE_SOFTMAX_TOPK, .moe_def = {256, 8, 512, 512, 1}, .text_config = "qwen3_5_moe_text",
     .text_prefix = "model.language_model.",
     .skip = qwen3_5_skip, .linear = CIS2_LIN_SPLIT, .attn_gate = 1, .partial_rotary = 0.25, .mrope = 1,
     .moe_every_layer = 1, .experts_fused = 1, .shared_expert = 1},
    {.model_type = "qwen3_next", .architecture = "Qwen3NextForCausalLM", .section = "§M10.11",
     .rope_theta = 10000.0, .head_dim = 256, .max_position_embeddings = 32768, .rms_norm_eps = 1e-6,
     .activation = "silu", .attention_bias = CIS2_BIAS_REFUSED,
     .bias_refusal = ": a qwen3_next model's attention biases are not implemented", .mlp_bias_unread = 1,
     .qk_norm = CIS2_QKN_HEAD, .norms = PRE, .norm_plus_one = 1, .free_head_dim = 1, .window_off_default = 1,
     .moe = CIS2_MOE_SOFTMAX_TOPK, .moe_def = {512, 10, 512, 512, 1}, .skip = qwen3_5_skip,
     .linear = CIS2_LIN_FUSED, .attn_gate = 1, .partial_rotary = 0.25, .shared_expert = 1},
};
#undef PRE
#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

const cis2_family *cis2_family_find(const char *model_type)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(FAMILIES[i].model_type, model_type)) return &FAMILIES[i];
    return NULL;
}

const cis2_family *cis2_family_default(void) { return &FAMILIES[0]; }

int cis2_family_skips(const cis2_family *f, const char *name)
{
    for (const char *const *p = f->skip; p && *p; p++)
        if (!strncmp(name, *p, strlen(*p))) return 1;
    return 0;
}

void cis2_family_list(char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_FAMILIES && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%s", i == 0 ? "" : i + 1 < N_FAMILIES ? ", " : " or ",
                               FAMILIES[i].model_type);
}

/* ---- the tensor plan ---- */

typedef struct plan {
    int (*fn)(void *ctx, const cis2_tensor_spec *t);
    void *ctx;
    int rc;
    const char *prefix;     /* the family's text_prefix in place of "model.", or NULL */
} plan;

/* t's name from fmt, the layer and the expert (fmt has a %lld for each
 * that is >= 0, in that order); a wrapped text model's (family.h
 * text_prefix) "model." becomes its prefix. */
static void name_of(const plan *p, cis2_tensor_spec *t, const char *fmt, int64_t layer, int64_t expert)
{
    size_t at = 0;
    if (p->prefix && !strncmp(fmt, "model.", 6)) {
        at = (size_t)snprintf(t->name, sizeof t->name, "%s", p->prefix);
        fmt += 6;
    }
    if (at < sizeof t->name) snprintf(t->name + at, sizeof t->name - at, fmt, (long long)layer, (long long)expert);
}

/* One tensor: its name (name_of) and shape, [d0], [d0, d1] or [d0, d1, d2]. */
static void add3(plan *p, cis2_tensor_role role, int64_t layer, int64_t expert, int ndim, uint64_t d0, uint64_t d1,
                 uint64_t d2, const char *fmt)
{
    if (p->rc) return;
    cis2_tensor_spec t = {.role = role, .layer = layer, .expert = expert, .ndim = ndim, .d0 = d0,
                          .d1 = ndim > 1 ? d1 : 0, .d2 = ndim > 2 ? d2 : 0, .u8 = 0};
    name_of(p, &t, fmt, layer, expert);
    p->rc = p->fn(p->ctx, &t);
}

static void add_x(plan *p, cis2_tensor_role role, int64_t layer, int64_t expert, int ndim, uint64_t d0, uint64_t d1,
                  const char *fmt)
{
    add3(p, role, layer, expert, ndim, d0, d1, 0, fmt);
}

static void add(plan *p, cis2_tensor_role role, int64_t layer, int ndim, uint64_t d0, uint64_t d1, const char *fmt)
{
    add_x(p, role, layer, -1, ndim, d0, d1, fmt);
}

/* An MXFP4 part of all E experts (docs/models.md §M9.6): U8 blocks [E, rows, cols/32, 16] or scales
 * [E, rows, cols/32]. */
static void add_mx(plan *p, cis2_tensor_role role, int64_t layer, int blocks, uint64_t E, uint64_t rows,
                   uint64_t cols, const char *fmt)
{
    if (p->rc) return;
    cis2_tensor_spec t = {.role = role, .layer = layer, .expert = -1, .ndim = blocks ? 4 : 3, .d0 = E, .d1 = rows,
                          .d2 = cols / 32, .d3 = blocks ? 16 : 0, .u8 = 1};
    name_of(p, &t, fmt, layer, -1);
    p->rc = p->fn(p->ctx, &t);
}

int cis2_family_tensors(const cis2_config *c, int (*fn)(void *ctx, const cis2_tensor_spec *t), void *ctx)
{
    const cis2_family *f = c->family;
    plan p = {fn, ctx, 0, f->text_prefix};
    uint64_t H = (uint64_t)c->hidden_size, I = (uint64_t)c->intermediate_size, V = (uint64_t)c->vocab_size;
    uint64_t D = (uint64_t)c->head_dim, Q = (uint64_t)c->num_attention_heads * D;
    uint64_t KV = (uint64_t)c->num_key_value_heads * D;
    /* a Gated DeltaNet layer's sizes (docs/models.md §M10.2): key and value widths, the conv's channels */
    uint64_t Hv = (uint64_t)c->lin_v_heads, KD = (uint64_t)c->lin_k_heads * (uint64_t)c->lin_k_dim;
    uint64_t VD = Hv * (uint64_t)c->lin_v_dim, C = 2 * KD + VD;
    int qkv_bias = cis2_config_qkv_bias(c);
    add(&p, CIS2_T_EMBED, -1, 2, V, H, "model.embed_tokens.weight");
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        if (f->norms != CIS2_NORMS_POST) add(&p, CIS2_T_ATTN_NORM, l, 1, H, 0, "model.layers.%lld.input_layernorm.weight");
        if (c->linear[l] && f->linear == CIS2_LIN_FUSED) { /* §M10.11: Qwen3-Next's two fused projections */
            add(&p, CIS2_T_LIN_QKVZ, l, 2, C + VD, H, "model.layers.%lld.linear_attn.in_proj_qkvz.weight");
            add(&p, CIS2_T_LIN_BA, l, 2, 2 * Hv, H, "model.layers.%lld.linear_attn.in_proj_ba.weight");
        } else if (c->linear[l]) { /* §M10.2, in Qwen3.5's order */
            add(&p, CIS2_T_LIN_QKV, l, 2, C, H, "model.layers.%lld.linear_attn.in_proj_qkv.weight");
            add(&p, CIS2_T_LIN_Z, l, 2, VD, H, "model.layers.%lld.linear_attn.in_proj_z.weight");
            add(&p, CIS2_T_LIN_B, l, 2, Hv, H, "model.layers.%lld.linear_attn.in_proj_b.weight");
            add(&p, CIS2_T_LIN_A, l, 2, Hv, H, "model.layers.%lld.linear_attn.in_proj_a.weight");
        }
        if (c->linear[l]) {
            add3(&p, CIS2_T_LIN_CONV, l, -1, 3, C, 1, (uint64_t)c->conv_kernel,
                 "model.layers.%lld.linear_attn.conv1d.weight");
            add(&p, CIS2_T_LIN_A_LOG, l, 1, Hv, 0, "model.layers.%lld.linear_attn.A_log");
            add(&p, CIS2_T_LIN_DT_BIAS, l, 1, Hv, 0, "model.layers.%lld.linear_attn.dt_bias");
            add(&p, CIS2_T_LIN_NORM, l, 1, (uint64_t)c->lin_v_dim, 0, "model.layers.%lld.linear_attn.norm.weight");
            add(&p, CIS2_T_LIN_OUT, l, 2, H, VD, "model.layers.%lld.linear_attn.out_proj.weight");
        } else { /* attention */
            if (f->fused) { /* docs/models.md §M6: q's rows, then k's, then v's */
                add(&p, CIS2_T_QKV, l, 2, Q + 2 * KV, H, "model.layers.%lld.self_attn.qkv_proj.weight");
            } else {
                /* §M10.5: with the output gate, each head's query rows then its gate rows */
                add(&p, CIS2_T_Q, l, 2, f->attn_gate ? 2 * Q : Q, H, "model.layers.%lld.self_attn.q_proj.weight");
                if (qkv_bias) add(&p, CIS2_T_Q_BIAS, l, 1, Q, 0, "model.layers.%lld.self_attn.q_proj.bias");
                add(&p, CIS2_T_K, l, 2, KV, H, "model.layers.%lld.self_attn.k_proj.weight");
                if (qkv_bias) add(&p, CIS2_T_K_BIAS, l, 1, KV, 0, "model.layers.%lld.self_attn.k_proj.bias");
                add(&p, CIS2_T_V, l, 2, KV, H, "model.layers.%lld.self_attn.v_proj.weight");
                if (qkv_bias) add(&p, CIS2_T_V_BIAS, l, 1, KV, 0, "model.layers.%lld.self_attn.v_proj.bias");
            }
            add(&p, CIS2_T_O, l, 2, H, Q, "model.layers.%lld.self_attn.o_proj.weight");
            if (f->o_bias && c->attention_bias) add(&p, CIS2_T_O_BIAS, l, 1, H, 0, "model.layers.%lld.self_attn.o_proj.bias");
            if (f->sinks) add(&p, CIS2_T_SINKS, l, 1, (uint64_t)c->num_attention_heads, 0, "model.layers.%lld.self_attn.sinks");
            if (f->qk_norm != CIS2_QKN_NONE) { /* §M2, §M7: per head; §M4: the whole projection */
                int whole = f->qk_norm == CIS2_QKN_WHOLE;
                add(&p, CIS2_T_Q_NORM, l, 1, whole ? Q : D, 0, "model.layers.%lld.self_attn.q_norm.weight");
                add(&p, CIS2_T_K_NORM, l, 1, whole ? KV : D, 0, "model.layers.%lld.self_attn.k_norm.weight");
            }
        }
        add(&p, f->norms == CIS2_NORMS_PRE ? CIS2_T_FFN_NORM : CIS2_T_ATTN_OUT_NORM, l, 1, H, 0,
            "model.layers.%lld.post_attention_layernorm.weight");
        if (c->sparse[l] && f->moe == CIS2_MOE_TOPK_SOFTMAX) { /* §M9.6: the router, then the experts */
            uint64_t E = (uint64_t)c->num_experts;
            add(&p, CIS2_T_ROUTER, l, 2, E, H, "model.layers.%lld.mlp.router.weight");
            add(&p, CIS2_T_ROUTER_BIAS, l, 1, E, 0, "model.layers.%lld.mlp.router.bias");
            add_mx(&p, CIS2_T_EXPERTS_GU_BLOCKS, l, 1, E, 2 * I, H, "model.layers.%lld.mlp.experts.gate_up_proj_blocks");
            add_mx(&p, CIS2_T_EXPERTS_GU_SCALES, l, 0, E, 2 * I, H, "model.layers.%lld.mlp.experts.gate_up_proj_scales");
            add(&p, CIS2_T_EXPERTS_GU_BIAS, l, 2, E, 2 * I, "model.layers.%lld.mlp.experts.gate_up_proj_bias");
            add_mx(&p, CIS2_T_EXPERTS_DOWN_BLOCKS, l, 1, E, H, I, "model.layers.%lld.mlp.experts.down_proj_blocks");
            add_mx(&p, CIS2_T_EXPERTS_DOWN_SCALES, l, 0, E, H, I, "model.layers.%lld.mlp.experts.down_proj_scales");
            add(&p, CIS2_T_EXPERTS_DOWN_BIAS, l, 2, E, H, "model.layers.%lld.mlp.experts.down_proj_bias");
        } else if (c->sparse[l] && f->experts_fused) { /* §M10.10: the router, all experts, the shared expert */
            uint64_t E = (uint64_t)c->num_experts, Im = (uint64_t)c->moe_intermediate_size;
            uint64_t SI = (uint64_t)c->shared_inter;
            add(&p, CIS2_T_ROUTER, l, 2, E, H, "model.layers.%lld.mlp.gate.weight");
            add3(&p, CIS2_T_EXPERTS_GATE_UP, l, -1, 3, E, 2 * Im, H, "model.layers.%lld.mlp.experts.gate_up_proj");
            add3(&p, CIS2_T_EXPERTS_DOWN, l, -1, 3, E, H, Im, "model.layers.%lld.mlp.experts.down_proj");
            add(&p, CIS2_T_SHARED_GATE, l, 2, SI, H, "model.layers.%lld.mlp.shared_expert.gate_proj.weight");
            add(&p, CIS2_T_SHARED_UP, l, 2, SI, H, "model.layers.%lld.mlp.shared_expert.up_proj.weight");
            add(&p, CIS2_T_SHARED_DOWN, l, 2, H, SI, "model.layers.%lld.mlp.shared_expert.down_proj.weight");
            add(&p, CIS2_T_SHARED_ROUTER, l, 2, 1, H, "model.layers.%lld.mlp.shared_expert_gate.weight");
        } else if (c->sparse[l]) { /* docs/models.md §M8.2: the router, then each expert's three */
            uint64_t E = (uint64_t)c->num_experts, Im = (uint64_t)c->moe_intermediate_size;
            add(&p, CIS2_T_ROUTER, l, 2, E, H, "model.layers.%lld.mlp.gate.weight");
            for (int64_t e = 0; e < c->num_experts; e++) {
                add_x(&p, CIS2_T_EXPERT_GATE, l, e, 2, Im, H, "model.layers.%lld.mlp.experts.%lld.gate_proj.weight");
                add_x(&p, CIS2_T_EXPERT_UP, l, e, 2, Im, H, "model.layers.%lld.mlp.experts.%lld.up_proj.weight");
                add_x(&p, CIS2_T_EXPERT_DOWN, l, e, 2, H, Im, "model.layers.%lld.mlp.experts.%lld.down_proj.weight");
            }
            if (f->shared_expert) { /* §M10.11: Qwen3-Next's shared expert, as §M10.10's */
                uint64_t SI = (uint64_t)c->shared_inter;
                add(&p, CIS2_T_SHARED_GATE, l, 2, SI, H, "model.layers.%lld.mlp.shared_expert.gate_proj.weight");
                add(&p, CIS2_T_SHARED_UP, l, 2, SI, H, "model.layers.%lld.mlp.shared_expert.up_proj.weight");
                add(&p, CIS2_T_SHARED_DOWN, l, 2, H, SI, "model.layers.%lld.mlp.shared_expert.down_proj.weight");
                add(&p, CIS2_T_SHARED_ROUTER, l, 2, 1, H, "model.layers.%lld.mlp.shared_expert_gate.weight");
            }
        } else if (f->fused) { /* §M6: gate's rows, then up's */
            add(&p, CIS2_T_GATE_UP, l, 2, 2 * I, H, "model.layers.%lld.mlp.gate_up_proj.weight");
        } else {
            add(&p, CIS2_T_GATE, l, 2, I, H, "model.layers.%lld.mlp.gate_proj.weight");
            add(&p, CIS2_T_UP, l, 2, I, H, "model.layers.%lld.mlp.up_proj.weight");
        }
        if (!c->sparse[l]) add(&p, CIS2_T_DOWN, l, 2, H, I, "model.layers.%lld.mlp.down_proj.weight");
        if (f->norms == CIS2_NORMS_SANDWICH)
            add(&p, CIS2_T_FFN_NORM, l, 1, H, 0, "model.layers.%lld.pre_feedforward_layernorm.weight");
        if (f->norms != CIS2_NORMS_PRE)
            add(&p, CIS2_T_FFN_OUT_NORM, l, 1, H, 0, "model.layers.%lld.post_feedforward_layernorm.weight");
    }
    add(&p, CIS2_T_FINAL_NORM, -1, 1, H, 0, "model.norm.weight");
    if (!c->tie_word_embeddings) add(&p, CIS2_T_LM_HEAD, -1, 2, V, H, "lm_head.weight");
    return p.rc;
}

/*
 * config.c - config.json -> cis2_config (spec §2.2 architecture fields, §2.3
 * rms_norm_eps f64 -> f32 cast, §7.1 rope_theta as f32).
 *
 * Every architecture field is read from the file (§2.2: never hard-coded).
 * Optional fields take transformers' LlamaConfig defaults:
 *   num_key_value_heads = num_attention_heads, head_dim = hidden/heads,
 *   max_position_embeddings = 2048, rope_theta = 10000.0,
 *   tie_word_embeddings = false, hidden_act = "silu".
 * A JSON null counts as absent.
 *
 * Refused as CIS2_E_UNSUPPORTED (outside what the spec's forward pass
 * describes): rope_scaling not null, hidden_act other than silu,
 * rope_interleaved true, use_sliding_window true, use_mrope true,
 * model_type other than llama/qwen2, llama mlp_bias true (§10 has no MLP
 * biases), pretraining_tp > 1, and an explicit head_dim with
 * heads*head_dim != hidden_size (§2.5 pins q_proj/o_proj as [hidden, hidden]).
 *
 * Family semantics for which tensors exist (Hugging Face's modeling code,
 * enforced by the loader in model.c): llama (also a config without
 * model_type) has q/k/v and o_proj biases exactly when attention_bias is
 * true, MLP biases when mlp_bias is true; qwen2 always has q/k/v biases and
 * never o_proj or MLP biases, whatever attention_bias / mlp_bias say (its
 * modeling code does not read them).  Both must be booleans when present.
 *
 * Memory: the file is read once (fileio.h, at most 16 MiB) and its JSON
 * cost bounded before parsing (jsonlim.h, CIS2_CFG_MAX_JSON_COST).
 *
 * Size limits (CIS2_E_FORMAT beyond them) keep every later product within
 * size_t and every allocation sane: hidden <= 65536, intermediate <= 2^20,
 * layers <= 1024, vocab <= 2^22, max_position_embeddings <= 2^20, total
 * parameters <= 64e9.  With these, hidden*inter < 2^37, vocab*hidden < 2^38
 * and the parameter sum stays far below 2^63.
 */
#include "config.h"
#include "digest.h"
#include "fileio.h"
#include "jsonlim.h"

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

static int refuse_true(json_t *root, const char *key, const char *why, const char *name, cis2_error *err)
{
    int b = 0;
    int rc = get_bool(root, key, &b, name, err);
    if (rc) return rc;
    if (b) return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: %s is true: %s", name, key, why);
    return CIS2_OK;
}

uint64_t cis2_config_param_count(const cis2_config *c, int qkv_bias)
{
    uint64_t H = (uint64_t)c->hidden_size, I = (uint64_t)c->intermediate_size, V = (uint64_t)c->vocab_size;
    uint64_t KV = (uint64_t)c->num_key_value_heads * (uint64_t)c->head_dim;
    uint64_t Q = (uint64_t)c->num_attention_heads * (uint64_t)c->head_dim;
    uint64_t layer = 2 * H + Q * H + 2 * KV * H + H * Q + 3 * I * H + (qkv_bias ? Q + 2 * KV : 0);
    return V * H + (uint64_t)c->num_hidden_layers * layer + H + (c->tie_word_embeddings ? 0 : V * H);
}

static int eos_value(const json_t *v, uint32_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) return -1;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* eos_token_id (docs/sampling.md §S5.1), kept for stop-at-eos. */
static void parse_eos(cis2_config *c, const json_t *v)
{
    c->n_eos = 0;
    c->eos_malformed = 0;
    if (!v || json_is_null(v)) return;
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n > 64) { c->eos_malformed = 1; return; }
        for (size_t i = 0; i < n; i++)
            if (eos_value(json_array_get(v, i), &c->eos_ids[i])) { c->n_eos = 0; c->eos_malformed = 1; return; }
        c->n_eos = n;
        return;
    }
    if (eos_value(v, &c->eos_ids[0])) c->eos_malformed = 1;
    else c->n_eos = 1;
}

static int parse_root(cis2_config *c, json_t *root, const char *name, cis2_error *err)
{
    int rc;
    if (!json_is_object(root)) return cis2_fail(err, CIS2_E_FORMAT, "%s: not a JSON object", name);

    /* Family and the features the spec's forward pass does not describe. */
    json_t *mt = opt(root, "model_type");
    if (mt) {
        if (!json_is_string(mt)) return cis2_fail(err, CIS2_E_FORMAT, "%s: model_type must be a string", name);
        const char *s = json_string_value(mt);
        if (strcmp(s, "llama") && strcmp(s, "qwen2"))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: model_type '%.40s' not supported (llama or qwen2 only)",
                             name, s);
        snprintf(c->model_type, sizeof c->model_type, "%s", s);
    }
    json_t *act = opt(root, "hidden_act");
    if (act) {
        if (!json_is_string(act)) return cis2_fail(err, CIS2_E_FORMAT, "%s: hidden_act must be a string", name);
        if (strcmp(json_string_value(act), "silu"))
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: hidden_act '%.40s' not supported (silu only, §6.4)", name,
                             json_string_value(act));
    }
    if (opt(root, "rope_scaling"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: rope_scaling is set; only plain RoPE (§7) is supported", name);
    if ((rc = refuse_true(root, "rope_interleaved", "interleaved RoPE is not §7's rotate-half", name, err)) ||
        (rc = refuse_true(root, "use_sliding_window", "sliding-window attention is not supported (§9)", name, err)) ||
        (rc = refuse_true(root, "use_mrope", "multimodal RoPE is not supported", name, err)))
        return rc;
    if ((rc = get_bool(root, "attention_bias", &c->attention_bias, name, err)) ||
        (rc = get_bool(root, "mlp_bias", &c->mlp_bias, name, err)))
        return rc;
    if (c->mlp_bias && strcmp(c->model_type, "qwen2"))
        return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: mlp_bias is true: MLP biases are not part of §10", name);
    json_t *tp = opt(root, "pretraining_tp");
    if (tp) {
        if (!json_is_integer(tp) || json_integer_value(tp) < 1)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: pretraining_tp must be a positive integer", name);
        if (json_integer_value(tp) > 1)
            return cis2_fail(err, CIS2_E_UNSUPPORTED, "%s: pretraining_tp = %lld > 1 is not supported", name,
                             (long long)json_integer_value(tp));
    }

    /* Sizes (§2.2). */
    if ((rc = get_size(root, "hidden_size", 1, CIS2_CFG_MAX_HIDDEN, &c->hidden_size, name, err)) ||
        (rc = get_size(root, "intermediate_size", 1, CIS2_CFG_MAX_INTER, &c->intermediate_size, name, err)) ||
        (rc = get_size(root, "num_hidden_layers", 1, CIS2_CFG_MAX_LAYERS, &c->num_hidden_layers, name, err)) ||
        (rc = get_size(root, "num_attention_heads", 1, CIS2_CFG_MAX_HIDDEN, &c->num_attention_heads, name, err)) ||
        (rc = get_size(root, "vocab_size", 1, CIS2_CFG_MAX_VOCAB, &c->vocab_size, name, err)))
        return rc;
    c->num_key_value_heads = c->num_attention_heads;
    c->max_position_embeddings = 2048;
    c->head_dim = 0;
    if ((rc = get_size(root, "num_key_value_heads", 0, CIS2_CFG_MAX_HIDDEN, &c->num_key_value_heads, name, err)) ||
        (rc = get_size(root, "max_position_embeddings", 0, CIS2_CFG_MAX_POS, &c->max_position_embeddings, name,
                       err)) ||
        (rc = get_size(root, "head_dim", 0, CIS2_CFG_MAX_HIDDEN, &c->head_dim, name, err)))
        return rc;
    int64_t H = c->hidden_size, nh = c->num_attention_heads, kv = c->num_key_value_heads;
    if (c->head_dim == 0) {
        if (H % nh)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: hidden_size %lld is not divisible by num_attention_heads %lld",
                             name, (long long)H, (long long)nh);
        c->head_dim = H / nh;
    } else if (c->head_dim * nh != H) {
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

    /* §2.3 eps and §7.1 theta. */
    json_t *eps = opt(root, "rms_norm_eps");
    if (!eps) return cis2_fail(err, CIS2_E_FORMAT, "%s: missing required field rms_norm_eps", name);
    if (!json_is_number(eps)) return cis2_fail(err, CIS2_E_FORMAT, "%s: rms_norm_eps must be a number", name);
    c->rms_norm_eps_f64 = json_number_value(eps);
    c->rms_norm_eps = (float)c->rms_norm_eps_f64; /* §2.3: one RNE f64 -> f32 narrowing */
    if (!finite_pos(c->rms_norm_eps_f64) || !finite_pos((double)c->rms_norm_eps))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: rms_norm_eps must be finite and > 0 (also as f32)", name);
    c->rope_theta_f64 = 10000.0;
    json_t *th = opt(root, "rope_theta");
    if (th) {
        if (!json_is_number(th)) return cis2_fail(err, CIS2_E_FORMAT, "%s: rope_theta must be a number", name);
        c->rope_theta_f64 = json_number_value(th);
    }
    c->rope_theta = (float)c->rope_theta_f64; /* §7.1: rope_theta as f32 */
    if (!finite_pos(c->rope_theta_f64) || !finite_pos((double)c->rope_theta))
        return cis2_fail(err, CIS2_E_FORMAT, "%s: rope_theta must be finite and > 0 (also as f32)", name);

    c->tie_word_embeddings = 0;
    if ((rc = get_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, name, err))) return rc;
    parse_eos(c, json_object_get(root, "eos_token_id"));

    uint64_t params = cis2_config_param_count(c, cis2_config_qkv_bias(c));
    if (params > CIS2_CFG_MAX_PARAMS)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: %llu parameters exceed the limit of %llu", name,
                         (unsigned long long)params, (unsigned long long)CIS2_CFG_MAX_PARAMS);
    return CIS2_OK;
}

int cis2_config_qkv_bias(const cis2_config *c) { return !strcmp(c->model_type, "qwen2") || c->attention_bias; }
int cis2_config_o_bias(const cis2_config *c) { return strcmp(c->model_type, "qwen2") && c->attention_bias; }

int cis2_config_parse(cis2_config *c, const char *json, size_t len, const char *name, cis2_error *err)
{
    memset(c, 0, sizeof *c);
    if (!name) name = "config.json";
    int rc = cis2_json_cost_check(json, len, CIS2_CFG_MAX_JSON_COST, name, "a config.json", err);
    if (rc) return rc;
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: invalid JSON (%s, line %d column %d)", name, je.text, je.line,
                         je.column);
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

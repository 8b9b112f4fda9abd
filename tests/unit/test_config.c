/*
 * test_config.c - config.json reader (src/config.c): the real configs in
 * $SHARED/models, the §2.3 eps cast and §7.1 theta cast (bit patterns from
 * python's struct.pack('<f') and node's Math.fround, which agree), the
 * LlamaConfig defaults, one test per refused input, and the configs that
 * cis2 synth writes read back to the shapes written down here (not read
 * from synth.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "synth.h"
#include "genconfig.h"
#include "fileio.h"

static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* A complete SmolLM2-135M-like config; tests edit one member at a time. */
static const char *BASE =
    "{\"model_type\":\"llama\",\"hidden_size\":576,\"intermediate_size\":1536,\"num_hidden_layers\":30,"
    "\"num_attention_heads\":9,\"num_key_value_heads\":3,\"vocab_size\":49152,\"rms_norm_eps\":1e-05,"
    "\"rope_theta\":100000,\"max_position_embeddings\":8192,\"tie_word_embeddings\":true,"
    "\"hidden_act\":\"silu\",\"rope_scaling\":null,\"rope_interleaved\":false,\"pretraining_tp\":1}";

/* Parses BASE with `key` set to the JSON text `val` (removed when val is NULL). */
static int parse_mod(cis2_config *c, cis2_error *e, const char *key, const char *val)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    assert_non_null(root);
    if (key) {
        if (val) {
            json_t *v = json_loads(val, JSON_DECODE_ANY, &je);
            if (!v) fail_msg("bad test JSON %s", val);
            json_object_set_new(root, key, v);
        } else {
            json_object_del(root, key);
        }
    }
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    int rc = cis2_config_parse(c, s, strlen(s), "test-config", e);
    free(s);
    return rc;
}

static void expect_mod_fails(const char *key, const char *val, int code, const char *substr)
{
    cis2_config c;
    cis2_error e = {0};
    int rc = parse_mod(&c, &e, key, val);
    if (rc != code || !strstr(e.msg, substr) || !strstr(e.msg, "test-config"))
        fail_msg("%s=%s: rc=%d (want %d) msg='%s' (want '%s')", key, val ? val : "<deleted>", rc, code, e.msg, substr);
    assert_int_equal(c.hidden_size, 0); /* zeroed on failure */
}

static void expect_raw_fails(const char *json, int code, const char *substr)
{
    cis2_config c;
    cis2_error e = {0};
    int rc = cis2_config_parse(&c, json, strlen(json), "test-config", &e);
    if (rc != code || !strstr(e.msg, substr)) fail_msg("rc=%d (want %d) msg='%s' (want '%s')", rc, code, e.msg, substr);
}

static const char *shared(void)
{
    const char *s = getenv("SHARED");
    return s && *s ? s : "../shared";
}

static int load_shared(cis2_config *c, const char *model)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/models/%s/config.json", shared(), model);
    if (access(p, R_OK) != 0) return -1;
    cis2_error e = {0};
    int rc = cis2_config_load(c, p, &e);
    if (rc) fail_msg("%s", e.msg);
    return 0;
}

/* ---- the real configs ---- */

static void real_smollm2_135m(void **s)
{
    (void)s;
    cis2_config c;
    if (load_shared(&c, "smollm2-135m")) skip();
    /* §2.2's table */
    assert_int_equal(c.hidden_size, 576);
    assert_int_equal(c.intermediate_size, 1536);
    assert_int_equal(c.num_hidden_layers, 30);
    assert_int_equal(c.num_attention_heads, 9);
    assert_int_equal(c.num_key_value_heads, 3);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.vocab_size, 49152);
    assert_int_equal(c.max_position_embeddings, 8192);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_string_equal(c.model_type, "llama");
    assert_int_equal(bits(c.rms_norm_eps), 0x3727C5AC); /* §2.3 EPS_F32 */
    assert_true(c.rms_norm_eps_f64 == 1e-05);
    assert_true(c.rope_theta_f64 == 100000.0);
    assert_int_equal(bits(c.rope_theta), 0x47C35000);
    /* 134,515,008 parameters: the real model.safetensors is 269,060,552 bytes */
    assert_int_equal(cis2_config_param_count(&c), 134515008);
}

static void real_smollm2_360m(void **s)
{
    (void)s;
    cis2_config c;
    if (load_shared(&c, "smollm2-360m")) skip();
    assert_int_equal(c.hidden_size, 960);
    assert_int_equal(c.intermediate_size, 2560);
    assert_int_equal(c.num_hidden_layers, 32);
    assert_int_equal(c.num_attention_heads, 15);
    assert_int_equal(c.num_key_value_heads, 5);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.vocab_size, 49152);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_int_equal(bits(c.rms_norm_eps), 0x3727C5AC);
}

static void real_qwen25_05b(void **s)
{
    (void)s;
    cis2_config c;
    /* use_sliding_window false with a sliding_window value: not in use, fine */
    if (load_shared(&c, "qwen2.5-0.5b")) skip();
    assert_int_equal(c.hidden_size, 896);
    assert_int_equal(c.intermediate_size, 4864);
    assert_int_equal(c.num_hidden_layers, 24);
    assert_int_equal(c.num_attention_heads, 14);
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.vocab_size, 151936);
    assert_int_equal(c.max_position_embeddings, 32768);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_string_equal(c.model_type, "qwen2");
    assert_int_equal(bits(c.rms_norm_eps), 0x358637BD); /* (float)1e-06, RNE */
    assert_int_equal(bits(c.rope_theta), 0x49742400);   /* 1000000.0f */
    /* Qwen2.5-0.5B is documented as 494,032,768 parameters (tied) */
    assert_int_equal(cis2_config_param_count(&c), 494032768);
}

static void load_missing_file(void **s)
{
    (void)s;
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(cis2_config_load(&c, "/nonexistent/config.json", &e), CIS2_E_IO);
    assert_non_null(strstr(e.msg, "/nonexistent/config.json"));
}

/* ---- casts and spellings ---- */

static void eps_cast(void **s)
{
    (void)s;
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(parse_mod(&c, &e, "rms_norm_eps", "1e-05"), CIS2_OK);
    assert_int_equal(bits(c.rms_norm_eps), 0x3727C5AC);
    assert_int_equal(parse_mod(&c, &e, "rms_norm_eps", "0.00001"), CIS2_OK);
    assert_int_equal(bits(c.rms_norm_eps), 0x3727C5AC);
    assert_int_equal(parse_mod(&c, &e, "rms_norm_eps", "1e-06"), CIS2_OK);
    assert_int_equal(bits(c.rms_norm_eps), 0x358637BD);
    assert_true(c.rms_norm_eps_f64 == 1e-06);
    /* an integer spelling is a number too */
    assert_int_equal(parse_mod(&c, &e, "rms_norm_eps", "1"), CIS2_OK);
    assert_int_equal(bits(c.rms_norm_eps), 0x3F800000);
}

static void theta_spellings(void **s)
{
    (void)s;
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(parse_mod(&c, &e, "rope_theta", "100000"), CIS2_OK);
    assert_int_equal(bits(c.rope_theta), 0x47C35000);
    assert_true(c.rope_theta_f64 == 100000.0);
    assert_int_equal(parse_mod(&c, &e, "rope_theta", "100000.0"), CIS2_OK);
    assert_int_equal(bits(c.rope_theta), 0x47C35000);
    assert_int_equal(parse_mod(&c, &e, "rope_theta", "1e5"), CIS2_OK);
    assert_int_equal(bits(c.rope_theta), 0x47C35000);
    assert_int_equal(parse_mod(&c, &e, "rope_theta", "500000.0"), CIS2_OK);
    assert_int_equal(bits(c.rope_theta), 0x48F42400);
    /* not exactly representable: one RNE cast (python: struct '<f' of 10000.3 -> 0x461C4133) */
    assert_int_equal(parse_mod(&c, &e, "rope_theta", "10000.3"), CIS2_OK);
    assert_int_equal(bits(c.rope_theta), 0x461C4133);
}

static void defaults(void **s)
{
    (void)s;
    const char *min = "{\"hidden_size\":64,\"intermediate_size\":160,\"num_hidden_layers\":2,"
                      "\"num_attention_heads\":4,\"vocab_size\":512,\"rms_norm_eps\":1e-06}";
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(cis2_config_parse(&c, min, strlen(min), "min", &e), CIS2_OK);
    assert_int_equal(c.num_key_value_heads, 4);  /* = num_attention_heads */
    assert_int_equal(c.head_dim, 16);            /* hidden / heads */
    assert_int_equal(c.max_position_embeddings, 2048);
    assert_true(c.rope_theta_f64 == 10000.0);
    assert_int_equal(bits(c.rope_theta), 0x461C4000);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_string_equal(c.model_type, "");
    /* null counts as absent */
    assert_int_equal(parse_mod(&c, &e, "num_key_value_heads", "null"), CIS2_OK);
    assert_int_equal(c.num_key_value_heads, 9);
    assert_int_equal(parse_mod(&c, &e, "rope_theta", NULL), CIS2_OK);
    assert_true(c.rope_theta_f64 == 10000.0);
    /* explicit head_dim consistent with hidden/heads is fine */
    assert_int_equal(parse_mod(&c, &e, "head_dim", "64"), CIS2_OK);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(parse_mod(&c, &e, "model_type", "\"qwen2\""), CIS2_OK);
    assert_string_equal(c.model_type, "qwen2");
    /* qwen2 ignores attention_bias (its q/k/v biases are §9.1 tensors) */
    assert_int_equal(parse_mod(&c, &e, "use_sliding_window", "false"), CIS2_OK);
}

/* ---- one test per refused input ---- */

#define REJ(fn, key, val, code, substr) \
    static void fn(void **s) { (void)s; expect_mod_fails(key, val, code, substr); }

REJ(missing_hidden, "hidden_size", NULL, CIS2_E_FORMAT, "missing required field hidden_size")
REJ(missing_inter, "intermediate_size", NULL, CIS2_E_FORMAT, "missing required field intermediate_size")
REJ(missing_layers, "num_hidden_layers", NULL, CIS2_E_FORMAT, "missing required field num_hidden_layers")
REJ(missing_heads, "num_attention_heads", NULL, CIS2_E_FORMAT, "missing required field num_attention_heads")
REJ(missing_vocab, "vocab_size", NULL, CIS2_E_FORMAT, "missing required field vocab_size")
REJ(missing_eps, "rms_norm_eps", NULL, CIS2_E_FORMAT, "missing required field rms_norm_eps")
REJ(unsup_rope_scaling, "rope_scaling", "{\"type\":\"linear\",\"factor\":2.0}", CIS2_E_UNSUPPORTED,
    "rope_scaling.type \"linear\" is not implemented")
REJ(unsup_act, "hidden_act", "\"gelu\"", CIS2_E_UNSUPPORTED, "hidden_act 'gelu'")
REJ(unsup_interleaved, "rope_interleaved", "true", CIS2_E_UNSUPPORTED, "rope_interleaved = true is not implemented")
REJ(unsup_sliding, "use_sliding_window", "true", CIS2_E_UNSUPPORTED, "use_sliding_window is true")
REJ(unsup_model_type, "model_type", "\"gemma2\"", CIS2_E_UNSUPPORTED, "model_type 'gemma2'")
REJ(unsup_mlp_bias, "mlp_bias", "true", CIS2_E_UNSUPPORTED, "mlp_bias is true")
REJ(unsup_mrope, "use_mrope", "true", CIS2_E_UNSUPPORTED, "use_mrope = true is not implemented")
REJ(unsup_head_dim_mismatch, "head_dim", "128", CIS2_E_UNSUPPORTED, "head_dim 128")
REJ(size_float, "hidden_size", "576.0", CIS2_E_FORMAT, "hidden_size must be a positive integer")
REJ(size_string, "num_hidden_layers", "\"30\"", CIS2_E_FORMAT, "num_hidden_layers must be a positive integer")
REJ(size_negative, "vocab_size", "-5", CIS2_E_FORMAT, "vocab_size must be a positive integer, got -5")
REJ(size_zero, "num_key_value_heads", "0", CIS2_E_FORMAT, "num_key_value_heads must be a positive integer, got 0")
REJ(size_bool, "intermediate_size", "true", CIS2_E_FORMAT, "intermediate_size must be a positive integer")
REJ(heads_not_multiple_of_kv, "num_key_value_heads", "2", CIS2_E_FORMAT, "not a multiple of num_key_value_heads 2")
REJ(kv_more_than_heads, "num_key_value_heads", "18", CIS2_E_FORMAT, "not a multiple")
REJ(hidden_not_divisible, "num_attention_heads", "7", CIS2_E_FORMAT, "not divisible by num_attention_heads 7")
REJ(head_dim_odd, "hidden_size", "585", CIS2_E_FORMAT, "head_dim 65 is odd")
REJ(absurd_hidden, "hidden_size", "131072", CIS2_E_FORMAT, "hidden_size = 131072 exceeds the limit")
REJ(absurd_layers, "num_hidden_layers", "5000", CIS2_E_FORMAT, "exceeds the limit")
REJ(absurd_vocab, "vocab_size", "10000000", CIS2_E_FORMAT, "exceeds the limit")
REJ(absurd_max_pos, "max_position_embeddings", "2097152", CIS2_E_FORMAT, "exceeds the limit")
REJ(absurd_inter, "intermediate_size", "2097152", CIS2_E_FORMAT, "exceeds the limit")
REJ(absurd_int64, "hidden_size", "9223372036854775807", CIS2_E_FORMAT, "exceeds the limit")
REJ(eps_zero, "rms_norm_eps", "0.0", CIS2_E_FORMAT, "rms_norm_eps must be finite and > 0")
REJ(eps_negative, "rms_norm_eps", "-1e-05", CIS2_E_FORMAT, "rms_norm_eps must be finite and > 0")
REJ(eps_string, "rms_norm_eps", "\"1e-05\"", CIS2_E_FORMAT, "rms_norm_eps must be a number")
REJ(eps_underflows_f32, "rms_norm_eps", "1e-50", CIS2_E_FORMAT, "also as f32")
REJ(eps_huge, "rms_norm_eps", "1e308", CIS2_E_FORMAT, "also as f32")
REJ(theta_zero, "rope_theta", "0", CIS2_E_FORMAT, "rope_theta must be finite and > 0")
REJ(theta_negative, "rope_theta", "-10000.0", CIS2_E_FORMAT, "rope_theta must be finite and > 0")
REJ(theta_overflows_f32, "rope_theta", "1e39", CIS2_E_FORMAT, "also as f32")
REJ(theta_string, "rope_theta", "\"10000\"", CIS2_E_FORMAT, "rope_theta must be a number")
REJ(tie_not_bool, "tie_word_embeddings", "1", CIS2_E_FORMAT, "tie_word_embeddings must be true or false")
REJ(tp_zero, "pretraining_tp", "0", CIS2_E_FORMAT, "pretraining_tp must be a positive integer")
REJ(model_type_not_string, "model_type", "3", CIS2_E_FORMAT, "model_type must be a string")
REJ(rope_params_not_object, "rope_parameters", "[10000]", CIS2_E_FORMAT, "rope_parameters must be an object or null")
REJ(rope_params_theta_string, "rope_parameters", "{\"rope_theta\":\"1e6\"}", CIS2_E_FORMAT,
    "rope_parameters.rope_theta must be a number")
REJ(rope_params_theta_zero, "rope_parameters", "{\"rope_theta\":0}", CIS2_E_UNSUPPORTED,
    "rope_theta (100000) and rope_parameters.rope_theta (0) disagree")
REJ(layer_types_not_list, "layer_types", "\"full_attention\"", CIS2_E_FORMAT, "layer_types must be a list")
REJ(layer_types_short, "layer_types", "[\"full_attention\"]", CIS2_E_FORMAT, "num_hidden_layers (30)")
REJ(unknown_key, "logits_scaling", "1.0", CIS2_E_UNSUPPORTED, "key 'logits_scaling' is not known to cis2")
REJ(unknown_key_null, "residual_multiplier", "null", CIS2_E_UNSUPPORTED, "key 'residual_multiplier' is not known")

/* ---- config keys of current transformers (docs/models.md "Configs written by current transformers") ---- */

/* Parses BASE with the members of the JSON object `patch` set and the
 * comma-separated keys of `del` removed. */
static int parse_patch(cis2_config *c, cis2_error *e, const char *patch, const char *del)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je), *p = json_loads(patch, 0, &je);
    if (!root || !p) fail_msg("bad test JSON %s", patch);
    json_object_update(root, p);
    json_decref(p);
    char keys[256];
    snprintf(keys, sizeof keys, "%s", del ? del : "");
    for (char *k = strtok(keys, ","); k; k = strtok(NULL, ",")) json_object_del(root, k);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    int rc = cis2_config_parse(c, s, strlen(s), "test-config", e);
    free(s);
    return rc;
}

static void patch_ok(cis2_config *c, const char *patch, const char *del)
{
    cis2_error e = {0};
    if (parse_patch(c, &e, patch, del)) fail_msg("%s (without %s): %s", patch, del ? del : "-", e.msg);
}

static void patch_fails(const char *patch, const char *del, int code, const char *substr)
{
    cis2_config c;
    cis2_error e = {0};
    int rc = parse_patch(&c, &e, patch, del);
    if (rc != code || !strstr(e.msg, substr) || !strstr(e.msg, "test-config") || strchr(e.msg, '\n'))
        fail_msg("%s: rc=%d (want %d) msg='%s' (want '%s')", patch, rc, code, e.msg, substr);
}

/* The RoPE base given only in rope_parameters (transformers 5) or
 * rope_scaling is the base run, not the default 10000 (the silent wrong
 * answer of a reader that ignores the key).  1000000.0f is 0x49742400 (python struct '<f'). */
static void rope_parameters_base(void **s)
{
    (void)s;
    cis2_config c;
    patch_ok(&c, "{\"rope_parameters\":{\"rope_theta\":1000000.0,\"rope_type\":\"default\"}}", "rope_theta");
    assert_true(c.rope_theta_f64 == 1000000.0);
    assert_int_equal(bits(c.rope_theta), 0x49742400);
    patch_ok(&c, "{\"rope_parameters\":{\"rope_theta\":1000000}}", "rope_theta,rope_scaling"); /* no type: default */
    assert_int_equal(bits(c.rope_theta), 0x49742400);
    patch_ok(&c, "{\"rope_scaling\":{\"rope_type\":\"default\",\"rope_theta\":500000.0}}", "rope_theta");
    assert_int_equal(bits(c.rope_theta), 0x48F42400);
    patch_ok(&c, "{\"rope_scaling\":{\"type\":\"default\"}}", NULL); /* the older spelling of the type */
    assert_int_equal(bits(c.rope_theta), 0x47C35000); /* BASE's 100000 */
    /* given twice: equal is fine, different is refused naming both */
    patch_ok(&c, "{\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":100000.0}}", NULL);
    assert_int_equal(bits(c.rope_theta), 0x47C35000);
    patch_fails("{\"rope_parameters\":{\"rope_theta\":1000000.0}}", NULL, CIS2_E_UNSUPPORTED,
                "rope_theta (100000) and rope_parameters.rope_theta (1000000) disagree");
    patch_fails("{\"rope_parameters\":{\"rope_theta\":1000000.0},\"rope_scaling\":{\"rope_theta\":10000}}",
                "rope_theta", CIS2_E_UNSUPPORTED, "rope_parameters.rope_theta (1000000) and rope_scaling.rope_theta");
    patch_fails("{\"rope_parameters\":{\"rope_theta\":0}}", "rope_theta", CIS2_E_FORMAT,
                "rope_parameters.rope_theta must be finite and > 0");
    /* neither: LlamaConfig's default */
    patch_ok(&c, "{\"rope_parameters\":{\"rope_type\":\"default\"}}", "rope_theta");
    assert_int_equal(bits(c.rope_theta), 0x461C4000);
}

/* Every RoPE type but the plain one (transformers' ROPE_INIT_FUNCTIONS),
 * in rope_parameters and in rope_scaling, under both spellings. */
static void rope_types_refused(void **s)
{
    (void)s;
    const char *types[] = {"yarn", "linear", "dynamic", "longrope", "su", "mrope"}; /* llama3: llama3_rope */
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char p[160], want[96];
        snprintf(p, sizeof p, "{\"rope_parameters\":{\"rope_type\":\"%s\",\"factor\":4.0,\"rope_theta\":1e6}}", types[i]);
        snprintf(want, sizeof want, "rope_parameters.rope_type \"%s\" is not implemented", types[i]);
        patch_fails(p, "rope_theta", CIS2_E_UNSUPPORTED, want);
        snprintf(p, sizeof p, "{\"rope_scaling\":{\"type\":\"%s\",\"factor\":4.0}}", types[i]);
        snprintf(want, sizeof want, "rope_scaling.type \"%s\" is not implemented", types[i]);
        patch_fails(p, NULL, CIS2_E_UNSUPPORTED, want);
        snprintf(p, sizeof p, "{\"rope_scaling\":{\"rope_type\":\"%s\",\"factor\":4.0}}", types[i]);
        snprintf(want, sizeof want, "rope_scaling.rope_type \"%s\" is not implemented", types[i]);
        patch_fails(p, NULL, CIS2_E_UNSUPPORTED, want);
    }
    patch_fails("{\"rope_scaling\":{\"type\":\"default\",\"rope_type\":\"yarn\"}}", NULL, CIS2_E_FORMAT,
                "rope_scaling.rope_type and rope_scaling.type disagree");
    patch_fails("{\"rope_parameters\":{\"rope_type\":7}}", NULL, CIS2_E_FORMAT, "rope_parameters.rope_type must be a string");
}

/* The members of rope_parameters besides the type and the base: a default
 * RoPE with a factor or a partial rotation is not §7. */
static void rope_members(void **s)
{
    (void)s;
    cis2_config c;
    patch_fails("{\"rope_parameters\":{\"rope_type\":\"default\",\"factor\":8.0}}", NULL, CIS2_E_UNSUPPORTED,
                "rope_parameters.factor = 8.0 is not implemented");
    patch_fails("{\"rope_parameters\":{\"partial_rotary_factor\":0.5}}", NULL, CIS2_E_UNSUPPORTED,
                "rope_parameters.partial_rotary_factor = 0.5");
    patch_fails("{\"rope_scaling\":{\"type\":\"default\",\"mrope_section\":[16,24,24]}}", NULL, CIS2_E_UNSUPPORTED,
                "rope_scaling.mrope_section");
    /* per-layer-type RoPE (transformers 5 hybrids) is not a type cis2 knows */
    patch_fails("{\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1e6}}}", NULL,
                CIS2_E_UNSUPPORTED, "rope_parameters.full_attention");
    patch_ok(&c, "{\"rope_parameters\":{\"rope_type\":\"default\",\"partial_rotary_factor\":1.0}}", NULL);
    patch_ok(&c, "{\"partial_rotary_factor\":1}", NULL);
    patch_fails("{\"partial_rotary_factor\":0.25}", NULL, CIS2_E_UNSUPPORTED, "partial_rotary_factor = 0.25");
}

static void layer_types(void **s)
{
    (void)s;
    char full[1024] = "{\"layer_types\":[", *at = full + strlen(full);
    for (int i = 0; i < 30; i++) at += sprintf(at, "%s\"full_attention\"", i ? "," : "");
    strcpy(at, "]}");
    cis2_config c;
    patch_ok(&c, full, NULL);
    assert_int_equal(c.num_hidden_layers, 30);
    at = full + sprintf(full, "{\"layer_types\":[");
    for (int i = 0; i < 30; i++) at += sprintf(at, "%s\"%s\"", i ? "," : "", i == 3 ? "sliding_attention" : "full_attention");
    strcpy(at, "]}");
    patch_fails(full, NULL, CIS2_E_UNSUPPORTED, "layer_types[3] \"sliding_attention\" is not implemented");
    at = full + sprintf(full, "{\"layer_types\":[");
    for (int i = 0; i < 30; i++) at += sprintf(at, "%s%s", i ? "," : "", i == 29 ? "1" : "\"full_attention\"");
    strcpy(at, "]}");
    patch_fails(full, NULL, CIS2_E_FORMAT, "layer_types[29] must be a string");
}

/* sliding_window is inert only where it cannot act (Qwen2.5's configs
 * carry one with use_sliding_window false). */
static void sliding_window(void **s)
{
    (void)s;
    cis2_config c;
    patch_ok(&c, "{\"sliding_window\":null}", NULL);
    patch_ok(&c, "{\"sliding_window\":4096,\"use_sliding_window\":false}", NULL);
    patch_ok(&c, "{\"model_type\":\"qwen2\",\"sliding_window\":4096,\"max_window_layers\":21}", NULL);
    patch_fails("{\"sliding_window\":4096}", NULL, CIS2_E_UNSUPPORTED, "sliding_window = 4096 is not implemented");
    patch_fails("{\"model_type\":\"qwen2\",\"sliding_window\":4096,\"use_sliding_window\":true}", NULL,
                CIS2_E_UNSUPPORTED, "use_sliding_window is true");
    patch_fails("{\"use_sliding_window\":\"no\"}", NULL, CIS2_E_FORMAT, "use_sliding_window must be true or false");
}

/* Keys accepted only at the value cis2 implements (null counts as absent). */
static void neutral_keys(void **s)
{
    (void)s;
    cis2_config c;
    static const struct { const char *ok, *bad, *want; } K[] = {
        {"{\"attn_logit_softcapping\":null}", "{\"attn_logit_softcapping\":50.0}", "attn_logit_softcapping = 50.0"},
        {"{\"final_logit_softcapping\":null}", "{\"final_logit_softcapping\":30.0}", "final_logit_softcapping = 30.0"},
        {"{\"no_rope_layers\":[1,1,1]}", "{\"no_rope_layers\":[1,1,0]}", "no_rope_layers = [1,1,0]"},
        {"{\"no_rope_layers\":[1,1],\"no_rope_layer_interval\":4}", "{\"no_rope_layer_interval\":4}",
         "no_rope_layer_interval = 4"},
        {"{\"qk_norm\":false}", "{\"qk_norm\":true}", "qk_norm = true"},
        {"{\"use_qk_norm\":false}", "{\"use_qk_norm\":true}", "use_qk_norm = true"},
        {"{\"qk_layernorm\":false}", "{\"qk_layernorm\":true}", "qk_layernorm = true"},
        {"{\"quantization_config\":null}", "{\"quantization_config\":{\"quant_method\":\"gptq\"}}",
         "quantization_config.quant_method 'gptq' is not implemented"}, /* named (docs/models.md §M9.1) */
        {"{\"rope_interleaved\":false}", "{\"rope_interleaved\":1}", "rope_interleaved = 1"},
        {"{\"use_mrope\":false}", "{\"use_mrope\":true}", "use_mrope = true"},
    };
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++) {
        patch_ok(&c, K[i].ok, NULL);
        patch_fails(K[i].bad, NULL, CIS2_E_UNSUPPORTED, K[i].want);
    }
}

/* pretraining_tp split a training run's matmuls; §5 fixes every sum. */
static void pretraining_tp_accepted(void **s)
{
    (void)s;
    cis2_config c;
    patch_ok(&c, "{\"pretraining_tp\":2}", NULL);
    patch_ok(&c, "{\"pretraining_tp\":8}", NULL);
    patch_fails("{\"pretraining_tp\":1.5}", NULL, CIS2_E_FORMAT, "pretraining_tp must be a positive integer");
}

/* A config as transformers 5 writes it: dtype, rope_parameters, layer_types. */
static void transformers5_config(void **s)
{
    (void)s;
    const char *v5 =
        "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
        "\"bos_token_id\":1,\"dtype\":\"bfloat16\",\"eos_token_id\":2,\"head_dim\":16,\"hidden_act\":\"silu\","
        "\"hidden_size\":64,\"initializer_range\":0.02,\"intermediate_size\":160,"
        "\"layer_types\":[\"full_attention\",\"full_attention\"],\"max_position_embeddings\":256,"
        "\"mlp_bias\":false,\"model_type\":\"llama\",\"num_attention_heads\":4,\"num_hidden_layers\":2,"
        "\"num_key_value_heads\":2,\"pretraining_tp\":1,\"rms_norm_eps\":1e-05,"
        "\"rope_parameters\":{\"rope_theta\":1000000.0,\"rope_type\":\"default\"},\"tie_word_embeddings\":true,"
        "\"transformers_version\":\"5.0.0\",\"use_cache\":true,\"vocab_size\":512}";
    cis2_config c;
    cis2_error e = {0};
    if (cis2_config_parse(&c, v5, strlen(v5), "v5", &e)) fail_msg("%s", e.msg);
    assert_int_equal(bits(c.rope_theta), 0x49742400);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.n_eos, 1);
}

/* The real configs of $SHARED/models/families: each loads or is
 * refused for a reason of substance (expected below, from the models'
 * documentation: SOURCES.md), never for an unknown key; and with its
 * model_type replaced by llama, still never for an unknown key (so the
 * table covers every key they use), but for the families cis2 refuses by
 * model_type (their keys are read when they are implemented). */
static void families(void **s)
{
    (void)s;
    static const struct { const char *file, *why; } F[] = {
        {"DeepSeek-R1-Distill-Qwen-1.5B", NULL},
        {"Llama-3.1-8B", NULL},
        {"Llama-3.2-1B", NULL},
        {"Mistral-7B-v0.3", NULL},
        {"OLMo-2-0425-1B", NULL},
        {"Phi-3-mini-4k-instruct", NULL},
        {"Qwen2.5-1.5B-Instruct", NULL},
        {"Qwen2.5-3B", NULL},
        {"Qwen2.5-7B", NULL},
        {"Qwen3-0.6B", NULL},
        {"Qwen3-1.7B", NULL},
        {"Qwen3-8B", NULL},
        {"SmolLM3-3B", NULL},
        {"TinyLlama-1.1B-Chat-v1.0", NULL},
        {"gemma-3-1b-it", NULL},
        {"Qwen3-30B-A3B", NULL},
        {"gpt-oss-20b", NULL},
        {"Qwen3.5-0.8B", NULL},
        {"Qwen3.5-35B-A3B", NULL},
        {"Qwen3-Next-80B-A3B", NULL},
    };
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/%s.json", shared(), F[0].file);
    if (access(p, R_OK) != 0) skip();
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        snprintf(p, sizeof p, "%s/models/families/%s.json", shared(), F[i].file);
        cis2_config c;
        cis2_error e = {0};
        int rc = cis2_config_load(&c, p, &e);
        if (F[i].why ? rc != CIS2_E_UNSUPPORTED || !strstr(e.msg, F[i].why) : rc != CIS2_OK)
            fail_msg("%s: rc=%d msg='%s' (want %s)", F[i].file, rc, e.msg, F[i].why ? F[i].why : "OK");
        if (F[i].why && strstr(F[i].why, "model_type")) { /* a family cis2 does not run: its keys are its own */
            printf("    %s: %s\n", F[i].file, F[i].why);
            continue;
        }
        json_error_t je;
        json_t *root = json_load_file(p, 0, &je);
        assert_non_null(root);
        json_object_set_new(root, "model_type", json_string("llama"));
        char *t = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        e = (cis2_error){0};
        rc = cis2_config_parse(&c, t, strlen(t), F[i].file, &e);
        free(t);
        if (rc && strstr(e.msg, "not known")) fail_msg("%s as llama: %s", F[i].file, e.msg);
        printf("    %s: %s; as llama: %s\n", F[i].file, F[i].why ? F[i].why : "loads", rc ? e.msg : "loads");
    }
}

/* smollm3's NoPE layers (docs/models.md §M3.1): no_rope_layers' 0 entries
 * (SmolLM3-3B: every 4th layer), or every no_rope_layer_interval-th layer
 * when the list is absent, as SmolLM3Config derives it; bad lists refused;
 * other families never skip RoPE. */
static void smollm3_nope(void **s)
{
    (void)s;
    cis2_config c;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/SmolLM3-3B.json", shared());
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        for (int l = 0; l < 36; l++)
            if (c.no_rope[l] != (l % 4 == 3)) fail_msg("SmolLM3-3B layer %d: no_rope %d", l, c.no_rope[l]);
        assert_int_equal(bits(c.rope_theta), 0x4A989680); /* 5000000 */
    }
    patch_ok(&c, "{\"model_type\":\"smollm3\",\"no_rope_layer_interval\":3}", NULL); /* 30 layers */
    for (int l = 0; l < 30; l++) assert_int_equal(c.no_rope[l], l % 3 == 2);
    assert_int_equal(bits(c.rope_theta), 0x47C35000); /* BASE's 100000 */
    patch_ok(&c, "{\"model_type\":\"smollm3\"}", "rope_theta"); /* the interval's default 4, theta's 2e6 */
    for (int l = 0; l < 30; l++) assert_int_equal(c.no_rope[l], l % 4 == 3);
    assert_int_equal(bits(c.rope_theta), 0x49F42400); /* 2000000 */
    char lst[256] = "{\"model_type\":\"smollm3\",\"no_rope_layers\":[0";
    for (int l = 1; l < 31; l++) strcat(lst, l == 5 ? ",0" : ",1"); /* 31 entries: the last one unused */
    strcat(lst, "]}");
    patch_ok(&c, lst, NULL);
    for (int l = 0; l < 30; l++) assert_int_equal(c.no_rope[l], l == 0 || l == 5);
    patch_fails("{\"model_type\":\"smollm3\",\"no_rope_layers\":[1,0,1]}", NULL, CIS2_E_FORMAT,
                "no_rope_layers must be a list of at least num_hidden_layers (30)");
    lst[strlen(lst) - 3] = '2';
    patch_fails(lst, NULL, CIS2_E_FORMAT, "no_rope_layers[30] must be 0 or 1");
    patch_fails("{\"model_type\":\"smollm3\",\"no_rope_layer_interval\":0}", NULL, CIS2_E_FORMAT,
                "no_rope_layer_interval must be a positive integer");
    patch_fails("{\"model_type\":\"llama\",\"no_rope_layer_interval\":4}", NULL, CIS2_E_UNSUPPORTED,
                "no_rope_layer_interval");
    patch_ok(&c, "{\"model_type\":\"qwen3\"}", NULL);
    for (int l = 0; l < 30; l++) assert_int_equal(c.no_rope[l], 0);
}

/* olmo2 (docs/models.md §M4.1): the real OLMo-2-0425-1B config loads as
 * post-norm with whole-projection q/k norms (their Q + KV weights counted);
 * attention_bias true refused; other families are not post-norm. */
static void olmo2_family(void **s)
{
    (void)s;
    cis2_config c;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/OLMo-2-0425-1B.json", shared());
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        assert_true(cis2_config_post_norm(&c) && !cis2_config_qk_norm(&c) && !cis2_config_qkv_bias(&c));
        assert_int_equal(c.head_dim, 128);
        /* 16 layers of 2*2048 norm + 4*2048^2 attention + 3*2048*8192 MLP + 2*2048 q/k norm weights, the
         * untied embedding and head 2*100352*2048, the final norm 2048: OLMo-2-0425-1B's 1,484,916,736 */
        assert_true(cis2_config_param_count(&c) == 1484916736ull);
    }
    patch_ok(&c, "{\"model_type\":\"olmo2\"}", NULL);
    assert_true(cis2_config_post_norm(&c));
    patch_fails("{\"model_type\":\"olmo2\",\"attention_bias\":true}", NULL, CIS2_E_UNSUPPORTED,
                "attention_bias is true: an olmo2 model's attention biases");
    patch_fails("{\"model_type\":\"olmo2\",\"clip_qkv\":8}", NULL, CIS2_E_UNSUPPORTED, "clip_qkv");
    patch_ok(&c, "{\"model_type\":\"qwen3\"}", NULL);
    assert_false(cis2_config_post_norm(&c));
    patch_ok(&c, "{\"model_type\":\"llama\"}", NULL);
    assert_false(cis2_config_post_norm(&c));
}

/* rope_type "llama3" (docs/models.md §M1): the four members, required and
 * checked, in rope_scaling or rope_parameters; and the rescaled table. */
static void llama3_rope(void **s)
{
    (void)s;
    cis2_config c;
#define L3(extra) "{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32.0,\"low_freq_factor\":1.0," \
                  "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192" extra "}}"
    patch_ok(&c, L3(""), NULL);
    assert_true(c.rope_llama3);
    assert_true(c.l3_factor == 32.0 && c.l3_low_ff == 1.0 && c.l3_high_ff == 4.0 && c.l3_old_ctx == 8192);
    assert_int_equal(bits(c.rope_theta), 0x47C35000); /* the base stays BASE's 100000 */
    patch_ok(&c, "{\"rope_parameters\":{\"rope_type\":\"llama3\",\"rope_theta\":500000.0,\"factor\":8.0,"
                 "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}",
             "rope_theta");
    assert_true(c.rope_llama3 && c.l3_factor == 8.0);
    patch_ok(&c, "{\"rope_scaling\":{\"type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,"
                 "\"high_freq_factor\":4,\"original_max_position_embeddings\":8192}}", NULL);
    assert_true(c.rope_llama3);
    patch_fails("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}}", NULL, CIS2_E_FORMAT,
                "rope_scaling.low_freq_factor is missing");
    patch_fails(L3(",\"attention_factor\":1.0"), NULL, CIS2_E_UNSUPPORTED,
                "rope_scaling.attention_factor = 1.0 is not implemented");
    patch_fails("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":0.5,\"low_freq_factor\":1.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}", NULL, CIS2_E_FORMAT,
                "factor 0.5 must be >= 1");
    patch_fails("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":4.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}", NULL, CIS2_E_FORMAT,
                "must be below high_freq_factor");
    patch_fails("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192.5}}", NULL, CIS2_E_FORMAT,
                "original_max_position_embeddings must be an integer");
    patch_fails("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":\"8\",\"low_freq_factor\":1.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}", NULL, CIS2_E_FORMAT,
                "rope_scaling.factor must be a finite number");
    patch_fails("{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192},"
                "\"rope_parameters\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}", NULL, CIS2_E_UNSUPPORTED,
                "both ask for \"llama3\" scaling");
#undef L3
    /* The table (head_dim 16, theta 10000, original 64: bounds 64 and 16):
     * wavelengths 2pi*10000^(i/8) put i = 0 above (high frequency: the
     * §7.1 bits unchanged), i = 1, 2 in the medium band (strictly between
     * inv/8 and inv), i >= 3 below (inv / 8, exact: the exponent less 3). */
    static const char *cfg = "{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":1,"
        "\"num_attention_heads\":4,\"head_dim\":16,\"vocab_size\":300,\"rms_norm_eps\":1e-05,"
        "\"rope_theta\":10000.0,\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,"
        "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":64}}";
    cis2_error e = {0};
    assert_int_equal(cis2_config_parse(&c, cfg, strlen(cfg), "l3", &e), CIS2_OK);
    float plain[8], scaled[8];
    cis2_rope_inv_freq(c.rope_theta, 16, plain);
    cis2_config_inv_freq(&c, scaled);
    assert_int_equal(bits(scaled[0]), bits(plain[0]));
    for (int i = 1; i <= 2; i++) assert_true(scaled[i] < plain[i] && scaled[i] > plain[i] / 8.0f);
    for (int i = 3; i < 8; i++) assert_int_equal(bits(scaled[i]), bits(plain[i]) - (3u << 23));
    /* within 2 ulp of transformers' formula in f64 on the same §7.1 table */
    for (int i = 0; i < 8; i++) {
        double inv = plain[i], wl = 2 * 3.141592653589793 / inv, want = inv;
        if (wl > 64.0) want = inv / 8.0;
        else if (!(wl < 16.0)) {
            double sf = (64.0 / wl - 1.0) / 3.0;
            want = (1 - sf) * inv / 8.0 + sf * inv;
        }
        float w = (float)want;
        int64_t d = (int64_t)bits(scaled[i]) - (int64_t)bits(w);
        if (d < -2 || d > 2) fail_msg("inv_freq[%d] %a vs transformers' f64 %a", i, (double)scaled[i], want);
    }
}

/* model_type qwen3 (docs/models.md §M2): head_dim free of hidden/heads, q/k
 * norms, no biases (attention_bias true would give o_proj one: refused),
 * mlp_bias not read, sliding_window inert without use_sliding_window. */
static void qwen3_family(void **s)
{
    (void)s;
    static const char *const base = "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"intermediate_size\":128,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":24,"
        "\"vocab_size\":300,\"rms_norm_eps\":1e-06,\"rope_theta\":1000000,\"tie_word_embeddings\":true%s}";
    static const struct { const char *extra, *why; } C[] = {
        {"", NULL},
        {",\"attention_bias\":false,\"use_sliding_window\":false,\"sliding_window\":4096,\"max_window_layers\":2", NULL},
        {",\"mlp_bias\":true", NULL},
        {",\"attention_bias\":true", "a qwen3 model's o_proj bias is not implemented"},
        {",\"use_sliding_window\":true,\"sliding_window\":4096", "use_sliding_window is true"},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char t[1024];
        snprintf(t, sizeof t, base, C[i].extra);
        cis2_config c;
        cis2_error e = {0};
        int rc = cis2_config_parse(&c, t, strlen(t), "q3", &e);
        if (C[i].why ? rc != CIS2_E_UNSUPPORTED || !strstr(e.msg, C[i].why) : rc != CIS2_OK)
            fail_msg("case %zu (%s): rc=%d msg='%s'", i, C[i].extra, rc, e.msg);
        if (!rc) {
            assert_int_equal(c.head_dim, 24);
            assert_true(cis2_config_qk_norm(&c));
            assert_int_equal(cis2_config_qkv_bias(&c), 0);
            assert_int_equal(cis2_config_o_bias(&c), 0);
            /* embed + per layer (2 norms, q 96x64, k/v 48x64, o 64x96, MLP 3x128x64, q/k norm 2x24) + norm */
            assert_int_equal(cis2_config_param_count(&c),
                             300 * 64 + 2 * (2 * 64 + 96 * 64 + 2 * 48 * 64 + 64 * 96 + 3 * 128 * 64 + 48) + 64);
        }
    }
    /* without head_dim: Qwen3Config's default 128, not hidden/heads */
    static const char *const nohd = "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"intermediate_size\":128,"
        "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":300,\"rms_norm_eps\":1e-06}";
    cis2_config c0;
    cis2_error e0 = {0};
    assert_int_equal(cis2_config_parse(&c0, nohd, strlen(nohd), "q3", &e0), CIS2_OK);
    assert_int_equal(c0.head_dim, 128);
    /* head_dim x heads != hidden stays refused outside qwen3 (§2.5) */
    char t[1024];
    snprintf(t, sizeof t, base, "");
    memcpy(strstr(t, "qwen3"), "llama", 5);
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(cis2_config_parse(&c, t, strlen(t), "l", &e), CIS2_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "head_dim 24 x num_attention_heads 4 != hidden_size 64"));
}

/* model_type phi3 (docs/models.md §M6): the real Phi-3-mini config's
 * window (2047) and fused tensors; the window's bounds (§M5: an integer in
 * [1, 2^31], null for none); no attention biases. */
static void phi3_family(void **s)
{
    (void)s;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/Phi-3-mini-4k-instruct.json", shared());
    cis2_config c;
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        assert_int_equal(c.sliding_window, 2047);
        assert_int_equal(cis2_config_fused(&c), 1);
        assert_int_equal(c.head_dim, 96);
        assert_int_equal(cis2_config_param_count(&c), 3821079552ull); /* Phi-3-mini's published 3.8B */
    }
    static const char *const base = "{\"model_type\":\"phi3\",\"hidden_size\":64,\"intermediate_size\":128,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":300,"
        "\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,\"tie_word_embeddings\":false%s}";
    static const struct { const char *extra; int rc; const char *why; int64_t window; } C[] = {
        {"", CIS2_OK, NULL, 0},
        {",\"sliding_window\":null", CIS2_OK, NULL, 0},
        {",\"sliding_window\":2047", CIS2_OK, NULL, 2047},
        {",\"sliding_window\":2147483648", CIS2_OK, NULL, 2147483648},
        {",\"sliding_window\":0", CIS2_E_FORMAT, "sliding_window must be null or an integer in [1, 2^31]", 0},
        {",\"sliding_window\":-5", CIS2_E_FORMAT, "sliding_window must be null or an integer", 0},
        {",\"sliding_window\":2147483649", CIS2_E_FORMAT, "sliding_window must be null or an integer", 0},
        {",\"sliding_window\":64.0", CIS2_E_FORMAT, "sliding_window must be null or an integer", 0},
        {",\"sliding_window\":\"64\"", CIS2_E_FORMAT, "sliding_window must be null or an integer", 0},
        {",\"attention_bias\":true", CIS2_E_UNSUPPORTED, "a phi3 model has no attention biases", 0},
        {",\"mlp_bias\":true", CIS2_E_UNSUPPORTED, "mlp_bias is true", 0},
        {",\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1.0],\"long_factor\":[1.0]}",
         CIS2_E_UNSUPPORTED, "rope_scaling.type \"longrope\" is not implemented", 0},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char t[1024];
        snprintf(t, sizeof t, base, C[i].extra);
        memset(&e, 0, sizeof e);
        int rc = cis2_config_parse(&c, t, strlen(t), "phi", &e);
        if (rc != C[i].rc || (C[i].why && !strstr(e.msg, C[i].why)))
            fail_msg("case %zu (%s): rc=%d msg='%s'", i, C[i].extra, rc, e.msg);
        if (!rc) {
            assert_int_equal(c.sliding_window, C[i].window);
            assert_int_equal(cis2_config_fused(&c), 1);
            assert_int_equal(cis2_config_qkv_bias(&c), 0);
        }
    }
}

/* gemma3_text (docs/models.md §M7.1): the real gemma-3-1b-it config loads
 * with its layer pattern (every 6th layer global), window 512, both RoPE
 * bases, query_pre_attn_scalar, the tied head and Gemma3TextConfig's
 * defaults where a key is absent; every Gemma-only key is refused
 * elsewhere; malformed values are refused. */
static void gemma3_family(void **s)
{
    (void)s;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/gemma-3-1b-it.json", shared());
    cis2_config c;
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        assert_true(cis2_config_gemma3(&c) && cis2_config_qk_norm(&c) && !cis2_config_post_norm(&c));
        assert_int_equal(c.head_dim, 256);
        assert_int_equal(c.sliding_window, 512);
        assert_int_equal(c.query_pre_attn_scalar, 256);
        for (int l = 0; l < 26; l++)
            if (c.slides[l] != (l % 6 != 5)) fail_msg("gemma-3-1b-it layer %d: slides %d", l, c.slides[l]);
        assert_int_equal(bits(c.rope_theta), 0x49742400);       /* 1000000 */
        assert_int_equal(bits(c.rope_local_theta), 0x461C4000); /* 10000 */
        assert_int_equal(c.tie_word_embeddings, 1);             /* absent: Gemma3TextConfig's true */
        assert_int_equal(cis2_config_inv_freq_len(&c), 256);    /* two tables of 128 */
        {   /* docs/models.md §M7.9 (doc_reimpl.py computes it from the document) */
            float inv[256];
            uint8_t d[32];
            char hex[65];
            cis2_config_inv_freq(&c, inv);
            cis2_inv_freq_table_digest(inv, 256, d);
            for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
            assert_string_equal(hex, "f0ec788c12150af9965fc9b2bf12bdd7686cddea9e1f8f3f2e182ed427f92fed");
        }
        /* 26 layers of 4*1152 norm + (1024+256+256)*1152 + 1152*1024 attention + 3*1152*6912 MLP + 2*256 q/k
         * norm weights, the tied embedding 262144*1152, the final norm 1152: gemma-3-1b's 999,885,952 */
        assert_true(cis2_config_param_count(&c) == 999885952ull);
    }
    static const char *const base = "{\"model_type\":\"gemma3_text\",\"hidden_size\":64,\"intermediate_size\":128,"
        "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
        "\"vocab_size\":300%s}";
    static const struct { const char *extra; int rc; const char *why; const char *slides; } C[] = {
        /* Gemma3TextConfig's defaults: pattern 6 (layers 0-3 all slide), window 4096, eps 1e-6 */
        {"", CIS2_OK, NULL, "1111"},
        {",\"sliding_window_pattern\":2", CIS2_OK, NULL, "1010"},
        {",\"sliding_window_pattern\":1", CIS2_OK, NULL, "0000"},
        {",\"layer_types\":[\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"full_attention\"]",
         CIS2_OK, NULL, "0110"},
        {",\"sliding_window_pattern\":2,\"layer_types\":[\"sliding_attention\",\"full_attention\","
         "\"sliding_attention\",\"full_attention\"]", CIS2_OK, NULL, "1010"},
        {",\"sliding_window_pattern\":3,\"layer_types\":[\"sliding_attention\",\"full_attention\","
         "\"sliding_attention\",\"full_attention\"]", CIS2_E_UNSUPPORTED,
         "layer_types[1] and sliding_window_pattern 3 disagree", NULL},
        {",\"layer_types\":[\"chunked_attention\",\"full_attention\",\"full_attention\",\"full_attention\"]",
         CIS2_E_UNSUPPORTED, "layer_types[0] \"chunked_attention\" is not implemented", NULL},
        {",\"sliding_window_pattern\":0", CIS2_E_FORMAT, "sliding_window_pattern must be a positive integer", NULL},
        {",\"sliding_window\":null", CIS2_E_FORMAT, "sliding layers need a window", NULL},
        {",\"sliding_window\":0", CIS2_E_FORMAT, "sliding_window must be an integer in [1, 2^31]", NULL},
        {",\"query_pre_attn_scalar\":0", CIS2_E_FORMAT, "query_pre_attn_scalar must be an integer", NULL},
        {",\"query_pre_attn_scalar\":24.5", CIS2_E_FORMAT, "query_pre_attn_scalar must be an integer", NULL},
        {",\"query_pre_attn_scalar\":24.0", CIS2_OK, NULL, "1111"},
        {",\"rope_local_base_freq\":-1", CIS2_E_FORMAT, "rope_local_base_freq must be finite and > 0", NULL},
        {",\"hidden_activation\":\"gelu\"", CIS2_E_UNSUPPORTED, "hidden_activation 'gelu' not supported", NULL},
        {",\"hidden_act\":\"silu\"", CIS2_E_UNSUPPORTED, "hidden_act 'silu' not supported", NULL},
        {",\"hidden_act\":\"gelu_pytorch_tanh\"", CIS2_OK, NULL, "1111"},
        {",\"attention_bias\":true", CIS2_E_UNSUPPORTED, "a gemma3_text model has no attention biases", NULL},
        {",\"final_logit_softcapping\":30.0", CIS2_E_UNSUPPORTED, "final_logit_softcapping = 30.0", NULL},
        {",\"attn_logit_softcapping\":50.0", CIS2_E_UNSUPPORTED, "attn_logit_softcapping = 50.0", NULL},
        {",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0}", CIS2_E_UNSUPPORTED,
         "rope_scaling.rope_type \"linear\" is not implemented", NULL},
        {",\"use_bidirectional_attention\":true", CIS2_E_UNSUPPORTED, "use_bidirectional_attention", NULL},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char t[1024];
        snprintf(t, sizeof t, base, C[i].extra);
        memset(&e, 0, sizeof e);
        int rc = cis2_config_parse(&c, t, strlen(t), "gemma", &e);
        if (rc != C[i].rc || (C[i].why && !strstr(e.msg, C[i].why)))
            fail_msg("case %zu (%s): rc=%d msg='%s'", i, C[i].extra, rc, e.msg);
        if (rc) continue;
        for (int l = 0; l < 4; l++)
            if (c.slides[l] != C[i].slides[l] - '0') fail_msg("case %zu: layer %d slides %d", i, l, c.slides[l]);
        assert_int_equal(c.sliding_window, 4096);
        assert_int_equal(c.query_pre_attn_scalar, 24 * (i == 12) + 256 * (i != 12));
        assert_int_equal(bits(c.rms_norm_eps), bits(1e-6f));
        assert_int_equal(bits(c.rope_theta), 0x49742400);
        assert_int_equal(c.tie_word_embeddings, 1);
        assert_int_equal(c.max_position_embeddings, 131072);
    }
    /* Gemma's keys in other families: refused, not ignored */
    patch_fails("{\"query_pre_attn_scalar\":64}", NULL, CIS2_E_UNSUPPORTED,
                "query_pre_attn_scalar is not implemented for model_type llama");
    patch_fails("{\"rope_local_base_freq\":10000}", NULL, CIS2_E_UNSUPPORTED,
                "rope_local_base_freq is not implemented for model_type llama");
    patch_fails("{\"sliding_window_pattern\":6}", NULL, CIS2_E_UNSUPPORTED, "sliding_window_pattern is not implemented");
    patch_fails("{\"hidden_activation\":\"gelu_pytorch_tanh\"}", NULL, CIS2_E_UNSUPPORTED,
                "hidden_activation 'gelu_pytorch_tanh' not supported");
    patch_ok(&c, "{\"hidden_activation\":\"silu\",\"query_pre_attn_scalar\":null,\"rope_local_base_freq\":null,"
                 "\"sliding_window_pattern\":null}", NULL); /* null is absent */
    patch_fails("{\"model_type\":\"mistral\",\"layer_types\":[\"sliding_attention\"]}", NULL, CIS2_E_FORMAT,
                "layer_types must be a list");
    patch_ok(&c, "{\"model_type\":\"qwen3\"}", NULL);
    assert_false(cis2_config_gemma3(&c));
    assert_int_equal(cis2_config_inv_freq_len(&c), (size_t)c.head_dim / 2);
}

/* model_type mistral is Llama's arithmetic, with a sliding
 * window wherever sliding_window is set (docs/models.md §M5: Mistral's
 * modeling code has no use_sliding_window), and has no biases at all. */
static void mistral_family(void **s)
{
    (void)s;
    static const char *const base = "{\"model_type\":\"mistral\",\"hidden_size\":64,\"intermediate_size\":128,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":300,"
        "\"rms_norm_eps\":1e-05,\"rope_theta\":1000000.0,\"tie_word_embeddings\":false%s}";
    static const struct { const char *extra, *why; } C[] = {
        {"", NULL},
        {",\"sliding_window\":null", NULL},
        {",\"sliding_window\":4096", NULL},
        {",\"sliding_window\":4096,\"use_sliding_window\":false", NULL},
        {",\"sliding_window\":1,\"use_sliding_window\":true", NULL},
        {",\"attention_bias\":true", "a mistral model has no attention biases"},
        {",\"mlp_bias\":true", "mlp_bias is true"},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char t[1024];
        snprintf(t, sizeof t, base, C[i].extra);
        cis2_config c;
        cis2_error e = {0};
        int rc = cis2_config_parse(&c, t, strlen(t), "m", &e);
        if (C[i].why ? rc != CIS2_E_UNSUPPORTED || !strstr(e.msg, C[i].why) : rc != CIS2_OK)
            fail_msg("case %zu (%s): rc=%d msg='%s'", i, C[i].extra, rc, e.msg);
        if (!rc) {
            assert_string_equal(c.model_type, "mistral");
            assert_int_equal(c.sliding_window, strstr(C[i].extra, "4096") ? 4096 : strstr(C[i].extra, ":1,") ? 1 : 0);
            assert_int_equal(cis2_config_fused(&c), 0);
            assert_int_equal(cis2_config_qkv_bias(&c), 0);
            assert_int_equal(cis2_config_o_bias(&c), 0);
        }
    }
}

/* Family semantics (docs/inputs.md "Which tensors each family has"): which bias tensors the config calls for. */
static void family_biases(void **s)
{
    (void)s;
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(parse_mod(&c, &e, NULL, NULL), CIS2_OK); /* llama, attention_bias absent */
    assert_false(c.attention_bias);
    assert_false(cis2_config_qkv_bias(&c));
    assert_false(cis2_config_o_bias(&c));
    assert_int_equal(parse_mod(&c, &e, "attention_bias", "true"), CIS2_OK); /* llama: q/k/v and o_proj biases */
    assert_true(c.attention_bias);
    assert_true(cis2_config_qkv_bias(&c));
    assert_true(cis2_config_o_bias(&c));
    assert_int_equal(parse_mod(&c, &e, "attention_bias", "false"), CIS2_OK);
    assert_false(cis2_config_qkv_bias(&c));
    expect_mod_fails("attention_bias", "1", CIS2_E_FORMAT, "attention_bias must be true or false");
    expect_mod_fails("mlp_bias", "true", CIS2_E_UNSUPPORTED, "mlp_bias is true");
    expect_mod_fails("mlp_bias", "\"no\"", CIS2_E_FORMAT, "mlp_bias must be true or false");
    /* qwen2: q/k/v biases always, whatever attention_bias says; mlp_bias is not read by its model */
    const char *q = "{\"model_type\":\"qwen2\",\"hidden_size\":64,\"intermediate_size\":160,"
                    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":512,\"rms_norm_eps\":1e-06,"
                    "\"attention_bias\":false,\"mlp_bias\":true}";
    assert_int_equal(cis2_config_parse(&c, q, strlen(q), "qwen", &e), CIS2_OK);
    assert_true(cis2_config_qkv_bias(&c));
    assert_false(cis2_config_o_bias(&c));
}

/* Memory bound (docs/inputs.md "Memory"): 1M empty objects in 3 MB would cost
 * jansson ~250 MB; refused by the pre-scan before parsing. */
static void json_cost_bound(void **s)
{
    (void)s;
    size_t n = 1000000;
    char *b = malloc(3 * n + 2);
    size_t k = 0;
    b[k++] = '[';
    for (size_t i = 0; i < n; i++) { if (i) b[k++] = ','; b[k++] = '{'; b[k++] = '}'; }
    b[k++] = ']';
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(cis2_config_parse(&c, b, k, "cost", &e), CIS2_E_FORMAT);
    if (!strstr(e.msg, "would take about") || !strstr(e.msg, "1000000 objects")) fail_msg("msg: %s", e.msg);
    free(b);
}

static void too_many_params(void **s)
{
    (void)s;
    /* every field within its own limit, but 65536*2^20*3*1024 parameters */
    expect_raw_fails("{\"hidden_size\":65536,\"intermediate_size\":1048576,\"num_hidden_layers\":1024,"
                     "\"num_attention_heads\":512,\"vocab_size\":4194304,\"rms_norm_eps\":1e-05}",
                     CIS2_E_FORMAT, "parameters exceed the limit");
}

static void bad_json(void **s)
{
    (void)s;
    expect_raw_fails("{\"hidden_size\":", CIS2_E_FORMAT, "invalid JSON");
    expect_raw_fails("[1]", CIS2_E_FORMAT, "not a JSON object");
    expect_raw_fails("{\"hidden_size\":576,\"hidden_size\":576}", CIS2_E_FORMAT, "duplicate");
    expect_raw_fails("", CIS2_E_FORMAT, "invalid JSON");
}

/* qwen3_5 (docs/models.md §M10.1): the real Qwen3.5-0.8B config (the
 * wrapper, its text_config) reads as the values written down here from the
 * file and Qwen3_5TextConfig; a small wrapper with one change at a time is
 * read or refused as §M10.1 says; the hybrid's and the wrapper's keys are
 * refused in other families. */
static void qwen3_5_family(void **s)
{
    (void)s;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/Qwen3.5-0.8B.json", shared());
    cis2_config c;
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        assert_string_equal(c.family->model_type, "qwen3_5");
        assert_int_equal(c.hidden_size, 1024);
        assert_int_equal(c.head_dim, 256);
        assert_int_equal(c.rotary_dim, 64);                    /* 256 x 0.25 */
        assert_int_equal(c.lin_k_heads, 16);
        assert_int_equal(c.lin_v_heads, 16);
        assert_int_equal(c.lin_k_dim, 128);
        assert_int_equal(c.lin_v_dim, 128);
        assert_int_equal(c.conv_kernel, 4);
        assert_int_equal(c.tie_word_embeddings, 1);
        assert_int_equal(bits(c.rope_theta), 0x4B189680);     /* 1e7 */
        assert_int_equal(bits(c.rms_norm_eps), 0x358637BD);   /* 1e-6 */
        assert_int_equal(c.n_eos, 1);
        assert_int_equal(c.eos_ids[0], 248044);
        for (int l = 0; l < 24; l++)
            if (c.linear[l] != (l % 4 != 3)) fail_msg("Qwen3.5-0.8B layer %d: linear %d", l, c.linear[l]);
        assert_int_equal(cis2_config_inv_freq_len(&c), 32);
        {   /* docs/models.md §M10.9 (doc_reimpl.py's rope_inv_freq over rd 64 gives it) */
            float inv[32];
            uint8_t d[32];
            char hex[65];
            cis2_config_inv_freq(&c, inv);
            cis2_inv_freq_table_digest(inv, 32, d);
            for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
            assert_string_equal(hex, "8691defc0e37b183d9a248b31a1e679d3c2c41ec30f3e4cfb3efb12b67059333");
        }
        /* per layer 2 x 1024 norms and the MLP 3 x 1024 x 3584; 18 linear layers of in_proj_qkv 6144 x 1024,
         * in_proj_z 2048 x 1024, in_proj_b and _a 16 x 1024 each, conv 6144 x 4, A_log and dt_bias 16 each,
         * the gated norm 128 and out_proj 1024 x 2048; 6 full layers of q_proj 4096 x 1024, k and v 512 x 1024
         * each, o_proj 1024 x 2048, q/k norms 256 each; the tied embedding 248320 x 1024 and the final norm */
        uint64_t lin = 6144ull * 1024 + 2048ull * 1024 + 2 * 16 * 1024 + 6144 * 4 + 2 * 16 + 128 + 1024ull * 2048;
        uint64_t full = 4096ull * 1024 + 2 * 512ull * 1024 + 1024ull * 2048 + 2 * 256;
        uint64_t want = 24 * (2 * 1024 + 3 * 1024ull * 3584) + 18 * lin + 6 * full + 248320ull * 1024 + 1024;
        assert_true(cis2_config_param_count(&c) == want);
    }
    /* a small wrapper, one change at a time */
    static const char *const base = "{\"model_type\":\"qwen3_5\",\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],"
        "\"vision_config\":{\"depth\":2},\"image_token_id\":9%s,\"text_config\":{"
        "\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
        "\"num_key_value_heads\":2,\"head_dim\":32,\"vocab_size\":300%s}}";
    static const struct { const char *top, *text; int rc; const char *why; const char *lin; int rd; } C[] = {
        /* Qwen3_5TextConfig's defaults: interval 4, factor 0.25, linear 16/32 heads of 128, kernel 4 */
        {"", "", CIS2_OK, NULL, "1110", 8},
        {"", ",\"full_attention_interval\":2", CIS2_OK, NULL, "1010", 8},
        {"", ",\"layer_types\":[\"full_attention\",\"linear_attention\",\"mamba\",\"attention\"]", CIS2_OK, NULL,
         "0110", 8},
        {"", ",\"layer_types\":[\"linear_attention\",\"full_attention\",\"linear_attention\",\"full_attention\"],"
         "\"full_attention_interval\":2", CIS2_OK, NULL, "1010", 8},
        {"", ",\"layer_types\":[\"linear_attention\",\"linear_attention\",\"linear_attention\",\"linear_attention\"],"
         "\"full_attention_interval\":4", CIS2_E_UNSUPPORTED, "layer_types[3] and full_attention_interval 4 disagree",
         NULL, 0},
        {"", ",\"layer_types\":[\"sliding_attention\",\"full_attention\",\"full_attention\",\"full_attention\"]",
         CIS2_E_UNSUPPORTED, "layer_types[0] \"sliding_attention\" is not implemented", NULL, 0},
        {"", ",\"partial_rotary_factor\":0.5", CIS2_OK, NULL, "1110", 16},
        {"", ",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1e7,\"partial_rotary_factor\":1.0,"
         "\"mrope_section\":[5,5,6],\"mrope_interleaved\":true}", CIS2_OK, NULL, "1110", 32},
        {"", ",\"partial_rotary_factor\":0.5,\"rope_parameters\":{\"partial_rotary_factor\":0.25}", CIS2_E_UNSUPPORTED,
         "partial_rotary_factor is given twice", NULL, 0},
        {"", ",\"partial_rotary_factor\":0.03", CIS2_E_FORMAT, "gives 0 rotated dimensions", NULL, 0},
        {"", ",\"partial_rotary_factor\":0.1", CIS2_E_FORMAT, "gives 3 rotated dimensions", NULL, 0},
        {"", ",\"rope_parameters\":{\"mrope_section\":[1,2]}", CIS2_E_FORMAT, "mrope_section must be a list of three",
         NULL, 0},
        {"", ",\"rope_parameters\":{\"rope_type\":\"llama3\",\"factor\":8}", CIS2_E_UNSUPPORTED,
         "\"llama3\" is not implemented for model_type qwen3_5", NULL, 0},
        {"", ",\"linear_num_value_heads\":24", CIS2_E_FORMAT, "linear_num_value_heads 24 is not a multiple", NULL, 0},
        {"", ",\"linear_key_head_dim\":2048", CIS2_E_FORMAT, "linear_key_head_dim = 2048 exceeds the limit 1024", NULL,
         0},
        {"", ",\"linear_num_value_heads\":4096,\"linear_value_head_dim\":1024", CIS2_E_FORMAT,
         "recurrent state of 549466112 floats exceeds the limit", NULL, 0},
        {"", ",\"attn_output_gate\":false", CIS2_E_UNSUPPORTED, "attn_output_gate false is not implemented", NULL, 0},
        {"", ",\"attn_output_gate\":true,\"mamba_ssm_dtype\":\"float32\",\"mtp_num_hidden_layers\":1,"
         "\"mtp_use_dedicated_embeddings\":false,\"mlp_only_layers\":[]", CIS2_OK, NULL, "1110", 8},
        {"", ",\"mamba_ssm_dtype\":\"bfloat16\"", CIS2_E_UNSUPPORTED, "mamba_ssm_dtype must be \"float32\"", NULL, 0},
        {"", ",\"mlp_only_layers\":[1]", CIS2_E_UNSUPPORTED, "mlp_only_layers is not implemented", NULL, 0},
        {"", ",\"attention_bias\":true", CIS2_E_UNSUPPORTED, "attention biases are not implemented", NULL, 0},
        {"", ",\"model_type\":\"qwen3_5_moe_text\"", CIS2_E_UNSUPPORTED, "text_config.model_type must be", NULL, 0},
        {"", ",\"model_type\":\"qwen3_5_text\"", CIS2_OK, NULL, "1110", 8},
        {"", ",\"vision_config\":{}", CIS2_E_UNSUPPORTED, "text_config.vision_config is not implemented", NULL, 0},
        {"", ",\"no_such_key\":1", CIS2_E_UNSUPPORTED, "key 'no_such_key' is not known", NULL, 0},
        {",\"no_such_key\":1", "", CIS2_E_UNSUPPORTED, "key 'no_such_key' of the qwen3_5 wrapper is not known", NULL,
         0},
        {",\"hidden_size\":64", "", CIS2_E_UNSUPPORTED, "key 'hidden_size' of the qwen3_5 wrapper", NULL, 0},
        {",\"tie_word_embeddings\":true", ",\"tie_word_embeddings\":false", CIS2_E_UNSUPPORTED,
         "tie_word_embeddings differs between the wrapper and text_config", NULL, 0},
        {",\"tie_word_embeddings\":true", "", CIS2_OK, NULL, "1110", 8},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char t[2048];
        snprintf(t, sizeof t, base, C[i].top, C[i].text);
        memset(&e, 0, sizeof e);
        int rc = cis2_config_parse(&c, t, strlen(t), "q35", &e);
        if (rc != C[i].rc || (C[i].why && !strstr(e.msg, C[i].why)))
            fail_msg("case %zu (%s | %s): rc=%d msg='%s'", i, C[i].top, C[i].text, rc, e.msg);
        if (rc) continue;
        for (int l = 0; l < 4; l++)
            if (c.linear[l] != C[i].lin[l] - '0') fail_msg("case %zu: layer %d linear %d", i, l, c.linear[l]);
        assert_int_equal(c.rotary_dim, C[i].rd);
        assert_int_equal(c.tie_word_embeddings, i == sizeof C / sizeof C[0] - 1); /* the wrapper's; default false */
        assert_int_equal(c.lin_k_heads, 16);
        assert_int_equal(c.lin_v_heads, 32);
        assert_int_equal(c.lin_k_dim, 128);
        assert_int_equal(c.conv_kernel, 4);
        assert_int_equal(c.max_position_embeddings, 32768);
    }
    /* the hybrid's and the wrapper's keys elsewhere: refused, not ignored */
    patch_fails("{\"linear_num_key_heads\":2}", NULL, CIS2_E_UNSUPPORTED,
                "linear_num_key_heads is not implemented for model_type llama");
    patch_fails("{\"attn_output_gate\":true}", NULL, CIS2_E_UNSUPPORTED, "attn_output_gate is not implemented");
    patch_fails("{\"text_config\":{}}", NULL, CIS2_E_UNSUPPORTED, "text_config is not implemented for model_type llama");
    patch_fails("{\"vision_config\":{}}", NULL, CIS2_E_UNSUPPORTED, "vision_config is not implemented");
    patch_fails("{\"partial_rotary_factor\":0.5}", NULL, CIS2_E_UNSUPPORTED, "partial_rotary_factor = 0.5");
    patch_fails("{\"rope_parameters\":{\"rope_type\":\"default\",\"mrope_section\":[1,1,2]}}", NULL,
                CIS2_E_UNSUPPORTED, "rope_parameters.mrope_section");
    /* a qwen3_5 config without its wrapper */
    expect_raw_fails("{\"model_type\":\"qwen3_5\",\"hidden_size\":64}", CIS2_E_UNSUPPORTED,
                     "key 'hidden_size' of the qwen3_5 wrapper");
    expect_raw_fails("{\"model_type\":\"qwen3_5\"}", CIS2_E_FORMAT, "needs the object text_config");
}

/* qwen3_5_moe (docs/models.md §M10.10): the real Qwen3.5-35B-A3B config
 * reads as written down here from the file and Qwen3_5MoeTextConfig; its
 * rules one change at a time; the shared expert's key elsewhere refused. */
static void qwen3_5_moe_family(void **s)
{
    (void)s;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/Qwen3.5-35B-A3B.json", shared());
    cis2_config c;
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        assert_string_equal(c.family->model_type, "qwen3_5_moe");
        assert_int_equal(c.num_experts, 256);
        assert_int_equal(c.num_experts_per_tok, 8);
        assert_int_equal(c.moe_intermediate_size, 512);
        assert_int_equal(c.shared_inter, 512);
        assert_int_equal(c.norm_topk_prob, 1);
        assert_int_equal(c.intermediate_size, 0);
        assert_int_equal(c.tie_word_embeddings, 0);
        assert_int_equal(c.rotary_dim, 64);
        assert_int_equal(c.lin_v_heads, 32);
        for (int l = 0; l < 40; l++)
            if (!c.sparse[l] || c.linear[l] != (l % 4 != 3)) fail_msg("Qwen3.5-35B-A3B layer %d", l);
        /* per layer 2 norms, the router 256 x 2048, the experts 256 x 1024 x 2048 and 256 x 2048 x 512, the
         * shared expert 2 x 512 x 2048 + 2048 x 512 and its gate 2048; 30 linear layers (C 8192, VD 4096), 10 full
         * (q_proj 8192 x 2048, k/v 512 x 2048, o_proj 2048 x 4096, q/k norms 256); embedding and lm_head */
        uint64_t moe = 256ull * 2048 + 256ull * 1024 * 2048 + 256ull * 2048 * 512 + 3 * 512ull * 2048 + 2048;
        uint64_t lin = 8192ull * 2048 + 4096ull * 2048 + 2 * 32 * 2048 + 8192 * 4 + 2 * 32 + 128 + 2048ull * 4096;
        uint64_t full = 8192ull * 2048 + 2 * 512ull * 2048 + 2048ull * 4096 + 2 * 256;
        uint64_t want = 40 * (2 * 2048 + moe) + 30 * lin + 10 * full + 2 * 248320ull * 2048 + 2048;
        assert_true(cis2_config_param_count(&c) == want);
    }
    static const char *const base = "{\"model_type\":\"qwen3_5_moe\",\"text_config\":{\"hidden_size\":64,"
        "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,"
        "\"vocab_size\":300%s}}";
    static const struct { const char *text; int rc; const char *why; } C[] = {
        {"", CIS2_OK, NULL}, /* Qwen3_5MoeTextConfig's defaults: 256 experts, 8 a token, 512 wide, shared 512 */
        {",\"norm_topk_prob\":true,\"decoder_sparse_step\":1,\"mlp_only_layers\":[]", CIS2_OK, NULL},
        {",\"intermediate_size\":96", CIS2_E_UNSUPPORTED, "intermediate_size is not read for model_type qwen3_5_moe"},
        {",\"norm_topk_prob\":false", CIS2_E_UNSUPPORTED, "norm_topk_prob must be true"},
        {",\"decoder_sparse_step\":2", CIS2_E_UNSUPPORTED, "decoder_sparse_step must be 1"},
        {",\"mlp_only_layers\":[1]", CIS2_E_UNSUPPORTED, "mlp_only_layers must be []"},
        {",\"num_experts_per_tok\":300", CIS2_E_FORMAT, "num_experts_per_tok 300 exceeds num_experts 256"},
        {",\"shared_expert_intermediate_size\":0", CIS2_E_FORMAT, "shared_expert_intermediate_size must be a positive"},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char t[1024];
        snprintf(t, sizeof t, base, C[i].text);
        memset(&e, 0, sizeof e);
        int rc = cis2_config_parse(&c, t, strlen(t), "q35moe", &e);
        if (rc != C[i].rc || (C[i].why && !strstr(e.msg, C[i].why)))
            fail_msg("case %zu (%s): rc=%d msg='%s'", i, C[i].text, rc, e.msg);
        if (rc) continue;
        assert_int_equal(c.num_experts, 256);
        assert_int_equal(c.num_experts_per_tok, 8);
        assert_int_equal(c.moe_intermediate_size, 512);
        assert_int_equal(c.shared_inter, 512);
        for (int l = 0; l < 4; l++) assert_int_equal(c.sparse[l], 1);
    }
    patch_fails("{\"shared_expert_intermediate_size\":64}", NULL, CIS2_E_UNSUPPORTED,
                "shared_expert_intermediate_size is not implemented for model_type llama");
}

/* qwen3_next (docs/models.md §M10.11): the real Qwen3-Next-80B-A3B config
 * reads as written down here from the file; the defaults of
 * Qwen3NextConfig; norm_topk_prob is read. */
static void qwen3_next_family(void **s)
{
    (void)s;
    char p[1024];
    snprintf(p, sizeof p, "%s/models/families/Qwen3-Next-80B-A3B.json", shared());
    cis2_config c;
    cis2_error e = {0};
    if (access(p, R_OK) == 0) {
        if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
        assert_string_equal(c.family->model_type, "qwen3_next");
        assert_int_equal(c.num_experts, 512);
        assert_int_equal(c.num_experts_per_tok, 10);
        assert_int_equal(c.shared_inter, 512);
        assert_int_equal(c.norm_topk_prob, 1);
        assert_int_equal(c.rotary_dim, 64);
        assert_int_equal(bits(c.rope_theta), 0x4A989680); /* 5e6 */
        for (int l = 0; l < 48; l++)
            if (!c.sparse[l] || c.linear[l] != (l % 4 != 3)) fail_msg("Qwen3-Next-80B-A3B layer %d", l);
        /* per layer 2 norms, the router 512 x 2048, 512 experts of 3 x 512 x 2048, the shared expert 3 x 512 x
         * 2048 and its gate 2048; 36 linear layers (in_proj_qkvz 12288 x 2048, in_proj_ba 64 x 2048, conv 8192 x 4,
         * A_log, dt_bias 32 each, norm 128, out_proj 2048 x 4096); 12 full (q_proj 8192 x 2048, k/v 512 x 2048,
         * o_proj 2048 x 4096, q/k norms 256); the embedding and lm_head 151936 x 2048, the final norm */
        uint64_t moe = 512ull * 2048 + 512ull * 3 * 512 * 2048 + 3 * 512ull * 2048 + 2048;
        uint64_t lin = 12288ull * 2048 + 64 * 2048 + 8192 * 4 + 2 * 32 + 128 + 2048ull * 4096;
        uint64_t full = 8192ull * 2048 + 2 * 512ull * 2048 + 2048ull * 4096 + 2 * 256;
        uint64_t want = 48 * (2 * 2048 + moe) + 36 * lin + 12 * full + 2 * 151936ull * 2048 + 2048;
        assert_true(cis2_config_param_count(&c) == want);
    }
    const char *t = "{\"model_type\":\"qwen3_next\",\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":4,"
                    "\"num_attention_heads\":4,\"vocab_size\":300,\"mlp_only_layers\":[0],\"norm_topk_prob\":false}";
    if (cis2_config_parse(&c, t, strlen(t), "q3next", &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.num_experts, 512);
    assert_int_equal(c.num_experts_per_tok, 10);
    assert_int_equal(c.moe_intermediate_size, 512);
    assert_int_equal(c.shared_inter, 512);
    assert_int_equal(c.norm_topk_prob, 0);
    assert_int_equal(c.head_dim, 256);
    assert_int_equal(c.rotary_dim, 64);
    assert_true(!c.sparse[0] && c.sparse[1] && c.sparse[2] && c.sparse[3]);
    assert_true(c.linear[0] && c.linear[1] && c.linear[2] && !c.linear[3]);
    t = "{\"model_type\":\"qwen3_next\",\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":4,"
        "\"num_attention_heads\":4,\"vocab_size\":300,\"rope_parameters\":{\"mrope_section\":[1,1,2]}}";
    expect_raw_fails(t, CIS2_E_UNSUPPORTED, "rope_parameters.mrope_section");
}

/* ---- synth configs read back (values written down here, not read from synth.c) ---- */

static void check_synth_cfg(const char *shape, int64_t H, int64_t I, int64_t L, int64_t nh, int64_t kv, int64_t V,
                            int64_t hd, int64_t maxpos, uint32_t eps_bits, uint32_t theta_bits, int tied,
                            const char *mt)
{
    char dir[] = "/tmp/cis2_test_cfg_XXXXXX";
    assert_non_null(mkdtemp(dir));
    cis2_error e = {0};
    assert_int_equal(cis2_synth_write(shape, 1, dir, NULL, &e), CIS2_OK);
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", dir);
    cis2_config c;
    if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.hidden_size, H);
    assert_int_equal(c.intermediate_size, I);
    assert_int_equal(c.num_hidden_layers, L);
    assert_int_equal(c.num_attention_heads, nh);
    assert_int_equal(c.num_key_value_heads, kv);
    assert_int_equal(c.vocab_size, V);
    assert_int_equal(c.head_dim, hd);
    assert_int_equal(c.max_position_embeddings, maxpos);
    assert_int_equal(bits(c.rms_norm_eps), eps_bits);
    assert_int_equal(bits(c.rope_theta), theta_bits);
    assert_int_equal(c.tie_word_embeddings, tied);
    assert_string_equal(c.model_type, mt);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void synth_configs(void **s)
{
    (void)s;
    check_synth_cfg("tiny", 64, 160, 2, 4, 2, 512, 16, 256, 0x3727C5AC, 0x461C4000, 1, "llama");
    check_synth_cfg("tiny-qwen", 96, 224, 3, 6, 2, 640, 16, 512, 0x358637BD, 0x49742400, 0, "qwen2");
    check_synth_cfg("odd", 72, 200, 2, 3, 1, 300, 24, 128, 0x3727C5AC, 0x48F42400, 0, "llama");
}

/* ---- generation_config.json (genconfig.h; docs/sampling.md §S5.1) ---- */

/* BASE with eos_token_id = cfg_eos (JSON; NULL: absent), then gen merged:
 * rc, and the list in c. */
static int gen_merge(cis2_config *c, cis2_error *e, const char *cfg_eos, const char *gen)
{
    assert_int_equal(parse_mod(c, e, cfg_eos ? "eos_token_id" : NULL, cfg_eos), CIS2_OK);
    return cis2_genconfig_merge(c, gen, strlen(gen), "DIR/generation_config.json", e);
}

static void expect_eos(const char *cfg_eos, const char *gen, const uint32_t *want, size_t n)
{
    cis2_config c;
    cis2_error e = {0};
    if (gen_merge(&c, &e, cfg_eos, gen)) fail_msg("%s + %s: %s", cfg_eos ? cfg_eos : "-", gen, e.msg);
    if (c.n_eos != n) fail_msg("%s + %s: %zu ids, want %zu", cfg_eos ? cfg_eos : "-", gen, c.n_eos, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(c.eos_ids[i], want[i]);
}

static void expect_gen_fails(const char *cfg_eos, const char *gen, const char *substr)
{
    cis2_config c;
    cis2_error e = {0};
    int rc = gen_merge(&c, &e, cfg_eos, gen);
    if (rc != CIS2_E_FORMAT || !strstr(e.msg, "DIR/generation_config.json: ") || !strstr(e.msg, substr) ||
        strchr(e.msg, '\n'))
        fail_msg("%s: rc=%d msg='%s' (want '%s')", gen, rc, e.msg, substr);
}

static void genconfig_eos(void **s)
{
    (void)s;
    /* config.json's ids first, then the file's new ones in its order */
    expect_eos("2", "{\"eos_token_id\": [5, 2, 7, 5]}", (const uint32_t[]){2, 5, 7}, 3);
    expect_eos("[2, 2]", "{\"eos_token_id\": 2}", (const uint32_t[]){2, 2}, 2); /* config.json's list as written */
    expect_eos(NULL, "{\"eos_token_id\": [200002, 199999], \"do_sample\": true}", (const uint32_t[]){200002, 199999}, 2);
    expect_eos("0", "{\"eos_token_id\": 4294967295}", (const uint32_t[]){0, 4294967295u}, 2);
    /* no eos_token_id, null, []: config.json's alone; other keys are not read */
    expect_eos("1", "{}", (const uint32_t[]){1}, 1);
    expect_eos("1", "{\"eos_token_id\": null, \"temperature\": \"hot\", \"pad_token_id\": [1]}",
               (const uint32_t[]){1}, 1);
    expect_eos("1", "{\"eos_token_id\": []}", (const uint32_t[]){1}, 1);
    expect_eos(NULL, "{}", NULL, 0);
    /* malformed: one line naming the file */
    expect_gen_fails("1", "{\"eos", "invalid JSON");
    expect_gen_fails("1", "[1]", "not a JSON object");
    expect_gen_fails("1", "{\"eos_token_id\": 1, \"eos_token_id\": 2}", "invalid JSON"); /* duplicate key */
    static const char *const bad[] = {"\"1\"", "-1", "1.5", "true", "[true]", "[1, \"x\"]", "[[1]]",
                                      "4294967296", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char g[96];
        snprintf(g, sizeof g, "{\"eos_token_id\": %s}", bad[i]);
        expect_gen_fails("1", g, "eos_token_id must be an id or a list of at most 64 ids");
    }
    char big[1024], cfg60[512];
    int k = snprintf(big, sizeof big, "{\"eos_token_id\": [");
    for (int i = 0; i < 65; i++) k += snprintf(big + k, sizeof big - (size_t)k, "%s%d", i ? "," : "", i);
    snprintf(big + k, sizeof big - (size_t)k, "]}");
    expect_gen_fails(NULL, big, "at most 64 ids");
    k = snprintf(cfg60, sizeof cfg60, "[");
    for (int i = 0; i < 60; i++) k += snprintf(cfg60 + k, sizeof cfg60 - (size_t)k, "%s%d", i ? "," : "", i);
    snprintf(cfg60 + k, sizeof cfg60 - (size_t)k, "]");
    expect_gen_fails(cfg60, "{\"eos_token_id\": [0, 100, 101, 102, 103, 104]}", "more than 64 eos ids");
    cis2_config c;
    cis2_error e = {0};
    assert_int_equal(gen_merge(&c, &e, cfg60, "{\"eos_token_id\": [0, 100, 101, 102, 103]}"), CIS2_OK);
    assert_int_equal(c.n_eos, 64);
    assert_int_equal(c.eos_ids[63], 103);
    /* config.json's own value malformed: the file is still checked, nothing added, stop-at-eos stays refused */
    assert_int_equal(gen_merge(&c, &e, "\"x\"", "{\"eos_token_id\": [3]}"), CIS2_OK);
    assert_true(c.eos_malformed && c.n_eos == 0);
    expect_gen_fails("\"x\"", "{\"eos_token_id\": \"y\"}", "eos_token_id must be");
}

/* The real gpt-oss-20b files: config.json's 200002, then the generation
 * config's new 199999 (<|return|>, <|endoftext|>). */
static void genconfig_gpt_oss(void **s)
{
    (void)s;
    char p[1024], *buf;
    size_t len;
    cis2_config c;
    cis2_error e = {0};
    snprintf(p, sizeof p, "%s/models/families/gpt-oss-20b.json", shared());
    if (access(p, R_OK) != 0) skip();
    if (cis2_config_load(&c, p, &e)) fail_msg("%s", e.msg);
    assert_true(c.n_eos == 1 && c.eos_ids[0] == 200002);
    snprintf(p, sizeof p, "%s/models/families/gpt-oss-20b.generation_config.json", shared());
    if (cis2_read_file(p, CIS2_CFG_MAX_FILE, "a generation_config.json", &buf, &len, &e)) skip();
    if (cis2_genconfig_merge(&c, buf, len, p, &e)) fail_msg("%s", e.msg);
    free(buf);
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_ids[0], 200002);
    assert_int_equal(c.eos_ids[1], 199999);
}

/* A key of a JSON text: NULL when absent (the root decref'ed by the caller) */
static json_t *key_of(json_t *root, const char *k) { return root ? json_object_get(root, k) : NULL; }

/* The shapes modelled on real checkpoints write the real config.json's
 * bos/eos/pad token ids (each present exactly when the real one has it,
 * equal to it); the test shapes write none.  Against $SHARED's files. */
static void synth_real_ids(void **s)
{
    (void)s;
    static const char *const keys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    static const char *const real[] = {"smollm2-135m", "smollm2-360m", "qwen2.5-0.5b"};
    int compared = 0;
    for (size_t i = 0; i < cis2_synth_shape_count(); i++) {
        const char *name = cis2_synth_shape_at(i)->name;
        size_t len = 0;
        char *text = cis2_synth_shape_config(name, &len);
        assert_non_null(text);
        json_error_t je;
        json_t *syn = json_loadb(text, len, 0, &je), *ref = NULL;
        assert_non_null(syn);
        for (size_t r = 0; r < 3; r++)
            if (!strcmp(real[r], name)) {
                char p[1024];
                snprintf(p, sizeof p, "%s/models/%s/config.json", shared(), name);
                if (access(p, R_OK) != 0) { json_decref(syn); free(text); skip(); }
                if (!(ref = json_load_file(p, 0, &je))) fail_msg("%s: %s", p, je.text);
            }
        for (size_t k = 0; k < 3; k++) {
            json_t *a = key_of(syn, keys[k]), *b = key_of(ref, keys[k]);
            if (!b) { if (a) fail_msg("%s: %s written, the real config.json has none", name, keys[k]); continue; }
            if (!a || !json_equal(a, b)) fail_msg("%s: %s differs from the real config.json's", name, keys[k]);
            compared++;
        }
        json_decref(syn);
        json_decref(ref);
        free(text);
    }
    assert_int_equal(compared, 6); /* bos and eos of the three; none has a pad id */
}

static void synth_shape_table(void **s)
{
    (void)s;
    /* The big shapes' architecture (the real configs of SmolLM2-135M, -360M and Qwen2.5-0.5B) */
    const cis2_synth_shape *a = cis2_synth_find_shape("smollm2-135m");
    assert_non_null(a);
    assert_true(a->hidden == 576 && a->inter == 1536 && a->layers == 30 && a->heads == 9 && a->kv_heads == 3 &&
                a->vocab == 49152 && a->max_pos == 8192 && a->tied && !a->qkv_bias);
    const cis2_synth_shape *b = cis2_synth_find_shape("smollm2-360m");
    assert_true(b->hidden == 960 && b->inter == 2560 && b->layers == 32 && b->heads == 15 && b->kv_heads == 5 &&
                b->vocab == 49152 && b->max_pos == 8192 && b->tied && !b->qkv_bias);
    const cis2_synth_shape *q = cis2_synth_find_shape("qwen2.5-0.5b");
    assert_true(q->hidden == 896 && q->inter == 4864 && q->layers == 24 && q->heads == 14 && q->kv_heads == 2 &&
                q->vocab == 151936 && q->max_pos == 32768 && !q->tied && q->qkv_bias);
    assert_null(cis2_synth_find_shape("nope"));
    /* each config text parses to its §2.3 cast (docs/arithmetic.md section 2) */
    const char *eps[] = {"1e-05", "1e-06"};
    const uint32_t eb[] = {0x3727C5AC, 0x358637BD};
    for (int i = 0; i < 2; i++) {
        cis2_config c;
        cis2_error e = {0};
        assert_int_equal(parse_mod(&c, &e, "rms_norm_eps", eps[i]), CIS2_OK);
        assert_int_equal(bits(c.rms_norm_eps), eb[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_smollm2_135m), cmocka_unit_test(synth_real_ids), cmocka_unit_test(genconfig_eos), cmocka_unit_test(genconfig_gpt_oss), cmocka_unit_test(real_smollm2_360m),
        cmocka_unit_test(real_qwen25_05b), cmocka_unit_test(load_missing_file),
        cmocka_unit_test(eps_cast), cmocka_unit_test(theta_spellings),
        cmocka_unit_test(defaults),
        cmocka_unit_test(missing_hidden), cmocka_unit_test(missing_inter),
        cmocka_unit_test(missing_layers), cmocka_unit_test(missing_heads),
        cmocka_unit_test(missing_vocab), cmocka_unit_test(missing_eps),
        cmocka_unit_test(unsup_rope_scaling), cmocka_unit_test(unsup_act),
        cmocka_unit_test(unsup_interleaved), cmocka_unit_test(unsup_sliding),
        cmocka_unit_test(unsup_model_type), cmocka_unit_test(unsup_mlp_bias),
        cmocka_unit_test(family_biases), cmocka_unit_test(json_cost_bound),
        cmocka_unit_test(unsup_mrope), cmocka_unit_test(unsup_head_dim_mismatch),
        cmocka_unit_test(size_float), cmocka_unit_test(size_string),
        cmocka_unit_test(size_negative), cmocka_unit_test(size_zero),
        cmocka_unit_test(size_bool), cmocka_unit_test(heads_not_multiple_of_kv),
        cmocka_unit_test(kv_more_than_heads), cmocka_unit_test(hidden_not_divisible),
        cmocka_unit_test(head_dim_odd), cmocka_unit_test(absurd_hidden),
        cmocka_unit_test(absurd_layers), cmocka_unit_test(absurd_vocab),
        cmocka_unit_test(absurd_max_pos), cmocka_unit_test(absurd_inter),
        cmocka_unit_test(absurd_int64), cmocka_unit_test(eps_zero),
        cmocka_unit_test(eps_negative), cmocka_unit_test(eps_string),
        cmocka_unit_test(eps_underflows_f32), cmocka_unit_test(eps_huge),
        cmocka_unit_test(theta_zero), cmocka_unit_test(theta_negative),
        cmocka_unit_test(theta_overflows_f32), cmocka_unit_test(theta_string),
        cmocka_unit_test(tie_not_bool), cmocka_unit_test(tp_zero),
        cmocka_unit_test(model_type_not_string), cmocka_unit_test(too_many_params),
        cmocka_unit_test(bad_json), cmocka_unit_test(synth_configs),
        cmocka_unit_test(rope_params_not_object), cmocka_unit_test(rope_params_theta_string),
        cmocka_unit_test(rope_params_theta_zero), cmocka_unit_test(layer_types_not_list),
        cmocka_unit_test(layer_types_short), cmocka_unit_test(unknown_key), cmocka_unit_test(unknown_key_null),
        cmocka_unit_test(rope_parameters_base), cmocka_unit_test(rope_types_refused),
        cmocka_unit_test(rope_members), cmocka_unit_test(layer_types), cmocka_unit_test(sliding_window),
        cmocka_unit_test(neutral_keys), cmocka_unit_test(pretraining_tp_accepted),
        cmocka_unit_test(transformers5_config), cmocka_unit_test(families), cmocka_unit_test(smollm3_nope), cmocka_unit_test(olmo2_family), cmocka_unit_test(mistral_family), cmocka_unit_test(phi3_family), cmocka_unit_test(gemma3_family), cmocka_unit_test(qwen3_5_family), cmocka_unit_test(qwen3_5_moe_family), cmocka_unit_test(qwen3_next_family),
        cmocka_unit_test(llama3_rope), cmocka_unit_test(qwen3_family),
        cmocka_unit_test(synth_shape_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

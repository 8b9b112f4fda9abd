/*
 * test_sample.c - src/sample.c against tests/vectors/sampling/ (docs/
 * sampling.md §S10): vectors produced by the independent Python reference
 * (tests/sampling/sampling_ref.py), never by the code under test.
 *
 * Checked bit for bit: Philox4x32-10's known answers and the seed /
 * sequence / step draws (§S3.5); every logit vector's cases: sampler, the
 * draw, u, the kept-set sizes, S, S', target, the token, its logprob and
 * the top alternatives (§S3, §S4), and the logprobs of every id; the
 * stop-rule runs and single evaluations (§S5.3); the parameter blocks and
 * their digests (§S7.5) and the validity table (§S2.2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fenv.h>
#include <jansson.h>

#include "cis2.h"
#include "api.h"
#include "model.h"
#include "pmath.h"
#include "receipt.h"
#include "sample.h"
#include "witness.h"

#define VEC "tests/vectors/sampling/"

static json_t *load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, VEC "%s", name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s (line %d)", path, je.text, je.line);
    return j;
}

static uint32_t hex32(json_t *v)
{
    const char *s = json_string_value(v);
    assert_non_null(s);
    return (uint32_t)strtoul(s, NULL, 16);
}
static float f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static void test_philox(void **state)
{
    (void)state;
    json_t *j = load("philox.json");
    json_t *kat = json_object_get(j, "kat"), *row;
    size_t i;
    assert_int_equal(json_array_size(kat), 3);
    json_array_foreach(kat, i, row) {
        uint32_t c[4], k[2], out[4];
        for (int w = 0; w < 4; w++) c[w] = hex32(json_array_get(json_object_get(row, "counter"), w));
        for (int w = 0; w < 2; w++) k[w] = hex32(json_array_get(json_object_get(row, "key"), w));
        cis2_philox4x32_10(c, k, out);
        for (int w = 0; w < 4; w++) assert_int_equal(out[w], hex32(json_array_get(json_object_get(row, "output"), w)));
    }
    json_decref(j);
}

/* Logits of a vector file: "logits" (hex bits) or "logits_le_hex". */
static float *logits_of(json_t *j, size_t *V)
{
    *V = (size_t)json_integer_value(json_object_get(j, "vocab"));
    float *x = malloc(*V * sizeof *x);
    json_t *a = json_object_get(j, "logits");
    if (a) {
        for (size_t i = 0; i < *V; i++) x[i] = f32(hex32(json_array_get(a, i)));
    } else {
        const char *h = json_string_value(json_object_get(j, "logits_le_hex"));
        assert_int_equal(strlen(h), *V * 8);
        for (size_t i = 0; i < *V; i++) {
            uint32_t b = 0;
            for (int k = 0; k < 4; k++) {
                unsigned byte;
                sscanf(h + i * 8 + k * 2, "%2x", &byte);
                b |= (uint32_t)byte << (8 * k);
            }
            x[i] = f32(b);
        }
    }
    return x;
}

static void check_vector(const char *file)
{
    json_t *j = load(file);
    size_t V;
    float *x = logits_of(j, &V);
    json_t *cases = json_object_get(j, "cases"), *c;
    size_t i;
    cis2_sample_ws ws = {0};
    cis2_frame fr;
    cis2_api_enter(&fr); /* the library's pinned environment (§1.3) */
    const cis2_ctx cx = cis2_ctx_solo(); /* the calling thread, the "auto" kernel (kernels.h) */
    json_array_foreach(cases, i, c) {
        json_t *e = json_object_get(c, "expect");
        cis2_sampling p = {.temperature = f32(hex32(json_object_get(c, "temperature"))),
                           .top_k = (uint32_t)json_integer_value(json_object_get(c, "top_k")),
                           .top_p = f32(hex32(json_object_get(c, "top_p"))),
                           .min_p = f32(hex32(json_object_get(c, "min_p"))),
                           .seed = strtoull(json_string_value(json_object_get(c, "seed")), NULL, 10),
                           .sequence = (uint32_t)json_integer_value(json_object_get(c, "sequence"))};
        uint32_t step = (uint32_t)json_integer_value(json_object_get(c, "step"));
        uint32_t tok;
        cis2_sample_info info;
        assert_int_equal(cis2_sampling_check(&p, V, NULL), CIS2_OK);
        assert_int_equal(cis2_sample_step(&cx, x, V, &p, step, &ws, &tok, &info), CIS2_OK);
        const char *sampler = json_string_value(json_object_get(e, "sampler"));
        if (!!info.greedy != !strcmp(sampler, "greedy")) fail_msg("%s case %zu: sampler", file, i);
        if (info.drew != json_is_true(json_object_get(e, "drew"))) fail_msg("%s case %zu: drew", file, i);
        if (tok != (uint32_t)json_integer_value(json_object_get(e, "token")))
            fail_msg("%s case %zu: token %u, want %lld", file, i, tok, (long long)json_integer_value(json_object_get(e, "token")));
        if (info.drew) {
            for (int w = 0; w < 4; w++)
                assert_int_equal(info.philox_out[w], hex32(json_array_get(json_object_get(e, "philox_out"), w)));
            assert_int_equal(bits(info.u), hex32(json_object_get(e, "u")));
            assert_int_equal(bits(info.S), hex32(json_object_get(e, "S")));
            assert_int_equal(bits(info.S_prime), hex32(json_object_get(e, "S_prime")));
            assert_int_equal(bits(info.target), hex32(json_object_get(e, "target")));
        }
        if (json_object_get(e, "n_candidates"))
            assert_int_equal(info.n_candidates, json_integer_value(json_object_get(e, "n_candidates")));
        if (json_object_get(e, "n_after_top_k")) {
            assert_int_equal(info.n_after_top_k, json_integer_value(json_object_get(e, "n_after_top_k")));
            assert_int_equal(info.n_after_top_p, json_integer_value(json_object_get(e, "n_after_top_p")));
            assert_int_equal(info.n_kept, json_integer_value(json_object_get(e, "n_kept")));
        }
        size_t top_n = (size_t)json_integer_value(json_object_get(c, "top_n")), nt;
        uint32_t ids[CIS2_MAX_TOP_LOGPROBS];
        float lp, tlp[CIS2_MAX_TOP_LOGPROBS];
        assert_int_equal(cis2_logprobs(&cx, x, V, tok, top_n, &ws, &lp, ids, tlp, &nt), CIS2_OK);
        if (bits(lp) != hex32(json_object_get(e, "logprob")))
            fail_msg("%s case %zu: logprob %08x, want %s", file, i, bits(lp), json_string_value(json_object_get(e, "logprob")));
        json_t *tops = json_object_get(e, "top_logprobs");
        assert_int_equal(nt, json_array_size(tops));
        for (size_t k = 0; k < nt; k++) {
            assert_int_equal(ids[k], json_integer_value(json_array_get(json_array_get(tops, k), 0)));
            assert_int_equal(bits(tlp[k]), hex32(json_array_get(json_array_get(tops, k), 1)));
        }
    }
    json_t *all = json_object_get(json_object_get(j, "logprobs"), "all");
    for (size_t k = 0; all && k < V; k++) { /* the logprob of every id */
        float lp;
        size_t nt;
        assert_int_equal(cis2_logprobs(&cx, x, V, (uint32_t)k, 0, &ws, &lp, NULL, NULL, &nt), CIS2_OK);
        if (bits(lp) != hex32(json_array_get(all, k))) fail_msg("%s: logprob of id %zu", file, k);
    }
    cis2_api_leave(&fr);
    cis2_sample_ws_free(&ws);
    free(x);
    json_decref(j);
}

static void test_logit_vectors(void **state)
{
    (void)state;
    static const char *files[] = {"logits_worked.json", "logits_ties.json", "logits_neg_inf.json",
                                  "logits_all_neg_inf.json", "logits_pos_inf.json", "logits_nan_first.json",
                                  "logits_all_nan.json", "logits_single.json", "logits_top_p_early.json",
                                  "logits_top_p_exact.json", "logits_top_k_tie.json", "logits_min_p.json",
                                  "logits_tiny_T.json", "logits_huge_T.json", "logits_daz.json",
                                  "logits_vocab49152.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) check_vector(files[i]);
}

/* The lane forms of §S4's passes and of the §S3.3 rank (sample.c: 4
 * lanes and scalar tails) against the rules written out one logit at a
 * time: rows of every length from 1 to 41 drawn from a small set of values
 * (so ties, +0 / -0, subnormals under DAZ, +-inf and NaN at every place of
 * a lane and of a tail), every token of each.  The reference below is
 * §S3.3 and §S4 as worded: M is the first candidate's logit, d skips NaN
 * ids, the exp / sum_seq / ln are pmath's (checked against mpmath by
 * test_pmath). */
static int ref_before(const float *x, uint32_t a, uint32_t b) /* §S3.3 */
{
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

static void test_lanes_match_rules(void **state)
{
    (void)state;
    static const uint32_t pool[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x3F800000u, 0xBF800000u,
                                    0x40000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x41200000u,
                                    0xC1200000u, 0x3F800000u, 0x7F7FFFFFu};
    const size_t np = sizeof pool / sizeof pool[0];
    cis2_sample_ws ws = {0};
    cis2_frame fr;
    cis2_api_enter(&fr);
    const cis2_ctx cx = cis2_ctx_solo();
    uint64_t s = 0x9E3779B97F4A7C15ull;
    float x[41], d[41];
    for (int round = 0; round < 400; round++)
        for (size_t V = 1; V <= 41; V++) {
            for (size_t i = 0; i < V; i++) {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                int nanless = round % 3 == 0; /* a third of the rows without NaN: the lane form of d */
                uint32_t b = pool[s % np];
                if (nanless && b == 0x7FC00000u) b = 0x3F800000u;
                x[i] = f32(b);
            }
            uint32_t first = 0; /* §S4's M */
            int have = 0;
            for (uint32_t i = 0; i < V; i++)
                if (x[i] == x[i] && (!have || ref_before(x, i, first))) { first = i; have = 1; }
            float L = 0.0f, M = have ? x[first] : 0.0f;
            if (have) {
                size_t k = 0;
                for (size_t i = 0; i < V; i++)
                    if (x[i] == x[i]) d[k++] = x[i] == M ? 0.0f : x[i] - M;
                for (size_t i = 0; i < k; i++) d[i] = exp_pinned(d[i]);
                L = ln_pinned(sum_seq(d, k));
            }
            for (uint32_t tok = 0; tok < V; tok++) {
                uint32_t rank = 0;
                if (x[tok] == x[tok]) {
                    rank = 1;
                    for (uint32_t v = 0; v < V; v++) rank += x[v] == x[v] && ref_before(x, v, tok);
                }
                if (cis2_candidate_rank(x, V, tok) != rank)
                    fail_msg("round %d V %zu token %u: rank %u, want %u", round, V, tok,
                             cis2_candidate_rank(x, V, tok), rank);
                float want = !have || x[tok] != x[tok] ? f32(CIS2_QNAN_BITS) : (x[tok] == M ? 0.0f : x[tok] - M) - L;
                float lp;
                size_t nt;
                assert_int_equal(cis2_logprobs(&cx, x, V, tok, 0, &ws, &lp, NULL, NULL, &nt), CIS2_OK);
                if (bits(lp) != bits(want))
                    fail_msg("round %d V %zu token %u: logprob %08x, want %08x", round, V, tok, bits(lp), bits(want));
            }
        }
    cis2_api_leave(&fr);
    cis2_sample_ws_free(&ws);
}

static uint8_t *unhex(const char *h, size_t *n)
{
    *n = strlen(h) / 2;
    uint8_t *b = malloc(*n + 1);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        b[i] = (uint8_t)v;
    }
    return b;
}

static const char *reason_name(int r)
{
    return r == CIS2_FINISH_EOS ? "eos" : r == CIS2_FINISH_STOP_ID ? "stop-id"
         : r == CIS2_FINISH_STOP_STRING ? "stop-string" : r == CIS2_FINISH_LENGTH ? "length" : "none";
}

static void test_stop_rules(void **state)
{
    (void)state;
    json_t *j = load("stop_rules.json"), *c;
    size_t i;
    json_array_foreach(json_object_get(j, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *eos = json_object_get(c, "eos_ids"), *sid = json_object_get(c, "stop_ids"),
               *sst = json_object_get(c, "stop_strings");
        uint32_t eosv[64], idv[64];
        char *strs[16];
        size_t lens[16];
        cis2_stop_rule r = {0};
        if (!json_is_null(eos)) {
            r.n_eos = json_array_size(eos);
            for (size_t k = 0; k < r.n_eos; k++) eosv[k] = (uint32_t)json_integer_value(json_array_get(eos, k));
            r.eos = eosv;
        }
        r.n_ids = json_array_size(sid);
        for (size_t k = 0; k < r.n_ids; k++) idv[k] = (uint32_t)json_integer_value(json_array_get(sid, k));
        r.ids = idv;
        r.n_strings = json_array_size(sst);
        for (size_t k = 0; k < r.n_strings; k++)
            strs[k] = (char *)unhex(json_string_value(json_array_get(sst, k)), &lens[k]);
        r.strings = strs;
        r.lens = lens;
        cis2_stop_state st = {0};
        json_t *e = json_object_get(c, "expect");
        if (!strcmp(json_string_value(json_object_get(c, "kind")), "run")) {
            r.max_tokens = (size_t)json_integer_value(json_object_get(c, "max_toks"));
            json_t *toks = json_object_get(c, "tokens");
            size_t s = 0;
            int why = CIS2_FINISH_NONE;
            for (; s < json_array_size(toks) && !why; s++) {
                json_t *t = json_array_get(toks, s);
                size_t n;
                uint8_t *b = unhex(json_string_value(json_object_get(t, "bytes")), &n);
                why = cis2_stop_after(&r, &st, s, (uint32_t)json_integer_value(json_object_get(t, "id")), b, n);
                free(b);
            }
            if (s != (size_t)json_integer_value(json_object_get(e, "gen_toks")))
                fail_msg("stop case %s: %zu tokens", name, s);
            if (strcmp(reason_name(why), json_string_value(json_object_get(e, "finish_reason"))))
                fail_msg("stop case %s: %s", name, reason_name(why));
            if (why == CIS2_FINISH_STOP_STRING) { /* §S5.4: cut at the occurrence */
                size_t n;
                uint8_t *want = unhex(json_string_value(json_object_get(e, "completion_hex")), &n);
                assert_int_equal(st.cut, n);
                free(want);
            }
        } else { /* one §S5.3 step 3 evaluation after earlier tokens */
            r.max_tokens = SIZE_MAX;
            json_t *prev = json_object_get(c, "previous_bytes");
            size_t s = 0;
            for (; s < json_array_size(prev); s++) {
                size_t n;
                uint8_t *b = unhex(json_string_value(json_array_get(prev, s)), &n);
                cis2_stop_after(&r, &st, s, 0xFFFFFFFFu, b, n); /* the state only: step 3 judges the new token */
                free(b);
            }
            size_t n;
            uint8_t *b = unhex(json_string_value(json_object_get(c, "new_bytes")), &n);
            int why = cis2_stop_after(&r, &st, s, 0xFFFFFFFFu, b, n);
            free(b);
            json_t *want = json_object_get(e, "stops");
            if (json_is_null(want) ? why != CIS2_FINISH_NONE : strcmp(reason_name(why), json_string_value(want)))
                fail_msg("stop step case %s: %s", name, reason_name(why));
        }
        cis2_stop_state_free(&st);
        for (size_t k = 0; k < r.n_strings; k++) free(strs[k]);
    }
    json_decref(j);
}

static void test_params(void **state)
{
    (void)state;
    json_t *j = load("params.json"), *b;
    size_t i;
    json_array_foreach(json_object_get(j, "blocks"), i, b) {
        uint32_t eosv[64], idv[64];
        char *strs[16];
        size_t lens[16];
        cis2_sampling p = {.temperature = f32(hex32(json_object_get(b, "temperature"))),
                           .top_k = (uint32_t)json_integer_value(json_object_get(b, "top_k")),
                           .top_p = f32(hex32(json_object_get(b, "top_p"))),
                           .min_p = f32(hex32(json_object_get(b, "min_p"))),
                           .seed = strtoull(json_string_value(json_object_get(b, "seed")), NULL, 10),
                           .sequence = (uint32_t)json_integer_value(json_object_get(b, "sequence"))};
        cis2_stop_rule r = {.max_tokens = (size_t)json_integer_value(json_object_get(b, "max_toks"))};
        json_t *eos = json_object_get(b, "eos_ids"), *sid = json_object_get(b, "stop_ids"),
               *sst = json_object_get(b, "stop_strings");
        if (eos && !json_is_null(eos)) {
            r.n_eos = json_array_size(eos);
            for (size_t k = 0; k < r.n_eos; k++) eosv[k] = (uint32_t)json_integer_value(json_array_get(eos, k));
            r.eos = eosv;
        }
        r.n_ids = json_array_size(sid);
        for (size_t k = 0; k < r.n_ids; k++) idv[k] = (uint32_t)json_integer_value(json_array_get(sid, k));
        r.ids = idv;
        r.n_strings = json_array_size(sst);
        for (size_t k = 0; k < r.n_strings; k++)
            strs[k] = (char *)unhex(json_string_value(json_array_get(sst, k)), &lens[k]);
        r.strings = strs;
        r.lens = lens;
        char *block = cis2_params_block(&p, &r);
        assert_string_equal(block, json_string_value(json_object_get(b, "block")));
        uint8_t d[32];
        char h[65];
        cis2_sha256(block, strlen(block), d);
        cis2_hex(d, 32, h);
        assert_string_equal(h, json_string_value(json_object_get(b, "params_digest")));
        free(block);
        for (size_t k = 0; k < r.n_strings; k++) free(strs[k]);
    }
    json_array_foreach(json_object_get(j, "validity"), i, b) { /* §S2.2 at V = 49152 */
        const char *field = json_string_value(json_object_get(b, "field"));
        json_t *val = json_object_get(b, "value");
        cis2_sampling p = {.top_p = 1.0f}; /* the other parameters valid */
        int known = 1;
        if (!strcmp(field, "temperature")) p.temperature = f32(hex32(val));
        else if (!strcmp(field, "top_p")) p.top_p = f32(hex32(val));
        else if (!strcmp(field, "min_p")) p.min_p = f32(hex32(val));
        else if (!strcmp(field, "top_k")) p.top_k = (uint32_t)strtoull(json_string_value(val), NULL, 10);
        else known = 0; /* seed, sequence, N: enforced by their integer types */
        if (!known) continue;
        if (!strcmp(field, "top_k") && strtoull(json_string_value(val), NULL, 10) > UINT32_MAX) continue;
        cis2_error err = {0};
        int ok = cis2_sampling_check(&p, 49152, &err) == CIS2_OK;
        if (ok != json_is_true(json_object_get(b, "valid")))
            fail_msg("validity of %s = %s: %d", field, json_is_string(val) ? json_string_value(val) : "?", ok);
        if (!ok) { /* a usage error, one line, naming the parameter */
            assert_int_equal(err.code, CIS2_E_USAGE);
            assert_non_null(strstr(err.msg, field));
            assert_null(strchr(err.msg, '\n'));
        }
    }
    json_decref(j);
}

static void unhex_into(const char *h, uint8_t *out, size_t n)
{
    assert_int_equal(strlen(h), 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* Whole runs whose logits are given per step: the tokens, the finish
 * reason, the witness (with the params digest, §S7.6), the token digest
 * and the rendered receipt, byte for byte; then the receipt parses back
 * to the same text. */
static void test_whole_receipts(void **state)
{
    (void)state;
    json_t *j = load("receipts.json"), *rc;
    size_t i;
    json_array_foreach(json_object_get(j, "receipts"), i, rc) {
        json_t *in = json_object_get(rc, "inputs"), *e = json_object_get(rc, "expect");
        cis2_model m;
        memset(&m, 0, sizeof m);
        unhex_into(json_string_value(json_object_get(in, "weights_sha256")), m.weights_sha, 32);
        unhex_into(json_string_value(json_object_get(in, "config_sha256")), m.config_sha, 32);
        unhex_into(json_string_value(json_object_get(in, "tokenizer_sha256")), m.tokenizer_sha, 32);
        unhex_into(json_string_value(json_object_get(in, "table_digest")), m.table_digest, 32);
        unhex_into(json_string_value(json_object_get(in, "inv_freq_table_digest")), m.inv_freq_digest, 32);
        cis2_receipt *r = cis2_receipt_new();
        snprintf(r->spec_version, sizeof r->spec_version, "0.3b");
        snprintf(r->dtype, sizeof r->dtype, "fp32");
        memcpy(r->weights_sha, m.weights_sha, 32);
        memcpy(r->config_sha, m.config_sha, 32);
        memcpy(r->tokenizer_sha, m.tokenizer_sha, 32);
        memcpy(r->table_digest, m.table_digest, 32);
        memcpy(r->inv_freq_digest, m.inv_freq_digest, 32);
        r->prompt = unhex(json_string_value(json_object_get(in, "prompt_hex")), &r->prompt_len);
        json_t *pids = json_object_get(in, "prompt_token_ids");
        r->n_prompt = json_array_size(pids);
        r->prompt_ids = malloc(r->n_prompt * sizeof(uint32_t));
        for (size_t k = 0; k < r->n_prompt; k++) r->prompt_ids[k] = (uint32_t)json_integer_value(json_array_get(pids, k));
        r->ext = 1;
        r->max_toks = (uint32_t)json_integer_value(json_object_get(in, "max_toks"));
        r->samp = (cis2_sampling){.temperature = f32(hex32(json_object_get(in, "temperature"))),
                                  .top_k = (uint32_t)json_integer_value(json_object_get(in, "top_k")),
                                  .top_p = f32(hex32(json_object_get(in, "top_p"))),
                                  .min_p = f32(hex32(json_object_get(in, "min_p"))),
                                  .seed = strtoull(json_string_value(json_object_get(in, "seed")), NULL, 10),
                                  .sequence = (uint32_t)json_integer_value(json_object_get(in, "sequence"))};
        json_t *eos = json_object_get(in, "eos_ids"), *sid = json_object_get(in, "stop_ids"),
               *sst = json_object_get(in, "stop_strings");
        if (eos && !json_is_null(eos)) {
            r->has_eos = 1;
            r->n_stop_eos = json_array_size(eos);
            for (size_t k = 0; k < r->n_stop_eos; k++) r->stop_eos[k] = (uint32_t)json_integer_value(json_array_get(eos, k));
        }
        r->n_stop_ids = json_array_size(sid);
        for (size_t k = 0; k < r->n_stop_ids; k++) r->stop_ids[k] = (uint32_t)json_integer_value(json_array_get(sid, k));
        r->n_stop_str = json_array_size(sst);
        for (size_t k = 0; k < r->n_stop_str; k++)
            r->stop_str[k] = unhex(json_string_value(json_array_get(sst, k)), &r->stop_len[k]);
        char *block = cis2_receipt_params_block(r);
        cis2_sha256(block, strlen(block), r->params_digest);
        free(block);
        cis2_stop_rule sr = {.eos = r->has_eos ? r->stop_eos : NULL, .n_eos = r->n_stop_eos, .ids = r->stop_ids,
                             .n_ids = r->n_stop_ids, .strings = (char *const *)r->stop_str, .lens = r->stop_len,
                             .n_strings = r->n_stop_str, .max_tokens = r->max_toks};
        cis2_sha w;
        assert_int_equal(cis2_witness_begin(&w, &m, r->prompt_ids, r->n_prompt, r->params_digest), 0);
        json_t *steps = json_object_get(in, "step_logits"), *tb = json_object_get(in, "token_bytes");
        r->generated = malloc(json_array_size(steps) * sizeof(uint32_t));
        cis2_sample_ws ws = {0};
        cis2_stop_state st = {0};
        cis2_frame fr;
        cis2_api_enter(&fr);
        const cis2_ctx cx = cis2_ctx_solo();
        int why = CIS2_FINISH_NONE;
        size_t s = 0;
        for (; s < json_array_size(steps) && !why; s++) {
            json_t *lg = json_array_get(steps, s);
            size_t V = json_array_size(lg);
            float x[64];
            for (size_t k = 0; k < V; k++) x[k] = f32(hex32(json_array_get(lg, k)));
            uint32_t tok;
            assert_int_equal(cis2_sample_step(&cx, x, V, &r->samp, (uint32_t)s, &ws, &tok, NULL), CIS2_OK);
            cis2_witness_step(&w, x, V, tok);
            r->generated[s] = tok;
            size_t nb;
            uint8_t *b = unhex(json_string_value(json_array_get(tb, tok)), &nb);
            why = cis2_stop_after(&sr, &st, s, tok, b, nb);
            free(b);
        }
        cis2_api_leave(&fr);
        r->gen_toks = (uint32_t)s;
        r->finish = why;
        cis2_sha_final(&w, r->witness);
        assert_int_equal(cis2_argmax_digest(r->prompt_ids, r->n_prompt, r->generated, s, r->argmax), 0);
        json_t *gids = json_object_get(e, "generated_token_ids");
        assert_int_equal(s, json_array_size(gids));
        for (size_t k = 0; k < s; k++) assert_int_equal(r->generated[k], json_integer_value(json_array_get(gids, k)));
        char *text;
        size_t len;
        assert_int_equal(cis2_receipt_render(r, &text, &len, NULL), CIS2_OK);
        assert_string_equal(text, json_string_value(json_object_get(e, "receipt")));
        cis2_receipt back;
        cis2_error err = {0};
        if (cis2_receipt_parse_into(text, len, "vector", &back, &err)) fail_msg("%s", err.msg);
        char *again;
        assert_int_equal(cis2_receipt_render(&back, &again, &len, NULL), CIS2_OK);
        assert_string_equal(again, text);
        free(again);
        free(text);
        cis2_receipt_clear(&back);
        cis2_sample_ws_free(&ws);
        cis2_stop_state_free(&st);
        cis2_receipt_free(r);
    }
    json_decref(j);
}

/* §S2.3: decimal text to binary32, one correctly rounded conversion.  The
 * bits were worked out with exact rationals (tests/sampling/sampling_ref.py
 * parse_decimal_f32 and test_sampling_ref.py test_decimal_input). */
static uint32_t dec_bits(const char *s, int *rc)
{
    float f = 12345.0f;
    cis2_error err = {0};
    *rc = cis2_decimal_to_f32(s, strlen(s), &f, &err);
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static void test_decimal_to_f32(void **state)
{
    (void)state;
    static const struct { const char *s; uint32_t bits; } ok[] = {
        {"1.0000000596046447762", 0x3F800001}, /* through a double it would be 0x3f800000 */
        {"0.1", 0x3DCCCCCD}, {"1e-5", 0x3727C5AC}, {"-0", 0x80000000}, {"0", 0}, {"0e999", 0},
        {".5", 0x3F000000}, {"5.", 0x40A00000}, {"+2", 0x40000000}, {"1E+1", 0x41200000},
        {"3.4028235e38", 0x7F7FFFFF}, {"1.1754944e-38", 0x00800000}, {"0.99999997", 0x3F7FFFFF},
    };
    int rc;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint32_t b = dec_bits(ok[i].s, &rc);
        assert_int_equal(rc, CIS2_OK);
        assert_int_equal(b, ok[i].bits);
    }
    /* whatever rounding mode the caller left set */
    int mode = fegetround();
    fesetround(FE_UPWARD);
    uint32_t up = dec_bits("0.1", &rc);
    fesetround(FE_DOWNWARD);
    uint32_t down = dec_bits("1.0000000596046447762", &rc);
    fesetround(mode);
    assert_int_equal(up, 0x3DCCCCCD);
    assert_int_equal(down, 0x3F800001);
    static const char *bad[] = {"", ".", "e5", "1e", "1e+", "0x1p3", "inf", "nan", " 1", "1 ", "1,5", "--1", "1..2",
                                "3.4028236e38", "1e39", "1e-39", "1e-46", "7e-46"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        (void)dec_bits(bad[i], &rc);
        assert_int_equal(rc, CIS2_E_USAGE);
    }
    /* a long decimal (beyond the stack buffer): still one rounding */
    char longd[400] = "0.";
    for (size_t i = 2; i < 300; i++) longd[i] = '0';
    memcpy(longd + 300, "1e299", 6); /* 0.(298 zeros)1 = 1e-299, times 1e299: 1 */
    assert_int_equal(dec_bits(longd, &rc), 0x3F800000);
    assert_int_equal(rc, CIS2_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decimal_to_f32),
        cmocka_unit_test(test_philox),
        cmocka_unit_test(test_logit_vectors),
        cmocka_unit_test(test_lanes_match_rules),
        cmocka_unit_test(test_stop_rules),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_whole_receipts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * judge.c - the judgments that need no weights (include/cis2.h section
 * 7): cis2_check (a receipt against itself and, when given, its
 * tokenizer.json and config.json, with the generation_config.json beside
 * that) and cis2_compare (two receipts against
 * each other).  Spec §2.1, §3.1, §6.6, §7.1-§7.2, §12.2; docs/sampling.md
 * §S7.4-§S8 for extension receipts.
 */
#include "api.h"
#include "config.h"
#include "genconfig.h"
#include "pmath.h"
#include "receipt.h"
#include "sample.h"
#include "score.h"
#include "tokenizer.h"
#include "verdict.h"
#include "witness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- check */

typedef struct check_in {
    int has_cfg, has_tok;
    cis2_config cfg;
    uint8_t cfg_sha[32], tok_sha[32], inv_digest[32];
    cis2_tokenizer *tok;
    uint32_t *ids;               /* the prompt re-tokenized */
    size_t nids;
} check_in;

static int read_config(const char *path, check_in *c, cis2_error *err)
{
    char *buf;
    size_t len;
    int rc = cis2_read_file(path, CIS2_CFG_MAX_FILE, "config.json", &buf, &len, err);
    if (rc) return rc;
    cis2_sha256(buf, len, c->cfg_sha); /* the bytes parsed are the bytes hashed */
    rc = cis2_config_parse(&c->cfg, buf, len, path, err);
    free(buf);
    if (rc) return rc;
    /* the eos list of stop-eos: with generation_config.json's ids when the
     * file is beside config.json, as the engine reads it (§S5.1) */
    size_t dl = strrchr(path, '/') ? (size_t)(strrchr(path, '/') - path) : 0;
    char *dir = malloc(dl + 2);
    if (!dir) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (dl) memcpy(dir, path, dl);
    else dir[dl++] = path[0] == '/' ? '/' : '.';
    dir[dl] = 0;
    rc = cis2_genconfig_merge_dir(&c->cfg, dir, err);
    free(dir);
    if (rc) return rc;
    size_t n_inv = cis2_config_inv_freq_len(&c->cfg);
    float *inv = malloc((n_inv ? n_inv : 1) * sizeof(float));
    if (!inv) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    cis2_config_inv_freq(&c->cfg, inv); /* §7.1 (and docs/models.md §M1, §M7.4), as model.c */
    inv_freq_table_digest(inv, n_inv, c->inv_digest);               /* §7.2 */
    free(inv);
    c->has_cfg = 1;
    return CIS2_OK;
}

/* §S5.3 over the claimed ids with the tokenizer's bytes: the stop rules
 * must finish the run exactly at the last claimed token, for the claimed
 * reason (docs/sampling.md §S8.4).  Returns the reason they give there
 * (or NONE: they would not stop) and the step they stop at. */
static int replay_stops(const cis2_receipt *r, const cis2_tokenizer *tok, size_t *at)
{
    cis2_stop_rule sr = {.eos = r->has_eos ? r->stop_eos : NULL, .n_eos = r->n_stop_eos, .ids = r->stop_ids,
                         .n_ids = r->n_stop_ids, .strings = (char *const *)r->stop_str, .lens = r->stop_len,
                         .n_strings = r->n_stop_str, .max_tokens = r->max_toks};
    cis2_stop_state st = {0};
    int why = CIS2_FINISH_NONE;
    size_t s = 0;
    for (; s < r->gen_toks && !why; s++) {
        size_t len = 0;
        const char *b = cis2_tokenizer_token_bytes(tok, r->generated[s], &len);
        why = cis2_stop_after(&sr, &st, s, r->generated[s], (const uint8_t *)(b ? b : ""), b ? len : 0);
    }
    cis2_stop_state_free(&st);
    *at = s;
    return why < 0 ? CIS2_FINISH_NONE : why;
}

#define UNV(key, why)                                                                  \
    do {                                                                               \
        cis2_vd_field(v, key, CIS2_FIELD_UNVERIFIED, "unverified (%s)", why);          \
        cis2_vd_name(unv, sizeof unv, key);                                            \
    } while (0)

/* The fields of an extension receipt that only its own lines and the two
 * files can check (docs/sampling.md §S7.4, §S8.1, §S8.4-§S8.5). */
static void check_ext_inputs(cis2_verdict *v, const cis2_receipt *r, const check_in *c, char *outs, size_t cap,
                             char *unv, size_t ucap)
{
    cis2_vd_field(v, "max-toks", CIS2_FIELD_INPUT, "input (%u)", r->max_toks);
    cis2_vd_field(v, "sampler", CIS2_FIELD_OK, "ok");
    cis2_vd_field(v, "temperature", CIS2_FIELD_INPUT, "input");
    if (c->has_cfg && r->samp.top_k > (uint64_t)c->cfg.vocab_size) {
        cis2_vd_field(v, "top-k", CIS2_FIELD_MISMATCH, "MISMATCH %u is larger than the vocabulary", r->samp.top_k);
        cis2_vd_name(outs, cap, "top-k");
    } else cis2_vd_field(v, "top-k", CIS2_FIELD_INPUT, "input");
    static const char *const ins[] = {"top-p", "min-p", "seed", "sequence"};
    for (int k = 0; k < 4; k++) cis2_vd_field(v, ins[k], CIS2_FIELD_INPUT, "input");
    if (!r->has_eos) cis2_vd_field(v, "stop-eos", CIS2_FIELD_INPUT, "input (none)");
    else if (c->has_cfg) {
        if (cis2_vd_ids(v, "stop-eos", r->stop_eos, r->n_stop_eos, c->cfg.eos_ids, c->cfg.n_eos))
            cis2_vd_name(outs, cap, "stop-eos");
    } else {
        cis2_vd_field(v, "stop-eos", CIS2_FIELD_UNVERIFIED, "unverified (needs --config)");
        cis2_vd_name(unv, ucap, "stop-eos");
    }
    cis2_vd_field(v, "stop-ids", CIS2_FIELD_INPUT, "input");
    cis2_vd_field(v, "stop-strings", CIS2_FIELD_INPUT, "input");
    char *block = cis2_receipt_params_block(r);
    uint8_t d[32];
    if (block) cis2_sha256(block, strlen(block), d);
    free(block);
    if (!block || cis2_vd_digest(v, "params-digest", r->params_digest, d)) cis2_vd_name(outs, cap, "params-digest");
}

static void check_ext_outputs(cis2_verdict *v, const cis2_receipt *r, const check_in *c, char *outs, size_t cap,
                              char *unv, size_t ucap)
{
    cis2_vd_field(v, "gen-toks", CIS2_FIELD_OK, "ok (consistent with finish-reason and the stop rules)");
    if (!r->n_stop_str) {
        cis2_vd_field(v, "finish-reason", CIS2_FIELD_OK, "ok (consistent with the stop ids)");
    } else if (c->has_tok) {
        size_t at;
        int why = replay_stops(r, c->tok, &at);
        if (why == r->finish && at == r->gen_toks) cis2_vd_field(v, "finish-reason", CIS2_FIELD_OK, "ok");
        else {
            cis2_vd_field(v, "finish-reason", CIS2_FIELD_MISMATCH,
                          "MISMATCH the stop rules %s at step %zu, the receipt says %s after %u tokens",
                          why ? cis2_finish_name(why) : "do not stop", at - 1, cis2_finish_name(r->finish),
                          r->gen_toks);
            cis2_vd_name(outs, cap, "finish-reason");
        }
    } else {
        cis2_vd_field(v, "finish-reason", CIS2_FIELD_UNVERIFIED, "unverified (stop strings need --tokenizer)");
        cis2_vd_name(unv, ucap, "finish-reason");
    }
}

int cis2_check(const cis2_receipt *r, const char *tok_path, const char *cfg_path, unsigned tok_flags,
               cis2_verdict **out, cis2_error *err)
{
    *out = NULL;
    cis2_verdict *v = calloc(1, sizeof *v);
    if (!v || cis2_vd_init(v, r->source)) { free(v); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    check_in c = {0};
    uint8_t table[32], digest[32];
    int rc = CIS2_OK;
    cis2_frame f;
    if (cis2_api_enter(&f)) { rc = cis2_fail(err, CIS2_E_FPENV, "FTZ/DAZ pin did not read back"); goto out; }
    if (!r->score && cis2_vd_supported(v, r)) goto done; /* a score receipt's parse checked both */
    if (cfg_path && (rc = read_config(cfg_path, &c, err))) goto out;
    if (r->score) { /* docs/receipts.md "Score receipts" (verify_score.c) */
        if (tok_path && (rc = cis2_tokenizer_load_file(&c.tok, tok_path, 0, c.tok_sha, err))) goto out;
        cis2_check_score(v, r, c.tok, c.tok_sha, c.has_cfg ? c.cfg_sha : NULL, c.has_cfg ? c.inv_digest : NULL);
        goto done;
    }
    if (tok_path) {
        unsigned tf = tok_flags & CIS2_OPEN_TOKENIZER_EXT ? CIS2_TOK_ALLOW_NONNORMATIVE : 0;
        /* one read: the sha256 is of the bytes parsed (a file swapped between two reads would hash
         * one tokenizer and check with another) */
        if ((rc = cis2_tokenizer_load_file(&c.tok, tok_path, tf, c.tok_sha, err))) goto out;
        c.has_tok = 1;
        cis2_error e2 = {0};
        /* as a run tokenizes a prompt: with the post-processor's special tokens (engine.h); a prompt
         * given as ids is not tokenized (docs/receipts.md "Prompts given as ids") */
        if (!r->prompt_from_ids && cis2_tokenizer_encode_ext(c.tok, (const char *)r->prompt, r->prompt_len, CIS2_TOK_ADD_SPECIAL, &c.ids,
                                      &c.nids, &e2)) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: prompt-hex: %s", r->source, e2.msg);
            goto out;
        }
    }
    table_digest(table); /* §6.6 */
    /* §12.2 over the receipt's own ids: a consistency check */
    if (cis2_argmax_digest(r->prompt_ids, r->n_prompt, r->generated, r->gen_toks, digest)) {
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        goto out;
    }
    char art[128] = "", outs[256] = "", unv[256] = "";
    UNV("weights-sha256", "needs the weights: cis2 verify");
    if (c.has_cfg) { if (cis2_vd_digest(v, "config-sha256", r->config_sha, c.cfg_sha)) cis2_vd_name(art, sizeof art, "config-sha256"); }
    else UNV("config-sha256", "needs --config");
    if (c.has_tok) { if (cis2_vd_digest(v, "tokenizer-sha256", r->tokenizer_sha, c.tok_sha)) cis2_vd_name(art, sizeof art, "tokenizer-sha256"); }
    else UNV("tokenizer-sha256", "needs --tokenizer");
    if (r->prompt_from_ids && c.has_tok) {
        if (cis2_receipt_judge_ids_prompt(v, r, c.tok, outs, sizeof outs)) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    } else if (r->prompt_from_ids) {
        UNV("prompt-from", "needs --tokenizer");
        UNV("prompt-hex", "needs --tokenizer");
        cis2_vd_field(v, "prompt-token-ids", CIS2_FIELD_INPUT, "input (%zu ids)", r->n_prompt);
    } else {
        cis2_vd_field(v, "prompt-hex", CIS2_FIELD_INPUT, "input (%zu bytes)", r->prompt_len);
        if (c.has_tok) { if (cis2_vd_ids(v, "prompt-token-ids", r->prompt_ids, r->n_prompt, c.ids, c.nids)) cis2_vd_name(outs, sizeof outs, "prompt-token-ids"); }
        else UNV("prompt-token-ids", "needs --tokenizer");
    }
    if (!r->ext) cis2_vd_field(v, "gen-toks", CIS2_FIELD_INPUT, "input (%u)", r->gen_toks);
    cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    if (r->ext) check_ext_inputs(v, r, &c, outs, sizeof outs, unv, sizeof unv);
    if (cis2_vd_digest(v, "table-digest", r->table_digest, table)) cis2_vd_name(outs, sizeof outs, "table-digest");
    if (c.has_cfg) { if (cis2_vd_digest(v, "inv-freq-table-digest", r->inv_freq_digest, c.inv_digest)) cis2_vd_name(outs, sizeof outs, "inv-freq-table-digest"); }
    else UNV("inv-freq-table-digest", "needs --config");
    if (r->ext) check_ext_outputs(v, r, &c, outs, sizeof outs, unv, sizeof unv);
    UNV("generated-token-ids", "needs the weights: cis2 verify");
    const char *dk = r->ext ? "token-digest" : "argmax-digest";
    if (memcmp(r->argmax, digest, 32)) {
        cis2_vd_digest(v, dk, r->argmax, digest);
        cis2_vd_name(outs, sizeof outs, dk);
    } else cis2_vd_field(v, dk, CIS2_FIELD_OK, "ok (consistent with the receipt's prompt and generated ids)");
    UNV("witness-digest", "needs the weights: cis2 verify");
    if (art[0])
        cis2_vd_set(v, CIS2_VERDICT_ARTIFACT_MISMATCH, CIS2_E_HASH, "ARTIFACT-MISMATCH", "(%s)%s%s", art,
                    outs[0] ? "; outputs differ too: " : "", outs);
    else if (outs[0]) cis2_vd_set(v, CIS2_VERDICT_OUTPUT_MISMATCH, CIS2_E_MISMATCH, "OUTPUT-MISMATCH", "(%s)", outs);
    else cis2_vd_set(v, CIS2_VERDICT_CONSISTENT, CIS2_OK, "CONSISTENT", "(unverified: %s)", unv);
done:
    rc = cis2_vd_finish(v, err);
out:
    cis2_api_leave(&f);
    cis2_free(c.ids);
    cis2_tokenizer_free(c.tok);
    if (rc) { cis2_verdicts_free(v, 1); return rc; }
    *out = v;
    return CIS2_OK;
}

/* ------------------------------------------------------------ compare */

static int ids_equal(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

/* An input line of two receipts: the rendered values compared. */
static void cmp_line(cis2_verdict *v, const cis2_receipt *a, const cis2_receipt *b, const char *key, char *list,
                     size_t cap)
{
    const char *x = cis2_receipt_get(a, key), *y = cis2_receipt_get(b, key);
    if (x && y && !strcmp(x, y)) cis2_vd_field(v, key, CIS2_FIELD_SAME, "same");
    else {
        cis2_vd_field(v, key, CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", x ? x : "(absent)", y ? y : "(absent)");
        cis2_vd_name(list, cap, key);
    }
}

/* Score receipts (docs/receipts.md "Score receipts"): the model, the ids
 * scored and top-logprobs are the inputs, the rest is derived from them. */
static void compare_score(cis2_verdict *v, const cis2_receipt *a, const cis2_receipt *b)
{
    char ins[512] = "", outs[512] = "";
    if (a->score != b->score) {
        cis2_vd_field(v, "format", CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s",
                      a->score ? "ext-score-1" : a->ext ? "ext-sampling-1" : "v1",
                      b->score ? "ext-score-1" : b->ext ? "ext-sampling-1" : "v1");
        cis2_vd_set(v, CIS2_VERDICT_DIFFERENT_RUN, CIS2_OK, "DIFFERENT-RUN", "(format)");
        return;
    }
    static const char *const in_keys[] = {"spec-version", "weights-sha256", "config-sha256", "tokenizer-sha256",
                                          "dtype", "context-token-ids", "continuation-token-ids", "top-logprobs"};
    static const char *const out_keys[] = {"table-digest", "inv-freq-table-digest", "logprob-bits", "all-greedy",
                                           "sum-bits", "sum-f64-bits", "logprob-digest", "witness-digest"};
    for (size_t k = 0; k < sizeof in_keys / sizeof *in_keys; k++) cmp_line(v, a, b, in_keys[k], ins, sizeof ins);
    for (size_t k = 0; k < sizeof out_keys / sizeof *out_keys; k++) cmp_line(v, a, b, out_keys[k], outs, sizeof outs);
    if (!ins[0] && !outs[0]) cis2_vd_set(v, CIS2_VERDICT_SAME, CIS2_OK, "SAME", NULL);
    else if (!ins[0])
        cis2_vd_set(v, CIS2_VERDICT_CONTRADICTION, CIS2_E_MISMATCH, "CONTRADICTION", "(same inputs, different %s)", outs);
    else if (!memcmp(a->witness, b->witness, 32))
        cis2_vd_set(v, CIS2_VERDICT_WITNESS_COLLISION, CIS2_E_MISMATCH, "WITNESS-COLLISION",
                    "(different %s, same witness-digest: at least one receipt is forged)", ins);
    else cis2_vd_set(v, CIS2_VERDICT_DIFFERENT_RUN, CIS2_OK, "DIFFERENT-RUN", "(%s)", ins);
}

int cis2_compare(const cis2_receipt *a, const cis2_receipt *b, cis2_verdict **out, cis2_error *err)
{
    *out = NULL;
    cis2_verdict *v = calloc(1, sizeof *v);
    if (!v || cis2_vd_init(v, "")) { free(v); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    if (a->score || b->score) {
        compare_score(v, a, b);
        int rc = cis2_vd_finish(v, err);
        if (rc) { cis2_verdicts_free(v, 1); return rc; }
        *out = v;
        return CIS2_OK;
    }
    /* Inputs determine a run; everything else is derived from them. */
    char ins[512] = "", outs[256] = "";
    char ha[65], hb[65];
#define CMP_D(key, x, list) do {                                                            \
        if (memcmp(a->x, b->x, 32)) {                                                       \
            cis2_hex(a->x, 32, ha); cis2_hex(b->x, 32, hb);                                 \
            cis2_vd_field(v, key, CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", ha, hb);         \
            cis2_vd_name(list, sizeof list, key);                                           \
        } else cis2_vd_field(v, key, CIS2_FIELD_SAME, "same");                              \
    } while (0)
#define CMP_S(key, x, list) do {                                                            \
        if (strcmp(a->x, b->x)) {                                                           \
            cis2_vd_field(v, key, CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", a->x, b->x);     \
            cis2_vd_name(list, sizeof list, key);                                           \
        } else cis2_vd_field(v, key, CIS2_FIELD_SAME, "same");                              \
    } while (0)
    CMP_S("spec-version", spec_version, ins);
    if (a->ext != b->ext) { /* a sampled or stopped run against a plain greedy one */
        cis2_vd_field(v, "format", CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", a->ext ? "ext-sampling-1" : "v1",
                      b->ext ? "ext-sampling-1" : "v1");
        cis2_vd_name(ins, sizeof ins, "format");
    }
    CMP_D("weights-sha256", weights_sha, ins);
    CMP_D("config-sha256", config_sha, ins);
    CMP_D("tokenizer-sha256", tokenizer_sha, ins);
    /* prompts given as ids (docs/receipts.md "Prompts given as ids"): the ids are the input, their
     * bytes derived; a receipt with the line and one without are of different inputs */
    int ids_in = a->prompt_from_ids && b->prompt_from_ids;
    if (a->prompt_from_ids != b->prompt_from_ids) {
        cis2_vd_field(v, "prompt-from", CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", a->prompt_from_ids ? "ids" : "(absent)",
                      b->prompt_from_ids ? "ids" : "(absent)");
        cis2_vd_name(ins, sizeof ins, "prompt-from");
    } else if (ids_in) cis2_vd_field(v, "prompt-from", CIS2_FIELD_SAME, "same");
    if (a->prompt_len != b->prompt_len || (a->prompt_len && memcmp(a->prompt, b->prompt, a->prompt_len))) {
        cis2_vd_field(v, "prompt-hex", CIS2_FIELD_DIFFERS, "DIFFERS (%zu bytes vs %zu bytes)", a->prompt_len,
                      b->prompt_len);
        if (ids_in) cis2_vd_name(outs, sizeof outs, "prompt-hex");
        else cis2_vd_name(ins, sizeof ins, "prompt-hex");
    } else cis2_vd_field(v, "prompt-hex", CIS2_FIELD_SAME, "same");
    if (!ids_equal(a->prompt_ids, a->n_prompt, b->prompt_ids, b->n_prompt)) {
        cis2_vd_field(v, "prompt-token-ids", CIS2_FIELD_DIFFERS, "DIFFERS");
        if (ids_in) cis2_vd_name(ins, sizeof ins, "prompt-token-ids");
        else cis2_vd_name(outs, sizeof outs, "prompt-token-ids");
    } else cis2_vd_field(v, "prompt-token-ids", CIS2_FIELD_SAME, "same");
    /* the run's length limit: gen-toks in v1, max-toks in the extension */
    const char *len_key = a->ext && b->ext ? "max-toks" : "gen-toks";
    uint32_t la = a->ext ? a->max_toks : a->gen_toks, lb = b->ext ? b->max_toks : b->gen_toks;
    if (la != lb) {
        cis2_vd_field(v, len_key, CIS2_FIELD_DIFFERS, "DIFFERS a=%u b=%u", la, lb);
        cis2_vd_name(ins, sizeof ins, len_key);
    } else cis2_vd_field(v, len_key, CIS2_FIELD_SAME, "same");
    CMP_S("dtype", dtype, ins);
    if (a->ext && b->ext) {
        static const char *const pk[] = {"sampler", "temperature", "top-k", "top-p", "min-p", "seed", "sequence",
                                         "stop-eos", "stop-ids", "stop-strings"};
        for (size_t k = 0; k < sizeof pk / sizeof pk[0]; k++) cmp_line(v, a, b, pk[k], ins, sizeof ins);
        CMP_D("params-digest", params_digest, outs);
    }
    CMP_D("table-digest", table_digest, outs);
    CMP_D("inv-freq-table-digest", inv_freq_digest, outs);
    if (a->ext && b->ext) {
        if (a->finish != b->finish) {
            cis2_vd_field(v, "finish-reason", CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", cis2_finish_name(a->finish),
                          cis2_finish_name(b->finish));
            cis2_vd_name(outs, sizeof outs, "finish-reason");
        } else cis2_vd_field(v, "finish-reason", CIS2_FIELD_SAME, "same");
    }
    uint32_t common = a->gen_toks < b->gen_toks ? a->gen_toks : b->gen_toks;
    size_t first = common;
    for (size_t i = 0; i < common; i++)
        if (a->generated[i] != b->generated[i]) { first = i; break; }
    if (first < common || a->gen_toks != b->gen_toks) {
        if (first < common)
            cis2_vd_field(v, "generated-token-ids", CIS2_FIELD_DIFFERS, "DIFFERS from step %zu (a=%u b=%u)", first,
                          a->generated[first], b->generated[first]);
        else
            cis2_vd_field(v, "generated-token-ids", CIS2_FIELD_DIFFERS, "DIFFERS (lengths %u and %u, equal on the first %u)",
                          a->gen_toks, b->gen_toks, common);
        cis2_vd_name(outs, sizeof outs, "generated-token-ids");
    } else cis2_vd_field(v, "generated-token-ids", CIS2_FIELD_SAME, "same");
    CMP_D(a->ext ? "token-digest" : "argmax-digest", argmax, outs);
    CMP_D("witness-digest", witness, outs);
#undef CMP_D
#undef CMP_S
    int same_witness = !memcmp(a->witness, b->witness, 32);
    /* The same run but for its length limit: step i never depends on it
     * (greedy, and the counter-based sampler alike), so everything derived
     * from the common prefix must agree. */
    int only_len = !strcmp(ins, len_key);
    if (!ins[0] && !outs[0])
        cis2_vd_set(v, CIS2_VERDICT_SAME, CIS2_OK, "SAME", NULL);
    else if (!ins[0])
        cis2_vd_set(v, CIS2_VERDICT_CONTRADICTION, CIS2_E_MISMATCH, "CONTRADICTION", "(same inputs, different %s)", outs);
    else if (same_witness)
        cis2_vd_set(v, CIS2_VERDICT_WITNESS_COLLISION, CIS2_E_MISMATCH, "WITNESS-COLLISION",
                    "(different %s, same witness-digest: at least one receipt is forged)", ins);
    else if (only_len && (first < common || memcmp(a->table_digest, b->table_digest, 32) ||
                          memcmp(a->inv_freq_digest, b->inv_freq_digest, 32) ||
                          !ids_equal(a->prompt_ids, a->n_prompt, b->prompt_ids, b->n_prompt)))
        cis2_vd_set(v, CIS2_VERDICT_CONTRADICTION, CIS2_E_MISMATCH, "CONTRADICTION",
                    "(same inputs but %s, yet they disagree within the first %u steps)", len_key, common);
    else
        cis2_vd_set(v, CIS2_VERDICT_DIFFERENT_RUN, CIS2_OK, "DIFFERENT-RUN", "(different %s)", ins);
    int rc = cis2_vd_finish(v, err);
    if (rc) { cis2_verdicts_free(v, 1); return rc; }
    *out = v;
    return CIS2_OK;
}

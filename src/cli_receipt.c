/*
 * cli_receipt.c - receipts and traces on the command line:
 *   cis2 verify RECEIPT   recompute everything a receipt claims (§2.1, §12)
 *   cis2 check RECEIPT    recompute what needs no weights
 *   cis2 compare A B      judge two receipts against each other
 *   cis2 diff TA TB       first divergence between two traces (trace.h)
 * and the `cis2 run --receipt` writer (receipt.h).  Verdict lines are
 * `FIELD ok`, `FIELD MISMATCH expected=RECEIPT got=RECOMPUTED`, `FIELD input`
 * or `FIELD unverified (...)`, then one `verdict: ...` line.  Exit codes:
 * 0 ok, 1 output mismatch / contradiction, 4 malformed receipt or trace,
 * 5 a spec version or dtype this build does not run, 6 artifact mismatch.
 */
#include "cli.h"
#include "config.h"
#include "decode.h"
#include "model.h"
#include "receipt.h"
#include "tokenizer.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static int ids_equal(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

/* Verdict printers: each returns 1 on a mismatch. */
static int v_digest(const char *key, const uint8_t want[32], const uint8_t got[32])
{
    char a[65], b[65];
    if (!memcmp(want, got, 32)) { printf("%s ok\n", key); return 0; }
    cli_hex(want, a);
    cli_hex(got, b);
    printf("%s MISMATCH expected=%s got=%s\n", key, a, b);
    return 1;
}

static int v_ids(const char *key, const uint32_t *want, size_t nw, const uint32_t *got, size_t ng)
{
    if (ids_equal(want, nw, got, ng)) { printf("%s ok\n", key); return 0; }
    char *a = cli_ids_csv(want, nw), *b = cli_ids_csv(got, ng);
    printf("%s MISMATCH expected=%s got=%s\n", key, a ? a : "?", b ? b : "?");
    free(a);
    free(b);
    return 1;
}

static void add_name(char *list, size_t cap, const char *key)
{
    size_t l = strlen(list);
    snprintf(list + l, cap - l, "%s%s", l ? " " : "", key);
}

/* Spec version and dtype: the receipt's claim must be what this build runs.
 * If not, prints both verdicts and returns 1; if so prints spec-version's. */
static int unsupported(const cis2_receipt *r)
{
    int bad_v = strcmp(r->spec_version, CIS2_SPEC_VERSION) != 0, bad_d = strcmp(r->dtype, "fp32") != 0;
    if (bad_v) printf("spec-version MISMATCH expected=%s got=%s\n", r->spec_version, CIS2_SPEC_VERSION);
    else printf("spec-version ok\n");
    if (!bad_v && !bad_d) return 0;
    if (bad_d) printf("dtype MISMATCH expected=%s got=fp32\n", r->dtype);
    else printf("dtype ok\n");
    printf("verdict: UNSUPPORTED (this build runs CIS-2 v%s fp32 only)\n", CIS2_SPEC_VERSION);
    return 1;
}

/* A prompt-hex that does not encode (invalid UTF-8): the receipt is malformed. */
static int reformat(cis2_error *err, const char *path)
{
    char msg[sizeof err->msg];
    memcpy(msg, err->msg, sizeof msg);
    err->code = CIS2_OK;
    return cis2_fail(err, CIS2_E_FORMAT, "%s: prompt-hex: %s", path, msg);
}

/* ----------------------------------------------------- run --receipt */

int cli_receipt_prompt_from_ids(const cis2_tokenizer *tok, const uint32_t *ids, size_t n, char **text, size_t *len,
                                cis2_error *err)
{
    *text = NULL;
    if (!tok) return cis2_fail(err, CIS2_E_USAGE, "--receipt needs the model's tokenizer.json (prompt-hex)");
    size_t l = 0;
    char *t = cis2_tokenizer_decode_n(tok, ids, n, &l);
    if (!t) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    uint32_t *back = NULL;
    size_t nb = 0;
    cis2_error e2 = {0};
    int ok = l > 0 && cis2_tokenizer_encode(tok, t, l, &back, &nb, &e2) == CIS2_OK && ids_equal(ids, n, back, nb);
    free(back);
    if (!ok) {
        free(t);
        return cis2_fail(err, CIS2_E_USAGE,
                         "--receipt with --prompt-ids: the ids do not round-trip through the tokenizer (decode then "
                         "encode gives other ids), so no prompt bytes reproduce them; give --prompt instead");
    }
    *text = t;
    *len = l;
    return CIS2_OK;
}

int cli_receipt_write(const char *path, size_t idx, size_t np, const cis2_model *m, const char *text, size_t len,
                      const cis2_seq *s, size_t gen, cis2_error *err)
{
    if (gen > UINT32_MAX) return cis2_fail(err, CIS2_E_USAGE, "--receipt: gen-toks beyond u32");
    cis2_receipt r = {0};
    snprintf(r.spec_version, sizeof r.spec_version, "%s", CIS2_SPEC_VERSION);
    snprintf(r.dtype, sizeof r.dtype, "fp32");
    memcpy(r.weights_sha, m->weights_sha, 32);
    memcpy(r.config_sha, m->config_sha, 32);
    memcpy(r.tokenizer_sha, m->tokenizer_sha, 32);
    r.prompt = (uint8_t *)text;
    r.prompt_len = len;
    r.prompt_ids = (uint32_t *)s->prompt;
    r.n_prompt = s->n_prompt;
    r.gen_toks = (uint32_t)gen;
    memcpy(r.table_digest, m->table_digest, 32);
    memcpy(r.inv_freq_digest, m->inv_freq_digest, 32);
    r.generated = s->generated;
    memcpy(r.argmax, s->argmax, 32);
    memcpy(r.witness, s->witness, 32);
    char name[4200];
    if (np > 1) snprintf(name, sizeof name, "%s.%zu", path, idx); /* one receipt per prompt: FILE.0, FILE.1 ... */
    else snprintf(name, sizeof name, "%s", path);
    return cis2_receipt_save(name, &r, err);
}

/* ------------------------------------------------------------- verify */

static const char verify_usage[] = "usage: cis2 verify RECEIPT [--model-dir DIR] [--kernel K] [--threads N]\n";

int cmd_verify(int argc, char **argv)
{
    cli_engine eng = {0};
    const char *path = NULL;
    int rc;
    for (int i = 1; i < argc; i++) {
        if ((rc = cli_engine_opt("verify", argc, argv, &i, &eng)) >= 0) { if (rc) return rc; continue; }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(verify_usage, stdout); return 0; }
        if (argv[i][0] == '-' || path) return cli_usage_error("verify", "unexpected argument '%s'", argv[i]);
        path = argv[i];
    }
    if (!path) return cli_usage_error("verify", "needs a RECEIPT file");
    cis2_error err = {0};
    cis2_receipt r;
    if ((rc = cis2_receipt_load(path, &r, &err))) { printf("verdict: MALFORMED\n"); return cli_report(&err); }
    if (unsupported(&r)) {
        cis2_receipt_free(&r);
        return CIS2_E_UNSUPPORTED;
    }
    cis2_model m;
    cis2_tokenizer *tok = NULL;
    cis2_seq seq = {0};
    uint32_t *ids = NULL;
    size_t nids = 0;
    char path_tok[4200];
    if ((rc = cli_engine_start(&eng, &m, &err))) { cis2_receipt_free(&r); return cli_report(&err); }
    snprintf(path_tok, sizeof path_tok, "%s/tokenizer.json", eng.model_dir);
    if ((rc = cis2_tokenizer_load(&tok, path_tok, &err))) goto out;
    /* §3.1: the prompt bytes are the input; their ids are recomputed. */
    if ((rc = cis2_tokenizer_encode(tok, (const char *)r.prompt, r.prompt_len, &ids, &nids, &err))) {
        rc = reformat(&err, path);
        goto out;
    }
    if (nids == 0) { rc = cis2_fail(&err, CIS2_E_FORMAT, "%s: prompt-hex encodes to no tokens", path); goto out; }
    if (nids + r.gen_toks > (size_t)m.cfg.max_position_embeddings) {
        rc = cis2_fail(&err, CIS2_E_UNSUPPORTED, "%s: %zu prompt tokens + gen-toks %u exceed max_position_embeddings %lld",
                       path, nids, r.gen_toks, (long long)m.cfg.max_position_embeddings);
        goto out;
    }
    seq.prompt = ids;
    seq.n_prompt = nids;
    cis2_decode_opts o = {.gen_toks = r.gen_toks};
    if ((rc = cis2_run(&m, &seq, 1, &o, &err))) goto out; /* whole decode, twice (§12.4) */

    char art[256] = "", outs[512] = "";
#define ART(key, w, g) do { if (v_digest(key, w, g)) add_name(art, sizeof art, key); } while (0)
#define OUT(cond, key) do { if (cond) add_name(outs, sizeof outs, key); } while (0)
    ART("weights-sha256", r.weights_sha, m.weights_sha); /* recomputed from the files, never trusted */
    ART("config-sha256", r.config_sha, m.config_sha);
    ART("tokenizer-sha256", r.tokenizer_sha, m.tokenizer_sha);
    printf("prompt-hex input (%zu bytes)\n", r.prompt_len);
    OUT(v_ids("prompt-token-ids", r.prompt_ids, r.n_prompt, ids, nids), "prompt-token-ids");
    printf("gen-toks input (%u)\n", r.gen_toks);
    printf("dtype ok\n");
    OUT(v_digest("table-digest", r.table_digest, m.table_digest), "table-digest");
    OUT(v_digest("inv-freq-table-digest", r.inv_freq_digest, m.inv_freq_digest), "inv-freq-table-digest");
    OUT(v_ids("generated-token-ids", r.generated, r.gen_toks, seq.generated, r.gen_toks), "generated-token-ids");
    OUT(v_digest("argmax-digest", r.argmax, seq.argmax), "argmax-digest");
    OUT(v_digest("witness-digest", r.witness, seq.witness), "witness-digest");
#undef ART
#undef OUT
    if (art[0]) {
        printf("verdict: ARTIFACT-MISMATCH (%s)%s%s\n", art, outs[0] ? "; outputs differ too: " : "", outs);
        rc = CIS2_E_HASH;
    } else if (outs[0]) {
        printf("verdict: OUTPUT-MISMATCH (%s)\n", outs);
        rc = CIS2_E_MISMATCH;
    } else printf("verdict: OK (all fields recomputed from %s)\n", eng.model_dir);
    fflush(stdout);
    cis2_seq_free(&seq);
    free(ids);
    cis2_tokenizer_free(tok);
    cis2_model_free(&m);
    cis2_receipt_free(&r);
    return rc;
out:
    cis2_seq_free(&seq);
    free(ids);
    cis2_tokenizer_free(tok);
    cis2_model_free(&m);
    cis2_receipt_free(&r);
    return cli_report(&err);
}

/* -------------------------------------------------------------- check */

static const char check_usage[] = "usage: cis2 check RECEIPT [--tokenizer FILE] [--config FILE]\n";

int cmd_check(int argc, char **argv)
{
    const char *path = NULL, *tok_path = NULL, *cfg_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(check_usage, stdout); return 0; }
        if (!strcmp(a, "--tokenizer") || !strcmp(a, "--config")) {
            if (i + 1 >= argc) return cli_usage_error("check", "%s needs a value", a);
            *(a[2] == 't' ? &tok_path : &cfg_path) = argv[++i];
            continue;
        }
        if (a[0] == '-' || path) return cli_usage_error("check", "unexpected argument '%s'", a);
        path = a;
    }
    if (!path) return cli_usage_error("check", "needs a RECEIPT file");
    cis2_error err = {0};
    cis2_receipt r;
    int rc;
    if ((rc = cis2_receipt_load(path, &r, &err))) { printf("verdict: MALFORMED\n"); return cli_report(&err); }
    if (unsupported(&r)) {
        cis2_receipt_free(&r);
        return CIS2_E_UNSUPPORTED;
    }
    uint8_t cfg_sha[32], tok_sha[32], inv_digest[32], table[32], argmax[32];
    cis2_tokenizer *tok = NULL;
    uint32_t *ids = NULL;
    size_t nids = 0;
    if (cfg_path) {
        cis2_config c;
        if ((rc = cis2_config_load(&c, cfg_path, &err)) || (rc = cis2_sha256_file(cfg_path, cfg_sha, &err))) goto fail;
        size_t half = (size_t)c.head_dim / 2;
        float *inv = malloc((half ? half : 1) * sizeof(float));
        if (!inv) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto fail; }
        cis2_rope_inv_freq(c.rope_theta, (size_t)c.head_dim, inv); /* §7.1, as model.c */
        cis2_inv_freq_table_digest(inv, half, inv_digest);         /* §7.2 */
        free(inv);
    }
    if (tok_path) {
        if ((rc = cis2_tokenizer_load(&tok, tok_path, &err)) || (rc = cis2_sha256_file(tok_path, tok_sha, &err))) goto fail;
        if ((rc = cis2_tokenizer_encode(tok, (const char *)r.prompt, r.prompt_len, &ids, &nids, &err))) {
            rc = reformat(&err, path);
            goto fail;
        }
    }
    cis2_table_digest(table); /* §6.6 */
    { /* §12.2 over the receipt's own ids (u32 LE; the host is LE, decode.c): a consistency check */
        size_t n = r.n_prompt + r.gen_toks;
        uint32_t *all = malloc(n * sizeof *all);
        if (!all) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto fail; }
        memcpy(all, r.prompt_ids, r.n_prompt * sizeof *all);
        memcpy(all + r.n_prompt, r.generated, r.gen_toks * sizeof *all);
        cis2_sha256(all, n * sizeof *all, argmax);
        free(all);
    }
    char art[128] = "", outs[256] = "", unv[256] = "";
    add_name(unv, sizeof unv, "weights-sha256");
    printf("weights-sha256 unverified (needs the weights: cis2 verify)\n");
    if (cfg_path) { if (v_digest("config-sha256", r.config_sha, cfg_sha)) add_name(art, sizeof art, "config-sha256"); }
    else { printf("config-sha256 unverified (needs --config)\n"); add_name(unv, sizeof unv, "config-sha256"); }
    if (tok_path) { if (v_digest("tokenizer-sha256", r.tokenizer_sha, tok_sha)) add_name(art, sizeof art, "tokenizer-sha256"); }
    else { printf("tokenizer-sha256 unverified (needs --tokenizer)\n"); add_name(unv, sizeof unv, "tokenizer-sha256"); }
    printf("prompt-hex input (%zu bytes)\n", r.prompt_len);
    if (tok_path) { if (v_ids("prompt-token-ids", r.prompt_ids, r.n_prompt, ids, nids)) add_name(outs, sizeof outs, "prompt-token-ids"); }
    else { printf("prompt-token-ids unverified (needs --tokenizer)\n"); add_name(unv, sizeof unv, "prompt-token-ids"); }
    printf("gen-toks input (%u)\n", r.gen_toks);
    printf("dtype ok\n");
    if (v_digest("table-digest", r.table_digest, table)) add_name(outs, sizeof outs, "table-digest");
    if (cfg_path) { if (v_digest("inv-freq-table-digest", r.inv_freq_digest, inv_digest)) add_name(outs, sizeof outs, "inv-freq-table-digest"); }
    else { printf("inv-freq-table-digest unverified (needs --config)\n"); add_name(unv, sizeof unv, "inv-freq-table-digest"); }
    printf("generated-token-ids unverified (needs the weights: cis2 verify)\n");
    add_name(unv, sizeof unv, "generated-token-ids");
    if (memcmp(r.argmax, argmax, 32)) {
        v_digest("argmax-digest", r.argmax, argmax);
        add_name(outs, sizeof outs, "argmax-digest");
    } else printf("argmax-digest ok (consistent with the receipt's prompt and generated ids)\n");
    printf("witness-digest unverified (needs the weights: cis2 verify)\n");
    add_name(unv, sizeof unv, "witness-digest");
    if (art[0]) {
        printf("verdict: ARTIFACT-MISMATCH (%s)%s%s\n", art, outs[0] ? "; outputs differ too: " : "", outs);
        rc = CIS2_E_HASH;
    } else if (outs[0]) {
        printf("verdict: OUTPUT-MISMATCH (%s)\n", outs);
        rc = CIS2_E_MISMATCH;
    } else printf("verdict: CONSISTENT (unverified: %s)\n", unv);
    free(ids);
    cis2_tokenizer_free(tok);
    cis2_receipt_free(&r);
    return rc;
fail:
    free(ids);
    cis2_tokenizer_free(tok);
    cis2_receipt_free(&r);
    return cli_report(&err);
}

/* ------------------------------------------------------------ compare */

int cmd_compare(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: cis2 compare RECEIPT_A RECEIPT_B");
        return 0;
    }
    if (argc != 3) return cli_usage_error("compare", "needs exactly two receipts");
    cis2_error err = {0};
    cis2_receipt a, b;
    int rc;
    if ((rc = cis2_receipt_load(argv[1], &a, &err))) { printf("verdict: MALFORMED\n"); return cli_report(&err); }
    if ((rc = cis2_receipt_load(argv[2], &b, &err))) {
        cis2_receipt_free(&a);
        printf("verdict: MALFORMED\n");
        return cli_report(&err);
    }
    /* Inputs determine a run; everything else is derived from them. */
    char ins[256] = "", outs[256] = "";
    char ha[65], hb[65];
#define CMP_D(key, x, list) do {                                                        \
        if (memcmp(a.x, b.x, 32)) {                                                     \
            cli_hex(a.x, ha); cli_hex(b.x, hb);                                         \
            printf("%s DIFFERS a=%s b=%s\n", key, ha, hb); add_name(list, sizeof list, key); \
        } else printf("%s same\n", key);                                                \
    } while (0)
#define CMP_S(key, x, list) do {                                                        \
        if (strcmp(a.x, b.x)) {                                                         \
            printf("%s DIFFERS a=%s b=%s\n", key, a.x, b.x); add_name(list, sizeof list, key); \
        } else printf("%s same\n", key);                                                \
    } while (0)
    CMP_S("spec-version", spec_version, ins);
    CMP_D("weights-sha256", weights_sha, ins);
    CMP_D("config-sha256", config_sha, ins);
    CMP_D("tokenizer-sha256", tokenizer_sha, ins);
    if (a.prompt_len != b.prompt_len || memcmp(a.prompt, b.prompt, a.prompt_len)) {
        printf("prompt-hex DIFFERS (%zu bytes vs %zu bytes)\n", a.prompt_len, b.prompt_len);
        add_name(ins, sizeof ins, "prompt-hex");
    } else printf("prompt-hex same\n");
    if (!ids_equal(a.prompt_ids, a.n_prompt, b.prompt_ids, b.n_prompt)) {
        printf("prompt-token-ids DIFFERS\n");
        add_name(outs, sizeof outs, "prompt-token-ids");
    } else printf("prompt-token-ids same\n");
    if (a.gen_toks != b.gen_toks) {
        printf("gen-toks DIFFERS a=%u b=%u\n", a.gen_toks, b.gen_toks);
        add_name(ins, sizeof ins, "gen-toks");
    } else printf("gen-toks same\n");
    CMP_S("dtype", dtype, ins);
    CMP_D("table-digest", table_digest, outs);
    CMP_D("inv-freq-table-digest", inv_freq_digest, outs);
    uint32_t common = a.gen_toks < b.gen_toks ? a.gen_toks : b.gen_toks;
    size_t first = common;
    for (size_t i = 0; i < common; i++)
        if (a.generated[i] != b.generated[i]) { first = i; break; }
    if (first < common || a.gen_toks != b.gen_toks) {
        if (first < common) printf("generated-token-ids DIFFERS from step %zu (a=%u b=%u)\n", first, a.generated[first], b.generated[first]);
        else printf("generated-token-ids DIFFERS (lengths %u and %u, equal on the first %u)\n", a.gen_toks, b.gen_toks, common);
        add_name(outs, sizeof outs, "generated-token-ids");
    } else printf("generated-token-ids same\n");
    CMP_D("argmax-digest", argmax, outs);
    CMP_D("witness-digest", witness, outs);
#undef CMP_D
#undef CMP_S
    int same_witness = !memcmp(a.witness, b.witness, 32);
    /* Same run but for gen-toks: greedy step i never depends on gen-toks,
     * so every derived value except the length-dependent digests must agree
     * on the common prefix. */
    int only_len = !strcmp(ins, "gen-toks");
    if (!ins[0] && !outs[0]) {
        printf("verdict: SAME\n");
        rc = CIS2_OK;
    } else if (!ins[0]) {
        printf("verdict: CONTRADICTION (same inputs, different %s)\n", outs);
        rc = CIS2_E_MISMATCH;
    } else if (same_witness) {
        printf("verdict: WITNESS-COLLISION (different %s, same witness-digest: at least one receipt is forged)\n", ins);
        rc = CIS2_E_MISMATCH;
    } else if (only_len && (first < common || memcmp(a.table_digest, b.table_digest, 32) ||
                            memcmp(a.inv_freq_digest, b.inv_freq_digest, 32) ||
                            !ids_equal(a.prompt_ids, a.n_prompt, b.prompt_ids, b.n_prompt))) {
        printf("verdict: CONTRADICTION (same inputs but gen-toks, yet they disagree within the first %u steps)\n",
               common);
        rc = CIS2_E_MISMATCH;
    } else {
        printf("verdict: DIFFERENT-RUN (different %s)\n", ins);
        rc = CIS2_OK;
    }
    cis2_receipt_free(&a);
    cis2_receipt_free(&b);
    return rc;
}

/* --------------------------------------------------------------- diff */

static void rec_name(const cis2_trace_rec *r, char *out, size_t cap)
{
    snprintf(out, cap, "step %u pos %u layer %d tensor %s (n=%llu)", r->step, r->pos, r->layer, r->tensor,
             (unsigned long long)r->n);
}

int cmd_diff(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: cis2 diff TRACE_A TRACE_B");
        return 0;
    }
    if (argc != 3) return cli_usage_error("diff", "needs exactly two trace files (cis2 run --trace)");
    cis2_error err = {0};
    cis2_trace a, b;
    if (cis2_trace_load(&a, argv[1], &err)) return cli_report(&err);
    if (cis2_trace_load(&b, argv[2], &err)) { cis2_trace_free(&a); return cli_report(&err); }
    int rc = CIS2_OK;
    size_t n = a.n < b.n ? a.n : b.n, i;
    char na[160], nb[160];
    for (i = 0; i < n; i++) {
        const cis2_trace_rec *x = &a.rec[i], *y = &b.rec[i];
        if (x->step != y->step || x->pos != y->pos || x->layer != y->layer || strcmp(x->tensor, y->tensor) ||
            x->n != y->n) {
            rec_name(x, na, sizeof na);
            rec_name(y, nb, sizeof nb);
            printf("identical: %zu tensors\n", i);
            printf("structure differs at A line %zu / B line %zu: A has %s, B has %s (different model shape, prompt "
                   "or decode mode)\n", x->line, y->line, na, nb);
            rc = CIS2_E_MISMATCH;
            goto out;
        }
        if (memcmp(x->sha, y->sha, 32)) break;
    }
    if (i == n) {
        if (a.n == b.n) printf("identical: all %zu tensors\n", n);
        else {
            printf("identical: %zu tensors\n", n);
            printf("%s has %zu more tensors (a longer decode)\n", a.n > b.n ? "A" : "B", a.n > b.n ? a.n - n : b.n - n);
            rc = CIS2_E_MISMATCH;
        }
        goto out;
    }
    rc = CIS2_E_MISMATCH;
    rec_name(&a.rec[i], na, sizeof na);
    printf("identical: %zu tensors\n", i);
    printf("first difference: %s (A line %zu, B line %zu)\n", na, a.rec[i].line, b.rec[i].line);
    if (!a.dump || !b.dump) {
        printf("element values unavailable: %s written without --trace-dump\n",
               !a.dump && !b.dump ? "both traces" : !a.dump ? "trace A" : "trace B");
        goto out;
    }
    float *va = NULL, *vb = NULL;
    if (cis2_trace_values(&a, i, &va, &err) || cis2_trace_values(&b, i, &vb, &err)) {
        free(va);
        rc = cli_report(&err);
        goto out;
    }
    size_t first = SIZE_MAX, count = 0;
    for (size_t e = 0; e < a.rec[i].n; e++) {
        uint32_t ua, ub;
        memcpy(&ua, &va[e], 4);
        memcpy(&ub, &vb[e], 4);
        if (ua != ub) { if (first == SIZE_MAX) first = e; count++; }
    }
    if (first != SIZE_MAX) {
        uint32_t ua, ub;
        memcpy(&ua, &va[first], 4);
        memcpy(&ub, &vb[first], 4);
        printf("first differing element: index %zu: A=0x%08x (%.9g) B=0x%08x (%.9g)\n", first, ua, (double)va[first],
               ub, (double)vb[first]);
        printf("differing elements: %zu of %llu\n", count, (unsigned long long)a.rec[i].n);
    }
    free(va);
    free(vb);
out:
    if (rc == CIS2_E_MISMATCH) printf("verdict: DIVERGED\n");
    else if (rc == CIS2_OK) printf("verdict: IDENTICAL\n");
    cis2_trace_free(&a);
    cis2_trace_free(&b);
    return rc;
}

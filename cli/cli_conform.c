/*
 * cli_conform.c - `cis2 conform`: the §13.1 conformance test (and, with
 * --all, the longer whole-run vectors of FACTS.md §5) on the real
 * SmolLM2-135M checkpoint.  The three pinned artifact hashes (§2.1) are
 * checked first and a mismatch fails loudly (exit 6) with both values.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *file, *sha; } pinned[3] = { /* §2.1 */
    {"model.safetensors", "80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1"},
    {"config.json", "1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843"},
    {"tokenizer.json", "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c"},
};

#define TABLE_DIGEST "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d"
#define INV_FREQ_DIGEST "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12"

typedef struct vector {
    const char *prompt;
    size_t gen;
    const char *ids;      /* prompt ids, or NULL if unpinned */
    const char *generated;/* or NULL */
    const char *ref, *argmax; /* argmax may be NULL */
} vector;

static const vector v131 = { /* §13.1 */
    "Once upon a time", 16, "6403,1980,253,655",
    "28,665,436,253,1838,8180,3365,14176,30,2306,4161,281,253,2066,2291,351",
    "d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df",
    "0b9c8f3ac90d0b9cd5f1719ac327dca1fc639fd87468305fccebbe3d56f67aff"};

static const vector facts5[] = { /* FACTS.md §5 */
    {"Once upon a time", 64, NULL, NULL, "fa75e57e9d9173e9ab84ca12e300ce923fdfbb9eb4d97730b91941e2da4a55ae",
     "8b59866ec22a32fae0b55a6a864fa081cc5692e962f9b21e4490253520ba881e"},
    {"Once upon a time", 128, NULL, NULL, "22f69ad87a615d66a77efaca8b1172d22bdfb4bd5092ceffd302e35669a050f6", NULL},
    {"Once upon a time", 256, NULL, NULL, "8824a22600faa57bcee3a00c8139f4ee3ddc4d1be3188ec1426aa596c3515cc2",
     "3b58d24cad757b7d72c1720674879208e51e6aef2f698b33017d701a087a5ec8"},
    {"The quick brown fox jumps over the lazy dog", 16, NULL, NULL,
     "d385cef0d855fe230748f9fae943d18a69b786cffc63b4b831b6e4f97e6b47b7",
     "486f2b3a317dd823fee3618f3eb25156379878b06cd07e576d36e9cf786eb995"},
    {"1234567890 + 9876543210 =", 16, NULL, NULL, "4caad3f9b8cc6c57d802774313b30e9d74449339e1586d65c8e20dda0fd1ab79",
     "3d55e42e6e855ee7dd01321841d8dc2f7ffd236a46471fa35cc95af2be7ec5d4"},
    {"def f(x): return x * 2", 16, NULL, NULL, "7675e3537c1a62f8136e67b74615a16a8eb9c03ce46c32d6967e09ef5e9b1c71",
     "0bb484df1a91054113be9fc0557a3228544949128e95fe88294cec809894a193"},
    {"A", 32, NULL, NULL, "84e4b87c94f2c58eb77b934bc8bbb7a21741a292e07aa32562f6f5ef0c9e83ac",
     "a28275bbea2af58158e70f9e2c91ff1f67b6a04a5c75e4807a2ee9c0fef916a7"},
};

static int check(const char *name, const char *want, const char *got, int *fails)
{
    int ok = !strcmp(want, got);
    if (ok) printf("PASS %s = %s\n", name, got);
    else { printf("FAIL %s: expected %s, got %s\n", name, want, got); (*fails)++; }
    return ok;
}

static int run_vector(cis2_engine *e, const vector *v, int full, int *fails, cis2_error *err)
{
    const cis2_model_info *mi = cis2_engine_info(e);
    cis2_request q = {.text = v->prompt, .text_len = strlen(v->prompt), .max_tokens = v->gen};
    cis2_gen_opts o = {.twice = 1}; /* §12.4 */
    cis2_result *r;
    printf("-- prompt \"%s\", %zu tokens\n", v->prompt, v->gen);
    int rc = cis2_generate(e, &q, 1, &o, &r, err);
    if (rc) return rc;
    char h[65], *c;
    if (v->ids) { c = cli_ids_csv(r->prompt_ids, r->n_prompt); check("prompt_token_ids", v->ids, c ? c : "", fails); free(c); }
    if (v->generated) { c = cli_ids_csv(r->tokens, r->n_tokens); check("generated_token_ids", v->generated, c ? c : "", fails); free(c); }
    if (full) {
        cli_hex(mi->table_digest, h); check("table_digest", TABLE_DIGEST, h, fails);
        cli_hex(mi->inv_freq_table_digest, h); check("inv_freq_table_digest", INV_FREQ_DIGEST, h, fails);
    }
    if (v->argmax) { cli_hex(r->argmax_digest, h); check("argmax_digest", v->argmax, h, fails); }
    cli_hex(r->witness, h); check("CIS2_REF", v->ref, h, fails);
    cis2_results_free(r, 1);
    return CIS2_OK;
}

int cmd_conform(int argc, char **argv)
{
    cli_engine eng = {0};
    int all = 0;
    cli_opt opts[] = {CLI_ENGINE_OPTS(eng), {"--all", OPT_FLAG, &all, 0, 0}, {0}};
    int rc = cli_parse("conform", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc < 0 ? 0 : rc;
    if (!eng.model_dir) eng.model_dir = "models/SmolLM2-135M";
    cis2_error err = {0};
    int fails = 0;
    uint8_t want[3][32];
    for (int i = 0; i < 3; i++) { /* §2.1: verify before use, fail loudly */
        char path[4200], h[65];
        uint8_t d[32];
        snprintf(path, sizeof path, "%s/%s", eng.model_dir, pinned[i].file);
        if ((rc = cis2_sha256_file(path, d, &err))) return cli_report(&err);
        cli_hex(d, h);
        cis2_unhex32(pinned[i].sha, want[i]);
        if (strcmp(h, pinned[i].sha)) {
            printf("FAIL %s sha256: expected %s, got %s\n", pinned[i].file, pinned[i].sha, h);
            fails++;
        } else printf("PASS %s sha256 = %s\n", pinned[i].file, h);
    }
    if (fails) {
        fflush(stdout);
        fprintf(stderr, "cis2: conform: %d pinned artifact hash(es) differ (§2.1); refusing to run\n", fails);
        return CIS2_E_HASH;
    }
    /* the engine checks the bytes it loads against the same pins */
    cis2_engine_opts eo = {.threads = (int)eng.threads, .kernel = eng.kernel, .expect_weights_sha256 = want[0],
                           .expect_config_sha256 = want[1], .expect_tokenizer_sha256 = want[2]};
    cis2_engine *e;
    if ((rc = cis2_engine_open(&e, eng.model_dir, &eo, &err))) return cli_report(&err);
    rc = run_vector(e, &v131, 1, &fails, &err);
    for (size_t i = 0; all && !rc && i < sizeof facts5 / sizeof facts5[0]; i++) rc = run_vector(e, &facts5[i], 0, &fails, &err);
    cis2_engine_close(e);
    if (rc) return cli_report(&err);
    printf("conform=%s\n", fails ? "FAIL" : "PASS");
    return cli_finish_stdout(fails ? CIS2_E_MISMATCH : CIS2_OK);
}

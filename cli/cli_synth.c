/*
 * cli_synth.c - `cis2 synth (--shape NAME | --config FILE) --seed N --out DIR
 * [--tokenizer FILE]` writes a deterministic synthetic checkpoint; `cis2
 * synth --list` prints the shapes (include/cis2_toolkit.h section 4).
 */
#include "cli.h"

#include <string.h>
#include <sys/stat.h>

/* Before any work (docs/inputs.md "Outputs"): when DIR exists already,
 * none of its three files may be --config or --tokenizer (a copy written
 * over its own source), and each must be writable there. */
static int check_outputs(const char *dir, const char *config, const char *tok, cis2_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0) return CIS2_OK; /* made by the synth, empty */
    static const char *const names[3] = {"tokenizer.json", "config.json", "model.safetensors"};
    const char *inputs[2] = {config, tok};
    char outs[3][4200];
    const char *op[3];
    for (int i = 0; i < 3; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/%s", dir, names[i]);
        op[i] = outs[i];
        int rc = cis2_check_output_path(outs[i], inputs, 2, op, (size_t)i, err);
        if (rc) return rc;
    }
    return CIS2_OK;
}

int cmd_synth(int argc, char **argv)
{
    const char *shape = NULL, *out = NULL, *tok = NULL, *config = NULL;
    uint64_t seed = 0;
    int list = 0;
    cli_opt opts[] = {{"--shape", OPT_STR, &shape, 0, 0},   {"--seed", OPT_U64, &seed, 0, 0},
                      {"--out", OPT_STR, &out, 0, 0},       {"--tokenizer", OPT_STR, &tok, 0, 0},
                      {"--config", OPT_STR, &config, 0, 0}, {"--list", OPT_FLAG, &list, 0, 0},
                      {0}};
    int rc = cli_parse("synth", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc < 0 ? 0 : rc;
    if (list) {
        for (size_t k = 0; k < cis2_synth_shape_count(); k++) {
            const cis2_synth_shape *s = cis2_synth_shape_at(k);
            printf("%-13s %s hidden=%lld inter=%lld layers=%lld heads=%lld kv=%lld vocab=%lld %s%s\n", s->name,
                   s->model_type, (long long)s->hidden, (long long)s->inter, (long long)s->layers,
                   (long long)s->heads, (long long)s->kv_heads, (long long)s->vocab, s->tied ? "tied" : "untied",
                   s->qkv_bias ? " qkv-bias" : "");
        }
        return cli_finish_stdout(CIS2_OK);
    }
    if (!!shape == !!config || !opts[1].seen || !out)
        return cli_usage_error("synth", "needs (--shape NAME | --config FILE) --seed N --out DIR");
    if (!*out) return cli_usage_error("synth", "--out: empty path");
    if (shape && !cis2_synth_find_shape(shape)) return cli_usage_error("synth", "unknown shape '%s' (try --list)", shape);
    cis2_error err = {0};
    if ((rc = check_outputs(out, config, tok, &err))) return cli_report(&err);
    if (shape ? cis2_synth_write(shape, seed, out, tok, &err) : cis2_synth_write_config(config, seed, out, tok, &err))
        return cli_report(&err);
    printf("synth: %s=%s seed=%llu -> %s\n", shape ? "shape" : "config", shape ? shape : config,
           (unsigned long long)seed, out);
    return cli_finish_stdout(CIS2_OK);
}

/*
 * cli_synth.c - `cis2 synth --shape NAME --seed N --out DIR [--tokenizer FILE]`
 * writes a deterministic synthetic checkpoint (synth.h); `cis2 synth --list`
 * prints the shapes.
 */
#include "cli.h"
#include "synth.h"

#include <stdio.h>
#include <string.h>

static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int cmd_synth(int argc, char **argv)
{
    const char *shape = NULL, *seed_s = NULL, *out = NULL, *tok = NULL, *config = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--list")) {
            for (size_t k = 0; k < cis2_synth_shape_count(); k++) {
                const cis2_synth_shape *s = cis2_synth_shape_at(k);
                printf("%-13s %s hidden=%lld inter=%lld layers=%lld heads=%lld kv=%lld vocab=%lld %s%s\n", s->name,
                       s->model_type, (long long)s->hidden, (long long)s->inter, (long long)s->layers,
                       (long long)s->heads, (long long)s->kv_heads, (long long)s->vocab,
                       s->tied ? "tied" : "untied", s->qkv_bias ? " qkv-bias" : "");
            }
            return CIS2_OK;
        }
        const char **dst = !strcmp(a, "--shape") ? &shape : !strcmp(a, "--seed") ? &seed_s
                         : !strcmp(a, "--out") ? &out : !strcmp(a, "--tokenizer") ? &tok
                         : !strcmp(a, "--config") ? &config : NULL;
        if (!dst) return cli_usage_error("synth", "unknown argument '%s'", a);
        if (i + 1 >= argc) return cli_usage_error("synth", "%s needs a value", a);
        if (*dst) return cli_usage_error("synth", "%s given twice", a);
        *dst = argv[++i];
    }
    if (!!shape == !!config || !seed_s || !out)
        return cli_usage_error("synth", "usage: cis2 synth (--shape NAME | --config FILE) --seed N --out DIR [--tokenizer FILE] | --list");
    if (shape && !cis2_synth_find_shape(shape)) return cli_usage_error("synth", "unknown shape '%s' (try --list)", shape);
    uint64_t seed;
    if (parse_u64(seed_s, &seed)) return cli_usage_error("synth", "--seed must be a decimal integer < 2^64");
    cis2_error err = {0};
    if (shape ? cis2_synth_write(shape, seed, out, tok, &err) : cis2_synth_write_config(config, seed, out, tok, &err))
        return cli_report(&err);
    printf("synth: %s=%s seed=%llu -> %s\n", shape ? "shape" : "config", shape ? shape : config,
           (unsigned long long)seed, out);
    return CIS2_OK;
}

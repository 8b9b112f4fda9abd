/*
 * cli_receipt.c - receipts and traces on the command line, printing the
 * library's verdicts (include/cis2.h sections 7 and 8):
 *   cis2 verify RECEIPT...  recompute everything receipts claim (§2.1, §12)
 *                           (--manifest, --shard, --merge: cli_verify_shard.c)
 *   cis2 check RECEIPT      recompute what needs no weights
 *   cis2 compare A B        judge two receipts against each other
 *   cis2 diff TA TB         first divergence between two traces
 * One receipt: a line per field (`KEY ok`, `KEY MISMATCH expected=RECEIPT
 * got=RECOMPUTED`, `KEY input (...)`, `KEY unverified (...)`), then
 * `verdict: ...`.  Several: `PATH: verdict: ...` each, then a summary line.
 * Exit codes: 0 ok, 1 output mismatch / contradiction, 4 malformed receipt
 * or trace, 5 a spec version or dtype this build does not run, 6 artifact
 * mismatch; several receipts exit with the highest of their codes.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- verify */

#define VERIFY_MAX 4096 /* receipts on one command line */

typedef struct verify_cli {
    cli_engine eng;
    const char *replay, *dump;
    int twice;
    const char **paths;
    size_t n;
    cis2_receipt **rs;          /* NULL where the file is malformed */
    cis2_error *load_err;       /* why */
    cis2_verdict **pre;         /* cis2_check of each: UNSUPPORTED needs no weights */
} verify_cli;

typedef struct dump_ctx { cis2_out *out; int failed; } dump_ctx;

static int dump_step(void *ctx, const cis2_token_event *ev)
{
    dump_ctx *d = ctx;
    if (!d->failed && fwrite(ev->logits, sizeof(float), ev->vocab, cis2_out_stream(d->out)) != ev->vocab)
        d->failed = 1;
    return 0;
}

static int verify_parse(int argc, char **argv, verify_cli *c, int *mode)
{
    cli_opt opts[] = {CLI_ENGINE_OPTS(c->eng),
                      {"--replay", OPT_STR, &c->replay, 0, 0},
                      {"--twice", OPT_FLAG, &c->twice, 0, 0},
                      {"--dump-logits", OPT_STR, &c->dump, 0, 0},
                      {0}};
    int rc = cli_parse("verify", argc, argv, opts, c->paths, VERIFY_MAX, &c->n);
    if (rc) return rc;
    *mode = CIS2_REPLAY_PREFILL;
    if (c->replay && !strcmp(c->replay, "decode")) *mode = CIS2_REPLAY_DECODE;
    else if (c->replay && strcmp(c->replay, "prefill"))
        return cli_usage_error("verify", "--replay is prefill or decode, not '%s'", c->replay);
    if (c->n == 0) return cli_usage_error("verify", "needs a RECEIPT file");
    if (c->dump && !*c->dump) return cli_usage_error("verify", "--dump-logits: empty path");
    if (c->dump && c->n != 1) return cli_usage_error("verify", "--dump-logits takes one receipt");
    return CIS2_OK;
}

/* Loads every receipt; a malformed one is reported, not fatal (with one
 * receipt it is: exit 4). */
static int verify_load(verify_cli *c, cis2_error *err)
{
    for (size_t i = 0; i < c->n; i++) {
        int rc = cis2_receipt_load(c->paths[i], &c->rs[i], &c->load_err[i]);
        if (rc == CIS2_E_NOMEM) return cis2_fail(err, rc, "%s", c->load_err[i].msg);
        if (rc) continue;
        if ((rc = cis2_check(c->rs[i], NULL, NULL, 0, &c->pre[i], err))) return rc;
    }
    return CIS2_OK;
}

static void verify_print(const verify_cli *c, cis2_verdict *const *v, int *worst)
{
    size_t count[16] = {0}, malformed = 0;
    const char *name[16] = {0};
    for (size_t i = 0; i < c->n; i++) {
        if (!c->rs[i]) {
            int code = c->load_err[i].code;
            if (c->n == 1) printf("verdict: MALFORMED\n");
            else printf("%s: verdict: MALFORMED (%s)\n", c->paths[i], c->load_err[i].msg);
            malformed++;
            if (code > *worst) *worst = code;
            continue;
        }
        if (c->n == 1) cli_print_verdict(v[i], 0);
        else printf("%s: verdict: %s\n", c->paths[i], v[i]->summary);
        if (v[i]->code > *worst) *worst = v[i]->code;
        count[v[i]->kind & 15]++;
        name[v[i]->kind & 15] = v[i]->name;
    }
    if (c->n == 1) return;
    printf("summary: %zu receipts:", c->n);
    const char *sep = " ";
    for (int k = 0; k < 16; k++)
        if (count[k]) { printf("%s%zu %s", sep, count[k], name[k]); sep = ", "; }
    if (malformed) printf("%s%zu MALFORMED", sep, malformed);
    printf("\n");
}

int cmd_verify(int argc, char **argv)
{
    verify_cli c = {0};
    int mode;
    cis2_error err = {0};
    cis2_engine *e = NULL;
    cis2_verdict *vs = NULL, **show = NULL;
    cis2_receipt **todo = NULL;
    size_t *which = NULL, k = 0;
    dump_ctx dc = {0};
    int rc, worst = CIS2_OK;
    if (cli_verify_many_wanted(argc, argv)) return cmd_verify_many(argc, argv); /* --manifest, --merge */
    if (!(c.paths = calloc(VERIFY_MAX, sizeof *c.paths))) return cli_report(&(cis2_error){CIS2_E_NOMEM, "out of memory"});
    if ((rc = verify_parse(argc, argv, &c, &mode))) { free(c.paths); return rc < 0 ? 0 : rc; }
    c.rs = calloc(c.n, sizeof *c.rs);
    c.load_err = calloc(c.n, sizeof *c.load_err);
    c.pre = calloc(c.n, sizeof *c.pre);
    show = calloc(c.n, sizeof *show);
    todo = calloc(c.n, sizeof *todo);
    which = calloc(c.n, sizeof *which);
    if (!c.rs || !c.load_err || !c.pre || !show || !todo || !which) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto out; }
    if ((rc = verify_load(&c, &err))) goto out;
    if (c.n == 1 && !c.rs[0]) { /* one malformed receipt: say so, exit 4 */
        printf("verdict: MALFORMED\n");
        err = c.load_err[0];
        rc = err.code;
        goto out;
    }
    for (size_t i = 0; i < c.n; i++) {
        show[i] = c.pre[i];
        if (c.rs[i] && c.pre[i]->kind != CIS2_VERDICT_UNSUPPORTED) { todo[k] = c.rs[i]; which[k++] = i; }
    }
    if (k) {
        char in[3][4200];
        cli_engine_inputs(&c.eng, in);
        const char *inputs[4] = {in[0], in[1], in[2], c.paths[0]};
        if (c.dump && ((rc = cis2_check_output_path(c.dump, inputs, 4, NULL, 0, &err)) ||
                       (rc = cli_check_not_weights(&c.eng, c.dump, &err)) || (rc = cli_probe_output(c.dump, &err))))
            goto out;
        if ((rc = cli_engine_open(&c.eng, &e, &err))) goto out;
        if (c.dump && (rc = cis2_out_open(&dc.out, c.dump, &err))) goto out;
        cis2_verify_opts vo = {.replay = mode, .twice = c.twice, .on_step = c.dump ? dump_step : NULL, .on_step_ctx = &dc};
        if ((rc = cis2_verify(e, todo, k, &vo, &vs, &err))) goto out;
        for (size_t j = 0; j < k; j++) show[which[j]] = &vs[j];
        if (dc.out) {
            cis2_out *o = dc.out;
            dc.out = NULL;
            if (dc.failed) { cis2_out_abort(o); rc = cis2_fail(&err, CIS2_E_IO, "%s: write failed", c.dump); goto out; }
            if ((rc = cis2_out_commit(o, &err))) goto out;
        }
    }
    verify_print(&c, show, &worst);
    if (c.n == 1 && show[0] && show[0]->kind == CIS2_VERDICT_MALFORMED) fprintf(stderr, "cis2: %s\n", show[0]->summary);
    rc = worst;
out:
    cis2_out_abort(dc.out);
    cis2_verdicts_free(vs, k);
    for (size_t i = 0; c.pre && i < c.n; i++) cis2_verdicts_free(c.pre[i], 1);
    for (size_t i = 0; c.rs && i < c.n; i++) cis2_receipt_free(c.rs[i]);
    free(c.pre);
    free(c.rs);
    free(c.load_err);
    free(c.paths);
    free(show);
    free(todo);
    free(which);
    cis2_engine_close(e);
    if (err.code) return cli_report(&err);
    return cli_finish_stdout(rc);
}

/* -------------------------------------------------------------- check */

int cmd_check(int argc, char **argv)
{
    const char *tok = NULL, *cfg = NULL, *path = NULL;
    int ext = 0;
    cli_opt opts[] = {{"--tokenizer", OPT_STR, &tok, 0, 0},
                      {"--config", OPT_STR, &cfg, 0, 0},
                      {"--tokenizer-ext", OPT_FLAG, &ext, 0, 0},
                      {0}};
    size_t n = 0;
    int rc = cli_parse("check", argc, argv, opts, &path, 1, &n);
    if (rc) return rc < 0 ? 0 : rc;
    if (!path) return cli_usage_error("check", "needs a RECEIPT file");
    cis2_error err = {0};
    cis2_receipt *r;
    if ((rc = cis2_receipt_load(path, &r, &err))) { printf("verdict: MALFORMED\n"); return cli_report(&err); }
    cis2_verdict *v;
    rc = cis2_check(r, tok, cfg, ext ? CIS2_OPEN_TOKENIZER_EXT : 0, &v, &err);
    cis2_receipt_free(r);
    if (rc) return cli_report(&err);
    cli_print_verdict(v, 0);
    rc = v->code;
    cis2_verdicts_free(v, 1);
    return cli_finish_stdout(rc);
}

/* ------------------------------------------------------------ compare */

int cmd_compare(int argc, char **argv)
{
    const char *pos[2] = {0};
    size_t n = 0;
    cli_opt opts[] = {{0}};
    int rc = cli_parse("compare", argc, argv, opts, pos, 2, &n);
    if (rc) return rc < 0 ? 0 : rc;
    if (n != 2) return cli_usage_error("compare", "needs exactly two receipts");
    cis2_error err = {0};
    cis2_receipt *a = NULL, *b = NULL;
    if ((rc = cis2_receipt_load(pos[0], &a, &err)) || (rc = cis2_receipt_load(pos[1], &b, &err))) {
        cis2_receipt_free(a);
        printf("verdict: MALFORMED\n");
        return cli_report(&err);
    }
    cis2_verdict *v;
    rc = cis2_compare(a, b, &v, &err);
    cis2_receipt_free(a);
    cis2_receipt_free(b);
    if (rc) return cli_report(&err);
    cli_print_verdict(v, 0);
    rc = v->code;
    cis2_verdicts_free(v, 1);
    return cli_finish_stdout(rc);
}

/* --------------------------------------------------------------- diff */

int cmd_diff(int argc, char **argv)
{
    const char *pos[2] = {0};
    size_t n = 0;
    cli_opt opts[] = {{0}};
    int rc = cli_parse("diff", argc, argv, opts, pos, 2, &n);
    if (rc) return rc < 0 ? 0 : rc;
    if (n != 2) return cli_usage_error("diff", "needs exactly two trace files (cis2 run --trace)");
    cis2_error err = {0};
    cis2_verdict *v;
    if ((rc = cis2_trace_diff(pos[0], pos[1], &v, &err))) return cli_report(&err);
    cli_print_verdict(v, 1);
    rc = v->code;
    cis2_verdicts_free(v, 1);
    return cli_finish_stdout(rc);
}

/*
 * cli_run.c - `cis2 run` and `cis2 conform`: the whole CIS-2 run (§3.4,
 * §12, §13) from the command line.
 *
 * run prints, per prompt, the §13.1 lines in this order, then the spec's
 * CIS2_REF line and the decoded completion; --json prints the same fields
 * as one JSON object (an array of them for several prompts).  Several
 * prompts (--prompt-file) decode together, sharing every weight pass; each
 * sequence's digests equal its single-sequence run.
 */
#include "cli.h"
#include "decode.h"
#include "digest.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"
#include "trace.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MODEL_DIR "models/SmolLM2-135M"
#define DEFAULT_PROMPT "Once upon a time"

/* ---------------------------------------------------------- shared bits */

int cli_parse_size(const char *cmd, const char *opt, const char *s, size_t max, size_t *out)
{
    if (!s || !*s) return cli_usage_error(cmd, "%s needs a number", opt);
    size_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return cli_usage_error(cmd, "%s: '%s' is not a non-negative integer", opt, s);
        if (v > (max - (size_t)(*p - '0')) / 10) return cli_usage_error(cmd, "%s: %s is too large (max %zu)", opt, s, max);
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return CIS2_OK;
}

int cli_parse_ids(const char *cmd, const char *csv, uint32_t **ids, size_t *n)
{
    size_t cap = 1;
    for (const char *p = csv; *p; p++) cap += *p == ',';
    *ids = malloc(cap * sizeof(uint32_t));
    if (!*ids) return cli_usage_error(cmd, "out of memory");
    *n = 0;
    const char *p = csv;
    for (;;) {
        const char *e = p;
        uint64_t v = 0;
        while (*e >= '0' && *e <= '9') {
            v = v * 10 + (uint64_t)(*e - '0');
            if (v > UINT32_MAX) break;
            e++;
        }
        if (e == p || v > UINT32_MAX || (*e && *e != ',')) {
            free(*ids); *ids = NULL;
            return cli_usage_error(cmd, "--prompt-ids: '%s' is not a comma-separated list of u32 ids", csv);
        }
        (*ids)[(*n)++] = (uint32_t)v;
        if (!*e) break;
        p = e + 1;
    }
    return CIS2_OK;
}

/* Engine options every model-running command shares. */
int cli_engine_opt(const char *cmd, int argc, char **argv, int *i, cli_engine *e)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--model-dir") || !strcmp(a, "--kernel") || !strcmp(a, "--threads")) {
        if (*i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
        const char *v = argv[++*i];
        if (!strcmp(a, "--model-dir")) e->model_dir = v;
        else if (!strcmp(a, "--kernel")) e->kernel = v;
        else {
            size_t t;
            int rc = cli_parse_size(cmd, a, v, 1024, &t);
            if (rc) return rc;
            e->threads = (int)t;
        }
        return CIS2_OK;
    }
    return -1; /* not an engine option */
}

int cli_engine_start(cli_engine *e, cis2_model *m, cis2_error *err)
{
    int rc;
    if ((rc = cis2_kernel_select(e->kernel ? e->kernel : "auto", err))) return rc;
    if ((rc = cis2_threads_set(e->threads, err))) return rc;
    if (!e->model_dir) e->model_dir = DEFAULT_MODEL_DIR;
    return cis2_model_load(m, e->model_dir, err);
}

void cli_hex(const uint8_t d[32], char out[65]) { cis2_hex(d, 32, out); }

/* ---------------------------------------------------------------- prompts */

typedef struct prompt {
    char *text;      /* raw bytes (NULL for --prompt-ids) */
    size_t len;
    uint32_t *ids;
    size_t n;
} prompt;

static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; }
        else return 0;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

static int read_file(const char *path, char **buf, size_t *len, cis2_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return cis2_fail(err, CIS2_E_IO, "%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) { fclose(f); return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); }
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= (256u << 20)) { free(b); fclose(f); return cis2_fail(err, CIS2_E_FORMAT, "%s: larger than 256 MiB", path); }
        cap *= 2;
        char *nb = realloc(b, cap);
        if (!nb) free(b);
        b = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(b); return cis2_fail(err, CIS2_E_IO, "%s: read error", path); }
    b[n] = 0; /* n < cap */
    *buf = b;
    *len = n;
    return CIS2_OK;
}

/* A prompt file: a JSON array of strings, or one prompt per line. */
static int load_prompt_file(const char *path, prompt **ps, size_t *np, cis2_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len, err);
    if (rc) return rc;
    *ps = NULL;
    *np = 0;
    size_t k = 0;
    while (k < len && (buf[k] == ' ' || buf[k] == '\t' || buf[k] == '\n' || buf[k] == '\r')) k++;
    if (k < len && buf[k] == '[') {
        json_error_t je;
        json_t *arr = json_loadb(buf, len, 0, &je);
        if (!arr || !json_is_array(arr)) {
            json_decref(arr);
            free(buf);
            return cis2_fail(err, CIS2_E_FORMAT, "%s: line %d: %s", path, je.line, arr ? "not a JSON array" : je.text);
        }
        size_t n = json_array_size(arr);
        *ps = calloc(n ? n : 1, sizeof **ps);
        for (size_t i = 0; *ps && i < n; i++) {
            json_t *s = json_array_get(arr, i);
            if (!json_is_string(s)) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: element %zu is not a string", path, i); break; }
            size_t sl = json_string_length(s);
            if (sl == 0) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: element %zu is an empty prompt", path, i); break; }
            (*ps)[i].text = malloc(sl + 1);
            if (!(*ps)[i].text) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); break; }
            memcpy((*ps)[i].text, json_string_value(s), sl + 1);
            (*ps)[i].len = sl;
            *np = i + 1;
        }
        if (!*ps) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        json_decref(arr);
    } else {
        if (!utf8_valid((unsigned char *)buf, len)) { free(buf); return cis2_fail(err, CIS2_E_FORMAT, "%s: not valid UTF-8", path); }
        size_t lines = 1;
        for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
        *ps = calloc(lines, sizeof **ps);
        if (!*ps) { free(buf); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
        size_t start = 0, lineno = 0;
        while (start < len) {
            size_t e = start;
            while (e < len && buf[e] != '\n') e++;
            size_t l = e - start;
            if (l && buf[start + l - 1] == '\r') l--;
            lineno++;
            if (l == 0) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: empty prompt", path, lineno); break; }
            prompt *p = &(*ps)[(*np)++];
            p->text = malloc(l + 1);
            if (!p->text) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); break; }
            memcpy(p->text, buf + start, l);
            p->text[l] = 0;
            p->len = l;
            start = e + 1;
        }
    }
    free(buf);
    if (!rc && *np == 0) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: no prompts", path);
    return rc;
}

static void free_prompts(prompt *ps, size_t n)
{
    for (size_t i = 0; ps && i < n; i++) { free(ps[i].text); free(ps[i].ids); }
    free(ps);
}

/* ---------------------------------------------------------------- output */

char *cli_ids_csv(const uint32_t *ids, size_t n)
{
    char *s = malloc(n * 11 + 1), *p = s;
    if (!s) return NULL;
    *p = 0;
    for (size_t i = 0; i < n; i++) p += sprintf(p, i ? ",%u" : "%u", ids[i]);
    return s;
}

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static json_t *result_json(const cis2_model *m, const prompt *p, const cis2_seq *s, size_t idx, size_t gen,
                           const char *completion)
{
    char h[65];
    json_t *o = json_object();
#define HEX(key, d) (cli_hex(d, h), json_object_set_new(o, key, json_string(h)))
    HEX("weights_sha256", m->weights_sha);
    HEX("config_sha256", m->config_sha);
    HEX("tokenizer_sha256", m->tokenizer_sha);
    json_object_set_new(o, "prompt_token_ids", ids_json(p->ids, p->n));
    json_object_set_new(o, "generated_token_ids", ids_json(s->generated, gen));
    HEX("table_digest", m->table_digest);
    HEX("inv_freq_table_digest", m->inv_freq_digest);
    HEX("argmax_digest", s->argmax);
    HEX("cis2_ref", s->witness);
#undef HEX
    json_object_set_new(o, "prompt_idx", json_integer((json_int_t)idx));
    json_object_set_new(o, "prompt_toks", json_integer((json_int_t)p->n));
    json_object_set_new(o, "gen_toks", json_integer((json_int_t)gen));
    json_object_set_new(o, "dtype", json_string("fp32"));
    json_object_set_new(o, "completion", completion ? json_string(completion) : json_null());
    return o;
}

static void print_text(const cis2_model *m, const prompt *p, const cis2_seq *s, size_t idx, size_t gen,
                       const char *completion)
{
    char h[65];
    char *pc = cli_ids_csv(p->ids, p->n), *gc = cli_ids_csv(s->generated, gen);
    cli_hex(m->weights_sha, h); printf("weights_sha256 = %s\n", h);
    cli_hex(m->config_sha, h); printf("config_sha256 = %s\n", h);
    cli_hex(m->tokenizer_sha, h); printf("tokenizer_sha256 = %s\n", h);
    printf("prompt_token_ids = %s\n", pc ? pc : "");
    printf("generated_token_ids = %s\n", gc ? gc : "");
    cli_hex(m->table_digest, h); printf("table_digest = %s\n", h);
    cli_hex(m->inv_freq_digest, h); printf("inv_freq_table_digest = %s\n", h);
    cli_hex(s->argmax, h); printf("argmax_digest = %s\n", h);
    cli_hex(s->witness, h);
    printf("CIS2_REF digest=%s prompt_idx=%zu prompt_toks=%zu gen_toks=%zu dtype=fp32\n", h, idx, p->n, gen);
    json_t *c = completion ? json_string(completion) : json_null();
    char *cj = json_dumps(c, JSON_ENCODE_ANY);
    printf("completion = %s\n", cj ? cj : "null");
    free(cj);
    json_decref(c);
    free(pc);
    free(gc);
}

typedef struct progress_ctx {
    struct timespec t0;
    size_t ntok_per_step;
} progress_ctx;

static void progress(void *ctx, size_t step, size_t total)
{
    progress_ctx *pc = ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double s = (double)(t.tv_sec - pc->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - pc->t0.tv_nsec);
    /* both §12.4 runs decode as one batch: 2 tokens per sequence per step */
    fprintf(stderr, "\rcis2: decoding %zu/%zu tokens (x2 for §12.4), %.1f tokens/s   ", step, total,
            s > 0 ? (double)(2 * step * pc->ntok_per_step) / s : 0.0);
    if (step == total) fprintf(stderr, "\n");
}

/* ------------------------------------------------------------------- run */

static const char run_usage[] =
    "usage: cis2 run [--model-dir DIR] [--prompt TEXT | --prompt-file F | --prompt-ids CSV]\n"
    "                [--gen-toks N] [--json] [--dump-logits FILE] [--kernel K] [--threads N]\n"
    "                [--receipt FILE] [--trace FILE [--trace-dump]] [--tokenizer-ext]\n"
    "  --tokenizer-ext: also admit Qwen2.5's tokenizer.json (NFC, Split): a non-normative\n"
    "                   extension outside CIS-2 v0.3b §3\n";

int cmd_run(int argc, char **argv)
{
    cli_engine eng = {0};
    const char *prompt_text = NULL, *prompt_file = NULL, *prompt_ids = NULL, *dump = NULL;
    const char *receipt = NULL, *trace = NULL; /* cli_receipt.c, trace.h */
    size_t gen = 16;
    int json = 0, recompute = 0, trace_dump = 0, tok_ext = 0, rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((rc = cli_engine_opt("run", argc, argv, &i, &eng)) >= 0) { if (rc) return rc; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(run_usage, stdout); return 0; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--recompute")) { recompute = 1; continue; }
        if (!strcmp(a, "--tokenizer-ext")) { tok_ext = 1; continue; }
        if (!strcmp(a, "--trace-dump")) { trace_dump = 1; continue; }
        if (i + 1 >= argc) return cli_usage_error("run", "unknown option or missing value: %s", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--prompt")) prompt_text = v;
        else if (!strcmp(a, "--prompt-file")) prompt_file = v;
        else if (!strcmp(a, "--prompt-ids")) prompt_ids = v;
        else if (!strcmp(a, "--dump-logits")) dump = v;
        else if (!strcmp(a, "--receipt")) receipt = v;
        else if (!strcmp(a, "--trace")) trace = v;
        else if (!strcmp(a, "--gen-toks")) { if ((rc = cli_parse_size("run", a, v, 1u << 24, &gen))) return rc; }
        else return cli_usage_error("run", "unknown option %s", a);
    }
    if (!!prompt_text + !!prompt_file + !!prompt_ids > 1)
        return cli_usage_error("run", "give at most one of --prompt, --prompt-file, --prompt-ids");
    if (gen == 0) return cli_usage_error("run", "--gen-toks must be at least 1");
    if (trace_dump && !trace) return cli_usage_error("run", "--trace-dump needs --trace FILE");

    cis2_error err = {0};
    prompt *ps = NULL;
    size_t np = 0;
    if (prompt_file) {
        if ((rc = load_prompt_file(prompt_file, &ps, &np, &err))) { free_prompts(ps, np); return cli_report(&err); }
    } else {
        ps = calloc(1, sizeof *ps);
        np = 1;
        if (prompt_ids) {
            if ((rc = cli_parse_ids("run", prompt_ids, &ps[0].ids, &ps[0].n))) { free_prompts(ps, np); return rc; }
        } else {
            const char *t = prompt_text ? prompt_text : DEFAULT_PROMPT;
            ps[0].len = strlen(t);
            ps[0].text = strdup(t);
            if (ps[0].len == 0) { free_prompts(ps, np); return cli_usage_error("run", "--prompt is empty"); }
        }
    }

    cis2_model m;
    cis2_tokenizer *tok = NULL;
    cis2_seq *seqs = NULL;
    FILE *df = NULL;
    char path[4096];
    if ((rc = cli_engine_start(&eng, &m, &err))) goto fail_model;
    snprintf(path, sizeof path, "%s/tokenizer.json", eng.model_dir);
    int need_tok = 0;
    for (size_t i = 0; i < np; i++) need_tok |= ps[i].text != NULL;
    if ((rc = cis2_tokenizer_load_ext(&tok, path, tok_ext ? CIS2_TOK_ALLOW_NONNORMATIVE : 0, &err))) {
        if (need_tok) goto fail;
        tok = NULL; /* ids given: the tokenizer is only hashed (§12.1), and completion is null */
        err = (cis2_error){0};
        rc = CIS2_OK;
    }
    if (tok && need_tok && !cis2_tokenizer_is_normative(tok))
        fprintf(stderr, "cis2: note: %s uses the non-normative tokenizer extension (outside CIS-2 v0.3b §3)\n", path);
    for (size_t i = 0; i < np; i++)
        if (ps[i].text) {
            if ((rc = cis2_tokenizer_encode(tok, ps[i].text, ps[i].len, &ps[i].ids, &ps[i].n, &err))) goto fail;
            if (ps[i].n == 0) { rc = cis2_fail(&err, CIS2_E_USAGE, "prompt %zu encodes to no tokens", i); goto fail; }
        }
    for (size_t i = 0; receipt && i < np; i++) /* a receipt records prompt bytes: ids must round-trip */
        if (!ps[i].text && (rc = cli_receipt_prompt_from_ids(tok, ps[i].ids, ps[i].n, &ps[i].text, &ps[i].len, &err)))
            goto fail;
    if (trace && np != 1) { rc = cis2_fail(&err, CIS2_E_USAGE, "--trace needs a single prompt"); goto fail; }
    seqs = calloc(np, sizeof *seqs);
    if (!seqs) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto fail; }
    for (size_t i = 0; i < np; i++) { seqs[i].prompt = ps[i].ids; seqs[i].n_prompt = ps[i].n; }
    if (dump && !(df = fopen(dump, "wb"))) { rc = cis2_fail(&err, CIS2_E_IO, "%s: %s", dump, strerror(errno)); goto fail; }
    progress_ctx pc = {.ntok_per_step = np};
    clock_gettime(CLOCK_MONOTONIC, &pc.t0);
    cis2_decode_opts o = {.gen_toks = gen, .dump_logits = df, .recompute = recompute};
    if (isatty(2)) { o.progress = progress; o.progress_ctx = &pc; }
    cis2_trace_writer *tw = NULL;
    if (trace && (rc = cis2_trace_open(&tw, trace, trace_dump, &err))) goto fail;
    if (tw) { o.trace = cis2_trace_record; o.trace_ctx = tw; }
    rc = cis2_run(&m, seqs, np, &o, &err);
    if (df && fclose(df) != 0 && !rc) rc = cis2_fail(&err, CIS2_E_IO, "%s: write failed", dump);
    df = NULL;
    if (cis2_trace_close(tw, &err) && !rc) rc = err.code;
    if (rc) goto fail;
    for (size_t i = 0; receipt && i < np; i++)
        if ((rc = cli_receipt_write(receipt, i, np, &m, ps[i].text, ps[i].len, &seqs[i], gen, &err))) goto fail;
    json_t *arr = json ? json_array() : NULL;
    for (size_t i = 0; i < np; i++) {
        char *completion = tok ? cis2_tokenizer_decode(tok, seqs[i].generated, gen) : NULL;
        if (json) json_array_append_new(arr, result_json(&m, &ps[i], &seqs[i], i, gen, completion));
        else {
            if (i) printf("\n");
            print_text(&m, &ps[i], &seqs[i], i, gen, completion);
        }
        free(completion);
    }
    if (json) {
        json_t *outj = np == 1 && !prompt_file ? json_array_get(arr, 0) : arr;
        char *s = json_dumps(outj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s ? s : "null");
        free(s);
        json_decref(arr);
    }
    if (fflush(stdout) != 0) rc = cis2_fail(&err, CIS2_E_IO, "writing stdout failed");
fail:
    if (df) fclose(df);
    for (size_t i = 0; seqs && i < np; i++) cis2_seq_free(&seqs[i]);
    free(seqs);
    cis2_tokenizer_free(tok);
    cis2_model_free(&m);
fail_model:
    free_prompts(ps, np);
    return rc ? cli_report(&err) : CIS2_OK;
}

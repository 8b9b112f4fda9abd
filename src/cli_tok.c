/*
 * cli_tok.c - `cis2 tokenize` and `cis2 detokenize` (CIS-2 §3.1; the
 * tokenizer itself is tokenizer.c).
 *
 *   cis2 tokenize --tokenizer FILE [--text TEXT] [--json] [--batch] [--stats]
 *       TEXT (else all of stdin, verbatim: a trailing newline is text too)
 *       -> ids, comma-separated without spaces, or a JSON array (--json).
 *       --batch: stdin is JSON lines, one JSON string each; prints one
 *       line of ids per input line (the differential test's fast path).
 *       --stats: load and encode times on stderr (tools/bench-tokenizer).
 *   cis2 detokenize --tokenizer FILE [IDS] [--batch]
 *       comma-separated ids (or a JSON array) -> the decoded text and a
 *       newline.  --batch: stdin lines of ids -> one JSON string per line.
 *   Both take --tokenizer-ext: also admit Qwen2.5's tokenizer.json shape, a
 *   non-normative extension outside CIS-2 v0.3b §3 (tokenizer.c).
 */
#include "cli.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --stats: timings on stderr (tools/bench-tokenizer reads them). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double enc_secs;
static size_t enc_bytes, enc_tokens;
static int timed_encode(const cis2_tokenizer *t, const char *s, size_t len, uint32_t **ids, size_t *n,
                        cis2_error *err)
{
    double t0 = now_s();
    int rc = cis2_tokenizer_encode(t, s, len, ids, n, err);
    enc_secs += now_s() - t0;
    enc_bytes += len;
    if (!rc) enc_tokens += *n;
    return rc;
}

static int read_stdin(char **buf, size_t *len, cis2_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return cis2_fail(err, CIS2_E_NOMEM, "stdin: out of memory");
    for (;;) {
        if (n == cap) {
            char *nb = cap < ((size_t)1 << 31) ? realloc(b, cap * 2) : NULL;
            if (!nb) { free(b); return cis2_fail(err, CIS2_E_NOMEM, "stdin: too large"); }
            b = nb; cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) { free(b); return cis2_fail(err, CIS2_E_IO, "stdin: read error"); }
    *buf = b; *len = n;
    return CIS2_OK;
}

static void print_ids(const uint32_t *ids, size_t n, int json)
{
    if (json) putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ",%u" : "%u", ids[i]);
    if (json) putchar(']');
    putchar('\n');
}

/* Parses "1,2,3" or "[1, 2, 3]" (spaces allowed); -1 on bad syntax. */
static int parse_ids(const char *s, uint32_t **out, size_t *n)
{
    size_t cap = 16, k = 0;
    uint32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    int bracket = *p == '[';
    if (bracket) p++;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ']' || *p == 0 || *p == '\n' || *p == '\r') break;
        if (*p < '0' || *p > '9') goto bad;
        unsigned long long x = 0;
        while (*p >= '0' && *p <= '9') {
            x = x * 10 + (unsigned)(*p++ - '0');
            if (x > UINT32_MAX) goto bad;
        }
        if (k == cap) {
            uint32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) goto bad;
            v = nv; cap *= 2;
        }
        v[k++] = (uint32_t)x;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ',') { p++; continue; }
        if (*p == ']' || *p == 0 || *p == '\n' || *p == '\r') break;
        goto bad;
    }
    if (bracket != (*p == ']')) goto bad;
    *out = v; *n = k;
    return 0;
bad:
    free(v);
    return -1;
}

static int batch_tokenize(const cis2_tokenizer *t, int json, cis2_error *err)
{
    char *line = NULL; size_t cap = 0; ssize_t got; size_t lineno = 0;
    int rc = CIS2_OK;
    while (!rc && (got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        json_error_t je;
        json_t *s = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!json_is_string(s)) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "stdin line %zu: not a JSON string", lineno);
        } else {
            uint32_t *ids; size_t n;
            rc = timed_encode(t, json_string_value(s), json_string_length(s), &ids, &n, err);
            if (!rc) { print_ids(ids, n, json); free(ids); }
        }
        json_decref(s);
    }
    free(line);
    return rc;
}

static int batch_detokenize(const cis2_tokenizer *t, cis2_error *err)
{
    char *line = NULL; size_t cap = 0; size_t lineno = 0;
    int rc = CIS2_OK;
    while (!rc && getline(&line, &cap, stdin) >= 0) {
        lineno++;
        uint32_t *ids; size_t n;
        if (parse_ids(line, &ids, &n)) { rc = cis2_fail(err, CIS2_E_FORMAT, "stdin line %zu: bad id list", lineno); break; }
        size_t tl;
        char *text = cis2_tokenizer_decode_n(t, ids, n, &tl);
        free(ids);
        json_t *js = text ? json_stringn(text, tl) : NULL;
        char *out = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        if (!out) rc = cis2_fail(err, CIS2_E_NOMEM, "detokenize: out of memory");
        else printf("%s\n", out);
        free(out); json_decref(js); free(text);
    }
    free(line);
    return rc;
}

/* Common option parsing: --tokenizer FILE, --text T, --json, --batch, one positional. */
typedef struct { const char *tok, *text, *pos; int json, batch, stats, ext; } tok_opts;

static int parse_opts(const char *cmd, int argc, char **argv, tok_opts *o, int allow_text)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--tokenizer") && i + 1 < argc) o->tok = argv[++i];
        else if (allow_text && !strcmp(a, "--text") && i + 1 < argc) o->text = argv[++i];
        else if (allow_text && !strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--batch")) o->batch = 1;
        else if (!strcmp(a, "--tokenizer-ext")) o->ext = 1;
        else if (allow_text && !strcmp(a, "--stats")) o->stats = 1;
        else if (!allow_text && !o->pos && strncmp(a, "--", 2)) o->pos = a;
        else return cli_usage_error(cmd, "unexpected argument '%s'", a);
    }
    if (!o->tok) return cli_usage_error(cmd, "--tokenizer FILE is required");
    if (o->batch && (o->text || o->pos)) return cli_usage_error(cmd, "--batch reads stdin only");
    return CIS2_OK;
}

int cmd_tokenize(int argc, char **argv)
{
    tok_opts o;
    int rc = parse_opts("tokenize", argc, argv, &o, 1);
    if (rc) return rc;
    cis2_error err = {0};
    cis2_tokenizer *t;
    double t0 = now_s();
    if (cis2_tokenizer_load_ext(&t, o.tok, o.ext ? CIS2_TOK_ALLOW_NONNORMATIVE : 0, &err)) return cli_report(&err);
    double load_s = now_s() - t0;
    if (o.batch) {
        rc = batch_tokenize(t, o.json, &err);
    } else {
        char *buf = NULL; size_t len = 0;
        if (o.text) len = strlen(o.text);
        else rc = read_stdin(&buf, &len, &err);
        if (!rc) {
            uint32_t *ids; size_t n;
            rc = timed_encode(t, o.text ? o.text : buf, len, &ids, &n, &err);
            if (!rc) { print_ids(ids, n, o.json); free(ids); }
        }
        free(buf);
    }
    cis2_tokenizer_free(t);
    if (!rc && (fflush(stdout) || ferror(stdout))) rc = cis2_fail(&err, CIS2_E_IO, "stdout: write error");
    if (!rc && o.stats)
        fprintf(stderr, "tokenize: load %.1f ms, encode %.1f ms, %zu bytes, %zu tokens\n",
                load_s * 1e3, enc_secs * 1e3, enc_bytes, enc_tokens);
    return rc ? cli_report(&err) : CIS2_OK;
}

int cmd_detokenize(int argc, char **argv)
{
    tok_opts o;
    int rc = parse_opts("detokenize", argc, argv, &o, 0);
    if (rc) return rc;
    if (!o.batch && !o.pos) return cli_usage_error("detokenize", "IDS (comma-separated) is required");
    uint32_t *ids = NULL; size_t n = 0;
    if (!o.batch && parse_ids(o.pos, &ids, &n))
        return cli_usage_error("detokenize", "IDS must be comma-separated decimal ids, got '%s'", o.pos);
    cis2_error err = {0};
    cis2_tokenizer *t;
    if (cis2_tokenizer_load_ext(&t, o.tok, o.ext ? CIS2_TOK_ALLOW_NONNORMATIVE : 0, &err)) {
        free(ids);
        return cli_report(&err);
    }
    if (o.batch) {
        rc = batch_detokenize(t, &err);
    } else {
        size_t tl;
        char *text = cis2_tokenizer_decode_n(t, ids, n, &tl);
        if (!text) rc = cis2_fail(&err, CIS2_E_NOMEM, "detokenize: out of memory");
        else { fwrite(text, 1, tl, stdout); putchar('\n'); free(text); }
    }
    free(ids);
    cis2_tokenizer_free(t);
    if (!rc && (fflush(stdout) || ferror(stdout))) rc = cis2_fail(&err, CIS2_E_IO, "stdout: write error");
    return rc ? cli_report(&err) : CIS2_OK;
}

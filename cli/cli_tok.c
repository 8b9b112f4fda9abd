/*
 * cli_tok.c - `cis2 tokenize` and `cis2 detokenize` (CIS-2 §3.1), on the
 * library's tokenizer (include/cis2_toolkit.h section 3).
 *
 *   cis2 tokenize --tokenizer FILE [--text TEXT] [--json] [--batch] [--stats] [--add-special-tokens]
 *       TEXT (else all of stdin, verbatim: a trailing newline is text too)
 *       -> ids, comma-separated without spaces, or a JSON array (--json).
 *       --batch: stdin is JSON lines, one JSON string each; prints one
 *       line of ids per input line (the differential test's fast path).
 *       --stats: load and encode times on stderr (tools/bench-tokenizer).
 *   cis2 detokenize --tokenizer FILE IDS | --batch
 *       ids (cli.h's one id-list grammar) -> the decoded text and a
 *       newline.  --batch: stdin lines of ids -> one JSON string per line.
 *   Both load the model families' tokenizer.json shapes too (Qwen, Llama-3,
 *   Llama-2, Gemma-3; outside CIS-2 v0.3b §3, docs/tokenizer.md) and accept
 *   --tokenizer-ext as a no-op (it once admitted them).  tokenize --add-special-tokens: Hugging Face's
 *   encode(text, add_special_tokens=True) (the post-processor's BOS...);
 *   without it add_special_tokens=False.
 */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STDIN_MAX ((size_t)256 << 20)
#define LINE_MAX_BYTES ((size_t)64 << 20)

/* --stats: timings on stderr (tools/bench-tokenizer reads them). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double enc_secs;
static size_t enc_bytes, enc_tokens;
static unsigned enc_flags;    /* --add-special-tokens: CIS2_TOK_ADD_SPECIAL */
static int timed_encode(const cis2_tokenizer *t, const char *s, size_t len, uint32_t **ids, size_t *n,
                        cis2_error *err)
{
    double t0 = now_s();
    int rc = cis2_tokenizer_encode_ext(t, s, len, enc_flags, ids, n, err);
    enc_secs += now_s() - t0;
    enc_bytes += len;
    if (!rc) enc_tokens += *n;
    return rc;
}

static void print_ids(const uint32_t *ids, size_t n, int json)
{
    if (json) putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ",%u" : "%u", ids[i]);
    if (json) putchar(']');
    putchar('\n');
}

static int batch_tokenize(const cis2_tokenizer *t, int json, cis2_error *err)
{
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int rc = CIS2_OK;
    while (!rc && (got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if ((size_t)got > LINE_MAX_BYTES) { rc = cis2_fail(err, CIS2_E_FORMAT, "stdin line %zu: too long", lineno); break; }
        json_error_t je;
        json_t *s = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!json_is_string(s)) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "stdin line %zu: not a JSON string", lineno);
        } else {
            uint32_t *ids;
            size_t n;
            rc = timed_encode(t, json_string_value(s), json_string_length(s), &ids, &n, err);
            if (!rc) { print_ids(ids, n, json); cis2_free(ids); }
        }
        json_decref(s);
    }
    free(line);
    return rc;
}

static int batch_detokenize(const cis2_tokenizer *t, cis2_error *err)
{
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int rc = CIS2_OK;
    while (!rc && (got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        uint32_t *ids;
        size_t n, tl;
        char what[64];
        snprintf(what, sizeof what, "stdin line %zu", lineno);
        if ((rc = cli_parse_ids(what, line, &ids, &n, err))) {
            if (rc == CIS2_E_USAGE) { err->code = CIS2_E_FORMAT; rc = CIS2_E_FORMAT; }
            break;
        }
        char *text = cis2_tokenizer_decode_n(t, ids, n, &tl);
        cis2_free(ids);
        json_t *js = text ? json_stringn(text, tl) : NULL;
        char *out = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        if (!out) rc = cis2_fail(err, CIS2_E_NOMEM, "detokenize: out of memory");
        else printf("%s\n", out);
        free(out);
        json_decref(js);
        cis2_free(text);
    }
    free(line);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *tok = NULL, *text = NULL;
    int json = 0, batch = 0, stats = 0, ext = 0, special = 0;
    cli_opt opts[] = {{"--tokenizer", OPT_STR, &tok, 0, 0},     {"--text", OPT_STR, &text, 0, 0},
                      {"--json", OPT_FLAG, &json, 0, 0},         {"--batch", OPT_FLAG, &batch, 0, 0},
                      {"--stats", OPT_FLAG, &stats, 0, 0},       {"--tokenizer-ext", OPT_FLAG, &ext, 0, 0},
                      {"--add-special-tokens", OPT_FLAG, &special, 0, 0},
                      {0}};
    int rc = cli_parse("tokenize", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc < 0 ? 0 : rc;
    enc_flags = special ? CIS2_TOK_ADD_SPECIAL : 0;
    if (!tok) return cli_usage_error("tokenize", "--tokenizer FILE is required");
    if (batch && text) return cli_usage_error("tokenize", "--batch reads stdin only");
    cis2_error err = {0};
    cis2_tokenizer *t;
    double t0 = now_s();
    if (cis2_tokenizer_load_ext(&t, tok, ext ? CIS2_TOK_ALLOW_NONNORMATIVE : 0, &err)) return cli_report(&err);
    double load_s = now_s() - t0;
    if (batch) {
        rc = batch_tokenize(t, json, &err);
    } else {
        char *buf = NULL;
        size_t len = 0;
        if (text) len = strlen(text);
        else rc = cli_read_stdin(STDIN_MAX, &buf, &len, &err);
        if (!rc) {
            uint32_t *ids;
            size_t n;
            rc = timed_encode(t, text ? text : buf, len, &ids, &n, &err);
            if (!rc) { print_ids(ids, n, json); cis2_free(ids); }
        }
        free(buf);
    }
    cis2_tokenizer_free(t);
    if (rc) return cli_report(&err);
    if (stats)
        fprintf(stderr, "tokenize: load %.1f ms, encode %.1f ms, %zu bytes, %zu tokens\n", load_s * 1e3,
                enc_secs * 1e3, enc_bytes, enc_tokens);
    return cli_finish_stdout(CIS2_OK);
}

int cmd_detokenize(int argc, char **argv)
{
    const char *tok = NULL, *pos = NULL;
    int batch = 0, ext = 0;
    size_t npos = 0;
    cli_opt opts[] = {{"--tokenizer", OPT_STR, &tok, 0, 0},
                      {"--batch", OPT_FLAG, &batch, 0, 0},
                      {"--tokenizer-ext", OPT_FLAG, &ext, 0, 0},
                      {0}};
    int rc = cli_parse("detokenize", argc, argv, opts, &pos, 1, &npos);
    if (rc) return rc < 0 ? 0 : rc;
    if (!tok) return cli_usage_error("detokenize", "--tokenizer FILE is required");
    if (batch && pos) return cli_usage_error("detokenize", "--batch reads stdin only");
    if (!batch && !pos) return cli_usage_error("detokenize", "IDS (comma-separated) is required");
    cis2_error err = {0};
    uint32_t *ids = NULL;
    size_t n = 0;
    if (!batch && (rc = cli_parse_ids("IDS", pos, &ids, &n, &err))) {
        if (rc == CIS2_E_USAGE) return cli_usage_error("detokenize", "%s", err.msg);
        return cli_report(&err);
    }
    cis2_tokenizer *t;
    if (cis2_tokenizer_load_ext(&t, tok, ext ? CIS2_TOK_ALLOW_NONNORMATIVE : 0, &err)) {
        cis2_free(ids);
        return cli_report(&err);
    }
    if (batch) {
        rc = batch_detokenize(t, &err);
    } else {
        size_t tl;
        char *text = cis2_tokenizer_decode_n(t, ids, n, &tl);
        if (!text) rc = cis2_fail(&err, CIS2_E_NOMEM, "detokenize: out of memory");
        else { fwrite(text, 1, tl, stdout); putchar('\n'); cis2_free(text); }
    }
    cis2_free(ids);
    cis2_tokenizer_free(t);
    if (rc) return cli_report(&err);
    return cli_finish_stdout(CIS2_OK);
}

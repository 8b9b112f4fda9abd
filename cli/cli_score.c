/*
 * cli_score.c - `cis2 score`: the logprobs of given continuations after a
 * given context (docs/sampling.md §S11), through cis2_score
 * (include/cis2.h section 9).
 *
 *   cis2 score --context TEXT | --context-ids IDS
 *              --continuation TEXT... | --continuation-ids IDS...
 *              [--top-logprobs N] [--json] [--receipt FILE] [engine options]
 *   cis2 score --batch FILE [--top-logprobs N] [--json] [--receipt FILE] [engine options]
 *       FILE (or - for stdin): JSON lines, each an object
 *       {"context": TEXT or null, "context_ids": [ids], "continuations":
 *        [TEXT or [ids], ...]} (context and context_ids not both).
 *
 * Every continuation of every line is scored in one cis2_score call
 * (sharing every weight pass; equal contexts computed once).  Human output
 * is one block per continuation: its sums, then one line per token with
 * its logprob, bits, rank and greedy flag.  --json prints one object per
 * context (per line with --batch) whose per-token entries have cis2 run
 * --json's logprob shape ({"id", "logprob", "bits", "top"}) plus "rank"
 * and "greedy"; an unscored token (no context) is null.
 *
 * --receipt FILE writes a score receipt ("CIS-2-RECEIPT ext-score-1",
 * docs/receipts.md "Score receipts", cis2_score_receipts) per scored
 * continuation: FILE for one, FILE.0, FILE.1, ... in request order (every
 * continuation of every --batch line) for several, as `cis2 run` names
 * several; every path is checked before the model is opened, and each
 * receipt is written whole or not at all.  `cis2 verify` re-derives them.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH_MAX_BYTES ((size_t)256 << 20)
#define BATCH_MAX_JSON_COST ((uint64_t)512 << 20) /* all lines together, as a prompt file's (jsonlim) */
#define SCORE_MAX_REQS ((size_t)1 << 20)

typedef struct sline {
    size_t first, n;        /* its requests in the flat array */
    json_t *ctx;            /* what the line gave (kept for the output) */
} sline;

typedef struct sreqs {
    cis2_score_request *r;
    size_t n, cap;
    sline *lines;
    size_t nlines, lcap;
    json_t *keep;           /* the parsed lines (strings and id arrays live here) */
    uint32_t **ids;         /* id arrays we own */
    size_t nids, icap;
} sreqs;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int own_ids(sreqs *s, uint32_t *ids)
{
    if (grow((void **)&s->ids, &s->icap, s->nids + 1, sizeof *s->ids)) return -1;
    s->ids[s->nids++] = ids;
    return 0;
}

static int add_req(sreqs *s, const cis2_score_request *q, cis2_error *err)
{
    if (s->n == SCORE_MAX_REQS) return cis2_fail(err, CIS2_E_USAGE, "more than %zu continuations", SCORE_MAX_REQS);
    if (grow((void **)&s->r, &s->cap, s->n + 1, sizeof *s->r)) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    s->r[s->n++] = *q;
    return CIS2_OK;
}

/* A JSON array of u32 ids -> an owned array. */
static int json_ids(sreqs *s, json_t *a, const char *what, size_t line, uint32_t **ids, size_t *n, cis2_error *err)
{
    size_t k = json_array_size(a);
    uint32_t *v = malloc((k ? k : 1) * sizeof *v);
    if (!v || own_ids(s, v)) { free(v); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    for (size_t i = 0; i < k; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (json_int_t)UINT32_MAX)
            return cis2_fail(err, CIS2_E_FORMAT, "line %zu: %s[%zu] is not a token id (0..4294967295)", line, what, i);
        v[i] = (uint32_t)json_integer_value(x);
    }
    *ids = v;
    *n = k;
    return CIS2_OK;
}

/* One --batch line: {"context"|"context_ids", "continuations"}. */
static int parse_line(sreqs *s, json_t *o, size_t line, unsigned top, cis2_error *err)
{
    if (!json_is_object(o)) return cis2_fail(err, CIS2_E_FORMAT, "line %zu: not a JSON object", line);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
        if (strcmp(key, "context") && strcmp(key, "context_ids") && strcmp(key, "continuations"))
            return cis2_fail(err, CIS2_E_FORMAT, "line %zu: unknown key \"%s\" (context, context_ids, continuations)",
                             line, key);
    cis2_score_request base = {.top_logprobs = top};
    json_t *c = json_object_get(o, "context"), *ci = json_object_get(o, "context_ids");
    if (c && !json_is_null(c) && ci) return cis2_fail(err, CIS2_E_FORMAT, "line %zu: context and context_ids both given", line);
    if (c && !json_is_null(c)) {
        if (!json_is_string(c)) return cis2_fail(err, CIS2_E_FORMAT, "line %zu: context is not a string", line);
        base.context = json_string_value(c);
        base.context_len = json_string_length(c);
    } else if (ci) {
        if (!json_is_array(ci)) return cis2_fail(err, CIS2_E_FORMAT, "line %zu: context_ids is not an array", line);
        uint32_t *ids;
        int rc = json_ids(s, ci, "context_ids", line, &ids, &base.n_context_ids, err);
        if (rc) return rc;
        base.context_ids = ids;
    }
    json_t *cs = json_object_get(o, "continuations");
    if (!json_is_array(cs) || !json_array_size(cs))
        return cis2_fail(err, CIS2_E_FORMAT, "line %zu: continuations is not a non-empty array", line);
    if (grow((void **)&s->lines, &s->lcap, s->nlines + 1, sizeof *s->lines)) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    s->lines[s->nlines++] = (sline){.first = s->n, .n = json_array_size(cs), .ctx = c ? c : ci};
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *x = json_array_get(cs, i);
        cis2_score_request q = base;
        if (json_is_string(x)) {
            q.continuation = json_string_value(x);
            q.continuation_len = json_string_length(x);
        } else if (json_is_array(x)) {
            uint32_t *ids;
            int rc = json_ids(s, x, "continuations[]", line, &ids, &q.n_continuation_ids, err);
            if (rc) return rc;
            q.continuation_ids = ids;
        } else
            return cis2_fail(err, CIS2_E_FORMAT, "line %zu: continuations[%zu] is neither a string nor an id array", line, i);
        int rc = add_req(s, &q, err);
        if (rc) return rc;
    }
    return CIS2_OK;
}

/* One line of the --batch stream into *line (grown as needed, NUL-ended),
 * the bytes read so far counted in *total against BATCH_MAX_BYTES: 1 a
 * line, 0 the end, <0 an error in err. */
static int next_line(FILE *f, const char *path, char **line, size_t *cap, size_t *n, size_t *total, cis2_error *err)
{
    size_t k = 0;
    int c = EOF;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (++*total > BATCH_MAX_BYTES)
            return -cis2_fail(err, CIS2_E_FORMAT, "%s: larger than %zu bytes, the limit for a --batch file", path,
                              BATCH_MAX_BYTES);
        if (k + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*line, nc);
            if (!nb) return -cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
            *line = nb;
            *cap = nc;
        }
        (*line)[k++] = (char)c;
    }
    if (ferror(f)) return -cis2_fail(err, CIS2_E_IO, "%s: read error", path);
    if (c == EOF && k == 0) return 0;
    ++*total;
    if (!*line && !(*line = malloc(*cap = 1))) return -cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    (*line)[k] = 0;
    *n = k;
    return 1;
}

/* --batch FILE (or - for stdin), read and parsed line by line: each line's
 * JSON cost counted against one budget for the file before jansson
 * allocates (docs/inputs.md "Prompts", the `cis2 score --batch` row),
 * duplicate keys refused. */
static int load_batch(sreqs *s, const char *path, unsigned top, cis2_error *err)
{
    FILE *f = stdin;
    int rc = CIS2_OK;
    if (strcmp(path, "-")) { /* a regular file, as every input file (inputs.md "Every input file") */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0) return cis2_fail(err, CIS2_E_IO, "%s: cannot open: %s", path, strerror(errno));
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
            close(fd);
            return cis2_fail(err, CIS2_E_IO, "%s: not a regular file", path);
        }
        if ((uint64_t)st.st_size > BATCH_MAX_BYTES) {
            close(fd);
            return cis2_fail(err, CIS2_E_FORMAT, "%s: larger than %zu bytes, the limit for a --batch file (%lld bytes)",
                             path, BATCH_MAX_BYTES, (long long)st.st_size);
        }
        if (!(f = fdopen(fd, "r"))) { close(fd); return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); }
    }
    char *p = NULL;
    size_t cap = 0, n = 0, total = 0, line = 0;
    uint64_t cost = 0;
    int got;
    while (!rc && (got = next_line(f, path, &p, &cap, &n, &total, err)) != 0) {
        if (got < 0) { rc = -got; break; }
        line++;
        if (!n || (n == 1 && p[0] == '\r')) continue;
        uint64_t c = cis2_json_cost_bytes(p, n);
        if (c > BATCH_MAX_JSON_COST - cost) {
            rc = cis2_fail(err, CIS2_E_FORMAT,
                           "%s: line %zu: its JSON would take about %llu MiB of memory to parse, over the %llu MiB "
                           "left of the %llu MiB limit for a --batch file", path, line,
                           (unsigned long long)(c >> 20), (unsigned long long)((BATCH_MAX_JSON_COST - cost) >> 20),
                           (unsigned long long)(BATCH_MAX_JSON_COST >> 20));
            break;
        }
        cost += c;
        json_error_t je;
        json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!o) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: %s", path, line, je.text);
        else {
            json_array_append_new(s->keep, o);
            rc = parse_line(s, o, line, top, err);
            if (rc) {
                char m[512];
                snprintf(m, sizeof m, "%s", err->msg);
                snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", path, m);
            }
        }
    }
    free(p);
    if (f != stdin) fclose(f);
    if (!rc && !s->n) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: no requests", path);
    return rc;
}

/* ---------------------------------------------------------------- output */

static void f32_hex(float v, char h[9])
{
    uint32_t b;
    memcpy(&b, &v, 4);
    snprintf(h, 9, "%08x", b);
}

static json_t *lp_json(uint32_t id, float lp)
{
    char h[9];
    f32_hex(lp, h);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "logprob", isfinite(lp) ? json_real(lp) : json_null()); /* as serve_logprobs.c: -inf, NaN are null; "bits" has them */
    json_object_set_new(o, "bits", json_string(h));
    return o;
}

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static json_t *result_json(const cis2_score_request *q, const cis2_score_result *r)
{
    json_t *o = json_object(), *toks = json_array();
    char h[17];
    json_object_set_new(o, "continuation", q->continuation ? json_stringn(q->continuation, q->continuation_len) : json_null());
    json_object_set_new(o, "token_ids", ids_json(r->ids, r->n_ids));
    json_object_set_new(o, "first_scored", json_integer((json_int_t)r->first));
    for (size_t k = 0; k < r->n_ids; k++) {
        if (k < r->first) { json_array_append_new(toks, json_null()); continue; }
        json_t *t = lp_json(r->ids[k], r->logprobs[k]), *top = json_array();
        json_object_set_new(t, "rank", json_integer(r->ranks[k]));
        json_object_set_new(t, "greedy", json_boolean(r->greedy[k]));
        for (size_t j = 0; j < r->n_top; j++)
            if (r->top_ids[k * r->n_top + j] != UINT32_MAX)
                json_array_append_new(top, lp_json(r->top_ids[k * r->n_top + j], r->top_logprobs[k * r->n_top + j]));
        json_object_set_new(t, "top", top);
        json_array_append_new(toks, t);
    }
    json_object_set_new(o, "logprobs", toks);
    json_object_set_new(o, "n_scored", json_integer((json_int_t)r->n_scored));
    json_object_set_new(o, "sum", isfinite(r->sum) ? json_real(r->sum) : json_null());
    f32_hex(r->sum, h);
    json_object_set_new(o, "sum_bits", json_string(h));
    json_object_set_new(o, "sum_f64", isfinite(r->sum_f64) ? json_real(r->sum_f64) : json_null());
    uint64_t b64;
    memcpy(&b64, &r->sum_f64, 8);
    snprintf(h, sizeof h, "%016llx", (unsigned long long)b64);
    json_object_set_new(o, "sum_f64_bits", json_string(h));
    json_object_set_new(o, "all_greedy", json_boolean(r->all_greedy));
    return o;
}

static void print_human(size_t idx, const cis2_score_request *q, const cis2_score_result *r)
{
    char h[9];
    json_t *c = q->continuation ? json_stringn(q->continuation, q->continuation_len) : NULL;
    char *cs = c ? json_dumps(c, JSON_ENCODE_ANY) : cli_ids_csv(r->ids, r->n_ids);
    f32_hex(r->sum, h);
    printf("continuation %zu = %s\n", idx, cs ? cs : "");
    printf("  context_tokens = %zu, tokens = %zu, scored = %zu\n", r->n_context, r->n_ids, r->n_scored);
    printf("  sum = %.9g (bits %s), sum_f64 = %.17g, all_greedy = %s\n", r->sum, h, r->sum_f64,
           r->all_greedy ? "yes" : "no");
    printf("  %-4s %-10s %-15s %-8s %-7s %s\n", "i", "id", "logprob", "bits", "rank", "greedy");
    for (size_t k = 0; k < r->n_ids; k++) {
        if (k < r->first) { printf("  %-4zu %-10u %-15s\n", k, r->ids[k], "(no context)"); continue; }
        f32_hex(r->logprobs[k], h);
        printf("  %-4zu %-10u %-15.9g %-8s %-7u %s\n", k, r->ids[k], r->logprobs[k], h, r->ranks[k],
               r->greedy[k] ? "yes" : "no");
    }
    free(cs);
    json_decref(c);
}

static void print_line(const sreqs *s, const sline *l, const cis2_score_result *res, int json)
{
    const cis2_score_result *r0 = &res[l->first];
    if (!json) {
        char *cc = cli_ids_csv(r0->context_ids, r0->n_context);
        printf("context_token_ids = %s\n", cc ? cc : "");
        free(cc);
        for (size_t i = 0; i < l->n; i++) print_human(i, &s->r[l->first + i], &res[l->first + i]);
        return;
    }
    json_t *o = json_object(), *a = json_array();
    const cis2_score_request *q0 = &s->r[l->first];
    json_object_set_new(o, "context", q0->context ? json_stringn(q0->context, q0->context_len) : json_null());
    json_object_set_new(o, "context_token_ids", ids_json(r0->context_ids, r0->n_context));
    for (size_t i = 0; i < l->n; i++) json_array_append_new(a, result_json(&s->r[l->first + i], &res[l->first + i]));
    json_object_set_new(o, "continuations", a);
    char *t = json_dumps(o, JSON_COMPACT);
    printf("%s\n", t ? t : "null");
    free(t);
    json_decref(o);
}

/* ---------------------------------------------------------------- receipts */

static void receipt_name(char *out, size_t cap, const char *path, size_t i, size_t n)
{
    if (n > 1) snprintf(out, cap, "%s.%zu", path, i);
    else snprintf(out, cap, "%s", path);
}

/* Every receipt path, before any work: not an input, not another output,
 * its directory writable. */
static int check_receipt_paths(const cli_engine *eo, const char *path, const char *batch, size_t n, cis2_error *err)
{
    char in[3][4200];
    cli_engine_inputs(eo, in);
    const char *inputs[4] = {in[0], in[1], in[2], batch};
    size_t nin = batch && strcmp(batch, "-") ? 4 : 3;
    char **outs = calloc(n, sizeof *outs);
    if (!outs) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    int rc = CIS2_OK;
    size_t k = 0;
    for (; k < n && !rc; k++) {
        char name[4300];
        receipt_name(name, sizeof name, path, k, n);
        if (!(outs[k] = strdup(name))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); break; }
        rc = cis2_check_output_path(outs[k], inputs, nin, (const char *const *)outs, k, err);
        if (!rc && k == 0) rc = cli_probe_output(outs[k], err); /* FILE.i share FILE.0's directory */
        if (!rc) rc = cli_check_not_weights(eo, outs[k], err);
    }
    for (size_t i = 0; i < n; i++) free(outs[i]);
    free(outs);
    return rc;
}

static int write_receipts(cis2_receipt **rs, const char *path, size_t n, cis2_error *err)
{
    for (size_t i = 0; i < n; i++) {
        char name[4300];
        receipt_name(name, sizeof name, path, i, n);
        int rc = cis2_receipt_save(rs[i], name, err);
        if (rc) return rc;
    }
    return CIS2_OK;
}

/* ------------------------------------------------------------------ main */

int cmd_score(int argc, char **argv)
{
    cli_engine eo = {0};
    const char *context = NULL, *context_ids = NULL, *batch = NULL, *receipt = NULL;
    cli_multi conts = {0}, cont_ids = {0};
    size_t top = 0;
    int json = 0;
    cli_opt opts[] = {
        {"--context", OPT_STR, &context, 0, 0},
        {"--context-ids", OPT_STR, &context_ids, 0, 0},
        {"--continuation", OPT_MULTI, &conts, 16, 0},
        {"--continuation-ids", OPT_MULTI, &cont_ids, 16, 0},
        {"--batch", OPT_STR, &batch, 0, 0},
        {"--top-logprobs", OPT_SIZE, &top, CIS2_MAX_TOP_LOGPROBS, 0},
        {"--json", OPT_FLAG, &json, 0, 0},
        {"--receipt", OPT_STR, &receipt, 0, 0},
        CLI_ENGINE_OPTS(eo),
        {0}};
    int rc = cli_parse("score", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc < 0 ? 0 : rc;
    if (batch && (context || context_ids || conts.n || cont_ids.n))
        return cli_usage_error("score", "--batch takes the contexts and continuations from FILE only");
    if (!batch && !conts.n && !cont_ids.n)
        return cli_usage_error("score", "give --continuation TEXT (or --continuation-ids IDS), or --batch FILE");
    if (context && context_ids) return cli_usage_error("score", "give --context or --context-ids, not both");
    cis2_error err = {0};
    sreqs s = {.keep = json_array()};
    cis2_engine *e = NULL;
    cis2_score_result *res = NULL;
    cis2_receipt **rs = NULL;
    if (receipt && !*receipt) { rc = cli_usage_error("score", "--receipt: empty path"); goto out; }
    if (batch) {
        if (!*batch) { rc = cli_usage_error("score", "--batch: empty path"); goto out; }
        if ((rc = load_batch(&s, batch, (unsigned)top, &err))) goto report;
    } else {
        cis2_score_request base = {.top_logprobs = (unsigned)top};
        if (context) { base.context = context; base.context_len = strlen(context); }
        if (context_ids) {
            uint32_t *ids;
            if ((rc = cli_parse_ids("--context-ids", context_ids, &ids, &base.n_context_ids, &err))) goto report;
            if (own_ids(&s, ids)) { cis2_free(ids); rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto report; }
            base.context_ids = ids;
        }
        for (size_t i = 0; i < conts.n && !rc; i++) {
            cis2_score_request q = base;
            q.continuation = conts.v[i];
            q.continuation_len = strlen(conts.v[i]);
            rc = add_req(&s, &q, &err);
        }
        for (size_t i = 0; i < cont_ids.n && !rc; i++) {
            cis2_score_request q = base;
            uint32_t *ids;
            if ((rc = cli_parse_ids("--continuation-ids", cont_ids.v[i], &ids, &q.n_continuation_ids, &err))) break;
            if (own_ids(&s, ids)) { cis2_free(ids); rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); break; }
            q.continuation_ids = ids;
            rc = add_req(&s, &q, &err);
        }
        if (rc) goto report;
        s.lines = malloc(sizeof *s.lines);
        if (!s.lines) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto report; }
        s.lines[0] = (sline){.first = 0, .n = s.n};
        s.nlines = 1;
    }
    if (receipt) {
        if ((rc = check_receipt_paths(&eo, receipt, batch, s.n, &err))) goto report;
        if (!(rs = calloc(s.n, sizeof *rs))) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto report; }
    }
    if ((rc = cli_engine_open(&eo, &e, &err))) goto report;
    if (rs) rc = cis2_score_receipts(e, s.r, s.n, &res, rs, &err);
    else rc = cis2_score(e, s.r, s.n, &res, &err);
    if (rc) goto report;
    if (rs && (rc = write_receipts(rs, receipt, s.n, &err))) goto report;
    for (size_t i = 0; i < s.nlines; i++) print_line(&s, &s.lines[i], res, json);
    rc = cli_finish_stdout(CIS2_OK);
    goto out;
report:
    rc = cli_report(&err);
out:
    for (size_t i = 0; rs && i < s.n; i++) cis2_receipt_free(rs[i]);
    free(rs);
    cis2_score_results_free(res, s.n);
    cis2_engine_close(e);
    for (size_t i = 0; i < s.nids; i++) free(s.ids[i]);
    free(s.ids);
    free(s.r);
    free(s.lines);
    json_decref(s.keep);
    return rc;
}

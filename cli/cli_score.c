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
 *        [TEXT or [ids], ...], "claimed_logprobs": [[number or null, ...],
 *        ...]} (context and context_ids not both; claimed_logprobs optional).
 *
 * Every continuation of every line is scored in one cis2_score call
 * (sharing every weight pass; equal contexts computed once).  Human output
 * is one block per continuation: its sums, then one line per token with
 * its logprob, bits, rank and greedy flag.  --json prints one object per
 * context (per line with --batch) whose per-token entries have cis2 run
 * --json's logprob shape ({"id", "logprob", "bits", "top"}) plus "rank"
 * and "greedy"; an unscored token (no context) is null.
 *
 * claimed_logprobs (docs/eval.md "RL: measuring an inference engine's
 * drift") holds, per continuation, the logprob another engine reported for
 * each of its tokens (null: not reported).  Each such token then also gets
 * "claimed" and "diff" (claimed - exact, in binary64), and its continuation
 * a "mismatch" summary (max |diff|, mean diff, log_ratio = -sum of diffs);
 * a line without the key prints exactly what it printed before.  A claim
 * list of the wrong length, or a number for a token without a score, is
 * refused (exit 4) before anything is printed or any receipt written.
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
    json_t *claims;         /* its claimed_logprobs (one array per continuation), or NULL */
    size_t lineno;          /* its line in the --batch file (for errors) */
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

/* ---------------------------------------------------------------- claims
 * claimed_logprobs (docs/eval.md "RL: measuring an inference engine's
 * drift"): one array per continuation, one JSON number or null per
 * continuation token.  What the line alone shows is checked as it is
 * parsed: the shape, the types and, for a continuation given as ids, the
 * count and (with no context) the null of the unscored first token; a
 * continuation given as text is counted once it is tokenized
 * (claims_match, after scoring, before any output). */

/* A continuation's claims: `have` values for its `n` tokens. */
static int claim_count(size_t have, size_t n, size_t line, size_t i, cis2_error *err)
{
    return have == n ? CIS2_OK
                     : cis2_fail(err, CIS2_E_FORMAT,
                                 "line %zu: claimed_logprobs[%zu] has %zu values, continuations[%zu] has %zu tokens "
                                 "(one value or null per token)", line, i, have, i, n);
}

/* With no context the first token has no score: its claim must be null. */
static int claim_unscored(const json_t *a, size_t line, size_t i, cis2_error *err)
{
    json_t *x = json_array_get(a, 0);
    return !x || json_is_null(x)
               ? CIS2_OK
               : cis2_fail(err, CIS2_E_FORMAT,
                           "line %zu: claimed_logprobs[%zu][0] must be null: without a context the first token has "
                           "no logprob (docs/sampling.md §S11.2)", line, i);
}

static int check_claims(const json_t *cl, const json_t *cs, size_t line, int no_context, cis2_error *err)
{
    if (!json_is_array(cl))
        return cis2_fail(err, CIS2_E_FORMAT, "line %zu: claimed_logprobs is not an array (one per continuation)", line);
    if (json_array_size(cl) != json_array_size(cs))
        return cis2_fail(err, CIS2_E_FORMAT,
                         "line %zu: claimed_logprobs has %zu entries, continuations has %zu (one per continuation)",
                         line, json_array_size(cl), json_array_size(cs));
    for (size_t i = 0; i < json_array_size(cl); i++) {
        json_t *a = json_array_get(cl, i), *c = json_array_get(cs, i);
        if (!json_is_array(a))
            return cis2_fail(err, CIS2_E_FORMAT,
                             "line %zu: claimed_logprobs[%zu] is not an array (claimed_logprobs holds one array per "
                             "continuation)", line, i);
        for (size_t k = 0; k < json_array_size(a); k++) {
            json_t *x = json_array_get(a, k);
            if (!json_is_number(x) && !json_is_null(x))
                return cis2_fail(err, CIS2_E_FORMAT,
                                 "line %zu: claimed_logprobs[%zu][%zu] is not a JSON number or null (NaN and "
                                 "infinities are not JSON)", line, i, k);
        }
        if (json_is_array(c)) {
            int rc = claim_count(json_array_size(a), json_array_size(c), line, i, err);
            if (!rc && no_context) rc = claim_unscored(a, line, i, err);
            if (rc) return rc;
        }
    }
    return CIS2_OK;
}

/* Every line's claims against the tokens scored: the counts of continuations
 * given as text, and the unscored first token of each (a text context may
 * have no tokens).  `path` prefixes the error as load_batch's. */
static int claims_match(const sreqs *s, const cis2_score_result *res, const char *path, cis2_error *err)
{
    for (size_t l = 0; l < s->nlines; l++) {
        const sline *ln = &s->lines[l];
        for (size_t i = 0; ln->claims && i < ln->n; i++) {
            const cis2_score_result *r = &res[ln->first + i];
            json_t *a = json_array_get(ln->claims, i);
            int rc = claim_count(json_array_size(a), r->n_ids, ln->lineno, i, err);
            if (!rc && r->first) rc = claim_unscored(a, ln->lineno, i, err);
            if (rc) {
                char m[512];
                snprintf(m, sizeof m, "%s", err->msg);
                snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", path, m);
                return rc;
            }
        }
    }
    return CIS2_OK;
}

/* The comparison of one continuation (docs/eval.md "What it computes"):
 * in binary64, in the caller's floating-point environment (the library
 * pins only inside its own calls, cis2.h section 2), so the figures are
 * those of any IEEE-754 binary64 program, Python's included.  diff[k] =
 * claimed - (double)exact (one rounding); over the compared tokens in
 * token order: max_abs = the largest |diff| (NaN if one is NaN; 0 for
 * none), sum = +0.0 + diff + diff ... (one rounding each), mean = sum / n
 * (NaN for none), log_ratio = 0.0 - sum, which is bit for bit the sum
 * +0.0 + (exact - claimed) + ... (rounding to nearest is symmetric; a
 * zero is +0.0 both ways). */
typedef struct cmp_sum {
    size_t n;
    double max_abs, sum, mean, log_ratio;
} cmp_sum;

static double claim_diff(const json_t *x, float exact)
{
    return json_number_value(x) - (double)exact;
}

static cmp_sum compare(const json_t *a, const cis2_score_result *r)
{
    cmp_sum m = {0};
    for (size_t k = r->first; k < r->n_ids; k++) {
        json_t *x = json_array_get(a, k);
        if (json_is_null(x)) continue;
        double d = claim_diff(x, r->logprobs[k]), ad = fabs(d);
        if (isnan(ad) || ad > m.max_abs) m.max_abs = ad; /* a NaN, once in, stays: nothing is > NaN */
        m.sum = m.sum + d;
        m.n++;
    }
    m.mean = m.n ? m.sum / (double)m.n : NAN;
    m.log_ratio = 0.0 - m.sum;
    return m;
}

/* One --batch line: {"context"|"context_ids", "continuations", "claimed_logprobs"}. */
static int parse_line(sreqs *s, json_t *o, size_t line, unsigned top, cis2_error *err)
{
    if (!json_is_object(o)) return cis2_fail(err, CIS2_E_FORMAT, "line %zu: not a JSON object", line);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
        if (strcmp(key, "context") && strcmp(key, "context_ids") && strcmp(key, "continuations") &&
            strcmp(key, "claimed_logprobs"))
            return cis2_fail(err, CIS2_E_FORMAT,
                             "line %zu: unknown key \"%s\" (context, context_ids, continuations, claimed_logprobs)",
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
    json_t *cl = json_object_get(o, "claimed_logprobs");
    if (json_is_null(cl)) cl = NULL;
    if (cl) {
        int rc = check_claims(cl, cs, line, !base.context && !base.n_context_ids, err);
        if (rc) return rc;
    }
    if (grow((void **)&s->lines, &s->lcap, s->nlines + 1, sizeof *s->lines)) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    s->lines[s->nlines++] = (sline){.first = s->n, .n = json_array_size(cs), .ctx = c ? c : ci, .claims = cl, .lineno = line};
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

static json_t *f64_json(double v)
{
    return isfinite(v) ? json_real(v) : json_null(); /* as lp_json: not finite is null */
}

/* `claims`: this continuation's claimed_logprobs array, or NULL (the
 * object is then byte for byte what it was before claims existed). */
static json_t *result_json(const cis2_score_request *q, const cis2_score_result *r, const json_t *claims)
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
        if (claims) {
            json_t *x = json_array_get(claims, k);
            json_object_set_new(t, "claimed", json_is_null(x) ? json_null() : json_real(json_number_value(x)));
            json_object_set_new(t, "diff", json_is_null(x) ? json_null() : f64_json(claim_diff(x, r->logprobs[k])));
        }
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
    if (claims) {
        cmp_sum m = compare(claims, r);
        json_t *mm = json_object();
        json_object_set_new(mm, "n_compared", json_integer((json_int_t)m.n));
        json_object_set_new(mm, "max_abs_diff", f64_json(m.max_abs));
        json_object_set_new(mm, "mean_diff", f64_json(m.mean));
        json_object_set_new(mm, "log_ratio", f64_json(m.log_ratio));
        json_object_set_new(o, "mismatch", mm);
    }
    return o;
}

static void print_human(size_t idx, const cis2_score_request *q, const cis2_score_result *r, const json_t *claims)
{
    char h[9];
    json_t *c = q->continuation ? json_stringn(q->continuation, q->continuation_len) : NULL;
    char *cs = c ? json_dumps(c, JSON_ENCODE_ANY) : cli_ids_csv(r->ids, r->n_ids);
    f32_hex(r->sum, h);
    printf("continuation %zu = %s\n", idx, cs ? cs : "");
    printf("  context_tokens = %zu, tokens = %zu, scored = %zu\n", r->n_context, r->n_ids, r->n_scored);
    printf("  sum = %.9g (bits %s), sum_f64 = %.17g, all_greedy = %s\n", r->sum, h, r->sum_f64,
           r->all_greedy ? "yes" : "no");
    if (claims) {
        cmp_sum m = compare(claims, r);
        printf("  compared = %zu, max_abs_diff = %.17g, mean_diff = %.17g, log_ratio = %.17g\n", m.n, m.max_abs,
               m.mean, m.log_ratio);
        printf("  %-4s %-10s %-15s %-8s %-7s %-6s %-24s %s\n", "i", "id", "logprob", "bits", "rank", "greedy",
               "claimed", "diff");
    } else
        printf("  %-4s %-10s %-15s %-8s %-7s %s\n", "i", "id", "logprob", "bits", "rank", "greedy");
    for (size_t k = 0; k < r->n_ids; k++) {
        if (k < r->first) { printf("  %-4zu %-10u %-15s\n", k, r->ids[k], "(no context)"); continue; }
        f32_hex(r->logprobs[k], h);
        json_t *x = claims ? json_array_get(claims, k) : NULL;
        if (!claims)
            printf("  %-4zu %-10u %-15.9g %-8s %-7u %s\n", k, r->ids[k], r->logprobs[k], h, r->ranks[k],
                   r->greedy[k] ? "yes" : "no");
        else if (json_is_null(x))
            printf("  %-4zu %-10u %-15.9g %-8s %-7u %-6s %s\n", k, r->ids[k], r->logprobs[k], h, r->ranks[k],
                   r->greedy[k] ? "yes" : "no", "-");
        else
            printf("  %-4zu %-10u %-15.9g %-8s %-7u %-6s %-24.17g %.17g\n", k, r->ids[k], r->logprobs[k], h,
                   r->ranks[k], r->greedy[k] ? "yes" : "no", json_number_value(x), claim_diff(x, r->logprobs[k]));
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
        for (size_t i = 0; i < l->n; i++)
            print_human(i, &s->r[l->first + i], &res[l->first + i], l->claims ? json_array_get(l->claims, i) : NULL);
        return;
    }
    json_t *o = json_object(), *a = json_array();
    const cis2_score_request *q0 = &s->r[l->first];
    json_object_set_new(o, "context", q0->context ? json_stringn(q0->context, q0->context_len) : json_null());
    json_object_set_new(o, "context_token_ids", ids_json(r0->context_ids, r0->n_context));
    for (size_t i = 0; i < l->n; i++)
        json_array_append_new(a, result_json(&s->r[l->first + i], &res[l->first + i],
                                             l->claims ? json_array_get(l->claims, i) : NULL));
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
    if (batch && (rc = claims_match(&s, res, batch, &err))) goto report; /* before any receipt or output */
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

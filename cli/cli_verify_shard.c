/*
 * cli_verify_shard.c - many receipts verified as array jobs
 * (docs/receipts.md "Verifying many receipts: shards"):
 *   cis2 verify --manifest FILE [--shard I/N | --shard auto [--shard-count N]]
 *               [--verdicts OUT]    verify a manifest's receipts, or one shard of them
 *   cis2 verify --merge OUT...     the shards' verdict files as one run
 *
 * A manifest lists receipts one a line: a path (relative to the manifest's
 * directory), or a JSON object {"receipt": "CIS-2-RECEIPT ...", "name": ...}
 * (a line that starts with `{`); empty lines are skipped.  Entry i is the
 * i-th non-empty line.
 *
 * Shards.  Each entry has a key: the SHA-256 of its receipt's three
 * artifact hashes and prompt bytes (prompt-hex, and context-hex for a
 * score receipt), so every receipt of one prompt (the samples of an RL
 * group) has one key; an entry whose receipt does not parse is keyed by
 * its manifest line.  Its shard is the key's first 8 bytes (big-endian) mod
 * N: a function of the files and N alone, so shards run anywhere, in any
 * order, each verify every entry of theirs exactly once, and the receipts
 * of one prompt are verified in one cis2_verify call, sharing the prompt's
 * prefill (src/verify_plan.c "shared prompt prefixes").  A shard reads every
 * entry once to key it, then verifies its own in chunks of whole prompt
 * groups (CHUNK_MIN receipts or more, CHUNK_MAX at most), so memory stays
 * bounded by a chunk, not the manifest.
 *
 * Output: `NAME: verdict: SUMMARY` per receipt in manifest order and the
 * `summary:` line, exactly as `cis2 verify R1 ... Rn` prints (cli_receipt.c),
 * and the exit status the highest verdict code.  --verdicts writes JSON
 * lines (whole or not at all): a header naming the manifest (its SHA-256),
 * the entry count and the shard, then one object per receipt.  --merge
 * checks that its files are every shard of one manifest, each whole, and
 * prints the lines and exit status of the unsharded run.
 */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_MAX ((size_t)1 << 30) /* a manifest or a verdict file is read whole */
#define CHUNK_MIN 128                  /* receipts per cis2_verify call, whole prompt groups... */
#define CHUNK_MAX 4096                 /* ...unless one group is larger */
#define SHARDS_MAX 1000000000u
#define FORMAT_NAME "cis2-verify-verdicts-1"
#define LINE_MAX_JSON_COST ((uint64_t)16 << 20) /* a verdict line (jsonlim): a name and a summary */

typedef struct entry {
    const char *text; /* the manifest line, without its LF (and CR) */
    size_t len, line; /* line: 1-based */
    uint8_t key[32];
} entry;

typedef struct manifest {
    const char *path;
    char *buf;
    size_t len;
    entry *e;
    size_t n;
    char sha[65];
} manifest;

typedef struct many_cli {
    cli_engine eng;
    const char *replay, *dump, *manifest, *shard, *verdicts;
    size_t shard_count;
    int twice, merge;
    uint64_t si, sn; /* this shard: si of sn */
} many_cli;

int cli_verify_many_wanted(int argc, char **argv)
{
    static const char *const names[] = {"--manifest", "--merge", "--shard", "--shard-count", "--verdicts"};
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (!strcmp(argv[i], names[k])) return 1;
    return 0;
}

/* ------------------------------------------------------------ shards */

/* A decimal without sign or leading zero, at most max; -1 if not one. */
static long long decimal(const char *s, size_t n, unsigned long long max)
{
    if (n == 0 || n > 10 || (s[0] == '0' && n > 1)) return -1;
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v > max ? -1 : (long long)v;
}

static long long env_num(const char *name)
{
    const char *v = getenv(name);
    return v ? decimal(v, strlen(v), 0xffffffffu) : -2; /* -2 unset, -1 not a number */
}

/* Slurm's job array variables (sbatch(1) OUTPUT ENVIRONMENT VARIABLES):
 * SLURM_ARRAY_TASK_ID is this task's index, which starts at
 * SLURM_ARRAY_TASK_MIN (not 0: --array=1-16) and goes up by
 * SLURM_ARRAY_TASK_STEP (--array=1-7:2) to SLURM_ARRAY_TASK_MAX;
 * SLURM_ARRAY_TASK_COUNT counts the tasks.  A list (--array=1,3,9) has
 * gaps the count cannot place, so it is refused. */
static int shard_slurm(many_cli *c)
{
    long long id = env_num("SLURM_ARRAY_TASK_ID"), lo = env_num("SLURM_ARRAY_TASK_MIN"),
              hi = env_num("SLURM_ARRAY_TASK_MAX"), cnt = env_num("SLURM_ARRAY_TASK_COUNT"),
              step = env_num("SLURM_ARRAY_TASK_STEP");
    static const char *const names[] = {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                                        "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP"};
    long long vals[] = {id, lo, hi, cnt, step};
    for (int k = 0; k < 5; k++) {
        if (vals[k] == -1) return cli_usage_error("verify", "--shard auto: %s='%s' is not a number", names[k], getenv(names[k]));
        if (vals[k] == -2 && k < 4) return cli_usage_error("verify", "--shard auto: SLURM_ARRAY_TASK_ID is set but %s is not", names[k]);
    }
    if (step == -2) step = 1;
    /* every value is in 0..2^32-1 (env_num); the count and the step are
     * bounded before any arithmetic, which then stays far from overflow:
     * no product, (hi - lo) / step compared with cnt - 1 */
    if (cnt > (long long)SHARDS_MAX)
        return cli_usage_error("verify", "--shard auto: SLURM_ARRAY_TASK_COUNT=%lld is over the limit of %u shards", cnt, SHARDS_MAX);
    if (step > (long long)SHARDS_MAX)
        return cli_usage_error("verify", "--shard auto: SLURM_ARRAY_TASK_STEP=%lld is over the limit of %u", step, SHARDS_MAX);
    if (cnt < 1 || step < 1 || id < lo || id > hi || (id - lo) % step || (hi - lo) % step || (hi - lo) / step != cnt - 1)
        return cli_usage_error("verify", "--shard auto: the Slurm array (MIN %lld, MAX %lld, STEP %lld, COUNT %lld, ID %lld) "
                               "is not MIN, MIN+STEP, ..., MAX: give --shard I/N", lo, hi, step, cnt, id);
    if (c->shard_count && c->shard_count != (size_t)cnt)
        return cli_usage_error("verify", "--shard-count %zu, but SLURM_ARRAY_TASK_COUNT is %lld", c->shard_count, cnt);
    c->si = (uint64_t)((id - lo) / step);
    c->sn = (uint64_t)cnt;
    return CIS2_OK;
}

/* --shard I/N, --shard auto, --shard-count N (auto implied); none: 0/1. */
static int shard_parse(many_cli *c)
{
    c->si = 0;
    c->sn = 1;
    if (!c->shard && !c->shard_count) return CIS2_OK;
    if (c->shard && strcmp(c->shard, "auto")) {
        const char *s = c->shard, *slash = strchr(s, '/');
        if (c->shard_count) return cli_usage_error("verify", "--shard-count goes with --shard auto, not --shard I/N");
        long long i = slash ? decimal(s, (size_t)(slash - s), SHARDS_MAX) : -1;
        long long n = slash ? decimal(slash + 1, strlen(slash + 1), SHARDS_MAX) : -1;
        if (i < 0 || n < 1) return cli_usage_error("verify", "--shard: '%s' is not I/N (decimals, 0 <= I < N) or auto", s);
        if (i >= n) return cli_usage_error("verify", "--shard: '%s': I must be below N (shards are 0 to N-1)", s);
        c->si = (uint64_t)i;
        c->sn = (uint64_t)n;
        return CIS2_OK;
    }
    int slurm = getenv("SLURM_ARRAY_TASK_ID") != NULL, k8s = getenv("JOB_COMPLETION_INDEX") != NULL;
    if (slurm && k8s) return cli_usage_error("verify", "--shard auto: both SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX are set");
    if (slurm) return shard_slurm(c);
    if (!k8s) return cli_usage_error("verify", "--shard auto: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set");
    /* a Kubernetes Indexed Job: JOB_COMPLETION_INDEX is 0 .. completions-1; the count is not in the environment */
    if (!c->shard_count) return cli_usage_error("verify", "JOB_COMPLETION_INDEX needs --shard-count N (the Job's completions)");
    long long i = env_num("JOB_COMPLETION_INDEX");
    if (i < 0) return cli_usage_error("verify", "JOB_COMPLETION_INDEX='%s' is not a number", getenv("JOB_COMPLETION_INDEX"));
    if ((unsigned long long)i >= c->shard_count)
        return cli_usage_error("verify", "JOB_COMPLETION_INDEX %lld is not below --shard-count %zu", i, c->shard_count);
    c->si = (uint64_t)i;
    c->sn = c->shard_count;
    return CIS2_OK;
}

static uint64_t shard_of(const uint8_t key[32], uint64_t n)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | key[i];
    return v % n;
}

/* ---------------------------------------------------------- manifest */

static int manifest_load(manifest *m, cis2_error *err)
{
    int rc = cis2_read_file(m->path, MANIFEST_MAX, "manifest", &m->buf, &m->len, err);
    if (rc) return rc;
    uint8_t d[32];
    cis2_sha256(m->buf, m->len, d);
    cis2_hex(d, 32, m->sha);
    size_t cap = 0, line = 0;
    for (size_t p = 0; p < m->len;) {
        const char *s = m->buf + p, *nl = memchr(s, '\n', m->len - p);
        size_t n = nl ? (size_t)(nl - s) : m->len - p;
        p += n + (nl != NULL);
        line++;
        if (memchr(s, '\0', n)) return cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: a NUL byte", m->path, line);
        if (n && s[n - 1] == '\r') n--;
        if (!n) continue;
        if (m->n == cap) {
            entry *e = realloc(m->e, (cap = cap ? 2 * cap : 64) * sizeof *e);
            if (!e) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            m->e = e;
        }
        m->e[m->n++] = (entry){.text = s, .len = n, .line = line};
    }
    if (!m->n) return cis2_fail(err, CIS2_E_FORMAT, "%s: lists no receipts", m->path);
    return CIS2_OK;
}

/* A path entry's file: relative to the manifest's directory (malloc'ed). */
static char *entry_path(const manifest *m, const entry *en)
{
    const char *slash = strrchr(m->path, '/');
    size_t dir = en->text[0] == '/' || !slash ? 0 : (size_t)(slash - m->path) + 1;
    char *p = malloc(dir + en->len + 1);
    if (!p) return NULL;
    memcpy(p, m->path, dir);
    memcpy(p + dir, en->text, en->len);
    p[dir + en->len] = 0;
    return p;
}

/* Entry en's receipt and its name; a receipt that cannot be had is not an
 * error of the call (*r NULL, why in *lerr) unless memory ran out. */
static int entry_receipt(const manifest *m, const entry *en, cis2_receipt **r, char **name, cis2_error *lerr)
{
    *r = NULL;
    *name = NULL;
    *lerr = (cis2_error){0};
    if (en->text[0] == '{') {
        json_error_t je;
        json_t *o = json_loadb(en->text, en->len, JSON_REJECT_DUPLICATES, &je), *rt = json_object_get(o, "receipt"),
               *nm = json_object_get(o, "name");
        char dflt[64];
        snprintf(dflt, sizeof dflt, ":%zu", en->line);
        size_t need = strlen(m->path) + sizeof dflt;
        *name = json_is_string(nm) ? strdup(json_string_value(nm)) : malloc(need);
        if (*name && !json_is_string(nm)) snprintf(*name, need, "%s%s", m->path, dflt);
        if (!*name) { json_decref(o); return cis2_fail(lerr, CIS2_E_NOMEM, "out of memory"); }
        int rc;
        if (!json_is_string(rt))
            rc = cis2_fail(lerr, CIS2_E_FORMAT, "%s: line %zu: not a JSON object with a \"receipt\" string", m->path, en->line);
        else rc = cis2_receipt_parse(json_string_value(rt), json_string_length(rt), *name, r, lerr);
        json_decref(o);
        return rc == CIS2_E_NOMEM ? rc : CIS2_OK;
    }
    if (!(*name = entry_path(m, en))) return cis2_fail(lerr, CIS2_E_NOMEM, "out of memory");
    return cis2_receipt_load(*name, r, lerr) == CIS2_E_NOMEM ? CIS2_E_NOMEM : CIS2_OK;
}

/* The entry's key (the header comment): its receipt's prompt group. */
static void entry_key(const entry *en, const cis2_receipt *r, uint8_t key[32])
{
    static const char *const keys[] = {"weights-sha256", "config-sha256", "tokenizer-sha256", "prompt-hex", "context-hex"};
    if (!r) { /* the line itself, as written */
        char *b = malloc(en->len + 16);
        if (b) { memcpy(b, "unparsed\n", 9); memcpy(b + 9, en->text, en->len); cis2_sha256(b, en->len + 9, key); }
        else cis2_sha256(en->text, en->len, key);
        free(b);
        return;
    }
    size_t n = 0;
    for (size_t k = 0; k < 5; k++) { const char *v = cis2_receipt_get(r, keys[k]); n += (v ? strlen(v) : 0) + 1; }
    char *b = malloc(n + 1), *p = b;
    if (!b) { memset(key, 0, 32); return; } /* still deterministic, merely ungrouped */
    for (size_t k = 0; k < 5; k++) {
        const char *v = cis2_receipt_get(r, keys[k]);
        size_t l = v ? strlen(v) : 0;
        memcpy(p, v ? v : "", l);
        p[l] = '\n';
        p += l + 1;
    }
    cis2_sha256(b, n, key);
    free(b);
}

/* ----------------------------------------------------------- records */

/* One receipt's verdict as a JSON object (the verdict-file line). */
static json_t *record_new(size_t idx, const entry *en, const char *name, const cis2_receipt *r, const cis2_verdict *v,
                          const cis2_error *lerr)
{
    json_t *o = json_object(), *diff = json_array();
    if (!o || !diff) { json_decref(o); json_decref(diff); return NULL; }
    json_object_set_new(o, "entry", json_integer((json_int_t)idx));
    json_object_set_new(o, "line", json_integer((json_int_t)en->line));
    json_object_set_new(o, "name", json_string(name));
    if (!v) { /* the receipt did not load: counted apart, as cli_receipt.c does */
        char s[sizeof lerr->msg + 16];
        snprintf(s, sizeof s, "MALFORMED (%s)", lerr->msg);
        json_object_set_new(o, "verdict", json_string("MALFORMED"));
        json_object_set_new(o, "kind", json_integer(CIS2_VERDICT_MALFORMED));
        json_object_set_new(o, "code", json_integer(lerr->code));
        json_object_set_new(o, "summary", json_string(s));
        json_object_set_new(o, "parsed", json_false());
    } else {
        json_object_set_new(o, "verdict", json_string(v->name));
        json_object_set_new(o, "kind", json_integer(v->kind));
        json_object_set_new(o, "code", json_integer(v->code));
        json_object_set_new(o, "summary", json_string(v->summary));
        json_object_set_new(o, "parsed", json_true());
        char *text = NULL, hex[65];
        size_t tlen = 0;
        cis2_error re = {0};
        uint8_t d[32];
        if (!r || cis2_receipt_render(r, &text, &tlen, &re)) { json_decref(o); json_decref(diff); return NULL; }
        cis2_sha256(text, tlen, d); /* the bytes verified: a parsed receipt renders back to them */
        cis2_free(text);
        cis2_hex(d, 32, hex);
        json_object_set_new(o, "receipt_sha256", json_string(hex));
        for (size_t f = 0; f < v->n_fields; f++)
            if (v->fields[f].status == CIS2_FIELD_MISMATCH) json_array_append_new(diff, json_string(v->fields[f].key));
        if (v->first_bad_step >= 0) json_object_set_new(o, "first_bad_step", json_integer(v->first_bad_step));
    }
    json_object_set_new(o, "differ", diff);
    if (!json_is_string(json_object_get(o, "name")) || !json_is_string(json_object_get(o, "summary"))) {
        json_decref(o); /* a name that is not UTF-8 */
        return NULL;
    }
    return o;
}

static int rec_entry_cmp(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "entry"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "entry"));
    return x < y ? -1 : x > y;
}

/* A name or summary on one line: a control byte (a newline in a
 * manifest's "name" could forge a `summary:` line) as \xHH; anything
 * else, as `cis2 verify R1 ... Rn` prints its paths. */
static void print_escaped(const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

/* The lines of `cis2 verify R1 ... Rn` (cli_receipt.c verify_print) for
 * records in entry order; returns the highest code. */
static int records_print(json_t *const *rec, size_t n)
{
    size_t count[16] = {0}, malformed = 0;
    const char *name[16] = {0};
    int worst = CIS2_OK;
    for (size_t i = 0; i < n; i++) {
        json_t *o = rec[i];
        print_escaped(json_string_value(json_object_get(o, "name")));
        printf(": verdict: ");
        print_escaped(json_string_value(json_object_get(o, "summary")));
        printf("\n");
        int code = (int)json_integer_value(json_object_get(o, "code"));
        if (code > worst) worst = code;
        if (!json_is_true(json_object_get(o, "parsed"))) { malformed++; continue; }
        int k = (int)json_integer_value(json_object_get(o, "kind")) & 15;
        count[k]++;
        name[k] = json_string_value(json_object_get(o, "verdict"));
    }
    if (!n) { printf("summary: 0 receipts\n"); return worst; } /* a shard can be empty */
    printf("summary: %zu receipts:", n);
    const char *sep = " ";
    for (int k = 0; k < 16; k++)
        if (count[k]) { printf("%s%zu %s", sep, count[k], name[k]); sep = ", "; }
    if (malformed) printf("%s%zu MALFORMED", sep, malformed);
    printf("\n");
    return worst;
}

/* ------------------------------------------------------------ verify */

typedef struct own { size_t idx; const uint8_t *key; } own;

static int own_cmp(const void *pa, const void *pb)
{
    const own *a = pa, *b = pb;
    int c = memcmp(a->key, b->key, 32);
    return c ? c : a->idx < b->idx ? -1 : a->idx > b->idx;
}

typedef struct run_ctx {
    many_cli *c;
    manifest *m;
    cis2_engine *e;
    json_t **rec;
    size_t nrec;
} run_ctx;

/* Verifies entries o[0..n) (whole prompt groups) in one cis2_verify call:
 * a receipt cis2_check finds UNSUPPORTED needs no weights (as cli_receipt.c). */
static int verify_chunk(run_ctx *x, const own *o, size_t n, cis2_error *err)
{
    cis2_receipt **rs = calloc(n, sizeof *rs), **todo = calloc(n, sizeof *todo);
    cis2_verdict **pre = calloc(n, sizeof *pre), *vs = NULL;
    char **names = calloc(n, sizeof *names);
    cis2_error *lerr = calloc(n, sizeof *lerr);
    size_t *which = calloc(n, sizeof *which), k = 0;
    int rc = CIS2_OK;
    if (!rs || !todo || !pre || !names || !lerr || !which) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        const entry *en = &x->m->e[o[i].idx];
        if ((rc = entry_receipt(x->m, en, &rs[i], &names[i], &lerr[i]))) { *err = lerr[i]; goto out; }
        if (!rs[i]) continue;
        if ((rc = cis2_check(rs[i], NULL, NULL, 0, &pre[i], err))) goto out;
        if (pre[i]->kind != CIS2_VERDICT_UNSUPPORTED) { todo[k] = rs[i]; which[k++] = i; }
    }
    if (k) {
        if (!x->e && (rc = cli_engine_open(&x->c->eng, &x->e, err))) goto out;
        int mode = x->c->replay && !strcmp(x->c->replay, "decode") ? CIS2_REPLAY_DECODE : CIS2_REPLAY_PREFILL;
        cis2_verify_opts vo = {.replay = mode, .twice = x->c->twice};
        if ((rc = cis2_verify(x->e, todo, k, &vo, &vs, err))) { vs = NULL; goto out; }
    }
    for (size_t i = 0, j = 0; i < n; i++) {
        const cis2_verdict *v = rs[i] ? pre[i] : NULL;
        if (j < k && which[j] == i) v = &vs[j++];
        json_t *r = record_new(o[i].idx, &x->m->e[o[i].idx], names[i], rs[i], v, &lerr[i]);
        if (!r) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: a receipt name that is not UTF-8", names[i]); goto out; }
        x->rec[x->nrec++] = r;
    }
out:
    cis2_verdicts_free(vs, k);
    for (size_t i = 0; i < n; i++) {
        if (pre) cis2_verdicts_free(pre[i], 1);
        if (rs) cis2_receipt_free(rs[i]);
        if (names) free(names[i]);
    }
    free(rs); free(todo); free(pre); free(names); free(lerr); free(which);
    return rc;
}

static int write_verdicts(const many_cli *c, const manifest *m, json_t *const *rec, size_t n, cis2_error *err)
{
    cis2_out *out;
    int rc = cis2_out_open(&out, c->verdicts, err);
    if (rc) return rc;
    FILE *f = cis2_out_stream(out);
    json_t *h = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "format", FORMAT_NAME, "manifest", m->path,
                          "manifest_sha256", m->sha, "entries", (json_int_t)m->n, "shard", (json_int_t)c->si,
                          "shards", (json_int_t)c->sn, "receipts", (json_int_t)n);
    int bad = !h || json_dumpf(h, f, JSON_COMPACT) || fputc('\n', f) == EOF;
    json_decref(h);
    for (size_t i = 0; !bad && i < n; i++) bad = json_dumpf(rec[i], f, JSON_COMPACT) || fputc('\n', f) == EOF;
    if (bad) { cis2_out_abort(out); return cis2_fail(err, CIS2_E_IO, "%s: write failed", c->verdicts); }
    return cis2_out_commit(out, err);
}

/* Before any work (docs/inputs.md "Outputs"): --verdicts can be written
 * and is none of the inputs: the model's files, the manifest and every
 * receipt file it lists. */
static int check_verdicts_path(const many_cli *c, const manifest *m, cis2_error *err)
{
    char in[3][4200];
    cli_engine_inputs(&c->eng, in);
    const char **inputs = calloc(m->n + 4, sizeof *inputs);
    size_t n = 0;
    int rc = CIS2_OK;
    if (!inputs) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    inputs[n++] = in[0];
    inputs[n++] = in[1];
    inputs[n++] = in[2];
    inputs[n++] = c->manifest;
    for (size_t i = 0; i < m->n && !rc; i++)
        if (m->e[i].text[0] != '{' && !(inputs[n++] = entry_path(m, &m->e[i])))
            rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (!rc) rc = cis2_check_output_path(c->verdicts, inputs, n, NULL, 0, err);
    if (!rc) rc = cli_check_not_weights(&c->eng, c->verdicts, err);
    if (!rc) rc = cli_probe_output(c->verdicts, err);
    for (size_t i = 4; i < n; i++) free((char *)inputs[i]);
    free(inputs);
    return rc;
}

static int verify_manifest(many_cli *c, int *worst, cis2_error *err)
{
    manifest m = {.path = c->manifest};
    run_ctx x = {.c = c, .m = &m};
    own *mine = NULL;
    size_t k = 0;
    int rc;
    if ((rc = manifest_load(&m, err))) goto out;
    if (c->verdicts && (rc = check_verdicts_path(c, &m, err))) goto out;
    if (!(mine = calloc(m.n, sizeof *mine)) || !(x.rec = calloc(m.n, sizeof *x.rec))) {
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m.n; i++) { /* every entry's key; ours kept */
        cis2_receipt *r;
        char *name;
        cis2_error lerr;
        if ((rc = entry_receipt(&m, &m.e[i], &r, &name, &lerr))) { *err = lerr; goto out; }
        entry_key(&m.e[i], r, m.e[i].key);
        cis2_receipt_free(r);
        free(name);
        if (shard_of(m.e[i].key, c->sn) == c->si) mine[k++] = (own){i, m.e[i].key};
    }
    qsort(mine, k, sizeof *mine, own_cmp); /* prompt groups together */
    for (size_t a = 0, b; a < k; a = b) {
        for (b = a + 1; b < k && b - a < CHUNK_MAX; b++)
            if (b - a >= CHUNK_MIN && memcmp(mine[b].key, mine[b - 1].key, 32)) break;
        if ((rc = verify_chunk(&x, mine + a, b - a, err))) goto out;
    }
    qsort(x.rec, x.nrec, sizeof *x.rec, rec_entry_cmp);
    if (c->verdicts && (rc = write_verdicts(c, &m, x.rec, x.nrec, err))) goto out;
    *worst = records_print(x.rec, x.nrec);
out:
    for (size_t i = 0; x.rec && i < x.nrec; i++) json_decref(x.rec[i]);
    free(x.rec);
    free(mine);
    free(m.e);
    free(m.buf);
    cis2_engine_close(x.e);
    return rc;
}

/* ------------------------------------------------------------- merge */

typedef struct merge_set {
    json_t *first;  /* the first file's header */
    json_t **rec;   /* by entry */
    size_t entries, shards;
    unsigned char *seen; /* by shard */
} merge_set;

static int header_int(json_t *h, const char *k, size_t max, size_t *out)
{
    json_t *v = json_object_get(h, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (unsigned long long)json_integer_value(v) > max) return -1;
    *out = (size_t)json_integer_value(v);
    return 0;
}

static int hex64(json_t *v)
{
    const char *h = json_string_value(v);
    if (!h || strlen(h) != 64) return 0;
    for (; *h; h++)
        if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f'))) return 0;
    return 1;
}

static int record_ok(json_t *o, size_t entries)
{
    size_t e;
    json_t *sha = json_object_get(o, "receipt_sha256");
    if (json_is_true(json_object_get(o, "parsed")) ? !hex64(sha) : sha != NULL) return 0; /* bound to its receipt */
    json_t *k = json_object_get(o, "kind"), *c = json_object_get(o, "code"), *p = json_object_get(o, "parsed");
    return json_is_object(o) && !header_int(o, "entry", entries - 1, &e) && json_is_string(json_object_get(o, "name")) &&
           json_is_string(json_object_get(o, "verdict")) && json_is_string(json_object_get(o, "summary")) &&
           json_is_integer(k) && json_integer_value(k) >= 0 && json_integer_value(k) < 16 && json_is_integer(c) &&
           json_integer_value(c) >= 0 && json_integer_value(c) < 128 && json_is_boolean(p);
}

static int merge_file(merge_set *s, const char *path, cis2_error *err)
{
    char *buf;
    size_t len, line = 0, want = 0, got = 0, shard = 0;
    int rc = cis2_read_file(path, MANIFEST_MAX, "verdict file", &buf, &len, err);
    if (rc) return rc;
    for (size_t p = 0; p < len && !rc;) {
        const char *t = buf + p, *nl = memchr(t, '\n', len - p);
        size_t n = nl ? (size_t)(nl - t) : len - p;
        p += n + (nl != NULL);
        line++;
        json_error_t je;
        if (cis2_json_cost_bytes(t, n) > LINE_MAX_JSON_COST) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: its JSON would take over 16 MiB to parse (not a verdict line)", path, line);
            break;
        }
        json_t *o = json_loadb(t, n, JSON_REJECT_DUPLICATES, &je); /* one meaning per key */
        if (!o) { rc = cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: not JSON (%s)", path, line, je.text); break; }
        if (line == 1) {
            size_t ent, shs;
            const char *fmt = json_string_value(json_object_get(o, "format"));
            const char *sha = json_string_value(json_object_get(o, "manifest_sha256"));
            if (!fmt || strcmp(fmt, FORMAT_NAME) || !sha || header_int(o, "entries", (size_t)1 << 40, &ent) || !ent ||
                header_int(o, "shards", SHARDS_MAX, &shs) || !shs || header_int(o, "shard", shs - 1, &shard) ||
                header_int(o, "receipts", ent, &want))
                rc = cis2_fail(err, CIS2_E_FORMAT, "%s: not a verdict file of cis2 verify --verdicts (no header)", path);
            else if (!s->first) {
                s->entries = ent;
                s->shards = shs;
                if (!(s->rec = calloc(ent, sizeof *s->rec)) || !(s->seen = calloc(shs, 1)))
                    rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
                s->first = json_incref(o);
            } else if (strcmp(sha, json_string_value(json_object_get(s->first, "manifest_sha256"))) ||
                       ent != s->entries || shs != s->shards)
                rc = cis2_fail(err, CIS2_E_FORMAT, "%s: shard %zu/%zu of another manifest or count than %s/%zu's",
                               path, shard, shs, json_string_value(json_object_get(s->first, "manifest")), s->shards);
            if (!rc && s->seen[shard]) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: shard %zu/%zu given twice", path, shard, shs);
            if (!rc) s->seen[shard] = 1;
        } else if (!record_ok(o, s->entries)) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: not a verdict line", path, line);
        } else {
            size_t e = (size_t)json_integer_value(json_object_get(o, "entry"));
            if (s->rec[e]) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: line %zu: entry %zu is in two shards", path, line, e);
            else { s->rec[e] = json_incref(o); got++; }
        }
        json_decref(o);
    }
    if (!rc && line == 0) rc = cis2_fail(err, CIS2_E_FORMAT, "%s: empty verdict file", path);
    if (!rc && got != want)
        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: %zu verdict lines, its header says %zu (cut short?)", path, got, want);
    free(buf);
    return rc;
}

static int merge_files(const char **files, size_t n, int *worst, cis2_error *err)
{
    merge_set s = {0};
    int rc = CIS2_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = merge_file(&s, files[i], err);
    for (size_t i = 0; !rc && i < s.shards; i++)
        if (!s.seen[i]) rc = cis2_fail(err, CIS2_E_FORMAT, "shard %zu/%zu is missing: merge every shard's verdict file", i, s.shards);
    for (size_t i = 0; !rc && i < s.entries; i++)
        if (!s.rec[i]) rc = cis2_fail(err, CIS2_E_FORMAT, "entry %zu of the manifest has no verdict", i);
    if (!rc) *worst = records_print(s.rec, s.entries);
    for (size_t i = 0; s.rec && i < s.entries; i++) json_decref(s.rec[i]);
    free(s.rec);
    free(s.seen);
    json_decref(s.first);
    return rc;
}

/* ------------------------------------------------------------ command */

int cmd_verify_many(int argc, char **argv)
{
    many_cli c = {0};
    cli_opt opts[] = {CLI_ENGINE_OPTS(c.eng),
                      {"--replay", OPT_STR, &c.replay, 0, 0},
                      {"--twice", OPT_FLAG, &c.twice, 0, 0},
                      {"--dump-logits", OPT_STR, &c.dump, 0, 0},
                      {"--manifest", OPT_STR, &c.manifest, 0, 0},
                      {"--shard", OPT_STR, &c.shard, 0, 0},
                      {"--shard-count", OPT_SIZE, &c.shard_count, SHARDS_MAX, 0},
                      {"--verdicts", OPT_STR, &c.verdicts, 0, 0},
                      {"--merge", OPT_FLAG, &c.merge, 0, 0},
                      {0}};
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    size_t npos = 0;
    if (!pos) return cli_report(&(cis2_error){CIS2_E_NOMEM, "out of memory"});
    int rc = cli_parse("verify", argc, argv, opts, pos, (size_t)argc, &npos), worst = CIS2_OK;
    cis2_error err = {0};
    if (rc) { free(pos); return rc < 0 ? 0 : rc; }
    if (c.merge) {
        if (c.manifest || c.shard || cli_given(opts, &c.shard_count) || c.verdicts || c.dump || c.replay || c.twice)
            rc = cli_usage_error("verify", "--merge takes verdict files only");
        else if (!npos) rc = cli_usage_error("verify", "--merge needs the shards' verdict files");
        else if ((rc = merge_files(pos, npos, &worst, &err)) == CIS2_OK) rc = worst;
    } else {
        if (!c.manifest) rc = cli_usage_error("verify", "--shard, --shard-count and --verdicts go with --manifest FILE");
        else if (!*c.manifest) rc = cli_usage_error("verify", "--manifest: empty path");
        else if (npos) rc = cli_usage_error("verify", "give RECEIPT files or --manifest, not both");
        else if (c.dump) rc = cli_usage_error("verify", "--dump-logits takes one receipt, not a manifest");
        else if (c.verdicts && !*c.verdicts) rc = cli_usage_error("verify", "--verdicts: empty path");
        else if (cli_given(opts, &c.shard_count) && !c.shard_count) rc = cli_usage_error("verify", "--shard-count: 0 shards");
        else if (c.replay && strcmp(c.replay, "prefill") && strcmp(c.replay, "decode"))
            rc = cli_usage_error("verify", "--replay is prefill or decode, not '%s'", c.replay);
        else if (!(rc = shard_parse(&c)) && (rc = verify_manifest(&c, &worst, &err)) == CIS2_OK) rc = worst;
    }
    free(pos);
    if (err.code) return cli_report(&err);
    return cli_finish_stdout(rc);
}

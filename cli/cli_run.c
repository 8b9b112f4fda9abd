/*
 * cli_run.c - `cis2 run`: the whole CIS-2 run (§3.4, §12, §13) of one or
 * many prompts, through cis2_generate (include/cis2.h).
 *
 * Prints, per prompt, the §13.1 lines in this order, then the spec's
 * CIS2_REF line and the decoded completion; --json prints the same fields
 * as one JSON object (an array of them for --prompt-file).  Several
 * prompts decode together, sharing every weight pass; each block equals
 * its single-prompt run.  The double run of §12.4 is on.
 *
 * Side outputs (--receipt, --dump-logits, --trace) are checked before any
 * work, even before the model loads (directory writable, not an input, not
 * each other, and a temporary file really created beside each: a receipt
 * that cannot be written fails now, not after the decode), and written
 * whole or not at all (cis2_out): a failed or interrupted run leaves the
 * old files as they were.  With several prompts each gets its own file
 * FILE.0, FILE.1, ...  --prompt-file may be a pipe or `-` (stdin), read
 * whole first (cli_prompts_load).
 *
 * --stream writes the completion's text before the block as its tokens
 * become final (run_stream below).  Names other surfaces use are aliases
 * (docs/receipts.md "Names across surfaces"): --max-tokens (--gen-toks),
 * --top-logprobs (--logprobs, N alternatives as the server's N),
 * --stop-token-ids (--stop-id).
 */
#include "cli.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PROMPT "Once upon a time"
#define PROMPTS_MAX ((size_t)1 << 18)         /* prompts in a --prompt-file: about 1 KB of results each */
#define DUMP_PROMPTS_MAX 64                    /* --dump-logits files open at once */

typedef struct prompt {
    const char *text;  /* points into the prompt file (cis2_prompts) or argv */
    size_t len;
    uint32_t *ids;     /* --prompt-ids */
    size_t n;
} prompt;

/* --------------------------------------------------------------- output */

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* The bits beside the decimal: the bits are what is pinned (docs/sampling.md §S4). */
static json_t *lp_json(uint32_t id, float lp)
{
    uint32_t b;
    memcpy(&b, &lp, 4);
    char h[9];
    snprintf(h, sizeof h, "%08x", b);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "logprob", isfinite(lp) ? json_real(lp) : json_null()); /* as serve_logprobs.c: -inf, NaN are null; "bits" has them */
    json_object_set_new(o, "bits", json_string(h));
    return o;
}

static json_t *logprobs_json(const cis2_result *r)
{
    json_t *a = json_array();
    for (size_t s = 0; s < r->n_tokens; s++) {
        json_t *st = lp_json(r->tokens[s], r->logprobs[s]), *top = json_array();
        for (size_t k = 0; k < r->n_top; k++)
            if (r->top_ids[s * r->n_top + k] != UINT32_MAX)
                json_array_append_new(top, lp_json(r->top_ids[s * r->n_top + k], r->top_logprobs[s * r->n_top + k]));
        json_object_set_new(st, "top", top);
        json_array_append_new(a, st);
    }
    return a;
}

static json_t *result_json(const cis2_model_info *mi, const cis2_result *r, size_t idx, int ext)
{
    char h[65];
    json_t *o = json_object();
#define HEX(key, d) (cli_hex(d, h), json_object_set_new(o, key, json_string(h)))
    HEX("weights_sha256", mi->weights_sha256);
    HEX("config_sha256", mi->config_sha256);
    HEX("tokenizer_sha256", mi->tokenizer_sha256);
    json_object_set_new(o, "prompt_token_ids", ids_json(r->prompt_ids, r->n_prompt));
    json_object_set_new(o, "generated_token_ids", ids_json(r->tokens, r->n_tokens));
    HEX("table_digest", mi->table_digest);
    HEX("inv_freq_table_digest", mi->inv_freq_table_digest);
    HEX("argmax_digest", r->argmax_digest);
    HEX("cis2_ref", r->witness);
#undef HEX
    json_object_set_new(o, "prompt_idx", json_integer((json_int_t)idx));
    json_object_set_new(o, "prompt_toks", json_integer((json_int_t)r->n_prompt));
    json_object_set_new(o, "gen_toks", json_integer((json_int_t)r->n_tokens));
    json_object_set_new(o, "dtype", json_string("fp32"));
    json_object_set_new(o, "completion", r->text ? json_stringn(r->text, r->text_len) : json_null());
    if (ext) json_object_set_new(o, "finish_reason", json_string(cis2_finish_name(r->finish)));
    if (r->logprobs) json_object_set_new(o, "logprobs", logprobs_json(r));
    return o;
}

static void print_text(const cis2_model_info *mi, const cis2_result *r, size_t idx, int ext)
{
    char h[65];
    char *pc = cli_ids_csv(r->prompt_ids, r->n_prompt), *gc = cli_ids_csv(r->tokens, r->n_tokens);
    cli_hex(mi->weights_sha256, h); printf("weights_sha256 = %s\n", h);
    cli_hex(mi->config_sha256, h); printf("config_sha256 = %s\n", h);
    cli_hex(mi->tokenizer_sha256, h); printf("tokenizer_sha256 = %s\n", h);
    printf("prompt_token_ids = %s\n", pc ? pc : "");
    printf("generated_token_ids = %s\n", gc ? gc : "");
    cli_hex(mi->table_digest, h); printf("table_digest = %s\n", h);
    cli_hex(mi->inv_freq_table_digest, h); printf("inv_freq_table_digest = %s\n", h);
    cli_hex(r->argmax_digest, h); printf("argmax_digest = %s\n", h);
    cli_hex(r->witness, h);
    printf("CIS2_REF digest=%s prompt_idx=%zu prompt_toks=%zu gen_toks=%zu dtype=fp32\n", h, idx, r->n_prompt,
           r->n_tokens);
    json_t *c = r->text ? json_stringn(r->text, r->text_len) : json_null();
    char *cj = json_dumps(c, JSON_ENCODE_ANY);
    printf("completion = %s\n", cj ? cj : "null");
    free(cj);
    json_decref(c);
    if (ext) printf("finish_reason = %s\n", cis2_finish_name(r->finish));
    if (r->logprobs) {
        json_t *lj = logprobs_json(r);
        char *ls = json_dumps(lj, JSON_COMPACT);
        printf("logprobs = %s\n", ls ? ls : "null");
        free(ls);
        json_decref(lj);
    }
    free(pc);
    free(gc);
}

/* ------------------------------------------------------- --stream */

/* --stream (README "Commands"): the completion's text on stdout as its
 * tokens become final during the decode, before the block.  A token's
 * text is written once nothing can change it: an incomplete UTF-8
 * sequence waits (cis2_utf8_unit decides, so the text is the library's
 * display text), so do bytes that may begin a stop string (the library
 * cuts the text there, docs/sampling.md §S5.3-§S5.4), and so does the
 * token that ends the run (an eos or stop id is not text); the rest comes
 * from the result's own text at the end.  The streamed text is thus
 * always a prefix of `completion`, and stdout is that text, a LF, then
 * the block exactly as without --stream. */
typedef struct run_stream {
    const cis2_engine *e;
    const cis2_stop *stop;
    uint32_t *ids;            /* every token so far */
    size_t *ends;             /* ends[i]: raw bytes of ids[0..i] */
    size_t n, cap;
    char *raw;                /* their bytes */
    size_t raw_n, raw_cap;
    size_t shown;             /* ids[0..shown) are written */
    size_t sent;              /* bytes of display text written */
    int off;                  /* out of memory or no tokenizer: the rest waits for the end */
} run_stream;

/* Room for one more token and l more bytes (-1: out of memory). */
static int stream_room(run_stream *st, size_t l)
{
    if (st->n == st->cap) {
        size_t nc = st->cap ? 2 * st->cap : 256;
        uint32_t *ids = realloc(st->ids, nc * sizeof *ids);
        if (ids) st->ids = ids;
        size_t *ends = realloc(st->ends, nc * sizeof *ends);
        if (ends) st->ends = ends;
        if (!ids || !ends) return -1;
        st->cap = nc;
    }
    if (st->raw_n + l > st->raw_cap) {
        size_t nc = st->raw_cap ? 2 * st->raw_cap : 4096;
        while (nc < st->raw_n + l) nc *= 2;
        char *raw = realloc(st->raw, nc);
        if (!raw) return -1;
        st->raw = raw;
        st->raw_cap = nc;
    }
    return 0;
}

/* Where raw[from..n) stops being final: the start of a valid UTF-8
 * sequence cut short by the end, or of a proper prefix of a stop string. */
static size_t final_end(const run_stream *st, size_t from)
{
    const unsigned char *s = (const unsigned char *)st->raw;
    size_t n = st->raw_n, lim = n;
    for (size_t i = from; i < n;) {
        uint32_t cp;
        int v;
        size_t u = cis2_utf8_unit(s + i, n - i, &cp, &v);
        if (v < 0) { lim = i; break; }
        i += u;
    }
    for (size_t j = from; j < lim; j++)
        for (size_t k = 0; k < st->stop->n_strings; k++)
            if (st->stop->string_lens[k] > n - j && !memcmp(s + j, st->stop->strings[k], n - j)) return j;
    return lim;
}

static void stream_token(run_stream *st, const cis2_token_event *ev)
{
    if (st->off || ev->finish) return; /* the last token: the result decides its text */
    char *b = NULL;
    size_t l = 0;
    if (cis2_engine_detokenize(st->e, &ev->token, 1, 0, &b, &l, NULL) || stream_room(st, l)) {
        cis2_free(b);
        st->off = 1;
        return;
    }
    if (l) memcpy(st->raw + st->raw_n, b, l); /* raw is NULL until a token has bytes */
    cis2_free(b);
    st->raw_n += l;
    st->ids[st->n] = ev->token;
    st->ends[st->n++] = st->raw_n;
    size_t from = st->shown ? st->ends[st->shown - 1] : 0, lim = final_end(st, from), k = st->shown;
    while (k < st->n && st->ends[k] <= lim) k++;
    if (k == st->shown) return;
    char *t = NULL;
    size_t tl = 0;
    if (cis2_engine_detokenize(st->e, st->ids + st->shown, k - st->shown, 1, &t, &tl, NULL)) { st->off = 1; return; }
    fwrite(t, 1, tl, stdout);
    fflush(stdout);
    cis2_free(t);
    st->sent += tl;
    st->shown = k;
}

/* The rest of the completion (what the result's text has beyond what was
 * written), then the LF before the block. */
static void stream_end(run_stream *st, const cis2_result *r)
{
    if (r->text && st->sent < r->text_len) fwrite(r->text + st->sent, 1, r->text_len - st->sent, stdout);
    putchar('\n');
}

static void stream_free(run_stream *st)
{
    free(st->ids);
    free(st->ends);
    free(st->raw);
}

/* ------------------------------------------------- per-token callback */

typedef struct run_cb {
    cis2_out **dump;          /* one stream per prompt, or NULL */
    int dump_failed;
    run_stream *stream;       /* --stream, else NULL */
    int progress;             /* 1: \r updates on a terminal, 2: whole lines */
    struct timespec t0, last;
    size_t steps, nprompts, done_tokens;
} run_cb;

static double secs(struct timespec a, struct timespec b)
{
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

static int on_token(void *ctx, const cis2_token_event *ev)
{
    run_cb *c = ctx;
    if (c->dump && !c->dump_failed) {
        FILE *f = cis2_out_stream(c->dump[ev->seq]);
        if (fwrite(ev->logits, sizeof(float), ev->vocab, f) != ev->vocab) c->dump_failed = 1;
    }
    if (c->stream && ev->seq == 0) stream_token(c->stream, ev);
    c->done_tokens++;
    if (c->progress) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        size_t total = c->steps * c->nprompts;
        int last = c->done_tokens == total;
        if (c->progress == 1 || last || secs(c->last, t) >= 1.0) {
            double s = secs(c->t0, t);
            /* both §12.4 runs decode as one batch: 2 tokens per token shown */
            fprintf(stderr, "%scis2: decoding %zu/%zu tokens (x2 for §12.4), %.1f tokens/s%s", c->progress == 1 ? "\r" : "",
                    c->done_tokens, total, s > 0 ? 2.0 * (double)c->done_tokens / s : 0.0,
                    c->progress == 1 && !last ? "   " : "\n");
            c->last = t;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- run */

typedef struct run_opts {
    cli_engine eng;
    const char *prompt_text, *prompt_file, *prompt_ids, *dump, *receipt, *trace;
    const char *speculate;    /* --speculate: off, lookup[:K] or draft:DIR[:K] (docs/speculate.md) */
    size_t gen;
    int json, recompute, trace_dump, progress, stream;
    /* docs/sampling.md: the sampler, logprobs and stop rules */
    const char *temperature, *top_p, *min_p, *stop_ids;
    size_t top_k, logprobs;   /* --logprobs N: N alternatives (as the server's N) */
    int want_logprobs;        /* --logprobs given (N may be 0: the chosen token's only) */
    uint64_t seed, sequence;
    int stop_eos;
    cli_multi stops;
    cis2_sampling samp;
    cis2_stop stop;
    uint32_t *stop_id_list;
    const char *stop_str[16];
    size_t stop_len[16];
} run_opts;

/* FILE, or FILE.i for prompt i of several. */
static void side_name(char *out, size_t cap, const char *path, size_t i, size_t np)
{
    if (np > 1) snprintf(out, cap, "%s.%zu", path, i);
    else snprintf(out, cap, "%s", path);
}

/* Every output path is checked before any work starts. */
static int check_outputs(const run_opts *o, size_t np, cis2_error *err)
{
    char in[3][4200];
    cli_engine_inputs(&o->eng, in);
    const char *inputs[4] = {in[0], in[1], in[2], o->prompt_file};
    size_t nin = o->prompt_file ? 4 : 3;
    size_t cap = 2 * np + 2, nout = 0;
    char **outs = calloc(cap, sizeof *outs);
    if (!outs) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    int rc = CIS2_OK;
    const char *kinds[2] = {o->receipt, o->dump};
    for (int k = 0; k < 2 && !rc; k++) {
        if (!kinds[k]) continue;
        for (size_t i = 0; i < np && !rc; i++) {
            char name[4300];
            side_name(name, sizeof name, kinds[k], i, np);
            if (!(outs[nout] = strdup(name))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); break; }
            rc = cis2_check_output_path(outs[nout], inputs, nin, (const char *const *)outs, nout, err);
            if (!rc && i == 0) rc = cli_probe_output(outs[nout], err); /* FILE.i share FILE.0's directory */
            nout++;
        }
    }
    if (!rc && o->trace) {
        char dump[4300];
        snprintf(dump, sizeof dump, "%s.f32", o->trace);
        if (!(outs[nout] = strdup(o->trace))) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        else rc = cis2_check_output_path(outs[nout], inputs, nin, (const char *const *)outs, nout, err);
        if (!rc) rc = cli_probe_output(o->trace, err);
        nout++;
        if (!rc && o->trace_dump) {
            if (!(outs[nout] = strdup(dump))) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            else rc = cis2_check_output_path(outs[nout], inputs, nin, (const char *const *)outs, nout, err);
            nout++;
        }
    }
    for (size_t i = 0; i < nout && !rc; i++) rc = cli_check_not_weights(&o->eng, outs[i], err);
    for (size_t i = 0; i < nout; i++) free(outs[i]);
    free(outs);
    return rc;
}

/* --receipt with --prompt-ids: the receipt records the prompt's bytes
 * (docs/receipts.md "Prompt tokens"; for ids that no bytes reproduce, the
 * ids' own bytes: "Prompts given as ids"), which need the tokenizer.json.
 * Checked before decoding. */
static int check_receipt_tokenizer(const cis2_engine *e, cis2_error *err)
{
    if (!cis2_engine_info(e)->has_tokenizer)
        return cis2_fail(err, CIS2_E_USAGE, "--receipt needs the model's tokenizer.json (prompt-hex)");
    return CIS2_OK;
}

/* docs/sampling.md §S2.2-§S2.3 on the command line: decimals correctly
 * rounded, --top-k 0 and --top-p 0 refused (omit them for "off"). */
static int sampling_opts(run_opts *o, const cli_opt *opts)
{
    int rc;
    o->samp = (cis2_sampling)CIS2_SAMPLING_GREEDY; /* §S2.1: top_p 1.0 is off */
    if (o->temperature && (rc = cli_parse_f32("run", "--temperature", o->temperature, &o->samp.temperature))) return rc;
    if (o->top_p) {
        if ((rc = cli_parse_f32("run", "--top-p", o->top_p, &o->samp.top_p))) return rc;
        if (o->samp.top_p == 0.0f) return cli_usage_error("run", "--top-p must be in (0, 1] (omit it for off)");
    }
    if (o->min_p && (rc = cli_parse_f32("run", "--min-p", o->min_p, &o->samp.min_p))) return rc;
    for (const cli_opt *p = opts; p->name; p++)
        if (!strcmp(p->name, "--top-k") && p->seen && o->top_k == 0)
            return cli_usage_error("run", "--top-k 0 is refused (omit it for off)");
    if (o->sequence > UINT32_MAX) return cli_usage_error("run", "--sequence must fit 32 bits");
    o->samp.top_k = (uint32_t)o->top_k;
    o->samp.seed = o->seed;
    o->samp.sequence = (uint32_t)o->sequence;
    o->stop.eos = o->stop_eos;
    if (o->stop_ids) {
        cis2_error err = {0};
        if ((rc = cli_parse_ids("--stop-id", o->stop_ids, &o->stop_id_list, &o->stop.n_ids, &err)))
            return rc == CIS2_E_USAGE ? cli_usage_error("run", "%s", err.msg) : cli_report(&err);
        if (o->stop.n_ids == 0) return cli_usage_error("run", "--stop-id needs at least one id");
        o->stop.ids = o->stop_id_list;
    }
    for (size_t i = 0; i < o->stops.n; i++) {
        o->stop_str[i] = o->stops.v[i];
        o->stop_len[i] = strlen(o->stops.v[i]);
    }
    o->stop.strings = o->stop_str;
    o->stop.string_lens = o->stop_len;
    o->stop.n_strings = o->stops.n;
    return CIS2_OK;
}

static int parse_run(int argc, char **argv, run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gen = 16;
    cli_opt opts[] = {
        CLI_ENGINE_OPTS(o->eng),
        {"--prompt", OPT_STR, &o->prompt_text, 0, 0},
        {"--prompt-file", OPT_STR, &o->prompt_file, 0, 0},
        {"--prompt-ids", OPT_STR, &o->prompt_ids, 0, 0},
        {"--gen-toks", OPT_SIZE, &o->gen, 1u << 24, 0},
        {"--max-tokens", OPT_SIZE, &o->gen, 1u << 24, 0},      /* the server's and the library's name */
        {"--json", OPT_FLAG, &o->json, 0, 0},
        {"--dump-logits", OPT_STR, &o->dump, 0, 0},
        {"--receipt", OPT_STR, &o->receipt, 0, 0},
        {"--trace", OPT_STR, &o->trace, 0, 0},
        {"--trace-dump", OPT_FLAG, &o->trace_dump, 0, 0},
        {"--progress", OPT_FLAG, &o->progress, 0, 0},
        {"--stream", OPT_FLAG, &o->stream, 0, 0},
        {"--recompute", OPT_FLAG, &o->recompute, 0, 0},
        {"--speculate", OPT_STR, &o->speculate, 0, 0},
        {"--temperature", OPT_STR, &o->temperature, 0, 0},
        {"--top-k", OPT_SIZE, &o->top_k, UINT32_MAX, 0},
        {"--top-p", OPT_STR, &o->top_p, 0, 0},
        {"--min-p", OPT_STR, &o->min_p, 0, 0},
        {"--seed", OPT_U64, &o->seed, 0, 0},
        {"--sequence", OPT_U64, &o->sequence, 0, 0},
        {"--logprobs", OPT_SIZE, &o->logprobs, CIS2_MAX_TOP_LOGPROBS, 0},
        {"--top-logprobs", OPT_SIZE, &o->logprobs, CIS2_MAX_TOP_LOGPROBS, 0}, /* chat's top_logprobs */
        {"--stop-at-eos", OPT_FLAG, &o->stop_eos, 0, 0},
        {"--stop-id", OPT_STR, &o->stop_ids, 0, 0},
        {"--stop-token-ids", OPT_STR, &o->stop_ids, 0, 0},    /* the server's stop_token_ids */
        {"--stop", OPT_MULTI, &o->stops, 16, 0},
        {0}};
    int rc = cli_parse("run", argc, argv, opts, NULL, 0, NULL);
    if (rc) return rc;
    if ((rc = sampling_opts(o, opts))) return rc;
    o->want_logprobs = cli_given(opts, &o->logprobs);
    if (!!o->prompt_text + !!o->prompt_file + !!o->prompt_ids > 1)
        return cli_usage_error("run", "give at most one of --prompt, --prompt-file, --prompt-ids");
    if (o->gen == 0) return cli_usage_error("run", "--gen-toks must be at least 1");
    if (o->trace_dump && !o->trace) return cli_usage_error("run", "--trace-dump needs --trace FILE");
    if (o->stream && o->json) return cli_usage_error("run", "--stream is for the text output, not --json");
    if (o->prompt_text && !*o->prompt_text) return cli_usage_error("run", "--prompt is empty");
    if (o->speculate && (rc = cli_speculate_check("run", o->speculate))) return rc;
    const char *paths[3] = {o->receipt, o->dump, o->trace};
    const char *names[3] = {"--receipt", "--dump-logits", "--trace"};
    for (int i = 0; i < 3; i++)
        if (paths[i] && !*paths[i]) return cli_usage_error("run", "%s: empty path", names[i]);
    return CIS2_OK;
}

static int print_results(const cis2_engine *e, const run_opts *o, const cis2_result *res, size_t np)
{
    const cis2_model_info *mi = cis2_engine_info(e);
    if (!o->json) {
        for (size_t i = 0; i < np; i++) {
            if (i) printf("\n");
            print_text(mi, &res[i], i, cis2_result_is_extension(&res[i])); /* §S7.1: the library decides */
        }
        return CIS2_OK;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < np; i++) json_array_append_new(arr, result_json(mi, &res[i], i, cis2_result_is_extension(&res[i])));
    json_t *outj = np == 1 && !o->prompt_file ? json_array_get(arr, 0) : arr;
    char *s = json_dumps(outj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", s ? s : "null");
    free(s);
    json_decref(arr);
    return s ? CIS2_OK : CIS2_E_NOMEM;
}

/* Receipts, one per prompt, each whole or not at all. */
static int write_receipts(const cis2_engine *e, const char *path, const cis2_result *res, size_t np, cis2_error *err)
{
    for (size_t i = 0; i < np; i++) {
        cis2_receipt *r;
        char name[4300];
        side_name(name, sizeof name, path, i, np);
        int rc = cis2_receipt_make(e, &res[i], &r, err);
        if (!rc) rc = cis2_receipt_save(r, name, err);
        cis2_receipt_free(r);
        if (rc) return rc;
    }
    return CIS2_OK;
}

/* The prompts: a --prompt-file's, or the one of --prompt / --prompt-ids. */
static int get_prompts(const run_opts *o, cis2_prompts **pf, prompt **ps, size_t *np, cis2_error *err)
{
    int rc;
    if (o->prompt_file) {
        if ((rc = cli_prompts_load(o->prompt_file, PROMPTS_MAX, pf, err))) return rc;
        *np = (*pf)->n;
        if (!(*ps = calloc(*np, sizeof **ps))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        for (size_t i = 0; i < *np; i++) { (*ps)[i].text = (*pf)->text[i]; (*ps)[i].len = (*pf)->len[i]; }
        return CIS2_OK;
    }
    *np = 1;
    if (!(*ps = calloc(1, sizeof **ps))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (!o->prompt_ids) {
        (*ps)[0].text = o->prompt_text ? o->prompt_text : DEFAULT_PROMPT;
        (*ps)[0].len = strlen((*ps)[0].text);
        return CIS2_OK;
    }
    if ((rc = cli_parse_ids("--prompt-ids", o->prompt_ids, &(*ps)[0].ids, &(*ps)[0].n, err))) return rc;
    if ((*ps)[0].n == 0)
        return cis2_fail(err, CIS2_E_USAGE, "--prompt-ids: '' is not a comma-separated list of u32 ids (like 1,2,3)");
    return CIS2_OK;
}

static cis2_request *make_requests(const run_opts *o, const prompt *ps, size_t np)
{
    cis2_request *reqs = calloc(np, sizeof *reqs);
    for (size_t i = 0; reqs && i < np; i++)
        reqs[i] = (cis2_request){.text = ps[i].text, .text_len = ps[i].len, .ids = ps[i].text ? NULL : ps[i].ids,
                                 .n_ids = ps[i].n, .max_tokens = o->gen, .sampling = &o->samp, .stop = &o->stop,
                                 .top_logprobs = (unsigned)o->logprobs, .logprobs = o->want_logprobs};
    return reqs;
}

/* --dump-logits and --trace, opened before the decode (written whole at the end). */
typedef struct side_outs { cis2_out **dump; size_t n; cis2_trace_writer *tw; } side_outs;

static int side_open(const run_opts *o, size_t np, side_outs *so, cis2_error *err)
{
    int rc;
    if (o->dump) {
        if (!(so->dump = calloc(np, sizeof *so->dump))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        so->n = np;
        for (size_t i = 0; i < np; i++) {
            char name[4300];
            side_name(name, sizeof name, o->dump, i, np);
            if ((rc = cis2_out_open(&so->dump[i], name, err))) return rc;
        }
    }
    if (o->trace && (rc = cis2_trace_open(&so->tw, o->trace, o->trace_dump, err))) return rc;
    return CIS2_OK;
}

static int side_commit(const run_opts *o, side_outs *so, int dump_failed, cis2_error *err)
{
    int rc;
    if (dump_failed) return cis2_fail(err, CIS2_E_IO, "%s: writing the logits failed", o->dump);
    for (size_t i = 0; i < so->n; i++) {
        cis2_out *d = so->dump[i];
        so->dump[i] = NULL;
        if ((rc = cis2_out_commit(d, err))) return rc;
    }
    cis2_trace_writer *tw = so->tw;
    so->tw = NULL;
    return tw ? cis2_trace_close(tw, err) : CIS2_OK;
}

static void side_abort(side_outs *so) /* a failed run leaves none of them */
{
    for (size_t i = 0; i < so->n; i++) cis2_out_abort(so->dump[i]);
    free(so->dump);
    cis2_trace_abort(so->tw);
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse_run(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    cis2_error err = {0};
    cis2_prompts *pf = NULL;
    prompt *ps = NULL;
    size_t np = 0;
    cis2_engine *e = NULL;
    cis2_request *reqs = NULL;
    cis2_result *res = NULL;
    side_outs so = {0};
    run_stream st = {0};
    if ((rc = get_prompts(&o, &pf, &ps, &np, &err))) goto out;
    if (o.trace && np != 1) { rc = cis2_fail(&err, CIS2_E_USAGE, "--trace needs a single prompt"); goto out; }
    if (o.stream && np != 1) { rc = cis2_fail(&err, CIS2_E_USAGE, "--stream needs a single prompt"); goto out; }
    if (o.dump && np > DUMP_PROMPTS_MAX) {
        rc = cis2_fail(&err, CIS2_E_USAGE, "--dump-logits: at most %d prompts (one file each)", DUMP_PROMPTS_MAX);
        goto out;
    }
    if ((rc = check_outputs(&o, np, &err))) goto out;
    /* a tokenizer refusal before any weight is read (docs/inputs.md "tokenizer.json") */
    o.eng.need_tokenizer = !o.prompt_ids;
    if ((rc = cli_engine_open(&o.eng, &e, &err))) goto out;
    const cis2_model_info *mi = cis2_engine_info(e);
    if (mi->has_tokenizer && !mi->tokenizer_normative && !o.prompt_ids)
        fprintf(stderr, "cis2: note: %s/tokenizer.json uses the non-normative tokenizer extension (outside CIS-2 v0.3b §3)\n",
                o.eng.model_dir);
    if (o.receipt && o.prompt_ids && (rc = check_receipt_tokenizer(e, &err))) goto out;
    if (o.speculate && (rc = cis2_engine_set_speculate(e, o.speculate, &err))) goto out;
    if (!(reqs = make_requests(&o, ps, np))) { rc = cis2_fail(&err, CIS2_E_NOMEM, "out of memory"); goto out; }
    if ((rc = side_open(&o, np, &so, &err))) goto out;
    /* streamed text on a terminal: no \r progress line over it unless asked */
    run_cb cb = {.progress = o.progress ? (isatty(2) ? 1 : 2) : (isatty(2) && !o.stream ? 1 : 0), .steps = o.gen,
                 .nprompts = np, .dump = so.dump, .stream = o.stream ? &st : NULL};
    st.e = e;
    st.stop = &o.stop;
    clock_gettime(CLOCK_MONOTONIC, &cb.t0);
    cb.last = cb.t0;
    cis2_gen_opts go = {.twice = 1, .on_token = on_token, .on_token_ctx = &cb, .recompute = o.recompute,
                        .on_trace = so.tw ? cis2_trace_record : NULL, .on_trace_ctx = so.tw};
    if ((rc = cis2_generate(e, reqs, np, &go, &res, &err))) {
        if (o.stream && st.sent) putchar('\n'); /* the error goes to stderr; stdout ends its line */
        goto out;
    }
    if (o.stream) stream_end(&st, &res[0]);
    if ((rc = side_commit(&o, &so, cb.dump_failed, &err))) goto out;
    if (o.receipt && (rc = write_receipts(e, o.receipt, res, np, &err))) goto out;
    if ((rc = print_results(e, &o, res, np))) rc = cis2_fail(&err, rc, "out of memory");
out:
    stream_free(&st);
    side_abort(&so);
    cis2_results_free(res, np);
    free(reqs);
    cis2_engine_close(e);
    for (size_t i = 0; ps && !pf && i < np; i++) cis2_free(ps[i].ids);
    free(ps);
    cis2_prompts_free(pf);
    cis2_free(o.stop_id_list);
    return rc ? cli_report(&err) : cli_finish_stdout(CIS2_OK);
}

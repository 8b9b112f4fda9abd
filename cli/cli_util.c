/*
 * cli_util.c - what every `cis2` subcommand shares: the usage texts (all
 * in this one table, printed by `cis2 help` and `cis2 CMD --help`), option
 * parsing (every option at most once), the engine options, the one id-list
 * grammar, stdin reading, prompt files that are pipes, output probes,
 * error reporting and checked stdout.
 */
#define _GNU_SOURCE /* memfd_create */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROMPT_FILE_MAX ((size_t)256 << 20) /* the library's limit for a prompt file (prompts.c) */

#define DEFAULT_MODEL_DIR "models/SmolLM2-135M"

#define ENGINE_USAGE                                                                                        \
    "  --model-dir DIR     the checkpoint: DIR/{model.safetensors or model.safetensors.index.json\n"              \
    "                      and its shards, config.json, tokenizer.json}\n"              \
    "                      (default " DEFAULT_MODEL_DIR ")\n"                                                \
    "  --kernel K          auto (default), scalar, avx2, avx512 or neon: never changes a bit\n"            \
    "  --threads N         worker threads (default: online CPUs): never changes a bit\n"                   \
    "  --tokenizer-ext     accepted, no effect: the model families' tokenizer.json (outside\n"            \
    "                      CIS-2 v0.3b §3, docs/tokenizer.md) load without it\n"

const cli_command cli_commands[] = {
    {"selftest", cmd_selftest, "FTZ/DAZ pin, adversarial probes, table digests",
     "usage: cis2 selftest\n"
     "  pins FTZ/DAZ (§1.3), runs the adversarial probes, checks table_digest (§6.6),\n"
     "  inv_freq_table_digest (§7.2), rsqrt(64) and §5.1's cancellation; prints selftest=PASS\n"},
    {"run", cmd_run, "greedy-decode a prompt: the §13.1 lines, receipts, traces, logits",
     "usage: cis2 run [--prompt TEXT | --prompt-file F | --prompt-ids IDS] [--gen-toks N] [options]\n"
     "  --prompt TEXT       the prompt (default \"Once upon a time\")\n"
     "  --prompt-file F     several prompts, one per line or a JSON array of strings: they\n"
     "                      decode together, one result block each (prompt_idx=i); F may\n"
     "                      be a pipe or FIFO (/dev/stdin), or - for stdin\n"
     "  --prompt-ids IDS    the prompt as token ids: 1,2,3 or a JSON array\n"
     "  --gen-toks N        tokens to generate (default 16; EOS is not special, §3.4);\n"
     "                      also --max-tokens N (the server's max_tokens)\n"
     "  --json              print the fields as JSON (an array for --prompt-file)\n"
     "  --receipt FILE      write a CIS-2-RECEIPT v1 (FILE.0, FILE.1, ... for --prompt-file)\n"
     "  --dump-logits FILE  every step's logits, raw f32 LE, step-major (FILE.i per prompt)\n"
     "  --trace FILE        the sha256 of every intermediate tensor (one prompt)\n"
     "  --trace-dump        with --trace: also the values, in FILE.f32\n"
     "  --progress          progress lines on stderr even when it is not a terminal\n"
     "  --stream            write the completion as its tokens come (one prompt, not --json),\n"
     "                      then a LF and the lines as without it; the §12.4 check still\n"
     "                      ends the run (exit 8 after the text if the two decodes differ)\n"
     "  --recompute         test mode: no KV cache reuse (the same bits, slower)\n"
     "  --speculate lookup[:K]  draft up to K tokens (1..16, default 4) by prompt lookup and\n"
     "                      check them in one pass: faster on repetitive text, never changes\n"
     "                      a bit (docs/speculate.md); off (default) decodes token by token\n"
     "  --speculate draft:DIR[:K]  the drafts from a smaller model in DIR with the same\n"
     "                      tokenizer.json (its greedy tokens); never changes a bit either\n"
     " seeded sampling, logprobs and stop rules (docs/sampling.md; any of them makes the\n"
     " receipt CIS-2-RECEIPT ext-sampling-1, except a greedy run without stop rules):\n"
     "  --temperature T     0 (default) is greedy (§11.2); decimals are rounded once to binary32\n"
     "  --top-k K  --top-p P  --min-p P   filters (omit for off)\n"
     "  --seed N  --sequence N            the Philox key and sample index (default 0)\n"
     "  --logprobs N        report each token's logprob and its top N alternatives (0..20),\n"
     "                      as the server's logprobs / top_logprobs N; also --top-logprobs N\n"
     "  --stop-at-eos       stop at config.json's eos_token_id and, when DIR has a\n"
     "                      generation_config.json, its eos_token_id too\n"
     "  --stop-id IDS       stop at any of these token ids (also --stop-token-ids IDS)\n"
     "  --stop TEXT         stop when the output bytes contain TEXT (up to 16 times)\n" ENGINE_USAGE},
    {"tokenize", cmd_tokenize, "text -> token ids (§3.1)",
     "usage: cis2 tokenize --tokenizer FILE [--text TEXT] [--json] [--batch] [--stats] [--tokenizer-ext]\n"
     "                     [--add-special-tokens]\n"
     "  TEXT, else all of stdin verbatim (a trailing newline is text too) -> ids, comma-separated\n"
     "  --json              print a JSON array\n"
     "  --batch             stdin holds JSON strings, one per line: one line of ids each\n"
     "  --stats             load and encode times on stderr\n"
     "  --tokenizer-ext     accepted, no effect (the families' tokenizer.json load without it)\n"
     "  --add-special-tokens as Hugging Face's add_special_tokens=True (the post-processor's\n"
     "                      BOS ...); without it add_special_tokens=False\n"},
    {"detokenize", cmd_detokenize, "token ids -> text",
     "usage: cis2 detokenize --tokenizer FILE IDS [--tokenizer-ext] | --tokenizer FILE --batch\n"
     "  IDS: 1,2,3 or a JSON array; their bytes as UTF-8 (U+FFFD for invalid sequences),\n"
     "  unknown ids skipped\n"
     "  --batch             stdin holds one id list per line: one JSON string each\n"
     "  --tokenizer-ext     accepted, no effect (the families' tokenizer.json load without it)\n"},
    {"conform", cmd_conform, "the §13.1 test vector on the real SmolLM2-135M files",
     "usage: cis2 conform [--model-dir DIR] [--all] [--kernel K] [--threads N]\n"
     "  checks the three pinned sha256 first (exit 6 naming both values), then runs the\n"
     "  pinned prompt and prints PASS/FAIL for every §13.1 value\n"
     "  --all               also the longer vectors of FACTS.md §5\n"},
    {"bench", cmd_bench, "speed on this machine against the memory-bandwidth bound",
     "usage: cis2 bench [--model-dir DIR | --shape NAME] [--quick] [--gen-toks N] [--json] [--kernel K] [--threads N]\n"
     "  the full run takes minutes (about 7 on 2 busy cores for smollm2-135m); progress\n"
     "  lines on stderr, and an estimate of the rest after the first measurement\n"
     "  --quick             the headline figures only, each once (seconds): bandwidth,\n"
     "                      decode, prefill, batched decode, the §13.1-shaped run, RSS\n"
     "  --shape NAME        a synthetic checkpoint of this shape (default smollm2-135m)\n"
     "  --gen-toks N        also decode speed at positions 16, 512, 2048 (those <= N)\n"
     "  --json              print JSON\n"},
    {"synth", cmd_synth, "write a deterministic synthetic checkpoint",
     "usage: cis2 synth (--shape NAME | --config FILE) --seed N --out DIR [--tokenizer FILE] | --list\n"
     "  --shape NAME        smollm2-135m, smollm2-360m, qwen2.5-0.5b, tiny, tiny-qwen, odd\n"
     "  --config FILE       the shape a real config.json describes (copied byte for byte)\n"
     "  --tokenizer FILE    a tokenizer.json to copy (default: a minimal byte-level one)\n"
     "  --list              print the shapes\n"},
    {"score", cmd_score, "the logprobs of given continuations after a context (docs/sampling.md §S11)",
     "usage: cis2 score (--context TEXT | --context-ids IDS) --continuation TEXT... [options]\n"
     "       cis2 score --batch FILE [options]\n"
     "  each continuation token's logprob (its bits), rank, greedy flag and the sums; all\n"
     "  continuations scored together, an equal context computed once\n"
     "  --context TEXT      the context (tokenized alone; none: the first token is unscored)\n"
     "  --context-ids IDS   the context as token ids: 1,2,3 or a JSON array\n"
     "  --continuation TEXT a continuation, tokenized alone (up to 16 times)\n"
     "  --continuation-ids IDS  a continuation as token ids (up to 16 times)\n"
     "  --batch FILE        JSON lines (- for stdin): {\"context\": TEXT|null, \"context_ids\": [..],\n"
     "                      \"continuations\": [TEXT or [ids], ...]}; one output block/line each;\n"
     "                      \"claimed_logprobs\": [[number|null per token], ...] (one per\n"
     "                      continuation) adds each token's claimed logprob and claimed - exact,\n"
     "                      and a summary: docs/eval.md \"RL: measuring an inference engine's drift\"\n"
     "  --top-logprobs N    also the N (0..20) most likely alternatives of each token\n"
     "  --json              JSON: per token {id, logprob, bits, rank, greedy, top} as run --json\n"
     "  --receipt FILE      also a score receipt (ext-score-1) per continuation, for cis2 verify:\n"
     "                      FILE for one, FILE.0, FILE.1, ... in order for several\n"
     ENGINE_USAGE},
    {"verify", cmd_verify, "recompute every field of receipts",
     "usage: cis2 verify RECEIPT... [--replay prefill|decode] [--twice] [--dump-logits FILE] [options]\n"
     "       cis2 verify --manifest FILE [--shard I/N | --shard auto [--shard-count N]]\n"
     "                   [--verdicts OUT] [--replay ...] [--twice] [options]\n"
     "       cis2 verify --merge OUT...\n"
     "  recomputes the artifact hashes, the prompt's ids and every output from the files;\n"
     "  several receipts of one model verify together, sharing each weight pass\n"
     "  --manifest FILE     the receipts FILE lists, one a line: a path (relative to FILE's\n"
     "                      directory) or {\"receipt\": TEXT, \"name\": NAME} (docs/receipts.md)\n"
     "  --shard I/N         only shard I (0 <= I < N) of the manifest: the receipts of one\n"
     "                      prompt always in one shard, the same on every machine\n"
     "  --shard auto        I and N from a Slurm array task (SLURM_ARRAY_TASK_ID minus\n"
     "                      SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT) or a Kubernetes\n"
     "                      Indexed Job (JOB_COMPLETION_INDEX, with --shard-count)\n"
     "  --shard-count N     N for JOB_COMPLETION_INDEX (the Job's completions); implies auto\n"
     "  --verdicts OUT      also write JSON lines: a header, then one verdict per receipt\n"
     "  --merge OUT...      every shard's verdict file: the lines and exit status of the\n"
     "                      unsharded run (exit 4 if a shard is missing or cut short)\n"
     "  --replay prefill    teacher-forced prefill of prompt ++ claimed tokens (default, fast)\n"
     "  --replay decode     the whole greedy decode again, token by token\n"
     "  --twice             also check the recomputation's own determinism (§12.4)\n"
     "  --dump-logits FILE  one receipt: the recomputed logits of every step, raw f32 LE\n" ENGINE_USAGE},
    {"check", cmd_check, "check what a receipt claims that needs no weights",
     "usage: cis2 check RECEIPT [--tokenizer FILE] [--config FILE] [--tokenizer-ext]\n"
     "  table-digest, the argmax digest from the receipt's own ids, and with the files\n"
     "  their hashes, the prompt's ids and inv-freq-table-digest; lists what stays unverified\n"},
    {"compare", cmd_compare, "judge two receipts: SAME, DIFFERENT-RUN, CONTRADICTION, WITNESS-COLLISION",
     "usage: cis2 compare RECEIPT_A RECEIPT_B\n"},
    {"diff", cmd_diff, "first differing tensor of two `run --trace` files",
     "usage: cis2 diff TRACE_A TRACE_B\n"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with continuous batching and receipts",
     "usage: cis2 serve [--model-dir DIR] [--host 127.0.0.1] [--port 8080] [--max-batch 16] [options]\n"
     "  POST /v1/completions, /v1/chat/completions, /v1/verify; GET /v1/models, /health, /metrics;\n"
     "  GET /tokenizer_info, POST /tokenize, /detokenize (docs/serving.md); SIGTERM/SIGINT: drain,\n"
     "  then exit 0\n"
     "  --host H            address to bind (default 127.0.0.1: loopback only)\n"
     "  --port N            TCP port (default 8080; 0: any free port, printed at start)\n"
     "  --max-batch N       sequences decoded together (default 16)\n"
     "  --max-queue N       sequences waiting beyond the batch before 429 (default 64)\n"
     "  --prefill-chunk N   prompt rows a step adds for joining requests, in all (default 256)\n"
     "  --kv-budget MIB     KV caches of running sequences in all; more wait (default 1024)\n"
     "  --max-tokens N      the largest max_tokens a request may ask (default 4096)\n"
     "  --max-body BYTES    request body limit, 413 beyond (default 1048576)\n"
     "  --max-connections N open connections at most (default 256)\n"
     "  --timeout S         idle connection timeout in seconds (default 60)\n"
     "  --drain-timeout S   on SIGTERM, in-flight requests may finish this long (default 10)\n"
     "  --request-timeout S a whole request (headers and body) must arrive within S seconds\n"
     "                      of the connection's start or its previous response (default 30)\n"
     "  --verify-timeout S  a /v1/verify may compute this long, else 413 (default 300)\n"
     "  --verify-max-tokens N  prompt bytes + tokens a /v1/verify may claim in all, 413\n"
     "                      beyond (default 131072)\n"
     "  --api-key-file F    require `Authorization: Bearer KEY` on /v1 (KEY: F's first line)\n"
     "  --chat-template F   a Jinja chat template (default: DIR/chat_template.jinja, else\n"
     "                      DIR/tokenizer_config.json's chat_template)\n"
     "  --model-name NAME   the model clients name (default: DIR's last component)\n"
     "  --access-log FILE|-|off  one line per finished request: appended to FILE, to\n"
     "                      stderr (-, the default), or none (off)\n"
     "  --receipt-log DIR   also write every receipt handed out (completions, score receipts)\n"
     "                      to DIR, each file whole, listed in DIR/manifest.txt for\n"
     "                      `cis2 verify --manifest` (docs/eval.md)\n"
     "  --speculate lookup[:K]  decode with prompt-lookup drafts of up to K tokens (1..16,\n"
     "                      default 4): the same responses and receipts, bit for bit\n"
     "                      (docs/speculate.md); off (default) decodes token by token\n"
     "  --speculate draft:DIR[:K]  drafts from a smaller model in DIR with the same\n"
     "                      tokenizer.json; the same responses and receipts too\n"
     "  --render-chat       print what chat requests on stdin (JSON lines) render to, and exit\n"
     ENGINE_USAGE},
};
const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

const cli_command *cli_find(const char *name)
{
    for (size_t i = 0; i < cli_ncommands; i++)
        if (!strcmp(cli_commands[i].name, name)) return &cli_commands[i];
    return NULL;
}

/* ----------------------------------------------------------- options */

static int parse_size(const char *cmd, const char *opt, const char *s, size_t max, size_t *out)
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

static int parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    if (!s || !*s) return cli_usage_error(cmd, "%s needs a number", opt);
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (*p < '0' || *p > '9') return cli_usage_error(cmd, "%s: '%s' is not a non-negative integer", opt, s);
        if (v > (UINT64_MAX - d) / 10) return cli_usage_error(cmd, "%s: %s does not fit 64 bits", opt, s);
        v = v * 10 + d;
    }
    *out = v;
    return CIS2_OK;
}

int cli_parse(const char *cmd, int argc, char **argv, cli_opt *opts, const char **pos, size_t pos_max, size_t *npos)
{
    size_t np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            const cli_command *c = cli_find(cmd);
            fputs(c ? c->usage : "", stdout);
            return -1;
        }
        if (a[0] == '-' && a[1]) {
            cli_opt *o = opts;
            while (o->name && strcmp(o->name, a)) o++;
            if (!o->name) return cli_usage_error(cmd, "unexpected argument '%s'", a);
            if (o->seen && o->kind != OPT_MULTI) return cli_usage_error(cmd, "%s given twice", a);
            for (const cli_opt *p = opts; p->name; p++) /* an alias: another name of the same option */
                if (p != o && p->dest == o->dest && p->seen)
                    return cli_usage_error(cmd, "%s and %s are the same option: give one", p->name, a);
            o->seen = 1;
            if (o->kind == OPT_FLAG) { *(int *)o->dest = 1; continue; }
            if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
            const char *v = argv[++i];
            int rc = CIS2_OK;
            if (o->kind == OPT_MULTI) {
                cli_multi *mv = o->dest;
                if (mv->n == (o->max ? o->max : 16)) return cli_usage_error(cmd, "%s given more than %zu times", a, mv->n);
                mv->v[mv->n++] = v;
            } else if (o->kind == OPT_STR) *(const char **)o->dest = v;
            else if (o->kind == OPT_SIZE) rc = parse_size(cmd, a, v, o->max, (size_t *)o->dest);
            else rc = parse_u64(cmd, a, v, (uint64_t *)o->dest);
            if (rc) return rc;
            continue;
        }
        if (np == pos_max) return cli_usage_error(cmd, "unexpected argument '%s'", a);
        pos[np++] = a;
    }
    if (npos) *npos = np;
    return CIS2_OK;
}

int cli_given(const cli_opt *opts, const void *dest)
{
    for (const cli_opt *p = opts; p->name; p++)
        if (p->dest == dest && p->seen) return 1;
    return 0;
}

int cli_engine_open(cli_engine *c, cis2_engine **e, cis2_error *err)
{
    if (!c->model_dir) c->model_dir = DEFAULT_MODEL_DIR;
    if (!*c->model_dir) return cis2_fail(err, CIS2_E_USAGE, "--model-dir: empty path");
    cis2_engine_opts o = {.threads = (int)c->threads, .kernel = c->kernel,
                          .flags = (c->tokenizer_ext ? CIS2_OPEN_TOKENIZER_EXT : 0) |
                                   (c->need_tokenizer ? CIS2_OPEN_NEED_TOKENIZER : 0)};
    return cis2_engine_open(e, c->model_dir, &o, err);
}

void cli_engine_inputs(const cli_engine *c, char paths[3][4200])
{
    const char *dir = c->model_dir ? c->model_dir : DEFAULT_MODEL_DIR;
    snprintf(paths[0], 4200, "%s/model.safetensors", dir);
    snprintf(paths[1], 4200, "%s/config.json", dir);
    snprintf(paths[2], 4200, "%s/tokenizer.json", dir);
}

/* An existing output path must not be one of the checkpoint's weight
 * files.  cli_engine_inputs names model.safetensors only; a sharded
 * checkpoint (docs/inputs.md "Sharded checkpoints") also reads
 * model.safetensors.index.json and its shards, so every DIR/.safetensors
 * file and the index are compared by device and inode (a link to one is
 * caught too).  A path that does not exist yet cannot be one. */
int cli_check_not_weights(const cli_engine *c, const char *out, cis2_error *err)
{
    struct stat so, sw;
    if (!out || stat(out, &so) != 0) return CIS2_OK;
    const char *dir = c->model_dir ? c->model_dir : DEFAULT_MODEL_DIR;
    DIR *d = opendir(dir);
    if (!d) return CIS2_OK; /* the load reports a missing directory */
    int rc = CIS2_OK;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        int weights = !strcmp(de->d_name, "model.safetensors.index.json") ||
                      (n > 12 && !strcmp(de->d_name + n - 12, ".safetensors"));
        char p[4400];
        if (!weights || snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p || stat(p, &sw) != 0)
            continue;
        if (so.st_dev == sw.st_dev && so.st_ino == sw.st_ino)
            rc = cis2_fail(err, CIS2_E_USAGE, "%s: is %s, a weights file of the checkpoint: choose another output",
                           out, p);
    }
    closedir(d);
    return rc;
}

/* ------------------------------------------------------------- values */

static int csv_ids(const char *s, uint32_t *ids, size_t *n)
{
    size_t k = 0;
    const char *p = s;
    for (;;) {
        const char *e = p;
        uint64_t v = 0;
        while (*e >= '0' && *e <= '9') {
            v = v * 10 + (uint64_t)(*e - '0');
            if (v > UINT32_MAX) return -1;
            e++;
        }
        if (e == p || (e - p > 1 && *p == '0') || (*e && *e != ',')) return -1;
        ids[k++] = (uint32_t)v;
        if (!*e) break;
        p = e + 1;
    }
    *n = k;
    return 0;
}

int cli_parse_ids(const char *what, const char *s, uint32_t **ids, size_t *n, cis2_error *err)
{
    *ids = NULL;
    *n = 0;
    const char *p = s;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '[') {
        json_error_t je;
        json_t *a = json_loads(s, 0, &je);
        size_t k = json_is_array(a) ? json_array_size(a) : 0;
        int ok = json_is_array(a);
        uint32_t *v = ok ? malloc((k ? k : 1) * sizeof *v) : NULL;
        if (ok && !v) { json_decref(a); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
        for (size_t i = 0; ok && i < k; i++) {
            json_t *x = json_array_get(a, i);
            ok = json_is_integer(x) && json_integer_value(x) >= 0 && json_integer_value(x) <= UINT32_MAX;
            if (ok) v[i] = (uint32_t)json_integer_value(x);
        }
        json_decref(a);
        if (!ok) {
            free(v);
            return cis2_fail(err, CIS2_E_USAGE, "%s: '%.60s' is not a JSON array of u32 ids", what, s);
        }
        *ids = v;
        *n = k;
        return CIS2_OK;
    }
    if (!*s) return CIS2_OK; /* the empty list */
    size_t cap = 1;
    for (const char *q = s; *q; q++) cap += *q == ',';
    uint32_t *v = malloc(cap * sizeof *v);
    if (!v) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (csv_ids(s, v, n)) {
        free(v);
        *n = 0;
        return cis2_fail(err, CIS2_E_USAGE, "%s: '%.60s' is not a comma-separated list of u32 ids (like 1,2,3)",
                         what, s);
    }
    *ids = v;
    return CIS2_OK;
}

char *cli_ids_csv(const uint32_t *ids, size_t n)
{
    char *s = malloc(n * 11 + 1), *p = s;
    if (!s) return NULL;
    *p = 0;
    for (size_t i = 0; i < n; i++) p += sprintf(p, i ? ",%u" : "%u", ids[i]);
    return s;
}

void cli_hex(const uint8_t d[32], char out[65]) { cis2_hex(d, 32, out); }

int cli_parse_f32(const char *cmd, const char *opt, const char *s, float *out)
{
    cis2_error err = {0};
    float f;
    if (cis2_decimal_to_f32(s, strlen(s), &f, &err)) /* docs/sampling.md §S2.3, the library's one conversion */
        return cli_usage_error(cmd, "%s: %s", opt, err.msg);
    uint32_t b;
    memcpy(&b, &f, 4);
    if (b & 0x80000000u) return cli_usage_error(cmd, "%s: %s is negative", opt, s);
    *out = f;
    return CIS2_OK;
}

int cli_read_stdin(size_t limit, char **buf, size_t *len, cis2_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return cis2_fail(err, CIS2_E_NOMEM, "stdin: out of memory");
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > limit) { free(b); return cis2_fail(err, CIS2_E_FORMAT, "stdin: more than %zu bytes", limit); }
            char *nb = realloc(b, cap * 2);
            if (!nb) { free(b); return cis2_fail(err, CIS2_E_NOMEM, "stdin: out of memory"); }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) { free(b); return cis2_fail(err, CIS2_E_IO, "stdin: read error"); }
    if (n > limit) { free(b); return cis2_fail(err, CIS2_E_FORMAT, "stdin: more than %zu bytes", limit); }
    b[n] = 0;
    *buf = b;
    *len = n;
    return CIS2_OK;
}

/* ------------------------------------------- prompt files, output probes */

/* Copies the stream `in` into a new memory file (at most PROMPT_FILE_MAX
 * bytes, as a regular prompt file); *mfd its descriptor. */
static int stream_to_memfd(const char *path, int in, int *mfd, cis2_error *err)
{
    int fd = memfd_create("cis2-prompt-file", MFD_CLOEXEC), rc = CIS2_OK;
    if (fd < 0) return cis2_fail(err, CIS2_E_IO, "%s: cannot make a memory file to read it into: %s", path, strerror(errno));
    char buf[1 << 16];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { rc = cis2_fail(err, CIS2_E_IO, "%s: read error: %s", path, strerror(errno)); break; }
        if (r == 0) break;
        if ((total += (size_t)r) > PROMPT_FILE_MAX) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: larger than %zu bytes, the limit for a prompt file", path,
                           PROMPT_FILE_MAX);
            break;
        }
        for (ssize_t w = 0, k; w < r; w += k)
            if ((k = write(fd, buf + w, (size_t)(r - w))) < 0) {
                if (errno == EINTR) { k = 0; continue; }
                rc = cis2_fail(err, CIS2_E_NOMEM, "%s: cannot hold it in memory: %s", path, strerror(errno));
                break;
            }
        if (rc) break;
    }
    if (rc) { close(fd); return rc; }
    *mfd = fd;
    return CIS2_OK;
}

/* err's message names `from` (the memory file); make it name `to`. */
static void rename_in_error(cis2_error *err, const char *from, const char *to)
{
    size_t n = strlen(from);
    if (strncmp(err->msg, from, n)) return;
    char m[sizeof err->msg];
    snprintf(m, sizeof m, "%s%s", to, err->msg + n);
    memcpy(err->msg, m, sizeof m);
}

int cli_prompts_load(const char *path, size_t max, cis2_prompts **out, cis2_error *err)
{
    struct stat st;
    int dash = !strcmp(path, "-");
    if (!dash && (stat(path, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))))
        return cis2_prompts_load(path, max, out, err); /* a file (or its error) */
    const char *name = dash ? "stdin" : path;
    int in = dash ? 0 : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), mfd = -1;
    if (in < 0) return cis2_fail(err, CIS2_E_IO, "%s: cannot open: %s", path, strerror(errno));
    int rc = stream_to_memfd(name, in, &mfd, err);
    if (!dash) close(in);
    if (rc) return rc;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", mfd);
    rc = cis2_prompts_load(proc, max, out, err); /* a regular file: parsed as any prompt file is */
    close(mfd);
    if (rc) rename_in_error(err, proc, name);
    return rc;
}

int cli_probe_output(const char *path, cis2_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return CIS2_OK; /* written in place (/dev/null, a FIFO) */
    cis2_out *o = NULL;
    int rc = cis2_out_open(&o, path, err);
    if (!rc) cis2_out_abort(o);
    return rc;
}

/* ---------------------------------------------------------- reporting */

int cli_report(const cis2_error *err)
{
    fprintf(stderr, "cis2: %s\n", err->msg[0] ? err->msg : cis2_status_name(err->code));
    return err->code ? err->code : CIS2_E_INTERNAL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "cis2 %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'cis2 %s --help')\n", cmd);
    return CIS2_E_USAGE;
}

int cli_finish_stdout(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cis2: writing stdout failed\n");
        return CIS2_E_IO;
    }
    return rc;
}

void cli_print_verdict(const cis2_verdict *v, int colon)
{
    for (size_t i = 0; i < v->n_fields; i++) {
        const cis2_field *f = &v->fields[i];
        if (!f->key[0]) printf("%s\n", f->detail);
        else printf(colon ? "%s: %s\n" : "%s %s\n", f->key, f->detail);
    }
    printf("verdict: %s\n", v->summary);
}

/* cli.h */
int cli_speculate_check(const char *cmd, const char *spec)
{
    cis2_error err = {0};
    if (!cis2_speculate_check(spec, &err)) return CIS2_OK;
    return cli_usage_error(cmd, "--%s", err.msg); /* "--speculate: ...": the library's grammar, docs/speculate.md */
}

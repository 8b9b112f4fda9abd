/*
 * receipt.c - render and strictly parse receipts: "CIS-2-RECEIPT v1"
 * (FACTS.md §6; the digests it carries are spec §12.1-§12.3, the artifact
 * hashes §2.1) and the sampling extension "CIS-2-RECEIPT ext-sampling-1"
 * (docs/sampling.md §S7).  Formats in receipt.h.
 *
 * The parser is deliberately unforgiving: anything render() would not have
 * produced is rejected with "NAME: line N: reason" (CIS2_E_FORMAT), so that
 * parse(render(r)) == r and render(parse(text)) == text for every accepted
 * text.  Rejected: a wrong first line, unknown / duplicate / missing /
 * out-of-order keys, blank lines, CR (CRLF), NUL or non-ASCII bytes, any
 * whitespace other than the single key/value separator, empty values,
 * digests that are not 64 lowercase hex digits, odd-length or uppercase
 * hex, CSV with empty elements / leading zeros / values > u32, gen-toks 0,
 * a generated list whose length differs from gen-toks, a missing final LF,
 * files over CIS2_RECEIPT_MAX_FILE; for the extension also every §S7.3 and
 * §S7.4 rule (parameter validity, the sampler word, the stop rule the
 * finish reason claims, no early stop token).
 *
 * The two ways a saved receipt most often goes wrong are refused like any
 * other (FACTS.md §6 and §S7.3 refuse blank lines and a missing final LF,
 * and a server's receipt_sha256 hashes the exact text), but their messages
 * say how to save one (docs/receipts.md "The format"): an extra LF after the last key (`jq -r`
 * adds one) and the final LF stripped (`$(...)`): use `jq -j`.
 *
 * File I/O (fileio.h; docs/inputs.md "Receipts", "Outputs"): load reads a regular file once (size
 * checked before reading); save writes a temporary file beside the target
 * and renames it into place, so a failed save (a full disk) leaves the old
 * receipt intact.
 *
 * A prompt given as ids that no bytes reproduce (docs/receipts.md
 * "Prompts given as ids") adds one optional key to v1 and ext-sampling-1,
 * `prompt-from ids`, just before prompt-hex (then the ids' raw bytes, or
 * `none`); present() skips it everywhere else, so every other receipt
 * renders and parses exactly as before.  cis2_ids_text_bytes is the rule
 * that decides which receipt a run gets, shared with the engine
 * (cis2_engine_prompt_bytes) and the verifiers.
 *
 * "CIS-2-RECEIPT ext-score-1" (docs/receipts.md "Score receipts", a
 * scoring request of docs/sampling.md §S11) shares the line rules above
 * (one lexer) but has its own keys, value parsers (parse_score_value) and
 * consistency rules (score_consistent); a v1 or ext-sampling-1 text never
 * reaches them, so those receipts parse and render exactly as before.
 */
#include "receipt.h"
#include "engine.h"
#include "fileio.h"
#include "sample.h"
#include "session.h"
#include "strbuf.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum key {
    K_SPEC, K_EXTENSION, K_WEIGHTS, K_CONFIG, K_TOKENIZER, K_PROMPT_HEX, K_PROMPT_IDS, K_GEN_TOKS, K_DTYPE,
    K_MAX_TOKS, K_SAMPLER, K_TEMP, K_TOP_K, K_TOP_P, K_MIN_P, K_SEED, K_SEQUENCE, K_STOP_EOS, K_STOP_IDS,
    K_STOP_STRINGS, K_PARAMS, K_TABLE, K_INV_FREQ, K_FINISH, K_GENERATED, K_ARGMAX, K_TOKEN_DIGEST, K_WITNESS,
    K_CTX_FROM, K_CTX_HEX, K_CTX_IDS, K_CONT_FROM, K_CONT_HEX, K_CONT_IDS, K_FIRST, K_TOP_N, K_LP_BITS,
    K_ALL_GREEDY, K_SUM, K_SUM64, K_LP_DIGEST, K_PROMPT_FROM,
    K_COUNT
};

static const char *const names[K_COUNT] = {
    "spec-version", "extension", "weights-sha256", "config-sha256", "tokenizer-sha256", "prompt-hex",
    "prompt-token-ids", "gen-toks", "dtype", "max-toks", "sampler", "temperature", "top-k", "top-p", "min-p",
    "seed", "sequence", "stop-eos", "stop-ids", "stop-strings", "params-digest", "table-digest",
    "inv-freq-table-digest", "finish-reason", "generated-token-ids", "argmax-digest", "token-digest",
    "witness-digest", "context-from", "context-hex", "context-token-ids", "continuation-from",
    "continuation-hex", "continuation-token-ids", "first-scored", "top-logprobs", "logprob-bits", "all-greedy",
    "sum-bits", "sum-f64-bits", "logprob-digest", "prompt-from"};

/* K_PROMPT_FROM is optional: a receipt has its line only when prompt_from_ids (present()) */
static const int order_v1[CIS2_RECEIPT_NKEYS] = {K_SPEC, K_WEIGHTS, K_CONFIG, K_TOKENIZER, K_PROMPT_FROM,
                                                 K_PROMPT_HEX, K_PROMPT_IDS, K_GEN_TOKS, K_DTYPE, K_TABLE,
                                                 K_INV_FREQ, K_GENERATED, K_ARGMAX, K_WITNESS};
static const int order_ext[CIS2_RECEIPT_EXT_NKEYS] = {
    K_SPEC, K_EXTENSION, K_WEIGHTS, K_CONFIG, K_TOKENIZER, K_PROMPT_FROM, K_PROMPT_HEX, K_PROMPT_IDS, K_DTYPE,
    K_MAX_TOKS,
    K_SAMPLER, K_TEMP, K_TOP_K, K_TOP_P, K_MIN_P, K_SEED, K_SEQUENCE, K_STOP_EOS, K_STOP_IDS, K_STOP_STRINGS,
    K_PARAMS, K_TABLE, K_INV_FREQ, K_GEN_TOKS, K_FINISH, K_GENERATED, K_TOKEN_DIGEST, K_WITNESS};

static const int order_score[CIS2_RECEIPT_SCORE_NKEYS] = {
    K_SPEC, K_EXTENSION, K_WEIGHTS, K_CONFIG, K_TOKENIZER, K_DTYPE, K_TABLE, K_INV_FREQ, K_CTX_FROM, K_CTX_HEX,
    K_CTX_IDS, K_CONT_FROM, K_CONT_HEX, K_CONT_IDS, K_FIRST, K_TOP_N, K_LP_BITS, K_ALL_GREEDY, K_SUM, K_SUM64,
    K_LP_DIGEST, K_WITNESS};

/* kind: 0 v1, 1 ext-sampling-1, 2 ext-score-1 */
static const int *order_of(int kind, size_t *n)
{
    *n = kind == 2 ? CIS2_RECEIPT_SCORE_NKEYS : kind ? CIS2_RECEIPT_EXT_NKEYS : CIS2_RECEIPT_NKEYS;
    return kind == 2 ? order_score : kind ? order_ext : order_v1;
}

static int kind_of(const cis2_receipt *r) { return r->score ? 2 : r->ext; }

/* Whether r has key k's line: all but prompt-from always (docs/receipts.md
 * "Prompts given as ids"). */
static int present(const cis2_receipt *r, int k) { return k != K_PROMPT_FROM || r->prompt_from_ids; }

const char *cis2_receipt_key(const cis2_receipt *r, size_t i)
{
    size_t n;
    const int *o = order_of(kind_of(r), &n);
    for (size_t k = 0; k < n; k++)
        if (present(r, o[k]) && i-- == 0) return names[o[k]];
    return NULL;
}

void cis2_receipt_clear(cis2_receipt *r)
{
    free(r->prompt);
    free(r->prompt_ids);
    free(r->generated);
    free(r->ctx_bytes);
    free(r->cont_bytes);
    free(r->ctx_ids);
    free(r->cont_ids);
    free(r->lp_bits);
    for (size_t i = 0; i < r->n_stop_str; i++) free(r->stop_str[i]);
    free(r->get_text);
    free(r->source);
    memset(r, 0, sizeof *r);
}

void cis2_receipt_set_model(cis2_receipt *r, const cis2_model *m)
{
    snprintf(r->spec_version, sizeof r->spec_version, "%s", CIS2_SPEC_VERSION);
    snprintf(r->dtype, sizeof r->dtype, "fp32");
    memcpy(r->weights_sha, m->weights_sha, 32);
    memcpy(r->config_sha, m->config_sha, 32);
    memcpy(r->tokenizer_sha, m->tokenizer_sha, 32);
    memcpy(r->table_digest, m->table_digest, 32);
    memcpy(r->inv_freq_digest, m->inv_freq_digest, 32);
}

cis2_receipt *cis2_receipt_new(void)
{
    cis2_receipt *r = calloc(1, sizeof(cis2_receipt));
    if (r && !(r->source = strdup(""))) { free(r); return NULL; }
    return r;
}

void cis2_receipt_free(cis2_receipt *r)
{
    if (!r) return;
    cis2_receipt_clear(r);
    free(r);
}

static uint32_t fbits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static float bitsf(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

static const char *finish_word(int f)
{
    switch (f) {
    case CIS2_FINISH_LENGTH: return "length";
    case CIS2_FINISH_EOS: return "eos";
    case CIS2_FINISH_STOP_ID: return "stop-id";
    case CIS2_FINISH_STOP_STRING: return "stop-string";
    default: return NULL;
    }
}

/* The stop rule of sample.h over a receipt's own lists. */
static void receipt_stops(const cis2_receipt *r, cis2_stop_rule *s)
{
    *s = (cis2_stop_rule){.eos = r->has_eos ? r->stop_eos : NULL, .n_eos = r->n_stop_eos, .ids = r->stop_ids,
                          .n_ids = r->n_stop_ids, .strings = (char *const *)r->stop_str, .lens = r->stop_len,
                          .n_strings = r->n_stop_str, .max_tokens = r->max_toks};
}

char *cis2_receipt_params_block(const cis2_receipt *r)
{
    cis2_stop_rule s;
    receipt_stops(r, &s);
    return cis2_params_block(&r->samp, &s);
}

/* ------------------------------------------------------------- render */

static int token_ok(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == 0 || n == cap) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F) return 0;
    return 1;
}

static const char *from_word(int f) { return f == CIS2_FROM_TEXT ? "text" : f == CIS2_FROM_IDS ? "ids" : "none"; }

/* An ext-score-1 value (docs/receipts.md "Score receipts"). */
static void render_score_value(cis2_sb *b, const cis2_receipt *r, int k)
{
    char t[32];
    switch (k) {
    case K_CTX_FROM: cis2_sb_str(b, from_word(r->ctx_from)); break;
    case K_CONT_FROM: cis2_sb_str(b, from_word(r->cont_from)); break;
    case K_CTX_HEX:
        if (r->ctx_len) cis2_sb_hex(b, r->ctx_bytes, r->ctx_len);
        else cis2_sb_str(b, "none");
        break;
    case K_CONT_HEX:
        if (r->cont_len) cis2_sb_hex(b, r->cont_bytes, r->cont_len);
        else cis2_sb_str(b, "none");
        break;
    case K_CTX_IDS:
        if (r->n_ctx) cis2_sb_csv(b, r->ctx_ids, r->n_ctx);
        else cis2_sb_str(b, "none");
        break;
    case K_CONT_IDS: cis2_sb_csv(b, r->cont_ids, r->n_cont); break;
    case K_FIRST: snprintf(t, sizeof t, "%u", r->first_scored); cis2_sb_str(b, t); break;
    case K_TOP_N: snprintf(t, sizeof t, "%u", r->top_n); cis2_sb_str(b, t); break;
    case K_LP_BITS:
        if (!r->n_lp) cis2_sb_str(b, "none");
        for (size_t i = 0; i < r->n_lp; i++) {
            snprintf(t, sizeof t, i ? ",%08x" : "%08x", r->lp_bits[i]);
            cis2_sb_str(b, t);
        }
        break;
    case K_ALL_GREEDY: cis2_sb_str(b, r->all_greedy ? "1" : "0"); break;
    case K_SUM: snprintf(t, sizeof t, "%08x", r->sum_bits); cis2_sb_str(b, t); break;
    case K_SUM64: snprintf(t, sizeof t, "%016llx", (unsigned long long)r->sum_f64_bits); cis2_sb_str(b, t); break;
    case K_LP_DIGEST: cis2_sb_hex(b, r->logprob_digest, 32); break;
    }
}

static void render_value(cis2_sb *b, const cis2_receipt *r, int k, const char *params)
{
    char t[32];
    switch (k) {
    case K_SPEC: cis2_sb_str(b, r->spec_version); break;
    case K_EXTENSION: cis2_sb_str(b, r->score ? "score-1" : "sampling-1"); break;
    case K_WEIGHTS: cis2_sb_hex(b, r->weights_sha, 32); break;
    case K_CONFIG: cis2_sb_hex(b, r->config_sha, 32); break;
    case K_TOKENIZER: cis2_sb_hex(b, r->tokenizer_sha, 32); break;
    case K_PROMPT_FROM: cis2_sb_str(b, "ids"); break;
    case K_PROMPT_HEX:
        if (r->prompt_len) cis2_sb_hex(b, r->prompt, r->prompt_len);
        else cis2_sb_str(b, "none"); /* only with prompt-from ids: render() refuses it otherwise */
        break;
    case K_PROMPT_IDS: cis2_sb_csv(b, r->prompt_ids, r->n_prompt); break;
    case K_GEN_TOKS: snprintf(t, sizeof t, "%u", r->gen_toks); cis2_sb_str(b, t); break;
    case K_DTYPE: cis2_sb_str(b, r->dtype); break;
    case K_TABLE: cis2_sb_hex(b, r->table_digest, 32); break;
    case K_INV_FREQ: cis2_sb_hex(b, r->inv_freq_digest, 32); break;
    case K_GENERATED: cis2_sb_csv(b, r->generated, r->gen_toks); break;
    case K_ARGMAX: case K_TOKEN_DIGEST: cis2_sb_hex(b, r->argmax, 32); break;
    case K_WITNESS: cis2_sb_hex(b, r->witness, 32); break;
    case K_PARAMS: cis2_sb_hex(b, r->params_digest, 32); break;
    case K_FINISH: cis2_sb_str(b, finish_word(r->finish) ? finish_word(r->finish) : "?"); break;
    case K_CTX_FROM: case K_CONT_FROM: case K_CTX_HEX: case K_CONT_HEX: case K_CTX_IDS: case K_CONT_IDS:
    case K_FIRST: case K_TOP_N: case K_LP_BITS: case K_ALL_GREEDY: case K_SUM: case K_SUM64: case K_LP_DIGEST:
        render_score_value(b, r, k);
        break;
    default: { /* max-toks .. stop-strings: exactly the §S7.5 block's line */
        const char *key = names[k], *p = params;
        size_t kl = strlen(key);
        while (p && *p && !(strncmp(p, key, kl) == 0 && p[kl] == ' ')) p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
        if (!p || !*p) { b->oom = 1; break; }
        const char *v = p + kl + 1, *e = strchr(v, '\n');
        cis2_sb_put(b, v, (size_t)(e - v));
    }
    }
}

int cis2_receipt_render(const cis2_receipt *r, char **out, size_t *len, cis2_error *err)
{
    *out = NULL;
    *len = 0;
    if (!token_ok(r->spec_version, sizeof r->spec_version) || !token_ok(r->dtype, sizeof r->dtype))
        return cis2_fail(err, CIS2_E_FORMAT, "receipt: spec-version and dtype must be non-empty printable ASCII without spaces");
    if (r->score) {
        if (!r->n_cont || !r->cont_ids || r->n_lp + r->first_scored != r->n_cont || (r->n_ctx == 0) != (r->ctx_from == CIS2_FROM_NONE))
            return cis2_fail(err, CIS2_E_FORMAT, "score receipt: no continuation, or parts that do not fit together");
    } else if ((r->prompt_len == 0 && !r->prompt_from_ids) || r->n_prompt == 0 || r->gen_toks == 0 || !r->generated)
        return cis2_fail(err, CIS2_E_FORMAT, "receipt: empty prompt, prompt ids or generated ids");
    if (r->ext && !finish_word(r->finish)) return cis2_fail(err, CIS2_E_FORMAT, "receipt: no finish reason");
    char *params = r->ext ? cis2_receipt_params_block(r) : NULL;
    if (r->ext && !params) return cis2_fail(err, CIS2_E_NOMEM, "receipt: out of memory");
    size_t nk;
    const int *order = order_of(kind_of(r), &nk);
    cis2_sb b = {0};
    cis2_sb_str(&b, r->score ? CIS2_RECEIPT_SCORE_MAGIC "\n" : r->ext ? CIS2_RECEIPT_EXT_MAGIC "\n" : CIS2_RECEIPT_MAGIC "\n");
    for (size_t i = 0; i < nk; i++) {
        if (!present(r, order[i])) continue;
        cis2_sb_str(&b, names[order[i]]);
        cis2_sb_put(&b, " ", 1);
        render_value(&b, r, order[i], params);
        cis2_sb_put(&b, "\n", 1);
    }
    free(params);
    if (b.oom) { free(b.p); return cis2_fail(err, CIS2_E_NOMEM, "receipt: out of memory"); }
    *out = b.p;
    *len = b.n;
    return CIS2_OK;
}

/* -------------------------------------------------------------- parse */

static int hexval(char c) { return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1; }

/* Each returns NULL or a static reason. */
static const char *parse_hex(const char *v, size_t n, uint8_t *out, size_t bytes, const char *what)
{
    if (n != 2 * bytes) return what;
    for (size_t i = 0; i < n; i++) {
        int x = hexval(v[i]);
        if (x < 0) return what;
        if (i & 1) out[i / 2] = (uint8_t)(out[i / 2] | x);
        else out[i / 2] = (uint8_t)(x << 4);
    }
    return NULL;
}

static const char *parse_digest(const char *v, size_t n, uint8_t out[32])
{
    return parse_hex(v, n, out, 32, "not a digest: expected 64 lowercase hex digits");
}

static const char *parse_bits(const char *v, size_t n, float *out)
{
    uint8_t b[4];
    const char *why = parse_hex(v, n, b, 4, "not a binary32 bit pattern: expected 8 lowercase hex digits");
    if (why) return why;
    *out = bitsf((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    return NULL;
}

static const char *parse_u64(const char *v, size_t n, uint64_t max, uint64_t *out, const char *too_big)
{
    if (n == 0) return "empty number";
    if (n > 1 && v[0] == '0') return "number with a leading zero";
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return "not a decimal number";
        unsigned d = (unsigned)(v[i] - '0');
        if (x > (max - d) / 10) return too_big;
        x = x * 10 + d;
    }
    *out = x;
    return NULL;
}

static const char *parse_u32(const char *v, size_t n, uint32_t *out)
{
    uint64_t x;
    const char *why = parse_u64(v, n, UINT32_MAX, &x, "number larger than 4294967295 (u32)");
    if (!why) *out = (uint32_t)x;
    return why;
}

static const char *parse_csv(const char *v, size_t n, uint32_t **ids, size_t *count)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += v[i] == ',';
    *ids = malloc(cap * sizeof(uint32_t));
    if (!*ids) return "out of memory";
    *count = 0;
    size_t s = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && v[i] != ',') continue;
        if (i == s) return "empty element in the comma-separated list";
        const char *why = parse_u32(v + s, i - s, &(*ids)[*count]);
        if (why) return why;
        (*count)++;
        s = i + 1;
    }
    return NULL;
}

/* `none`, or a CSV of at most 64 ids into a fixed array. */
static const char *parse_list64(const char *v, size_t n, uint32_t *out, size_t *count, int *some)
{
    if (n == 4 && !memcmp(v, "none", 4)) { *count = 0; if (some) *some = 0; return NULL; }
    uint32_t *ids;
    size_t k;
    const char *why = parse_csv(v, n, &ids, &k);
    if (!why && k > 64) why = "more than 64 ids";
    if (!why) { memcpy(out, ids, k * sizeof *ids); *count = k; if (some) *some = 1; }
    free(ids);
    return why;
}

static const char *parse_strings(const char *v, size_t n, cis2_receipt *r)
{
    if (n == 4 && !memcmp(v, "none", 4)) return NULL;
    size_t s = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && v[i] != ',') continue;
        size_t l = i - s;
        if (l == 0) return "empty element in the list of stop strings";
        if (r->n_stop_str == 16) return "more than 16 stop strings";
        if (l % 2 || l > 512) return "a stop string is not 2..512 lowercase hex digits";
        uint8_t *b = malloc(l / 2 + 1);
        if (!b) return "out of memory";
        r->stop_str[r->n_stop_str] = b;
        r->stop_len[r->n_stop_str++] = l / 2;
        if (parse_hex(v + s, l, b, l / 2, "a stop string is not lowercase hex")) return "a stop string is not lowercase hex";
        b[l / 2] = 0;
        s = i + 1;
    }
    return NULL;
}

static const char *parse_token(const char *v, size_t n, char *out, size_t cap)
{
    if (n >= cap) return "value too long";
    memcpy(out, v, n);
    out[n] = 0;
    return NULL;
}

static int is_word(const char *v, size_t n, const char *w) { return strlen(w) == n && !memcmp(v, w, n); }

/* ------------------------------------------- ext-score-1 values and rules */

static const char *parse_from(const char *v, size_t n, int *out, int none_ok)
{
    if (is_word(v, n, "text")) *out = CIS2_FROM_TEXT;
    else if (is_word(v, n, "ids")) *out = CIS2_FROM_IDS;
    else if (none_ok && is_word(v, n, "none")) *out = CIS2_FROM_NONE;
    else return none_ok ? "must be none, text or ids" : "must be text or ids";
    return NULL;
}

/* `none` (no bytes) or lowercase hex of an even length */
static const char *parse_bytes(const char *v, size_t n, uint8_t **out, size_t *len)
{
    if (is_word(v, n, "none")) return NULL;
    if (n % 2) return "odd number of hex digits";
    if (!(*out = malloc(n / 2))) return "out of memory";
    *len = n / 2;
    return parse_hex(v, n, *out, n / 2, "not lowercase hex (or none)");
}

static const char *parse_bits_csv(const char *v, size_t n, cis2_receipt *r)
{
    if (is_word(v, n, "none")) return NULL;
    if ((n + 1) % 9) return "not a comma-separated list of 8-digit lowercase hex bit patterns";
    size_t k = (n + 1) / 9;
    if (!(r->lp_bits = malloc(k * sizeof *r->lp_bits))) return "out of memory";
    for (size_t i = 0; i < k; i++) {
        if (i + 1 < k && v[9 * i + 8] != ',') return "not a comma-separated list of 8-digit lowercase hex bit patterns";
        float f;
        const char *why = parse_bits(v + 9 * i, 8, &f);
        if (why) return why;
        r->lp_bits[i] = fbits(f);
    }
    r->n_lp = k;
    return NULL;
}

static const char *parse_score_value(int k, const char *v, size_t n, cis2_receipt *r)
{
    const char *why;
    uint8_t b[8];
    switch (k) {
    case K_CTX_FROM: return parse_from(v, n, &r->ctx_from, 1);
    case K_CONT_FROM: return parse_from(v, n, &r->cont_from, 0);
    case K_CTX_HEX: return parse_bytes(v, n, &r->ctx_bytes, &r->ctx_len);
    case K_CONT_HEX: return parse_bytes(v, n, &r->cont_bytes, &r->cont_len);
    case K_CTX_IDS: return is_word(v, n, "none") ? NULL : parse_csv(v, n, &r->ctx_ids, &r->n_ctx);
    case K_CONT_IDS: return parse_csv(v, n, &r->cont_ids, &r->n_cont);
    case K_FIRST:
        if (is_word(v, n, "0") || is_word(v, n, "1")) { r->first_scored = (uint32_t)(v[0] - '0'); return NULL; }
        return "must be 0 or 1";
    case K_TOP_N:
        why = parse_u32(v, n, &r->top_n);
        return why ? why : r->top_n > CIS2_MAX_TOP_LOGPROBS ? "more than 20" : NULL;
    case K_LP_BITS: return parse_bits_csv(v, n, r);
    case K_ALL_GREEDY:
        if (is_word(v, n, "0") || is_word(v, n, "1")) { r->all_greedy = v[0] == '1'; return NULL; }
        return "must be 0 or 1";
    case K_SUM: {
        float f;
        why = parse_bits(v, n, &f);
        if (!why) r->sum_bits = fbits(f);
        return why;
    }
    case K_SUM64:
        if ((why = parse_hex(v, n, b, 8, "not a binary64 bit pattern: expected 16 lowercase hex digits"))) return why;
        r->sum_f64_bits = 0;
        for (int i = 0; i < 8; i++) r->sum_f64_bits = r->sum_f64_bits << 8 | b[i];
        return NULL;
    case K_LP_DIGEST: return parse_digest(v, n, r->logprob_digest);
    }
    return "internal: unknown key index";
}

/* The rules of docs/receipts.md "Score receipts" that need no weights. */
static const char *score_consistent(const cis2_receipt *r)
{
    if ((r->ctx_from == CIS2_FROM_NONE) != (r->n_ctx == 0))
        return "context-from is none exactly when context-token-ids is none";
    if (r->ctx_from == CIS2_FROM_NONE && r->ctx_len) return "context-from none with a context-hex";
    if (r->ctx_from == CIS2_FROM_TEXT && !r->ctx_len) return "context-from text with no context-hex";
    if (r->cont_from == CIS2_FROM_TEXT && !r->cont_len) return "continuation-from text with no continuation-hex";
    if (r->first_scored != (r->ctx_from == CIS2_FROM_NONE))
        return "first-scored is 1 exactly when there is no context (docs/sampling.md §S11.2)";
    if (r->n_lp + r->first_scored != r->n_cont)
        return "logprob-bits must have one element per scored continuation token";
    return NULL;
}

static const char *parse_value(int k, const char *v, size_t n, cis2_receipt *r)
{
    const char *why;
    uint64_t x;
    switch (k) {
    case K_SPEC:
        why = parse_token(v, n, r->spec_version, sizeof r->spec_version);
        return why ? why : (r->ext || r->score) && strcmp(r->spec_version, CIS2_SPEC_VERSION) ? "spec-version must be 0.3b" : NULL;
    case K_EXTENSION:
        if (r->score) return is_word(v, n, "score-1") ? NULL : "extension must be score-1";
        return is_word(v, n, "sampling-1") ? NULL : "extension must be sampling-1";
    case K_DTYPE:
        why = parse_token(v, n, r->dtype, sizeof r->dtype);
        return why ? why : (r->ext || r->score) && strcmp(r->dtype, "fp32") ? "dtype must be fp32" : NULL;
    case K_WEIGHTS: return parse_digest(v, n, r->weights_sha);
    case K_CONFIG: return parse_digest(v, n, r->config_sha);
    case K_TOKENIZER: return parse_digest(v, n, r->tokenizer_sha);
    case K_TABLE: return parse_digest(v, n, r->table_digest);
    case K_INV_FREQ: return parse_digest(v, n, r->inv_freq_digest);
    case K_ARGMAX: case K_TOKEN_DIGEST: return parse_digest(v, n, r->argmax);
    case K_WITNESS: return parse_digest(v, n, r->witness);
    case K_PARAMS: return parse_digest(v, n, r->params_digest);
    case K_PROMPT_FROM: /* docs/receipts.md "Prompts given as ids" */
        if (!is_word(v, n, "ids")) return "must be ids (a receipt of a text prompt has no prompt-from line)";
        r->prompt_from_ids = 1;
        return NULL;
    case K_PROMPT_HEX:
        if (is_word(v, n, "none")) /* ids with no bytes */
            return r->prompt_from_ids ? NULL : "none only after a prompt-from ids line (docs/receipts.md \"Prompts given as ids\")";
        if (n % 2) return "prompt-hex has an odd number of digits";
        if (!(r->prompt = malloc(n / 2))) return "out of memory";
        r->prompt_len = n / 2;
        return parse_hex(v, n, r->prompt, n / 2, "prompt-hex is not lowercase hex");
    case K_PROMPT_IDS: return parse_csv(v, n, &r->prompt_ids, &r->n_prompt);
    case K_GEN_TOKS:
        why = parse_u32(v, n, &r->gen_toks);
        if (why) return why;
        if (r->gen_toks == 0) return "gen-toks must be at least 1";
        if (r->ext && r->gen_toks > r->max_toks) return "gen-toks is larger than max-toks";
        return NULL;
    case K_MAX_TOKS:
        why = parse_u32(v, n, &r->max_toks);
        return why ? why : r->max_toks == 0 ? "max-toks must be at least 1" : NULL;
    case K_SAMPLER:
        /* checked against temperature and top-k once they are parsed (consistent()) */
        return is_word(v, n, "greedy") || is_word(v, n, "philox4x32-10") ? NULL : "sampler must be greedy or philox4x32-10";
    case K_TEMP: return parse_bits(v, n, &r->samp.temperature);
    case K_TOP_P: return parse_bits(v, n, &r->samp.top_p);
    case K_MIN_P: return parse_bits(v, n, &r->samp.min_p);
    case K_TOP_K: return parse_u32(v, n, &r->samp.top_k);
    case K_SEED:
        why = parse_u64(v, n, UINT64_MAX, &x, "seed larger than 18446744073709551615 (u64)");
        if (!why) r->samp.seed = x;
        return why;
    case K_SEQUENCE: return parse_u32(v, n, &r->samp.sequence);
    case K_STOP_EOS: return parse_list64(v, n, r->stop_eos, &r->n_stop_eos, &r->has_eos);
    case K_STOP_IDS: return parse_list64(v, n, r->stop_ids, &r->n_stop_ids, NULL);
    case K_STOP_STRINGS: return parse_strings(v, n, r);
    case K_FINISH:
        for (int f = CIS2_FINISH_LENGTH; f <= CIS2_FINISH_STOP_STRING; f++)
            if (is_word(v, n, finish_word(f))) { r->finish = f; return NULL; }
        return "finish-reason must be length, eos, stop-id or stop-string";
    case K_GENERATED: {
        size_t count = 0;
        why = parse_csv(v, n, &r->generated, &count);
        if (why) return why;
        if (count != r->gen_toks) return "generated-token-ids length differs from gen-toks";
        return NULL;
    }
    default: return parse_score_value(k, v, n, r);
    }
}

static int in_list(const uint32_t *v, size_t n, uint32_t t)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == t) return 1;
    return 0;
}

/* docs/sampling.md §S7.4 (the rules that need no weights), and the
 * sampler word of §S2.4.  Returns NULL or a reason. */
static const char *consistent(const cis2_receipt *r, const char *sampler_word)
{
    cis2_sampling s = r->samp;
    if (cis2_sampling_check(&s, SIZE_MAX, NULL)) return "temperature, top-p or min-p outside docs/sampling.md §S2.2";
    if (fbits(r->samp.top_p) == 0) return "top-p must be in (0, 1]";
    int greedy = cis2_sampling_greedy(&s);
    if (greedy != (strcmp(sampler_word, "greedy") == 0)) return "sampler is greedy iff temperature is 0 or top-k is 1";
    if (fbits(r->samp.temperature) == 0 && !r->has_eos && !r->n_stop_ids && !r->n_stop_str)
        return "a greedy run without stop rules has a CIS-2-RECEIPT v1 receipt, not this one";
    uint32_t last = r->generated[r->gen_toks - 1];
    for (size_t i = 0; i + 1 < r->gen_toks; i++)
        if ((r->has_eos && in_list(r->stop_eos, r->n_stop_eos, r->generated[i])) ||
            in_list(r->stop_ids, r->n_stop_ids, r->generated[i]))
            return "a stop token before the last generated token";
    int is_eos = r->has_eos && in_list(r->stop_eos, r->n_stop_eos, last);
    int is_id = in_list(r->stop_ids, r->n_stop_ids, last);
    switch (r->finish) {
    case CIS2_FINISH_EOS:
        if (!is_eos) return "finish-reason eos but the last token is not an eos id";
        break;
    case CIS2_FINISH_STOP_ID:
        if (!is_id || is_eos) return "finish-reason stop-id does not fit the last token";
        break;
    case CIS2_FINISH_STOP_STRING:
        if (!r->n_stop_str || is_eos || is_id) return "finish-reason stop-string does not fit the stop rules";
        break;
    case CIS2_FINISH_LENGTH:
        if (r->gen_toks != r->max_toks || is_eos || is_id)
            return "finish-reason length needs gen-toks == max-toks and a last token that stops nothing";
        break;
    }
    return NULL;
}

int cis2_receipt_parse_into(const char *buf, size_t len, const char *name, cis2_receipt *r, cis2_error *err)
{
    memset(r, 0, sizeof *r);
    size_t next = 0, line = 0, pos = 0, nk = CIS2_RECEIPT_NKEYS;
    const int *order = order_v1;
    char sampler[16] = "";
    int rc = CIS2_OK;
#define FAIL(...) do { rc = cis2_fail(err, CIS2_E_FORMAT, __VA_ARGS__); goto out; } while (0)
    if (len > CIS2_RECEIPT_MAX_FILE) FAIL("%s: larger than %u bytes: not a receipt", name, CIS2_RECEIPT_MAX_FILE);
    if (len == 0) FAIL("%s: line 1: empty file", name);
    while (pos < len) {
        line++;
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
        if (!nl && line > 1 && next + 1 == nk) /* the last key's line: its LF was stripped */
            FAIL("%s: line %zu: no LF at the end of the last line (a receipt ends with one LF, which `$(...)` "
                 "drops: save a server's receipt with `jq -j '.choices[0].cis2.receipt'`)", name, line);
        if (!nl) FAIL("%s: line %zu: no LF at the end of the last line", name, line);
        size_t n = (size_t)(nl - s);
        pos += n + 1;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == '\r') FAIL("%s: line %zu: CR byte (CRLF line ends are not allowed)", name, line);
            if (c == 0) FAIL("%s: line %zu: NUL byte", name, line);
            if (c == '\t' || c == '\v' || c == '\f') FAIL("%s: line %zu: tab or other whitespace", name, line);
            if (c < 0x20 || c >= 0x7F) FAIL("%s: line %zu: byte 0x%02x is not printable ASCII", name, line, c);
        }
        if (n == 0 && next == nk && line > 1) /* after the last key: `jq -r`'s */
            FAIL("%s: line %zu: blank line after the last key: a receipt ends with exactly one LF, and something "
                 "added another (`jq -r` does: save a server's receipt with `jq -j '.choices[0].cis2.receipt'`, "
                 "which writes the text exactly)", name, line);
        if (n == 0) FAIL("%s: line %zu: blank line", name, line);
        if (line == 1) {
            if (n == strlen(CIS2_RECEIPT_EXT_MAGIC) && !memcmp(s, CIS2_RECEIPT_EXT_MAGIC, n)) {
                r->ext = 1;
                order = order_of(1, &nk);
            } else if (n == strlen(CIS2_RECEIPT_SCORE_MAGIC) && !memcmp(s, CIS2_RECEIPT_SCORE_MAGIC, n)) {
                r->score = 1;
                order = order_of(2, &nk);
            } else if (n != strlen(CIS2_RECEIPT_MAGIC) || memcmp(s, CIS2_RECEIPT_MAGIC, n))
                FAIL("%s: line 1: expected '%s' (or '%s', '%s')", name, CIS2_RECEIPT_MAGIC, CIS2_RECEIPT_EXT_MAGIC,
                     CIS2_RECEIPT_SCORE_MAGIC);
            continue;
        }
        const char *sp = memchr(s, ' ', n);
        if (!sp) FAIL("%s: line %zu: expected 'key value'", name, line);
        size_t kl = (size_t)(sp - s);
        if (kl == 0) FAIL("%s: line %zu: leading space", name, line);
        const char *v = sp + 1;
        size_t vn = n - kl - 1;
        int k = -1;
        for (size_t i = 0; i < nk; i++)
            if (strlen(names[order[i]]) == kl && !memcmp(names[order[i]], s, kl)) k = (int)i;
        if (k < 0) FAIL("%s: line %zu: unknown key '%.*s'", name, line, (int)(kl > 40 ? 40 : kl), s);
        if ((size_t)k > next && order[next] == K_PROMPT_FROM) next++; /* the optional line is absent */
        if ((size_t)k < next && order[k] == K_PROMPT_FROM && !r->prompt_from_ids)
            FAIL("%s: line %zu: prompt-from out of order (it comes just before prompt-hex)", name, line);
        if ((size_t)k < next) FAIL("%s: line %zu: duplicate key '%s'", name, line, names[order[k]]);
        if ((size_t)k > next)
            FAIL("%s: line %zu: missing key '%s' (found '%s')", name, line, names[order[next]], names[order[k]]);
        if (vn == 0) FAIL("%s: line %zu: %s: empty value", name, line, names[order[k]]);
        if (memchr(v, ' ', vn)) FAIL("%s: line %zu: %s: whitespace in the value", name, line, names[order[k]]);
        if (order[k] == K_SAMPLER && vn < sizeof sampler) { memcpy(sampler, v, vn); sampler[vn] = 0; }
        const char *why = parse_value(order[k], v, vn, r);
        if (why) {
            if (!strcmp(why, "out of memory")) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", name); goto out; }
            FAIL("%s: line %zu: %s: %s", name, line, names[order[k]], why);
        }
        next++;
    }
    if (line == 0) FAIL("%s: line 1: empty file", name);
    if (next < nk && order[next] == K_PROMPT_FROM) next++;
    if (next < nk) FAIL("%s: line %zu: missing key '%s'", name, line + 1, names[order[next]]);
    if (r->ext) {
        const char *why = consistent(r, sampler);
        if (why) FAIL("%s: %s (docs/sampling.md §S7.4)", name, why);
    }
    if (r->score) {
        const char *why = score_consistent(r);
        if (why) FAIL("%s: %s (docs/receipts.md \"Score receipts\")", name, why);
    }
#undef FAIL
out:
    if (!rc && !(r->source = strdup(name))) rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", name);
    if (rc) cis2_receipt_clear(r);
    return rc;
}

int cis2_receipt_load_into(const char *path, cis2_receipt *r, cis2_error *err)
{
    memset(r, 0, sizeof *r);
    char *b;
    size_t n;
    int rc = cis2_read_file(path, CIS2_RECEIPT_MAX_FILE, "a receipt", &b, &n, err);
    if (rc) return rc;
    rc = cis2_receipt_parse_into(b, n, path, r, err);
    free(b);
    return rc;
}

int cis2_receipt_save_to(const char *path, const cis2_receipt *r, cis2_error *err)
{
    char *s;
    size_t n;
    int rc = cis2_receipt_render(r, &s, &n, err);
    if (rc) return rc;
    rc = cis2_write_file(path, s, n, err);
    free(s);
    return rc;
}

int cis2_receipt_equal(const cis2_receipt *a, const cis2_receipt *b)
{
    char *ta, *tb;
    size_t la, lb;
    if (cis2_receipt_render(a, &ta, &la, NULL)) return 0;
    if (cis2_receipt_render(b, &tb, &lb, NULL)) { free(ta); return 0; }
    int eq = la == lb && !memcmp(ta, tb, la);
    free(ta);
    free(tb);
    return eq;
}

int cis2_receipt_copy_into(cis2_receipt *dst, const cis2_receipt *src, cis2_error *err)
{
    char *t;
    size_t n;
    int rc = cis2_receipt_render(src, &t, &n, err);
    if (rc) return rc;
    rc = cis2_receipt_parse_into(t, n, src->source ? src->source : "", dst, err);
    free(t);
    return rc;
}

/* ------------------------------------------------------ from results */

char *cis2_ids_raw_bytes(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len)
{
    size_t total = 0, l;
    for (size_t i = 0; i < n; i++)
        if (cis2_tokenizer_token_bytes(t, ids[i], &l)) total += l;
    char *o = malloc(total + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *b = cis2_tokenizer_token_bytes(t, ids[i], &l);
        if (b) { memcpy(o + k, b, l); k += l; }
    }
    o[k] = 0;
    *len = k;
    return o;
}

char *cis2_ids_text_bytes(const cis2_tokenizer *t, const uint32_t *ids, size_t n, size_t *len)
{
    *len = 0;
    const uint32_t *pre, *post;
    size_t npre, npost;
    cis2_tokenizer_special_ids(t, &pre, &npre, &post, &npost);
    /* the template's ids must be there, around the text's (they have no bytes of their own to record) */
    if (n < npre + npost || (npre && memcmp(ids, pre, npre * sizeof *ids)) ||
        (npost && memcmp(ids + n - npost, post, npost * sizeof *ids)))
        return NULL;
    /* two candidates, each kept only if it encodes back to exactly the ids: the tokens' bytes
     * concatenated, then the decoder's text (SentencePiece-style files: its Strip removes the
     * space the Prepend normalizer adds back) */
    for (int k = 0; k < 2; k++) {
        size_t l = 0;
        char *c = k == 0 ? cis2_ids_raw_bytes(t, ids + npre, n - npre - npost, &l)
                         : cis2_tokenizer_decode_n(t, ids + npre, n - npre - npost, &l);
        if (!c) continue;
        uint32_t *back = NULL;
        size_t nb = 0;
        int ok = l > 0 &&
                 cis2_tokenizer_encode_flags(t, c, l, CIS2_TOK_ADD_SPECIAL, SIZE_MAX, &back, &nb, NULL) == CIS2_OK &&
                 nb == n && !memcmp(back, ids, n * sizeof *ids);
        free(back);
        if (ok) { *len = l; return c; }
        free(c);
    }
    return NULL;
}

int cis2_receipt_make(const cis2_engine *e, const cis2_result *res, cis2_receipt **out, cis2_error *err)
{
    *out = NULL;
    /* no prompt bytes: ids that no bytes reproduce, recorded as ids (docs/receipts.md "Prompts given as ids") */
    int from_ids = !res->prompt || res->prompt_len == 0;
    if (from_ids && !e->tok)
        return cis2_fail(err, CIS2_E_USAGE, "receipt: a prompt given as ids records their bytes, which need the "
                         "model's tokenizer.json (%s)", e->tok_err.msg);
    if (!res->prompt_ids || res->n_prompt == 0) return cis2_fail(err, CIS2_E_USAGE, "receipt: the run has no prompt ids");
    if (res->n_tokens == 0 || res->n_tokens > UINT32_MAX || res->finish == CIS2_FINISH_CANCELLED)
        return cis2_fail(err, CIS2_E_USAGE, "receipt: a cancelled or empty run has no receipt");
    cis2_receipt *r = cis2_receipt_new();
    if (!r) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    cis2_receipt_set_model(r, &e->m);
    memcpy(r->argmax, res->argmax_digest, 32);
    memcpy(r->witness, res->witness, 32);
    r->gen_toks = (uint32_t)res->n_tokens;
    const cis2_rule *ru = res->priv ? &res->priv->rule : NULL;
    if (ru && ru->extension) { /* docs/sampling.md §S7.2 */
        r->ext = 1;
        r->max_toks = (uint32_t)ru->max_tokens;
        r->samp = ru->samp;
        r->has_eos = ru->eos;
        r->n_stop_eos = ru->eos ? ru->n_eos : 0;
        memcpy(r->stop_eos, ru->eos_ids, r->n_stop_eos * sizeof(uint32_t));
        r->n_stop_ids = ru->n_stop_ids;
        if (ru->n_stop_ids) memcpy(r->stop_ids, ru->stop_ids, ru->n_stop_ids * sizeof(uint32_t));
        for (size_t i = 0; i < ru->n_stop_str; i++) {
            if (!(r->stop_str[i] = malloc(ru->stop_len[i] + 1))) { cis2_receipt_free(r); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
            memcpy(r->stop_str[i], ru->stop_str[i], ru->stop_len[i] + 1);
            r->stop_len[i] = ru->stop_len[i];
            r->n_stop_str = i + 1;
        }
        memcpy(r->params_digest, ru->params_digest, 32);
        r->finish = res->finish;
    }
    r->prompt_from_ids = from_ids;
    if (from_ids) r->prompt = (uint8_t *)cis2_ids_raw_bytes(e->tok, res->prompt_ids, res->n_prompt, &r->prompt_len);
    else if ((r->prompt = malloc(res->prompt_len))) {
        memcpy(r->prompt, res->prompt, res->prompt_len);
        r->prompt_len = res->prompt_len;
    }
    r->prompt_ids = malloc(res->n_prompt * sizeof(uint32_t));
    r->generated = malloc(res->n_tokens * sizeof(uint32_t));
    if (!r->prompt || !r->prompt_ids || !r->generated) {
        cis2_receipt_free(r);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    memcpy(r->prompt_ids, res->prompt_ids, res->n_prompt * sizeof(uint32_t));
    r->n_prompt = res->n_prompt;
    memcpy(r->generated, res->tokens, res->n_tokens * sizeof(uint32_t));
    *out = r;
    return CIS2_OK;
}

/* ------------------------------------------------------- public API */

int cis2_receipt_parse(const char *text, size_t len, const char *name, cis2_receipt **out, cis2_error *err)
{
    *out = NULL;
    cis2_receipt *r = calloc(1, sizeof *r);
    if (!r) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", name);
    int rc = cis2_receipt_parse_into(text, len, name, r, err);
    if (rc) { free(r); return rc; }
    *out = r;
    return CIS2_OK;
}

int cis2_receipt_load(const char *path, cis2_receipt **out, cis2_error *err)
{
    *out = NULL;
    cis2_receipt *r = calloc(1, sizeof *r);
    if (!r) return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    int rc = cis2_receipt_load_into(path, r, err);
    if (rc) { free(r); return rc; }
    *out = r;
    return CIS2_OK;
}

int cis2_receipt_save(const cis2_receipt *r, const char *path, cis2_error *err)
{
    return cis2_receipt_save_to(path, r, err);
}

const char *cis2_receipt_get(const cis2_receipt *rc, const char *key)
{
    cis2_receipt *r = (cis2_receipt *)rc; /* the cache is logically const */
    size_t nk;
    const int *order = order_of(kind_of(r), &nk);
    int k = -1;
    for (size_t i = 0; i < nk; i++)
        if (!strcmp(names[order[i]], key)) k = (int)i;
    if (k < 0 || !present(r, order[k])) return NULL;
    if (!r->get_text) {
        size_t len;
        if (cis2_receipt_render(r, &r->get_text, &len, NULL)) return NULL;
        /* each present key's line in order, after the first line: cut each value at its LF */
        char *p = strchr(r->get_text, '\n') + 1;
        for (size_t i = 0; i < nk && p && *p; i++) {
            if (!present(r, order[i])) continue;
            char *nl = strchr(p, '\n');
            r->get_val[i] = p + strlen(names[order[i]]) + 1;
            if (nl) *nl = 0;
            p = nl ? nl + 1 : NULL;
        }
    }
    return r->get_val[k];
}

/*
 * receipt.c - render and strictly parse "CIS-2-RECEIPT v1" (FACTS.md §6;
 * the digests it carries are spec §12.1-§12.3, the artifact hashes §2.1).
 *
 * The parser is deliberately unforgiving: anything render() would not have
 * produced is rejected with "NAME: line N: reason" (CIS2_E_FORMAT), so that
 * parse(render(r)) == r and render(parse(text)) == text for every accepted
 * text.  Rejected: a wrong first line, unknown / duplicate / missing /
 * out-of-order keys, blank lines, CR (CRLF), NUL or non-ASCII bytes, any
 * whitespace other than the single key/value separator, empty values,
 * digests that are not 64 lowercase hex digits, odd-length or uppercase
 * prompt-hex, CSV with empty elements / leading zeros / values > u32,
 * gen-toks 0, a generated list whose length differs from gen-toks, a
 * missing final LF, and files over CIS2_RECEIPT_MAX_FILE.
 *
 * File I/O (issue 16, fileio.h): load reads a regular file once (size
 * checked before reading); save writes a temporary file beside the target
 * and renames it into place, so a failed save (a full disk) leaves the old
 * receipt intact.  Callers: cis2 run --receipt, verify, check, compare.
 */
#include "receipt.h"
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_SPEC, K_WEIGHTS, K_CONFIG, K_TOKENIZER, K_PROMPT_HEX, K_PROMPT_IDS, K_GEN_TOKS, K_DTYPE, K_TABLE,
       K_INV_FREQ, K_GENERATED, K_ARGMAX, K_WITNESS };

static const char *const keys[CIS2_RECEIPT_NKEYS] = {
    "spec-version", "weights-sha256", "config-sha256", "tokenizer-sha256", "prompt-hex", "prompt-token-ids",
    "gen-toks", "dtype", "table-digest", "inv-freq-table-digest", "generated-token-ids", "argmax-digest",
    "witness-digest"};

const char *cis2_receipt_key(size_t i) { return i < CIS2_RECEIPT_NKEYS ? keys[i] : NULL; }

void cis2_receipt_free(cis2_receipt *r)
{
    free(r->prompt);
    free(r->prompt_ids);
    free(r->generated);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------- render */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_key(sbuf *b, int k)
{
    sb_str(b, keys[k]);
    sb_put(b, " ", 1);
}

static void sb_digest(sbuf *b, int k, const uint8_t d[32])
{
    char h[65];
    cis2_hex(d, 32, h);
    sb_key(b, k);
    sb_put(b, h, 64);
    sb_put(b, "\n", 1);
}

static void sb_csv(sbuf *b, int k, const uint32_t *ids, size_t n)
{
    char t[16];
    sb_key(b, k);
    for (size_t i = 0; i < n; i++) sb_put(b, t, (size_t)snprintf(t, sizeof t, i ? ",%u" : "%u", ids[i]));
    sb_put(b, "\n", 1);
}

static int token_ok(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == 0 || n == cap) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F) return 0;
    return 1;
}

int cis2_receipt_render(const cis2_receipt *r, char **out, size_t *len, cis2_error *err)
{
    *out = NULL;
    *len = 0;
    if (!token_ok(r->spec_version, sizeof r->spec_version) || !token_ok(r->dtype, sizeof r->dtype))
        return cis2_fail(err, CIS2_E_FORMAT, "receipt: spec-version and dtype must be non-empty printable ASCII without spaces");
    if (r->prompt_len == 0 || r->n_prompt == 0 || r->gen_toks == 0 || !r->generated)
        return cis2_fail(err, CIS2_E_FORMAT, "receipt: empty prompt, prompt ids or generated ids");
    sbuf b = {0};
    sb_str(&b, CIS2_RECEIPT_MAGIC "\n");
    sb_key(&b, K_SPEC); sb_str(&b, r->spec_version); sb_str(&b, "\n");
    sb_digest(&b, K_WEIGHTS, r->weights_sha);
    sb_digest(&b, K_CONFIG, r->config_sha);
    sb_digest(&b, K_TOKENIZER, r->tokenizer_sha);
    sb_key(&b, K_PROMPT_HEX);
    for (size_t i = 0; i < r->prompt_len; i++) {
        char h[3];
        cis2_hex(&r->prompt[i], 1, h);
        sb_put(&b, h, 2);
    }
    sb_str(&b, "\n");
    sb_csv(&b, K_PROMPT_IDS, r->prompt_ids, r->n_prompt);
    char t[16];
    snprintf(t, sizeof t, "%u", r->gen_toks);
    sb_key(&b, K_GEN_TOKS); sb_str(&b, t); sb_str(&b, "\n");
    sb_key(&b, K_DTYPE); sb_str(&b, r->dtype); sb_str(&b, "\n");
    sb_digest(&b, K_TABLE, r->table_digest);
    sb_digest(&b, K_INV_FREQ, r->inv_freq_digest);
    sb_csv(&b, K_GENERATED, r->generated, r->gen_toks);
    sb_digest(&b, K_ARGMAX, r->argmax);
    sb_digest(&b, K_WITNESS, r->witness);
    if (b.oom) { free(b.p); return cis2_fail(err, CIS2_E_NOMEM, "receipt: out of memory"); }
    *out = b.p;
    *len = b.n;
    return CIS2_OK;
}

/* -------------------------------------------------------------- parse */

static int hexval(char c) { return (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1; }

/* Each returns NULL or a static reason. */
static const char *parse_digest(const char *v, size_t n, uint8_t out[32])
{
    if (n != 64) return "not a digest: expected 64 lowercase hex digits";
    for (size_t i = 0; i < 64; i++) {
        int x = hexval(v[i]);
        if (x < 0) return "not a digest: expected 64 lowercase hex digits";
        if (i & 1) out[i / 2] = (uint8_t)(out[i / 2] | x);
        else out[i / 2] = (uint8_t)(x << 4);
    }
    return NULL;
}

static const char *parse_u32(const char *v, size_t n, uint32_t *out)
{
    if (n == 0) return "empty number";
    if (n > 1 && v[0] == '0') return "number with a leading zero";
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return "not a decimal number";
        x = x * 10 + (uint64_t)(v[i] - '0');
        if (x > UINT32_MAX) return "number larger than 4294967295 (u32)";
    }
    *out = (uint32_t)x;
    return NULL;
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

static const char *parse_token(const char *v, size_t n, char *out, size_t cap)
{
    if (n >= cap) return "value too long";
    memcpy(out, v, n);
    out[n] = 0;
    return NULL;
}

static const char *parse_value(int k, const char *v, size_t n, cis2_receipt *r)
{
    switch (k) {
    case K_SPEC: return parse_token(v, n, r->spec_version, sizeof r->spec_version);
    case K_DTYPE: return parse_token(v, n, r->dtype, sizeof r->dtype);
    case K_WEIGHTS: return parse_digest(v, n, r->weights_sha);
    case K_CONFIG: return parse_digest(v, n, r->config_sha);
    case K_TOKENIZER: return parse_digest(v, n, r->tokenizer_sha);
    case K_TABLE: return parse_digest(v, n, r->table_digest);
    case K_INV_FREQ: return parse_digest(v, n, r->inv_freq_digest);
    case K_ARGMAX: return parse_digest(v, n, r->argmax);
    case K_WITNESS: return parse_digest(v, n, r->witness);
    case K_PROMPT_HEX:
        if (n % 2) return "prompt-hex has an odd number of digits";
        if (!(r->prompt = malloc(n / 2))) return "out of memory";
        for (size_t i = 0; i < n; i += 2) {
            int a = hexval(v[i]), b = hexval(v[i + 1]);
            if (a < 0 || b < 0) return "prompt-hex is not lowercase hex";
            r->prompt[i / 2] = (uint8_t)(a << 4 | b);
        }
        r->prompt_len = n / 2;
        return NULL;
    case K_PROMPT_IDS: return parse_csv(v, n, &r->prompt_ids, &r->n_prompt);
    case K_GEN_TOKS: {
        const char *why = parse_u32(v, n, &r->gen_toks);
        return why ? why : r->gen_toks == 0 ? "gen-toks must be at least 1" : NULL;
    }
    case K_GENERATED: {
        size_t count = 0;
        const char *why = parse_csv(v, n, &r->generated, &count);
        if (why) return why;
        if (count != r->gen_toks) return "generated-token-ids length differs from gen-toks";
        return NULL;
    }
    }
    return "internal: unknown key index";
}

int cis2_receipt_parse(const char *buf, size_t len, const char *name, cis2_receipt *r, cis2_error *err)
{
    memset(r, 0, sizeof *r);
    size_t next = 0, line = 0, pos = 0;
    int rc = CIS2_OK;
#define FAIL(...) do { rc = cis2_fail(err, CIS2_E_FORMAT, __VA_ARGS__); goto out; } while (0)
    if (len > CIS2_RECEIPT_MAX_FILE) FAIL("%s: larger than %u bytes: not a receipt", name, CIS2_RECEIPT_MAX_FILE);
    if (len == 0) FAIL("%s: line 1: empty file", name);
    while (pos < len) {
        line++;
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
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
        if (n == 0) FAIL("%s: line %zu: blank line", name, line);
        if (line == 1) {
            if (n != strlen(CIS2_RECEIPT_MAGIC) || memcmp(s, CIS2_RECEIPT_MAGIC, n))
                FAIL("%s: line 1: expected '%s'", name, CIS2_RECEIPT_MAGIC);
            continue;
        }
        const char *sp = memchr(s, ' ', n);
        if (!sp) FAIL("%s: line %zu: expected 'key value'", name, line);
        size_t kl = (size_t)(sp - s);
        if (kl == 0) FAIL("%s: line %zu: leading space", name, line);
        const char *v = sp + 1;
        size_t vn = n - kl - 1;
        int k = -1;
        for (int i = 0; i < CIS2_RECEIPT_NKEYS; i++)
            if (strlen(keys[i]) == kl && !memcmp(keys[i], s, kl)) k = i;
        if (k < 0) FAIL("%s: line %zu: unknown key '%.*s'", name, line, (int)(kl > 40 ? 40 : kl), s);
        if ((size_t)k < next) FAIL("%s: line %zu: duplicate key '%s'", name, line, keys[k]);
        if ((size_t)k > next) FAIL("%s: line %zu: missing key '%s' (found '%s')", name, line, keys[next], keys[k]);
        if (vn == 0) FAIL("%s: line %zu: %s: empty value", name, line, keys[k]);
        if (memchr(v, ' ', vn)) FAIL("%s: line %zu: %s: whitespace in the value", name, line, keys[k]);
        const char *why = parse_value(k, v, vn, r);
        if (why) {
            if (!strcmp(why, "out of memory")) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", name); goto out; }
            FAIL("%s: line %zu: %s: %s", name, line, keys[k], why);
        }
        next++;
    }
    if (line == 0) FAIL("%s: line 1: empty file", name);
    if (next < CIS2_RECEIPT_NKEYS) FAIL("%s: line %zu: missing key '%s'", name, line + 1, keys[next]);
#undef FAIL
out:
    if (rc) cis2_receipt_free(r);
    return rc;
}

int cis2_receipt_load(const char *path, cis2_receipt *r, cis2_error *err)
{
    memset(r, 0, sizeof *r);
    char *b;
    size_t n;
    /* fileio.h: a regular file, read once, at most 64 MiB (checked before reading) */
    int rc = cis2_read_file(path, CIS2_RECEIPT_MAX_FILE, "a receipt", &b, &n, err);
    if (rc) return rc;
    rc = cis2_receipt_parse(b, n, path, r, err);
    free(b);
    return rc;
}

int cis2_receipt_save(const char *path, const cis2_receipt *r, cis2_error *err)
{
    char *s;
    size_t n;
    int rc = cis2_receipt_render(r, &s, &n, err);
    if (rc) return rc;
    rc = cis2_write_file(path, s, n, err); /* a temporary file renamed into place: all or nothing */
    free(s);
    return rc;
}

int cis2_receipt_equal(const cis2_receipt *a, const cis2_receipt *b)
{
    return !strcmp(a->spec_version, b->spec_version) && !memcmp(a->weights_sha, b->weights_sha, 32) &&
           !memcmp(a->config_sha, b->config_sha, 32) && !memcmp(a->tokenizer_sha, b->tokenizer_sha, 32) &&
           a->prompt_len == b->prompt_len && !memcmp(a->prompt, b->prompt, a->prompt_len) &&
           a->n_prompt == b->n_prompt && !memcmp(a->prompt_ids, b->prompt_ids, a->n_prompt * sizeof(uint32_t)) &&
           a->gen_toks == b->gen_toks && !strcmp(a->dtype, b->dtype) &&
           !memcmp(a->table_digest, b->table_digest, 32) && !memcmp(a->inv_freq_digest, b->inv_freq_digest, 32) &&
           !memcmp(a->generated, b->generated, a->gen_toks * sizeof(uint32_t)) && !memcmp(a->argmax, b->argmax, 32) &&
           !memcmp(a->witness, b->witness, 32);
}

int cis2_receipt_copy(cis2_receipt *dst, const cis2_receipt *src, cis2_error *err)
{
    *dst = *src;
    dst->prompt = malloc(src->prompt_len ? src->prompt_len : 1);
    dst->prompt_ids = malloc((src->n_prompt ? src->n_prompt : 1) * sizeof(uint32_t));
    dst->generated = malloc((src->gen_toks ? src->gen_toks : 1) * sizeof(uint32_t));
    if (!dst->prompt || !dst->prompt_ids || !dst->generated) {
        cis2_receipt_free(dst);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    if (src->prompt_len) memcpy(dst->prompt, src->prompt, src->prompt_len);
    if (src->n_prompt) memcpy(dst->prompt_ids, src->prompt_ids, src->n_prompt * sizeof(uint32_t));
    if (src->gen_toks) memcpy(dst->generated, src->generated, src->gen_toks * sizeof(uint32_t));
    return CIS2_OK;
}

/*
 * test_receipt.c - the CIS-2-RECEIPT v1 parser and renderer (src/receipt.c)
 * and the trace reader (src/trace.c).
 *
 * The valid receipt below is written by hand from FACTS.md §6 and the spec's
 * §13.1 values (not produced by the code under test); the render test checks
 * render(parse(text)) reproduces it byte for byte and parse(render(r)) == r.
 * Then one test per rejection class FACTS §6 lists (and a few more), each
 * checking CIS2_E_FORMAT and that the message names the right line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "receipt.h"
#include "trace.h"

/* §13.1, "Once upon a time", 16 tokens */
static const char good[] =
    "CIS-2-RECEIPT v1\n"
    "spec-version 0.3b\n"
    "weights-sha256 80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1\n"
    "config-sha256 1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843\n"
    "tokenizer-sha256 9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c\n"
    "prompt-hex 4f6e63652075706f6e20612074696d65\n"
    "prompt-token-ids 6403,1980,253,655\n"
    "gen-toks 16\n"
    "dtype fp32\n"
    "table-digest 23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d\n"
    "inv-freq-table-digest da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12\n"
    "generated-token-ids 28,665,436,253,1838,8180,3365,14176,30,2306,4161,281,253,2066,2291,351\n"
    "argmax-digest 0b9c8f3ac90d0b9cd5f1719ac327dca1fc639fd87468305fccebbe3d56f67aff\n"
    "witness-digest d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df\n";

static void test_parse_good(void **s)
{
    (void)s;
    cis2_receipt r;
    cis2_error err = {0};
    assert_int_equal(cis2_receipt_parse_into(good, strlen(good), "good", &r, &err), CIS2_OK);
    assert_string_equal(r.spec_version, "0.3b");
    assert_string_equal(r.dtype, "fp32");
    assert_int_equal(r.prompt_len, 16);
    assert_memory_equal(r.prompt, "Once upon a time", 16);
    assert_int_equal(r.n_prompt, 4);
    assert_int_equal(r.prompt_ids[0], 6403);
    assert_int_equal(r.prompt_ids[3], 655);
    assert_int_equal(r.gen_toks, 16);
    assert_int_equal(r.generated[0], 28);
    assert_int_equal(r.generated[15], 351);
    assert_int_equal(r.weights_sha[0], 0x80);
    assert_int_equal(r.weights_sha[31], 0xa1);
    assert_int_equal(r.witness[0], 0xd8);
    assert_int_equal(r.witness[31], 0xdf);

    /* render(parse(good)) == good, parse(render(r)) == r */
    char *out;
    size_t n;
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_OK);
    assert_int_equal(n, strlen(good));
    assert_memory_equal(out, good, n);
    cis2_receipt r2;
    assert_int_equal(cis2_receipt_parse_into(out, n, "again", &r2, &err), CIS2_OK);
    assert_true(cis2_receipt_equal(&r, &r2));
    r2.generated[5] ^= 1;
    assert_false(cis2_receipt_equal(&r, &r2));
    free(out);
    cis2_receipt_clear(&r);
    cis2_receipt_clear(&r2);
}

/* Edge values that must be accepted: id 0, u32 max, a NUL prompt byte. */
static void test_parse_edges(void **s)
{
    (void)s;
    cis2_receipt r, r2;
    cis2_error err = {0};
    assert_int_equal(cis2_receipt_parse_into(good, strlen(good), "good", &r, &err), CIS2_OK);
    r.prompt_ids[0] = 0;
    r.prompt_ids[1] = 4294967295u;
    r.prompt[3] = 0;
    r.gen_toks = 1;
    char *out;
    size_t n;
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_OK);
    assert_non_null(strstr(out, "prompt-token-ids 0,4294967295,253,655\n"));
    assert_non_null(strstr(out, "prompt-hex 4f6e6300"));
    assert_non_null(strstr(out, "generated-token-ids 28\n"));
    assert_int_equal(cis2_receipt_parse_into(out, n, "edges", &r2, &err), CIS2_OK);
    assert_true(cis2_receipt_equal(&r, &r2));
    free(out);
    cis2_receipt_clear(&r);
    cis2_receipt_clear(&r2);
}

/* docs/receipts.md "Prompts given as ids": the optional `prompt-from ids`
 * line just before prompt-hex, `prompt-hex none` after it, the keys and
 * values cis2_receipt_key / cis2_receipt_get report with and without it. */
static char *with_line(const char *hex)
{
    static char buf[4096];
    const char *p = strstr(good, "prompt-hex "), *e = strchr(p, '\n');
    snprintf(buf, sizeof buf, "%.*sprompt-from ids\nprompt-hex %s%s", (int)(p - good), good, hex, e);
    return buf;
}

static void test_prompt_from_ids(void **s)
{
    (void)s;
    cis2_receipt r, r2;
    cis2_error err = {0};
    char *out;
    size_t n;
    assert_int_equal(cis2_receipt_parse_into(good, strlen(good), "good", &r, &err), CIS2_OK);
    assert_int_equal(r.prompt_from_ids, 0);
    assert_string_equal(cis2_receipt_key(&r, 4), "prompt-hex");
    assert_string_equal(cis2_receipt_key(&r, 12), "witness-digest");
    assert_null(cis2_receipt_key(&r, 13));
    assert_null(cis2_receipt_get(&r, "prompt-from"));
    cis2_receipt_clear(&r);

    const char *t = with_line("4f6e63652075706f6e20612074696d65");
    assert_int_equal(cis2_receipt_parse_into(t, strlen(t), "ids", &r, &err), CIS2_OK);
    assert_int_equal(r.prompt_from_ids, 1);
    assert_int_equal(r.prompt_len, 16);
    assert_string_equal(cis2_receipt_key(&r, 4), "prompt-from");
    assert_string_equal(cis2_receipt_key(&r, 5), "prompt-hex");
    assert_string_equal(cis2_receipt_key(&r, 13), "witness-digest");
    assert_null(cis2_receipt_key(&r, 14));
    assert_string_equal(cis2_receipt_get(&r, "prompt-from"), "ids");
    assert_string_equal(cis2_receipt_get(&r, "prompt-hex"), "4f6e63652075706f6e20612074696d65");
    assert_string_equal(cis2_receipt_get(&r, "witness-digest"),
                        "d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df");
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_OK);
    assert_int_equal(n, strlen(t));
    assert_memory_equal(out, t, n);
    free(out);
    /* the line is part of the receipt: equal only to itself */
    assert_int_equal(cis2_receipt_parse_into(good, strlen(good), "good", &r2, &err), CIS2_OK);
    assert_false(cis2_receipt_equal(&r, &r2));
    cis2_receipt_clear(&r);
    cis2_receipt_clear(&r2);

    t = with_line("none"); /* ids without bytes */
    assert_int_equal(cis2_receipt_parse_into(t, strlen(t), "none", &r, &err), CIS2_OK);
    assert_int_equal(r.prompt_len, 0);
    assert_null(r.prompt);
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_OK);
    assert_int_equal(n, strlen(t));
    assert_memory_equal(out, t, n);
    free(out);
    assert_int_equal(cis2_receipt_copy_into(&r2, &r, &err), CIS2_OK);
    assert_true(cis2_receipt_equal(&r, &r2));
    cis2_receipt_clear(&r2);
    r.prompt_from_ids = 0; /* no bytes and no line: nothing a parser would take back */
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_E_FORMAT);
    cis2_receipt_clear(&r);
}

/* Replaces the first occurrence of `from` in good with `to`, parses, and
 * expects CIS2_E_FORMAT with "line N:" and `why` in the message. */
static void reject(const char *from, const char *to, int line, const char *why)
{
    char buf[4096];
    const char *p = strstr(good, from);
    assert_non_null(p);
    size_t pre = (size_t)(p - good);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)pre, good, to, p + strlen(from));
    cis2_receipt r;
    cis2_error err = {0};
    int rc = cis2_receipt_parse_into(buf, strlen(buf), "R", &r, &err);
    if (rc != CIS2_E_FORMAT) fail_msg("accepted (rc %d) after replacing '%s' with '%s'", rc, from, to);
    char want[32];
    snprintf(want, sizeof want, "R: line %d:", line);
    if (strncmp(err.msg, want, strlen(want)) || !strstr(err.msg, why))
        fail_msg("message '%s' lacks '%s' / '%s'", err.msg, want, why);
    assert_null(r.prompt);
    assert_null(r.generated);
}

static void test_reject_header(void **s)
{
    (void)s;
    reject("CIS-2-RECEIPT v1\n", "CIS-2-RECEIPT v2\n", 1, "expected 'CIS-2-RECEIPT v1'");
    reject("CIS-2-RECEIPT v1\n", "", 1, "expected 'CIS-2-RECEIPT v1'");
}

static void test_reject_keys(void **s)
{
    (void)s;
    reject("dtype fp32\n", "dtype fp32\nextra-key 1\n", 10, "unknown key 'extra-key'");
    reject("dtype fp32\n", "dtype fp32\ndtype fp32\n", 10, "duplicate key 'dtype'");
    reject("gen-toks 16\n", "gen-toks 16\ngen-toks 16\n", 9, "duplicate key 'gen-toks'");
    reject("dtype fp32\n", "", 9, "missing key 'dtype' (found 'table-digest')");
    /* out of order: dtype before gen-toks */
    reject("gen-toks 16\ndtype fp32\n", "dtype fp32\ngen-toks 16\n", 8, "missing key 'gen-toks' (found 'dtype')");
    reject("witness-digest d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df\n", "", 14,
           "missing key 'witness-digest'");
    reject("spec-version", "Spec-version", 2, "unknown key");
}

static void test_reject_prompt_from(void **s)
{
    (void)s;
    reject("prompt-hex ", "prompt-from text\nprompt-hex ", 6, "prompt-from: must be ids");
    reject("prompt-hex ", "prompt-from \nprompt-hex ", 6, "empty value");
    reject("prompt-hex ", "prompt-from ids\nprompt-from ids\nprompt-hex ", 7, "duplicate key 'prompt-from'");
    reject("gen-toks 16\n", "prompt-from ids\ngen-toks 16\n", 8, "prompt-from out of order");
    reject("prompt-hex 4f6e63652075706f6e20612074696d65\n", "prompt-hex none\n", 6,
           "none only after a prompt-from ids line");
    reject("prompt-hex 4f6e63652075706f6e20612074696d65\n", "prompt-from ids\n", 7,
           "missing key 'prompt-hex' (found 'prompt-token-ids')");
    reject("prompt-hex 4f6e63652075706f6e20612074696d65\n", "", 6,
           "missing key 'prompt-hex' (found 'prompt-token-ids')");
}

static void test_reject_layout(void **s)
{
    (void)s;
    reject("dtype fp32\n", "dtype fp32\n\n", 10, "blank line");
    reject("CIS-2-RECEIPT v1\n", "CIS-2-RECEIPT v1\n\n", 2, "blank line");
    reject("gen-toks 16\n", "gen-toks 16\r\n", 8, "CRLF");
    reject("CIS-2-RECEIPT v1\n", "CIS-2-RECEIPT v1\r\n", 1, "CRLF");
    reject("gen-toks 16\n", "gen-toks  16\n", 8, "whitespace");
    reject("gen-toks 16\n", "gen-toks 16 \n", 8, "whitespace");
    reject("gen-toks 16\n", " gen-toks 16\n", 8, "leading space");
    reject("gen-toks 16\n", "gen-toks\t16\n", 8, "tab");
    reject("gen-toks 16\n", "gen-toks\n", 8, "expected 'key value'");
    reject("gen-toks 16\n", "gen-toks \n", 8, "empty value");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids 6403, 1980", 7, "whitespace");
    reject("dtype fp32\n", "dtype fp\xc3\xa9\n", 9, "not printable ASCII");
    /* no final LF */
    char buf[4096];
    size_t n = strlen(good) - 1;
    memcpy(buf, good, n);
    cis2_receipt r;
    cis2_error err = {0};
    assert_int_equal(cis2_receipt_parse_into(buf, n, "R", &r, &err), CIS2_E_FORMAT);
    assert_non_null(strstr(err.msg, "line 14: no LF"));
    assert_non_null(strstr(err.msg, "jq -j")); /* how to save one (docs/receipts.md "The format") */
    /* `jq -r` adds one LF after the receipt's own: refused (a blank
     * line, FACTS §6), with a message that says how to save a receipt */
    n = strlen(good);
    memcpy(buf, good, n);
    buf[n] = '\n';
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_parse_into(buf, n + 1, "R", &r, &err), CIS2_E_FORMAT);
    if (!strstr(err.msg, "R: line 15: blank line after the last key") || !strstr(err.msg, "jq -j"))
        fail_msg("trailing LF message: '%s'", err.msg);
    /* two extra LFs: the first blank line is still after the last key */
    buf[n + 1] = '\n';
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_parse_into(buf, n + 2, "R", &r, &err), CIS2_E_FORMAT);
    assert_non_null(strstr(err.msg, "R: line 15: blank line after the last key"));
    /* a blank line before the last key is a plain blank line (nothing about jq) */
    const char *last = strstr(good, "witness-digest ");
    size_t k = (size_t)(last - good);
    memcpy(buf, good, k);
    buf[k] = '\n';
    memcpy(buf + k + 1, last, n - k);
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_parse_into(buf, n + 1, "R", &r, &err), CIS2_E_FORMAT);
    assert_non_null(strstr(err.msg, "R: line 14: blank line"));
    assert_null(strstr(err.msg, "jq"));
    /* a NUL byte */
    memcpy(buf, good, strlen(good));
    buf[20] = 0;
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_parse_into(buf, strlen(good), "R", &r, &err), CIS2_E_FORMAT);
    assert_non_null(strstr(err.msg, "line 2: NUL byte"));
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_parse_into("", 0, "R", &r, &err), CIS2_E_FORMAT);
}

static void test_reject_csv(void **s)
{
    (void)s;
    reject("prompt-token-ids 6403,1980", "prompt-token-ids ,6403,1980", 7, "empty element");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids 6403,,1980", 7, "empty element");
    reject("253,655\n", "253,655,\n", 7, "empty element");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids 06403,1980", 7, "leading zero");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids 00,1980", 7, "leading zero");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids 4294967296,1980", 7, "4294967295");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids 99999999999999999999999,1980", 7, "4294967295");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids +6403,1980", 7, "not a decimal");
    reject("prompt-token-ids 6403,1980", "prompt-token-ids -1,1980", 7, "not a decimal");
    reject("generated-token-ids 28,", "generated-token-ids 028,", 12, "leading zero");
    reject("generated-token-ids 28,", "generated-token-ids 4294967296,", 12, "4294967295");
    reject(",2291,351\n", ",2291,,351\n", 12, "empty element");
    /* length differs from gen-toks, either way */
    reject(",2291,351\n", ",2291\n", 12, "length differs from gen-toks");
    reject(",2291,351\n", ",2291,351,7\n", 12, "length differs from gen-toks");
    reject("gen-toks 16\n", "gen-toks 15\n", 12, "length differs from gen-toks");
    reject("gen-toks 16\n", "gen-toks 016\n", 8, "leading zero");
    reject("gen-toks 16\n", "gen-toks 0\n", 8, "at least 1");
    reject("gen-toks 16\n", "gen-toks 4294967296\n", 8, "4294967295");
}

static void test_reject_digests(void **s)
{
    (void)s;
    reject("weights-sha256 80521b40", "weights-sha256 80521B40", 3, "64 lowercase hex");
    reject("d55da1\n", "d55da\n", 3, "64 lowercase hex");
    reject("d55da1\n", "d55da10\n", 3, "64 lowercase hex");
    reject("d55da1\n", "d55dag\n", 3, "64 lowercase hex");
    reject("table-digest 23c7", "table-digest 0x23c7", 10, "64 lowercase hex");
    reject("3cc9df\n", "3cc9dF\n", 14, "64 lowercase hex");
    reject("prompt-hex 4f6e", "prompt-hex 4F6e", 6, "not lowercase hex");
    reject("prompt-hex 4f6e", "prompt-hex 4f6", 6, "odd number");
    reject("prompt-hex 4f6e", "prompt-hex zz4f6e", 6, "not lowercase hex");
}

/* Over-long spec-version / dtype and render's own refusals. */
static void test_limits(void **s)
{
    (void)s;
    reject("spec-version 0.3b\n", "spec-version 0123456789012345678901234567890123456789\n", 2, "too long");
    reject("dtype fp32\n", "dtype fp32fp32fp32fp32\n", 9, "too long");
    cis2_receipt r;
    cis2_error err = {0};
    assert_int_equal(cis2_receipt_parse_into(good, strlen(good), "good", &r, &err), CIS2_OK);
    char *out;
    size_t n;
    strcpy(r.dtype, "f p");
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_E_FORMAT);
    strcpy(r.dtype, "fp32");
    r.gen_toks = 0;
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_render(&r, &out, &n, &err), CIS2_E_FORMAT);
    cis2_receipt_clear(&r);
    /* oversized input is refused before parsing */
    err = (cis2_error){0};
    assert_int_equal(cis2_receipt_parse_into(good, (size_t)CIS2_RECEIPT_MAX_FILE + 1, "big", &r, &err), CIS2_E_FORMAT);
}

/* Trace reader: a hand-written trace is read back; malformed lines fail. */
static void test_trace_reader(void **s)
{
    (void)s;
    char path[] = "/tmp/cis2_test_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *h = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; /* sha256("") */
    FILE *f = fopen(path, "wb");
    fprintf(f, "CIS-2-TRACE v1\n0 0 0 ln1 4 %s\n3 17 -1 logits 10 %s\n", h, h);
    fclose(f);
    cis2_trace t;
    cis2_error err = {0};
    assert_int_equal(cis2_trace_load(&t, path, &err), CIS2_OK);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.dump, 0);
    assert_int_equal(t.rec[1].step, 3);
    assert_int_equal(t.rec[1].pos, 17);
    assert_int_equal(t.rec[1].layer, -1);
    assert_string_equal(t.rec[1].tensor, "logits");
    assert_int_equal(t.rec[1].offset, 16);
    assert_int_equal(t.rec[1].line, 3);
    assert_int_equal(t.rec[0].sha[0], 0xe3);
    cis2_trace_free(&t);
    const char *bad[] = {
        "CIS-2-TRACE v2\n",
        "CIS-2-TRACE v1\n0 0 0 ln1 4\n",
        "CIS-2-TRACE v1\n0 0  0 ln1 4 %s\n",
        "CIS-2-TRACE v1\n00 0 0 ln1 4 %s\n",
        "CIS-2-TRACE v1\n0 0 -2 ln1 4 %s\n",
        "CIS-2-TRACE v1\n0 0 0 LN1 4 %s\n",
        "CIS-2-TRACE v1\n0 0 0 ln1 4 %s \n",
        "CIS-2-TRACE v1\n0 0 0 ln1 4 %s\r\n",
        "CIS-2-TRACE v1\n0 0 0 ln1 4 %s",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(path, "wb");
        fprintf(f, bad[i], h);
        fclose(f);
        err = (cis2_error){0};
        if (cis2_trace_load(&t, path, &err) != CIS2_E_FORMAT) fail_msg("bad trace %zu accepted", i);
        assert_null(t.rec);
    }
    unlink(path);
}

/* Writer -> reader round trip with values, and the dump hash check. */
static void test_trace_roundtrip(void **s)
{
    (void)s;
    char path[] = "/tmp/cis2_test_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    cis2_trace_writer *w;
    cis2_error err = {0};
    assert_int_equal(cis2_trace_open(&w, path, 1, &err), CIS2_OK);
    float a[3] = {1.0f, -2.5f, 0.0f}, b[2] = {3.0f, 4.0f};
    cis2_trace_record(w, 0, 5, 2, "gate", a, 3);
    cis2_trace_record(w, 1, 6, -1, "logits", b, 2);
    assert_int_equal(cis2_trace_close(w, &err), CIS2_OK);
    cis2_trace t;
    assert_int_equal(cis2_trace_load(&t, path, &err), CIS2_OK);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.dump, 1);
    uint8_t d[32];
    cis2_sha256(b, sizeof b, d);
    assert_memory_equal(t.rec[1].sha, d, 32);
    float *v;
    assert_int_equal(cis2_trace_values(&t, 1, &v, &err), CIS2_OK);
    assert_memory_equal(v, b, sizeof b);
    free(v);
    /* corrupt one value in the dump: the hash check catches it */
    char dp[64];
    snprintf(dp, sizeof dp, "%s.f32", path);
    FILE *f = fopen(dp, "r+b");
    fseek(f, 4, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    err = (cis2_error){0};
    assert_int_equal(cis2_trace_values(&t, 0, &v, &err), CIS2_E_FORMAT);
    assert_null(v);
    cis2_trace_free(&t);
    unlink(dp);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),      cmocka_unit_test(test_parse_edges),
        cmocka_unit_test(test_reject_header),   cmocka_unit_test(test_reject_keys),
        cmocka_unit_test(test_reject_layout),   cmocka_unit_test(test_reject_csv),
        cmocka_unit_test(test_reject_digests),  cmocka_unit_test(test_limits),
        cmocka_unit_test(test_trace_reader),    cmocka_unit_test(test_trace_roundtrip),
        cmocka_unit_test(test_prompt_from_ids), cmocka_unit_test(test_reject_prompt_from),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

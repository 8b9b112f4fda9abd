/*
 * test_tokenizer.c - the tokenizer (CIS-2 §3.1) on the real SmolLM2-135M
 * tokenizer.json: §3.1.7's worked example and every example of FACTS §2
 * (values from the spec and FACTS, observed there with the reference
 * library), decode, invalid UTF-8; and on small hand-made tokenizer.json
 * files: merge order, both merge spellings, Digits modes, and the
 * refusal of malformed/unsupported files with the right class.
 * The differential test against the oracle is tests/oracle/t_tokenizer_diff.sh.
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

#include "cis2_toolkit.h"
#include "nfc.h"
#include "pretok.h"
#include "tokenizer.h"

static cis2_tokenizer *real;
static char tmpdir[] = "/tmp/cis2-test-tok-XXXXXX";

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir)) return -1;
    const char *shared = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char path[1024];
    snprintf(path, sizeof path, "%s/models/smollm2-135m/tokenizer.json", shared);
    uint8_t d[32];
    char hex[65];
    cis2_error err = {0};
    if (cis2_sha256_file(path, d, &err)) return 0;          /* tests needing it skip */
    cis2_hex(d, 32, hex);
    if (strcmp(hex, "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c")) {
        fprintf(stderr, "%s: sha256 %s is not §3.1.1's\n", path, hex);
        return -1;
    }
    if (cis2_tokenizer_load(&real, path, &err)) {
        fprintf(stderr, "load: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cis2_tokenizer_free(real);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void expect_ids(const cis2_tokenizer *t, const char *text, size_t len, const uint32_t *want, size_t nwant)
{
    uint32_t *ids;
    size_t n;
    cis2_error err = {0};
    int rc = cis2_tokenizer_encode(t, text, len, &ids, &n, &err);
    if (rc) fprintf(stderr, "encode: %s\n", err.msg);
    assert_int_equal(rc, CIS2_OK);
    if (n != nwant) {
        fprintf(stderr, "got %zu ids:", n);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %u", ids[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
    free(ids);
}
#define EXPECT(t, text, ...) do { \
        const uint32_t w_[] = {__VA_ARGS__}; \
        expect_ids(t, text, sizeof(text) - 1, w_, sizeof w_ / sizeof w_[0]); } while (0)

#define NEED_REAL() do { if (!real) { fprintf(stderr, "SKIP: tokenizer.json missing\n"); skip(); } } while (0)

/* §3.1.7 / §3.3 */
static void worked_example(void **state)
{
    (void)state;
    NEED_REAL();
    EXPECT(real, "Once upon a time", 6403, 1980, 253, 655);
    assert_int_equal(cis2_tokenizer_vocab_size(real), 49152);
}

/* FACTS §2, each example. */
static void facts_examples(void **state)
{
    (void)state;
    NEED_REAL();
    EXPECT(real, "a\x04" "b", 81, 82);                          /* byte 0x04 has no token */
    EXPECT(real, "\xF1\x80\x80\x80z", 218, 218, 218, 106);      /* U+40000: 0xF1 dropped */
    EXPECT(real, "<|endoftext|>Hi", 0, 26843);
    EXPECT(real, "Hi<|im_start|>user", 26843, 1, 4093);
    EXPECT(real, "\xD9\xA3\xD9\xA4\xD9\xA5", 164, 113, 164, 114, 164, 115); /* ٣٤٥ */
    EXPECT(real, "\xC2\xB2\xC2\xB3", 19133, 39050);             /* ²³ */
    EXPECT(real, "  \n\n x", 256, 1116, 1792);
    uint32_t *ids;
    size_t n;
    cis2_error err = {0};
    assert_int_equal(cis2_tokenizer_encode(real, "", 0, &ids, &n, &err), CIS2_OK);
    assert_int_equal(n, 0);
    free(ids);
}

static void invalid_utf8(void **state)
{
    (void)state;
    NEED_REAL();
    static const char *const bad[] = {"\x80", "a\xC0\x80", "\xED\xA0\x80", "\xE2\x82", "\xF4\x90\x80\x80",
                                      "\xFF", "ok\xC3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t *ids = (uint32_t *)1;
        size_t n = 7;
        cis2_error err = {0};
        assert_int_equal(cis2_tokenizer_encode(real, bad[i], strlen(bad[i]), &ids, &n, &err), CIS2_E_FORMAT);
        assert_null(ids);
        assert_non_null(strstr(err.msg, "UTF-8"));
    }
}

static void decode(void **state)
{
    (void)state;
    NEED_REAL();
    const uint32_t once[] = {6403, 1980, 253, 655};
    char *s = cis2_tokenizer_decode(real, once, 4);
    assert_string_equal(s, "Once upon a time");
    free(s);
    /* 218 is byte 0x80 (FACTS §2): a lone continuation byte is one U+FFFD each. */
    const uint32_t cont[] = {218, 218, 106};
    s = cis2_tokenizer_decode(real, cont, 3);
    assert_string_equal(s, "\xEF\xBF\xBD\xEF\xBF\xBDz");
    free(s);
    /* Unknown ids are skipped; special tokens decode to their text. */
    const uint32_t mixed[] = {0, 4000000000u, 26843, 49152};
    s = cis2_tokenizer_decode(real, mixed, 4);
    assert_string_equal(s, "<|endoftext|>Hi");
    free(s);
    s = cis2_tokenizer_decode(real, NULL, 0);
    assert_string_equal(s, "");
    free(s);
}

/* §3.1.5.a */
static void byte_map(void **state)
{
    (void)state;
    assert_int_equal(cis2_byte_to_unicode(0x20), 0x120);
    assert_int_equal(cis2_byte_to_unicode(0x0A), 0x10A);
    assert_int_equal(cis2_byte_to_unicode(0x00), 0x100);
    assert_int_equal(cis2_byte_to_unicode('A'), 'A');
    assert_int_equal(cis2_byte_to_unicode(0xAD), 0x143);    /* the last of the 68 */
    uint8_t seen[324] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t u = cis2_byte_to_unicode((uint8_t)b);
        assert_true(u < 324);
        assert_int_equal(seen[u], 0);
        seen[u] = 1;
    }
}

/* ---- small hand-made tokenizer.json files ---- */
static const char *write_tmp(const char *name, const char *body)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    return path;
}

/* A minimal file: {"model": {...}, "pre_tokenizer": PRE} with given vocab/merges. */
static const char *mini(const char *name, const char *pre, const char *vocab, const char *merges, const char *extra)
{
    static char body[4096];
    snprintf(body, sizeof body,
             "{\"pre_tokenizer\": %s, %s \"model\": {\"type\": \"BPE\", "
             "\"vocab\": {%s}, \"merges\": [%s]}}", pre, extra ? extra : "", vocab, merges);
    return write_tmp(name, body);
}
#define BL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true}"

static cis2_tokenizer *load_ok(const char *path)
{
    cis2_tokenizer *t = NULL;
    cis2_error err = {0};
    int rc = cis2_tokenizer_load(&t, path, &err);
    if (rc) fprintf(stderr, "load %s: %s\n", path, err.msg);
    assert_int_equal(rc, CIS2_OK);
    return t;
}

/* §3.1.5.c by hand: the lowest rank merges first, whatever its position. */
static void merge_order(void **state)
{
    (void)state;
    const char *v = "\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"bc\": 4, \"abc\": 5, \"\\u0120\": 6, \"\\u0120a\": 7";
    cis2_tokenizer *t = load_ok(mini("m1.json", BL, v, "\"b c\", \"a b\", \"a bc\"", NULL));
    EXPECT(t, "abc", 5);          /* b c (rank 0), then a bc */
    EXPECT(t, "abab", 3, 3);
    EXPECT(t, "ab ab", 3, 6, 3);  /* " ab" -> Ġ a b: no Ġ a merge here */
    EXPECT(t, "abd", 3);          /* 'd' has no token: dropped */
    EXPECT(t, "adc", 0, 2);       /* dropped byte: a and c become adjacent (no a c merge) */
    cis2_tokenizer_free(t);
    t = load_ok(mini("m2.json", BL, v, "[\"a\", \"b\"], [\"\\u0120\", \"a\"], [\"b\", \"c\"]", NULL));
    EXPECT(t, "abc", 3, 2);       /* a b first; no "ab c" merge */
    EXPECT(t, "ab ab", 3, 6, 3);  /* in " ab", a b (rank 0) beats Ġ a (rank 1) */
    EXPECT(t, "adb", 3);          /* a b adjacent across the dropped 'd' */
    cis2_tokenizer_free(t);
}

static void digits_modes(void **state)
{
    (void)state;
    const char *v = "\"1\": 0, \"2\": 1, \"3\": 2, \"12\": 3, \"123\": 4";
    const char *m = "\"1 2\", \"12 3\"";
    cis2_tokenizer *t = load_ok(mini("d0.json", BL, v, m, NULL));
    EXPECT(t, "123", 4);
    cis2_tokenizer_free(t);
    t = load_ok(mini("d1.json", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                     "\"individual_digits\": true}, " BL "]}", v, m, NULL));
    EXPECT(t, "123", 0, 1, 2);
    cis2_tokenizer_free(t);
    t = load_ok(mini("d2.json", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                     "\"individual_digits\": false}, " BL "]}", v, m, NULL));
    EXPECT(t, "123", 4);
    cis2_tokenizer_free(t);
}

static void expect_refused(const char *name, const char *body, int code, const char *needle)
{
    cis2_tokenizer *t = (cis2_tokenizer *)1;
    cis2_error err = {0};
    int rc = cis2_tokenizer_load(&t, write_tmp(name, body), &err);
    if (rc != code || !strstr(err.msg, needle))
        fprintf(stderr, "%s: rc %d, msg '%s' (want %d, '%s')\n", name, rc, err.msg, code, needle);
    assert_int_equal(rc, code);
    assert_null(t);
    assert_non_null(strstr(err.msg, needle));
    assert_null(strchr(err.msg, '\n'));
}

#define MODEL(extra) "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, " \
                     "\"merges\": [\"a b\"]" extra "}"
#define GOOD_PRE "\"pre_tokenizer\": " BL

static void refusals(void **state)
{
    (void)state;
    /* malformed -> CIS2_E_FORMAT */
    expect_refused("f1.json", "{\"model\": ", CIS2_E_FORMAT, "malformed JSON");
    expect_refused("f2.json", "[1, 2]", CIS2_E_FORMAT, "not a JSON object");
    expect_refused("f3.json", "{" GOOD_PRE ", \"model\": {\"type\": \"BPE\", \"merges\": []}}", CIS2_E_FORMAT, "vocab");
    expect_refused("f4.json", "{" GOOD_PRE ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
                   "\"merges\": [\"a c\"]}}", CIS2_E_FORMAT, "merges[0]");
    expect_refused("f5.json", "{" GOOD_PRE ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}",
                   CIS2_E_FORMAT, "used twice");
    expect_refused("f6.json", "{" GOOD_PRE ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
                   "\"merges\": [\"a b\"]}}", CIS2_E_FORMAT, "merged token");
    expect_refused("f7.json", "{" GOOD_PRE ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}}}",
                   CIS2_E_FORMAT, "valid id");
    expect_refused("f8.json", "{" GOOD_PRE ", " MODEL("") ", \"model\": {}}", CIS2_E_FORMAT, "malformed JSON");
    expect_refused("f9.json", "{" GOOD_PRE ", " MODEL("") ", \"added_tokens\": [{\"id\": 5}]}", CIS2_E_FORMAT,
                   "added_tokens[0]");
    /* well-formed but unsupported -> CIS2_E_UNSUPPORTED, naming the field */
    /* (NFC, TemplateProcessing and a null pre_tokenizer are families' shapes that load
     * (docs/tokenizer.md "Which tokenizers"): test_tokenizer's qwen_load, t_tokenizer_families) */
    expect_refused("u1.json", "{\"normalizer\": {\"type\": \"NFKC\"}, " GOOD_PRE ", " MODEL("") "}",
                   CIS2_E_UNSUPPORTED, "normalizer");
    expect_refused("u2.json", "{" GOOD_PRE ", " MODEL(", \"dropout\": 0.1") "}", CIS2_E_UNSUPPORTED, "dropout");
    expect_refused("u3.json", "{" GOOD_PRE ", " MODEL(", \"byte_fallback\": true") "}", CIS2_E_UNSUPPORTED,
                   "byte_fallback");
    expect_refused("u4.json", "{" GOOD_PRE ", " MODEL(", \"continuing_subword_prefix\": \"##\"") "}",
                   CIS2_E_UNSUPPORTED, "continuing_subword_prefix");
    expect_refused("u5.json", "{" GOOD_PRE ", " MODEL(", \"end_of_word_suffix\": \"</w>\"") "}",
                   CIS2_E_UNSUPPORTED, "end_of_word_suffix");
    expect_refused("u6.json", "{" GOOD_PRE ", \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}",
                   CIS2_E_UNSUPPORTED, "WordPiece");
    expect_refused("u7.json", "{\"pre_tokenizer\": {\"type\": \"Whitespace\"}, " MODEL("") "}",
                   CIS2_E_UNSUPPORTED, "Whitespace");
    expect_refused("u8.json", "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true}, "
                   MODEL("") "}", CIS2_E_UNSUPPORTED, "add_prefix_space");
    expect_refused("u9.json", "{" GOOD_PRE ", \"decoder\": {\"type\": \"Metaspace\"}, " MODEL("") "}",
                   CIS2_E_UNSUPPORTED, "decoder");
    expect_refused("u10.json", "{" GOOD_PRE ", \"post_processor\": {\"type\": \"RobertaProcessing\"}, "
                   MODEL("") "}", CIS2_E_UNSUPPORTED, "post_processor");
    expect_refused("u11.json", "{" GOOD_PRE ", " MODEL(", \"unk_token\": \"<unk>\"") "}", CIS2_E_UNSUPPORTED,
                   "unk_token");
    expect_refused("u12.json", "{\"pre_tokenizer\": null, " MODEL("") "}", CIS2_E_UNSUPPORTED, "decoder");
    expect_refused("u13.json", "{" GOOD_PRE ", " MODEL("") ", \"added_tokens\": [{\"id\": 5, \"content\": "
                   "\"<x>\", \"lstrip\": true}]}", CIS2_E_UNSUPPORTED, "lstrip");
    expect_refused("u14.json", "{" GOOD_PRE ", \"truncation\": {\"max_length\": 8}, " MODEL("") "}",
                   CIS2_E_UNSUPPORTED, "truncation");
    /* a missing file is an I/O error */
    cis2_tokenizer *t;
    cis2_error err = {0};
    assert_int_equal(cis2_tokenizer_load(&t, "/nonexistent/tokenizer.json", &err), CIS2_E_IO);
}

/* Added tokens: leftmost, then longest; pieces between are pre-tokenized
 * apart.  Expected ids checked with the oracle on the same file. */
static void added_tokens(void **state)
{
    (void)state;
    cis2_tokenizer *t = load_ok(mini("a1.json", BL, "\"a\": 0, \"b\": 1, \"ab\": 2, \"<\": 3, \">\": 4", "\"a b\"",
        "\"added_tokens\": [{\"id\": 5, \"content\": \"<a\", \"special\": true}, "
        "{\"id\": 6, \"content\": \"<ab>\", \"special\": true}, {\"id\": 7, \"content\": \"b>\", \"special\": true}],"));
    EXPECT(t, "<ab>", 6);         /* longest at the leftmost start */
    EXPECT(t, "<a>", 5, 4);
    EXPECT(t, "ab>", 0, 7);       /* "b>" is matched before BPE sees "ab" */
    EXPECT(t, "a<ab>b", 0, 6, 1);
    assert_int_equal(cis2_tokenizer_vocab_size(t), 8);
    char *s = cis2_tokenizer_decode(t, (const uint32_t[]){6, 2}, 2);
    assert_string_equal(s, "<ab>ab");
    free(s);
    cis2_tokenizer_free(t);
    /* The reference renumbers added tokens (next id past the vocab): a file
     * declaring other ids is refused, not silently renumbered. */
    expect_refused("a2.json", "{" GOOD_PRE ", " MODEL("") ", \"added_tokens\": [{\"id\": 10, \"content\": "
                   "\"<x>\", \"special\": true}]}", CIS2_E_FORMAT, "assigns it 3");
    t = load_ok(write_tmp("a3.json", "{" GOOD_PRE ", " MODEL("") ", \"added_tokens\": [{\"id\": 2, \"content\": "
                          "\"ab\", \"special\": true}, {\"id\": 3, \"content\": \"<x>\", \"special\": true}]}"));
    cis2_tokenizer_free(t);
}

/* ---- NON-NORMATIVE Qwen2.5 extension (outside CIS-2 v0.3b §3) ---- */

static void expect_nfc(const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(cis2_nfc(in, strlen(in), &out, &n), 0);
    const char *got = out ? out : in;
    if (n != strlen(want) || memcmp(got, want, n)) {
        fprintf(stderr, "NFC of");
        for (const char *p = in; *p; p++) fprintf(stderr, " %02x", (unsigned char)*p);
        fprintf(stderr, ": got");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02x", (unsigned char)got[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, strlen(want));
    assert_memory_equal(got, want, n);
    free(out);
}

/* NFC by the definitions of UAX #15 (and its examples). */
static void nfc_cases(void **state)
{
    (void)state;
    char *out = (char *)1;
    size_t n;
    assert_int_equal(cis2_nfc("abc \xc3\xa9", 6, &out, &n), 0);      /* nothing >= U+0300: as is */
    assert_null(out);
    expect_nfc("e\xcc\x81", "\xc3\xa9");                               /* e U+0301 -> U+00E9 */
    expect_nfc("\xc3\xa9", "\xc3\xa9");
    expect_nfc("a\xcc\x81\xcc\xa3", "\xe1\xba\xa1\xcc\x81");           /* reordered: U+1EA1 U+0301 */
    expect_nfc("a\xcc\xa3\xcc\x81", "\xe1\xba\xa1\xcc\x81");
    expect_nfc("\xc3\x85\xcc\xa8", "\xc4\x84\xcc\x8a");                /* U+00C5 U+0328 -> U+0104 U+030A */
    expect_nfc("\xe2\x84\xab", "\xc3\x85");                            /* singleton U+212B -> U+00C5 */
    expect_nfc("\xe1\xba\x9b\xcc\xa3", "\xe1\xba\x9b\xcc\xa3");        /* UAX #15 example: U+1E9B U+0323 */
    expect_nfc("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc");            /* exclusion U+0958 */
    expect_nfc("\xcd\x84", "\xcc\x88\xcc\x81");                        /* non-starter decomposition U+0344 */
    expect_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"); /* Hangul L V T -> U+AC01 */
    expect_nfc("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81");            /* LV T */
    expect_nfc("\xea\xb0\x81\xe1\x86\xa8", "\xea\xb0\x81\xe1\x86\xa8"); /* LVT T: no */
    expect_nfc("\xe1\x84\x80\xcc\x81\xe1\x85\xa1", "\xe1\x84\x80\xcc\x81\xe1\x85\xa1"); /* blocked */
    expect_nfc("\xcc\x81" "a", "\xcc\x81" "a");                         /* leading non-starter */
    /* U+07FD (ccc 220 since Unicode 11.0) is ccc 0 in the reference's
     * Unicode 9.0 data, so it blocks (checked against the oracle). */
    expect_nfc("a\xdf\xbd\xcc\x81", "a\xdf\xbd\xcc\x81");
    /* A long run of marks (the counting sort): a, 100 x (U+0301 U+0323)
     * -> U+1EA1, 99 x U+0323, 100 x U+0301. */
    char in[1 + 400 + 1], want[3 + 198 + 200 + 1];
    size_t k = 0, w = 0;
    in[k++] = 'a';
    for (int i = 0; i < 100; i++) { memcpy(in + k, "\xcc\x81\xcc\xa3", 4); k += 4; }
    in[k] = 0;
    memcpy(want, "\xe1\xba\xa1", 3); w = 3;
    for (int i = 0; i < 99; i++) { memcpy(want + w, "\xcc\xa3", 2); w += 2; }
    for (int i = 0; i < 100; i++) { memcpy(want + w, "\xcc\x81", 2); w += 2; }
    want[w] = 0;
    expect_nfc(in, want);
}

typedef struct { char buf[512]; size_t n; } pieces;
static int collect(void *ctx, const char *s, size_t len)
{
    pieces *p = ctx;
    memcpy(p->buf + p->n, s, len); p->n += len;
    p->buf[p->n++] = '|';
    p->buf[p->n] = 0;
    return 0;
}
static void expect_split(const char *in, const char *want)
{
    pieces p = {.n = 0};
    cis2_pretok_split_qwen(in, strlen(in), collect, &p);
    if (strcmp(p.buf, want)) fprintf(stderr, "split: got '%s', want '%s'\n", p.buf, want);
    assert_string_equal(p.buf, want);
}

/* The families' pre-tokenizers (non-normative, docs/tokenizer.md), by hand
 * from the regex \p{N}{1,3} (greedy, at most three) and from
 * MergedWithPrevious (a delimiter joins the piece before it, unless that is
 * a delimiter); t_tokenizer_families checks them against the oracle. */
static void family_split(void **state)
{
    (void)state;
    pieces p = {.n = 0};
    const char *in = "12345 x1234567";
    cis2_pretok_split_llama3(in, strlen(in), collect, &p);
    assert_string_equal(p.buf, "123|45| x|123|456|7|");
    p.n = 0;
    in = "\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6!";             /* Arabic-Indic 3456: \p{N} */
    cis2_pretok_split_llama3(in, strlen(in), collect, &p);
    assert_string_equal(p.buf, "\xd9\xa3\xd9\xa4\xd9\xa5|\xd9\xa6|!|");
    p.n = 0;
    in = "a  b c ";
    cis2_pretok_split_literal(in, strlen(in), " ", 1, collect, &p);
    assert_string_equal(p.buf, "a | |b |c |");
    p.n = 0;
    in = "  ab";
    cis2_pretok_split_literal(in, strlen(in), " ", 1, collect, &p);
    assert_string_equal(p.buf, " | |ab|");
}

/* The Split regex, derived by hand from Oniguruma's leftmost-first,
 * greedy-with-backtracking semantics (and agreeing with the oracle). */
static void qwen_split(void **state)
{
    (void)state;
    expect_split("Hello world", "Hello| world|");
    expect_split("I'M here", "I|'M| here|");
    expect_split("'LLama", "'LL|ama|");
    expect_split("'\xc5\xbf" "a", "'\xc5\xbf|a|");            /* U+017F folds to s */
    expect_split("  \n\n x", "  \n\n| x|");                     /* \s*[\r\n]+ */
    expect_split(" \t\n\r y", " \t\n\r| y|");
    expect_split("a   b", "a|  | b|");                          /* \s+(?!\S) */
    expect_split("x \r\n\t z", "x| \r\n|\t| z|");
    expect_split("\t\t!", "\t|\t|!|");
    expect_split("123", "1|2|3|");                              /* \p{N} alone */
    expect_split("x.\r\n\r\ny", "x|.\r\n\r\n|y|");              /* symbols take the CR/LF run */
    expect_split("$$abc", "$$|abc|");
    expect_split("(abc", "(abc|");
    expect_split(" !", " !|");
    expect_split("a \n", "a| \n|");
}

/* gpt-oss's o200k pattern (docs/tokenizer.md "The o200k pattern"), by hand
 * from the same semantics (and agreeing with the oracle's pre-tokenizer):
 * A*B+ backtracks to the last Lm/Lo/mark of an uppercase run, A+B* takes
 * an uppercase run, the contraction goes with the letters before it. */
static void expect_o200k(const char *in, const char *want)
{
    pieces p = {.n = 0};
    cis2_pretok_split_o200k(in, strlen(in), collect, &p);
    if (strcmp(p.buf, want)) fprintf(stderr, "o200k split: got '%s', want '%s'\n", p.buf, want);
    assert_string_equal(p.buf, want);
}
static void o200k_split(void **state)
{
    (void)state;
    expect_o200k("Hello world", "Hello| world|");
    expect_o200k("DON'T don't Don'T", "DON'T| don't| Don'T|");
    expect_o200k("I'M here", "I'M| here|");
    expect_o200k("x'\xc5\xbf", "x'\xc5\xbf|");                     /* U+017F folds to s */
    expect_o200k("l'\xc3\xa9t\xc3\xa9", "l|'\xc3\xa9t\xc3\xa9|");       /* l'été: 'é is no contraction */
    expect_o200k("A'B'c", "A|'B|'c|");
    expect_o200k("camelCase", "camel|Case|");
    expect_o200k("XMLHttpRequest", "XMLHttp|Request|");
    expect_o200k("\xca\xb0" "AB.", "\xca\xb0|AB|.|");                /* ʰ (Lm): B+ takes it back */
    expect_o200k("\xca\xb0" "Ab", "\xca\xb0" "Ab|");
    expect_o200k("E\xcc\x81" "COLE", "E\xcc\x81|COLE|");             /* a mark is in A and B */
    expect_o200k(" +\xcc\x81x", " +\xcc\x81|x|");                    /* ... and not \p{L} */
    expect_o200k("\xc7\x85ungla", "\xc7\x85ungla|");                  /* ǅ (Lt) */
    expect_o200k("12345", "123|45|");
    expect_o200k("a/b\n/\nc", "a|/b|\n|/\n|c|");                     /* [\r\n/]* */
    expect_o200k("x.\r\n/\r\ny", "x|.\r\n/\r\n|y|");
    expect_o200k("\nabc", "\n|abc|");                                /* CR/LF is no prefix */
    expect_o200k("\tabc", "\tabc|");
    expect_o200k("a   b", "a|  | b|");
    expect_o200k("x  \n\n y", "x|  \n\n| y|");
}

#define QWEN_PRE "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": " \
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+" \
    "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, " \
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": %s}]}"

static int load_flags(const char *path, unsigned flags, cis2_tokenizer **t, cis2_error *err)
{
    *t = NULL;
    *err = (cis2_error){0};                 /* the first recorded error wins */
    return cis2_tokenizer_load_ext(t, path, flags, err);
}

/* Qwen2.5's shape loads without the flag (the flag is a no-op: docs/tokenizer.md),
 * is marked non-normative, and encodes the same with and without it. */
static void qwen_load(void **state)
{
    (void)state;
    char pre[1024], body[2048];
    const char *vocab = "\"e\": 0, \"\\u00c3\": 1, \"\\u00a9\": 2, \"\\u00c3\\u00a9\": 3, \"\\u00cc\": 4, "
                        "\"\\u0123\": 5, \"\\u0124\": 6, \"\\u0120\": 7, \"\\u0120e\": 8";
    snprintf(pre, sizeof pre, QWEN_PRE, "false");
    snprintf(body, sizeof body, "{\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": %s, \"model\": {\"type\": "
             "\"BPE\", \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"vocab\": {%s}, "
             "\"merges\": [\"\\u00c3 \\u00a9\", \"\\u0120 e\"]}}", pre, vocab);
    const char *path = write_tmp("q1.json", body);
    cis2_tokenizer *t;
    cis2_error err = {0};
    assert_int_equal(load_flags(path, 0, &t, &err), CIS2_OK);
    assert_int_equal(cis2_tokenizer_is_normative(t), 0);
    EXPECT(t, "e\xcc\x81", 3);          /* NFC first: U+00E9 = C3 A9, merged */
    EXPECT(t, "\xc3\xa9 e", 3, 8);      /* Split: "é", " e" */
    cis2_tokenizer_free(t);
    assert_int_equal(load_flags(path, CIS2_TOK_ALLOW_NONNORMATIVE, &t, &err), CIS2_OK);
    EXPECT(t, "e\xcc\x81", 3);
    EXPECT(t, "\xc3\xa9 e", 3, 8);
    cis2_tokenizer_free(t);
    /* Split without NFC: loads without the flag too */
    snprintf(body, sizeof body, "{\"pre_tokenizer\": %s, \"model\": {\"type\": \"BPE\", \"vocab\": {%s}, "
             "\"merges\": []}}", pre, vocab);
    path = write_tmp("q2.json", body);
    assert_int_equal(load_flags(path, 0, &t, &err), CIS2_OK);
    EXPECT(t, "e\xcc\x81", 0, 4, 5);    /* no NFC: e, CC 81 (U+0301 -> CC -> 0xCC, 0x81 -> U+0123) */
    cis2_tokenizer_free(t);
    assert_int_equal(load_flags(path, CIS2_TOK_ALLOW_NONNORMATIVE, &t, &err), CIS2_OK);
    EXPECT(t, "e\xcc\x81", 0, 4, 5);
    cis2_tokenizer_free(t);
    /* Split then ByteLevel with its regex, another regex, another normalizer:
     * refused, with the flag too. */
    snprintf(pre, sizeof pre, QWEN_PRE, "true");
    snprintf(body, sizeof body, "{\"pre_tokenizer\": %s, \"model\": {\"type\": \"BPE\", \"vocab\": {%s}}}", pre, vocab);
    assert_int_equal(load_flags(write_tmp("q3.json", body), CIS2_TOK_ALLOW_NONNORMATIVE, &t, &err),
                     CIS2_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "use_regex=false"));
    assert_int_equal(load_flags(write_tmp("q4.json", "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
                     "[{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": \"Isolated\", "
                     "\"invert\": false}, " BL "]}, " MODEL("") "}"), CIS2_TOK_ALLOW_NONNORMATIVE, &t, &err),
                     CIS2_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "Split"));
    assert_int_equal(load_flags(write_tmp("q5.json", "{\"normalizer\": {\"type\": \"NFKC\"}, " GOOD_PRE ", "
                     MODEL("") "}"), CIS2_TOK_ALLOW_NONNORMATIVE, &t, &err), CIS2_E_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "NFKC"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(worked_example), cmocka_unit_test(facts_examples), cmocka_unit_test(invalid_utf8),
        cmocka_unit_test(decode),         cmocka_unit_test(byte_map),       cmocka_unit_test(merge_order),
        cmocka_unit_test(digits_modes),   cmocka_unit_test(refusals),       cmocka_unit_test(added_tokens),
        cmocka_unit_test(nfc_cases),      cmocka_unit_test(qwen_split),     cmocka_unit_test(o200k_split),     cmocka_unit_test(family_split),     cmocka_unit_test(qwen_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

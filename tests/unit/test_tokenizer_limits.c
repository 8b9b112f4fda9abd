/*
 * test_tokenizer_limits.c - the tokenizer's work and memory bounds
 * (src/tokenizer_load.c and src/tokenizer.c; docs/inputs.md
 * "tokenizer.json", "Prompts"):
 *   - 100,000 added tokens load in well under a second (was 52 s: a
 *     quadratic duplicate check and next-id scan);
 *   - 100 KB of '<' with 20,000 added tokens, and with 2,000 tokens that
 *     are long runs of '<' ending in another byte (the worst case of a
 *     forward leftmost search), encode fast (was 18 s);
 *   - cis2_tokenizer_encode_max: the ids of every text up to its limit are
 *     encode's; past it CIS2_E_USAGE, and a 100 MB prompt (one line, or one
 *     single word) is refused at once; through a normalizer too (Llama-2's
 *     shape), before the normalizer copies it (tokenizer.md "Normalizers");
 *   - the limits on added tokens (count, bytes) and on the file's JSON cost;
 *   - added-token matching equals a plain leftmost-longest search on 300
 *     random sets of overlapping tokens (both normalized groups) and texts;
 *   - NFC segments: no composition pair has a second character below
 *     U+0300 (the segment rule's premise), and NFC of a long mixed text
 *     equals NFC of its pieces cut at safe starters.
 * The exactness of added-token matching against the reference is
 * tests/cli/t_tokenizer_added.sh (overlapping tokens, the npm oracle).
 * Timing bounds (CPU time of the test's thread) are checked on native
 * x86-64 builds without sanitizers (qemu and ASan are many times slower);
 * the work is done everywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cis2_toolkit.h"
#include "nfc.h"
#include "synth.h"
#include "tokenizer.h"
#include "tables/unicode_nfc.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define TIMED 1
#else
#define TIMED 0
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#undef TIMED
#define TIMED 0
#endif
#endif

/* This thread's CPU time: the bound holds on a busy machine too. */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The minimal byte-level tokenizer (ids 0..255 are the bytes) plus
 * `n` added tokens content(i) with the ids the reference assigns. */
static char *with_added(size_t n, void (*content)(size_t i, char *out), int special)
{
    char *base = cis2_synth_min_tokenizer_json();
    json_error_t je;
    json_t *root = json_loads(base, 0, &je);
    free(base);
    assert_non_null(root);
    json_t *arr = json_array();
    char c[4096];
    for (size_t i = 0; i < n; i++) {
        content(i, c);
        json_array_append_new(arr, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)(256 + i),
                                             "content", c, "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized",
                                             !special, "special", special));
    }
    json_object_set_new(root, "added_tokens", arr);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static cis2_tokenizer *load_mem(const char *json)
{
    cis2_tokenizer *t;
    cis2_error e = {0};
    int rc = cis2_tokenizer_load_mem(&t, json, strlen(json), "mem.json", 0, &e);
    if (rc) fail_msg("load: %s", e.msg);
    return t;
}

static void tok_name(size_t i, char *out) { sprintf(out, "<tok_%zu>", i); }
static void lt_run(size_t i, char *out) /* "<" x (i+1), then "x" */
{
    memset(out, '<', i + 1);
    out[i + 1] = 'x';
    out[i + 2] = 0;
}

static void added_100k_load(void **s)
{
    (void)s;
    char *js = with_added(100000, tok_name, 1);
    double t0 = now();
    cis2_tokenizer *t = load_mem(js);
    double dt = now() - t0;
    fprintf(stderr, "100000 added tokens: loaded in %.3f s\n", dt);
    if (TIMED && dt > 1.0) fail_msg("100k added tokens took %.2f s to load (want well under 1 s)", dt);
    assert_int_equal(cis2_tokenizer_vocab_size(t), 256 + 100000);
    /* and they match: the longest at the leftmost start */
    uint32_t *ids;
    size_t n;
    cis2_error e = {0};
    const char *text = "a<tok_99999>b<tok_1><tok_10>";
    assert_int_equal(cis2_tokenizer_encode(t, text, strlen(text), &ids, &n, &e), CIS2_OK);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 'a');
    assert_int_equal(ids[1], 256 + 99999);
    assert_int_equal(ids[2], 'b');
    assert_int_equal(ids[3], 256 + 1);
    assert_int_equal(ids[4], 256 + 10);
    free(ids);
    cis2_tokenizer_free(t);
    free(js);
}

static void encode_lt_fast(void **s)
{
    (void)s;
    size_t n = 100000;
    char *text = malloc(n + 1);
    memset(text, '<', n);
    text[n] = 0;
    static const struct { size_t ntok; void (*content)(size_t, char *); } cases[] = {
        {20000, tok_name}, /* the case that once took seconds: every position starts 20k candidates */
        {2000, lt_run},    /* runs of '<' that never end in the text: a forward search rescans each */
    };
    for (size_t c = 0; c < 2; c++) {
        char *js = with_added(cases[c].ntok, cases[c].content, 0);
        cis2_tokenizer *t = load_mem(js);
        uint32_t *ids;
        size_t k;
        cis2_error e = {0};
        double t0 = now();
        assert_int_equal(cis2_tokenizer_encode(t, text, n, &ids, &k, &e), CIS2_OK);
        double dt = now() - t0;
        fprintf(stderr, "100 KB of '<' with %zu added tokens: encoded in %.3f s\n", cases[c].ntok, dt);
        if (TIMED && dt > 0.5) fail_msg("encode took %.2f s", dt);
        assert_int_equal(k, n); /* no token matches: one byte token each */
        free(ids);
        /* and with the matches there: a run of 2000 '<' then 'x' is the longest token */
        if (c == 1) {
            char *t2 = malloc(3000);
            memset(t2, '<', 2500);
            t2[2500] = 'x';
            assert_int_equal(cis2_tokenizer_encode(t, t2, 2501, &ids, &k, &e), CIS2_OK);
            assert_int_equal(k, 501);            /* 500 single '<', then the 2000-'<' token */
            assert_int_equal(ids[0], '<');
            assert_int_equal(ids[500], 256 + 1999);
            free(ids);
            free(t2);
        }
        cis2_tokenizer_free(t);
        free(js);
    }
    free(text);
}

static void encode_max_limit(void **s)
{
    (void)s;
    const char *shared = getenv("SHARED") ? getenv("SHARED") : "../shared";
    char path[1024];
    snprintf(path, sizeof path, "%s/models/smollm2-135m/tokenizer.json", shared);
    cis2_tokenizer *t;
    cis2_error e = {0};
    if (cis2_tokenizer_load(&t, path, &e)) { /* the minimal tokenizer instead */
        char *js = cis2_synth_min_tokenizer_json();
        t = load_mem(js);
        free(js);
    }
    const char *text = "Once upon a time, there were 12345 tokens <|im_start|> and more text.";
    uint32_t *ids, *ids2;
    size_t n, n2;
    assert_int_equal(cis2_tokenizer_encode(t, text, strlen(text), &ids, &n, &e), CIS2_OK);
    for (size_t lim = n; lim <= n + 2; lim++) { /* at or above the count: encode's ids */
        assert_int_equal(cis2_tokenizer_encode_max(t, text, strlen(text), lim, &ids2, &n2, &e), CIS2_OK);
        assert_int_equal(n2, n);
        assert_memory_equal(ids2, ids, n * sizeof *ids);
        free(ids2);
    }
    for (size_t lim = 0; lim < n; lim++) {
        cis2_error e2 = {0};
        assert_int_equal(cis2_tokenizer_encode_max(t, text, strlen(text), lim, &ids2, &n2, &e2), CIS2_E_USAGE);
        char want[64];
        snprintf(want, sizeof want, "prompt is longer than %zu tokens", lim);
        assert_non_null(strstr(e2.msg, want));
        assert_null(ids2);
    }
    free(ids);
    /* 100 MB: words and spaces, then one single word: refused at once */
    size_t big = (size_t)100 << 20;
    char *b = malloc(big);
    for (size_t i = 0; i < big; i++) b[i] = i % 6 == 5 ? ' ' : 'a' + (char)(i % 5);
    for (int k = 0; k < 2; k++) {
        if (k == 1) memset(b, 'a', big);
        cis2_error e3 = {0};
        double t0 = now();
        assert_int_equal(cis2_tokenizer_encode_max(t, b, big, 8192, &ids2, &n2, &e3), CIS2_E_USAGE);
        double dt = now() - t0;
        fprintf(stderr, "100 MB prompt (%s) refused in %.3f s: %s\n", k ? "one word" : "words", dt, e3.msg);
        if (TIMED && dt > 1.0) fail_msg("refusing a 100 MB prompt took %.2f s", dt);
    }
    free(b);
    cis2_tokenizer_free(t);
}

/* A SentencePiece-style tokenizer of Llama-2's shape: normalizer
 * Prepend("▁") + Replace(" ", "▁"), byte_fallback with every byte, the
 * letters a-e and "▁" in the vocab, no merges. */
static char *sp_llama2_json(void)
{
    json_t *vocab = json_object();
    json_object_set_new(vocab, "\xe2\x96\x81", json_integer(0));
    for (int i = 0; i < 5; i++) {
        char c[2] = {(char)('a' + i), 0};
        json_object_set_new(vocab, c, json_integer(1 + i));
    }
    for (int b = 0; b < 256; b++) {
        char c[8];
        snprintf(c, sizeof c, "<0x%02X>", b);
        json_object_set_new(vocab, c, json_integer(6 + b));
    }
    json_t *root = json_pack(
        "{s:n, s:n, s:[], s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}, s:n, s:n,"
        " s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]},"
        " s:{s:s, s:o, s:[], s:b}}",
        "truncation", "padding", "added_tokens",
        "normalizer", "type", "Sequence", "normalizers", "type", "Prepend", "prepend", "\xe2\x96\x81",
        "type", "Replace", "pattern", "String", " ", "content", "\xe2\x96\x81",
        "pre_tokenizer", "post_processor",
        "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String", "\xe2\x96\x81", "content", " ",
        "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1, "stop", 0,
        "model", "type", "BPE", "vocab", vocab, "merges", "byte_fallback", 1);
    assert_non_null(root);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* encode_max with a normalizer (tokenizer.md "Normalizers"): a piece too
 * long for the room left is refused before the normalizer copies it (a
 * 100 MB prompt of "a a a ..." was first normalized into 200 MB, then
 * refused), and below the limit the ids are encode's. */
static void encode_max_normalizer(void **s)
{
    (void)s;
    char *js = sp_llama2_json();
    cis2_tokenizer *t = load_mem(js);
    free(js);
    const char *text = "ab c  de";
    uint32_t *ids, *ids2;
    size_t n, n2;
    cis2_error e = {0};
    assert_int_equal(cis2_tokenizer_encode(t, text, strlen(text), &ids, &n, &e), CIS2_OK);
    assert_int_equal(n, 9);    /* "▁ab▁c▁▁de", no merges: one id a character */
    for (size_t lim = 0; lim <= n + 1; lim++) {
        cis2_error e2 = {0};
        int rc = cis2_tokenizer_encode_max(t, text, strlen(text), lim, &ids2, &n2, &e2);
        if (lim < n) { assert_int_equal(rc, CIS2_E_USAGE); continue; }
        assert_int_equal(rc, CIS2_OK);
        assert_int_equal(n2, n);
        assert_memory_equal(ids2, ids, n * sizeof *ids);
        free(ids2);
    }
    free(ids);
    size_t big = (size_t)100 << 20;
    char *b = malloc(big);
    assert_non_null(b);
    for (size_t i = 0; i < big; i++) b[i] = i % 2 ? ' ' : 'a';
    long rss0 = maxrss_kb();
    double t0 = now();
    cis2_error e3 = {0};
    assert_int_equal(cis2_tokenizer_encode_max(t, b, big, 8192, &ids2, &n2, &e3), CIS2_E_USAGE);
    double dt = now() - t0;
    long grew = maxrss_kb() - rss0;
    fprintf(stderr, "100 MB prompt through a normalizer refused in %.3f s, peak RSS +%ld KB: %s\n", dt, grew, e3.msg);
    assert_non_null(strstr(e3.msg, "prompt is longer than 8192 tokens"));
    if (grew > 32 << 10) fail_msg("refusing a 100 MB prompt grew the peak RSS by %ld KB (normalized first?)", grew);
    if (TIMED && dt > 0.5) fail_msg("refusing a 100 MB prompt took %.2f s", dt);
    free(b);
    cis2_tokenizer_free(t);
}

static void big(size_t i, char *out) /* 4000 bytes each */
{
    sprintf(out, "<%zu>", i);
    size_t l = strlen(out);
    memset(out + l, 'z', 4000 - l);
    out[4000] = 0;
}

static void added_limits(void **s)
{
    (void)s;
    /* more than CIS2_TOK_MAX_ADDED_BYTES of content (2200 x 4000 bytes) */
    char *js = with_added(2200, big, 1);
    cis2_tokenizer *t;
    cis2_error e = {0};
    assert_int_equal(cis2_tokenizer_load_mem(&t, js, strlen(js), "mem.json", 0, &e), CIS2_E_FORMAT);
    assert_non_null(strstr(e.msg, "bytes of content"));
    free(js);
    /* a file whose JSON would cost too much: 20 M empty objects in 60 MB */
    size_t n = 20000000, k = 0;
    char *b = malloc(3 * n + 64);
    k += (size_t)sprintf(b, "{\"x\":[");
    for (size_t i = 0; i < n; i++) { if (i) b[k++] = ','; b[k++] = '{'; b[k++] = '}'; }
    b[k++] = ']';
    b[k++] = '}';
    e = (cis2_error){0};
    assert_int_equal(cis2_tokenizer_load_mem(&t, b, k, "cost.json", 0, &e), CIS2_E_FORMAT);
    assert_non_null(strstr(e.msg, "its JSON would take about"));
    free(b);
}

/* Added-token matching against a plain leftmost-longest search (the
 * reference's semantics: normalized=false tokens first, then normalized=true
 * ones in the pieces between; each remaining byte is its own token in the
 * minimal tokenizer): random small-alphabet tokens that overlap in every
 * way, random texts, some long enough to cross the automaton's windows. */
static unsigned rng = 12345;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5;
    return rng % n;
}
typedef struct { char s[8]; size_t len; int normalized; } rtok;
static rtok toks[40];
static size_t ntoks;

static size_t naive(const char *s, size_t n, int group, uint32_t *out, size_t k)
{
    size_t i = 0, seg = 0;
    while (i < n) {
        size_t best = SIZE_MAX;
        for (size_t j = 0; j < ntoks; j++)
            if (toks[j].normalized == group && toks[j].len <= n - i && !memcmp(toks[j].s, s + i, toks[j].len) &&
                (best == SIZE_MAX || toks[j].len > toks[best].len))
                best = j;
        if (best == SIZE_MAX) { i++; continue; }
        if (group == 0) k = naive(s + seg, i - seg, 1, out, k);
        else for (size_t b = seg; b < i; b++) out[k++] = (unsigned char)s[b];
        out[k++] = 256 + (uint32_t)best;
        i += toks[best].len;
        seg = i;
    }
    if (group == 0) return naive(s + seg, n - seg, 1, out, k);
    for (size_t b = seg; b < n; b++) out[k++] = (unsigned char)s[b];
    return k;
}

static void added_vs_naive(void **s)
{
    (void)s;
    static const char alpha[] = "ab<>";
    char *text = malloc(20000);
    uint32_t *want = malloc(20000 * sizeof *want);
    for (int trial = 0; trial < 300; trial++) {
        ntoks = 1 + rnd(30);
        for (size_t i = 0; i < ntoks; i++) {
            for (;;) { /* unique contents */
                toks[i].len = 1 + rnd(trial % 3 ? 4 : 7);
                for (size_t c = 0; c < toks[i].len; c++) toks[i].s[c] = alpha[rnd(4)];
                toks[i].s[toks[i].len] = 0;
                size_t j = 0;
                while (j < i && strcmp(toks[j].s, toks[i].s)) j++;
                if (j == i) break;
            }
            toks[i].normalized = (int)rnd(2);
        }
        /* ids: the minimal vocab has a one-byte token for each of "ab<>": a
         * content of one such byte keeps that id (the reference's rule), so
         * keep contents of two or more bytes only */
        size_t m = 0;
        for (size_t i = 0; i < ntoks; i++) if (toks[i].len > 1) toks[m++] = toks[i];
        ntoks = m;
        if (!ntoks) continue;
        char *js = NULL;
        {
            char *base = cis2_synth_min_tokenizer_json();
            json_error_t je;
            json_t *root = json_loads(base, 0, &je);
            free(base);
            json_t *arr = json_array();
            for (size_t i = 0; i < ntoks; i++)
                json_array_append_new(arr, json_pack("{s:I, s:s, s:b, s:b}", "id", (json_int_t)(256 + i), "content",
                                                     toks[i].s, "normalized", toks[i].normalized, "special",
                                                     !toks[i].normalized));
            json_object_set_new(root, "added_tokens", arr);
            js = json_dumps(root, JSON_COMPACT);
            json_decref(root);
        }
        cis2_tokenizer *t = load_mem(js);
        for (int r = 0; r < 5; r++) {
            size_t n = r == 4 ? 9000 + rnd(3000) : rnd(200);
            for (size_t i = 0; i < n; i++) text[i] = alpha[rnd(4)];
            size_t k = naive(text, n, 0, want, 0);
            uint32_t *ids;
            size_t got;
            cis2_error e = {0};
            assert_int_equal(cis2_tokenizer_encode(t, text, n, &ids, &got, &e), CIS2_OK);
            if (got != k || (k && memcmp(ids, want, k * sizeof *ids))) {
                size_t d = 0;
                while (d < k && d < got && ids[d] == want[d]) d++;
                fail_msg("trial %d: %zu ids, want %zu; first difference at %zu", trial, got, k, d);
            }
            free(ids);
        }
        cis2_tokenizer_free(t);
        free(js);
    }
    free(text);
    free(want);
}

/* The NFC segment rule's premise, and exactness on a long text. */
static void nfc_segments(void **s)
{
    (void)s;
    for (size_t i = 0; i < CIS2_NFC_NCOMP; i++) assert_true(cis2_nfc_comp[i].b >= CIS2_NFC_QUICK_BELOW);
    /* a text of many pieces normalized as a whole equals the pieces normalized
     * one by one when each piece starts with a code point below U+0300 */
    static const char *const pieces[] = {"e\xcc\x81", "A\xcc\x8a\xcc\xa3", "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8",
                                         "x\xcc\xa3\xcc\x87", "q", " \xcc\x81", "\xc3\xa9\xcc\x81", "o\xcc\x88"};
    size_t np = sizeof pieces / sizeof pieces[0];
    char *whole = malloc(200000), *cat = malloc(600000);
    size_t wl = 0, cl = 0;
    unsigned st = 1;
    for (int r = 0; r < 20000; r++) {
        st = st * 1103515245u + 12345u;
        const char *p = pieces[(st >> 16) % np];
        size_t l = strlen(p);
        memcpy(whole + wl, p, l);
        wl += l;
        char *o;
        size_t ol;
        assert_int_equal(cis2_nfc(p, l, &o, &ol), 0);
        memcpy(cat + cl, o ? o : p, o ? ol : l);
        cl += o ? ol : l;
        free(o);
    }
    char *o;
    size_t ol;
    assert_int_equal(cis2_nfc(whole, wl, &o, &ol), 0);
    assert_non_null(o);
    assert_int_equal(ol, cl);
    assert_memory_equal(o, cat, cl);
    free(o);
    free(whole);
    free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(added_100k_load), cmocka_unit_test(encode_lt_fast), cmocka_unit_test(encode_max_limit),
        cmocka_unit_test(encode_max_normalizer),
        cmocka_unit_test(added_limits),    cmocka_unit_test(added_vs_naive), cmocka_unit_test(nfc_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

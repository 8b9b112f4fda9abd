/*
 * fuzz_tokenizer_load.c - libFuzzer target for the tokenizer.json loader
 * (src/tokenizer_load.c cis2_tokenizer_load and, with the non-normative
 * extension flag, cis2_tokenizer_load_ext; the input is the whole file).
 *
 * The extension admits a superset, so whatever the plain loader accepts it
 * must accept too.  A tokenizer that loads is exercised a little: a fixed
 * text and the input itself are encoded, every id must be below the vocab
 * size, the ids decode, and encode_max agrees with encode.
 */
#include "fuzz_util.h"
#include "tokenizer.h"

/* Encodes text: ids below the vocab size, they decode, and
 * cis2_tokenizer_encode_max agrees (the same ids at the count, "longer
 * than" one below it). */
static void encode_one(const cis2_tokenizer *t, const char *text, size_t len)
{
    uint32_t *ids = NULL, *ids2 = NULL;
    size_t n = 0, n2 = 0;
    cis2_error e = {0};
    int rc = cis2_tokenizer_encode(t, text, len, &ids, &n, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) {
        size_t V = cis2_tokenizer_vocab_size(t);
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= V) abort();
        free(cis2_tokenizer_decode(t, ids, n));
        cis2_error e2 = {0};
        if (cis2_tokenizer_encode_max(t, text, len, n, &ids2, &n2, &e2) != CIS2_OK || n2 != n ||
            (n && memcmp(ids, ids2, n * sizeof *ids)))
            abort();
        free(ids2);
        if (n) {
            cis2_error e3 = {0};
            if (cis2_tokenizer_encode_max(t, text, len, n - 1, &ids2, &n2, &e3) != CIS2_E_USAGE) abort();
        }
    }
    free(ids);
}

/* A tokenizer that loads is exercised a little: a fixed text, and the
 * input itself (so its added tokens' contents occur in the text, in every
 * overlap the fuzzer finds). */
static void exercise(const cis2_tokenizer *t, const uint8_t *data, size_t size)
{
    static const char text[] = "Once upon a time, 12345 caf\xc3\xa9 <|endoftext|>  \n\tx\xe2\x80\x99s";
    encode_one(t, text, sizeof text - 1);
    encode_one(t, (const char *)data, size); /* invalid UTF-8: refused, checked by fuzz_check_error */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_as_file(data, size);
    cis2_tokenizer *t = NULL, *x = NULL;
    cis2_error e = {0}, ex = {0};
    int rc = cis2_tokenizer_load(&t, path, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) exercise(t, data, size);
    int rcx = cis2_tokenizer_load_ext(&x, path, CIS2_TOK_ALLOW_NONNORMATIVE, &ex);
    fuzz_check_error(rcx, &ex);
    if (rc == CIS2_OK && rcx != CIS2_OK) {
        fprintf(stderr, "the plain loader accepts what the extension refuses: %s\n", ex.msg);
        abort();
    }
    if (rcx == CIS2_OK) exercise(x, data, size);
    cis2_tokenizer_free(t);
    cis2_tokenizer_free(x);
    return 0;
}

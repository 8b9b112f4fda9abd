/*
 * fuzz_tokenizer_load.c - libFuzzer target for the tokenizer.json loader
 * (src/tokenizer.c cis2_tokenizer_load and, with the non-normative
 * extension flag, cis2_tokenizer_load_ext; the input is the whole file).
 *
 * The extension admits a superset, so whatever the plain loader accepts it
 * must accept too.  A tokenizer that loads is exercised a little: a fixed
 * text is encoded, every id it yields must be below the vocab size, and the
 * ids decode.
 */
#include "fuzz_util.h"

static void exercise(const cis2_tokenizer *t)
{
    static const char text[] = "Once upon a time, 12345 caf\xc3\xa9 <|endoftext|>  \n\tx\xe2\x80\x99s";
    uint32_t *ids = NULL;
    size_t n = 0;
    cis2_error e = {0};
    int rc = cis2_tokenizer_encode(t, text, sizeof text - 1, &ids, &n, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) {
        size_t V = cis2_tokenizer_vocab_size(t);
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= V) abort();
        free(cis2_tokenizer_decode(t, ids, n));
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_as_file(data, size);
    cis2_tokenizer *t = NULL, *x = NULL;
    cis2_error e = {0}, ex = {0};
    int rc = cis2_tokenizer_load(&t, path, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) exercise(t);
    int rcx = cis2_tokenizer_load_ext(&x, path, CIS2_TOK_ALLOW_NONNORMATIVE, &ex);
    fuzz_check_error(rcx, &ex);
    if (rc == CIS2_OK && rcx != CIS2_OK) {
        fprintf(stderr, "the plain loader accepts what the extension refuses: %s\n", ex.msg);
        abort();
    }
    if (rcx == CIS2_OK) exercise(x);
    cis2_tokenizer_free(t);
    cis2_tokenizer_free(x);
    return 0;
}

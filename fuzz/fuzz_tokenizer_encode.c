/*
 * fuzz_tokenizer_encode.c - libFuzzer target for encode on arbitrary bytes
 * (src/tokenizer.c + src/pretok.c) with the real SmolLM2-135M tokenizer.
 *
 * The tokenizer is loaded once: $CIS2_FUZZ_TOKENIZER, else
 * $SHARED/models/smollm2-135m/tokenizer.json, else
 * ../shared/models/smollm2-135m/tokenizer.json (run from the repo root).
 * Invalid UTF-8 must be refused as CIS2_E_FORMAT; valid text must encode,
 * every id must be in the vocab, and decode(encode(text)) must give the
 * text back byte for byte (SmolLM2's vocab holds every byte, no normalizer).
 */
#include "fuzz_util.h"

#include "tokenizer.h"

static cis2_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    char buf[4096];
    const char *path = getenv("CIS2_FUZZ_TOKENIZER");
    if (!path) {
        const char *shared = getenv("SHARED");
        snprintf(buf, sizeof buf, "%s/models/smollm2-135m/tokenizer.json", shared ? shared : "../shared");
        path = buf;
    }
    cis2_error e = {0};
    if (cis2_tokenizer_load(&tok, path, &e)) {
        fprintf(stderr, "fuzz_tokenizer_encode: %s (set CIS2_FUZZ_TOKENIZER)\n", e.msg);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    cis2_error e = {0};
    int rc = cis2_tokenizer_encode(tok, (const char *)data, size, &ids, &n, &e);
    fuzz_check_error(rc, &e);
    if (rc != CIS2_OK && rc != CIS2_E_FORMAT) abort(); /* only invalid UTF-8 is refused */
    if (rc == CIS2_OK) {
        size_t V = cis2_tokenizer_vocab_size(tok);
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= V) abort();
        size_t dl = 0;
        char *d = cis2_tokenizer_decode_n(tok, ids, n, &dl);
        if (!d || dl != size || memcmp(d, data, size) != 0) {
            fprintf(stderr, "decode(encode(x)) != x (%zu bytes in, %zu out)\n", size, dl);
            abort();
        }
        free(d);
    }
    free(ids);
    return 0;
}

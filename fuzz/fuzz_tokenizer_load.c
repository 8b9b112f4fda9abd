/*
 * fuzz_tokenizer_load.c - libFuzzer target for the tokenizer.json loader
 * (src/tokenizer.c cis2_tokenizer_load; the input is the whole file).
 *
 * A tokenizer that loads is exercised a little: a fixed text is encoded,
 * every id it yields must be below the vocab size, and the ids decode.
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_as_file(data, size);
    cis2_tokenizer *t = NULL;
    cis2_error e = {0};
    int rc = cis2_tokenizer_load(&t, path, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) {
        static const char text[] = "Once upon a time, 12345 caf\xc3\xa9 <|endoftext|>  \n\tx";
        uint32_t *ids = NULL;
        size_t n = 0;
        cis2_error e2 = {0};
        int rc2 = cis2_tokenizer_encode(t, text, sizeof text - 1, &ids, &n, &e2);
        fuzz_check_error(rc2, &e2);
        if (rc2 == CIS2_OK) {
            size_t V = cis2_tokenizer_vocab_size(t);
            for (size_t i = 0; i < n; i++)
                if (ids[i] >= V) abort();
            free(cis2_tokenizer_decode(t, ids, n));
        }
        free(ids);
    }
    cis2_tokenizer_free(t);
    return 0;
}

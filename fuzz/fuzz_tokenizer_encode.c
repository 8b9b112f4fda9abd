/*
 * fuzz_tokenizer_encode.c - libFuzzer target for encode on arbitrary bytes
 * (src/tokenizer.c + src/pretok.c) with the real SmolLM2-135M tokenizer.
 *
 * The tokenizer is loaded once: $CIS2_FUZZ_TOKENIZER, else
 * $SHARED/models/smollm2-135m/tokenizer.json, else
 * ../shared/models/smollm2-135m/tokenizer.json (run from the repo root).
 * Invalid UTF-8 must be refused as CIS2_E_FORMAT; valid text must encode,
 * every id must be in the vocab, and the ids' bytes concatenated must give
 * the text back byte for byte, less the bytes that have no single-byte
 * token (FACTS §2: those are dropped; SmolLM2 lacks a few bytes).
 */
#include "fuzz_util.h"

#include "tokenizer.h"

static cis2_tokenizer *tok;
static unsigned char have_byte[256]; /* 1 if some id decodes to exactly that byte */

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
    for (size_t id = 0; id < cis2_tokenizer_vocab_size(tok); id++) {
        size_t len = 0;
        const char *b = cis2_tokenizer_token_bytes(tok, (uint32_t)id, &len);
        if (b && len == 1) have_byte[(unsigned char)b[0]] = 1;
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
        unsigned char *want = malloc(size ? size : 1);
        size_t wl = 0;
        for (size_t i = 0; i < size; i++)
            if (have_byte[data[i]]) want[wl++] = data[i];
        /* the ids' raw bytes (decode proper renders invalid UTF-8, which
         * dropping a byte can leave, as U+FFFD) */
        size_t dl = 0;
        for (size_t i = 0; i < n; i++) {
            size_t tl = 0;
            const char *tb = cis2_tokenizer_token_bytes(tok, ids[i], &tl);
            if (!tb || tl > wl - dl || memcmp(tb, want + dl, tl) != 0) {
                fprintf(stderr, "the bytes of id %u (index %zu) are not the input's next bytes\n", ids[i], i);
                abort();
            }
            dl += tl;
        }
        if (dl != wl) {
            fprintf(stderr, "the ids give %zu bytes, the input less its tokenless bytes %zu\n", dl, wl);
            abort();
        }
        free(want);
        free(cis2_tokenizer_decode(tok, ids, n)); /* display decode must not fail */
    }
    free(ids);
    return 0;
}

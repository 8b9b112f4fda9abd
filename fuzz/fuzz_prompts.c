/*
 * fuzz_prompts.c - libFuzzer target for prompt files (src/prompts.c
 * cis2_prompts_load: a JSON array of strings or one prompt per line; the
 * input is the whole file).
 *
 * A file that loads yields 1..max prompts, none empty and none holding a
 * NUL, each lying inside the input (line form) or a JSON string; loading
 * it with max one below the count is a format error, not a truncation.
 */
#include "fuzz_util.h"

#define FUZZ_PROMPTS_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_as_file(data, size);
    cis2_prompts *p = NULL;
    cis2_error e = {0};
    int rc = cis2_prompts_load(path, FUZZ_PROMPTS_MAX, &p, &e);
    fuzz_check_error(rc, &e);
    if (rc != CIS2_OK) {
        if (p) abort();
        return 0;
    }
    if (!p || p->n == 0 || p->n > FUZZ_PROMPTS_MAX) abort();
    size_t total = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (!p->text[i] || p->len[i] == 0 || memchr(p->text[i], '\0', p->len[i])) abort();
        total += p->len[i];
    }
    if (total > size) abort(); /* every prompt comes from the input's bytes */
    size_t n = p->n;
    cis2_prompts_free(p);
    if (n > 1) {
        cis2_prompts *q = NULL;
        cis2_error e2 = {0};
        int rc2 = cis2_prompts_load(path, n - 1, &q, &e2);
        fuzz_check_error(rc2, &e2);
        if (rc2 == CIS2_OK || q) abort();
    }
    return 0;
}

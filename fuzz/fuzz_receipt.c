/*
 * fuzz_receipt.c - libFuzzer target for the CIS-2-RECEIPT v1 parser
 * (src/receipt.c cis2_receipt_parse_into on the raw bytes).
 *
 * A receipt that parses must render back to exactly the input bytes (the
 * format is strict: one spelling per receipt), and copy/equal must agree.
 */
#include "fuzz_util.h"

#include "receipt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cis2_receipt r;
    cis2_error e = {0};
    int rc = cis2_receipt_parse_into((const char *)data, size, "fuzz-receipt", &r, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) {
        char *out = NULL;
        size_t len = 0;
        cis2_error e2 = {0};
        if (cis2_receipt_render(&r, &out, &len, &e2) != CIS2_OK) {
            fprintf(stderr, "a parsed receipt does not render: %s\n", e2.msg);
            abort();
        }
        if (len != size || memcmp(out, data, size) != 0) {
            fprintf(stderr, "render(parse(x)) != x\n");
            abort();
        }
        free(out);
        cis2_receipt c;
        cis2_error e3 = {0};
        if (cis2_receipt_copy_into(&c, &r, &e3) != CIS2_OK) abort();
        if (!cis2_receipt_equal(&c, &r)) abort();
        cis2_receipt_clear(&c);
    }
    cis2_receipt_clear(&r);
    return 0;
}

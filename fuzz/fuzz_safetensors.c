/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors loader
 * (src/safetensors.c: header length, header JSON, dtype/shape/offset
 * validation, tiling of the data area).
 *
 * The input is the whole file.  On success every tensor the table lists
 * must lie inside the data area read into memory and its bytes are read
 * (ASan catches an out-of-bounds pointer), the data area must be tiled in
 * `order`, and each tensor is found again by name.
 */
#include "fuzz_util.h"

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_as_file(data, size);
    cis2_st_file f;
    cis2_error e = {0};
    int rc = cis2_st_open(&f, path, NULL, &e);
    fuzz_check_error(rc, &e);
    if (rc == CIS2_OK) {
        const uint8_t *lo = f.data, *hi = lo + f.data_len;
        if (f.file_size != 8 + f.header_len + f.data_len) abort();
        uint64_t pos = 0;
        for (size_t i = 0; i < f.n; i++) {
            const cis2_st_tensor *t = &f.t[f.order[i]];
            if (t->offset != pos) abort();
            pos += t->nbytes;
        }
        if (pos != f.data_len) abort();
        for (size_t i = 0; i < f.n; i++) {
            const cis2_st_tensor *t = &f.t[i];
            if (t->data < lo || t->data > hi || t->nbytes > (uint64_t)(hi - t->data)) abort();
            if (t->nbytes != cis2_st_numel(t) * cis2_st_dtype_size(t->dtype)) abort();
            if (cis2_st_find(&f, t->name) != t) abort();
            float v[8];
            uint64_t n = cis2_st_numel(t);
            cis2_st_read_f32(t, 0, n < 8 ? n : 8, v);             /* first elements */
            if (n) cis2_st_read_f32(t, n - 1, 1, v);               /* last element */
        }
    }
    cis2_st_close(&f);
    return 0;
}

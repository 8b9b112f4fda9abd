/*
 * test_safetensors.c - the safetensors loader (src/safetensors.c): valid
 * files (odd data offsets, zero-size and scalar tensors, §4.1 widening bits),
 * one test per rejected input, the read-once stream (docs/inputs.md: a file that
 * shrinks, grows or is a FIFO is a clean error; the sha256 covers exactly
 * the bytes read), and a cis2 synth checkpoint read back with the §2.5 names
 * and shapes listed here independently.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "synth.h"

static char dir[64];
static char path[512];

static int setup_dir(void **s)
{
    (void)s;
    strcpy(dir, "/tmp/cis2_test_st_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown_dir(void **s)
{
    (void)s;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_raw(const char *name, const void *p, size_t n)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
    return path;
}

/* 8-byte LE header length (hlen_override if nonzero), header, data. */
static const char *write_st_len(const char *name, uint64_t hlen_override, const char *hdr, const void *data,
                                size_t dlen)
{
    size_t hl = strlen(hdr);
    uint64_t v = hlen_override ? hlen_override : hl;
    uint8_t *buf = malloc(8 + hl + dlen + 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(v >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    if (dlen) memcpy(buf + 8 + hl, data, dlen);
    const char *p = write_raw(name, buf, 8 + hl + dlen);
    free(buf);
    return p;
}

static const char *write_st(const char *name, const char *hdr, const void *data, size_t dlen)
{
    return write_st_len(name, 0, hdr, data, dlen);
}

static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static void expect_reject(const char *p, int code, const char *substr)
{
    cis2_st_file f;
    cis2_error e = {0};
    int rc = cis2_st_open(&f, p, NULL, &e);
    if (rc != code || !strstr(e.msg, substr) || !strstr(e.msg, p))
        fail_msg("rc=%d (want %d) msg='%s' (want '%s' and the path)", rc, code, e.msg, substr);
    assert_null(f.data);
    assert_int_equal(f.n, 0);
    cis2_st_close(&f);
}

static const uint8_t data6[12] = {0x80, 0x3F, 0x49, 0xC0, 0x01, 0x00, 0xFF, 0x7F, 0x00, 0x80, 0xA0, 0x40};

/* ---- F16 (docs/inputs.md "Weight dtypes"): widened exactly to f32 ---- */

/* Expected binary32 bits from an independent route: numpy 1.24's
 * np.array(h, np.uint16).view(np.float16).astype(np.float32) (Debian's
 * python3-numpy): zeros, subnormals (normal binary32s), normals, the
 * largest finite, infinities, and NaNs, a signalling one included, whose
 * payload (and quiet bit) numpy keeps as they are. */
static const struct { uint16_t h; uint32_t f; } F16_NUMPY[] = {
    {0x0000, 0x00000000}, {0x8000, 0x80000000}, {0x0001, 0x33800000}, {0x8001, 0xB3800000},
    {0x0002, 0x34000000}, {0x0155, 0x37AA8000}, {0x0200, 0x38000000}, {0x03FF, 0x387FC000},
    {0x0400, 0x38800000}, {0x3555, 0x3EAAA000}, {0x3C00, 0x3F800000}, {0xBC00, 0xBF800000},
    {0x3C01, 0x3F802000}, {0x7BFF, 0x477FE000}, {0xFBFF, 0xC77FE000}, {0x7C00, 0x7F800000},
    {0xFC00, 0xFF800000}, {0x7C01, 0x7F802000}, {0x7D55, 0x7FAAA000}, {0x7E00, 0x7FC00000},
    {0xFE00, 0xFFC00000}, {0x7FFF, 0x7FFFE000}, {0xFFFF, 0xFFFFE000},
};
#define N_F16 (sizeof F16_NUMPY / sizeof F16_NUMPY[0])

/* An F16 tensor at an odd offset beside a BF16 one, read through the file. */
static void valid_f16(void **s)
{
    (void)s;
    uint8_t data[2 + 2 * N_F16];
    data[0] = 0x80; data[1] = 0x3F; /* BF16 1.0 */
    for (size_t i = 0; i < N_F16; i++) {
        data[2 + 2 * i] = (uint8_t)F16_NUMPY[i].h;
        data[3 + 2 * i] = (uint8_t)(F16_NUMPY[i].h >> 8);
    }
    char hdr[256];
    snprintf(hdr, sizeof hdr,
             "{\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},"
             "\"h\":{\"dtype\":\"F16\",\"shape\":[%zu],\"data_offsets\":[2,%zu]}} ", N_F16, 2 + 2 * N_F16);
    const char *p = write_st("f16.st", hdr, data, sizeof data);
    cis2_st_file f;
    cis2_error e = {0};
    if (cis2_st_open(&f, p, NULL, &e)) fail_msg("%s", e.msg);
    const cis2_st_tensor *h = cis2_st_find(&f, "h");
    assert_non_null(h);
    assert_int_equal(h->dtype, CIS2_ST_F16);
    assert_int_equal(h->nbytes, 2 * N_F16);
    assert_int_equal(cis2_st_dtype_size(CIS2_ST_F16), 2);
    float out[N_F16];
    cis2_st_read_f32(h, 0, N_F16, out);
    for (size_t i = 0; i < N_F16; i++)
        if (bits(out[i]) != F16_NUMPY[i].f)
            fail_msg("f16 %04X -> %08X, numpy %08X", F16_NUMPY[i].h, bits(out[i]), F16_NUMPY[i].f);
    cis2_st_close(&f);
}

/* Every one of the 65536 binary16 patterns: finite ones against their value
 * computed arithmetically ((-1)^s x m x 2^-24, or (1024 + m) x 2^(e-25),
 * exact in a double and in a binary32), the rest (exponent 31) against the
 * rule numpy follows in the table above (sign, all-ones exponent, the 10
 * mantissa bits at the top of the 23). */
static void f16_exhaustive(void **s)
{
    (void)s;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t sign = h >> 15, e = (h >> 10) & 31, m = h & 1023, want;
        if (e == 31) {
            want = sign << 31 | 0x7F800000u | m << 13;
        } else {
            double p2 = 0x1p-24; /* 2^-24 x 2^(max(e, 1) - 1), exact */
            for (uint32_t k = 1; k < e; k++) p2 *= 2;
            double v = (double)(e ? 1024 + m : m) * p2;
            float f = (float)(sign ? -v : v); /* exact: |v| >= 2^-24 is a normal binary32, or 0 */
            want = bits(f);
        }
        uint32_t got = cis2_f16_to_f32_bits((uint16_t)h);
        if (got != want) fail_msg("f16 %04X -> %08X, want %08X", h, got, want);
    }
    for (size_t i = 0; i < N_F16; i++) assert_int_equal(cis2_f16_to_f32_bits(F16_NUMPY[i].h), F16_NUMPY[i].f);
}

/* ---- valid files ---- */

static void valid_basic(void **s)
{
    (void)s;
    /* b: BF16 [2,3] (12 bytes) at 0; a: F32 [2] at 12 (8 bytes). */
    uint8_t data[20];
    memcpy(data, data6, 12);
    const uint8_t f32[8] = {0x00, 0x00, 0x80, 0x3F, 0xDB, 0x0F, 0x49, 0xC0}; /* 1.0f, -pi */
    memcpy(data + 12, f32, 8);
    const char *p = write_st("basic.st",
                             "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                             "\"__metadata__\":{\"format\":\"pt\"},"
                             "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
                             data, sizeof data);
    cis2_st_file f;
    cis2_error e = {0};
    assert_int_equal(cis2_st_open(&f, p, NULL, &e), CIS2_OK);
    assert_int_equal(f.n, 2);
    assert_string_equal(f.t[0].name, "a"); /* sorted by name */
    const cis2_st_tensor *b = cis2_st_find(&f, "b"), *a = cis2_st_find(&f, "a");
    assert_non_null(a);
    assert_non_null(b);
    assert_null(cis2_st_find(&f, "c"));
    assert_null(cis2_st_find(&f, "__metadata__"));
    assert_int_equal(b->dtype, CIS2_ST_BF16);
    assert_int_equal(b->ndim, 2);
    assert_int_equal(b->shape[0], 2);
    assert_int_equal(b->shape[1], 3);
    assert_int_equal(b->nbytes, 12);
    assert_int_equal(cis2_st_numel(b), 6);
    float out[6];
    cis2_st_read_f32(b, 0, 6, out);
    /* §4.1: the bf16 pattern (little-endian bytes) becomes the top 16 bits */
    const uint32_t want[6] = {0x3F800000, 0xC0490000, 0x00010000, 0x7FFF0000, 0x80000000, 0x40A00000};
    for (int i = 0; i < 6; i++) assert_int_equal(bits(out[i]), want[i]);
    cis2_st_read_f32(b, 4, 2, out);
    assert_int_equal(bits(out[0]), 0x80000000);
    assert_int_equal(bits(out[1]), 0x40A00000);
    float fa[2];
    cis2_st_read_f32(a, 0, 2, fa);
    assert_int_equal(bits(fa[0]), 0x3F800000);
    assert_int_equal(bits(fa[1]), 0xC0490FDB);
    /* out of range reads are zero-filled, never past the tensor */
    float tail[3] = {1, 1, 1};
    cis2_st_read_f32(a, 1, 3, tail);
    assert_int_equal(bits(tail[0]), 0xC0490FDB);
    assert_int_equal(bits(tail[1]), 0);
    assert_int_equal(bits(tail[2]), 0);
    /* cis2_st_expect */
    assert_ptr_equal(cis2_st_expect(&f, "b", 2, 2, 3, &e), b);
    assert_ptr_equal(cis2_st_expect(&f, "a", 1, 2, 0, &e), a);
    assert_null(cis2_st_expect(&f, "b", 2, 3, 2, &e));
    assert_non_null(strstr(e.msg, "[2, 3], expected [3, 2]"));
    cis2_error e2 = {0};
    assert_null(cis2_st_expect(&f, "zz", 1, 2, 0, &e2));
    assert_non_null(strstr(e2.msg, "missing tensor 'zz'"));
    cis2_st_close(&f);
    assert_null(f.data);
    cis2_st_close(&f); /* idempotent */
}

static void valid_odd_offset(void **s)
{
    (void)s;
    /* Header of odd length: the data area starts at an odd byte, so every
     * BF16 and F32 element is misaligned. */
    char hdr[256];
    snprintf(hdr, sizeof hdr,
             "{\"w\":{\"dtype\":\"BF16\",\"shape\":[6],\"data_offsets\":[0,12]},"
             "\"x\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[12,16]}}");
    if (strlen(hdr) % 2 == 0) strcat(hdr, " ");
    uint8_t data[16];
    memcpy(data, data6, 12);
    const uint8_t f32[4] = {0x01, 0x00, 0x80, 0x00}; /* 0x00800001 */
    memcpy(data + 12, f32, 4);
    const char *p = write_st("odd.st", hdr, data, sizeof data);
    cis2_st_file f;
    cis2_error e = {0};
    assert_int_equal(cis2_st_open(&f, p, NULL, &e), CIS2_OK);
    const cis2_st_tensor *w = cis2_st_find(&f, "w"), *x = cis2_st_find(&f, "x");
    assert_int_equal((uintptr_t)w->data % 2, 1);
    assert_int_equal(w->offset, 0);
    assert_int_equal(f.header_len, strlen(hdr));
    float out[6];
    cis2_st_read_f32(w, 0, 6, out);
    assert_int_equal(bits(out[0]), 0x3F800000);
    assert_int_equal(bits(out[5]), 0x40A00000);
    cis2_st_read_f32(w, 3, 1, out);
    assert_int_equal(bits(out[0]), 0x7FFF0000);
    cis2_st_read_f32(x, 0, 1, out);
    assert_int_equal(bits(out[0]), 0x00800001);
    assert_int_equal(x->ndim, 2);
    cis2_st_close(&f);
}

static void valid_scalar_empty_padding(void **s)
{
    (void)s;
    /* ndim 0 (one element), a zero-size tensor, trailing space padding. */
    const uint8_t d[2] = {0x80, 0x3F};
    const char *p = write_st("scal.st",
                             "{\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,2]},"
                             "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[2,2]}}     ",
                             d, 2);
    cis2_st_file f;
    cis2_error e = {0};
    assert_int_equal(cis2_st_open(&f, p, NULL, &e), CIS2_OK);
    const cis2_st_tensor *t = cis2_st_find(&f, "s");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(cis2_st_numel(t), 1);
    float v;
    cis2_st_read_f32(t, 0, 1, &v);
    assert_int_equal(bits(v), 0x3F800000);
    assert_int_equal(cis2_st_numel(cis2_st_find(&f, "z")), 0);
    cis2_st_close(&f);
    /* an empty header object with no data is a valid (empty) file */
    p = write_st("empty.st", "{}", NULL, 0);
    assert_int_equal(cis2_st_open(&f, p, NULL, &e), CIS2_OK);
    assert_int_equal(f.n, 0);
    cis2_st_close(&f);
}

/* ---- one test per rejected input ---- */

#define T(name) "\"" name "\""
#define BF(name, shape, b, e) T(name) ":{\"dtype\":\"BF16\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static uint8_t zeros[64];

static void rej_short_file(void **s)
{
    (void)s;
    expect_reject(write_raw("empty", "", 0), CIS2_E_FORMAT, "shorter than");
    expect_reject(write_raw("seven", "\x02\0\0\0\0\0\0", 7), CIS2_E_FORMAT, "shorter than");
}
static void rej_missing_file(void **s)
{
    (void)s;
    snprintf(path, sizeof path, "%s/does-not-exist", dir);
    expect_reject(path, CIS2_E_IO, "cannot open");
}
static void rej_header_past_end(void **s)
{
    (void)s;
    expect_reject(write_st_len("past", 1000, "{}", NULL, 0), CIS2_E_FORMAT, "past the end");
    expect_reject(write_st_len("huge", UINT64_MAX, "{}", NULL, 0), CIS2_E_FORMAT, "limit");
}
static void rej_header_over_100mb(void **s)
{
    (void)s;
    expect_reject(write_st_len("big", 100000001, "{}", NULL, 0), CIS2_E_FORMAT, "exceeds the 100000000-byte limit");
}
static void rej_bad_json(void **s)
{
    (void)s;
    expect_reject(write_st("badjson", "{\"a\":", NULL, 0), CIS2_E_FORMAT, "not valid JSON");
    expect_reject(write_st("utf8", "{\"\xff\":1}", NULL, 0), CIS2_E_FORMAT, "not valid JSON");
    expect_reject(write_st("trail", "{} x", NULL, 0), CIS2_E_FORMAT, "not valid JSON");
}
static void rej_not_object(void **s)
{
    (void)s;
    expect_reject(write_st("arr", "[1,2]", NULL, 0), CIS2_E_FORMAT, "not a JSON object");
}
static void rej_missing_dtype(void **s)
{
    (void)s;
    expect_reject(write_st("nodt", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,2]}}", zeros, 2), CIS2_E_FORMAT,
                  "tensor 'w': missing dtype");
}
static void rej_missing_shape(void **s)
{
    (void)s;
    expect_reject(write_st("nosh", "{\"w\":{\"dtype\":\"BF16\",\"data_offsets\":[0,2]}}", zeros, 2), CIS2_E_FORMAT,
                  "tensor 'w': missing shape");
}
static void rej_missing_offsets(void **s)
{
    (void)s;
    expect_reject(write_st("nooff", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[1]}}", zeros, 2), CIS2_E_FORMAT,
                  "tensor 'w': missing data_offsets");
}
static void rej_unknown_dtype(void **s)
{
    (void)s;
    expect_reject(write_st("i16", "{\"w16\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[0,2]}}", zeros, 2),
                  CIS2_E_UNSUPPORTED, "tensor 'w16': dtype 'I16' not supported (only BF16, F16, F32 and U8)");
    expect_reject(write_st("f64", "{\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", zeros, 8),
                  CIS2_E_UNSUPPORTED, "tensor 'd': dtype 'F64' not supported");
    expect_reject(write_st("f8", "{\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", zeros, 2),
                  CIS2_E_UNSUPPORTED, "tensor 'q': dtype 'F8_E4M3'");
    expect_reject(write_st("i8", "{\"q\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", zeros, 2),
                  CIS2_E_UNSUPPORTED, "tensor 'q': dtype 'I8'");
    expect_reject(write_st("dtnum", "{\"q\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,2]}}", zeros, 2),
                  CIS2_E_FORMAT, "dtype is not a string");
}
static void rej_size_mismatch(void **s)
{
    (void)s;
    expect_reject(write_st("mism", "{" BF("w", "[2,3]", 0, 10) "}", zeros, 10), CIS2_E_FORMAT,
                  "shape needs 12 bytes but data_offsets span 10");
    expect_reject(write_st("mism32", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,6]}}", zeros, 6),
                  CIS2_E_FORMAT, "shape needs 12 bytes");
}
static void rej_shape_overflow(void **s)
{
    (void)s;
    expect_reject(write_st("ovf", "{" BF("w", "[4294967296,4294967296,2]", 0, 2) "}", zeros, 2), CIS2_E_FORMAT,
                  "shape product overflows");
    /* numel fits in u64 but numel * 2 does not */
    expect_reject(write_st("ovf2", "{" BF("w", "[4611686018427387904,4]", 0, 2) "}", zeros, 2), CIS2_E_FORMAT,
                  "overflows");
}
static void rej_bad_shape(void **s)
{
    (void)s;
    expect_reject(write_st("neg", "{" BF("w", "[-1]", 0, 2) "}", zeros, 2), CIS2_E_FORMAT, "shape[0]");
    expect_reject(write_st("flt", "{" BF("w", "[1.0]", 0, 2) "}", zeros, 2), CIS2_E_FORMAT, "shape[0]");
    expect_reject(write_st("str", "{" BF("w", "\"1\"", 0, 2) "}", zeros, 2), CIS2_E_FORMAT, "shape is not an array");
    expect_reject(write_st("rank5", "{" BF("w", "[1,1,1,1,1]", 0, 2) "}", zeros, 2), CIS2_E_UNSUPPORTED, "rank 5");
}
static void rej_offsets_outside(void **s)
{
    (void)s;
    expect_reject(write_st("outside", "{" BF("w", "[2]", 0, 4) "}", zeros, 2), CIS2_E_FORMAT,
                  "beyond the data area");
    expect_reject(write_st("offneg", "{" BF("w", "[1]", -2, 0) "}", zeros, 2), CIS2_E_FORMAT, "non-negative");
    expect_reject(write_st("off3", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2,4]}}", zeros, 2),
                  CIS2_E_FORMAT, "[begin, end] pair");
}
static void rej_begin_after_end(void **s)
{
    (void)s;
    expect_reject(write_st("rev", "{" BF("w", "[0]", 2, 0) "}", zeros, 2), CIS2_E_FORMAT, "begin 2 > end 0");
}
static void rej_overlap(void **s)
{
    (void)s;
    expect_reject(write_st("ovl", "{" BF("a", "[2]", 0, 4) "," BF("b", "[2]", 2, 6) "}", zeros, 6), CIS2_E_FORMAT,
                  "overlaps");
    expect_reject(write_st("same", "{" BF("a", "[2]", 0, 4) "," BF("b", "[2]", 0, 4) "}", zeros, 4), CIS2_E_FORMAT,
                  "overlaps");
}
static void rej_hole(void **s)
{
    (void)s;
    expect_reject(write_st("hole", "{" BF("a", "[1]", 0, 2) "," BF("b", "[1]", 4, 6) "}", zeros, 6), CIS2_E_FORMAT,
                  "hole in the data area at bytes [2, 4)");
    expect_reject(write_st("holestart", "{" BF("a", "[1]", 2, 4) "}", zeros, 4), CIS2_E_FORMAT, "hole");
    expect_reject(write_st("holeend", "{" BF("a", "[1]", 0, 2) "}", zeros, 5), CIS2_E_FORMAT,
                  "3 bytes after the last tensor");
}
static void rej_duplicate_name(void **s)
{
    (void)s;
    expect_reject(write_st("dup", "{" BF("a", "[1]", 0, 2) "," BF("a", "[1]", 2, 4) "}", zeros, 4), CIS2_E_FORMAT,
                  "duplicate");
}
static void rej_metadata(void **s)
{
    (void)s;
    expect_reject(write_st("md1", "{\"__metadata__\":[1]}", NULL, 0), CIS2_E_FORMAT, "__metadata__ is not an object");
    expect_reject(write_st("md2", "{\"__metadata__\":{\"k\":1}}", NULL, 0), CIS2_E_FORMAT,
                  "__metadata__ value 'k' is not a string");
}
static void rej_entry_shape(void **s)
{
    (void)s;
    expect_reject(write_st("notobj", "{\"w\":[1]}", NULL, 0), CIS2_E_FORMAT, "entry is not an object");
    expect_reject(write_st("extra", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2],\"x\":1}}", zeros, 2),
                  CIS2_E_FORMAT, "unknown key 'x'");
}

/* ---- a synthetic checkpoint, names/shapes per §2.5 listed independently ---- */

static void check_synth(const char *shape, uint64_t H, uint64_t I, int L, uint64_t KV, uint64_t V, int bias,
                        int untied, int odd)
{
    char out[256];
    snprintf(out, sizeof out, "%s/synth-%s", dir, shape);
    cis2_error e = {0};
    assert_int_equal(cis2_synth_write(shape, 42, out, NULL, &e), CIS2_OK);
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    cis2_st_file f;
    assert_int_equal(cis2_st_open(&f, path, NULL, &e), CIS2_OK);
    size_t want = 1 + (size_t)L * (9 + (bias ? 3 : 0)) + 1 + (untied ? 1 : 0);
    assert_int_equal(f.n, want);
    char nm[128];
#define EXP(nd, a, b, ...)                                                   \
    do {                                                                     \
        snprintf(nm, sizeof nm, __VA_ARGS__);                                \
        const cis2_st_tensor *t_ = cis2_st_expect(&f, nm, nd, a, b, &e);     \
        if (!t_) fail_msg("%s", e.msg);                                      \
        assert_int_equal(t_->dtype, CIS2_ST_BF16);                           \
    } while (0)
    EXP(2, V, H, "model.embed_tokens.weight");
    EXP(1, H, 0, "model.norm.weight");
    if (untied) EXP(2, V, H, "lm_head.weight");
    else assert_null(cis2_st_find(&f, "lm_head.weight"));
    for (int l = 0; l < L; l++) {
        EXP(1, H, 0, "model.layers.%d.input_layernorm.weight", l);
        EXP(1, H, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        EXP(2, H, H, "model.layers.%d.self_attn.q_proj.weight", l);
        EXP(2, KV, H, "model.layers.%d.self_attn.k_proj.weight", l);
        EXP(2, KV, H, "model.layers.%d.self_attn.v_proj.weight", l);
        EXP(2, H, H, "model.layers.%d.self_attn.o_proj.weight", l);
        EXP(2, I, H, "model.layers.%d.mlp.gate_proj.weight", l);
        EXP(2, I, H, "model.layers.%d.mlp.up_proj.weight", l);
        EXP(2, H, I, "model.layers.%d.mlp.down_proj.weight", l);
        if (bias) {
            EXP(1, H, 0, "model.layers.%d.self_attn.q_proj.bias", l);
            EXP(1, KV, 0, "model.layers.%d.self_attn.k_proj.bias", l);
            EXP(1, KV, 0, "model.layers.%d.self_attn.v_proj.bias", l);
        } else {
            snprintf(nm, sizeof nm, "model.layers.%d.self_attn.q_proj.bias", l);
            assert_null(cis2_st_find(&f, nm));
        }
    }
#undef EXP
    /* data area alignment as designed */
    uint64_t hl = f.header_len;
    assert_int_equal((8 + hl) % 2, odd ? 1 : 0);
    if (!odd) assert_int_equal((8 + hl) % 8, 0);
    /* plausible values: norm weights within 1 +- 0.1, embeddings varied and small */
    const cis2_st_tensor *nw = cis2_st_find(&f, "model.norm.weight");
    float *buf = malloc(H * sizeof *buf);
    cis2_st_read_f32(nw, 0, H, buf);
    for (uint64_t i = 0; i < H; i++) assert_true(buf[i] > 0.89f && buf[i] < 1.11f);
    const cis2_st_tensor *emb = cis2_st_find(&f, "model.embed_tokens.weight");
    cis2_st_read_f32(emb, (V - 1) * H, H, buf);
    int distinct = 0, neg = 0;
    for (uint64_t i = 0; i < H; i++) {
        assert_true(buf[i] > -1.5f && buf[i] < 1.5f);
        if (i && bits(buf[i]) != bits(buf[i - 1])) distinct++;
        if (buf[i] < 0) neg++;
    }
    assert_true(distinct > (int)H / 2);
    assert_true(neg > (int)H / 5 && neg < (int)(4 * H) / 5);
    free(buf);
    cis2_st_close(&f);
}

/* ---- read once (docs/inputs.md "Every input file"): the stream API, a file changing while read,
 * the header's memory bound, the sha256 of the bytes read ---- */

static void stream_read_once(void **s)
{
    (void)s;
    uint8_t data[16] = {0};
    memcpy(data, data6, 12);
    const char *p = write_st("stream.st",
                             "{" BF("b", "[2,3]", 0, 12) "," BF("a", "[2]", 12, 16) "}", data, 16);
    cis2_st_file f;
    cis2_error e = {0};
    assert_int_equal(cis2_st_open_stream(&f, p, &e), CIS2_OK);
    assert_int_equal(f.n, 2);
    assert_null(f.t[0].data); /* nothing of the data area read yet */
    assert_string_equal(f.t[f.order[0]].name, "b"); /* file order */
    assert_string_equal(f.t[f.order[1]].name, "a");
    uint8_t got[16], sha[32], want[32];
    assert_int_equal(cis2_st_read(&f, got, 12, &e), CIS2_OK);
    assert_int_equal(cis2_st_read(&f, got + 12, 4, &e), CIS2_OK);
    assert_memory_equal(got, data, 16);
    assert_int_equal(cis2_st_finish(&f, sha, &e), CIS2_OK);
    cis2_st_close(&f);
    assert_int_equal(cis2_sha256_file(p, want, &e), CIS2_OK); /* every byte, header included */
    assert_memory_equal(sha, want, 32);
    uint8_t sha2[32];
    assert_int_equal(cis2_st_open(&f, p, sha2, &e), CIS2_OK);
    assert_memory_equal(sha2, want, 32);
    cis2_st_close(&f);
}

static void stream_file_changes(void **s)
{
    (void)s;
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{" BF("w", "[32]", 0, 64) "}");
    const char *p = write_st("trunc.st", hdr, zeros, 64);
    cis2_st_file f;
    cis2_error e = {0};
    uint8_t buf[64];
    /* truncated after the header was read: a clean CIS2_E_IO (no SIGBUS: nothing is mapped) */
    assert_int_equal(cis2_st_open_stream(&f, p, &e), CIS2_OK);
    assert_int_equal(truncate(p, (off_t)(8 + strlen(hdr) + 10)), 0);
    int rc = cis2_st_read(&f, buf, 64, &e);
    if (rc != CIS2_E_IO || !strstr(e.msg, "changed while being read")) fail_msg("rc %d: %s", rc, e.msg);
    cis2_st_close(&f);
    /* grown after the header: the end of the data area is not the end of the file */
    p = write_st("grow.st", hdr, zeros, 64);
    e = (cis2_error){0};
    assert_int_equal(cis2_st_open_stream(&f, p, &e), CIS2_OK);
    FILE *a = fopen(p, "ab");
    fputs("extra", a);
    fclose(a);
    assert_int_equal(cis2_st_read(&f, buf, 64, &e), CIS2_OK);
    rc = cis2_st_finish(&f, NULL, &e);
    if (rc != CIS2_E_IO || !strstr(e.msg, "changed while being read")) fail_msg("rc %d: %s", rc, e.msg);
    cis2_st_close(&f);
    /* a FIFO is refused without blocking */
    snprintf(path, sizeof path, "%s/fifo.st", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10);
    e = (cis2_error){0};
    rc = cis2_st_open_stream(&f, path, &e);
    alarm(0);
    if (rc != CIS2_E_IO || !strstr(e.msg, "not a regular file (a FIFO)")) fail_msg("rc %d: %s", rc, e.msg);
}

static void rej_header_json_cost(void **s)
{
    (void)s;
    /* 12 MB of [{},{},...]: about 3.5 GB of jansson heap, refused before parsing */
    size_t n = 4000000, k = 0;
    char *h = malloc(3 * n + 2);
    h[k++] = '[';
    for (size_t i = 0; i < n; i++) { if (i) h[k++] = ','; h[k++] = '{'; h[k++] = '}'; }
    h[k++] = ']';
    h[k] = 0;
    expect_reject(write_st("cost.st", h, NULL, 0), CIS2_E_FORMAT, "its JSON would take about");
    free(h);
}

static void synth_tiny(void **s) { (void)s; check_synth("tiny", 64, 160, 2, 2 * 16, 512, 0, 0, 1); }
static void synth_tiny_qwen(void **s) { (void)s; check_synth("tiny-qwen", 96, 224, 3, 2 * 16, 640, 1, 1, 0); }
static void synth_odd(void **s) { (void)s; check_synth("odd", 72, 200, 2, 24, 300, 0, 1, 1); }

static void synth_deterministic(void **s)
{
    (void)s;
    /* Same seed -> same bytes; another seed -> different weights. */
    char a[256], b[256], c[256];
    snprintf(a, sizeof a, "%s/det-a", dir);
    snprintf(b, sizeof b, "%s/det-b", dir);
    snprintf(c, sizeof c, "%s/det-c", dir);
    cis2_error e = {0};
    assert_int_equal(cis2_synth_write("tiny", 5, a, NULL, &e), CIS2_OK);
    assert_int_equal(cis2_synth_write("tiny", 5, b, NULL, &e), CIS2_OK);
    assert_int_equal(cis2_synth_write("tiny", 6, c, NULL, &e), CIS2_OK);
    uint8_t ha[32], hb[32], hc[32];
    char pa[300], pb[300], pc[300];
    snprintf(pa, sizeof pa, "%s/model.safetensors", a);
    snprintf(pb, sizeof pb, "%s/model.safetensors", b);
    snprintf(pc, sizeof pc, "%s/model.safetensors", c);
    assert_int_equal(cis2_sha256_file(pa, ha, &e), CIS2_OK);
    assert_int_equal(cis2_sha256_file(pb, hb, &e), CIS2_OK);
    assert_int_equal(cis2_sha256_file(pc, hc, &e), CIS2_OK);
    assert_memory_equal(ha, hb, 32);
    assert_memory_not_equal(ha, hc, 32);
    assert_int_equal(cis2_synth_write("no-such-shape", 5, a, NULL, &e), CIS2_E_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_basic), cmocka_unit_test(valid_f16), cmocka_unit_test(f16_exhaustive),
        cmocka_unit_test(valid_odd_offset),
        cmocka_unit_test(valid_scalar_empty_padding),
        cmocka_unit_test(rej_short_file),
        cmocka_unit_test(rej_missing_file),
        cmocka_unit_test(rej_header_past_end),
        cmocka_unit_test(rej_header_over_100mb),
        cmocka_unit_test(rej_bad_json),
        cmocka_unit_test(rej_not_object),
        cmocka_unit_test(rej_missing_dtype),
        cmocka_unit_test(rej_missing_shape),
        cmocka_unit_test(rej_missing_offsets),
        cmocka_unit_test(rej_unknown_dtype),
        cmocka_unit_test(rej_size_mismatch),
        cmocka_unit_test(rej_shape_overflow),
        cmocka_unit_test(rej_bad_shape),
        cmocka_unit_test(rej_offsets_outside),
        cmocka_unit_test(rej_begin_after_end),
        cmocka_unit_test(rej_overlap),
        cmocka_unit_test(rej_hole),
        cmocka_unit_test(rej_duplicate_name),
        cmocka_unit_test(rej_metadata),
        cmocka_unit_test(rej_entry_shape),
        cmocka_unit_test(stream_read_once),
        cmocka_unit_test(stream_file_changes),
        cmocka_unit_test(rej_header_json_cost),
        cmocka_unit_test(synth_tiny),
        cmocka_unit_test(synth_tiny_qwen),
        cmocka_unit_test(synth_odd),
        cmocka_unit_test(synth_deterministic),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

/*
 * kern_selfcheck.c - a dependency-free check of the matrix kernels
 * (src/kernels.h; spec §4.1, §5.1, §5.2) for targets where cmocka is not
 * installed, chiefly the NEON variant under qemu (tests/build/t_kernels_aarch64.sh).
 * Links only kernels.c, threadpool.c, kern_*.c, fpenv.c, error.c and pmath.c.
 *
 * Oracles: FACTS.md §4's 3x3 matvec; a plain row-major §5.1 loop written
 * here (for MXFP4 over elements decoded here from the OCP e2m1 table);
 * the scalar reference, bit for bit, for every variant and 1..4 threads.  Exit 0 and "kern_selfcheck: ok" on success.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cis2.h"
#include "kernels.h"
#include "threadpool.h"

#define CHECK(c, ...)                                                        \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "kern_selfcheck: FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static const char *const NAMES[] = {"scalar", "avx2", "avx512", "neon"};
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static float fbits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bitsf(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static float rnd_val(void)
{
    uint64_t r = rnd();
    float mag = (float)((r >> 11) & 0xFFFFF) / 1048576.0f, sgn = (r & 1) ? -1.0f : 1.0f;
    switch ((r >> 40) % 16) {
    case 0: return sgn * mag * 1.0e8f;
    case 1: return sgn * mag * 3.0e7f;
    case 2: return sgn * mag * 1.0e-20f;
    case 3: return 0.0f;
    default: return sgn * mag * 2.0f;
    }
}

/* The context the kernels run on (kernels.h): sel() picks its kernel and
 * gives it a fresh pool of t threads. */
static cis2_ctx X;

static void sel(const char *k, int t)
{
    cis2_error err = {0};
    CHECK(cis2_kernel_find(k, &X.kern, &err) == CIS2_OK, "select %s: %s", k, err.msg);
    cis2_pool_destroy(X.pool);
    X.pool = NULL;
    CHECK(cis2_pool_create(&X.pool, t, &err) == CIS2_OK, "threads %d: %s", t, err.msg);
}

int main(void)
{
    cis2_error err = {0};
    CHECK(cis2_fpenv_pin(&err) == CIS2_OK, "%s", err.msg);
    CHECK(cis2_fpenv_selftest(&err) == CIS2_OK, "%s", err.msg);
    X = cis2_ctx_solo();
    int nvar = 0;
    char names[64] = "";
    for (int v = 0; v < 4; v++)
        if (cis2_kernel_available(NAMES[v])) { nvar++; strcat(names, " "); strcat(names, NAMES[v]); }
#if defined(__aarch64__)
    CHECK(cis2_kernel_available("neon"), "neon must be available on aarch64");
    CHECK(!cis2_kernel_available("avx2"), "avx2 on aarch64?");
    const struct cis2_variant *none;
    CHECK(cis2_kernel_find("avx512", &none, &err) == CIS2_E_UNSUPPORTED, "avx512 not refused");
#endif

    /* FACTS.md §4 matvec 3x3, f32 matrix */
    static const uint32_t W3[9] = {0x4CBEBC20, 0x3F800000, 0xCCBEBC20, 0x3F800000, 0x40000000,
                                   0x40400000, 0x3F000000, 0xBFC00000, 0x40800000};
    static const uint32_t WANT3[3] = {0x00000000, 0x40C00000, 0x40400000};
    uint8_t src3[36];
    for (int k = 0; k < 9; k++)
        for (int q = 0; q < 4; q++) src3[4 * k + q] = (uint8_t)(W3[k] >> (8 * q));
    cis2_pmat m3;
    CHECK(cis2_pmat_pack(&X, &m3, CIS2_W_F32, src3, 3, 3, &err) == CIS2_OK, "%s", err.msg);
    float one[3] = {1, 1, 1}, y3[3];
    for (int v = 0; v < 4; v++) {
        if (!cis2_kernel_available(NAMES[v])) continue;
        sel(NAMES[v], 1);
        cis2_matmul(&X, &m3, one, 1, y3);
        for (int o = 0; o < 3; o++)
            CHECK(bitsf(y3[o]) == WANT3[o], "%s 3x3 row %d: %08X want %08X", NAMES[v], o, bitsf(y3[o]), WANT3[o]);
    }
    cis2_pmat_free(&m3);

    static const size_t ROWS[] = {1, 2, 5, 15, 16, 17, 31, 33, 64, 65, 100, 130};
    static const size_t COLS[] = {1, 2, 3, 7, 16, 63, 300, 576, 1001, 1537};
    for (int it = 0; it < 40; it++) {
        cis2_wtype t = (it & 1) ? CIS2_W_BF16 : CIS2_W_F32;
        size_t rows = ROWS[rnd() % 12], cols = COLS[rnd() % 10], npos = 1 + rnd() % 9;
        size_t es = t == CIS2_W_BF16 ? 2 : 4;
        uint8_t *src = malloc(rows * cols * es);
        float *wide = malloc(rows * cols * 4), *x = malloc(npos * cols * 4);
        float *want = malloc(npos * rows * 4), *y = malloc(npos * rows * 4);
        CHECK(src && wide && x && want && y, "out of memory");
        for (size_t k = 0; k < rows * cols; k++) {
            uint32_t b = bitsf(rnd_val());
            if (t == CIS2_W_BF16) {
                b &= 0xFFFF0000u; /* §4.1: a bf16 is the top half of an f32 */
                src[2 * k] = (uint8_t)(b >> 16); src[2 * k + 1] = (uint8_t)(b >> 24);
            } else {
                for (int q = 0; q < 4; q++) src[4 * k + q] = (uint8_t)(b >> (8 * q));
            }
            wide[k] = fbits(b);
        }
        for (size_t k = 0; k < npos * cols; k++) x[k] = rnd_val();
        for (size_t p = 0; p < npos; p++) /* §5.1, row-major, written here */
            for (size_t o = 0; o < rows; o++) {
                float acc = 0.0f;
                for (size_t i = 0; i < cols; i++) {
                    float prod = wide[o * cols + i] * x[p * cols + i];
                    acc = acc + prod;
                }
                want[p * rows + o] = acc;
            }
        cis2_pmat m;
        CHECK(cis2_pmat_pack(&X, &m, t, src, rows, cols, &err) == CIS2_OK, "%s", err.msg);
        for (int v = 0; v < 4; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            for (int th = 1; th <= 4; th += (it % 8 == 0 ? 1 : 3)) {
                sel(NAMES[v], th);
                memset(y, 0xFF, npos * rows * 4);
                cis2_matmul(&X, &m, x, npos, y);
                for (size_t k = 0; k < npos * rows; k++)
                    CHECK(bitsf(y[k]) == bitsf(want[k]), "%s threads %d %s %zux%zu npos %zu: y[%zu] %08X want %08X",
                          NAMES[v], th, t == CIS2_W_BF16 ? "bf16" : "f32", rows, cols, npos, k, bitsf(y[k]),
                          bitsf(want[k]));
            }
        }
        cis2_pmat_free(&m);
        free(src); free(wide); free(x); free(want); free(y);
    }
    /* MXFP4 (kernels.h, at cis2_wtype): each element by the OCP e2m1 table
     * written here times 2^(s-127) in double (exact), the §1.3 flush and the
     * overflow written out; then the same plain §5.1 loop.  Scales mostly
     * near 127, often the edges 1, 2, 127, 253, 254. */
    static const double E2M1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
    static const uint8_t EDGE[] = {1, 2, 127, 253, 254};
    static const size_t MXCOLS[] = {32, 64, 96, 576, 1024};
    for (int it = 0; it < 30; it++) {
        size_t rows = ROWS[rnd() % 12], cols = MXCOLS[rnd() % 5], npos = it % 10 == 9 ? 17 : 1 + (size_t)it % 9;
        uint8_t *src = malloc(rows * cols / 2 + rows * cols / 32);
        float *wide = malloc(rows * cols * 4), *x = malloc(npos * cols * 4);
        float *want = malloc(npos * rows * 4), *y = malloc(npos * rows * 4);
        CHECK(src && wide && x && want && y, "out of memory");
        uint8_t *scales = src + rows * cols / 2;
        for (size_t k = 0; k < rows * cols / 2; k++) src[k] = (uint8_t)(rnd() >> 24);
        for (size_t k = 0; k < rows * cols / 32; k++) {
            uint64_t r = rnd();
            scales[k] = r % 8 == 0 ? EDGE[(r >> 8) % 5] : (uint8_t)(118 + (r >> 8) % 13);
        }
        for (size_t o = 0; o < rows; o++)
            for (size_t i = 0; i < cols; i++) {
                uint8_t byte = src[o * cols / 2 + i / 2];
                unsigned code = i % 2 ? byte >> 4 : byte & 15u, sc = scales[o * cols / 32 + i / 32];
                uint64_t pb = (uint64_t)(sc - 127 + 1023) << 52; /* 2^(s-127) as a double */
                double p2, d;
                memcpy(&p2, &pb, 8);
                d = E2M1[code] * p2;
                float f = (float)d;
                if (d < 0x1p-126 && d > -0x1p-126) f = code & 8 ? -0.0f : 0.0f;
                wide[o * cols + i] = f; /* beyond FLT_MAX the conversion gives the signed infinity */
            }
        for (size_t k = 0; k < npos * cols; k++) x[k] = rnd_val();
        for (size_t p = 0; p < npos; p++)
            for (size_t o = 0; o < rows; o++) {
                float acc = 0.0f;
                for (size_t i = 0; i < cols; i++) {
                    float prod = wide[o * cols + i] * x[p * cols + i];
                    acc = acc + prod;
                }
                want[p * rows + o] = acc;
            }
        cis2_pmat m;
        CHECK(cis2_pmat_pack(&X, &m, CIS2_W_MXFP4, src, rows, cols, &err) == CIS2_OK, "%s", err.msg);
        float *row = malloc(cols * 4);
        CHECK(row != NULL, "out of memory");
        for (size_t o = 0; o < rows; o++) {
            cis2_pmat_row(&m, o, row);
            for (size_t i = 0; i < cols; i++)
                CHECK(bitsf(row[i]) == bitsf(wide[o * cols + i]), "mxfp4 row %zu [%zu]: %08X want %08X", o, i,
                      bitsf(row[i]), bitsf(wide[o * cols + i]));
        }
        free(row);
        for (int v = 0; v < 4; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            for (int th = 1; th <= 4; th += (it % 8 == 0 ? 1 : 3)) {
                sel(NAMES[v], th);
                memset(y, 0xFF, npos * rows * 4);
                cis2_matmul(&X, &m, x, npos, y);
                for (size_t k = 0; k < npos * rows; k++)
                    CHECK(bitsf(y[k]) == bitsf(want[k]), "%s threads %d mxfp4 %zux%zu npos %zu: y[%zu] %08X want %08X",
                          NAMES[v], th, rows, cols, npos, k, bitsf(y[k]), bitsf(want[k]));
            }
        }
        cis2_pmat_free(&m);
        free(src); free(wide); free(x); free(want); free(y);
    }

    sel("auto", 1);
    cis2_pool_destroy(X.pool);
    printf("kern_selfcheck: ok (%s; variants:%s)\n", cis2_isa_name(), names);
    return 0;
}

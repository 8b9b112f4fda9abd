/*
 * test_kernels.c - the matrix kernel contract (src/kernels.h; spec §4.1,
 * §5.1, §5.2) and the thread pool.
 *
 * Oracles: FACTS.md §4's 3x3 matvec; an independent row-major §5.1 loop
 * (cis2_dot_seq on the unpacked matrix, bf16 widened here by the §4.1
 * shift) for the scalar reference; the scalar reference, bit for bit, for
 * every SIMD variant and every thread count.  MXFP4 (kernels.h, at
 * cis2_wtype): the OCP e2m1 table written out here, ldexp and a plain
 * §5.1 loop for the scalar reference and cis2_pmat_row; then the same
 * variant and thread checks.
 */
#include <setjmp.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cis2.h"
#include "kernels.h"
#include "pmath.h"
#include "threadpool.h"

static const char *const NAMES[] = {"scalar", "avx2", "avx512", "neon"};
#define NNAMES (sizeof NAMES / sizeof NAMES[0])

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
static float fbits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bitsf(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* A finite value: mostly O(1), sometimes 1e8-scale (cancellation), sometimes
 * tiny (products near or below FLT_MIN, so FTZ/DAZ matters), both signs. */
static float rnd_val(void)
{
    uint64_t r = rnd();
    float mag = (float)((r >> 11) & 0xFFFFF) / 1048576.0f;
    float sgn = (r & 1) ? -1.0f : 1.0f;
    switch ((r >> 40) % 16) {
    case 0: return sgn * mag * 1.0e8f;
    case 1: return sgn * mag * 3.0e7f;
    case 2: return sgn * mag * 1.0e-20f;
    case 3: return 0.0f;
    default: return sgn * mag * 2.0f;
    }
}

/* Row-major source bytes for a random matrix; also its widened f32 copy. */
static uint8_t *rnd_matrix(cis2_wtype t, size_t rows, size_t cols, float *wide)
{
    size_t es = t == CIS2_W_BF16 ? 2 : 4;
    uint8_t *src = malloc(rows * cols * es + 1);
    assert_non_null(src);
    for (size_t k = 0; k < rows * cols; k++) {
        uint32_t b = bitsf(rnd_val());
        if (t == CIS2_W_BF16) {
            uint16_t h = (uint16_t)(b >> 16);
            src[2 * k] = (uint8_t)h; src[2 * k + 1] = (uint8_t)(h >> 8);
            wide[k] = fbits((uint32_t)h << 16); /* §4.1, independently of the code under test */
        } else {
            for (int q = 0; q < 4; q++) src[4 * k + q] = (uint8_t)(b >> (8 * q));
            wide[k] = fbits(b);
        }
    }
    return src;
}

/* The context every call below runs on (kernels.h): the tests change its
 * kernel and its pool between calls. */
static cis2_ctx X;

static int use_kernel(const char *name, cis2_error *err) { return cis2_kernel_find(name, &X.kern, err); }

/* A fresh pool of n threads (n <= 0: the online CPUs). */
static int use_threads(int n, cis2_error *err)
{
    cis2_pool_destroy(X.pool);
    X.pool = NULL;
    return cis2_pool_create(&X.pool, n, err);
}

static int setup(void **state)
{
    (void)state;
    cis2_error err = {0};
    assert_int_equal(cis2_fpenv_pin(&err), CIS2_OK);
    X = cis2_ctx_solo();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cis2_pool_destroy(X.pool);
    return 0;
}

static void run_with(const char *kernel, int threads, const cis2_pmat *m, const float *x, size_t npos, float *y)
{
    cis2_error err = {0};
    assert_int_equal(use_kernel(kernel, &err), CIS2_OK);
    assert_int_equal(use_threads(threads, &err), CIS2_OK);
    assert_int_equal(cis2_pool_size(X.pool), threads);
    cis2_matmul(&X, m, x, npos, y);
}

/* FACTS.md §4: matvec 3x3 as an f32 matrix, x = (1,1,1). */
static void test_facts_matvec(void **state)
{
    (void)state;
    static const uint32_t W[9] = {0x4CBEBC20, 0x3F800000, 0xCCBEBC20, 0x3F800000, 0x40000000,
                                  0x40400000, 0x3F000000, 0xBFC00000, 0x40800000};
    static const uint32_t WANT[3] = {0x00000000, 0x40C00000, 0x40400000};
    uint8_t src[36];
    for (int k = 0; k < 9; k++)
        for (int q = 0; q < 4; q++) src[4 * k + q] = (uint8_t)(W[k] >> (8 * q));
    cis2_pmat m;
    cis2_error err = {0};
    assert_int_equal(cis2_pmat_pack(&X, &m, CIS2_W_F32, src, 3, 3, &err), CIS2_OK);
    float x[3] = {1.0f, 1.0f, 1.0f};
    for (size_t v = 0; v < NNAMES; v++) {
        if (!cis2_kernel_available(NAMES[v])) continue;
        float y[3] = {-1, -1, -1};
        run_with(NAMES[v], 1, &m, x, 1, y);
        for (int o = 0; o < 3; o++) {
            if (bitsf(y[o]) != WANT[o]) fail_msg("%s row %d: %08X want %08X", NAMES[v], o, bitsf(y[o]), WANT[o]);
        }
    }
    cis2_pmat_free(&m);
}

static const size_t ROWS[] = {1, 2, 5, 15, 16, 17, 31, 33, 64, 65, 100, 130};
static const size_t COLS[] = {1, 2, 3, 7, 16, 63, 576, 1001, 1536, 3001};

struct case_ {
    cis2_wtype t;
    size_t rows, cols, npos;
    float *wide, *x;
    cis2_pmat m;
};

static void make_case(struct case_ *c, cis2_wtype t, size_t rows, size_t cols, size_t npos)
{
    c->t = t; c->rows = rows; c->cols = cols; c->npos = npos;
    c->wide = malloc(rows * cols * sizeof(float) + 4);
    c->x = malloc(npos * cols * sizeof(float) + 4);
    assert_non_null(c->wide); assert_non_null(c->x);
    uint8_t *src = rnd_matrix(t, rows, cols, c->wide);
    for (size_t k = 0; k < npos * cols; k++) c->x[k] = rnd_val();
    cis2_error err = {0};
    /* an odd source address: the packer accepts any alignment */
    uint8_t *odd = malloc(rows * cols * 4 + 8);
    assert_non_null(odd);
    memcpy(odd + 1, src, rows * cols * (t == CIS2_W_BF16 ? 2 : 4));
    assert_int_equal(cis2_pmat_pack(&X, &c->m, t, odd + 1, rows, cols, &err), CIS2_OK);
    free(odd); free(src);
}

static void free_case(struct case_ *c)
{
    cis2_pmat_free(&c->m); free(c->wide); free(c->x);
}

static void cmp_bits(const float *a, const float *b, size_t n, const char *what, const struct case_ *c)
{
    for (size_t k = 0; k < n; k++)
        if (bitsf(a[k]) != bitsf(b[k]))
            fail_msg("%s: %s %zux%zu npos %zu: y[%zu] = %08X, want %08X", what,
                     c->t == CIS2_W_BF16 ? "bf16" : "f32", c->rows, c->cols, c->npos, k, bitsf(a[k]),
                     bitsf(b[k]));
}

/* The scalar reference against an independent row-major dot_seq on the unpacked matrix. */
static void test_scalar_vs_dot_seq(void **state)
{
    (void)state;
    for (int it = 0; it < 60; it++) {
        struct case_ c;
        make_case(&c, (it & 1) ? CIS2_W_BF16 : CIS2_W_F32, ROWS[rnd() % 12], COLS[rnd() % 10], 1 + rnd() % 4);
        float *y = malloc(c.npos * c.rows * sizeof(float)), *want = malloc(c.npos * c.rows * sizeof(float));
        for (size_t p = 0; p < c.npos; p++)
            for (size_t o = 0; o < c.rows; o++)
                want[p * c.rows + o] = cis2_dot_seq(c.wide + o * c.cols, c.x + p * c.cols, c.cols);
        run_with("scalar", 1, &c.m, c.x, c.npos, y);
        cmp_bits(y, want, c.npos * c.rows, "scalar vs dot_seq", &c);
        /* pmat_row gives back the widened row */
        float *row = malloc(c.cols * sizeof(float));
        size_t r = rnd() % c.rows;
        cis2_pmat_row(&c.m, r, row);
        assert_memory_equal(row, c.wide + r * c.cols, c.cols * sizeof(float));
        free(row); free(y); free(want); free_case(&c);
    }
}

/* Every available variant equals the scalar reference bit for bit. */
static void test_variants_equal_scalar(void **state)
{
    (void)state;
    int nvar = 0;
    for (int it = 0; it < 160; it++) {
        struct case_ c;
        make_case(&c, (it & 1) ? CIS2_W_BF16 : CIS2_W_F32, ROWS[rnd() % 12], COLS[rnd() % 10], 1 + rnd() % 40);
        size_t n = c.npos * c.rows;
        float *ref = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        run_with("scalar", 1, &c.m, c.x, c.npos, ref);
        for (size_t v = 1; v < NNAMES; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            nvar++;
            memset(y, 0xFF, n * sizeof(float));
            run_with(NAMES[v], 1, &c.m, c.x, c.npos, y);
            cmp_bits(y, ref, n, NAMES[v], &c);
        }
        free(ref); free(y); free_case(&c);
    }
    print_message("variants compared: %d case-variant pairs\n", nvar);
}

/* Thread counts 1..4 give identical bits, on matrices big enough to split. */
static void test_threads_identical(void **state)
{
    (void)state;
    static const size_t shapes[][3] = {{576, 576, 1}, {1536, 576, 1}, {192, 577, 3}, {1000, 1536, 9},
                                       {49, 2000, 5}, {300, 999, 16},
                                       /* AVX2 tiles: several column ranges, a tail group's sums reloaded */
                                       {49, 2050, 13}, {33, 3001, 7},
                                       /* AVX-512 f32 tile: position blocks after the first read it, across
                                        * 512-column ranges, with a last block of 1, 2 or 3 positions */
                                       {20, 577, 33}, {17, 1100, 35}, {40, 513, 50}, {33, 1536, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct case_ c;
        make_case(&c, (s & 1) ? CIS2_W_F32 : CIS2_W_BF16, shapes[s][0], shapes[s][1], shapes[s][2]);
        size_t n = c.npos * c.rows;
        float *ref = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        run_with("scalar", 1, &c.m, c.x, c.npos, ref);
        for (size_t v = 0; v < NNAMES; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            for (int t = 1; t <= 4; t++) {
                memset(y, 0xFF, n * sizeof(float));
                run_with(NAMES[v], t, &c.m, c.x, c.npos, y);
                cmp_bits(y, ref, n, NAMES[v], &c);
            }
        }
        free(ref); free(y); free_case(&c);
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    assert_int_equal(use_threads(1, &err), CIS2_OK);
}

/* Clears this thread's FTZ/DAZ bits, so that workers created now would not
 * inherit a pin (Linux copies the FP control state into new threads). */
static void unpin_this_thread(void)
{
#if defined(__x86_64__)
    uint32_t csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    csr &= ~((1u << 15) | (1u << 6));
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr &= ~(1ull << 24);
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#endif
}

struct pin_ctx {
    _Atomic int unpinned, on_workers;
    pthread_t self;
};
static void pin_fn(void *vctx, size_t i)
{
    struct pin_ctx *c = vctx;
    if (!cis2_fpenv_is_pinned()) atomic_fetch_add(&c->unpinned, 1);
    if (!pthread_equal(pthread_self(), c->self)) atomic_fetch_add(&c->on_workers, 1);
    for (volatile int k = 0; k < 200; k++) { (void)i; }
}

/* Workers pin FTZ/DAZ themselves (§1.3) even when started from an unpinned
 * thread; products below FLT_MIN then flush on every thread, so threaded
 * results match the pinned scalar reference. */
static void test_workers_pinned(void **state)
{
    (void)state;
    cis2_error err = {0};
    size_t rows = 512, cols = 256;
    float *w = malloc(rows * cols * 4), x[256];
    for (size_t k = 0; k < rows * cols; k++) w[k] = fbits(0x1E000000u + (uint32_t)(k % 977)); /* ~6.8e-21 */
    for (size_t i = 0; i < cols; i++) x[i] = fbits(0x1E000000u + (uint32_t)i);
    cis2_pmat m;
    assert_int_equal(cis2_pmat_pack(&X, &m, CIS2_W_F32, (const uint8_t *)w, rows, cols, &err), CIS2_OK);
    float *ref = malloc(rows * 4), *y = malloc(rows * 4);
    run_with("scalar", 1, &m, x, 1, ref);
    for (size_t o = 0; o < rows; o++) assert_int_equal(bitsf(ref[o]), 0); /* every product flushes */
    for (int t = 2; t <= 4; t++) {
        unpin_this_thread();
        assert_false(cis2_fpenv_is_pinned());
        assert_int_equal(use_threads(t, &err), CIS2_OK);
        assert_int_equal(cis2_fpenv_pin(&err), CIS2_OK);
        struct pin_ctx c;
        atomic_init(&c.unpinned, 0);
        atomic_init(&c.on_workers, 0);
        c.self = pthread_self();
        for (int rep = 0; rep < 1000 && atomic_load(&c.on_workers) == 0; rep++)
            cis2_parallel_for(&X, 4096, pin_fn, &c);
        assert_true(atomic_load(&c.on_workers) > 0);
        assert_int_equal(atomic_load(&c.unpinned), 0);
        for (int rep = 0; rep < 50; rep++) {
            run_with("auto", t, &m, x, 1, y);
            assert_memory_equal(y, ref, rows * 4);
            run_with("scalar", t, &m, x, 1, y);
            assert_memory_equal(y, ref, rows * 4);
        }
    }
    cis2_pmat_free(&m); free(w); free(ref); free(y);
    assert_int_equal(use_threads(1, &err), CIS2_OK);
}

/* cis2_matmul_n (several matrices sharing x, chunks spanning matrix
 * boundaries) equals one single-thread scalar cis2_matmul per matrix, for
 * every variant and thread count 1..4. */
static void test_matmul_n(void **state)
{
    (void)state;
    static const size_t rows[3] = {192, 64, 577}, NPOS[] = {1, 3, 9, 16, 17, 40};
    for (size_t t = 0; t < sizeof NPOS / sizeof NPOS[0]; t++) {
        size_t npos = NPOS[t], cols = t % 2 ? 577 : 576;
        struct case_ c[3];
        const cis2_pmat *w[3];
        float *ref[3], *y[3];
        for (int k = 0; k < 3; k++) {
            make_case(&c[k], t % 3 ? CIS2_W_BF16 : CIS2_W_F32, rows[k], cols, npos);
            if (k) memcpy(c[k].x, c[0].x, npos * cols * sizeof(float)); /* one shared x */
            w[k] = &c[k].m;
            ref[k] = malloc(npos * rows[k] * sizeof(float));
            y[k] = malloc(npos * rows[k] * sizeof(float));
            run_with("scalar", 1, w[k], c[0].x, npos, ref[k]);
        }
        for (size_t v = 0; v < NNAMES; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            for (int th = 1; th <= 4; th++) {
                cis2_error err = {0};
                assert_int_equal(use_kernel(NAMES[v], &err), CIS2_OK);
                assert_int_equal(use_threads(th, &err), CIS2_OK);
                for (int k = 0; k < 3; k++) memset(y[k], 0xFF, npos * rows[k] * sizeof(float));
                cis2_matmul_n(&X, w, 3, c[0].x, npos, y);
                for (int k = 0; k < 3; k++) cmp_bits(y[k], ref[k], npos * rows[k], NAMES[v], &c[k]);
            }
        }
        for (int k = 0; k < 3; k++) { free(ref[k]); free(y[k]); free_case(&c[k]); }
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    assert_int_equal(use_threads(1, &err), CIS2_OK);
}

/* cis2_attend_group under every variant equals, head by head, the
 * row-layout reference cis2_attend_head (an independent loop: plain keys,
 * one dot_seq per position): G heads sharing a KV head, head sizes with and
 * without a 16-float tail, lengths across key blocks; and with a sliding
 * window's first key lo (docs/models.md §M5), in and across key blocks,
 * against the reference run on keys lo..len-1 alone. */
static void test_attention_variants(void **state)
{
    (void)state;
    static const size_t HD[] = {8, 24, 64, 72, 128}, LEN[] = {1, 5, 16, 17, 47, 64, 130};
    int pairs = 0;
    for (int it = 0; it < 60; it++) {
        size_t G = 1 + rnd() % 8, hd = HD[rnd() % 5], len = LEN[rnd() % 7], cap = (len + 15) / 16 * 16;
        size_t vs = hd + (it % 3) * 8; /* value rows may be strided */
        size_t lo = it % 3 == 0 ? 0 : rnd() % len, w = len - lo;
        /* §9.2's scale, or another one (Gemma-3's query_pre_attn_scalar, docs/models.md §M7.3) */
        float scale = rsqrt_cr((float)(it % 4 == 1 ? (size_t)(24 + it) : hd));
        float *q = malloc(G * hd * 4), *k = malloc(len * hd * 4), *v = malloc(len * vs * 4);
        float *kt = calloc(cap * hd, 4), *s = malloc(G * len * 4), *o = malloc(G * hd * 4);
        float *s_ref = malloc(G * len * 4), *o_ref = malloc(G * hd * 4);
        for (size_t i = 0; i < G * hd; i++) q[i] = rnd_val() / 4096.0f;
        for (size_t i = 0; i < len * hd; i++) k[i] = rnd_val() / 4096.0f;
        for (size_t i = 0; i < len * vs; i++) v[i] = rnd_val();
        for (size_t j = 0; j < len; j++)
            for (size_t d = 0; d < hd; d++) kt[(j / 16) * 16 * hd + d * 16 + j % 16] = k[j * hd + d];
        float *vr = malloc(len * hd * 4); /* the reference reads k and v rows with one stride */
        for (size_t j = 0; j < len; j++) memcpy(vr + j * hd, v + j * vs, hd * 4);
        for (size_t h = 0; h < G; h++)
            attend_head_scaled(q + h * hd, k + lo * hd, vr + lo * hd, hd, w, hd, scale, s_ref + h * w,
                               o_ref + h * hd);
        free(vr);
        for (size_t n = 0; n < NNAMES; n++) {
            if (!cis2_kernel_available(NAMES[n])) continue;
            cis2_error err = {0};
            assert_int_equal(use_kernel(NAMES[n], &err), CIS2_OK);
            memset(s, 0xFF, G * len * 4);
            memset(o, 0xFF, G * hd * 4);
            cis2_attend_group(&X, q, G, kt, v, vs, lo, len, hd, scale, NULL, s, o);
            for (size_t i = 0; i < G * w; i++)
                if (bitsf(s[i]) != bitsf(s_ref[i]))
                    fail_msg("%s: G %zu hd %zu lo %zu len %zu: prob[%zu] = %08X, want %08X", NAMES[n], G, hd, lo,
                             len, i, bitsf(s[i]), bitsf(s_ref[i]));
            for (size_t i = 0; i < G * hd; i++)
                if (bitsf(o[i]) != bitsf(o_ref[i]))
                    fail_msg("%s: G %zu hd %zu lo %zu len %zu: out[%zu] = %08X, want %08X", NAMES[n], G, hd, lo,
                             len, i, bitsf(o[i]), bitsf(o_ref[i]));
            pairs++;
        }
        free(q); free(k); free(v); free(kt); free(s); free(o); free(s_ref); free(o_ref);
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    print_message("attention compared: %d case-variant pairs\n", pairs);
}

/* softmax_seq_rows (attention's G heads at once: maxima and §5.3 sums
 * interleaved, the element-wise steps in lanes) equals the plain
 * softmax_seq_exp row by row, on rows built to trip an interleaving or
 * lane mistake: NaN first or later (strict > never replaces a NaN maximum),
 * -0 before +0 and the reverse (equal under >: the first is kept), repeated
 * maxima, infinities, subnormals, and every length 1..37 (each lane tail)
 * at 1..9 rows (each block of 4 and its remainder). */
static void test_softmax_rows(void **state)
{
    (void)state;
    static const uint32_t odd[] = {0x7FC00000, 0xFFC00001, 0x80000000, 0x00000000, 0x7F800000, 0xFF800000,
                                   0x00000001, 0x80000001, 0x3F800000, 0x3F800000, 0xC2B00000, 0x42B00000};
    enum { MAXR = 9, MAXN = 37 };
    static float v[MAXR * MAXN], ref[MAXR * MAXN];
    int cases = 0;
    for (int it = 0; it < 400; it++) {
        size_t R = 1 + (size_t)it % MAXR, n = 1 + (size_t)(it / MAXR) % MAXN;
        for (size_t i = 0; i < R * n; i++) {
            uint32_t r = rnd();
            v[i] = r % 5 == 0 ? ({ float f; uint32_t b = odd[r / 5 % 12]; memcpy(&f, &b, 4); f; })
                              : rnd_val() / 65536.0f;
        }
        memcpy(ref, v, R * n * sizeof(float));
        for (size_t r = 0; r < R; r++) softmax_seq_exp(ref + r * n, n, exp_pinned_n);
        softmax_seq_rows(v, R, n, exp_pinned_n);
        for (size_t i = 0; i < R * n; i++) {
            /* a NaN's sign and payload after an operation on two NaNs are the
             * compiler's operand order and the ISA's (FACTS 13); the witness
             * takes every NaN as one (§12.1 7a), so compare NaN as a class */
            int nan = v[i] != v[i] && ref[i] != ref[i];
            if (!nan && bitsf(v[i]) != bitsf(ref[i]))
                fail_msg("rows %zu n %zu: [%zu] = %08X, want %08X", R, n, i, bitsf(v[i]), bitsf(ref[i]));
        }
        cases++;
    }
    print_message("softmax rows compared: %d cases\n", cases);
}

/* The forward pass's row forms (pmath.h: rmsnorm_rows with the rows' sums
 * interleaved, add_n, mul_n and rope_rotate_n in lanes) equal the plain
 * rmsnorm, a + b, a * b and rope_rotate bit for bit, at every length 1..37 (each lane
 * tail) and 1..9 rows, on values mixing the working range with ones that
 * overflow the squares, cancel, or fall below FLT_MIN (FTZ/DAZ). */
static void test_row_forms(void **state)
{
    (void)state;
    enum { MAXR = 9, MAXN = 37 };
    static float x[MAXR * MAXN], w[MAXN], y[MAXR * MAXN], ref[MAXR * MAXN], b[MAXR * MAXN], c[MAXN], sn[MAXN];
    static const float odd[] = {3.0e19f, -2.0e19f, 1.0e-30f, -1.0e-41f, 0.0f, -0.0f, 65504.0f};
    for (int it = 0; it < 400; it++) {
        size_t R = 1 + (size_t)it % MAXR, n = 1 + (size_t)(it / MAXR) % MAXN;
        for (size_t i = 0; i < R * n; i++) {
            uint32_t r = rnd();
            x[i] = r % 7 == 0 ? odd[r / 7 % 7] : rnd_val();
            b[i] = rnd_val();
        }
        for (size_t i = 0; i < n; i++) { w[i] = rnd_val(); c[i] = rnd_val() / 4.0f; sn[i] = rnd_val() / 4.0f; }
        float eps = it % 2 ? 1e-5f : 1e-6f;
        for (size_t r = 0; r < R; r++) rmsnorm(x + r * n, w, eps, n, ref + r * n);
        memset(y, 0xFF, sizeof y);
        rmsnorm_rows(x, w, eps, n, R, y);
        for (size_t i = 0; i < R * n; i++)
            if (bitsf(y[i]) != bitsf(ref[i]))
                fail_msg("rmsnorm_rows: rows %zu n %zu: [%zu] = %08X, want %08X", R, n, i, bitsf(y[i]), bitsf(ref[i]));
        memcpy(y, x, R * n * sizeof(float));
        add_n(y, b, R * n);
        for (size_t i = 0; i < R * n; i++) {
            float want = x[i] + b[i];
            if (bitsf(y[i]) != bitsf(want)) fail_msg("add_n: n %zu: [%zu] = %08X, want %08X", R * n, i, bitsf(y[i]), bitsf(want));
        }
        memcpy(y, x, R * n * sizeof(float));
        mul_n(y, b, R * n);
        for (size_t i = 0; i < R * n; i++) {
            float want = x[i] * b[i];
            if (bitsf(y[i]) != bitsf(want)) fail_msg("mul_n: n %zu: [%zu] = %08X, want %08X", R * n, i, bitsf(y[i]), bitsf(want));
        }
        size_t half = n; /* a head of 2n values (2 * MAXN <= MAXR * MAXN) */
        memcpy(y, x, 2 * half * sizeof(float));
        memcpy(ref, x, 2 * half * sizeof(float));
        rope_rotate(ref, c, sn, half);
        rope_rotate_n(y, c, sn, half);
        for (size_t i = 0; i < 2 * half; i++)
            if (bitsf(y[i]) != bitsf(ref[i]))
                fail_msg("rope_rotate_n: half %zu: [%zu] = %08X, want %08X", half, i, bitsf(y[i]), bitsf(ref[i]));
    }
}

/* argmax_n (4 lanes, then the lanes' winners merged) and cis2_argmax_lanes
 * under every variant (4, 8 or 16 lanes) return argmax's index (§11.2:
 * strict >, the first maximum) on vectors built to trip a lane or merge
 * mistake: NaN at 0 (it wins: nothing is > NaN) or elsewhere (never
 * chosen), -0 and +0 as the maximum in either order (the first counts),
 * repeated maxima in different lanes, -inf everywhere but one, a vocabulary-
 * sized vector, every length 1..70. */
static void test_argmax_lanes(void **state)
{
    (void)state;
    enum { N = 49152 };
    static float v[N];
    static const uint32_t odd[] = {0x7FC00000, 0xFFC00001, 0x80000000, 0x00000000, 0xFF800000, 0x7F800000};
    for (int it = 0; it < 2000; it++) {
        size_t n = it < 1800 ? 1 + (size_t)it % 70 : N;
        int kind = (it / 70) % 5;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd();
            float x = rnd_val();
            if (kind == 1 && r % 3 == 0) memcpy(&x, &odd[r / 3 % 6], 4); /* NaN, zeros, infinities */
            if (kind == 2) x = (float)(r % 3);                             /* many equal maxima */
            if (kind == 3) { uint32_t b = r % 2 ? 0x80000000u : 0; memcpy(&x, &b, 4); } /* only +-0 */
            if (kind == 4) x = -INFINITY;
            v[i] = x;
        }
        if (kind == 4) v[rnd() % n] = rnd_val();
        if (kind == 1 && it % 4 == 1) v[0] = NAN;
        size_t want = argmax(v, n), got = argmax_n(v, n);
        if (got != want) fail_msg("argmax_n: n %zu kind %d: %zu, want %zu", n, kind, got, want);
        for (size_t k = 0; k < NNAMES; k++) {
            cis2_error err = {0};
            if (!cis2_kernel_available(NAMES[k])) continue;
            assert_int_equal(use_kernel(NAMES[k], &err), CIS2_OK);
            got = cis2_argmax_lanes(&X, v, n);
            if (got != want) fail_msg("%s argmax: n %zu kind %d: %zu, want %zu", NAMES[k], n, kind, got, want);
        }
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
}

/* cis2_exp_n / cis2_silu_n / cis2_gelu_n under every variant (each its own
 * lane width, pmath_lanes.h) equal the scalar exp_pinned / silu_pinned /
 * gelu_tanh_pinned (pmath.c's
 * branchy one-at-a-time code) on every class of input: the §6.2 edges (NaN
 * payloads, infinities, +-88 and their neighbours, subnormals, zeros),
 * random bit patterns and values in the working range; every length from
 * 0 to 40 (each tail), in place and not. */
static void test_exp_silu_variants(void **state)
{
    (void)state;
    enum { N = 4111 };
    static float x[N], ye[N], ys[N], yi[N], yg[N];
    static const uint32_t edge[] = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
                                    0x42B00000, 0x42B00001, 0x42AFFFFF, 0xC2B00000, 0xC2B00001, 0xC2AFFFFF,
                                    0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00001,
                                    0xFF812345, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F000000, 0xBF000000, 0x42800000,
                                    0xC2800000, 0x3F800000, 0xC2AEAC50, 0xC2AEAC4F, 0x42B17217, 0xC2CFF1B5,
                                    0x3EB17218, 0xBEB17218, 0x33800000, 0xB3800000};
    int compared = 0;
    for (int rep = 0; rep < 24; rep++) {
        for (size_t i = 0; i < N; i++) {
            uint32_t b = (uint32_t)rnd();
            if (rep == 0 && i < sizeof edge / sizeof edge[0]) b = edge[i];
            else if (rep % 3 == 1) { float u = (float)(int32_t)(b >> 8) / 65536.0f; b = bitsf(u); } /* +-128 */
            else if (rep % 3 == 2) { float u = -(float)(b >> 9) / 65536.0f; b = bitsf(u); }         /* softmax's */
            x[i] = fbits(b);
        }
        for (size_t v = 0; v < NNAMES; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            cis2_error err = {0};
            assert_int_equal(use_kernel(NAMES[v], &err), CIS2_OK);
            for (size_t len = 0; len <= 40; len++) { /* every tail, at an offset that misaligns */
                size_t o = (size_t)rep * 41 % (N - 48) + 1;
                memset(ye, 0xEE, sizeof ye);
                cis2_exp_n(&X, x + o, ye, len);
                cis2_silu_n(&X, x + o, ys, len);
                memset(yg, 0xEE, sizeof yg);
                cis2_gelu_n(&X, x + o, yg, len);
                for (size_t i = 0; i < len; i++) {
                    if (bitsf(yg[i]) != bitsf(cis2_gelu_tanh_pinned(x[o + i])))
                        fail_msg("%s: gelu_n len %zu [%zu] (0x%08X) = 0x%08X, scalar 0x%08X", NAMES[v], len, i,
                                 bitsf(x[o + i]), bitsf(yg[i]), bitsf(cis2_gelu_tanh_pinned(x[o + i])));
                    if (bitsf(ye[i]) != bitsf(cis2_exp_pinned(x[o + i])))
                        fail_msg("%s: exp_n len %zu [%zu] (0x%08X) = 0x%08X, scalar 0x%08X", NAMES[v], len, i,
                                 bitsf(x[o + i]), bitsf(ye[i]), bitsf(cis2_exp_pinned(x[o + i])));
                    if (bitsf(ys[i]) != bitsf(cis2_silu_pinned(x[o + i])))
                        fail_msg("%s: silu_n len %zu [%zu] (0x%08X) = 0x%08X, scalar 0x%08X", NAMES[v], len, i,
                                 bitsf(x[o + i]), bitsf(ys[i]), bitsf(cis2_silu_pinned(x[o + i])));
                }
                assert_int_equal(bitsf(ye[len]), 0xEEEEEEEEu); /* nothing written past n */
                assert_int_equal(bitsf(yg[len]), 0xEEEEEEEEu);
            }
            cis2_exp_n(&X, x, ye, N);
            cis2_silu_n(&X, x, ys, N);
            memcpy(yg, x, sizeof yg);
            cis2_gelu_n(&X, yg, yg, N); /* in place, as the MLP runs it */
            memcpy(yi, x, sizeof yi);
            cis2_exp_n(&X, yi, yi, N); /* in place, as softmax runs it */
            for (size_t i = 0; i < N; i++) {
                uint32_t we = bitsf(cis2_exp_pinned(x[i])), ws = bitsf(cis2_silu_pinned(x[i]));
                if (bitsf(ye[i]) != we || bitsf(yi[i]) != we)
                    fail_msg("%s: exp_n(0x%08X) = 0x%08X / in place 0x%08X, scalar 0x%08X", NAMES[v],
                             bitsf(x[i]), bitsf(ye[i]), bitsf(yi[i]), we);
                if (bitsf(ys[i]) != ws)
                    fail_msg("%s: silu_n(0x%08X) = 0x%08X, scalar 0x%08X", NAMES[v], bitsf(x[i]), bitsf(ys[i]), ws);
                uint32_t wg = bitsf(cis2_gelu_tanh_pinned(x[i]));
                if (bitsf(yg[i]) != wg)
                    fail_msg("%s: gelu_n(0x%08X) in place = 0x%08X, scalar 0x%08X", NAMES[v], bitsf(x[i]), bitsf(yg[i]), wg);
            }
            compared++;
        }
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    print_message("exp/silu/gelu compared: %d rounds of %d values x variants\n", compared, N);
}

/* The same over a sweep of the whole binary32 line: 2^24 bit patterns, one
 * in every 256 (the low byte varied), every sign, exponent and NaN class. */
static void test_exp_silu_sweep(void **state)
{
    (void)state;
    enum { C = 4096 };
    static float x[C], ye[C], ys[C], yg[C];
    for (size_t v = 0; v < NNAMES; v++) {
        if (!cis2_kernel_available(NAMES[v])) continue;
        cis2_error err = {0};
        assert_int_equal(use_kernel(NAMES[v], &err), CIS2_OK);
        for (uint32_t b0 = 0; b0 < (1u << 24); b0 += C) {
            for (uint32_t i = 0; i < C; i++) {
                uint32_t b = b0 + i;
                x[i] = fbits(b << 8 | ((b * 0x9Du) & 0xFFu));
            }
            cis2_exp_n(&X, x, ye, C);
            cis2_silu_n(&X, x, ys, C);
            cis2_gelu_n(&X, x, yg, C);
            for (uint32_t i = 0; i < C; i++) {
                uint32_t we = bitsf(cis2_exp_pinned(x[i])), ws = bitsf(cis2_silu_pinned(x[i]));
                uint32_t wg = bitsf(cis2_gelu_tanh_pinned(x[i]));
                if (bitsf(ye[i]) != we || bitsf(ys[i]) != ws || bitsf(yg[i]) != wg)
                    fail_msg("%s: x 0x%08X: exp_n 0x%08X (scalar 0x%08X), silu_n 0x%08X (scalar 0x%08X), "
                             "gelu_n 0x%08X (scalar 0x%08X)", NAMES[v], bitsf(x[i]), bitsf(ye[i]), we, bitsf(ys[i]), ws,
                             bitsf(yg[i]), wg);
            }
        }
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
}

static void test_select(void **state)
{
    (void)state;
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    assert_true(cis2_kernel_available(cis2_kernel_name(X.kern)));
    assert_int_equal(use_kernel("bogus", &err), CIS2_E_UNSUPPORTED);
    for (size_t v = 0; v < NNAMES; v++) {
        cis2_error e2 = {0};
        int rc = use_kernel(NAMES[v], &e2);
        if (cis2_kernel_available(NAMES[v])) {
            assert_int_equal(rc, CIS2_OK);
            assert_string_equal(cis2_kernel_name(X.kern), NAMES[v]);
        } else {
            assert_int_equal(rc, CIS2_E_UNSUPPORTED);
            assert_true(strlen(e2.msg) > 0);
        }
    }
#if defined(__x86_64__)
    assert_false(cis2_kernel_available("neon"));
    assert_true(cis2_kernel_available("avx2") || !__builtin_cpu_supports("avx2"));
#else
    assert_false(cis2_kernel_available("avx2"));
    assert_true(cis2_kernel_available("neon"));
#endif
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
}

struct pf_ctx {
    _Atomic int *hits;
    _Atomic int unpinned;
};
static void pf_fn(void *vctx, size_t i)
{
    struct pf_ctx *c = vctx;
    atomic_fetch_add(&c->hits[i], 1);
    if (!cis2_fpenv_is_pinned()) atomic_fetch_add(&c->unpinned, 1);
}

/* Contexts are explicit and independent (kernels.h): two threads, each
 * with its own context (every available variant in turn, its own pool of
 * 2 or 3 threads, or none), run matmuls at the same time and both get the
 * scalar reference's bits; nothing one sets reaches the other. */
struct ctx_run {
    const struct case_ *c;
    const float *ref;
    int threads, bad;
};
static void *ctx_thread(void *arg)
{
    struct ctx_run *r = arg;
    cis2_error err = {0};
    if (cis2_fpenv_pin(&err)) { r->bad = 1; return NULL; }
    cis2_ctx cx = cis2_ctx_solo();
    if (r->threads && cis2_pool_create(&cx.pool, r->threads, &err)) { r->bad = 1; return NULL; }
    size_t n = r->c->npos * r->c->rows;
    float *y = malloc(n * sizeof(float));
    for (int rep = 0; rep < 6 && y; rep++)
        for (size_t v = 0; v < NNAMES; v++) {
            if (!cis2_kernel_available(NAMES[v]) || cis2_kernel_find(NAMES[v], &cx.kern, &err)) continue;
            memset(y, 0xFF, n * sizeof(float));
            cis2_matmul(&cx, &r->c->m, r->c->x, r->c->npos, y);
            if (memcmp(y, r->ref, n * sizeof(float))) r->bad = 1;
        }
    free(y);
    cis2_pool_destroy(cx.pool);
    return NULL;
}

static void test_contexts_independent(void **state)
{
    (void)state;
    static const size_t shapes[][3] = {{576, 576, 1}, {300, 999, 16}, {192, 577, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct case_ c;
        make_case(&c, s % 2 ? CIS2_W_F32 : CIS2_W_BF16, shapes[s][0], shapes[s][1], shapes[s][2]);
        float *ref = malloc(c.npos * c.rows * sizeof(float));
        run_with("scalar", 1, &c.m, c.x, c.npos, ref);
        struct ctx_run r[2] = {{&c, ref, 2 + (int)s % 2, 0}, {&c, ref, s == 0 ? 0 : 2, 0}};
        pthread_t t[2];
        for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&t[k], NULL, ctx_thread, &r[k]), 0);
        for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
        for (int k = 0; k < 2; k++) assert_int_equal(r[k].bad, 0);
        free(ref);
        free_case(&c);
    }
}

/* parallel_for runs every index exactly once, on pinned threads. */
static void test_parallel_for(void **state)
{
    (void)state;
    cis2_error err = {0};
    static const size_t ns[] = {0, 1, 2, 3, 7, 64, 1000, 100000};
    for (int t = 1; t <= 5; t++) {
        assert_int_equal(use_threads(t, &err), CIS2_OK);
        for (size_t q = 0; q < sizeof ns / sizeof ns[0]; q++)
            for (int rep = 0; rep < 20; rep++) {
                struct pf_ctx c;
                c.hits = calloc(ns[q] + 1, sizeof(_Atomic int));
                atomic_init(&c.unpinned, 0);
                cis2_parallel_for(&X, ns[q], pf_fn, &c);
                for (size_t i = 0; i < ns[q]; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
                assert_int_equal(atomic_load(&c.unpinned), 0);
                free(c.hits);
            }
    }
    assert_int_equal(use_threads(0, &err), CIS2_OK); /* online CPUs */
    assert_true(cis2_pool_size(X.pool) >= 1);
    assert_int_equal(use_threads(1, &err), CIS2_OK);
}

static void test_pack_shapes(void **state)
{
    (void)state;
    cis2_error err = {0};
    cis2_pmat m;
    uint8_t b[4] = {0};
    assert_int_equal(cis2_pmat_pack(&X, &m, CIS2_W_BF16, b, 0, 0, &err), CIS2_OK); /* empty is fine */
    cis2_pmat_free(&m);
    assert_int_equal(cis2_pmat_pack(&X, &m, CIS2_W_BF16, b, SIZE_MAX / 4, SIZE_MAX / 8, &err), CIS2_E_NOMEM);
    /* padding lanes of the tail group are zero */
    uint16_t src[3 * 5];
    for (int k = 0; k < 15; k++) src[k] = 0x3F80;
    assert_int_equal(cis2_pmat_pack(&X, &m, CIS2_W_BF16, (const uint8_t *)src, 3, 5, &err), CIS2_OK);
    assert_int_equal(cis2_pmat_bytes(&m), 5 * CIS2_KG * 2);
    const uint16_t *d = m.data;
    for (size_t i = 0; i < 5; i++)
        for (size_t r = 0; r < CIS2_KG; r++) assert_int_equal(d[i * CIS2_KG + r], r < 3 ? 0x3F80 : 0);
    cis2_pmat_free(&m);
}

/* Weight memory (cis2_wmem): matrices carved from one 2 MiB-aligned
 * block, each 64-byte aligned, hold cis2_pmat_pack's bytes and its padding
 * zeros when packed group by group, and give the same products; a block
 * one byte short of cis2_wmem_need's sum refuses the last matrix; freeing
 * a carved matrix leaves the block (ASan would see a bad free). */
static void test_wmem(void **state)
{
    (void)state;
    static const size_t shapes[3][2] = {{33, 577}, {16, 64}, {130, 1001}};
    cis2_error err = {0};
    size_t total = 0;
    for (int k = 0; k < 3; k++) total += cis2_wmem_need(k == 1 ? CIS2_W_F32 : CIS2_W_BF16, shapes[k][0], shapes[k][1]);
    cis2_wmem a;
    assert_int_equal(cis2_wmem_init(&a, total, &err), CIS2_OK);
    assert_int_equal((uintptr_t)a.base % ((uintptr_t)2 << 20), 0);
    for (int k = 0; k < 3; k++) {
        cis2_wtype t = k == 1 ? CIS2_W_F32 : CIS2_W_BF16;
        size_t rows = shapes[k][0], cols = shapes[k][1], es = t == CIS2_W_BF16 ? 2 : 4;
        float *wide = malloc(rows * cols * sizeof(float));
        uint8_t *src = rnd_matrix(t, rows, cols, wide);
        cis2_pmat own, in;
        assert_int_equal(cis2_pmat_pack(&X, &own, t, src, rows, cols, &err), CIS2_OK);
        memset(a.base + a.used, 0xA5, a.cap - a.used); /* no help from zeroed memory */
        assert_int_equal(cis2_pmat_alloc_in(&in, &a, t, rows, cols, &err), CIS2_OK);
        assert_int_equal((uintptr_t)in.data % 64, 0);
        cis2_pmat_pack_groups(&X, &in, src, 0, rows);
        assert_int_equal(cis2_pmat_bytes(&in), cis2_pmat_bytes(&own));
        assert_memory_equal(in.data, own.data, (rows + CIS2_KG - 1) / CIS2_KG * CIS2_KG * cols * es);
        size_t npos = 19;
        float *x = malloc(npos * cols * sizeof(float)), *y1 = malloc(npos * rows * sizeof(float)),
              *y2 = malloc(npos * rows * sizeof(float));
        for (size_t i = 0; i < npos * cols; i++) x[i] = rnd_val();
        cis2_matmul(&X, &own, x, npos, y1);
        cis2_matmul(&X, &in, x, npos, y2);
        assert_memory_equal(y1, y2, npos * rows * sizeof(float));
        cis2_pmat_free(&in); /* borrowed: the block stays */
        assert_null(in.data);
        cis2_pmat_free(&own);
        free(x); free(y1); free(y2); free(src); free(wide);
    }
    assert_int_equal(a.used, total);
    cis2_wmem_free(&a);
    /* one byte short */
    assert_int_equal(cis2_wmem_init(&a, total, &err), CIS2_OK);
    a.cap = total - 1;
    cis2_pmat m;
    for (int k = 0; k < 2; k++)
        assert_int_equal(cis2_pmat_alloc_in(&m, &a, k == 1 ? CIS2_W_F32 : CIS2_W_BF16, shapes[k][0], shapes[k][1], &err),
                         CIS2_OK);
    assert_int_equal(cis2_pmat_alloc_in(&m, &a, CIS2_W_BF16, shapes[2][0], shapes[2][1], &err), CIS2_E_INTERNAL);
    cis2_wmem_free(&a);
}

/* ---------------- MXFP4 (kernels.h, at cis2_wtype) ---------------- */

/* The OCP Microscaling e2m1 values by code (sign bit 3, exponent bits 2..1
 * with bias 1, mantissa bit 0), written out here, not taken from the
 * library. */
static const double OCP_E2M1[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};

/* Element value by a second route: e2m1 times 2^(s-127) in double (exact),
 * then what one f32 multiply under §1.3 gives, written out: below 2^-126 a
 * signed zero (FTZ: only s = 1 with |code| = 0.5, 2^-127), beyond FLT_MAX
 * a signed infinity (s = 253, 254 with the large codes), else exact. */
static float mx_decode(unsigned code, unsigned s)
{
    double d = ldexp(OCP_E2M1[code], (int)s - 127);
    if (fabs(d) < 0x1p-126) return signbit(d) ? -0.0f : 0.0f;
    if (fabs(d) > FLT_MAX) return signbit(d) ? -INFINITY : INFINITY;
    return (float)d;
}

/* A scale byte in [1, 254]: mostly near 127 (a real checkpoint's range),
 * often one of the edges 1, 2, 127, 253, 254, sometimes anything. */
static uint8_t rnd_scale(void)
{
    static const uint8_t EDGE[] = {1, 2, 127, 253, 254};
    uint64_t r = rnd();
    switch (r % 16) {
    case 0: return EDGE[(r >> 8) % 5];
    case 1: return (uint8_t)(1 + (r >> 8) % 254);
    default: return (uint8_t)(118 + (r >> 8) % 13);
    }
}

/* A random MXFP4 matrix as the file gives it (blocks: rows x cols/2 bytes,
 * scales: rows x cols/32 bytes) and its elements by mx_decode, row-major. */
struct mx_src {
    size_t rows, cols;
    uint8_t *blocks, *scales;
    float *wide;
};

static void mx_make(struct mx_src *m, size_t rows, size_t cols)
{
    m->rows = rows; m->cols = cols;
    m->blocks = malloc(rows * cols / 2 + 1);
    m->scales = malloc(rows * cols / 32 + 1);
    m->wide = malloc(rows * cols * sizeof(float) + 4);
    assert_non_null(m->blocks); assert_non_null(m->scales); assert_non_null(m->wide);
    for (size_t k = 0; k < rows * cols / 2; k++) m->blocks[k] = (uint8_t)(rnd() >> 24);
    for (size_t k = 0; k < rows * cols / 32; k++) m->scales[k] = rnd_scale();
    for (size_t o = 0; o < rows; o++)
        for (size_t i = 0; i < cols; i++) {
            uint8_t byte = m->blocks[o * cols / 2 + i / 2];
            m->wide[o * cols + i] = mx_decode(i % 2 ? byte >> 4 : byte & 15u, m->scales[o * cols / 32 + i / 32]);
        }
}

static void mx_free(struct mx_src *m) { free(m->blocks); free(m->scales); free(m->wide); }

/* Packs m into p in row pieces of whole groups (the last piece ends at the
 * last row), the scales first or the blocks first, from odd addresses. */
static void mx_pack(const struct mx_src *m, cis2_pmat *p, int scales_first)
{
    cis2_error err = {0};
    assert_int_equal(cis2_pmat_alloc(p, CIS2_W_MXFP4, m->rows, m->cols, &err), CIS2_OK);
    memset(p->data, 0xA5, cis2_pmat_bytes(p)); /* no help from zeroed memory */
    size_t hb = m->cols / 2, sb = m->cols / 32;
    uint8_t *odd = malloc(m->rows * hb + 2);
    assert_non_null(odd);
    for (int part = 0; part < 2; part++) {
        int scales = (part == 0) == (scales_first != 0);
        for (size_t r = 0; r < m->rows;) {
            size_t n = CIS2_KG * (1 + rnd() % 3);
            if (n > m->rows - r) n = m->rows - r;
            if (scales) {
                memcpy(odd + 1, m->scales + r * sb, n * sb);
                cis2_pmat_pack_mxfp4_scales(&X, p, odd + 1, r / CIS2_KG, n);
            } else {
                memcpy(odd + 1, m->blocks + r * hb, n * hb);
                cis2_pmat_pack_mxfp4_blocks(&X, p, odd + 1, r / CIS2_KG, n);
            }
            r += n;
        }
    }
    free(odd);
}

/* y = the §5.1 loop over m's decoded rows, written out. */
static void mx_dot_rows(const struct mx_src *m, const float *x, size_t npos, float *y)
{
    for (size_t p = 0; p < npos; p++)
        for (size_t o = 0; o < m->rows; o++) {
            float acc = 0.0f;
            for (size_t i = 0; i < m->cols; i++) {
                float prod = m->wide[o * m->cols + i] * x[p * m->cols + i];
                acc = acc + prod;
            }
            y[p * m->rows + o] = acc;
        }
}

static void mx_cmp(const float *a, const float *b, size_t n, const char *what, const struct mx_src *m, size_t npos,
                   int threads)
{
    for (size_t k = 0; k < n; k++)
        if (bitsf(a[k]) != bitsf(b[k]))
            fail_msg("%s threads %d: mxfp4 %zux%zu npos %zu: y[%zu] (row %zu) = %08X, want %08X", what, threads,
                     m->rows, m->cols, npos, k, k % m->rows, bitsf(a[k]), bitsf(b[k]));
}

static const size_t MX_COLS[] = {32, 64, 96, 160, 576, 1024, 2880};
static const size_t MX_NPOS[] = {1, 3, 8, 17, 33};

/* The table itself against the e2m1 encoding, and cis2_pmat_row on a
 * matrix holding every code with every scale byte 1..254 (17 rows: a tail
 * group) against mx_decode, bit for bit (-0 and the flushed 2^-127
 * included). */
static void test_mxfp4_decode(void **state)
{
    (void)state;
    for (unsigned c = 0; c < 16; c++) {
        unsigned e = (c >> 1) & 3, mbit = c & 1;
        double v = e ? ldexp(1.0 + mbit / 2.0, (int)e - 1) : mbit / 2.0;
        if (c & 8) v = -v;
        assert_true(OCP_E2M1[c] == v && signbit(OCP_E2M1[c]) == signbit(v));
    }
    assert_int_equal(bitsf(mx_decode(1, 1)), 0x00000000u); /* 2^-127 flushes */
    assert_int_equal(bitsf(mx_decode(9, 1)), 0x80000000u);
    assert_int_equal(bitsf(mx_decode(2, 1)), 0x00800000u);
    assert_int_equal(bitsf(mx_decode(7, 254)), 0x7F800000u);
    assert_int_equal(bitsf(mx_decode(11, 254)), 0xFF400000u); /* -1.5 * 2^127, finite */
    struct mx_src m;
    size_t rows = 17, cols = 512;
    mx_make(&m, rows, cols);
    for (size_t o = 0; o < rows; o++)
        for (size_t b = 0; b < cols / 32; b++) {
            m.scales[o * cols / 32 + b] = (uint8_t)(1 + (o * 16 + b) % 254);
            unsigned rot = (unsigned)rnd() % 16;
            for (size_t j = 0; j < 16; j++) /* every code twice in each block */
                m.blocks[o * cols / 2 + b * 16 + j] = (uint8_t)(((2 * j + rot) % 16) | ((2 * j + 1 + rot) % 16) << 4);
            for (size_t i = b * 32; i < b * 32 + 32; i++) {
                uint8_t byte = m.blocks[o * cols / 2 + i / 2];
                m.wide[o * cols + i] = mx_decode(i % 2 ? byte >> 4 : byte & 15u, m.scales[o * cols / 32 + b]);
            }
        }
    for (int order = 0; order < 2; order++) {
        cis2_pmat p;
        mx_pack(&m, &p, order);
        float row[512];
        for (size_t o = 0; o < rows; o++) {
            cis2_pmat_row(&p, o, row);
            for (size_t i = 0; i < cols; i++)
                if (bitsf(row[i]) != bitsf(m.wide[o * cols + i]))
                    fail_msg("pmat_row %zu [%zu]: %08X, want %08X", o, i, bitsf(row[i]), bitsf(m.wide[o * cols + i]));
        }
        cis2_pmat_free(&p);
    }
    mx_free(&m);
}

/* The scalar reference against the decoded rows and the plain §5.1 loop:
 * odd row counts, every MX_COLS width, npos 1, 3, 8, 17, 33. */
static void test_mxfp4_scalar_vs_table(void **state)
{
    (void)state;
    size_t nonfinite = 0, total = 0;
    for (int it = 0; it < 40; it++) {
        struct mx_src m;
        size_t rows = ROWS[rnd() % 12], cols = MX_COLS[it % 7], npos = MX_NPOS[rnd() % 5];
        mx_make(&m, rows, cols);
        cis2_pmat p;
        mx_pack(&m, &p, it & 1);
        float *x = malloc(npos * cols * sizeof(float)), *y = malloc(npos * rows * sizeof(float)),
              *want = malloc(npos * rows * sizeof(float));
        for (size_t k = 0; k < npos * cols; k++) x[k] = rnd_val();
        mx_dot_rows(&m, x, npos, want);
        run_with("scalar", 1, &p, x, npos, y);
        mx_cmp(y, want, npos * rows, "scalar vs table", &m, npos, 1);
        for (size_t k = 0; k < npos * rows; k++) nonfinite += !isfinite(want[k]);
        total += npos * rows;
        free(x); free(y); free(want); cis2_pmat_free(&p); mx_free(&m);
    }
    print_message("mxfp4 scalar vs table: %zu outputs, %zu of them inf or NaN\n", total, nonfinite);
    assert_true(nonfinite < total / 2); /* the edges occur, but most sums stay finite */
}

/* Every variant and thread count equals the scalar reference bit for bit:
 * odd row counts (a tail group), npos 1..9 and 15, 16, 17, 33 (the
 * narrow, wide and transposed-x paths, whole and partial position
 * blocks). */
static void test_mxfp4_variants(void **state)
{
    (void)state;
    static const size_t NPOS[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33};
    /* first, shapes the pool splits, with column ranges (of the AVX2 and
     * AVX-512 tiles) that end inside a 1024- or 512-column block */
    static const size_t BIG[][3] = {{577, 2880, 1}, {130, 1024, 5}, {1000, 576, 9}, {65, 2880, 17},
                                    {49, 2080, 7}, {40, 2080, 33}, {33, 1056, 16}, {20, 544, 3}};
    int pairs = 0;
    for (int it = 0; it < 60; it++) {
        struct mx_src m;
        int big = it < 8;
        size_t rows = big ? BIG[it][0] : ROWS[rnd() % 12];
        size_t cols = big ? BIG[it][1] : MX_COLS[rnd() % 7];
        size_t npos = big ? BIG[it][2] : NPOS[it % 13];
        mx_make(&m, rows, cols);
        cis2_pmat p;
        mx_pack(&m, &p, it & 1);
        size_t n = npos * rows;
        float *x = malloc(npos * cols * sizeof(float)), *ref = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        for (size_t k = 0; k < npos * cols; k++) x[k] = rnd_val();
        run_with("scalar", 1, &p, x, npos, ref);
        for (size_t v = 1; v < NNAMES; v++) {
            if (!cis2_kernel_available(NAMES[v])) continue;
            for (int t = 1; t <= (it < 8 ? 4 : 1); t++) {
                memset(y, 0xFF, n * sizeof(float));
                run_with(NAMES[v], t, &p, x, npos, y);
                mx_cmp(y, ref, n, NAMES[v], &m, npos, t);
                pairs++;
            }
        }
        free(x); free(ref); free(y); cis2_pmat_free(&p); mx_free(&m);
    }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    assert_int_equal(use_threads(1, &err), CIS2_OK);
    print_message("mxfp4 variants compared: %d case-variant-thread triples\n", pairs);
}

/* Packing: scales first or blocks first, in pieces, give the same bytes as
 * cis2_pmat_pack's whole matrix (blocks then scales) and as packing into
 * a cis2_wmem, each over memory filled differently first (so every byte,
 * padding included, is written); cis2_pmat_bytes is 4.25 bits a weight;
 * widths that are not a multiple of 32 are refused. */
static void test_mxfp4_pack(void **state)
{
    (void)state;
    cis2_error err = {0};
    static const size_t shapes[][2] = {{1, 32}, {16, 64}, {17, 96}, {33, 576}, {130, 160}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], cols = shapes[s][1];
        struct mx_src m;
        mx_make(&m, rows, cols);
        cis2_pmat a, b, whole, in;
        mx_pack(&m, &a, 0);
        mx_pack(&m, &b, 1);
        uint8_t *src = malloc(rows * cols / 2 + rows * cols / 32);
        memcpy(src, m.blocks, rows * cols / 2);
        memcpy(src + rows * cols / 2, m.scales, rows * cols / 32);
        assert_int_equal(cis2_pmat_pack(&X, &whole, CIS2_W_MXFP4, src, rows, cols, &err), CIS2_OK);
        size_t bytes = (rows + 15) / 16 * (cols / 32) * CIS2_MX_TILE;
        assert_int_equal(cis2_pmat_bytes(&a), bytes);
        assert_int_equal(bytes * 8, (rows + 15) / 16 * 16 * cols * 17 / 4); /* 4.25 bits a weight */
        assert_memory_equal(a.data, b.data, bytes);
        assert_memory_equal(a.data, whole.data, bytes);
        cis2_wmem wm;
        size_t need = cis2_wmem_need(CIS2_W_MXFP4, rows, cols);
        assert_int_equal(need, (bytes + 63) / 64 * 64);
        assert_int_equal(cis2_wmem_init(&wm, need, &err), CIS2_OK);
        memset(wm.base, 0x5A, wm.cap);
        assert_int_equal(cis2_pmat_alloc_in(&in, &wm, CIS2_W_MXFP4, rows, cols, &err), CIS2_OK);
        cis2_pmat_pack_groups(&X, &in, src, 0, rows); /* blocks then scales, as cis2_pmat_pack */
        assert_memory_equal(in.data, whole.data, bytes);
        cis2_pmat_free(&in);
        cis2_wmem_free(&wm);
        cis2_pmat_free(&a); cis2_pmat_free(&b); cis2_pmat_free(&whole);
        free(src); mx_free(&m);
    }
    cis2_pmat m;
    assert_int_equal(cis2_pmat_alloc(&m, CIS2_W_MXFP4, 16, 48, &err), CIS2_E_FORMAT);
    assert_int_equal(cis2_pmat_alloc(&m, CIS2_W_MXFP4, 16, 31, &err), CIS2_E_FORMAT);
    assert_int_equal(cis2_wmem_need(CIS2_W_MXFP4, 16, 48), 0);
    assert_int_equal(cis2_pmat_alloc(&m, CIS2_W_MXFP4, 0, 0, &err), CIS2_OK); /* empty is fine */
    cis2_pmat_free(&m);
}

/* cis2_matmul_n over three MXFP4 matrices, and over an MXFP4, a bf16 and
 * an f32 matrix in one call (chunks spanning matrix boundaries), equals one
 * scalar cis2_matmul per matrix, for every variant and 1..4 threads. */
static void test_mxfp4_matmul_n(void **state)
{
    (void)state;
    static const size_t rows[3] = {192, 33, 577}, NPOS[] = {1, 3, 9, 17};
    for (int mixed = 0; mixed < 2; mixed++)
        for (size_t t = 0; t < sizeof NPOS / sizeof NPOS[0]; t++) {
            size_t npos = NPOS[t], cols = 576;
            struct mx_src ms[3];
            struct case_ cs[3];
            cis2_pmat pm[3];
            const cis2_pmat *w[3];
            float *ref[3], *y[3];
            float *x = malloc(npos * cols * sizeof(float));
            for (size_t k = 0; k < npos * cols; k++) x[k] = rnd_val();
            for (int k = 0; k < 3; k++) {
                if (mixed && k) {
                    make_case(&cs[k], k == 1 ? CIS2_W_BF16 : CIS2_W_F32, rows[k], cols, 1);
                    w[k] = &cs[k].m;
                } else {
                    mx_make(&ms[k], rows[k], cols);
                    mx_pack(&ms[k], &pm[k], k & 1);
                    w[k] = &pm[k];
                }
                ref[k] = malloc(npos * rows[k] * sizeof(float));
                y[k] = malloc(npos * rows[k] * sizeof(float));
                run_with("scalar", 1, w[k], x, npos, ref[k]);
            }
            for (size_t v = 0; v < NNAMES; v++) {
                if (!cis2_kernel_available(NAMES[v])) continue;
                for (int th = 1; th <= 4; th++) {
                    cis2_error err = {0};
                    assert_int_equal(use_kernel(NAMES[v], &err), CIS2_OK);
                    assert_int_equal(use_threads(th, &err), CIS2_OK);
                    for (int k = 0; k < 3; k++) memset(y[k], 0xFF, npos * rows[k] * sizeof(float));
                    cis2_matmul_n(&X, w, 3, x, npos, y);
                    for (int k = 0; k < 3; k++)
                        for (size_t q = 0; q < npos * rows[k]; q++)
                            if (bitsf(y[k][q]) != bitsf(ref[k][q]))
                                fail_msg("%s threads %d %s npos %zu matrix %d: y[%zu] = %08X, want %08X", NAMES[v], th,
                                         mixed ? "mixed" : "mxfp4", npos, k, q, bitsf(y[k][q]), bitsf(ref[k][q]));
                }
            }
            for (int k = 0; k < 3; k++) {
                if (mixed && k) free_case(&cs[k]);
                else { cis2_pmat_free(&pm[k]); mx_free(&ms[k]); }
                free(ref[k]); free(y[k]);
            }
            free(x);
        }
    cis2_error err = {0};
    assert_int_equal(use_kernel("auto", &err), CIS2_OK);
    assert_int_equal(use_threads(1, &err), CIS2_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_facts_matvec),     cmocka_unit_test(test_scalar_vs_dot_seq),
        cmocka_unit_test(test_variants_equal_scalar), cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_workers_pinned),   cmocka_unit_test(test_select),
        cmocka_unit_test(test_parallel_for),     cmocka_unit_test(test_pack_shapes),
        cmocka_unit_test(test_matmul_n),         cmocka_unit_test(test_attention_variants),
        cmocka_unit_test(test_softmax_rows),     cmocka_unit_test(test_row_forms),
        cmocka_unit_test(test_argmax_lanes),     cmocka_unit_test(test_wmem),
        cmocka_unit_test(test_contexts_independent),
        cmocka_unit_test(test_exp_silu_variants), cmocka_unit_test(test_exp_silu_sweep),
        cmocka_unit_test(test_mxfp4_decode),     cmocka_unit_test(test_mxfp4_scalar_vs_table),
        cmocka_unit_test(test_mxfp4_variants),   cmocka_unit_test(test_mxfp4_pack),
        cmocka_unit_test(test_mxfp4_matmul_n),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

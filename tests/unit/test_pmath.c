/*
 * test_pmath.c - the pinned math against the spec's and FACTS.md's golden
 * bit patterns (FACTS §3 op goldens, §4 small op vectors, spec §5.1, §6.1,
 * §6.6, §7.2).  Inputs come from arrays read through volatile so nothing
 * is constant-folded at compile time (where FTZ/DAZ would not apply).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cis2_toolkit.h"

static float F(uint32_t b) { volatile uint32_t vb = b; float f; uint32_t t = vb; memcpy(&f, &t, 4); return f; }
static uint32_t B(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static int setup(void **state)
{
    (void)state;
    cis2_error e = {0};
    return cis2_fpenv_pin(&e);
}

#define CHECK_BITS(fn, in, want)                                                                  \
    do {                                                                                          \
        uint32_t got_ = B(fn(F(in)));                                                             \
        if (got_ != (want)) fail_msg("%s(0x%08X) = 0x%08X, want 0x%08X", #fn, (in), got_, (want)); \
    } while (0)

typedef struct { uint32_t in, out; } pair;

static void test_exp(void **s)
{
    (void)s;
    static const pair v[] = {
        {0x33800000, 0x3F800000}, {0xB4200001, 0x3F7FFFFE}, {0x42AEAD6A, 0x7E8046AE}, {0x3F000005, 0x3FD30950},
        {0x3F800006, 0x402DF85C}, {0xC2800003, 0x114B4D72}, {0x3F800000, 0x402DF854}, {0xBF800000, 0x3EBC5AB2},
        {0x40A00000, 0x431469C5}, {0xC0A00000, 0x3BDCC9FF}, {0x41200000, 0x46AC14EE}, {0xC1200000, 0x383E6BCE},
        {0x41A00000, 0x4DE75844}, {0xC1A00000, 0x310DA433}, {0x42200000, 0x5C51106A}, {0xC2200000, 0x229CBC92},
        {0x42A00000, 0x792ABBCE}, {0xC2A00000, 0x05BFECBA}, {0x00000000, 0x3F800000}, {0x80000000, 0x3F800000},
        {0x00000001, 0x3F800000}, {0x42B00000, 0x7EF882B7}, {0x42B00001, 0x7F800000}, {0x42B17217, 0x7F800000},
        {0xC2B00000, 0x00000000}, {0xC2B00001, 0x00000000}, {0x3F000000, 0x3FD3094C},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) CHECK_BITS(cis2_exp_pinned, v[i].in, v[i].out);
}

static void test_ln(void **s)
{
    (void)s;
    static const pair v[] = {
        {0x00800186, 0xC2AEAC4A}, {0x3F000841, 0xBF316196}, {0x47C35000, 0x413834F1}, {0x49742400, 0x415D0C55},
        {0x3F800000, 0x00000000}, {0x40000000, 0x3F317218}, {0x00800000, 0xC2AEAC50}, {0x7F7FFFFF, 0x42B17218},
        {0x00000000, 0xFF800000}, {0x80000000, 0xFF800000}, {0x00000001, 0xFF800000}, {0xBF800000, 0x7FC00000},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) CHECK_BITS(cis2_ln_pinned, v[i].in, v[i].out);
}

static void test_silu(void **s)
{
    (void)s;
    static const pair v[] = {
        {0x3F000002, 0x3E9F5981}, {0x3F800000, 0x3F3B26A8}, {0xBF800000, 0xBE89B2B1}, {0x41851592, 0x41851592},
        {0x42800000, 0x42800000}, {0xC2800000, 0x944B4EA3}, {0xC2B00000, 0x83354DDC}, {0xC2B00001, 0x80000000},
        {0x00000000, 0x00000000}, {0x80000000, 0x80000000},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) CHECK_BITS(cis2_silu_pinned, v[i].in, v[i].out);
}

/* docs/models.md §M7.9: Gemma-3's GELU (tanh form), as tests/oracle/doc_reimpl.py
 * computes it from the document alone; a subnormal input reads as zero (DAZ). */
static void test_gelu_tanh(void **s)
{
    (void)s;
    static const pair v[] = {
        {0x3F000000, 0x3EB1016D}, {0x3F800000, 0x3F57585C}, {0xBF800000, 0xBE229E90}, {0x40200000, 0x401F08DC},
        {0xC0200000, 0xBC7723FE}, {0x40400000, 0x403FC468}, {0xC0400000, 0xBB6E614C}, {0x40800000, 0x407FFEDA},
        {0xC0800000, 0xB89350FD}, {0x3DCCCCCD, 0x3D5D1D05}, {0xBDCCCCCD, 0xBD3C7C96}, {0x3F3504F3, 0x3F099AF6},
        {0x41200000, 0x41200000}, {0xC0A00000, 0xB4761470}, {0xC1200000, 0x8223E47D}, {0xC1207A15, 0x81A55080},
        {0xC1207A16, 0x80000000}, {0xC1300000, 0x80000000}, {0x00000000, 0x00000000}, {0x80000000, 0x80000000},
        {0x7F800000, 0x7F800000}, {0xFF800000, 0x7FC00000}, {0x7FC00000, 0x7FC00000}, {0x00000001, 0x00000000},
        {0xFFC00001, 0x7FC00000},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) CHECK_BITS(cis2_gelu_tanh_pinned, v[i].in, v[i].out);
}

/* docs/models.md §M10.9: Qwen3.5's sigmoid and softplus, as a numpy float32
 * implementation of §M10.6's text (with doc_reimpl.py's exp_pinned and
 * ln_pinned, §1.3's FTZ applied to the quotient) computes them; each finite
 * nonzero output within 7e-8 relative of mpmath's 1 / (1 + e^-x) and
 * log1p(e^x).  A NaN comes back canonical; a subnormal input reads as zero
 * (DAZ). */
static void test_sigmoid_softplus(void **s)
{
    (void)s;
    static const pair sg[] = {
        {0x00000000, 0x3F000000}, {0x80000000, 0x3F000000}, {0x3F000000, 0x3F1F597F}, {0xBF000000, 0x3EC14D03},
        {0x3F800000, 0x3F3B26A8}, {0xBF800000, 0x3E89B2B1}, {0x40200000, 0x3F6C948F}, {0xC0200000, 0x3D9B5B88},
        {0x41200000, 0x3F7FFD06}, {0xC1200000, 0x383E6998}, {0xC1880000, 0x3331CF19}, {0xC1F00000, 0x29D2B707},
        {0x41A00000, 0x3F800000}, {0x41A00001, 0x3F800000}, {0xC2AE0000, 0x00B33687}, {0xC2AF0000, 0x00000000},
        {0xC2B00000, 0x00000000}, {0x42B10000, 0x3F800000}, {0xC0DCCCCD, 0x3A83F59F}, {0xC0133333, 0x3DBA9EAD},
        {0x3A83126F, 0x3F001062}, {0x7F800000, 0x3F800000}, {0xFF800000, 0x00000000}, {0x7FC00000, 0x7FC00000},
        {0xFFC00001, 0x7FC00000}, {0x00000001, 0x3F000000},
    };
    static const pair sp[] = {
        {0x00000000, 0x3F317218}, {0x80000000, 0x3F317218}, {0x3F000000, 0x3F795D1C}, {0xBF000000, 0x3EF2BA38},
        {0x3F800000, 0x3FA818F5}, {0xBF800000, 0x3EA063D6}, {0x40200000, 0x40250C88}, {0xC0200000, 0x3DA190F1},
        {0x41200000, 0x41200030}, {0xC1200000, 0x383E6AB2}, {0xC1880000, 0x3331CF18}, {0xC1F00000, 0x29D2B706},
        {0x41A00000, 0x41A00000}, {0x41A00001, 0x41A00001}, {0xC2AE0000, 0x00B33687}, {0xC2AF0000, 0x00000000},
        {0xC2B00000, 0x00000000}, {0x42B10000, 0x42B10000}, {0xC0DCCCCD, 0x3A8406A3}, {0xC0133333, 0x3DC3AD58},
        {0x3A83126F, 0x3F3192DF}, {0x7F800000, 0x7F800000}, {0xFF800000, 0x00000000}, {0x7FC00000, 0x7FC00000},
        {0xFFC00001, 0x7FC00000}, {0x00000001, 0x3F317218},
    };
    for (size_t i = 0; i < sizeof sg / sizeof sg[0]; i++) CHECK_BITS(cis2_sigmoid_pinned, sg[i].in, sg[i].out);
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) CHECK_BITS(cis2_softplus_pinned, sp[i].in, sp[i].out);
}

static void test_sin_cos(void **s)
{
    (void)s;
    static const struct { uint32_t x, sn, cs; } v[] = {
        {0x45034E6F, 0x3F3BC37A, 0xBF2E0390}, {0x458BE628, 0x33F7F000, 0xBF800000},
        {0x467D9F8D, 0x3F29198C, 0xBF40337A}, {0x474D246F, 0x3F800000, 0xB28B6000},
        {0x47CD246F, 0xB30B6000, 0xBF800000}, {0x47FF31CE, 0x3F3260D2, 0x3F379F5A},
        {0x4943998D, 0x3F800000, 0x33DD4000}, {0x3F800000, 0x3F576AA5, 0x3F0A5140},
        {0x41980000, 0x3E197969, 0x3F7D1BBF}, {0x43C80000, 0xBF59D5D9, 0xBF0679D2},
        {0x477FFF00, 0x3F7B3849, 0x3E44F5D5}, {0x497FFFF0, 0xBF1D9959, 0x3F49BD22},
        {0x40400000, 0x3E1081C3, 0xBF7D7026},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        CHECK_BITS(cis2_sin_pinned, v[i].x, v[i].sn);
        CHECK_BITS(cis2_cos_pinned, v[i].x, v[i].cs);
    }
    /* FACTS §1.6: sin(-0.0) and sin(subnormal) are +0.0 */
    CHECK_BITS(cis2_sin_pinned, 0x80000000u, 0x00000000u);
    CHECK_BITS(cis2_sin_pinned, 0x00000001u, 0x00000000u);
    CHECK_BITS(cis2_sin_pinned, 0x80000001u, 0x00000000u);
    CHECK_BITS(cis2_cos_pinned, 0x00000000u, 0x3F800000u);
}

static void test_rsqrt(void **s)
{
    (void)s;
    static const pair v[] = {{0x41C00000, 0x3E5105EB}, {0x42800000, 0x3E000000}, {0x42900000, 0x3DF15BF0},
                             {0x42C00000, 0x3DD105EB}, {0x42E00000, 0x3DC18490}, {0x43080000, 0x3DAF9D54}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) CHECK_BITS(cis2_rsqrt_cr, v[i].in, v[i].out);
}

static void test_ldexp_frexp(void **s)
{
    (void)s;
    assert_int_equal(B(cis2_ldexp_exact(F(0x3F800000), 3)), 0x41000000);   /* 1 * 2^3 */
    assert_int_equal(B(cis2_ldexp_exact(F(0xBF800000), -127)), 0x00000000); /* underflow -> +0 */
    assert_int_equal(B(cis2_ldexp_exact(F(0xBF800000), 128)), 0xFF800000);  /* overflow keeps sign */
    assert_int_equal(B(cis2_ldexp_exact(F(0x80000000), 5)), 0x80000000);    /* zero returned as is */
    int e;
    assert_int_equal(B(cis2_frexp_exact(F(0x41000000), &e)), 0x3F000000);   /* 8 = 0.5 * 2^4 */
    assert_int_equal(e, 4);
    assert_int_equal(B(cis2_frexp_exact(F(0xC0400000), &e)), 0xBF400000);   /* -3 = -0.75 * 2^2 */
    assert_int_equal(e, 2);
}

static void test_argmax(void **s)
{
    (void)s;
    float v[] = {1, 3, 3, 2, 3, -1};
    assert_int_equal(cis2_argmax(v, 6), 1); /* FACTS §3: strict >, first maximum */
    float w[] = {-5, -5};
    assert_int_equal(cis2_argmax(w, 2), 0);
}

static void test_fpenv(void **s)
{
    (void)s;
    cis2_error e = {0};
    assert_true(cis2_fpenv_is_pinned());
    assert_int_equal(cis2_fpenv_selftest(&e), CIS2_OK);
}

static void test_dot_seq(void **s)
{
    (void)s;
    float a[3] = {F(0x4CBEBC20), F(0x3F800000), F(0xCCBEBC20)}, b[3] = {F(0x3F800000), F(0x3F800000), F(0x3F800000)};
    assert_int_equal(B(cis2_dot_seq(a, b, 3)), 0x00000000); /* §5.1: 1e8 + 1 - 1e8 == 0 in this order */
    float c[3] = {F(0x4CBEBC20), F(0xCCBEBC20), F(0x3F800000)};
    assert_int_equal(B(cis2_dot_seq(c, b, 3)), 0x3F800000); /* the other order gives 1: order matters */
    float sq[3] = {F(0x4CBEBC20), F(0x3F800000), F(0xCCBEBC20)};
    assert_int_equal(B(cis2_sum_seq(sq, 3)), 0x00000000);
}

static void load(float *out, const uint32_t *bits, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = F(bits[i]);
}

static void expect(const float *got, const uint32_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (B(got[i]) != want[i]) fail_msg("%s[%zu] = 0x%08X, want 0x%08X", what, i, B(got[i]), want[i]);
}

static void test_rmsnorm(void **s)
{
    (void)s;
    static const uint32_t xb[8] = {0x3F800000, 0xC0000000, 0x40400000, 0x3F000000,
                                   0xBF000000, 0x40800000, 0xBFC00000, 0x40100000};
    static const uint32_t wb[8] = {0x3F000000, 0x3FC00000, 0x3F800000, 0x40000000,
                                   0x3E800000, 0x3F800000, 0x40400000, 0x3F400000};
    static const uint32_t want[8] = {0x3E6B80D1, 0xBFB0A09D, 0x3FB0A09D, 0x3EEB80D1,
                                     0xBD6B80D1, 0x3FEB80D1, 0xC0047876, 0x3F46B4B1};
    float x[8], w[8], out[8];
    load(x, xb, 8);
    load(w, wb, 8);
    cis2_rmsnorm(x, w, F(0x3727C5AC), 8, out);
    expect(out, want, 8, "rmsnorm");
    /* FACTS §3: (x*inv)*w association; the wrong x*(inv*w) would give the bracketed values */
    static const uint32_t assoc[3][5] = {{0x3EFF136D, 0x409CE023, 0x3F882890, 0x402645A5, 0x402645A6},
                                         {0xBFB48836, 0x3FFAD914, 0x3F6E2B49, 0xC02493D5, 0xC02493D6},
                                         {0x3E0DF647, 0x3E71F232, 0x3F8CEF0D, 0x3D13B9C5, 0x3D13B9C6}};
    for (int i = 0; i < 3; i++) {
        volatile float xx = F(assoc[i][0]), inv = F(assoc[i][1]), ww = F(assoc[i][2]);
        float sc = xx * inv;
        float right = sc * ww;
        float iw = inv * ww;
        float wrong = xx * iw;
        assert_int_equal(B(right), assoc[i][3]);
        assert_int_equal(B(wrong), assoc[i][4]);
    }
}

static void test_matvec(void **s)
{
    (void)s;
    static const uint32_t rows[9] = {0x4CBEBC20, 0x3F800000, 0xCCBEBC20, 0x3F800000, 0x40000000,
                                     0x40400000, 0x3F000000, 0xBFC00000, 0x40800000};
    static const uint32_t want[3] = {0x00000000, 0x40C00000, 0x40400000};
    float w[9], x[3] = {F(0x3F800000), F(0x3F800000), F(0x3F800000)}, y[3];
    load(w, rows, 9);
    for (int o = 0; o < 3; o++) y[o] = cis2_dot_seq(w + 3 * o, x, 3);
    expect(y, want, 3, "matvec");
}

static void test_softmax(void **s)
{
    (void)s;
    static const uint32_t in[6] = {0x3FC00000, 0xBF000000, 0x3F000000, 0x3FC00000, 0xC0400000, 0x00000000};
    static const uint32_t want[6] = {0x3EBB08FC, 0x3D4A7FE4, 0x3E099CDC, 0x3EBB08FC, 0x3B84FA38, 0x3DA6EEC5};
    float v[6];
    load(v, in, 6);
    cis2_softmax_seq(v, 6);
    expect(v, want, 6, "softmax");
}

static void test_attention(void **s)
{
    (void)s;
    static const uint32_t qb[8] = {0x3F800000, 0x3F000000, 0xBF000000, 0x40000000,
                                   0xBF800000, 0x3E800000, 0x3F400000, 0xC0000000};
    static const uint32_t kb[24] = {0x3F000000, 0x3F800000, 0x3F800000, 0xBF800000, 0x3F000000, 0x3F000000,
                                    0xBF000000, 0x3F800000, 0x3F800000, 0xBF800000, 0x3F000000, 0x3F000000,
                                    0x3F800000, 0xBF000000, 0x3F000000, 0x3F000000, 0xBF000000, 0x3F000000,
                                    0x3F800000, 0x3F800000, 0xBF800000, 0x3F800000, 0x3F000000, 0xBF000000};
    static const uint32_t vb[24] = {0x3F800000, 0, 0, 0x3F800000, 0x3F000000, 0x3F000000, 0xBF000000, 0,
                                    0, 0x3F800000, 0x3F000000, 0, 0x3F800000, 0, 0x3F000000, 0x3F000000,
                                    0x3F000000, 0x3F000000, 0x3F800000, 0xBF000000, 0, 0x3F800000, 0, 0x3F800000};
    static const uint32_t want[8] = {0x3EE07710, 0x3F0FC478, 0x3F5F2076, 0xBEB2D98A,
                                     0x3E429008, 0x3F4F5BFE, 0x3D7C477E, 0x3F5F2076};
    float q[8], k[24], v[24], sc[3], out[8];
    load(q, qb, 8);
    load(k, kb, 24);
    load(v, vb, 24);
    cis2_attend_head(q, k, v, 8, 3, 8, sc, out);
    expect(out, want, 8, "attention");
}

/* The blocked-key attention equals the row-layout one bit for bit. */
static void test_attention_blocked(void **s)
{
    (void)s;
    uint64_t st = 0x9E3779B97F4A7C15ull;
    const size_t hd = 24, lens[] = {1, 2, 15, 16, 17, 33, 100};
    static float q[24], k[112 * 24], v[112 * 24], kt[7 * 16 * 24], s1[112], s2[112], o1[24], o2[24];
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        size_t len = lens[t];
        for (size_t i = 0; i < hd + 2 * 112 * hd; i++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            float x = (float)(int32_t)(st >> 40) / 4096.0f; /* about +-2000, so cancellation happens */
            if (i < hd) q[i] = x; else if (i < hd + 112 * hd) k[i - hd] = x / 1024.0f; else v[i - hd - 112 * hd] = x;
        }
        memset(kt, 0, sizeof kt);
        for (size_t j = 0; j < len; j++)
            for (size_t d = 0; d < hd; d++) kt[(j / 16) * 16 * hd + d * 16 + j % 16] = k[j * hd + d];
        cis2_attend_head(q, k, v, hd, len, hd, s1, o1);
        cis2_attend_head_kt(q, kt, v, hd, len, hd, s2, o2);
        for (size_t j = 0; j < len; j++) assert_int_equal(B(s1[j]), B(s2[j]));
        for (size_t d = 0; d < hd; d++) assert_int_equal(B(o1[d]), B(o2[d]));
    }
}

/* The 4-lane exp/silu give the scalar bits on every class of input. */
static void test_exp_silu_vector(void **s)
{
    (void)s;
    enum { N = 4099 };
    static float x[N], ye[N], ys[N];
    static const uint32_t edge[] = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
                                    0x42B00000, 0x42B00001, 0x42AFFFFF, 0xC2B00000, 0xC2B00001, 0xC2AFFFFF,
                                    0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7F7FFFFF,
                                    0xFF7FFFFF, 0x3F000000, 0xBF000000, 0x42800000, 0xC2800000, 0x3F800000};
    uint64_t st = 0x243F6A8885A308D3ull;
    for (int rep = 0; rep < 64; rep++) {
        for (size_t i = 0; i < N; i++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            uint32_t b = (uint32_t)st;
            if (i < sizeof edge / sizeof edge[0]) b = edge[i];
            else if (rep % 2) { /* finite values in the interesting range */
                float u = (float)(int32_t)(b >> 8) / 65536.0f; /* about +-128 */
                memcpy(&b, &u, 4);
            }
            x[i] = F(b);
        }
        cis2_exp_pinned_n(x, ye, N);
        cis2_silu_pinned_n(x, ys, N);
        for (size_t i = 0; i < N; i++) {
            uint32_t we = B(cis2_exp_pinned(x[i])), ws = B(cis2_silu_pinned(x[i]));
            if (B(ye[i]) != we) fail_msg("exp_n(0x%08X) = 0x%08X, scalar 0x%08X", B(x[i]), B(ye[i]), we);
            if (B(ys[i]) != ws) fail_msg("silu_n(0x%08X) = 0x%08X, scalar 0x%08X", B(x[i]), B(ys[i]), ws);
        }
    }
}

static void test_rope_tables(void **s)
{
    (void)s;
    static const uint32_t inv_want[4] = {0x3F800000, 0x3DCCCCCC, 0x3C23D70A, 0x3A83126E};
    static const uint32_t cos_want[4] = {0xBF7D7026, 0x3F7490EE, 0x3F7FE283, 0x3F7FFFB5};
    static const uint32_t sin_want[4] = {0x3E1081C3, 0x3E974E6C, 0x3CF5B91F, 0x3B449B92};
    float inv[4], c[4], sn[4];
    cis2_rope_inv_freq(F(0x461C4000) /* 10000 */, 8, inv);
    expect(inv, inv_want, 4, "inv_freq");
    volatile size_t pos = 3;
    for (int i = 0; i < 4; i++) {
        float angle = (float)pos * inv[i];
        c[i] = cis2_cos_pinned(angle);
        sn[i] = cis2_sin_pinned(angle);
    }
    expect(c, cos_want, 4, "cos");
    expect(sn, sin_want, 4, "sin");
    /* rotation of one head per §7.4 against a hand computation */
    float head[8] = {1, 2, 3, 4, 5, 6, 7, 8}, h0[8];
    memcpy(h0, head, sizeof head);
    cis2_rope_rotate(head, c, sn, 4);
    for (int i = 0; i < 4; i++) {
        float t1 = h0[i] * c[i], nx = -h0[i + 4], t2 = nx * sn[i], t3 = h0[i + 4] * c[i], t4 = h0[i] * sn[i];
        assert_int_equal(B(head[i]), B(t1 + t2));
        assert_int_equal(B(head[i + 4]), B(t3 + t4));
    }
}

static void test_digests(void **s)
{
    (void)s;
    uint8_t d[32];
    char hex[65];
    cis2_table_digest(d);
    cis2_hex(d, 32, hex);
    assert_string_equal(hex, "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d"); /* §6.6 */
    float inv[32];
    cis2_rope_inv_freq(F(0x47C35000), 64, inv);
    cis2_inv_freq_table_digest(inv, 32, d);
    cis2_hex(d, 32, hex);
    assert_string_equal(hex, "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12"); /* §7.2 */
    /* the eps cast of §2.3 */
    volatile double eps = 1e-05;
    assert_int_equal(B((float)eps), 0x3727C5AC);
    uint8_t back[32];
    assert_int_equal(cis2_unhex32(hex, back), 0);
    assert_memory_equal(back, d, 32);
    assert_int_equal(cis2_unhex32("zz", back), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fpenv),     cmocka_unit_test(test_exp),        cmocka_unit_test(test_ln),
        cmocka_unit_test(test_silu),      cmocka_unit_test(test_gelu_tanh), cmocka_unit_test(test_sigmoid_softplus),      cmocka_unit_test(test_sin_cos),    cmocka_unit_test(test_rsqrt),
        cmocka_unit_test(test_ldexp_frexp), cmocka_unit_test(test_argmax),   cmocka_unit_test(test_dot_seq),
        cmocka_unit_test(test_rmsnorm),   cmocka_unit_test(test_matvec),     cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_attention), cmocka_unit_test(test_attention_blocked), cmocka_unit_test(test_exp_silu_vector), cmocka_unit_test(test_rope_tables), cmocka_unit_test(test_digests),
    };
    return cmocka_run_group_tests_name("pmath", tests, setup, NULL);
}

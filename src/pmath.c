/*
 * pmath.c - the pinned arithmetic of CIS-2 v0.3b.
 *
 * Implements §5.1 dot_seq, §5.3 sum_seq, §6.1 rsqrt_cr, §6.2 exp_pinned
 * (with §6.2.1 ldexp_exact), §6.3 sin/cos_pinned (f64-staged octant
 * reduction, minimax polynomials), §6.4 silu_pinned, §6.5 ln_pinned (with
 * §6.5.1 frexp_exact), §7.1 the RoPE inv_freq table, §6.6 table_digest,
 * §7.2 inv_freq_table_digest and §11.2 argmax; and the forward pass's
 * faster forms of §8 rmsnorm, §9.3 softmax, §7.4 RoPE, §11.2 argmax and
 * the element-wise adds and products (several rows' serial chains side by
 * side in SIMD lanes, element-wise steps in 4 lanes), each beside the
 * plain function that tests compare it with.
 *
 * Rules kept here: every constant is a bit pattern, never a decimal literal;
 * every multiply and add is its own statement, in the spec's order (the
 * build has -ffp-contract=off as a second line of defence); no libm call
 * (floor/round/sqrt are done by bit arithmetic or the IEEE sqrt builtin).
 */
#include "pmath.h"

#include "digest.h"

#include <stdlib.h>

/* §6.2 exp's constants and its lanes (exp_v4, silu_n_v4, gelu_n_v4): one definition
 * for every width (pmath_lanes.h) */
#define LANES 4
#define LN(f) f##_v4
#include "pmath_lanes.h"
#undef LN
#undef LANES

/* §6.3 sin/cos constants */
#define PI_2_F64 0x3FF921FB54442D18ull
#define SIN_C0 0xBE2AAAA3u
#define SIN_C1 0x3C08839Eu
#define SIN_C2 0xB94CA1F9u
#define COS_C0 0x3D2AAAA5u
#define COS_C1 0xBAB6061Au
#define COS_C2 0x37CCF5CEu
/* §6.5 ln constants */
#define LOG_SQRTHF 0x3F3504F3u
#define LOG_Q1 0xB95E8083u
#define LOG_Q2 0x3F318000u
static const uint32_t LOG_P[9] = {0x3D9021BBu, 0xBDEBD1B8u, 0x3DEF251Bu,
                                  0xBDFE5D4Fu, 0x3E11E9BFu, 0xBE2AAE50u,
                                  0x3E4CCEADu, 0xBE7FFFFCu, 0x3EAAAAAAu};

/* Four lanes of binary32 for the generic attention halves (below): GCC/Clang
 * vector extensions, element-wise IEEE ops (a*b and a+b stay separate with
 * -ffp-contract=off), lowered to SSE/AVX/NEON as the target allows.  Every
 * lane computes exactly the scalar operations, so the bits are the scalar
 * bits. */
typedef float v4f __attribute__((vector_size(16)));

static v4f v4_load(const float *p) { v4f r; memcpy(&r, p, sizeof r); return r; }

float dot_seq(const float *a, const float *b, size_t n) /* §5.1 */
{
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float p = a[i] * b[i];
        acc = acc + p;
    }
    return acc;
}

float sum_seq(const float *a, size_t n) /* §5.3 */
{
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++) acc = acc + a[i];
    return acc;
}

float rsqrt_cr(float x) /* §6.1: two correctly rounded IEEE ops */
{
    float s = __builtin_sqrtf(x);
    return f32_from_bits(F_ONE) / s;
}

float ldexp_exact(float x, int k) /* §6.2.1 */
{
    if (x == 0.0f) return x;
    uint32_t b = f32_bits(x);
    int e = (int)((b >> 23) & 0xFF) + k;
    if (e <= 0) return 0.0f;
    if (e >= 0xFF) return f32_from_bits((b & 0x80000000u) | 0x7F800000u);
    return f32_from_bits((b & ~(0xFFu << 23)) | ((uint32_t)e << 23));
}

/* floor() of an f32 whose magnitude is below 2^23 (exact, no libm). */
static float floor_small(float z)
{
    float t = (float)(int32_t)z; /* truncation toward zero, exact here */
    if (t > z) t = t - f32_from_bits(F_ONE);
    return t;
}

float exp_pinned(float x) /* §6.2 */
{
    if (x != x) return x;                                 /* 1. NaN */
    if (x > f32_from_bits(EXP_HI)) return f32_from_bits(0x7F800000u); /* 2. */
    if (x < f32_from_bits(EXP_LO)) return 0.0f;           /* 3. */
    float t = x * f32_from_bits(EXP_LOG2E);               /* 4. */
    float z0 = t + f32_from_bits(F_HALF);
    float k = floor_small(z0);
    float kc1 = k * f32_from_bits(EXP_C1);
    float r0 = x - kc1;
    float kc2 = k * f32_from_bits(EXP_C2);
    float r = r0 - kc2;
    float r2 = r * r;                                     /* 5. */
    float poly = f32_from_bits(EXP_P[0]);
    for (int i = 1; i <= 5; i++) {
        float m = poly * r;
        poly = m + f32_from_bits(EXP_P[i]);
    }
    float m1 = poly * r2;
    float poly2 = m1 + r;
    float result = poly2 + f32_from_bits(F_ONE);
    return ldexp_exact(result, (int)k);              /* 6. */
}

float frexp_exact(float x, int *exponent) /* §6.5.1 */
{
    uint32_t b = f32_bits(x);
    int e = (int)((b >> 23) & 0xFF);
    *exponent = e - 126;
    return f32_from_bits((b & 0x807FFFFFu) | (126u << 23));
}

float ln_pinned(float x) /* §6.5 */
{
    uint32_t b = f32_bits(x);
    if ((b & 0x7F800000u) == 0) /* ±0 and subnormals (DAZ reads them as 0) */
        return f32_from_bits(0xFF800000u);                 /* 2. -Inf */
    if (x != x || (b & 0x80000000u))                       /* 1. NaN, x < 0 */
        return f32_from_bits(CIS2_QNAN_BITS);
    if (b == 0x7F800000u) return x; /* +Inf: outside §6.5's finite domain */
    int e;
    float m = frexp_exact(x, &e);                     /* 3. */
    const float one = f32_from_bits(F_ONE);
    if (m < f32_from_bits(LOG_SQRTHF)) {                   /* 4. */
        e = e - 1;
        float mm = m + m;
        m = mm - one;
    } else {
        m = m - one;
    }
    float z = m * m;                                       /* 5. */
    float poly = f32_from_bits(LOG_P[0]);
    for (int i = 1; i <= 8; i++) {
        float t = poly * m;
        poly = t + f32_from_bits(LOG_P[i]);
    }
    float y = poly * m;
    y = y * z;
    float fe = (float)e;
    float t1 = fe * f32_from_bits(LOG_Q1);
    y = y + t1;
    float half_z = f32_from_bits(F_HALF) * z;
    y = y - half_z;
    float result = m + y;
    float t2 = fe * f32_from_bits(LOG_Q2);
    result = result + t2;
    return result;
}

/* f64::round(): nearest integer, ties away from zero, sign of zero kept. */
static double round_half_away(double q)
{
    const double two52 = 4503599627370496.0; /* 2^52: exact power of two */
    uint64_t qb;
    memcpy(&qb, &q, 8);
    double aq = q < 0 ? -q : q;
    if (!(aq < two52)) return q; /* already integral (or NaN/Inf) */
    double t = (double)(int64_t)aq; /* trunc, exact */
    double frac = aq - t;           /* exact for |q| < 2^52 */
    if (frac >= 0.5) t = t + 1.0;
    uint64_t tb;
    memcpy(&tb, &t, 8);
    tb |= qb & 0x8000000000000000ull; /* copy the sign, as f64::round does */
    memcpy(&t, &tb, 8);
    return t;
}

/* §6.3 reduction: r = x - k*pi/2 in f64, then one narrowing; quadrant k mod 4. */
static float reduce_octant(float x, int *quadrant)
{
    double xd = (double)x;
    double pi_2 = f64_from_bits(PI_2_F64);
    double q = xd / pi_2;
    double k = round_half_away(q);
    double khi = k * pi_2;
    double r64 = xd - khi;
    double ak = k < 0 ? -k : k;
    int64_t ki = ak < 4611686018427387904.0 /* 2^62 */ ? (int64_t)k : 0;
    /* beyond 2^62, k is a multiple of 2^10, so k mod 4 == 0 */
    *quadrant = (int)(((ki % 4) + 4) % 4);
    return (float)r64;
}

static float sin_poly(float r) /* §6.3 */
{
    float r2 = r * r;
    float inner = f32_from_bits(SIN_C2);
    float t = inner * r2;
    inner = t + f32_from_bits(SIN_C1);
    t = inner * r2;
    inner = t + f32_from_bits(SIN_C0);
    float r3 = r2 * r;
    float term = inner * r3;
    return r + term;
}

static float cos_poly(float r) /* §6.3 */
{
    float r2 = r * r;
    float inner = f32_from_bits(COS_C2);
    float t = inner * r2;
    inner = t + f32_from_bits(COS_C1);
    t = inner * r2;
    inner = t + f32_from_bits(COS_C0);
    float r4 = r2 * r2;
    float term = inner * r4;
    float half_r2 = f32_from_bits(F_HALF) * r2;
    float step1 = f32_from_bits(F_ONE) - half_r2;
    return step1 + term;
}

static int finite_f32(float x) { return (f32_bits(x) & 0x7F800000u) != 0x7F800000u; }

float sin_pinned(float x) /* §6.3 */
{
    if (!finite_f32(x)) return f32_from_bits(CIS2_QNAN_BITS);
    int q;
    float r = reduce_octant(x, &q);
    switch (q) {
    case 0: return sin_poly(r);
    case 1: return cos_poly(r);
    case 2: return -sin_poly(r);
    default: return -cos_poly(r);
    }
}

float cos_pinned(float x) /* §6.3 */
{
    if (!finite_f32(x)) return f32_from_bits(CIS2_QNAN_BITS);
    int q;
    float r = reduce_octant(x, &q);
    switch (q) {
    case 0: return cos_poly(r);
    case 1: return -sin_poly(r);
    case 2: return -cos_poly(r);
    default: return sin_poly(r);
    }
}

float silu_pinned(float x) /* §6.4 */
{
    float neg = -x;
    float e = exp_pinned(neg);
    float denom = f32_from_bits(F_ONE) + e;
    float r = x / denom;
    /* -inf / inf is the ISA's default NaN (x86 0xFFC00000): make it canonical */
    return r != r ? f32_from_bits(CIS2_QNAN_BITS) : r;
}

/* docs/models.md §M7.5: transformers' gelu_pytorch_tanh,
 * 0.5 x (1 + tanh(B (x + K x^3))), computed as the identical
 * x / (1 + exp(-2 B (x + K x^3))), so that §6.2's exp_pinned is the one
 * transcendental function and no tanh needs pinning. */
float gelu_tanh_pinned(float x) /* GELU_B, GELU_K: pmath_lanes.h */
{
    float x2 = x * x;
    float x3 = x2 * x;
    float a = f32_from_bits(GELU_K) * x3;
    float b = x + a;
    float u = f32_from_bits(GELU_B) * b;
    float t = u + u; /* 2u, exact (or +-inf) */
    float e = exp_pinned(-t);
    float denom = f32_from_bits(F_ONE) + e;
    float r = x / denom;
    return r != r ? f32_from_bits(CIS2_QNAN_BITS) : r; /* NaN in, or -inf / inf: canonical */
}


/* docs/models.md §M10.6: transformers' sigmoid, as §6.4 builds silu:
 * 1 / (1 + exp_pinned(-x)), one correctly rounded division. */
float sigmoid_pinned(float x)
{
    float neg = -x;
    float e = exp_pinned(neg);
    float denom = f32_from_bits(F_ONE) + e;
    float r = f32_from_bits(F_ONE) / denom;
    return r != r ? f32_from_bits(CIS2_QNAN_BITS) : r; /* a NaN x: canonical */
}

/* docs/models.md §M10.6: torch's softplus (beta 1, threshold 20): x above
 * 20, else ln(1 + exp(x)), with ln(1 + e) computed as ln(u) * (e / (u - 1))
 * for u = 1 + e (exactly e where u rounds to 1), so that small e keep
 * their digits; exp_pinned and ln_pinned the transcendental functions. */
#define SOFTPLUS_THRESHOLD 0x41A00000u /* 20.0 */
float softplus_pinned(float x)
{
    if (x != x) return f32_from_bits(CIS2_QNAN_BITS);
    if (x > f32_from_bits(SOFTPLUS_THRESHOLD)) return x;
    float e = exp_pinned(x);
    float u = f32_from_bits(F_ONE) + e;
    if (u == f32_from_bits(F_ONE)) return e;
    float d = u - f32_from_bits(F_ONE);
    float l = ln_pinned(u);
    float q = e / d;
    return l * q;
}

/* sigmoid_pinned of n values: exp_pinned_n's lanes, then the scalar steps */
void sigmoid_pinned_n(const float *x, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = -x[i];
    exp_pinned_n(out, out, n);
    for (size_t i = 0; i < n; i++) {
        float denom = f32_from_bits(F_ONE) + out[i];
        float r = f32_from_bits(F_ONE) / denom;
        out[i] = r != r ? f32_from_bits(CIS2_QNAN_BITS) : r;
    }
}

/* The lanes' tails: one element at a time, the scalar functions. */
static void exp_tail(const float *x, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = exp_pinned(x[i]);
}

static void silu_tail(const float *x, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = silu_pinned(x[i]);
}

void exp_pinned_n(const float *x, float *out, size_t n) { exp_n_v4(x, out, n, exp_tail); }

void silu_pinned_n(const float *x, float *out, size_t n) { silu_n_v4(x, out, n, silu_tail); } /* §6.4 */

static void gelu_tail(const float *x, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = gelu_tanh_pinned(x[i]);
}

void gelu_tanh_pinned_n(const float *x, float *out, size_t n) { gelu_n_v4(x, out, n, gelu_tail); } /* §M7.5 */

size_t argmax(const float *v, size_t n) /* §11.2: strict >, first wins */
{
    size_t best = 0;
    if (n == 0) return 0;
    float bv = v[0];
    for (size_t i = 1; i < n; i++)
        if (v[i] > bv) { bv = v[i]; best = i; }
    return best;
}

size_t argmax_n(const float *v, size_t n) { return argmax_n_v4(v, n); } /* §11.2, pmath_lanes.h */

void rmsnorm(const float *x, const float *w, float eps, size_t n, float *out) /* §8 */
{
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float sq = x[i] * x[i];
        ss = ss + sq; /* §5.3 */
    }
    float mean = ss / (float)n;
    float me = mean + eps;
    float inv = rsqrt_cr(me); /* §6.1 */
    for (size_t i = 0; i < n; i++) {
        float scaled = x[i] * inv;
        out[i] = scaled * w[i]; /* (x*inv)*w, never x*(inv*w) */
    }
}

/* The forward pass's forms of rmsnorm, the residual add and rope_rotate:
 * the same operations per element as the plain functions above (which
 * stay the references tests compare them with), with rows' serial chains
 * interleaved and the element-wise steps in 4 lanes. */

/* Column j of R (1..4, a constant) rows of n at v, one row per lane (the
 * lanes past R repeat row 0: computed, never used). */
static inline __attribute__((always_inline)) vf_v4 column(const float *v, size_t n, size_t j, int R)
{
    vf_v4 c = {v[j], v[(R > 1 ? n : 0) + j], v[(R > 2 ? 2 * n : 0) + j], v[(R > 3 ? 3 * n : 0) + j]};
    return c;
}

/* R (1..4, a constant) rows of rmsnorm_rows: each row's §5.3 sum of
 * squares is one chain in index order, in its own lane. */
static inline __attribute__((always_inline)) void rmsnorm_block(const float *x, const float *w, float eps,
                                                               size_t n, int R, float *out)
{
    vf_v4 ss = {0.0f, 0.0f, 0.0f, 0.0f};
    for (size_t i = 0; i < n; i++) {
        vf_v4 xi = column(x, n, i, R);
        vf_v4 sq = xi * xi;
        ss = ss + sq; /* §5.3, per lane */
    }
    for (int r = 0; r < R; r++) {
        float mean = ss[r] / (float)n;
        float me = mean + eps;
        float inv = rsqrt_cr(me); /* §6.1 */
        const float *xr = x + (size_t)r * n;
        float *o = out + (size_t)r * n;
        vf_v4 iv = {inv, inv, inv, inv};
        size_t i = 0;
        for (; i + 4 <= n; i += 4) store_v4(o + i, (load_v4(xr + i) * iv) * load_v4(w + i)); /* (x*inv)*w */
        for (; i < n; i++) {
            float scaled = xr[i] * inv;
            o[i] = scaled * w[i];
        }
    }
}

void rmsnorm_rows(const float *x, const float *w, float eps, size_t n, size_t rows, float *out) /* §8 */
{
    for (size_t r = 0; r < rows; r += 4) {
        const float *xb = x + r * n;
        float *ob = out + r * n;
        switch (rows - r) {
        case 1: rmsnorm_block(xb, w, eps, n, 1, ob); break;
        case 2: rmsnorm_block(xb, w, eps, n, 2, ob); break;
        case 3: rmsnorm_block(xb, w, eps, n, 3, ob); break;
        default: rmsnorm_block(xb, w, eps, n, 4, ob); break;
        }
    }
}

void add_n(float *a, const float *b, size_t n) /* §5.4: a[i] = a[i] + b[i] */
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) store_v4(a + i, load_v4(a + i) + load_v4(b + i));
    for (; i < n; i++) a[i] = a[i] + b[i];
}

void mul_n(float *a, const float *b, size_t n) /* §10's SwiGLU product: a[i] = a[i] * b[i] */
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) store_v4(a + i, load_v4(a + i) * load_v4(b + i));
    for (; i < n; i++) a[i] = a[i] * b[i];
}

/* §7.4 on the pair (i, i + half): rope_rotate's step, and rope_rotate_n's tail. */
static inline void rope_pair(float *head, const float *cosv, const float *sinv, size_t half, size_t i)
{
    float x1 = head[i], x2 = head[i + half];
    float t1 = x1 * cosv[i];
    float nx2 = -x2;
    float t2 = nx2 * sinv[i];
    float t3 = x2 * cosv[i];
    float t4 = x1 * sinv[i];
    head[i] = t1 + t2;
    head[i + half] = t3 + t4;
}

void rope_rotate_n(float *head, const float *cosv, const float *sinv, size_t half) /* §7.4 */
{
    size_t i = 0;
    for (; i + 4 <= half; i += 4) {
        vf_v4 x1 = load_v4(head + i), x2 = load_v4(head + half + i), c = load_v4(cosv + i), s = load_v4(sinv + i);
        vf_v4 t1 = x1 * c, nx2 = -x2, t2 = nx2 * s, t3 = x2 * c, t4 = x1 * s;
        store_v4(head + i, t1 + t2);
        store_v4(head + half + i, t3 + t4);
    }
    for (; i < half; i++) rope_pair(head, cosv, sinv, half, i);
}

void softmax_seq(float *v, size_t n) { softmax_seq_exp(v, n, exp_pinned_n); } /* §9.3 */

void softmax_seq_exp(float *v, size_t n, void (*expn)(const float *x, float *out, size_t n)) /* §9.3 */
{
    if (n == 0) return;
    float mx = v[0];
    for (size_t j = 1; j < n; j++)
        if (v[j] > mx) mx = v[j]; /* strict > */
    for (size_t j = 0; j < n; j++) v[j] = v[j] - mx;
    expn(v, v, n); /* §6.2 (any lanes: the same bits), in place */
    float denom = sum_seq(v, n); /* §5.3 */
    for (size_t j = 0; j < n; j++) v[j] = v[j] / denom; /* division, not reciprocal */
}

/* docs/models.md §M9.3: §9.3's softmax of v[0..n) with one more logit,
 * the head's sink, last in the row: its maximum, its exp in the §5.3 sum
 * (added after the keys'), its probability dropped. */
void softmax_sink(float *v, size_t n, float sink, void (*expn)(const float *x, float *out, size_t n))
{
    float mx = sink;
    if (n) {
        mx = v[0];
        for (size_t j = 1; j < n; j++)
            if (v[j] > mx) mx = v[j]; /* strict > */
        if (sink > mx) mx = sink;
    }
    for (size_t j = 0; j < n; j++) v[j] = v[j] - mx;
    expn(v, v, n);
    float ds = sink - mx, es;
    expn(&ds, &es, 1);
    float denom = sum_seq(v, n); /* §5.3 */
    denom = denom + es;
    for (size_t j = 0; j < n; j++) v[j] = v[j] / denom;
}

/* row[j] - c and row[j] / c for every j, in place: 4 lanes of the same
 * element-wise IEEE operation, then the tail (the scalar bits). */
static void sub_all(float *row, size_t n, float c)
{
    vf_v4 cv = {c, c, c, c};
    size_t j = 0;
    for (; j + 4 <= n; j += 4) store_v4(row + j, load_v4(row + j) - cv);
    for (; j < n; j++) row[j] = row[j] - c;
}

static void div_all(float *row, size_t n, float c)
{
    vf_v4 cv = {c, c, c, c};
    size_t j = 0;
    for (; j + 4 <= n; j += 4) store_v4(row + j, load_v4(row + j) / cv); /* division, not reciprocal */
    for (; j < n; j++) row[j] = row[j] / c;
}

/* The fast form of the above for the G heads of one KV head (attention):
 * softmax_seq_exp stays the plain reference that tests compare it with. */

/* R (1..4, a constant) rows of softmax_seq_rows: each row's maximum and
 * §5.3 sum are still one chain in index order, in its own lane, so the R
 * chains' latencies overlap instead of adding up. */
static inline __attribute__((always_inline)) void softmax_block(float *v, size_t n, int R,
                                                               void (*expn)(const float *, float *, size_t))
{
    vf_v4 mx = column(v, n, 0, R);
    if (R == 1) { /* one chain: the scalar maximum's shorter latency */
        for (size_t j = 1; j < n; j++)
            if (v[j] > mx[0]) mx[0] = v[j]; /* strict > */
    } else
        for (size_t j = 1; j < n; j++) {
            vf_v4 c = column(v, n, j, R);
            mx = select_v4(c > mx, c, mx); /* strict >, lane by lane */
        }
    for (int r = 0; r < R; r++) sub_all(v + (size_t)r * n, n, mx[r]);
    expn(v, v, (size_t)R * n); /* §6.2 (any lanes: the same bits), in place */
    vf_v4 denom = {0.0f, 0.0f, 0.0f, 0.0f};
    for (size_t j = 0; j < n; j++) denom = denom + column(v, n, j, R); /* §5.3, as sum_seq, per lane */
    for (int r = 0; r < R; r++) div_all(v + (size_t)r * n, n, denom[r]); /* division, not reciprocal */
}

void softmax_seq_rows(float *v, size_t rows, size_t n, void (*expn)(const float *x, float *out, size_t n))
{
    if (n == 0) return;
    for (size_t r = 0; r < rows; r += 4) {
        float *b = v + r * n;
        switch (rows - r) {
        case 1: softmax_block(b, n, 1, expn); break;
        case 2: softmax_block(b, n, 2, expn); break;
        case 3: softmax_block(b, n, 3, expn); break;
        default: softmax_block(b, n, 4, expn); break;
        }
    }
}

void rope_rotate(float *head, const float *cosv, const float *sinv, size_t half) /* §7.4 */
{
    for (size_t i = 0; i < half; i++) rope_pair(head, cosv, sinv, half, i);
}

void attend_head(const float *q, const float *k, const float *v, size_t stride, size_t len,
                      size_t head_dim, float *scores, float *out)
{
    attend_head_scaled(q, k, v, stride, len, head_dim, rsqrt_cr((float)head_dim), scores, out); /* §9.2 */
}

void attend_head_scaled(const float *q, const float *k, const float *v, size_t stride, size_t len, size_t head_dim,
                        float scale, float *scores, float *out)
{
    for (size_t j = 0; j < len; j++) {
        float d = dot_seq(q, k + j * stride, head_dim);
        scores[j] = d * scale; /* scale applied after the dot */
    }
    softmax_seq(scores, len); /* §9.3 */
    for (size_t d = 0; d < head_dim; d++) out[d] = 0.0f;
    for (size_t j = 0; j < len; j++) { /* §9.4: j outer keeps every d's order */
        const float *vj = v + j * stride;
        float sj = scores[j];
        for (size_t d = 0; d < head_dim; d++) {
            float p = sj * vj[d];
            out[d] = out[d] + p;
        }
    }
}


/* §9.2 dot products of q with the 16 keys of one block, lane l = key l. */
static void scores_block(const float *q, const float *blk, size_t head_dim, float acc_out[16])
{
    v4f a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
    for (size_t d = 0; d < head_dim; d++) { /* §5.1 order in every lane */
        v4f qd = {q[d], q[d], q[d], q[d]};
        const float *kd = blk + d * 16;
        v4f p0 = qd * v4_load(kd), p1 = qd * v4_load(kd + 4), p2 = qd * v4_load(kd + 8), p3 = qd * v4_load(kd + 12);
        a0 = a0 + p0; a1 = a1 + p1; a2 = a2 + p2; a3 = a3 + p3;
    }
    memcpy(acc_out, &a0, 16); memcpy(acc_out + 4, &a1, 16); memcpy(acc_out + 8, &a2, 16); memcpy(acc_out + 12, &a3, 16);
}

/* §9.4: out[d] = sum over j in order of scores[j] * v[j][d]; lanes across
 * d, 16 dims per pass held in registers, the tail one dim at a time. */
static void vmix(float *out, const float *v, size_t v_stride, const float *s, size_t len, size_t head_dim)
{
    size_t d0 = 0;
    for (; d0 + 16 <= head_dim; d0 += 16) {
        v4f a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
        for (size_t j = 0; j < len; j++) {
            const float *vj = v + j * v_stride + d0;
            v4f sj = {s[j], s[j], s[j], s[j]};
            v4f p0 = sj * v4_load(vj), p1 = sj * v4_load(vj + 4), p2 = sj * v4_load(vj + 8), p3 = sj * v4_load(vj + 12);
            a0 = a0 + p0; a1 = a1 + p1; a2 = a2 + p2; a3 = a3 + p3;
        }
        memcpy(out + d0, &a0, 16); memcpy(out + d0 + 4, &a1, 16);
        memcpy(out + d0 + 8, &a2, 16); memcpy(out + d0 + 12, &a3, 16);
    }
    for (size_t d = d0; d < head_dim; d++) {
        float acc = 0.0f;
        for (size_t j = 0; j < len; j++) {
            float p = s[j] * v[j * v_stride + d];
            acc = acc + p;
        }
        out[d] = acc;
    }
}

/* §9.2 for G heads: s[h*len + j] = dot_seq(q_h, key j) * scale. */
void cis2_attn_scores_generic(const float *q, size_t G, const float *kt, size_t len, size_t head_dim, float scale,
                              float *s)
{
    for (size_t h = 0; h < G; h++)
        for (size_t b = 0; b * 16 < len; b++) {
            float acc[16];
            scores_block(q + h * head_dim, kt + b * 16 * head_dim, head_dim, acc);
            size_t n = len - b * 16 < 16 ? len - b * 16 : 16;
            for (size_t l = 0; l < n; l++) s[h * len + b * 16 + l] = acc[l] * scale; /* scale after the dot */
        }
}

/* §9.4 for G heads: out[h*hd + d] = sum over j in order of s[h*len + j] * v[j][d]. */
void cis2_attn_vmix_generic(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t head_dim,
                            float *out)
{
    for (size_t h = 0; h < G; h++) vmix(out + h * head_dim, v, v_stride, s + h * len, len, head_dim);
}

void attend_head_kt(const float *q, const float *kt, const float *v, size_t v_stride, size_t len,
                         size_t head_dim, float *scores, float *out)
{
    cis2_attn_scores_generic(q, 1, kt, len, head_dim, rsqrt_cr((float)head_dim), scores); /* §9.2 */
    softmax_seq(scores, len); /* §9.3 */
    cis2_attn_vmix_generic(scores, 1, v, v_stride, len, head_dim, out); /* §9.4 */
}

void rope_inv_freq(float rope_theta, size_t head_dim, float *inv_freq) /* §7.1 */
{
    float ln_theta = ln_pinned(rope_theta);
    float hd = (float)head_dim;
    for (size_t i = 0; i < head_dim / 2; i++) {
        float frac = (float)(2 * i) / hd;
        float prod = frac * ln_theta;
        float neg_arg = -prod;
        inv_freq[i] = exp_pinned(neg_arg);
    }
}

/* docs/models.md §M1: transformers' _compute_llama3_parameters in f32, in
 * torch's operation order (a scalar divided by a tensor is the tensor's
 * reciprocal times the scalar), one IEEE rounding per statement. */
#define TWO_PI_F32 0x40C90FDBu /* (f32)(2 * math.pi) */
void rope_llama3_scale(float *inv_freq, size_t half, const rope_llama3 *p)
{
    const float two_pi = f32_from_bits(TWO_PI_F32), one = f32_from_bits(0x3F800000u);
    for (size_t i = 0; i < half; i++) {
        float inv = inv_freq[i];
        float r = one / inv;
        float wl = r * two_pi;                 /* wavelen */
        if (wl > p->low_wl) {                  /* low frequency: divided by factor */
            inv_freq[i] = inv / p->factor;
        } else if (!(wl < p->high_wl)) {       /* medium: the smooth interpolation */
            float rw = one / wl;
            float t = rw * p->old_ctx;         /* old_ctx / wavelen */
            float u = t - p->low_ff;
            float sf = u / p->den;             /* smooth_factor */
            float a = one - sf;
            float b = a * inv;
            float c = b / p->factor;
            float d = sf * inv;
            inv_freq[i] = c + d;
        }                                      /* high frequency: unchanged */
    }
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

void table_digest(uint8_t out[32]) /* §6.6, in the declared order */
{
    uint8_t buf[256];
    size_t n = 0;
    const uint32_t head[3] = {EXP_LOG2E, EXP_C1, EXP_C2};
    for (int i = 0; i < 3; i++, n += 4) put_le32(buf + n, head[i]);
    for (int i = 0; i < 6; i++, n += 4) put_le32(buf + n, EXP_P[i]);
    put_le32(buf + n, (uint32_t)PI_2_F64);
    put_le32(buf + n + 4, (uint32_t)(PI_2_F64 >> 32));
    n += 8;
    const uint32_t mid[9] = {SIN_C0, SIN_C1, SIN_C2, COS_C0, COS_C1, COS_C2,
                             LOG_SQRTHF, LOG_Q1, LOG_Q2};
    for (int i = 0; i < 9; i++, n += 4) put_le32(buf + n, mid[i]);
    for (int i = 0; i < 9; i++, n += 4) put_le32(buf + n, LOG_P[i]);
    cis2_sha256(buf, n, out);
}

void inv_freq_table_digest(const float *inv_freq, size_t half, uint8_t out[32]) /* §7.2 */
{
    cis2_sha s;
    if (cis2_sha_init(&s)) abort();
    for (size_t i = 0; i < half; i++) cis2_sha_u32le(&s, f32_bits(inv_freq[i]));
    cis2_sha_final(&s, out);
}

/* docs/models.md §M9.4: transformers' _compute_yarn_parameters in f32
 * with the pinned ln, one IEEE rounding per statement. */
static float yarn_corr(float beta, float dim, float ln_theta, float old_ctx)
{
    const float two_pi = f32_from_bits(TWO_PI_F32);
    float b = beta * two_pi;
    float a = old_ctx / b;
    float l = ln_pinned(a);
    float num = dim * l;
    float den = ln_theta + ln_theta; /* 2 ln(theta), exact */
    return num / den;
}

/* floor and ceil of a finite f32 of magnitude < 2^31 (the correction
 * dimensions: |x| <= dim * 88), exact */
static float floor_f32(float x) { float t = (float)(int32_t)x; return t > x ? t - 1.0f : t; }
static float ceil_f32(float x) { float t = (float)(int32_t)x; return t < x ? t + 1.0f : t; }

void rope_yarn_scale(float *inv_freq, size_t half, float dim, float ln_theta, const rope_yarn *p)
{
    const float one = f32_from_bits(0x3F800000u), zero = 0.0f;
    float low = yarn_corr(p->beta_fast, dim, ln_theta, p->old_ctx);
    float high = yarn_corr(p->beta_slow, dim, ln_theta, p->old_ctx);
    if (p->truncate) { low = floor_f32(low); high = ceil_f32(high); }
    if (low < zero) low = zero;
    float top = dim - one;
    if (high > top) high = top;
    if (low == high) high = high + f32_from_bits(0x3A83126Fu); /* + 0.001f */
    float span = high - low;
    for (size_t i = 0; i < half; i++) {
        float u = (float)i - low;
        float r = u / span;
        float ramp = r < zero ? zero : r > one ? one : r;
        float ef = one - ramp;             /* the extrapolation factor */
        float inter = inv_freq[i] / p->factor;
        float w = one - ef;
        float t1 = inter * w;
        float t2 = inv_freq[i] * ef;
        inv_freq[i] = t1 + t2;
    }
}

float rope_yarn_mscale(float factor)
{
    const float one = f32_from_bits(0x3F800000u);
    if (!(factor > one)) return one;
    float l = ln_pinned(factor);
    float t = f32_from_bits(0x3DCCCCCDu) * l; /* 0.1f * ln(factor) */
    return t + one;
}

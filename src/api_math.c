/*
 * api_math.c - the public, self-pinning entry points of the pinned
 * arithmetic (include/cis2_toolkit.h section 2, "Pinned arithmetic"; spec
 * §5-§9, §11.2).
 *
 * Each wraps its pmath.c implementation in an API frame (api.h): FTZ/DAZ
 * and round-to-nearest-even pinned for the call (§1.2, §1.3), the caller's
 * control register restored on return.  So a program that never pins gets
 * the pinned bits, and its own arithmetic is untouched.  The library itself
 * calls the pmath.h names directly, inside its own frames.
 *
 * No execution context (kernels.h's cis2_ctx) is involved: these compute
 * without an engine, on the calling thread, with pmath.c's own code
 * (the vector forms in its 4 lanes), whose bits are the scalar
 * reference's, which every kernel variant's lanes reproduce too; so a
 * context of no pool and any variant would give the same bits, and none
 * is made.
 */
#include "api.h"
#include "pmath.h"

#define WRAP(ret, call)                     \
    do {                                    \
        cis2_frame f_;                      \
        cis2_api_enter(&f_);                \
        ret call;                           \
        cis2_api_leave(&f_);                \
    } while (0)

float cis2_dot_seq(const float *a, const float *b, size_t n) { float r; WRAP(r =, dot_seq(a, b, n)); return r; }
float cis2_sum_seq(const float *a, size_t n) { float r; WRAP(r =, sum_seq(a, n)); return r; }
float cis2_exp_pinned(float x) { float r; WRAP(r =, exp_pinned(x)); return r; }
float cis2_ldexp_exact(float x, int k) { float r; WRAP(r =, ldexp_exact(x, k)); return r; }
float cis2_ln_pinned(float x) { float r; WRAP(r =, ln_pinned(x)); return r; }
float cis2_frexp_exact(float x, int *e) { float r; WRAP(r =, frexp_exact(x, e)); return r; }
float cis2_sin_pinned(float x) { float r; WRAP(r =, sin_pinned(x)); return r; }
float cis2_cos_pinned(float x) { float r; WRAP(r =, cos_pinned(x)); return r; }
float cis2_rsqrt_cr(float x) { float r; WRAP(r =, rsqrt_cr(x)); return r; }
float cis2_silu_pinned(float x) { float r; WRAP(r =, silu_pinned(x)); return r; }
float cis2_gelu_tanh_pinned(float x) { float r; WRAP(r =, gelu_tanh_pinned(x)); return r; }
float cis2_sigmoid_pinned(float x) { float r; WRAP(r =, sigmoid_pinned(x)); return r; }
float cis2_softplus_pinned(float x) { float r; WRAP(r =, softplus_pinned(x)); return r; }
void cis2_exp_pinned_n(const float *x, float *out, size_t n) { WRAP((void), exp_pinned_n(x, out, n)); }
void cis2_silu_pinned_n(const float *x, float *out, size_t n) { WRAP((void), silu_pinned_n(x, out, n)); }
size_t cis2_argmax(const float *v, size_t n) { size_t r; WRAP(r =, argmax(v, n)); return r; }
void cis2_rmsnorm(const float *x, const float *w, float eps, size_t n, float *out)
{
    WRAP((void), rmsnorm(x, w, eps, n, out));
}
void cis2_softmax_seq(float *v, size_t n) { WRAP((void), softmax_seq(v, n)); }
void cis2_rope_rotate(float *head, const float *cosv, const float *sinv, size_t half)
{
    WRAP((void), rope_rotate(head, cosv, sinv, half));
}
void cis2_attend_head(const float *q, const float *k, const float *v, size_t stride, size_t len, size_t head_dim,
                      float *scores, float *out)
{
    WRAP((void), attend_head(q, k, v, stride, len, head_dim, scores, out));
}
void cis2_attend_head_kt(const float *q, const float *kt, const float *v, size_t v_stride, size_t len,
                         size_t head_dim, float *scores, float *out)
{
    WRAP((void), attend_head_kt(q, kt, v, v_stride, len, head_dim, scores, out));
}
void cis2_rope_inv_freq(float rope_theta, size_t head_dim, float *inv_freq)
{
    WRAP((void), rope_inv_freq(rope_theta, head_dim, inv_freq));
}
void cis2_table_digest(uint8_t out[32]) { WRAP((void), table_digest(out)); }
void cis2_inv_freq_table_digest(const float *inv_freq, size_t half, uint8_t out[32])
{
    WRAP((void), inv_freq_table_digest(inv_freq, half, out));
}

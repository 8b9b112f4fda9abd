/*
 * pmath.h - the pinned arithmetic (pmath.c), under the spec's own names,
 * for the library's internal use.  These run in whatever FP environment
 * the calling thread has: callers inside the library run within an API
 * frame (api.h) or on a pinned worker.  The public, self-pinning versions
 * are the cis2_* functions of include/cis2.h (api_math.c).
 */
#ifndef CIS2_PMATH_H
#define CIS2_PMATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cis2_toolkit.h" /* and cis2.h */

static inline float f32_from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static inline double f64_from_bits(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }

/* The canonical quiet NaN every ISA gets from cis2 (x86's default is 0xFFC00000). */
#define CIS2_QNAN_BITS 0x7FC00000u

/* §4.1: bf16 -> f32 is the exact bit shift. */
static inline float bf16_to_f32(uint16_t b) { return f32_from_bits((uint32_t)b << 16); }

float dot_seq(const float *a, const float *b, size_t n);          /* §5.1 */
float sum_seq(const float *a, size_t n);                         /* §5.3 */
float rsqrt_cr(float x);                                         /* §6.1 */
float exp_pinned(float x);                                       /* §6.2 */
float ldexp_exact(float x, int k);                               /* §6.2.1 */
float sin_pinned(float x);                                       /* §6.3 */
float cos_pinned(float x);                                       /* §6.3 */
float silu_pinned(float x);                                      /* §6.4 */
float gelu_tanh_pinned(float x);                                 /* docs/models.md §M7.5 */
float ln_pinned(float x);                                        /* §6.5 */
float sigmoid_pinned(float x);                                   /* docs/models.md §M10.6 */
float softplus_pinned(float x);                                  /* docs/models.md §M10.6 */
void sigmoid_pinned_n(const float *x, float *out, size_t n);     /* the same bits, exp in 4 lanes */
float frexp_exact(float x, int *exponent);                       /* §6.5.1 */
void exp_pinned_n(const float *x, float *out, size_t n);         /* 4 lanes, scalar bits */
void silu_pinned_n(const float *x, float *out, size_t n);
void gelu_tanh_pinned_n(const float *x, float *out, size_t n);   /* 4 lanes, the scalar bits */
size_t argmax(const float *v, size_t n);                         /* §11.2 */
size_t argmax_n(const float *v, size_t n); /* the same index, in 4 lanes (pmath_lanes.h; argmax is its reference) */
void rmsnorm(const float *x, const float *w, float eps, size_t n, float *out); /* §8 */
void softmax_seq(float *v, size_t n);                            /* §9.3 */
/* softmax_seq with exp_pinned_n's bits from expn (a kernel variant's lanes) */
void softmax_seq_exp(float *v, size_t n, void (*expn)(const float *x, float *out, size_t n));
/* softmax_seq_exp of each of `rows` rows of n at v (row r at v + r*n):
 * every row's bits as softmax_seq_exp's, the rows' serial chains (maximum,
 * §5.3 sum) interleaved and the element-wise steps in 4 lanes */
/* docs/models.md §M9.3: the softmax of n scores and a sink logit that
 * takes its share of the denominator (§9.3's steps over the row with the
 * sink last), the sink's own probability dropped. */
void softmax_sink(float *v, size_t n, float sink, void (*expn)(const float *x, float *out, size_t n));
void softmax_seq_rows(float *v, size_t rows, size_t n, void (*expn)(const float *x, float *out, size_t n));
void rope_rotate(float *head, const float *cosv, const float *sinv, size_t half); /* §7.4 */
/* The forward pass's forms (the plain functions above are their references):
 * rmsnorm of `rows` rows of n (row r at x + r*n, out + r*n) with the rows'
 * sums interleaved, the residual add a[i] = a[i] + b[i], SwiGLU's product,
 * rope_rotate; the
 * element-wise steps in 4 lanes, every bit as the plain ones. */
void rmsnorm_rows(const float *x, const float *w, float eps, size_t n, size_t rows, float *out); /* §8 */
void add_n(float *a, const float *b, size_t n);                  /* §5.4 */
void mul_n(float *a, const float *b, size_t n);                  /* §10: a[i] = a[i] * b[i] */
void rope_rotate_n(float *head, const float *cosv, const float *sinv, size_t half); /* §7.4 */
void attend_head(const float *q, const float *k, const float *v, size_t stride, size_t len, size_t head_dim,
                 float *scores, float *out);                     /* §9.2-§9.4 */
/* attend_head with §9.2's scale given (docs/models.md §M7.3: Gemma-3's is
 * rsqrt(query_pre_attn_scalar)); attend_head passes rsqrt_cr(head_dim). */
void attend_head_scaled(const float *q, const float *k, const float *v, size_t stride, size_t len, size_t head_dim,
                        float scale, float *scores, float *out);
void attend_head_kt(const float *q, const float *kt, const float *v, size_t v_stride, size_t len,
                    size_t head_dim, float *scores, float *out);
void rope_inv_freq(float rope_theta, size_t head_dim, float *inv_freq); /* §7.1 */
/* Llama 3.1's RoPE scaling (docs/models.md §M1), applied in place to a
 * §7.1 table of `half` entries: every field is the f32 the document pins
 * (config.c derives them from config.json). */
typedef struct rope_llama3 {
    float factor;      /* rope_scaling.factor */
    float low_ff;      /* low_freq_factor */
    float old_ctx;     /* original_max_position_embeddings (exact) */
    float low_wl;      /* (f32)(old_ctx_f64 / low_ff_f64) */
    float high_wl;     /* (f32)(old_ctx_f64 / high_ff_f64) */
    float den;         /* (f32)(high_ff_f64 - low_ff_f64) */
} rope_llama3;
void rope_llama3_scale(float *inv_freq, size_t half, const rope_llama3 *p); /* docs/models.md §M1 */
/* YaRN (docs/models.md §M9.4), applied in place to a §7.1 table of
 * `half` entries for a head of `dim`, with ln_theta the §7.1 ln_pinned of
 * the base; and the attention factor that multiplies cos and sin. */
typedef struct rope_yarn {
    float factor, beta_fast, beta_slow, old_ctx; /* (f32) of the config's members; old_ctx exact */
    int truncate;
} rope_yarn;
void rope_yarn_scale(float *inv_freq, size_t half, float dim, float ln_theta, const rope_yarn *p);
float rope_yarn_mscale(float factor);
void table_digest(uint8_t out[32]);                              /* §6.6 */
void inv_freq_table_digest(const float *inv_freq, size_t half, uint8_t out[32]); /* §7.2 */

/* The two halves of cis2_attend_head_kt (cis2.h) for the G query heads
 * that share one KV head (GQA), lanes as there (4 at a time): q holds G
 * heads, scores G rows of len, out G heads.  The kernel variants' versions
 * (kernels.h) give these bits. */
void cis2_attn_scores_generic(const float *q, size_t G, const float *kt, size_t len, size_t head_dim, float scale,
                              float *scores);
void cis2_attn_vmix_generic(const float *scores, size_t G, const float *v, size_t v_stride, size_t len,
                            size_t head_dim, float *out);

#endif

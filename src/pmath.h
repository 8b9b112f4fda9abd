/*
 * pmath.h - internal helpers of the pinned math module (see pmath.c).
 */
#ifndef CIS2_PMATH_H
#define CIS2_PMATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cis2.h"

static inline float f32_from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static inline double f64_from_bits(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }

/* The canonical quiet NaN every ISA gets from cis2 (x86's default is 0xFFC00000). */
#define CIS2_QNAN_BITS 0x7FC00000u

/* §4.1: bf16 -> f32 is the exact bit shift. */
static inline float bf16_to_f32(uint16_t b) { return f32_from_bits((uint32_t)b << 16); }

/* The two halves of cis2_attend_head_kt (cis2.h) for the G query heads
 * that share one KV head (GQA), lanes as there (4 at a time): q holds G
 * heads, scores G rows of len, out G heads.  The kernel variants' versions
 * (kernels.h) give these bits. */
void cis2_attn_scores_generic(const float *q, size_t G, const float *kt, size_t len, size_t head_dim, float scale,
                              float *scores);
void cis2_attn_vmix_generic(const float *scores, size_t G, const float *v, size_t v_stride, size_t len,
                            size_t head_dim, float *out);

#endif

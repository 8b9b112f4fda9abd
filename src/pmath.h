/*
 * pmath.h - internal helpers of the pinned math module (see pmath.c).
 */
#ifndef CIS2_PMATH_H
#define CIS2_PMATH_H

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

#endif

/*
 * kernels.h - the matrix kernel contract (spec §5.1, §5.2) and the packed
 * weight layout.
 *
 * Contract (like a BLIS micro-kernel): for every output row o and position p,
 *     Y[p*rows + o] = dot_seq(W[o, :], X[p*cols : p*cols + cols])
 * with dot_seq exactly §5.1: acc = 0; for i in 0..cols: acc = acc + (w*x),
 * one separately rounded multiply and one separately rounded add per
 * element, in index order.  Every variant (scalar, AVX2, AVX-512, NEON)
 * computes the same bits as the scalar reference; SIMD lanes run across
 * rows, threads across row groups: neither changes any row's own sum.
 *
 * Layout: rows are interleaved in groups of CIS2_KG rows; element (o, i)
 * lives at data[((o / KG) * cols + i) * KG + (o % KG)].  The tail group is
 * zero-padded.  BF16 weights stay bf16 in memory and are widened exactly
 * (§4.1: bits << 16) inside the kernel.  MXFP4 weights stay 4-bit codes
 * with their scale bytes, in the same row groups (layout below, at
 * cis2_wtype), and are widened exactly inside the kernel by the rule given
 * there; the product and the sum are then §5.1's, as for any weight.
 *
 * Execution context: every entry point that computes takes a cis2_ctx as
 * its first argument, so which threads and which variant run a call can be
 * followed through the code (`--threads`, `--kernel`: engine.c keeps them
 * in the engine, each API entry copies them into the context it passes
 * down).  There is no current or default context anywhere.
 */
#ifndef CIS2_KERNELS_H
#define CIS2_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cis2_toolkit.h" /* and cis2.h */
#include "threadpool.h"

#define CIS2_KG 16

struct cis2_variant; /* one kernel variant: src/kernels/variant.h */

/* The execution context of a computation, passed by the caller (a plain
 * value: callers copy it freely; nothing in it is owned).
 *   pool  the threads that share the call's parallel jobs; NULL: the
 *         calling thread alone.  The bits never depend on it (§5.2).
 *   kern  the kernel variant (cis2_kernel_find / cis2_kernel_auto); never
 *         NULL.  The bits never depend on it either: every variant gives
 *         the scalar reference's.
 *   bg    the call's background work (threadpool.h), or NULL.  Only a
 *         call that owns some (a verify) sets it, in its own copy.
 * An engine's context is its pool and kernel (engine.h, cis2_engine_ctx);
 * a computation without an engine uses cis2_ctx_solo() or makes its own. */
typedef struct cis2_ctx {
    cis2_pool *pool;
    const struct cis2_variant *kern;
    cis2_bg *bg;
} cis2_ctx;

/* No pool, the "auto" variant, no background work: a context for a
 * computation outside any engine (the same bits as any other context). */
cis2_ctx cis2_ctx_solo(void);

typedef enum { CIS2_W_BF16 = 1, CIS2_W_F32 = 2, CIS2_W_MXFP4 = 3 } cis2_wtype;
/* CIS2_W_MXFP4 (docs/models.md §M9.4): a [rows, cols] matrix, cols a multiple of 32, given as two parts
 * that a streaming loader may deliver in either order: the blocks (per row cols/2 bytes; byte j holds
 * element 2j in its low nibble and 2j+1 in its high nibble, each an e2m1 code) and the scales (per row
 * cols/32 bytes, the e8m0 exponent byte s of elements 32b..32b+31). Element (o, i) is the binary32 value
 *     w = E2M1[code] * P(s)      one f32 multiply, in the §1.3 environment (FTZ/DAZ on)
 * where E2M1 = {+0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6} (code 0..15) and P(s) is
 * the f32 2^(s-127), a normal number for s in [1, 254]; s = 0 and s = 255 never reach the kernels (the
 * loader refuses them).
 *
 * Why the rule is exact and every variant agrees: P(s) is built from its bits (s << 23), E2M1 is a
 * table of exact floats, and their product is exact except where it leaves the normal range: s = 1
 * with a code of magnitude 0.5 gives 2^-127, which FTZ flushes to a signed zero (sign of the code), and
 * s = 253 with |code| >= 4 or s = 254 with |code| >= 2 overflow to a signed infinity (then inf * x and
 * inf - inf follow IEEE like any operand).  The kernels compute w by that same one multiply (a table
 * look-up of E2M1[code], then times P(s)), never by adding to the exponent, and then multiply and add
 * by §5.1: t = w * x rounded, acc = acc + t rounded, in index order.  s = 0 (P = +0) and s = 255
 * (P = +inf) would give every variant the same bits too, but mean nothing.
 *
 * The packed layout keeps the 16-row groups and is chosen for the AVX2 kernel (kern_x86_avx2.c: one
 * 16-byte load, a byte shuffle per table and unpacks within 128-bit lanes give a column pair of the
 * whole group as four vectors of 8 f32 rows, no cross-lane step).  A group of CIS2_KG = 16 rows is
 * cols/32 tiles of 272 bytes, tile b (columns 32b..32b+31) at data + (g * cols/32 + b) * 272:
 *     bytes [0, 16)            the scale bytes: byte k is row 16g+k's s for this tile
 *     bytes [16 + 16j, 32 + 16j)  column pair j (columns 32b+2j and 32b+2j+1), j = 0..15: the code of
 *                              row 16g+k, column 32b+2j+c (c = 0, 1) is nibble (k%8)/4 (0: bits 0-3,
 *                              1: bits 4-7) of pair byte 8c + 4(k/8) + k%4
 * i.e. pair bytes 0-3 hold column 2j's rows 0-3 (low nibbles) and 4-7 (high), bytes 4-7 its rows 8-11
 * and 12-15, bytes 8-15 the same for column 2j+1.  4.25 bits a weight, as in the file.  The tail
 * group's padding rows are code 0, scale 0 (they are computed, never stored).  cis2_pmat_pack(_groups)
 * take an MXFP4 src as the rows' blocks followed by their scales. */
#define CIS2_MX_TILE 272 /* bytes of one 16-row x 32-column tile: 16 scale bytes, 16 column pairs of 16 */

typedef struct cis2_pmat {
    cis2_wtype type;
    size_t rows, cols, groups; /* groups = ceil(rows / CIS2_KG) */
    void *data;                /* 64-byte aligned, groups*cols*KG elements (MXFP4: groups*cols/32 tiles) */
    int borrowed;              /* data lives in a cis2_wmem: cis2_pmat_free leaves it */
} cis2_pmat;

/* The two parts of an MXFP4 matrix (above), into a matrix from cis2_pmat_alloc(_in), across cx's pool. */
void cis2_pmat_pack_mxfp4_blocks(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows);
void cis2_pmat_pack_mxfp4_scales(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows);
/* (g0, nrows as cis2_pmat_pack_groups below: rows [g0*KG, g0*KG + nrows), nrows a multiple of CIS2_KG
 * unless the range ends at the last row; src just those rows' blocks, or just their scales; any
 * alignment.  Each writes only its own part, padding rows included, so the two orders give the same
 * bytes.) */

/* Weight memory: one block that holds all of a model's packed matrices,
 * 2 MiB-aligned and offered to the OS for transparent huge pages
 * (madvise(MADV_HUGEPAGE) where Linux has it; plain memory elsewhere).
 * Decode streams every weight once per token, and through 4 KiB pages
 * that cost a TLB miss every 4 KiB: ~10% of a SmolLM2-135M token on the
 * Sapphire Rapids machine (docs/performance.md).  Small matrices (most
 * of a 135M model's are under 2 MiB) only get huge pages when they share
 * one block.  The layout and the bits are cis2_pmat_pack's. */
typedef struct cis2_wmem {
    uint8_t *base;
    size_t cap, used;
} cis2_wmem;
/* The bytes a packed [rows, cols] matrix takes in a cis2_wmem (its
 * cis2_pmat_bytes rounded up to 64); 0 if too large to pack (or MXFP4
 * with cols not a multiple of 32). */
size_t cis2_wmem_need(cis2_wtype type, size_t rows, size_t cols);
int cis2_wmem_init(cis2_wmem *a, size_t bytes, cis2_error *err);
void cis2_wmem_free(cis2_wmem *a);
/* cis2_pmat_alloc with the matrix carved from a (borrowed: freeing the
 * matrix leaves the memory to cis2_wmem_free); CIS2_E_INTERNAL if a lacks
 * the room cis2_wmem_need promised. */
int cis2_pmat_alloc_in(cis2_pmat *m, cis2_wmem *a, cis2_wtype type, size_t rows, size_t cols, cis2_error *err);

/* Packs a row-major [rows, cols] matrix given as little-endian bf16 (type
 * CIS2_W_BF16) or f32 (CIS2_W_F32) bytes at any alignment; CIS2_W_MXFP4:
 * the blocks of all rows, then the scales of all rows (above). */
int cis2_pmat_pack(const cis2_ctx *cx, cis2_pmat *m, cis2_wtype type, const uint8_t *src, size_t rows,
                   size_t cols, cis2_error *err);
void cis2_pmat_free(cis2_pmat *m);
/* The same packing in pieces (additive, for a streaming loader):
 * cis2_pmat_alloc allocates m for a [rows, cols] matrix (padding zeroed,
 * nothing packed; CIS2_E_FORMAT for an MXFP4 matrix whose cols is not a
 * multiple of 32); cis2_pmat_pack_groups packs rows [g0*KG, g0*KG + nrows)
 * given as src (just those rows, row-major little-endian bytes, any
 * alignment), with nrows a multiple of CIS2_KG unless the range ends at the
 * last row, across cx's pool.  Every group packed this way holds
 * cis2_pmat_pack's bits. */
int cis2_pmat_alloc(cis2_pmat *m, cis2_wtype type, size_t rows, size_t cols, cis2_error *err);
void cis2_pmat_pack_groups(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows);
/* Row r widened to f32 (embedding lookup of a tied/packed table). */
void cis2_pmat_row(const cis2_pmat *m, size_t r, float *out);
size_t cis2_pmat_bytes(const cis2_pmat *m);

/* The contract above, for npos positions (prefill, or a batch of
 * sequences), with cx's variant across cx's pool (cx->bg: threadpool.h). */
void cis2_matmul(const cis2_ctx *cx, const cis2_pmat *w, const float *x, size_t npos, float *y);
/* The same for nw matrices with the same cols sharing one x (q/k/v,
 * gate/up): y[m] gets matrix m's rows; one pass over the pool for all.
 * Their types may differ (each chunk runs its own matrix's loops). */
void cis2_matmul_n(const cis2_ctx *cx, const cis2_pmat *const *w, size_t nw, const float *x, size_t npos,
                   float *const *y);

/* Kernel choice: "auto", "scalar", "avx2", "avx512", "neon".  Refuses a
 * kernel this build or CPU cannot run (CIS2_E_UNSUPPORTED). */
int cis2_kernel_find(const char *name, const struct cis2_variant **out, cis2_error *err);
/* The fastest variant this build and CPU can run (what "auto" finds). */
const struct cis2_variant *cis2_kernel_auto(void);
const char *cis2_kernel_name(const struct cis2_variant *v);

/* Runs fn(arg, i) for i in [0, n) across cx's pool; returns when all done. */
void cis2_parallel_for(const cis2_ctx *cx, size_t n, void (*fn)(void *arg, size_t i), void *arg);

/* §9.2-§9.4 for the G query heads that share one KV head (GQA), over keys
 * [lo, len): q and out hold G heads of head_dim floats; keys in the cache's
 * blocked layout (cis2_attend_head_kt, cis2_toolkit.h), values
 * v[j * v_stride + d], both given from key 0.  lo is 0 but for a sliding
 * window (docs/models.md §M5), where the bits are those of a context of
 * keys lo..len-1 alone.  scale multiplies each dot product (§9.2:
 * rsqrt_cr(head_dim); Gemma-3's rsqrt_cr(query_pre_attn_scalar), §M7.3).
 * sinks: NULL, or G learned logits, one per head, each an extra term of
 * its head's softmax denominator (gpt_oss, docs/models.md §M9.3).
 * scores: room for G rows of len; on return G rows of len - lo (the
 * probabilities of keys lo..len-1).  Each head's bits are
 * cis2_attend_head_kt's whatever the kernel variant: the variants' halves
 * (kernels/variant.h) keep the generic lanes (pmath.h) and their order. */
void cis2_attend_group(const cis2_ctx *cx, const float *q, size_t G, const float *kt, const float *v,
                       size_t v_stride, size_t lo, size_t len, size_t head_dim, float scale, const float *sinks,
                       float *scores, float *out);

/* §6.2 exp_pinned / §6.4 silu_pinned of n floats (out may be x), in
 * cx's variant's lanes (pmath_lanes.h): the scalar bits whatever the
 * variant.  On the calling thread. */
void cis2_exp_n(const cis2_ctx *cx, const float *x, float *out, size_t n);
void cis2_silu_n(const cis2_ctx *cx, const float *x, float *out, size_t n);
/* docs/models.md §M7.5 gelu_tanh_pinned of n floats, likewise. */
void cis2_gelu_n(const cis2_ctx *cx, const float *x, float *out, size_t n);
/* §11.2 argmax's index (pmath.h's argmax: strict >, the first maximum)
 * in cx's variant's lanes (pmath_lanes.h). */
size_t cis2_argmax_lanes(const cis2_ctx *cx, const float *v, size_t n);

/* ---- Additions (fast-kernels work) ---- */

/* 1 if this build and CPU can run the named kernel ("scalar", "avx2",
 * "avx512", "neon"); "auto" is always available. */
int cis2_kernel_available(const char *name);

/* Internal: one kernel variant computes output groups [g0, g1) of the
 * contract for every position (x and y as in cis2_matmul).  The pool splits
 * a matmul into group ranges; the variants never see threads.  The
 * variants themselves (their objects, what each ISA file gives) are
 * src/kernels/variant.h's.
 *
 * xt is NULL, or (for a variant with a prep function, from 8 positions on)
 * the same x transposed in blocks of 16 positions: position 16q+b, column i
 * at xt[(16q)*cols + i*16 + b], lanes past npos zero.  A variant may read
 * either; both hold the same values, so the bits cannot depend on it. */
typedef void (*cis2_kern_fn)(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y,
                             size_t g0, size_t g1);
typedef void (*cis2_prep_fn)(const float *x, size_t npos, size_t cols, float *xt);
typedef void (*cis2_scores_fn)(const float *q, size_t G, const float *kt, size_t len, size_t hd, float scale,
                               float *s);
typedef void (*cis2_vmix_fn)(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t hd,
                             float *out);
typedef void (*cis2_map_fn)(const float *x, float *out, size_t n); /* exp or SiLU of n floats */
typedef size_t (*cis2_argmax_fn)(const float *v, size_t n);
#define CIS2_XT_MIN_POS 8

#endif

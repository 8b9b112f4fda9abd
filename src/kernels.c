/*
 * kernels.c - packing, runtime dispatch, threading and the scalar
 * reference of the matrix kernel contract (kernels.h; spec §4.1, §5.1,
 * §5.2).
 *
 * Everything here runs on the context its caller passes (cis2_ctx,
 * kernels.h): its variant, its pool, its background work.  The variants
 * are objects their ISA files define (kernels/variant.h); this file lists
 * them and holds the loops around their micro-kernels, once.
 *
 * The scalar reference is the contract written out: one §5.1 dot_seq per
 * output row over the packed layout (an MXFP4 element widened first by
 * kernels.h's rule, its one multiply E2M1[code] * P(s)).  The SIMD variants (kern_x86_avx2.c,
 * kern_x86_avx512.c, kern_neon.c) put rows in lanes and must give the same
 * bits; tests/unit/test_kernels.c checks that.  cis2_matmul(_n) splits the
 * groups of rows (of one matrix, or of several sharing one x) into
 * contiguous ranges across the pool (§5.2: rows are independent), so the
 * thread count never changes a bit; a variant that reads a transposed copy
 * of x (AVX-512 from 8 positions on) gets it made once per call here.
 * cis2_exp_n / cis2_silu_n / cis2_gelu_n (§6.2, §6.4, docs/models.md
 * §M7.5: softmax, SwiGLU, Gemma's GELU, sampling) and
 * cis2_argmax_lanes (§11.2) run the context's variant's lane width of
 * pmath_lanes.h, or pmath.c's 4.
 */
#include "kernels.h"
#include "bigbuf.h"
#include "kernels/variant.h"
#include "pmath.h"
#include "threadpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- packing ---------------- */

struct pack_job {
    cis2_pmat *m;
    const uint8_t *src;
};

#define PACK_IB 128 /* column block: keeps the destination lines in L1 */

/* Group g of a matrix of es-byte little-endian elements (§4.1): element
 * (o, i) -> data[(g*cols + i)*KG + o%KG]; padding rows are zero.  Inlined
 * with es constant, so each weight type gets its own plain loop. */
static inline __attribute__((always_inline)) void pack_rows(const struct pack_job *j, size_t g, size_t es)
{
    const cis2_pmat *m = j->m;
    size_t cols = m->cols, r0 = g * CIS2_KG;
    size_t nr = m->rows - r0 < CIS2_KG ? m->rows - r0 : CIS2_KG;
    uint8_t *d = (uint8_t *)m->data + g * cols * CIS2_KG * es;
    for (size_t i0 = 0; i0 < cols; i0 += PACK_IB) {
        size_t i1 = i0 + PACK_IB < cols ? i0 + PACK_IB : cols;
        for (size_t r = 0; r < CIS2_KG; r++) {
            const uint8_t *s = r < nr ? j->src + (r0 + r) * cols * es : NULL; /* NULL: padding row */
            for (size_t i = i0; i < i1; i++) {
                uint32_t v = 0;
                if (s)
                    for (size_t q = 0; q < es; q++) v |= (uint32_t)s[i * es + q] << (8 * q);
                uint8_t *e = d + (i * CIS2_KG + r) * es;
                if (es == 2) { uint16_t h = (uint16_t)v; memcpy(e, &h, 2); }
                else memcpy(e, &v, 4);
            }
        }
    }
}

static void pack_group(void *vctx, size_t g)
{
    const struct pack_job *j = vctx;
    if (j->m->type == CIS2_W_BF16) pack_rows(j, g, 2);
    else pack_rows(j, g, 4);
}

/* MXFP4 (kernels.h, at cis2_wtype): group g's tiles.  Rows r0.. of the
 * view's src; blocks: src row r is cols/2 bytes, byte 16b + jj holding
 * columns 32b + 2jj (low nibble) and 32b + 2jj + 1 (high), each code put
 * where cis2_mx_byte / cis2_mx_shift say; scales: src row r is cols/32
 * bytes, tile b gets byte b.  Padding rows are 0 in both parts. */
static void pack_mx_blocks(void *vctx, size_t g)
{
    const struct pack_job *j = vctx;
    const cis2_pmat *m = j->m;
    size_t r0 = g * CIS2_KG, nr = m->rows - r0 < CIS2_KG ? m->rows - r0 : CIS2_KG;
    size_t nb = m->cols / 32, half = m->cols / 2;
    uint8_t *t = (uint8_t *)m->data + g * nb * CIS2_MX_TILE;
    for (size_t b = 0; b < nb; b++, t += CIS2_MX_TILE) {
        memset(t + 16, 0, CIS2_MX_TILE - 16);
        for (size_t k = 0; k < nr; k++) {
            const uint8_t *s = j->src + (r0 + k) * half + b * 16;
            for (size_t i = 0; i < 32; i++) {
                unsigned code = i & 1 ? s[i / 2] >> 4 : s[i / 2] & 15u;
                t[cis2_mx_byte(k, i)] |= (uint8_t)(code << cis2_mx_shift(k));
            }
        }
    }
}

static void pack_mx_scales(void *vctx, size_t g)
{
    const struct pack_job *j = vctx;
    const cis2_pmat *m = j->m;
    size_t r0 = g * CIS2_KG, nr = m->rows - r0 < CIS2_KG ? m->rows - r0 : CIS2_KG;
    size_t nb = m->cols / 32;
    uint8_t *t = (uint8_t *)m->data + g * nb * CIS2_MX_TILE;
    for (size_t b = 0; b < nb; b++, t += CIS2_MX_TILE)
        for (size_t k = 0; k < CIS2_KG; k++) t[k] = k < nr ? j->src[(r0 + k) * nb + b] : 0;
}

/* The bytes one row group takes (every type). */
static size_t group_bytes(cis2_wtype type, size_t cols)
{
    if (type == CIS2_W_MXFP4) return cols / 32 * CIS2_MX_TILE;
    return cols * CIS2_KG * (type == CIS2_W_BF16 ? 2 : 4);
}

/* A view of m's groups [g0, ...) holding nrows rows: the packers then see
 * src as its row 0. */
static cis2_pmat sub_view(const cis2_pmat *m, size_t g0, size_t nrows)
{
    cis2_pmat sub = *m;
    sub.rows = nrows;
    sub.groups = (nrows + CIS2_KG - 1) / CIS2_KG;
    sub.data = (uint8_t *)m->data + g0 * group_bytes(m->type, m->cols);
    return sub;
}

static void pack_mx_part(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows,
                         void (*fn)(void *, size_t))
{
    cis2_pmat sub = sub_view(m, g0, nrows);
    struct pack_job j = {&sub, src};
    if (m->cols && sub.groups) cis2_parallel_for(cx, sub.groups, fn, &j);
}

void cis2_pmat_pack_mxfp4_blocks(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows)
{
    pack_mx_part(cx, m, src, g0, nrows, pack_mx_blocks);
}

void cis2_pmat_pack_mxfp4_scales(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows)
{
    pack_mx_part(cx, m, src, g0, nrows, pack_mx_scales);
}

int cis2_pmat_pack(const cis2_ctx *cx, cis2_pmat *m, cis2_wtype type, const uint8_t *src, size_t rows,
                   size_t cols, cis2_error *err)
{
    int rc = cis2_pmat_alloc(m, type, rows, cols, err);
    if (rc) return rc;
    cis2_pmat_pack_groups(cx, m, src, 0, rows); /* the pool also spreads the page faults */
    return CIS2_OK;
}

void cis2_pmat_free(cis2_pmat *m)
{
    if (!m->borrowed) free(m->data);
    m->data = NULL;
}

size_t cis2_wmem_need(cis2_wtype type, size_t rows, size_t cols)
{
    if (type == CIS2_W_MXFP4 && cols % 32) return 0;
    size_t groups = (rows + CIS2_KG - 1) / CIS2_KG;
    if (cols && (cols > SIZE_MAX / 64 || groups > SIZE_MAX / 2 / group_bytes(type, cols))) return 0;
    size_t bytes = groups * group_bytes(type, cols);
    return bytes ? (bytes + 63) / 64 * 64 : 64;
}

/* a: NULL for a matrix of its own */
static int pmat_alloc(cis2_pmat *m, cis2_wmem *a, cis2_wtype type, size_t rows, size_t cols, cis2_error *err)
{
    memset(m, 0, sizeof *m);
    if (type != CIS2_W_BF16 && type != CIS2_W_F32 && type != CIS2_W_MXFP4)
        return cis2_fail(err, CIS2_E_INTERNAL, "kernels: unknown weight type %d", (int)type);
    if (type == CIS2_W_MXFP4 && cols % 32)
        return cis2_fail(err, CIS2_E_FORMAT, "kernels: MXFP4 matrix %zux%zu: columns not a multiple of 32", rows,
                         cols);
    size_t alloc = cis2_wmem_need(type, rows, cols);
    if (!alloc) return cis2_fail(err, CIS2_E_NOMEM, "kernels: %zux%zu matrix is too large to pack", rows, cols);
    void *data;
    if (a) {
        if (a->cap - a->used < alloc)
            return cis2_fail(err, CIS2_E_INTERNAL, "kernels: weight memory too small for a %zux%zu matrix", rows, cols);
        data = a->base + a->used;
        a->used += alloc;
        m->borrowed = 1;
    } else if (!(data = aligned_alloc(64, alloc)))
        return cis2_fail(err, CIS2_E_NOMEM, "kernels: out of memory packing a %zux%zu matrix", rows, cols);
    m->type = type; m->rows = rows; m->cols = cols; m->groups = (rows + CIS2_KG - 1) / CIS2_KG; m->data = data;
    size_t bytes = cis2_pmat_bytes(m);
    memset((uint8_t *)data + bytes, 0, alloc - bytes); /* the padding to 64 */
    return CIS2_OK;
}

/* Streaming pack (model.c's loader; docs/inputs.md "Memory"): the same layout and bits as
 * cis2_pmat_pack, filled a few row groups at a time from a bounded staging
 * buffer, so the packed matrix is the only full copy of the weights. */
int cis2_pmat_alloc(cis2_pmat *m, cis2_wtype type, size_t rows, size_t cols, cis2_error *err)
{
    return pmat_alloc(m, NULL, type, rows, cols, err);
}

int cis2_pmat_alloc_in(cis2_pmat *m, cis2_wmem *a, cis2_wtype type, size_t rows, size_t cols, cis2_error *err)
{
    return pmat_alloc(m, a, type, rows, cols, err);
}

int cis2_wmem_init(cis2_wmem *a, size_t bytes, cis2_error *err)
{
    memset(a, 0, sizeof *a);
    a->base = cis2_big_alloc(bytes, &a->cap); /* 2 MiB-aligned, huge pages hinted */
    if (!a->base) return cis2_fail(err, CIS2_E_NOMEM, "kernels: out of memory for %zu bytes of weights", bytes);
    return CIS2_OK;
}

void cis2_wmem_free(cis2_wmem *a)
{
    free(a->base);
    memset(a, 0, sizeof *a);
}

void cis2_pmat_pack_groups(const cis2_ctx *cx, cis2_pmat *m, const uint8_t *src, size_t g0, size_t nrows)
{
    if (m->type == CIS2_W_MXFP4) { /* the rows' blocks, then their scales */
        cis2_pmat_pack_mxfp4_blocks(cx, m, src, g0, nrows);
        cis2_pmat_pack_mxfp4_scales(cx, m, src + nrows * (m->cols / 2), g0, nrows);
        return;
    }
    cis2_pmat sub = sub_view(m, g0, nrows);
    struct pack_job j = {&sub, src};
    if (m->cols && sub.groups) cis2_parallel_for(cx, sub.groups, pack_group, &j);
}

size_t cis2_pmat_bytes(const cis2_pmat *m) { return m->groups * group_bytes(m->type, m->cols); }

/* ---------------- MXFP4 elements (kernels.h, at cis2_wtype) ---------------- */

/* The OCP e2m1 values by code, exact floats; every variant's table. */
const float cis2_e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* Element (o, i): E2M1[code] * P(s), the one f32 multiply of the rule. */
static inline float mx_elem(const cis2_pmat *m, size_t o, size_t i)
{
    const uint8_t *t = cis2_mx_tile(m, o / CIS2_KG, i / 32);
    size_t k = o % CIS2_KG;
    unsigned code = t[cis2_mx_byte(k, i)] >> cis2_mx_shift(k) & 15u;
    return cis2_e2m1[code] * cis2_mx_scale(t[k]);
}

static inline float elem(const cis2_pmat *m, size_t o, size_t i)
{
    if (m->type == CIS2_W_MXFP4) return mx_elem(m, o, i);
    size_t k = ((o / CIS2_KG) * m->cols + i) * CIS2_KG + o % CIS2_KG;
    if (m->type == CIS2_W_BF16) return bf16_to_f32(((const uint16_t *)m->data)[k]); /* §4.1 */
    return ((const float *)m->data)[k];
}

void cis2_pmat_row(const cis2_pmat *m, size_t r, float *out)
{
    for (size_t i = 0; i < m->cols; i++) out[i] = elem(m, r, i);
}

/* ---------------- the scalar reference ---------------- */

void cis2_kern_scalar(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0,
                      size_t g1)
{
    size_t cols = w->cols, rows = w->rows;
    for (size_t p = 0; p < npos; p++) {
        const float *xp = x + p * cols;
        for (size_t o = g0 * CIS2_KG; o < g1 * CIS2_KG && o < rows; o++) {
            size_t base = (o / CIS2_KG) * cols * CIS2_KG + o % CIS2_KG;
            float acc = 0.0f; /* §5.1: separate multiply, separate add, index order */
            if (w->type == CIS2_W_BF16) {
                const uint16_t *wr = (const uint16_t *)w->data + base;
                for (size_t i = 0; i < cols; i++) {
                    float prod = bf16_to_f32(wr[i * CIS2_KG]) * xp[i];
                    acc = acc + prod;
                }
            } else if (w->type == CIS2_W_MXFP4) { /* kernels.h: the tiles of row o's group, lane o % KG */
                size_t k = o % CIS2_KG;
                for (size_t b = 0; b < cols / 32; b++) {
                    const uint8_t *t = cis2_mx_tile(w, o / CIS2_KG, b);
                    float scale = cis2_mx_scale(t[k]); /* P(s) */
                    for (size_t i = 0; i < 32; i++) {
                        unsigned code = t[cis2_mx_byte(k, i)] >> cis2_mx_shift(k) & 15u;
                        float wv = cis2_e2m1[code] * scale; /* the one multiply */
                        float prod = wv * xp[32 * b + i];
                        acc = acc + prod;
                    }
                }
            } else {
                const float *wr = (const float *)w->data + base;
                for (size_t i = 0; i < cols; i++) {
                    float prod = wr[i * CIS2_KG] * xp[i];
                    acc = acc + prod;
                }
            }
            y[p * rows + o] = acc;
        }
    }
}

/* The reference as a variant (kernels/variant.h): every CPU runs it. */
const struct cis2_variant cis2_variant_scalar = {
    .name = "scalar",
    .cpu_needs = 0, /* the rest NULL: the generic lanes */
    .block = CIS2_BLOCK_SHAPE_DEFAULT,
    .matmul = cis2_kern_scalar,
};

/* ---------------- dispatch ---------------- */

/* This build's variants, fastest first: "auto" takes the first available. */
static const struct cis2_variant *const variants[] = {
#if defined(__x86_64__)
    &cis2_variant_avx512,
    &cis2_variant_avx2,
#endif
#if defined(__aarch64__)
    &cis2_variant_neon,
#endif
    &cis2_variant_scalar,
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

/* The CIS2_CPU_* features this CPU has (compiled for the baseline ISA). */
static unsigned cpu_features(void)
{
    unsigned f = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) f |= CIS2_CPU_AVX2;
    if (__builtin_cpu_supports("avx512f")) f |= CIS2_CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) f |= CIS2_CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vl")) f |= CIS2_CPU_AVX512VL;
#endif
    return f;
}

static int runs_here(const struct cis2_variant *v) { return (v->cpu_needs & ~cpu_features()) == 0; }

const struct cis2_variant *cis2_kernel_auto(void)
{
    for (size_t i = 0; i < NVARIANTS; i++)
        if (runs_here(variants[i])) return variants[i];
    return &cis2_variant_scalar;
}

cis2_ctx cis2_ctx_solo(void) { return (cis2_ctx){.pool = NULL, .kern = cis2_kernel_auto(), .bg = NULL}; }

int cis2_kernel_available(const char *name)
{
    if (!strcmp(name, "auto")) return 1;
    for (size_t i = 0; i < NVARIANTS; i++)
        if (!strcmp(name, variants[i]->name)) return runs_here(variants[i]);
    return 0;
}

int cis2_kernel_find(const char *name, const struct cis2_variant **out, cis2_error *err)
{
    if (!strcmp(name, "auto")) {
        *out = cis2_kernel_auto();
        return CIS2_OK;
    }
    for (size_t i = 0; i < NVARIANTS; i++)
        if (!strcmp(name, variants[i]->name)) {
            if (!runs_here(variants[i]))
                return cis2_fail(err, CIS2_E_UNSUPPORTED, "kernel '%s': this CPU lacks the instructions", name);
            *out = variants[i];
            return CIS2_OK;
        }
    return cis2_fail(err, CIS2_E_UNSUPPORTED, "kernel '%s' not available in this build (%s)", name,
                     cis2_isa_name());
}

const char *cis2_kernel_name(const struct cis2_variant *v) { return v->name; }

/* ---------------- threads ---------------- */

void cis2_parallel_for(const cis2_ctx *cx, size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
    if (n == 0) return;
    cis2_pool_run(n > 1 ? cx->pool : NULL, n, fn, arg);
}

/* Below this many multiply-adds a matmul stays on the calling thread. */
#define PAR_MIN_WORK ((size_t)1 << 16)
/* A parallel matmul's step of background work (threadpool.h): one byte of
 * SHA-256 (~1.7 GB/s on one core) per 256 multiply-adds (~40 G/s per
 * core here), about a fifth of the job's time, so a pass of the verifier
 * hashes 2-3 times the logits it makes and the step never dominates. */
#define BG_MACS_PER_BYTE 256

/* Chunk edges fall on whole register blocks of the variant (its block
 * shape, kernels/variant.h). */
static size_t group_align(const cis2_block_shape *b, size_t npos)
{
    return b->groups[npos >= b->groups_wide_from];
}
static size_t pos_align(const cis2_block_shape *b, size_t npos) { return b->pos[npos >= b->pos_wide_from]; }

struct mm_job {
    const cis2_pmat *const *w; /* nw matrices, all with the same cols */
    float *const *y;
    size_t nw, total;          /* total = groups of all matrices, end to end */
    const float *x, *xt;
    size_t npos, gchunks, pchunks;
    size_t ga, pa;             /* chunk edges: group_align, pos_align */
    cis2_kern_fn fn;
    cis2_bg *bg;               /* item 0 is its step when not NULL */
    size_t bg_bytes;
};

/* Chunk c = (range of the groups of all matrices laid end to end, range of
 * positions); edges on register blocks.  Splitting positions too keeps
 * small matrices balanced when several positions share a call; no row's
 * sum is ever split (§5.2). */
static void mm_chunk(void *vctx, size_t c)
{
    const struct mm_job *j = vctx;
    size_t gc = c / j->pchunks, pc = c % j->pchunks;
    size_t ga = j->ga, pa = j->pa;
    size_t blocks = (j->total + ga - 1) / ga;
    size_t f0 = blocks * gc / j->gchunks * ga;
    size_t f1 = gc + 1 == j->gchunks ? j->total : blocks * (gc + 1) / j->gchunks * ga;
    if (f1 > j->total) f1 = j->total;
    size_t pblocks = (j->npos + pa - 1) / pa;
    size_t p0 = pblocks * pc / j->pchunks * pa;
    size_t p1 = pc + 1 == j->pchunks ? j->npos : pblocks * (pc + 1) / j->pchunks * pa;
    if (p1 > j->npos) p1 = j->npos;
    if (p0 >= p1) return;
    size_t base = 0; /* the part of [f0, f1) in each matrix */
    for (size_t m = 0; m < j->nw && base < f1; base += j->w[m]->groups, m++) {
        const cis2_pmat *w = j->w[m];
        size_t g0 = f0 > base ? f0 - base : 0, g1 = f1 - base < w->groups ? f1 - base : w->groups;
        const float *xt = j->xt && p0 % 16 == 0 ? j->xt + p0 * w->cols : NULL; /* whole xt blocks only */
        if (g0 < g1) j->fn(w, j->x + p0 * w->cols, xt, p1 - p0, j->y[m] + p0 * w->rows, g0, g1);
    }
}

static void mm_item(void *vctx, size_t i)
{
    const struct mm_job *j = vctx;
    if (j->bg && i-- == 0) { j->bg->step(j->bg, j->bg_bytes); return; }
    mm_chunk(vctx, i);
}

/* The variant's transposed copy xt, 16 positions per item: each block of
 * xt depends on its own 16 positions of x only (kernels.h), so the blocks
 * are made in parallel (one thread alone would hold up the rest). */
struct prep_job { cis2_prep_fn prep; const float *x; size_t npos, cols; float *xt; };

static void prep_block(void *vctx, size_t i)
{
    const struct prep_job *j = vctx;
    size_t p = i * 16, n = j->npos - p < 16 ? j->npos - p : 16;
    j->prep(j->x + p * j->cols, n, j->cols, j->xt + p * j->cols);
}

void cis2_matmul_n(const cis2_ctx *cx, const cis2_pmat *const *w, size_t nw, const float *x, size_t npos,
                   float *const *y)
{
    const struct cis2_variant *v = cx->kern;
    cis2_kern_fn fn = v->matmul;
    float *xt = NULL; /* the variant's transposed copy of x, shared by all chunks */
    size_t cols = nw ? w[0]->cols : 0;
    if (v->prep && npos >= CIS2_XT_MIN_POS && cols) {
        xt = aligned_alloc(64, (npos + 15) / 16 * 16 * cols * sizeof(float)); /* NULL: x alone */
        struct prep_job pj = {v->prep, x, npos, cols, xt};
        if (xt) cis2_parallel_for(cx, (npos + 15) / 16, prep_block, &pj);
    }
    cis2_pool *pool = cx->pool;
    size_t nt = (size_t)cis2_pool_size(pool), total = 0;
    for (size_t m = 0; m < nw; m++) total += w[m]->groups;
    size_t work = total * CIS2_KG * cols * npos;
    size_t ga = group_align(&v->block, npos), pa = pos_align(&v->block, npos);
    size_t blocks = (total + ga - 1) / ga, pblocks = (npos + pa - 1) / pa;
    if (nt <= 1 || work < PAR_MIN_WORK || (blocks < 2 && pblocks < 2)) {
        for (size_t m = 0; m < nw; m++) fn(w[m], x, xt, npos, y[m], 0, w[m]->groups);
        free(xt);
        return;
    }
    /* a few chunks per thread: a preempted thread then delays only a small
     * one.  From 16 positions on many more: the wide path is compute-bound
     * and a single group is already a long item, so the job ends within
     * one small item of the ideal instead of within one of 8 (the 36
     * groups of SmolLM2's o and down projections as chunks of 4 and 5 left
     * a thread idle for ~10% of the call). */
    size_t per = npos >= 16 ? 32 : 4;
    size_t gch = per * nt < blocks ? per * nt : blocks;
    size_t pch = 1;
    while (gch * pch < 4 * nt && pch < pblocks) pch++;
    /* the call's background work, never from inside a job: there another
     * thread may be running a step of it (threadpool.h) */
    cis2_bg *bg = cx->bg;
    if (bg && (!bg->more || cis2_pool_in_job())) bg = NULL;
    struct mm_job j = {w, y, nw, total, x, xt, npos, gch, pch, ga, pa, fn, bg, work / BG_MACS_PER_BYTE};
    cis2_pool_run(pool, gch * pch + (bg != NULL), mm_item, &j);
    free(xt);
}

void cis2_matmul(const cis2_ctx *cx, const cis2_pmat *w, const float *x, size_t npos, float *y)
{
    cis2_matmul_n(cx, &w, 1, x, npos, &y);
}

/* ---------------- exp and SiLU, attention ---------------- */

/* A variant's §6.2 exp of n floats: its own lanes, or pmath.c's 4. */
static cis2_map_fn exp_of(const struct cis2_variant *var) { return var->expn ? var->expn : exp_pinned_n; }

void cis2_exp_n(const cis2_ctx *cx, const float *x, float *out, size_t n) { exp_of(cx->kern)(x, out, n); } /* §6.2 */

void cis2_silu_n(const cis2_ctx *cx, const float *x, float *out, size_t n)
{
    const struct cis2_variant *var = cx->kern;
    (var->silun ? var->silun : silu_pinned_n)(x, out, n); /* §6.4 */
}

void cis2_gelu_n(const cis2_ctx *cx, const float *x, float *out, size_t n)
{
    const struct cis2_variant *var = cx->kern;
    (var->gelun ? var->gelun : gelu_tanh_pinned_n)(x, out, n); /* §M7.5 */
}

size_t cis2_argmax_lanes(const cis2_ctx *cx, const float *v, size_t n)
{
    const struct cis2_variant *var = cx->kern;
    return (var->argmax ? var->argmax : argmax_n)(v, n); /* §11.2 */
}

void cis2_attend_group(const cis2_ctx *cx, const float *q, size_t G, const float *kt, const float *v,
                       size_t v_stride, size_t lo, size_t len, size_t head_dim, float scale, const float *sinks,
                       float *scores, float *out)
{
    const struct cis2_variant *var = cx->kern;
    /* Keys [lo, len) (docs/models.md §M5): the scores of [b, len), b = the
     * start of lo's key block, each one key's own dot product (§9.2), then
     * each head's row moved down to its [lo, len) part. */
    size_t b = lo / 16 * 16, skip = lo - b, m = len - b, w = len - lo;
    (var->scores ? var->scores : cis2_attn_scores_generic)(q, G, kt + b * head_dim, m, head_dim, scale, scores);
    if (skip)
        for (size_t g = 0; g < G; g++) memmove(scores + g * w, scores + g * m + skip, w * sizeof(float));
    if (sinks) /* docs/models.md §M9.3: each head's sink in its denominator */
        for (size_t g = 0; g < G; g++) softmax_sink(scores + g * w, w, sinks[g], exp_of(var));
    else softmax_seq_rows(scores, G, w, exp_of(var)); /* §9.3, head by head */
    (var->vmix ? var->vmix : cis2_attn_vmix_generic)(scores, G, v + lo * v_stride, v_stride, w, head_dim, out); /* §9.4 */
}

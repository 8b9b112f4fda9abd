/*
 * kern_x86_avx2.c - the AVX2 variant of the matrix kernel contract
 * (kernels.h; spec §4.1, §5.1, §5.2).  Compiled with -mavx2 only (never
 * -mfma); called only after a CPUID check.
 *
 * A 16-row group is two ymm (rows 0-7, 8-15); lane j of each accumulates
 * its own row with one separate multiply (vmulps) and one separate add
 * (vaddps) per element in index order, exactly §5.1.  Independent
 * accumulators hide the add latency: 4 groups at npos == 1, or one group
 * times up to 6 positions sharing each weight vector (12 accumulators, 2
 * weight halves and a broadcast: 15 of the 16 ymm).  bf16 is widened
 * exactly: zero-extend u16 -> u32, shift left 16 (§4.1).
 *
 * Two loops around that one register block:
 * - up to 6 positions (decode; memory-bound): straight from the packed
 *   matrix, widening in-register, each weight stream prefetched PF_COLS
 *   columns ahead;
 * - more positions (prefill, verification, batches; compute-bound, where
 *   widening in every block would cost a fifth of the vector
 *   instructions): each group's columns go through in ranges of at most
 *   TILE_COLS; a range's first position block widens as above and keeps
 *   the widened vectors in an f32 tile that the range's other blocks read
 *   from L1/L2.  A row's sum crosses a range edge through y: the block
 *   stores its partial sums there and the next range's block starts from
 *   them; a float stored and reloaded is the same float, so each row is
 *   still one §5.1 sum in index order.
 * MXFP4 weights (kernels.h, at cis2_wtype) have their own loops (mx_kern,
 * below): up to 2 positions widen in-register, more widen a column range
 * once into the same kind of f32 tile and run the f32 register block on it.
 * Also the AVX2 attention halves (§9.2 scores, §9.4 V-mix) and the
 * 8-lane §6.2 exp, §6.4 SiLU and §M7.5 GELU (pmath_lanes.h's one definition at this
 * width; bottom of the file).
 */
#include "variant.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))
#ifndef PF_COLS
#define PF_COLS 32 /* columns ahead in each weight stream (never faults) */
#endif

AI __m256 load_w(const void *base, size_t k, int bf)
{
    if (bf) {
        __m128i h = _mm_load_si128((const __m128i *)((const uint16_t *)base + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); /* §4.1 */
    }
    return _mm256_load_ps((const float *)base + k);
}

AI void store_rows(float *dst, size_t nv, __m256 lo, __m256 hi)
{
    if (nv == CIS2_KG) {
        _mm256_storeu_ps(dst, lo);
        _mm256_storeu_ps(dst + 8, hi);
    } else {
        float t[CIS2_KG];
        _mm256_storeu_ps(t, lo);
        _mm256_storeu_ps(t + 8, hi);
        memcpy(dst, t, nv * sizeof(float));
    }
}

AI void load_rows(const float *src, size_t nv, __m256 *lo, __m256 *hi)
{
    if (nv == CIS2_KG) {
        *lo = _mm256_loadu_ps(src);
        *hi = _mm256_loadu_ps(src + 8);
    } else {
        float t[CIS2_KG] = {0};
        memcpy(t, src, nv * sizeof(float));
        *lo = _mm256_loadu_ps(t);
        *hi = _mm256_loadu_ps(t + 8);
    }
}

/* One register block's operands, for G groups x P positions over n columns. */
struct blk {
    const void *w;      /* the first group's data at the range's first column */
    size_t gs;          /* elements from one group's data to the next's */
    const float *x;     /* position b's x at x + b*cols, the range's first column */
    size_t cols, n;
    float *y;           /* position b's outputs at y + b*rows, row o0 first */
    size_t rows, o0;
    const char *pf;     /* the stream to prefetch (into L1), pfs bytes per column */
    size_t pfs;
    float *tile;        /* save: where the widened weights go (G == 1) */
};

/* The register block (G*P <= 6; all constants once inlined).  more: the
 * accumulators start from the partial sums in y rather than from zero.
 * save: also store each widened weight vector to k->tile. */
AI void block(const struct blk *k, int bf, int G, int P, int more, int save)
{
    size_t es = bf ? 2 : 4;
    __m256 acc[4][6][2];
#pragma GCC unroll 6
    for (int a = 0; a < G; a++) {
        size_t o = k->o0 + a * CIS2_KG, nv = k->rows - o < CIS2_KG ? k->rows - o : CIS2_KG;
#pragma GCC unroll 6
        for (int b = 0; b < P; b++) {
            if (more) load_rows(k->y + b * k->rows + o, nv, &acc[a][b][0], &acc[a][b][1]);
            else acc[a][b][0] = acc[a][b][1] = _mm256_setzero_ps();
        }
    }
    for (size_t i = 0; i < k->n; i++) {
        __m256 wv[4][2];
#pragma GCC unroll 6
        for (int a = 0; a < G; a++) {
            _mm_prefetch(k->pf + a * k->gs * es + i * k->pfs, _MM_HINT_T0);
            wv[a][0] = load_w(k->w, a * k->gs + i * CIS2_KG, bf);
            wv[a][1] = load_w(k->w, a * k->gs + i * CIS2_KG + 8, bf);
        }
        if (save) {
            _mm256_store_ps(k->tile + i * CIS2_KG, wv[0][0]);
            _mm256_store_ps(k->tile + i * CIS2_KG + 8, wv[0][1]);
        }
#pragma GCC unroll 6
        for (int b = 0; b < P; b++) {
            __m256 xb = _mm256_broadcast_ss(k->x + b * k->cols + i);
#pragma GCC unroll 6
            for (int a = 0; a < G; a++) {
                __m256 p0 = _mm256_mul_ps(wv[a][0], xb); /* §5.1 separate multiply */
                __m256 p1 = _mm256_mul_ps(wv[a][1], xb);
                acc[a][b][0] = _mm256_add_ps(acc[a][b][0], p0); /* §5.1 separate add */
                acc[a][b][1] = _mm256_add_ps(acc[a][b][1], p1);
            }
        }
    }
#pragma GCC unroll 6
    for (int a = 0; a < G; a++) {
        size_t o = k->o0 + a * CIS2_KG, nv = k->rows - o < CIS2_KG ? k->rows - o : CIS2_KG;
#pragma GCC unroll 6
        for (int b = 0; b < P; b++) store_rows(k->y + b * k->rows + o, nv, acc[a][b][0], acc[a][b][1]);
    }
}

/* CALL(P) with P = n (1..6) as a compile-time constant. */
#define WITH_P(n, CALL)                                                                  \
    switch (n) {                                                                         \
    case 1: CALL(1); break;                                                              \
    case 2: CALL(2); break;                                                              \
    case 3: CALL(3); break;                                                              \
    case 4: CALL(4); break;                                                              \
    case 5: CALL(5); break;                                                              \
    default: CALL(6); break;                                                             \
    }

/* One group x P positions (1..6) from packed bf16 (bf: widening
 * in-register; save: keeping the widened vectors in k.tile) or from f32
 * (packed f32, or a tile).  The operands come by value: a local copy that
 * no store can alias (a vector store may alias anything), so the loop
 * keeps them in registers (through a pointer it reloads them, ~6% slower). */
static void one_group(struct blk kv, int bf, int P, int more, int save)
{
    const struct blk *k = &kv;
#define SAVE(PP) block(k, 1, 1, PP, more, 1)
#define B16(PP) block(k, 1, 1, PP, more, 0)
#define F32(PP) block(k, 0, 1, PP, more, 0)
    if (bf && save) {
        WITH_P(P, SAVE)
    } else if (bf) {
        WITH_P(P, B16)
    } else {
        WITH_P(P, F32)
    }
#undef SAVE
#undef B16
#undef F32
}

#ifndef TILE_COLS
#define TILE_COLS 1024 /* a tile of at most 64 KB: fits L2, and stays below malloc's mmap threshold */
#endif

/* Groups [g0, g1), one at a time, every position.  With a tile (bf16 and
 * more than 6 positions): column ranges of at most TILE_COLS (split
 * evenly); a range's first position block reads the packed weights as the
 * direct path does and keeps them widened in the tile, which the range's
 * other blocks then read.  Without one: every column at once, straight
 * from the packed matrix.  (Measured slower here: a separate widening pass
 * before the blocks; ranges outside and groups inside, to keep a range's
 * x in L2.) */
static void by_group(const cis2_pmat *w, const float *x, size_t npos, float *y, size_t g0, size_t g1, float *tile)
{
    int bf = w->type == CIS2_W_BF16;
    size_t cols = w->cols, rows = w->rows, es = bf ? 2 : 4;
    size_t nr = tile ? (cols + TILE_COLS - 1) / TILE_COLS : 1, per = (cols + nr - 1) / nr;
    for (size_t g = g0; g < g1; g++)
        for (size_t c0 = 0; c0 < cols; c0 += per) {
            size_t n = cols - c0 < per ? cols - c0 : per;
            const char *src = (const char *)w->data + (g * cols + c0) * CIS2_KG * es;
            for (size_t p = 0; p < npos; p += 6) {
                int P = npos - p < 6 ? (int)(npos - p) : 6;
                struct blk k = {src, 0, x + p * cols + c0, cols, n, y + p * rows, rows, g * CIS2_KG,
                                src + PF_COLS * CIS2_KG * es, CIS2_KG * es, tile};
                if (tile && p > 0) { /* the tile, from L1/L2: no widening */
                    k.w = tile;
                    k.pf = (const char *)(tile + PF_COLS * CIS2_KG);
                    k.pfs = CIS2_KG * sizeof(float);
                    one_group(k, 0, P, c0 > 0, 0);
                } else {
                    one_group(k, bf, P, c0 > 0, tile != NULL); /* §4.1 */
                }
            }
        }
}

/* ---- MXFP4 (kernels.h, at cis2_wtype) ----
 * One column pair of a group is 16 bytes in the layout kernels.h gives.
 * Broadcast to both 128-bit lanes and shifted right by 0 (lane 0) or 4
 * (lane 1) bits, then masked, it is 32 code bytes: lane 0 the low nibbles,
 * lane 1 the high ones.  Two byte shuffles (vpshufb) look up bits 24-31
 * and 16-23 of the f32 E2M1[code] (bits 0-15 are zero for every code);
 * unpacking them into 16-bit words and those, above zero words, into
 * 32-bit lanes gives the exact f32 E2M1[code] of column 2j rows 0-7, rows
 * 8-15, then column 2j+1 rows 0-7, rows 8-15 (that order is why the
 * layout interleaves rows as it does: every step stays in its 128-bit
 * lane).  Then w = E2M1[code] * P(s), the rule's one multiply (vmulps),
 * with P(s) the scale bytes zero-extended and shifted left 23.  From there
 * w is an f32 weight like any other: §5.1's vmulps and vaddps per
 * position, column 2j before 2j+1.  (vpermps on the nibbles would do the
 * look-up too, but costs 2 cycles a lookup on Zen 3, where these shuffles
 * and unpacks cost half a cycle each.) */

struct mx_const {
    __m256i th, tl; /* bytes 3 and 2 of the f32 E2M1[c] at byte c of each lane */
    __m256i sh;     /* shift counts: 0 in lane 0, 4 in lane 1 */
};

AI struct mx_const mx_const(void)
{
    uint8_t th[16], tl[16];
    for (int c = 0; c < 16; c++) {
        uint32_t b;
        memcpy(&b, &cis2_e2m1[c], 4);
        th[c] = (uint8_t)(b >> 24);
        tl[c] = (uint8_t)(b >> 16);
    }
    struct mx_const k;
    k.th = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)th));
    k.tl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tl));
    k.sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    return k;
}

/* P(s) of rows 8h..8h+7 from a tile's scale bytes. */
AI __m256 mx_scale8(const uint8_t *t, int h)
{
    __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(t + 8 * h)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(s, 23));
}

/* The column pair at q: w[0], w[1] column 2j rows 0-7, 8-15; w[2], w[3]
 * column 2j+1 rows 0-7, 8-15; s0, s1: P(s) of rows 0-7, 8-15. */
AI void mx_pair(const uint8_t *q, const struct mx_const *k, __m256 s0, __m256 s1, __m256 w[4])
{
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q));
    __m256i c = _mm256_and_si256(_mm256_srlv_epi32(v, k->sh), _mm256_set1_epi8(0x0F));
    __m256i hb = _mm256_shuffle_epi8(k->th, c), lb = _mm256_shuffle_epi8(k->tl, c);
    __m256i w0 = _mm256_unpacklo_epi8(lb, hb), w1 = _mm256_unpackhi_epi8(lb, hb), z = _mm256_setzero_si256();
    w[0] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, w0)), s0); /* the rule's one multiply */
    w[1] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, w0)), s1);
    w[2] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, w1)), s0);
    w[3] = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, w1)), s1);
}

#ifndef MX_PF
#define MX_PF (4 * CIS2_MX_TILE) /* bytes ahead in each group's stream */
#endif

/* Group g x P positions (p..p+P-1), widening in-register.  One group's
 * two add chains suffice: two groups side by side (four chains) were no
 * faster on Zen 3, where the widening's shuffles and the multiplies, not
 * the add latency, set the pace. */
AI void mx_block(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P)
{
    size_t cols = w->cols, rows = w->rows, nb = cols / 32;
    const uint8_t *tl = cis2_mx_tile(w, g, 0);
    const float *xp = x + p * cols;
    struct mx_const kc = mx_const();
    __m256 acc[2][2];
#pragma GCC unroll 2
    for (int b = 0; b < P; b++) acc[b][0] = acc[b][1] = _mm256_setzero_ps();
    for (size_t t = 0; t < nb; t++, tl += CIS2_MX_TILE) {
        __m256 s0 = mx_scale8(tl, 0), s1 = mx_scale8(tl, 1);
        for (size_t j = 0; j < 16; j++) {
            const uint8_t *q = tl + 16 + j * 16;
            const float *xi = xp + t * 32 + 2 * j;
            __m256 wv[4];
            _mm_prefetch((const char *)q + MX_PF, _MM_HINT_T0); /* never faults */
            mx_pair(q, &kc, s0, s1, wv);
#pragma GCC unroll 2
            for (int b = 0; b < P; b++) {
                __m256 x0 = _mm256_broadcast_ss(xi + b * cols), x1 = _mm256_broadcast_ss(xi + b * cols + 1);
                acc[b][0] = _mm256_add_ps(acc[b][0], _mm256_mul_ps(wv[0], x0)); /* §5.1: column 2j */
                acc[b][1] = _mm256_add_ps(acc[b][1], _mm256_mul_ps(wv[1], x0));
                acc[b][0] = _mm256_add_ps(acc[b][0], _mm256_mul_ps(wv[2], x1)); /* then 2j+1 */
                acc[b][1] = _mm256_add_ps(acc[b][1], _mm256_mul_ps(wv[3], x1));
            }
        }
    }
    size_t o = g * CIS2_KG, nv = rows - o < CIS2_KG ? rows - o : CIS2_KG;
#pragma GCC unroll 2
    for (int b = 0; b < P; b++) store_rows(y + (p + b) * rows + o, nv, acc[b][0], acc[b][1]);
}

static void mx_g1(const cis2_pmat *w, const float *x, float *y, size_t g, size_t p, int P)
{
    if (P == 1) mx_block(w, x, y, g, p, 1);
    else mx_block(w, x, y, g, p, 2);
}

#ifndef MX_DIRECT_MAX
#define MX_DIRECT_MAX 2 /* positions widened in-register; from 3 on the f32 tile is faster */
#endif

/* Group g's columns [c0, c1) (multiples of 32) widened into tile[(i - c0)*KG + k]
 * (the AVX-512 variant's wide path uses it too). */
void cis2_mx_widen_avx2(const cis2_pmat *w, size_t g, size_t c0, size_t c1, float *tile)
{
    struct mx_const kc = mx_const();
    for (size_t t = c0 / 32; t < c1 / 32; t++) {
        const uint8_t *tl = cis2_mx_tile(w, g, t);
        __m256 s0 = mx_scale8(tl, 0), s1 = mx_scale8(tl, 1);
        float *d = tile + (t * 32 - c0) * CIS2_KG;
        for (size_t j = 0; j < 16; j++) {
            __m256 wv[4];
            mx_pair(tl + 16 + j * 16, &kc, s0, s1, wv);
            _mm256_store_ps(d + j * 2 * CIS2_KG, wv[0]);
            _mm256_store_ps(d + j * 2 * CIS2_KG + 8, wv[1]);
            _mm256_store_ps(d + j * 2 * CIS2_KG + 16, wv[2]);
            _mm256_store_ps(d + j * 2 * CIS2_KG + 24, wv[3]);
        }
    }
}

/* MXFP4 groups [g0, g1): up to MX_DIRECT_MAX positions straight from the
 * packed tiles; more, group by group in column ranges of at most
 * TILE_COLS (multiples of 32), each range widened once into an f32 tile
 * that every position block of up to 6 then reads as f32 weights
 * (one_group; a row's sum crosses a range edge through y, as in by_group).
 * The AVX-512 variant runs it too for the positions its wide path leaves. */
void cis2_mx_kern_avx2(const cis2_pmat *w, const float *x, size_t npos, float *y, size_t g0, size_t g1)
{
    size_t g = g0, cols = w->cols, rows = w->rows;
    float *tile = npos > MX_DIRECT_MAX ? aligned_alloc(64, TILE_COLS * CIS2_KG * sizeof(float)) : NULL;
    if (!tile) { /* few positions (or no memory for a tile: the same bits) */
        for (; g < g1; g++)
            for (size_t p = 0; p < npos; p += MX_DIRECT_MAX)
                mx_g1(w, x, y, g, p, npos - p < MX_DIRECT_MAX ? (int)(npos - p) : MX_DIRECT_MAX);
        return;
    }
    size_t nr = (cols + TILE_COLS - 1) / TILE_COLS, per = ((cols + nr - 1) / nr + 31) / 32 * 32;
    for (; g < g1; g++)
        for (size_t c0 = 0; c0 < cols; c0 += per) {
            size_t n = cols - c0 < per ? cols - c0 : per;
            cis2_mx_widen_avx2(w, g, c0, c0 + n, tile);
            for (size_t p = 0; p < npos; p += 6) {
                int P = npos - p < 6 ? (int)(npos - p) : 6;
                struct blk k = {tile, 0, x + p * cols + c0, cols, n, y + p * rows, rows, g * CIS2_KG,
                                (const char *)(tile + PF_COLS * CIS2_KG), CIS2_KG * sizeof(float), NULL};
                one_group(k, 0, P, c0 > 0, 0);
            }
        }
    free(tile);
}

void cis2_kern_avx2(const cis2_pmat *w, const float *x, const float *xt, size_t npos, float *y, size_t g0,
                    size_t g1)
{
    if (w->type == CIS2_W_MXFP4) { cis2_mx_kern_avx2(w, x, npos, y, g0, g1); return; }
    (void)xt;
    int bf = w->type == CIS2_W_BF16;
    size_t g = g0;
    if (npos == 1) /* 4 groups x 1 position */
        for (; g + 4 <= g1; g += 4) {
            size_t cols = w->cols, gs = cols * CIS2_KG, es = bf ? 2 : 4;
            const char *wp = (const char *)w->data + g * gs * es;
            struct blk k = {wp, gs, x, cols, cols, y, w->rows, g * CIS2_KG, wp + PF_COLS * CIS2_KG * es,
                            CIS2_KG * es, NULL};
            if (bf) block(&k, 1, 4, 1, 0, 0);
            else block(&k, 0, 4, 1, 0, 0);
        }
    if (g == g1) return;
    /* no memory for a tile: the blocks widen for themselves, the same bits */
    float *tile = bf && npos > 6 ? aligned_alloc(64, TILE_COLS * CIS2_KG * sizeof(float)) : NULL;
    by_group(w, x, npos, y, g, g1, tile);
    free(tile);
}

/* ---- attention (§9.2, §9.4) for the G query heads of one KV head ----
 * Same lanes as the generic versions (pmath.c) and the AVX-512 ones: a
 * score's lane is one key of a 16-key block, summed over d in order, then
 * scaled; a V-mix lane is one dim, summed over positions in order.
 * Register blocks of up to 3 heads x 2 key blocks (scores) or 3 heads x
 * 2 sixteen-dim chunks (V-mix): 12 accumulators, each key or value vector
 * loaded once per step for all the heads.  V-mix dims past the last whole
 * chunk run one at a time, as the generic version runs them. */

AI void scores_blk(const float *q, const float *kt, size_t len, size_t hd, float scale, float *s, size_t h0,
                   size_t b0, int NH, int NB)
{
    __m256 acc[3][2][2];
#pragma GCC unroll 3
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) acc[a][b][0] = acc[a][b][1] = _mm256_setzero_ps();
    const float *k0 = kt + b0 * 16 * hd;
    for (size_t d = 0; d < hd; d++) {
#pragma GCC unroll 3
        for (int a = 0; a < NH; a++) {
            __m256 qa = _mm256_broadcast_ss(q + (h0 + (size_t)a) * hd + d);
#pragma GCC unroll 2
            for (int b = 0; b < NB; b++) {
                const float *kd = k0 + (size_t)b * 16 * hd + d * 16;
                acc[a][b][0] = _mm256_add_ps(acc[a][b][0], _mm256_mul_ps(qa, _mm256_loadu_ps(kd))); /* §5.1 */
                acc[a][b][1] = _mm256_add_ps(acc[a][b][1], _mm256_mul_ps(qa, _mm256_loadu_ps(kd + 8)));
            }
        }
    }
    __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 2
    for (int b = 0; b < NB; b++) {
        size_t j0 = (b0 + (size_t)b) * 16, n = len - j0 < 16 ? len - j0 : 16;
#pragma GCC unroll 3
        for (int a = 0; a < NH; a++) {
            float *dst = s + (h0 + (size_t)a) * len + j0;
            __m256 lo = _mm256_mul_ps(acc[a][b][0], sc), hi = _mm256_mul_ps(acc[a][b][1], sc); /* §9.2 */
            store_rows(dst, n, lo, hi);
        }
    }
}

AI void vmix_blk(const float *s, const float *v, size_t v_stride, size_t len, size_t hd, float *out, size_t h0,
                 size_t c0, int NH, int NC)
{
    __m256 acc[3][2][2];
#pragma GCC unroll 3
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 2
        for (int c = 0; c < NC; c++) acc[a][c][0] = acc[a][c][1] = _mm256_setzero_ps();
    for (size_t j = 0; j < len; j++) {
        const float *vj = v + j * v_stride + c0 * 16;
#pragma GCC unroll 3
        for (int a = 0; a < NH; a++) {
            __m256 sa = _mm256_broadcast_ss(s + (h0 + (size_t)a) * len + j);
#pragma GCC unroll 2
            for (int c = 0; c < NC; c++) {
                acc[a][c][0] = _mm256_add_ps(acc[a][c][0], _mm256_mul_ps(sa, _mm256_loadu_ps(vj + c * 16))); /* §9.4 */
                acc[a][c][1] = _mm256_add_ps(acc[a][c][1], _mm256_mul_ps(sa, _mm256_loadu_ps(vj + c * 16 + 8)));
            }
        }
    }
#pragma GCC unroll 3
    for (int a = 0; a < NH; a++)
#pragma GCC unroll 2
        for (int c = 0; c < NC; c++) store_rows(out + (h0 + (size_t)a) * hd + (c0 + (size_t)c) * 16, 16,
                                                acc[a][c][0], acc[a][c][1]);
}

/* F(args..., n1, n2) with n1 in 1..3, n2 in 1..2 as compile-time constants. */
#define C2(F, NH, N2, ...)                                                                              \
    if ((N2) == 1) F(__VA_ARGS__, NH, 1); else F(__VA_ARGS__, NH, 2);
#define C32(F, N1, N2, ...)                                                                             \
    switch (N1) {                                                                                       \
    case 1: C2(F, 1, N2, __VA_ARGS__) break;                                                            \
    case 2: C2(F, 2, N2, __VA_ARGS__) break;                                                            \
    default: C2(F, 3, N2, __VA_ARGS__) break;                                                           \
    }

void cis2_attn_scores_avx2(const float *q, size_t G, const float *kt, size_t len, size_t hd, float scale, float *s)
{
    size_t nblk = (len + 15) / 16;
    for (size_t h0 = 0; h0 < G; h0 += 3)
        for (size_t b0 = 0; b0 < nblk; b0 += 2) {
            int n1 = G - h0 < 3 ? (int)(G - h0) : 3, n2 = nblk - b0 < 2 ? (int)(nblk - b0) : 2;
            C32(scores_blk, n1, n2, q, kt, len, hd, scale, s, h0, b0)
        }
}

void cis2_attn_vmix_avx2(const float *s, size_t G, const float *v, size_t v_stride, size_t len, size_t hd,
                         float *out)
{
    size_t nc = hd / 16; /* whole 16-dim chunks; the rest below */
    for (size_t h0 = 0; h0 < G; h0 += 3)
        for (size_t c0 = 0; c0 < nc; c0 += 2) {
            int n1 = G - h0 < 3 ? (int)(G - h0) : 3, n2 = nc - c0 < 2 ? (int)(nc - c0) : 2;
            C32(vmix_blk, n1, n2, s, v, v_stride, len, hd, out, h0, c0)
        }
    for (size_t h = 0; h < G; h++)
        for (size_t d = nc * 16; d < hd; d++) {
            float acc = 0.0f;
            for (size_t j = 0; j < len; j++) {
                float p = s[h * len + j] * v[j * v_stride + d]; /* §9.4 */
                acc = acc + p;
            }
            out[h * hd + d] = acc;
        }
}

/* ---- §6.2 exp, §6.4 SiLU, §M7.5 GELU and §11.2 argmax, 8 lanes (pmath_lanes.h), the rest by pmath.c's 4 ---- */
#define LANES 8
#define LN(f) f##_v8
#include "pmath_lanes.h"

void cis2_exp_n_avx2(const float *x, float *out, size_t n) { exp_n_v8(x, out, n, exp_pinned_n); }

void cis2_silu_n_avx2(const float *x, float *out, size_t n) { silu_n_v8(x, out, n, silu_pinned_n); }

void cis2_gelu_n_avx2(const float *x, float *out, size_t n) { gelu_n_v8(x, out, n, gelu_tanh_pinned_n); }

size_t cis2_argmax_n_avx2(const float *v, size_t n) { return argmax_n_v8(v, n); } /* §11.2 */

/* The variant (variant.h): one group x up to 6 positions, no transposed x. */
const struct cis2_variant cis2_variant_avx2 = {
    .name = "avx2",
    .cpu_needs = CIS2_CPU_AVX2,
    .block = CIS2_BLOCK_SHAPE_DEFAULT,
    .matmul = cis2_kern_avx2,
    .prep = NULL,
    .scores = cis2_attn_scores_avx2,
    .vmix = cis2_attn_vmix_avx2,
    .expn = cis2_exp_n_avx2,
    .silun = cis2_silu_n_avx2,
    .gelun = cis2_gelu_n_avx2,
    .argmax = cis2_argmax_n_avx2,
};

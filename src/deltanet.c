/*
 * deltanet.c - the Gated DeltaNet token mixer of a decoder layer
 * (forward.h, CIS2_MIXER_DELTANET): docs/models.md §M10.3 (the layer) and
 * §M10.4 (its recurrent state).  Caller: model.c's cis2_forward, once per
 * "linear_attention" layer of a hybrid family (qwen3_5).
 *
 * In the pinned order, for the rows of a pass (of any sequences), with C =
 * 2 Hk dk + Hv dv conv channels (q, then k, then v):
 *   1. mixed = in_proj_qkv·x (C values), z = in_proj_z·x (Hv dv),
 *      b = in_proj_b·x, a = in_proj_a·x (Hv each): one weight pass for the
 *      four (§5.2); qwen3_next's in_proj_qkvz and in_proj_ba give the same
 *      values grouped per key head, regrouped (§M10.11);
 *   2. per sequence, its rows in position order, per channel c: the causal
 *      depthwise conv over the channel's last K inputs (the K - 1 before
 *      the row from the state's window, zeros before position 0),
 *      acc = +0 then acc = acc + w[j] * in[j] for the taps j = 0 .. K-1,
 *      oldest first, then silu_pinned(acc); the window moves on by the
 *      row's input;
 *   3. per row: each key head's q and k l2-normalised (their §5.3 sum of
 *      squares, + 1e-6, §6.1's rsqrt, each element times it), then q times
 *      rsqrt_cr(dk); each value head's beta = sigmoid_pinned(b) and
 *      decay = exp_pinned(na * softplus_pinned(a + dt_bias)), na =
 *      -exp_pinned(A_log) (model.c computes it at load);
 *   4. per sequence and value head h (reading key head h / (Hv / Hk)), its
 *      rows in position order, the delta rule on h's state S [dk][dv]
 *      (§M10.4): S = S * decay, kv = S^T k, u = (v - kv) * beta,
 *      S = S + k u^T, o = S^T q (each sum over dk from +0 in index order);
 *   5. per row and value head: §8's rmsnorm of o with the gated norm's
 *      plain weight and rms_norm_eps, times silu_pinned(z);
 *   6. out_proj of the Hv dv values into F->g.
 *
 * Steps 2 and 4 run one task per (sequence, block of channels) and per
 * (sequence, value head) across the pool, each task owning its elements
 * and walking its sequence's rows in order: neither the threads, the
 * kernel, the batch nor how a prompt is cut into passes changes a bit,
 * and a prefill of T rows is exactly T decode steps' arithmetic.
 */
#include "forward.h"
#include "pmath.h"

#include <string.h>

#define CONV_BLK 64             /* channels per conv task */

/* Four lanes of binary32 (GCC/Clang vector extensions, as pmath.c's): each
 * lane one element e of a row, its own chain of the same IEEE operations
 * as the scalar loop (-ffp-contract=off: no fusing), so the bits are the
 * scalar code's. */
typedef float v4f __attribute__((vector_size(16)));
static inline v4f ld4(const float *p) { v4f r; memcpy(&r, p, sizeof r); return r; }
static inline void st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }
#define MAX_DIM 1024            /* dk, dv at most this (config.c) */
#define L2_EPS 0x358637BDu      /* (f32) 1e-6, the l2 norm's (§M10.3) */

/* The scratch of one call, carved from F->dn (cis2_deltanet_scratch floats). */
typedef struct dn_ws {
    float *mixed;               /* n x C: in_proj_qkv's output, then the conv's, then q, k normalised */
    float *z;                   /* n x Hv dv: in_proj_z's output, then silu of it */
    float *b;                   /* n x Hv: in_proj_b's output, then beta */
    float *a;                   /* n x Hv: in_proj_a's output, then the decay */
    float *o;                   /* n x Hv dv: the delta rule's read-out, then the gated norm's */
    float *raw, *rba;           /* qwen3_next (§M10.11): in_proj_qkvz's n x (C + Hv dv), in_proj_ba's n x 2 Hv */
} dn_ws;

static size_t up16(size_t n) { return (n + 15) / 16 * 16; } /* keeps each part 64-byte aligned */

size_t cis2_deltanet_scratch(const cis2_model *m, size_t n)
{
    if (!m->state_floats) return 0;
    size_t vd = m->lin_hv * m->lin_dv, fused = m->lin_fused ? up16(n * (m->lin_c + vd)) + up16(2 * n * m->lin_hv) : 0;
    return up16(n * m->lin_c) + 2 * up16(n * vd) + 2 * up16(n * m->lin_hv) + fused;
}

static dn_ws carve(const cis2_fwd *F)
{
    const cis2_model *m = F->m;
    size_t n = F->n, vd = m->lin_hv * m->lin_dv;
    dn_ws W;
    float *at = F->dn;
    W.mixed = at; at += up16(n * m->lin_c);
    W.z = at; at += up16(n * vd);
    W.o = at; at += up16(n * vd);
    W.b = at; at += up16(n * m->lin_hv);
    W.a = at; at += up16(n * m->lin_hv);
    W.raw = at; at += m->lin_fused ? up16(n * (m->lin_c + vd)) : 0;
    W.rba = at;
    return W;
}

/* qwen3_next's step 1 (docs/models.md §M10.11), rows [r0, r1): in_proj_qkvz's
 * and in_proj_ba's outputs come grouped per key head g, [q_g | k_g | v of
 * g's r value heads | z of them] and [b of them | a of them]; each value
 * copied to where §M10.3 reads it (no arithmetic) */
static void r_regroup(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t C = m->lin_c, dk = m->lin_dk, dv = m->lin_dv, Hk = m->lin_hk, Hv = m->lin_hv, KD = Hk * dk;
    size_t rr = Hv / Hk, vd = Hv * dv, blk = 2 * dk + 2 * rr * dv;
    dn_ws W = carve(F);
    for (size_t r = r0; r < r1; r++)
        for (size_t g = 0; g < Hk; g++) {
            const float *src = W.raw + r * (C + vd) + g * blk, *ba = W.rba + r * 2 * Hv + g * 2 * rr;
            float *mx = W.mixed + r * C;
            memcpy(mx + g * dk, src, dk * sizeof(float));
            memcpy(mx + KD + g * dk, src + dk, dk * sizeof(float));
            memcpy(mx + 2 * KD + g * rr * dv, src + 2 * dk, rr * dv * sizeof(float));
            memcpy(W.z + r * vd + g * rr * dv, src + 2 * dk + rr * dv, rr * dv * sizeof(float));
            memcpy(W.b + r * Hv + g * rr, ba, rr * sizeof(float));
            memcpy(W.a + r * Hv + g * rr, ba + rr, rr * sizeof(float));
        }
}

/* step 2 for sequence idx / nblk, channels of block idx % nblk */
static void conv_task(void *ctx, size_t idx)
{
    cis2_fwd *F = ctx;
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t C = m->lin_c, K = m->lin_kernel, nblk = (C + CONV_BLK - 1) / CONV_BLK;
    size_t s = idx / nblk, c0 = idx % nblk * CONV_BLK, nc = C - c0 < CONV_BLK ? C - c0 : CONV_BLK;
    dn_ws W = carve(F);
    float acc[CONV_BLK];
    const size_t *rows = F->seq_rows + F->seq_start[s], nr = F->seq_start[s + 1] - F->seq_start[s];
    float *win = F->rows[rows[0]].kv->state + ly->state_off + c0; /* [K-1][C]: the last K-1 inputs, oldest first */
    for (size_t i = 0; i < nr; i++) {
        float *x = W.mixed + rows[i] * C + c0;
        for (size_t c = 0; c < nc; c++) acc[c] = 0.0f;
        for (size_t j = 0; j < K; j++) { /* the taps, oldest first: the window's K-1, then the row's own input */
            const float *w = ly->lin_conv + j * C + c0, *xin = j + 1 < K ? win + j * C : x;
            size_t c = 0;
            for (; c + 4 <= nc; c += 4) {
                v4f p = ld4(w + c) * ld4(xin + c);
                st4(acc + c, ld4(acc + c) + p);
            }
            for (; c < nc; c++) {
                float p = w[c] * xin[c];
                acc[c] = acc[c] + p;
            }
        }
        for (size_t j = 0; j + 2 < K; j++) memcpy(win + j * C, win + (j + 1) * C, nc * sizeof(float));
        if (K > 1) memcpy(win + (K - 2) * C, x, nc * sizeof(float)); /* the window moves on */
        cis2_silu_n(F->cx, acc, x, nc); /* §6.4, in the variant's lanes: the scalar bits */
    }
}

/* x[i] * rsqrt(sum of squares + 1e-6), in place (§M10.3) */
static void l2norm(float *x, size_t n)
{
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float sq = x[i] * x[i];
        ss = ss + sq; /* §5.3 */
    }
    float t = ss + f32_from_bits(L2_EPS);
    float inv = rsqrt_cr(t); /* §6.1 */
    for (size_t i = 0; i < n; i++) x[i] = x[i] * inv;
}

/* step 3 on rows [r0, r1) */
static void r_qk_gates(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t C = m->lin_c, dk = m->lin_dk, Hk = m->lin_hk, Hv = m->lin_hv, KD = Hk * dk;
    dn_ws W = carve(F);
    for (size_t r = r0; r < r1; r++) {
        float *mx = W.mixed + r * C;
        for (size_t h = 0; h < Hk; h++) {
            float *q = mx + h * dk;
            l2norm(q, dk);
            l2norm(mx + KD + h * dk, dk);
            for (size_t i = 0; i < dk; i++) q[i] = q[i] * m->lin_qscale;
        }
        for (size_t h = 0; h < Hv; h++) {
            float *b = W.b + r * Hv + h, *a = W.a + r * Hv + h;
            *b = sigmoid_pinned(*b); /* beta */
            float s = *a + ly->lin_dt_bias[h];
            float sp = softplus_pinned(s);
            float g = ly->lin_na[h] * sp;
            *a = exp_pinned(g); /* the decay exp(g) */
        }
    }
}

/* step 4 for sequence idx / Hv, value head idx % Hv */
static void delta_task(void *ctx, size_t idx)
{
    cis2_fwd *F = ctx;
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t C = m->lin_c, dk = m->lin_dk, dv = m->lin_dv, Hk = m->lin_hk, Hv = m->lin_hv, KD = Hk * dk;
    size_t s = idx / Hv, h = idx % Hv, kh = h / (Hv / Hk);
    dn_ws W = carve(F);
    float kvm[MAX_DIM], u[MAX_DIM];
    const size_t *rows = F->seq_rows + F->seq_start[s], nr = F->seq_start[s + 1] - F->seq_start[s];
    float *S = F->rows[rows[0]].kv->state + ly->state_off + (m->lin_kernel - 1) * C + h * dk * dv;
    for (size_t i = 0; i < nr; i++) {
        size_t r = rows[i];
        const float *q = W.mixed + r * C + kh * dk, *k = W.mixed + r * C + KD + kh * dk;
        const float *v = W.mixed + r * C + 2 * KD + h * dv;
        float decay = W.a[r * Hv + h], beta = W.b[r * Hv + h];
        float *o = W.o + r * Hv * dv + h * dv;
        size_t j4 = dv / 4 * 4; /* the lanes' part of a row; the scalar tail after it */
        v4f dec4 = {decay, decay, decay, decay};
        for (size_t j = 0; j < dv; j++) kvm[j] = 0.0f;
        for (size_t d = 0; d < dk; d++) { /* S = S * decay; kv = S^T k */
            float *Sd = S + d * dv, kd = k[d];
            v4f k4 = {kd, kd, kd, kd};
            for (size_t j = 0; j < j4; j += 4) {
                v4f sd = ld4(Sd + j);
                sd = sd * dec4;
                st4(Sd + j, sd);
                v4f p = sd * k4;
                st4(kvm + j, ld4(kvm + j) + p);
            }
            for (size_t j = j4; j < dv; j++) {
                Sd[j] = Sd[j] * decay;
                float p = Sd[j] * kd;
                kvm[j] = kvm[j] + p;
            }
        }
        for (size_t j = 0; j < dv; j++) { /* u = (v - kv) * beta */
            float dlt = v[j] - kvm[j];
            u[j] = dlt * beta;
        }
        for (size_t j = 0; j < dv; j++) o[j] = 0.0f;
        for (size_t d = 0; d < dk; d++) { /* S = S + k u^T; o = S^T q */
            float *Sd = S + d * dv, kd = k[d], qd = q[d];
            v4f k4 = {kd, kd, kd, kd}, q4 = {qd, qd, qd, qd};
            for (size_t j = 0; j < j4; j += 4) {
                v4f p = k4 * ld4(u + j);
                v4f sd = ld4(Sd + j) + p;
                st4(Sd + j, sd);
                v4f p2 = sd * q4;
                st4(o + j, ld4(o + j) + p2);
            }
            for (size_t j = j4; j < dv; j++) {
                float p = kd * u[j];
                Sd[j] = Sd[j] + p;
                float p2 = Sd[j] * qd;
                o[j] = o[j] + p2;
            }
        }
    }
}

/* step 5 on rows [r0, r1) */
static void r_gated_norm(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t dv = m->lin_dv, Hv = m->lin_hv, vd = Hv * dv;
    dn_ws W = carve(F);
    for (size_t r = r0; r < r1; r++) {
        float *o = W.o + r * vd, *z = W.z + r * vd;
        rmsnorm_rows(o, F->ly->lin_norm, m->cfg.rms_norm_eps, dv, Hv, o); /* §8 per value head, in place */
        cis2_silu_n(F->cx, z, z, vd);                                      /* §6.4 */
        mul_n(o, z, vd);                                                    /* o[i] = o[i] * silu(z[i]) */
    }
}

void cis2_deltanet(cis2_fwd *F, const float *in)
{
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t n = F->n, C = m->lin_c, Hv = m->lin_hv, vd = Hv * m->lin_dv;
    dn_ws W = carve(F);
    if (m->lin_fused) { /* 1, qwen3_next's (§M10.11) */
        const cis2_pmat *w[2] = {&ly->lin_qkv, &ly->lin_b};
        float *const y[2] = {W.raw, W.rba};
        cis2_matmul_n(F->cx, w, 2, in, n, y);
        cis2_fwd_rows(F, r_regroup, NULL);
    } else { /* 1 */
        const cis2_pmat *w[4] = {&ly->lin_qkv, &ly->lin_z, &ly->lin_b, &ly->lin_a};
        float *const y[4] = {W.mixed, W.z, W.b, W.a};
        cis2_matmul_n(F->cx, w, 4, in, n, y);
    }
    cis2_fwd_trace(F, "lin_qkv", W.mixed, C);
    cis2_fwd_trace(F, "lin_z", W.z, vd);
    cis2_fwd_trace(F, "lin_b", W.b, Hv);
    cis2_fwd_trace(F, "lin_a", W.a, Hv);
    cis2_parallel_for(F->cx, F->nseq * ((C + CONV_BLK - 1) / CONV_BLK), conv_task, F); /* 2 */
    cis2_fwd_trace(F, "lin_conv", W.mixed, C);
    cis2_fwd_rows(F, r_qk_gates, NULL); /* 3 */
    cis2_fwd_trace(F, "lin_qk", W.mixed, C);
    cis2_fwd_trace(F, "lin_beta", W.b, Hv);
    cis2_fwd_trace(F, "lin_decay", W.a, Hv);
    cis2_parallel_for(F->cx, F->nseq * Hv, delta_task, F); /* 4 */
    cis2_fwd_trace(F, "lin_core", W.o, vd);
    cis2_fwd_rows(F, r_gated_norm, NULL); /* 5 */
    cis2_fwd_trace(F, "lin_gnorm", W.o, vd);
    cis2_matmul(F->cx, &ly->lin_out, W.o, n, F->g); /* 6 */
    cis2_fwd_trace(F, "o_proj", F->g, m->hidden);
}

/*
 * moe.c - the mixture-of-experts feed-forward of a decoder layer
 * (forward.h, CIS2_FFN_MOE): docs/models.md §M8 (qwen3_moe) and §M9.5
 * (gpt_oss).  Caller: model.c's cis2_forward, once per sparse layer.
 *
 * In the pinned order, for each row x (the layer's normed input):
 *   1. router logits r = W_router·x, E values (§5.2; one weight pass for
 *      every row), plus gpt_oss's router bias;
 *   2. the routing, per row: the k experts chosen one at a time by a scan
 *      in expert order that keeps the first of equals (an exact tie goes
 *      to the lower index), of largest p = §9.3's softmax of r, their
 *      weights p, or with norm_topk_prob each divided by the §5.3 sum of
 *      the k in the order chosen (qwen3_moe, §M8.3); or of largest r, their
 *      weights §9.3's softmax of their k logits in the order chosen
 *      (gpt_oss, §M9.5);
 *   3. each chosen expert e's MLP: qwen3_moe's gated MLP (§M8.4):
 *      g = W_gate_e·x, u = W_up_e·x, hid = silu_pinned(g) * u,
 *      y_e = W_down_e·hid; gpt_oss's clamped SwiGLU with biases (§M9.5);
 *   4. the combination (§M8.5): out = +0.0, then for the chosen experts in
 *      increasing expert index: out = out + w_e * y_e, element by element;
 *      qwen3_5_moe's shared expert last (§M10.10): out = out + s * y_s,
 *      y_s its gated MLP of x and s = sigmoid_pinned(W_sgate·x).
 *
 * Step 3 runs by expert, not by row: the rows that chose expert e are
 * gathered into one block and go through e's matrices together, so a
 * prefill reads each expert once.  A row's products are the kernel
 * contract's (kernels.h: the same bits whatever the other rows), so the
 * grouping changes the time, never a bit: a token's result does not depend
 * on the batch, the prefill, the threads or the kernel.
 */
#include "forward.h"
#include "pmath.h"

#include <string.h>

/* The scratch of one call, carved from F->moe (cis2_moe_scratch floats). */
typedef struct moe_ws {
    float *logits;          /* n x E: router logits, then each row's p in place */
    uint32_t *sel;          /* n x k: the chosen experts, in the order chosen */
    float *w;               /* n x k: their weights */
    uint32_t *start;        /* E + 1: expert e's entries are list[start[e] .. start[e+1]) */
    uint32_t *list;         /* n x k: entries row * k + rank, by expert, rows increasing */
    float *xg, *g, *u;      /* the gathered rows of one expert: n x hidden, n x 2 moe_inter, n x moe_inter */
    float *y;               /* n x k x hidden: y_e of each (row, rank) */
    float *sg, *su, *ys, *sgl; /* qwen3_5_moe's shared expert (§M10.10): its gate and up (n x SI each, then the
                                  product in sg), its output (n x hidden), its gate's value then its sigmoid (n) */
} moe_ws;

static size_t up16(size_t n) { return (n + 15) / 16 * 16; } /* keeps each part 64-byte aligned */

size_t cis2_moe_scratch(const cis2_model *m, size_t n)
{
    size_t E = m->n_experts, k = m->top_k, H = m->hidden, I = m->moe_inter;
    if (!E) return 0;
    return up16(n * E) + 2 * up16(n * k) + up16(n * k) + up16(E + 1) + up16(n * H) + up16(2 * n * I) +
           up16(n * I) + up16(n * k * H) + 2 * up16(n * m->shared_inter) + up16(n * H) + up16(n);
}

static moe_ws carve(const cis2_fwd *F)
{
    const cis2_model *m = F->m;
    size_t n = F->n, E = m->n_experts, k = m->top_k, H = m->hidden, I = m->moe_inter;
    float *at = F->moe;
    moe_ws W;
    W.logits = at; at += up16(n * E);
    W.sel = (uint32_t *)at; at += up16(n * k);
    W.w = at; at += up16(n * k);
    W.list = (uint32_t *)at; at += up16(n * k);
    W.start = (uint32_t *)at; at += up16(E + 1);
    W.xg = at; at += up16(n * H);
    W.g = at; at += up16(2 * n * I);
    W.u = at; at += up16(n * I);
    W.y = at; at += up16(n * k * H);
    W.sg = at; at += up16(n * m->shared_inter);
    W.su = at; at += up16(n * m->shared_inter);
    W.ys = at; at += up16(n * H);
    W.sgl = at;
    return W;
}

/* step 2 on rows [r0, r1) (docs/models.md §M8.3) */
static void r_route(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t E = m->n_experts, k = m->top_k;
    moe_ws W = carve(F);
    for (size_t r = r0; r < r1; r++) {
        float *p = W.logits + r * E;
        uint32_t *sel = W.sel + r * k;
        float *w = W.w + r * k;
        uint8_t taken[CIS2_CFG_MAX_EXPERTS] = {0};
        int oss = m->moe == CIS2_MOE_TOPK_SOFTMAX;
        if (oss) add_n(p, F->ly->router_bias, E); /* §M9.5: the router's bias, then the choice on the logits */
        else softmax_seq(p, E); /* §9.3 */
        for (size_t j = 0; j < k; j++) {
            size_t best = E;
            for (size_t e = 0; e < E; e++)
                if (!taken[e] && (best == E || p[e] > p[best])) best = e; /* strict >: ties keep the lower index */
            taken[best] = 1;
            sel[j] = (uint32_t)best;
            w[j] = p[best];
        }
        if (oss) { /* §9.3's softmax of the k chosen logits, in the order chosen */
            softmax_seq(w, k);
        } else if (m->norm_topk) {
            float s = 0.0f;
            for (size_t j = 0; j < k; j++) s = s + w[j]; /* §5.3, in the order chosen */
            for (size_t j = 0; j < k; j++) w[j] = w[j] / s;
        }
    }
}

/* step 4 on rows [r0, r1) (docs/models.md §M8.5): into F->xn */
static void r_combine(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t k = m->top_k, H = m->hidden;
    moe_ws W = carve(F);
    for (size_t r = r0; r < r1; r++) {
        const uint32_t *sel = W.sel + r * k;
        float *out = F->xn + r * H;
        for (size_t i = 0; i < H; i++) out[i] = 0.0f;
        uint32_t done = 0; /* experts below this are added; each round adds the lowest one left */
        for (size_t n = 0; n < k; n++) {
            size_t j = k;
            for (size_t t = 0; t < k; t++)
                if (sel[t] >= done && (j == k || sel[t] < sel[j])) j = t;
            const float *y = W.y + (r * k + j) * H;
            float wj = W.w[r * k + j];
            for (size_t i = 0; i < H; i++) {
                float t = wj * y[i];
                out[i] = out[i] + t;
            }
            done = sel[j] + 1;
        }
        if (m->shared_inter) { /* §M10.10: then the shared expert's output times its gate */
            const float *ys = W.ys + r * H;
            float s = W.sgl[r];
            for (size_t i = 0; i < H; i++) {
                float t = s * ys[i];
                out[i] = out[i] + t;
            }
        }
    }
}

/* gpt_oss's expert e (docs/models.md §M9.5) on the cnt rows gathered in
 * W->xg: gu = W_gu_e·x + b_gu_e (gate and up interleaved), the clamped
 * SwiGLU into W->u, y = W_down_e·h + b_down_e back into W->xg. */
#define OSS_ALPHA 0x3FD9DB23u /* (f32)1.702 */
static void oss_expert(cis2_fwd *F, size_t e, size_t cnt, const moe_ws *W)
{
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t I = m->moe_inter, H = m->hidden;
    const float one = f32_from_bits(0x3F800000u), alpha = f32_from_bits(OSS_ALPHA);
    const float lim = m->swiglu_limit, nlim = -m->swiglu_limit;
    cis2_matmul(F->cx, &ly->experts[3 * e], W->xg, cnt, W->g);
    for (size_t r = 0; r < cnt; r++) {
        float *gu = W->g + r * 2 * I, *h = W->u + r * I;
        add_n(gu, ly->eb_gu + e * 2 * I, 2 * I);
        for (size_t t = 0; t < I; t++) {
            float gate = gu[2 * t], up = gu[2 * t + 1];
            if (gate > lim) gate = lim;          /* clamp(max = limit): a NaN stays */
            if (up > lim) up = lim;
            if (up < nlim) up = nlim;
            float z = gate * alpha;
            float nz = -z;
            float ex = exp_pinned(nz);
            float d = one + ex;
            float sg = one / d;                  /* sigmoid(alpha * gate) */
            float glu = gate * sg;
            float u1 = up + one;
            h[t] = u1 * glu;
        }
    }
    cis2_matmul(F->cx, &ly->experts[3 * e + 2], W->u, cnt, W->xg);
    for (size_t r = 0; r < cnt; r++) add_n(W->xg + r * H, ly->eb_down + e * H, H);
}

void cis2_ffn_moe(cis2_fwd *F, const float *in)
{
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t n = F->n, E = m->n_experts, k = m->top_k, H = m->hidden, I = m->moe_inter;
    moe_ws W = carve(F);
    cis2_matmul(F->cx, &ly->router, in, n, W.logits); /* step 1 */
    cis2_fwd_trace(F, "router", W.logits, E);
    cis2_fwd_rows(F, r_route, NULL); /* step 2 */
    /* step 3, by expert: the entries of each expert, rows increasing */
    memset(W.start, 0, (E + 1) * sizeof *W.start);
    for (size_t i = 0; i < n * k; i++) W.start[W.sel[i] + 1]++;
    for (size_t e = 0; e < E; e++) W.start[e + 1] += W.start[e];
    for (size_t i = 0, e; i < n * k; i++) { /* a counting sort: start[e] walks e's slots, then is restored */
        e = W.sel[i];
        W.list[W.start[e]++] = (uint32_t)i;
    }
    for (size_t e = E; e > 0; e--) W.start[e] = W.start[e - 1];
    W.start[0] = 0;
    for (size_t e = 0; e < E; e++) {
        size_t a = W.start[e], cnt = W.start[e + 1] - a;
        if (!cnt) continue;
        for (size_t i = 0; i < cnt; i++) memcpy(W.xg + i * H, in + (W.list[a + i] / k) * H, H * sizeof(float));
        const cis2_pmat *gu_w[2] = {&ly->experts[3 * e], &ly->experts[3 * e + 1]};
        float *const gu_y[2] = {W.g, W.u};
        if (m->moe == CIS2_MOE_TOPK_SOFTMAX) {
            oss_expert(F, e, cnt, &W);
        } else {
            cis2_matmul_n(F->cx, gu_w, 2, W.xg, cnt, gu_y); /* §M8.4 */
            cis2_silu_n(F->cx, W.g, W.g, cnt * I); /* §6.4, in place */
            mul_n(W.g, W.u, cnt * I);                /* silu(gate) * up */
            cis2_matmul(F->cx, &ly->experts[3 * e + 2], W.g, cnt, W.xg);
        }
        for (size_t i = 0; i < cnt; i++) memcpy(W.y + W.list[a + i] * H, W.xg + i * H, H * sizeof(float));
    }
    if (m->shared_inter) { /* §M10.10: the shared expert on every row, and its gate */
        size_t SI = m->shared_inter;
        const cis2_pmat *sw[3] = {&ly->sh_gate, &ly->sh_up, &ly->sh_router};
        float *const sy[3] = {W.sg, W.su, W.sgl};
        cis2_matmul_n(F->cx, sw, 3, in, n, sy);
        cis2_silu_n(F->cx, W.sg, W.sg, n * SI); /* §6.4, in place */
        mul_n(W.sg, W.su, n * SI);                /* silu(gate) * up */
        cis2_matmul(F->cx, &ly->sh_down, W.sg, n, W.ys);
        sigmoid_pinned_n(W.sgl, W.sgl, n);        /* §M10.6 */
        cis2_fwd_trace(F, "shared_gate", W.sgl, 1);
    }
    cis2_fwd_rows(F, r_combine, NULL); /* step 4 */
    cis2_fwd_trace(F, "down", F->xn, H);
}

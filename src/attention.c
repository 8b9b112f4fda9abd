/*
 * attention.c - the attention token mixers of a decoder layer (forward.h):
 * full attention (spec §9, CIS2_MIXER_ATTENTION) and attention within a
 * window of the last W keys (docs/models.md §M5, §M7.1,
 * CIS2_MIXER_ATTENTION_WINDOW).  Caller: model.c's cis2_forward, once per
 * layer of these kinds.
 *
 * In the pinned order (docs/arithmetic.md §7, §9; docs/models.md §M2-§M7):
 *   1. q, k, v = the input times q_proj, k_proj, v_proj (§9.1, one weight
 *      pass for the three), plus their biases where the family has them;
 *      with qwen3_5's output gate (docs/models.md §M10.5) q_proj gives each
 *      head's query then its gate, and the queries are gathered into q;
 *   2. the q/k norms (per head §M2, §M7; over the whole projection §M4),
 *      then RoPE (§7.4; none in smollm3's NoPE layers §M3; gemma3_text's
 *      local table in its sliding layers §M7.4) on every q and k head,
 *      then k and v into the row's KV cache (§3.5);
 *   3. per row and KV head, the G query heads that share it (GQA): scores
 *      over the cached keys in the window, softmax (with gpt_oss's sink
 *      logit in its denominator, §M9.3), the weighted values (§9.2-§9.4,
 *      cis2_attend_group);
 *   4. qwen3_5's gate: each attention output times sigmoid_pinned of its
 *      gate (§M10.5);
 *   5. o_proj (§9.5) into F->g, plus gpt_oss's o_proj bias (§M9.2).
 * RoPE rotates the first 2 rot_half dimensions of every head (all of them
 * but for qwen3_5's partial rotary, §M10.5).  The KV cache holds the
 * attention layers only (cis2_layer.kv_layer). */
#include "forward.h"
#include "pmath.h"

#include <stdlib.h>
#include <string.h>

static void r_bias(cis2_fwd *F, size_t r0, size_t r1) /* §9.1 */
{
    const cis2_model *m = F->m;
    if (!F->ly->bq) return;
    for (size_t r = r0; r < r1; r++) {
        add_n(F->q + r * m->q_dim, F->ly->bq, m->q_dim);
        add_n(F->k + r * m->kv_dim, F->ly->bk, m->kv_dim);
        add_n(F->v + r * m->kv_dim, F->ly->bv, m->kv_dim);
    }
}

/* docs/models.md §M10.5: q_proj's output holds, per head, its query
 * (head_dim values) then its output gate (head_dim values); the queries
 * into q, head after head, the gates staying in qg */
static void r_gate_split(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t hd = m->head_dim;
    for (size_t r = r0; r < r1; r++)
        for (size_t h = 0; h < m->n_heads; h++)
            memcpy(F->q + r * m->q_dim + h * hd, F->qg + (r * m->n_heads + h) * 2 * hd, hd * sizeof(float));
}

/* the q/k norms (docs/models.md §M2, §M4, §M7), §7.4 on every q and k head
 * (none in smollm3's NoPE layers, §M3; gemma3_text's local table in its
 * sliding layers, §M7.4; the first 2 rot_half dims of a head, §M10.5),
 * then §3.5 */
static void r_rope_store(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t Q = m->q_dim, KV = m->kv_dim, hd = m->head_dim, half = m->rot_half, l = F->ly->kv_layer;
    for (size_t r = r0; r < r1; r++) {
        float *q = F->q + r * Q, *k = F->k + r * KV;
        const float *cosv = F->cs + r * F->cs_w + (F->ly->rope_local ? 2 * half : 0), *sinv = cosv + half;
        if (F->ly->qn && m->qk_whole) { /* olmo2 (§M4.3): §8's rmsnorm over all Q (KV) values, in place */
            rmsnorm_rows(q, F->ly->qn, m->cfg.rms_norm_eps, Q, 1, q);
            rmsnorm_rows(k, F->ly->kn, m->cfg.rms_norm_eps, KV, 1, k);
        } else if (F->ly->qn) { /* qwen3 (§M2.3), gemma3_text: §8's rmsnorm of each head (head_dim elements) */
            rmsnorm_rows(q, F->ly->qn, m->cfg.rms_norm_eps, hd, m->n_heads, q);
            rmsnorm_rows(k, F->ly->kn, m->cfg.rms_norm_eps, hd, m->n_kv, k);
        }
        if (!F->ly->no_rope) { /* smollm3's NoPE layers keep q and k as projected (docs/models.md §M3.2) */
            for (size_t h = 0; h < m->n_heads; h++) rope_rotate_n(q + h * hd, cosv, sinv, half);
            for (size_t h = 0; h < m->n_kv; h++) rope_rotate_n(k + h * hd, cosv, sinv, half);
        }
        cis2_kv *kv = F->rows[r].kv; /* cache post-RoPE k, and v */
        size_t p = F->rows[r].pos;
        float *kl = kv->k + l * kv->cap * KV; /* blocked keys, see cis2_kv */
        for (size_t h = 0; h < m->n_kv; h++)
            for (size_t d = 0; d < hd; d++)
                kl[h * hd * kv->cap + (p / 16) * 16 * hd + d * 16 + p % 16] = k[h * hd + d];
        for (size_t h = 0; h < m->n_kv; h++) /* values per KV head, see cis2_kv */
            memcpy(kv->v + ((l * m->n_kv + h) * kv->cap + p) * hd, F->v + r * KV + h * hd, hd * sizeof(float));
    }
}

/* §9.2-§9.4 for one row and one KV head: the G query heads that share it
 * (GQA) in one pass over its cached keys and values.  (Splitting a group
 * across threads when there are fewer groups than threads measured no
 * faster: reading the cache is the cost at long contexts.) */
static void attend_task(void *ctx, size_t idx)
{
    cis2_fwd *F = ctx;
    const cis2_model *m = F->m;
    size_t r = idx / m->n_kv, kvh = idx % m->n_kv, G = m->n_heads / m->n_kv, h0 = kvh * G;
    const cis2_row *row = &F->rows[r];
    const cis2_kv *kv = row->kv;
    size_t hd = m->head_dim, len = row->pos + 1;
    /* docs/models.md §M5, §M7.1: a window of W keys, the row's own and the W - 1 before it */
    size_t W = F->ly->window, lo = W && len > W ? len - W : 0;
    size_t l = F->ly->kv_layer; /* the cache holds the attention layers only (model.h) */
    const float *kt = kv->k + (l * kv->cap) * m->kv_dim + kvh * hd * kv->cap;
    const float *vc = kv->v + (l * m->n_kv + kvh) * kv->cap * hd;
    float stackbuf[4096];
    float *s = G * len <= 4096 ? stackbuf : malloc(G * len * sizeof(float));
    if (!s) { F->oom = 1; return; }
    cis2_attend_group(F->cx, F->q + r * m->q_dim + h0 * hd, G, kt, vc, hd, lo, len, hd, m->attn_scale,
                      F->ly->sinks ? F->ly->sinks + h0 : NULL, s, F->att + r * m->q_dim + h0 * hd);
    if (F->probs) /* the trace's rows hold every position; those outside the window have probability 0 */
        for (size_t g = 0; g < G; g++) {
            float *dst = F->probs + r * F->probs_stride + (h0 + g) * len;
            memset(dst, 0, lo * sizeof(float));
            memcpy(dst + lo, s + g * (len - lo), (len - lo) * sizeof(float));
        }
    if (s != stackbuf) free(s);
}

/* docs/models.md §M10.5: attn[i] = attn[i] * sigmoid_pinned(gate[i]) */
static void r_out_gate(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t hd = m->head_dim;
    float sg[512];
    for (size_t r = r0; r < r1; r++)
        for (size_t h = 0; h < m->n_heads; h++) {
            float *a = F->att + r * m->q_dim + h * hd;
            const float *g = F->qg + (r * m->n_heads + h) * 2 * hd + hd;
            for (size_t i = 0; i < hd; i += 512) {
                size_t k = hd - i < 512 ? hd - i : 512;
                sigmoid_pinned_n(g + i, sg, k);
                mul_n(a + i, sg, k);
            }
        }
}

static void r_o_bias(cis2_fwd *F, size_t r0, size_t r1) /* gpt_oss (docs/models.md §M9.2) */
{
    size_t H = F->m->hidden;
    for (size_t r = r0; r < r1; r++) add_n(F->g + r * H, F->ly->bo, H);
}

int cis2_attention(cis2_fwd *F, const float *in, cis2_error *err)
{
    const cis2_model *m = F->m;
    const cis2_layer *ly = F->ly;
    size_t n = F->n;
    const cis2_pmat *qkv_w[3] = {&ly->q, &ly->k, &ly->v};
    float *const qkv_y[3] = {m->attn_gate ? F->qg : F->q, F->k, F->v};
    cis2_matmul_n(F->cx, qkv_w, 3, in, n, qkv_y); /* §9.1 */
    cis2_row_fn first = m->attn_gate ? r_gate_split : r_bias; /* §M10.5's q_proj has no bias */
    if (!F->trace) cis2_fwd_rows(F, first, r_rope_store);
    else {
        cis2_fwd_rows(F, first, NULL);
        cis2_fwd_trace(F, "q", F->q, m->q_dim);
        cis2_fwd_trace(F, "k", F->k, m->kv_dim);
        cis2_fwd_trace(F, "v", F->v, m->kv_dim);
        cis2_fwd_rows(F, r_rope_store, NULL);
    }
    cis2_fwd_trace(F, "q_rope", F->q, m->q_dim);
    cis2_fwd_trace(F, "k_rope", F->k, m->kv_dim);
    F->oom = 0;
    cis2_parallel_for(F->cx, n * m->n_kv, attend_task, F); /* §9.2-§9.4 */
    if (F->oom) return cis2_fail(err, CIS2_E_NOMEM, "out of memory in attention");
    if (F->trace)
        for (size_t r = 0; r < n; r++)
            if (F->rows[r].traced)
                F->trace(F->trace_ctx, F->rows[r].step, F->rows[r].pos, (int)F->layer, "scores",
                         F->probs + r * F->probs_stride, m->n_heads * (F->rows[r].pos + 1));
    if (m->attn_gate) cis2_fwd_rows(F, r_out_gate, NULL); /* §M10.5 */
    cis2_fwd_trace(F, "attn_out", F->att, m->q_dim);
    cis2_matmul(F->cx, &ly->o, F->att, n, F->g); /* §9.5 */
    if (ly->bo) cis2_fwd_rows(F, r_o_bias, NULL);
    cis2_fwd_trace(F, "o_proj", F->g, m->hidden);
    return CIS2_OK;
}

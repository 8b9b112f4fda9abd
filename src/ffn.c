/*
 * ffn.c - the feed-forwards of a decoder layer (forward.h): the dense
 * gated MLP of spec §10 (CIS2_FFN_DENSE; gemma3_text's GELU-tanh,
 * docs/models.md §M7.5).  Caller: model.c's cis2_forward, once per layer
 * of this kind.
 *
 * In the pinned order (docs/arithmetic.md §10):
 *   1. gate, up = the input times gate_proj, up_proj (one weight pass);
 *   2. hid[i] = act(gate[i]) * up[i], elementwise: act is §6.4's
 *      silu_pinned, or gelu_tanh_pinned (§M7.5);
 *   3. down_proj of hid into the output.
 */
#include "forward.h"
#include "pmath.h"

/* step 2, in chunks across threads */
#define ACT_CHUNK 2048
typedef struct act_ctx { const cis2_ctx *cx; float *g; const float *u; size_t n; int gelu; } act_ctx;

static void act_task(void *ctx, size_t c)
{
    act_ctx *s = ctx;
    size_t hi = (c + 1) * ACT_CHUNK < s->n ? (c + 1) * ACT_CHUNK : s->n;
    size_t lo = c * ACT_CHUNK;
    if (s->gelu) cis2_gelu_n(s->cx, s->g + lo, s->g + lo, hi - lo); /* §M7.5, in place */
    else cis2_silu_n(s->cx, s->g + lo, s->g + lo, hi - lo); /* §6.4, in place */
    mul_n(s->g + lo, s->u + lo, hi - lo); /* act(gate) * up */
}

void cis2_ffn_dense(cis2_fwd *F, const float *in, float *out)
{
    const cis2_layer *ly = F->ly;
    size_t n = F->n, I = F->m->inter;
    const cis2_pmat *gu_w[2] = {&ly->gate, &ly->up};
    float *const gu_y[2] = {F->g, F->u};
    cis2_matmul_n(F->cx, gu_w, 2, in, n, gu_y); /* §10 */
    cis2_fwd_trace(F, "gate", F->g, I);
    cis2_fwd_trace(F, "up", F->u, I);
    act_ctx a = {F->cx, F->g, F->u, n * I, F->m->gelu};
    cis2_parallel_for(F->cx, (n * I + ACT_CHUNK - 1) / ACT_CHUNK, act_task, &a); /* §10 */
    cis2_fwd_trace(F, "act", F->g, I);
    cis2_matmul(F->cx, &ly->down, F->g, n, out);
    cis2_fwd_trace(F, "down", out, F->m->hidden);
}

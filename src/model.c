/*
 * model.c - checkpoint loading and the forward pass of CIS-2 v0.3b.
 *
 * Owns: loading (§2.1 the three artifact hashes, §2.2/§2.5 tensor names and
 * shapes against config.json, with each family's semantics for which
 * tensors exist), packing the weights once (kernels.h: BF16 stays bf16
 * and F32 f32; F16 is widened exactly to f32 as it is packed; each tensor
 * may have its own dtype: docs/inputs.md "Weight dtypes"), and the per-row
 * arithmetic of §7 (RoPE), §8 (RMSNorm), §9 (GQA attention), §10 (SwiGLU
 * MLP) and §11.1 (final norm, tied or untied LM head), with the families'
 * changes of docs/models.md (§M1-§M7: the llama3 table, q/k norms, layers
 * without RoPE, norms after the blocks, windows, fused tensors split at
 * load, and Gemma 3's (1 + w) norms, scaled embedding, query scale, second
 * RoPE table and GELU).  Matrix products go
 * through cis2_matmul (§5.2); everything else is written out here in the
 * spec's exact operation order, one rounding per statement.  Callers:
 * engine.c and draft.c (cis2_model_load); session.c, verify.c, score.c and
 * draft.c (cis2_forward).
 *
 * Loading reads every input exactly once (fileio.h; docs/inputs.md "Every
 * input file", "Memory"): config.json (and generation_config.json when
 * the directory has one: its eos ids, genconfig.h)
 * and tokenizer.json into owned buffers that are both hashed and parsed
 * (the tokenizer's bytes stay in the model for the caller to parse, see
 * model.h); model.safetensors, or a sharded checkpoint's shards one after
 * another (shards.h), as one sequential stream: the header(s) are
 * validated and every tensor matched to the config before any weight is
 * read, then the data area is consumed in offset order through a bounded
 * staging buffer, each byte hashed (§2.1) and packed from exactly the
 * bytes hashed.  The packed matrices (one block of weight memory sized
 * from the plan, kernels.h's cis2_wmem) and f32 vectors are the only full
 * copies of the weights; nothing is mmap'ed, so a file truncated or
 * rewritten during the load is a clean CIS2_E_IO, never SIGBUS.
 */
#include "model.h"
#include "genconfig.h"
#include "forward.h"
#include "bigbuf.h"
#include "digest.h"
#include "fileio.h"
#include "pmath.h"
#include "safetensors.h"
#include "shards.h"
#include "tokenizer.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ load */

/* Each of the two staging buffers: this, or one row group of the widest matrix. */
#define STAGE_BYTES ((size_t)4 << 20)

static int path_join(char *out, size_t cap, const char *dir, const char *file, cis2_error *err)
{
    int n = snprintf(out, cap, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= cap) return cis2_fail(err, CIS2_E_USAGE, "path too long: %s/%s", dir, file);
    return CIS2_OK;
}

/* J_MXB, J_MXS: the MXFP4 blocks / scales of every expert's matrix
 * (docs/models.md §M9.6), packed into the experts' matrices (kernels.h).
 * J_SKIP: a tensor the family reads (hashes) and never uses (family.h
 * skip: docs/models.md §M10.2). */
enum { J_NONE = 0, J_MAT, J_VEC, J_MXB, J_MXS, J_SKIP };
typedef struct job {
    int kind;               /* J_NONE: the config does not call for this tensor */
    void *dest;             /* J_VEC: float ** */
    size_t rows, cols;      /* J_VEC: rows elements (the whole tensor), cols 1; else the matrix rows of all
                               parts, and columns (weights, not bytes) */
    /* J_MAT: the tensor's rows go to nparts packed matrices in turn, the
     * first part_rows[0] rows to part[0], ...: one part but for phi3's
     * fused tensors (docs/models.md §M6: qkv_proj into q/k/v, gate_up_proj
     * into gate/up), whose split bits are those of separate tensors.
     * J_MXB, J_MXS: one part per expert, part p at part_base + p *
     * part_step, each of part_rows[0] rows. */
    cis2_pmat *part[3];
    size_t part_rows[3];
    size_t nparts;
    cis2_pmat *part_base;
    size_t part_step;
    int part_pair;          /* docs/models.md §M10.10: parts 2e and 2e+1 at part_base + e * part_step + 0 and + 1 */
} job;

static cis2_pmat *job_part(const job *j, size_t p)
{
    if (!j->part_base) return j->part[p];
    return j->part_base + (j->part_pair ? p / 2 * j->part_step + p % 2 : p * j->part_step);
}
static size_t job_part_rows(const job *j, size_t p) { return j->part_base ? j->part_rows[0] : j->part_rows[p]; }
/* The file bytes of one matrix row of the job's tensor. */
static size_t job_rowbytes(const job *j, const cis2_st_tensor *t)
{
    return j->kind == J_MXB ? j->cols / 2 : j->kind == J_MXS ? j->cols / 32 : j->cols * cis2_st_dtype_size(t->dtype);
}

typedef struct loader {
    const cis2_ctx *cx;     /* the pool that packs (kernels.h) */
    cis2_wset w;            /* the weights: one file or shards (shards.h); w.st their tensors */
    const char *path;
    job *jobs;              /* one per tensor of w.st.t */
} loader;

/* "[a,b,...]" of n dims. */
static void shape_str(char *out, size_t cap, const uint64_t *d, int n)
{
    size_t at = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%llu", i ? "," : "", (unsigned long long)d[i]);
    if (at < cap) snprintf(out + at, cap - at, "]");
}

/* Records that the config calls for `name` with this shape (checked) and
 * dtype: U8 exactly where u8 (MXFP4 parts), a float dtype elsewhere. */
static const cis2_st_tensor *want_u8(loader *L, const char *name, const uint64_t *d, int ndim, int u8, int kind,
                                     void *dest, cis2_error *err)
{
    const cis2_st_tensor *t = cis2_st_find(&L->w.st, name);
    if (!t) { cis2_fail(err, CIS2_E_FORMAT, "%s: missing tensor %s", L->path, name); return NULL; }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) {
        char got[128], exp[128];
        shape_str(got, sizeof got, t->shape, t->ndim);
        shape_str(exp, sizeof exp, d, ndim);
        cis2_fail(err, CIS2_E_FORMAT, "%s: tensor %s has shape %s, config expects %s", L->path, name, got, exp);
        return NULL;
    }
    if (u8 != (t->dtype == CIS2_ST_U8)) {
        cis2_fail(err, CIS2_E_FORMAT, "%s: tensor %s: %s", L->path, name,
                  u8 ? "MXFP4 blocks and scales are U8 (docs/models.md §M9.6)"
                     : "dtype U8 is not a weight dtype here (BF16, F16 or F32; docs/inputs.md)");
        return NULL;
    }
    L->jobs[t - L->w.st.t] = (job){kind, dest, (size_t)d[0], ndim > 1 ? (size_t)d[1] : 1,
                                   .part = {kind == J_MAT ? dest : NULL}, .part_rows = {(size_t)d[0]}, .nparts = 1};
    return t;
}

static const cis2_st_tensor *want(loader *L, const char *name, uint64_t d0, uint64_t d1, int ndim, int kind,
                                  void *dest, cis2_error *err)
{
    uint64_t d[2] = {d0, d1};
    return want_u8(L, name, d, ndim < 2 ? ndim : 2, 0, kind, dest, err);
}

/* A fused matrix (docs/models.md §M6): `name` of [sum of rows[], cols],
 * its rows split among dest[0..n) in turn. */
static int want_fused(loader *L, const char *name, cis2_pmat **dest, const size_t *rows, int n, size_t cols,
                      cis2_error *err)
{
    size_t total = 0;
    for (int p = 0; p < n; p++) total += rows[p];
    const cis2_st_tensor *t = want(L, name, total, cols, 2, J_MAT, NULL, err);
    if (!t) return err->code;
    job *j = &L->jobs[t - L->w.st.t];
    j->nparts = (size_t)n;
    for (int p = 0; p < n; p++) { j->part[p] = dest[p]; j->part_rows[p] = rows[p]; }
    return CIS2_OK;
}

/* Where a tensor of the plan goes (family.h roles), and its shape checked. */
typedef struct plan_ctx { cis2_model *m; loader *L; cis2_error *err; } plan_ctx;

static int plan_one(void *ctx, const cis2_tensor_spec *t)
{
    plan_ctx *P = ctx;
    cis2_model *m = P->m;
    cis2_layer *ly = t->layer >= 0 ? &m->layers[t->layer] : NULL;
    cis2_pmat *mat = NULL;
    float **vec = NULL;
    switch (t->role) {
    case CIS2_T_EMBED: mat = &m->embed; break;
    case CIS2_T_LM_HEAD: mat = &m->lm_head; break;
    case CIS2_T_FINAL_NORM: vec = &m->norm; break;
    case CIS2_T_ATTN_NORM: vec = &ly->ln1; break;
    case CIS2_T_ATTN_OUT_NORM: vec = &ly->ln_ao; break;
    case CIS2_T_FFN_NORM: vec = &ly->ln2; break;
    case CIS2_T_FFN_OUT_NORM: vec = &ly->ln_mo; break;
    case CIS2_T_Q: mat = &ly->q; break;
    case CIS2_T_K: mat = &ly->k; break;
    case CIS2_T_V: mat = &ly->v; break;
    case CIS2_T_O: mat = &ly->o; break;
    case CIS2_T_Q_BIAS: vec = &ly->bq; break;
    case CIS2_T_K_BIAS: vec = &ly->bk; break;
    case CIS2_T_V_BIAS: vec = &ly->bv; break;
    case CIS2_T_Q_NORM: vec = &ly->qn; break;
    case CIS2_T_K_NORM: vec = &ly->kn; break;
    case CIS2_T_GATE: mat = &ly->gate; break;
    case CIS2_T_UP: mat = &ly->up; break;
    case CIS2_T_DOWN: mat = &ly->down; break;
    case CIS2_T_ROUTER: mat = &ly->router; break;
    case CIS2_T_EXPERT_GATE: mat = &ly->experts[3 * t->expert]; break;
    case CIS2_T_EXPERT_UP: mat = &ly->experts[3 * t->expert + 1]; break;
    case CIS2_T_EXPERT_DOWN: mat = &ly->experts[3 * t->expert + 2]; break;
    case CIS2_T_LIN_QKV: mat = &ly->lin_qkv; break; /* docs/models.md §M10.2 */
    case CIS2_T_LIN_QKVZ: mat = &ly->lin_qkv; break; /* §M10.11: its outputs regrouped by deltanet.c */
    case CIS2_T_LIN_BA: mat = &ly->lin_b; break;
    case CIS2_T_LIN_Z: mat = &ly->lin_z; break;
    case CIS2_T_LIN_B: mat = &ly->lin_b; break;
    case CIS2_T_LIN_A: mat = &ly->lin_a; break;
    case CIS2_T_LIN_OUT: mat = &ly->lin_out; break;
    case CIS2_T_LIN_CONV: vec = &ly->lin_conv; break;      /* [C, 1, K]: transposed after the load */
    case CIS2_T_LIN_A_LOG: vec = &ly->lin_na; break;       /* A_log: -exp_pinned(A_log) after the load */
    case CIS2_T_LIN_DT_BIAS: vec = &ly->lin_dt_bias; break;
    case CIS2_T_LIN_NORM: vec = &ly->lin_norm; break;
    case CIS2_T_QKV: { /* docs/models.md §M6: q, k, v rows in turn */
        cis2_pmat *d[3] = {&ly->q, &ly->k, &ly->v};
        size_t r[3] = {m->q_dim, m->kv_dim, m->kv_dim};
        return want_fused(P->L, t->name, d, r, 3, (size_t)t->d1, P->err);
    }
    case CIS2_T_O_BIAS: vec = &ly->bo; break;
    case CIS2_T_SINKS: vec = &ly->sinks; break;
    case CIS2_T_ROUTER_BIAS: vec = &ly->router_bias; break;
    case CIS2_T_EXPERTS_GU_BIAS: vec = &ly->eb_gu; break;
    case CIS2_T_EXPERTS_DOWN_BIAS: vec = &ly->eb_down; break;
    case CIS2_T_EXPERTS_GU_BLOCKS: case CIS2_T_EXPERTS_GU_SCALES:
    case CIS2_T_EXPERTS_DOWN_BLOCKS: case CIS2_T_EXPERTS_DOWN_SCALES: { /* §M9.6: one part per expert */
        int blocks = t->role == CIS2_T_EXPERTS_GU_BLOCKS || t->role == CIS2_T_EXPERTS_DOWN_BLOCKS;
        int down = t->role == CIS2_T_EXPERTS_DOWN_BLOCKS || t->role == CIS2_T_EXPERTS_DOWN_SCALES;
        uint64_t d[4] = {t->d0, t->d1, t->d2, t->d3};
        const cis2_st_tensor *st = want_u8(P->L, t->name, d, t->ndim, 1, blocks ? J_MXB : J_MXS, NULL, P->err);
        if (!st) return P->err->code;
        job *j = &P->L->jobs[st - P->L->w.st.t];
        *j = (job){.kind = blocks ? J_MXB : J_MXS, .rows = (size_t)(t->d0 * t->d1), .cols = (size_t)t->d2 * 32,
                   .part_rows = {(size_t)t->d1}, .nparts = (size_t)t->d0, .part_base = &ly->experts[down ? 2 : 0],
                   .part_step = 3};
        return CIS2_OK;
    }
    case CIS2_T_SHARED_GATE: mat = &ly->sh_gate; break; /* §M10.10 */
    case CIS2_T_SHARED_UP: mat = &ly->sh_up; break;
    case CIS2_T_SHARED_DOWN: mat = &ly->sh_down; break;
    case CIS2_T_SHARED_ROUTER: mat = &ly->sh_router; break;
    case CIS2_T_EXPERTS_GATE_UP: case CIS2_T_EXPERTS_DOWN: { /* §M10.10: all experts in one tensor, one part each */
        int gu = t->role == CIS2_T_EXPERTS_GATE_UP;
        uint64_t d[3] = {t->d0, t->d1, t->d2};
        const cis2_st_tensor *st = want_u8(P->L, t->name, d, 3, 0, J_MAT, NULL, P->err);
        if (!st) return P->err->code;
        job *j = &P->L->jobs[st - P->L->w.st.t];
        /* gate_up [E, 2 Im, H]: expert e's gate rows, then its up rows, parts 2e and 2e+1; down [E, H, Im] */
        *j = (job){.kind = J_MAT, .rows = (size_t)(t->d0 * t->d1), .cols = (size_t)t->d2,
                   .part_rows = {(size_t)(gu ? t->d1 / 2 : t->d1)}, .nparts = (size_t)(gu ? 2 * t->d0 : t->d0),
                   .part_base = &ly->experts[gu ? 0 : 2], .part_step = 3, .part_pair = gu};
        return CIS2_OK;
    }
    case CIS2_T_GATE_UP: { /* gate's rows, then up's */
        cis2_pmat *d[2] = {&ly->gate, &ly->up};
        size_t r[2] = {m->inter, m->inter};
        return want_fused(P->L, t->name, d, r, 2, (size_t)t->d1, P->err);
    }
    }
    uint64_t d[4] = {t->d0, t->d1, t->d2, t->d3};
    const cis2_st_tensor *st = want_u8(P->L, t->name, d, t->ndim, 0, mat ? J_MAT : J_VEC,
                                       mat ? (void *)mat : (void *)vec, P->err);
    if (!st) return P->err->code;
    if (vec) { /* every element */
        uint64_t all = t->d0;
        for (int i = 1; i < t->ndim; i++) all *= d[i];
        P->L->jobs[st - P->L->w.st.t].rows = (size_t)all;
    }
    return CIS2_OK;
}

/* Matches every tensor of the file to the config before any weight is
 * read: what the family calls for (cis2_family_tensors) must be there with
 * its shape, and nothing else may be (Hugging Face's modeling code: llama
 * has q/k/v and o_proj biases iff attention_bias, qwen2 always q/k/v
 * biases and never an o_proj bias; config.c refuses MLP biases).  Sets
 * each layer's kinds. */
static int plan_tensors(cis2_model *m, loader *L, cis2_error *err)
{
    const cis2_family *f = m->cfg.family;
    int has_head = cis2_st_find(&L->w.st, "lm_head.weight") != NULL;
    if (m->cfg.tie_word_embeddings && has_head)
        return cis2_fail(err, CIS2_E_UNSUPPORTED,
                         "%s: tie_word_embeddings is true but lm_head.weight is present (the spec does not say which wins)",
                         L->path);
    if (!m->cfg.tie_word_embeddings && !has_head)
        return cis2_fail(err, CIS2_E_FORMAT, "%s: tie_word_embeddings is false but lm_head.weight is missing",
                         L->path);
    m->tied = m->cfg.tie_word_embeddings;
    for (size_t i = 0; i < m->n_layers; i++) /* docs/models.md §M8.2: 3 matrices an expert */
        if (m->cfg.sparse[i] && !(m->layers[i].experts = calloc(3 * m->n_experts, sizeof(cis2_pmat))))
            return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    plan_ctx P = {m, L, err};
    int rc = cis2_family_tensors(&m->cfg, plan_one, &P);
    if (rc) return rc;
    char name[128];
    m->n_kv_layers = m->state_floats = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        cis2_layer *ly = &m->layers[i];
        ly->mixer = m->cfg.slides[i] ? CIS2_MIXER_ATTENTION_WINDOW : CIS2_MIXER_ATTENTION; /* §M5, §M7.1 */
        if (m->cfg.linear[i]) { /* §M10.4: its state, the conv window then S, after the earlier layers' */
            ly->mixer = CIS2_MIXER_DELTANET;
            ly->state_off = m->state_floats;
            m->state_floats += (m->lin_kernel - 1) * m->lin_c + m->lin_hv * m->lin_dk * m->lin_dv;
        } else {
            ly->kv_layer = m->n_kv_layers++;
        }
        ly->ffn = m->cfg.sparse[i] ? CIS2_FFN_MOE : CIS2_FFN_DENSE;
        ly->no_rope = m->cfg.no_rope[i]; /* docs/models.md §M3 */
        ly->window = m->cfg.slides[i] ? (size_t)m->cfg.sliding_window : 0;
        ly->rope_local = f->gemma3_keys && m->cfg.slides[i]; /* §M7.4 */
        snprintf(name, sizeof name, "model.layers.%zu.self_attn.o_proj.bias", i);
        if (cis2_config_o_bias(&m->cfg) && !f->o_bias && cis2_st_find(&L->w.st, name))
            return cis2_fail(err, CIS2_E_UNSUPPORTED,
                             "%s: tensor %s (llama attention_bias is true) is not supported: §9.5 has no "
                             "output-projection bias", L->path, name);
    }
    int qkv = cis2_config_qkv_bias(&m->cfg);
    for (size_t i = 0; i < L->w.st.n; i++)
        if (L->jobs[i].kind == J_NONE && cis2_family_skips(f, L->w.st.t[i].name))
            L->jobs[i].kind = J_SKIP; /* §M10.2: read (hashed), not used */
    for (size_t i = 0; i < L->w.st.n; i++)
        if (L->jobs[i].kind == J_NONE)
            return cis2_fail(err, CIS2_E_FORMAT, "%s: unexpected tensor %s (not part of a %zu-layer %s model%s)",
                             L->path, L->w.st.t[i].name, m->n_layers, f->model_type,
                             f->attention_bias == CIS2_BIAS_QKV || f->qk_norm != CIS2_QKN_NONE ? ""
                             : qkv ? " with attention_bias true" : " with attention_bias false");
    return CIS2_OK;
}

/* The packed matrices' type: bf16 stays bf16 (§4.1, the kernels widen it);
 * f32 stays f32; f16 is widened exactly to f32 while packing (f16 -> bf16
 * would round; docs/inputs.md "Memory"), so an F16 matrix costs twice its file bytes. */
static cis2_wtype packed_type(const cis2_st_tensor *t) { return t->dtype == CIS2_ST_BF16 ? CIS2_W_BF16 : CIS2_W_F32; }

/* One block of weight memory for every matrix the plan calls for
 * (kernels.h, cis2_wmem: huge pages). */
static int wmem_plan(cis2_model *m, loader *L, cis2_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < L->w.st.n; i++) {
        const job *j = &L->jobs[i];
        for (size_t p = 0; (j->kind == J_MAT || j->kind == J_MXB) && p < j->nparts; p++) {
            cis2_wtype ty = j->kind == J_MXB ? CIS2_W_MXFP4 : packed_type(&L->w.st.t[i]);
            size_t need = cis2_wmem_need(ty, job_part_rows(j, p), j->cols);
            if (!need || need > SIZE_MAX - total)
                return cis2_fail(err, CIS2_E_NOMEM, "%s: the weights are too large to pack", L->path);
            total += need;
        }
    }
    return cis2_wmem_init(&m->wmem, total, err);
}

/* One read of the data area: rows [r0, r0 + nr) of part p of tensor `t`
 * (a matrix), or all of it (a vector). */
typedef struct seg { size_t t, p, r0, nr, bytes; } seg;

/* One step of the pipeline, run across the pool: item 0 reads (and hashes)
 * the next segment into the other staging buffer while items 1.. pack the
 * current one, a few row groups each. */
typedef struct step {
    loader *L;
    const seg *cur, *next;
    const uint8_t *cur_buf;
    uint8_t *next_buf;
    uint8_t *wide;          /* an F16 segment's rows widened to f32 (twice a staging buffer) */
    size_t groups_per_item, items;
    int read_rc;
    cis2_error read_err;
} step;

static void step_item(void *ctx, size_t i)
{
    step *S = ctx;
    if (i == 0) {
        if (S->next) S->read_rc = cis2_wset_read(&S->L->w, S->next_buf, S->next->bytes, &S->read_err);
        return;
    }
    const job *j = &S->L->jobs[S->cur->t];
    cis2_st_dtype dt = S->L->w.st.t[S->cur->t].dtype;
    size_t rowbytes = job_rowbytes(j, &S->L->w.st.t[S->cur->t]);
    size_t g = (i - 1) * S->groups_per_item, r = g * CIS2_KG; /* relative to the segment */
    if (r >= S->cur->nr) return;
    size_t nr = S->cur->nr - r < S->groups_per_item * CIS2_KG ? S->cur->nr - r : S->groups_per_item * CIS2_KG;
    const uint8_t *src = S->cur_buf + r * rowbytes;
    if (dt == CIS2_ST_F16) { /* these rows widened exactly (safetensors.h), then packed as f32 */
        float *w = (float *)(S->wide + r * j->cols * sizeof(float));
        cis2_st_widen_f32(dt, src, nr * j->cols, w);
        src = (const uint8_t *)w;
    }
    cis2_pmat *pm = job_part(j, S->cur->p);
    size_t g0 = (S->cur->r0 + r) / CIS2_KG;
    if (j->kind == J_MXB) cis2_pmat_pack_mxfp4_blocks(S->L->cx, pm, src, g0, nr);
    else if (j->kind == J_MXS) cis2_pmat_pack_mxfp4_scales(S->L->cx, pm, src, g0, nr);
    else cis2_pmat_pack_groups(S->L->cx, pm, src, g0, nr);
}

/* Reads the data area in file order, each tensor straight into its packed
 * matrix or f32 vector through two bounded staging buffers (one being
 * packed while the next is read and hashed). */
static int stream_tensors(cis2_model *m, loader *L, cis2_error *err)
{
    cis2_st_file *st = &L->w.st;
    size_t cap = STAGE_BYTES, nseg = 0;
    for (size_t i = 0; i < st->n; i++) {
        const job *j = &L->jobs[i];
        if (j->kind == J_SKIP) continue; /* read in pieces of the buffer's size */
        size_t need = j->kind == J_VEC ? (size_t)st->t[i].nbytes : CIS2_KG * job_rowbytes(j, &st->t[i]);
        if (need > cap) cap = need; /* <= 16 x 2^20 x 4 bytes (config.c limits) */
    }
    for (size_t i = 0; i < st->n; i++) {
        const job *j = &L->jobs[i];
        if (j->kind == J_VEC) { nseg++; continue; }
        if (j->kind == J_SKIP) { nseg += (size_t)(st->t[i].nbytes / cap) + (st->t[i].nbytes % cap != 0); continue; }
        size_t batch = cap / job_rowbytes(j, &st->t[i]) / CIS2_KG * CIS2_KG;
        for (size_t p = 0; p < j->nparts; p++) nseg += (job_part_rows(j, p) + batch - 1) / batch;
    }
    int f16 = 0;
    for (size_t i = 0; i < st->n; i++) f16 |= L->jobs[i].kind == J_MAT && st->t[i].dtype == CIS2_ST_F16;
    seg *sg = malloc((nseg ? nseg : 1) * sizeof *sg);
    uint8_t *buf[2] = {malloc(cap), malloc(cap)}, *wide = f16 ? malloc(2 * cap) : NULL;
    int rc = CIS2_OK;
    if (!sg || !buf[0] || !buf[1] || (f16 && !wide))
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory for the staging buffers");
    size_t k = 0;
    for (size_t o = 0; !rc && o < st->n; o++) {
        size_t i = st->order[o];
        const job *j = &L->jobs[i];
        if (j->kind == J_VEC) { sg[k++] = (seg){i, 0, 0, j->rows, (size_t)st->t[i].nbytes}; continue; }
        if (j->kind == J_SKIP) { /* §M10.2: its bytes read and hashed, nothing kept */
            for (uint64_t b = 0; b < st->t[i].nbytes; b += cap)
                sg[k++] = (seg){i, 0, 0, 0, st->t[i].nbytes - b < cap ? (size_t)(st->t[i].nbytes - b) : cap};
            continue;
        }
        size_t rowbytes = job_rowbytes(j, &st->t[i]), batch = cap / rowbytes / CIS2_KG * CIS2_KG;
        for (size_t p = 0; p < j->nparts; p++) /* the parts' rows follow one another in the file */
            for (size_t r0 = 0, rows = job_part_rows(j, p); r0 < rows; r0 += batch) {
                size_t nr = rows - r0 < batch ? rows - r0 : batch;
                sg[k++] = (seg){i, (size_t)p, r0, nr, nr * rowbytes};
            }
    }
    if (!rc && nseg) rc = cis2_wset_read(&L->w, buf[0], sg[0].bytes, err);
    for (size_t s = 0; !rc && s < nseg; s++) {
        const seg *cur = &sg[s];
        const job *j = &L->jobs[cur->t];
        const cis2_st_tensor *t = &st->t[cur->t];
        step S = {.L = L, .cur = cur, .next = s + 1 < nseg ? &sg[s + 1] : NULL, .cur_buf = buf[s & 1],
                  .next_buf = buf[(s + 1) & 1], .wide = wide};
        if (j->kind == J_SKIP) {
            step_item(&S, 0);
        } else if (j->kind == J_VEC) {
            float **v = j->dest;
            if (!(*v = malloc(j->rows * sizeof(float)))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); break; }
            cis2_st_widen_f32(t->dtype, S.cur_buf, j->rows, *v);
            step_item(&S, 0);
        } else {
            cis2_pmat *pm = job_part(j, cur->p);
            if (j->kind == J_MXS) /* docs/models.md §M9.6: 2^-127 and NaN scales are refused */
                for (size_t b = 0; b < cur->bytes; b++)
                    if (S.cur_buf[b] == 0 || S.cur_buf[b] == 0xFF) {
                        rc = cis2_fail(err, CIS2_E_FORMAT, "%s: tensor %s: MXFP4 scale byte %u is not supported "
                                       "(docs/models.md §M9.6: 1..254)", L->path, t->name, S.cur_buf[b]);
                        break;
                    }
            if (rc) break;
            if (!pm->data && (rc = cis2_pmat_alloc_in(pm, &m->wmem, j->kind == J_MAT ? packed_type(t) : CIS2_W_MXFP4,
                                                      job_part_rows(j, cur->p), j->cols, err)))
                break;
            size_t gbytes = CIS2_KG * job_rowbytes(j, t);
            S.groups_per_item = gbytes >= ((size_t)64 << 10) ? 1 : ((size_t)64 << 10) / gbytes;
            size_t groups = (cur->nr + CIS2_KG - 1) / CIS2_KG;
            S.items = 1 + (groups + S.groups_per_item - 1) / S.groups_per_item;
            cis2_parallel_for(L->cx, S.items, step_item, &S);
        }
        if (S.read_rc) rc = cis2_fail(err, S.read_rc, "%s", S.read_err.msg);
    }
    free(sg);
    free(buf[0]);
    free(buf[1]);
    free(wide);
    if (!rc) rc = cis2_wset_finish(&L->w, m->weights_sha, err); /* §2.1 over every byte read (shards.h) */
    return rc;
}

/* gemma3_text's RMSNorm scales by (1 + w) (docs/models.md §M7.2): each
 * norm weight, once loaded, becomes the f32 sum 1 + w, after which §8's
 * rmsnorm is unchanged.  The weights' sha256 is of the file, as stored. */
static void plus_one(float *w, size_t n)
{
    for (size_t i = 0; w && i < n; i++) w[i] = f32_from_bits(0x3F800000u) + w[i]; /* a norm the layer lacks: NULL */
}

static void plus_one_norms(cis2_model *m)
{
    plus_one(m->norm, m->hidden);
    for (size_t i = 0; i < m->n_layers; i++) {
        cis2_layer *ly = &m->layers[i];
        plus_one(ly->ln1, m->hidden); plus_one(ly->ln_ao, m->hidden);
        plus_one(ly->ln2, m->hidden); plus_one(ly->ln_mo, m->hidden);
        plus_one(ly->qn, m->head_dim); plus_one(ly->kn, m->head_dim);
    }
}

/* A Gated DeltaNet layer's vectors once loaded (docs/models.md §M10.2,
 * §M10.3): the conv's weights [C][K] transposed to [K][C], so that a
 * position's C channels are contiguous, and A_log[h] replaced by
 * -exp_pinned(A_log[h]), the factor of every decay of head h.  The weights'
 * sha256 is of the file, as stored. */
static int deltanet_prepare(cis2_model *m, cis2_error *err)
{
    size_t C = m->lin_c, K = m->lin_kernel;
    float *t = malloc(C * K * sizeof(float) + 1);
    if (!t) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    for (size_t l = 0; l < m->n_layers; l++) {
        cis2_layer *ly = &m->layers[l];
        if (ly->mixer != CIS2_MIXER_DELTANET) continue;
        for (size_t c = 0; c < C; c++)
            for (size_t j = 0; j < K; j++) t[j * C + c] = ly->lin_conv[c * K + j];
        memcpy(ly->lin_conv, t, C * K * sizeof(float));
        for (size_t h = 0; h < m->lin_hv; h++) ly->lin_na[h] = -exp_pinned(ly->lin_na[h]);
    }
    free(t);
    return CIS2_OK;
}

static int model_load(const cis2_ctx *cx, cis2_model *m, const char *dir,
                      int (*before_weights)(void *, cis2_model *, cis2_error *), void *hctx, cis2_error *err)
{
    char path[4096];
    int rc;
    if ((rc = path_join(path, sizeof path, dir, "config.json", err))) return rc;
    if ((rc = cis2_config_load_sha(&m->cfg, path, m->config_sha, err))) return rc;
    if ((rc = cis2_genconfig_merge_dir(&m->cfg, dir, err))) return rc; /* its eos ids (docs/sampling.md §S5.1) */
    if ((rc = path_join(path, sizeof path, dir, "tokenizer.json", err))) return rc;
    if ((rc = cis2_read_file(path, CIS2_TOK_MAX_FILE, "a tokenizer.json", &m->tokenizer_json,
                             &m->tokenizer_json_len, err)))
        return rc;
    cis2_sha256(m->tokenizer_json, m->tokenizer_json_len, m->tokenizer_sha); /* §2.1 */
    if (before_weights && (rc = before_weights(hctx, m, err))) return rc; /* before any weight is read */

    const cis2_config *c = &m->cfg;
    m->hidden = (size_t)c->hidden_size;
    m->inter = (size_t)c->intermediate_size;
    m->n_layers = (size_t)c->num_hidden_layers;
    m->n_heads = (size_t)c->num_attention_heads;
    m->n_kv = (size_t)c->num_key_value_heads;
    m->head_dim = (size_t)c->head_dim;
    m->vocab = (size_t)c->vocab_size;
    m->n_experts = (size_t)c->num_experts;
    m->top_k = (size_t)c->num_experts_per_tok;
    m->moe_inter = (size_t)c->moe_intermediate_size;
    m->norm_topk = c->norm_topk_prob;
    m->shared_inter = (size_t)c->shared_inter;
    m->moe = c->family->moe;
    m->swiglu_limit = c->swiglu_limit;
    m->rope_mscale = c->rope_yarn ? cis2_config_rope_mscale(c) : 0.0f;
    m->q_dim = m->n_heads * m->head_dim;
    m->kv_dim = m->n_kv * m->head_dim;
    const cis2_family *f = c->family;
    m->rot_half = (size_t)c->rotary_dim / 2; /* head_dim / 2 but for a partial rotary (§M10.5) */
    m->attn_gate = f->attn_gate;             /* §M10.5 */
    m->lin_hk = (size_t)c->lin_k_heads, m->lin_hv = (size_t)c->lin_v_heads; /* §M10.2 */
    m->lin_dk = (size_t)c->lin_k_dim, m->lin_dv = (size_t)c->lin_v_dim, m->lin_kernel = (size_t)c->conv_kernel;
    m->lin_c = 2 * m->lin_hk * m->lin_dk + m->lin_hv * m->lin_dv;
    m->lin_fused = f->linear == CIS2_LIN_FUSED; /* §M10.11 */
    m->lin_qscale = f->linear != CIS2_LIN_NONE ? rsqrt_cr((float)c->lin_k_dim) : 0.0f; /* §M10.3 */
    m->qk_whole = f->qk_norm == CIS2_QKN_WHOLE; /* olmo2, docs/models.md §M4 */
    m->gelu = !strcmp(f->activation, "gelu_pytorch_tanh"); /* §M7.5 */
    /* §9.2's rsqrt(head_dim as f32); gemma3_text's of query_pre_attn_scalar (§M7.3), exact in f32 */
    m->attn_scale = rsqrt_cr((float)(f->gemma3_keys ? c->query_pre_attn_scalar : c->head_dim));
    m->embed_scale = f->embed_scaled ? __builtin_sqrtf((float)c->hidden_size) : 0.0f; /* §M7.2: correctly rounded */

    size_t n_inv = cis2_config_inv_freq_len(c);
    m->n_rope_tables = n_inv / m->rot_half;
    m->inv_freq = malloc(n_inv * sizeof(float));
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    if (!m->inv_freq || !m->layers) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    cis2_config_inv_freq(c, m->inv_freq); /* §7.1; docs/models.md §M1 for llama3, §M7.4 for gemma3_text */
    cis2_inv_freq_table_digest(m->inv_freq, n_inv, m->inv_freq_digest); /* §7.2 (§M7.4: both tables) */
    cis2_table_digest(m->table_digest); /* §6.6 */

    loader L = {.cx = cx};
    if ((rc = cis2_wset_open(&L.w, dir, err))) return rc; /* headers only, every shard checked */
    L.path = L.w.label;
    L.jobs = calloc(L.w.st.n ? L.w.st.n : 1, sizeof *L.jobs);
    if (!L.jobs) rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    else if (!(rc = plan_tensors(m, &L, err)) && !(rc = wmem_plan(m, &L, err))) rc = stream_tensors(m, &L, err);
    free(L.jobs);
    cis2_wset_close(&L.w);
    if (rc) return rc;
    if (f->norm_plus_one) plus_one_norms(m); /* §M7.2, §M10.2 */
    if (m->state_floats && (rc = deltanet_prepare(m, err))) return rc;

    m->weight_bytes = cis2_pmat_bytes(m->tied ? &m->embed : &m->lm_head);
    for (size_t i = 0; i < m->n_layers; i++) {
        const cis2_layer *ly = &m->layers[i];
        m->weight_bytes += cis2_pmat_bytes(&ly->q) + cis2_pmat_bytes(&ly->k) + cis2_pmat_bytes(&ly->v) +
                           cis2_pmat_bytes(&ly->o) + cis2_pmat_bytes(&ly->gate) + cis2_pmat_bytes(&ly->up) +
                           cis2_pmat_bytes(&ly->down);
        m->weight_bytes += cis2_pmat_bytes(&ly->lin_qkv) + cis2_pmat_bytes(&ly->lin_z) + cis2_pmat_bytes(&ly->lin_b) +
                           cis2_pmat_bytes(&ly->lin_a) + cis2_pmat_bytes(&ly->lin_out) + /* §M10.2 */
                           cis2_pmat_bytes(&ly->sh_gate) + cis2_pmat_bytes(&ly->sh_up) +   /* §M10.10 */
                           cis2_pmat_bytes(&ly->sh_down) + cis2_pmat_bytes(&ly->sh_router);
        if (ly->experts) /* a token reads the router and its k experts (all of one size) */
            m->weight_bytes += cis2_pmat_bytes(&ly->router) +
                               m->top_k * (cis2_pmat_bytes(&ly->experts[0]) + cis2_pmat_bytes(&ly->experts[1]) +
                                           cis2_pmat_bytes(&ly->experts[2]));
    }
    return CIS2_OK;
}

/* A failed load frees what it had built (every pointer is NULL or owned). */
int cis2_model_load_hooked(const cis2_ctx *cx, cis2_model *m, const char *dir,
                           int (*before_weights)(void *ctx, cis2_model *m, cis2_error *err), void *ctx,
                           cis2_error *err)
{
    memset(m, 0, sizeof *m);
    int rc = model_load(cx, m, dir, before_weights, ctx, err);
    if (rc) cis2_model_free(m);
    return rc;
}

int cis2_model_load(const cis2_ctx *cx, cis2_model *m, const char *dir, cis2_error *err)
{
    return cis2_model_load_hooked(cx, m, dir, NULL, NULL, err);
}

void cis2_model_free(cis2_model *m)
{
    if (m->layers)
        for (size_t i = 0; i < m->n_layers; i++) {
            cis2_layer *ly = &m->layers[i];
            cis2_pmat_free(&ly->q); cis2_pmat_free(&ly->k); cis2_pmat_free(&ly->v); cis2_pmat_free(&ly->o);
            cis2_pmat_free(&ly->gate); cis2_pmat_free(&ly->up); cis2_pmat_free(&ly->down);
            free(ly->ln1); free(ly->ln2); free(ly->ln_ao); free(ly->ln_mo); free(ly->bq); free(ly->bk); free(ly->bv);
            free(ly->qn); free(ly->kn);
            cis2_pmat_free(&ly->router);
            free(ly->bo); free(ly->sinks); free(ly->router_bias); free(ly->eb_gu); free(ly->eb_down);
            for (size_t e = 0; ly->experts && e < 3 * m->n_experts; e++) cis2_pmat_free(&ly->experts[e]);
            cis2_pmat_free(&ly->lin_qkv); cis2_pmat_free(&ly->lin_z); cis2_pmat_free(&ly->lin_b);
            cis2_pmat_free(&ly->lin_a); cis2_pmat_free(&ly->lin_out);
            cis2_pmat_free(&ly->sh_gate); cis2_pmat_free(&ly->sh_up); cis2_pmat_free(&ly->sh_down);
            cis2_pmat_free(&ly->sh_router);
            free(ly->lin_conv); free(ly->lin_na); free(ly->lin_dt_bias); free(ly->lin_norm);
            free(ly->experts);
        }
    free(m->layers);
    cis2_pmat_free(&m->embed);
    cis2_pmat_free(&m->lm_head);
    cis2_wmem_free(&m->wmem);
    free(m->norm);
    free(m->inv_freq);
    free(m->tokenizer_json);
    memset(m, 0, sizeof *m);
}

/* From this size on a cache is one block on huge pages (bigbuf.h): its
 * first writes then fault 2 MiB at a time, not 4 KiB (copying a 200-token
 * prefix into three fresh caches took 90 ms of 4 KiB faults on the Zen 4
 * VM); the rounding up to 2 MiB costs at most a quarter more. */
#define KV_BIG ((size_t)8 << 20)

size_t cis2_kv_bytes(const cis2_model *m, size_t positions)
{
    if (positions > SIZE_MAX - 15) return SIZE_MAX;
    size_t cap = (positions + 15) / 16 * 16; /* whole key blocks */
    size_t per_pos = 2 * sizeof(float) * m->kv_dim; /* k and v of one position of one attention layer */
    if (m->n_kv_layers && cap > SIZE_MAX / m->n_kv_layers) return SIZE_MAX;
    size_t lc = m->n_kv_layers * cap;
    if (per_pos && lc > SIZE_MAX / per_pos) return SIZE_MAX;
    size_t state = m->state_floats * sizeof(float); /* the recurrent mixers' (model.h), whatever the length */
    if (m->state_floats > SIZE_MAX / sizeof(float) || lc * per_pos > SIZE_MAX - state) return SIZE_MAX;
    return lc * per_pos + state;
}

int cis2_kv_init(cis2_kv *kv, const cis2_model *m, size_t cap, cis2_error *err)
{
    size_t bytes = cis2_kv_bytes(m, cap); /* k, then v, then the state: one block */
    cap = (cap + 15) / 16 * 16; /* whole key blocks */
    kv->cap = cap;
    kv->k = kv->v = kv->state = NULL;
    kv->state_pos = 0;
    if (bytes == SIZE_MAX)
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory for a KV cache of %zu positions", cap);
    size_t n = (bytes - m->state_floats * sizeof(float)) / 2 / sizeof(float);
    float *b = bytes >= KV_BIG ? cis2_big_alloc(bytes, NULL) : malloc(bytes);
    if (!b) return cis2_fail(err, CIS2_E_NOMEM, "out of memory for a KV cache of %zu positions", cap);
    memset(b, 0, n * sizeof(float)); /* k: block padding stays 0 */
    kv->k = b;
    kv->v = b + n; /* n * 4 is a multiple of 64: cap is of 16 */
    if (m->state_floats) {
        kv->state = b + 2 * n;
        memset(kv->state, 0, m->state_floats * sizeof(float)); /* the state before position 0 */
    }
    return CIS2_OK;
}

void cis2_kv_free(cis2_kv *kv)
{
    free(kv->k); /* v and the state lie in the same block */
    kv->k = kv->v = kv->state = NULL;
}

void cis2_kv_copy_prefix(cis2_kv *dst, const cis2_kv *src, const cis2_model *m, size_t n)
{
    if (m->state_floats) { /* a state is the prefix's only when it has absorbed exactly n positions */
        if (src->state_pos != n) return;
        memcpy(dst->state, src->state, m->state_floats * sizeof(float));
        dst->state_pos = n;
    }
    size_t hd = m->head_dim, KV = m->kv_dim, whole = n / 16 * 16;
    for (size_t l = 0; l < m->n_kv_layers; l++)
        for (size_t h = 0; h < m->n_kv; h++) {
            const float *ks = src->k + l * src->cap * KV + h * hd * src->cap;
            float *kd = dst->k + l * dst->cap * KV + h * hd * dst->cap;
            memcpy(kd, ks, whole * hd * sizeof(float)); /* whole key blocks of 16 positions */
            for (size_t d = 0; d < hd; d++) /* a last block's first n % 16 positions; the rest stay dst's */
                for (size_t p = whole; p < n; p++) kd[whole * hd + d * 16 + p % 16] = ks[whole * hd + d * 16 + p % 16];
            memcpy(dst->v + (l * m->n_kv + h) * dst->cap * hd, src->v + (l * m->n_kv + h) * src->cap * hd,
                   n * hd * sizeof(float));
        }
}

/* --------------------------------------------------------------- forward */

/* ---- the decoder's per-row stages, on rows [r0, r1): each touches only
 * its rows' slices; the norms run the rows' §5.3 chains side by side
 * (pmath.h) ---- */

/* embedding lookup (gemma3_text: times its scale, docs/models.md §M7.2);
 * §7.3 cos/sin of the row's position, for each RoPE table (§M7.4) */
static void r_embed(cis2_fwd *F, size_t r0, size_t r1)
{
    const cis2_model *m = F->m;
    size_t half = m->rot_half; /* head_dim / 2, or half the rotated dims (§M10.5) */
    for (size_t r = r0; r < r1; r++) {
        float *x = F->x + r * m->hidden;
        cis2_pmat_row(&m->embed, F->rows[r].token, x);
        if (m->embed_scale != 0.0f)
            for (size_t i = 0; i < m->hidden; i++) x[i] = x[i] * m->embed_scale;
        float fp = (float)F->rows[r].pos; /* exact */
        for (size_t t = 0; t < m->n_rope_tables; t++) {
            float *cs = F->cs + r * F->cs_w + t * 2 * half;
            for (size_t i = 0; i < half; i++) {
                float angle = fp * m->inv_freq[t * half + i];
                cs[i] = cos_pinned(angle);
                cs[half + i] = sin_pinned(angle);
            }
            if (m->rope_mscale != 0.0f) /* YaRN's attention factor (docs/models.md §M9.4) */
                for (size_t i = 0; i < 2 * half; i++) cs[i] = cs[i] * m->rope_mscale;
        }
    }
}

static void r_ln1(cis2_fwd *F, size_t r0, size_t r1) /* §8; none in olmo2 (§M4: the mixer reads x) */
{
    size_t H = F->m->hidden;
    if (!F->ly->ln1) return;
    rmsnorm_rows(F->x + r0 * H, F->ly->ln1, F->m->cfg.rms_norm_eps, H, r1 - r0, F->xn + r0 * H);
}

static void r_resid_mixer(cis2_fwd *F, size_t r0, size_t r1) /* §9.5 residual: the mixer's output is in g */
{
    size_t H = F->m->hidden;
    if (F->ly->ln_ao) /* olmo2 (§M4.3), gemma3_text (§M7.2): the block's output normed, in place, then the add */
        rmsnorm_rows(F->g + r0 * H, F->ly->ln_ao, F->m->cfg.rms_norm_eps, H, r1 - r0, F->g + r0 * H);
    add_n(F->x + r0 * H, F->g + r0 * H, (r1 - r0) * H);
}

static void r_ln2(cis2_fwd *F, size_t r0, size_t r1) /* §8; none in olmo2 (§M4: the feed-forward reads x) */
{
    size_t H = F->m->hidden;
    if (!F->ly->ln2) return;
    rmsnorm_rows(F->x + r0 * H, F->ly->ln2, F->m->cfg.rms_norm_eps, H, r1 - r0, F->xn + r0 * H);
}

static void r_resid_ffn(cis2_fwd *F, size_t r0, size_t r1) /* §10 residual: the feed-forward's output is in xn */
{
    size_t H = F->m->hidden;
    if (F->ly->ln_mo) /* olmo2 (§M4.3), gemma3_text (§M7.2): the block's output normed, in place, then the add */
        rmsnorm_rows(F->xn + r0 * H, F->ly->ln_mo, F->m->cfg.rms_norm_eps, H, r1 - r0, F->xn + r0 * H);
    add_n(F->x + r0 * H, F->xn + r0 * H, (r1 - r0) * H);
}

static void r_next_norm(cis2_fwd *F, size_t r0, size_t r1) /* the next layer's ln1, or §11.1's final norm */
{
    const cis2_model *m = F->m;
    size_t H = m->hidden;
    float eps = m->cfg.rms_norm_eps;
    if (F->layer + 1 < m->n_layers) {
        if (!m->layers[F->layer + 1].ln1) return; /* olmo2: no pre-norm */
        rmsnorm_rows(F->x + r0 * H, m->layers[F->layer + 1].ln1, eps, H, r1 - r0, F->xn + r0 * H);
        return;
    }
    for (size_t r = r0; r < r1;) { /* runs of rows that want logits: their fin rows are consecutive */
        if (!F->rows[r].logits) { r++; continue; }
        size_t e = r + 1;
        while (e < r1 && F->rows[e].logits) e++;
        rmsnorm_rows(F->x + r * H, m->norm, eps, H, e - r, F->fin + F->lrow[r] * H);
        r = e;
    }
}

typedef struct stage { cis2_fwd *F; cis2_row_fn a, b; } stage;

#define ROW_BLOCK 4 /* rows per item: rmsnorm_rows interleaves up to 4 */

static void stage_task(void *ctx, size_t blk)
{
    stage *s = ctx;
    size_t r0 = blk * ROW_BLOCK, r1 = r0 + ROW_BLOCK < s->F->n ? r0 + ROW_BLOCK : s->F->n;
    s->a(s->F, r0, r1);
    if (s->b) s->b(s->F, r0, r1);
}

void cis2_fwd_rows(cis2_fwd *F, cis2_row_fn a, cis2_row_fn b)
{
    stage s = {F, a, b};
    cis2_parallel_for(F->cx, (F->n + ROW_BLOCK - 1) / ROW_BLOCK, stage_task, &s); /* one block: this thread */
}

void cis2_fwd_trace(const cis2_fwd *F, const char *name, const float *base, size_t width)
{
    if (!F->trace) return;
    for (size_t r = 0; r < F->n; r++)
        if (F->rows[r].traced)
            F->trace(F->trace_ctx, F->rows[r].step, F->rows[r].pos, (int)F->layer, name, base + r * width, width);
}

/* a then b, as one pass over the rows unless tracing (cis2_fwd_rows),
 * reporting `name` (n rows of `width` at `base`) between the two */
static void rows_traced(cis2_fwd *F, cis2_row_fn a, const char *name, const float *base, size_t width, cis2_row_fn b)
{
    if (!F->trace) { cis2_fwd_rows(F, a, b); return; }
    cis2_fwd_rows(F, a, NULL);
    cis2_fwd_trace(F, name, base, width);
    cis2_fwd_rows(F, b, NULL);
}

void cis2_ws_free(cis2_ws *ws)
{
    free(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
}

/* Carves n floats off *at, keeping the next buffer 64-byte aligned. */
static float *carve(char **at, size_t n)
{
    float *p = (float *)*at;
    *at += (n * sizeof(float) + 63) / 64 * 64;
    return p;
}

/* docs/models.md §M10.4: a model with recurrent state takes each
 * sequence's rows in position order from where its state stands: its
 * first row in the pass at the state's state_pos, or at 0, which zeroes
 * the state (a recomputation from the start: cis2 run --recompute,
 * speculation's and verification's rewinds), and each next row at the
 * position after.  Advances each state_pos, and groups the rows by
 * sequence for the rooms (F->seq_rows, seq_start): `tmp` holds 2n. */
static int group_rows(cis2_fwd *F, size_t *tmp, cis2_error *err)
{
    const cis2_model *m = F->m;
    _Static_assert(sizeof(cis2_kv *) <= sizeof(size_t), "tmp + n holds n pointers");
    size_t n = F->n, ns = 0, *sid = tmp;
    cis2_kv **kvs = (cis2_kv **)(tmp + n);
    for (size_t r = 0; r < n; r++) {
        cis2_kv *kv = F->rows[r].kv;
        size_t s = r && F->rows[r - 1].kv == kv ? sid[r - 1] : ns, pos = F->rows[r].pos;
        for (size_t i = 0; s == ns && i < ns; i++)
            if (kvs[i] == kv) s = i;
        if (s == ns) { /* the sequence's first row here */
            kvs[ns++] = kv;
            if (pos == 0) { memset(kv->state, 0, m->state_floats * sizeof(float)); kv->state_pos = 0; }
        }
        if (pos != kv->state_pos)
            return cis2_fail(err, CIS2_E_INTERNAL, "a row at position %zu of a sequence whose recurrent state stands "
                             "at %zu", pos, kv->state_pos);
        kv->state_pos = pos + 1;
        sid[r] = s;
    }
    F->nseq = ns;
    memset(F->seq_start, 0, (ns + 1) * sizeof(size_t));
    for (size_t r = 0; r < n; r++) F->seq_start[sid[r] + 1]++;
    for (size_t s = 0; s < ns; s++) F->seq_start[s + 1] += F->seq_start[s];
    size_t *fill = tmp + n; /* kvs no longer needed */
    memcpy(fill, F->seq_start, ns * sizeof(size_t));
    for (size_t r = 0; r < n; r++) F->seq_rows[fill[sid[r]]++] = r;
    return CIS2_OK;
}

int cis2_forward(const cis2_ctx *cx, const cis2_model *m, cis2_ws *ws, cis2_row *rows, size_t n,
                 cis2_trace_fn trace, void *tctx, cis2_error *err)
{
    const size_t H = m->hidden, Q = m->q_dim, KV = m->kv_dim, I = m->inter, half = m->rot_half;
    size_t maxlen = 0, nlog = 0;
    float *lg = NULL; /* the first logits row; the LM head writes all of them in place */
    for (size_t r = 0; r < n; r++) {
        if (rows[r].pos >= rows[r].kv->cap)
            return cis2_fail(err, CIS2_E_INTERNAL, "position %zu beyond the KV cache", rows[r].pos);
        if (rows[r].token >= m->vocab)
            return cis2_fail(err, CIS2_E_FORMAT, "token id %u is outside the vocabulary (%zu)", rows[r].token,
                             m->vocab);
        if (rows[r].pos + 1 > maxlen) maxlen = rows[r].pos + 1;
        if (rows[r].logits) {
            if (!lg) lg = rows[r].logits;
            else if (rows[r].logits != lg + nlog * m->vocab)
                return cis2_fail(err, CIS2_E_INTERNAL, "logits rows not end to end");
            nlog++;
        }
    }
    size_t wide = I > H ? I : H;
    wide = wide > Q ? wide : Q;
    /* every buffer as a count of floats, in carving order */
    size_t cs_w = 2 * half * m->n_rope_tables;
    size_t sizes[14] = {n * H, n * H, n * Q, n * KV, n * KV, n * Q, n * wide, n * I, n * cs_w,
                        (nlog ? nlog : 1) * H, trace ? n * m->n_heads * maxlen : 0, cis2_moe_scratch(m, n),
                        m->attn_gate ? 2 * n * Q : 0, cis2_deltanet_scratch(m, n)};
    size_t nsz = m->state_floats ? 5 * n + 1 : n; /* lrow; and seq_rows, seq_start, group_rows' 2n */
    size_t bytes = 64 + nsz * sizeof(size_t);
    for (int i = 0; i < 14; i++) {
        if (sizes[i] > (SIZE_MAX - bytes) / sizeof(float) / 2)
            return cis2_fail(err, CIS2_E_NOMEM, "forward pass of %zu rows is too large", n);
        bytes += (sizes[i] * sizeof(float) + 63) / 64 * 64;
    }
    cis2_ws tmp = {0};
    if (!ws) ws = &tmp;
    if (ws->cap < bytes) {
        cis2_ws_free(ws);
        ws->buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!ws->buf) return cis2_fail(err, CIS2_E_NOMEM, "out of memory in the forward pass (%zu rows)", n);
        ws->cap = bytes;
    }
    char *at = ws->buf;
    cis2_fwd F = {.cx = cx, .m = m, .rows = rows, .n = n, .cs_w = cs_w, .probs_stride = m->n_heads * maxlen,
                  .trace = trace, .trace_ctx = tctx};
    F.x = carve(&at, sizes[0]), F.xn = carve(&at, sizes[1]), F.q = carve(&at, sizes[2]);
    F.k = carve(&at, sizes[3]), F.v = carve(&at, sizes[4]), F.att = carve(&at, sizes[5]);
    F.g = carve(&at, sizes[6]), F.u = carve(&at, sizes[7]), F.cs = carve(&at, sizes[8]);
    F.fin = carve(&at, sizes[9]);
    F.probs = trace ? carve(&at, sizes[10]) : NULL;
    F.moe = sizes[11] ? carve(&at, sizes[11]) : NULL;
    F.qg = sizes[12] ? carve(&at, sizes[12]) : NULL;
    F.dn = sizes[13] ? carve(&at, sizes[13]) : NULL;
    F.lrow = (size_t *)at;
    int rc = CIS2_OK;
    for (size_t r = 0, j = 0; r < n; r++) F.lrow[r] = rows[r].logits ? j++ : 0;
    if (m->state_floats) { /* §M10.4 */
        F.seq_rows = F.lrow + n;
        F.seq_start = F.seq_rows + n;
        if ((rc = group_rows(&F, F.seq_start + n + 1, err))) goto out;
    }
    F.ly = &m->layers[0];
    cis2_fwd_rows(&F, r_embed, r_ln1); /* layer 0's ln1; the later ones follow each layer's residual */
    for (size_t l = 0; l < m->n_layers; l++) {
        const cis2_layer *ly = &m->layers[l];
        F.layer = l;
        F.ly = ly;
        const float *in = ly->ln1 ? F.xn : F.x; /* the blocks' input: olmo2 has no pre-norms (docs/models.md §M4) */
        const float *in2 = ly->ln2 ? F.xn : F.x;
        cis2_fwd_trace(&F, "ln1", in, H);
        switch (ly->mixer) { /* the token mixer's room: its output in F.g */
        case CIS2_MIXER_ATTENTION:
        case CIS2_MIXER_ATTENTION_WINDOW: rc = cis2_attention(&F, in, err); break;
        case CIS2_MIXER_DELTANET: cis2_deltanet(&F, in); break; /* docs/models.md §M10.3 */
        }
        if (rc) goto out;
        rows_traced(&F, r_resid_mixer, "resid_attn", F.x, H, r_ln2);
        cis2_fwd_trace(&F, "ln2", in2, H);
        switch (ly->ffn) { /* the feed-forward's room: its output in F.xn */
        case CIS2_FFN_DENSE: cis2_ffn_dense(&F, in2, F.xn); break;
        case CIS2_FFN_MOE: cis2_ffn_moe(&F, in2); break;
        }
        rows_traced(&F, r_resid_ffn, "resid_mlp", F.x, H, r_next_norm);
    }
    /* §11.1: the final norm (above, into fin) and the LM head */
    if (nlog) {
        cis2_matmul(cx, m->tied ? &m->embed : &m->lm_head, F.fin, nlog, lg);
        if (trace)
            for (size_t r = 0; r < n; r++)
                if (rows[r].logits && rows[r].traced) {
                    trace(tctx, rows[r].step, rows[r].pos, -1, "final_norm", F.fin + F.lrow[r] * H, H);
                    trace(tctx, rows[r].step, rows[r].pos, -1, "logits", rows[r].logits, m->vocab);
                }
    }
out:
    cis2_ws_free(&tmp);
    return rc;
}

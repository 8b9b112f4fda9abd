/*
 * decode.c - greedy decode (§3.4) and the digests of §12.
 *
 * Witness chain (§12.1), one continuous SHA-256 stream per sequence, fed in
 * exactly this order (FACTS §1.11):
 *   weights_sha256, tokenizer_sha256, config_sha256 (raw 32 bytes each),
 *   table_digest, inv_freq_table_digest (raw 32 bytes each),
 *   every prompt id as u32 LE,
 *   per step: the full logit vector (f32 bits, u32 LE, vocab order), then the
 *   chosen id (u32 LE).
 * Argmax digest (§12.2): a separate stream over prompt ++ generated ids.
 * Exactly gen_toks tokens are generated; EOS is not special.
 */
#include "decode.h"
#include "digest.h"
#include "kernels.h"
#include "pmath.h"

#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cis2 hashes f32/u32 memory as little-endian bytes; big-endian hosts are not supported"
#endif

void cis2_seq_free(cis2_seq *s)
{
    free(s->generated);
    s->generated = NULL;
}

/* §12.1 7a: the logit vector as u32 LE bit patterns.  A NaN is hashed as
 * the canonical quiet NaN 0x7FC00000: an invalid operation (inf - inf...)
 * yields 0xFFC00000 on x86-64 but 0x7FC00000 on aarch64, and the witness
 * must not depend on the ISA (README "Cross-ISA").  Other values are their
 * exact bits. */
static void hash_logits(cis2_sha *w, const float *l, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++)
        if (l[i] != l[i]) {
            cis2_sha_update(w, l + start, (i - start) * sizeof(float));
            cis2_sha_u32le(w, CIS2_QNAN_BITS);
            start = i + 1;
        }
    cis2_sha_update(w, l + start, (n - start) * sizeof(float));
}

typedef struct trace_shim {
    const cis2_decode_opts *o;
    size_t step;
} trace_shim;

static void trace_step(void *ctx, size_t pos, int layer, const char *tensor, const float *v, size_t n)
{
    trace_shim *t = ctx;
    t->o->trace(t->o->trace_ctx, t->step, pos, layer, tensor, v, n);
}

typedef struct seqstate {
    cis2_kv kv;
    cis2_sha w;
    float *logits;
} seqstate;

/* One step of one sequence: argmax (§11.2), then its witness items 7a, 7b. */
typedef struct step_ctx {
    const cis2_model *m;
    cis2_seq *seqs;
    seqstate *st;
    size_t step;
} step_ctx;

static void pick_task(void *ctx, size_t s)
{
    step_ctx *c = ctx;
    seqstate *q = &c->st[s];
    uint32_t tok = (uint32_t)cis2_argmax(q->logits, c->m->vocab); /* §11.2 */
    c->seqs[s].generated[c->step] = tok;
    hash_logits(&q->w, q->logits, c->m->vocab); /* §12.1 7a */
    cis2_sha_u32le(&q->w, tok);                 /* §12.1 7b */
}

int cis2_decode(const cis2_model *m, cis2_seq *seqs, size_t nseq, const cis2_decode_opts *o, cis2_error *err)
{
    int rc = CIS2_OK;
    size_t maxp = 0;
    for (size_t s = 0; s < nseq; s++) {
        if (seqs[s].n_prompt == 0) return cis2_fail(err, CIS2_E_USAGE, "empty prompt (sequence %zu)", s);
        if (seqs[s].n_prompt > maxp) maxp = seqs[s].n_prompt;
        for (size_t i = 0; i < seqs[s].n_prompt; i++)
            if (seqs[s].prompt[i] >= m->vocab)
                return cis2_fail(err, CIS2_E_USAGE, "prompt token id %u is outside the vocabulary (%zu)",
                                 seqs[s].prompt[i], m->vocab);
        if (seqs[s].n_prompt + o->gen_toks > (size_t)m->cfg.max_position_embeddings)
            return cis2_fail(err, CIS2_E_USAGE,
                             "prompt (%zu tokens) + gen-toks (%zu) exceeds max_position_embeddings (%lld)",
                             seqs[s].n_prompt, o->gen_toks, (long long)m->cfg.max_position_embeddings);
    }
    if (o->trace && nseq != 1) return cis2_fail(err, CIS2_E_USAGE, "tracing needs a single sequence");
    trace_shim shim = {o, 0};
    seqstate *st = calloc(nseq, sizeof *st);
    cis2_row *rows = calloc((maxp + (o->recompute ? o->gen_toks : 1)) * nseq, sizeof *rows);
    /* all sequences' logits end to end, so the LM head writes them in place */
    float *logits = nseq <= SIZE_MAX / sizeof(float) / m->vocab ? malloc(nseq * m->vocab * sizeof(float)) : NULL;
    cis2_ws ws = {0};
    if (!st || !rows || !logits) {
        free(st); free(rows); free(logits);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    for (size_t s = 0; s < nseq && !rc; s++) {
        seqs[s].generated = calloc(o->gen_toks ? o->gen_toks : 1, sizeof(uint32_t));
        st[s].logits = logits + s * m->vocab;
        size_t cap = seqs[s].n_prompt + o->gen_toks; /* sized from the run, not the maximum */
        if (!seqs[s].generated || cis2_sha_init(&st[s].w)) {
            rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            break;
        }
        if ((rc = cis2_kv_init(&st[s].kv, m, cap ? cap : 1, err))) break;
        cis2_sha *w = &st[s].w; /* §12.1 items 1-6 */
        cis2_sha_update(w, m->weights_sha, 32);
        cis2_sha_update(w, m->tokenizer_sha, 32);
        cis2_sha_update(w, m->config_sha, 32);
        cis2_sha_update(w, m->table_digest, 32);
        cis2_sha_update(w, m->inv_freq_digest, 32);
        for (size_t i = 0; i < seqs[s].n_prompt; i++) cis2_sha_u32le(w, seqs[s].prompt[i]);
    }
    for (size_t step = 0; step < o->gen_toks && !rc; step++) {
        size_t n = 0;
        for (size_t s = 0; s < nseq; s++) {
            size_t len = seqs[s].n_prompt + step; /* tokens known so far */
            size_t from = (step == 0 || o->recompute) ? 0 : len - 1;
            for (size_t p = from; p < len; p++) {
                cis2_row *r = &rows[n++];
                r->kv = &st[s].kv;
                r->pos = p; /* §3.4: positions 0.. in generation order */
                r->token = p < seqs[s].n_prompt ? seqs[s].prompt[p] : seqs[s].generated[p - seqs[s].n_prompt];
                r->logits = p == len - 1 ? st[s].logits : NULL;
            }
        }
        shim.step = step;
        rc = cis2_forward(m, &ws, rows, n, o->trace ? trace_step : NULL, &shim, err);
        if (rc) break;
        step_ctx sc = {m, seqs, st, step};
        cis2_parallel_for(nseq, pick_task, &sc); /* each sequence its own stream */
        if (o->dump_logits && fwrite(st[0].logits, sizeof(float), m->vocab, o->dump_logits) != m->vocab)
            rc = cis2_fail(err, CIS2_E_IO, "writing the logits dump failed");
        if (o->progress) o->progress(o->progress_ctx, step + 1, o->gen_toks);
    }
    for (size_t s = 0; s < nseq; s++) {
        if (st[s].w.md) cis2_sha_final(&st[s].w, seqs[s].witness);
        if (!rc) { /* §12.2 */
            cis2_sha a;
            if (cis2_sha_init(&a)) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); continue; }
            for (size_t i = 0; i < seqs[s].n_prompt; i++) cis2_sha_u32le(&a, seqs[s].prompt[i]);
            for (size_t i = 0; i < o->gen_toks; i++) cis2_sha_u32le(&a, seqs[s].generated[i]);
            cis2_sha_final(&a, seqs[s].argmax);
        }
        cis2_kv_free(&st[s].kv);
    }
    cis2_ws_free(&ws);
    free(logits);
    free(st);
    free(rows);
    if (rc)
        for (size_t s = 0; s < nseq; s++) cis2_seq_free(&seqs[s]);
    return rc;
}

int cis2_run(const cis2_model *m, cis2_seq *seqs, size_t nseq, const cis2_decode_opts *o, cis2_error *err)
{
    /* §12.4: the whole decode twice.  Without a trace the two copies decode
     * as one batch (each still computes every sum itself; they only share
     * the weight passes); with a trace, one after the other. */
    cis2_seq *all = calloc(2 * nseq, sizeof *all);
    if (!all) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    for (size_t s = 0; s < nseq; s++) {
        all[s].prompt = all[nseq + s].prompt = seqs[s].prompt;
        all[s].n_prompt = all[nseq + s].n_prompt = seqs[s].n_prompt;
    }
    int rc;
    if (o->trace) {
        rc = cis2_decode(m, all, nseq, o, err);
        cis2_decode_opts o2 = *o;
        o2.dump_logits = NULL; /* side outputs come from the first run only */
        o2.trace = NULL;
        if (!rc) rc = cis2_decode(m, all + nseq, nseq, &o2, err);
    } else {
        rc = cis2_decode(m, all, 2 * nseq, o, err);
    }
    for (size_t s = 0; s < nseq && !rc; s++) {
        const cis2_seq *a = &all[s], *b = &all[nseq + s];
        if (memcmp(a->witness, b->witness, 32) || memcmp(a->argmax, b->argmax, 32) ||
            memcmp(a->generated, b->generated, o->gen_toks * sizeof(uint32_t)))
            rc = cis2_fail(err, CIS2_E_NONDET,
                           "§12.4 determinism check failed: the two in-process runs of sequence %zu differ", s);
    }
    for (size_t s = 0; s < nseq; s++) {
        if (!rc) {
            memcpy(seqs[s].witness, all[s].witness, 32);
            memcpy(seqs[s].argmax, all[s].argmax, 32);
            seqs[s].generated = all[s].generated;
            all[s].generated = NULL;
        }
        cis2_seq_free(&all[s]);
        cis2_seq_free(&all[nseq + s]);
    }
    free(all);
    return rc;
}

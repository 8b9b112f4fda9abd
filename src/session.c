/*
 * session.c - decoding: sessions of sequences that join and leave a
 * running batch (include/cis2.h section 6) and cis2_generate on top of
 * them (section 5).  Spec §3.4 (decode protocol), §3.5 (the KV cache is
 * memoization), §11.2 (argmax), §12.1-§12.2 (witness chain, argmax
 * digest), §12.4 (the double run); docs/sampling.md for sampled and
 * stopped runs.
 *
 * One step is one call of the forward pass (model.h) over rows of every
 * running sequence: a sequence still prefilling contributes the next chunk
 * of its prompt (positions in order, its earlier ones already cached), a
 * decoding one the row of its last token.  Rows are independent and every
 * row is the single-sequence arithmetic, so a sequence's bits never depend
 * on what else runs, how its prompt was chunked, or when it joined.
 * These steps are planned here, not by the prefill planner that scoring
 * and verification share (prefill.c, whose top says why).
 * A step computes on the execution context its entry passes down
 * (kernels.h): cis2_session_step and cis2_generate take the engine's pool
 * and kernel at entry (engine.h, cis2_engine_ctx).
 *
 * With speculation on (cis2_engine_set_speculate or a caller's drafter,
 * cis2_engine_set_drafter; speculate.h, docs/speculate.md) a decoding
 * sequence also feeds up to K drafted tokens
 * after its last one; each of those rows' logits decides the next step as
 * plain decoding would, the decided tokens are kept up to and including
 * the first that differs from its draft, and each kept step goes through
 * the witness, logprobs, stop rules and callback in order.  Rows past the
 * kept text leave KV entries that are rewritten before any row reads them.
 * How many drafts a sequence asks for is time only: K after a step that
 * kept every draft, 2j + 1 after one that kept j, and plain steps after
 * steps that kept none (the back-off); no bit depends on it.
 *
 * Each sequence has its own witness chain (§12.1, witness.h) and argmax
 * digest (§12.2).  Without stop rules exactly max_tokens tokens are made
 * and EOS is not special (§3.4).
 */
#include "session.h"
#include "digest.h"
#include "draft.h"
#include "sample.h"
#include "speculate.h"
#include "kernels.h"
#include "pmath.h"
#include "tokenizer.h"
#include "witness.h"

#include <stdlib.h>
#include <string.h>

enum { S_QUEUED, S_RUNNING, S_DONE };

typedef struct sseq {
    uint64_t id, index;
    void *user;
    int state, quiet, traced;
    uint32_t *prompt;          /* n_prompt ids */
    size_t n_prompt;
    char *prompt_bytes;        /* NULL: ids that do not round-trip (recorded as ids: docs/receipts.md
                                * "Prompts given as ids") */
    size_t prompt_len;
    cis2_rule rule;
    unsigned top_n;
    int want_lp;
    /* running state */
    cis2_kv kv;
    cis2_sha w;
    int w_open;
    size_t prefilled;          /* prompt positions in the cache */
    uint32_t *gen;             /* rule.max_tokens capacity */
    size_t n_gen;
    float *lp;                 /* per step, when wanted */
    uint32_t *top_ids;
    float *top_lp;
    int finish;
    uint8_t witness[32], argmax[32];
    float *logits;             /* this step's row in the session buffer, or NULL */
    uint32_t pick;             /* this step's token */
    int pick_rc;               /* CIS2_E_NOMEM from the sampler */
    size_t kv_bytes;
    cis2_sample_ws sws;        /* the sampler's scratch */
    cis2_stop_state stop;      /* §S5.3 step 3's running bytes */
    uint64_t cut;              /* stop-string: where the completion text ends */
    /* speculation (speculate.h): this step's drafted tokens, the rows after
     * the last known token's, and the steps decided from the rows' logits */
    uint32_t draft[CIS2_SPEC_K_MAX];
    size_t ndraft;
    uint32_t dec[CIS2_SPEC_K_MAX + 1];
    size_t ndec;
    unsigned misses, rest;     /* drafting steps in a row that kept no draft; plain steps still to run */
    size_t kcap;               /* at most this many drafts next time (0: K): 2 kept + 1 after a wrong draft */
    cis2_dstate ds;            /* a draft model's state for this sequence (draft.h), when one drafts */
    /* a model with recurrent state (docs/models.md §M10.4): the state as
     * it stood before this step's rows (taken when it drafts), and after
     * drafts were rejected the position the next step feeds from again */
    float *snap;
    size_t snap_pos, rewind_pos;
    int rewound;
} sseq;

struct cis2_session {
    cis2_engine *e;
    cis2_session_opts o;
    cis2_session_internal in;
    sseq **seqs;               /* every sequence not yet taken, in add order */
    size_t n, cap;
    uint64_t next_id;
    size_t kv_used;
    cis2_ws ws;
    cis2_row *rows;
    size_t rows_cap;
    float *logits;
    size_t logits_cap;         /* rows */
    sseq **picks;              /* sequences with a logits row this step */
    size_t picks_cap;
    uint64_t steps;            /* forward passes run */
};

/* ------------------------------------------------------------- rules */

void cis2_rule_clear(cis2_rule *r)
{
    free(r->stop_ids);
    for (size_t i = 0; i < r->n_stop_str; i++) free(r->stop_str[i]);
    free(r->stop_str);
    free(r->stop_len);
    free(r->params_block);
    memset(r, 0, sizeof *r);
}

void cis2_rule_stops(const cis2_rule *r, cis2_stop_rule *out)
{
    *out = (cis2_stop_rule){.eos = r->eos ? r->eos_ids : NULL, .n_eos = r->n_eos, .ids = r->stop_ids,
                            .n_ids = r->n_stop_ids, .strings = r->stop_str, .lens = r->stop_len,
                            .n_strings = r->n_stop_str, .max_tokens = r->max_tokens};
}

int cis2_rule_copy(cis2_rule *dst, const cis2_rule *src, cis2_error *err)
{
    *dst = *src;
    dst->stop_ids = NULL;
    dst->stop_str = NULL;
    dst->stop_len = NULL;
    dst->params_block = NULL;
    dst->n_stop_ids = dst->n_stop_str = 0;
    if (src->params_block && !(dst->params_block = strdup(src->params_block))) goto oom;
    if (src->n_stop_ids) {
        if (!(dst->stop_ids = malloc(src->n_stop_ids * sizeof(uint32_t)))) goto oom;
        memcpy(dst->stop_ids, src->stop_ids, src->n_stop_ids * sizeof(uint32_t));
        dst->n_stop_ids = src->n_stop_ids;
    }
    if (src->n_stop_str) {
        dst->stop_str = calloc(src->n_stop_str, sizeof(char *));
        dst->stop_len = calloc(src->n_stop_str, sizeof(size_t));
        if (!dst->stop_str || !dst->stop_len) goto oom;
        for (size_t i = 0; i < src->n_stop_str; i++) {
            if (!(dst->stop_str[i] = malloc(src->stop_len[i] + 1))) goto oom;
            memcpy(dst->stop_str[i], src->stop_str[i], src->stop_len[i] + 1);
            dst->stop_len[i] = src->stop_len[i];
            dst->n_stop_str = i + 1;
        }
    }
    return CIS2_OK;
oom:
    cis2_rule_clear(dst);
    return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
}

#define STOP_IDS_MAX 64
#define STOP_STRINGS_MAX 16
#define STOP_STRING_BYTES 256

/* Validates a request's sampling and stop rule into r (docs/sampling.md
 * §S2.2, §S5.1); a run with T > 0 or a stop rule is an extension run
 * (§S7.1), whose parameter block is hashed into its witness (§S7.6). */
static int rule_from_request(const cis2_engine *e, const cis2_request *q, cis2_rule *r, cis2_error *err)
{
    memset(r, 0, sizeof *r);
    r->max_tokens = q->max_tokens;
    if (q->max_tokens > UINT32_MAX) return cis2_fail(err, CIS2_E_USAGE, "max_tokens %zu does not fit u32", q->max_tokens);
    r->samp = q->sampling ? *q->sampling : (cis2_sampling)CIS2_SAMPLING_GREEDY; /* NULL: greedy (§S2.1) */
    /* docs/sampling.md §S2.2: top_p 0 (any zero, and every subnormal) is
     * refused, never repaired to "off" (1.0) */
    int rc = cis2_sampling_check(&r->samp, e->m.vocab, err);
    if (rc) return rc;
    const cis2_stop *st = q->stop;
    if (st) {
        if (st->eos) {
            const cis2_model_info *mi = &e->info;
            if (mi->eos_malformed)
                return cis2_fail(err, CIS2_E_FORMAT, "stop at eos: config.json's eos_token_id is not an id or a list of ids");
            if (mi->n_eos == 0)
                return cis2_fail(err, CIS2_E_USAGE, "stop at eos: config.json has no eos_token_id");
            r->eos = 1;
            r->n_eos = mi->n_eos;
            memcpy(r->eos_ids, mi->eos_ids, mi->n_eos * sizeof(uint32_t));
        }
        if (st->n_ids > STOP_IDS_MAX) return cis2_fail(err, CIS2_E_USAGE, "more than %d stop ids", STOP_IDS_MAX);
        if (st->n_strings > STOP_STRINGS_MAX)
            return cis2_fail(err, CIS2_E_USAGE, "more than %d stop strings", STOP_STRINGS_MAX);
        if (st->n_strings && !e->tok)
            return cis2_fail(err, CIS2_E_USAGE, "stop strings need the model's tokenizer (%s)", e->tok_err.msg);
        for (size_t i = 0; i < st->n_strings; i++)
            if (st->string_lens[i] < 1 || st->string_lens[i] > STOP_STRING_BYTES)
                return cis2_fail(err, CIS2_E_USAGE, "stop string %zu: %zu bytes (1..%d)", i, st->string_lens[i],
                                 STOP_STRING_BYTES);
        cis2_rule tmp = {.n_stop_ids = st->n_ids, .n_stop_str = st->n_strings};
        tmp.stop_ids = (uint32_t *)st->ids;
        tmp.stop_str = (char **)st->strings;
        tmp.stop_len = (size_t *)st->string_lens;
        cis2_rule copy;
        if ((rc = cis2_rule_copy(&copy, &tmp, err))) return rc;
        r->stop_ids = copy.stop_ids;
        r->n_stop_ids = copy.n_stop_ids;
        r->stop_str = copy.stop_str;
        r->stop_len = copy.stop_len;
        r->n_stop_str = copy.n_stop_str;
    }
    uint32_t tb;
    memcpy(&tb, &r->samp.temperature, 4);
    r->extension = tb != 0 || r->eos || r->n_stop_ids || r->n_stop_str; /* §S7.1 */
    if (r->extension) {
        cis2_stop_rule sr;
        cis2_rule_stops(r, &sr);
        if (!(r->params_block = cis2_params_block(&r->samp, &sr))) { cis2_rule_clear(r); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
        cis2_sha256(r->params_block, strlen(r->params_block), r->params_digest); /* §S7.5 */
    }
    return CIS2_OK;
}

/* ----------------------------------------------------------- sequences */

static void seq_free(sseq *q)
{
    if (!q) return;
    free(q->prompt);
    free(q->prompt_bytes);
    cis2_rule_clear(&q->rule);
    cis2_kv_free(&q->kv);
    free(q->snap);
    cis2_dstate_free(&q->ds);
    if (q->w_open) {
        uint8_t junk[32];
        cis2_sha_final(&q->w, junk);
    }
    free(q->gen);
    free(q->lp);
    free(q->top_ids);
    free(q->top_lp);
    cis2_sample_ws_free(&q->sws);
    cis2_stop_state_free(&q->stop);
    free(q);
}

/* Admission: KV cache for the whole run (sized from it, not the maximum)
 * and the witness seeded with §12.1 items 1-6. */
static int seq_start(cis2_session *s, sseq *q, cis2_error *err)
{
    const cis2_model *m = &s->e->m;
    int rc = cis2_kv_init(&q->kv, m, q->n_prompt + q->rule.max_tokens, err);
    if (rc) return rc;
    if (cis2_witness_begin(&q->w, m, q->prompt, q->n_prompt, q->rule.extension ? q->rule.params_digest : NULL))
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    q->w_open = 1;
    q->kv_bytes = cis2_kv_bytes(m, q->kv.cap);
    s->kv_used += q->kv_bytes;
    q->state = S_RUNNING;
    return CIS2_OK;
}

/* A sequence ends: digests finalized, its cache released. */
static int seq_finish(cis2_session *s, sseq *q, int reason, cis2_error *err)
{
    q->finish = reason;
    q->state = S_DONE;
    if (q->w_open) {
        cis2_sha_final(&q->w, q->witness);
        q->w_open = 0;
    }
    if (cis2_argmax_digest(q->prompt, q->n_prompt, q->gen, q->n_gen, q->argmax)) /* §12.2 */
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    cis2_kv_free(&q->kv);
    free(q->snap);
    q->snap = NULL;
    cis2_dstate_free(&q->ds);
    s->kv_used -= q->kv_bytes;
    q->kv_bytes = 0;
    return CIS2_OK;
}

/* ------------------------------------------------------------ session */

int cis2_session_open_internal(cis2_session **out, cis2_engine *e, const cis2_session_opts *opts,
                               const cis2_session_internal *in, cis2_error *err)
{
    *out = NULL;
    cis2_session *s = calloc(1, sizeof *s);
    if (!s) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    s->e = e;
    if (opts) s->o = *opts;
    if (!s->o.max_batch) s->o.max_batch = 16;
    if (!s->o.prefill_chunk) s->o.prefill_chunk = 256;
    if (in) s->in = *in;
    if (!s->in.kv_budget) s->in.kv_budget = s->o.kv_budget;
    if (!s->in.kv_budget) s->in.kv_budget = (size_t)1 << 30;
    s->next_id = 1;
    *out = s;
    return CIS2_OK;
}

int cis2_session_open(cis2_session **out, cis2_engine *e, const cis2_session_opts *opts, cis2_error *err)
{
    return cis2_session_open_internal(out, e, opts, NULL, err);
}

void cis2_session_close(cis2_session *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) seq_free(s->seqs[i]);
    free(s->seqs);
    cis2_ws_free(&s->ws);
    free(s->rows);
    free(s->logits);
    free(s->picks);
    free(s);
}

static sseq *find(const cis2_session *s, uint64_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->seqs[i]->id == id) return s->seqs[i];
    return NULL;
}

void cis2_session_stats_get(const cis2_session *s, cis2_session_stats *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < s->n; i++) {
        const sseq *q = s->seqs[i];
        if (q->state == S_QUEUED) out->queued++;
        else if (q->state == S_DONE) out->finished++;
        else {
            out->running++;
            out->prefill_rows += q->n_prompt - q->prefilled;
        }
    }
    out->kv_bytes = s->kv_used;
    out->steps = s->steps;
}

size_t cis2_session_pending(const cis2_session *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) k += s->seqs[i]->state != S_DONE;
    return k;
}

/* The prompt bytes a receipt records for an ids prompt: the bytes the ids
 * stand for, if encoding them gives the same ids back (so a verifier can
 * re-tokenize them), else none, and the receipt records the ids
 * (docs/receipts.md "Prompts given as ids"). */
static void bytes_for_ids(const cis2_engine *e, sseq *q)
{
    if (cis2_engine_prompt_bytes(e, q->prompt, q->n_prompt, &q->prompt_bytes, &q->prompt_len, NULL)) q->prompt_len = 0;
}

int cis2_session_add_internal(cis2_session *s, const cis2_request *req, uint64_t index, int quiet, int traced,
                              uint64_t *id, cis2_error *err)
{
    const cis2_engine *e = s->e;
    const cis2_model *m = &e->m;
    if (id) *id = 0;
    if (!req) return cis2_fail(err, CIS2_E_USAGE, "no request");
    if (req->max_tokens == 0) return cis2_fail(err, CIS2_E_USAGE, "max_tokens must be at least 1");
    if (req->top_logprobs > CIS2_MAX_TOP_LOGPROBS)
        return cis2_fail(err, CIS2_E_USAGE, "top_logprobs %u is more than %d", req->top_logprobs,
                         CIS2_MAX_TOP_LOGPROBS);
    if (!!req->text == !!req->ids) return cis2_fail(err, CIS2_E_USAGE, "give the prompt as text or as ids");
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        sseq **ns = realloc(s->seqs, cap * sizeof *ns);
        if (!ns) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        s->seqs = ns;
        s->cap = cap;
    }
    sseq *q = calloc(1, sizeof *q);
    if (!q) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    int rc;
    size_t maxpos = (size_t)m->cfg.max_position_embeddings;
    if ((rc = rule_from_request(e, req, &q->rule, err))) goto fail;
    if (req->text) {
        if (req->text_len == 0) { rc = cis2_fail(err, CIS2_E_USAGE, "empty prompt"); goto fail; }
        /* a prompt too long for the context is refused once its ids pass the room left, before the
         * rest of it is tokenized (a 100 MB line: at once, not after minutes and gigabytes) */
        size_t room = maxpos > req->max_tokens ? maxpos - req->max_tokens : 0;
        cis2_error te = {0};
        /* with the post-processor's special tokens, as transformers' encode(text) (engine.h) */
        if ((rc = cis2_engine_encode_prompt(e, req->text, req->text_len, room, &q->prompt, &q->n_prompt, &te))) {
            if (rc == CIS2_E_USAGE && e->tok)
                rc = cis2_fail(err, CIS2_E_UNSUPPORTED,
                               "prompt (more than %zu tokens) + max tokens (%zu) exceeds max_position_embeddings (%zu)",
                               room, req->max_tokens, maxpos);
            else
                rc = cis2_fail(err, te.code, "%s", te.msg);
            goto fail;
        }
        if (q->n_prompt == 0) { rc = cis2_fail(err, CIS2_E_USAGE, "the prompt encodes to no tokens"); goto fail; }
        uint32_t *fit = realloc(q->prompt, q->n_prompt * sizeof *q->prompt); /* results keep it: no slack */
        if (fit) q->prompt = fit;
        if (!(q->prompt_bytes = malloc(req->text_len + 1))) goto oom;
        memcpy(q->prompt_bytes, req->text, req->text_len);
        q->prompt_bytes[req->text_len] = 0;
        q->prompt_len = req->text_len;
        for (size_t i = 0; i < q->n_prompt; i++)
            if (q->prompt[i] >= m->vocab) {
                rc = cis2_fail(err, CIS2_E_FORMAT,
                               "the tokenizer gives id %u, outside the model's vocabulary (%zu): tokenizer.json and "
                               "config.json do not belong together", q->prompt[i], m->vocab);
                goto fail;
            }
    } else {
        if (req->n_ids == 0) { rc = cis2_fail(err, CIS2_E_USAGE, "empty prompt"); goto fail; }
        for (size_t i = 0; i < req->n_ids; i++)
            if (req->ids[i] >= m->vocab) {
                rc = cis2_fail(err, CIS2_E_USAGE, "prompt token id %u is outside the vocabulary (%zu)", req->ids[i],
                               m->vocab);
                goto fail;
            }
        if (!(q->prompt = malloc(req->n_ids * sizeof(uint32_t)))) goto oom;
        memcpy(q->prompt, req->ids, req->n_ids * sizeof(uint32_t));
        q->n_prompt = req->n_ids;
        if (e->tok) bytes_for_ids(e, q);
    }
    if (q->n_prompt + req->max_tokens > maxpos) {
        rc = cis2_fail(err, CIS2_E_UNSUPPORTED, "prompt (%zu tokens) + max tokens (%zu) exceeds max_position_embeddings (%zu)",
                       q->n_prompt, req->max_tokens, maxpos);
        goto fail;
    }
    q->top_n = req->top_logprobs;
    q->want_lp = req->logprobs || req->top_logprobs;
    if (!(q->gen = malloc(req->max_tokens * sizeof(uint32_t)))) goto oom;
    if (q->want_lp && !(q->lp = malloc(req->max_tokens * sizeof(float)))) goto oom;
    if (q->top_n && (!(q->top_ids = malloc(req->max_tokens * q->top_n * sizeof(uint32_t))) ||
                     !(q->top_lp = malloc(req->max_tokens * q->top_n * sizeof(float)))))
        goto oom;
    q->user = req->user;
    q->quiet = quiet;
    q->traced = traced;
    q->index = index;
    q->id = s->next_id++;
    q->state = S_QUEUED;
    s->seqs[s->n++] = q;
    if (id) *id = q->id;
    return CIS2_OK;
oom:
    rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
fail:
    seq_free(q);
    return rc;
}

int cis2_session_add(cis2_session *s, const cis2_request *req, uint64_t *id, cis2_error *err)
{
    uint64_t tmp;
    int rc = cis2_session_add_internal(s, req, 0, 0, 0, &tmp, err);
    if (!rc) {
        sseq *q = find(s, tmp);
        q->index = tmp; /* events name the session id */
    }
    if (id) *id = rc ? 0 : tmp;
    return rc;
}

int cis2_session_cancel(cis2_session *s, uint64_t id)
{
    sseq *q = find(s, id);
    if (!q) return CIS2_E_USAGE;
    if (q->state == S_DONE) return CIS2_OK;
    seq_finish(s, q, CIS2_FINISH_CANCELLED, NULL);
    return CIS2_OK;
}

int cis2_session_done(const cis2_session *s, uint64_t id)
{
    const sseq *q = find(s, id);
    return q ? q->state == S_DONE : -1;
}

/* -------------------------------------------------------------- steps */

static int grow(void **p, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < want) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

/* One sequence's choice for this step: the token (§11.2 argmax, or the
 * sampler of docs/sampling.md §S3), its logprobs when asked (§S4), then
 * the witness items 7a, 7b.  Runs across the pool, one sequence per item.
 * A sequence with drafted tokens has a logits row per draft more: row i
 * decides step n_gen + i exactly as plain decoding would (its logits are
 * the single-sequence arithmetic, §3.5; the step's own Philox stream), and
 * the rows after the first decided token that differs from its draft are
 * discarded.  Its witness is then hashed step by step with the stop rules
 * (step_accept), which may end it before the last decided step. */
typedef struct pick_ctx { const cis2_ctx *cx; cis2_session *s; size_t vocab; } pick_ctx;

static int decide(const pick_ctx *c, sseq *q, size_t i)
{
    const float *x = q->logits + i * c->vocab;
    size_t step = q->n_gen + i;
    uint32_t tok;
    int rc = cis2_sample_step(c->cx, x, c->vocab, &q->rule.samp, (uint32_t)step, &q->sws, &tok, NULL);
    if (!rc && q->want_lp) {
        size_t nt;
        rc = cis2_logprobs(c->cx, x, c->vocab, tok, q->top_n, &q->sws, &q->lp[step],
                           q->top_ids ? q->top_ids + step * q->top_n : NULL,
                           q->top_lp ? q->top_lp + step * q->top_n : NULL, &nt);
        for (size_t k = nt; k < q->top_n; k++) { /* fewer candidates than asked: marked by id 2^32-1 */
            q->top_ids[step * q->top_n + k] = UINT32_MAX;
            q->top_lp[step * q->top_n + k] = 0.0f;
        }
    }
    q->dec[i] = tok;
    return rc;
}

static void pick_task(void *vctx, size_t i)
{
    pick_ctx *c = vctx;
    sseq *q = c->s->picks[i];
    q->ndec = 0;
    for (size_t r = 0; r <= q->ndraft; r++) {
        if ((q->pick_rc = decide(c, q, r))) return;
        q->ndec = r + 1;
        if (r < q->ndraft && q->dec[r] != q->draft[r]) break; /* the first disagreement: its token is kept */
    }
    q->pick = q->dec[0];
    if (!q->ndraft) cis2_witness_step(&q->w, q->logits, c->vocab, q->pick); /* §12.1 item 7 */
}

/* §S5.3 after token `step` was appended. */
static int stop_reason(const cis2_session *s, sseq *q, size_t step)
{
    cis2_stop_rule sr;
    cis2_rule_stops(&q->rule, &sr);
    size_t len = 0;
    const char *b = sr.n_strings ? cis2_tokenizer_token_bytes(s->e->tok, q->pick, &len) : NULL;
    int why = cis2_stop_after(&sr, &q->stop, step, q->pick, (const uint8_t *)(b ? b : ""), b ? len : 0);
    if (why == CIS2_FINISH_STOP_STRING) q->cut = q->stop.cut;
    return why;
}

/* This step's drafts of q, at most k (speculate.h): prompt lookup, a
 * draft model (draft.h, its passes on cx) or the caller's drafter
 * (cis2_engine_set_drafter), the answer cut to k and ended at the first id
 * outside the vocabulary (it must never index the embedding).  Drafts only
 * cost time if wrong: the rows decide. */
static size_t draft(const cis2_ctx *cx, const cis2_engine *e, sseq *q, size_t k)
{
    if (e->spec_kind == CIS2_SPEC_LOOKUP) return cis2_spec_lookup(q->prompt, q->n_prompt, q->gen, q->n_gen, k, q->draft);
    size_t n = e->spec_kind == CIS2_SPEC_DRAFT
                   ? cis2_dmodel_draft(cx, e->dm, &q->ds, q->prompt, q->n_prompt, q->gen, q->n_gen,
                                       q->n_prompt + q->rule.max_tokens, k, q->draft)
                   : e->draft_fn(e->draft_ctx, q->prompt, q->n_prompt, q->gen, q->n_gen, k, q->draft);
    if (n > k) n = k;
    for (size_t i = 0; i < n; i++)
        if (q->draft[i] >= e->m.vocab) return i;
    return n;
}

static float wants_logits;

/* A model with recurrent state (docs/models.md §M10.4; docs/speculate.md
 * "Models with recurrent state"): the state as this step's rows find it,
 * copied before drafted rows advance it, so that rejected drafts can be
 * undone (a state, unlike keys and values, holds every position it has
 * absorbed).  The copy's memory is the sequence's, made once and counted
 * in the session's KV bytes.  Nonzero: out of memory. */
static int snapshot(cis2_session *s, sseq *q)
{
    const cis2_model *m = &s->e->m;
    size_t bytes = m->state_floats * sizeof(float);
    if (!q->snap) {
        if (!(q->snap = malloc(bytes))) return -1;
        q->kv_bytes += bytes;
        s->kv_used += bytes;
    }
    memcpy(q->snap, q->kv.state, bytes);
    q->snap_pos = q->kv.state_pos;
    return 0;
}

int cis2_session_step_framed(cis2_session *s, const cis2_ctx *cx, size_t *running, cis2_error *err)
{
    const cis2_model *m = &s->e->m;
    const size_t V = m->vocab;
    int rc = CIS2_OK;
    /* admit queued sequences while there is room (always at least one) */
    size_t nrun = 0;
    for (size_t i = 0; i < s->n; i++) nrun += s->seqs[i]->state == S_RUNNING;
    for (size_t i = 0; i < s->n && nrun < s->o.max_batch; i++) {
        sseq *q = s->seqs[i];
        if (q->state != S_QUEUED) continue;
        size_t pos = q->n_prompt + q->rule.max_tokens, snap = m->state_floats * sizeof(float);
        size_t need = pos < q->n_prompt ? SIZE_MAX : cis2_kv_bytes(m, pos);
        if (s->e->spec_kind != CIS2_SPEC_OFF && need != SIZE_MAX) /* with speculation, a state's copy (snapshot) */
            need = need <= SIZE_MAX - snap ? need + snap : SIZE_MAX;
        if (nrun > 0 && !cis2_kv_fits(s->kv_used, need, s->in.kv_budget)) break;
        if ((rc = seq_start(s, q, err))) return rc;
        nrun++;
    }
    /* rows: the next prompt chunk of prefilling sequences, one row per decoding
     * one; picks: the sequences whose last row this step yields logits, in
     * row order */
    size_t nrows = 0, nlog = 0, npick = 0, budget = s->o.prefill_chunk;
    size_t spec_k = s->e->spec_kind != CIS2_SPEC_OFF && !s->in.recompute ? s->e->spec_k : 0;
    for (size_t i = 0; i < s->n; i++) {
        sseq *q = s->seqs[i];
        q->logits = NULL;
        q->ndraft = 0;
        if (q->state != S_RUNNING) continue;
        size_t from, to; /* positions [from, to) */
        if (s->in.recompute) {
            from = 0;
            to = q->n_prompt + q->n_gen;
            q->prefilled = q->n_prompt;
        } else if (q->prefilled < q->n_prompt) {
            if (budget == 0) continue;
            size_t k = q->n_prompt - q->prefilled;
            if (k > budget) k = budget;
            budget -= k;
            from = q->prefilled;
            to = from + k;
            q->prefilled = to;
        } else {
            from = q->n_prompt + q->n_gen - 1;
            to = from + 1;
            if (q->rewound) { /* the state put back before rejected drafts: the kept tokens fed again (snapshot) */
                from = q->rewind_pos;
                q->rewound = 0;
            }
            /* drafts: step n_gen + ndraft is at most the last (max_tokens - 1), so
             * every row's position is inside the cache; a traced run has none */
            size_t room = q->rule.max_tokens - 1 - q->n_gen;
            size_t k = spec_k < room ? spec_k : room;
            if (q->kcap && k > q->kcap) k = q->kcap; /* the draft length the last drafts earned */
            if (k && !q->traced && q->rest) q->rest--; /* backing off after wrong drafts (time only) */
            else if (k && !q->traced) q->ndraft = draft(cx, s->e, q, k);
            if (q->ndraft && m->state_floats && snapshot(s, q)) q->ndraft = 0; /* no room for the copy: no drafts */
        }
        if (grow((void **)&s->rows, &s->rows_cap, nrows + (to - from) + q->ndraft, sizeof *s->rows))
            return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        for (size_t p = from; p < to; p++) {
            cis2_row *r = &s->rows[nrows++];
            r->kv = &q->kv;
            r->pos = p; /* §3.4: positions 0.. in generation order */
            r->token = p < q->n_prompt ? q->prompt[p] : q->gen[p - q->n_prompt];
            r->logits = NULL;
            r->step = q->n_gen;
            r->traced = q->traced;
        }
        if (to == q->n_prompt + q->n_gen && q->prefilled == q->n_prompt) { /* the step's last known token */
            if (grow((void **)&s->picks, &s->picks_cap, npick + 1, sizeof *s->picks))
                return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            s->picks[npick++] = q;
            s->rows[nrows - 1].logits = &wants_logits; /* a mark: the buffer is set below */
            nlog++;
            for (size_t d = 0; d < q->ndraft; d++) { /* drafted tokens, each row's logits decide the next step */
                cis2_row *r = &s->rows[nrows++];
                *r = (cis2_row){.kv = &q->kv, .pos = to + d, .token = q->draft[d], .logits = &wants_logits,
                                .step = q->n_gen + d + 1, .traced = 0};
                nlog++;
            }
        }
    }
    if (running) *running = cis2_session_pending(s);
    if (nrows == 0) return CIS2_OK;
    /* every sequence's logits end to end, so the LM head writes them in place */
    if (nlog > s->logits_cap) {
        free(s->logits);
        s->logits = nlog <= SIZE_MAX / sizeof(float) / V ? malloc(nlog * V * sizeof(float)) : NULL;
        s->logits_cap = s->logits ? nlog : 0;
        if (!s->logits) return cis2_fail(err, CIS2_E_NOMEM, "out of memory for %zu logit rows", nlog);
    }
    for (size_t r = 0, k = 0; r < nrows; r++)
        if (s->rows[r].logits) s->rows[r].logits = s->logits + k++ * V;
    for (size_t i = 0, k = 0; i < npick; i++) { /* a sequence's logits rows are together, in row order */
        s->picks[i]->logits = s->logits + k * V;
        k += 1 + s->picks[i]->ndraft;
    }
    size_t j = npick;
    if ((rc = cis2_forward(cx, m, &s->ws, s->rows, nrows, s->in.trace, s->in.trace_ctx, err))) return rc;
    s->steps++;
    pick_ctx pc = {cx, s, V};
    cis2_parallel_for(cx, j, pick_task, &pc); /* each sequence its own stream */
    for (size_t i = 0; i < j; i++)
        if (s->picks[i]->pick_rc) return cis2_fail(err, CIS2_E_NOMEM, "out of memory in the sampler");
    for (size_t i = 0; i < j; i++) {
        sseq *q = s->picks[i];
        int reason = 0;
        if (q->ndraft) { /* every draft wrong: the next `misses` steps (at most 16) do not draft */
            q->misses = q->ndec > 1 ? 0 : q->misses < 16 ? q->misses + 1 : 16;
            q->rest = q->misses;
            /* the next draft length: K after a step that kept every draft,
             * else twice the drafts kept plus one (1 after a miss) */
            size_t kept = q->ndec - 1;
            q->kcap = kept == q->ndraft ? 0 : 2 * kept + 1;
            if (kept < q->ndraft && q->snap) { /* rejected drafts live in the state: back to before the step */
                memcpy(q->kv.state, q->snap, m->state_floats * sizeof(float));
                q->kv.state_pos = q->snap_pos;
                q->rewind_pos = q->snap_pos;
                q->rewound = 1;
            }
        }
        for (size_t d = 0; d < q->ndec && !reason; d++) { /* each decided step in order, as plain decoding */
            size_t step = q->n_gen;
            const float *x = q->logits + d * V;
            q->pick = q->dec[d];
            if (q->ndraft) cis2_witness_step(&q->w, x, V, q->pick); /* §12.1 item 7 */
            q->gen[q->n_gen++] = q->pick;
            reason = stop_reason(s, q, step);
            if (reason < 0) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            if (s->o.on_token && !q->quiet) {
                cis2_token_event ev = {.seq = q->index, .user = q->user, .step = step, .token = q->pick,
                                       .logits = x, .vocab = V, .finish = reason,
                                       .logprob = q->lp ? q->lp[step] : 0.0f, .n_top = q->top_n,
                                       .top_ids = q->top_ids ? q->top_ids + step * q->top_n : NULL,
                                       .top_logprobs = q->top_lp ? q->top_lp + step * q->top_n : NULL};
                uint64_t pinned = cis2_api_callout_begin();
                int stop = s->o.on_token(s->o.on_token_ctx, &ev);
                cis2_api_callout_end(pinned);
                if (stop && !reason) reason = CIS2_FINISH_CANCELLED;
            }
        }
        if (reason && (rc = seq_finish(s, q, reason, err))) return rc;
    }
    if (running) *running = cis2_session_pending(s);
    return CIS2_OK;
}

int cis2_session_step(cis2_session *s, size_t *running, cis2_error *err)
{
    cis2_frame f;
    int rc = CIS2_OK;
    ENGINE_ENTER(s->e, f, err, rc, out);
    cis2_ctx cx = cis2_engine_ctx(s->e);
    rc = cis2_session_step_framed(s, &cx, running, err);
out:
    ENGINE_LEAVE(f);
    return rc;
}

/* ------------------------------------------------------------ results */

static int seq_result(const cis2_engine *e, sseq *q, cis2_result *r, cis2_error *err)
{
    memset(r, 0, sizeof *r);
    r->prompt = q->prompt_bytes;
    q->prompt_bytes = NULL;
    r->prompt_len = q->prompt_len;
    r->prompt_ids = q->prompt;
    q->prompt = NULL;
    r->n_prompt = q->n_prompt;
    r->tokens = q->gen;
    q->gen = NULL;
    r->n_tokens = q->n_gen;
    r->finish = q->finish;
    memcpy(r->witness, q->witness, 32);
    memcpy(r->argmax_digest, q->argmax, 32);
    r->logprobs = q->lp;
    q->lp = NULL;
    r->n_top = q->top_n;
    r->top_ids = q->top_ids;
    r->top_logprobs = q->top_lp;
    q->top_ids = NULL;
    q->top_lp = NULL;
    if (!(r->priv = calloc(1, sizeof *r->priv))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    r->priv->rule = q->rule;
    memset(&q->rule, 0, sizeof q->rule);
    if (e->tok) { /* docs/sampling.md §S5.4: without a stop token's text, cut at a stop string */
        size_t n = r->n_tokens, blen;
        if (n && (r->finish == CIS2_FINISH_EOS || r->finish == CIS2_FINISH_STOP_ID)) n--;
        char *raw;
        int rc = cis2_engine_bytes(e, r->tokens, n, &raw, &blen, err);
        if (rc) return rc;
        if (r->finish == CIS2_FINISH_STOP_STRING && q->cut < blen) blen = (size_t)q->cut;
        r->text = cis2_utf8_lossy(raw, blen, &r->text_len);
        free(raw);
        if (!r->text) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    return CIS2_OK;
}

void cis2_results_free(cis2_result *res, size_t n)
{
    if (!res) return;
    for (size_t i = 0; i < n; i++) {
        cis2_result *r = &res[i];
        free(r->prompt);
        free(r->prompt_ids);
        free(r->tokens);
        free(r->text);
        free(r->logprobs);
        free(r->top_ids);
        free(r->top_logprobs);
        if (r->priv) cis2_rule_clear(&r->priv->rule);
        free(r->priv);
    }
    free(res);
}

int cis2_session_take(cis2_session *s, uint64_t id, cis2_result **result, cis2_error *err)
{
    *result = NULL;
    size_t i = 0;
    while (i < s->n && s->seqs[i]->id != id) i++;
    if (i == s->n) return cis2_fail(err, CIS2_E_USAGE, "session: no sequence %llu", (unsigned long long)id);
    sseq *q = s->seqs[i];
    if (q->state != S_DONE) return cis2_fail(err, CIS2_E_USAGE, "session: sequence %llu has not finished",
                                             (unsigned long long)id);
    cis2_result *r = calloc(1, sizeof *r);
    if (!r) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    int rc = seq_result(s->e, q, r, err);
    if (rc) { cis2_results_free(r, 1); return rc; }
    memmove(&s->seqs[i], &s->seqs[i + 1], (s->n - i - 1) * sizeof *s->seqs);
    s->n--;
    seq_free(q);
    *result = r;
    return CIS2_OK;
}

const char *cis2_finish_name(int reason)
{
    switch (reason) {
    case CIS2_FINISH_LENGTH: return "length";
    case CIS2_FINISH_EOS: return "eos";
    case CIS2_FINISH_STOP_ID: return "stop-id";
    case CIS2_FINISH_STOP_STRING: return "stop-string";
    case CIS2_FINISH_CANCELLED: return "cancelled";
    default: return "";
    }
}

/* ----------------------------------------------------------- generate */

typedef struct gen_cb { const cis2_gen_opts *o; int cancelled; } gen_cb;

static int gen_on_token(void *ctx, const cis2_token_event *ev)
{
    gen_cb *g = ctx;
    int stop = g->o->on_token(g->o->on_token_ctx, ev);
    if (stop) g->cancelled = 1;
    return stop;
}

static int same_run(const cis2_result *a, const cis2_result *b)
{
    return !memcmp(a->witness, b->witness, 32) && !memcmp(a->argmax_digest, b->argmax_digest, 32) &&
           a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, a->n_tokens * sizeof(uint32_t));
}

/* The first finished sequence of the session, or NULL. */
static sseq *first_done(const cis2_session *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->seqs[i]->state == S_DONE) return s->seqs[i];
    return NULL;
}

/* Every request validated (and its prompt tokenized) before any decoding,
 * so a bad one fails the call before work is spent on the others. */
static int validate_all(cis2_session *s, const cis2_request *reqs, size_t n, cis2_error *err)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t id;
        int rc = cis2_session_add_internal(s, &reqs[i], i, 1, 0, &id, err);
        if (rc) {
            if (n > 1) {
                char msg[sizeof err->msg];
                memcpy(msg, err->msg, sizeof msg);
                err->code = 0;
                rc = cis2_fail(err, rc, "prompt %zu: %s", i, msg);
            }
            return rc;
        }
        cis2_session_cancel(s, id);
        cis2_result *r;
        if ((rc = cis2_session_take(s, id, &r, err))) return rc;
        cis2_results_free(r, 1);
    }
    return CIS2_OK;
}

int cis2_generate(cis2_engine *e, const cis2_request *reqs, size_t n, const cis2_gen_opts *opts, cis2_result **results,
                  cis2_error *err)
{
    *results = NULL;
    cis2_gen_opts dflt = {0};
    const cis2_gen_opts *o = opts ? opts : &dflt;
    if (n == 0) return cis2_fail(err, CIS2_E_USAGE, "no requests");
    if (o->on_trace && n != 1) return cis2_fail(err, CIS2_E_USAGE, "tracing needs a single request");
    int copies = o->twice ? 2 : 1;
    /* include/cis2.h: max_batch above n means all n (no more can run), so
     * it is clamped to n before any arithmetic: batch and 2 * batch below
     * are then at most 4n, which never wraps (n requests already fill n *
     * sizeof(cis2_request) bytes).  Unclamped, 2^63 * 2 wrapped to 0 and
     * the loop below admitted nothing, stepping forever. */
    size_t want = o->max_batch ? o->max_batch : 32;
    if (want > n) want = n;
    size_t batch = want * (size_t)copies;
    gen_cb cb = {o, 0};
    cis2_session_opts so = {.max_batch = batch, .on_token = o->on_token ? gen_on_token : NULL, .on_token_ctx = &cb};
    cis2_session_internal in = {.recompute = o->recompute, .trace = o->on_trace, .trace_ctx = o->on_trace_ctx};
    cis2_session *s = NULL;
    cis2_result *res = calloc(n, sizeof *res), **twin = calloc(n, sizeof *twin);
    unsigned char *have = calloc(n, 1);
    cis2_frame f;
    cis2_ctx cx;
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    cx = cis2_engine_ctx(e);
    if (!res || !twin || !have) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    if ((rc = cis2_session_open_internal(&s, e, &so, &in, err))) goto out;
    if (n > 1 && (rc = validate_all(s, reqs, n, err))) goto out;
    /* Requests join as places free up (at most two batches queued), so
     * memory stays bounded however many there are; each finished
     * sequence's result is taken at once. */
    size_t next = 0, done = 0;
    while (done < n * (size_t)copies && !rc) {
        while (next < n && cis2_session_pending(s) + (size_t)copies <= 2 * batch) {
            for (int c = 0; c < copies && !rc; c++) /* §12.4: the second copy decodes in the same batches, silently */
                rc = cis2_session_add_internal(s, &reqs[next], next, c == 1, c == 0 && o->on_trace, NULL, err);
            if (rc) goto out;
            next++;
        }
        if ((rc = cis2_session_step_framed(s, &cx, NULL, err))) break;
        if (cb.cancelled) { rc = cis2_fail(err, CIS2_E_CANCELLED, "cancelled by the token callback"); break; }
        for (sseq *q; !rc && (q = first_done(s)); done++) {
            size_t i = q->index;
            int second = q->quiet && copies == 2;
            cis2_result *r;
            if ((rc = cis2_session_take(s, q->id, &r, err))) break;
            if (!second) { res[i] = *r; free(r); have[i] = 1; }
            else twin[i] = r;
            if (copies == 2 && have[i] && twin[i]) { /* §12.4: both copies are in */
                if (!same_run(&res[i], twin[i]))
                    rc = cis2_fail(err, CIS2_E_NONDET,
                                   "§12.4 determinism check failed: the two in-process runs of request %zu differ", i);
                cis2_results_free(twin[i], 1);
                twin[i] = NULL;
            }
        }
    }
out:
    ENGINE_LEAVE(f);
    cis2_session_close(s);
    for (size_t i = 0; twin && i < n; i++) cis2_results_free(twin[i], 1);
    free(twin);
    free(have);
    if (rc) {
        cis2_results_free(res, n);
        return rc;
    }
    *results = res;
    return CIS2_OK;
}

/*
 * verify.c - receipts against the engine and against each other
 * (include/cis2.h section 7): cis2_receipt_make, cis2_verify, cis2_check,
 * cis2_compare.  Spec §2.1 (artifact hashes), §3.1 (the prompt's ids are
 * recomputed from its bytes), §6.6/§7.2 (table digests), §11.2, §12.1,
 * §12.2, §12.4.
 *
 * verify trusts nothing in a receipt but its inputs (prompt-hex,
 * gen-toks): hashes come from the engine's files, prompt ids from the
 * tokenizer, outputs from the model.  Two ways to recompute the outputs:
 *
 *   prefill (default): the prompt ++ the claimed tokens go through the
 *     model as teacher-forced prefill rows, in chunks, many receipts per
 *     weight pass.  Every row is the single-sequence arithmetic and the KV
 *     cache is memoization (§3.5), so the logits at position
 *     n_prompt-1+s equal decode step s's logits whenever the claimed
 *     tokens before s are the decode's.  Step s is then checked: its
 *     claimed token must be the §11.2 argmax of those logits.  If every
 *     step checks, the rows were exactly the decode's, so the witness
 *     (§12.1) and argmax digest (§12.2) recomputed from them are the
 *     decode's; at the first step that does not, the receipt is wrong
 *     there, and the true continuation (never computed) differs from the
 *     claimed one, so the token list and both digests are reported as
 *     mismatches with that step named.
 *   decode: the whole greedy decode again (cis2_generate), token by token.
 *
 * Both give the same verdict and exit code on every receipt; §12.4's
 * double run (a property of the run, not of the receipt) is optional
 * (`twice`): a verify is itself an independent recomputation.
 *
 * Memory (docs/inputs.md): a prefill pass holds at most VERIFY_ROWS rows
 * and VERIFY_LOGIT_BYTES of logits; receipts are admitted while their KV
 * caches fit in VERIFY_KV_BUDGET (always at least one).
 */
#include "digest.h"
#include "engine.h"
#include "kernels.h"
#include "pmath.h"
#include "receipt.h"
#include "session.h"
#include "tokenizer.h"
#include "verdict.h"
#include "witness.h"
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERIFY_ROWS 256
#define VERIFY_LOGIT_BYTES ((size_t)64 << 20)
#define VERIFY_KV_BUDGET ((size_t)1 << 30)

/* ------------------------------------------------------------- make */

int cis2_receipt_make(const cis2_engine *e, const cis2_result *res, cis2_receipt **out, cis2_error *err)
{
    *out = NULL;
    if (!res->prompt || res->prompt_len == 0)
        return cis2_fail(err, CIS2_E_USAGE,
                         "receipt: the prompt ids do not round-trip through the tokenizer (decode then encode gives "
                         "other ids), so no prompt bytes reproduce them; give the prompt as text");
    if (res->n_tokens == 0 || res->n_tokens > UINT32_MAX || res->finish == CIS2_FINISH_CANCELLED)
        return cis2_fail(err, CIS2_E_USAGE, "receipt: a cancelled or empty run has no receipt");
    cis2_receipt *r = cis2_receipt_new();
    if (!r) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    const cis2_model *m = &e->m;
    snprintf(r->spec_version, sizeof r->spec_version, "%s", CIS2_SPEC_VERSION);
    snprintf(r->dtype, sizeof r->dtype, "fp32");
    memcpy(r->weights_sha, m->weights_sha, 32);
    memcpy(r->config_sha, m->config_sha, 32);
    memcpy(r->tokenizer_sha, m->tokenizer_sha, 32);
    memcpy(r->table_digest, m->table_digest, 32);
    memcpy(r->inv_freq_digest, m->inv_freq_digest, 32);
    memcpy(r->argmax, res->argmax_digest, 32);
    memcpy(r->witness, res->witness, 32);
    r->gen_toks = (uint32_t)res->n_tokens;
    const cis2_rule *ru = res->priv ? &res->priv->rule : NULL;
    if (ru && ru->extension) { /* docs/sampling.md §S7.2 */
        r->ext = 1;
        r->max_toks = (uint32_t)ru->max_tokens;
        r->samp = ru->samp;
        r->has_eos = ru->eos;
        r->n_stop_eos = ru->eos ? ru->n_eos : 0;
        memcpy(r->stop_eos, ru->eos_ids, r->n_stop_eos * sizeof(uint32_t));
        r->n_stop_ids = ru->n_stop_ids;
        memcpy(r->stop_ids, ru->stop_ids, ru->n_stop_ids * sizeof(uint32_t));
        for (size_t i = 0; i < ru->n_stop_str; i++) {
            if (!(r->stop_str[i] = malloc(ru->stop_len[i] + 1))) { cis2_receipt_free(r); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
            memcpy(r->stop_str[i], ru->stop_str[i], ru->stop_len[i] + 1);
            r->stop_len[i] = ru->stop_len[i];
            r->n_stop_str = i + 1;
        }
        memcpy(r->params_digest, ru->params_digest, 32);
        r->finish = res->finish;
    }
    r->prompt = malloc(res->prompt_len);
    r->prompt_ids = malloc(res->n_prompt * sizeof(uint32_t));
    r->generated = malloc(res->n_tokens * sizeof(uint32_t));
    if (!r->prompt || !r->prompt_ids || !r->generated) {
        cis2_receipt_free(r);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    memcpy(r->prompt, res->prompt, res->prompt_len);
    r->prompt_len = res->prompt_len;
    memcpy(r->prompt_ids, res->prompt_ids, res->n_prompt * sizeof(uint32_t));
    r->n_prompt = res->n_prompt;
    memcpy(r->generated, res->tokens, res->n_tokens * sizeof(uint32_t));
    *out = r;
    return CIS2_OK;
}

/* ------------------------------------------------------------ fields */

static int ids_equal(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static char *csv(const uint32_t *ids, size_t n)
{
    char *s = malloc(n * 11 + 1), *p = s;
    if (!s) return NULL;
    *p = 0;
    for (size_t i = 0; i < n; i++) p += sprintf(p, i ? ",%u" : "%u", ids[i]);
    return s;
}

/* Each returns 1 on a mismatch. */
static int f_digest(cis2_verdict *v, const char *key, const uint8_t want[32], const uint8_t got[32])
{
    if (!memcmp(want, got, 32)) { cis2_vd_field(v, key, CIS2_FIELD_OK, "ok"); return 0; }
    char a[65], b[65];
    cis2_hex(want, 32, a);
    cis2_hex(got, 32, b);
    cis2_vd_field(v, key, CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", a, b);
    return 1;
}

static int f_ids(cis2_verdict *v, const char *key, const uint32_t *want, size_t nw, const uint32_t *got, size_t ng)
{
    if (ids_equal(want, nw, got, ng)) { cis2_vd_field(v, key, CIS2_FIELD_OK, "ok"); return 0; }
    char *a = csv(want, nw), *b = csv(got, ng);
    cis2_vd_field(v, key, CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", a ? a : "?", b ? b : "?");
    free(a);
    free(b);
    return 1;
}

static void add_name(char *list, size_t cap, const char *key)
{
    size_t l = strlen(list);
    snprintf(list + l, cap - l, "%s%s", l ? " " : "", key);
}

/* The receipt's spec version and dtype must be what this build runs: if
 * not, the verdict is UNSUPPORTED (returns 1); else records spec-version ok. */
static int unsupported(cis2_verdict *v, const cis2_receipt *r)
{
    int bad_v = strcmp(r->spec_version, CIS2_SPEC_VERSION) != 0, bad_d = strcmp(r->dtype, "fp32") != 0;
    if (bad_v) cis2_vd_field(v, "spec-version", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", r->spec_version,
                             CIS2_SPEC_VERSION);
    else cis2_vd_field(v, "spec-version", CIS2_FIELD_OK, "ok");
    if (!bad_v && !bad_d) return 0;
    if (bad_d) cis2_vd_field(v, "dtype", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=fp32", r->dtype);
    else cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                "(this build runs CIS-2 v%s fp32 only)", CIS2_SPEC_VERSION);
    return 1;
}

static void malformed(cis2_verdict *v, int code, const char *msg)
{
    cis2_vd_set(v, CIS2_VERDICT_MALFORMED, code, "MALFORMED", "(%s)", msg);
}

/* ------------------------------------------------------------ verify */

typedef struct vjob {
    const cis2_receipt *r;
    cis2_verdict *v;
    size_t index;              /* in the cis2_verify call */
    int skip;                  /* the verdict is final already */
    uint32_t *ids;             /* the prompt's recomputed ids */
    size_t nids;
    size_t oov_step;           /* first claimed id >= vocab (gen_toks: none) */
    /* replay outputs */
    uint32_t *decoded;         /* the decode's tokens, gen_toks of them */
    size_t ndec;               /* decided so far */
    long long bad_step;        /* first step whose claim is not the decode's token */
    uint32_t claimed, expected, claimed_bits, expected_bits;
    uint8_t witness[32], argmax[32];
    /* prefill replay state */
    int state;                 /* J_WAIT, J_FORCED, J_DECODE, J_DONE */
    cis2_kv kv;
    cis2_sha w;
    int w_open;
    size_t next_pos, forced_end; /* teacher-forced rows: positions [next_pos, forced_end) */
    size_t kv_bytes;
    float *lg0;                /* this pass's first logits row */
    size_t step0, nlog;        /* its step, and how many */
} vjob;

enum { J_WAIT, J_FORCED, J_DECODE, J_DONE };

static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* The claimed token at position p of prompt ++ generated. */
static uint32_t job_token(const vjob *j, size_t p)
{
    return p < j->nids ? j->ids[p] : j->r->generated[p - j->nids];
}

/* The first step whose claim is not the decode's token: both tokens and
 * their logits' bits at that step. */
static void note_bad(vjob *j, size_t step, const float *lg, size_t V, uint32_t best)
{
    if (j->bad_step >= 0) return;
    uint32_t claim = j->r->generated[step];
    j->bad_step = (long long)step;
    j->claimed = claim;
    j->expected = best;
    j->claimed_bits = claim < V ? bits(lg[claim]) : 0;
    j->expected_bits = bits(lg[best]);
}

/* One decided step of a receipt: the decode's token is the §11.2 argmax
 * of the step's logits, and the witness gets the step. */
static void decide(vjob *j, const float *lg, size_t V)
{
    size_t step = j->ndec;
    uint32_t best = (uint32_t)argmax(lg, V); /* §11.2 */
    if (best != j->r->generated[step]) note_bad(j, step, lg, V, best);
    cis2_witness_step(&j->w, lg, V, best);   /* §12.1 item 7 */
    j->decoded[j->ndec++] = best;
}

/* This pass's logits rows of one receipt, in step order.  While the claims
 * hold, each row is the decode's (teacher forcing is exact); after the
 * first that does not, the rest of this pass's rows were fed a wrong token
 * and are dropped: the receipt continues as a decode from the true token. */
typedef struct check_ctx { vjob **act; size_t V; } check_ctx;

static void check_task(void *vctx, size_t i)
{
    check_ctx *c = vctx;
    vjob *j = c->act[i];
    for (size_t k = 0; k < j->nlog; k++) {
        decide(j, j->lg0 + k * c->V, c->V);
        if (j->bad_step >= 0 && j->state == J_FORCED) { j->state = J_DECODE; break; }
    }
}

static void job_stop(vjob *j, size_t *kv_used)
{
    if (j->w_open) {
        cis2_sha_final(&j->w, j->witness);
        j->w_open = 0;
    }
    cis2_kv_free(&j->kv);
    *kv_used -= j->kv_bytes;
    j->kv_bytes = 0;
    j->state = J_DONE;
}

static int job_start(const cis2_model *m, vjob *j, size_t *kv_used, cis2_error *err)
{
    int rc = cis2_kv_init(&j->kv, m, j->nids + j->r->gen_toks, err);
    if (rc) return rc;
    if (!(j->decoded = malloc(j->r->gen_toks * sizeof(uint32_t)))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (cis2_witness_begin(&j->w, m, j->ids, j->nids, NULL)) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    j->w_open = 1;
    j->bad_step = -1;
    j->ndec = 0;
    j->next_pos = 0;
    /* positions 0 .. nids+gen-2 (the last claimed token is never an input);
     * a claimed id outside the vocabulary is never fed: that step fails */
    j->forced_end = j->nids + j->r->gen_toks - 1;
    if (j->nids + j->oov_step < j->forced_end) j->forced_end = j->nids + j->oov_step;
    j->kv_bytes = 2 * m->n_layers * j->kv.cap * m->kv_dim * sizeof(float);
    *kv_used += j->kv_bytes;
    j->state = J_FORCED;
    return CIS2_OK;
}

static size_t kv_need(const cis2_model *m, const vjob *j)
{
    return 2 * m->n_layers * ((j->nids + j->r->gen_toks + 15) / 16 * 16) * m->kv_dim * sizeof(float);
}

/* Prefill replay of every job (see the top of the file), decodes after a
 * bad step included, VERIFY_ROWS rows per weight pass shared by all. */
static int replay_prefill(cis2_engine *e, vjob *jobs, size_t n, const cis2_verify_opts *o, cis2_error *err)
{
    const cis2_model *m = &e->m;
    const size_t V = m->vocab;
    size_t max_log = VERIFY_LOGIT_BYTES / (V * sizeof(float));
    if (max_log < 16) max_log = 16;
    if (max_log > VERIFY_ROWS) max_log = VERIFY_ROWS;
    cis2_row *rows = malloc(VERIFY_ROWS * sizeof *rows);
    float *logits = malloc(max_log * V * sizeof(float));
    vjob **act = malloc((n ? n : 1) * sizeof *act);
    cis2_ws ws = {0};
    size_t kv_used = 0, running = 0;
    int rc = CIS2_OK;
    if (!rows || !logits || !act) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) jobs[i].state = jobs[i].skip ? J_DONE : J_WAIT;
    for (;;) {
        for (size_t i = 0; i < n; i++) { /* admit while the KV caches fit (always one) */
            vjob *j = &jobs[i];
            if (j->state != J_WAIT) continue;
            if (running && kv_used + kv_need(m, j) > VERIFY_KV_BUDGET) break;
            if ((rc = job_start(m, j, &kv_used, err))) goto out;
            running++;
        }
        size_t nact = 0, nrows = 0, nlog = 0;
        for (size_t i = 0; i < n && nrows < VERIFY_ROWS && nlog < max_log; i++) {
            vjob *j = &jobs[i];
            if (j->state != J_FORCED && j->state != J_DECODE) continue;
            j->nlog = 0;
            j->lg0 = NULL;
            size_t first = nrows;
            if (j->state == J_DECODE) { /* one row: the last decided token */
                cis2_row *r = &rows[nrows++];
                *r = (cis2_row){.kv = &j->kv, .pos = j->nids + j->ndec - 1, .token = j->decoded[j->ndec - 1]};
                r->logits = j->lg0 = logits + nlog * V;
                j->step0 = j->ndec;
                nlog++;
                j->nlog = 1;
            }
            while (j->state == J_FORCED && j->next_pos < j->forced_end && nrows < VERIFY_ROWS) {
                size_t p = j->next_pos;
                int wants = p + 1 >= j->nids; /* the logits of every step: positions nids-1 .. */
                if (wants && nlog == max_log) break;
                cis2_row *r = &rows[nrows++];
                *r = (cis2_row){.kv = &j->kv, .pos = p, .token = job_token(j, p)};
                if (wants) {
                    r->logits = logits + nlog * V;
                    if (!j->lg0) { j->lg0 = r->logits; j->step0 = p + 1 - j->nids; }
                    nlog++;
                    j->nlog++;
                }
                j->next_pos++;
            }
            if (nrows > first) act[nact++] = j;
        }
        if (nrows == 0) {
            int left = 0;
            for (size_t i = 0; i < n; i++) left |= jobs[i].state == J_WAIT || jobs[i].state == J_FORCED;
            if (!left) break;
            rc = cis2_fail(err, CIS2_E_INTERNAL, "verify: no progress");
            goto out;
        }
        if ((rc = cis2_forward(m, &ws, rows, nrows, NULL, NULL, err))) goto out;
        check_ctx cc = {act, V};
        cis2_parallel_for(nact, check_task, &cc); /* each receipt its own stream */
        for (size_t i = 0; i < nact; i++) {
            vjob *j = act[i];
            if (o->on_step) { /* the caller's code, in step order per receipt */
                size_t k0 = j->step0, k1 = j->ndec;
                for (size_t k = k0; k < k1; k++) {
                    cis2_token_event ev = {.seq = j->index, .step = k, .token = j->r->generated[k],
                                           .logits = j->lg0 + (k - k0) * V, .vocab = V};
                    uint64_t pinned = cis2_api_callout_begin();
                    o->on_step(o->on_step_ctx, &ev);
                    cis2_api_callout_end(pinned);
                }
            }
            if (j->ndec == j->r->gen_toks) { job_stop(j, &kv_used); running--; }
            else if (j->state == J_FORCED && j->next_pos == j->forced_end && j->ndec == j->forced_end + 1 - j->nids) {
                /* every fed row was decided and the next claim is not an input: go on as a decode */
                j->state = J_DECODE;
            }
        }
    }
    for (size_t i = 0; i < n; i++) { /* §12.2 over prompt ++ the decode's ids */
        vjob *j = &jobs[i];
        if (!j->skip && cis2_argmax_digest(j->ids, j->nids, j->decoded, j->ndec, j->argmax)) {
            rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            goto out;
        }
    }
out:
    for (size_t i = 0; i < n; i++)
        if (jobs[i].state == J_FORCED || jobs[i].state == J_DECODE) job_stop(&jobs[i], &kv_used);
    cis2_ws_free(&ws);
    free(rows);
    free(logits);
    free(act);
    return rc;
}

/* Decode replay: the whole greedy decode again (§3.4), every receipt in
 * one cis2_generate; the token callback notes the first bad step. */
typedef struct dec_cb { vjob *jobs; const size_t *which; const cis2_verify_opts *o; } dec_cb;

static int dec_on_token(void *ctx, const cis2_token_event *ev)
{
    dec_cb *c = ctx;
    vjob *j = &c->jobs[c->which[ev->seq]];
    if (ev->token != j->r->generated[ev->step]) note_bad(j, ev->step, ev->logits, ev->vocab, ev->token);
    if (c->o->on_step) {
        cis2_token_event e2 = *ev;
        e2.seq = j->index;
        e2.token = j->r->generated[ev->step];
        c->o->on_step(c->o->on_step_ctx, &e2);
    }
    return 0;
}

static int replay_decode(cis2_engine *e, vjob *jobs, size_t n, const cis2_verify_opts *o, cis2_error *err)
{
    size_t k = 0;
    cis2_request *reqs = calloc(n ? n : 1, sizeof *reqs);
    size_t *which = calloc(n ? n : 1, sizeof *which);
    int rc = CIS2_OK;
    if (!reqs || !which) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].skip) continue;
        reqs[k].ids = jobs[i].ids;
        reqs[k].n_ids = jobs[i].nids;
        reqs[k].max_tokens = jobs[i].r->gen_toks;
        jobs[i].bad_step = -1;
        which[k++] = i;
    }
    if (k) {
        dec_cb cb = {jobs, which, o};
        cis2_gen_opts go = {.twice = o->twice, .on_token = dec_on_token, .on_token_ctx = &cb};
        cis2_result *res;
        if ((rc = cis2_generate(e, reqs, k, &go, &res, err))) goto out;
        for (size_t q = 0; q < k; q++) {
            vjob *j = &jobs[which[q]];
            memcpy(j->witness, res[q].witness, 32);
            memcpy(j->argmax, res[q].argmax_digest, 32);
            j->decoded = res[q].tokens;
            j->ndec = res[q].n_tokens;
            res[q].tokens = NULL;
        }
        cis2_results_free(res, k);
    }
out:
    free(reqs);
    free(which);
    return rc;
}

/* The verdict of one replayed receipt: every field as the decode gives it. */
static void judge(const cis2_engine *e, vjob *j)
{
    const cis2_model *m = &e->m;
    const cis2_receipt *r = j->r;
    cis2_verdict *v = j->v;
    char art[256] = "", outs[512] = "";
#define ART(key, w, g) do { if (f_digest(v, key, w, g)) add_name(art, sizeof art, key); } while (0)
#define OUT(cond, key) do { if (cond) add_name(outs, sizeof outs, key); } while (0)
    ART("weights-sha256", r->weights_sha, m->weights_sha); /* recomputed from the files, never trusted */
    ART("config-sha256", r->config_sha, m->config_sha);
    ART("tokenizer-sha256", r->tokenizer_sha, m->tokenizer_sha);
    cis2_vd_field(v, "prompt-hex", CIS2_FIELD_INPUT, "input (%zu bytes)", r->prompt_len);
    OUT(f_ids(v, "prompt-token-ids", r->prompt_ids, r->n_prompt, j->ids, j->nids), "prompt-token-ids");
    cis2_vd_field(v, "gen-toks", CIS2_FIELD_INPUT, "input (%u)", r->gen_toks);
    cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    OUT(f_digest(v, "table-digest", r->table_digest, m->table_digest), "table-digest");
    OUT(f_digest(v, "inv-freq-table-digest", r->inv_freq_digest, m->inv_freq_digest), "inv-freq-table-digest");
    OUT(f_ids(v, "generated-token-ids", r->generated, r->gen_toks, j->decoded, j->ndec), "generated-token-ids");
    if (j->bad_step >= 0)
        cis2_vd_field(v, "first-bad-step", CIS2_FIELD_NOTE,
                      "%lld: claimed %u (logit 0x%08x), the decode's argmax %u (logit 0x%08x)", j->bad_step,
                      j->claimed, j->claimed_bits, j->expected, j->expected_bits);
    OUT(f_digest(v, "argmax-digest", r->argmax, j->argmax), "argmax-digest");
    int wbad = f_digest(v, "witness-digest", r->witness, j->witness);
    OUT(wbad, "witness-digest");
    if (wbad && j->bad_step < 0)
        cis2_vd_field(v, "note", CIS2_FIELD_NOTE, "every claimed token is the decode's; the witness differs");
#undef ART
#undef OUT
    v->first_bad_step = j->bad_step;
    v->claimed_token = j->claimed;
    v->expected_token = j->expected;
    v->claimed_logit_bits = j->claimed_bits;
    v->expected_logit_bits = j->expected_bits;
    if (art[0])
        cis2_vd_set(v, CIS2_VERDICT_ARTIFACT_MISMATCH, CIS2_E_HASH, "ARTIFACT-MISMATCH", "(%s)%s%s", art,
                    outs[0] ? "; outputs differ too: " : "", outs);
    else if (outs[0])
        cis2_vd_set(v, CIS2_VERDICT_OUTPUT_MISMATCH, CIS2_E_MISMATCH, "OUTPUT-MISMATCH", "(%s)", outs);
    else
        cis2_vd_set(v, CIS2_VERDICT_OK, CIS2_OK, "OK", "(all fields recomputed from %s)", e->dir);
}

/* Prepares one receipt: its spec version, dtype and recomputed prompt ids. */
static void prepare(const cis2_engine *e, vjob *j)
{
    const cis2_receipt *r = j->r;
    cis2_verdict *v = j->v;
    if (unsupported(v, r)) { j->skip = 1; return; }
    cis2_error e2 = {0};
    /* §3.1: the prompt bytes are the input; their ids are recomputed */
    if (cis2_engine_encode(e, (const char *)r->prompt, r->prompt_len, &j->ids, &j->nids, &e2)) {
        char msg[600];
        v->n_fields = 0; /* no field report: the prompt cannot be re-tokenized */
        if (e2.code == CIS2_E_UNSUPPORTED) { /* a tokenizer.json outside what this engine runs */
            snprintf(msg, sizeof msg, "(%s)", e2.msg);
            cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED", "%s", msg);
        } else {
            snprintf(msg, sizeof msg, "%s: prompt-hex: %s", v->source, e2.msg);
            malformed(v, e2.code == CIS2_E_USAGE ? CIS2_E_FORMAT : e2.code, msg);
        }
        j->skip = 1;
        return;
    }
    size_t maxpos = (size_t)e->m.cfg.max_position_embeddings;
    if (j->nids == 0) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: prompt-hex encodes to no tokens", v->source);
        v->n_fields = 0;
        malformed(v, CIS2_E_FORMAT, msg);
        j->skip = 1;
        return;
    }
    for (size_t i = 0; i < j->nids; i++)
        if (j->ids[i] >= e->m.vocab) {
            v->n_fields = 0;
            malformed(v, CIS2_E_FORMAT, "the tokenizer gives ids outside the model's vocabulary");
            j->skip = 1;
            return;
        }
    if (j->nids + r->gen_toks > maxpos) {
        v->n_fields = 0;
        cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                    "(%zu prompt tokens + gen-toks %u exceed max_position_embeddings %zu)", j->nids, r->gen_toks,
                    maxpos);
        j->skip = 1;
        return;
    }
    /* a claimed id outside the vocabulary is never the argmax: that step
     * fails, and the id is never fed to the model as an input row */
    j->oov_step = r->gen_toks;
    for (size_t i = 0; i < r->gen_toks; i++)
        if (r->generated[i] >= e->m.vocab) { j->oov_step = i; break; }
}

static int same_replay(const vjob *a, const vjob *b)
{
    return a->ndec == b->ndec && a->bad_step == b->bad_step && !memcmp(a->witness, b->witness, 32) &&
           !memcmp(a->argmax, b->argmax, 32) && !memcmp(a->decoded, b->decoded, a->ndec * sizeof(uint32_t));
}

int cis2_verify(cis2_engine *e, cis2_receipt *const *receipts, size_t n, const cis2_verify_opts *opts,
                cis2_verdict **verdicts, cis2_error *err)
{
    *verdicts = NULL;
    cis2_verify_opts dflt = {0};
    const cis2_verify_opts *o = opts ? opts : &dflt;
    if (n == 0) return cis2_fail(err, CIS2_E_USAGE, "verify: no receipts");
    cis2_verdict *v = calloc(n, sizeof *v);
    vjob *jobs = calloc(n, sizeof *jobs), *again = NULL;
    cis2_frame f;
    int rc = CIS2_OK;
    ENGINE_ENTER(e, f, err, rc, out);
    if (!v || !jobs) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        const char *name = receipts[i]->source[0] ? receipts[i]->source : "receipt";
        if (cis2_vd_init(&v[i], name)) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        jobs[i].r = receipts[i];
        jobs[i].v = &v[i];
        jobs[i].index = i;
        prepare(e, &jobs[i]);
    }
    if (o->replay == CIS2_REPLAY_DECODE) rc = replay_decode(e, jobs, n, o, err);
    else {
        rc = replay_prefill(e, jobs, n, o, err);
        if (!rc && o->twice) { /* §12.4 on the verifier's own recomputation */
            if (!(again = calloc(n, sizeof *again))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
            for (size_t i = 0; i < n; i++) {
                again[i].r = jobs[i].r;
                again[i].skip = jobs[i].skip;
                again[i].ids = jobs[i].ids;
                again[i].nids = jobs[i].nids;
                again[i].oov_step = jobs[i].oov_step;
                again[i].index = i;
            }
            cis2_verify_opts quiet = *o;
            quiet.on_step = NULL;
            if (!(rc = replay_prefill(e, again, n, &quiet, err)))
                for (size_t i = 0; i < n && !rc; i++)
                    if (!jobs[i].skip && !same_replay(&jobs[i], &again[i]))
                        rc = cis2_fail(err, CIS2_E_NONDET, "§12.4 determinism check failed: the two replays of %s differ",
                                       v[i].source);
        }
    }
    if (rc) goto out;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].skip) judge(e, &jobs[i]);
    for (size_t i = 0; i < n && !rc; i++) rc = cis2_vd_finish(&v[i], err);
out:
    ENGINE_LEAVE(f);
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i].ids);
        free(jobs[i].decoded);
    }
    for (size_t i = 0; again && i < n; i++) free(again[i].decoded);
    free(jobs);
    free(again);
    if (rc) {
        cis2_verdicts_free(v, n);
        return rc;
    }
    *verdicts = v;
    return CIS2_OK;
}

/* -------------------------------------------------------------- check */

int cis2_check(const cis2_receipt *r, const char *tok_path, const char *cfg_path, unsigned tok_flags,
               cis2_verdict **out, cis2_error *err)
{
    *out = NULL;
    cis2_verdict *v = calloc(1, sizeof *v);
    if (!v || cis2_vd_init(v, r->source)) { free(v); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    uint8_t cfg_sha[32], tok_sha[32], inv_digest[32], table[32], argmax_d[32];
    cis2_tokenizer *tok = NULL;
    uint32_t *ids = NULL;
    size_t nids = 0;
    int rc = CIS2_OK;
    cis2_frame f;
    if (cis2_api_enter(&f, NULL)) { rc = cis2_fail(err, CIS2_E_FPENV, "FTZ/DAZ pin did not read back"); goto out; }
    if (unsupported(v, r)) goto done;
    if (cfg_path) {
        cis2_config c;
        if ((rc = cis2_config_load(&c, cfg_path, err)) || (rc = cis2_sha256_file(cfg_path, cfg_sha, err))) goto out;
        size_t half = (size_t)c.head_dim / 2;
        float *inv = malloc((half ? half : 1) * sizeof(float));
        if (!inv) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        rope_inv_freq(c.rope_theta, (size_t)c.head_dim, inv); /* §7.1, as model.c */
        inv_freq_table_digest(inv, half, inv_digest);         /* §7.2 */
        free(inv);
    }
    if (tok_path) {
        unsigned tf = tok_flags & CIS2_OPEN_TOKENIZER_EXT ? CIS2_TOK_ALLOW_NONNORMATIVE : 0;
        if ((rc = cis2_tokenizer_load_ext(&tok, tok_path, tf, err)) || (rc = cis2_sha256_file(tok_path, tok_sha, err)))
            goto out;
        cis2_error e2 = {0};
        if (cis2_tokenizer_encode(tok, (const char *)r->prompt, r->prompt_len, &ids, &nids, &e2)) {
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: prompt-hex: %s", r->source, e2.msg);
            goto out;
        }
    }
    table_digest(table); /* §6.6 */
    /* §12.2 over the receipt's own ids: a consistency check */
    if (cis2_argmax_digest(r->prompt_ids, r->n_prompt, r->generated, r->gen_toks, argmax_d)) {
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
        goto out;
    }
    char art[128] = "", outs[256] = "", unv[256] = "";
#define UNV(key, why) do { cis2_vd_field(v, key, CIS2_FIELD_UNVERIFIED, "unverified (%s)", why); add_name(unv, sizeof unv, key); } while (0)
    UNV("weights-sha256", "needs the weights: cis2 verify");
    if (cfg_path) { if (f_digest(v, "config-sha256", r->config_sha, cfg_sha)) add_name(art, sizeof art, "config-sha256"); }
    else UNV("config-sha256", "needs --config");
    if (tok_path) { if (f_digest(v, "tokenizer-sha256", r->tokenizer_sha, tok_sha)) add_name(art, sizeof art, "tokenizer-sha256"); }
    else UNV("tokenizer-sha256", "needs --tokenizer");
    cis2_vd_field(v, "prompt-hex", CIS2_FIELD_INPUT, "input (%zu bytes)", r->prompt_len);
    if (tok_path) { if (f_ids(v, "prompt-token-ids", r->prompt_ids, r->n_prompt, ids, nids)) add_name(outs, sizeof outs, "prompt-token-ids"); }
    else UNV("prompt-token-ids", "needs --tokenizer");
    cis2_vd_field(v, "gen-toks", CIS2_FIELD_INPUT, "input (%u)", r->gen_toks);
    cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    if (f_digest(v, "table-digest", r->table_digest, table)) add_name(outs, sizeof outs, "table-digest");
    if (cfg_path) { if (f_digest(v, "inv-freq-table-digest", r->inv_freq_digest, inv_digest)) add_name(outs, sizeof outs, "inv-freq-table-digest"); }
    else UNV("inv-freq-table-digest", "needs --config");
    UNV("generated-token-ids", "needs the weights: cis2 verify");
    if (memcmp(r->argmax, argmax_d, 32)) {
        f_digest(v, "argmax-digest", r->argmax, argmax_d);
        add_name(outs, sizeof outs, "argmax-digest");
    } else cis2_vd_field(v, "argmax-digest", CIS2_FIELD_OK, "ok (consistent with the receipt's prompt and generated ids)");
    UNV("witness-digest", "needs the weights: cis2 verify");
#undef UNV
    if (art[0])
        cis2_vd_set(v, CIS2_VERDICT_ARTIFACT_MISMATCH, CIS2_E_HASH, "ARTIFACT-MISMATCH", "(%s)%s%s", art,
                    outs[0] ? "; outputs differ too: " : "", outs);
    else if (outs[0]) cis2_vd_set(v, CIS2_VERDICT_OUTPUT_MISMATCH, CIS2_E_MISMATCH, "OUTPUT-MISMATCH", "(%s)", outs);
    else cis2_vd_set(v, CIS2_VERDICT_CONSISTENT, CIS2_OK, "CONSISTENT", "(unverified: %s)", unv);
done:
    rc = cis2_vd_finish(v, err);
out:
    cis2_api_leave(&f);
    cis2_free(ids);
    cis2_tokenizer_free(tok);
    if (rc) { cis2_verdicts_free(v, 1); return rc; }
    *out = v;
    return CIS2_OK;
}

/* ------------------------------------------------------------ compare */

int cis2_compare(const cis2_receipt *a, const cis2_receipt *b, cis2_verdict **out, cis2_error *err)
{
    *out = NULL;
    cis2_verdict *v = calloc(1, sizeof *v);
    if (!v || cis2_vd_init(v, "")) { free(v); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    /* Inputs determine a run; everything else is derived from them. */
    char ins[256] = "", outs[256] = "";
    char ha[65], hb[65];
#define CMP_D(key, x, list) do {                                                            \
        if (memcmp(a->x, b->x, 32)) {                                                       \
            cis2_hex(a->x, 32, ha); cis2_hex(b->x, 32, hb);                                 \
            cis2_vd_field(v, key, CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", ha, hb);         \
            add_name(list, sizeof list, key);                                               \
        } else cis2_vd_field(v, key, CIS2_FIELD_SAME, "same");                              \
    } while (0)
#define CMP_S(key, x, list) do {                                                            \
        if (strcmp(a->x, b->x)) {                                                           \
            cis2_vd_field(v, key, CIS2_FIELD_DIFFERS, "DIFFERS a=%s b=%s", a->x, b->x);     \
            add_name(list, sizeof list, key);                                               \
        } else cis2_vd_field(v, key, CIS2_FIELD_SAME, "same");                              \
    } while (0)
    CMP_S("spec-version", spec_version, ins);
    CMP_D("weights-sha256", weights_sha, ins);
    CMP_D("config-sha256", config_sha, ins);
    CMP_D("tokenizer-sha256", tokenizer_sha, ins);
    if (a->prompt_len != b->prompt_len || memcmp(a->prompt, b->prompt, a->prompt_len)) {
        cis2_vd_field(v, "prompt-hex", CIS2_FIELD_DIFFERS, "DIFFERS (%zu bytes vs %zu bytes)", a->prompt_len,
                      b->prompt_len);
        add_name(ins, sizeof ins, "prompt-hex");
    } else cis2_vd_field(v, "prompt-hex", CIS2_FIELD_SAME, "same");
    if (!ids_equal(a->prompt_ids, a->n_prompt, b->prompt_ids, b->n_prompt)) {
        cis2_vd_field(v, "prompt-token-ids", CIS2_FIELD_DIFFERS, "DIFFERS");
        add_name(outs, sizeof outs, "prompt-token-ids");
    } else cis2_vd_field(v, "prompt-token-ids", CIS2_FIELD_SAME, "same");
    if (a->gen_toks != b->gen_toks) {
        cis2_vd_field(v, "gen-toks", CIS2_FIELD_DIFFERS, "DIFFERS a=%u b=%u", a->gen_toks, b->gen_toks);
        add_name(ins, sizeof ins, "gen-toks");
    } else cis2_vd_field(v, "gen-toks", CIS2_FIELD_SAME, "same");
    CMP_S("dtype", dtype, ins);
    CMP_D("table-digest", table_digest, outs);
    CMP_D("inv-freq-table-digest", inv_freq_digest, outs);
    uint32_t common = a->gen_toks < b->gen_toks ? a->gen_toks : b->gen_toks;
    size_t first = common;
    for (size_t i = 0; i < common; i++)
        if (a->generated[i] != b->generated[i]) { first = i; break; }
    if (first < common || a->gen_toks != b->gen_toks) {
        if (first < common)
            cis2_vd_field(v, "generated-token-ids", CIS2_FIELD_DIFFERS, "DIFFERS from step %zu (a=%u b=%u)", first,
                          a->generated[first], b->generated[first]);
        else
            cis2_vd_field(v, "generated-token-ids", CIS2_FIELD_DIFFERS, "DIFFERS (lengths %u and %u, equal on the first %u)",
                          a->gen_toks, b->gen_toks, common);
        add_name(outs, sizeof outs, "generated-token-ids");
    } else cis2_vd_field(v, "generated-token-ids", CIS2_FIELD_SAME, "same");
    CMP_D("argmax-digest", argmax, outs);
    CMP_D("witness-digest", witness, outs);
#undef CMP_D
#undef CMP_S
    int same_witness = !memcmp(a->witness, b->witness, 32);
    /* Same run but for gen-toks: greedy step i never depends on gen-toks,
     * so every derived value except the length-dependent digests must agree
     * on the common prefix. */
    int only_len = !strcmp(ins, "gen-toks");
    if (!ins[0] && !outs[0])
        cis2_vd_set(v, CIS2_VERDICT_SAME, CIS2_OK, "SAME", NULL);
    else if (!ins[0])
        cis2_vd_set(v, CIS2_VERDICT_CONTRADICTION, CIS2_E_MISMATCH, "CONTRADICTION", "(same inputs, different %s)", outs);
    else if (same_witness)
        cis2_vd_set(v, CIS2_VERDICT_WITNESS_COLLISION, CIS2_E_MISMATCH, "WITNESS-COLLISION",
                    "(different %s, same witness-digest: at least one receipt is forged)", ins);
    else if (only_len && (first < common || memcmp(a->table_digest, b->table_digest, 32) ||
                          memcmp(a->inv_freq_digest, b->inv_freq_digest, 32) ||
                          !ids_equal(a->prompt_ids, a->n_prompt, b->prompt_ids, b->n_prompt)))
        cis2_vd_set(v, CIS2_VERDICT_CONTRADICTION, CIS2_E_MISMATCH, "CONTRADICTION",
                    "(same inputs but gen-toks, yet they disagree within the first %u steps)", common);
    else
        cis2_vd_set(v, CIS2_VERDICT_DIFFERENT_RUN, CIS2_OK, "DIFFERENT-RUN", "(different %s)", ins);
    int rc = cis2_vd_finish(v, err);
    if (rc) { cis2_verdicts_free(v, 1); return rc; }
    *out = v;
    return CIS2_OK;
}

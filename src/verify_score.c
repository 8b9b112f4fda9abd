/*
 * verify_score.c - score receipts, "CIS-2-RECEIPT ext-score-1"
 * (docs/receipts.md "Score receipts"; the scoring they record is
 * docs/sampling.md §S11): cis2_score_receipts makes them, cis2_verify
 * re-derives them (cis2_verify_scores: every receipt re-scored by the same
 * teacher-forced prefill, in one cis2_score_run call), cis2_check judges
 * what needs no weights (cis2_check_score).  The format itself (render,
 * strict parse) is receipt.c's.
 *
 * What a receipt binds: the three artifact hashes (§2.1) and both table
 * digests (§6.6, §7.2); each part's bytes and ids and which of them was
 * the input (`text`: the ids are §S11.1's tokenization of the bytes, no
 * special tokens; `ids`: the bytes are the ids' raw bytes); first-scored
 * and top-logprobs; the per-token logprob bits, all-greedy and the sums
 * (§S11.2-§S11.3) as values anyone can read; logprob-digest over every
 * figure (bits, ranks, greedy flags, top-n: score.h); witness-digest over
 * every logits row used (score.c).  Verification names each field that
 * differs: logprob-bits with the first differing token.
 */
#include "engine.h"
#include "pmath.h"
#include "score.h"
#include "tokenizer.h"
#include "verdict.h"
#include "witness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static uint64_t dbits(double d) { uint64_t b; memcpy(&b, &d, 8); return b; }

int cis2_score_logprob_digest(const cis2_score_result *r, uint8_t out[32])
{
    cis2_sha s;
    if (cis2_sha_init(&s)) return -1;
    for (size_t k = r->first; k < r->n_ids; k++) {
        uint8_t g = r->greedy[k] ? 1 : 0;
        cis2_sha_u32le(&s, fbits(r->logprobs[k]));
        cis2_sha_u32le(&s, r->ranks[k]);
        cis2_sha_update(&s, &g, 1);
        for (size_t t = 0; t < r->n_top; t++) {
            cis2_sha_u32le(&s, r->top_ids[k * r->n_top + t]);
            cis2_sha_u32le(&s, fbits(r->top_logprobs[k * r->n_top + t]));
        }
    }
    cis2_sha_final(&s, out);
    return 0;
}

/* ------------------------------------------------------------------ make */

static int copy_bytes(const void *p, size_t n, uint8_t **out, size_t *len)
{
    *len = n;
    if (!n) return 0;
    if (!(*out = malloc(n))) return -1;
    memcpy(*out, p, n);
    return 0;
}

static int copy_ids(const uint32_t *p, size_t n, uint32_t **out, size_t *cnt)
{
    *cnt = n;
    if (!n) return 0;
    if (!(*out = malloc(n * sizeof *p))) return -1;
    memcpy(*out, p, n * sizeof *p);
    return 0;
}

/* A part's bytes: the text given, or the ids' raw bytes. */
static int part_bytes(const cis2_engine *e, const char *text, size_t tlen, const uint32_t *ids, size_t n, int *from,
                      uint8_t **out, size_t *len, cis2_error *err)
{
    *from = n == 0 ? CIS2_FROM_NONE : text ? CIS2_FROM_TEXT : CIS2_FROM_IDS;
    if (*from == CIS2_FROM_TEXT) return copy_bytes(text, tlen, out, len) ? cis2_fail(err, CIS2_E_NOMEM, "out of memory") : 0;
    if (*from == CIS2_FROM_NONE) return CIS2_OK;
    char *b;
    size_t bl;
    cis2_error te = {0};
    if (cis2_engine_bytes(e, ids, n, &b, &bl, &te))
        return cis2_fail(err, CIS2_E_USAGE, "score receipt: the ids' bytes need the model's tokenizer.json (%s)", te.msg);
    int bad = copy_bytes(b, bl, out, len);
    free(b);
    return bad ? cis2_fail(err, CIS2_E_NOMEM, "out of memory") : CIS2_OK;
}

static int make_one(const cis2_engine *e, const cis2_score_request *q, const cis2_score_result *s,
                    const uint8_t witness[32], cis2_receipt **out, cis2_error *err)
{
    cis2_receipt *r = cis2_receipt_new();
    if (!r) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    r->score = 1;
    cis2_receipt_set_model(r, &e->m);
    memcpy(r->witness, witness, 32);
    int rc = part_bytes(e, q->context, q->context_len, s->context_ids, s->n_context, &r->ctx_from, &r->ctx_bytes,
                        &r->ctx_len, err);
    if (!rc) rc = part_bytes(e, q->continuation, q->continuation_len, s->ids, s->n_ids, &r->cont_from,
                             &r->cont_bytes, &r->cont_len, err);
    if (!rc && (copy_ids(s->context_ids, s->n_context, &r->ctx_ids, &r->n_ctx) ||
                copy_ids(s->ids, s->n_ids, &r->cont_ids, &r->n_cont) ||
                !(r->lp_bits = malloc((s->n_scored ? s->n_scored : 1) * sizeof *r->lp_bits)) ||
                cis2_score_logprob_digest(s, r->logprob_digest)))
        rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    if (rc) { cis2_receipt_free(r); return rc; }
    r->first_scored = (uint32_t)s->first;
    r->top_n = (uint32_t)s->n_top;
    r->n_lp = s->n_scored;
    for (size_t k = 0; k < s->n_scored; k++) r->lp_bits[k] = fbits(s->logprobs[s->first + k]);
    r->all_greedy = s->all_greedy;
    r->sum_bits = fbits(s->sum);
    r->sum_f64_bits = dbits(s->sum_f64);
    *out = r;
    return CIS2_OK;
}

int cis2_score_receipts(cis2_engine *e, const cis2_score_request *reqs, size_t n, cis2_score_result **results,
                        cis2_receipt **receipts, cis2_error *err)
{
    return cis2_score_receipts_ex(e, reqs, n, NULL, results, receipts, err);
}

int cis2_score_receipts_ex(cis2_engine *e, const cis2_score_request *reqs, size_t n, const cis2_score_opts *opts,
                           cis2_score_result **results, cis2_receipt **receipts, cis2_error *err)
{
    if (results) *results = NULL;
    if (!receipts) return cis2_fail(err, CIS2_E_USAGE, "score receipts: no place for the receipts");
    for (size_t i = 0; i < n; i++) receipts[i] = NULL;
    uint8_t (*w)[32] = malloc((n ? n : 1) * sizeof *w);
    if (!w) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    int rc = cis2_score_run(e, reqs, n, w, opts, results, err); /* should_stop: before every weight pass */
    for (size_t i = 0; i < n && !rc; i++) rc = make_one(e, &reqs[i], &(*results)[i], w[i], &receipts[i], err);
    free(w);
    if (rc) {
        for (size_t i = 0; i < n; i++) { cis2_receipt_free(receipts[i]); receipts[i] = NULL; }
        if (results && *results) { cis2_score_results_free(*results, n); *results = NULL; }
    }
    return rc;
}

/* ---------------------------------------------------------- shared judging */

#define NAMES 512

typedef struct judged { char art[NAMES], outs[NAMES], unv[NAMES]; } judged;

static void out_bad(judged *j, const char *key) { cis2_vd_name(j->outs, sizeof j->outs, key); }

/* One part's bytes and ids (docs/receipts.md "Score receipts"): with
 * `text` the ids must be the bytes' tokenization (§S11.1, no special
 * tokens); with `ids` the bytes must be the ids' raw bytes.  The -from
 * line names that relation and carries its outcome: it is what the field
 * claims, and all a verifier can check (where both relations hold,
 * either value verifies).  tok NULL: unverified. */
static void judge_part(cis2_verdict *v, judged *j, const char *name, int from, const uint8_t *bytes, size_t len,
                       const uint32_t *ids, size_t n, const cis2_tokenizer *tok)
{
    char kf[48], kh[48], ki[48];
    snprintf(kf, sizeof kf, "%s-from", name);
    snprintf(kh, sizeof kh, "%s-hex", name);
    snprintf(ki, sizeof ki, "%s-token-ids", name);
    if (from == CIS2_FROM_NONE) {
        cis2_vd_field(v, kf, CIS2_FIELD_INPUT, "input (none)");
        cis2_vd_field(v, kh, CIS2_FIELD_INPUT, "input (none)");
        cis2_vd_field(v, ki, CIS2_FIELD_INPUT, "input (none)");
        return;
    }
    const char *rel = from == CIS2_FROM_TEXT ? "text: the ids are the bytes' tokenization"
                                             : "ids: the bytes are the ids' bytes";
    const char *derived = from == CIS2_FROM_TEXT ? ki : kh;
    if (!tok) {
        cis2_vd_field(v, kf, CIS2_FIELD_UNVERIFIED, "unverified (%s; needs --tokenizer)", rel);
        if (from == CIS2_FROM_TEXT) cis2_vd_field(v, kh, CIS2_FIELD_INPUT, "input (%zu bytes)", len);
        else cis2_vd_field(v, ki, CIS2_FIELD_INPUT, "input (%zu ids)", n);
        cis2_vd_field(v, derived, CIS2_FIELD_UNVERIFIED, "unverified (needs --tokenizer)");
        cis2_vd_name(j->unv, sizeof j->unv, derived);
        return;
    }
    /* the derived half's outcome first, its line in receipt order below */
    cis2_verdict scratch, *t = cis2_vd_init(&scratch, "") ? NULL : &scratch; /* holds the derived field */
    int status = CIS2_FIELD_UNVERIFIED;
    if (t) {
        if (from == CIS2_FROM_TEXT) {
            uint32_t *got = NULL;
            size_t ng = 0;
            cis2_error te = {0};
            if (cis2_tokenizer_encode_flags(tok, (const char *)bytes, len, 0, SIZE_MAX, &got, &ng, &te))
                cis2_vd_field(t, ki, CIS2_FIELD_MISMATCH, "MISMATCH (%s-hex does not tokenize: %s)", name, te.msg);
            else cis2_vd_ids(t, ki, ids, n, got, ng);
            cis2_free(got);
        } else {
            size_t total = 0, l;
            for (size_t i = 0; i < n; i++)
                if (cis2_tokenizer_token_bytes(tok, ids[i], &l)) total += l;
            uint8_t *b = malloc(total + 1);
            size_t k = 0;
            for (size_t i = 0; b && i < n; i++) {
                const char *tb = cis2_tokenizer_token_bytes(tok, ids[i], &l);
                if (tb) { memcpy(b + k, tb, l); k += l; }
            }
            if (!b) cis2_vd_field(t, kh, CIS2_FIELD_UNVERIFIED, "unverified (out of memory)");
            else if (k == len && (k == 0 || !memcmp(b, bytes, k))) cis2_vd_field(t, kh, CIS2_FIELD_OK, "ok");
            else {
                char *a = malloc(2 * len + 1), *g = malloc(2 * k + 1);
                if (a) cis2_hex(bytes, len, a);
                if (g) cis2_hex(b, k, g);
                cis2_vd_field(t, kh, CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s (the ids' bytes)",
                              a && len ? a : "none", g && k ? g : "none");
                free(a);
                free(g);
            }
            free(b);
        }
        if (t->n_fields) status = t->fields[t->n_fields - 1].status;
    }
    if (status == CIS2_FIELD_OK) cis2_vd_field(v, kf, CIS2_FIELD_OK, "ok (%s)", rel);
    else if (status == CIS2_FIELD_MISMATCH) cis2_vd_field(v, kf, CIS2_FIELD_INPUT, "input (%s: does not hold, see %s)", rel, derived);
    else cis2_vd_field(v, kf, CIS2_FIELD_UNVERIFIED, "unverified (%s)", rel);
    if (from == CIS2_FROM_TEXT) cis2_vd_field(v, kh, CIS2_FIELD_INPUT, "input (%zu bytes)", len);
    else cis2_vd_field(v, ki, CIS2_FIELD_INPUT, "input (%zu ids)", n);
    if (t && t->n_fields) {
        const cis2_field *f = &t->fields[t->n_fields - 1];
        cis2_vd_field(v, derived, f->status, "%s", f->detail);
    } else
        cis2_vd_field(v, derived, CIS2_FIELD_UNVERIFIED, "unverified (out of memory)");
    if (status == CIS2_FIELD_MISMATCH) out_bad(j, derived);
    if (t) cis2_vd_clear(t);
}

static void judge_head(cis2_verdict *v, judged *j, const cis2_receipt *r, const uint8_t *w_sha, const uint8_t *c_sha,
                       const uint8_t *t_sha, const uint8_t *inv, const uint8_t table[32])
{
    cis2_vd_field(v, "spec-version", CIS2_FIELD_OK, "ok");
    cis2_vd_field(v, "extension", CIS2_FIELD_OK, "ok");
    const char *keys[3] = {"weights-sha256", "config-sha256", "tokenizer-sha256"};
    const uint8_t *want[3] = {r->weights_sha, r->config_sha, r->tokenizer_sha}, *got[3] = {w_sha, c_sha, t_sha};
    const char *why[3] = {"needs the weights: cis2 verify", "needs --config", "needs --tokenizer"};
    for (int i = 0; i < 3; i++) {
        if (!got[i]) {
            cis2_vd_field(v, keys[i], CIS2_FIELD_UNVERIFIED, "unverified (%s)", why[i]);
            cis2_vd_name(j->unv, sizeof j->unv, keys[i]);
        } else if (cis2_vd_digest(v, keys[i], want[i], got[i]))
            cis2_vd_name(j->art, sizeof j->art, keys[i]);
    }
    cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    if (cis2_vd_digest(v, "table-digest", r->table_digest, table)) out_bad(j, "table-digest");
    if (!inv) {
        cis2_vd_field(v, "inv-freq-table-digest", CIS2_FIELD_UNVERIFIED, "unverified (needs --config)");
        cis2_vd_name(j->unv, sizeof j->unv, "inv-freq-table-digest");
    } else if (cis2_vd_digest(v, "inv-freq-table-digest", r->inv_freq_digest, inv))
        out_bad(j, "inv-freq-table-digest");
}

static void judge_parts(cis2_verdict *v, judged *j, const cis2_receipt *r, const cis2_tokenizer *tok)
{
    judge_part(v, j, "context", r->ctx_from, r->ctx_bytes, r->ctx_len, r->ctx_ids, r->n_ctx, tok);
    judge_part(v, j, "continuation", r->cont_from, r->cont_bytes, r->cont_len, r->cont_ids, r->n_cont, tok);
    cis2_vd_field(v, "first-scored", CIS2_FIELD_OK, "ok");
    cis2_vd_field(v, "top-logprobs", CIS2_FIELD_INPUT, "input (%u)", r->top_n);
}

static void judge_u64(cis2_verdict *v, judged *j, const char *key, uint64_t want, uint64_t got, int width)
{
    if (want == got) { cis2_vd_field(v, key, CIS2_FIELD_OK, "ok"); return; }
    cis2_vd_field(v, key, CIS2_FIELD_MISMATCH, "MISMATCH expected=%0*llx got=%0*llx", width, (unsigned long long)want,
                  width, (unsigned long long)got);
    out_bad(j, key);
}

/* §S11.3's sums of the receipt's own logprob-bits. */
static void sums_of(const cis2_receipt *r, uint32_t *s32, uint64_t *s64)
{
    float s = 0.0f;
    double d = 0.0;
    for (size_t k = 0; k < r->n_lp; k++) {
        float x;
        memcpy(&x, &r->lp_bits[k], 4);
        s = s + x;
        d = d + (double)x;
    }
    *s32 = fbits(s);
    *s64 = dbits(d);
}

static void judge_verdict(cis2_verdict *v, const judged *j, int checked)
{
    if (j->art[0])
        cis2_vd_set(v, CIS2_VERDICT_ARTIFACT_MISMATCH, CIS2_E_HASH, "ARTIFACT-MISMATCH", "(%s)%s%s", j->art,
                    j->outs[0] ? "; outputs differ too: " : "", j->outs);
    else if (j->outs[0]) cis2_vd_set(v, CIS2_VERDICT_OUTPUT_MISMATCH, CIS2_E_MISMATCH, "OUTPUT-MISMATCH", "(%s)", j->outs);
    else if (checked) cis2_vd_set(v, CIS2_VERDICT_CONSISTENT, CIS2_OK, "CONSISTENT", "(unverified: %s)", j->unv);
    else cis2_vd_set(v, CIS2_VERDICT_OK, CIS2_OK, "OK", NULL);
}

/* ----------------------------------------------------------------- check */

void cis2_check_score(cis2_verdict *v, const cis2_receipt *r, const cis2_tokenizer *tok, const uint8_t *tok_sha,
                      const uint8_t *cfg_sha, const uint8_t *inv)
{
    judged j = {.art = {0}};
    uint8_t table[32];
    table_digest(table); /* §6.6 */
    judge_head(v, &j, r, NULL, cfg_sha, tok ? tok_sha : NULL, inv, table);
    judge_parts(v, &j, r, tok);
    const char *need[] = {"logprob-bits", "all-greedy"};
    for (int i = 0; i < 2; i++) {
        cis2_vd_field(v, need[i], CIS2_FIELD_UNVERIFIED, "unverified (needs the weights: cis2 verify)");
        cis2_vd_name(j.unv, sizeof j.unv, need[i]);
    }
    uint32_t s32;
    uint64_t s64;
    sums_of(r, &s32, &s64);
    judge_u64(v, &j, "sum-bits", r->sum_bits, s32, 8);
    judge_u64(v, &j, "sum-f64-bits", r->sum_f64_bits, s64, 16);
    const char *w[] = {"logprob-digest", "witness-digest"};
    for (int i = 0; i < 2; i++) {
        cis2_vd_field(v, w[i], CIS2_FIELD_UNVERIFIED, "unverified (needs the weights: cis2 verify)");
        cis2_vd_name(j.unv, sizeof j.unv, w[i]);
    }
    judge_verdict(v, &j, 1);
}

/* ---------------------------------------------------------------- verify */

/* The receipt's request, or a reason it cannot be re-scored on e. */
static const char *as_request(const cis2_engine *e, const cis2_receipt *r, cis2_score_request *q, int *code)
{
    *q = (cis2_score_request){.context_ids = r->ctx_ids, .n_context_ids = r->n_ctx, .continuation_ids = r->cont_ids,
                              .n_continuation_ids = r->n_cont, .top_logprobs = r->top_n};
    for (size_t i = 0; i < r->n_ctx + r->n_cont; i++) {
        uint32_t id = i < r->n_ctx ? r->ctx_ids[i] : r->cont_ids[i - r->n_ctx];
        if (id >= e->m.vocab) { *code = CIS2_E_FORMAT; return "a token id outside the model's vocabulary"; }
    }
    if (r->n_ctx + r->n_cont > (size_t)e->m.cfg.max_position_embeddings) {
        *code = CIS2_E_UNSUPPORTED;
        return "context + continuation is longer than max_position_embeddings";
    }
    return NULL;
}

static void judge_outputs(cis2_verdict *v, judged *j, const cis2_receipt *r, const cis2_score_result *s,
                          const uint8_t witness[32])
{
    size_t bad = SIZE_MAX, nbad = 0;
    for (size_t k = 0; k < r->n_lp; k++)
        if (r->lp_bits[k] != fbits(s->logprobs[s->first + k])) { if (bad == SIZE_MAX) bad = k; nbad++; }
    if (bad == SIZE_MAX) cis2_vd_field(v, "logprob-bits", CIS2_FIELD_OK, "ok");
    else {
        size_t k = s->first + bad;
        cis2_vd_field(v, "logprob-bits", CIS2_FIELD_MISMATCH,
                      "MISMATCH at continuation token %zu (id %u): expected=%08x got=%08x (%zu of %zu differ)", k,
                      s->ids[k], r->lp_bits[bad], fbits(s->logprobs[k]), nbad, r->n_lp);
        out_bad(j, "logprob-bits");
    }
    judge_u64(v, j, "all-greedy", (uint64_t)r->all_greedy, (uint64_t)s->all_greedy, 1);
    judge_u64(v, j, "sum-bits", r->sum_bits, fbits(s->sum), 8);
    judge_u64(v, j, "sum-f64-bits", r->sum_f64_bits, dbits(s->sum_f64), 16);
    uint8_t d[32];
    if (cis2_score_logprob_digest(s, d)) { cis2_vd_field(v, "logprob-digest", CIS2_FIELD_UNVERIFIED, "unverified (out of memory)"); }
    else if (cis2_vd_digest(v, "logprob-digest", r->logprob_digest, d)) out_bad(j, "logprob-digest");
    if (cis2_vd_digest(v, "witness-digest", r->witness, witness)) out_bad(j, "witness-digest");
}

int cis2_verify_scores(cis2_engine *e, cis2_receipt *const *rs, size_t n, int twice, const cis2_score_opts *opts,
                       cis2_verdict *v, cis2_error *err)
{
    cis2_score_request *q = calloc(n ? n : 1, sizeof *q);
    size_t *which = calloc(n ? n : 1, sizeof *which), k = 0;
    uint8_t (*w)[32] = malloc((n ? n : 1) * sizeof *w), (*w2)[32] = malloc((n ? n : 1) * sizeof *w2);
    cis2_score_result *res = NULL, *res2 = NULL;
    int rc = CIS2_OK;
    if (!q || !which || !w || !w2) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        const cis2_receipt *r = rs[i];
        if (strcmp(r->spec_version, CIS2_SPEC_VERSION) || strcmp(r->dtype, "fp32")) {
            cis2_vd_supported(&v[i], r);
            continue;
        }
        int code = 0;
        const char *why = as_request(e, r, &q[k], &code);
        if (why) {
            cis2_vd_set(&v[i], code == CIS2_E_FORMAT ? CIS2_VERDICT_MALFORMED : CIS2_VERDICT_UNSUPPORTED, code,
                        code == CIS2_E_FORMAT ? "MALFORMED" : "UNSUPPORTED", "(%s)", why);
            continue;
        }
        which[k++] = i;
    }
    if (!k) goto out;
    if ((rc = cis2_score_run(e, q, k, w, opts, &res, err))) goto out;
    if (twice) {
        if ((rc = cis2_score_run(e, q, k, w2, opts, &res2, err))) goto out;
        for (size_t i = 0; i < k && !rc; i++) {
            uint8_t a[32], b[32];
            if (cis2_score_logprob_digest(&res[i], a) || cis2_score_logprob_digest(&res2[i], b))
                rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory");
            else if (memcmp(w[i], w2[i], 32) || memcmp(a, b, 32) || fbits(res[i].sum) != fbits(res2[i].sum))
                rc = cis2_fail(err, CIS2_E_NONDET, "§12.4 determinism check failed: the two scorings of %s differ",
                               v[which[i]].source);
        }
        if (rc) goto out;
    }
    for (size_t t = 0; t < k; t++) {
        const cis2_receipt *r = rs[which[t]];
        cis2_verdict *vi = &v[which[t]];
        judged j = {.art = {0}};
        judge_head(vi, &j, r, e->m.weights_sha, e->m.config_sha, e->m.tokenizer_sha, e->m.inv_freq_digest,
                   e->m.table_digest);
        judge_parts(vi, &j, r, e->tok);
        judge_outputs(vi, &j, r, &res[t], w[t]);
        if (!e->tok && !j.art[0] && !j.outs[0]) /* the parts' derived halves could not be checked */
            cis2_vd_set(vi, CIS2_VERDICT_CONSISTENT, CIS2_OK, "CONSISTENT", "(unverified: %s; no tokenizer)", j.unv);
        else judge_verdict(vi, &j, 0);
    }
out:
    cis2_score_results_free(res, k);
    cis2_score_results_free(res2, k);
    free(q);
    free(which);
    free(w);
    free(w2);
    return rc;
}

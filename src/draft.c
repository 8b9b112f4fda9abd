/*
 * draft.c - draft-model drafting (draft.h; docs/speculate.md "A draft
 * model").
 *
 * For each decoding step of a sequence with a draft model, the context is
 * the prompt and the tokens generated so far.  The sequence's cis2_dstate
 * remembers which tokens the draft model's KV cache holds; the longest
 * prefix they share with the context is kept (a position's keys and
 * values depend on the tokens up to it only, §3.5), the rest of the
 * context is fed in one pass whose last row gives logits, and then the
 * draft model decodes greedily (§11.2's argmax over its own logits), one
 * row per pass, until it has k tokens.  The last draft token is not fed:
 * the next step either accepts it (and feeds it then) or not.
 *
 * None of this is pinned arithmetic of the target's output: the drafts are
 * guesses that session.c checks against the target's own choices.  They
 * are still deterministic (the draft model's forward pass is cis2_forward
 * with its §5-§11 orders), which keeps the time of a run reproducible too.
 */
#include "draft.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t next_id = 1;

int cis2_dmodel_load(const cis2_ctx *cx, cis2_dmodel **out, const char *dir, const cis2_model *target,
                     cis2_error *err)
{
    *out = NULL;
    cis2_dmodel *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    }
    int rc = cis2_model_load(cx, &d->m, dir, err);
    if (!rc && memcmp(d->m.tokenizer_sha, target->tokenizer_sha, 32)) {
        char a[65], b[65];
        cis2_hex(d->m.tokenizer_sha, 32, a);
        cis2_hex(target->tokenizer_sha, 32, b);
        rc = cis2_fail(err, CIS2_E_USAGE, "speculate: the draft model %s has another tokenizer.json (sha256 %.12s..., "
                       "the model's %.12s...): a draft model must share the model's tokenizer", dir, a, b);
    }
    if (rc) {
        cis2_dmodel_free(d);
        return rc;
    }
    d->id = atomic_fetch_add(&next_id, 1);
    *out = d;
    return CIS2_OK;
}

void cis2_dmodel_free(cis2_dmodel *d)
{
    if (!d) return;
    cis2_model_free(&d->m);
    free(d->dir);
    free(d);
}

void cis2_dstate_free(cis2_dstate *st)
{
    cis2_kv_free(&st->kv);
    cis2_ws_free(&st->ws);
    free(st->fed);
    free(st->logits);
    free(st->rows);
    memset(st, 0, sizeof *st);
}

/* First use with d: a cache and token list for cap positions. */
static int setup(const cis2_dmodel *d, cis2_dstate *st, size_t cap)
{
    cis2_error e;
    st->model_id = d->id;
    if (cis2_kv_init(&st->kv, &d->m, cap, &e)) return -1;
    st->fed = malloc(cap * sizeof *st->fed);
    st->logits = malloc(d->m.vocab * sizeof *st->logits);
    if (!st->fed || !st->logits) return -1;
    st->cap = cap;
    return 0;
}

/* Feeds ctx[from, to) at their positions; the last row's logits into
 * st->logits.  0 on success. */
static int feed(const cis2_ctx *cx, const cis2_dmodel *d, cis2_dstate *st, const uint32_t *tok, size_t from,
                size_t to)
{
    size_t n = to - from;
    if (n > st->rows_cap) {
        cis2_row *r = realloc(st->rows, n * sizeof *r);
        if (!r) return -1;
        st->rows = r;
        st->rows_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        st->rows[i] = (cis2_row){.kv = &st->kv, .pos = from + i, .token = tok[i],
                                 .logits = i + 1 == n ? st->logits : NULL};
    cis2_error e;
    if (cis2_forward(cx, &d->m, &st->ws, st->rows, n, NULL, NULL, &e)) return -1;
    memcpy(st->fed + from, tok, n * sizeof *tok);
    st->nfed = to;
    return 0;
}

size_t cis2_dmodel_draft(const cis2_ctx *cx, const cis2_dmodel *d, cis2_dstate *st, const uint32_t *a, size_t na,
                         const uint32_t *b, size_t nb, size_t cap, size_t k, uint32_t *out)
{
    size_t n = na + nb;
    if (st->cap && st->model_id != d->id) cis2_dstate_free(st); /* made for another draft model */
    if (st->broken || !n || !k || n + k - 1 > cap) return 0;
    if (!st->cap && setup(d, st, cap)) goto broken;
    if (cap > st->cap) return 0; /* the sequence's positions never grow past its first cap */
    /* the cached tokens that still match the context; the last context
     * token is fed again in any case (its logits start the draft) */
    size_t keep = 0;
    while (keep < st->nfed && keep < n - 1 && st->fed[keep] == (keep < na ? a[keep] : b[keep - na])) keep++;
    if (d->m.state_floats && keep != st->kv.state_pos) keep = 0; /* a recurrent state holds all it was fed: from 0 */
    for (size_t p = keep; p < n; p++) { /* the context's rest, in two pieces: prompt part, generated part */
        size_t q = p < na ? (na < n ? na : n) : n;
        if (feed(cx, d, st, p < na ? a + p : b + (p - na), p, q)) goto broken;
        p = q - 1;
    }
    size_t got = 0;
    for (;;) {
        uint32_t t = (uint32_t)cis2_argmax_lanes(cx, st->logits, d->m.vocab); /* §11.2 on the draft's logits */
        out[got++] = t;
        if (got == k) break;
        if (feed(cx, d, st, &t, n + got - 1, n + got)) goto broken;
    }
    return got;
broken:
    st->broken = 1;
    return 0;
}

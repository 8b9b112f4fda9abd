/*
 * sample.c - choosing a step's token by docs/sampling.md (cited §S..):
 * greedy (§S3.2), the candidate order (§S3.3), the filters (§S3.4),
 * Philox4x32-10 (§S3.5), the inverse-CDF draw (§S3.6) and logprobs
 * (§S4).  Every float operation is one separately rounded binary32
 * operation in the order written there, or a pinned function of the spec
 * (exp_pinned, ln_pinned, sum_seq, argmax: pmath.h); callers run inside
 * an API frame or on a pinned worker (§1.3), so comparisons and
 * arithmetic see FTZ/DAZ as §S1.2 requires.
 *
 * The candidate order is a strict total order (logit descending, ties by
 * id ascending), so any correct sort gives it; this one is an LSD radix
 * sort of the logits' order-preserving integer keys (stable, so ids stay
 * ascending among equal keys), a few passes over the vocabulary instead
 * of a comparison sort's V log V comparisons.  Keys map every zero and
 * subnormal to +0.0's key first (§S1.2: they compare equal under DAZ).
 */
#include "sample.h"
#include "kernels.h"
#include "pmath.h"
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

#define F_ONE 0x3F800000u
#define TWO_M24 0x33800000u

/* ------------------------------------------------------------ Philox */

static void philox_round(uint32_t c[4], const uint32_t k[2]) /* §S3.5.1 */
{
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k[0];
    uint32_t n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k[1];
    uint32_t n3 = (uint32_t)p0;
    c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
}

void cis2_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) /* §S3.5.2 */
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        philox_round(c, k);
        if (r < 9) {
            k[0] = k[0] + 0x9E3779B9u;
            k[1] = k[1] + 0xBB67AE85u;
        }
    }
    memcpy(out, c, sizeof c);
}

/* -------------------------------------------------------- parameters */

static uint32_t bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

int cis2_sampling_greedy(const cis2_sampling *p) /* §S2.4 */
{
    return bits(p->temperature) == 0 || p->top_k == 1;
}

/* §S2.2 on the bit patterns, exactly: nothing outside the valid sets is
 * clamped or taken as "off".  top_p is 0x00800000..0x3F800000, so +0.0,
 * -0.0 and subnormals are refused here; "off" is 1.0 only. */
int cis2_sampling_check(const cis2_sampling *p, size_t V, cis2_error *err)
{
    uint32_t t = bits(p->temperature), tp = bits(p->top_p), mp = bits(p->min_p);
    if (t != 0 && (t < 0x00800000u || t > 0x7F7FFFFFu))
        return cis2_fail(err, CIS2_E_USAGE,
                         "temperature 0x%08x is not +0 or a positive normal finite number (docs/sampling.md §S2.2)", t);
    if (tp < 0x00800000u || tp > F_ONE)
        return cis2_fail(err, CIS2_E_USAGE,
                         "top_p 0x%08x is not in (0, 1] (a positive normal; 1.0 is off; docs/sampling.md §S2.2)", tp);
    if (mp != 0 && (mp < 0x1F800000u || mp > F_ONE))
        return cis2_fail(err, CIS2_E_USAGE, "min_p 0x%08x is not 0 or in [2^-64, 1] (§S2.2)", mp);
    if (p->top_k > V)
        return cis2_fail(err, CIS2_E_USAGE, "top_k %u is larger than the vocabulary (%zu)", p->top_k, V);
    return CIS2_OK;
}

/* ------------------------------------------------------ scratch, sort */

void cis2_sample_ws_free(cis2_sample_ws *ws)
{
    free(ws->ids); free(ws->items); free(ws->itmp); free(ws->w); free(ws->keep);
    memset(ws, 0, sizeof *ws);
}

static int ws_reserve(cis2_sample_ws *ws, size_t V)
{
    if (ws->cap >= V) return 0;
    cis2_sample_ws_free(ws);
    size_t n = V ? V : 1;
    ws->ids = malloc(n * sizeof *ws->ids);
    ws->items = malloc(n * sizeof *ws->items);
    ws->itmp = malloc(n * sizeof *ws->itmp);
    ws->w = malloc(n * sizeof *ws->w);
    ws->keep = malloc(n);
    if (!ws->ids || !ws->items || !ws->itmp || !ws->w || !ws->keep) { cis2_sample_ws_free(ws); return -1; }
    ws->cap = V;
    return 0;
}

/* Ascending keys give descending logits (§S3.3); zeros and subnormals are
 * +0.0 (§S1.2).  Without branches: a logit's sign is a coin toss, and a
 * branch on it mispredicted half the time (two thirds of the sort's time). */
static uint32_t desc_key(float x)
{
    uint32_t b = bits(x);
    b &= -(uint32_t)((b & 0x7F800000u) != 0);   /* ±0, subnormal: +0.0 */
    uint32_t neg = (uint32_t)-(int32_t)(b >> 31); /* all ones for a negative */
    return b ^ (~neg & 0x7FFFFFFFu);            /* negative: b; else b with 31 bits flipped */
}

/* The candidates (non-NaN ids) in candidate order into ws->ids; returns n.
 * Items are key << 32 | id, sorted on the key's three digits of 11, 11
 * and 10 bits, each pass stable, so ids stay ascending among equal keys.
 * One pass over the logits makes the items and all three histograms (the
 * top digit's in two halves: it takes few values, and a run of increments
 * of one counter waits on each store). */
static size_t candidate_order(const float *x, size_t V, cis2_sample_ws *ws)
{
    uint64_t *a = ws->items, *b = ws->itmp;
    uint32_t count[4][2048];
    memset(count, 0, sizeof count);
    size_t n = 0;
    for (size_t i = 0; i < V; i++) {
        uint32_t k = desc_key(x[i]), ok = x[i] == x[i];
        a[n] = (uint64_t)k << 32 | i; /* kept only if ok */
        count[0][k & 0x7FF] += ok;
        count[1][(k >> 11) & 0x7FF] += ok;
        count[2 + (i & 1)][k >> 22] += ok;
        n += ok;
    }
    for (int d = 0; d < 2048; d++) count[2][d] += count[3][d];
    for (int pass = 0; pass < 3 && n; pass++) {
        int s = 32 + 11 * pass;
        uint32_t *c = count[pass];
        if (c[(a[0] >> s) & 0x7FF] == n) continue; /* one digit: already in order */
        uint32_t sum = 0;
        for (int d = 0; d < 2048; d++) { uint32_t t = c[d]; c[d] = sum; sum += t; }
        for (size_t i = 0; i < n; i++) b[c[(a[i] >> s) & 0x7FF]++] = a[i];
        uint64_t *t = a; a = b; b = t;
    }
    for (size_t i = 0; i < n; i++) ws->ids[i] = (uint32_t)a[i];
    return n;
}

/* ---------------------------------------------------------- one step */

int cis2_sample_step(const cis2_ctx *cx, const float *x, size_t V, const cis2_sampling *p, uint32_t step,
                     cis2_sample_ws *ws, uint32_t *token, cis2_sample_info *info)
{
    cis2_sample_info dummy;
    cis2_sample_info *in = info ? info : &dummy;
    memset(in, 0, sizeof *in);
    if (cis2_sampling_greedy(p)) { /* §S3.2: §11.2 exactly */
        in->greedy = 1;
        *token = (uint32_t)cis2_argmax_lanes(cx, x, V); /* the variant's lanes, argmax's index */
        return CIS2_OK;
    }
    if (ws_reserve(ws, V)) return CIS2_E_NOMEM;
    size_t n = candidate_order(x, V, ws); /* §S3.3 */
    in->n_candidates = n;
    if (n == 0) { *token = (uint32_t)argmax(x, V); return CIS2_OK; }
    const uint32_t *c = ws->ids;
    size_t K = p->top_k > 0 && p->top_k < n ? p->top_k : n; /* §S3.4.1 */
    in->n_after_top_k = K;
    float m = x[c[0]], T = p->temperature, *w = ws->w; /* §S3.4.2 */
    for (size_t j = 0; j < K; j++) {
        float xj = x[c[j]];
        float d = xj == m ? 0.0f : xj - m;
        w[j] = d / T; /* z */
    }
    cis2_exp_n(cx, w, w, K); /* w = exp_pinned(z): the scalar bits in the kernel's lanes */
    float S = sum_seq(w, K);
    size_t F = K; /* §S3.4.3 top-p: a prefix */
    if (bits(p->top_p) != F_ONE) { /* checked: in (0, 1], §S2.2 */
        float tp = p->top_p, acc = 0.0f;
        for (size_t j = 0; j < K; j++) {
            float pj = w[j] / S;
            acc = acc + pj;
            if (acc >= tp) { F = j + 1; break; }
        }
    }
    in->n_after_top_p = F;
    unsigned char *keep = ws->keep;
    memset(keep, 1, F);
    size_t kept = F;
    if (bits(p->min_p) != 0) { /* §S3.4.4: each candidate on its own */
        float p_first = w[0] / S;
        float t = p->min_p * p_first;
        for (size_t j = 0; j < F; j++) {
            float pj = w[j] / S;
            keep[j] = j == 0 || pj >= t;
            kept -= !keep[j];
        }
    }
    in->n_kept = kept;
    float Sp = 0.0f; /* §S3.4.5, sum_seq over the kept in order */
    for (size_t j = 0; j < F; j++)
        if (keep[j]) Sp = Sp + w[j];
    uint32_t key[2] = {(uint32_t)p->seed, (uint32_t)(p->seed >> 32)}; /* §S3.5.3 */
    uint32_t ctr[4] = {step, p->sequence, 0, 0}, out[4];
    cis2_philox4x32_10(ctr, key, out);
    float two_m24;
    uint32_t tb = TWO_M24;
    memcpy(&two_m24, &tb, 4);
    float u = (float)(out[0] >> 8) * two_m24; /* exact */
    float target = u * Sp; /* §S3.6 */
    float acc = 0.0f;
    size_t last = 0;
    int chosen = 0;
    for (size_t j = 0; j < F; j++) {
        if (!keep[j]) continue;
        last = j;
        acc = acc + w[j];
        if (target < acc) { *token = c[j]; chosen = 1; break; }
    }
    if (!chosen) *token = c[last];
    in->drew = 1;
    memcpy(in->philox_out, out, sizeof out);
    in->u = u;
    in->S = S;
    in->S_prime = Sp;
    in->target = target;
    return CIS2_OK;
}

/* ------------------------------------------------------------ logprobs */

/* a before b in candidate order (§S3.3) */
static int before(const float *x, uint32_t a, uint32_t b)
{
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

/* §S4's two passes over a row, 4 lanes of GCC vectors (SSE2 or NEON:
 * whatever the build's baseline ISA has), since a score figures every
 * row: only comparisons, selects and one subtraction per logit, each a
 * single IEEE operation under the same FTZ/DAZ as the scalar form, so the
 * bits are the scalar loop's. */
typedef float lp_vf __attribute__((vector_size(16)));
typedef int32_t lp_vi __attribute__((vector_size(16)));
#define LP_L 4

static lp_vf lp_load(const float *p)
{
    lp_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The largest non-NaN logit (-inf if none) and the count of non-NaN
 * ones.  Only M's value matters to §S4 (M = the first candidate's
 * logit): among equal logits only +0 and -0 differ in bits, and both give
 * every d and every logprob the same bits (x - (+0) = x - (-0) = x for x
 * != 0; x == M picks 0 for both zeros). */
static float max_not_nan(const float *x, size_t V, size_t *n_ok)
{
    float M = -__builtin_inff();
    size_t i = 0, ok = 0;
    if (V >= LP_L) {
        lp_vf bv = {0};
        lp_vi cnt = {0};
        for (int l = 0; l < LP_L; l++) bv[l] = M;
        for (; i + LP_L <= V; i += LP_L) {
            lp_vf v = lp_load(x + i);
            lp_vi gt = v > bv; /* false for NaN */
            bv = (lp_vf)((gt & (lp_vi)v) | (~gt & (lp_vi)bv));
            cnt -= v == v; /* -1 for a non-NaN lane */
        }
        for (int l = 0; l < LP_L; l++) {
            if (bv[l] > M) M = bv[l];
            ok += (size_t)cnt[l];
        }
    }
    for (; i < V; i++) {
        if (x[i] > M) M = x[i];
        ok += x[i] == x[i];
    }
    *n_ok = ok;
    return M;
}

/* d[i] = x[i] == M ? 0 : x[i] - M for a row with no NaN (§S4). */
static void shift_by_max(const float *x, size_t V, float M, float *d)
{
    size_t i = 0;
    lp_vf mv = {0};
    for (int l = 0; l < LP_L; l++) mv[l] = M;
    for (; i + LP_L <= V; i += LP_L) {
        lp_vf v = lp_load(x + i);
        lp_vi eq = v == mv;
        lp_vf t = (lp_vf)(~eq & (lp_vi)(v - mv)); /* §S4: one subtraction; 0 where x == M */
        memcpy(d + i, &t, sizeof t);
    }
    for (; i < V; i++) d[i] = x[i] == M ? 0.0f : x[i] - M;
}

/* The count of x[a..b) that are >= t (ge) or > t; a NaN compares false. */
static size_t count_above(const float *x, size_t a, size_t b, float t, int ge)
{
    size_t n = 0, i = a;
    lp_vi cnt = {0};
    lp_vf tv = {0};
    for (int l = 0; l < LP_L; l++) tv[l] = t;
    if (ge)
        for (; i + LP_L <= b; i += LP_L) cnt -= lp_load(x + i) >= tv;
    else
        for (; i + LP_L <= b; i += LP_L) cnt -= lp_load(x + i) > tv;
    for (int l = 0; l < LP_L; l++) n += (size_t)cnt[l];
    for (; i < b; i++) n += ge ? x[i] >= t : x[i] > t;
    return n;
}

uint32_t cis2_candidate_rank(const float *x, size_t V, uint32_t token) /* §S3.3 */
{
    float t = x[token];
    if (t != t) return 0;
    /* before token: ids below it with a logit >= its, ids above it with one > */
    return (uint32_t)(1 + count_above(x, 0, token, t, 1) + count_above(x, (size_t)token + 1, V, t, 0));
}

int cis2_logprobs(const cis2_ctx *cx, const float *x, size_t V, uint32_t token, size_t top_n, cis2_sample_ws *ws,
                  float *lp, uint32_t *top_ids, float *top_lp, size_t *n_top)
{
    float qnan;
    uint32_t qb = CIS2_QNAN_BITS;
    memcpy(&qnan, &qb, 4);
    *n_top = 0;
    if (ws_reserve(ws, V)) return CIS2_E_NOMEM;
    size_t n_ok;
    float M = max_not_nan(x, V, &n_ok); /* §S4: the first candidate's logit */
    if (n_ok == 0) { /* every logit NaN */
        *lp = qnan;
        return CIS2_OK;
    }
    /* top_n candidates by a small insertion list: the first of candidate order */
    size_t nn = 0;
    for (size_t i = 0; i < V && top_n; i++) {
        if (x[i] != x[i]) continue;
        uint32_t id = (uint32_t)i;
        if (nn == top_n && !before(x, id, top_ids[nn - 1])) continue;
        size_t at = nn < top_n ? nn++ : nn - 1;
        while (at > 0 && before(x, id, top_ids[at - 1])) { top_ids[at] = top_ids[at - 1]; at--; }
        top_ids[at] = id;
    }
    float *d = ws->w; /* §S4 */
    size_t k = 0;
    if (n_ok == V) {
        shift_by_max(x, V, M, d);
        k = V;
    } else
        for (size_t i = 0; i < V; i++)
            if (x[i] == x[i]) d[k++] = x[i] == M ? 0.0f : x[i] - M;
    cis2_exp_n(cx, d, d, k); /* §6.2, the scalar bits */
    float E = sum_seq(d, k); /* vocab order, NaN ids skipped */
    float L = ln_pinned(E);
#define LOGPROB(i) (x[i] != x[i] ? qnan : ((x[i] == M ? 0.0f : x[i] - M) - L))
    *lp = LOGPROB(token);
    for (size_t j = 0; j < nn; j++) top_lp[j] = LOGPROB(top_ids[j]);
#undef LOGPROB
    *n_top = nn;
    return CIS2_OK;
}

/* ------------------------------------------------------------- stops */

void cis2_stop_state_free(cis2_stop_state *st)
{
    free(st->tail);
    memset(st, 0, sizeof *st);
}

static int in_list(const uint32_t *v, size_t n, uint32_t t)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == t) return 1;
    return 0;
}

int cis2_stop_after(const cis2_stop_rule *r, cis2_stop_state *st, size_t step, uint32_t token, const uint8_t *bytes,
                    size_t len)
{
    if (r->eos && in_list(r->eos, r->n_eos, token)) return CIS2_FINISH_EOS;   /* 1 */
    if (in_list(r->ids, r->n_ids, token)) return CIS2_FINISH_STOP_ID;        /* 2 */
    if (r->n_strings) {                                                       /* 3 */
        size_t maxq = 0;
        for (size_t i = 0; i < r->n_strings; i++) maxq = r->lens[i] > maxq ? r->lens[i] : maxq;
        size_t keep = maxq > 1 ? maxq - 1 : 0; /* earlier bytes an occurrence can use */
        if (st->tail_len > keep) {
            memmove(st->tail, st->tail + st->tail_len - keep, keep);
            st->tail_len = keep;
        }
        if (st->tail_len + len > st->cap) {
            size_t cap = st->tail_len + len + 64;
            uint8_t *nt = realloc(st->tail, cap);
            if (!nt) return -1;
            st->tail = nt;
            st->cap = cap;
        }
        if (len) memcpy(st->tail + st->tail_len, bytes, len); /* a token may have no bytes */
        size_t prev = st->tail_len; /* b, relative to the tail */
        st->tail_len += len;
        uint64_t base = st->total - prev; /* offset of tail[0] in B */
        st->total += len;
        int found = 0;
        uint64_t first = 0;
        for (size_t i = 0; i < r->n_strings; i++) {
            size_t q = r->lens[i];
            if (q > st->tail_len) continue;
            size_t j0 = prev + 1 > q ? prev + 1 - q : 0; /* j + q > b */
            for (size_t j = j0; j + q <= st->tail_len; j++)
                if (!memcmp(st->tail + j, r->strings[i], q)) {
                    if (!found || base + j < first) first = base + j;
                    found = 1;
                    break;
                }
        }
        if (found) { st->cut = first; return CIS2_FINISH_STOP_STRING; }
    }
    if (step + 1 == r->max_tokens) return CIS2_FINISH_LENGTH;              /* 4 */
    return CIS2_FINISH_NONE;
}

/* ------------------------------------------------------ params block */

static void putf(cis2_sb *b, const char *key, const char *fmt, unsigned long long v)
{
    char t[64];
    int n = snprintf(t, sizeof t, "%s ", key);
    cis2_sb_put(b, t, (size_t)n);
    n = snprintf(t, sizeof t, fmt, v);
    cis2_sb_put(b, t, (size_t)n);
    cis2_sb_put(b, "\n", 1);
}

static void put_csv(cis2_sb *b, const char *key, const uint32_t *v, size_t n)
{
    cis2_sb_str(b, key);
    cis2_sb_put(b, " ", 1);
    if (!n) cis2_sb_put(b, "none", 4);
    cis2_sb_csv(b, v, n);
    cis2_sb_put(b, "\n", 1);
}

char *cis2_params_block(const cis2_sampling *p, const cis2_stop_rule *r) /* §S7.5 */
{
    cis2_sb b = {0};
    putf(&b, "max-toks", "%llu", (unsigned long long)r->max_tokens);
    cis2_sb_put(&b, cis2_sampling_greedy(p) ? "sampler greedy\n" : "sampler philox4x32-10\n",
        cis2_sampling_greedy(p) ? 15 : 22);
    putf(&b, "temperature", "%08llx", bits(p->temperature));
    putf(&b, "top-k", "%llu", p->top_k);
    putf(&b, "top-p", "%08llx", bits(p->top_p));
    putf(&b, "min-p", "%08llx", bits(p->min_p));
    putf(&b, "seed", "%llu", (unsigned long long)p->seed);
    putf(&b, "sequence", "%llu", p->sequence);
    put_csv(&b, "stop-eos", r->eos, r->eos ? r->n_eos : 0);
    put_csv(&b, "stop-ids", r->ids, r->n_ids);
    cis2_sb_put(&b, "stop-strings ", 13);
    if (!r->n_strings) cis2_sb_put(&b, "none", 4);
    for (size_t i = 0; i < r->n_strings; i++) {
        if (i) cis2_sb_put(&b, ",", 1);
        cis2_sb_hex(&b, (const uint8_t *)r->strings[i], r->lens[i]);
    }
    cis2_sb_put(&b, "\n", 1);
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}

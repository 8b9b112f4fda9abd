/*
 * share.c - shared prompt prefixes (share.h): the plan and the take.
 * Called by prefill.c: the plan before the first pass, the take between
 * passes; nothing here computes a float.
 */
#include "share.h"

#include <stdlib.h>

static size_t common_prefix(const cis2_share *a, const cis2_share *b)
{
    size_t n = a->len < b->len ? a->len : b->len, i = 0;
    while (i < n && a->ids[i] == b->ids[i]) i++;
    return i;
}

/* Skipped jobs last, in the caller's order; the others by their ids. */
static int by_ids(const void *pa, const void *pb)
{
    const cis2_share *a = *(cis2_share *const *)pa, *b = *(cis2_share *const *)pb;
    if (a->skip != b->skip) return a->skip ? 1 : -1;
    if (a->skip) return a->index < b->index ? -1 : a->index > b->index;
    size_t i = common_prefix(a, b);
    if (i < a->len && i < b->len) return a->ids[i] < b->ids[i] ? -1 : 1;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index; /* the caller's order among equals */
}

void cis2_share_plan(cis2_share **ord, size_t n, size_t min)
{
    size_t k = 0; /* the jobs that run: ord[0..k) once sorted */
    for (size_t i = 0; i < n; i++) {
        ord[i]->donor = NULL;
        ord[i]->shared = 0;
        k += !ord[i]->skip;
    }
    qsort(ord, n, sizeof *ord, by_ids);
    for (size_t a = 0, b; a < k; a = b) {
        size_t top = a; /* the run [a, b) and its longest */
        for (b = a + 1; b < k && common_prefix(ord[b - 1], ord[b]) >= min; b++)
            if (ord[b]->len > ord[top]->len) top = b;
        cis2_share *d = ord[top];
        ord[top] = ord[a];
        ord[a] = d;
        for (size_t i = a + 1; i < b; i++) {
            cis2_share *j = ord[i];
            size_t c = common_prefix(d, j);
            if (c > j->cap) c = j->cap;
            if (c > d->cap) c = d->cap;
            if (c >= min && c > 0) {
                j->donor = d;
                j->shared = c;
            }
        }
    }
}

int cis2_share_take(cis2_share *s, int donor_live, size_t donor_next, cis2_kv *dst, const cis2_kv *src,
                    const cis2_model *m)
{
    if (!s->donor) return 0;
    /* A recurrent state (model.h, state_floats) is its whole sequence's, not a prefix's: such a model computes
     * every row itself. */
    if (!donor_live || m->state_floats) { s->donor = NULL; return 0; }
    if (donor_next < s->shared) return 0;
    cis2_kv_copy_prefix(dst, src, m, s->shared);
    s->donor = NULL;
    return 1;
}

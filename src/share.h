/*
 * share.h - shared prompt prefixes, planned once for every caller that
 * batches independent sequences through prefill: the prefill planner
 * (prefill.c), for scoring (score.c) and verification (verify.c, whose
 * sharing rule is verify_plan.c's).  docs/inputs.md "Memory" and
 * docs/sampling.md §S11.4 say what it saves; nothing here computes a float.
 *
 * Sequences that begin with the same ids have the same keys and values
 * over those positions (spec §3.5: a position's KV is a function of the
 * tokens up to it), so a batch computes them once.  Sorted by their ids,
 * jobs fall into runs whose neighbours share at least `min` leading ids; a
 * run's longest is its donor and is admitted first; every other job of
 * the run that shares `min` ids with it waits until the donor has
 * computed them, copies them (cis2_kv_copy_prefix) and goes on from
 * there.  Only positions that give no logits the job reports are shared
 * (each job says how many: `cap`), so its rows, hashing and results are
 * its own, and every row computed is the same arithmetic as without
 * sharing: the plan changes the time, never a bit.
 */
#ifndef CIS2_SHARE_H
#define CIS2_SHARE_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

/* One job as the planner sees it: set ids, len, cap, index, skip and
 * job; cis2_share_plan sets donor and shared. */
typedef struct cis2_share {
    const uint32_t *ids;       /* the job's first ids: its prompt (or context) */
    size_t len;                /* how many; sorted and grouped by ids[0..len) */
    size_t cap;                /* at most this many positions may come from a donor */
    size_t index;              /* the caller's order among equal ids */
    int skip;                  /* not run: admitted last, never a donor */
    void *job;                 /* the caller's job */
    struct cis2_share *donor;  /* NULL, or the job whose cache holds [0, shared) first */
    size_t shared;
} cis2_share;

/* ord[0..n) (each job's cis2_share) reordered into admission order, the
 * donors and their shares set.  Jobs with skip go last, in their order. */
void cis2_share_plan(cis2_share **ord, size_t n, size_t min);

/* Between passes, for a job admitted and waiting on its donor: donor_live
 * (the donor still runs and holds its cache) and donor_next (the positions
 * its passes have computed).  Copies [0, shared) from src to dst and
 * returns 1 once the donor holds them (the job goes on at `shared`);
 * returns 0 to wait; drops the donor (0, donor NULL: the job computes
 * every row itself) when it has stopped. */
int cis2_share_take(cis2_share *s, int donor_live, size_t donor_next, cis2_kv *dst, const cis2_kv *src,
                    const cis2_model *m);

#endif

/*
 * trace_diff.c - cis2_trace_diff (include/cis2.h section 8): where two
 * traces ("CIS-2-TRACE v1", trace.h) of runs first diverge.  Walks both in
 * computation order; the first record whose structure (step, position,
 * layer, tensor, count) differs means another shape, prompt or decode mode;
 * the first whose hash differs is the first divergence, and with two dump
 * traces its values are read (each checked against its line's hash by
 * cis2_trace_values) to name the first differing element and how many
 * differ.  The report is a verdict whose fields (status NOTE) are the
 * lines "KEY: DETAIL" of `cis2 diff`.
 */
#include "trace.h"
#include "verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rec_name(const cis2_trace_rec *r, char *out, size_t cap)
{
    snprintf(out, cap, "step %u pos %u layer %d tensor %s (n=%llu)", r->step, r->pos, r->layer, r->tensor,
             (unsigned long long)r->n);
}

static int elements(cis2_verdict *v, const cis2_trace *a, const cis2_trace *b, size_t i, cis2_error *err)
{
    float *va = NULL, *vb = NULL;
    if (cis2_trace_values(a, i, &va, err) || cis2_trace_values(b, i, &vb, err)) {
        free(va);
        return err->code;
    }
    size_t first = SIZE_MAX, count = 0;
    for (size_t e = 0; e < a->rec[i].n; e++) {
        uint32_t ua, ub;
        memcpy(&ua, &va[e], 4);
        memcpy(&ub, &vb[e], 4);
        if (ua != ub) { if (first == SIZE_MAX) first = e; count++; }
    }
    if (first != SIZE_MAX) {
        uint32_t ua, ub;
        memcpy(&ua, &va[first], 4);
        memcpy(&ub, &vb[first], 4);
        cis2_vd_field(v, "first differing element", CIS2_FIELD_NOTE, "index %zu: A=0x%08x (%.9g) B=0x%08x (%.9g)",
                      first, ua, (double)va[first], ub, (double)vb[first]);
        cis2_vd_field(v, "differing elements", CIS2_FIELD_NOTE, "%zu of %llu", count, (unsigned long long)a->rec[i].n);
    }
    free(va);
    free(vb);
    return CIS2_OK;
}

int cis2_trace_diff(const char *path_a, const char *path_b, cis2_verdict **out, cis2_error *err)
{
    *out = NULL;
    cis2_trace a, b;
    if (cis2_trace_load(&a, path_a, err)) return err ? err->code : CIS2_E_FORMAT;
    if (cis2_trace_load(&b, path_b, err)) { cis2_trace_free(&a); return err ? err->code : CIS2_E_FORMAT; }
    cis2_verdict *v = calloc(1, sizeof *v);
    int rc = CIS2_OK;
    if (!v || cis2_vd_init(v, "")) { free(v); v = NULL; rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
    size_t n = a.n < b.n ? a.n : b.n, i;
    char na[160], nb[160];
    int diverged = 1;
    for (i = 0; i < n; i++) {
        const cis2_trace_rec *x = &a.rec[i], *y = &b.rec[i];
        if (x->step != y->step || x->pos != y->pos || x->layer != y->layer || strcmp(x->tensor, y->tensor) ||
            x->n != y->n) {
            rec_name(x, na, sizeof na);
            rec_name(y, nb, sizeof nb);
            cis2_vd_field(v, "identical", CIS2_FIELD_NOTE, "%zu tensors", i);
            cis2_vd_field(v, "", CIS2_FIELD_NOTE,
                          "structure differs at A line %zu / B line %zu: A has %s, B has %s (different model shape, "
                          "prompt or decode mode)",
                          x->line, y->line, na, nb);
            goto done;
        }
        if (memcmp(x->sha, y->sha, 32)) break;
    }
    if (i == n) {
        if (a.n == b.n) {
            cis2_vd_field(v, "identical", CIS2_FIELD_NOTE, "all %zu tensors", n);
            diverged = 0;
        } else {
            cis2_vd_field(v, "identical", CIS2_FIELD_NOTE, "%zu tensors", n);
            cis2_vd_field(v, "", CIS2_FIELD_NOTE, "%s has %zu more tensors (a longer decode)", a.n > b.n ? "A" : "B",
                          a.n > b.n ? a.n - n : b.n - n);
        }
        goto done;
    }
    rec_name(&a.rec[i], na, sizeof na);
    cis2_vd_field(v, "identical", CIS2_FIELD_NOTE, "%zu tensors", i);
    cis2_vd_field(v, "first difference", CIS2_FIELD_NOTE, "%s (A line %zu, B line %zu)", na, a.rec[i].line,
                  b.rec[i].line);
    if (!a.dump || !b.dump)
        cis2_vd_field(v, "element values unavailable", CIS2_FIELD_NOTE, "%s written without --trace-dump",
                      !a.dump && !b.dump ? "both traces" : !a.dump ? "trace A" : "trace B");
    else if ((rc = elements(v, &a, &b, i, err)))
        goto out;
done:
    if (diverged) cis2_vd_set(v, CIS2_VERDICT_DIVERGED, CIS2_E_MISMATCH, "DIVERGED", NULL);
    else cis2_vd_set(v, CIS2_VERDICT_IDENTICAL, CIS2_OK, "IDENTICAL", NULL);
    rc = cis2_vd_finish(v, err);
out:
    cis2_trace_free(&a);
    cis2_trace_free(&b);
    if (rc) { cis2_verdicts_free(v, 1); return rc; }
    *out = v;
    return CIS2_OK;
}

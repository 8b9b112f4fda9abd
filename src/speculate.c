/*
 * speculate.c - prompt-lookup drafting (speculate.h, docs/speculate.md).
 * Not part of the spec's arithmetic: a draft is a guess that session.c
 * verifies row by row against the model's own choice of each step.
 */
#include "speculate.h"

#include <stdlib.h>
#include <string.h>

/* A draft length K: digits only, 1..16. */
static int parse_k(const char *p, unsigned *k, cis2_error *err)
{
    char *end;
    unsigned long x = (*p >= '0' && *p <= '9') ? strtoul(p, &end, 10) : 0;
    if (*p < '0' || *p > '9' || *end || x < 1 || x > CIS2_SPEC_K_MAX)
        return cis2_fail(err, CIS2_E_USAGE, "speculate: draft length '%s' is not 1..%d", p, CIS2_SPEC_K_MAX);
    *k = (unsigned)x;
    return CIS2_OK;
}

/* "draft:DIR" or "draft:DIR:K": K is the part after the last ':' when it
 * is all digits (a directory whose name ends in ":digits" needs ":K"). */
static int parse_draft(const char *rest, unsigned *k, char **dir, cis2_error *err)
{
    const char *c = strrchr(rest, ':');
    size_t n = strlen(rest);
    if (c && c[1] && strspn(c + 1, "0123456789") == strlen(c + 1)) {
        int rc = parse_k(c + 1, k, err);
        if (rc) return rc;
        n = (size_t)(c - rest);
    }
    if (!n) return cis2_fail(err, CIS2_E_USAGE, "speculate: 'draft:' needs a model directory (draft:DIR or draft:DIR:K)");
    if (!(*dir = strndup(rest, n))) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    return CIS2_OK;
}

int cis2_spec_parse(const char *spec, int *kind, unsigned *k, char **dir, cis2_error *err)
{
    *kind = CIS2_SPEC_OFF;
    *k = 0;
    *dir = NULL;
    if (!spec || !strcmp(spec, "off")) return CIS2_OK;
    unsigned v = CIS2_SPEC_K_DEFAULT;
    int rc;
    if (!strncmp(spec, "draft:", 6)) {
        if ((rc = parse_draft(spec + 6, &v, dir, err))) return rc;
        *kind = CIS2_SPEC_DRAFT;
        *k = v;
        return CIS2_OK;
    }
    if (strncmp(spec, "lookup", 6) || (spec[6] && spec[6] != ':'))
        return cis2_fail(err, CIS2_E_USAGE, "speculate: '%s' is not off, lookup, lookup:K, draft:DIR or draft:DIR:K",
                         spec);
    if (spec[6] == ':' && (rc = parse_k(spec + 7, &v, err))) return rc;
    *kind = CIS2_SPEC_LOOKUP;
    *k = v;
    return CIS2_OK;
}

static uint32_t at(const uint32_t *a, size_t na, const uint32_t *b, size_t i) { return i < na ? a[i] : b[i - na]; }

size_t cis2_spec_lookup(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, size_t k, uint32_t *out)
{
    size_t L = na + nb;
    for (size_t n = L > 3 ? 3 : L - (L > 0); n >= 1; n--) {
        /* j: start of an earlier occurrence of ctx[L-n, L), latest first */
        for (size_t j = L - n; j-- > 0;) {
            size_t t = 0;
            while (t < n && at(a, na, b, j + t) == at(a, na, b, L - n + t)) t++;
            if (t < n) continue;
            size_t d = 0;
            for (size_t p = j + n; p < L && d < k; p++) out[d++] = at(a, na, b, p);
            return d;
        }
    }
    return 0;
}

/*
 * verdict.c - the verdict builder (verdict.h).  A verdict owns its field
 * array and every string it points to (a list of heap strings in priv).
 */
#include "verdict.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cis2_verdict_priv {
    cis2_field *fields;
    size_t cap;
    char **strs;
    size_t ns, scap;
    int oom;
};

static const char *keep(cis2_verdict *v, char *s)
{
    struct cis2_verdict_priv *p = v->priv;
    if (!s) { p->oom = 1; return ""; }
    if (p->ns == p->scap) {
        size_t cap = p->scap ? 2 * p->scap : 32;
        char **n = realloc(p->strs, cap * sizeof *n);
        if (!n) { free(s); p->oom = 1; return ""; }
        p->strs = n;
        p->scap = cap;
    }
    p->strs[p->ns++] = s;
    return s;
}

static char *vfmt(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

int cis2_vd_init(cis2_verdict *v, const char *source)
{
    memset(v, 0, sizeof *v);
    v->first_bad_step = -1;
    if (!(v->priv = calloc(1, sizeof *v->priv))) return CIS2_E_NOMEM;
    v->name = v->summary = "";
    v->source = keep(v, strdup(source ? source : ""));
    return CIS2_OK;
}

void cis2_vd_field(cis2_verdict *v, const char *key, int status, const char *fmt, ...)
{
    struct cis2_verdict_priv *p = v->priv;
    if (p->oom) return;
    if (v->n_fields == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        cis2_field *n = realloc(p->fields, cap * sizeof *n);
        if (!n) { p->oom = 1; return; }
        p->fields = n;
        p->cap = cap;
        v->fields = n;
    }
    va_list ap;
    va_start(ap, fmt);
    char *d = vfmt(fmt, ap);
    va_end(ap);
    cis2_field *f = &p->fields[v->n_fields];
    f->key = keep(v, strdup(key));
    f->status = status;
    f->detail = keep(v, d);
    if (!p->oom) v->n_fields++;
}

void cis2_vd_set(cis2_verdict *v, int kind, int code, const char *name, const char *fmt, ...)
{
    v->kind = kind;
    v->code = code;
    v->name = keep(v, strdup(name));
    if (!fmt) {
        v->summary = v->name;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char *d = vfmt(fmt, ap);
    va_end(ap);
    size_t n = strlen(name) + (d ? strlen(d) : 0) + 2;
    char *s = d ? malloc(n) : NULL;
    if (s) snprintf(s, n, "%s %s", name, d);
    free(d);
    v->summary = keep(v, s);
}

int cis2_vd_finish(cis2_verdict *v, cis2_error *err)
{
    return v->priv->oom ? cis2_fail(err, CIS2_E_NOMEM, "out of memory") : CIS2_OK;
}

void cis2_vd_clear(cis2_verdict *v)
{
    struct cis2_verdict_priv *p = v->priv;
    if (p) {
        for (size_t i = 0; i < p->ns; i++) free(p->strs[i]);
        free(p->strs);
        free(p->fields);
        free(p);
    }
    memset(v, 0, sizeof *v);
}

void cis2_verdicts_free(cis2_verdict *v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++) cis2_vd_clear(&v[i]);
    free(v);
}

char *cis2_vd_names(const cis2_verdict *v, int status)
{
    size_t len = 1;
    for (size_t i = 0; i < v->n_fields; i++)
        if (v->fields[i].status == status) len += strlen(v->fields[i].key) + 1;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    *p = 0;
    for (size_t i = 0; i < v->n_fields; i++)
        if (v->fields[i].status == status) p += sprintf(p, "%s%s", p == s ? "" : " ", v->fields[i].key);
    return s;
}

/* ------------------------------------------------- shared field lines */

#include "receipt.h"

int cis2_vd_digest(cis2_verdict *v, const char *key, const uint8_t want[32], const uint8_t got[32])
{
    if (!memcmp(want, got, 32)) { cis2_vd_field(v, key, CIS2_FIELD_OK, "ok"); return 0; }
    char a[65], b[65];
    cis2_hex(want, 32, a);
    cis2_hex(got, 32, b);
    cis2_vd_field(v, key, CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", a, b);
    return 1;
}

char *cis2_vd_csv(const uint32_t *ids, size_t n)
{
    char *s = malloc(n * 11 + 1), *p = s;
    if (!s) return NULL;
    *p = 0;
    for (size_t i = 0; i < n; i++) p += sprintf(p, i ? ",%u" : "%u", ids[i]);
    return s;
}

int cis2_vd_ids(cis2_verdict *v, const char *key, const uint32_t *want, size_t nw, const uint32_t *got, size_t ng)
{
    if (nw == ng && (nw == 0 || !memcmp(want, got, nw * sizeof *want))) {
        cis2_vd_field(v, key, CIS2_FIELD_OK, "ok");
        return 0;
    }
    char *a = cis2_vd_csv(want, nw), *b = cis2_vd_csv(got, ng);
    cis2_vd_field(v, key, CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", a ? a : "?", b ? b : "?");
    free(a);
    free(b);
    return 1;
}

void cis2_vd_name(char *list, size_t cap, const char *key)
{
    size_t l = strlen(list);
    snprintf(list + l, cap - l, "%s%s", l ? " " : "", key);
}

int cis2_vd_supported(cis2_verdict *v, const cis2_receipt *r)
{
    int bad_v = strcmp(r->spec_version, CIS2_SPEC_VERSION) != 0, bad_d = strcmp(r->dtype, "fp32") != 0;
    if (bad_v) cis2_vd_field(v, "spec-version", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=%s", r->spec_version,
                             CIS2_SPEC_VERSION);
    else cis2_vd_field(v, "spec-version", CIS2_FIELD_OK, "ok");
    if (!bad_v && !bad_d) {
        if (r->ext) cis2_vd_field(v, "extension", CIS2_FIELD_OK, "ok");
        return 0;
    }
    if (bad_d) cis2_vd_field(v, "dtype", CIS2_FIELD_MISMATCH, "MISMATCH expected=%s got=fp32", r->dtype);
    else cis2_vd_field(v, "dtype", CIS2_FIELD_OK, "ok");
    cis2_vd_set(v, CIS2_VERDICT_UNSUPPORTED, CIS2_E_UNSUPPORTED, "UNSUPPORTED",
                "(this build runs CIS-2 v%s fp32 only)", CIS2_SPEC_VERSION);
    return 1;
}

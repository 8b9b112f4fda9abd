/*
 * trace.c - write and read "CIS-2-TRACE v1" files (format in trace.h): the
 * per-tensor SHA-256 of every intermediate f32 tensor of a decode, for
 * localising where two runs first diverge.  Hashing only observes; the
 * decode's own digests (§12) are unaffected.  When tracing is off the
 * forward pass pays one NULL check per tensor (model.c TRACE).
 */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "trace hashes f32 memory as little-endian bytes; big-endian hosts are not supported"
#endif

struct cis2_trace_writer {
    FILE *f, *dump;
    char *path;
    int failed;
};

int cis2_trace_open(cis2_trace_writer **out, const char *path, int dump, cis2_error *err)
{
    *out = NULL;
    cis2_trace_writer *w = calloc(1, sizeof *w);
    size_t pl = strlen(path);
    if (!w || !(w->path = malloc(pl + 5))) { free(w); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    memcpy(w->path, path, pl + 1);
    if (!(w->f = fopen(path, "wb"))) {
        int rc = cis2_fail(err, CIS2_E_IO, "%s: %s", path, strerror(errno));
        free(w->path); free(w);
        return rc;
    }
    if (dump) {
        memcpy(w->path + pl, ".f32", 5);
        if (!(w->dump = fopen(w->path, "wb"))) {
            int rc = cis2_fail(err, CIS2_E_IO, "%s: %s", w->path, strerror(errno));
            fclose(w->f); free(w->path); free(w);
            return rc;
        }
        w->path[pl] = 0;
    }
    if (fprintf(w->f, "%s%s\n", CIS2_TRACE_MAGIC, dump ? " dump" : "") < 0) w->failed = 1;
    *out = w;
    return CIS2_OK;
}

void cis2_trace_record(void *ctx, size_t step, size_t pos, int layer, const char *tensor, const float *v, size_t n)
{
    cis2_trace_writer *w = ctx;
    if (w->failed) return;
    uint8_t d[32];
    char h[65];
    cis2_sha256(v, n * sizeof(float), d); /* f32 bits, LE (host order, checked above) */
    cis2_hex(d, 32, h);
    if (fprintf(w->f, "%zu %zu %d %s %zu %s\n", step, pos, layer, tensor, n, h) < 0) w->failed = 1;
    if (w->dump && fwrite(v, sizeof(float), n, w->dump) != n) w->failed = 1;
}

int cis2_trace_close(cis2_trace_writer *w, cis2_error *err)
{
    if (!w) return CIS2_OK;
    int bad = w->failed;
    bad |= fclose(w->f) != 0;
    if (w->dump) bad |= fclose(w->dump) != 0;
    int rc = bad ? cis2_fail(err, CIS2_E_IO, "%s: writing the trace failed", w->path) : CIS2_OK;
    free(w->path);
    free(w);
    return rc;
}

void cis2_trace_abort(cis2_trace_writer *w)
{
    if (!w) return;
    fclose(w->f);
    unlink(w->path);
    if (w->dump) {
        fclose(w->dump);
        size_t pl = strlen(w->path);
        memcpy(w->path + pl, ".f32", 5);
        unlink(w->path);
    }
    free(w->path);
    free(w);
}

/* ------------------------------------------------------------- reader */

void cis2_trace_free(cis2_trace *t)
{
    free(t->rec);
    free(t->path);
    free(t->dump_path);
    memset(t, 0, sizeof *t);
}

/* Decimal without sign or leading zeros, <= max. */
static int num(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || (n > 1 && s[0] == '0')) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (v > (max - (uint64_t)(s[i] - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

static int parse_line(char *s, size_t n, cis2_trace_rec *r)
{
    const char *f[6];
    size_t fl[6], k = 0, st = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ' ') continue;
        if (k == 6 || i == st) return -1; /* too many fields, or an empty one (double space) */
        f[k] = s + st;
        fl[k++] = i - st;
        st = i + 1;
    }
    if (k != 6) return -1;
    uint64_t v;
    if (num(f[0], fl[0], UINT32_MAX, &v)) return -1;
    r->step = (uint32_t)v;
    if (num(f[1], fl[1], UINT32_MAX, &v)) return -1;
    r->pos = (uint32_t)v;
    if (fl[2] == 2 && f[2][0] == '-' && f[2][1] == '1') r->layer = -1;
    else if (num(f[2], fl[2], INT32_MAX, &v)) return -1;
    else r->layer = (int32_t)v;
    if (fl[3] == 0 || fl[3] >= sizeof r->tensor) return -1;
    for (size_t i = 0; i < fl[3]; i++) {
        char c = f[3][i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return -1;
    }
    memcpy(r->tensor, f[3], fl[3]);
    r->tensor[fl[3]] = 0;
    if (num(f[4], fl[4], UINT64_MAX / 4, &r->n)) return -1;
    if (fl[5] != 64) return -1;
    char h[65];
    memcpy(h, f[5], 64);
    h[64] = 0;
    return cis2_unhex32(h, r->sha);
}

int cis2_trace_load(cis2_trace *t, const char *path, cis2_error *err)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) return cis2_fail(err, CIS2_E_IO, "%s: %s", path, strerror(errno));
    int rc = CIS2_OK;
    size_t cap = 0, line = 0;
    uint64_t off = 0;
    char buf[256];
    t->path = strdup(path);
    if (!t->path) { fclose(f); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
#define FAIL(...) do { rc = cis2_fail(err, CIS2_E_FORMAT, __VA_ARGS__); goto out; } while (0)
    while (fgets(buf, sizeof buf, f)) {
        line++;
        size_t n = strlen(buf);
        if (n == 0 || buf[n - 1] != '\n') FAIL("%s: line %zu: line too long, NUL byte, or no final LF", path, line);
        buf[--n] = 0;
        if (memchr(buf, '\r', n)) FAIL("%s: line %zu: CR byte (CRLF line ends are not allowed)", path, line);
        if (line == 1) {
            if (!strcmp(buf, CIS2_TRACE_MAGIC)) t->dump = 0;
            else if (!strcmp(buf, CIS2_TRACE_MAGIC " dump")) t->dump = 1;
            else FAIL("%s: line 1: expected '%s' or '%s dump'", path, CIS2_TRACE_MAGIC, CIS2_TRACE_MAGIC);
            continue;
        }
        if (t->n == cap) {
            if (cap >= CIS2_TRACE_MAX_LINES) FAIL("%s: more than %u records", path, CIS2_TRACE_MAX_LINES);
            cap = cap ? cap * 2 : 1024;
            cis2_trace_rec *nr = realloc(t->rec, cap * sizeof *nr);
            if (!nr) { rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); goto out; }
            t->rec = nr;
        }
        cis2_trace_rec *r = &t->rec[t->n];
        if (parse_line(buf, n, r)) FAIL("%s: line %zu: expected 'STEP POS LAYER TENSOR N SHA256'", path, line);
        r->line = line;
        r->offset = off;
        if (r->n > (UINT64_MAX - off) / 4) FAIL("%s: line %zu: element counts overflow", path, line);
        off += r->n * 4;
        t->n++;
    }
    if (ferror(f)) { rc = cis2_fail(err, CIS2_E_IO, "%s: read error", path); goto out; }
    if (line == 0) FAIL("%s: line 1: empty file", path);
    if (t->dump) {
        size_t pl = strlen(path);
        if (!(t->dump_path = malloc(pl + 5))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        memcpy(t->dump_path, path, pl);
        memcpy(t->dump_path + pl, ".f32", 5);
    }
#undef FAIL
out:
    fclose(f);
    if (rc) cis2_trace_free(t);
    return rc;
}

int cis2_trace_values(const cis2_trace *t, size_t i, float **v, cis2_error *err)
{
    *v = NULL;
    if (!t->dump) return cis2_fail(err, CIS2_E_USAGE, "%s: written without values (no dump)", t->path);
    const cis2_trace_rec *r = &t->rec[i];
    FILE *f = fopen(t->dump_path, "rb");
    if (!f) return cis2_fail(err, CIS2_E_IO, "%s: %s", t->dump_path, strerror(errno));
    int rc = CIS2_OK;
    if (r->n > (1u << 30) || !(*v = malloc(r->n ? r->n * sizeof(float) : 1)))
        rc = cis2_fail(err, CIS2_E_NOMEM, "%s: line %zu: %llu elements: too many", t->path, r->line,
                       (unsigned long long)r->n);
    else if (fseeko(f, (off_t)r->offset, SEEK_SET) != 0 || fread(*v, sizeof(float), r->n, f) != r->n)
        rc = cis2_fail(err, CIS2_E_IO, "%s: shorter than its trace says (line %zu)", t->dump_path, r->line);
    fclose(f);
    if (!rc) {
        uint8_t d[32];
        cis2_sha256(*v, r->n * sizeof(float), d);
        if (memcmp(d, r->sha, 32))
            rc = cis2_fail(err, CIS2_E_FORMAT, "%s: the values for line %zu do not hash to its sha256", t->dump_path,
                           r->line);
    }
    if (rc) { free(*v); *v = NULL; }
    return rc;
}

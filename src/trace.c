/*
 * trace.c - write and read "CIS-2-TRACE v1" files (format in trace.h): the
 * per-tensor SHA-256 of every intermediate f32 tensor of a decode, for
 * localising where two runs first diverge.  Hashing only observes; the
 * decode's own digests (§12) are unaffected.  When tracing is off the
 * forward pass pays one NULL check per tensor (model.c TRACE).
 * Callers: cis2 run --trace (writer), cis2 diff (reader).
 *
 * Files (fileio.h; docs/inputs.md "Traces", "Outputs"): the writer's two files are temporary files
 * until cis2_trace_close commits them together; the reader reads the trace
 * once as a regular file of bounded size, and checks every record's values
 * against the dump's real size and CIS2_TRACE_MAX_VALUES before allocating.
 */
#include "trace.h"
#include "fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "trace hashes f32 memory as little-endian bytes; big-endian hosts are not supported"
#endif

struct cis2_trace_writer {
    cis2_out *f, *dump;     /* temporary files until close commits them */
    char *path;
    int failed;             /* the errno of the first failed write, or EIO */
};

int cis2_trace_open(cis2_trace_writer **out, const char *path, int dump, cis2_error *err)
{
    *out = NULL;
    cis2_trace_writer *w = calloc(1, sizeof *w);
    size_t pl = strlen(path);
    if (!w || !(w->path = malloc(pl + 5))) { free(w); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    memcpy(w->path, path, pl + 1);
    int rc = cis2_out_open(&w->f, path, err);
    if (!rc && dump) {
        memcpy(w->path + pl, ".f32", 5);
        rc = cis2_out_open(&w->dump, w->path, err);
        w->path[pl] = 0;
    }
    if (rc) {
        cis2_out_abort(w->f);
        free(w->path); free(w);
        return rc;
    }
    if (fprintf(cis2_out_stream(w->f), "%s%s\n", CIS2_TRACE_MAGIC, dump ? " dump" : "") < 0) w->failed = errno ? errno : EIO;
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
    if (fprintf(cis2_out_stream(w->f), "%zu %zu %d %s %zu %s\n", step, pos, layer, tensor, n, h) < 0)
        w->failed = errno ? errno : EIO;
    else if (w->dump && fwrite(v, sizeof(float), n, cis2_out_stream(w->dump)) != n)
        w->failed = errno ? errno : EIO;
}

int cis2_trace_close(cis2_trace_writer *w, cis2_error *err)
{
    if (!w) return CIS2_OK;
    int rc = CIS2_OK;
    if ((err && err->code != CIS2_OK) || w->failed) { /* the run failed, or a write did: replace nothing */
        cis2_out_abort(w->dump);
        cis2_out_abort(w->f);
        if (w->failed && !(err && err->code != CIS2_OK))
            rc = cis2_fail(err, CIS2_E_IO, "%s: write failed: %s", w->path, strerror(w->failed));
    } else {
        cis2_out *set[2] = {w->dump, w->f}; /* the values first: a trace never names a dump it lacks */
        rc = cis2_out_commit_set(set, 2, err);
    }
    free(w->path);
    free(w);
    return rc;
}

/* Discards an open trace: its temporary files are removed, an existing
 * trace at the path is untouched. */
void cis2_trace_abort(cis2_trace_writer *w)
{
    if (!w) return;
    cis2_out_abort(w->dump);
    cis2_out_abort(w->f);
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

/* Lines of a file read in chunks through cis2_in (no line is longer than
 * a record's 256 bytes, so that much carry-over suffices). */
typedef struct line_reader {
    cis2_in in;
    char buf[1 << 16];
    size_t have, at;
} line_reader;

/* Next line (without its LF) into out (cap bytes, NUL-terminated): 1 got a
 * line, 0 end of file, -1 a line longer than cap - 2 or with no final LF,
 * -2 an I/O error (err set). */
static int next_line(line_reader *lr, char *out, size_t cap, size_t *len, cis2_error *err)
{
    size_t k = 0;
    for (;;) {
        if (lr->at == lr->have) {
            uint64_t left = lr->in.size - lr->in.pos;
            if (left == 0) return k ? -1 : 0;
            size_t want = left < sizeof lr->buf ? (size_t)left : sizeof lr->buf;
            if (cis2_in_read(&lr->in, lr->buf, want, err)) return -2;
            lr->have = want;
            lr->at = 0;
        }
        char c = lr->buf[lr->at++];
        if (c == '\n') { out[k] = 0; *len = k; return 1; }
        if (k + 2 >= cap) return -1;
        out[k++] = c;
    }
}

int cis2_trace_load(cis2_trace *t, const char *path, cis2_error *err)
{
    memset(t, 0, sizeof *t);
    line_reader *lr = calloc(1, sizeof *lr);
    if (!lr) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    int rc = cis2_in_open(&lr->in, path, CIS2_TRACE_MAX_FILE, "a trace", err);
    if (rc) { free(lr); return rc; }
    size_t cap = 0, line = 0;
    uint64_t off = 0;
    char buf[256];
    t->path = strdup(path);
    if (!t->path) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
#define FAIL(...) do { rc = cis2_fail(err, CIS2_E_FORMAT, __VA_ARGS__); goto out; } while (0)
    for (;;) {
        size_t n;
        int got = next_line(lr, buf, sizeof buf, &n, err);
        if (got == -2) { rc = err->code; goto out; }
        if (got == 0) break;
        line++;
        if (got < 0 || memchr(buf, 0, n)) FAIL("%s: line %zu: line too long, NUL byte, or no final LF", path, line);
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
    if (line == 0) FAIL("%s: line 1: empty file", path);
    if ((rc = cis2_in_finish(&lr->in, err))) goto out;
    if (t->dump) {
        size_t pl = strlen(path);
        if (!(t->dump_path = malloc(pl + 5))) { rc = cis2_fail(err, CIS2_E_NOMEM, "out of memory"); goto out; }
        memcpy(t->dump_path, path, pl);
        memcpy(t->dump_path + pl, ".f32", 5);
    }
#undef FAIL
out:
    cis2_in_close(&lr->in);
    free(lr);
    if (rc) cis2_trace_free(t);
    return rc;
}

int cis2_trace_values(const cis2_trace *t, size_t i, float **v, cis2_error *err)
{
    *v = NULL;
    if (!t->dump) return cis2_fail(err, CIS2_E_USAGE, "%s: written without values (no dump)", t->path);
    const cis2_trace_rec *r = &t->rec[i];
    if (r->n > CIS2_TRACE_MAX_VALUES)
        return cis2_fail(err, CIS2_E_NOMEM, "%s: line %zu: %llu elements: more than the limit of %u", t->path,
                         r->line, (unsigned long long)r->n, CIS2_TRACE_MAX_VALUES);
    cis2_in in;
    int rc = cis2_in_open(&in, t->dump_path, 0, NULL, err);
    if (rc) return rc;
    if (r->offset > in.size || r->n * 4 > in.size - r->offset) { /* checked before allocating */
        rc = cis2_fail(err, CIS2_E_IO, "%s: shorter than its trace says (line %zu needs bytes up to %llu, it has %llu)",
                       t->dump_path, r->line, (unsigned long long)(r->offset + r->n * 4),
                       (unsigned long long)in.size);
        cis2_in_close(&in);
        return rc;
    }
    if (!(*v = malloc(r->n ? r->n * sizeof(float) : 1)))
        rc = cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory for %llu values", t->dump_path, (unsigned long long)r->n);
    else if (!(rc = cis2_in_pread(&in, *v, r->n * sizeof(float), r->offset, err)))
        rc = cis2_in_unchanged(&in, err);
    cis2_in_close(&in);
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

/*
 * fileio_stub.c - TEMPORARY minimal implementations of include/cis2.h
 * section 9 until src/fileio.c (the reliability work) lands; replaced then.
 */
#include "cis2.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cis2_read_file(const char *path, size_t limit, const char *what, char **buf, size_t *len, cis2_error *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return cis2_fail(err, CIS2_E_IO, "%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) { fclose(f); return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path); }
        n += fread(b + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        if (n > limit) { free(b); fclose(f); return cis2_fail(err, CIS2_E_FORMAT, "%s: larger than %zu MiB (%s)", path, limit >> 20, what); }
        cap *= 2;
        char *nb = realloc(b, cap);
        if (!nb) free(b);
        b = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(b); return cis2_fail(err, CIS2_E_IO, "%s: read error", path); }
    if (n > limit) { free(b); return cis2_fail(err, CIS2_E_FORMAT, "%s: larger than %zu MiB (%s)", path, limit >> 20, what); }
    b[n] = 0;
    *buf = b;
    *len = n;
    return CIS2_OK;
}

struct cis2_out { FILE *f; char *path; };

int cis2_out_open(cis2_out **o, const char *path, cis2_error *err)
{
    *o = NULL;
    cis2_out *x = calloc(1, sizeof *x);
    if (!x || !(x->path = strdup(path))) { free(x); return cis2_fail(err, CIS2_E_NOMEM, "out of memory"); }
    if (!(x->f = fopen(path, "wb"))) { int e = errno; free(x->path); free(x); return cis2_fail(err, CIS2_E_IO, "%s: %s", path, strerror(e)); }
    *o = x;
    return CIS2_OK;
}
FILE *cis2_out_stream(cis2_out *o) { return o->f; }
int cis2_out_commit(cis2_out *o, cis2_error *err)
{
    int bad = ferror(o->f) | (fclose(o->f) != 0);
    int rc = bad ? cis2_fail(err, CIS2_E_IO, "%s: write failed", o->path) : CIS2_OK;
    free(o->path);
    free(o);
    return rc;
}
void cis2_out_abort(cis2_out *o)
{
    if (!o) return;
    fclose(o->f);
    unlink(o->path);
    free(o->path);
    free(o);
}
int cis2_write_file(const char *path, const void *data, size_t len, cis2_error *err)
{
    cis2_out *o;
    int rc = cis2_out_open(&o, path, err);
    if (rc) return rc;
    fwrite(data, 1, len, o->f);
    return cis2_out_commit(o, err);
}
int cis2_check_output_path(const char *path, const char *const *inputs, size_t n_inputs, const char *const *outputs,
                           size_t n_outputs, cis2_error *err)
{
    (void)inputs; (void)n_inputs; (void)outputs; (void)n_outputs;
    if (!path || !*path) return cis2_fail(err, CIS2_E_USAGE, "empty output path");
    return CIS2_OK;
}
void cis2_cleanup_install(void) {}
int cis2_mkdtemp(char *out, size_t cap, const char *prefix, cis2_error *err)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, cap, "%s/%s.XXXXXX", t && *t ? t : "/tmp", prefix);
    if (!mkdtemp(out)) return cis2_fail(err, CIS2_E_IO, "%s: %s", out, strerror(errno));
    return CIS2_OK;
}
void cis2_rmtree_tmp(const char *dir)
{
    char p[4200];
    const char *files[3] = {"model.safetensors", "config.json", "tokenizer.json"};
    for (int i = 0; i < 3; i++) { snprintf(p, sizeof p, "%s/%s", dir, files[i]); unlink(p); }
    rmdir(dir);
}

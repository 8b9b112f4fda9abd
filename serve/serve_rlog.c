/*
 * serve_rlog.c - the receipt log of `cis2 serve --receipt-log DIR`
 * (docs/serving.md "The receipt log", docs/eval.md "Verifying an eval
 * run"): every receipt the server hands out (each choice's completion
 * receipt, each scored prompt's score receipt) is also written to DIR as
 * a file of its own, and its name appended to DIR/manifest.txt, the
 * manifest `cis2 verify --manifest DIR/manifest.txt` reads
 * (docs/receipts.md "Verifying many receipts: shards": one path a line,
 * relative to the manifest's directory).  So an evaluation run is checked
 * afterwards, all of it, without the harness knowing about receipts.
 *
 * The output rule (docs/inputs.md "Outputs"): a receipt file is written
 * whole or not at all (cis2_write_file: a temporary file beside it,
 * fsynced, renamed); only then is its manifest line appended, with one
 * write(2) under a lock (O_APPEND), so a line never names a file that is
 * not whole and lines never interleave.  A short write (a full disk) is
 * cut back to the manifest's length before it, so the manifest holds
 * whole lines only; a manifest whose last line was torn before (a crash
 * in an earlier run) is cut back to its last whole line when the log is
 * opened.  A receipt that cannot be logged fails its answer (503
 * `receipt_log`, or a stream's error event): no answer leaves the server
 * without its receipt in the log.
 *
 * Names: ID.K.receipt for choice K of the completion ID (the response's
 * `id`, 96 random bits), ID.pP.score.receipt for the score receipt of its
 * prompt P; the same DIR may serve several runs of the server (the
 * manifest grows).
 *
 * Who calls it: serve_main.c (open, close), serve_response.c (completion
 * and score receipts, as each answer is made), on HTTP threads.  It calls
 * the library only: a leaf of the server's module graph (serve.h).
 */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct serve_rlog {
    char dir[4096];
    int fd;                    /* DIR/manifest.txt, O_APPEND */
    pthread_mutex_t mu;        /* one manifest line at a time */
    unsigned long long lines;  /* written by this server */
};

/* Cuts a manifest whose last line has no LF (a torn append) back to its
 * last whole line. */
static int repair_tail(int fd, const char *path, cis2_error *err)
{
    struct stat st;
    if (fstat(fd, &st)) return cis2_fail(err, CIS2_E_IO, "--receipt-log: %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return cis2_fail(err, CIS2_E_IO, "--receipt-log: %s is not a regular file", path);
    off_t end = st.st_size;
    char buf[4096];
    if (end == 0) return CIS2_OK;
    while (end > 0) {
        off_t from = end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
        ssize_t k = pread(fd, buf, (size_t)(end - from), from);
        if (k != end - from) return cis2_fail(err, CIS2_E_IO, "--receipt-log: %s: cannot read it", path);
        if (end == st.st_size && buf[k - 1] == '\n') return CIS2_OK; /* whole */
        for (ssize_t i = k; i > 0; i--)
            if (buf[i - 1] == '\n') { end = from + i; goto cut; }
        end = from;
    }
cut:
    fprintf(stderr, "cis2 serve: --receipt-log: %s ended inside a line (an earlier run stopped while writing it): "
            "cut back to %lld bytes\n", path, (long long)end);
    if (ftruncate(fd, end)) return cis2_fail(err, CIS2_E_IO, "--receipt-log: %s: cannot cut its torn last line: %s",
                                             path, strerror(errno));
    return CIS2_OK;
}

int serve_rlog_open(const char *dir, serve_rlog **out, cis2_error *err)
{
    *out = NULL;
    if (!dir || !*dir) return cis2_fail(err, CIS2_E_USAGE, "serve: --receipt-log is empty (a directory)");
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n + 32 > sizeof ((serve_rlog *)0)->dir) return cis2_fail(err, CIS2_E_USAGE, "--receipt-log: path too long");
    if (mkdir(dir, 0755) && errno != EEXIST)
        return cis2_fail(err, CIS2_E_IO, "--receipt-log %s: cannot make the directory: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return cis2_fail(err, CIS2_E_IO, "--receipt-log %s: not a directory", dir);
    serve_rlog *l = calloc(1, sizeof *l);
    if (!l) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    memcpy(l->dir, dir, n);
    l->dir[n] = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.txt", l->dir);
    l->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
    int rc = l->fd < 0 ? cis2_fail(err, CIS2_E_IO, "--receipt-log: cannot open %s for appending: %s", path,
                                   strerror(errno))
                       : repair_tail(l->fd, path, err);
    if (rc) {
        if (l->fd >= 0) close(l->fd);
        free(l);
        return rc;
    }
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return CIS2_OK;
}

void serve_rlog_close(serve_rlog *l)
{
    if (!l) return;
    close(l->fd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* One manifest line, whole or not at all. */
static int append_line(serve_rlog *l, const char *line, size_t len, cis2_error *err)
{
    pthread_mutex_lock(&l->mu);
    off_t before = lseek(l->fd, 0, SEEK_END);
    ssize_t k;
    do k = write(l->fd, line, len);
    while (k < 0 && errno == EINTR);
    int e = k < 0 ? errno : ENOSPC;
    int rc = CIS2_OK;
    if (k != (ssize_t)len) {
        if (k > 0 && before >= 0 && ftruncate(l->fd, before)) /* never leave half a line */
            fprintf(stderr, "cis2 serve: --receipt-log: cannot cut a torn manifest line: %s\n", strerror(errno));
        rc = cis2_fail(err, CIS2_E_IO, "the receipt log's manifest (%s/manifest.txt) cannot be written: %s", l->dir,
                       strerror(e));
    } else if (fdatasync(l->fd)) {
        rc = cis2_fail(err, CIS2_E_IO, "the receipt log's manifest (%s/manifest.txt) cannot be synced: %s", l->dir,
                       strerror(errno));
    } else {
        l->lines++;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int serve_rlog_write(serve_rlog *l, const char *name, const char *text, size_t len, cis2_error *err)
{
    if (!l) return CIS2_OK;
    for (const char *p = name; *p; p++) /* names are the server's own: an id, digits, dots */
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return cis2_fail(err, CIS2_E_INTERNAL, "receipt log: bad file name '%s'", name);
    char path[4400], line[300];
    snprintf(path, sizeof path, "%s/%s", l->dir, name);
    int n = snprintf(line, sizeof line, "%s\n", name);
    if (n < 0 || (size_t)n >= sizeof line) return cis2_fail(err, CIS2_E_INTERNAL, "receipt log: name too long");
    cis2_error we = {0};
    if (cis2_write_file(path, text, len, &we))
        return cis2_fail(err, CIS2_E_IO, "the receipt log cannot write %s: %s", path, we.msg);
    return append_line(l, line, (size_t)n, err);
}

/*
 * serve_log.c - the access log of `cis2 serve` (docs/serving.md "The
 * access log"): one line
 * per finished request, to stderr (`--access-log -`, the default), appended
 * to a file (`--access-log FILE`) or nowhere (`--access-log off`).
 *
 * A line is nine fields separated by single spaces (docs/serving.md):
 *
 *   TIME CLIENT METHOD PATH STATUS BYTES MS ID END
 *   2025-06-01T10:00:00.123Z 127.0.0.1:40312 POST /v1/completions 200 812 35.1 cmpl-9f0c... ok
 *
 * TIME when the request arrived (UTC, milliseconds); CLIENT the peer's
 * address and port; METHOD and PATH as received, every byte outside
 * printable ASCII, a space, `"` and `\` written \xHH (a path cannot forge
 * a line or a field), PATH cut at 256 bytes with `...`; STATUS the HTTP
 * status sent (499: the client went away before the answer, `-`: none was
 * sent); BYTES the body bytes handed to the connection (a stream's events
 * as they went); MS the time from arrival to the end; ID the completion's
 * `id` (`-` for other requests); END how the connection ended the request:
 * ok, error, timeout, shutdown, read_error, client_abort (libmicrohttpd's
 * termination codes).  Requests libmicrohttpd refuses before the handler
 * sees them (a malformed request line, headers over 64 kB) are its own
 * messages on stderr (`cis2 serve: http: ...`), not access lines.
 *
 * Each line is formatted whole and written with one write(2) (O_APPEND for
 * a file), so lines from the connection threads never interleave, with
 * each other nor with the server's other stderr lines.
 *
 * Who calls it: serve_http.c (serve_log_request when libmicrohttpd reports
 * a request finished) and serve_main.c (open and close).  It calls
 * serve_buf.c only.
 */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct serve_log {
    int fd;                    /* 2 (stderr) or a file opened here */
    int own;                   /* fd is ours to close */
};

int serve_log_open(const char *spec, serve_log **out, cis2_error *err)
{
    *out = NULL;
    if (!spec || !strcmp(spec, "-")) spec = "-";
    else if (!strcmp(spec, "off")) return CIS2_OK;
    else if (!*spec) return cis2_fail(err, CIS2_E_USAGE, "serve: --access-log is empty (a FILE, - or off)");
    serve_log *l = calloc(1, sizeof *l);
    if (!l) return cis2_fail(err, CIS2_E_NOMEM, "out of memory");
    l->fd = 2;
    if (strcmp(spec, "-")) {
        l->fd = open(spec, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
        if (l->fd < 0) {
            int e = errno;
            free(l);
            return cis2_fail(err, CIS2_E_IO, "--access-log %s: cannot open for appending: %s", spec, strerror(e));
        }
        l->own = 1;
    }
    *out = l;
    return CIS2_OK;
}

void serve_log_close(serve_log *l)
{
    if (!l) return;
    if (l->own) close(l->fd);
    free(l);
}

/* s (at most max bytes of it, then "...") with every byte that could break
 * a field or a line escaped \xHH; "-" when empty. */
static void put_field(serve_buf *b, const char *s, size_t max)
{
    if (!s || !*s) { serve_buf_str(b, "-"); return; }
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') serve_buf_printf(b, "\\x%02x", ch);
        else serve_buf_put(b, &s[i], 1);
    }
    if (s[i]) serve_buf_str(b, "...");
}

void serve_log_request(serve_log *l, const serve_log_entry *en)
{
    if (!l) return;
    char ts[40] = "-";
    struct tm tm;
    time_t sec = (time_t)en->wall;
    int ms = (int)((en->wall - (double)sec) * 1000.0);
    if (ms < 0 || ms > 999) ms = 0;
    if (!gmtime_r(&sec, &tm) || !strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm)) snprintf(ts, sizeof ts, "-");
    serve_buf b = {0};
    if (ts[0] == '-') serve_buf_str(&b, "- ");
    else serve_buf_printf(&b, "%s.%03dZ ", ts, ms);
    put_field(&b, en->client, 64);
    serve_buf_str(&b, " ");
    put_field(&b, en->method, 16);
    serve_buf_str(&b, " ");
    put_field(&b, en->path, 256);
    if (en->status > 0) serve_buf_printf(&b, " %d", en->status);
    else serve_buf_str(&b, " -");
    serve_buf_printf(&b, " %llu %.1f ", en->bytes, en->ms < 0 ? 0.0 : en->ms);
    put_field(&b, en->id, 64);
    serve_buf_printf(&b, " %s\n", en->end ? en->end : "-");
    if (!b.oom) {
        size_t off = 0; /* one write (a line is far below PIPE_BUF); the loop only for a short one */
        while (off < b.n) {
            ssize_t k = write(l->fd, b.p + off, b.n - off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break; /* a log that cannot be written does not stop the server */
            off += (size_t)k;
        }
    }
    serve_buf_free(&b);
}

/*
 * test_fileio.c - src/fileio.c and src/jsonlim.c (docs/inputs.md): inputs are
 * regular files read exactly once (a FIFO, a directory, /dev/zero refused
 * without blocking; a size limit before reading; a file that shrinks, grows
 * or is rewritten while read is a clean CIS2_E_IO); outputs are all or
 * nothing (a failed write leaves the old file intact and no temporary
 * file; a set is committed together); output paths are checked against
 * inputs and each other; temporary files and directories are removed on
 * SIGTERM; the JSON cost estimate bounds jansson's real heap.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cis2_toolkit.h"
#include "fileio.h"
#include "jsonlim.h"

static char dir[] = "/tmp/cis2-test-fileio-XXXXXX";

static const char *P(const char *name)
{
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char b[1 << 16];
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = 0;
    return b;
}

/* Files in dir whose name contains ".tmp." (temporaries left behind). */
static int temps_in(const char *d)
{
    DIR *D = opendir(d);
    assert_non_null(D);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(D))) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(D);
    return n;
}

/* 1 when d's filesystem makes O_TMPFILE files and /proc can name them:
 * cis2_out then writes an unnamed file, so no "*.tmp.*" exists before the
 * commit (fileio.c open_anon); else the named temporary is there. */
static int anon_ok(const char *d)
{
#ifdef O_TMPFILE
    int fd = open(d, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    close(fd);
    return access("/proc/self/fd", X_OK) == 0;
#else
    (void)d;
    return 0;
#endif
}

static void expect_err(int rc, const cis2_error *e, int code, const char *needle)
{
    if (rc != code || !strstr(e->msg, needle)) fail_msg("rc=%d (want %d) msg='%s' (want '%s')", rc, code, e->msg, needle);
}

static int setup(void **s)
{
    (void)s;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- inputs ---- */

static void read_regular(void **s)
{
    (void)s;
    put(P("a.txt"), "hello");
    char *b;
    size_t n;
    cis2_error e = {0};
    assert_int_equal(cis2_read_file(P("a.txt"), 100, "a test", &b, &n, &e), CIS2_OK);
    assert_int_equal(n, 5);
    assert_string_equal(b, "hello"); /* NUL-terminated */
    free(b);
    put(P("empty"), "");
    assert_int_equal(cis2_read_file(P("empty"), 100, "a test", &b, &n, &e), CIS2_OK);
    assert_int_equal(n, 0);
    free(b);
}

static void read_refusals(void **s)
{
    (void)s;
    char *b = (char *)1;
    size_t n;
    cis2_error e = {0};
    expect_err(cis2_read_file(P("missing"), 0, NULL, &b, &n, &e), &e, CIS2_E_IO, "cannot open");
    assert_null(b);
    e = (cis2_error){0};
    expect_err(cis2_read_file(dir, 0, NULL, &b, &n, &e), &e, CIS2_E_IO, "not a regular file (a directory)");
    /* a FIFO with no writer: the open must not block (alarm guards the test) */
    assert_int_equal(mkfifo(P("fifo"), 0600), 0);
    alarm(10);
    e = (cis2_error){0};
    expect_err(cis2_read_file(P("fifo"), 0, NULL, &b, &n, &e), &e, CIS2_E_IO, "not a regular file (a FIFO)");
    alarm(0);
    e = (cis2_error){0};
    expect_err(cis2_read_file("/dev/zero", 0, NULL, &b, &n, &e), &e, CIS2_E_IO,
               "not a regular file (a character device)");
    assert_int_equal(symlink("/dev/zero", P("zero-link")), 0);
    e = (cis2_error){0};
    expect_err(cis2_read_file(P("zero-link"), 0, NULL, &b, &n, &e), &e, CIS2_E_IO, "character device");
    put(P("big"), "0123456789");
    e = (cis2_error){0};
    expect_err(cis2_read_file(P("big"), 9, "a thing", &b, &n, &e), &e, CIS2_E_FORMAT,
               "larger than 9 bytes, the limit for a thing (10 bytes)");
}

/* A file that changes between the fstat at open and the end of the read. */
static void read_changes(void **s)
{
    (void)s;
    cis2_in in;
    cis2_error e = {0};
    char buf[64];
    /* shrinks: the read runs into an early EOF */
    put(P("shrink"), "0123456789");
    assert_int_equal(cis2_in_open(&in, P("shrink"), 0, NULL, &e), CIS2_OK);
    assert_int_equal(truncate(P("shrink"), 4), 0);
    expect_err(cis2_in_read(&in, buf, 10, &e), &e, CIS2_E_IO, "changed while being read");
    cis2_in_close(&in);
    /* grows: bytes past the size seen at open */
    put(P("grow"), "0123456789");
    e = (cis2_error){0};
    assert_int_equal(cis2_in_open(&in, P("grow"), 0, NULL, &e), CIS2_OK);
    FILE *f = fopen(P("grow"), "ab");
    fputs("more", f);
    fclose(f);
    assert_int_equal(cis2_in_read(&in, buf, 10, &e), CIS2_OK);
    expect_err(cis2_in_finish(&in, &e), &e, CIS2_E_IO, "changed while being read");
    /* rewritten in place, same size: mtime/ctime differ */
    put(P("rewrite"), "0123456789");
    struct timespec old[2] = {{0, 0}, {1000000, 0}};
    assert_int_equal(utimensat(AT_FDCWD, P("rewrite"), old, 0), 0);
    e = (cis2_error){0};
    assert_int_equal(cis2_in_open(&in, P("rewrite"), 0, NULL, &e), CIS2_OK);
    int fd = open(P("rewrite"), O_WRONLY);
    assert_int_equal(pwrite(fd, "ABCDEFGHIJ", 10, 0), 10);
    close(fd);
    assert_int_equal(cis2_in_read(&in, buf, 10, &e), CIS2_OK);
    expect_err(cis2_in_finish(&in, &e), &e, CIS2_E_IO, "changed while being read");
    /* unchanged: fine, and exactly at EOF */
    put(P("same"), "0123456789");
    e = (cis2_error){0};
    assert_int_equal(cis2_in_open(&in, P("same"), 0, NULL, &e), CIS2_OK);
    assert_int_equal(cis2_in_read(&in, buf, 10, &e), CIS2_OK);
    assert_int_equal(cis2_in_finish(&in, &e), CIS2_OK);
}

/* ---- outputs ---- */

static void out_commit_abort(void **s)
{
    (void)s;
    cis2_error e = {0};
    put(P("r.txt"), "old");
    cis2_out *o;
    assert_int_equal(cis2_out_open(&o, P("r.txt"), &e), CIS2_OK);
    fputs("new content", cis2_out_stream(o));
    assert_string_equal(slurp(P("r.txt")), "old"); /* nothing replaced before the commit */
    assert_int_equal(temps_in(dir), anon_ok(dir) ? 0 : 1);
    cis2_out_abort(o);
    assert_string_equal(slurp(P("r.txt")), "old");
    assert_int_equal(temps_in(dir), 0);
    assert_int_equal(cis2_out_open(&o, P("r.txt"), &e), CIS2_OK);
    fputs("new content", cis2_out_stream(o));
    assert_int_equal(cis2_out_commit(o, &e), CIS2_OK);
    assert_string_equal(slurp(P("r.txt")), "new content");
    assert_int_equal(temps_in(dir), 0);
    /* the mode fopen would give: 0666 & ~umask */
    mode_t um = umask(022);
    umask(um);
    struct stat st;
    assert_int_equal(stat(P("r.txt"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~um);
    /* cis2_write_file, and a new file */
    assert_int_equal(cis2_write_file(P("w.txt"), "abc", 3, &e), CIS2_OK);
    assert_string_equal(slurp(P("w.txt")), "abc");
    /* a symbolic link as the target: its target is replaced, the link stays */
    put(P("real.txt"), "x");
    assert_int_equal(symlink(P("real.txt"), P("link.txt")), 0);
    assert_int_equal(cis2_write_file(P("link.txt"), "via link", 8, &e), CIS2_OK);
    assert_string_equal(slurp(P("real.txt")), "via link");
    struct stat lst;
    assert_int_equal(lstat(P("link.txt"), &lst), 0);
    assert_true(S_ISLNK(lst.st_mode));
}

static void out_refusals(void **s)
{
    (void)s;
    cis2_out *o;
    cis2_error e = {0};
    expect_err(cis2_out_open(&o, "", &e), &e, CIS2_E_USAGE, "empty");
    e = (cis2_error){0};
    expect_err(cis2_out_open(&o, P("nodir/x"), &e), &e, CIS2_E_IO, "nodir/x");
    e = (cis2_error){0};
    expect_err(cis2_out_open(&o, dir, &e), &e, CIS2_E_IO, "is a directory");
}

/* A write that fails (file size limit: EFBIG, as a full disk gives ENOSPC)
 * leaves the old file intact and no temporary file. */
static void out_failed_write(void **s)
{
    (void)s;
    put(P("keep.txt"), "the old receipt");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        static char big[1 << 16];
        memset(big, 'x', sizeof big);
        cis2_error e = {0};
        int rc = cis2_write_file(P("keep.txt"), big, sizeof big, &e);
        _exit(rc == CIS2_E_IO && strstr(e.msg, "write failed") ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_string_equal(slurp(P("keep.txt")), "the old receipt");
    assert_int_equal(temps_in(dir), 0);
    /* a device is written in place; /dev/full fails at the flush */
    cis2_error e = {0};
    expect_err(cis2_write_file("/dev/full", "abc", 3, &e), &e, CIS2_E_IO, "write failed");
    e = (cis2_error){0};
    assert_int_equal(cis2_write_file("/dev/null", "abc", 3, &e), CIS2_OK);
}

static void out_set(void **s)
{
    (void)s;
    cis2_error e = {0};
    cis2_out *o[3];
    assert_int_equal(cis2_out_open(&o[0], P("s1"), &e), CIS2_OK);
    assert_int_equal(cis2_out_open(&o[1], P("s2"), &e), CIS2_OK);
    o[2] = NULL;
    fputs("one", cis2_out_stream(o[0]));
    fputs("two", cis2_out_stream(o[1]));
    assert_int_equal(cis2_out_commit_set(o, 3, &e), CIS2_OK);
    assert_string_equal(slurp(P("s1")), "one");
    assert_string_equal(slurp(P("s2")), "two");
    assert_int_equal(temps_in(dir), 0);
}

static void output_paths(void **s)
{
    (void)s;
    cis2_error e = {0};
    put(P("in.json"), "{}");
    const char *ins[] = {P("in.json")};
    assert_int_equal(cis2_check_output_path(P("out.txt"), ins, 1, NULL, 0, &e), CIS2_OK);
    expect_err(cis2_check_output_path("", ins, 1, NULL, 0, &e), &e, CIS2_E_USAGE, "empty");
    e = (cis2_error){0};
    expect_err(cis2_check_output_path(P("in.json"), ins, 1, NULL, 0, &e), &e, CIS2_E_USAGE, "same file as the input");
    assert_int_equal(link(P("in.json"), P("hard.json")), 0);
    e = (cis2_error){0};
    expect_err(cis2_check_output_path(P("hard.json"), ins, 1, NULL, 0, &e), &e, CIS2_E_USAGE, "same file");
    assert_int_equal(symlink(P("in.json"), P("soft.json")), 0);
    e = (cis2_error){0};
    expect_err(cis2_check_output_path(P("soft.json"), ins, 1, NULL, 0, &e), &e, CIS2_E_USAGE, "same file");
    e = (cis2_error){0};
    expect_err(cis2_check_output_path(P("nodir/x"), ins, 1, NULL, 0, &e), &e, CIS2_E_IO, "does not exist");
    e = (cis2_error){0};
    expect_err(cis2_check_output_path(dir, ins, 1, NULL, 0, &e), &e, CIS2_E_IO, "is a directory");
    /* two outputs that are one file, spelled differently */
    char other[600];
    snprintf(other, sizeof other, "%s/../%s/out.txt", dir, strrchr(dir, '/') + 1);
    const char *outs[] = {other};
    e = (cis2_error){0};
    expect_err(cis2_check_output_path(P("out.txt"), ins, 1, outs, 1, &e), &e, CIS2_E_USAGE, "same output file");
    const char *outs2[] = {P("other.txt")};
    assert_int_equal(cis2_check_output_path(P("out.txt"), ins, 1, outs2, 1, &e), CIS2_OK);
    /* devices are written in place and never compared */
    const char *devs[] = {"/dev/null"};
    assert_int_equal(cis2_check_output_path("/dev/null", devs, 1, devs, 1, &e), CIS2_OK);
    if (geteuid() != 0) { /* root passes access(W_OK) on any directory or file */
        assert_int_equal(mkdir(P("ro"), 0555), 0);
        e = (cis2_error){0};
        expect_err(cis2_check_output_path(P("ro/x"), NULL, 0, NULL, 0, &e), &e, CIS2_E_IO, "not writable");
        put(P("ro.txt"), "keep");
        assert_int_equal(chmod(P("ro.txt"), 0444), 0);
        e = (cis2_error){0};
        expect_err(cis2_check_output_path(P("ro.txt"), NULL, 0, NULL, 0, &e), &e, CIS2_E_IO, "not writable");
        cis2_out *o;
        e = (cis2_error){0};
        expect_err(cis2_out_open(&o, P("ro.txt"), &e), &e, CIS2_E_IO, "not writable");
        assert_string_equal(slurp(P("ro.txt")), "keep");
    }
}

/* A fresh subdirectory NAME of the test directory, its path in sub. */
static void make_sub(char *sub, size_t cap, const char *name)
{
    snprintf(sub, cap, "%s/%s", dir, name);
    assert_int_equal(mkdir(sub, 0700), 0);
}

/* Forks a child that runs body(sub) (a non-zero return is its exit code),
 * then tells the parent it is ready and waits for a signal; returns the
 * child's pid once it is ready. */
static pid_t fork_paused(int (*body)(const char *sub), const char *sub)
{
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        int rc = body(sub);
        if (rc) _exit(rc);
        if (write(pfd[1], "r", 1) != 1) _exit(4); /* ready */
        for (;;) pause();
    }
    close(pfd[1]);
    char c;
    ssize_t got = read(pfd[0], &c, 1);
    close(pfd[0]);
    assert_int_equal(got, 1);
    return pid;
}

/* The child of out_killed: a megabyte of sub/result.bin written, not committed. */
static int write_unfinished(const char *sub)
{
    char path[700];
    snprintf(path, sizeof path, "%s/result.bin", sub);
    cis2_error e = {0};
    cis2_out *o;
    if (cis2_out_open(&o, path, &e)) return 2;
    static char block[1 << 16];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < 16; i++) fwrite(block, 1, sizeof block, cis2_out_stream(o));
    fflush(cis2_out_stream(o));
    return 0;
}

/* SIGKILL (no handler runs) in the middle of an output: the old target is
 * intact and, where the file is an O_TMPFILE one, nothing else is left. */
static void out_killed(void **s)
{
    (void)s;
    char sub[600], path[700];
    make_sub(sub, sizeof sub, "kill");
    snprintf(path, sizeof path, "%s/result.bin", sub);
    put(path, "old");
    pid_t pid = fork_paused(write_unfinished, sub);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_string_equal(slurp(path), "old");
    int want = anon_ok(sub) ? 0 : 1; /* the named temporary of the fallback stays (docs/inputs.md) */
    assert_int_equal(temps_in(sub), want);
    if (!want) print_message("SIGKILL mid-write: the old file intact, nothing left beside it\n");
}

/* The target's directory removed while an O_TMPFILE output is written (it
 * is empty then): the commit cannot name the file, and says so. */
static void out_dir_removed(void **s)
{
    (void)s;
    char sub[600], path[700];
    make_sub(sub, sizeof sub, "gone");
    snprintf(path, sizeof path, "%s/r.txt", sub);
    cis2_error e = {0};
    cis2_out *o;
    assert_int_equal(cis2_out_open(&o, path, &e), CIS2_OK);
    fputs("content", cis2_out_stream(o));
    if (rmdir(sub) != 0) { /* the named fallback's temporary is in it */
        assert_int_equal(anon_ok(sub), 0);
        cis2_out_abort(o);
        assert_int_equal(rmdir(sub), 0);
        return;
    }
    expect_err(cis2_out_commit(o, &e), &e, CIS2_E_IO, "cannot give the finished file a name in its directory");
    assert_non_null(strstr(e.msg, "r.txt"));
}

/* ---- temporary files and directories on a signal ---- */

/* The child of cleanup_on_signal: an output being written and a temporary
 * directory with a file, both in sub, the cleanup handler installed. */
static int write_with_tmpdir(const char *sub)
{
    setenv("TMPDIR", sub, 1);
    cis2_cleanup_install();
    cis2_error e = {0};
    char path[700], tmpd[700];
    snprintf(path, sizeof path, "%s/result.bin", sub);
    cis2_out *o;
    if (cis2_out_open(&o, path, &e)) return 2;
    fputs("partial", cis2_out_stream(o));
    fflush(cis2_out_stream(o));
    if (cis2_mkdtemp(tmpd, sizeof tmpd, "cis2-bench-", &e)) return 3;
    char f1[800];
    snprintf(f1, sizeof f1, "%s/model.safetensors", tmpd);
    put(f1, "weights");
    return 0;
}

static void cleanup_on_signal(void **s)
{
    (void)s;
    char sub[600];
    make_sub(sub, sizeof sub, "sig");
    pid_t pid = fork_paused(write_with_tmpdir, sub);
    int named = temps_in(sub);
    assert_int_equal(kill(pid, SIGTERM), 0); /* before any assertion: a failed one must not leave it paused */
    assert_int_equal(named, anon_ok(sub) ? 0 : 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM); /* re-raised: the default action */
    DIR *D = opendir(sub);
    assert_non_null(D);
    struct dirent *d;
    int left = 0;
    while ((d = readdir(D)))
        if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) { left++; fprintf(stderr, "left: %s\n", d->d_name); }
    closedir(D);
    assert_int_equal(left, 0); /* neither the temporary file nor the temporary directory */
}

static void mkdtemp_tmpdir(void **s)
{
    (void)s;
    char out[600];
    cis2_error e = {0};
    setenv("TMPDIR", dir, 1);
    assert_int_equal(cis2_mkdtemp(out, sizeof out, "cis2-x-", &e), CIS2_OK);
    assert_int_equal(strncmp(out, dir, strlen(dir)), 0);
    char f[700];
    snprintf(f, sizeof f, "%s/a", out);
    put(f, "1");
    cis2_rmtree_tmp(out);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);
    setenv("TMPDIR", "/nonexistent-dir-for-cis2", 1);
    e = (cis2_error){0};
    expect_err(cis2_mkdtemp(out, sizeof out, "cis2-x-", &e), &e, CIS2_E_IO, "TMPDIR");
    unsetenv("TMPDIR");
}

/* ---- jsonlim: the estimate bounds jansson's real heap ---- */

static size_t heap_now, heap_peak;
static void *count_malloc(size_t n)
{
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    /* what glibc really takes: a 16-byte-aligned chunk with an 8-byte header, 32 at least */
    size_t real = (n + 8 + 15) / 16 * 16;
    heap_now += real < 32 ? 32 : real;
    if (heap_now > heap_peak) heap_peak = heap_now;
    return (char *)p + 16;
}
static void count_free(void *q)
{
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 16), n = p[0], real = (n + 8 + 15) / 16 * 16;
    heap_now -= real < 32 ? 32 : real;
    free(p);
}

static void json_cost_bounds_heap(void **s)
{
    (void)s;
    static const char *const items[] = {"{}", "[]", "0", "\"\"", "\"abcdefghijklmnop\"", "null", "true", "-1.5e3",
                                        "{\"a\":0}", "[0,0]", "{\"k\":\"v\",\"l\":[1,2,{}]}", "[[[]]]"};
    json_set_alloc_funcs(count_malloc, count_free);
    for (size_t k = 0; k < sizeof items / sizeof items[0]; k++) {
        size_t n = 20000, el = strlen(items[k]);
        char *b = malloc(n * (el + 1) + 2);
        size_t l = 0;
        b[l++] = '[';
        for (size_t i = 0; i < n; i++) { if (i) b[l++] = ','; memcpy(b + l, items[k], el); l += el; }
        b[l++] = ']';
        cis2_json_cost c;
        cis2_json_cost_of(b, l, &c);
        heap_now = heap_peak = 0;
        json_error_t je;
        json_t *r = json_loadb(b, l, 0, &je);
        assert_non_null(r);
        json_decref(r);
        if (heap_peak > c.bytes) fail_msg("%s x %zu: jansson took %zu bytes, estimate %llu", items[k], n, heap_peak,
                                          (unsigned long long)c.bytes);
        free(b);
    }
    /* one object with many keys (hash table growth) */
    size_t n = 100000;
    char *b = malloc(n * 16 + 2);
    size_t l = 0;
    b[l++] = '{';
    for (size_t i = 0; i < n; i++) l += (size_t)sprintf(b + l, "%s\"%zu\":0", i ? "," : "", i);
    b[l++] = '}';
    cis2_json_cost c;
    cis2_json_cost_of(b, l, &c);
    heap_now = heap_peak = 0;
    json_error_t je;
    json_t *r = json_loadb(b, l, JSON_REJECT_DUPLICATES, &je);
    assert_non_null(r);
    json_decref(r);
    assert_true(heap_peak <= c.bytes);
    free(b);
    json_set_alloc_funcs(malloc, free);
    cis2_error e = {0};
    expect_err(cis2_json_cost_check("[{},{},{}]", 10, 100, "x.json", "a test", &e), &e, CIS2_E_FORMAT,
               "x.json: its JSON would take about");
    cis2_error e2 = {0};
    assert_int_equal(cis2_json_cost_check("[{},{},{}]", 10, 10000, "x.json", "a test", &e2), CIS2_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read_regular),     cmocka_unit_test(read_refusals),   cmocka_unit_test(read_changes),
        cmocka_unit_test(out_commit_abort), cmocka_unit_test(out_refusals),    cmocka_unit_test(out_failed_write),
        cmocka_unit_test(out_set),          cmocka_unit_test(output_paths),    cmocka_unit_test(cleanup_on_signal),
        cmocka_unit_test(out_killed),       cmocka_unit_test(out_dir_removed),
        cmocka_unit_test(mkdtemp_tmpdir),   cmocka_unit_test(json_cost_bounds_heap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

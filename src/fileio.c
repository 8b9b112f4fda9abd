/*
 * fileio.c - reading inputs exactly once and writing outputs whole or not
 * at all (the contract is in fileio.h, the documented limits and refusals
 * in docs/inputs.md "Every input file" and "Outputs").  Spec §2.1: the sha256 of an artifact
 * is of the bytes the process read, so every loader hashes and parses the
 * one buffer (or the one sequential stream) this module gives it.
 *
 * Owns: the regular-file check and the before/after fstat comparison of
 * inputs; the temporary-file-then-rename protocol of outputs (an O_TMPFILE
 * file named only at commit, or a named temporary); the registry
 * of temporary files and directories that a SIGINT/SIGTERM/SIGHUP handler
 * (installed by programs through cis2_cleanup_install) removes with
 * async-signal-safe calls only.  Callers: every module that opens a file.
 */
#define _GNU_SOURCE
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ inputs */

const char *cis2_file_kind(const struct stat *st)
{
    if (S_ISREG(st->st_mode)) return "a regular file";
    if (S_ISDIR(st->st_mode)) return "a directory";
    if (S_ISFIFO(st->st_mode)) return "a FIFO";
    if (S_ISCHR(st->st_mode)) return "a character device";
    if (S_ISBLK(st->st_mode)) return "a block device";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    if (S_ISLNK(st->st_mode)) return "a symbolic link";
    return "not a regular file";
}

void cis2_in_close(cis2_in *in)
{
    if (!in || !in->path) return; /* path is set exactly while the file is open */
    close(in->fd);
    free(in->path);
    in->fd = -1;
    in->path = NULL;
}

int cis2_in_open(cis2_in *in, const char *path, uint64_t limit, const char *what, cis2_error *err)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    /* O_NONBLOCK: opening a FIFO returns at once instead of waiting for a
     * writer; it changes nothing for a regular file. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if ((e == ENXIO || e == EOPNOTSUPP || e == ENODEV) && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return cis2_fail(err, CIS2_E_IO, "%s: not a regular file (%s)", path, cis2_file_kind(&st));
        return cis2_fail(err, CIS2_E_IO, "%s: cannot open: %s", path, strerror(e));
    }
    if (fstat(fd, &in->st) != 0) {
        int e = errno;
        close(fd);
        return cis2_fail(err, CIS2_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(in->st.st_mode)) {
        close(fd);
        return cis2_fail(err, CIS2_E_IO, "%s: not a regular file (%s)", path, cis2_file_kind(&in->st));
    }
    in->size = (uint64_t)in->st.st_size;
    if (limit && in->size > limit) {
        close(fd);
        return cis2_fail(err, CIS2_E_FORMAT, "%s: larger than %llu bytes, the limit for %s (%llu bytes)", path,
                         (unsigned long long)limit, what ? what : "this file", (unsigned long long)in->size);
    }
    if (!(in->path = strdup(path))) {
        close(fd);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    }
    in->fd = fd;
    return CIS2_OK;
}

int cis2_in_read(cis2_in *in, void *buf, size_t n, cis2_error *err)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < ((size_t)1 << 30) ? n - got : ((size_t)1 << 30);
        ssize_t r = read(in->fd, (char *)buf + got, want);
        if (r < 0) {
            if (errno == EINTR) continue;
            return cis2_fail(err, CIS2_E_IO, "%s: read error at byte %llu: %s", in->path,
                             (unsigned long long)(in->pos + got), strerror(errno));
        }
        if (r == 0)
            return cis2_fail(err, CIS2_E_IO,
                             "%s: changed while being read (it ends at byte %llu; it had %llu bytes when opened)",
                             in->path, (unsigned long long)(in->pos + got), (unsigned long long)in->size);
        got += (size_t)r;
    }
    in->pos += n;
    return CIS2_OK;
}

static int same_version(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int cis2_in_finish(cis2_in *in, cis2_error *err)
{
    int rc = CIS2_OK;
    char extra;
    ssize_t r;
    do r = read(in->fd, &extra, 1); while (r < 0 && errno == EINTR);
    struct stat now;
    if (r < 0)
        rc = cis2_fail(err, CIS2_E_IO, "%s: read error: %s", in->path, strerror(errno));
    else if (r > 0 || in->pos != in->size)
        rc = cis2_fail(err, CIS2_E_IO, "%s: changed while being read (it grew past the %llu bytes it had when opened)",
                       in->path, (unsigned long long)in->size);
    else if (fstat(in->fd, &now) != 0)
        rc = cis2_fail(err, CIS2_E_IO, "%s: cannot stat: %s", in->path, strerror(errno));
    else if (!same_version(&in->st, &now))
        rc = cis2_fail(err, CIS2_E_IO, "%s: changed while being read (size, mtime or ctime differ after the read)",
                       in->path);
    cis2_in_close(in);
    return rc;
}

int cis2_in_pread(cis2_in *in, void *buf, size_t n, uint64_t off, cis2_error *err)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < ((size_t)1 << 30) ? n - got : ((size_t)1 << 30);
        ssize_t r = pread(in->fd, (char *)buf + got, want, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return cis2_fail(err, CIS2_E_IO, "%s: read error at byte %llu: %s", in->path,
                             (unsigned long long)(off + got), strerror(errno));
        }
        if (r == 0)
            return cis2_fail(err, CIS2_E_IO, "%s: changed while being read (it ends at byte %llu)", in->path,
                             (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return CIS2_OK;
}

int cis2_in_unchanged(cis2_in *in, cis2_error *err)
{
    struct stat now;
    if (fstat(in->fd, &now) != 0) return cis2_fail(err, CIS2_E_IO, "%s: cannot stat: %s", in->path, strerror(errno));
    if (!same_version(&in->st, &now))
        return cis2_fail(err, CIS2_E_IO, "%s: changed while being read (size, mtime or ctime differ after the read)",
                         in->path);
    return CIS2_OK;
}

int cis2_read_file(const char *path, size_t limit, const char *what, char **buf, size_t *len, cis2_error *err)
{
    *buf = NULL;
    *len = 0;
    cis2_in in;
    int rc = cis2_in_open(&in, path, limit, what, err);
    if (rc) return rc;
    if (in.size >= SIZE_MAX) {
        cis2_in_close(&in);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: too large for memory", path);
    }
    char *b = malloc((size_t)in.size + 1);
    if (!b) {
        cis2_in_close(&in);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory for %llu bytes", path, (unsigned long long)in.size);
    }
    size_t n = (size_t)in.size;
    if ((rc = cis2_in_read(&in, b, n, err)) || (rc = cis2_in_finish(&in, err))) {
        cis2_in_close(&in);
        free(b);
        return rc;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return CIS2_OK;
}

/* ------------------------------------------------- the cleanup registry */

#define CLEAN_SLOTS 64
enum { SLOT_FREE = 0, SLOT_BUSY = 1, SLOT_READY = 2 };
static struct clean_slot {
    _Atomic int state;
    int is_dir;
    char path[PATH_MAX];
} slots[CLEAN_SLOTS];

int cis2_cleanup_register(const char *path, int is_dir)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX) return -1;
    for (int i = 0; i < CLEAN_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_BUSY)) continue;
        memcpy(slots[i].path, path, n + 1);
        slots[i].is_dir = is_dir;
        atomic_store(&slots[i].state, SLOT_READY);
        return i;
    }
    return -1;
}

void cis2_cleanup_unregister(int slot)
{
    if (slot >= 0 && slot < CLEAN_SLOTS) atomic_store(&slots[slot].state, SLOT_FREE);
}

struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Removes everything under the open directory fd, to `depth` levels of
 * subdirectories, with async-signal-safe calls only (no malloc, no stdio:
 * getdents64 into a stack buffer, unlinkat). */
static void empty_dir_fd(int fd, int depth)
{
    char buf[4096] __attribute__((aligned(8)));
    for (int pass = 0; pass < 64; pass++) {
        if (lseek(fd, 0, SEEK_SET) < 0) return;
        int removed = 0, seen = 0;
        for (;;) {
            long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
            if (n <= 0) break;
            for (long off = 0; off < n;) {
                struct dirent64_raw *d = (struct dirent64_raw *)(buf + off);
                off += d->d_reclen;
                const char *nm = d->d_name;
                if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
                seen++;
                if (unlinkat(fd, nm, 0) == 0) { removed++; continue; }
                if (errno == EISDIR && depth > 0) {
                    int sub = openat(fd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                    if (sub >= 0) { empty_dir_fd(sub, depth - 1); close(sub); }
                    if (unlinkat(fd, nm, AT_REMOVEDIR) == 0) removed++;
                }
            }
        }
        if (!seen || !removed) return;
    }
}

static void remove_tree(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        empty_dir_fd(fd, 8);
        close(fd);
    }
    rmdir(dir);
}

static void on_signal(int sig)
{
    int saved = errno;
    for (int pass = 0; pass < 2; pass++) /* files first, then the directories holding them */
        for (int i = 0; i < CLEAN_SLOTS; i++) {
            if (atomic_load(&slots[i].state) != SLOT_READY || slots[i].is_dir != pass) continue;
            if (pass == 0) unlink(slots[i].path);
            else remove_tree(slots[i].path);
        }
    errno = saved;
    /* SA_RESETHAND restored the default action; the signal is blocked
     * while this handler runs, so raise it and unblock it. */
    raise(sig);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    _exit(128 + sig);
}

void cis2_cleanup_install(void)
{
    static atomic_int done;
    if (atomic_exchange(&done, 1)) return;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&sa.sa_mask, sigs[i]);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue; /* stays ignored */
        sigaction(sigs[i], &sa, NULL);
    }
}

int cis2_mkdtemp(char *out, size_t cap, const char *prefix, cis2_error *err)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    int n = snprintf(out, cap, "%s/%sXXXXXX", dir, prefix ? prefix : "cis2-");
    if (n < 0 || (size_t)n >= cap) return cis2_fail(err, CIS2_E_IO, "%s: TMPDIR path too long", dir);
    if (!mkdtemp(out))
        return cis2_fail(err, CIS2_E_IO, "%s: cannot create a temporary directory there (TMPDIR): %s", dir,
                         strerror(errno));
    cis2_cleanup_register(out, 1);
    return CIS2_OK;
}

void cis2_rmtree_tmp(const char *dir)
{
    if (!dir || !*dir) return;
    for (int i = 0; i < CLEAN_SLOTS; i++)
        if (atomic_load(&slots[i].state) == SLOT_READY && slots[i].is_dir && !strcmp(slots[i].path, dir))
            cis2_cleanup_unregister(i);
    remove_tree(dir);
}

/* ----------------------------------------------------------------- outputs */

struct cis2_out {
    FILE *f;
    char *path;    /* as given */
    char *target;  /* what is replaced (a symbolic link's target) */
    char *tmp;     /* the temporary file's name; NULL in place, or while anon */
    int anon;      /* an O_TMPFILE file: no name until commit gives it one */
    int slot;
};

static uint64_t rnd64(void)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    static _Atomic uint64_t ctr;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                 atomic_fetch_add(&ctr, 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* dirname of p into dir (cap bytes): "." when p has no slash; 0, or -1
 * when it did not fit (dir then holds a truncated name). */
static int dir_of(const char *p, char *dir, size_t cap)
{
    const char *slash = strrchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : 0;
    if (!slash) snprintf(dir, cap, ".");
    else if (slash == p) snprintf(dir, cap, "/");
    else snprintf(dir, cap, "%.*s", (int)n, p);
    return n < cap ? 0 : -1;
}

/* Gives a fresh name "BASE.tmp.XXXXXX" beside target (or ".cis2.tmp.XXXXXX"
 * in its directory when that name would be too long) to a new file
 * (anon_fd < 0: returns its fd) or to the O_TMPFILE file anon_fd (linked
 * through /proc/self/fd: returns 0).  -1 (errno) on failure. */
static int make_temp(const char *target, int anon_fd, char **tmp_out)
{
    size_t tl = strlen(target);
    const char *slash = strrchr(target, '/');
    size_t dirlen = slash ? (size_t)(slash - target) + 1 : 0;
    char *tmp = malloc(tl + 32), fdpath[64];
    if (!tmp) { errno = ENOMEM; return -1; }
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", anon_fd);
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 200; attempt++) {
        uint64_t r = rnd64();
        char sfx[7];
        for (int k = 0; k < 6; k++, r /= 62) sfx[k] = al[r % 62];
        sfx[6] = 0;
        if (attempt < 100) snprintf(tmp, tl + 32, "%s.tmp.%s", target, sfx);
        else snprintf(tmp, tl + 32, "%.*s.cis2.tmp.%s", (int)dirlen, target, sfx);
        int fd = anon_fd < 0 ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666)
                             : linkat(AT_FDCWD, fdpath, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW);
        if (fd >= 0) { *tmp_out = tmp; return fd; }
        if (errno == ENAMETOOLONG && attempt < 100) { attempt = 99; continue; }
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(tmp);
    errno = e;
    return -1;
}

/* An unnamed file in target's directory (O_TMPFILE), or -1 where the
 * kernel, the filesystem or a missing /proc (to name it later) rule it
 * out.  Until commit names it, a killed process leaves nothing behind. */
static int open_anon(const char *target)
{
#ifdef O_TMPFILE
    char dir[PATH_MAX];
    if (dir_of(target, dir, sizeof dir) != 0 || access("/proc/self/fd", X_OK) != 0) return -1;
    return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#else
    (void)target;
    return -1;
#endif
}

static void out_free(cis2_out *o)
{
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o);
}

int cis2_out_open(cis2_out **out, const char *path, cis2_error *err)
{
    *out = NULL;
    if (!path || !*path) return cis2_fail(err, CIS2_E_USAGE, "an output file name is empty");
    cis2_out *o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path))) {
        free(o);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    }
    o->slot = -1;
    struct stat st, lst;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            out_free(o);
            return cis2_fail(err, CIS2_E_IO, "%s: is a directory", path);
        }
        if (!S_ISREG(st.st_mode)) { /* a device or FIFO: written in place */
            int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
            if (fd < 0) {
                int e = errno;
                out_free(o);
                if (e == ENXIO && S_ISFIFO(st.st_mode))
                    return cis2_fail(err, CIS2_E_IO, "%s: a FIFO with no reader", path);
                return cis2_fail(err, CIS2_E_IO, "%s: cannot open: %s", path, strerror(e));
            }
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            if (!(o->f = fdopen(fd, "wb"))) {
                close(fd);
                out_free(o);
                return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
            }
            *out = o;
            return CIS2_OK;
        }
        if (access(path, W_OK) != 0) { /* as fopen would refuse it: a rename would replace a read-only file */
            int e = errno;
            out_free(o);
            return cis2_fail(err, CIS2_E_IO, "%s: not writable: %s", path, strerror(e));
        }
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) o->target = realpath(path, NULL);
    }
    if (!o->target && !(o->target = strdup(path))) {
        out_free(o);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    }
    int fd = open_anon(o->target);
    if (fd >= 0) o->anon = 1;
    else if ((fd = make_temp(o->target, -1, &o->tmp)) < 0) {
        int e = errno;
        out_free(o);
        return cis2_fail(err, CIS2_E_IO, "%s: cannot create a file in its directory: %s", path, strerror(e));
    }
    if (o->tmp) o->slot = cis2_cleanup_register(o->tmp, 0);
    if (!(o->f = fdopen(fd, "wb"))) {
        close(fd);
        if (o->tmp) unlink(o->tmp);
        cis2_cleanup_unregister(o->slot);
        out_free(o);
        return cis2_fail(err, CIS2_E_NOMEM, "%s: out of memory", path);
    }
    *out = o;
    return CIS2_OK;
}

FILE *cis2_out_stream(cis2_out *o) { return o->f; }
const char *cis2_out_path(const cis2_out *o) { return o->path; }

void cis2_out_abort(cis2_out *o)
{
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    cis2_cleanup_unregister(o->slot);
    out_free(o);
}

/* Flush, fsync, name an O_TMPFILE file (o->tmp, registered for cleanup
 * from then on), close; 0 or an errno, *what the step that failed.  o->f
 * is NULL afterwards. */
static int out_finish(cis2_out *o, const char **what)
{
    int e = 0;
    *what = "write failed";
    if (fflush(o->f) != 0) e = errno ? errno : EIO;
    else if (ferror(o->f)) e = EIO;
    else if ((o->tmp || o->anon) && fsync(fileno(o->f)) != 0) e = errno;
    else if (o->anon) {
        if (make_temp(o->target, fileno(o->f), &o->tmp) != 0) {
            e = errno;
            *what = "cannot give the finished file a name in its directory";
        } else {
            o->slot = cis2_cleanup_register(o->tmp, 0);
        }
    }
    if (fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
    o->f = NULL;
    return e;
}

static void sync_dir_of(const char *target)
{
    char dir[PATH_MAX];
    if (dir_of(target, dir, sizeof dir) != 0) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int cis2_out_commit(cis2_out *o, cis2_error *err) { return cis2_out_commit_set(&o, 1, err); }

int cis2_out_commit_set(cis2_out **os, size_t n, cis2_error *err)
{
    int rc = CIS2_OK;
    for (size_t i = 0; i < n; i++) { /* 1: everything on disk, or nothing replaced */
        if (!os[i] || rc) continue;
        const char *what;
        int e = out_finish(os[i], &what);
        if (e) rc = cis2_fail(err, CIS2_E_IO, "%s: %s: %s", os[i]->path, what, strerror(e));
    }
    if (rc) {
        for (size_t i = 0; i < n; i++) cis2_out_abort(os[i]);
        return rc;
    }
    int lockfd = -1; /* 2: the renames, serialised per directory */
    for (size_t i = 0; i < n && lockfd < 0; i++) {
        if (!os[i] || !os[i]->tmp) continue;
        char dir[PATH_MAX];
        if (dir_of(os[i]->target, dir, sizeof dir) != 0) break;
        lockfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lockfd >= 0) while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {}
        break;
    }
    for (size_t i = 0; i < n; i++) {
        cis2_out *o = os[i];
        if (!o) continue;
        if (o->tmp && !rc && rename(o->tmp, o->target) != 0)
            rc = cis2_fail(err, CIS2_E_IO, "%s: cannot rename the finished file into place: %s", o->path,
                           strerror(errno));
        else if (o->tmp && !rc) {
            cis2_cleanup_unregister(o->slot);
            o->slot = -1;
            sync_dir_of(o->target);
            free(o->tmp);
            o->tmp = NULL;
        }
        cis2_out_abort(o); /* removes the temporary file if it is still there */
    }
    if (lockfd >= 0) close(lockfd); /* releases the lock */
    return rc;
}

int cis2_write_file(const char *path, const void *data, size_t len, cis2_error *err)
{
    cis2_out *o;
    int rc = cis2_out_open(&o, path, err);
    if (rc) return rc;
    if (len && fwrite(data, 1, len, o->f) != len) {
        int e = errno ? errno : EIO;
        cis2_out_abort(o);
        return cis2_fail(err, CIS2_E_IO, "%s: write failed: %s", path, strerror(e));
    }
    return cis2_out_commit(o, err);
}

/* ------------------------------------------------------ output path checks */

/* The absolute path p names (its directory resolved, the last component as
 * is when it does not exist); NULL when the directory does not resolve. */
static char *resolve_out(const char *p)
{
    char *r = realpath(p, NULL);
    if (r) return r;
    char dir[PATH_MAX];
    dir_of(p, dir, sizeof dir);
    char *rd = realpath(dir, NULL);
    if (!rd) return NULL;
    const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
    size_t n = strlen(rd) + strlen(base) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", strcmp(rd, "/") ? rd : "", base);
    free(rd);
    return out;
}

int cis2_check_output_path(const char *path, const char *const *inputs, size_t n, const char *const *outputs,
                           size_t n2, cis2_error *err)
{
    if (!path || !*path) return cis2_fail(err, CIS2_E_USAGE, "an output file name is empty");
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return cis2_fail(err, CIS2_E_IO, "%s: is a directory", path);
    if (exists && !S_ISREG(st.st_mode)) return CIS2_OK; /* /dev/null, a FIFO: written in place */
    char *res = resolve_out(path);
    char dir[PATH_MAX];
    dir_of(res ? res : path, dir, sizeof dir);
    struct stat ds;
    int rc = CIS2_OK;
    if (stat(dir, &ds) != 0)
        rc = cis2_fail(err, CIS2_E_IO, "%s: its directory %s does not exist (%s)", path, dir, strerror(errno));
    else if (!S_ISDIR(ds.st_mode))
        rc = cis2_fail(err, CIS2_E_IO, "%s: %s is not a directory", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = cis2_fail(err, CIS2_E_IO, "%s: its directory %s is not writable (%s)", path, dir, strerror(errno));
    else if (exists && access(path, W_OK) != 0)
        rc = cis2_fail(err, CIS2_E_IO, "%s: not writable (%s)", path, strerror(errno));
    for (size_t i = 0; !rc && exists && i < n; i++) {
        struct stat is;
        if (inputs[i] && stat(inputs[i], &is) == 0 && is.st_dev == st.st_dev && is.st_ino == st.st_ino)
            rc = cis2_fail(err, CIS2_E_USAGE, "%s: is the same file as the input %s", path, inputs[i]);
    }
    for (size_t i = 0; !rc && i < n2; i++) {
        const char *q = outputs[i];
        if (!q || q == path) continue;
        struct stat qs;
        int clash = !strcmp(q, path);
        if (!clash && exists && stat(q, &qs) == 0 && S_ISREG(qs.st_mode))
            clash = qs.st_dev == st.st_dev && qs.st_ino == st.st_ino;
        if (!clash && res) {
            char *rq = resolve_out(q);
            clash = rq && !strcmp(rq, res);
            free(rq);
        }
        if (clash) rc = cis2_fail(err, CIS2_E_USAGE, "%s and %s are the same output file", path, q);
    }
    free(res);
    return rc;
}

/*
 * fileio.h - how cis2 reads its inputs and writes its outputs
 * (docs/inputs.md "Every input file", "Outputs").  Internal header of the
 * library; callers: the loaders (config.c, tokenizer_load.c,
 * safetensors.c, model.c, receipt.c, trace.c, digest.c), the writers
 * (receipt.c, trace.c, synth.c) and programs built on the library (the
 * CLI).  Nothing here knows about the command line.
 * Spec: §2.1 (an artifact's sha256 is over its bytes: the bytes read are
 * the bytes hashed and parsed, never a second read).
 *
 * Inputs are read exactly once, into memory the process owns, from a
 * regular file: open(O_RDONLY | O_NONBLOCK | O_CLOEXEC) so that a FIFO
 * cannot block the open, then fstat; anything but a regular file is
 * CIS2_E_IO naming what it is.  A size limit is checked against fstat
 * before anything is read.  A file that shrinks, grows or is replaced or
 * rewritten while it is read (size, mtime, ctime, inode or device differ
 * between the fstat before and the one after, or EOF comes early or late)
 * is a clean CIS2_E_IO, never a signal (nothing is mmap'ed).
 *
 * Outputs are written whole or not at all: an unnamed O_TMPFILE file in
 * the target's directory where the filesystem and /proc allow it, else a
 * unique temporary file beside the target ("NAME.tmp.XXXXXX", created
 * O_EXCL; either with mode 0666 & ~umask, like fopen), flushed, fsync'ed,
 * (named NAME.tmp.XXXXXX through /proc/self/fd) and renamed over the
 * target only by a commit; an abort, a failed write or a signal (with
 * cis2_cleanup_install) removes it and leaves the old target as it was.  A target that exists and
 * is not a regular file (/dev/null, a FIFO, a terminal) is written in
 * place: there is nothing to replace atomically.
 */
#ifndef CIS2_FILEIO_H
#define CIS2_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cis2_toolkit.h" /* and cis2.h */

/* ---- inputs ---- */

/* Reads a whole regular file exactly once into memory the process owns.
 * The open cannot block (FIFO); fstat: anything but a regular file is
 * CIS2_E_IO "PATH: not a regular file (a FIFO / a directory / a character
 * device / a block device / a socket)"; a size over `limit` is refused
 * before reading (CIS2_E_FORMAT "PATH: larger than LIMIT bytes, the limit
 * for WHAT (SIZE bytes)"); a file that shrinks, grows or changes during
 * the read is CIS2_E_IO "PATH: changed while being read (...)".  *buf is
 * malloc'ed and NUL-terminated (len excludes the NUL). */
int cis2_read_file(const char *path, size_t limit, const char *what, char **buf, size_t *len,
                   cis2_error *err);

/* A regular file read sequentially, exactly once, in pieces (the weights:
 * no copy of the whole file is ever held).  cis2_in_open checks it like
 * cis2_read_file (limit 0: none); cis2_in_read reads exactly n more bytes
 * (CIS2_E_IO if the file ends first: it shrank); cis2_in_finish checks
 * that the file ends exactly where the reads did and is unchanged, then
 * closes it; cis2_in_close just closes (after an error; NULL-safe). */
typedef struct cis2_in {
    int fd;
    struct stat st;    /* the fstat after open */
    uint64_t size;     /* st.st_size */
    uint64_t pos;      /* bytes read so far */
    char *path;        /* for messages */
} cis2_in;
int cis2_in_open(cis2_in *in, const char *path, uint64_t limit, const char *what, cis2_error *err);
int cis2_in_read(cis2_in *in, void *buf, size_t n, cis2_error *err);
int cis2_in_finish(cis2_in *in, cis2_error *err);
void cis2_in_close(cis2_in *in);
/* Random access instead: exactly n bytes at offset off (CIS2_E_IO if the
 * file is shorter), then cis2_in_unchanged (fstat as at open) and close. */
int cis2_in_pread(cis2_in *in, void *buf, size_t n, uint64_t off, cis2_error *err);
int cis2_in_unchanged(cis2_in *in, cis2_error *err);

/* The file type of st as a phrase for messages: "a FIFO", "a directory",
 * "a character device", "a block device", "a socket", "a symbolic link",
 * "a regular file", "not a regular file". */
const char *cis2_file_kind(const struct stat *st);

/* ---- outputs ---- */

/* Output files written whole or not at all: an unnamed O_TMPFILE file in
 * the target's directory, or where that cannot be (no O_TMPFILE on the
 * filesystem, no /proc to name it by) a unique temporary file beside the
 * target ("NAME.tmp.XXXXXX") registered for removal on SIGINT/SIGTERM/
 * SIGHUP (see cis2_cleanup_install); flushed, fsync'ed and renamed over
 * the target only by commit (an O_TMPFILE file is linked to a
 * NAME.tmp.XXXXXX name just before, registered from then on).  A symbolic link
 * as the target is followed (its target is replaced, as fopen would write
 * it).  cis2_out_open fails (CIS2_E_USAGE for "", CIS2_E_IO otherwise)
 * when the directory is missing or not writable, the path is a directory,
 * or an existing target is not writable (fopen's rule: a read-only file is
 * not replaced).  A process killed by SIGKILL leaves nothing of an
 * O_TMPFILE output (except in the moment between its naming and its
 * rename) and the named temporary file of the fallback; never a partial
 * target. */
typedef struct cis2_out cis2_out;
int cis2_out_open(cis2_out **o, const char *path, cis2_error *err);
FILE *cis2_out_stream(cis2_out *o);
const char *cis2_out_path(const cis2_out *o);   /* the target, as given */
/* Flushes, fsyncs, closes and renames into place; frees o.  CIS2_E_IO on
 * any failure (a full disk, an I/O error, an earlier failed write on the
 * stream): the temporary file is removed and the old target is intact. */
int cis2_out_commit(cis2_out *o, cis2_error *err);
/* Frees o and removes its temporary file; the target is untouched.  NULL ok. */
void cis2_out_abort(cis2_out *o);
/* Commits n outputs as one set: all are flushed, fsync'ed and closed
 * first (any failure aborts them all, no target changes), then renamed
 * one after another while holding an exclusive flock on the directory of
 * the first, so that two processes committing sets into one directory
 * never interleave their renames.  Frees every o[i] (NULL entries are
 * skipped). */
int cis2_out_commit_set(cis2_out **o, size_t n, cis2_error *err);
/* open + write + commit. */
int cis2_write_file(const char *path, const void *data, size_t len, cis2_error *err);

/* Before any work: the directory of `path` exists and is writable, `path`
 * is not a directory, and it is not the same file (st_dev/st_ino, also
 * through symlinks and hard links) as any of the n `inputs` nor the same
 * as any of the n2 `outputs` (same resolved path or same inode).  An
 * existing target that is not a regular file (/dev/null, a FIFO) is
 * accepted and never compared.  CIS2_E_USAGE ("" or a clash, naming both
 * paths) or CIS2_E_IO (directory missing / not writable, a directory). */
int cis2_check_output_path(const char *path, const char *const *inputs, size_t n, const char *const *outputs,
                           size_t n2, cis2_error *err);

/* ---- temporary files and directories ---- */

/* Installs SIGINT, SIGTERM and SIGHUP handlers (for programs; the library
 * never calls it) that unlink every registered temporary file and remove
 * every registered temporary directory (async-signal-safe: unlink,
 * getdents64, unlinkat, rmdir), then re-raise the signal with the default
 * action.  A signal the process ignores (SIG_IGN, e.g. SIGINT for a
 * background job) stays ignored.  Idempotent. */
void cis2_cleanup_install(void);
/* Makes a fresh directory "$TMPDIR/PREFIXXXXXXX" (TMPDIR unset or empty:
 * /tmp) and registers it for removal on a signal.  out receives the path
 * (cap bytes). */
int cis2_mkdtemp(char *out, size_t cap, const char *prefix, cis2_error *err);
/* Removes a cis2_mkdtemp directory and everything in it, and unregisters it. */
void cis2_rmtree_tmp(const char *dir);

/* Registry used by the above (exposed for tests): returns a slot number
 * (>= 0) or -1 when the registry is full or the path too long; the path
 * is then simply not removed on a signal. */
int cis2_cleanup_register(const char *path, int is_dir);
void cis2_cleanup_unregister(int slot);

#endif

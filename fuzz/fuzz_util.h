/*
 * fuzz_util.h - helpers shared by the libFuzzer targets in fuzz/
 * (docs/building.md "Sanitizers, threads and fuzzing").
 *
 * Several loaders take a path (cis2_st_open, cis2_tokenizer_load), so the
 * fuzz input is written to an anonymous memfd and handed over as
 * /proc/self/fd/N: nothing is added to the library API and nothing touches
 * the disk.  The memfd is created once and rewritten per input.
 */
#ifndef CIS2_FUZZ_UTIL_H
#define CIS2_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cis2_toolkit.h"

/* Writes data to the process's scratch memfd (truncated to exactly size
 * bytes) and returns its /proc/self/fd path. */
static inline const char *fuzz_as_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("cis2-fuzz", MFD_CLOEXEC);
        if (fd < 0) { perror("memfd_create"); abort(); }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) { perror("ftruncate"); abort(); }
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) { perror("pwrite"); abort(); }
        off += (size_t)w;
    }
    return path;
}

/* Every failure must be a known status with a one-line, non-empty message. */
static inline void fuzz_check_error(int rc, const cis2_error *e)
{
    if (rc == CIS2_OK) return;
    if (rc < CIS2_E_MISMATCH || rc > CIS2_E_INTERNAL || rc == CIS2_E_INTERNAL) {
        fprintf(stderr, "unexpected status %d: %s\n", rc, e->msg);
        abort();
    }
    if (e->code != rc || !e->msg[0] || strchr(e->msg, '\n')) {
        fprintf(stderr, "bad error record (rc %d, code %d): '%s'\n", rc, e->code, e->msg);
        abort();
    }
}

#endif

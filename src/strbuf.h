/*
 * strbuf.h - a growing NUL-terminated byte buffer for the library's text
 * renderers (receipt.c's receipt lines, sample.c's §S7.5 parameter block,
 * synth.c's safetensors header).
 * Library-internal; the CLI and the server have their own buffers, since
 * they see only include/cis2.h.
 *
 * An allocation failure sets oom and makes every later append a no-op, so
 * a renderer appends unconditionally and checks oom once at the end.  The
 * caller owns p (free it; NULL until the first append).
 */
#ifndef CIS2_STRBUF_H
#define CIS2_STRBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct cis2_sb {
    char *p;
    size_t n, cap;
    int oom;
} cis2_sb;

void cis2_sb_put(cis2_sb *b, const char *s, size_t n);
void cis2_sb_str(cis2_sb *b, const char *s);
/* n bytes as 2n lowercase hex digits */
void cis2_sb_hex(cis2_sb *b, const uint8_t *d, size_t n);
/* "1,2,3" (nothing for n == 0) */
void cis2_sb_csv(cis2_sb *b, const uint32_t *v, size_t n);
void cis2_sb_printf(cis2_sb *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif

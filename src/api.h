/*
 * api.h - what every public entry point of the library does around its
 * work (internal).  Spec §1.3: the library never computes unpinned and
 * never leaves the caller's floating-point environment changed.
 *
 *   cis2_frame f;
 *   if (cis2_api_enter(&f)) ... CIS2_E_FPENV ...
 *   ... work: FTZ/DAZ/RNE pinned ...
 *   cis2_api_leave(&f);   // the caller's MXCSR/FPCR as it was (flags included)
 *
 * A frame is only the floating-point environment: the pool and kernel a
 * call computes with are its explicit context (kernels.h's cis2_ctx, built
 * from the engine at the entry, engine.h).
 *
 * A callback into the caller's code is bracketed by callout_begin/end: the
 * caller's register is restored for the call and the pin put back after.
 * Frames nest (a callback may call the library again).
 */
#ifndef CIS2_API_INTERNAL_H
#define CIS2_API_INTERNAL_H

#include <stdint.h>

typedef struct cis2_frame {
    uint64_t ctl;                /* the caller's control register */
    struct cis2_frame *prev;
    void *held;                  /* engine.h: the engine lock ENGINE_ENTER took */
} cis2_frame;

/* Returns CIS2_OK or CIS2_E_FPENV (the pin did not read back);
 * cis2_api_leave must be called either way. */
int cis2_api_enter(cis2_frame *f);
void cis2_api_leave(cis2_frame *f);
/* A frame with the IEEE default instead of the pin (subnormals kept,
 * nearest-even, traps masked): the chat-template renderer's double
 * arithmetic is Python's (docs/chat.md "The environment").  Left with
 * cis2_api_leave. */
int cis2_api_enter_ieee(cis2_frame *f);
uint64_t cis2_api_callout_begin(void);
void cis2_api_callout_end(uint64_t pinned);
/* Nonzero while the calling thread is inside a frame (also in a callback
 * the library called). */
int cis2_api_in_frame(void);
/* Around a C library decimal conversion (strtof): on x86-64 glibc rounds
 * by the x87 control word, which a frame leaves alone (the library
 * computes in SSE), so begin sets its rounding control to nearest and
 * returns the caller's word for end to put back.  On aarch64 it rounds by
 * FPCR, which the frame pins: both do nothing.  fpenv.c. */
unsigned cis2_libc_round_begin(void);
void cis2_libc_round_end(unsigned saved);

#endif

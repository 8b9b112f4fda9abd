/*
 * engine.h - the engine handle behind include/cis2.h section 3 (internal:
 * session.c, verify.c and results.c reach into it).
 *
 * An engine is a loaded model (model.h), its tokenizer (or the reason it
 * has none), and its own execution context (threadpool.h: worker pool and
 * kernel).  Every public entry point that computes with an engine wraps
 * its work in ENGINE_ENTER / ENGINE_LEAVE (api.h frames).
 *
 * Threads (cis2.h Conventions): any number of calls may compute with one
 * engine at once; they share its pool (one job at a time, the others run
 * theirs on their own thread, threadpool.c) and nothing else that is
 * written.  `calls` is held shared by every computing call (its frame) and
 * exclusively by the two calls that change the engine, set_kernel and
 * set_threads, which therefore wait until no call computes, and are
 * refused from inside one (a callback) instead of waiting for themselves.
 */
#ifndef CIS2_ENGINE_H
#define CIS2_ENGINE_H

#include "api.h"
#include "cis2_toolkit.h" /* and cis2.h */
#include "model.h"
#include "threadpool.h"

#include <pthread.h>

struct cis2_engine {
    cis2_model m;
    cis2_tokenizer *tok;      /* NULL: tok_err says why */
    cis2_error tok_err;
    cis2_exec exec;
    char *dir;
    cis2_model_info info;
    pthread_rwlock_t calls;   /* shared: a computing call; exclusive: set_kernel/threads */
};

/* Opens an API frame on the engine's context; on a pin failure records
 * CIS2_E_FPENV and jumps to label `out` (which must ENGINE_LEAVE). */
#define ENGINE_ENTER(e, frame, err, rc, out)                                                 \
    do {                                                                                     \
        pthread_rwlock_rdlock(&((cis2_engine *)(e))->calls);                                 \
        (frame).held = &((cis2_engine *)(e))->calls;                                         \
        if (cis2_api_enter(&(frame), &((cis2_engine *)(e))->exec)) {                         \
            rc = cis2_fail(err, CIS2_E_FPENV, "FTZ/DAZ pin did not read back (%s)", cis2_isa_name()); \
            goto out;                                                                        \
        }                                                                                    \
    } while (0)
#define ENGINE_LEAVE(frame)                                                                  \
    do {                                                                                     \
        cis2_api_leave(&(frame));                                                            \
        pthread_rwlock_unlock((frame).held);                                                 \
    } while (0)

/* The bytes of ids (raw, no U+FFFD), NUL-terminated; CIS2_E_USAGE without a
 * tokenizer.  Inside a frame. */
int cis2_engine_bytes(const cis2_engine *e, const uint32_t *ids, size_t n, char **text, size_t *len,
                      cis2_error *err);
/* Tokenizes inside a frame (no frame of its own). */
int cis2_engine_encode(const cis2_engine *e, const char *text, size_t len, uint32_t **ids, size_t *n,
                       cis2_error *err);
/* The same, stopping once the ids would exceed max_ids (CIS2_E_USAGE
 * "prompt is longer than N tokens", tokenizer.h): work and memory bounded
 * by max_ids, not by the text. */
int cis2_engine_encode_max(const cis2_engine *e, const char *text, size_t len, size_t max_ids, uint32_t **ids,
                           size_t *n, cis2_error *err);

/* Tests only (verify.c): a prefill verify pass's most rows and logits rows
 * (0: the defaults), so that small models take many passes.  Process-wide;
 * set it while no verify runs. */
void cis2_verify_limits(size_t rows, size_t logit_rows);
/* Tests only: the rows the last prefill verify computed (process-wide). */
size_t cis2_verify_rows_computed(void);

#endif

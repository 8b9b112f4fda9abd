/*
 * engine.h - the engine handle behind include/cis2.h section 3 (internal:
 * session.c, score.c, verify.c, verify_plan.c, verify_score.c and
 * receipt.c reach into it).
 *
 * An engine is a loaded model (model.h), its tokenizer (or the reason it
 * has none), and what its calls compute with: its own worker pool
 * (threadpool.h) and kernel variant (kernels.h).  Every public entry point
 * that computes with an engine wraps its work in ENGINE_ENTER /
 * ENGINE_LEAVE (api.h frames) and passes cis2_engine_ctx(e), a copy of
 * the pool and kernel taken inside the frame, to everything it calls.
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
#include "bigbuf.h"
#include "draft.h"
#include "kernels.h"
#include "model.h"
#include "threadpool.h"

#include <pthread.h>

struct cis2_engine {
    cis2_model m;
    cis2_tokenizer *tok;      /* NULL: tok_err says why */
    cis2_error tok_err;
    cis2_pool *pool;          /* its threads (--threads); changed only under `calls` held exclusively */
    const struct cis2_variant *kern; /* its kernel variant (--kernel); likewise */
    char *dir;
    cis2_model_info info;
    pthread_rwlock_t calls;   /* shared: a computing call; exclusive: set_kernel/threads/speculate */
    int spec_kind;            /* speculative decoding (speculate.h): enum cis2_spec_kind, likewise */
    unsigned spec_k;          /* its draft length */
    cis2_draft_fn draft_fn;   /* CIS2_SPEC_CALLER's drafter and its context, likewise */
    void *draft_ctx;
    cis2_dmodel *dm;          /* CIS2_SPEC_DRAFT's draft model (owned), likewise */
    cis2_reuse logits;        /* a score's or a verification's logits buffer, kept between calls (bigbuf.h) */
};

/* Takes the engine for a computing call and opens an API frame; on a pin
 * failure records CIS2_E_FPENV and jumps to label `out` (which must
 * ENGINE_LEAVE).  Inside, cis2_engine_ctx(e) is the call's context. */
#define ENGINE_ENTER(e, frame, err, rc, out)                                                 \
    do {                                                                                     \
        pthread_rwlock_rdlock(&((cis2_engine *)(e))->calls);                                 \
        (frame).held = &((cis2_engine *)(e))->calls;                                         \
        if (cis2_api_enter(&(frame))) {                                                      \
            rc = cis2_fail(err, CIS2_E_FPENV, "FTZ/DAZ pin did not read back (%s)", cis2_isa_name()); \
            goto out;                                                                        \
        }                                                                                    \
    } while (0)
#define ENGINE_LEAVE(frame)                                                                  \
    do {                                                                                     \
        cis2_api_leave(&(frame));                                                            \
        pthread_rwlock_unlock((frame).held);                                                 \
    } while (0)

/* The execution context of a call with e (kernels.h): the engine's pool
 * and kernel, no background work.  Taken inside ENGINE_ENTER, where
 * neither can change. */
static inline cis2_ctx cis2_engine_ctx(const cis2_engine *e)
{
    return (cis2_ctx){.pool = e->pool, .kern = e->kern, .bg = NULL};
}

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
/* A text prompt's ids (docs/receipts.md "Prompt tokens"): as
 * cis2_engine_encode_max but with the post-processor's special tokens,
 * transformers' default encode(text) = add_special_tokens=True (Llama-2's,
 * Gemma-3's BOS; SmolLM2 and Qwen add none: the same ids).  Runs, verify
 * and check all tokenize prompt bytes with this, so a receipt needs no key
 * for it: the mode is a function of the tokenizer.json its sha256 pins. */
int cis2_engine_encode_prompt(const cis2_engine *e, const char *text, size_t len, size_t max_ids, uint32_t **ids,
                              size_t *n, cis2_error *err);
/* cis2_engine_prompt_bytes (cis2.h) is the bytes an ids prompt records:
 * those cis2_engine_encode_prompt turns back into exactly the ids
 * (receipt.c's cis2_ids_text_bytes); ids without them are recorded as ids
 * (docs/receipts.md "Prompts given as ids"). */

#endif

/*
 * threadpool.h - persistent worker pools and the execution context that
 * picks one (internal; kernels.h's cis2_parallel_for is the usual entry).
 *
 * A pool is a set of worker threads that run the independent items of one
 * job at a time (row-group ranges, §5.2; rows of a stage; sequences), so
 * results never depend on its size.  Spec §1.3: every worker pins FTZ/DAZ
 * itself when it starts and aborts if the pin does not read back; workers
 * never run caller code.
 *
 * An execution context (cis2_exec) is what an engine owns: its pool and its
 * kernel choice.  The library's entry points make the engine's context the
 * calling thread's current one for the duration of the call (api.h), and
 * every worker's current context is its pool's owner, so code deep inside
 * a job (attention, the matrix kernels) finds the right kernel without
 * passing it around.  Without an engine (unit tests, tools) a process-wide
 * default context is used.
 */
#ifndef CIS2_THREADPOOL_H
#define CIS2_THREADPOOL_H

#include <stddef.h>

#include "cis2_toolkit.h" /* and cis2.h */

typedef struct cis2_pool cis2_pool;
typedef struct cis2_exec cis2_exec;

/* Starts n-1 workers (n <= 0: the online CPUs; the caller is the n-th).
 * `owner` becomes every worker's current context. */
int cis2_pool_create(cis2_pool **p, int n, cis2_exec *owner, cis2_error *err);
void cis2_pool_destroy(cis2_pool *p);
/* Threads taking part in a job (workers + caller), >= 1. */
int cis2_pool_size(const cis2_pool *p);
/* fn(ctx, i) for every i in [0, n); items are claimed dynamically.  Runs
 * serially when the pool has one thread, when called from inside a job, or
 * when another thread holds the pool. */
void cis2_pool_run(cis2_pool *p, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);
/* Online CPUs (>= 1). */
int cis2_pool_cpus(void);

/* Background work: ordered steps that one thread at a time advances (the
 * verifier's SHA-256 streams of a pass's logits, verify.c).  It belongs to
 * the thread that set it (cis2_bg_swap): while it is set, every parallel
 * cis2_matmul_n that *this thread* starts carries one step as an extra
 * item (kernels.c), sized to its multiply-adds, so the pool's threads take
 * it between their own items instead of a third thread taking a core from
 * them.  Jobs of other threads sharing the pool (another session, a
 * generate beside a verify) never see it.  A thread's jobs run one after
 * another and an item runs on one thread, so steps never overlap, and each
 * job's close orders one step before the next.  step(ctx, budget) does
 * about budget bytes' worth and clears `more` once nothing is left. */
typedef struct cis2_bg {
    void (*step)(struct cis2_bg *bg, size_t budget);
    int more;
} cis2_bg;

/* The calling thread's background work (NULL: none). */
cis2_bg *cis2_bg_current(void);
/* Sets the calling thread's background work (NULL: none); returns the previous. */
cis2_bg *cis2_bg_swap(cis2_bg *bg);

struct cis2_variant;
struct cis2_exec {
    cis2_pool *pool;                          /* NULL: no workers yet (made on first use) */
    int threads;                              /* requested; <= 0 online CPUs */
    const struct cis2_variant *_Atomic kernel; /* NULL: "auto" (kernels.c) */
};

/* The calling thread's current context (the default one if none is set). */
cis2_exec *cis2_exec_current(void);
/* Makes e current on this thread (NULL: the default); returns the previous. */
cis2_exec *cis2_exec_swap(cis2_exec *e);
/* Sets up e with n threads (workers started lazily); frees its pool. */
void cis2_exec_init(cis2_exec *e, int threads);
void cis2_exec_free(cis2_exec *e);
/* (Re)starts e's pool with n threads; CIS2_E_INTERNAL if a thread cannot start. */
int cis2_exec_set_threads(cis2_exec *e, int n, cis2_error *err);
/* e's pool, started on first use. */
cis2_pool *cis2_exec_pool(cis2_exec *e);

#endif

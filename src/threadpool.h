/*
 * threadpool.h - persistent worker pools and background work (internal;
 * kernels.h's cis2_parallel_for, given a cis2_ctx, is the usual entry).
 *
 * A pool is a set of worker threads that run the independent items of one
 * job at a time (row-group ranges, §5.2; rows of a stage; sequences), so
 * results never depend on its size.  Spec §1.3: every worker pins FTZ/DAZ
 * itself when it starts and aborts if the pin does not read back; workers
 * never run caller code.
 *
 * A pool knows nothing of kernels or engines: which pool a computation
 * uses, with which kernel variant and which background work, is the
 * explicit execution context the caller passes down (cis2_ctx, kernels.h).
 * An engine owns one pool (engine.h); code without an engine (tests,
 * tools) makes its own or passes none (NULL: the calling thread alone).
 */
#ifndef CIS2_THREADPOOL_H
#define CIS2_THREADPOOL_H

#include <stddef.h>

#include "cis2.h"

typedef struct cis2_pool cis2_pool;

/* Starts n-1 workers (n <= 0: the online CPUs; the caller is the n-th);
 * CIS2_E_INTERNAL if a thread cannot start. */
int cis2_pool_create(cis2_pool **p, int n, cis2_error *err);
void cis2_pool_destroy(cis2_pool *p);
/* Threads taking part in a job (workers + caller), >= 1; 1 for NULL. */
int cis2_pool_size(const cis2_pool *p);
/* fn(ctx, i) for every i in [0, n); items are claimed dynamically.  Runs
 * serially when p is NULL or has one thread, when called from inside a
 * job, or when another thread holds the pool. */
void cis2_pool_run(cis2_pool *p, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);
/* Nonzero on a thread that is running items of a job (a worker, or a
 * caller draining its own job): a job started there runs serially. */
int cis2_pool_in_job(void);
/* Online CPUs (>= 1). */
int cis2_pool_cpus(void);

/* Background work: ordered steps that one thread at a time advances (the
 * verifier's SHA-256 streams of a pass's logits, verify.c).  It belongs to
 * one call: the call puts it in its own copy of the execution context
 * (cis2_ctx.bg), and every parallel cis2_matmul_n started with that
 * context (never from inside a job) carries one step as an extra item
 * (kernels.c), sized to its multiply-adds, so the pool's threads take it
 * between their own items instead of a third thread taking a core from
 * them.  Jobs of other calls sharing the pool (another session, a generate
 * beside a verify) run with their own contexts and never see it.  One
 * call's jobs run one after another and an item runs on one thread, so
 * steps never overlap, and each job's close orders one step before the
 * next.  step(ctx, budget) does about budget bytes' worth and clears
 * `more` once nothing is left. */
typedef struct cis2_bg {
    void (*step)(struct cis2_bg *bg, size_t budget);
    int more;
} cis2_bg;

#endif

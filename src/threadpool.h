/*
 * threadpool.h - the persistent worker pool behind cis2_threads_set() and
 * cis2_parallel_for() (kernels.h).  Spec §1.3: every worker pins FTZ/DAZ
 * itself at start and aborts if the pin does not read back.  The pool only
 * distributes independent work items (row-group ranges, §5.2), so results
 * never depend on the thread count.
 */
#ifndef CIS2_THREADPOOL_H
#define CIS2_THREADPOOL_H

#include <stddef.h>

#include "cis2.h"

/* Stops the current workers and starts n-1 new ones (the caller is the n-th). */
int cis2_pool_resize(int n, cis2_error *err);
/* Total threads taking part in a parallel_for (workers + caller), >= 1. */
int cis2_pool_size(void);
/* fn(ctx, i) for every i in [0, n); items are claimed dynamically.  Runs
 * serially when the pool has one thread, when called from inside a job, or
 * when another thread holds the pool. */
void cis2_pool_run(size_t n, void (*fn)(void *ctx, size_t i), void *ctx);
/* Online CPUs (>= 1). */
int cis2_pool_cpus(void);

#endif

/*
 * threadpool.c - persistent pthread pools (threadpool.h).  Owns the worker
 * threads, the job hand-off and the §1.3 per-thread FTZ/DAZ pin of every
 * worker.  Its only thread-local state is the private in-job flag (a job
 * started from inside a job runs serially); which pool and kernel a
 * computation uses is the caller's explicit context (kernels.h).
 *
 * Hand-off: one job slot per pool.  The caller writes fn/ctx/n, resets the
 * claim counter and makes `gen` odd (open); workers spin on `gen` for a
 * while after each job and then sleep on a futex.  Items are claimed with
 * an atomic counter, so a worker that is slow to wake never delays the
 * caller: the caller runs whatever is left itself.  To close a job the
 * caller makes `gen` even and waits until no worker is inside it (`active`,
 * a Dekker pair of seq_cst atomics: a worker increments `active` and then
 * re-reads `gen`), after which the slot may be reused.
 */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if defined(__x86_64__)
#define CPU_RELAX() __asm__ volatile("pause" ::: "memory")
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAX_THREADS 256
#define SPIN_ROUNDS 20000 /* polls of `gen` before a worker sleeps (~1 ms) */

struct cis2_pool {
    _Atomic unsigned gen;      /* odd: a job is open */
    _Atomic int active;        /* workers inside the open job */
    _Atomic int sleepers;      /* workers in futex_wait */
    _Atomic int quit;
    _Atomic size_t next;       /* next unclaimed item */
    _Atomic(void (*)(void *, size_t)) fn;
    _Atomic(void *) ctx;
    _Atomic size_t n;
    pthread_mutex_t run_lock;  /* one job at a time */
    int nworkers;              /* threads besides the caller */
    pthread_t workers[MAX_THREADS];
};

static _Thread_local int in_job; /* nested jobs run serially */

static void futex_wait(_Atomic unsigned *addr, unsigned val)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)addr; (void)val; usleep(50);
#endif
}

static void futex_wake_all(_Atomic unsigned *addr)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, MAX_THREADS, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Claims and runs items of the open job until none is left. */
static void drain(cis2_pool *p)
{
    void (*fn)(void *, size_t) = atomic_load_explicit(&p->fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
    size_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= n) return;
        fn(ctx, i);
    }
}

static void *worker_main(void *arg)
{
    cis2_pool *p = arg;
    cis2_error err = {0};
    if (cis2_fpenv_pin(&err) != CIS2_OK) { /* §1.3: never compute unpinned */
        fprintf(stderr, "cis2: worker thread: %s\n", err.msg);
        abort();
    }
    in_job = 1;
    unsigned seen = atomic_load(&p->gen) & ~1u; /* jobs open at start are not ours to miss */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&p->gen)) == seen || !(g & 1u)) {
            if (atomic_load(&p->quit)) return NULL;
            if (++spins < SPIN_ROUNDS) { CPU_RELAX(); continue; }
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == g && !atomic_load(&p->quit)) futex_wait(&p->gen, g);
            atomic_fetch_sub(&p->sleepers, 1);
            spins = 0;
        }
        atomic_fetch_add(&p->active, 1);
        if (atomic_load(&p->gen) == g) drain(p); /* still open: fields are stable */
        atomic_fetch_sub(&p->active, 1);
        seen = g;
    }
}

int cis2_pool_cpus(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > MAX_THREADS ? MAX_THREADS : (int)c;
}

void cis2_pool_destroy(cis2_pool *p)
{
    if (!p) return;
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->gen, 2); /* keeps parity; wakes sleepers */
    futex_wake_all(&p->gen);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->run_lock);
    free(p);
}

int cis2_pool_create(cis2_pool **out, int n, cis2_error *err)
{
    *out = NULL;
    if (n <= 0) n = cis2_pool_cpus();
    if (n > MAX_THREADS) n = MAX_THREADS;
    cis2_pool *p = calloc(1, sizeof *p);
    if (!p) return cis2_fail(err, CIS2_E_NOMEM, "threadpool: out of memory");
    pthread_mutex_init(&p->run_lock, NULL);
    for (int i = 0; i < n - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
            cis2_pool_destroy(p);
            return cis2_fail(err, CIS2_E_INTERNAL, "threadpool: cannot start worker %d of %d", i + 1, n - 1);
        }
        p->nworkers++;
    }
    *out = p;
    return CIS2_OK;
}

int cis2_pool_size(const cis2_pool *p) { return p ? p->nworkers + 1 : 1; }

int cis2_pool_in_job(void) { return in_job; }

void cis2_pool_run(cis2_pool *p, size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    if (n == 0) return;
    if (!p || n == 1 || p->nworkers == 0 || in_job || pthread_mutex_trylock(&p->run_lock) != 0) {
        for (size_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* open (odd); seq_cst publishes the fields */
    if (atomic_load(&p->sleepers) > 0) futex_wake_all(&p->gen);
    in_job = 1;
    drain(p);
    in_job = 0;
    atomic_fetch_add(&p->gen, 1); /* close (even) */
    /* a worker still inside runs its last item; yield if it was preempted */
    for (int spins = 0; atomic_load(&p->active) > 0; spins++) {
        if (spins < 1000) CPU_RELAX(); else sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}

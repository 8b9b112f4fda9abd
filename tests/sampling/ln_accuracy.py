#!/usr/bin/python3
"""ln_accuracy.py - accuracy of ln_pinned (spec §6.5) where logprobs use it.

Owns: the figures of docs/sampling.md §S9.  Logprobs (§S4) apply ln_pinned
to E, a sum of at most V terms each at most 1, so 1 <= E <= V (V up to
about 2^18).  This measures ln_pinned (tests/sampling/sampling_ref.py, the
independent reimplementation of §6.5, checked against FACTS.md §3's
goldens) against the correctly rounded binary32 ln computed with mpmath,
over three domains:
  ints    every integer 1..262144
  unit    every binary32 in [1, 2) (2^23 values, exhaustive)
  random  10^6 binary32 drawn uniformly among the bit patterns of
          [1, 262144] (numpy default_rng(1))
Per domain: max error against the exact value in ULP (ULP = the binary32
spacing of the exact value's binade), max ULP distance to the correctly
rounded binary32 (integer), the count of results that are not correctly
rounded, max relative error (x != 1) and max absolute error.

The exact value is mpmath's log at 160 bits; the correctly rounded binary32
is that value rounded to 24 bits, nearest-even (the values are far from
binary32's exponent limits).  Not run by `make check`: about 3-4 minutes on
2 cores.  Usage: /usr/bin/python3 tests/sampling/ln_accuracy.py [--quick]
(--quick: every 64th point of each domain, seconds).
"""

import multiprocessing as mp_
import os
import sys
import time

import mpmath
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampling_ref as R  # noqa: E402

PREC = 160


def domain(name):
    if name == 'ints':
        return np.arange(1, 262145, dtype=np.float64).astype(np.float32)
    if name == 'unit':
        return np.arange(0x3F800000, 0x40000000, dtype=np.uint32).view(np.float32)
    if name == 'random':
        rng = np.random.default_rng(1)
        b = rng.integers(0x3F800000, 0x48800000, size=10 ** 6, endpoint=True, dtype=np.uint32)
        return b.view(np.float32)
    raise ValueError(name)


def stats_chunk(args):
    xs, ys = args
    mpmath.mp.prec = PREC
    worst = {'ulp': (0.0, None), 'dist': (0, None), 'rel': (0.0, None), 'abs': (0.0, None)}
    ncr = 0
    for x, y in zip(xs.tolist(), ys.tolist()):
        ex = mpmath.log(mpmath.mpf(x))
        if ex == 0:                         # x == 1: ln_pinned must give exactly 0
            if y != 0.0:
                raise AssertionError('ln_pinned(1) = %r' % y)
            continue
        with mpmath.workprec(24):
            cr = float(+ex)                 # correctly rounded to 24 bits (nearest-even)
        e = int(mpmath.floor(mpmath.log(abs(ex), 2)))
        ulp = mpmath.mpf(2) ** (e - 23)
        err = abs(mpmath.mpf(y) - ex)
        u = float(err / ulp)
        rel = float(err / abs(ex))
        ab = float(err)
        dist = abs(R.bits_of(np.float32(y)) - R.bits_of(np.float32(cr)))
        if dist:
            ncr += 1
        for k, v in (('ulp', u), ('dist', dist), ('rel', rel), ('abs', ab)):
            if v > worst[k][0]:
                worst[k] = (v, x)
    return worst, ncr


def measure(name, step, pool):
    xs = domain(name)[::step]
    ys = R.ln_pinned(xs)
    assert not R.HAZARDS
    n = len(xs)
    chunks = [(xs[i:i + 65536], ys[i:i + 65536]) for i in range(0, n, 65536)]
    worst = {'ulp': (0.0, None), 'dist': (0, None), 'rel': (0.0, None), 'abs': (0.0, None)}
    ncr = 0
    for w, c in pool.imap_unordered(stats_chunk, chunks):
        ncr += c
        for k in worst:
            if w[k][0] > worst[k][0]:
                worst[k] = w[k]
    return n, worst, ncr


def main():
    quick = '--quick' in sys.argv
    step = 64 if quick else 1
    with mp_.Pool(os.cpu_count()) as pool:
        for name in ('ints', 'unit', 'random'):
            t0 = time.time()
            n, w, ncr = measure(name, step, pool)
            print('%-6s points=%d max_ulp_vs_exact=%.4f (x=%r) max_ulp_dist_to_cr=%d (x=%r) '
                  'not_cr=%d max_rel=%.3e (x=%r) max_abs=%.3e (x=%r) [%.0fs]'
                  % (name, n, w['ulp'][0], w['ulp'][1], w['dist'][0], w['dist'][1], ncr,
                     w['rel'][0], w['rel'][1], w['abs'][0], w['abs'][1], time.time() - t0))
            sys.stdout.flush()


if __name__ == '__main__':
    main()

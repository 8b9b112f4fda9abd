#!/usr/bin/python3
"""pmath_exhaustive.py - the reference's exp/ln against cis2's pmath, exhaustively.

Owns: the evidence for docs/sampling.md §S10.3's statement that the
independent reference's exp_pinned and ln_pinned (tests/sampling/
sampling_ref.py) equal cis2's own src/pmath.c bit for bit on the whole of
the sampler's domains: every binary32 z in [-88, -0] (exp, §S3.4.2 and
§S4; about 1.1e9 values) and every binary32 in [1, 2^18] (ln, §S4; about
1.5e8).  Needs the helper tests/oracle/t_sampling_ref.sh builds
($BUILD/tests/pmath_dump, from tests/sampling/pmath_dump.c and a native
libcis2.a).  Not run by `make check`: about 15 minutes.
Usage: /usr/bin/python3 tests/sampling/pmath_exhaustive.py [PMATH_DUMP] [--stride N]
"""

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sampling_ref as R  # noqa: E402


def main(argv):
    exe = next((a for a in argv if not a.startswith('--') and not a.isdigit()),
               os.path.join(os.environ.get('BUILD', 'build'), 'tests', 'pmath_dump'))
    stride = int(argv[argv.index('--stride') + 1]) if '--stride' in argv else 1
    os.environ['CIS2_PMATH_DUMP'] = exe
    import test_sampling_ref as T
    bad = 0
    for op, name, lo, hi in ((0, 'exp', 0x80000000, 0xC2B00000), (1, 'ln', 0x3F800000, 0x48800000)):
        t0, n, miss = time.time(), 0, 0
        fn = R.exp_pinned if op == 0 else R.ln_pinned
        for start in range(lo, hi + 1, 1 << 26):
            x = np.arange(start, min(start + (1 << 26), hi + 1), stride,
                          dtype=np.uint64).astype(np.uint32).view(np.float32)
            miss += int(np.sum(T._pmath(op, x) != R.bits_arr(fn(x))))
            n += len(x)
        print('%s: %d values, %d mismatches, %d flush-window events [%.0fs]'
              % (name, n, miss, len(R.HAZARDS), time.time() - t0))
        bad += miss
    return 1 if bad or R.HAZARDS else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

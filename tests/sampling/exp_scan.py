#!/usr/bin/python3
"""exp_scan.py - exhaustive check of exp_pinned on the weights' domain.

Owns: the evidence for docs/sampling.md §S1.6 and §S3.7's statements about
exp_pinned (spec §6.2) on z <= 0, the only arguments the sampler and the
logprobs give it (§S3.4.2, §S4).  Over every binary32 z in [-88.0, -0.0]
(bit patterns 0x80000000..0xC2B00000, about 1.1e9 values) it checks, with
the reference's x86 FTZ/DAZ emulation (tests/sampling/sampling_ref.py):
  1. no operation inside exp_pinned meets the cross-ISA flush window
     [FLT_MIN*(1-2^-25), FLT_MIN) when |z| >= 2^-25;
  2. exp_pinned(z) == 1.0 exactly when |z| < 2^-25 (and on both ISAs: the
     window cannot move 1 + r with |r| < 2^-25 off 1.0);
  3. exp_pinned(z) <= 1.0;
  4. exp_pinned is monotone non-decreasing in z on this domain.
Not run by `make check` (several minutes).  Usage:
  /usr/bin/python3 tests/sampling/exp_scan.py [--quick]   (--quick: every 4096th value)
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampling_ref as R  # noqa: E402


def main():
    stride = 4096 if '--quick' in sys.argv else 1
    lo, hi = 0x80000000, 0xC2B00000          # -0.0 .. -88.0, magnitude ascending
    chunk = 1 << 24
    prev_last = None                         # exp of the next-larger z (smaller magnitude)
    t0 = time.time()
    n = 0
    tiny_bits = 0x80000000 | 0x33000000      # -2^-25
    for start in range(lo, hi + 1, chunk):
        b = np.arange(start, min(start + chunk, hi + 1), stride, dtype=np.uint64).astype(np.uint32)
        z = b.view(np.float32)
        before = len(R.HAZARDS)
        y = R.exp_pinned(z)                  # tiny |z| run inside HazardOk and assert 1.0
        if len(R.HAZARDS) != before:
            print('window met at', R.HAZARDS[before:before + 5])
            return 1
        yb = y.view(np.uint32)
        if np.any(y[b < tiny_bits] != np.float32(1.0)):
            print('exp_pinned(z) != 1 for some |z| < 2^-25')
            return 1
        if np.any(y > np.float32(1.0)):
            i = int(np.argmax(y > np.float32(1.0)))
            print('exp_pinned(%08x) = %08x > 1' % (b[i], yb[i]))
            return 1
        # z decreases along the array (magnitude ascends): y must not increase
        if np.any(y[1:] > y[:-1]) or (prev_last is not None and y[0] > prev_last):
            i = int(np.argmax(y[1:] > y[:-1]))
            print('not monotone at %08x: %08x then %08x' % (b[i], yb[i], yb[i + 1]))
            return 1
        prev_last = y[-1]
        n += len(z)
    print('exp_scan: %d values of z in [-88, -0]: no flush-window event for |z| >= 2^-25, '
          'exp = 1.0 for |z| < 2^-25, exp <= 1, monotone [%.0fs]' % (n, time.time() - t0))
    return 0


if __name__ == '__main__':
    sys.exit(main())

#!/bin/sh
# t_sampling_ref.sh - the sampling extension's independent Python reference
# (tests/sampling/sampling_ref.py, written from docs/sampling.md alone) and
# its test vectors: Philox known answers, FACTS.md §3's exp/ln and FTZ/DAZ
# goldens, cases worked out by hand, and tests/vectors/sampling/ equal to a
# fresh run of tests/sampling/gen_vectors.py.  A few seconds.
# Skips when Debian's python has no numpy; runs without pytest if it must.
set -u
PY=/usr/bin/python3
cd "$(dirname "$0")/.." || exit 1
export PYTHONDONTWRITEBYTECODE=1
if ! [ -x "$PY" ] || ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    echo "SKIP: $PY cannot import numpy (apt-get install python3-numpy)"; exit 77
fi
if "$PY" -c 'import pytest' >/dev/null 2>&1; then
    exec "$PY" -m pytest -q -p no:cacheprovider tests/sampling/test_sampling_ref.py
fi
echo "note: $PY has no pytest (python3-pytest); running the tests directly"
exec "$PY" tests/sampling/test_sampling_ref.py

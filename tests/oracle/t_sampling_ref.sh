#!/bin/sh
# t_sampling_ref.sh - the sampling extension's independent Python reference
# (tests/sampling/sampling_ref.py, written from docs/sampling.md alone) and
# its test vectors: Philox known answers, FACTS.md §3's exp/ln and FTZ/DAZ
# goldens, cases worked out by hand, the reference's exp/ln against cis2's
# own pmath (when $BUILD/libcis2.a is built for this host), and
# tests/vectors/sampling/ equal to a fresh run of tests/sampling/gen_vectors.py.
# A few seconds.  Skips when Debian's python has no numpy; runs without
# pytest if it must.
# san: skip - the sampler against the second sampler: numbers, not memory
set -u
PY=/usr/bin/python3
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
export PYTHONDONTWRITEBYTECODE=1
[ -x "$PY" ] && "$PY" -c 'import numpy' >/dev/null 2>&1 || skip "$PY cannot import numpy (apt-get install python3-numpy)"
# the differential helper: only for a native build (RUNNER empty)
if [ -z "${RUNNER:-}" ] && [ -f "$BUILD/libcis2.a" ]; then
    mkdir -p "$BUILD/tests"
    # (a sanitizer build's library needs its runtime: then the link fails and
    # the differential test is skipped, the rest still runs)
    if ${CC:-cc} -std=c11 -ffp-contract=off -fno-fast-math -O2 -Iinclude \
            -o "$BUILD/tests/pmath_dump" tests/sampling/pmath_dump.c "$BUILD/libcis2.a" \
            -lcrypto -ljansson -lpthread -lm 2>"$BUILD/tests/pmath_dump.log"; then
        CIS2_PMATH_DUMP=$BUILD/tests/pmath_dump; export CIS2_PMATH_DUMP
    else
        echo "note: cannot link tests/sampling/pmath_dump.c against $BUILD/libcis2.a" \
             "(see $BUILD/tests/pmath_dump.log): the exp/ln differential test is skipped"
    fi
else
    echo "note: no native $BUILD/libcis2.a: the exp/ln differential test is skipped"
fi
if "$PY" -c 'import pytest' >/dev/null 2>&1; then
    exec "$PY" -m pytest -q -rs -p no:cacheprovider tests/sampling/test_sampling_ref.py
fi
echo "note: $PY has no pytest (python3-pytest); running the tests directly"
exec "$PY" tests/sampling/test_sampling_ref.py

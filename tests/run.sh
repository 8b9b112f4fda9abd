#!/bin/sh
# tests/run.sh - run every test: the cmocka unit-test binaries
# ($BUILD/tests/test_*, from tests/unit/) and the shell tests
# (tests/{cli,api,oracle,server,build}/t_*.sh), each as one unit.
# Prints a summary line "check: N passed, N failed" and exits non-zero on
# any failure.  A test that prints "SKIP:" and exits 77 counts as skipped.
#   ONLY=pattern sh tests/run.sh   runs the tests whose name contains it.
#   KINDS="cross" sh tests/run.sh  runs these kinds (folders) instead of the
#                                  default "unit cli api oracle server build";
#                                  `make check-cross` runs the aarch64 leg,
#                                  tests/cross/, this way.
# On a terminal each test's name shows while it runs.
# The shell tests share tests/lib.sh (the same defaults as below, fail, skip,
# a temporary directory, cleanup, servers); tests/README.md describes both.
set -u
BUILD=${BUILD:-build}
export BUILD
CIS2=${CIS2:-$BUILD/cis2}
export CIS2
SHARED=${SHARED:-../shared}
export SHARED
# RUNNER (e.g. "qemu-aarch64-static -L /usr/aarch64-linux-gnu", set by
# `make check` for a cross build) prefixes every target binary: the unit
# test binaries directly, and $CIS2 through a wrapper script so shell tests
# can keep calling "$CIS2" as one word.
RUNNER=${RUNNER:-}
export RUNNER
if [ -n "$RUNNER" ]; then
    mkdir -p "$BUILD/tests"
    wrap=$BUILD/tests/cis2-runner
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$RUNNER" "$(cd "$(dirname "$CIS2")" && pwd)/$(basename "$CIS2")" > "$wrap"
    chmod +x "$wrap"
    CIS2=$wrap
    echo "run.sh: target binaries run through: $RUNNER"
fi
KINDS=${KINDS:-unit cli api oracle server build}
pass=0; fail=0; skip=0; failed=""
tty=""; [ -t 1 ] && tty=1
run_one() {
    name=$1; shift
    case "$name" in *"${ONLY:-}"*) ;; *) return ;; esac
    start=$(date +%s)
    log=$BUILD/tests/$name.log
    [ -z "$tty" ] || printf 'RUN   %s ...' "$name"
    "$@" > "$log" 2>&1
    rc=$?
    [ -z "$tty" ] || printf '\r\033[K'
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); echo "PASS  $name (${secs}s)"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); echo "SKIP  $name: $(grep -m1 'SKIP' "$log")"
    else
        fail=$((fail + 1)); failed="$failed $name"
        echo "FAIL  $name (rc=$rc, ${secs}s); last lines of $log:"
        tail -n 25 "$log" | sed 's/^/    /'
    fi
}
for t in "$BUILD"/tests/test_*; do
    case " $KINDS " in *" unit "*) ;; *) break ;; esac
    case "$t" in *.log) continue ;; esac
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" $RUNNER "$t"
done
# the shell tests by kind (tests/README.md): the program, its API clients,
# the oracles, the server, then the build's own properties
for kind in $KINDS; do
    [ "$kind" = unit ] && continue
    for t in tests/"$kind"/t_*.sh; do
        [ -f "$t" ] || continue
        run_one "$(basename "$t" .sh)" sh "$t"
    done
done
echo
[ -n "$failed" ] && echo "failed:$failed"
if [ $skip -gt 0 ]; then
    echo "check: $pass passed, $fail failed, $skip skipped"
else
    echo "check: $pass passed, $fail failed"
fi
[ $fail -eq 0 ]

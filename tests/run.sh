#!/bin/sh
# tests/run.sh - run every test: the cmocka unit-test binaries
# ($BUILD/tests/test_*, from tests/unit/) and the shell tests
# (tests/{cli,api,oracle,server,build}/t_*.sh), each as one unit.
# Prints one line PASS/FAIL/SKIP per test with its seconds, in the order
# below whatever order they finish in, then the 15 slowest tests, then the
# summary line "check: N passed, N failed" and exits non-zero on any
# failure.  A test that prints "SKIP:" and exits 77 counts as skipped.
#   ONLY=pattern sh tests/run.sh   runs the tests whose name contains it.
#   KINDS="cross" sh tests/run.sh  runs these kinds (folders) instead of the
#                                  default "unit cli api oracle server build";
#                                  `make check-cross` runs the aarch64 leg,
#                                  tests/cross/, this way.
#   SET=san sh tests/run.sh        the sanitizer leg's set: every test but
#                                  those whose header says "# san: skip"
#                                  (docs/building.md "The CI legs").
#   JOBS=N sh tests/run.sh         N tests at a time (default: make's -jN,
#                                  else 1).  A test whose header has a line
#                                  "# serial: WHY" (it times something, or
#                                  measures memory) runs alone.
# On a terminal the running tests' names show while they run.  Each test's
# whole output is in $BUILD/tests/NAME.log, and on a failure its last 25
# lines are printed under its FAIL line.
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
SET=${SET:-all}; [ -n "$SET" ] || SET=all
case "$SET" in all|san) ;; *) echo "run.sh: SET must be all or san, not '$SET'" >&2; exit 2 ;; esac
# JOBS: explicit, else make's -jN (`make -j2 check`; a bare -j means the
# number of cores), else 1.
if [ -z "${JOBS:-}" ]; then
    JOBS=1
    for w in ${MAKEFLAGS:-}; do
        case "$w" in
            -j) JOBS=$(nproc 2>/dev/null || echo 1) ;;
            -j[0-9]*) JOBS=${w#-j} ;;
        esac
    done
fi
case "$JOBS" in ''|*[!0-9]*|0) echo "run.sh: JOBS must be a positive number, not '$JOBS'" >&2; exit 2 ;; esac
mkdir -p "$BUILD/tests"

# ---------------------------------------------------------------- the list
# Test i (0-based) is name_i, cmd_i (a command line: its words have no
# spaces) and serial_i; n of them, in the order they are reported.
n=0
add() {   # add NAME SERIAL CMD...
    case "$1" in *"${ONLY:-}"*) ;; *) return ;; esac
    eval "name_$n=\$1 serial_$n=\$2"
    shift 2
    eval "cmd_$n=\"\$*\""
    n=$((n + 1))
}
header() {   # header FILE KEY: the header line "# KEY: ..." of a shell test
    sed -n "1,40{/^# $2:/p}" "$1" | head -n 1
}
for t in "$BUILD"/tests/test_*; do
    case " $KINDS " in *" unit "*) ;; *) break ;; esac
    case "$t" in *.log|*.rc|*.rc.tmp|*.pid) continue ;; esac
    [ -x "$t" ] || continue
    add "$(basename "$t")" "" $RUNNER "$t"
done
# the shell tests by kind (tests/README.md): the program, its API clients,
# the oracles, the server, then the build's own properties
for kind in $KINDS; do
    [ "$kind" = unit ] && continue
    for t in tests/"$kind"/t_*.sh; do
        [ -f "$t" ] || continue
        [ "$SET" = san ] && [ -n "$(header "$t" san)" ] && continue
        s=""; [ -n "$(header "$t" serial)" ] && s=1
        add "$(basename "$t" .sh)" "$s" sh "$t"
    done
done

# ---------------------------------------------------------------- running
# Each test runs in the background with its output in $BUILD/tests/NAME.log;
# when it ends it writes "STATUS SECONDS" to NAME.rc (through a rename, so a
# half-written file is never read).
launch() {   # launch I
    eval "ln=\$name_$1 lc=\$cmd_$1"
    rm -f "$BUILD/tests/$ln.rc"
    (
        s0=$(date +%s)
        # shellcheck disable=SC2086 # cmd_i is a word list by construction
        $lc > "$BUILD/tests/$ln.log" 2>&1 < /dev/null &
        echo $! > "$BUILD/tests/$ln.pid"
        wait $!
        rc=$?
        echo "$rc $(( $(date +%s) - s0 ))" > "$BUILD/tests/$ln.rc.tmp"
        mv "$BUILD/tests/$ln.rc.tmp" "$BUILD/tests/$ln.rc"
    ) &
    eval "pid_$1=\$!"
}
pass=0; fail=0; skip=0; failed=""
times=""               # "SECONDS NAME" lines, for the slowest
tty=""; [ -t 1 ] && tty=1
report() {   # report I: the result line of a finished test
    eval "rn=\$name_$1"
    rl=$BUILD/tests/$rn.log
    read -r rc secs < "$BUILD/tests/$rn.rc"
    rm -f "$BUILD/tests/$rn.rc" "$BUILD/tests/$rn.pid"
    times="$times$secs $rn
"
    [ -z "$tty" ] || printf '\r\033[K'
    if [ "$rc" -eq 0 ]; then
        pass=$((pass + 1)); echo "PASS  $rn (${secs}s)"
    elif [ "$rc" -eq 77 ]; then
        skip=$((skip + 1)); echo "SKIP  $rn: $(grep -m1 'SKIP' "$rl")"
    else
        fail=$((fail + 1)); failed="$failed $rn"
        echo "FAIL  $rn (rc=$rc, ${secs}s); last lines of $rl:"
        tail -n 25 "$rl" | sed 's/^/    /'
    fi
}
stop_all() {   # the running tests get TERM (their tests/lib.sh traps clean up)
    for i in $running; do
        eval "rn=\$name_$i"
        [ ! -f "$BUILD/tests/$rn.pid" ] || kill "$(cat "$BUILD/tests/$rn.pid")" 2> /dev/null
    done
    wait
}
next=0        # the next test to start
shown=0       # the next test to report
running=""    # indexes of the tests started and not yet reported as ended
alone=""      # set while a serial test runs
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM HUP
while [ $shown -lt $n ]; do
    # start what may start: up to JOBS at once, a serial test only alone
    while [ $next -lt $n ] && [ -z "$alone" ]; do
        nr=$(echo $running | wc -w)
        [ "$nr" -lt "$JOBS" ] || break
        eval "ser=\$serial_$next"
        if [ -n "$ser" ]; then
            [ "$nr" -eq 0 ] || break
            alone=1
        fi
        launch $next
        running="$running $next"
        next=$((next + 1))
    done
    if [ -n "$tty" ]; then
        names=""; for i in $running; do eval "names=\"\$names \$name_$i\""; done
        printf '\r\033[KRUN  %s ...' "$names"
    fi
    # wait until one of the running tests has ended
    still=""
    for i in $running; do
        eval "rn=\$name_$i"
        if [ -f "$BUILD/tests/$rn.rc" ]; then
            eval "wait \$pid_$i"
            eval "done_$i=1"
            eval "ser=\$serial_$i"
            [ -z "$ser" ] || alone=""
        else
            still="$still $i"
        fi
    done
    [ "$still" != "$running" ] || { sleep 0.1; continue; }
    running=$still
    # report, in order, every test whose predecessors have been reported
    while [ $shown -lt $n ] && eval "[ -n \"\${done_$shown:-}\" ]"; do
        report $shown
        shown=$((shown + 1))
    done
done
echo
if [ $n -gt 1 ]; then
    echo "slowest tests (seconds; JOBS=$JOBS):"
    printf '%s' "$times" | sort -k1,1nr -k2 | head -n 15 | awk '{ printf "  %5d  %s\n", $1, $2 }'
    echo
fi
[ -n "$failed" ] && echo "failed:$failed"
if [ $skip -gt 0 ]; then
    echo "check: $pass passed, $fail failed, $skip skipped"
else
    echo "check: $pass passed, $fail failed"
fi
[ $fail -eq 0 ]

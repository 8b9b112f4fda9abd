#!/bin/sh
# §1.4 no-FMA gate: the built binary and library are clean, and the gate
# rejects an object that does contain FMA (so the gate can fail).
set -eu
. tests/lib.sh
tools/check-no-fma "$BUILD/cis2" "$BUILD/libcis2.a"
tmpdir tmp
printf 'float f(float a, float b, float c) { return a * b + c; }\n' > "$tmp/fma.c"
CCX=${CC:-cc}
case "$($CCX -dumpmachine)" in
x86_64*) $CCX -O2 -mfma -ffp-contract=fast -c "$tmp/fma.c" -o "$tmp/fma.o" ;;
*) $CCX -O2 -ffp-contract=fast -c "$tmp/fma.c" -o "$tmp/fma.o" ;;
esac
! tools/check-no-fma "$tmp/fma.o" || fail "gate accepted an object with FMA"
echo "gate rejected the deliberate FMA object: ok"
# unknown ISA is refused
printf 'not an elf\n' > "$tmp/x.bin"
! tools/check-no-fma "$tmp/x.bin" 2>/dev/null || fail "accepted unknown file"
echo ok

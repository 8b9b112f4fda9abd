#!/bin/sh
# The NEON kernel variant (src/kernels/kern_neon.c) on aarch64 under qemu: builds
# tests/unit/kern_selfcheck.c with the kernels, the pool and the §1.3 FP pin
# using aarch64-linux-gnu-gcc, checks the objects hold no FMA (fmla/fmadd...),
# and runs it with qemu-aarch64-static.  Skips (77) without the cross tools.
set -eu
XCC=${XCC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64-static}
SYSROOT=${SYSROOT:-/usr/aarch64-linux-gnu}
for tool in "$XCC" "$QEMU" aarch64-linux-gnu-objdump; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not installed"; exit 77; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
FLAGS="-std=c11 -ffp-contract=off -fno-fast-math -fno-math-errno -fexcess-precision=standard -O2
       -Wall -Wextra -Wno-unused-parameter -Werror -D_DEFAULT_SOURCE -Iinclude -Isrc -pthread -ffunction-sections"
objs=""
# pmath.c for the generic attention halves; its digest functions (OpenSSL) go
# unused, and --gc-sections drops them
for f in src/kernels.c src/threadpool.c src/kernels/kern_neon.c src/fpenv.c src/error.c src/pmath.c tests/unit/kern_selfcheck.c; do
    o="$tmp/$(basename "$f" .c).o"
    $XCC $FLAGS -c "$f" -o "$o"
    objs="$objs $o"
done
# §1.4 gate on the aarch64 objects (the same mnemonics tools/check-no-fma refuses)
fma=$(aarch64-linux-gnu-objdump -d --no-show-raw-insn $objs | awk -F'\t' 'NF>=2 {split($2,a," "); print a[1]}' |
      grep -E '^(fmadd|fmsub|fnmadd|fnmsub|fmla|fmls|fmlal2?|fmlsl2?|bfmlal[bt]?)$' | sort | uniq -c || true)
if [ -n "$fma" ]; then echo "FAIL: FMA in the aarch64 kernel objects:"; echo "$fma"; exit 1; fi
n=$(aarch64-linux-gnu-objdump -d --no-show-raw-insn "$tmp/kern_neon.o" | grep -c 'fmul.*v[0-9]*\.4s' || true)
[ "$n" -gt 0 ] || { echo "FAIL: kern_neon.o has no vector fmul"; exit 1; }
echo "no FMA in the aarch64 objects ($n vector fmul in kern_neon.o)"
$XCC -pthread -Wl,--gc-sections -o "$tmp/kern_selfcheck" $objs
TO=""
command -v timeout >/dev/null 2>&1 && TO="timeout 600"
$TO "$QEMU" -L "$SYSROOT" "$tmp/kern_selfcheck"

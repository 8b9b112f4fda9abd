#!/bin/sh
# tests/cross/t_aarch64.sh - the aarch64 leg (spec §1.3, §13.2, §15 item 2;
# docs/cross-isa.md), run from the x86-64 `make check`:
#   cross-build cis2 and the unit tests with aarch64-linux-gnu-gcc into
#   $BUILD/aarch64, pass the no-FMA gate on the aarch64 binary and library,
#   run every unit-test binary and `cis2 selftest` under
#   qemu-aarch64-static -L /usr/aarch64-linux-gnu (qemu models FPCR.FZ, so
#   the FZ leg of fpenv.c really runs: test_hazards shows FZ flushing where
#   only aarch64 does), and require the CIS2_REF lines of full runs on
#   synthetic checkpoints to equal the x86-64 ones byte for byte, across
#   the aarch64 kernels and thread counts.
# Skips (77) off x86-64, under ASan, or without the cross toolchain/qemu
# (tools/install-deps installs them).
set -u
. tests/lib.sh
[ "${ARCH:-x86_64}" = x86_64 ] || skip "the aarch64 leg runs from an x86-64 build"
for t in aarch64-linux-gnu-gcc qemu-aarch64-static; do
    command -v $t >/dev/null 2>&1 || skip "$t not installed (tools/install-deps)"
done
! nm "$BUILD/cis2" 2>/dev/null | grep -q __asan_init || skip "sanitizer build (the aarch64 leg runs once, in the plain make check)"
QEMU="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
A=$BUILD/aarch64
tmpdir T

# 1. cross build (a clean sub-make: no flags of the parent make leak in)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 CC=aarch64-linux-gnu-gcc OPT=-O2 BUILD="$A" tests \
    > "$T/build.log" 2>&1 || { tail -n 30 "$T/build.log"; fail "cross build failed"; }
case $(file -b "$A/cis2") in *aarch64*) ;; *) fail "$A/cis2 is not an aarch64 binary" ;; esac
echo "cross build: ok ($A)"

# 2. no-FMA gate, whole binary and library (§1.4)
tools/check-no-fma "$A/cis2" "$A/libcis2.a" || fail "no-FMA gate"

# 3. unit tests under qemu, two at a time (each emulated guest is mostly one
#    host thread; the slowest, test_sample, test_kernels and
#    test_concurrency, take a minute each), reported in order
ls "$A"/tests/test_* | grep -v '\.log$' > "$T/units"
xargs -P 2 -I '{}' sh -c '$1 "$2" > "$3/$(basename "$2").log" 2>&1; echo $? > "$3/$(basename "$2").rc"' \
    sh "$QEMU" '{}' "$T" < "$T/units"
while read -r t; do
    n=$(basename "$t")
    [ "$(cat "$T/$n.rc" 2> /dev/null)" = 0 ] || { tail -n 25 "$T/$n.log"; fail "$n under qemu"; }
    echo "unit: $n: ok"
done < "$T/units"

# 4. selftest: the FZ pin reads back on aarch64 and the probes pass
out=$($QEMU "$A/cis2" selftest) || { echo "$out"; fail "selftest under qemu"; }
echo "$out" | grep -q '^fpenv pin  *ok  aarch64$' || { echo "$out"; fail "selftest did not pin on aarch64"; }
echo "$out" | tail -n 1 | grep -qx 'selftest=PASS' || fail "selftest"
echo "selftest (aarch64): PASS"

# 5. full runs: aarch64 CIS2_REF == x86-64 CIS2_REF, byte for byte
$CIS2 synth --shape tiny --seed 11 --out "$T/tiny" > /dev/null || fail "synth tiny"
$CIS2 synth --shape tiny-qwen --seed 12 --out "$T/qwen" > /dev/null || fail "synth tiny-qwen"
$CIS2 synth --shape odd --seed 13 --out "$T/odd" > /dev/null || fail "synth odd"
TOK=$SHARED/models/smollm2-135m/tokenizer.json
if [ -f "$TOK" ]; then
    $CIS2 synth --shape smollm2-135m --seed 14 --tokenizer "$TOK" --out "$T/s135" > /dev/null || fail "synth 135m"
else
    echo "note: $TOK missing, the 135M-shape run is skipped"
fi
ref() { grep '^CIS2_REF '; }
n=0
check() { # name kernel threads args...
    m=$1; k=$2; th=$3; shift 3
    x=$($CIS2 run --model-dir "$T/$m" "$@" 2>&1) || { echo "$x"; fail "x86-64 run $m"; }
    a=$($QEMU "$A/cis2" run --model-dir "$T/$m" "$@" --kernel "$k" --threads "$th" 2>&1) ||
        { echo "$a"; fail "aarch64 run $m --kernel $k --threads $th"; }
    xr=$(echo "$x" | ref); ar=$(echo "$a" | ref)
    [ -n "$xr" ] || fail "no CIS2_REF from the x86-64 run of $m"
    if [ "$xr" != "$ar" ]; then
        echo "x86-64:  $xr"; echo "aarch64: $ar"
        fail "$m: aarch64 (kernel $k, $th threads) differs from x86-64"
    fi
    # every receipt line, not just CIS2_REF
    [ "$(echo "$x" | grep -v '^completion')" = "$(echo "$a" | grep -v '^completion')" ] ||
        fail "$m: the run output differs between the ISAs"
    echo "$m (aarch64 kernel=$k threads=$th): $ar"
    n=$((n + 1))
}
check tiny scalar 1 --prompt-ids 1,2,3,4 --gen-toks 8
check tiny auto 2 --prompt-ids 1,2,3,4 --gen-toks 8
check qwen auto 3 --prompt-ids 7,1,300,42,5 --gen-toks 8
check odd scalar 2 --prompt-ids 3,1,4,1,5 --gen-toks 6
[ -d "$T/s135" ] && check s135 auto 2 --prompt "Once upon a time" --gen-toks 2
# seeded sampling with every filter, logprobs and stop rules (docs/sampling.md):
# the same tokens, logprob bits, finish reason and witness on both ISAs
check qwen scalar 1 --prompt-ids 7,1,300,42,5 --gen-toks 10 --temperature 0.9 --top-k 40 --top-p 0.95 \
    --min-p 0.01 --seed 12345678901234567 --sequence 2 --logprobs 4 --stop-id 611
check tiny auto 2 --prompt-ids 1,2,3,4 --gen-toks 8 --temperature 1.5 --seed 9 --logprobs 20
[ -d "$T/s135" ] && check s135 auto 2 --prompt "Once upon a time" --gen-toks 3 --temperature 0.7 --top-p 0.9 \
    --seed 2024 --logprobs 3
# NaN logits from inf - inf (default NaNs differ by ISA): the witness hashes
# them canonically, so the receipt still agrees (src/witness.c)
cp -r "$T/qwen" "$T/nan"
python3 - "$T/nan/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]; t = json.loads(b[8:8 + n])['model.norm.weight']
o = 8 + n + t['data_offsets'][0]
b[o:o + 4] = b'\x80\x7f\x80\x7f'   # two final-norm gains = bf16 +inf
open(p, 'wb').write(b)
PYEOF
check nan auto 2 --prompt-ids 4,8,15,16 --gen-toks 3
echo "ok: $n runs agree between x86-64 and aarch64"

#!/bin/sh
# tests/cli/t_hostile_mem.sh - memory bounded by the input before it is
# allocated (docs/inputs.md "Memory"): each hostile input
# below is refused with its documented exit code and a peak RSS (VmHWM, via
# GNU time) far below what parsing it would take, under a 4 GiB
# address-space cap (a build without ASan: ASan reserves terabytes), so an
# unbounded allocation would fail (exit 9) instead of passing:
#   - a 40 MB safetensors header of [{},{},...] (jansson: ~3.5 GB; was 7.6 GB
#     for 99 MB), a 40 MB tokenizer.json and a 15 MB config.json of the same;
#   - cis2 diff of two 100-byte traces declaring 2^30-value tensors (was 4
#     GB), and one declaring 2^25 values against a 100-byte dump;
# and the largest inputs the limits admit load within about 1 GB:
#   - a tokenizer.json of 1.4M vocab entries (just under its JSON budget);
#   - a safetensors header of 120,000 tensors (then refused: unexpected).
set -eu
. tests/lib.sh
tmpdir T
ULIM=""
nm "$CIS2" 2>/dev/null | grep -q __asan_init || ULIM="ulimit -v 4194304;"
TIME=""
[ -x /usr/bin/time ] && /usr/bin/time -f %M true > /dev/null 2>&1 && TIME="/usr/bin/time -o $T/rss -f %M"
# expect CODE NEEDLE MAX_MB cmd...: exit CODE, one stderr line with NEEDLE, peak RSS < MAX_MB
n=0
expect() {
    code=$1; needle=$2; max=$3; shift 3
    set +e
    sh -c "$ULIM"' exec '"$TIME"' timeout 120 "$@"' sh "$@" > "$T/out" 2> "$T/err" < /dev/null
    rc=$?
    set -e
    [ $rc -eq "$code" ] || { cat "$T/err"; fail "exit $rc, want $code: $*"; }
    [ -z "$needle" ] || grep -q -- "$needle" "$T/err" || fail "stderr lacks '$needle': $(cat "$T/err")"
    msg="exit $code"
    if [ -n "$TIME" ]; then
        kb=$(tail -n 1 "$T/rss")
        [ "$kb" -lt $((max * 1024)) ] || fail "peak RSS $((kb / 1024)) MB >= $max MB: $*"
        msg="$msg, peak RSS $((kb / 1024)) MB (< $max MB)"
    fi
    n=$((n + 1))
    echo "ok $n: $msg: $(grep -v 'Command exited' "$T/err" | head -n 1 | cut -c1-150)"
}
python3 - "$T" <<'PY'
import json, struct, sys
T = sys.argv[1]
objs = lambda n: b"[" + b",".join([b"{}"] * n) + b"]"
# a 40 MB header of empty objects
h = objs(13_000_000)
open(T + "/hdr40.st", "wb").write(struct.pack("<Q", len(h)) + h)
open(T + "/tok40.json", "wb").write(b'{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ' + objs(13_000_000) + b'}}')
open(T + "/cfg15.json", "wb").write(b'{"x": ' + objs(5_000_000) + b'}')
# the biggest vocab under the JSON budget
voc = ",".join('"t%07d":%d' % (i, i) for i in range(1_400_000))
open(T + "/tokbig.json", "w").write('{"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, '
                                    '"model": {"type": "BPE", "vocab": {' + voc + '}, "merges": []}}')
# a header of 120,000 one-element F32 tensors tiling a 480 KB data area
N = 120_000
hd = {"t%06d" % i: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(N)}
hb = json.dumps(hd).encode()
open(T + "/hdrbig.st", "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(4 * N))
# traces: one record declaring 2^30 values (and one 2^25), 100-byte dumps
sha_a, sha_b = "0" * 64, "1" * 64
for name, count in (("t30", 1 << 30), ("t25", 1 << 25)):
    for side, sha in (("a", sha_a), ("b", sha_b)):
        open("%s/%s%s" % (T, name, side), "w").write("CIS-2-TRACE v1 dump\n0 0 0 q %d %s\n" % (count, sha))
        open("%s/%s%s.f32" % (T, name, side), "wb").write(bytes(100))
PY
$CIS2 synth --shape tiny --seed 1 --out "$T/tiny" > /dev/null
model() { rm -rf "$T/$1"; cp -r "$T/tiny" "$T/$1"; }

model hdr; cp "$T/hdr40.st" "$T/hdr/model.safetensors"
expect 4 "model.safetensors: its JSON would take about" 300 $CIS2 run --model-dir "$T/hdr" --prompt-ids 1 --gen-toks 1
expect 4 "tok40.json: its JSON would take about" 300 $CIS2 tokenize --tokenizer "$T/tok40.json" --text x
model cfg; cp "$T/cfg15.json" "$T/cfg/config.json"
expect 4 "config.json: its JSON would take about" 200 $CIS2 run --model-dir "$T/cfg" --prompt-ids 1 --gen-toks 1
expect 9 "more than the limit" 100 $CIS2 diff "$T/t30a" "$T/t30b"
expect 3 "shorter than its trace says" 100 $CIS2 diff "$T/t25a" "$T/t25b"
# the largest admitted: they load, within about 1 GB
expect 0 "" 1100 $CIS2 tokenize --tokenizer "$T/tokbig.json" --text t0000001
model hbig; cp "$T/hdrbig.st" "$T/hbig/model.safetensors"
expect 4 "missing tensor model.embed_tokens.weight" 1100 $CIS2 run --model-dir "$T/hbig" --prompt-ids 1 --gen-toks 1
echo "t_hostile_mem: $n inputs bounded"

#!/bin/sh
# tests/cli/t_load_layouts.sh - the streaming loader (docs/inputs.md "Memory": model.safetensors
# read once, packed from a bounded staging buffer in file order) packs the
# same weights whatever the file's layout: the logits of every step
# (--dump-logits) must be byte-identical
#   - for the smollm2-135m shape with its tensors stored in reverse name
#     order (the embedding, 56 MB, spans many staging buffers) and a header
#     of odd length, against cis2 synth's own layout;
#   - for the `odd` shape with every tensor widened to F32 (exactly:
#     bf16 << 16, §4.1; the kernels widen bf16 the same way) and every other
#     one moved, against the bf16 original;
# with 1 and 2 threads.
set -eu
. tests/lib.sh
tmpdir T
relayout() { # SRC DST MODE: reverse | f32
    python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
src, dst, mode = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = memoryview(b)[8 + n:]
h.pop("__metadata__", None)
out, blobs, off = {}, [], 0
for i, k in enumerate(sorted(h, reverse=True)):
    v = h[k]
    raw = bytes(data[v["data_offsets"][0]:v["data_offsets"][1]])
    dt = v["dtype"]
    if mode == "f32" and dt == "BF16":
        w = bytearray(2 * len(raw)); w[2::4] = raw[0::2]; w[3::4] = raw[1::2]
        raw, dt = bytes(w), "F32"
    out[k] = {"dtype": dt, "shape": v["shape"], "data_offsets": [off, off + len(raw)]}
    blobs.append(raw); off += len(raw)
hb = json.dumps(out).encode()
if len(hb) % 2 == 0: hb += b" "
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(hb))); f.write(hb)
    for x in blobs: f.write(x)
PY
}
check() { # SHAPE MODE
    $CIS2 synth --shape "$1" --seed 4 --out "$T/a" > /dev/null
    rm -rf "$T/b"; mkdir "$T/b"; cp "$T/a/config.json" "$T/a/tokenizer.json" "$T/b/"
    relayout "$T/a/model.safetensors" "$T/b/model.safetensors" "$2"
    cmp -s "$T/a/model.safetensors" "$T/b/model.safetensors" && fail "$1 $2: the layout did not change"
    for th in 1 2; do
        $CIS2 run --model-dir "$T/a" --prompt-ids 1,2,3,4 --gen-toks 3 --threads $th --dump-logits "$T/la" > /dev/null
        $CIS2 run --model-dir "$T/b" --prompt-ids 1,2,3,4 --gen-toks 3 --threads $th --dump-logits "$T/lb" > /dev/null
        cmp -s "$T/la" "$T/lb" || fail "$1 $2, $th threads: logits differ from synth's layout"
    done
    echo "ok: $1 with $2 layout: identical logits (1 and 2 threads)"
    rm -rf "$T/a" "$T/b"
}
check odd f32
check odd reverse
check smollm2-135m reverse
echo "t_load_layouts: ok"

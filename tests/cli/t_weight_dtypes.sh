#!/bin/sh
# tests/cli/t_weight_dtypes.sh - F16 and F32 weights (docs/inputs.md "Weight dtypes"), each
# widened exactly to fp32.  From one synthetic bf16 checkpoint (`odd` shape,
# untied, and `tiny-qwen`, with q/k/v biases), numpy (Debian's, an
# independent route) writes
#   H: every other tensor rounded to F16 (matrices and vectors; some
#      values land on binary16 subnormals), the rest left BF16;
#   W: the same values widened by numpy (float16 -> float32) and stored
#      as F32, the rest BF16.
# cis2's logits of every step (--dump-logits) must be byte-identical for H
# and W, with 1 and 2 threads: cis2's F16 widening gives numpy's bits, and
# F16 tensors run exactly as their F32 values.  A third file, X (every
# tensor F32), against the bf16 original checks F32 end to end.  The
# third model, `wide`, has untied 16384 x 256 embedding and head (8 MiB
# each as F16, 16 MiB widened): they stream through several staging
# buffers, each widened and packed by several threads.
set -eu
. tests/lib.sh
PY=/usr/bin/python3
$PY -c 'import numpy' 2> /dev/null || skip "$PY lacks numpy"
tmpdir T

convert() { # SRC DST MODE: f16 | f16wide | f32
    $PY - "$1" "$2" "$3" <<'PY'
import json, struct, sys
import numpy as np
src, dst, mode = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = memoryview(b)[8 + n:]
h.pop("__metadata__", None)
out, blobs, off, sub = {}, [], 0, 0
for i, k in enumerate(sorted(h)):
    v = h[k]
    raw = bytes(data[v["data_offsets"][0]:v["data_offsets"][1]])
    dt = v["dtype"]
    assert dt == "BF16", (k, dt)
    f32 = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view("<f4")  # bf16 -> f32, exact
    if mode == "f32":
        raw, dt = f32.tobytes(), "F32"
    elif i % 2 == 0:
        f16 = f32.astype("<f2")  # rounds: this is the checkpoint's own value from here on
        assert np.all(np.isfinite(f16)), k
        sub += int(np.count_nonzero((f16 != 0) & (np.abs(f16) < np.float16(2.0 ** -14))))
        if mode == "f16":
            raw, dt = f16.tobytes(), "F16"
        else:
            raw, dt = f16.astype("<f4").tobytes(), "F32"  # numpy's half -> float
    out[k] = {"dtype": dt, "shape": v["shape"], "data_offsets": [off, off + len(raw)]}
    blobs.append(raw); off += len(raw)
hb = json.dumps(out).encode()
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(hb))); f.write(hb)
    for x in blobs: f.write(x)
if mode == "f16": print(sub)
PY
}
dir_like() { rm -rf "$T/$2"; mkdir "$T/$2"; cp "$T/$1/config.json" "$T/$1/tokenizer.json" "$T/$2/"; }
run() { # DIR THREADS OUT
    $CIS2 run --model-dir "$T/$1" --prompt-ids 1,2,3,4,5 --gen-toks 3 --threads "$2" --dump-logits "$3" > /dev/null
}
n=0
cat > "$T/wide.json" <<'EOF'
{"model_type": "llama", "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 640,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 16384,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000, "tie_word_embeddings": false}
EOF
for shape in odd tiny-qwen wide; do
    if [ $shape = wide ]; then $CIS2 synth --config "$T/wide.json" --seed 9 --out "$T/a" > /dev/null
    else $CIS2 synth --shape $shape --seed 9 --out "$T/a" > /dev/null; fi
    dir_like a H; dir_like a W; dir_like a X
    sub=$(convert "$T/a/model.safetensors" "$T/H/model.safetensors" f16)
    convert "$T/a/model.safetensors" "$T/W/model.safetensors" f16wide
    convert "$T/a/model.safetensors" "$T/X/model.safetensors" f32
    [ "$sub" -gt 0 ] || fail "$shape: no binary16 subnormal among the F16 weights"
    grep -q '"F16"' "$T/H/model.safetensors" && grep -q '"BF16"' "$T/H/model.safetensors" || fail "$shape: H is not mixed"
    for th in 1 2; do
        run H $th "$T/lh"; run W $th "$T/lw"
        cmp -s "$T/lh" "$T/lw" || fail "$shape, $th threads: F16 logits differ from numpy's widened F32"
        run a $th "$T/la"; run X $th "$T/lx"
        cmp -s "$T/la" "$T/lx" || fail "$shape, $th threads: all-F32 logits differ from the bf16 original"
    done
    cmp -s "$T/la" "$T/lh" && fail "$shape: rounding to F16 changed no logit (the test cannot tell)"
    n=$((n + 1)); echo "ok $n: $shape: F16 (mixed with BF16, $sub subnormal weights) = numpy-widened F32; all-F32 = bf16 (1 and 2 threads)"
    rm -rf "$T/a" "$T/H" "$T/W" "$T/X"
done
echo "t_weight_dtypes: ok"

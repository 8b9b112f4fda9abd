#!/bin/sh
# tests/cli/t_moe_inputs.sh - a mixture of experts' bad inputs
# (docs/models.md §M8.1, §M8.2): each ends in one stderr line naming the
# file and the problem, with the documented exit code, before any weight
# is read; never a crash.  Expert counts and top-k out of range, MoE keys
# in a family without experts, a missing or extra expert tensor, an
# expert of the wrong shape, a router of the wrong shape.  And the layer
# pattern: decoder_sparse_step and mlp_only_layers decide which layers
# have experts (a checkpoint with the other pattern is refused).
set -eu
. tests/lib.sh
tmpdir T
n=0
expect() {
    code=$1; needle=$2; shift 2
    set +e
    timeout 60 "$@" > "$T/out" 2> "$T/err" < /dev/null
    rc=$?
    set -e
    [ $rc -eq "$code" ] || { cat "$T/err"; fail "exit $rc, want $code: $*"; }
    [ "$(wc -l < "$T/err")" -eq 1 ] || { cat "$T/err"; fail "stderr is not one line: $*"; }
    grep -qF -- "$needle" "$T/err" || fail "stderr lacks '$needle': $(cat "$T/err")"
    n=$((n + 1))
    echo "ok $n: exit $code: $(cut -c1-160 "$T/err")"
}
st_edit() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
src, dst, code = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
exec(code)
# repack: every tensor left, in its order, its bytes contiguous (a deleted one leaves no hole)
meta = h.pop("__metadata__", None)
out = b""
for k, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    a, e = t["data_offsets"]
    t["data_offsets"] = [len(out), len(out) + e - a]
    out += data[a:e]
if meta is not None: h["__metadata__"] = meta
hb = json.dumps(h).encode()
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + out)
PY
}
cfg() { # cfg NAME PYTHON: tests/families/q3moe.json edited into $T/NAME.json
    python3 -c "import json,sys; c=json.load(open('tests/families/q3moe.json')); $2; json.dump(c, open(sys.argv[1],'w'))" "$T/$1.json"
}
model() { rm -rf "$T/$1"; cp -r "$T/moe" "$T/$1"; }
RUN="run --gen-toks 1 --prompt-ids 1"

$CIS2 synth --config tests/families/q3moe.json --seed 1 --out "$T/moe" > /dev/null
$CIS2 $RUN --model-dir "$T/moe" > /dev/null || fail "the good checkpoint does not run"

# ---- config.json ----
for case in 'c["num_experts_per_tok"]=9|4|num_experts_per_tok 9 exceeds num_experts 8' \
            'c["num_experts"]=1025|4|num_experts = 1025 exceeds the limit 1024' \
            'c["num_experts"]=0|4|num_experts must be a positive integer' \
            'c["num_experts_per_tok"]=0|4|num_experts_per_tok must be a positive integer' \
            'c["mlp_only_layers"]=[3]|4|mlp_only_layers[0] must be a layer index in [0, 3)' \
            'c["mlp_only_layers"]=1|4|mlp_only_layers must be a list' \
            'c["norm_topk_prob"]=1|4|norm_topk_prob must be true or false' \
            'c["decoder_sparse_step"]=0|4|decoder_sparse_step must be a positive integer' \
            'c["model_type"]="qwen3"|5|num_experts is not implemented for model_type qwen3' \
            'c["shared_expert_intermediate_size"]=64|5|shared_expert_intermediate_size'; do
    edit=${case%%|*}; rest=${case#*|}; code=${rest%%|*}; needle=${rest#*|}
    cfg bad "$edit"
    model bad
    cp "$T/bad.json" "$T/bad/config.json"
    expect "$code" "$needle" $CIS2 $RUN --model-dir "$T/bad"
done

# ---- model.safetensors ----
model miss
st_edit "$T/moe/model.safetensors" "$T/miss/model.safetensors" 'del h["model.layers.2.mlp.experts.7.up_proj.weight"]'
expect 4 "missing tensor model.layers.2.mlp.experts.7.up_proj.weight" $CIS2 $RUN --model-dir "$T/miss"
model extra
st_edit "$T/moe/model.safetensors" "$T/extra/model.safetensors" \
  'h["model.layers.0.mlp.experts.8.up_proj.weight"] = dict(h["model.layers.0.mlp.experts.7.up_proj.weight"])'
expect 4 "unexpected tensor model.layers.0.mlp.experts.8.up_proj.weight" $CIS2 $RUN --model-dir "$T/extra"
model bias
st_edit "$T/moe/model.safetensors" "$T/bias/model.safetensors" \
  'h["model.layers.0.mlp.experts.0.down_proj.bias"] = {"dtype": "BF16", "shape": [64], "data_offsets": [len(data), len(data) + 128]}; data += bytes(128)'
expect 4 "unexpected tensor model.layers.0.mlp.experts.0.down_proj.bias" $CIS2 $RUN --model-dir "$T/bias"
model shape
st_edit "$T/moe/model.safetensors" "$T/shape/model.safetensors" \
  't = h["model.layers.0.mlp.experts.3.gate_proj.weight"]; t["shape"] = [64, 48]'
expect 4 "tensor model.layers.0.mlp.experts.3.gate_proj.weight has shape [64,48], config expects [48,64]" \
  $CIS2 $RUN --model-dir "$T/shape"
model router
st_edit "$T/moe/model.safetensors" "$T/router/model.safetensors" \
  't = h["model.layers.2.mlp.gate.weight"]; t["shape"] = [64, 8]'
expect 4 "tensor model.layers.2.mlp.gate.weight has shape [64,8], config expects [8,64]" \
  $CIS2 $RUN --model-dir "$T/router"
# the pattern: layer 1 is dense (mlp_only_layers [1]); with [] it must have experts
model pattern
cfg pat 'c["mlp_only_layers"]=[]'
cp "$T/pat.json" "$T/pattern/config.json"
expect 4 "missing tensor model.layers.1.mlp.gate.weight" $CIS2 $RUN --model-dir "$T/pattern"
cfg step 'c["mlp_only_layers"]=[]; c["decoder_sparse_step"]=2'  # layers 1 sparse, 0 and 2 dense
model step
cp "$T/step.json" "$T/step/config.json"
expect 4 "missing tensor model.layers.0.mlp.gate_proj.weight" $CIS2 $RUN --model-dir "$T/step"
echo "ok: $n hostile MoE inputs"

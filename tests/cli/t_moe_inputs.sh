#!/bin/sh
# tests/cli/t_moe_inputs.sh - a mixture of experts' bad inputs
# (docs/models.md §M8.1, §M8.2, and gpt_oss's §M9.1, §M9.2, §M9.6: its
# quantization_config, YaRN's factor, MXFP4 scale bytes 0 and 255, U8 where
# a float belongs and the reverse, a missing sink, blocks of the wrong
# shape): each ends in one stderr line naming the
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
# bad_config BASE CODE NEEDLE PYTHON: $T/BASE (a checkpoint) with its config.json edited by PYTHON (on `c`)
bad_config() {
    rm -rf "$T/bad"; cp -r "$T/$1" "$T/bad"
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $4; json.dump(c, open(sys.argv[1],'w'))" "$T/bad/config.json"
    expect "$2" "$3" $CIS2 $RUN --model-dir "$T/bad"
}
cfg() { # cfg NAME PYTHON: tests/families/q3moe.json edited into $T/NAME.json
    python3 -c "import json,sys; c=json.load(open('tests/families/q3moe.json')); $2; json.dump(c, open(sys.argv[1],'w'))" "$T/$1.json"
}
model() { rm -rf "$T/$1"; cp -r "$T/${2:-moe}" "$T/$1"; }
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
    edit=${case%%|*}; rest=${case#*|}; code=${rest%%|*}
    bad_config moe "$code" "${rest#*|}" "$edit"
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

# ---- gpt_oss (docs/models.md §M9): its config, MXFP4 parts, sinks ----
omodel() { model "$1" oss; }
$CIS2 synth --config tests/families/gpto.json --seed 1 --out "$T/oss" > /dev/null
$CIS2 $RUN --model-dir "$T/oss" > /dev/null || fail "the good gpt_oss checkpoint does not run"
for case in 'del c["quantization_config"]|5|without quantization_config (unquantised experts) is not implemented' \
            'c["quantization_config"]["quant_method"]="fp8"|5|quant_method '"'fp8'"' is not implemented' \
            'c["quantization_config"]["bits"]=4|5|quantization_config.bits is not implemented' \
            'c["experts_per_token"]=2|4|experts_per_token 2 and num_experts_per_tok 3 disagree' \
            'c["swiglu_limit"]=-1|4|swiglu_limit must be finite and > 0' \
            'c["intermediate_size"]=48|4|must be multiples of 32' \
            'c["rope_scaling"]["factor"]=8.0|5|disagree: which factor is meant?' \
            'c["rope_scaling"]["mscale"]=1.0|5|rope_scaling.mscale = 1.0 is not implemented' \
            'c["num_experts"]=8|5|num_experts is not implemented for model_type gpt_oss' \
            'c["layer_types"][1]="linear_attention"|5|layer_types[1] "linear_attention" is not implemented'; do
    edit=${case%%|*}; rest=${case#*|}; code=${rest%%|*}
    bad_config oss "$code" "${rest#*|}" "$edit"
done
omodel sc0
st_edit "$T/oss/model.safetensors" "$T/sc0/model.safetensors" \
  'a = h["model.layers.1.mlp.experts.down_proj_scales"]["data_offsets"][0]; data = data[:a + 5] + bytes([255]) + data[a + 6:]'
expect 4 "MXFP4 scale byte 255 is not supported" $CIS2 $RUN --model-dir "$T/sc0"
omodel sc1
st_edit "$T/oss/model.safetensors" "$T/sc1/model.safetensors" \
  'a = h["model.layers.0.mlp.experts.gate_up_proj_scales"]["data_offsets"][0]; data = data[:a] + bytes([0]) + data[a + 1:]'
expect 4 "MXFP4 scale byte 0 is not supported" $CIS2 $RUN --model-dir "$T/sc1"
omodel u8
st_edit "$T/oss/model.safetensors" "$T/u8/model.safetensors" \
  't = h["model.layers.0.self_attn.sinks"]; a, e = t["data_offsets"]; t["dtype"] = "U8"; t["data_offsets"] = [a, a + 4]'
expect 4 "model.layers.0.self_attn.sinks: dtype U8 is not a weight dtype here" $CIS2 $RUN --model-dir "$T/u8"
omodel bf
st_edit "$T/oss/model.safetensors" "$T/bf/model.safetensors" \
  't = h["model.layers.2.mlp.experts.down_proj_scales"]; a, e = t["data_offsets"]; t["dtype"] = "BF16"; data = data[:e] + bytes(e - a) + data[e:]; t["data_offsets"] = [a, a + 2 * (e - a)]'
expect 4 "down_proj_scales: MXFP4 blocks and scales are U8" $CIS2 $RUN --model-dir "$T/bf"
omodel sinks
st_edit "$T/oss/model.safetensors" "$T/sinks/model.safetensors" 'del h["model.layers.1.self_attn.sinks"]'
expect 4 "missing tensor model.layers.1.self_attn.sinks" $CIS2 $RUN --model-dir "$T/sinks"
omodel blk
st_edit "$T/oss/model.safetensors" "$T/blk/model.safetensors" \
  't = h["model.layers.0.mlp.experts.gate_up_proj_blocks"]; t["shape"] = [8, 64, 4, 16]'
expect 4 "gate_up_proj_blocks has shape [8,64,4,16], config expects [8,128,2,16]" $CIS2 $RUN --model-dir "$T/blk"
echo "ok: $n hostile MoE inputs"

#!/bin/sh
# tests/cli/t_config_keys.sh - config.json keys of current transformers
# (src/config.c's key table, docs/inputs.md "The key table", docs/models.md
# "Configs written by current transformers"), through `cis2 run`:
#   - the RoPE base given only as rope_parameters.rope_theta (transformers
#     5), or only in rope_scaling with rope_type "default", is the base run:
#     the logits of every step (--dump-logits) are byte-identical to those of
#     the same base given as top-level rope_theta, and differ from those of
#     the default base 10000 (which the key, ignored, would give: a silent
#     wrong answer);
#   - layer_types all "full_attention", pretraining_tp 2 and a config written
#     the transformers-5 way (dtype, rope_parameters, layer_types) give the
#     same logits too;
#   - every refusal is exit 5, one stderr line naming config.json and the
#     key, before any weight is read: model.safetensors holds garbage, so a
#     config accepted by mistake would fail on the weights instead (exit 4).
# The oracle is cis2 itself on the equivalent spelling (top-level
# rope_theta, which the spec's §7.1 and the SmolLM2/Qwen2.5 runs pin).
set -eu
. tests/lib.sh
tmpdir T
n=0

# The `odd` shape: llama, theta 500000, head_dim 24, untied; a model small
# enough to run in well under a second.
$CIS2 synth --shape odd --seed 6 --out "$T/m" > /dev/null
# variant NAME PYTHON: a model dir NAME whose config.json is the synth one
# edited by PYTHON (on the dict `c`); the weights are the same file.
variant() {
    mkdir "$T/$1"
    cp "$T/m/tokenizer.json" "$T/m/model.safetensors" "$T/$1/"
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[2],'w'), indent=1)" \
        "$T/m/config.json" "$T/$1/config.json"
}
logits() { # DIR OUT
    $CIS2 run --model-dir "$1" --prompt-ids 5,6,7,8,9 --gen-toks 4 --dump-logits "$2" > /dev/null
}
same() { # NAME: its logits equal the reference's
    logits "$T/$1" "$T/$1.logits"
    cmp -s "$T/ref.logits" "$T/$1.logits" || fail "$1: logits differ from top-level rope_theta 1e6"
    n=$((n + 1)); echo "ok $n: $1: the same logits as top-level rope_theta 1000000"
}

variant ref 'c["rope_theta"] = 1000000.0'
logits "$T/ref" "$T/ref.logits"
variant default 'del c["rope_theta"]'
logits "$T/default" "$T/default.logits"
cmp -s "$T/ref.logits" "$T/default.logits" && fail "the base 10000 gives the logits of 1e6: this test cannot tell them apart"
n=$((n + 1)); echo "ok $n: the default base 10000 gives other logits (the test can fail)"

variant rope_parameters 'del c["rope_theta"]; c["rope_parameters"] = {"rope_theta": 1000000.0, "rope_type": "default"}'
same rope_parameters
variant rope_parameters_int 'del c["rope_theta"]; c["rope_parameters"] = {"rope_theta": 1000000}'
same rope_parameters_int
variant both_equal 'c["rope_theta"] = 1e6; c["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6}'
same both_equal
variant rope_scaling_default 'del c["rope_theta"]; c["rope_scaling"] = {"rope_type": "default", "rope_theta": 1e6}'
same rope_scaling_default
variant full_layers 'c["rope_theta"] = 1e6; c["layer_types"] = ["full_attention"] * c["num_hidden_layers"]; c["pretraining_tp"] = 2'
same full_layers
variant v5 'del c["rope_theta"]; del c["rope_scaling"]; del c["torch_dtype"]; c["dtype"] = "bfloat16";
c["rope_parameters"] = {"rope_theta": 1000000.0, "rope_type": "default"}; c["transformers_version"] = "5.0.0";
c["layer_types"] = ["full_attention"] * c["num_hidden_layers"]; c["attention_dropout"] = 0.0; c["use_cache"] = True'
same v5
# Mistral-7B-v0.3's config: model_type mistral, sliding_window null is
# Llama's arithmetic (docs/models.md §M5)
variant mistral 'c["rope_theta"] = 1e6; c["model_type"] = "mistral"; c["architectures"] = ["MistralForCausalLM"];
c["sliding_window"] = None'
same mistral
# ... and so is a window of 8 keys or more on this run, whose 4 steps read
# the logits of positions 4..7 (docs/models.md §M5), while one of 7 is not
variant mistral_wide 'c["rope_theta"] = 1e6; c["model_type"] = "mistral"; c["sliding_window"] = 8'
same mistral_wide
variant mistral_narrow 'c["rope_theta"] = 1e6; c["model_type"] = "mistral"; c["sliding_window"] = 7'
logits "$T/mistral_narrow" "$T/mistral_narrow.logits"
cmp -s "$T/ref.logits" "$T/mistral_narrow.logits" && fail "mistral_narrow: a window of 7 keys on 8 positions changed nothing"
n=$((n + 1)); echo "ok $n: mistral_narrow: a window one key short of the run changes the logits"

# ---- refusals: exit 5, one line naming the file and the key, before the weights ----
refuse() { # NAME NEEDLE PYTHON
    variant "$1" "$3"
    printf 'not a safetensors file at all' > "$T/$1/model.safetensors"
    set +e
    $CIS2 run --model-dir "$T/$1" --prompt-ids 5,6 --gen-toks 1 > "$T/out" 2> "$T/err"
    rc=$?
    set -e
    [ $rc -eq 5 ] || { cat "$T/err"; fail "$1: exit $rc, want 5"; }
    [ "$(wc -l < "$T/err")" -eq 1 ] || { cat "$T/err"; fail "$1: stderr is not one line"; }
    grep -q -- "$T/$1/config.json: $2" "$T/err" || fail "$1: stderr lacks 'config.json: $2': $(cat "$T/err")"
    n=$((n + 1)); echo "ok $n: exit 5: $(cut -c1-150 "$T/err")"
}
for t in yarn linear dynamic longrope; do  # llama3 runs (docs/models.md §M1; t_torch_families)
    refuse "params_$t" "rope_parameters.rope_type \"$t\" is not implemented" \
        "del c['rope_theta']; c['rope_parameters'] = {'rope_type': '$t', 'rope_theta': 1e6, 'factor': 4.0}"
    refuse "scaling_$t" "rope_scaling.rope_type \"$t\" is not implemented" \
        "c['rope_scaling'] = {'rope_type': '$t', 'factor': 4.0}"
done
refuse scaling_type "rope_scaling.type \"linear\" is not implemented" 'c["rope_scaling"] = {"type": "linear", "factor": 2.0}'
refuse sliding_layer 'layer_types\[1\] "sliding_attention" is not implemented' \
    'c["layer_types"] = ["full_attention", "sliding_attention"]'
refuse theta_disagree 'rope_theta (500000) and rope_parameters.rope_theta (1000000) disagree' \
    'c["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6}'
refuse default_factor 'rope_parameters.factor = 8.0 is not implemented' \
    'c["rope_parameters"] = {"rope_type": "default", "factor": 8.0}'
refuse unknown_key "key 'embedding_multiplier' is not known to cis2" 'c["embedding_multiplier"] = 12.0'
refuse softcap 'final_logit_softcapping = 30.0 is not implemented' 'c["final_logit_softcapping"] = 30.0'
refuse sliding_window 'sliding_window = 4096 is not implemented' 'c["sliding_window"] = 4096'
refuse use_sliding 'use_sliding_window is true' 'c["use_sliding_window"] = True'
refuse partial 'partial_rotary_factor = 0.5 is not implemented' 'c["partial_rotary_factor"] = 0.5'
refuse family "model_type 'gemma2' not supported" 'c["model_type"] = "gemma2"'
refuse qwen2_sliding 'use_sliding_window is true' \
    'c["model_type"] = "qwen2"; c["sliding_window"] = 4096; c["use_sliding_window"] = True'
echo "t_config_keys: ok ($n checks)"

#!/bin/sh
# t_torch_families.sh - the model families (docs/models.md §M1-§M7): Llama
# 3.1's RoPE scaling (§M1, rope_type "llama3") and Qwen3 (§M2: per-head q/k
# RMSNorm, heads*head_dim != hidden), on small synthetic configs chosen so
# that each feature acts (llama3: original_max_position_embeddings 64 puts
# the 8 frequencies of head_dim 16 in all three bands; qwen3: head_dim 24
# x 4 heads = 96 != hidden 64), SmolLM3 (§M3: no_rope_layers [1, 0, 1]:
# the middle layer attends without RoPE), OLMo-2 (§M4: norms after the
# blocks, q/k norm over the whole projection; GQA 4/2 so k_norm is 32 wide),
# Mistral with a sliding window (§M5: 7 keys, so that the 24 positions of
# a run slide past it and past a 16-key block of the cache) and Phi-3 (§M6:
# fused qkv_proj and gate_up_proj, a window of 5); and, further down,
# Gemma-3, the mixtures of experts and the hybrids (§M7-§M10: Qwen3.5,
# Qwen3.5-MoE, Qwen3-Next, each also on synth_hybrid.py's checkpoints).
#   1. cis2 against the torch fp32 oracle written from transformers'
#      semantics (torch_ref.py): every greedy token with a clear margin and
#      relative L2 <= 1e-4 per step on the logits;
#   2. the oracle without the feature (--ablate llama3 / llama3_smooth /
#      qk_norm / nope / post_norm / qk_norm_per_head / window /
#      window_off_by_one) must reject the same run: the feature changes
#      the output (and a window one key wider is not the same function);
#   3. bit identity: every kernel x threads 1/2 gives the same logits dump
#      and digest; a batch of prompts equals each prompt run alone; the
#      KV-cache decode equals recompute; the receipt verifies (prefill);
#      llama3's inv-freq-table-digest is docs/models.md §M1.6's.
# The oracle parts skip without torch; the identity parts always run.
# san: skip - logits against the torch oracle: numbers, not memory (the
#   families load and run under the sanitizers in t_serve_families)
set -u
. tests/lib.sh
PY=/usr/bin/python3
ORACLE=tests/oracle/torch_ref.py
[ -x "$CIS2" ] || fail "$CIS2 is not an executable (run make)"
tmpdir T
oracle=1
[ -x "$PY" ] && "$PY" -c 'import torch, numpy' >/dev/null 2>&1 || { echo "note: no torch, oracle parts skipped"; oracle=0; }

cat > "$T/llama3.json" <<'J'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 64, "rope_type": "llama3"},
 "tie_word_embeddings": true, "attention_bias": false, "mlp_bias": false, "torch_dtype": "bfloat16"}
J
cat > "$T/qwen3.json" <<'J'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 24, "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
 "rope_scaling": null, "tie_word_embeddings": false, "attention_bias": false, "use_sliding_window": false,
 "sliding_window": null, "max_window_layers": 2, "torch_dtype": "bfloat16"}
J
cat > "$T/smollm3.json" <<'J'
{"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
 "no_rope_layers": [1, 0, 1], "no_rope_layer_interval": 4, "rope_scaling": null, "tie_word_embeddings": true,
 "attention_bias": false, "mlp_bias": false, "use_sliding_window": false, "sliding_window": null,
 "torch_dtype": "bfloat16"}
J
cat > "$T/olmo2.json" <<'J'
{"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 500000,
 "rope_scaling": null, "tie_word_embeddings": false, "attention_bias": false, "attention_dropout": 0.0,
 "torch_dtype": "float32"}
J
cat > "$T/mistral_sw.json" <<'J'
{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
 "sliding_window": 7, "tie_word_embeddings": false, "attention_dropout": 0.0, "torch_dtype": "bfloat16"}
J
cat > "$T/phi3.json" <<'J'
{"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 512, "max_position_embeddings": 512, "original_max_position_embeddings": 512,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": null, "sliding_window": 5,
 "tie_word_embeddings": false, "attention_bias": false, "embd_pdrop": 0.0, "resid_pdrop": 0.0,
 "pad_token_id": 32000, "bos_token_id": 1, "eos_token_id": 32000, "torch_dtype": "bfloat16"}
J

cat > "$T/gemma3.json" <<'J'
{"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_activation": "gelu_pytorch_tanh",
 "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 512, "max_position_embeddings": 512,
 "query_pre_attn_scalar": 20, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_local_base_freq": 10000,
 "rope_scaling": null, "sliding_window": 5, "sliding_window_pattern": 2, "attention_bias": false,
 "attn_logit_softcapping": null, "final_logit_softcapping": null, "torch_dtype": "bfloat16"}
J

kernels=""
$CIS2 synth --shape tiny --seed 7 --out "$T/tiny" > /dev/null || fail "synth tiny"
for k in scalar avx2 avx512 neon; do
    $CIS2 run --model-dir "$T/tiny" --prompt-ids 1 --gen-toks 1 --kernel "$k" > /dev/null 2>&1 && kernels="$kernels $k"
done
echo "kernels:$kernels"

ref() { sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p' "$1"; }
IDS=1,7,3,2,9,11,4,200,13,5,77,6

# family FEATURES...: the checks above on $T/$fam.json
family() {
    fam=$1; shift
    d=$T/$fam
    $CIS2 synth --config "$T/$fam.json" --seed 3 --out "$d" > /dev/null || fail "$fam: synth --config"
    $CIS2 run --model-dir "$d" --prompt-ids $IDS --gen-toks 12 --json --dump-logits "$d/lg.f32" > "$d/run.json" \
        || fail "$fam: cis2 run"
    if [ $oracle = 1 ]; then
        "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" > "$d/oracle.log" \
            || { cat "$d/oracle.log"; fail_later "$fam: the oracle rejects cis2's run"; }
        tail -n 1 "$d/oracle.log"
        case $fam in qwen3_moe|gpt_oss|qwen3_5|qwen3_5_moe|qwen3_next) # the mixtures of experts and hybrids in f64 too
            "$PY" "$ORACLE" check --f64 --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" > "$d/f64.log" \
                || { cat "$d/f64.log"; fail_later "$fam: the float64 reference rejects cis2's run"; }
            echo "$fam in float64: $(tail -n 1 "$d/f64.log")" ;;
        esac
        for f in "$@"; do
            "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" --ablate "$f" \
                > "$d/ablate.log" 2>&1
            rc=$?
            [ $rc -eq 1 ] || { cat "$d/ablate.log"; fail_later "$fam: the oracle without $f: exit $rc, want 1"; }
            echo "$fam without $f: $(tail -n 1 "$d/ablate.log")"
        done
    fi
    # bit identity: kernels x threads
    $CIS2 run --model-dir "$d" --prompt-ids $IDS --gen-toks 12 --dump-logits "$d/base.f32" > "$d/base" \
        || fail "$fam: run"
    for k in $kernels; do
        for t in 1 2; do
            $CIS2 run --model-dir "$d" --prompt-ids $IDS --gen-toks 12 --kernel "$k" --threads "$t" \
                --dump-logits "$d/k.f32" > "$d/k" || fail "$fam: run --kernel $k --threads $t"
            cmp -s "$d/k.f32" "$d/base.f32" || fail_later "$fam: logits differ with --kernel $k --threads $t"
            [ "$(ref "$d/k")" = "$(ref "$d/base")" ] || fail_later "$fam: digest differs with --kernel $k --threads $t"
        done
    done
    echo "$fam: same logits and digest on kernels$kernels x threads 1 2"
    # prefill vs decode: KV cache == recompute
    $CIS2 run --model-dir "$d" --prompt-ids $IDS --gen-toks 12 --recompute > "$d/rc" || fail "$fam: --recompute"
    [ "$(ref "$d/rc")" = "$(ref "$d/base")" ] || fail_later "$fam: KV-cache decode differs from recompute"
    # batch vs solo
    printf '["Once upon a time", "ab", "The quick brown fox jumps"]' > "$d/prompts.json"
    $CIS2 run --model-dir "$d" --prompt-file "$d/prompts.json" --gen-toks 6 > "$d/batch" || fail "$fam: batch"
    i=0
    for p in "Once upon a time" "ab" "The quick brown fox jumps"; do
        $CIS2 run --model-dir "$d" --prompt "$p" --gen-toks 6 > "$d/solo" || fail "$fam: solo $i"
        grep -q "^CIS2_REF digest=$(ref "$d/solo") prompt_idx=$i " "$d/batch" \
            || fail_later "$fam: batch sequence $i differs from its run alone"
        i=$((i + 1))
    done
    echo "$fam: batch == solo, KV decode == recompute"
    # a receipt, verified by prefill
    $CIS2 run --model-dir "$d" --prompt "Once upon a time" --gen-toks 6 --receipt "$d/r" > /dev/null \
        || fail "$fam: run --receipt"
    $CIS2 verify "$d/r" --model-dir "$d" > "$d/verify" 2>&1 || { cat "$d/verify"; fail_later "$fam: receipt does not verify"; }
    # the table's digest: docs/models.md §M1.6 (doc_reimpl.py goldens recompute it from the document)
    if [ "$fam" = llama3 ]; then
        grep -qx "inv-freq-table-digest d0592bf4b3b8b03042a7d58886476276c51446d7bb75de5a97861e32cfdd52d7" "$d/r" \
            || fail_later "llama3: inv-freq-table-digest $(sed -n 's/^inv-freq-table-digest //p' "$d/r"), docs/models.md §M1.6 says d0592bf4..."
    fi
    if [ "$fam" = gemma3 ]; then    # §M7.4: the global table, then the local one (§M7.9)
        grep -qx "inv-freq-table-digest baeaeace2c52a372e07956d82eb2a4b0ce2fd54d1d2589da6b5f7a24fa0d0e80" "$d/r" \
            || fail_later "gemma3: inv-freq-table-digest $(sed -n 's/^inv-freq-table-digest //p' "$d/r"), docs/models.md §M7.9 says baeaeace..."
    fi
}

family llama3 llama3 llama3_smooth
family qwen3 qk_norm
family smollm3 nope
family olmo2 post_norm qk_norm qk_norm_per_head
family mistral_sw window window_off_by_one
family phi3 window window_off_by_one
family gemma3 gemma_norm embed_scale local_rope query_scale layer_pattern window window_off_by_one qk_norm
# qwen3_moe (§M8): 8 experts, 3 per token, layer 1 dense (mlp_only_layers);
# renormalised, and not (then the softmax's place before the top k shows)
cp tests/families/q3moe.json "$T/qwen3_moe.json"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["norm_topk_prob"]=False; json.dump(c,open(sys.argv[2],"w"))' \
    "$T/qwen3_moe.json" "$T/qwen3_moe_nonorm.json"
family qwen3_moe no_norm_topk qk_norm
family qwen3_moe_nonorm topk_then_softmax
# §M8.3's tie rule (§M9.5's too): router rows (and biases) 2j and 2j+1
# made equal, so the third of k = 3 choices is an exact tie in every sparse
# layer at every position; the oracle (which breaks ties by the lower
# index, written independently) agrees, and rejects the run when it breaks
# them the other way.  ties FAM NTIES: on $T/FAM's checkpoint.
ties() {
    [ $oracle = 1 ] || return 0
    d=$T/$1_ties
    cp -r "$T/$1" "$d"
    python3 - "$d/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); base = 8 + n
for k, t in h.items():
    if k.endswith(("mlp.gate.weight", "mlp.router.weight", "mlp.router.bias")):
        row = 2 * (t["shape"][1] if len(t["shape"]) == 2 else 1); a = t["data_offsets"][0]
        for e in range(1, t["shape"][0], 2):
            b[base + a + e * row:base + a + (e + 1) * row] = b[base + a + (e - 1) * row:base + a + e * row]
open(p, "wb").write(b)
PY
    $CIS2 run --model-dir "$d" --prompt-ids $IDS --gen-toks 12 --json --dump-logits "$d/lg.f32" > "$d/run.json" \
        || fail "$1 ties: cis2 run"
    "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" > "$d/oracle.log" \
        || { cat "$d/oracle.log"; fail_later "$1 ties: the oracle rejects cis2's run"; }
    grep -q " $2 exact ties at the boundary" "$d/oracle.log" || { cat "$d/oracle.log"; fail_later "$1 ties: not $2 exact ties"; }
    tail -n 2 "$d/oracle.log"
    "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" --ablate tie_high_index \
        > "$d/ablate.log" 2>&1
    [ $? -eq 1 ] || { cat "$d/ablate.log"; fail_later "$1 ties: the oracle breaking ties upward accepts the run"; }
    echo "$1 ties broken upward: $(tail -n 1 "$d/ablate.log")"
}
ties qwen3_moe 46
# gpt_oss (§M9): sinks, YaRN (factor 4 over 64 original positions), a
# 5-key window in layers 0 and 2, a router with bias choosing on the logits,
# clamped SwiGLU experts with biases, MXFP4 experts (8, 3 per token)
cp tests/families/gpto.json "$T/gpt_oss.json"
family gpt_oss softmax_then_topk no_sinks no_yarn no_yarn_scale yarn_truncate no_swiglu_clamp no_interleave \
    bias_after_weight mxfp4_high_nibble_first window window_off_by_one
if [ $oracle = 1 ]; then
    # YaRN past original_max_position_embeddings (64): a 90-token prompt, 8 more
    d=$T/gpt_oss
    LONG=$(python3 -c 'print(",".join(str((i * 37 + 11) % 509 + 1) for i in range(90)))')
    $CIS2 run --model-dir "$d" --prompt-ids "$LONG" --gen-toks 8 --json --dump-logits "$d/long.f32" > "$d/long.json" \
        || fail "gpt_oss: the long run"
    "$PY" "$ORACLE" check --model-dir "$d" --json "$d/long.json" --logits "$d/long.f32" > "$d/long.log" \
        || { cat "$d/long.log"; fail_later "gpt_oss: the oracle rejects positions 90..97"; }
    echo "gpt_oss at positions 90..97: $(tail -n 1 "$d/long.log")"
fi
ties gpt_oss 69
# hybrid_ref FAM REAL.json: a checkpoint of FAM written independently
# (synth_hybrid.py: the real config's sizes reduced, its own A_log and
# gated-norm dtypes and expert layout, the mtp.* tensors a reader must
# skip), 40 positions (the state past the conv window, the attention
# layer's cache past a 16-key block): cis2 against the oracle
LONG=$(python3 -c 'print(",".join(str((i * 37 + 11) % 509 + 1) for i in range(28)))')
hybrid_ref() {
    [ $oracle = 1 ] || return 0
    d=$T/$1_hy
    "$PY" tests/oracle/synth_hybrid.py --family-config "$SHARED/models/families/$2" --out "$d" --seed 5 --layers 4 \
        --vocab 512 > /dev/null || fail "synth_hybrid.py $1"
    cp "$T/tiny/tokenizer.json" "$d/tokenizer.json" # a synthetic byte-level tokenizer of the same 512 ids
    $CIS2 run --model-dir "$d" --prompt-ids "$LONG" --gen-toks 12 --json --dump-logits "$d/lg.f32" > "$d/run.json" \
        || fail "$1: cis2 run on synth_hybrid.py's checkpoint"
    "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" > "$d/oracle.log" \
        || { cat "$d/oracle.log"; fail_later "$1: the oracle rejects cis2 on synth_hybrid.py's checkpoint"; }
    echo "$1 on synth_hybrid.py's checkpoint: $(tail -n 1 "$d/oracle.log")"
}
# qwen3_5 (§M10): Gated DeltaNet layers 0, 2, 3 (conv window 4, 2 key heads
# shared by 4 value heads, dk 24 != dv 16) and gated full attention in
# layer 1 (partial RoPE over 8 of 32 dims, GQA 4/2, (1 + w) q/k norms),
# behind the multimodal wrapper; each DeltaNet feature and each attention
# feature dropped from the oracle is rejected; chunked_vs_recurrent (the
# delta rule in transformers' chunked prefill form, the same function) is
# the positive control, which must pass
cp tests/families/q35.json "$T/qwen3_5.json"
family qwen3_5 no_conv no_conv_silu no_l2norm no_q_scale no_decay no_dt_bias no_beta no_z_gate gated_norm_1p \
    kv_head_tile no_output_gate gate_halves full_rotary norm_plain_w qk_norm
if [ $oracle = 1 ]; then
    d=$T/qwen3_5
    "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/lg.f32" --ablate chunked_vs_recurrent \
        > "$d/chunked.log" || { cat "$d/chunked.log"; fail_later "qwen3_5: the chunked delta rule rejects cis2's run"; }
    echo "qwen3_5 against the chunked form: $(tail -n 1 "$d/chunked.log")"
fi
hybrid_ref qwen3_5 Qwen3.5-0.8B.json
# qwen3_5_moe (§M10.10): the same layers with a mixture of experts in every
# layer (8 experts as two 3-D tensors, 3 per token, always renormalised)
# and a shared expert behind its sigmoid gate; the routers' tie rule
cp tests/families/q35moe.json "$T/qwen3_5_moe.json"
family qwen3_5_moe no_shared_expert no_shared_gate no_norm_topk no_conv no_decay no_output_gate full_rotary qk_norm
ties qwen3_5_moe 92
hybrid_ref qwen3_5_moe Qwen3.5-35B-A3B.json
# qwen3_next (§M10.11): in_proj_qkvz / in_proj_ba grouped per key head (2
# key heads, so the flat reading differs), experts one tensor each and the
# shared expert, layer 1 dense (mlp_only_layers)
cp tests/families/q3next.json "$T/qwen3_next.json"
family qwen3_next qkvz_flat no_shared_expert no_shared_gate no_norm_topk kv_head_tile no_output_gate full_rotary
ties qwen3_next 69
hybrid_ref qwen3_next Qwen3-Next-80B-A3B.json
end_fails
echo ok

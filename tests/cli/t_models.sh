#!/bin/sh
# Beyond the pinned tuple (docs/models.md): synthetic weights for the REAL configs
# of SmolLM2-360M and Qwen2.5-0.5B (../shared/models, sha256-checked,
# copied byte for byte by `cis2 synth --config`), run by cis2 and compared
# with the torch fp32 oracle; tie + lm_head together is refused.
# san: skip - real-shape decodes against the torch oracle; the code is the
#   small shapes' code (t_run, t_cli under the sanitizers)
set -u
. tests/lib.sh
PY=/usr/bin/python3
ORACLE=tests/oracle/torch_ref.py
tmpdir T
M=$SHARED/models
[ -f "$M/smollm2-360m/config.json" ] || skip "$M not found"
echo "34f7801487078de7e434e19162c497e5cc6ff397080e40e8586627cb68a5168a  $M/smollm2-360m/config.json
479dcf0c5286339e41ad3992cd08ae88a467c4187587936248e2b7c96283484b  $M/qwen2.5-0.5b/config.json
9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c  $M/smollm2-135m/tokenizer.json" | sha256sum -c - \
    || fail "shared model files differ from their pins"
oracle=1
"$PY" -c 'import torch' 2>/dev/null || { echo "note: no torch, oracle comparison skipped"; oracle=0; }

case_() { # name config prompt-ids gen
    d=$T/$1
    $CIS2 synth --config "$2" --seed 5 --out "$d" --tokenizer "$M/smollm2-135m/tokenizer.json" > /dev/null || fail "synth $1"
    [ "$(sha256sum < "$d/config.json")" = "$(sha256sum < "$2")" ] || fail "$1: config not copied byte for byte"
    $CIS2 run --model-dir "$d" --prompt-ids "$3" --gen-toks "$4" --json --dump-logits "$d/logits.f32" > "$d/run.json" \
        || fail "cis2 run $1"
    grep -q "\"config_sha256\": \"$(sha256sum < "$2" | cut -c1-64)\"" "$d/run.json" || fail "$1: config_sha256"
    if [ $oracle = 1 ]; then
        "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/logits.f32" || fail "oracle rejects $1"
    fi
    rm -f "$d/logits.f32"
}
case_ smollm2-360m "$M/smollm2-360m/config.json" 6403,1980,253,655 4
case_ qwen2.5-0.5b "$M/qwen2.5-0.5b/config.json" 9707,1879,264,882 5
# Qwen2.5-0.5B ties the head (its config says so) and carries q/k/v biases
grep -q '"tie_word_embeddings": true' "$M/qwen2.5-0.5b/config.json" || fail "expected a tied Qwen2.5 config"

# tie_word_embeddings true with an lm_head.weight present: refused (exit 5)
$CIS2 synth --shape tiny-qwen --seed 1 --out "$T/tq" > /dev/null
sed 's/"tie_word_embeddings": *false/"tie_word_embeddings": true/' "$T/tq/config.json" > "$T/tq/c2" && mv "$T/tq/c2" "$T/tq/config.json"
set +e
$CIS2 run --model-dir "$T/tq" --prompt-ids 1 --gen-toks 1 > /dev/null 2> "$T/err"; rc=$?
set -e
[ $rc -eq 5 ] || fail "tied config + lm_head.weight: exit $rc, want 5"
grep -q "lm_head.weight is present" "$T/err" || fail "tie+lm_head message: $(cat "$T/err")"
echo ok

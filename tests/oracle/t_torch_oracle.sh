#!/bin/sh
# t_torch_oracle.sh - `cis2 run` logits and greedy tokens against an
# independent torch fp32 forward pass (tests/oracle/torch_ref.py, README
# there) on synthetic checkpoints of several shapes.  Per step: relative L2
# error <= 1e-4, and cis2's token == torch's argmax wherever the top-1/top-2
# margin is clear.  A perturbed logits dump must be rejected.
# Skips when Debian's python has no torch or `cis2 run`/`synth` are missing.
# san: skip - logits against the torch oracle: numbers, not memory
set -u
. tests/lib.sh
PY=/usr/bin/python3
ORACLE=tests/oracle/torch_ref.py

[ -x "$PY" ] && "$PY" -c 'import torch, numpy' >/dev/null 2>&1 || skip "$PY cannot import torch/numpy"
# the oracle's own consistency: torch fp32 vs a numpy float64 implementation
"$PY" "$ORACLE" selftest || fail "oracle selftest"

[ -x "$CIS2" ] || fail "$CIS2 is not an executable (run make)"
for sub in run synth; do
    out=$($CIS2 $sub --help 2>&1)
    rc=$?
    ! echo "$out" | grep -qi "unknown command" || skip "'$CIS2 $sub' not implemented yet (rc=$rc)"
done

tmpdir tmp

# one_case NAME SEED PROMPT_IDS GEN_TOKS [synth options...]
one_case() {
    name=$1 seed=$2 ids=$3 n=$4; shift 4
    d=$tmp/$name
    echo "=== $name (seed $seed, prompt $ids, $n tokens)"
    if ! $CIS2 synth --shape "$name" --seed "$seed" --out "$d" "$@"; then
        fail_later "cis2 synth --shape $name"; return
    fi
    if ! $CIS2 run --model-dir "$d" --prompt-ids "$ids" --gen-toks "$n" --json \
            --dump-logits "$d/logits.f32" > "$d/run.json"; then
        fail_later "cis2 run on $name"; cat "$d/run.json"; return
    fi
    if ! "$PY" "$ORACLE" check --model-dir "$d" --json "$d/run.json" --logits "$d/logits.f32"; then
        fail_later "oracle rejects cis2 run on $name"; cat "$d/run.json"; return
    fi
}

one_case tiny 1 1,7,3,2 8
one_case tiny-qwen 2 5,1,9 8
one_case odd 3 2,11,4,6,1 8

# negative control: the same check must fail on a perturbed dump of a run
# that just passed (one step scaled by 1.001, i.e. relative error 1e-3).
if [ -f "$tmp/tiny/logits.f32" ]; then
    "$PY" - "$tmp/tiny/logits.f32" "$tmp/tiny/bad.f32" <<'EOF'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype="<f4")
n = a.size // 8
a[3 * n:4 * n] *= np.float32(1.001)
a.astype("<f4").tofile(sys.argv[2])
EOF
    if "$PY" "$ORACLE" check --model-dir "$tmp/tiny" --json "$tmp/tiny/run.json" \
            --logits "$tmp/tiny/bad.f32" > "$tmp/neg.log" 2>&1; then
        fail_later "oracle accepted a perturbed logits dump"; cat "$tmp/neg.log"
    else
        echo "negative control: perturbed dump rejected: $(tail -n 1 "$tmp/neg.log")"
    fi
fi

tok=$SHARED/models/smollm2-135m/tokenizer.json
if [ -f "$tok" ]; then
    one_case smollm2-135m 4 1,504,1016,30 6 --tokenizer "$tok"
else
    echo "note: $tok not found, smollm2-135m case skipped"
fi

end_fails
echo ok

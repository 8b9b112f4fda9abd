#!/bin/sh
# tests/cli/t_recurrent.sh - a model with recurrent state (qwen3_5's Gated
# DeltaNet layers, docs/models.md §M10.4) through every route that feeds
# its rows, each giving plain decoding's bits:
#   1. prompts of 1, 2, 3, 4, 5, 16, 17 and 300 tokens (300: prefilled in two
#      steps of the session's 256-row chunks): decoding == --recompute (every
#      row again from position 0 each step) in --json, every step's logits
#      and the receipt; the receipt verifies (one teacher-forced prefill);
#      the 17-token run also on 1 and 2 threads and every kernel;
#   2. speculation: prompt lookup (K 1, 4, 8) and draft models whose drafts
#      are right (the model itself) or mostly wrong (another seed), on a
#      plain and a repetitive prompt: --json, logits and receipt byte for
#      byte those of plain decoding (rejected drafts have advanced the state:
#      the session puts back its copy from before the step, src/session.c);
#   3. verification of a receipt whose claim is wrong at step 3: the verdict
#      names step 3, and the tokens it decodes from there (after the state
#      fed the later claims: src/prefill.c feeds it again from 0) are the
#      run's own;
#   4. scoring two continuations together == each alone, bit for bit;
#   5. a batch of prompts of different lengths == each alone.
# Oracle: plain decoding, token by token (its logits checked against the
# torch reference in t_torch_families); tests/unit/test_deltanet.c checks
# the forward pass's splits directly.
set -u
. tests/lib.sh
tmpdir d

$CIS2 synth --config tests/families/q35.json --seed 3 --out "$d/m" > /dev/null || fail "synth --config q35.json"
$CIS2 synth --config tests/families/q35.json --seed 9 --out "$d/other" > /dev/null || fail "synth, seed 9"
M="--model-dir $d/m"
kernels=""
for k in scalar avx2 avx512 neon; do
    $CIS2 run $M --prompt-ids 1 --gen-toks 1 --kernel "$k" > /dev/null 2>&1 && kernels="$kernels $k"
done
[ -n "$kernels" ] || fail "no kernel runs"
ids() { python3 -c 'import sys; n=int(sys.argv[1]); print(",".join(str((i * 37 + 11) % 509 + 1) for i in range(n)))' "$1"; }

# 1. prompt lengths: decoding == recompute; the receipt verifies
for n in 1 2 3 4 5 16 17 300; do
    P=$(ids $n)
    $CIS2 run $M --prompt-ids "$P" --gen-toks 9 --json --dump-logits "$d/a.f32" --receipt "$d/a.r" > "$d/a.json" \
        || fail "run, $n prompt tokens"
    $CIS2 run $M --prompt-ids "$P" --gen-toks 9 --json --dump-logits "$d/b.f32" --receipt "$d/b.r" --recompute \
        > "$d/b.json" || fail "run --recompute, $n prompt tokens"
    cmp -s "$d/a.json" "$d/b.json" && cmp -s "$d/a.f32" "$d/b.f32" && cmp -s "$d/a.r" "$d/b.r" \
        || fail "$n prompt tokens: decoding differs from --recompute"
    $CIS2 verify "$d/a.r" $M > "$d/v.txt" 2>&1 || { cat "$d/v.txt"; fail "$n prompt tokens: the receipt does not verify"; }
    if [ $n = 17 ]; then
        for k in $kernels; do
            for t in 1 2; do
                $CIS2 run $M --prompt-ids "$P" --gen-toks 9 --json --dump-logits "$d/c.f32" --kernel $k --threads $t \
                    > "$d/c.json" || fail "run --kernel $k --threads $t"
                cmp -s "$d/a.json" "$d/c.json" && cmp -s "$d/a.f32" "$d/c.f32" \
                    || fail "17 prompt tokens: --kernel $k --threads $t differs"
            done
        done
    fi
done
echo "prompt lengths 1..300: decoding == recompute, receipts verify; kernels$kernels x threads 1 2 agree"

# 2. speculation == plain decoding
for p in "Once upon a time" "ab ab ab ab ab ab ab ab"; do
    $CIS2 run $M --prompt "$p" --gen-toks 24 --json --dump-logits "$d/p.f32" --receipt "$d/p.r" > "$d/p.json" \
        || fail "plain run"
    for s in lookup:1 lookup:4 lookup:8 "draft:$d/m:4" "draft:$d/other:3" "draft:$d/other:1"; do
        $CIS2 run $M --prompt "$p" --gen-toks 24 --json --dump-logits "$d/s.f32" --receipt "$d/s.r" --speculate "$s" \
            > "$d/s.json" || fail "run --speculate $s"
        cmp -s "$d/p.json" "$d/s.json" && cmp -s "$d/p.f32" "$d/s.f32" && cmp -s "$d/p.r" "$d/s.r" \
            || fail "'$p' --speculate $s differs from plain decoding"
    done
done
echo "speculation (lookup, right and wrong draft models) == plain decoding"

# 3. a wrong claim at step 3: found, and the decode after it is the run's
$CIS2 run $M --prompt "Once upon a time" --gen-toks 10 --receipt "$d/r" --json > "$d/r.json" || fail "run --receipt"
got=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["generated_token_ids"])))' "$d/r.json")
bad=$(python3 - "$d/r" "$d/bad.r" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
for i, l in enumerate(lines):
    if l.startswith("generated-token-ids "):
        t = l.split(" ")[1].split(",")
        t[3] = str((int(t[3]) + 1) % 512)
        lines[i] = "generated-token-ids " + ",".join(t)
        print(",".join(t))
open(sys.argv[2], "w").write("\n".join(lines))
PY
)
$CIS2 verify "$d/bad.r" $M > "$d/v.txt" 2>&1 && fail "a wrong claim verifies"
grep -q "^first-bad-step 3:" "$d/v.txt" || { cat "$d/v.txt"; fail "the wrong claim is not found at step 3"; }
grep -q "^generated-token-ids MISMATCH expected=$bad got=$got\$" "$d/v.txt" \
    || { cat "$d/v.txt"; fail "the tokens decoded after the wrong claim are not the run's ($got)"; }
echo "a wrong claim at step 3: found, and the decode after it is the run's"

# 4. scoring together == alone
$CIS2 score $M --context "Once upon a" --continuation " time" --continuation " dog was here" --json > "$d/both.json" \
    || fail "score two continuations"
$CIS2 score $M --context "Once upon a" --continuation " dog was here" --json > "$d/one.json" || fail "score one"
python3 - "$d/both.json" "$d/one.json" <<'PY' || fail "scoring together differs from alone"
import json, sys
both = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
one = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
def toks(doc):
    out = []
    def walk(x):
        if isinstance(x, dict):
            if "bits" in x and "id" in x: out.append((x["id"], x["bits"]))
            for v in x.values(): walk(v)
        elif isinstance(x, list):
            for v in x: walk(v)
    walk(doc)
    return out
b, o = toks(both), toks(one)
assert o and b[-len(o):] == o, (b, o)
PY
echo "scoring two continuations together == alone"

# 5. a batch of different lengths == each alone
printf '["Once upon a time", "ab", "The quick brown fox jumps over", "x"]' > "$d/prompts.json"
$CIS2 run $M --prompt-file "$d/prompts.json" --gen-toks 7 > "$d/batch" || fail "batch run"
i=0
for p in "Once upon a time" "ab" "The quick brown fox jumps over" "x"; do
    $CIS2 run $M --prompt "$p" --gen-toks 7 > "$d/solo" || fail "solo run $i"
    ref=$(sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p' "$d/solo")
    grep -q "^CIS2_REF digest=$ref prompt_idx=$i " "$d/batch" || fail "batch sequence $i differs from its run alone"
    i=$((i + 1))
done
echo "a batch of four prompts == each alone"
echo ok

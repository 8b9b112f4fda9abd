#!/bin/sh
# tests/cli/t_speculate_draft.sh - `cis2 run --speculate draft:DIR[:K]`
# (docs/speculate.md "A draft model") gives plain decoding's
# bytes: stdout, --json (tokens, logprob bits, witness, finish), every
# step's logits (--dump-logits) and the receipt.
#
# Oracle: plain decoding (no --speculate).  Target: the tiny shape.  Drafts,
# all with the same (synthetic) tokenizer.json: the target itself (its greedy
# drafts are right wherever the target decodes greedily), another tiny
# (other weights: mostly wrong), tiny-qwen (a vocabulary of 640 > 512: drafts
# past the target's vocabulary are cut) and odd (another architecture);
# greedy and seeded sampling with logprobs and a stop id met mid-way, several
# prompts decoding together, K 1/4/8, threads 1/2, every kernel at K=4.
# That the drafts are used at all (accepted, fewer passes) is
# t_serve_speculate's: its draft server counts its model passes.
# Refusals: a draft model with another tokenizer.json (exit 2, naming both
# hashes), a missing draft directory (exit 3), bad forms (exit 2, before
# any load).
# san: skip - draft-model decodes compared with plain ones; python
#   test_drafter and test_concurrency run set_speculate with a draft model
#   under the sanitizers
set -u
. tests/lib.sh
tmpdir d

kernels=""
$CIS2 synth --shape tiny --seed 7 --out "$d/t" > /dev/null || fail "synth tiny"
for k in scalar avx2 avx512 neon; do
    $CIS2 run --model-dir "$d/t" --prompt-ids 1 --gen-toks 1 --kernel "$k" > /dev/null 2>&1 && kernels="$kernels $k"
done
first=${kernels# }
first=${first%% *}
$CIS2 synth --shape tiny --seed 8 --out "$d/other" > /dev/null || fail "synth tiny 8"
$CIS2 synth --shape tiny-qwen --seed 7 --out "$d/wide" > /dev/null || fail "synth tiny-qwen"
$CIS2 synth --shape odd --seed 7 --out "$d/odd" > /dev/null || fail "synth odd"
n=0

# same LABEL ARGS...: plain vs every draft model x K x threads
same() {
    label=$1; shift
    $CIS2 run "$@" > "$d/p.txt" || fail "$label: plain run"
    $CIS2 run "$@" --json --dump-logits "$d/p.dump" --receipt "$d/p.r" > "$d/p.json" || fail "$label: plain --json"
    for dm in t other wide odd; do
        for K in 1 4 8; do
            for t in 1 2; do
                for k in $kernels; do
                    [ "$K$dm" = 4t ] || [ "$k" = "$first" ] || continue # every kernel with the self-draft at K=4
                    sp="--speculate draft:$d/$dm:$K --threads $t --kernel $k"
                    $CIS2 run "$@" $sp > "$d/s.txt" || fail "$label $dm K=$K: run"
                    $CIS2 run "$@" $sp --json --dump-logits "$d/s.dump" --receipt "$d/s.r" > "$d/s.json" \
                        || fail "$label $dm K=$K: --json run"
                    for f in txt json dump r; do
                        cmp -s "$d/p.$f" "$d/s.$f" || fail "$label draft=$dm K=$K threads=$t kernel=$k: .$f differs"
                    done
                    n=$((n + 1))
                done
            done
        done
    done
    echo "$label: plain decoding's bytes with every draft model"
}

rep="the cat sat on the mat. the cat sat on the mat. the cat"
samp="--temperature 0.7 --top-k 8 --seed 42 --logprobs 3"
$CIS2 run --model-dir "$d/t" --prompt "$rep" --gen-toks 40 $samp > "$d/sp.txt" || fail "sampled"
stop=$(sed -n 's/^generated_token_ids = //p' "$d/sp.txt" | cut -d, -f10)
same "greedy" --model-dir "$d/t" --prompt "Once upon a time" --gen-toks 37
same "greedy logprobs stop" --model-dir "$d/t" --prompt "$rep" --gen-toks 40 --logprobs 2 --stop-id "$stop"
same "sampled stop" --model-dir "$d/t" --prompt "$rep" --gen-toks 40 $samp --stop-id "$stop"
# several prompts decoding together, each sequence with its own draft cache
printf '%s\n' "Once upon a time" "$rep" "abcabcabcabc" > "$d/prompts"
$CIS2 run --model-dir "$d/t" --prompt-file "$d/prompts" --gen-toks 30 $samp --json --receipt "$d/pb.r" > "$d/pb.json" ||
    fail "plain batch"
for dm in t wide; do
    $CIS2 run --model-dir "$d/t" --prompt-file "$d/prompts" --gen-toks 30 $samp --json --receipt "$d/sb.r" \
        --speculate "draft:$d/$dm:3" --threads 2 > "$d/sb.json" || fail "draft $dm: batch"
    cmp -s "$d/pb.json" "$d/sb.json" || fail "draft $dm: batch --json differs"
    for i in 0 1 2; do cmp -s "$d/pb.r.$i" "$d/sb.r.$i" || fail "draft $dm: batch receipt $i differs"; done
done
echo "batch: the same with a draft model ($n single runs compared before)"

# refusals
$CIS2 synth --shape tiny --seed 7 --tokenizer "$SHARED/models/smollm2-135m/tokenizer.json" --out "$d/tok" > /dev/null ||
    fail "synth with the real tokenizer"
expect() { # RC NEEDLE ARGS...: exit RC, one line containing NEEDLE
    want=$1; needle=$2; shift 2
    $CIS2 run --model-dir "$d/t" --prompt-ids 1,2 --gen-toks 3 "$@" > /dev/null 2> "$d/err"
    rc=$?
    [ $rc = "$want" ] || fail "$*: exit $rc, want $want: $(cat "$d/err")"
    [ "$(wc -l < "$d/err")" = 1 ] && grep -q -- "$needle" "$d/err" || fail "$*: stderr: $(cat "$d/err")"
    echo "refused (exit $rc): $*"
}
expect 2 "another tokenizer.json" --speculate "draft:$d/tok"
expect 3 "$d/none" --speculate "draft:$d/none:4"
for bad in "draft:" "draft::4" "draft:$d/t:0" "draft:$d/t:17"; do
    expect 2 "speculate" --speculate "$bad"
done
echo ok

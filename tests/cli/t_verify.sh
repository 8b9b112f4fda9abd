#!/bin/sh
# tests/cli/t_verify.sh - verification by teacher-forced prefill
# (docs/receipts.md "Verification: faster than generation"), on every shape
# `make matrix` uses.
#
#  1. The premise, bit for bit: the logits of every prefill row equal the
#     decode's `run --dump-logits`, at 1 and 2 threads and every kernel.
#  2. Both replays give the same verdict line and exit code on the honest
#     receipt and on doctored ones: a token at the first, a middle and the
#     last step, the witness, the argmax digest; the prefill replay names
#     the doctored step (first-bad-step) and the decode replay the same.
#     Samples of one long prompt verified together (their prefix computed
#     once) give the decode replay's lines.
#  3. Batch verification: one verdict line per receipt, a summary, and the
#     highest exit code; the same verdicts as one at a time.
# san: skip - teacher-forced prefill against decode on every matrix shape;
#   receipts are parsed and verified under the sanitizers by test_receipt,
#   t_receipt, t_verify_shards, t_score_receipt, python test_receipts and
#   /v1/verify
set -u
. tests/lib.sh
TOK=$SHARED/models/smollm2-135m/tokenizer.json
tmpdir d

field() { sed -n "s/^$1 //p" "$2"; }
doctor() { awk -v k="$1" -v v="$2" '$1 == k { print k " " v; next } { print }' "$3" > "$4"; }
# the token list with element $2 (1-based) changed
bump() { printf '%s' "$1" | awk -F, -v i="$2" '{ $i = ($i == 1 ? 2 : 1); print }' OFS=,; }
flip() { v=$1; c=$(printf '%s' "$v" | cut -c1); if [ "$c" = 0 ]; then n=1; else n=0; fi; printf '%s%s' "$n" "$(printf '%s' "$v" | cut -c2-)"; }

kernels=""
$CIS2 synth --shape tiny --seed 7 --out "$d/tiny" > /dev/null || fail synth
for k in scalar avx2 avx512 neon; do
    $CIS2 run --model-dir "$d/tiny" --prompt-ids 1 --gen-toks 1 --kernel "$k" > /dev/null 2>&1 && kernels="$kernels $k"
done
echo "kernels:$kernels"

# shape|synth args|prompt|tokens
shapes="tiny|--shape tiny --seed 7|Once upon a time|9
qwen|--shape tiny-qwen --seed 3|The quick brown fox|8
odd|--shape odd --seed 5|1234567890 + 9876543210 =|7"
[ -f "$TOK" ] && shapes="$shapes
s135|--shape smollm2-135m --seed 1 --tokenizer $TOK|Once upon a time|4"

printf '%s\n' "$shapes" | while IFS='|' read -r name synth prompt n; do
    m=$d/$name
    [ -d "$m" ] || $CIS2 synth $synth --out "$m" > /dev/null || fail "$name: synth"
    $CIS2 run --model-dir "$m" --prompt "$prompt" --gen-toks "$n" --receipt "$d/$name.r" --dump-logits "$d/$name.dec" \
        > /dev/null || fail "$name: run"
    # 1. the premise
    for t in 1 2; do
        for k in $kernels; do
            $CIS2 verify "$d/$name.r" --model-dir "$m" --threads "$t" --kernel "$k" --dump-logits "$d/$name.pre" \
                > "$d/out" || { cat "$d/out"; fail "$name: verify t=$t k=$k"; }
            cmp -s "$d/$name.pre" "$d/$name.dec" || fail "$name: prefill logits differ from the decode's (threads $t, kernel $k)"
        done
    done
    echo "$name: prefill rows == decode logits, bit for bit (threads 1 2, kernels$kernels)"
    # 2. both replays, honest and doctored
    gids=$(field generated-token-ids "$d/$name.r")
    mid=$(( (n + 1) / 2 ))
    doctor generated-token-ids "$(bump "$gids" 1)" "$d/$name.r" "$d/$name.first"
    doctor generated-token-ids "$(bump "$gids" "$mid")" "$d/$name.r" "$d/$name.mid"
    doctor generated-token-ids "$(bump "$gids" "$n")" "$d/$name.r" "$d/$name.last"
    doctor witness-digest "$(flip "$(field witness-digest "$d/$name.r")")" "$d/$name.r" "$d/$name.wit"
    doctor argmax-digest "$(flip "$(field argmax-digest "$d/$name.r")")" "$d/$name.r" "$d/$name.arg"
    for c in r first mid last wit arg; do
        $CIS2 verify "$d/$name.$c" --model-dir "$m" > "$d/pre.out"; rp=$?
        $CIS2 verify "$d/$name.$c" --model-dir "$m" --replay decode > "$d/dec.out"; rd=$?
        [ $rp -eq $rd ] || fail "$name.$c: exit $rp (prefill) vs $rd (decode)"
        vp=$(grep '^verdict:' "$d/pre.out"); vd=$(grep '^verdict:' "$d/dec.out")
        [ "$vp" = "$vd" ] || fail "$name.$c: '$vp' (prefill) vs '$vd' (decode)"
        cmp -s "$d/pre.out" "$d/dec.out" || fail "$name.$c: the field reports differ"
        case $c in
            r) [ $rp -eq 0 ] || fail "$name: the honest receipt fails" ;;
            first|mid|last)
                [ $rp -eq 1 ] || fail "$name.$c: exit $rp"
                want=0; [ $c = mid ] && want=$((mid - 1)); [ $c = last ] && want=$((n - 1))
                grep -q "^first-bad-step $want: claimed " "$d/pre.out" || fail "$name.$c: first-bad-step is not $want"
                echo "$vp" | grep -q 'OUTPUT-MISMATCH (generated-token-ids)' || fail "$name.$c: $vp" ;;
            wit) echo "$vp" | grep -q 'OUTPUT-MISMATCH (witness-digest)' || fail "$name.wit: $vp"
                 grep -q '^note every claimed token is the decode' "$d/pre.out" || fail "$name.wit: no note" ;;
            arg) echo "$vp" | grep -q 'OUTPUT-MISMATCH (argmax-digest)' || fail "$name.arg: $vp" ;;
        esac
    done
    echo "$name: both replays agree on the honest and 5 doctored receipts"
    # 2b. receipts of one prompt share its prefix in a batch (verify.c): three samples of the
    # prompt repeated to 80 bytes (17+ ids under every tokenizer here), one doctored at step 1;
    # the batch's lines equal the decode replay's batch, which shares nothing
    long=$(printf '%s' "$prompt $prompt $prompt $prompt $prompt $prompt" | cut -c1-80)
    for i in 0 1 2; do
        $CIS2 run --model-dir "$m" --prompt "$long" --gen-toks "$n" --temperature 1 --seed 3 --sequence $i \
            --receipt "$d/$name.g$i" > /dev/null || fail "$name: run sample $i"
    done
    gids=$(field generated-token-ids "$d/$name.g1")
    doctor generated-token-ids "$(bump "$gids" 2)" "$d/$name.g1" "$d/$name.gbad"
    set -- "$d/$name.g0" "$d/$name.gbad" "$d/$name.g1" "$d/$name.g2"
    $CIS2 verify "$@" --model-dir "$m" > "$d/pre.out"; rp=$?
    $CIS2 verify "$@" --model-dir "$m" --replay decode > "$d/dec.out"; rd=$?
    [ $rp -eq 1 ] && [ $rd -eq 1 ] || fail "$name: group batch exits $rp (prefill), $rd (decode)"
    cmp -s "$d/pre.out" "$d/dec.out" || fail "$name: the group batch's lines differ: $(diff "$d/pre.out" "$d/dec.out")"
    grep -q '^summary: 4 receipts: 3 OK, 1 OUTPUT-MISMATCH$' "$d/pre.out" || fail "$name: group: $(cat "$d/pre.out")"
    echo "$name: a group of samples of one prompt verifies together as the decode replay does"
done || exit 1

# 3. batch verification (same model): per-receipt lines, summary, worst exit
m=$d/tiny
$CIS2 run --model-dir "$m" --prompt "Another prompt" --gen-toks 5 --receipt "$d/b2" > /dev/null || fail "run b2"
$CIS2 verify "$d/tiny.r" "$d/b2" "$d/tiny.mid" "$d/tiny.wit" --model-dir "$m" > "$d/out"; rc=$?
cat "$d/out"
[ $rc -eq 1 ] || fail "batch verify exited $rc, want 1"
[ "$(grep -c ': verdict: ' "$d/out")" -eq 4 ] || fail "batch verify: not one verdict line per receipt"
grep -q "^$d/tiny.r: verdict: OK" "$d/out" && grep -q "^$d/b2: verdict: OK" "$d/out" || fail "batch: honest receipts"
grep -q "^$d/tiny.mid: verdict: OUTPUT-MISMATCH (generated-token-ids)" "$d/out" || fail "batch: doctored token"
grep -q '^summary: 4 receipts: 2 OK, 2 OUTPUT-MISMATCH$' "$d/out" || fail "batch: summary"
for r in "$d/tiny.r" "$d/b2" "$d/tiny.mid" "$d/tiny.wit"; do
    one=$($CIS2 verify "$r" --model-dir "$m" | grep '^verdict:' | sed 's/^verdict: //')
    grep -q "^$r: verdict: $one\$" "$d/out" || fail "batch verdict of $r differs from its single verify ($one)"
done
# an artifact mismatch is worse (6); a malformed receipt is reported and counted
printf 'junk\n' > "$d/junk"
$CIS2 verify "$d/tiny.r" "$d/junk" --model-dir "$m" > "$d/out"; rc=$?
[ $rc -eq 4 ] || fail "batch with a malformed receipt exited $rc, want 4"
grep -q "^$d/junk: verdict: MALFORMED" "$d/out" || fail "batch: malformed line"
$CIS2 synth --shape tiny --seed 8 --out "$d/other" > /dev/null
$CIS2 run --model-dir "$d/other" --prompt "x" --gen-toks 2 --receipt "$d/other.r" > /dev/null
$CIS2 verify "$d/tiny.r" "$d/other.r" "$d/tiny.mid" --model-dir "$m" > "$d/out"; rc=$?
[ $rc -eq 6 ] || fail "batch with another model's receipt exited $rc, want 6"
# --twice, and usage errors
$CIS2 verify "$d/tiny.r" --model-dir "$m" --twice > /dev/null || fail "--twice"
$CIS2 verify "$d/tiny.r" --model-dir "$m" --replay sideways > /dev/null 2>&1; [ $? -eq 2 ] || fail "--replay sideways"
$CIS2 verify "$d/tiny.r" "$d/b2" --model-dir "$m" --dump-logits "$d/x" > /dev/null 2>&1; [ $? -eq 2 ] || fail "dump with 2"
echo "batch verification ok"

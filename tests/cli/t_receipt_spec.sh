#!/bin/sh
# The spec's own §13.1 run, written by hand as a CIS-2-RECEIPT v1 (FACTS §6),
# checked against the real SmolLM2-135M tokenizer.json and config.json from
# $SHARED: `cis2 check` must confirm config/tokenizer sha256, the prompt's
# ids, table-digest, inv-freq-table-digest and argmax-digest, all values the
# spec pins independently of this code.  If the real weights are present
# (models/SmolLM2-135M or $CIS2_MODEL_DIR), `cis2 verify` must accept the
# whole receipt; otherwise that part is skipped.
set -u
. tests/lib.sh
src=$SHARED/models/smollm2-135m
[ -f "$src/tokenizer.json" ] && [ -f "$src/config.json" ] || skip "no $src"
tmpdir d
cat > "$d/r" <<'EOF'
CIS-2-RECEIPT v1
spec-version 0.3b
weights-sha256 80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1
config-sha256 1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843
tokenizer-sha256 9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c
prompt-hex 4f6e63652075706f6e20612074696d65
prompt-token-ids 6403,1980,253,655
gen-toks 16
dtype fp32
table-digest 23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d
inv-freq-table-digest da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12
generated-token-ids 28,665,436,253,1838,8180,3365,14176,30,2306,4161,281,253,2066,2291,351
argmax-digest 0b9c8f3ac90d0b9cd5f1719ac327dca1fc639fd87468305fccebbe3d56f67aff
witness-digest d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df
EOF
$CIS2 check "$d/r" --tokenizer "$src/tokenizer.json" --config "$src/config.json" > "$d/out"; rc=$?
cat "$d/out"
[ $rc -eq 0 ] || fail_later "check exited $rc"
for k in spec-version config-sha256 tokenizer-sha256 prompt-token-ids dtype table-digest inv-freq-table-digest argmax-digest; do
    grep -q "^$k ok" "$d/out" || fail_later "$k not confirmed"
done
grep -qx 'verdict: CONSISTENT (unverified: weights-sha256 generated-token-ids witness-digest)' "$d/out" || fail_later "verdict"
# a wrong generated id breaks the §12.2 digest
sed 's/^generated-token-ids 28,/generated-token-ids 29,/' "$d/r" > "$d/bad"
$CIS2 check "$d/bad" > "$d/out"; rc=$?
[ $rc -eq 1 ] && grep -q '^argmax-digest MISMATCH' "$d/out" || fail_later "doctored generated ids not caught by check (rc $rc)"

mdir=${CIS2_MODEL_DIR:-models/SmolLM2-135M}
if [ -f "$mdir/model.safetensors" ]; then
    $CIS2 verify "$d/r" --model-dir "$mdir" > "$d/out"; rc=$?
    cat "$d/out"
    [ $rc -eq 0 ] || fail_later "verify of the §13.1 receipt exited $rc"
else
    echo "note: no $mdir/model.safetensors: the full verify of §13.1 is not run"
fi
end_fails
echo ok

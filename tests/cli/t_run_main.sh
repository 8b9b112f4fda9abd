#!/bin/sh
# tests/cli/t_run_main.sh - the README's main job without a network
# (docs/building.md "The main job"): tools/run-main passes selftest, then fails to fetch the weights
# and must exit 3 itself (make would say 2), naming the three files, where
# they come from, where they go, and the synthetic way to try cis2 instead.
# The download goes to a closed loopback port, so no network is used.
. tests/lib.sh
tmpdir T
out=$T/out
rc=0
CIS2_MODEL_DIR=$T/models CIS2_HF_BASE=http://127.0.0.1:9/x sh tools/run-main > "$out" 2>&1 || rc=$?
[ $rc -eq 3 ] || { cat "$out"; fail "run-main without a network exited $rc, not 3"; }
grep -q '^selftest=PASS' "$out" || fail "no selftest before the download"
for f in model.safetensors config.json tokenizer.json; do
    grep -q "put .*$f" "$out" || fail "the message does not name $f"
done
grep -q "in $T/models/" "$out" || fail "the message does not say where the files go"
grep -q 'http://127.0.0.1:9/x/' "$out" || fail "the message does not say where the files come from"
grep -q 'cis2 synth' "$out" || fail "the message does not offer the synthetic checkpoint"
[ -z "$(ls "$T/models")" ] || fail "a partial download was left in $T/models: $(ls "$T/models")"
echo "ok: run-main without a network: exit 3 and what to do"

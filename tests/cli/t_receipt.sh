#!/bin/sh
# cis2 run --receipt / verify / check / compare on a synthetic checkpoint.
#  - the receipt's artifact hashes equal sha256sum of the files, its prompt-hex
#    the prompt's bytes (od), its table-digest the spec's §6.6 value, and its
#    witness/argmax/ids what `cis2 run` printed;
#  - verify accepts it, and each field doctored in turn is rejected with the
#    documented exit code and a MISMATCH line naming that field;
#  - one flipped weight bit is caught, also when the receipt's weights-sha256
#    is forged to match the flipped file;
#  - compare's four verdicts, check's partial verification, --prompt-ids and
#    --prompt-file receipts.
set -u
. tests/lib.sh
command -v sha256sum >/dev/null || skip "no sha256sum"
command -v python3 >/dev/null || skip "no python3 (used to flip a weight bit)"
tmpdir d
# expect RC CMD...: runs CMD (stdout to $d/out), checks its exit code
expect() {
    want=$1; shift
    "$@" > "$d/out" 2> "$d/err"; got=$?
    [ "$got" -eq "$want" ] || { fail_later "'$*' exited $got, expected $want"; sed 's/^/    /' "$d/out" "$d/err" | tail -n 20; }
}
field() { sed -n "s/^$1 //p" "$2"; }
# doctor KEY VALUE IN OUT: replace KEY's value
doctor() { awk -v k="$1" -v v="$2" '$1 == k { print k " " v; next } { print }' "$3" > "$4"; }

m=$d/m
$CIS2 synth --shape tiny --seed 7 --out "$m" > /dev/null || fail "synth"
prompt="Once upon a time"
expect 0 $CIS2 run --model-dir "$m" --prompt "$prompt" --gen-toks 6 --receipt "$d/r"
cp "$d/out" "$d/run.txt"
[ -f "$d/r" ] || fail "no receipt written"
cat "$d/r"

# --- the receipt against independent routes ---
[ "$(head -n 1 "$d/r")" = "CIS-2-RECEIPT v1" ] || fail_later "first line"
[ "$(sed -n '2,$p' "$d/r" | cut -d' ' -f1 | tr '\n' ' ')" = "spec-version weights-sha256 config-sha256 tokenizer-sha256 prompt-hex prompt-token-ids gen-toks dtype table-digest inv-freq-table-digest generated-token-ids argmax-digest witness-digest " ] || fail_later "key order differs from FACTS §6"
[ "$(field weights-sha256 "$d/r")" = "$(sha256sum < "$m/model.safetensors" | cut -c1-64)" ] || fail_later "weights-sha256"
[ "$(field config-sha256 "$d/r")" = "$(sha256sum < "$m/config.json" | cut -c1-64)" ] || fail_later "config-sha256"
[ "$(field tokenizer-sha256 "$d/r")" = "$(sha256sum < "$m/tokenizer.json" | cut -c1-64)" ] || fail_later "tokenizer-sha256"
[ "$(field prompt-hex "$d/r")" = "$(printf '%s' "$prompt" | od -An -tx1 | tr -d ' \n')" ] || fail_later "prompt-hex"
[ "$(field table-digest "$d/r")" = 23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d ] || fail_later "table-digest (spec §13.1)"
[ "$(field spec-version "$d/r")" = 0.3b ] && [ "$(field dtype "$d/r")" = fp32 ] && [ "$(field gen-toks "$d/r")" = 6 ] || fail_later "spec-version/dtype/gen-toks"
[ "$(field generated-token-ids "$d/r")" = "$(sed -n 's/^generated_token_ids = //p' "$d/run.txt")" ] || fail_later "generated ids vs run output"
[ "$(field prompt-token-ids "$d/r")" = "$(sed -n 's/^prompt_token_ids = //p' "$d/run.txt")" ] || fail_later "prompt ids vs run output"
[ "$(field argmax-digest "$d/r")" = "$(sed -n 's/^argmax_digest = //p' "$d/run.txt")" ] || fail_later "argmax vs run output"
grep -q "^CIS2_REF digest=$(field witness-digest "$d/r") " "$d/run.txt" || fail_later "witness vs CIS2_REF line"

# --- verify: the honest receipt ---
expect 0 $CIS2 verify "$d/r" --model-dir "$m"
[ "$(grep -c ' ok$' "$d/out")" -eq 11 ] || fail_later "verify: expected 11 ok lines"
grep -q '^verdict: OK' "$d/out" || fail_later "verify verdict"

# --- verify: each field doctored in turn ---
# dig KEY: the receipt's digest with its first hex digit changed
dig() { v=$(field "$1" "$d/r"); c=$(printf '%s' "$v" | cut -c1); if [ "$c" = 0 ]; then n=1; else n=0; fi; printf '%s%s' "$n" "$(printf '%s' "$v" | cut -c2-)"; }
check_field() { # KEY VALUE RC [MISMATCH-KEY]
    doctor "$1" "$2" "$d/r" "$d/bad"
    cmp -s "$d/r" "$d/bad" && { fail_later "doctoring $1 changed nothing"; return; }
    expect "$3" $CIS2 verify "$d/bad" --model-dir "$m"
    if [ -n "${4:-}" ]; then grep -q "^$4 MISMATCH expected=" "$d/out" || fail_later "verify did not name $4 for a doctored $1"; fi
}
check_field spec-version 0.3 5 spec-version
check_field weights-sha256 "$(dig weights-sha256)" 6 weights-sha256
check_field config-sha256 "$(dig config-sha256)" 6 config-sha256
check_field tokenizer-sha256 "$(dig tokenizer-sha256)" 6 tokenizer-sha256
check_field prompt-hex "$(printf '%s' "Once upon a tame" | od -An -tx1 | tr -d ' \n')" 1 prompt-token-ids
pids=$(field prompt-token-ids "$d/r")
check_field prompt-token-ids "$(printf '%s' "$pids" | awk -F, '{ $1 = ($1 == 1 ? 2 : 1); print }' OFS=,)" 1 prompt-token-ids
check_field gen-toks 5 4
check_field dtype bf16 5 dtype
check_field table-digest "$(dig table-digest)" 1 table-digest
check_field inv-freq-table-digest "$(dig inv-freq-table-digest)" 1 inv-freq-table-digest
gids=$(field generated-token-ids "$d/r")
check_field generated-token-ids "$(printf '%s' "$gids" | awk -F, '{ $3 = ($3 == 1 ? 2 : 1); print }' OFS=,)" 1 generated-token-ids
check_field argmax-digest "$(dig argmax-digest)" 1 argmax-digest
check_field witness-digest "$(dig witness-digest)" 1 witness-digest
# gen-toks and the list extended consistently: well-formed, but the 7th token and every digest differ
doctor gen-toks 7 "$d/r" "$d/t1"; doctor generated-token-ids "$gids,1" "$d/t1" "$d/bad"
expect 1 $CIS2 verify "$d/bad" --model-dir "$m"
grep -q '^witness-digest MISMATCH' "$d/out" || fail_later "extended generated list not caught"
# malformed receipts: exit 4
printf 'CIS-2-RECEIPT v1\r\n' > "$d/bad"; sed -n '2,$p' "$d/r" >> "$d/bad"
expect 4 $CIS2 verify "$d/bad" --model-dir "$m"
grep -q 'line 1: CR' "$d/err" || fail_later "CRLF message"
sed 's/^dtype fp32$/dtype fp32\n/' "$d/r" > "$d/bad"
expect 4 $CIS2 verify "$d/bad" --model-dir "$m"
grep -q 'line 10: blank line' "$d/err" || fail_later "blank-line message"
# a server's receipt saved from its JSON (the cis2.receipt string; docs/receipts.md "The format").
# `jq -r` adds a LF after the receipt's own last LF: refused (FACTS §6: a
# blank line), and the message says how to save it; `jq -j` writes it exactly.
if command -v jq > /dev/null; then
    jq -Rs '{choices: [{cis2: {receipt: .}}]}' "$d/r" > "$d/resp.json"
    jq -r '.choices[0].cis2.receipt' "$d/resp.json" > "$d/r.jq-r"
    jq -j '.choices[0].cis2.receipt' "$d/resp.json" > "$d/r.jq-j"
else
    { cat "$d/r"; printf '\n'; } > "$d/r.jq-r"; cp "$d/r" "$d/r.jq-j"
fi
cmp -s "$d/r.jq-j" "$d/r" || fail_later "jq -j did not give the receipt's bytes"
expect 4 $CIS2 verify "$d/r.jq-r" --model-dir "$m"
grep -q '^verdict: MALFORMED' "$d/out" || fail_later "a receipt saved with jq -r: no MALFORMED verdict"
grep -q "line 15: blank line after the last key.*jq -j" "$d/err" || fail_later "the jq -r message does not say to use jq -j"
expect 0 $CIS2 verify "$d/r.jq-j" --model-dir "$m"
printf '%s' "$(cat "$d/r")" > "$d/r.nolf" # $(...) drops the final LF
expect 4 $CIS2 verify "$d/r.nolf" --model-dir "$m"
grep -q "line 14: no LF.*jq -j" "$d/err" || fail_later "the stripped-LF message does not say to use jq -j"
expect 3 $CIS2 verify "$d/no-such-receipt" --model-dir "$m"
expect 2 $CIS2 verify
expect 2 $CIS2 verify "$d/r" --bogus

# --- one flipped weight bit (layer 1 down_proj) ---
m2=$d/m2
cp -r "$m" "$m2"
python3 - "$m2/model.safetensors" model.layers.1.mlp.down_proj.weight <<'EOF' || fail_later "bit flip"
import json, struct, sys
path, name = sys.argv[1], sys.argv[2]
b = bytearray(open(path, 'rb').read())
hl = struct.unpack('<Q', b[:8])[0]
t = json.loads(b[8:8 + hl])[name]
size = {'BF16': 2, 'F32': 4}[t['dtype']]
start, end = t['data_offsets']
for i in range((end - start) // size):      # first element with a normal exponent
    off = 8 + hl + start + i * size
    v = int.from_bytes(b[off:off + size], 'little')
    e = (v >> 7) & 0xFF if size == 2 else (v >> 23) & 0xFF
    if 0 < e < 0xFE:
        break
b[off] ^= 1                                  # its lowest mantissa bit
open(path, 'wb').write(b)
EOF
cmp -s "$m/model.safetensors" "$m2/model.safetensors" && fail_later "weights unchanged"
expect 6 $CIS2 verify "$d/r" --model-dir "$m2"
grep -q '^weights-sha256 MISMATCH' "$d/out" || fail_later "flipped bit: weights-sha256 not named"
# forge the receipt's weights hash to match the flipped file: the recomputed decode still disagrees
doctor weights-sha256 "$(sha256sum < "$m2/model.safetensors" | cut -c1-64)" "$d/r" "$d/forged"
expect 1 $CIS2 verify "$d/forged" --model-dir "$m2"
grep -q '^weights-sha256 ok' "$d/out" || fail_later "forged hash should match the file"
grep -q '^witness-digest MISMATCH' "$d/out" || fail_later "flipped bit: witness not caught"
expect 0 $CIS2 run --model-dir "$m2" --prompt "$prompt" --gen-toks 6 --receipt "$d/r2"
[ "$(field witness-digest "$d/r")" != "$(field witness-digest "$d/r2")" ] || fail_later "flipped bit did not change the witness"
expect 0 $CIS2 verify "$d/r2" --model-dir "$m2"

# --- compare ---
expect 0 $CIS2 compare "$d/r" "$d/r"
grep -q '^verdict: SAME' "$d/out" || fail_later "compare SAME"
doctor witness-digest "$(dig witness-digest)" "$d/r" "$d/bad"
expect 1 $CIS2 compare "$d/r" "$d/bad"
grep -q '^verdict: CONTRADICTION' "$d/out" || fail_later "compare CONTRADICTION"
expect 0 $CIS2 compare "$d/r" "$d/r2"
grep -q '^verdict: DIFFERENT-RUN' "$d/out" || fail_later "compare DIFFERENT-RUN"
grep -q '^weights-sha256 DIFFERS' "$d/out" || fail_later "compare names the weights"
doctor witness-digest "$(field witness-digest "$d/r")" "$d/r2" "$d/collide"
expect 1 $CIS2 compare "$d/r" "$d/collide"
grep -q '^verdict: WITNESS-COLLISION' "$d/out" || fail_later "compare WITNESS-COLLISION"
expect 0 $CIS2 run --model-dir "$m" --prompt "$prompt" --gen-toks 3 --receipt "$d/r3"
expect 0 $CIS2 compare "$d/r" "$d/r3"
grep -q '^verdict: DIFFERENT-RUN' "$d/out" || fail_later "compare: shorter run of the same inputs"
g3=$(field generated-token-ids "$d/r3")
doctor generated-token-ids "$(printf '%s' "$g3" | awk -F, '{ $2 = ($2 == 1 ? 2 : 1); print }' OFS=,)" "$d/r3" "$d/bad"
expect 1 $CIS2 compare "$d/r" "$d/bad"
grep -q '^verdict: CONTRADICTION' "$d/out" || fail_later "compare: prefix disagreement"
expect 3 $CIS2 compare "$d/r" "$d/no-such"
expect 4 $CIS2 compare "$d/r" "$d/t1"

# --- check (no weights) ---
expect 0 $CIS2 check "$d/r"
grep -q '^witness-digest unverified' "$d/out" && grep -q '^inv-freq-table-digest unverified' "$d/out" || fail_later "check: unverified fields"
grep -q '^verdict: CONSISTENT' "$d/out" || fail_later "check verdict"
expect 0 $CIS2 check "$d/r" --tokenizer "$m/tokenizer.json" --config "$m/config.json"
[ "$(grep -c ' ok' "$d/out")" -eq 8 ] || fail_later "check: 8 fields verifiable without weights"
grep -q '^verdict: CONSISTENT (unverified: weights-sha256 generated-token-ids witness-digest)' "$d/out" || fail_later "check: what remains unverified"
doctor inv-freq-table-digest "$(dig inv-freq-table-digest)" "$d/r" "$d/bad"
expect 1 $CIS2 check "$d/bad" --config "$m/config.json"
expect 0 $CIS2 check "$d/bad"
doctor argmax-digest "$(dig argmax-digest)" "$d/r" "$d/bad"
expect 1 $CIS2 check "$d/bad"
doctor config-sha256 "$(dig config-sha256)" "$d/r" "$d/bad"
expect 6 $CIS2 check "$d/bad" --config "$m/config.json"
doctor prompt-hex 41 "$d/r" "$d/bad"
expect 1 $CIS2 check "$d/bad" --tokenizer "$m/tokenizer.json"

# --- --prompt-ids: the bytes the ids decode to, if they round-trip; else the
# ids themselves, never a refusal (docs/receipts.md "Prompts given as ids";
# tests/cli/t_receipt_ids.sh reads and doctors those receipts) ---
expect 0 $CIS2 run --model-dir "$m" --prompt-ids "$pids" --gen-toks 6 --receipt "$d/rids"
cmp -s "$d/r" "$d/rids" || fail_later "--prompt-ids receipt differs from the --prompt one"
expect 0 $CIS2 run --model-dir "$m" --prompt-ids "$pids,511" --gen-toks 2 --receipt "$d/rnt"
[ "$(sed -n 6p "$d/rnt")" = "prompt-from ids" ] || fail_later "ids that do not round-trip: no prompt-from line"
[ "$(field prompt-token-ids "$d/rnt")" = "$pids,511" ] || fail_later "ids that do not round-trip: prompt-token-ids"
expect 0 $CIS2 verify "$d/rnt" --model-dir "$m"

# --- --prompt-file: one receipt per prompt ---
printf 'Once upon a time\nThe end\n' > "$d/prompts"
expect 0 $CIS2 run --model-dir "$m" --prompt-file "$d/prompts" --gen-toks 6 --receipt "$d/rp"
cmp -s "$d/r" "$d/rp.0" || fail_later "--prompt-file receipt 0 differs from the single-prompt one"
[ "$(field prompt-hex "$d/rp.1")" = "$(printf 'The end' | od -An -tx1 | tr -d ' \n')" ] || fail_later "receipt 1 prompt"
expect 0 $CIS2 verify "$d/rp.1" --model-dir "$m"

end_fails
echo ok

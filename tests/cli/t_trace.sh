#!/bin/sh
# cis2 run --trace / cis2 diff on synthetic checkpoints.
#  - tracing changes no output or digest (with and without --trace-dump);
#  - each step's `logits` trace line is the sha256 of that step's slice of
#    --dump-logits (an independent route to the same bytes);
#  - diff of a run against itself: IDENTICAL; against a run whose weights
#    differ by one bit in layer 1's q_proj: the first difference is step 0,
#    layer 1, tensor q (nothing before layer 1 differs), and with dumps the
#    first differing element is the flipped weight's output row, the only
#    differing element of that tensor.
set -u
. tests/lib.sh
command -v sha256sum >/dev/null || skip "no sha256sum"
command -v python3 >/dev/null || skip "no python3 (used to flip a weight bit)"
tmpdir d
expect() {
    want=$1; shift
    "$@" > "$d/out" 2> "$d/err"; got=$?
    [ "$got" -eq "$want" ] || { fail_later "'$*' exited $got, expected $want"; sed 's/^/    /' "$d/out" "$d/err" | tail -n 20; }
}

for shape in tiny odd; do
    m=$d/$shape
    $CIS2 synth --shape $shape --seed 3 --out "$m" > /dev/null || fail "synth"
    run="$CIS2 run --model-dir $m --prompt Hello --gen-toks 4"
    expect 0 $run --dump-logits "$d/logits"; cp "$d/out" "$d/plain"
    expect 0 $run --trace "$d/ta"; cmp -s "$d/out" "$d/plain" || fail_later "$shape: --trace changed the run's output"
    expect 0 $run --trace "$d/tb" --trace-dump --receipt "$d/rb"; cmp -s "$d/out" "$d/plain" || fail_later "$shape: --trace-dump changed the output"
    expect 0 $run --receipt "$d/rplain"; cmp -s "$d/rb" "$d/rplain" || fail_later "$shape: tracing changed the receipt"
    # the trace's logits lines vs the --dump-logits bytes
    vocab=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$m/config.json")
    [ -n "$vocab" ] || { fail_later "$shape: vocab_size"; continue; }
    n=$(grep -c ' -1 logits ' "$d/ta")
    [ "$n" -eq 4 ] || fail_later "$shape: $n logits lines, expected one per step (4)"
    s=0
    grep ' -1 logits ' "$d/ta" | while read -r step pos layer name cnt sha; do
        want=$(dd if="$d/logits" bs=$((vocab * 4)) skip="$step" count=1 2>/dev/null | sha256sum | cut -c1-64)
        [ "$cnt" = "$vocab" ] && [ "$sha" = "$want" ] || fail "$shape step $step logits hash"
    done || fails=$((fails + 1))
    # the dump holds every traced value
    total=$(awk 'NR > 1 { s += $5 } END { print s * 4 }' "$d/tb")
    [ "$(wc -c < "$d/tb.f32")" -eq "$total" ] || fail_later "$shape: dump size"
    [ "$(head -n 1 "$d/ta")" = "CIS-2-TRACE v1" ] && [ "$(head -n 1 "$d/tb")" = "CIS-2-TRACE v1 dump" ] || fail_later "$shape: header"
    [ "$(sed 1d "$d/ta")" = "$(sed 1d "$d/tb")" ] || fail_later "$shape: traces with and without dump differ"
    # every tensor of the model.h list appears
    for t in ln1 q k v q_rope k_rope scores attn_out o_proj resid_attn ln2 gate up act down resid_mlp final_norm logits; do
        grep -q "^0 0 [-0-9]* $t " "$d/ta" || grep -q "^0 [0-9]* [-0-9]* $t " "$d/ta" || fail_later "$shape: no $t lines"
    done
    expect 0 $CIS2 diff "$d/ta" "$d/tb"
    grep -q '^verdict: IDENTICAL' "$d/out" || fail_later "$shape: self diff"

    # one bit in layer 1's q_proj
    m2=$d/${shape}2
    cp -r "$m" "$m2"
    row=$(python3 - "$m2/model.safetensors" model.layers.1.self_attn.q_proj.weight <<'EOF'
import json, struct, sys
path, name = sys.argv[1], sys.argv[2]
b = bytearray(open(path, 'rb').read())
hl = struct.unpack('<Q', b[:8])[0]
t = json.loads(b[8:8 + hl])[name]
size = {'BF16': 2, 'F32': 4}[t['dtype']]
start, end = t['data_offsets']
cols = t['shape'][1]
for i in range(5 * cols + 7, (end - start) // size):  # from row 5, col 7 on: the first normal one
    off = 8 + hl + start + i * size
    v = int.from_bytes(b[off:off + size], 'little')
    e = (v >> 7) & 0xFF if size == 2 else (v >> 23) & 0xFF
    if 0 < e < 0xFE:
        break
b[off] ^= 1
open(path, 'wb').write(b)
print(i // cols)                           # the q element this weight feeds
EOF
)
    [ -n "$row" ] || { fail_later "$shape: bit flip"; continue; }
    expect 0 $CIS2 run --model-dir "$m2" --prompt Hello --gen-toks 4 --trace "$d/tc" --trace-dump
    expect 1 $CIS2 diff "$d/tb" "$d/tc"
    cat "$d/out"
    grep -q '^first difference: step 0 pos 0 layer 1 tensor q ' "$d/out" || fail_later "$shape: diff did not name step 0 pos 0 layer 1 q"
    grep -q "^first differing element: index $row: A=0x" "$d/out" || fail_later "$shape: first differing element is not q[$row]"
    grep -q '^differing elements: 1 of ' "$d/out" || fail_later "$shape: more than one q element differs"
    # independently: every line before the first layer-1 q line is identical
    k=$(grep -n '^0 0 1 q ' "$d/tc" | cut -d: -f1)
    [ "$(head -n $((k - 1)) "$d/tb")" = "$(head -n $((k - 1)) "$d/tc")" ] || fail_later "$shape: a tensor before layer 1 changed"
    [ "$(sed -n "${k}p" "$d/tb")" != "$(sed -n "${k}p" "$d/tc")" ] || fail_later "$shape: layer 1 q unchanged"
    # without dumps: the tensor only
    expect 0 $CIS2 run --model-dir "$m2" --prompt Hello --gen-toks 4 --trace "$d/td"
    expect 1 $CIS2 diff "$d/ta" "$d/td"
    grep -q '^first difference: step 0 pos 0 layer 1 tensor q ' "$d/out" || fail_later "$shape: no-dump diff"
    grep -q 'element values unavailable' "$d/out" || fail_later "$shape: no-dump note"
done

# a shorter decode is a prefix: diff reports the extra tensors
m=$d/tiny
expect 0 $CIS2 run --model-dir "$m" --prompt Hello --gen-toks 4 --trace "$d/ta"
expect 0 $CIS2 run --model-dir "$m" --prompt Hello --gen-toks 2 --trace "$d/short"
expect 1 $CIS2 diff "$d/short" "$d/ta"
grep -q '^B has [0-9]* more tensors' "$d/out" || fail_later "longer trace"
# another prompt: the first differing row is named; another shape: structure differs
expect 0 $CIS2 run --model-dir "$m" --prompt Hi --gen-toks 4 --trace "$d/other"
expect 1 $CIS2 diff "$d/other" "$d/ta"
grep -q '^first difference: step 0 pos 1 layer 0 tensor ln1 ' "$d/out" || fail_later "other prompt: first difference"
expect 1 $CIS2 diff "$d/ta" "$d/tb"
grep -q '^structure differs' "$d/out" || fail_later "structure difference"
# usage and malformed input
expect 2 $CIS2 run --model-dir "$m" --prompt Hello --trace-dump
printf 'a\nb\n' > "$d/two"
expect 2 $CIS2 run --model-dir "$m" --prompt-file "$d/two" --trace "$d/x"
expect 2 $CIS2 diff "$d/ta"
expect 3 $CIS2 diff "$d/ta" "$d/missing"
sed '3s/ [0-9a-f]*$/ xyz/' "$d/ta" > "$d/bad"
expect 4 $CIS2 diff "$d/ta" "$d/bad"
grep -q 'line 3' "$d/err" || fail_later "malformed trace line number"
# a corrupted dump is detected, not silently reported (odd: tb/tc/k from the last loop pass)
off=$(awk -v k="$k" 'NR > 1 && NR < k { s += $5 } END { print s * 4 }' "$d/tb")
cp "$d/tb" "$d/te"; cp "$d/tb.f32" "$d/te.f32"
printf '\177\177\177\177' | dd of="$d/te.f32" bs=1 seek="$off" conv=notrunc 2>/dev/null
expect 4 $CIS2 diff "$d/te" "$d/tc"
grep -q 'do not hash' "$d/err" || fail_later "corrupted dump not detected"

end_fails
echo ok

#!/bin/sh
# cis2 run / conform on synthetic checkpoints (docs/arithmetic.md sections
# 10-13): the §13.1 block and its order, --json, KV cache == recompute
# (§3.5), two processes agree, batches equal single runs, clean errors.
# serial: --stream must show text well before the block (a time gap)
set -eu
. tests/lib.sh
tmpdir T
TOK=$SHARED/models/smollm2-135m/tokenizer.json
expect_rc() { want=$1; shift; set +e; "$@" > "$T/out" 2> "$T/err"; got=$?; set -e
    [ "$got" -eq "$want" ] || { cat "$T/err"; fail "exit $got, want $want: $*"; }
    [ "$want" -eq 0 ] || [ "$(wc -l < "$T/err")" -ge 1 ] || fail "no error message: $*"; }

for s in tiny tiny-qwen odd; do $CIS2 synth --shape $s --seed 7 --out "$T/$s" > /dev/null; done

# 1. the block: every line, in order, each parses
$CIS2 run --model-dir "$T/tiny" --prompt-ids 5,6,7 --gen-toks 6 > "$T/a"
cat "$T/a"
line() { sed -n "$1p" "$T/a" | grep -Eqx "$2" || fail "line $1 malformed, want /$2/"; }
line 1 'weights_sha256 = [0-9a-f]{64}'
line 2 'config_sha256 = [0-9a-f]{64}'
line 3 'tokenizer_sha256 = [0-9a-f]{64}'
line 4 'prompt_token_ids = 5,6,7'
line 5 'generated_token_ids = [0-9]+(,[0-9]+){5}'
line 6 'table_digest = 23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d'
line 7 'inv_freq_table_digest = [0-9a-f]{64}'
line 8 'argmax_digest = [0-9a-f]{64}'
line 9 'CIS2_REF digest=[0-9a-f]{64} prompt_idx=0 prompt_toks=3 gen_toks=6 dtype=fp32'
line 10 'completion = ".*"'
[ "$(wc -l < "$T/a")" -eq 10 ] || fail "run printed more than the 10 lines"
# artifact hashes are the files' sha256
w=$(sha256sum "$T/tiny/model.safetensors" | cut -c1-64)
grep -qx "weights_sha256 = $w" "$T/a" || fail "weights_sha256 is not the file's sha256"
c=$(sha256sum "$T/tiny/config.json" | cut -c1-64)
grep -qx "config_sha256 = $c" "$T/a" || fail "config_sha256"

# 2. a second process gives identical output
$CIS2 run --model-dir "$T/tiny" --prompt-ids 5,6,7 --gen-toks 6 > "$T/b"
cmp "$T/a" "$T/b" || fail "two processes differ"

# 3. --json carries the same values
$CIS2 run --model-dir "$T/tiny" --prompt-ids 5,6,7 --gen-toks 6 --json > "$T/j"
ref=$(sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p' "$T/a")
grep -q "\"cis2_ref\": \"$ref\"" "$T/j" || fail "json cis2_ref differs from text"

# 4. §3.5: the KV-cache decode equals recomputing every step from scratch
for s in tiny tiny-qwen odd; do
    r1=$($CIS2 run --model-dir "$T/$s" --prompt-ids 3,1,4,1,5 --gen-toks 7 | grep '^CIS2_REF')
    r2=$($CIS2 run --model-dir "$T/$s" --prompt-ids 3,1,4,1,5 --gen-toks 7 --recompute | grep '^CIS2_REF')
    [ "$r1" = "$r2" ] || fail "$s: KV cache decode differs from recompute"
    echo "$s: kv == recompute: $r1"
done

# 5. a batch of prompts: each sequence equals its single-sequence run
printf '[1,2,3]\n' > /dev/null
printf '["ab", "hello world", "x"]' > "$T/prompts.json"
$CIS2 run --model-dir "$T/tiny-qwen" --prompt-file "$T/prompts.json" --gen-toks 5 > "$T/batch"
i=0
for p in "ab" "hello world" "x"; do
    single=$($CIS2 run --model-dir "$T/tiny-qwen" --prompt "$p" --gen-toks 5 | sed -n 's/^CIS2_REF digest=\([0-9a-f]*\).*/\1/p')
    grep -q "^CIS2_REF digest=$single prompt_idx=$i " "$T/batch" || fail "batch sequence $i differs from its single run"
    i=$((i + 1))
done
printf 'ab\nhello world\nx\n' > "$T/prompts.txt"
$CIS2 run --model-dir "$T/tiny-qwen" --prompt-file "$T/prompts.txt" --gen-toks 5 > "$T/batch2"
cmp "$T/batch" "$T/batch2" || fail "line-per-prompt file differs from the JSON array"

# 6. the 135M shape with the real tokenizer: §3.1.7 ids, §7.2 digest
if [ -f "$TOK" ]; then
    $CIS2 synth --shape smollm2-135m --seed 1 --out "$T/s135" --tokenizer "$TOK" > /dev/null
    $CIS2 run --model-dir "$T/s135" --gen-toks 3 > "$T/s"
    grep -qx 'prompt_token_ids = 6403,1980,253,655' "$T/s" || fail "135m prompt ids"
    grep -qx 'inv_freq_table_digest = da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12' "$T/s" || fail "135m inv_freq"
    grep -qx 'tokenizer_sha256 = 9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c' "$T/s" || fail "tokenizer hash"
    # conform on the wrong weights fails loudly, naming the file and both hashes (exit 6)
    expect_rc 6 $CIS2 conform --model-dir "$T/s135"
    grep -q 'FAIL model.safetensors sha256: expected 80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1, got ' "$T/out" \
        || fail "conform did not name the weights hash"
fi

# 6b. --stream (README "Commands"): stdout is the completion, a LF, then the
# block byte for byte as without --stream (the completion from --json); the
# text comes as the tokens do (the block only after the last one)
stream_same() { # MODEL ARGS...: --stream's stdout = completion + LF + the plain run's stdout
    sm=$1; shift
    $CIS2 run --model-dir "$sm" "$@" > "$T/plain"
    $CIS2 run --model-dir "$sm" "$@" --json > "$T/sj"
    $CIS2 run --model-dir "$sm" "$@" --stream > "$T/streamed"
    /usr/bin/python3 - "$T/sj" "$T/plain" "$T/streamed" <<'EOF' || fail "--stream output: $*"
import json, sys
c = json.load(open(sys.argv[1]))["completion"].encode("utf-8", "surrogatepass")
want = c + b"\n" + open(sys.argv[2], "rb").read()
got = open(sys.argv[3], "rb").read()
if got != want:
    sys.exit("streamed %r\nwant     %r" % (got[:200], want[:200]))
EOF
}
stream_same "$T/tiny" --prompt "Once upon a time" --gen-toks 40     # byte tokens: invalid and split UTF-8
stream_same "$T/tiny-qwen" --prompt "Once upon a time" --gen-toks 20
# a stop string (two characters from the middle of the text: the run ends there)
# and a stop id (a token from the middle), each taken from the run without them
pick() { # WHAT JSON: a stop string or a stop id from the run's middle
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[2]))
if sys.argv[1] == "id":
    print(r["generated_token_ids"][len(r["generated_token_ids"]) // 2])
else:
    c = r["completion"]
    ok = lambda ch: ch not in "\ufffd\n\r\0 "   # two characters: a proper prefix of the stop waits
    print(next(c[i:i + 2] for i in range(len(c) // 3, len(c) - 1) if ok(c[i]) and ok(c[i + 1])))
EOF
}
for mdl in tiny tiny-qwen; do
    $CIS2 run --model-dir "$T/$mdl" --prompt "Once upon a time" --gen-toks 40 --temperature 0.9 --seed 5 --json > "$T/sj0"
    stop=$(pick string "$T/sj0")
    sid=$(pick id "$T/sj0")
    stream_same "$T/$mdl" --prompt "Once upon a time" --gen-toks 40 --temperature 0.9 --seed 5 --stop "$stop"
    grep -q '^finish_reason = stop-string$' "$T/plain" || fail "$mdl: --stop '$stop' did not stop the run"
    stream_same "$T/$mdl" --prompt "Once upon a time" --gen-toks 40 --temperature 0.9 --seed 5 --stop-id "$sid"
    grep -q '^finish_reason = stop-id$' "$T/plain" || fail "$mdl: --stop-id $sid did not stop the run"
done
expect_rc 2 $CIS2 run --model-dir "$T/tiny" --prompt x --stream --json
expect_rc 2 $CIS2 run --model-dir "$T/tiny-qwen" --prompt-file "$T/prompts.txt" --stream
if [ -f "$TOK" ]; then
    # a stop string cut inside the text: the streamed text holds back its first bytes
    $CIS2 run --model-dir "$T/s135" --gen-toks 12 --json > "$T/sj0"
    stop=$(/usr/bin/python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["completion"]; print(c[len(c) // 2:len(c) // 2 + 3])' "$T/sj0")
    [ -n "$stop" ] && stream_same "$T/s135" --gen-toks 12 --stop "$stop"
    # the text arrives while the decode runs: its first byte well before the block
    /usr/bin/python3 - "$CIS2" "$T/s135" <<'EOF' || fail "--stream did not stream"
import os, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "run", "--model-dir", sys.argv[2], "--gen-toks", "24", "--threads", "1", "--stream"],
                     stdout=subprocess.PIPE)
t0, first, block, buf = time.monotonic(), None, None, b""
while True:
    b = os.read(p.stdout.fileno(), 65536)
    if not b:
        break
    if first is None:
        first = time.monotonic()
    buf += b
    if block is None and b"weights_sha256 = " in buf:
        block = time.monotonic()
assert p.wait() == 0 and first is not None and block is not None
print("first text after %.2f s, the block after %.2f s" % (first - t0, block - t0))
sys.exit(0 if block - first >= 0.2 else "the text came with the block")
EOF
fi
echo "ok: --stream"

# 7. clean errors with the documented exit codes
expect_rc 3 $CIS2 run --model-dir "$T/nonexistent" --prompt-ids 1 --gen-toks 1
expect_rc 2 $CIS2 run --model-dir "$T/tiny" --prompt-ids 1,x --gen-toks 1
expect_rc 2 $CIS2 run --model-dir "$T/tiny" --prompt-ids 1 --gen-toks 0
expect_rc 2 $CIS2 run --model-dir "$T/tiny" --prompt-ids 99999 --gen-toks 1
expect_rc 5 $CIS2 run --model-dir "$T/tiny" --prompt-ids 1 --gen-toks 300    # > max_position_embeddings 256: unsupported, as in verify
expect_rc 2 $CIS2 run --model-dir "$T/tiny" --prompt "" --gen-toks 1
expect_rc 2 $CIS2 run --model-dir "$T/tiny" --bogus
printf 'a\n\nb\n' > "$T/empty-line.txt"
expect_rc 4 $CIS2 run --model-dir "$T/tiny" --prompt-file "$T/empty-line.txt" --gen-toks 1
printf 'a\377b\n' > "$T/bad-utf8.txt"
expect_rc 4 $CIS2 run --model-dir "$T/tiny" --prompt-file "$T/bad-utf8.txt" --gen-toks 1
cp -r "$T/tiny" "$T/trunc"
head -c 1000 "$T/tiny/model.safetensors" > "$T/trunc/model.safetensors"
expect_rc 4 $CIS2 run --model-dir "$T/trunc" --prompt-ids 1 --gen-toks 1
cp -r "$T/tiny" "$T/badcfg"
printf '{"hidden_size": 64' > "$T/badcfg/config.json"
expect_rc 4 $CIS2 run --model-dir "$T/badcfg" --prompt-ids 1 --gen-toks 1
# a config that disagrees with the tensors
cp -r "$T/tiny" "$T/mismatch"
sed 's/"num_hidden_layers": *2/"num_hidden_layers": 3/' "$T/tiny/config.json" > "$T/mismatch/config.json"
expect_rc 4 $CIS2 run --model-dir "$T/mismatch" --prompt-ids 1 --gen-toks 1
grep -q 'missing tensor model.layers.2' "$T/err" || { cat "$T/err"; fail "missing-tensor message"; }
echo ok

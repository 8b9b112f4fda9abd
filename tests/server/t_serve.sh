#!/bin/sh
# tests/server/t_serve.sh - `cis2 serve` (docs/serving.md) with real clients: the official
# OpenAI Node client (tests/server/client.js, npm `openai`), curl, and raw
# sockets for bad clients (tests/server/hostile.py).  Servers start on free
# loopback ports (--port 0, the port read from their first line), every
# wait is bounded, and the trap kills them all.  Every choice the clients
# keep is compared with `cis2 run` of the same parameters by
# tests/server/ref.py (receipt byte for byte, text, finish, logprob bits),
# and every receipt verifies with `cis2 verify` (prefill and decode
# replays) against a copy of the checkpoint.  On synthetic checkpoints:
#   tiny  the `tiny` shape (byte-level tokenizer): completions, 16 concurrent
#         clients mixing greedy, seeded sampling (top-k, top-p, min-p),
#         logprobs and stop ids, n: 3 = sequences 0..2, the same seed twice,
#         correctly rounded decimals, the 32 x 8 load test (0 failures,
#         every receipt verifying, RSS bounded), every error status, bad
#         clients, /v1/verify, /metrics
#   mid   a 256-wide, 8-layer llama with SmolLM2's tokenizer and chat
#         template: chat (receipt = `cis2 run --stop-id <|im_end|>` of the
#         rendered prompt, logprobs whole and streamed), the default system
#         prompt, 429 with a full queue, the session's gauges, --kv-budget,
#         disconnected clients freeing their slots, SIGTERM draining and
#         cancelling
#   stop  tests/server/stopper.py's checkpoint, whose steps choose "A" or
#         <|im_end|>: chat ends at <|im_end|>, eos, stop ids and stop strings
#         end completions, whole and streamed
# serial: a SIGTERM drain must end within 5 s
set -u
. tests/lib.sh
FAIL_TAIL=15   # fail shows the end of every $d/*.err
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v node > /dev/null || skip "node is not installed (tools/install-deps)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
[ -d tests/server/node_modules/openai ] || skip "the openai npm client is not installed (tools/install-deps)"
PY=/usr/bin/python3
TMO="timeout 60"
[ -n "${SAN:-}" ] && TMO="timeout 300" # ASan/UBSan builds run several times slower
tmpdir d

# for f in the server's own modules: nothing but cis2.h, cli.h and its own headers
for f in serve/*.c serve/*.h; do
    bad=$(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/.*"\(.*\)".*/\1/' |
          grep -v -x -e cis2.h -e cis2_toolkit.h -e ../cli/cli.h -e serve.h -e serve_parse.h)
    [ -z "$bad" ] || fail "$f includes $bad (the server is a client of cis2.h only)"
done
! nm -D "$BUILD/libcis2.so" 2> /dev/null | grep -q MHD_ || fail "libcis2.so links libmicrohttpd"

# st PORT PATH [curl args]: the HTTP status; the body in $d/body
st() { p=$1; path=$2; shift 2; $TMO curl -s -o "$d/body" -w '%{http_code}' "$@" "http://127.0.0.1:$p$path"; }
expect() { # expect STATUS ERROR-CODE-OR-- PORT PATH [curl args]
    want=$1; code=$2; shift 2
    got=$(st "$@")
    [ "$got" = "$want" ] || fail "$2 $*: status $got, expected $want: $(head -c 300 "$d/body")"
    if [ "$code" != "-" ]; then
        $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert set(e) == {"message","type","param","code"}, e; assert e["code"] == sys.argv[2], e' \
            "$d/body" "$code" || fail "$*: not an OpenAI error with code $code: $(head -c 300 "$d/body")"
    fi
}
jget() { $PY -c 'import json,sys; v=json.load(open(sys.argv[1])); exec("for k in sys.argv[2:]: v = v[int(k)] if isinstance(v, list) else v[k]"); print(v if not isinstance(v, str) else v, end="")' "$@"; }
inflight() { st "$1" /health > /dev/null; jget "$d/body" sequences_inflight; }
wait_inflight() { # wait_inflight PORT N: until N sequences are in flight (10 s at most)
    i=0
    while [ "$(inflight "$1")" != "$2" ]; do i=$((i + 1)); [ $i -lt 200 ] || fail "in flight: $(inflight "$1"), expected $2"; sleep 0.05; done
}

# ------------------------------------------------------------ checkpoints
"$CIS2" synth --shape tiny --seed 5 --out "$d/tiny" > /dev/null || fail "synth tiny"
cat > "$d/mid.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 256,
 "intermediate_size": 640, "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
 "vocab_size": 49152, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16"}
EOF
"$CIS2" synth --config "$d/mid.json" --seed 3 --out "$d/mid" --tokenizer "$SHARED/models/smollm2-135m/tokenizer.json" \
    > /dev/null || fail "synth mid"
$PY -c 'import json,sys; json.dump({"chat_template": open(sys.argv[1]).read(), "eos_token": "<|im_end|>"}, open(sys.argv[2], "w"))' \
    "$SHARED/models/smollm2-135m-instruct/chat_template.jinja" "$d/mid/tokenizer_config.json"
# the stopper: the tiny shape untied, eos <|im_end|> (257; tests/server/stopper.py adds the tokens)
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(tie_word_embeddings=False, eos_token_id=257); json.dump(c, open(sys.argv[2], "w"))' \
    "$d/tiny/config.json" "$d/stopper.json"

# ===================================================== tiny: completions
start tiny "$d/tiny" --timeout 2 --max-connections 64 --max-body 65536
P=$port_tiny
M=tiny
expect 200 - $P /health
expect 200 - $P /v1/models
[ "$(jget "$d/body" data 0 id)" = tiny ] || fail "/v1/models: $(cat "$d/body")"
expect 200 - $P /v1/completions -d "{\"model\":\"$M\",\"prompt\":\"Once upon a time\",\"max_tokens\":8}"
jget "$d/body" choices 0 cis2 receipt > "$d/curl.receipt"
"$CIS2" run --model-dir "$d/tiny" --prompt "Once upon a time" --gen-toks 8 --receipt "$d/curl.ref" > /dev/null
cmp "$d/curl.receipt" "$d/curl.ref" || fail "curl's receipt differs from cis2 run's"
# the same request as token ids (they round-trip): the same receipt
ids=$("$CIS2" tokenize --tokenizer "$d/tiny/tokenizer.json" --text "Once upon a time" --json)
expect 200 - $P /v1/completions -d "{\"model\":\"$M\",\"prompt\":$ids,\"max_tokens\":8}"
jget "$d/body" choices 0 cis2 receipt | cmp - "$d/curl.ref" || fail "an ids prompt's receipt differs"
# ids that do not round-trip (half a character, an id without bytes) are served (token-in,
# token-out): the receipt records them as ids, as cis2 run's (docs/receipts.md "Prompts given as ids")
expect 200 - $P /v1/completions -d "{\"model\":\"$M\",\"prompt\":[79,110,99,101,32,195,300],\"max_tokens\":4}"
jget "$d/body" choices 0 cis2 receipt > "$d/ids.receipt"
"$CIS2" run --model-dir "$d/tiny" --prompt-ids 79,110,99,101,32,195,300 --gen-toks 4 --receipt "$d/ids.ref" > /dev/null
cmp "$d/ids.receipt" "$d/ids.ref" || fail "ids that do not round-trip: the server's receipt differs from cis2 run's"
grep -qx "prompt-from ids" "$d/ids.receipt" || fail "ids that do not round-trip: no prompt-from line"

echo "== bad input: each an OpenAI-style error, the server keeps serving"
C="-H Content-Type:application/json"
expect 400 invalid_json $P /v1/completions $C -d '{"model":'
expect 400 invalid_json $P /v1/completions $C -d '{"model":"tiny","model":"tiny","prompt":"a"}'
expect 400 invalid_type $P /v1/completions $C -d '[1,2]'
expect 400 invalid_type $P /v1/completions $C -d '{"model":"tiny","prompt":5}'
expect 400 invalid_type $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":"8"}'
expect 400 invalid_type $P /v1/completions $C -d '{"model":"tiny","prompt":"a","stream":1}'
expect 400 invalid_type $P /v1/completions $C -d '{"model":"tiny","prompt":"a","temperature":"hot"}'
expect 400 missing_parameter $P /v1/completions $C -d '{"prompt":"a"}'
expect 404 model_not_found $P /v1/completions $C -d '{"model":"gpt-4","prompt":"a"}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":""}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":[]}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":[1,99999]}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":0}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":5000}'
expect 400 context_length_exceeded $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":256}'
long=$($PY -c 'print("x" * 300)')
expect 400 context_length_exceeded $P /v1/completions $C -d "{\"model\":\"tiny\",\"prompt\":\"$long\",\"max_tokens\":1}"
expect 400 unknown_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","frobnicate":1}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":"a","n":17}'
# sampling parameters outside docs/sampling.md S2.2 (never clamped), logprobs and stop rules out of range
for bad in '"temperature":-1' '"temperature":-0.0' '"temperature":1e-50' '"temperature":1e-40' '"temperature":1e39' \
           '"top_p":0' '"top_p":1.5' '"top_p":-0.5' '"top_p":1e-39' '"min_p":2' '"min_p":1e-30' '"min_p":-0.1' \
           '"top_k":513' '"top_k":-2' '"seed":-1' '"n":0' '"logprobs":6' '"logprobs":-1' '"stop_at_eos":true' \
           '"stop":[""]' "\"stop\":[\"$($PY -c 'print("x" * 257)')\"]" \
           '"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]' '"stop_token_ids":[-1]' \
           '"stop_token_ids":[4294967296]' "\"stop_token_ids\":$($PY -c 'print(list(range(65)))' | tr -d ' ')"; do
    expect 400 invalid_value $P /v1/completions $C -d "{\"model\":\"tiny\",\"prompt\":\"a\",\"max_tokens\":2,$bad}"
    want=$(echo "$bad" | sed 's/^"\([a-z_]*\)".*/\1/')
    [ "$(jget "$d/body" error param)" = "$want" ] || fail "$bad: the error names $(jget "$d/body" error param), not $want"
done
for bad in '"temperature":"0.7"' '"temperature":"NaN"' '"temperature":"inf"' '"top_k":1.5' '"seed":"7"' \
           '"logprobs":true' '"stop":5' '"stop":[1]' '"stop_token_ids":"2"' '"stop_at_eos":1'; do
    got=$(st $P /v1/completions $C -d "{\"model\":\"tiny\",\"prompt\":\"a\",\"max_tokens\":2,$bad}")
    [ "$got" = 400 ] || fail "$bad: status $got, expected 400: $(head -c 300 "$d/body")"
    $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["code"] in ("invalid_type","invalid_value") and e["param"], e' \
        "$d/body" || fail "$bad: $(cat "$d/body")"
done
# what cis2 will never accept is a 4xx (OpenAI's clients retry every 5xx; docs/serving.md "Errors")
expect 400 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","echo":true,"stream":true}'
expect 400 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","presence_penalty":0.5}'
expect 400 unsupported_chat_template $P /v1/chat/completions $C -d '{"model":"tiny","messages":[{"role":"user","content":"a"}]}'
expect 200 - $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":2,"temperature":0,"top_p":1,"seed":7,"presence_penalty":0,"user":"u"}'
deep=$($PY -c 'print("[" * 100 + "]" * 100)')
expect 400 invalid_json $P /v1/completions $C -d "$deep"
$PY -c 'print("{\"model\":\"tiny\",\"prompt\":\"" + "a" * 70000 + "\"}")' > "$d/big.json"
expect 413 request_too_large $P /v1/completions $C --data-binary @"$d/big.json"
expect 413 request_too_large $P /v1/completions $C -H 'Transfer-Encoding: chunked' --data-binary @"$d/big.json"
expect 404 not_found $P /v2/nothing
expect 405 method_not_allowed $P /v1/completions
expect 405 method_not_allowed $P /v1/models -X POST -d '{}'
expect 200 - $P /health

echo "== decimals: one correctly rounded conversion of the body's text to binary32 (docs/sampling.md S2.3)"
# 1.0000000596046447762 is 0x3f800001 correctly rounded, 0x3f800000 through a double
expect 200 - $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":3,"temperature":1.0000000596046447762,"top_p":0.99999997,"seed":1}'
jget "$d/body" choices 0 cis2 receipt > "$d/dec.receipt"
grep -qx 'temperature 3f800001' "$d/dec.receipt" || fail "temperature 1.0000000596046447762: $(grep temperature "$d/dec.receipt")"
"$CIS2" run --model-dir "$d/tiny" --prompt a --gen-toks 3 --temperature 1.0000000596046447762 --top-p 0.99999997 --seed 1 \
    --receipt "$d/dec.ref" > /dev/null || fail "cis2 run of the decimals"
cmp "$d/dec.receipt" "$d/dec.ref" || fail "the decimals' receipt differs from cis2 run's"

echo "== 16 concurrent clients (openai): greedy, sampled, logprobs, stop ids; every choice is cis2 run's"
mkdir -p "$d/conc"
$TMO node tests/server/client.js concurrent "http://127.0.0.1:$P" $M 16 "$d/conc" || fail "concurrent clients"
$TMO $PY tests/server/ref.py "$CIS2" "$d/tiny" "$d"/conc/*.json || fail "a concurrent client's choice is not cis2 run's"
grep -l '^CIS-2-RECEIPT ext-sampling-1$' "$d"/conc/*.receipt | wc -l | grep -qx 14 || fail "not 14 extension receipts of 16"
grep -l '^finish-reason stop-' "$d"/conc/*.receipt | wc -l | grep -qx '[1-9][0-9]*' || fail "no concurrent request stopped"
echo "== n: 3 with a seed: sequences 0..2; the same seed twice, whole or streamed, the same samples"
mkdir -p "$d/choices"
$TMO node tests/server/client.js choices "http://127.0.0.1:$P" $M "$d/choices" || fail "choices"
$TMO $PY tests/server/ref.py "$CIS2" "$d/tiny" "$d"/choices/*.json || fail "a choice of n: 3 is not cis2 run --sequence's"
st $P /metrics > /dev/null
multi=$($PY -c 'import re,sys; t=open(sys.argv[1]).read(); one=int(re.search(r"cis2_batch_occupancy_bucket\{le=\"1\"\} (\d+)", t).group(1)); n=int(re.search(r"cis2_batch_occupancy_count (\d+)", t).group(1)); print(n - one)' "$d/body")
[ "$multi" -gt 0 ] || fail "no step ever decoded two sequences together"
echo "16 concurrent clients: $multi steps shared by several sequences"

echo "== receipts verify elsewhere (prefill and decode replays), and through /v1/verify"
cp -r "$d/tiny" "$d/elsewhere"
# verify_all DIR RECEIPT...: every receipt OK under both replays
verify_all() {
    vd=$1; shift
    for replay in prefill decode; do
        "$CIS2" verify "$@" --model-dir "$vd" --replay $replay > "$d/verify.out" ||
            fail "cis2 verify --replay $replay: $(grep -v ' ok$' "$d/verify.out" | head)"
        [ "$(grep -c 'verdict: OK' "$d/verify.out")" -eq $# ] || fail "--replay $replay: not $# OK verdicts"
    done
}
verify_all "$d/elsewhere" "$d"/conc/*.receipt "$d"/choices/*.receipt "$d/dec.receipt"
expect 200 - $P /v1/verify --data-binary @"$d/conc/3.receipt"
[ "$(jget "$d/body" verdict)" = OK ] || fail "/v1/verify: $(cat "$d/body")"
$PY -c 'import json,sys; print(json.dumps({"receipt": open(sys.argv[1]).read()}))' "$d/conc/3.receipt" > "$d/v.json"
expect 200 - $P /v1/verify $C --data-binary @"$d/v.json"
[ "$(jget "$d/body" verdict)" = OK ] || fail "/v1/verify (JSON): $(cat "$d/body")"
sed 's/^generated-token-ids \([0-9]*\)/generated-token-ids 7\1/' "$d/conc/3.receipt" > "$d/bad.receipt"
expect 200 - $P /v1/verify --data-binary @"$d/bad.receipt"
[ "$(jget "$d/body" verdict)" = OUTPUT-MISMATCH ] || fail "/v1/verify of a forged receipt: $(cat "$d/body")"
cp "$d/body" "$d/bad.json"
expect 400 invalid_receipt $P /v1/verify --data-binary 'CIS-2-RECEIPT v1'
# a batch (`cis2 verify R1..Rn`): the n: 3 choices, the forged one, another; each verdict the one
# /v1/verify gives it alone (the forged one's in $d/bad.json), in order
$PY -c 'import json,sys; print(json.dumps({"receipts": [open(f).read() for f in sys.argv[1:]]}))' \
    "$d"/choices/*.receipt "$d/bad.receipt" "$d/conc/3.receipt" > "$d/vb.json"
nb=$(ls "$d"/choices/*.receipt | wc -l)
expect 200 - $P /v1/verify $C --data-binary @"$d/vb.json"
$PY - "$d/body" "$d/bad.json" "$nb" <<'PYEOF' || fail "/v1/verify batch: $(head -c 600 "$d/body")"
import json, sys
b = json.load(open(sys.argv[1])); bad = json.load(open(sys.argv[2])); n = int(sys.argv[3])
v = b["verdicts"]
assert len(v) == n + 2, len(v)
assert all(x["verdict"] == "OK" and x["exit_code"] == 0 for x in v[:n] + v[n + 1:]), v
assert v[n] == bad, (v[n], bad)
assert b["ok"] is False and b["exit_code"] == 1, b
PYEOF
expect 400 invalid_value $P /v1/verify $C --data-binary '{"receipts": []}'
expect 400 invalid_value $P /v1/verify $C --data-binary '{"receipts": "CIS-2-RECEIPT v1"}'
expect 400 invalid_value $P /v1/verify $C --data-binary '{"receipts": [7]}'
$PY -c 'import json; print(json.dumps({"receipts": ["x"] * 257}))' > "$d/vmany.json"
expect 400 invalid_value $P /v1/verify $C --data-binary @"$d/vmany.json"
$PY -c 'import json,sys; print(json.dumps({"receipt": "x", "receipts": [open(sys.argv[1]).read()]}))' "$d/conc/3.receipt" > "$d/vboth.json"
expect 400 invalid_value $P /v1/verify $C --data-binary @"$d/vboth.json"
$PY -c 'import json,sys; print(json.dumps({"receipts": [open(sys.argv[1]).read(), "CIS-2-RECEIPT v1"]}))' "$d/conc/3.receipt" > "$d/vbad.json"
expect 400 invalid_receipt $P /v1/verify $C --data-binary @"$d/vbad.json"
grep -q 'receipts\[1\]' "$d/body" || fail "a batch's malformed receipt is not named: $(cat "$d/body")"

echo "== load: 32 clients x 8 requests"
rss0=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' /proc/$pid_tiny/status)
mkdir -p "$d/load"
$TMO node tests/server/client.js load "http://127.0.0.1:$P" $M 32 8 "$d/load" > "$d/load.out" 2>&1 ||
    fail "load test: $(tail -n 5 "$d/load.out")"
grep -q '256 ok, 0 failed' "$d/load.out" || fail "load: $(cat "$d/load.out")"
"$CIS2" verify "$d"/load/*.receipt --model-dir "$d/tiny" > "$d/lverify.out" || fail "a load-test receipt does not verify"
[ "$(grep -c 'verdict: OK' "$d/lverify.out")" -eq 256 ] || fail "not 256 OK verdicts"
rss1=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' /proc/$pid_tiny/status)
hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' /proc/$pid_tiny/status)
[ "$hwm" -lt 204800 ] || fail "peak RSS $hwm kB after the load test (bound 200 MB)"
echo "load: 256 ok, 0 failed, all verify; RSS $rss0 -> $rss1 kB (peak $hwm kB)"

echo "== bad clients"
$TMO $PY tests/server/hostile.py $P $M slow-headers 2 slow-body 2 garbage huge-header truncated bad-utf8 nul \
    flood 200 || fail "hostile clients"
st $P /metrics > /dev/null
for m in 'cis2_requests_total{endpoint="completions",status="200"}' 'cis2_requests_total{endpoint="completions",status="413"}' \
         cis2_time_to_first_token_seconds_bucket cis2_time_per_output_token_seconds_count cis2_generated_tokens_total \
         '# TYPE cis2_batch_occupancy histogram'; do
    grep -qF "$m" "$d/body" || fail "/metrics lacks $m"
done

# =================================================== mid: chat and load
start mid "$d/mid" --max-batch 1 --max-queue 1 --timeout 5 --drain-timeout 10
P=$port_mid
M=mid
echo "== chat (openai): whole and streamed agree; the receipt is cis2 run --stop-id <|im_end|>'s of the rendered prompt"
mkdir -p "$d/chat"
$TMO node tests/server/client.js chat "http://127.0.0.1:$P" $M "$d/chat" || fail "chat"
$TMO $PY tests/server/ref.py "$CIS2" "$d/mid" "$d"/chat/chat*.json || fail "a chat choice is not cis2 run's"
grep -qx 'stop-ids 2' "$d/chat/chat.receipt" || fail "the chat receipt does not record <|im_end|> (2) as its stop id"
verify_all "$d/mid" "$d"/chat/chat*.receipt
$PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompt"]; sys.exit(p != "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")' \
    "$d/chat/default-system.prompt" || fail "the default system prompt: $(cat "$d/chat/default-system.prompt")"
echo "== stop strings cut from the model's own text (real tokenizer), whole and streamed: cis2 run --stop's"
mkdir -p "$d/cut"
$TMO node tests/server/client.js stopcut "http://127.0.0.1:$P" $M "$d/cut" || fail "stopcut"
$TMO $PY tests/server/ref.py "$CIS2" "$d/mid" "$d"/cut/*.json || fail "a stop-string cut is not cis2 run's"
expect 400 invalid_value $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21}'
expect 400 invalid_value $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}],"top_logprobs":2}'
expect 400 invalid_type $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}],"logprobs":2}'
# chat adds <|im_end|> to the stop ids: 63 of the library's 64 are left
expect 400 invalid_value $P /v1/chat/completions $C -d "{\"model\":\"mid\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stop_token_ids\":$($PY -c 'print(list(range(64)))' | tr -d ' ')}"
[ "$(jget "$d/body" error param)" = stop_token_ids ] || fail "64 chat stop ids: $(cat "$d/body")"
expect 200 - $P /v1/chat/completions $C -d "{\"model\":\"mid\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":1,\"stop_token_ids\":$($PY -c 'print(list(range(3, 66)))' | tr -d ' ')}"
# tools go to the template (SmolLM2's ignores them); tool_choice "required" needs constrained decoding
expect 200 - $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}],"max_tokens":1,"tool_choice":"auto","tools":[{"type":"function","function":{"name":"f"}}]}'
expect 400 unsupported_parameter $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}]}'
# SmolLM2's template adds content to a string: a tool call's null content fails there (docs/serving.md "Chat templates")
expect 400 chat_template_error $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}'
expect 400 invalid_value $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{x"}}]}]}'
expect 200 - $P /v1/chat/completions $C -d '{"model":"mid","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}'
expect 400 unsupported_parameter $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
expect 400 invalid_value $P /v1/chat/completions $C -d '{"model":"mid","messages":[]}'
expect 400 invalid_type $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":5,"content":"a"}]}'
$TMO node tests/server/client.js errors "http://127.0.0.1:$P" $M || fail "client error classes"

echo "== a full queue: 429; clients that leave free their slots"
curl -s -N -o /dev/null "http://127.0.0.1:$P/v1/completions" $C -d '{"model":"mid","prompt":"a","max_tokens":1800,"stream":true}' &
c1=$!
wait_inflight $P 1
curl -s -N -o "$d/queued.sse" "http://127.0.0.1:$P/v1/completions" $C -d '{"model":"mid","prompt":"b","max_tokens":1800,"stream":true}' &
c2=$!
wait_inflight $P 2
expect 429 queue_full $P /v1/completions $C -d '{"model":"mid","prompt":"c","max_tokens":1}'
# the session's own counts (cis2_session_stats_get): one running, one queued, its KV cache held
expect 200 - $P /metrics
metric() { sed -n "s/^$1 \([0-9]*\)\$/\1/p" "$d/body"; }
[ "$(metric cis2_session_running)" = 1 ] && [ "$(metric cis2_session_queued)" = 1 ] ||
    fail "/metrics: running $(metric cis2_session_running), queued $(metric cis2_session_queued) (expected 1, 1)"
[ "$(metric cis2_kv_cache_bytes)" -gt 0 ] && [ "$(metric cis2_kv_budget_bytes)" = 1073741824 ] ||
    fail "/metrics: kv bytes $(metric cis2_kv_cache_bytes), budget $(metric cis2_kv_budget_bytes)"
# the queued stream waits without a token for longer than a third of --timeout: kept alive, not timed out
i=0; until grep -q '^: keep-alive' "$d/queued.sse" 2> /dev/null; do i=$((i + 1)); [ $i -lt 100 ] || fail "no keep-alive on a queued stream"; sleep 0.1; done
kill -0 $c2 2> /dev/null || fail "the queued stream ended"
kill $c1 $c2
wait_inflight $P 0
expect 200 - $P /v1/completions $C -d '{"model":"mid","prompt":"c","max_tokens":1}'
$TMO $PY tests/server/hostile.py $P $M abandon-stream abandon-whole || fail "abandoned requests"

echo "== SIGTERM: in-flight requests finish, then exit 0"
curl -s -o "$d/drain.json" -w '%{http_code}' "http://127.0.0.1:$P/v1/completions" $C \
    -d '{"model":"mid","prompt":"drain","max_tokens":200}' > "$d/drain.code" &
c1=$!
wait_inflight $P 1
kill -TERM $pid_mid
wait $c1
[ "$(cat "$d/drain.code")" = 200 ] || fail "the in-flight request got $(cat "$d/drain.code") during the drain"
i=0; while kill -0 $pid_mid 2> /dev/null; do i=$((i + 1)); [ $i -lt 100 ] || fail "no exit 10 s after SIGTERM"; sleep 0.1; done
wait $pid_mid; rc=$?
[ $rc -eq 0 ] || fail "exit $rc after SIGTERM"
curl -s -m 2 "http://127.0.0.1:$P/health" > /dev/null && fail "still accepting after SIGTERM"

echo "== --kv-budget: a sequence whose KV cache does not fit waits; SIGTERM past --drain-timeout: 503, exit 0"
start mid2 "$d/mid" --drain-timeout 1 --kv-budget 16
P=$port_mid2
curl -s -o "$d/cut.json" -w '%{http_code}' "http://127.0.0.1:$P/v1/completions" $C \
    -d '{"model":"mid","prompt":"cut","max_tokens":1800}' > "$d/cut.code" &
c1=$!
curl -s -N -o "$d/cut.sse" "http://127.0.0.1:$P/v1/completions" $C \
    -d '{"model":"mid","prompt":"cut2","max_tokens":1800,"stream":true}' &
c2=$!
wait_inflight $P 2
# each needs 2 x 8 layers x 1808 positions x 128 x 4 bytes = 14.8 MB: the second waits for the 16 MiB
i=0; until expect 200 - $P /metrics && [ "$(metric cis2_session_queued)" = 1 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "--kv-budget 16: queued $(metric cis2_session_queued), expected 1"; sleep 0.05; done
[ "$(metric cis2_session_running)" = 1 ] && [ "$(metric cis2_kv_cache_bytes)" = 14811136 ] &&
    [ "$(metric cis2_kv_budget_bytes)" = 16777216 ] ||
    fail "--kv-budget 16: running $(metric cis2_session_running), kv $(metric cis2_kv_cache_bytes) of $(metric cis2_kv_budget_bytes)"
t0=$(date +%s)
kill -TERM $pid_mid2
wait $c1 $c2
wait $pid_mid2; rc=$?
t1=$(date +%s)
[ $rc -eq 0 ] || fail "exit $rc after SIGTERM"
[ $((t1 - t0)) -le 5 ] || fail "the shutdown took $((t1 - t0)) s (drain 1 s)"
[ "$(cat "$d/cut.code")" = 503 ] || fail "a request cut by the shutdown got $(cat "$d/cut.code")"
grep -q '"shutting_down"' "$d/cut.sse" || fail "a stream cut by the shutdown has no error event: $(tail -c 300 "$d/cut.sse")"

echo "== stop rules (the stopper checkpoint): chat ends at <|im_end|>; eos, stop ids, stop strings"
"$CIS2" synth --config "$d/stopper.json" --seed 7 --out "$d/stopper" > /dev/null || fail "synth stopper"
$PY tests/server/stopper.py "$d/stopper" tests/server/templates/chatml.jinja || fail "stopper.py"
start stop "$d/stopper"
mkdir -p "$d/stops"
$TMO node tests/server/client.js stops "http://127.0.0.1:$port_stop" stopper "$d/stops" || fail "stops"
$TMO $PY tests/server/ref.py "$CIS2" "$d/stopper" "$d"/stops/*.json || fail "a stopped choice is not cis2 run's"
grep -qx 'finish-reason stop-id' "$d/stops/chat-stop.receipt" && grep -qx 'stop-ids 257' "$d/stops/chat-stop.receipt" ||
    fail "the chat receipt does not record its stop at <|im_end|>: $(cat "$d/stops/chat-stop.receipt")"
cp -r "$d/stopper" "$d/stopper2"
verify_all "$d/stopper2" "$d"/stops/*.receipt

echo "== a template that cannot render: the start refused in one line naming it (exit 4)"
printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}{{ raise_exception("no " ~ bos_token) }}' > "$d/broken.jinja"
"$CIS2" serve --model-dir "$d/mid" --port 0 --chat-template "$d/broken.jinja" > /dev/null 2> "$d/broken.err"
rc=$?
[ $rc -eq 4 ] && [ "$(wc -l < "$d/broken.err")" = 1 ] && grep -q "broken.jinja" "$d/broken.err" ||
    fail "a broken template: exit $rc, $(cat "$d/broken.err")"

echo "== --api-key-file: Bearer, 401 otherwise"
printf 'sk-test-123\n' > "$d/key"
start auth "$d/tiny" --api-key-file "$d/key"
P=$port_auth
expect 401 invalid_api_key $P /v1/models
expect 401 invalid_api_key $P /v1/models -H 'Authorization: Bearer sk-test-12'
expect 401 invalid_api_key $P /v1/models -H 'Authorization: Basic c2stdGVzdC0xMjM='
expect 200 - $P /v1/models -H 'Authorization: Bearer sk-test-123'
expect 200 - $P /health
$TMO node tests/server/client.js auth "http://127.0.0.1:$P" tiny sk-test-123 || fail "auth with the openai client"

kill -TERM $pid_tiny $pid_auth $pid_stop
for p in $pid_tiny $pid_auth $pid_stop; do wait $p || fail "a server exited $? after SIGTERM"; done
PIDS=""
echo "serve: all checks passed"

#!/bin/sh
# tests/t_serve.sh - `cis2 serve` (issue 19) with real clients: the official
# OpenAI Node client (tests/server/client.js, npm `openai`), curl, and raw
# sockets for bad clients (tests/server/hostile.py).  Servers start on free
# loopback ports (--port 0, the port read from their first line), every
# wait is bounded, and the trap kills them all.  On synthetic checkpoints:
#   tiny  the `tiny` shape (byte-level tokenizer): completions, 16 concurrent
#         clients whose receipts must equal `cis2 run`'s byte for byte, the
#         32 x 8 load test (0 failures, every receipt verifying, RSS bounded),
#         every error status, bad clients, /v1/verify, /metrics
#   mid   a 256-wide, 8-layer llama with SmolLM2's tokenizer and chat
#         template: chat (receipt = `cis2 run` of the rendered prompt), the
#         default system prompt, 429 with a full queue, disconnected clients
#         freeing their slots, SIGTERM draining and cancelling
set -u
BUILD=${BUILD:-build}
CIS2=${CIS2:-$BUILD/cis2}
SHARED=${SHARED:-../shared}
fail() { echo "FAIL: $*"; for f in "$d"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }; done; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v node > /dev/null || skip "node is not installed (tools/install-deps)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
[ -d tests/server/node_modules/openai ] || skip "the openai npm client is not installed (tools/install-deps)"
PY=/usr/bin/python3
TMO="timeout 60"
d=$(mktemp -d) || exit 1
PIDS=""
trap 'for p in $PIDS; do kill -9 $p 2> /dev/null; done; rm -rf "$d"' EXIT

# for f in the server's own modules: nothing but cis2.h, cli.h and serve.h
for f in src/serve_*.c src/serve.h; do
    bad=$(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/.*"\(.*\)".*/\1/' |
          grep -v -x -e cis2.h -e cli.h -e serve.h)
    [ -z "$bad" ] || fail "$f includes $bad (the server is a client of cis2.h only)"
done
! nm -D "$BUILD/libcis2.so" 2> /dev/null | grep -q MHD_ || fail "libcis2.so links libmicrohttpd"

# start NAME DIR ARGS...: a server in the background; sets port_NAME, pid_NAME
start() {
    name=$1; dir=$2; shift 2
    "$CIS2" serve --model-dir "$dir" --port 0 "$@" > "$d/$name.out" 2> "$d/$name.err" &
    pid=$!
    PIDS="$PIDS $pid"
    i=0
    while ! grep -q 'listening on' "$d/$name.out" 2> /dev/null; do
        kill -0 $pid 2> /dev/null || fail "server $name did not start: $(cat "$d/$name.err")"
        i=$((i + 1)); [ $i -lt 300 ] || fail "server $name did not listen within 30 s"
        sleep 0.1
    done
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$d/$name.out")
    eval "port_$name=$port; pid_$name=$pid"
}
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
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":"a","temperature":-1}'
expect 400 invalid_value $P /v1/completions $C -d '{"model":"tiny","prompt":"a","top_p":1.5}'
expect 501 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","echo":true}'
expect 501 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","presence_penalty":0.5}'
expect 501 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","logprobs":1}'
expect 501 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","temperature":0.7}'
expect 501 unsupported_parameter $P /v1/completions $C -d '{"model":"tiny","prompt":"a","stop":["\n"]}'
expect 501 unsupported_chat_template $P /v1/chat/completions $C -d '{"model":"tiny","messages":[{"role":"user","content":"a"}]}'
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

echo "== 16 concurrent clients (openai): every receipt equals cis2 run's, streamed text = cis2 run's"
mkdir -p "$d/conc"
$TMO node tests/server/client.js concurrent "http://127.0.0.1:$P" $M 16 "$d/conc" || fail "concurrent clients"
for i in $(seq 0 15); do
    jget "$d/conc/$i.json" prompt > "$d/conc/$i.prompt"
    n=$(jget "$d/conc/$i.json" max_tokens)
    "$CIS2" run --model-dir "$d/tiny" --prompt "$(cat "$d/conc/$i.prompt")" --gen-toks "$n" --json \
        --receipt "$d/conc/$i.ref" > "$d/conc/$i.run" || fail "cis2 run $i"
    cmp "$d/conc/$i.receipt" "$d/conc/$i.ref" || fail "client $i: the server's receipt differs from cis2 run's"
    $PY -c 'import json,sys; a=json.load(open(sys.argv[1]))["text"]; b=json.load(open(sys.argv[2]))["completion"]; sys.exit(a != b)' \
        "$d/conc/$i.json" "$d/conc/$i.run" || fail "client $i: the text differs from cis2 run's completion"
done
st $P /metrics > /dev/null
multi=$($PY -c 'import re,sys; t=open(sys.argv[1]).read(); one=int(re.search(r"cis2_batch_occupancy_bucket\{le=\"1\"\} (\d+)", t).group(1)); n=int(re.search(r"cis2_batch_occupancy_count (\d+)", t).group(1)); print(n - one)' "$d/body")
[ "$multi" -gt 0 ] || fail "no step ever decoded two sequences together"
echo "16 receipts identical to cis2 run's ($multi steps shared by several sequences)"

echo "== receipts verify elsewhere, and through /v1/verify"
cp -r "$d/tiny" "$d/elsewhere"
"$CIS2" verify "$d"/conc/*.receipt --model-dir "$d/elsewhere" > "$d/verify.out" || fail "cis2 verify: $(grep -v ' ok$' "$d/verify.out" | head)"
[ "$(grep -c 'verdict: OK' "$d/verify.out")" -eq 16 ] || fail "not 16 OK verdicts"
expect 200 - $P /v1/verify --data-binary @"$d/conc/3.receipt"
[ "$(jget "$d/body" verdict)" = OK ] || fail "/v1/verify: $(cat "$d/body")"
$PY -c 'import json,sys; print(json.dumps({"receipt": open(sys.argv[1]).read()}))' "$d/conc/3.receipt" > "$d/v.json"
expect 200 - $P /v1/verify $C --data-binary @"$d/v.json"
[ "$(jget "$d/body" verdict)" = OK ] || fail "/v1/verify (JSON): $(cat "$d/body")"
sed 's/^generated-token-ids \([0-9]*\)/generated-token-ids 7\1/' "$d/conc/3.receipt" > "$d/bad.receipt"
expect 200 - $P /v1/verify --data-binary @"$d/bad.receipt"
[ "$(jget "$d/body" verdict)" = OUTPUT-MISMATCH ] || fail "/v1/verify of a forged receipt: $(cat "$d/body")"
expect 400 invalid_receipt $P /v1/verify --data-binary 'CIS-2-RECEIPT v1'

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
echo "== chat (openai): whole and streamed agree; the receipt equals cis2 run's of the rendered prompt"
mkdir -p "$d/chat"
$TMO node tests/server/client.js chat "http://127.0.0.1:$P" $M "$d/chat" || fail "chat"
$PY -c 'import json,sys; print(json.dumps([json.load(open(sys.argv[1]))["prompt"]]))' "$d/chat/chat.json" > "$d/chat/prompt.json"
"$CIS2" run --model-dir "$d/mid" --prompt-file "$d/chat/prompt.json" --gen-toks 12 --receipt "$d/chat/ref" > /dev/null ||
    fail "cis2 run of the chat prompt"
cmp "$d/chat/chat.receipt" "$d/chat/ref" || fail "the chat receipt differs from cis2 run's"
$PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompt"]; sys.exit(p != "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")' \
    "$d/chat/chat-default.json" || fail "the default system prompt: $(cat "$d/chat/chat-default.json")"
expect 400 unsupported_parameter $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}}]}'
expect 501 unsupported_parameter $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}'
expect 400 invalid_type $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}'
expect 400 invalid_value $P /v1/chat/completions $C -d '{"model":"mid","messages":[]}'
expect 400 invalid_value $P /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"wizard","content":"a"}]}'
$TMO node tests/server/client.js errors "http://127.0.0.1:$P" $M || fail "client error classes"

echo "== a full queue: 429; clients that leave free their slots"
curl -s -N -o /dev/null "http://127.0.0.1:$P/v1/completions" $C -d '{"model":"mid","prompt":"a","max_tokens":1800,"stream":true}' &
c1=$!
wait_inflight $P 1
curl -s -N -o "$d/queued.sse" "http://127.0.0.1:$P/v1/completions" $C -d '{"model":"mid","prompt":"b","max_tokens":1800,"stream":true}' &
c2=$!
wait_inflight $P 2
expect 429 queue_full $P /v1/completions $C -d '{"model":"mid","prompt":"c","max_tokens":1}'
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

echo "== SIGTERM past --drain-timeout: in-flight requests get 503, exit 0"
start mid2 "$d/mid" --drain-timeout 1
P=$port_mid2
curl -s -o "$d/cut.json" -w '%{http_code}' "http://127.0.0.1:$P/v1/completions" $C \
    -d '{"model":"mid","prompt":"cut","max_tokens":1800}' > "$d/cut.code" &
c1=$!
curl -s -N -o "$d/cut.sse" "http://127.0.0.1:$P/v1/completions" $C \
    -d '{"model":"mid","prompt":"cut2","max_tokens":1800,"stream":true}' &
c2=$!
wait_inflight $P 2
t0=$(date +%s)
kill -TERM $pid_mid2
wait $c1 $c2
wait $pid_mid2; rc=$?
t1=$(date +%s)
[ $rc -eq 0 ] || fail "exit $rc after SIGTERM"
[ $((t1 - t0)) -le 5 ] || fail "the shutdown took $((t1 - t0)) s (drain 1 s)"
[ "$(cat "$d/cut.code")" = 503 ] || fail "a request cut by the shutdown got $(cat "$d/cut.code")"
grep -q '"shutting_down"' "$d/cut.sse" || fail "a stream cut by the shutdown has no error event: $(tail -c 300 "$d/cut.sse")"

echo "== an unrecognized template: chat 501 naming it"
start mid3 "$d/mid" --chat-template tests/server/templates/refuse-zephyr.jinja
expect 501 unsupported_chat_template $port_mid3 /v1/chat/completions $C -d '{"model":"mid","messages":[{"role":"user","content":"a"}]}'
grep -q 'refuse-zephyr.jinja' "$d/body" || fail "the 501 does not name the template: $(cat "$d/body")"

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

kill -TERM $pid_tiny $pid_mid3 $pid_auth
for p in $pid_tiny $pid_mid3 $pid_auth; do wait $p || fail "a server exited $? after SIGTERM"; done
PIDS=""
echo "serve: all checks passed"

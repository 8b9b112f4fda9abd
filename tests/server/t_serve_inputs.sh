#!/bin/sh
# tests/server/t_serve_inputs.sh - `cis2 serve` inputs (docs/inputs.md "HTTP
# requests", docs/serving.md "Hygiene"), with curl against servers on free
# loopback ports (--port 0), every wait bounded, the trap killing them all:
#   -  --api-key-file: the key is the first line (LF or CR LF, surrounding
#      blanks trimmed as in the Authorization header); an empty or blank
#      first line is exit 4 with one line
#   -  numbers jansson refuses (an integer beyond int64, 1e999) are 400
#      invalid_value naming the parameter, while broken JSON stays
#      invalid_json; /v1/verify of truncated JSON is invalid_json; a
#      \u0000 is a byte of a stop string (it reaches the receipt's
#      stop-strings) and refused, naming the parameter, anywhere else
#   -  cis2_prompt_tokens_total counts admitted requests only, not a 429
#   -  a chat_template.jinja (or tokenizer_config.json) that is a FIFO or a
#      directory fails the start with exit 3, at once, naming the file
set -u
. tests/lib.sh
PY=/usr/bin/python3
TMO="timeout 30"
FAIL_TAIL=5   # fail shows the end of every $d/*.err
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
tmpdir d

# st PORT PATH [curl args]: the HTTP status; the body in $d/body
st() { p=$1; path=$2; shift 2; $TMO curl -s -o "$d/body" -w '%{http_code}' "$@" "http://127.0.0.1:$p$path"; }
jget() { $PY -c 'import json,sys; v=json.load(open(sys.argv[1])); exec("for k in sys.argv[2:]: v = v[int(k)] if isinstance(v, list) else v[k]"); print(v, end="")' "$@"; }
# expect STATUS CODE PARAM PORT PATH [curl args]: an OpenAI error with that code and param (- : any; null: none)
expect() {
    want=$1; code=$2; param=$3; shift 3
    got=$(st "$@")
    [ "$got" = "$want" ] || fail "$*: status $got, expected $want: $(head -c 300 "$d/body")"
    [ "$code" = - ] && return 0
    $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert set(e) == {"message","type","param","code"}, e
assert e["code"] == sys.argv[2], e
assert sys.argv[3] == "-" or e["param"] == (None if sys.argv[3] == "null" else sys.argv[3]), e' \
        "$d/body" "$code" "$param" || fail "$*: not an error with code $code, param $param: $(head -c 300 "$d/body")"
}
inflight() { st "$1" /health > /dev/null; jget "$d/body" sequences_inflight; }
wait_inflight() { # wait_inflight PORT N: until N sequences are in flight (10 s at most)
    i=0
    while [ "$(inflight "$1")" != "$2" ]; do i=$((i + 1)); [ $i -lt 200 ] || fail "in flight: $(inflight "$1"), expected $2"; sleep 0.05; done
}
metric() { st "$1" /metrics > /dev/null; sed -n "s/^$2 \([0-9]*\)\$/\1/p" "$d/body"; }
# start_fails CODE NEEDLE ARGS...: `cis2 serve ARGS` exits CODE within 10 s, one stderr line with NEEDLE
start_fails() {
    code=$1; needle=$2; shift 2
    timeout 10 "$CIS2" serve --port 0 "$@" > "$d/sf.out" 2> "$d/sf.log"; rc=$?
    [ $rc -eq "$code" ] || fail "serve $*: exit $rc, expected $code: $(cat "$d/sf.log")"
    [ "$(wc -l < "$d/sf.log")" -eq 1 ] || fail "serve $*: stderr is not one line: $(cat "$d/sf.log")"
    grep -qF -- "$needle" "$d/sf.log" || fail "serve $*: stderr lacks '$needle': $(cat "$d/sf.log")"
}

"$CIS2" synth --shape tiny --seed 5 --out "$d/tiny" > /dev/null || fail "synth tiny"
C="-H Content-Type:application/json"
start tiny "$d/tiny" --timeout 5
P=$port_tiny

echo "== 4: --api-key-file: the first line is the key"
printf 'sk-one\nsecond line\n' > "$d/key1"
start k1 "$d/tiny" --api-key-file "$d/key1"
expect 200 - - $port_k1 /v1/models -H 'Authorization: Bearer sk-one'
expect 401 invalid_api_key null $port_k1 /v1/models -H 'Authorization: Bearer second line'
printf ' \tsk-two \r\n# a comment\n' > "$d/key2"
start k2 "$d/tiny" --api-key-file "$d/key2"
expect 200 - - $port_k2 /v1/models -H 'Authorization: Bearer sk-two'
printf 'sk-three' > "$d/key3"  # no final newline
start k3 "$d/tiny" --api-key-file "$d/key3"
expect 200 - - $port_k3 /v1/models -H 'Authorization: Bearer sk-three'
kill -TERM $pid_k1 $pid_k2 $pid_k3
printf '\nsk-four\n' > "$d/key4"
start_fails 4 "key4: the first line (the key) is empty" --model-dir "$d/tiny" --api-key-file "$d/key4"
printf ' \t \r\n' > "$d/key5"
start_fails 4 "key5: the first line (the key) is empty" --model-dir "$d/tiny" --api-key-file "$d/key5"
: > "$d/key6"
start_fails 4 "key6: the first line (the key) is empty" --model-dir "$d/tiny" --api-key-file "$d/key6"

echo "== 6: numbers beyond int64 or a double: invalid_value naming the parameter"
big=99999999999999999999
for bad in '"temperature":1e999' '"temperature":-1e999' '"top_p":1e999' '"min_p":1E+400' "\"seed\":$big" "\"seed\":-$big" \
           "\"max_tokens\":$big" "\"n\":$big" "\"top_k\":$big" "\"top_k\":-$big" "\"logprobs\":$big" \
           "\"stop_token_ids\":[1,$big]" '"seed":9223372036854775808' '"seed":123456789012345678901234567890.5e300' \
           "\"stream_options\":{\"include_usage\":$big}" "\"max_tokens\":1e999,\"seed\":$big"; do
    want=$(echo "$bad" | sed 's/^"\([a-z_]*\)".*/\1/')
    expect 400 invalid_value "$want" $P /v1/completions $C -d "{\"model\":\"tiny\",\"prompt\":\"a\",$bad}"
done
expect 400 invalid_value prompt $P /v1/completions $C -d "{\"model\":\"tiny\",\"prompt\":[1,$big]}"
expect 400 invalid_value seed $P /v1/chat/completions $C -d "{\"model\":\"tiny\",\"messages\":[],\"seed\":$big}"
# the largest int64 is a value like any other (seed 0..2^63-1)
expect 200 - - $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":1,"seed":9223372036854775807,"temperature":0.5}'
# a number in a string is text; an unknown key stays unknown; broken JSON stays broken
expect 200 - - $P /v1/completions $C -d '{"model":"tiny","prompt":"1e999 99999999999999999999","max_tokens":1}'
expect 400 unknown_parameter frobnicate $P /v1/completions $C -d '{"model":"tiny","prompt":"a","frobnicate":1e999}'
for broken in "{\"model\":\"tiny\",\"prompt\":\"a\",\"seed\":$big," "{\"model\":\"tiny\",\"seed\":--$big}" \
              "{\"model\":\"tiny\",\"seed\":0$big}" "{\"model\":\"tiny\",\"seed\":1e999e5}" "{\"model\":\"tiny\",\"seed\":x$big}" \
              "{\"model\":\"tiny\",\"seed\":$big,\"seed\":1}" "{\"model\":\"tiny\",\"seed\":1.e999}"; do
    expect 400 invalid_json null $P /v1/completions $C -d "$broken"
done

echo "== 6: /v1/verify of truncated JSON is invalid_json"
expect 400 invalid_json null $P /v1/verify $C -d '{"receipt": "abc'
expect 400 invalid_json null $P /v1/verify $C -d '{"receipts": ["abc"'
expect 400 invalid_receipt receipt $P /v1/verify $C -d '{"receipt": "abc"}'

echo "== 6: a \\u0000 is a byte of a stop string, refused elsewhere"
expect 200 - - $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":2,"stop":["a\u0000b","\u0000"]}'
jget "$d/body" choices 0 cis2 receipt > "$d/nul.receipt"
grep -qx 'stop-strings 610062,00' "$d/nul.receipt" || fail "the NUL stop strings in the receipt: $(grep stop-strings "$d/nul.receipt")"
[ "$(jget "$d/body" choices 0 cis2 stop_rule)" = "2 stop strings" ] || fail "stop_rule: $(jget "$d/body" choices 0 cis2 stop_rule)"
expect 200 - - $P /v1/completions $C -d '{"model":"tiny","prompt":"a","max_tokens":2,"stop":"\u0000"}'
expect 400 invalid_value prompt $P /v1/completions $C -d '{"model":"tiny","prompt":"a\u0000b"}'
expect 400 invalid_value model $P /v1/completions $C -d '{"model":"tiny\u0000x","prompt":"a"}'
expect 400 invalid_value user $P /v1/completions $C -d '{"model":"tiny","prompt":"a","user":"\u0000"}'
expect 400 invalid_value messages $P /v1/chat/completions $C -d '{"model":"tiny","messages":[{"role":"user","content":"\u0000"}]}'
expect 200 - - $P /health

echo "== 7: cis2_prompt_tokens_total counts admitted requests, not 429s"
# a slow model (4 layers, 512 wide, 8192 positions): two 8000-token streams fill --max-batch 1 --max-queue 1
cat > "$d/slow.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 512,
 "intermediate_size": 1376, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
 "vocab_size": 512, "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 10000,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16"}
EOF
"$CIS2" synth --config "$d/slow.json" --seed 3 --out "$d/slow" > /dev/null || fail "synth slow"
start slow "$d/slow" --max-batch 1 --max-queue 1 --max-tokens 8000 --timeout 30
P=$port_slow
curl -s -N -o /dev/null "http://127.0.0.1:$P/v1/completions" $C -d '{"model":"slow","prompt":"a","max_tokens":8000,"stream":true}' &
c1=$!
wait_inflight $P 1
curl -s -N -o /dev/null "http://127.0.0.1:$P/v1/completions" $C -d '{"model":"slow","prompt":"b","max_tokens":8000,"stream":true}' &
c2=$!
wait_inflight $P 2
sleep 0.2
p0=$(metric $P cis2_prompt_tokens_total)
[ -n "$p0" ] && [ "$p0" -ge 2 ] || fail "cis2_prompt_tokens_total is '$p0' with two requests admitted"
long=$($PY -c 'print("c" * 100)')
expect 429 queue_full null $P /v1/completions $C -d "{\"model\":\"slow\",\"prompt\":\"$long\",\"max_tokens\":1}"
expect 429 queue_full null $P /v1/completions $C -d "{\"model\":\"slow\",\"prompt\":\"$long\",\"max_tokens\":1}"
p1=$(metric $P cis2_prompt_tokens_total)
[ "$p1" = "$p0" ] || fail "two 429s moved cis2_prompt_tokens_total from $p0 to $p1"
kill $c1 $c2
wait_inflight $P 0
expect 200 - - $P /v1/completions $C -d "{\"model\":\"slow\",\"prompt\":\"$long\",\"max_tokens\":1}"
pt=$(jget "$d/body" usage prompt_tokens)
p2=$(metric $P cis2_prompt_tokens_total)
[ "$p2" -eq $((p1 + pt)) ] || fail "an admitted request of $pt prompt tokens moved cis2_prompt_tokens_total from $p1 to $p2"
echo "prompt tokens: $p0 with two admitted, $p1 after two 429s, $p2 after one more of $pt"

echo "== 8: a chat template that is a FIFO or a directory fails the start (exit 3, at once)"
mkdir "$d/m8"
cp "$d/tiny"/* "$d/m8/"
mkfifo "$d/m8/chat_template.jinja"
start_fails 3 "m8/chat_template.jinja: not a regular file (a FIFO)" --model-dir "$d/m8"
rm "$d/m8/chat_template.jinja"
mkdir "$d/m8/chat_template.jinja"
start_fails 3 "m8/chat_template.jinja: not a regular file (a directory)" --model-dir "$d/m8"
rmdir "$d/m8/chat_template.jinja"
ln -s "$d/nowhere" "$d/m8/chat_template.jinja"
start_fails 3 "m8/chat_template.jinja: cannot open" --model-dir "$d/m8"
rm "$d/m8/chat_template.jinja"
mkfifo "$d/m8/tokenizer_config.json"
start_fails 3 "m8/tokenizer_config.json: not a regular file (a FIFO)" --model-dir "$d/m8"
mkfifo "$d/fifo.jinja"
start_fails 3 "fifo.jinja: not a regular file (a FIFO)" --model-dir "$d/tiny" --chat-template "$d/fifo.jinja"
# absent files are not an error: the server starts with chat off
rm "$d/m8/tokenizer_config.json"
start m8 "$d/m8"
grep -q 'chat completions are off' "$d/m8.err" || fail "no note that chat is off: $(cat "$d/m8.err")"

kill -TERM $pid_tiny $pid_slow $pid_m8
for p in $pid_tiny $pid_slow $pid_m8; do wait $p || fail "a server exited $? after SIGTERM"; done
PIDS=""
echo "serve inputs: all checks passed"

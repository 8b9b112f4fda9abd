#!/bin/sh
# tests/server/t_serve_ops.sh - `cis2 serve` as an operator and a stock
# OpenAI client meet it (docs/serving.md "Starting it", "The access log",
# "Errors"), with curl and the
# official `openai` npm client (tests/server/client.js) against servers on
# free loopback ports, every wait bounded, the trap killing them all:
#   -  start-up: a `loading` line on stderr names the bound address before
#      the model loads, and a connection made then is answered (it waits,
#      never refused); the socket is bound before the model loads, so a
#      busy port fails at once, one line, exit 3, even with a checkpoint
#      that would not load; an unwritable --access-log fails the same way
#   -  the access log: one line per finished request (nine fields,
#      docs/serving.md "The access log"), checked against what curl saw of the same request
#      (status, body bytes: curl's size_download; the completion's id),
#      paths escaped so no request can forge a line; 40 concurrent
#      requests give 40 whole lines; stderr by default, nothing with `off`
#   -  a wrong or missing `model` is refused naming the model served
#   -  parameters cis2 will never accept are 400 unsupported_parameter
#      naming them: the openai client, with its default two retries of
#      every 5xx, raises BadRequestError at the first attempt, and the
#      server's access log and /metrics count exactly one request per case
set -u
. tests/lib.sh
PY=/usr/bin/python3
TMO="timeout 60"
[ -n "${SAN:-}" ] && TMO="timeout 300"
FAIL_TAIL=10   # fail shows the end of every $d/*.err
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
command -v node > /dev/null || skip "node is not installed (tools/install-deps)"
[ -d tests/server/node_modules/openai ] || skip "the openai npm client is not installed (tools/install-deps)"
TOK=$SHARED/models/smollm2-135m/tokenizer.json
TPL=$SHARED/models/smollm2-135m-instruct/chat_template.jinja
[ -f "$TOK" ] && [ -f "$TPL" ] || skip "SmolLM2's tokenizer or chat template is missing under $SHARED/models"
tmpdir d
C="-H Content-Type:application/json"

# the access line (serve_log.c): TIME CLIENT METHOD PATH STATUS BYTES MS ID END
LINE_RE='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z 127\.0\.0\.1:[0-9]+ [A-Z]+ [!-~]+ ([0-9]{3}|-) [0-9]+ [0-9]+\.[0-9] [!-~]+ (ok|error|timeout|shutdown|read_error|client_abort)$'
# lines FILE: the access lines in FILE (other stderr lines start with "cis2 serve:")
lines() { grep -E '^[0-9]{4}-' "$1" 2> /dev/null || :; }
# wait_lines FILE N: until FILE holds N access lines (10 s at most; a line is written once the response is)
wait_lines() {
    i=0
    while [ "$(lines "$1" | wc -l)" -lt "$2" ]; do
        i=$((i + 1)); [ $i -lt 200 ] || fail "$1: $(lines "$1" | wc -l) access lines, expected $2"; sleep 0.05
    done
    [ "$(lines "$1" | wc -l)" -eq "$2" ] || fail "$1: $(lines "$1" | wc -l) access lines, expected $2: $(cat "$1")"
}

"$CIS2" synth --shape tiny --seed 5 --out "$d/tiny" > /dev/null || fail "synth tiny"
# chat: the tiny shape with SmolLM2's tokenizer (its <|im_end|>) and chat template
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c["vocab_size"]=49152; json.dump(c, open(sys.argv[2], "w"))' \
    "$d/tiny/config.json" "$d/chat.json"
"$CIS2" synth --config "$d/chat.json" --seed 3 --out "$d/chat" --tokenizer "$TOK" > /dev/null || fail "synth chat"
cp "$TPL" "$d/chat/chat_template.jinja"

echo "== 11: loading is announced with the bound address; a connection made then waits and is answered"
"$CIS2" serve --model-dir "$d/tiny" --port 0 --access-log "$d/early.log" > "$d/early.out" 2> "$d/early.err" &
pid_early=$!
PIDS="$PIDS $pid_early"
i=0
until grep -q '^cis2 serve: loading ' "$d/early.err" 2> /dev/null; do
    kill -0 $pid_early 2> /dev/null || fail "the server exited: $(cat "$d/early.err")"
    i=$((i + 1)); [ $i -lt 300 ] || fail "no loading line within 30 s: $(cat "$d/early.err")"; sleep 0.01
done
P=$(sed -n 's/^cis2 serve: loading .* (http:\/\/127\.0\.0\.1:\([0-9]*\) is bound; .*/\1/p' "$d/early.err")
[ -n "$P" ] || fail "the loading line names no bound address: $(cat "$d/early.err")"
grep -qxF "cis2 serve: loading $d/tiny (http://127.0.0.1:$P is bound; requests wait until the model is loaded)" "$d/early.err" ||
    fail "the loading line: $(cat "$d/early.err")"
# no retry: the socket listens from the loading line on
code=$($TMO curl -s -o "$d/early.json" -w '%{http_code}' "http://127.0.0.1:$P/v1/completions" $C \
       -d '{"model":"tiny","prompt":"Once upon a time","max_tokens":4}')
[ "$code" = 200 ] || fail "a request made while loading got $code: $(cat "$d/early.json")"
grep -q "listening on http://127.0.0.1:$P (model tiny, " "$d/early.out" || fail "the listening line: $(cat "$d/early.out")"
wait_lines "$d/early.log" 1

echo "== 11: a busy port fails at once, one line, exit 3, before any model is loaded"
mkdir "$d/broken"
cp "$d/tiny/model.safetensors" "$d/tiny/tokenizer.json" "$d/broken/"
printf '{"model_type": ' > "$d/broken/config.json"    # a checkpoint that would fail to load (exit 4)
# start_fails CODE NEEDLE ARGS...: `cis2 serve ARGS` exits CODE within 10 s, stdout empty, one stderr line with NEEDLE
start_fails() {
    code=$1; needle=$2; shift 2
    timeout 10 "$CIS2" serve "$@" > "$d/sf.out" 2> "$d/sf.log"; rc=$?
    [ $rc -eq "$code" ] || fail "serve $*: exit $rc, expected $code: $(cat "$d/sf.log")"
    [ "$(wc -l < "$d/sf.log")" -eq 1 ] || fail "serve $*: stderr is not one line: $(cat "$d/sf.log")"
    [ ! -s "$d/sf.out" ] || fail "serve $*: stdout: $(cat "$d/sf.out")"
    grep -qF -- "$needle" "$d/sf.log" || fail "serve $*: stderr lacks '$needle': $(cat "$d/sf.log")"
}
start_fails 3 "cannot listen on 127.0.0.1 port $P: Address already in use" --model-dir "$d/broken" --port $P
start_fails 3 "cannot listen on 127.0.0.1 port $P: Address already in use" --model-dir "$d/tiny" --port $P
# the same checkpoint on a free port does fail to load (so the port was checked first above)
timeout 10 "$CIS2" serve --model-dir "$d/broken" --port 0 > /dev/null 2> "$d/broken.log"; rc=$?
[ $rc -eq 4 ] || fail "the broken checkpoint: exit $rc, expected 4: $(cat "$d/broken.log")"
start_fails 3 "--access-log $d/no/such/dir/a.log: cannot open" --model-dir "$d/tiny" --access-log "$d/no/such/dir/a.log"
start_fails 2 "--access-log is empty" --model-dir "$d/tiny" --access-log ""
kill -TERM $pid_early; wait $pid_early || fail "the server exited $? after SIGTERM"

echo "== 11: the access log: one line per request, as curl saw it"
start log "$d/tiny" --access-log "$d/log.log" --timeout 5
P=$port_log
n=0
# req NAME PATH [curl args]: the request; NAME.body, and "NAME STATUS BYTES" in $d/seen (curl's own count)
req() {
    name=$1; path=$2; shift 2
    $TMO curl -s -o "$d/$name.body" -w "$name %{http_code} %{size_download}\n" "$@" "http://127.0.0.1:$P$path" >> "$d/seen" ||
        fail "curl $name"
    n=$((n + 1))
    wait_lines "$d/log.log" $n
}
: > "$d/seen"
req whole /v1/completions $C -d '{"model":"tiny","prompt":"Once upon a time","max_tokens":8}'
req stream /v1/completions $C -N -d '{"model":"tiny","prompt":"Once upon a time","max_tokens":8,"stream":true}'
req refused /v1/completions $C -d '{"model":"tiny","prompt":"a","frequency_penalty":0.5}'
req health /health
req forged '/v1/x%0A2025-01-01T00:00:00.000Z%20127.0.0.1:1%20GET%20/%20200%200%200.0%20-%20ok%22%5C'
req method /v1/completions -X DELETE
[ "$(lines "$d/log.log" | grep -cvE "$LINE_RE")" = 0 ] || fail "malformed access lines: $(lines "$d/log.log" | grep -vE "$LINE_RE")"
$PY - "$d" <<'PYEOF' || fail "the access log differs from what curl saw: $(cat "$d/log.log")"
import json, sys
d = sys.argv[1]
log = [l.split(" ") for l in open(d + "/log.log").read().splitlines() if l[:1].isdigit()]
seen = [l.split() for l in open(d + "/seen")]
assert len(log) == len(seen) == 6, (len(log), len(seen))
want = {"whole": ("POST", "/v1/completions"), "stream": ("POST", "/v1/completions"),
        "refused": ("POST", "/v1/completions"), "health": ("GET", "/health"),
        "forged": ("GET", "/v1/x\\x0a2025-01-01T00:00:00.000Z\\x20127.0.0.1:1\\x20GET\\x20/\\x20200\\x200\\x200.0\\x20-\\x20ok\\x22\\x5c"),
        "method": ("DELETE", "/v1/completions")}
for f, (name, status, size) in zip(log, seen):
    assert len(f) == 9, f
    method, path, st, nbytes, ms, rid, end = f[2], f[3], f[4], f[5], f[6], f[7], f[8]
    assert (method, path) == want[name], (name, f)
    assert st == status, (name, st, status)
    assert nbytes == size, (name, "bytes", nbytes, size)
    assert end == "ok", (name, end)
    if name == "whole":
        assert rid == json.load(open(d + "/whole.body"))["id"], (rid,)
    elif name == "stream":
        first = [l for l in open(d + "/stream.body") if l.startswith("data: {")][0]
        assert rid == json.loads(first[6:])["id"], (rid,)
    else:
        assert rid == "-", (name, rid)
print("access log: %d lines, each what curl saw" % len(log))
PYEOF

echo "== 11: 40 requests at once: 40 whole lines, one per request"
: > "$d/many.ids"
i=0; pids=""
while [ $i -lt 40 ]; do
    s=false; [ $((i % 3)) -eq 0 ] && s=true
    $TMO curl -s -N -o "$d/many$i.body" "http://127.0.0.1:$P/v1/completions" $C \
        -d "{\"model\":\"tiny\",\"prompt\":\"request $i\",\"max_tokens\":$((4 + i % 9)),\"stream\":$s}" &
    pids="$pids $!"
    i=$((i + 1))
done
for p in $pids; do wait $p || fail "a concurrent curl failed"; done
wait_lines "$d/log.log" 46
[ "$(lines "$d/log.log" | grep -cvE "$LINE_RE")" = 0 ] || fail "malformed access lines: $(lines "$d/log.log" | grep -vE "$LINE_RE")"
$PY - "$d" <<'PYEOF' || fail "the concurrent requests' lines"
import json, sys
d = sys.argv[1]
log = [l.split(" ") for l in open(d + "/log.log").read().splitlines() if l[:1].isdigit()][6:]
ids = set()
for i in range(40):
    t = open("%s/many%d.body" % (d, i)).read()
    ids.add(json.loads(t)["id"] if not t.startswith("data:") else json.loads(t.split("\n")[0][6:])["id"])
assert len(ids) == 40
got = {f[7] for f in log if f[2:5] == ["POST", "/v1/completions", "200"]}
assert got == ids, (len(got), len(ids))
print("40 concurrent requests: 40 lines, their ids the responses'")
PYEOF

echo "== 11: stderr by default; nothing with --access-log off"
start plain "$d/tiny"
start quiet "$d/tiny" --access-log off
for p in $port_plain $port_quiet; do
    $TMO curl -s -o /dev/null "http://127.0.0.1:$p/health" || fail "curl /health"
    $TMO curl -s -o /dev/null "http://127.0.0.1:$p/v1/models" || fail "curl /v1/models"
done
wait_lines "$d/plain.err" 2
lines "$d/plain.err" | grep -qE ' GET /v1/models 200 [0-9]+ [0-9.]+ - ok$' || fail "stderr's access lines: $(cat "$d/plain.err")"
sleep 0.3
[ "$(lines "$d/quiet.err" | wc -l)" = 0 ] || fail "--access-log off still logs: $(cat "$d/quiet.err")"

echo "== 4: what cis2 will never accept is a 400 the client does not retry"
start chat "$d/chat" --access-log "$d/chat.log"
$TMO node tests/server/client.js refusals "http://127.0.0.1:$port_chat" chat || fail "refusals"
wait_lines "$d/chat.log" 12
bad=$(lines "$d/chat.log" | grep -cvE ' POST /v1/(chat/)?completions 400 ')
[ "$bad" = 0 ] || fail "not one 400 per refusal: $(cat "$d/chat.log")"
$TMO curl -s "http://127.0.0.1:$port_chat/metrics" > "$d/metrics" || fail "curl /metrics"
grep -qx 'cis2_requests_total{endpoint="completions",status="400"} 6' "$d/metrics" &&
    grep -qx 'cis2_requests_total{endpoint="chat_completions",status="400"} 6' "$d/metrics" ||
    fail "/metrics: $(grep requests_total "$d/metrics")"
! grep -q 'status="5' "$d/metrics" || fail "/metrics counts a 5xx: $(grep requests_total "$d/metrics")"
# a server without a chat template refuses chat the same way (400, not 501)
code=$($TMO curl -s -o "$d/notpl.json" -w '%{http_code}' "http://127.0.0.1:$port_log/v1/chat/completions" $C \
       -d '{"model":"tiny","messages":[{"role":"user","content":"a"}]}')
[ "$code" = 400 ] && grep -q '"unsupported_chat_template"' "$d/notpl.json" || fail "chat without a template: $code $(cat "$d/notpl.json")"

echo "== 3: a wrong or missing model says which one this server serves"
code=$($TMO curl -s -o "$d/nomodel.json" -w '%{http_code}' "http://127.0.0.1:$port_log/v1/completions" $C \
       -d '{"model":"SmolLM2-135M","prompt":"a"}')
[ "$code" = 404 ] && $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]
assert e["code"] == "model_not_found" and e["param"] == "model", e
assert "\"tiny\"" in e["message"] and "--model-name" in e["message"] and "SmolLM2-135M" in e["message"], e' "$d/nomodel.json" ||
    fail "a wrong model: $code $(cat "$d/nomodel.json")"
code=$($TMO curl -s -o "$d/nomodel.json" -w '%{http_code}' "http://127.0.0.1:$port_log/v1/completions" $C -d '{"prompt":"a"}')
[ "$code" = 400 ] && grep -q 'missing_parameter' "$d/nomodel.json" && grep -q 'serves \\"tiny\\"' "$d/nomodel.json" ||
    fail "no model: $code $(cat "$d/nomodel.json")"

kill -TERM $pid_log $pid_plain $pid_quiet $pid_chat
for p in $pid_log $pid_plain $pid_quiet $pid_chat; do wait $p || fail "a server exited $? after SIGTERM"; done
PIDS=""
echo "serve ops: all checks passed"

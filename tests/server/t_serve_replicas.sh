#!/bin/sh
# tests/server/t_serve_replicas.sh - two `cis2 serve` replicas of one
# checkpoint behind Debian's haproxy (docs/deploy.md "HAProxy in front of
# replicas"), run with the very
# HAProxy config docs/deploy.md shows (its one ```haproxy block, read from
# the page): everything on 127.0.0.1, free ports, every wait bounded.
#   - SIGSTOP + SIGCONT of a replica is no shutdown (it was: EINTR)
#   - haproxy -c accepts the page's config; both replicas pass its /health
#     checks before the load starts
#   - a bounded load through haproxy (tests/server/replicas.py: 3 clients x
#     20 requests, greedy, greedy with logprobs, sampled with seeds, sampled
#     and streamed; no client-side retries); a third of the way in, replica
#     r1 gets SIGTERM (it drains: its listening socket closes, new requests
#     on open connections get 503 + Retry-After + Connection: close) and
#     exits 0; haproxy retries what it refused on r2 (retry-on conn-failure
#     empty-response 503, option redispatch 1); r1 is started again on its
#     port and held bound but not answering (SIGSTOP: as while loading)
#     while 6 requests go through haproxy, all answered by r2 in time; let
#     go, it passes the health checks, and the rest of the load runs
#   - zero failed client requests; the restarted r1 answered some of them;
#     haproxy's log shows the retries went to the other replica
#   - every answer equals `cis2 run` of the same request (tests/server/ref.py:
#     receipt byte for byte, text, finish, logprob bits), and every receipt
#     verifies (`cis2 verify`) against the checkpoint
#   - what a draining replica answers on a connection already open (as
#     HAProxy's pooled ones are): 503 shutting_down, Retry-After: 1 and
#     Connection: close, then the connection closes; its stream in flight
#     still ends whole (tests/server/drain_conn.py)
# About 15 s on 2 cores.
# serial: a replica restarted mid-load, the load balancer's health checks timed
set -u
. tests/lib.sh
PY=/usr/bin/python3
FAIL_TAIL=10
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v haproxy > /dev/null || skip "haproxy is not installed (tools/install-deps test)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
tmpdir d
TMO="timeout 60"

# free_port: a port nothing listens on now (the kernel's pick, released)
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# health_oks FILE: the /health checks a replica answered 200 (its access log)
health_oks() { grep -c ' GET /health 200 ' "$1" 2> /dev/null || :; }
# wait_health FILE N: until FILE holds N answered checks (15 s at most)
wait_health() {
    i=0
    while [ "$(health_oks "$1")" -lt "$2" ]; do
        i=$((i + 1)); [ $i -lt 300 ] || fail "$1: $(health_oks "$1") health checks answered in 15 s, expected $2"
        sleep 0.05
    done
}

echo "== the page's HAProxy config, two replicas, haproxy in front"
awk '/^```haproxy$/ {on = 1; next} on && /^```$/ {exit} on' docs/deploy.md > "$d/haproxy.cfg"
grep -q '^backend ' "$d/haproxy.cfg" || fail "docs/deploy.md has no \`\`\`haproxy block with a backend"
"$CIS2" synth --shape tiny --seed 5 --out "$d/tiny" > /dev/null || fail "synth tiny"
start r1 "$d/tiny" --access-log "$d/r1.log"
start r2 "$d/tiny" --access-log "$d/r2.log"
# SIGSTOP then SIGCONT (Ctrl-Z and fg, a paused container; the readiness
# check below holds a replica so) is no shutdown: it used to end the
# server's wait for SIGTERM (sigwaitinfo's EINTR) and drain it
kill -STOP $pid_r2; sleep 0.2; kill -CONT $pid_r2; sleep 0.3
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port_r2/health") || :
[ "$code" = 200 ] && kill -0 $pid_r2 2> /dev/null || fail "r2 after SIGSTOP and SIGCONT: /health $code: $(cat "$TEST_TMP/r2.err")"
LB=$(free_port)
export CIS2_LB_ADDR="127.0.0.1:$LB" CIS2_R1_ADDR="127.0.0.1:$port_r1" CIS2_R2_ADDR="127.0.0.1:$port_r2"
haproxy -c -q -f "$d/haproxy.cfg" > "$d/check.err" 2>&1 || fail "haproxy -c refuses docs/deploy.md's config: $(cat "$d/check.err")"
haproxy -db -f "$d/haproxy.cfg" > "$d/haproxy.log" 2> "$d/haproxy.err" &
pid_lb=$!
PIDS="$PIDS $pid_lb"
# up: `rise 2` checks answered on each replica, then one more round
wait_health "$d/r1.log" 3
wait_health "$d/r2.log" 3
code=$($TMO curl -s -o "$d/models.json" -w '%{http_code}' "http://127.0.0.1:$LB/v1/models") || :
[ "$code" = 200 ] || fail "GET /v1/models through haproxy: $code $(cat "$d/models.json" 2> /dev/null)"

echo "== load: 3 clients x 20 requests; r1 gets SIGTERM a third of the way in, then starts again"
mkdir "$d/out"
$TMO $PY tests/server/replicas.py "http://127.0.0.1:$LB" tiny 3 20 16 "$d/out" > "$d/client.out" 2>&1 &
pid_client=$!
PIDS="$PIDS $pid_client"
# progress_at_least N: until N requests have finished (30 s at most)
progress_at_least() {
    i=0
    while [ "$(cat "$d/out/progress" 2> /dev/null | wc -l)" -lt "$1" ]; do
        kill -0 $pid_client 2> /dev/null || fail "the client ended early: $(cat "$d/client.out")"
        i=$((i + 1)); [ $i -lt 600 ] || fail "$1 requests did not finish within 30 s"
        sleep 0.02
    done
}
progress_at_least 12
old_r1=$pid_r1
kill -TERM $old_r1
# the drain is 10 s at most: a guard kills r1 30 s on (its loop ends once killed)
(i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; kill -9 $old_r1) > /dev/null 2>&1 &
guard=$!
wait $old_r1; rc=$?
kill $guard 2> /dev/null || :
[ $rc -eq 0 ] || fail "r1 exited $rc after SIGTERM, expected 0 (137: still running 30 s later)"
grep -q '^cis2 serve: SIGTERM: draining' "$TEST_TMP/r1.err" || fail "r1 did not say it was draining"
served_r1=$(grep -c ' POST /v1/completions 200 ' "$d/r1.log" || :)
[ "$served_r1" -gt 0 ] || fail "r1 answered no completion before its SIGTERM"
# r1 stays down while 12 more requests run: those haproxy still sends it
# (its checks need `fall 2` failures to mark it down) are refused and retried
progress_at_least $(($(cat "$d/out/progress" | wc -l) + 12))
# haproxy marks r1 down (`fall 2` refused checks) before it starts again: a
# replica back on its port sooner gets requests that wait for its load
# (docs/deploy.md, "Restarting a replica")
i=0
until grep -q 'Server cis2_replicas/r1 is DOWN' "$d/haproxy.err"; do
    i=$((i + 1)); [ $i -lt 200 ] || fail "haproxy did not mark r1 down within 10 s: $(cat "$d/haproxy.err")"; sleep 0.05
done
# again, on its port: haproxy's checks bring it back (nothing restarts haproxy)
"$CIS2" serve --model-dir "$d/tiny" --port "$port_r1" --access-log "$d/r1b.log" > "$d/r1b.out" 2> "$d/r1b.err" &
pid_r1b=$!
PIDS="$PIDS $pid_r1b"
# bound but not answering, as while a checkpoint loads (the tiny one loads in
# milliseconds, so SIGSTOP stands in for the loading): its checks time out,
# so haproxy sends it nothing; requests meanwhile all go to r2 (one sent to
# r1 would hang past curl's 10 s: a response timeout is not retried)
i=0
until grep -q '^cis2 serve: loading ' "$d/r1b.err" 2> /dev/null; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "the restarted r1 did not bind within 30 s: $(cat "$d/r1b.err")"; sleep 0.01
done
kill -STOP $pid_r1b
for k in 1 2 3 4 5 6; do
    code=$(curl -s -m 10 -o "$d/held.json" -w '%{http_code}' "http://127.0.0.1:$LB/v1/completions" \
           -H Content-Type:application/json -d '{"model":"tiny","prompt":"held '$k'","max_tokens":4}') || :
    [ "$code" = 200 ] || fail "request $k while r1 was bound but not answering: $code (haproxy routed it to r1?)"
    sleep 0.5
done
kill -CONT $pid_r1b
i=0
until grep -q "listening on http://127.0.0.1:$port_r1 " "$d/r1b.out" 2> /dev/null; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "the restarted r1 did not listen on $port_r1 within 30 s"; sleep 0.1
done
wait_health "$d/r1b.log" 3
touch "$d/out/go"
wait $pid_client; rc=$?
PIDS="$PIDS "; PIDS=$(echo "$PIDS" | sed "s/ $pid_client / /")
cat "$d/client.out"
[ $rc -eq 0 ] || fail "failed client requests through haproxy (exit $rc)"
[ "$(ls "$d"/out/*.json | wc -l)" -eq 60 ] || fail "$(ls "$d"/out/*.json | wc -l) answers, expected 60"
served_r1b=$(grep -c ' POST /v1/completions 200 ' "$d/r1b.log" || :)
served_r2=$(grep -c ' POST /v1/completions 200 ' "$d/r2.log" || :)
echo "answered: r1 $served_r1 before SIGTERM, r1 restarted $served_r1b, r2 $served_r2"
[ "$served_r1b" -gt 0 ] || fail "the restarted r1 answered no completion"
# httplog's retries field: +N when the request was redispatched to another server
redisp=$(grep -c 'cis2_replicas/r2 .* [0-9]*/[0-9]*/[0-9]*/[0-9]*/+[1-9]' "$d/haproxy.log" || :)
echo "haproxy redispatched $redisp request(s) to r2"
[ "$redisp" -gt 0 ] || fail "haproxy redispatched no request while r1 was down (its log: $d/haproxy.log)"
grep ' 50[0-9] ' "$d/haproxy.log" | grep -v '/health' | head -3 | grep . && fail "haproxy answered a client with a 5xx"

echo "== every answer is cis2 run's, and every receipt verifies"
$TMO $PY tests/server/ref.py "$CIS2" "$d/tiny" "$d"/out/*.json || fail "an answer through haproxy is not cis2 run's"
"$CIS2" verify "$d"/out/*.receipt --model-dir "$d/tiny" > "$d/verify.out" ||
    fail "cis2 verify: $(grep -v ' ok$' "$d/verify.out" | head)"
[ "$(grep -c 'verdict: OK' "$d/verify.out")" -eq 60 ] || fail "not 60 OK verdicts: $(head "$d/verify.out")"
echo "== a draining replica on a connection held open: 503, Retry-After: 1, Connection: close"
# a checkpoint slow enough (8 layers of 256) that a 300-token stream is still in flight
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(hidden_size=256, intermediate_size=640, num_hidden_layers=8, max_position_embeddings=2048); json.dump(c, open(sys.argv[2], "w"))' \
    "$d/tiny/config.json" "$d/slow.json"
"$CIS2" synth --config "$d/slow.json" --seed 3 --out "$d/slow" > /dev/null || fail "synth slow"
start slow "$d/slow"
$TMO $PY tests/server/drain_conn.py "$port_slow" "$pid_slow" slow || fail "what a draining replica answers on an open connection"
wait "$pid_slow"; rc=$?
[ $rc -eq 0 ] || fail "the slow replica exited $rc after SIGTERM"

echo "PASS: 60 requests through haproxy, a replica stopped and restarted mid-load, none failed, all are cis2 run's"

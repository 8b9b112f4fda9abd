#!/bin/sh
# tests/server/t_serve_soak.sh - a bounded soak of `cis2 serve`: six
# clients for SOAK_SECONDS (default 25) mixing whole and streamed
# completions (greedy and seeded sampling, n 1-2, logprobs), /v1/verify of
# what came back, streams left after their first event, verifications
# abandoned mid-way, requests that dribble in, and junk; then SIGTERM with
# the load still on (tests/server/soak.py).  Passes when: no unexpected
# answer (only 200, 429 for a full queue, 4xx for junk before the signal),
# the server drains and exits 0, memory stays bounded (VmRSS never above
# 512 MiB, and the last third's peak within 64 MiB of the first third's),
# and every receipt received verifies with `cis2 verify` against a copy of
# the checkpoint.
# serial: a load of SOAK_SECONDS, its latencies and resident set sampled
set -u
. tests/lib.sh
SECS=${SOAK_SECONDS:-25}
FAIL_TAIL=20   # fail shows the end of the server's stderr ($d/srv.err)
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
"$CIS2" serve --help 2>&1 | grep -q -- --request-timeout || skip "this cis2 has no server"
PY=/usr/bin/python3
tmpdir d

"$CIS2" synth --shape tiny --seed 9 --out "$d/tiny" > /dev/null || fail "synth"
cp -r "$d/tiny" "$d/elsewhere"
start srv "$d/tiny" --model-name m --max-batch 8 --max-queue 16 --timeout 5 \
    --request-timeout 5 --drain-timeout 5

timeout $((SECS + 60)) $PY tests/server/soak.py "$port_srv" "$pid_srv" "$SECS" "$d/out" || fail "the soak's clients"
# the server drains (--drain-timeout 5) and exits 0 by itself
i=0
while kill -0 $pid_srv 2> /dev/null; do
    i=$((i + 1)); [ $i -lt 150 ] || fail "the server still runs 15 s after SIGTERM"
    sleep 0.1
done
wait $pid_srv
rc=$?
PIDS=""
[ $rc -eq 0 ] || fail "the server exited $rc after SIGTERM (crash or unclean stop)"
grep -q "cis2 serve: stopped" "$d/srv.err" || fail "the server did not report a clean stop"

$PY - "$d/out/stats.json" <<'EOF' || fail "memory"
import json, sys
s = json.load(open(sys.argv[1]))
rss = [m for _, m in s["rss_mib"]]
assert len(rss) > 20, "too few VmRSS samples: %d" % len(rss)
third = len(rss) // 3
first, last = max(rss[:third]), max(rss[-third:])
print("VmRSS peak: first third %d MiB, last third %d MiB, overall %d MiB" % (first, last, max(rss)))
assert max(rss) <= 512, "VmRSS reached %d MiB" % max(rss)
assert last <= first + 64, "VmRSS grew from %d to %d MiB over the soak" % (first, last)
c = s["counts"]
for k in ("whole", "stream", "verify", "leave", "slow", "junk"):
    assert c.get(k, 0) > 0, "no %s request succeeded: %s" % (k, c)
EOF
n=$(ls "$d/out"/*.receipt 2> /dev/null | wc -l)
[ "$n" -gt 20 ] || fail "only $n receipts came back"
"$CIS2" verify "$d/out"/*.receipt --model-dir "$d/elsewhere" > "$d/verify.out" 2>&1 ||
    fail "cis2 verify: $(grep -v ': verdict: OK' "$d/verify.out" | head -5)"
grep -q "summary: $n receipts: $n OK" "$d/verify.out" || fail "verify: $(tail -n 1 "$d/verify.out")"
echo "t_serve_soak: $n receipts verified, the server drained and exited 0"

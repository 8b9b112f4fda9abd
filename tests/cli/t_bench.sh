#!/bin/sh
# cis2 bench runs and reports every figure (a smoke test: no timing is asserted);
# --quick the headline ones; both print progress and an estimate on stderr.
# serial: a benchmark (its numbers mean nothing on shared cores)
# san: skip - a benchmark: its numbers mean nothing under the sanitizers
set -eu
. tests/lib.sh
tmpdir d
out=$($CIS2 bench --shape tiny --json --threads 2 2> "$d/err")
echo "$out"
cat "$d/err"
# progress on stderr while it runs (docs/performance.md "Measure it yourself"): a line per phase with
# the seconds so far, an estimate of the rest after the first measurement
grep -Eq '^bench: +[0-9]+\.[0-9] s  estimate: about [0-9]+ (s|min) more' "$d/err" || fail "bench printed no estimate"
[ "$(grep -Ec '^bench: +[0-9]+\.[0-9] s  ' "$d/err")" -ge 10 ] || fail "bench printed fewer than 10 progress lines"
tail -n 1 "$d/err" | grep -Eq '^bench: +[0-9.]+ s  done$' || fail "bench's last progress line is not 'done'"
echo "$out" | grep -q '"quick": false' || fail "bench --json lacks quick: false"
for k in read_bandwidth_gb_s weight_bytes_per_token decode_ms_per_token bound_ms_per_token ratio_to_bound \
         prefill_tokens_per_s batched_tokens_per_s full_run_s speedup_vs_scalar peak_rss_mb; do
    echo "$out" | grep -q "\"$k\"" || fail "bench --json lacks $k"
done
for k in best_of generate_256_s verify_256_s verify_speedup_256 verify_16x64_together_s_per_receipt \
         verify_16x64_one_at_a_time_s_per_receipt batch_verify_gain batch_verify_gain_shortest \
         open_s verify_16x64_open_each_s_per_receipt batch_verify_gain_with_open; do
    echo "$out" | grep -q "\"$k\"" || fail "bench --json lacks verify.$k"
done
# the two groups of samples of one prompt (tiny's context holds 128 + 64 tokens)
[ "$(echo "$out" | grep -c '"prompt_tokens"')" -eq 2 ] || fail "bench --json lacks the two one-prompt groups"
echo "$out" | grep -q '"all_ok": true' || fail "a receipt bench made did not verify"
# speculative decoding (docs/speculate.md): lookup's tokens are plain decode's
for k in plain_tokens_per_s lookup_2_tokens_per_s lookup_4_tokens_per_s lookup_8_tokens_per_s; do
    echo "$out" | grep -q "\"$k\"" || fail "bench --json lacks speculate.$k"
done
echo "$out" | grep -q '"same_tokens": true' || fail "bench: speculative decode made other tokens than plain decode"
# the kernel benchmark calls internals: it must keep building against them
if [ -z "${RUNNER:-}" ]; then
    ${CC:-cc} -std=c11 -ffp-contract=off -fno-fast-math -O2 -D_DEFAULT_SOURCE -Iinclude -Isrc -pthread \
        -o "$BUILD/bench-kernels" tools/bench-kernels.c "$BUILD/libcis2-internal.a" $( [ "${SAN:-}" = 1 ] && echo -fsanitize=address,undefined ) \
        -lcrypto -ljansson -lpthread || fail "tools/bench-kernels.c does not build"
fi
# --quick: the headline figures only, once each, with the same progress lines
q=$($CIS2 bench --shape tiny --json --threads 2 --quick 2> "$d/qerr") || fail "bench --quick exited $?"
echo "$q"
cat "$d/qerr"
for k in read_bandwidth_gb_s weight_bytes_per_token decode_ms_per_token bound_ms_per_token ratio_to_bound \
         prefill_tokens_per_s batched_tokens_per_s full_run_s peak_rss_mb; do
    echo "$q" | grep -q "\"$k\"" || fail "bench --quick --json lacks $k"
done
echo "$q" | grep -q '"quick": true' || fail "bench --quick --json lacks quick: true"
echo "$q" | grep -q '"verify"\|"scalar_ms_per_token"' && fail "bench --quick verified receipts or ran the scalar kernel"
grep -Eq '^bench: +[0-9]+\.[0-9] s  estimate: about [0-9]+ (s|min) more \(--quick\)' "$d/qerr" || fail "bench --quick printed no estimate"
tail -n 1 "$d/qerr" | grep -Eq '^bench: +[0-9.]+ s  done$' || fail "bench --quick's last progress line is not 'done'"
# scoring against prefill, and the bound their multiply-adds set (docs/sampling.md
# §S11 "Speed"), recomputed here from the shape's config.json
$CIS2 synth --shape tiny --seed 1 --out "$d/tiny" > /dev/null || fail "synth tiny"
echo "$q" | /usr/bin/python3 -c '
import json, sys
b = json.load(sys.stdin)["score"]
c = json.load(open(sys.argv[1]))
H, L, I, V = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"], c["vocab_size"]
hd = c.get("head_dim") or H // c["num_attention_heads"]
q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
body = L * (H * q + 2 * H * kv + q * H + 3 * H * I)  # q, k, v, o, gate, up, down per row
n = b["tokens"]
want = (n * body + V * H) / (n * (body + V * H))  # prefill: one LM head row; a score: n
assert abs(b["ratio_by_multiply_adds"] - want) < 1e-5, (b, want)
assert b["score_tokens_per_s"] > 0 and b["ratio_to_prefill"] > 0, b
' "$d/tiny/config.json" || fail "bench --quick --json: score figures"
$CIS2 bench --shape tiny --threads 2 --quick > "$d/table" 2> /dev/null || fail "bench --quick (table)"
grep -q '^scoring (64 tokens) .*x prefill; .*x by multiply-adds' "$d/table" || fail "bench's table lacks the scoring line"
grep -q '^decode  ' "$d/table" && grep -q -- '--quick' "$d/table" || fail "bench --quick's table: $(cat "$d/table")"
set +e
$CIS2 bench --shape no-such-shape 2>/dev/null; [ $? -eq 2 ] || fail "unknown shape not a usage error"
echo ok

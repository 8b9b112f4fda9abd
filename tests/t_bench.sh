#!/bin/sh
# cis2 bench runs and reports every figure (a smoke test: no timing is asserted).
set -eu
out=$($CIS2 bench --shape tiny --json --threads 2)
echo "$out"
for k in read_bandwidth_gb_s weight_bytes_per_token decode_ms_per_token bound_ms_per_token ratio_to_bound \
         prefill_tokens_per_s batched_tokens_per_s full_run_s speedup_vs_scalar peak_rss_mb; do
    echo "$out" | grep -q "\"$k\"" || { echo "FAIL: bench --json lacks $k"; exit 1; }
done
set +e
$CIS2 bench --shape no-such-shape 2>/dev/null; [ $? -eq 2 ] || { echo "FAIL: unknown shape not a usage error"; exit 1; }
echo ok

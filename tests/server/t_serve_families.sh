#!/bin/sh
# tests/server/t_serve_families.sh - `cis2 serve` answers for every
# model family (docs/models.md §M1-§M7) exactly as `cis2 run` does.  For
# each small family shape of tools/matrix (tests/families/*.json: Llama-3
# RoPE scaling, Qwen3, SmolLM3, OLMo-2, Phi-3 with a window, Gemma-3),
# synthesised with `cis2 synth --config`, one server and the official
# OpenAI Node client (tests/server/client.js concurrent): 8 clients at once,
# greedy, seeded sampling with top-k / top-p / min-p, logprobs with
# alternatives, stop strings and stop ids, every other one streamed, so the
# requests share the engine's steps (continuous batching).  Oracle:
# tests/server/ref.py, every choice against `cis2 run` of its parameters
# (receipt byte for byte, text, finish, logprob bits); and `cis2 verify`
# re-derives one receipt of each family by prefill.
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v node > /dev/null 2>&1 || skip "node not installed"
[ -d tests/server/node_modules/openai ] || skip "the openai client is missing (cd tests/server && npm ci)"
TMO="timeout 120"
[ -n "${SAN:-}" ] && TMO="timeout 600"
tmpdir d

n=0
for cfg in tests/families/*.json; do
    fam=$(basename "$cfg" .json)
    "$CIS2" synth --config "$cfg" --seed 3 --out "$d/$fam" > /dev/null || fail "$fam: synth --config"
    start "$fam" "$d/$fam"
    mkdir -p "$d/$fam.cases"
    $TMO node tests/server/client.js concurrent "http://127.0.0.1:$port" "$fam" 8 "$d/$fam.cases" > "$d/$fam.log" 2>&1 \
        || { cat "$d/$fam.log"; fail "$fam: the clients failed"; }
    $TMO $PY tests/server/ref.py "$CIS2" "$d/$fam" "$d/$fam.cases"/*.json > "$d/$fam.ref" 2>&1 \
        || { cat "$d/$fam.ref"; fail "$fam: a choice is not cis2 run's"; }
    "$CIS2" verify "$d/$fam.cases/2.receipt" --model-dir "$d/$fam" > "$d/$fam.verify" 2>&1 \
        || { cat "$d/$fam.verify"; fail "$fam: the server's receipt does not verify"; }
    grep -q "verdict: OK" "$d/$fam.verify" || fail "$fam: verify says $(cat "$d/$fam.verify")"
    kill "$(eval echo "\$pid_$fam")" 2> /dev/null
    echo "$fam: 8 concurrent requests equal cis2 run's, receipt verified"
    n=$((n + 1))
done
[ $n -ge 6 ] || fail "only $n family shapes in tests/families"
echo ok

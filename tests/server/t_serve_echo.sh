#!/bin/sh
# tests/server/t_serve_echo.sh - /v1/completions echo and prompt_logprobs
# (docs/sampling.md §S11, docs/serving.md "Logprobs") on a synthetic
# checkpoint, against `cis2 score` (the CLI: another surface of the library,
# asked with the prompt's ids as a continuation without context, and with
# lm-evaluation-harness's context/continuation split):
#   - tests/server/echo.py sends lm-evaluation-harness's `local-completions`
#     loglikelihood request exactly (string and token-id prompts, batched)
#     and reads it as the harness does; every echoed logprob, top-logprob,
#     rank and greedy flag has cis2 score's bits, the generated part is the
#     non-echo request's, text_offset points into the returned text;
#     max_tokens 0, echo without logprobs, n 2 sampled, vLLM's
#     prompt_logprobs, and the refusals (400 naming the parameter);
#   - the official openai npm client (tests/server/client.js echo) parses
#     the echoed responses, its decimals the bits of the cis2 object, which
#     are compared with cis2 score here;
#   - the scoring budget: over --verify-max-tokens prompt tokens in all is
#     413 score_too_large (echo with logprobs, prompt_logprobs), at or
#     under it 200, echo without logprobs unbounded (nothing is scored).
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
tmpdir d
"$CIS2" synth --shape tiny --seed 7 --out "$d/tiny" > /dev/null || fail "synth tiny"
start tiny "$d/tiny" --timeout 30
B="http://127.0.0.1:$port_tiny"

echo "== echo.py: lm-evaluation-harness's requests against cis2 score"
timeout 300 "$PY" tests/server/echo.py "$B" tiny "$CIS2" "$d/tiny" || fail "echo.py"

if command -v node > /dev/null && [ -d tests/server/node_modules/openai ]; then
    echo "== the openai client"
    timeout 120 node tests/server/client.js echo "$B" tiny "$d" || fail "client.js echo"
    for k in 0 1; do
        "$PY" - "$d/echo-$k.json" "$CIS2" "$d/tiny" <<'PYEOF' || fail "echo-$k.json against cis2 score"
import json, subprocess, sys
r = json.load(open(sys.argv[1]))
for ch in r["choices"]:
    x = ch["cis2"]
    ids = ",".join(map(str, x["prompt_token_ids"]))
    sc = json.loads(subprocess.run([sys.argv[2], "score", "--model-dir", sys.argv[3], "--continuation-ids", ids,
                                    "--top-logprobs", "2", "--json"], check=True, capture_output=True,
                                   text=True).stdout)["continuations"][0]
    want = [None] + [t["bits"] for t in sc["logprobs"][1:]]
    assert x["prompt_logprob_bits"] == want, (x["prompt_logprob_bits"], want)
PYEOF
    done
else
    echo "skip: the openai npm client part (node or tests/server/node_modules missing: tools/install-deps)"
fi
echo "== the scoring budget: more than --verify-max-tokens prompt tokens is 413 score_too_large, before any work"
start small "$d/tiny" --timeout 30 --verify-max-tokens 20
S="http://127.0.0.1:$port_small"
post() { # BODY -> status and body in $d/post.out
    curl -s -o "$d/post.out" -w '%{http_code}' -H 'Content-Type: application/json' -d "$1" "$S/v1/completions"
}
long='"a b c d e f g h i j k l"'   # 23 tokens with this byte-level tokenizer (> 20)
st=$(post '{"model":"tiny","prompt":'"$long"',"echo":true,"logprobs":1,"max_tokens":0}')
[ "$st" = 413 ] && grep -q '"code": *"score_too_large"' "$d/post.out" && grep -q 'verify-max-tokens' "$d/post.out" \
    || { cat "$d/post.out"; fail "echo over the budget: $st"; }
st=$(post '{"model":"tiny","prompt":'"$long"',"prompt_logprobs":0,"max_tokens":1}')
[ "$st" = 413 ] && grep -q '"score_too_large"' "$d/post.out" || { cat "$d/post.out"; fail "prompt_logprobs over the budget: $st"; }
st=$(post '{"model":"tiny","prompt":["a b c d e","f g h i j"],"echo":true,"logprobs":1,"max_tokens":0}')
[ "$st" = 200 ] || { cat "$d/post.out"; fail "two prompts of 9 tokens (18 <= 20): $st"; }
st=$(post '{"model":"tiny","prompt":["a b c d e","f g h i j k l"],"echo":true,"logprobs":1,"max_tokens":0}')
[ "$st" = 413 ] || { cat "$d/post.out"; fail "two prompts of 9 and 13 tokens (the sum, 22, counts): $st"; }
st=$(post '{"model":"tiny","prompt":'"$long"',"echo":true,"max_tokens":1}')
[ "$st" = 200 ] || { cat "$d/post.out"; fail "echo without logprobs scores nothing, so no budget: $st"; }
echo "serve echo: all checks passed"

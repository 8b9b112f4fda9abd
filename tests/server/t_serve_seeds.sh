#!/bin/sh
# tests/server/t_serve_seeds.sh - the samples of one prompt (docs/sampling.md
# §S2.5, docs/serving.md "Samples of one prompt"): choice p*n+k of a request
# is sample k of prompt p, `(seed, sequence k)`, so
#   - the n samples of a prompt have the sequences 0..n-1 (their receipts
#     say so), are pairwise different at temperature 1, and each is `cis2
#     run --seed S --sequence k` (the CLI: the same tokens and receipt);
#   - the rule does not depend on the other prompts of the request: the
#     same prompt twice in one request is the same samples twice, and its
#     samples equal those of a request with that prompt alone;
#   - the request again gives the same samples; another seed, others; the
#     same seed and k in a request with a larger n, the same sample;
#   - an absent seed is seed 0; greedy (temperature 0) samples coincide.
set -u
. tests/lib.sh
FAIL_TAIL=15
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
command -v curl > /dev/null || skip "curl is not installed (tools/install-deps)"
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
tmpdir d
"$CIS2" synth --shape tiny --seed 7 --out "$d/tiny" > /dev/null || fail "synth tiny"
start tiny "$d/tiny" --access-log off
timeout 300 $PY - "http://127.0.0.1:$port_tiny" "$CIS2" "$d/tiny" "$d" <<'EOF' || fail "samples of one prompt"
import itertools, json, re, subprocess, sys, urllib.request
B, CIS2, M, D = sys.argv[1:5]


def post(body):
    body = dict(model="tiny", max_tokens=12, **body)
    req = urllib.request.Request(B + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["choices"]


def toks(c):
    return c["cis2"]["generated_token_ids"]


def seq(c):
    m = re.search(r"\nsequence (\d+)\n", c["cis2"]["receipt"])
    return int(m.group(1)) if m else None


P, Q = "Once upon a time", "The quick brown fox"
a = post({"prompt": [P, Q, P], "n": 4, "temperature": 1.0, "seed": 7})
assert [c["index"] for c in a] == list(range(12)), [c["index"] for c in a]
for p in range(3):
    group = a[4 * p:4 * p + 4]
    assert [seq(c) for c in group] == [0, 1, 2, 3], [seq(c) for c in group]   # choice p*n+k: sequence k
    for x, y in itertools.combinations(group, 2):
        assert toks(x) != toks(y), "two samples of one prompt are the same: %s" % toks(x)
assert [toks(c) for c in a[0:4]] == [toks(c) for c in a[8:12]], "prompt P at index 0 and 2: not the same samples"
alone = post({"prompt": P, "n": 4, "temperature": 1.0, "seed": 7})
assert [c["cis2"]["receipt"] for c in alone] == [c["cis2"]["receipt"] for c in a[0:4]], "P alone differs"
for k, c in enumerate(alone):   # the CLI: the same tokens and receipt for (seed 7, sequence k)
    out = subprocess.run([CIS2, "run", "--model-dir", M, "--prompt", P, "--gen-toks", "12", "--temperature", "1.0",
                          "--seed", "7", "--sequence", str(k), "--json", "--receipt", D + "/r"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["generated_token_ids"] == toks(c), (k, out, toks(c))
    assert open(D + "/r").read() == c["cis2"]["receipt"], k
print("ok: choices p*n+k are sequences k; samples of one prompt differ; P twice = P alone = cis2 run --sequence k")
again = post({"prompt": P, "n": 4, "temperature": 1.0, "seed": 7})
assert [toks(c) for c in again] == [toks(c) for c in alone], "the same request, other samples"
other = post({"prompt": P, "n": 4, "temperature": 1.0, "seed": 8})
assert all(toks(x) != toks(y) for x in other for y in alone), "seed 8 repeats a sample of seed 7"
wide = post({"prompt": P, "n": 6, "temperature": 1.0, "seed": 7})
assert [toks(c) for c in wide[:4]] == [toks(c) for c in alone], "n 6's first four are not n 4's"
print("ok: again the same; seed 8 other samples; n 6 extends n 4")
noseed = post({"prompt": P, "n": 2, "temperature": 1.0})
zero = post({"prompt": P, "n": 2, "temperature": 1.0, "seed": 0})
assert [toks(c) for c in noseed] == [toks(c) for c in zero] and "\nseed 0\n" in noseed[0]["cis2"]["receipt"]
greedy = post({"prompt": P, "n": 3, "seed": 7})
assert toks(greedy[0]) == toks(greedy[1]) == toks(greedy[2]), "greedy samples differ"
print("ok: no seed is seed 0; greedy samples coincide")
EOF
kill -TERM $pid_tiny; wait $pid_tiny || fail "the server exited $?"
PIDS=""
echo "serve seeds: all checks passed"

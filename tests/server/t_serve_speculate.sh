#!/bin/sh
# tests/server/t_serve_speculate.sh - `cis2 serve --speculate lookup[:K]`
# (docs/speculate.md "How to use it"): a server that
# decodes with prompt-lookup drafts answers every request exactly as one
# that decodes token by token.  Two servers on one synthetic checkpoint,
# plain and --speculate lookup:4; the same requests to both (greedy and
# seeded sampling, logprobs with alternatives, n = 2, a stop string met
# mid-way, several prompts, streamed and whole): each response equals the
# other's but for its id and created time, receipts included, and `cis2
# verify` says OK to the speculative server's receipt.  The drafts were
# used: on a prompt that repeats the model's own continuation the
# speculative server's /metrics counts fewer model passes
# (cis2_decode_steps_total) than tokens generated, the plain one as many.
# Streams are compared by what they carry (text, logprobs, finish, cis2),
# not by their chunks: those follow the engine's steps.
# A third server drafts with a draft model (--speculate draft:DIR:4, the
# checkpoint itself as its own draft model, so its greedy drafts are
# right): the same checks, and fewer passes than tokens on the same prompt.
# A bad --speculate is a usage error (exit 2) before any load.
set -u
. tests/lib.sh
PY=/usr/bin/python3
FAIL_TAIL=10
[ -z "${RUNNER:-}" ] || skip "cross build (the server is tested on the host build)"
tmpdir d

"$CIS2" serve --model-dir "$d/none" --speculate lookup:17 > /dev/null 2> "$d/bad.err"
[ $? = 2 ] && grep -q "speculate" "$d/bad.err" || fail "--speculate lookup:17: $(cat "$d/bad.err")"

"$CIS2" synth --shape tiny --seed 7 --out "$d/m" > /dev/null || fail "synth"
# the model's own greedy continuation, so a prompt can repeat it
"$CIS2" run --model-dir "$d/m" --prompt "Once upon a time" --gen-toks 24 --json > "$d/own.json" || fail "own run"
start plain "$d/m"
start spec "$d/m" --speculate lookup:4
start draft "$d/m" --speculate "draft:$d/m:4"

cat > "$d/cmp.py" <<'EOF'
import json, subprocess, sys, urllib.request
pp, ps, d, cis2 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

def post(port, body, stream=False):
    rq = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                {"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=120) as r:
        data = r.read().decode()
    if not stream:
        return json.loads(data)
    return [json.loads(l[6:]) for l in data.split("\n") if l.startswith("data: {")]

def merged(chunks):
    """A stream as what it carries per choice: its text, logprobs lists
    joined, finish_reason and cis2 (chunk boundaries follow the engine's
    steps, which drafts change, and the HTTP thread's timing)."""
    out = {}
    for c in chunks:
        for ch in c["choices"]:
            m = out.setdefault(ch["index"], {"text": "", "logprobs": {}, "finish_reason": None, "cis2": None})
            m["text"] += ch["text"]
            for k, v in (ch.get("logprobs") or {}).items():
                m["logprobs"].setdefault(k, []).extend(v)
            for k in ("finish_reason", "cis2"):
                if ch.get(k) is not None:
                    m[k] = ch[k]
    return out

def plain_of(o):
    """The response without what differs between any two requests."""
    if isinstance(o, list):
        return merged(o)
    return {k: v for k, v in o.items() if k not in ("id", "created")}

def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().split("\n"):
            if line.startswith(name + " "):
                return float(line.split()[1])
    sys.exit(f"FAIL: {name} not in /metrics")

own = json.load(open(d + "/own.json"))
own_text = "Once upon a time" + own["completion"]
rep = "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat"
prompts = [rep, "Once upon a time", own_text * 2]
cases = [
    dict(prompt=rep, max_tokens=40),
    dict(prompt=rep, max_tokens=40, temperature=0.7, top_k=8, seed=42, logprobs=3),
    dict(prompt=prompts, max_tokens=30, temperature=1.0, seed=7, n=2, logprobs=2),
    dict(prompt=rep, max_tokens=40, stop=[" mat"]),
    dict(prompt=prompts, max_tokens=32),
]
for i, c in enumerate(cases):
    c["model"] = "m"
    for stream in (False, True):
        body = dict(c, stream=True) if stream else c
        a, b = post(pp, body, stream), post(ps, body, stream)
        if plain_of(a) != plain_of(b):
            sys.exit(f"FAIL: case {i} stream={stream}: plain {json.dumps(a)[:600]} speculative {json.dumps(b)[:600]}")
        if not stream:
            whole = b
    if i == 1:
        rec = whole["choices"][0]["cis2"]["receipt"]
        open(d + "/spec.receipt", "w").write(rec)
        v = subprocess.run([cis2, "verify", d + "/spec.receipt", "--model-dir", d + "/m"], capture_output=True, text=True)
        if v.returncode != 0 or "verdict: OK" not in v.stdout:
            sys.exit("FAIL: verify of the speculative server's receipt: " + v.stdout + v.stderr)
# the drafts are used: a prompt that repeats the model's own continuation
steps0 = {p: metric(p, "cis2_decode_steps_total") for p in (pp, ps)}
toks0 = {p: metric(p, "cis2_generated_tokens_total") for p in (pp, ps)}
body = {"model": "m", "prompt": own_text * 2, "max_tokens": 24}
a, b = post(pp, body), post(ps, body)
if plain_of(a) != plain_of(b):
    sys.exit("FAIL: the self-continuation differs")
for p, name in ((pp, "plain"), (ps, "speculative")):
    steps = metric(p, "cis2_decode_steps_total") - steps0[p]
    toks = metric(p, "cis2_generated_tokens_total") - toks0[p]
    print(f"{name}: {toks:.0f} tokens in {steps:.0f} passes")
    if name == "plain" and steps < toks:
        sys.exit(f"FAIL: the plain server made {steps} passes for {toks} tokens")
    if name == "speculative" and not steps < toks * 0.75:
        sys.exit(f"FAIL: the speculative server made {steps} passes for {toks} tokens: its drafts were not used")
print("t_serve_speculate: every response the same")
EOF
$PY "$d/cmp.py" "$port_plain" "$port_spec" "$d" "$CIS2" || fail "the lookup server differs (above)"
$PY "$d/cmp.py" "$port_plain" "$port_draft" "$d" "$CIS2" || fail "the draft-model server differs (above)"
echo "t_serve_speculate: all passed"

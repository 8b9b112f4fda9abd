"""tests/server/echo.py - /v1/completions echo and prompt_logprobs
(docs/sampling.md S11) against `cis2 score`, for tests/server/t_serve_echo.sh.

    echo.py BASE MODEL CIS2 MODEL_DIR

The requests are exactly lm-evaluation-harness's `local-completions`
loglikelihood payload (lm_eval/models/openai_completions.py,
_create_payload with generate=False):

    {"model", "prompt": [strings, or lists of token ids], "temperature": 0,
     "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": true}

read as it reads them (parse_logprobs: choices sorted by index,
token_logprobs[ctxlen:-1] summed, is_greedy = every token's logprob equals
max(top_logprobs[i].values())).  The independent route is the CLI: `cis2
score --continuation-ids PROMPT_IDS` (no context, as echo scores a prompt)
and `--context-ids CTX --continuation-ids CONT` (the harness's split) give
the bits every echoed figure must have; the generated token must be the
non-echo request's, and the text the prompt followed by it.
"""
import json
import struct
import subprocess
import sys
import urllib.error
import urllib.request

BASE, MODEL, CIS2, MDIR = sys.argv[1:5]


def post(body, status=200):
    req = urllib.request.Request(BASE + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            got, data = r.status, r.read()
    except urllib.error.HTTPError as e:
        got, data = e.code, e.read()
    out = json.loads(data)
    assert got == status, (body, got, out)
    return out


def f32bits(x):
    return struct.pack(">f", x).hex()


def score(args):
    out = subprocess.run([CIS2, "score", "--model-dir", MDIR, "--json"] + args, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["continuations"][0]


def ids_arg(ids):
    return ",".join(map(str, ids))


def tokenize(text):
    return score(["--continuation", text])["token_ids"]


def check_echo_choice(ch, prompt_ids, prompt_text, top_n, gen):
    """One echoed choice against cis2 score (no context) and the non-echo choice gen."""
    lp, x = ch["logprobs"], ch["cis2"]
    n = len(prompt_ids)
    sc = score(["--continuation-ids", ids_arg(prompt_ids), "--top-logprobs", str(top_n)])
    assert x["prompt_token_ids"] == prompt_ids == sc["token_ids"], (x["prompt_token_ids"], prompt_ids)
    assert sc["first_scored"] == 1 and sc["logprobs"][0] is None
    # the prompt's figures: null first, then the score's bits, as bits and as decimals
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
    assert x["prompt_logprob_bits"][0] is None and x["prompt_ranks"][0] is None
    for i in range(1, n):
        s = sc["logprobs"][i]
        assert x["prompt_logprob_bits"][i] == s["bits"], ("bits", i, x["prompt_logprob_bits"][i], s)
        assert f32bits(lp["token_logprobs"][i]) == s["bits"], ("decimal", i)
        assert x["prompt_ranks"][i] == s["rank"] and x["prompt_greedy"][i] == s["greedy"], ("rank", i)
        tops = [(t["id"], t["bits"]) for t in s["top"]]
        assert [(t["id"], t["bits"]) for t in x["prompt_top_logprob_bits"][i]] == tops, ("top bits", i)
        # the dict keeps the first of alternatives whose strings coincide (serve_logprobs.c)
        vals = [f32bits(v) for v in lp["top_logprobs"][i].values()]
        assert vals == [b for _, b in tops][:len(vals)] or set(vals) <= {b for _, b in tops}, ("top", i, vals, tops)
        assert tops and tops[0][1] in vals and len(vals) <= len(tops), ("top", i, vals, tops)
    # the generated part is the non-echo completion's, after the prompt
    g = gen["logprobs"]
    assert ch["text"] == prompt_text + gen["text"], (ch["text"], prompt_text, gen["text"])
    assert lp["tokens"][n:] == g["tokens"] and lp["token_logprobs"][n:] == g["token_logprobs"]
    assert lp["top_logprobs"][n:] == g["top_logprobs"]
    assert x["generated_token_ids"] == gen["cis2"]["generated_token_ids"]
    assert x["logprob_bits"] == gen["cis2"]["logprob_bits"] and x["receipt"] == gen["cis2"]["receipt"]
    # text_offset: code points into the returned text, each token's text found there
    offs = lp["text_offset"]
    assert len(offs) == len(lp["tokens"]) == n + len(g["tokens"]), (len(offs), n)
    assert offs[0] == 0 and offs == sorted(offs) and offs[n] == len(prompt_text), offs
    assert [o - len(prompt_text) for o in offs[n:]] == g["text_offset"], (offs[n:], g["text_offset"])
    for i, (o, t) in enumerate(zip(offs[:n], lp["tokens"][:n])):
        if not t.startswith("bytes:"):
            assert ch["text"][o:o + len(t)] == t, ("offset", i, o, t)
    return sc


def lm_eval_parse(out, ctxlens):
    """lm-evaluation-harness's parse_logprobs, as it reads the response."""
    res = []
    for choice, ctxlen in zip(sorted(out["choices"], key=lambda c: c["index"]), ctxlens):
        tl = choice["logprobs"]["token_logprobs"][ctxlen:-1]
        top = choice["logprobs"]["top_logprobs"][ctxlen:-1]
        res.append((sum(tl), all(t == max(d.values()) for t, d in zip(tl, top))))
    return res


# ---- lm-eval loglikelihood requests: (context, continuation) pairs
pairs = [("Once upon a time", " there was"), ("The cat sat", " on the mat"), ("Hello", " world, hello")]
texts = [c + w for c, w in pairs]


def lm_eval_body(prompt):
    return {"model": MODEL, "prompt": prompt, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234,
            "echo": True}


def plain_body(prompt):
    b = lm_eval_body(prompt)
    del b["echo"]
    return b


# string prompts (tokenized_requests=False) and token-id prompts (the harness's default: it encodes
# context + continuation whole and cuts after the context's tokens; here the parts' ids joined)
ids_prompts = []
ctxlens = []
for c, w in pairs:
    ci, wi = tokenize(c), tokenize(w)
    ids_prompts.append(ci + wi)
    ctxlens.append(len(ci))
for kind, prompt in (("strings", texts), ("ids", ids_prompts)):
    out = post(lm_eval_body(prompt))
    gen = post(plain_body(prompt))
    assert [c["index"] for c in out["choices"]] == list(range(len(pairs))), "one choice per prompt, in order"
    assert out["usage"]["completion_tokens"] == len(pairs)
    for k, ch in enumerate(out["choices"]):
        pids = ids_prompts[k] if kind == "ids" else tokenize(texts[k])
        ptext = texts[k]
        check_echo_choice(ch, pids, ptext, 1, gen["choices"][k])
    # the harness's own reading against cis2 score with its context/continuation split
    ctx = ctxlens if kind == "ids" else [len(tokenize(c)) for c, _ in pairs]
    for k, (total, greedy) in enumerate(lm_eval_parse(out, ctx)):
        pids = ids_prompts[k] if kind == "ids" else tokenize(texts[k])
        sc = score(["--context-ids", ids_arg(pids[:ctx[k]]), "--continuation-ids", ids_arg(pids[ctx[k]:]),
                    "--top-logprobs", "1"])
        bits = [t["bits"] for t in sc["logprobs"]]
        assert bits == out["choices"][k]["cis2"]["prompt_logprob_bits"][ctx[k]:], (kind, k, "split bits")
        s64 = 0.0
        for b in bits:
            s64 += struct.unpack(">f", bytes.fromhex(b))[0]
        assert total == s64 and struct.pack(">d", s64).hex() == sc["sum_f64_bits"], (kind, k, total, sc["sum_f64"])
        assert greedy == sc["all_greedy"], (kind, k, greedy, sc["all_greedy"])
print("lm-eval loglikelihood: string and id prompts, 3 each, equal cis2 score's bits")

# ---- max_tokens 0: the prompt's scores alone, no generation (no receipt)
out = post({"model": MODEL, "prompt": texts[:2], "max_tokens": 0, "echo": True, "logprobs": 3})
assert out["usage"]["completion_tokens"] == 0
for k, ch in enumerate(out["choices"]):
    pids = tokenize(texts[k])
    assert ch["index"] == k and ch["text"] == texts[k] and ch["finish_reason"] == "length", ch
    assert ch["cis2"]["receipt"] is None and ch["cis2"]["generated_token_ids"] == []
    assert len(ch["logprobs"]["tokens"]) == len(pids)
    sc = score(["--continuation-ids", ids_arg(pids), "--top-logprobs", "3"])
    for i in range(1, len(pids)):
        assert ch["cis2"]["prompt_logprob_bits"][i] == sc["logprobs"][i]["bits"]
        assert f32bits(ch["logprobs"]["token_logprobs"][i]) == sc["logprobs"][i]["bits"]
        assert len(ch["logprobs"]["top_logprobs"][i]) <= 3
    assert ch["logprobs"]["token_logprobs"][0] is None
print("max_tokens 0: the prompt's scores, no generation")

# ---- echo without logprobs: the text only; with n 2 seeded: each choice after its prompt
out = post({"model": MODEL, "prompt": texts[0], "max_tokens": 3, "echo": True})
gen = post({"model": MODEL, "prompt": texts[0], "max_tokens": 3})
ch = out["choices"][0]
assert ch["text"] == texts[0] + gen["choices"][0]["text"] and ch["logprobs"] is None, ch
assert "prompt_logprob_bits" not in ch["cis2"] and ch["cis2"]["receipt"] == gen["choices"][0]["cis2"]["receipt"]
body = {"model": MODEL, "prompt": [texts[0], texts[1]], "max_tokens": 4, "echo": True, "logprobs": 2, "n": 2,
        "temperature": 0.9, "seed": 11}
out = post(body)
del body["echo"]
gen = post(body)
assert len(out["choices"]) == 4
for k, ch in enumerate(out["choices"]):
    assert ch["index"] == k
    check_echo_choice(ch, tokenize(texts[k // 2]), texts[k // 2], 2, gen["choices"][k])
print("echo: text alone, and n 2 sampled")

# ---- vLLM's prompt_logprobs: null, then {ID: {logprob, rank, decoded_token}}: the token and N alternatives
out = post({"model": MODEL, "prompt": texts[1], "max_tokens": 1, "prompt_logprobs": 2})
ch = out["choices"][0]
pids = tokenize(texts[1])
sc = score(["--continuation-ids", ids_arg(pids), "--top-logprobs", "2"])
pl = ch["prompt_logprobs"]
assert len(pl) == len(pids) and pl[0] is None, pl[:2]
plain = post({"model": MODEL, "prompt": texts[1], "max_tokens": 1})["choices"][0]
assert ch["logprobs"] is None and ch["text"] == plain["text"], (ch["text"], plain["text"])   # no echo
for i in range(1, len(pids)):
    s = sc["logprobs"][i]
    want = {str(s["id"]): (s["bits"], s["rank"])}
    for k, t in enumerate(s["top"]):
        want.setdefault(str(t["id"]), (t["bits"], k + 1))
    got = {key: (f32bits(v["logprob"]), v["rank"]) for key, v in pl[i].items()}
    assert got == want, (i, got, want)
    assert ch["cis2"]["prompt_logprob_bits"][i] == s["bits"]
# prompt_logprobs with echo and logprobs 1: the OpenAI object keeps 1 alternative
out = post({"model": MODEL, "prompt": texts[1], "max_tokens": 1, "prompt_logprobs": 4, "echo": True, "logprobs": 1})
ch = out["choices"][0]
assert all(len(d) <= 1 for d in ch["logprobs"]["top_logprobs"][1:]), ch["logprobs"]["top_logprobs"]
assert all(len(t) == 4 for t in ch["cis2"]["prompt_top_logprob_bits"][1:])
assert all(len(d) >= 4 for d in ch["prompt_logprobs"][1:])
print("prompt_logprobs: vLLM's shape, cis2 score's bits and ranks")

# ---- refusals: 400 naming the parameter, nothing computed
for body, code, param in [
        ({"echo": True, "stream": True}, "unsupported_parameter", "echo"),
        ({"prompt_logprobs": 1, "stream": True}, "unsupported_parameter", "prompt_logprobs"),
        ({"max_tokens": 0}, "invalid_value", "max_tokens"),
        ({"max_tokens": 0, "logprobs": 1}, "invalid_value", "max_tokens"),
        ({"echo": True, "logprobs": 6}, "invalid_value", "logprobs"),
        ({"prompt_logprobs": 21}, "invalid_value", "prompt_logprobs"),
        ({"prompt_logprobs": -1}, "invalid_value", "prompt_logprobs"),
        ({"echo": "yes"}, "invalid_type", "echo"),
        ({"echo": True, "max_tokens": -1}, "invalid_value", "max_tokens")]:
    b = {"model": MODEL, "prompt": "a b"} | body
    e = post(b, 400)["error"]
    assert (e["code"], e["param"]) == (code, param), (body, e)
print("refusals: 400 naming the parameter")

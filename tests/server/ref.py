#!/usr/bin/python3
"""tests/server/ref.py CIS2 MODEL_DIR CASE.json... - each case (one choice of a
server response, written by tests/server/client.js) must be exactly what
`cis2 run` gives for the same parameters (exit 1 naming the first that is
not):

  - the receipt, byte for byte, and the completion text;
  - cis2.finish, and finish_reason `length` for it, `stop` for any stop rule;
  - cis2.logprob_bits / top_logprob_bits equal to `cis2 run --logprobs N
    --json`'s logprobs[].bits (ids and bits of the alternatives too), and
    every decimal of the OpenAI logprobs object, as binary32, those bits;
  - the OpenAI object's token strings (the raw bytes if they are UTF-8,
    else "bytes:\\xNN..."), chat's `bytes`, and completions' text_offset
    (code points of the text before each token's first byte, at most the
    text's length), recomputed here from tokenizer.json's byte-level vocab.

The flags are the request's, spelled for the CLI: temperature, top_p and
min_p as the very decimal text the client sent (the body's text, kept as
strings here), top_k (0 and -1: off, so omitted), seed, the choice's
index among its prompt's n as --sequence, max_tokens as --gen-toks, stop strings as --stop,
stop_token_ids (and, for chat, the id of <|im_end|> after them) as
--stop-id, stop_at_eos, and logprobs N (completions) or top_logprobs N
(chat) as --logprobs N (the same N: docs/receipts.md "Names across
surfaces").  A chat case's prompt is the ids the server tokenized its
rendered prompt to (`--prompt-ids`: the receipt records the same bytes as
the text's; tests/server/t_serve_chat.sh checks the rendering).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

cis2, model = sys.argv[1], sys.argv[2]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def f32hex(v):
    return "%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


im_end = None


def chat_stop_id():
    global im_end
    if im_end is None:
        out = subprocess.run([cis2, "tokenize", "--tokenizer", model + "/tokenizer.json", "--text", "<|im_end|>",
                              "--json"], capture_output=True, text=True, check=True).stdout
        ids = json.loads(out)
        if len(ids) != 1:
            fail("<|im_end|> is not one token: %s" % ids)
        im_end = ids[0]
    return im_end


def cli_args(case, p, receipt):
    chat = case["kind"] == "chat"
    a = [cis2, "run", "--model-dir", model, "--json", "--receipt", receipt]
    if chat:  # the ids the server tokenized the rendered prompt to (docs/serving.md "Chat templates")
        a += ["--prompt-ids", ",".join(map(str, case["cis2"]["prompt_token_ids"]))]
    else:
        a += ["--prompt", p["prompt"]]
    a += ["--gen-toks", str(p.get("max_tokens", p.get("max_completion_tokens", 16 if not chat else 256)))]
    for k, flag in (("temperature", "--temperature"), ("top_p", "--top-p"), ("min_p", "--min-p")):
        if p.get(k) is not None:
            a += [flag, str(p[k])]
    if p.get("top_k") not in (None, 0, -1):
        a += ["--top-k", str(p["top_k"])]
    if p.get("seed") is not None:
        a += ["--seed", str(p["seed"])]
    a += ["--sequence", str(case["index"] % int(p.get("n", 1)))]  # choices p*n+k of prompt p are its samples k
    stop = p.get("stop")
    for s in [stop] if isinstance(stop, str) else stop or []:
        a += ["--stop", s]
    ids = list(p.get("stop_token_ids") or []) + ([chat_stop_id()] if chat else [])
    if ids:
        a += ["--stop-id", ",".join(map(str, ids))]
    if p.get("stop_at_eos"):
        a.append("--stop-at-eos")
    if chat and p.get("logprobs"):
        a += ["--logprobs", str(int(p.get("top_logprobs") or 0))]
    elif not chat and p.get("logprobs") is not None:
        a += ["--logprobs", str(int(p["logprobs"]))]
    return a


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    k = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    return {chr(c): b for b, c in zip(bs, cs)}


tok = json.load(open(model + "/tokenizer.json"))
dec = byte_decoder()
token_bytes = {}
for s, i in tok["model"]["vocab"].items():
    token_bytes[i] = bytes(dec[ch] for ch in s) if all(ch in dec for ch in s) else s.encode()
for a in tok["added_tokens"]:
    token_bytes[a["id"]] = a["content"].encode()


def token_string(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join("\\x%02x" % c for c in b)


def check_rendering(name, case, ids, tops):
    """The OpenAI logprobs object's strings, bytes and offsets."""
    lp = case["logprobs"]
    bs = [token_bytes.get(i, b"") for i in ids]
    if case["kind"] == "chat":
        for k, (e, b) in enumerate(zip(lp["content"], bs)):
            if e["token"] != token_string(b) or e["bytes"] != (list(b) if b else None):
                fail("%s: chat entry %d: %r %r for token %d" % (name, k, e["token"], e["bytes"], ids[k]))
            want = [token_string(token_bytes.get(t["id"], b"")) for t in tops[k]] if tops else []
            if [t["token"] for t in e["top_logprobs"]] != want:
                fail("%s: chat entry %d: alternatives %s, expected %s" % (name, k, e["top_logprobs"], want))
        return
    if lp["tokens"] != [token_string(b) for b in bs]:
        fail("%s: tokens %s, expected %s" % (name, lp["tokens"], [token_string(b) for b in bs]))
    raw, offs = b"", []
    for b in bs:
        offs.append(min(len(raw.decode("utf-8", "replace")), len(case["text"])))
        raw += b
    if lp["text_offset"] != offs:
        fail("%s: text_offset %s, expected %s" % (name, lp["text_offset"], offs))
    for k, d in enumerate(lp["top_logprobs"]):
        want = []
        for t in tops[k] if tops else []:
            s = token_string(token_bytes.get(t["id"], b""))
            if s not in want:
                want.append(s)
        if sorted(d) != sorted(want):  # as a set: JavaScript puts integer-like keys first
            fail("%s: token %d: alternatives %s, expected %s" % (name, k, list(d), want))


tmpdir = tempfile.TemporaryDirectory()
tmp = tmpdir.name
n = 0
for path in sys.argv[3:]:
    name = os.path.basename(path)
    case = json.load(open(path))
    p = json.loads(case["params"], parse_float=str)  # the decimals exactly as sent
    x = case["cis2"]
    rpath = os.path.join(tmp, "r")
    args = cli_args(case, p, rpath)
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode:
        fail("%s: cis2 run %s exited %d: %s" % (name, " ".join(args[3:]), run.returncode, run.stderr.strip()))
    ref = json.loads(run.stdout)
    if open(rpath).read() != x["receipt"]:
        fail("%s: the receipt differs from `cis2 run %s`'s" % (name, " ".join(args[3:])))
    if ref["completion"] != case["text"]:
        fail("%s: text %r, cis2 run's completion %r" % (name, case["text"], ref["completion"]))
    if ref["generated_token_ids"] != x["generated_token_ids"]:
        fail("%s: generated ids differ from cis2 run's" % name)
    finish = ref.get("finish_reason", "length")
    if x["finish"] != finish or case["finish"] != ("length" if finish == "length" else "stop"):
        fail("%s: finish %s / %s, cis2 run's %s" % (name, case["finish"], x["finish"], finish))
    if "logprobs" in ref:
        bits = [s["bits"] for s in ref["logprobs"]]
        if x.get("logprob_bits") != bits:
            fail("%s: logprob_bits %s, cis2 run's %s" % (name, x.get("logprob_bits"), bits))
        tops = [[{"id": t["id"], "bits": t["bits"]} for t in s["top"]] for s in ref["logprobs"]]
        if any(tops) or x.get("top_logprob_bits") is not None:
            if x.get("top_logprob_bits") != tops:
                fail("%s: top_logprob_bits differ from cis2 run's" % name)
        lp = case["logprobs"]
        vals = [e["logprob"] for e in lp["content"]] if case["kind"] == "chat" else lp["token_logprobs"]
        if [f32hex(v) if v is not None else None for v in vals] != [b if v is not None else None
                                                                   for v, b in zip(vals, bits)]:
            fail("%s: the decimal logprobs are not cis2 run's bits" % name)
        check_rendering(name, case, ref["generated_token_ids"], tops)
    elif x.get("logprob_bits") is not None or case["logprobs"] is not None:
        fail("%s: logprobs that were not asked for" % name)
    n += 1
print("ref: %d choices equal cis2 run's (receipt, text, finish, logprob bits)" % n)

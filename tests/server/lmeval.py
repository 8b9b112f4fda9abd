"""tests/server/lmeval.py - lm-evaluation-harness 0.4.x against `cis2 serve`,
request for request, for tests/server/t_serve_eval.sh (docs/eval.md).

    lmeval.py loglikelihood BASE MODEL CIS2 MODEL_DIR OUT
    lmeval.py generate BASE MODEL CIS2 MODEL_DIR OUT
    lmeval.py chat BASE MODEL CIS2 MODEL_DIR OUT

lm-eval itself is not installed here; this is its code path rewritten
(lm_eval/models/api_models.py TemplateAPI, openai_completions.py
LocalCompletionsAPI and LocalChatCompletion, lm_eval/utils.py
RemoteTokenizer and check_remote_tokenizer_support, lm_eval/api/model.py
TemplateLM._encode_pair and loglikelihood, lm_eval/models/utils.py
handle_stop_sequences), with its defaults: tokenizer_backend "auto" (the
remote tokenizer when the server has /tokenizer_info and /tokenize),
tokenized_requests True, seed 1234, max_length 2048 (here 64, to see its
left truncation), batch_size 4, num_concurrent 3 (one thread per concurrent
request, as its aiohttp semaphore), the API key from OPENAI_API_KEY for
/v1 and auth_token for the tokenizer (KEY in the environment: both).

Every figure the harness reads is checked against an independent surface:
  loglikelihood  token_logprobs[ctxlen:-1] (max_tokens 1) and [ctxlen:]
                 (max_tokens 0) are, bit for bit, `cis2 score --batch`'s
                 logprobs of the harness's context/continuation split (the
                 CLI, given the very ids), their f64 sum (the harness's
                 Python sum) its sum_f64, is_greedy its all_greedy;
  generate       each text is `cis2 run --prompt-ids IDS --stop ...`'s
                 completion (the stop list the harness sends: `until` and
                 the eos_token the server's /tokenizer_info names);
  chat           each message is `cis2 run --prompt RENDERED --stop-id
                 <|im_end|> --stop ...`'s completion.
OUT gets one JSON line per response kept (ids, receipts) for the shell test.
"""
import itertools
import json
import os
import struct
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

MODE, BASE, MODEL, CIS2, MDIR, OUT = sys.argv[1:7]
KEY = os.environ.get("KEY", "")
SEED, MAX_LENGTH, BATCH, CONCURRENT = 1234, 64, 4, 3
out_lock = threading.Lock()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def http(method, url, body=None, key=""):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json", "Authorization": "Bearer " + key},
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# ---- lm_eval/utils.py: RemoteTokenizer, check_remote_tokenizer_support

def server_base(base_url):
    return base_url.replace("/v1/completions", "").replace("/v1/chat/completions", "").rstrip("/")


def check_remote_tokenizer_support(base_url, auth_token):
    s, info = http("GET", server_base(base_url) + "/tokenizer_info", key=auth_token)
    if s != 200 or not isinstance(info, dict) or "eos_token" not in info:
        return False
    s, r = http("POST", server_base(base_url) + "/tokenize", {"prompt": "test", "add_special_tokens": False},
                key=auth_token)
    return s == 200 and isinstance(r.get("tokens"), list)


class RemoteTokenizer:
    def __init__(self, base_url, auth_token):
        self.base_url, self.key = server_base(base_url), auth_token
        s, self.tokenizer_info = http("GET", self.base_url + "/tokenizer_info", key=self.key)
        assert s == 200, self.tokenizer_info

    eos_token = property(lambda self: self.tokenizer_info.get("eos_token"))
    bos_token = property(lambda self: self.tokenizer_info.get("bos_token"))
    eos_token_id = property(lambda self: None if self.eos_token is None else self.encode(self.eos_token)[0])
    bos_token_id = property(lambda self: None if self.bos_token is None else self.encode(self.bos_token)[0])

    def encode(self, text):
        s, r = http("POST", self.base_url + "/tokenize", {"prompt": text, "add_special_tokens": False}, key=self.key)
        if s != 200 or not isinstance(r.get("tokens"), list):
            fail("/tokenize %r: %s %s" % (text, s, r))
        return r["tokens"]

    def decode(self, tokens):
        s, r = http("POST", self.base_url + "/detokenize", {"tokens": tokens}, key=self.key)
        if s != 200 or not isinstance(r.get("prompt"), str):
            fail("/detokenize: %s %s" % (s, r))
        return r["prompt"]


# ---- the harness's model: local-completions with the remote tokenizer

COMPLETIONS = BASE + "/v1/completions"
if not check_remote_tokenizer_support(COMPLETIONS, KEY):
    fail("lm-eval's probe (GET /tokenizer_info, POST /tokenize) does not find the remote tokenizer")
tok = RemoteTokenizer(COMPLETIONS, KEY)
eot_token_id = tok.eos_token_id
prefix_token_id = tok.bos_token_id or tok.eos_token_id  # TemplateAPI.prefix_token_id for "remote"
if eot_token_id != tok.tokenizer_info["cis2"]["eos_token_id"]:
    fail("tokenize(eos_token)[0] = %s, /tokenizer_info's eos id %s" % (eot_token_id, tok.tokenizer_info["cis2"]))
max_length = MAX_LENGTH - 1  # TemplateAPI: "max_length - 1 as we always have 1 token for generation"


def tok_encode(s):
    return tok.encode(s)


def encode_pair(context, continuation):  # TemplateLM._encode_pair (a causal LM)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole_enc = tok_encode(context + continuation)
    context_enc = tok_encode(context)
    return context_enc, whole_enc[len(context_enc):]


def model_call(payload, url=COMPLETIONS):
    s, r = http("POST", url, payload, key=KEY)
    if s != 200:
        fail("%s: %s %s" % (json.dumps(payload)[:300], s, r))
    return r


def record(kind, **kw):
    with out_lock, open(OUT, "a") as f:
        f.write(json.dumps(dict(kind=kind, **kw)) + "\n")


def chunks(xs, n):
    for i in range(0, len(xs), n):
        yield xs[i:i + n]


def concurrently(fn, items):  # the harness's aiohttp semaphore of num_concurrent
    with ThreadPoolExecutor(max_workers=CONCURRENT) as ex:
        return list(ex.map(fn, items))


def f32bits(x):
    return struct.pack(">f", x).hex()


def cli_score(lines):
    """`cis2 score --batch`, one line per (context ids, continuation ids)."""
    src = "".join(json.dumps({"context_ids": c, "continuations": [w]}) + "\n" for c, w in lines)
    r = subprocess.run([CIS2, "score", "--model-dir", MDIR, "--batch", "-", "--top-logprobs", "1", "--json"],
                       input=src, capture_output=True, text=True)
    if r.returncode:
        fail("cis2 score: %s" % r.stderr)
    return [json.loads(x)["continuations"][0] for x in r.stdout.splitlines()]


def loglikelihood():
    reqs = [("Question: what is two plus two?\nAnswer:", " four"),
            ("Question: what is two plus two?\nAnswer:", " five"),
            ("The capital of France is ", "Paris"),  # trailing space: the harness moves it to the continuation
            ("", "Once upon a time"),  # no context: the prefix token (bos, else eos) is the context
            ("naïve café — 日本語 😀", " ok"),
            ("A long context " + "word " * 80, "end."),  # longer than max_length: left-truncated
            ("Hello", " world"), ("Hello", ","), ("x", "y")]
    new = []
    for ctx, cont in reqs:  # TemplateLM.loglikelihood
        ce, we = ([prefix_token_id], tok_encode(cont)) if ctx == "" else encode_pair(ctx, cont)
        new.append(((ctx, cont), ce, we))
    order = sorted(range(len(new)), key=lambda i: (-len(new[i][1] + new[i][2]), tuple(new[i][1] + new[i][2])))
    batches = []
    for ch in chunks(order, BATCH):  # TemplateAPI.batch_loglikelihood_requests
        inputs, ctxlens = [], []
        for i in ch:
            _, ce, we = new[i]
            inp = (ce + we)[-max_length:]
            inputs.append(inp)
            ctxlens.append(len(ce) - max(0, len(ce) + len(we) - max_length))
        batches.append((ch, inputs, ctxlens))
    for max_tokens in (1, 0):
        def call(b):
            ch, inputs, ctxlens = b
            payload = {"model": MODEL, "prompt": inputs, "temperature": 0, "max_tokens": max_tokens, "logprobs": 1,
                       "seed": SEED, "echo": True}  # LocalCompletionsAPI._create_payload(generate=False)
            return b, model_call(payload)
        got = concurrently(call, batches)
        lines, harness = [], []
        for (ch, inputs, ctxlens), outp in got:
            choices = sorted(outp["choices"], key=lambda c: c["index"])  # parse_logprobs
            if len(choices) != len(inputs):
                fail("%d prompts, %d choices" % (len(inputs), len(choices)))
            for inp, ctxlen, c in zip(inputs, ctxlens, choices):
                assert ctxlen > 0, "Context length must be greater than 0"
                end = -1 if max_tokens == 1 else None  # max_tokens 0: no generated token to drop
                tl = c["logprobs"]["token_logprobs"][ctxlen:end]
                top = c["logprobs"]["top_logprobs"][ctxlen:end]
                greedy = all(t == max(d.values()) for t, d in zip(tl, top))
                harness.append((inp, ctxlen, sum(tl), greedy, [f32bits(t) for t in tl], c))
                lines.append((inp[:ctxlen], inp[ctxlen:]))
                if max_tokens == 1 and len(c["logprobs"]["token_logprobs"]) != len(inp) + 1:
                    fail("max_tokens 1: %d logprobs for %d prompt tokens" % (len(c["logprobs"]["token_logprobs"]), len(inp)))
                record("loglikelihood", max_tokens=max_tokens, prompt=inp, id=outp["id"], index=c["index"],
                       receipt=c["cis2"]["receipt"], prompt_ids=c["cis2"]["prompt_token_ids"])
        # a continuation the context's last token swallowed (("x", "y") -> one token "xy") has no ids: the
        # harness reads no figure (sum 0), and cis2 score refuses an empty continuation
        empty = [h for h in harness if h[1] == len(h[0])]
        if any(h[4] or h[2] != 0 for h in empty):
            fail("an empty continuation has figures: %s" % [h[4] for h in empty])
        harness = [h for h in harness if h[1] < len(h[0])]
        lines = [(h[0][:h[1]], h[0][h[1]:]) for h in harness]
        for (inp, ctxlen, total, greedy, bits, c), sc in zip(harness, cli_score(lines)):
            want = [t["bits"] for t in sc["logprobs"]]
            if bits != want or c["cis2"]["prompt_logprob_bits"][ctxlen:] != want:
                fail("max_tokens %d: the harness reads %s, cis2 score gives %s" % (max_tokens, bits, want))
            if f"{struct.unpack('>Q', struct.pack('>d', total))[0]:016x}" != sc["sum_f64_bits"]:
                fail("the harness's sum %r is not cis2 score's sum_f64 %r" % (total, sc["sum_f64"]))
            if greedy != sc["all_greedy"]:
                fail("is_greedy %s, cis2 score's all_greedy %s" % (greedy, sc["all_greedy"]))
            if (c["cis2"]["receipt"] is None) != (max_tokens == 0):
                fail("max_tokens %d: receipt %s" % (max_tokens, c["cis2"]["receipt"] is not None))
    truncated = sum(1 for _, ce, we in new if len(ce + we) > max_length)
    print("loglikelihood: %d requests (%d truncated to %d tokens, one without context) in batches of %d, %d at "
          "once, echo with max_tokens 1 and 0: every logprob bit, sum and is_greedy the harness reads is cis2 "
          "score's" % (len(new), truncated, max_length, BATCH, CONCURRENT))


def cli_run(args):
    r = subprocess.run([CIS2, "run", "--model-dir", MDIR, "--json"] + args, capture_output=True, text=True)
    if r.returncode:
        fail("cis2 run %s: %s" % (args, r.stderr))
    return json.loads(r.stdout)


def generate():
    eos = tok.eos_token  # TemplateAPI.eos_string for the remote tokenizer
    reqs = [("Once upon a time", {"until": ["\n\n"], "max_gen_toks": 8}),
            ("Q: name a colour.\nA:", {"until": ["\n\n", "Q:"], "max_gen_toks": 8, "do_sample": False}),
            ("The end", {"until": ["\n\n"], "max_gen_toks": 8, "temperature": 0})]
    enc = [tok_encode(c) for c, _ in reqs]  # tokenized_requests: the prompts go as ids
    stops, seen = [], 0

    def call(i):
        ctx, gk = reqs[i]
        gk = dict(gk)
        gk.pop("do_sample", False)
        max_tokens = gk.pop("max_gen_toks", 256)
        temperature = gk.pop("temperature", 0)
        until = gk.pop("until", None)
        until = [until] if isinstance(until, str) else list(until or [])
        if eos is not None and eos not in until:  # handle_stop_sequences
            until.append(eos)
        ids = enc[i][-(max_length - max_tokens):]
        payload = {"prompt": [ids], "model": MODEL, "max_tokens": max_tokens, "temperature": temperature,
                   "stop": until, "seed": SEED, **gk}
        return i, ids, until, model_call(payload)

    for i, ids, until, outp in concurrently(call, range(len(reqs))):
        text = outp["choices"][0]["text"]  # parse_generations
        args = ["--prompt-ids", ",".join(map(str, ids)), "--gen-toks", str(reqs[i][1]["max_gen_toks"])]
        for s in until:
            args += ["--stop", s]
        want = cli_run(args)
        if text != want["completion"]:
            fail("generate %r: %r, cis2 run: %r" % (reqs[i][0], text, want["completion"]))
        c = outp["choices"][0]
        stops.append(c["cis2"]["finish"])
        seen += eos in until
        record("generate", id=outp["id"], index=0, finish=c["cis2"]["finish"], text=text, receipt=c["cis2"]["receipt"])
    print("generate_until: %d requests as ids, stop = until + eos_token %r: every text is cis2 run's (finishes %s)"
          % (len(reqs), eos, ", ".join(stops)))


def chat():
    s, info = http("GET", BASE + "/v1/models", key=KEY)
    im_end = info["data"][0]["cis2"]["chat_stop_token_id"]
    url = BASE + "/v1/chat/completions"
    reqs = [[{"role": "user", "content": "Say hi."}],
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a fruit."}]]

    def call(msgs):  # LocalChatCompletion: messages as JSON with "type": "text" (TemplateAPI.apply_chat_template)
        messages = json.loads(json.dumps([{**m, "type": "text"} for m in msgs]))
        stop = ["\n\n", "<|im_end|>"][:4]
        payload = {"messages": messages, "model": MODEL, "max_tokens": 8, "temperature": 0, "stop": stop, "seed": SEED}
        return stop, model_call(payload, url)

    for stop, outp in concurrently(call, reqs):
        c = outp["choices"][0]
        args = ["--prompt", c["cis2"]["prompt"], "--gen-toks", "8", "--stop-id", str(im_end)]
        for x in stop:
            args += ["--stop", x]
        want = cli_run(args)
        if c["message"]["content"] != want["completion"]:
            fail("chat: %r, cis2 run: %r" % (c["message"]["content"], want["completion"]))
        record("chat", id=outp["id"], index=0, finish=c["cis2"]["finish"], receipt=c["cis2"]["receipt"])
    print("local-chat-completions: %d requests (messages with \"type\": \"text\"): every message is cis2 run's of "
          "the rendered prompt" % len(reqs))


{"loglikelihood": loglikelihood, "generate": generate, "chat": chat}[MODE]()

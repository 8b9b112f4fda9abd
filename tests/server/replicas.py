#!/usr/bin/python3
"""tests/server/replicas.py BASE MODEL C R GATE OUT - C clients x R requests
each through a load balancer at BASE (tests/server/t_serve_replicas.sh),
with no client-side retry of any kind: a request fails if its first and only
attempt is not a whole 200 answer with a receipt.

Request r of client c is one of (by (c + r) % 4): greedy; greedy with
logprobs 2; sampled (temperature 0.8, top_p 0.95, its own seed); sampled
and streamed (SSE, its chunks joined).  Prompts and lengths vary with c and
r.  Requests r >= GATE wait (30 s at most) for the file OUT/go, so the
test can hold the tail of the load until a restarted replica is back.

Each answer is written as a case file OUT/c-r.json (tests/server/ref.py's
format: kind, params as the JSON text sent, index, text, finish, cis2,
logprobs) with its receipt beside it (OUT/c-r.receipt); each finished
request appends a line to OUT/progress.  Exit 0 when all C x R succeeded,
else 1 after printing each failure.
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

base, model = sys.argv[1], sys.argv[2]
nc, nr, gate, out = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
url = urllib.parse.urlparse(base)
WORDS = "once upon a time there was a little robot who liked to count the stars over the quiet sea".split()
lock = threading.Lock()
failures = []


def params(c, r):
    k = (c + r) % 4
    words = WORDS[(c * 7 + r) % len(WORDS):] + WORDS
    p = {"model": model, "prompt": " ".join(words[:3 + (c + 2 * r) % 9]).capitalize(), "max_tokens": 4 + (3 * c + r) % 13}
    if k == 1:
        p["logprobs"] = 2
    if k >= 2:
        p.update(temperature=0.8, top_p=0.95, seed=1000 * c + r)
    if k == 3:
        p["stream"] = True
    return p


def sse_choice(resp):
    """The one choice of a streamed completion, its chunks joined."""
    o = {"index": 0, "text": "", "finish": None, "cis2": None, "logprobs": None}
    done = False
    for raw in resp:
        line = raw.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        for x in json.loads(line[6:]).get("choices", []):
            o["text"] += x.get("text", "")
            o["finish"] = x.get("finish_reason") or o["finish"]
            o["cis2"] = x.get("cis2") or o["cis2"]
    if not done:
        raise ValueError("the stream ended without data: [DONE]")
    return o


def one(c, r):
    p = params(c, r)
    body = json.dumps(p)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise ValueError("HTTP %d: %s" % (resp.status, resp.read()[:200]))
        if p.get("stream"):
            o = sse_choice(resp)
        else:
            x = json.loads(resp.read())["choices"][0]
            o = {"index": x["index"], "text": x["text"], "finish": x["finish_reason"], "cis2": x.get("cis2"),
                 "logprobs": x.get("logprobs")}
    finally:
        conn.close()
    if not o["cis2"] or not o["cis2"].get("receipt") or not o["finish"]:
        raise ValueError("no finish_reason or cis2 receipt in the answer")
    name = os.path.join(out, "%d-%d" % (c, r))
    with open(name + ".receipt", "w") as f:
        f.write(o["cis2"]["receipt"])
    with open(name + ".json", "w") as f:
        json.dump({"kind": "completion", "params": body, **o}, f)


def client(c):
    for r in range(nr):
        if r >= gate:
            t = time.time() + 30
            while not os.path.exists(os.path.join(out, "go")):
                if time.time() > t:
                    with lock:
                        failures.append("client %d: no go file within 30 s" % c)
                    return
                time.sleep(0.1)
        try:
            one(c, r)
        except Exception as e:  # any failure of the one attempt counts
            with lock:
                failures.append("client %d request %d: %s: %s" % (c, r, type(e).__name__, e))
        with lock:
            with open(os.path.join(out, "progress"), "a") as f:
                f.write("%d-%d\n" % (c, r))
        time.sleep(0.1)


threads = [threading.Thread(target=client, args=(c,)) for c in range(nc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for f in failures:
    print("FAIL: " + f)
print("replicas: %d of %d requests answered, %d failed" % (nc * nr - len(failures), nc * nr, len(failures)))
sys.exit(1 if failures else 0)

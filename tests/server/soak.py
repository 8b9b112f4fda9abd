#!/usr/bin/python3
"""tests/server/soak.py PORT PID SECONDS OUTDIR - a bounded soak of `cis2
serve` for tests/server/t_serve_soak.sh: WORKERS threads, each with its
own seeded random choice, for SECONDS seconds send a mix of

  whole       a completion, greedy or seeded sampling, n 1 or 2
  stream      the same streamed; the receipt from each finishing chunk
  verify      /v1/verify of receipts received so far (all OK, or 429)
  leave       a stream closed after its first event
  abandon     a long /v1/verify closed after 0.2 s
  slow        a request whose headers and body dribble in (within
              --request-timeout): answered 200
  junk        broken JSON, a bad parameter, ambiguous framing: 4xx

while a sampler reads the server's VmRSS every 0.2 s.  At SECONDS it sends
the server SIGTERM and keeps the load on 2 s more (refusals and closed
connections are expected then).  Every receipt received is written to
OUTDIR/N.receipt for `cis2 verify`; OUTDIR/stats.json has the counts and
the RSS series.  Exits 1 naming the first unexpected answer: before the
SIGTERM only 200, and 429 for a full queue or busy verifier, are right
(4xx for junk).
"""
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time

PORT, PID, SECONDS, OUT = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
WORKERS = 6
PROMPTS = ["Once upon a time", "The cat sat on the mat", "In the beginning", "A B C D E F G",
           "It was a dark and stormy night", "x"]
lock = threading.Lock()
receipts, counts, errors, rss = [], {}, [], []
t0 = time.time()
stopping = threading.Event()   # the SIGTERM went out
done = threading.Event()


def count(key):
    with lock:
        counts[key] = counts.get(key, 0) + 1


def bad(msg):
    with lock:
        errors.append(msg)


def post(path, body, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def expect_ok(what, st, body):
    if st == 200:
        return True
    if st == 429:
        count(what + ":429")
        return False
    if stopping.is_set() and st == 503:
        count(what + ":503")
        return False
    bad(f"{what}: status {st}: {body[:300]!r}")
    return False


def completion_body(rnd, stream):
    b = {"model": "m", "prompt": rnd.choice(PROMPTS), "max_tokens": rnd.choice([4, 16, 48]),
         "n": rnd.choice([1, 1, 2]), "stream": stream}
    if rnd.random() < 0.6:
        b.update({"temperature": rnd.choice([0.5, 0.9, 1.3]), "top_p": 0.9, "seed": rnd.randrange(1000)})
    if rnd.random() < 0.3:
        b["logprobs"] = 2
    return b


def keep(choices):
    with lock:
        for ch in choices:
            receipts.append(ch["cis2"]["receipt"])


def whole(rnd):
    st, body = post("/v1/completions", completion_body(rnd, False))
    if expect_ok("whole", st, body):
        keep(json.loads(body)["choices"])
        count("whole")


def stream(rnd):
    st, body = post("/v1/completions", completion_body(rnd, True))
    if not expect_ok("stream", st, body):
        return
    events = [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        if not stopping.is_set():
            bad(f"stream: no [DONE]: {body[-300:]!r}")
        return
    finished = [c for e in events[:-1] for c in json.loads(e).get("choices", []) if c.get("finish_reason")]
    keep(finished)
    count("stream")


def verify(rnd):
    with lock:
        some = rnd.sample(receipts, min(len(receipts), rnd.choice([1, 3, 8])))
    if not some:
        return
    st, body = post("/v1/verify", {"receipts": some})
    if expect_ok("verify", st, body):
        v = json.loads(body)
        if not v["ok"]:
            bad("verify: a receipt the server gave does not verify: " + json.dumps(v)[:400])
        count("verify")


def raw(data, read_first=False, hold=0.0):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    try:
        s.sendall(data)
        if read_first:
            s.recv(256)
        time.sleep(hold)
    finally:
        s.close()


def request_bytes(path, body):
    b = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(b)}\r\n"
            "Connection: close\r\n\r\n").encode() + b


def leave(rnd):
    b = completion_body(rnd, True)
    b["max_tokens"] = 48
    raw(request_bytes("/v1/completions", b), read_first=True)
    count("leave")


def abandon(rnd):
    with lock:
        some = receipts[:32]
    if some:
        raw(request_bytes("/v1/verify", {"receipts": some}), hold=0.2)
        count("abandon")


def slow(rnd):
    data = request_bytes("/v1/completions", {"model": "m", "prompt": "slow", "max_tokens": 4})
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
    try:
        for i in range(0, len(data), 16):
            s.sendall(data[i:i + 16])
            time.sleep(0.05)
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    finally:
        s.close()
    st = int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.") else 0
    if st == 200:
        count("slow")
    elif st == 429 or (stopping.is_set() and st in (0, 503)):
        count("slow:%d" % st)
    else:
        bad(f"slow: status {st}: {got[:300]!r}")


def junk(rnd):
    kind = rnd.randrange(3)
    if kind == 0:
        st, body = post("/v1/completions", None)  # "null"
        st2 = st
    elif kind == 1:
        st2, body = post("/v1/completions", {"model": "m", "prompt": "x", "temperature": -1})
    else:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}")
        got = s.recv(4096)
        s.close()
        st2 = int(got.split(b" ")[1]) if got.startswith(b"HTTP/1.") else 0
        body = got
    if st2 == 400 or (stopping.is_set() and st2 in (0, 503)):
        count("junk")
    else:
        bad(f"junk {kind}: status {st2}: {body[:300]!r}")


ACTIONS = [(whole, 5), (stream, 5), (verify, 3), (leave, 2), (abandon, 1), (slow, 1), (junk, 2)]


def worker(i):
    rnd = random.Random(1000 + i)
    pick = [a for a, w in ACTIONS for _ in range(w)]
    while not done.is_set():
        a = rnd.choice(pick)
        try:
            a(rnd)
        except (OSError, http.client.HTTPException) as e:
            if stopping.is_set():
                count("after-sigterm:" + type(e).__name__)
                time.sleep(0.05)
            else:
                bad(f"{a.__name__}: {type(e).__name__}: {e}")


def sample_rss():
    while not done.is_set():
        try:
            with open(f"/proc/{PID}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss.append((round(time.time() - t0, 1), int(line.split()[1]) // 1024))
        except OSError:
            return
        time.sleep(0.2)


threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
sampler = threading.Thread(target=sample_rss)
for t in threads + [sampler]:
    t.start()
time.sleep(SECONDS)
stopping.set()
try:
    os.kill(PID, signal.SIGTERM)
except ProcessLookupError:
    bad("the server died during the soak (before the SIGTERM)")
time.sleep(2)
done.set()
for t in threads + [sampler]:
    t.join()
os.makedirs(OUT, exist_ok=True)
for i, r in enumerate(receipts):
    with open(f"{OUT}/{i}.receipt", "w") as f:
        f.write(r)
json.dump({"counts": counts, "errors": errors, "rss_mib": rss, "receipts": len(receipts)},
          open(f"{OUT}/stats.json", "w"), indent=1)
print("soak: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f"; {len(receipts)} receipts")
if rss:
    print(f"soak: VmRSS {min(m for _, m in rss)}..{max(m for _, m in rss)} MiB over {len(rss)} samples")
if errors:
    print("FAIL: " + errors[0])
    print(f"({len(errors)} unexpected answers in all)")
    sys.exit(1)

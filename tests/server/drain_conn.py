#!/usr/bin/python3
"""tests/server/drain_conn.py PORT PID MODEL - what a draining `cis2 serve`
answers on a connection a load balancer already holds open
(tests/server/t_serve_replicas.sh; docs/deploy.md "Draining"):

  1. a long streamed completion starts (its first token arrives): in flight;
  2. a second connection asks for a short completion: 200, kept alive;
  3. SIGTERM to PID; within 5 s a new connection is refused (the listening
     socket is closed at once);
  4. a completion sent on the open connection of 2 gets 503 with error code
     shutting_down, `Retry-After: 1` and `Connection: close`, and the server
     then closes that connection (HAProxy retries such a 503 on another
     replica, and drops the connection rather than reuse it);
  5. the stream of 1 still ends whole: data: [DONE], a receipt.
Exit 1 naming the first step that fails.
"""
import http.client
import json
import os
import signal
import socket
import sys
import time

port, pid, model = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def fail(msg):
    print("FAIL: drain: " + msg)
    sys.exit(1)


H = {"Content-Type": "application/json"}
a = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
a.request("POST", "/v1/completions", json.dumps({"model": model, "prompt": "Once", "max_tokens": 300, "stream": True}), H)
ra = a.getresponse()
if ra.status != 200:
    fail("the long stream got %d" % ra.status)
while not ra.readline().startswith(b"data: {"):
    pass

b = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
b.request("POST", "/v1/completions", json.dumps({"model": model, "prompt": "x", "max_tokens": 1}), H)
rb = b.getresponse()
rb.read()
if rb.status != 200 or (rb.getheader("Connection") or "").lower() == "close":
    fail("a completion before SIGTERM: %d, Connection %s (not kept alive)" % (rb.status, rb.getheader("Connection")))

os.kill(pid, signal.SIGTERM)
t = time.time() + 5
while True:
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
    except ConnectionRefusedError:
        break
    except ConnectionResetError:
        pass  # the listener closed while this connect was in its backlog: ask again
    finally:
        s.close()
    if time.time() > t:
        fail("new connections are still accepted 5 s after SIGTERM")
    time.sleep(0.02)

# the raw socket under http.client's connection: what the server sends, to its end
sock = b.sock
req = json.dumps({"model": model, "prompt": "x", "max_tokens": 2}).encode()
sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             b"Content-Length: %d\r\n\r\n%s" % (len(req), req))
sock.settimeout(5)
raw = b""
try:
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
except (socket.timeout, ConnectionResetError) as e:
    fail("the server did not close the connection after its answer (%s; got %r)" % (type(e).__name__, raw[:300]))
head, _, body = raw.partition(b"\r\n\r\n")
lines = head.decode("latin-1").split("\r\n")
hdr = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
try:
    code = json.loads(body)["error"]["code"]
except (ValueError, KeyError, TypeError):
    code = None
if not lines[0].startswith("HTTP/1.1 503 ") or code != "shutting_down":
    fail("a request on an open connection after SIGTERM: %s %r" % (lines[0], body[:200]))
if hdr.get("retry-after") != "1":
    fail("the 503 has Retry-After %r, expected 1" % hdr.get("retry-after"))
if hdr.get("connection", "").lower() != "close":
    fail("the 503 has Connection %r, expected close" % hdr.get("connection"))

done, receipt = False, False
for raw in ra:
    line = raw.decode().rstrip("\r\n")
    if line == "data: [DONE]":
        done = True
        break
    if line.startswith("data: {"):
        for x in json.loads(line[6:]).get("choices", []):
            receipt = receipt or bool((x.get("cis2") or {}).get("receipt"))
if not done or not receipt:
    fail("the in-flight stream did not end whole (DONE %s, receipt %s)" % (done, receipt))
print("drain: 503 shutting_down with Retry-After: 1 and Connection: close on an open connection; the stream in flight ended whole")

#!/usr/bin/python3
"""tests/server/hostile.py PORT MODEL CHECK... - bad clients for tests/server/t_serve.sh,
on raw sockets (every operation has a timeout; exit 1 on the first failure).

  slow-headers T    headers that never end: closed within T+3 s
  slow-body T       a body that stops halfway: closed within T+3 s
  garbage           a request line that is not HTTP: an error or a close
  huge-header       a 200 kB header: an error or a close, not a crash
  truncated         Content-Length larger than what is sent, then close
  bad-utf8          JSON with invalid UTF-8: 400
  nul               JSON with \\u0000 in the prompt: 400
  flood N           N idle connections at once, then released
  abandon-stream    a streamed request closed after its first bytes
  abandon-whole     a long request whose client leaves before the answer
After each check the server must still answer GET /health with 200.
"""
import json
import socket
import sys
import time

PORT = int(sys.argv[1])
MODEL = sys.argv[2]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def conn(timeout=10):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.settimeout(timeout)
    return s


def request(method, path, body=b"", headers=None, timeout=30):
    """One HTTP/1.1 request with Connection: close; (status, body bytes)."""
    s = conn(timeout)
    h = {"Host": "127.0.0.1", "Connection": "close", "Content-Length": str(len(body))}
    h.update(headers or {})
    s.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode()
              + body)
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            fail(f"{method} {path}: no answer in {timeout}s")
        if not b:
            break
        data += b
    s.close()
    if not data.startswith(b"HTTP/1."):
        return 0, data
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), rest


def healthy():
    st, body = request("GET", "/health")
    if st != 200:
        fail(f"/health answered {st}: {body[:200]!r}")


def inflight():
    st, body = request("GET", "/health")
    return json.loads(body)["sequences_inflight"]


def closed_within(s, secs):
    s.settimeout(secs)
    t0 = time.time()
    try:
        while True:
            b = s.recv(4096)
            if not b:
                return time.time() - t0
            # an error response (408) is fine too; keep reading to the close
    except socket.timeout:
        return None
    except ConnectionResetError:
        return time.time() - t0


def slow(timeout, body_part):
    s = conn()
    if body_part:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":")
    else:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    if closed_within(s, timeout + 3) is None:
        fail(f"a {'body' if body_part else 'header'} that stalls was not closed within {timeout + 3}s")
    s.close()


def check(name, arg):
    if name == "slow-headers":
        slow(int(arg), False)
    elif name == "slow-body":
        slow(int(arg), True)
    elif name == "garbage":
        s = conn()
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n")
        closed_within(s, 5)
        s.close()
    elif name == "huge-header":
        s = conn()
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        closed_within(s, 5)
        s.close()
    elif name == "truncated":
        s = conn()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\": \"x\"")
        s.close()
    elif name == "bad-utf8":
        st, body = request("POST", "/v1/completions", b'{"model": "%s", "prompt": "\xff\xfe"}' % MODEL.encode(),
                           {"Content-Type": "application/json"})
        if st != 400 or b'"error"' not in body:
            fail(f"invalid UTF-8: {st} {body[:200]!r}")
    elif name == "nul":
        st, body = request("POST", "/v1/completions", b'{"model": "%s", "prompt": "a\\u0000b"}' % MODEL.encode(),
                           {"Content-Type": "application/json"})
        if st != 400:
            fail(f"a NUL in the prompt: {st} {body[:200]!r}")
    elif name == "flood":
        socks = []
        for _ in range(int(arg)):
            try:
                socks.append(conn(5))
            except OSError:
                break
        for s in socks:
            s.close()
        time.sleep(0.3)
    elif name in ("abandon-stream", "abandon-whole"):
        body = json.dumps({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 1500,
                           "stream": name == "abandon-stream"}).encode()
        s = conn()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if name == "abandon-stream":
            first = s.recv(100)
            if not first.startswith(b"HTTP/1.1 200"):
                fail(f"the stream did not start: {first!r}")
        else:
            time.sleep(0.3)
        if inflight() < 1:
            fail("the long request is not in flight")
        s.close()
        t0 = time.time()
        while inflight() > 0:
            if time.time() - t0 > 3:
                fail(f"{name}: the sequence of a client that left still runs after 3 s")
            time.sleep(0.05)
        print(f"{name}: freed {time.time() - t0:.2f} s after the client left")
    else:
        fail("unknown check " + name)
    healthy()
    print(f"{name}: ok, the server still serves")


args = sys.argv[3:]
i = 0
while i < len(args):
    name = args[i]
    arg = None
    if name in ("slow-headers", "slow-body", "flood"):
        arg = args[i + 1]
        i += 1
    check(name, arg)
    i += 1

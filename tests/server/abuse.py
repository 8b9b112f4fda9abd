#!/usr/bin/python3
"""tests/server/abuse.py PORT CHECK [ARGS...] - clients that once crashed,
stalled or locked out `cis2 serve` (docs/serving.md "Hygiene", "Limits"),
for tests/server/t_serve_abuse.sh, on raw sockets (every operation has a
timeout; exit 1 on the first failure, printing why).

  slowloris N T        N connections (the server's --max-connections) that
                       each send one header or body byte a second: each is
                       closed within T+2 s (T: --request-timeout), and
                       /health answers within T+3 s of the start
  framing              two disagreeing Content-Lengths, and Content-Length
                       beside Transfer-Encoding: 400 invalid_request and
                       the connection closed; two equal ones are fine
  verify-beside FILE   /v1/verify of FILE (a JSON body) twice at once while
                       a 200-token completion streams, three rounds: every
                       verify answers 200 with FILE's verdicts, the stream
                       ends with [DONE]
  verify-gone FILE     two /v1/verify of FILE (long) whose clients leave
                       after 0.5 s, then a third: it is not refused with
                       429 verify_busy, so the two left have stopped
  echo-gone FILE       an echo /v1/completions of FILE (prompts whose
                       scoring takes T) whose client leaves after 0.3 s:
                       /metrics counts its 499 within T/2
  verify-status FILE STATUS CODE SECS
                       /v1/verify of FILE answers STATUS with error CODE
                       within SECS seconds
  echo-status FILE STATUS CODE SECS
                       the same for /v1/completions
  verify-hold FILE     sends /v1/verify of FILE and keeps the socket open
                       for 60 s (a client that waits; SIGTERM the server)
After each check but verify-hold the server must answer GET /health 200.
"""
import json
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def conn(timeout=10):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.settimeout(timeout)
    return s


def read_all(s, timeout):
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return data, True
            data += b
    except socket.timeout:
        return data, False
    except ConnectionResetError:
        return data, True


def parse(data):
    if not data.startswith(b"HTTP/1."):
        return 0, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), rest


def request(method, path, body=b"", headers=None, timeout=60):
    s = conn(timeout)
    h = {"Host": "127.0.0.1", "Connection": "close", "Content-Length": str(len(body)),
         "Content-Type": "application/json"}
    h.update(headers or {})
    s.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode()
              + body)
    data, closed = read_all(s, timeout)
    s.close()
    if not closed:
        fail(f"{method} {path}: no complete answer in {timeout}s")
    return parse(data)


def healthy(within=5):
    t0 = time.time()
    while True:
        try:
            st, body = request("GET", "/health", timeout=within)
            if st == 200:
                return time.time() - t0
        except OSError:
            pass
        if time.time() - t0 > within:
            fail(f"/health did not answer 200 within {within}s")
        time.sleep(0.1)


def error_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def slowloris(n, t):
    socks, closed_at, t0 = [], [None] * n, time.time()
    for i in range(n):
        s = conn()
        socks.append(s)
        # half of them stall in the headers, half in the body
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" +
                  (b"Content-Length: 100000\r\n\r\n{" if i % 2 else b""))
        s.setblocking(False)

    def drip():
        while time.time() - t0 < t + 4:
            for i, s in enumerate(socks):
                if closed_at[i] is None:
                    try:
                        s.send(b"a")  # a header or body byte a second: never idle
                        if s.recv(4096) == b"":
                            closed_at[i] = time.time() - t0
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed_at[i] = time.time() - t0
            if all(c is not None for c in closed_at):
                return
            time.sleep(1)

    th = threading.Thread(target=drip)
    th.start()
    # meanwhile /health must get through once the slow ones are cut
    took = healthy(within=t + 3)
    th.join()
    for s in socks:
        s.close()
    late = [i for i, c in enumerate(closed_at) if c is None or c > t + 2]
    if late:
        fail(f"slow connections {late} not closed within {t + 2}s: {closed_at}")
    print(f"slowloris: {n} closed at {max(closed_at):.1f}s, /health after {took:.1f}s")


def framing():
    for extra, what in (("Content-Length: 2\r\nContent-Length: 30\r\n", "two Content-Lengths"),
                        ("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", "Content-Length and Transfer-Encoding")):
        s = conn()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + extra.encode() + b"\r\n{}")
        data, closed = read_all(s, 10)
        s.close()
        st, body = parse(data)
        if st != 400 or error_code(body) != "invalid_request":
            fail(f"{what}: status {st}, body {body[:200]!r} (want 400 invalid_request)")
        if not closed or b"connection: close" not in data.lower():
            fail(f"{what}: the connection was not closed after the 400")
    st, body = request("POST", "/v1/completions", b"{}", {"Content-Length": "2"})
    if st == 400 and error_code(body) == "invalid_request":
        fail("a single Content-Length was refused as ambiguous")


def stream_completion(out):
    body = json.dumps({"model": "m", "prompt": "Once upon a time", "max_tokens": 200, "stream": True,
                       "temperature": 0.8, "seed": 3}).encode()
    s = conn(60)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    data, closed = read_all(s, 60)
    s.close()
    out.append(data)


def verify_beside(path):
    body = open(path, "rb").read()
    st, want = request("POST", "/v1/verify", body)
    if st != 200:
        fail(f"/v1/verify alone: {st} {want[:300]!r}")
    want = [v["verdict"] for v in json.loads(want)["verdicts"]]
    for rnd in range(3):
        streams, answers = [], []
        ts = [threading.Thread(target=stream_completion, args=(streams,))]
        ts += [threading.Thread(target=lambda: answers.append(request("POST", "/v1/verify", body))) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for st, b in answers:
            if st != 200:
                fail(f"round {rnd}: /v1/verify beside a stream: {st} {b[:300]!r}")
            got = [v["verdict"] for v in json.loads(b)["verdicts"]]
            if got != want:
                fail(f"round {rnd}: verdicts {got}, alone {want}")
        if not streams or b"data: [DONE]" not in streams[0]:
            fail(f"round {rnd}: the stream did not end with [DONE]: {streams[0][-300:] if streams else None!r}")
        healthy()


def send_and_leave(body, after):
    s = conn()
    s.sendall(b"POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(after)
    s.close()


def verify_gone(path):
    body = open(path, "rb").read()
    t0 = time.time()
    ts = [threading.Thread(target=send_and_leave, args=(body, 0.5)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # both slots would stay taken for the whole (long) verification if it
    # went on; a verification that notices its client left frees its slot
    # within a pass.  Probe with a tiny body that is refused after the slot
    # check would pass: an unparsable receipt is 400 before any slot, so
    # send the same long body and leave again at once if it got in.
    deadline = time.time() + 5
    while True:
        s = conn()
        s.sendall(b"POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        data, closed = read_all(s, 1.0)
        s.close()
        st, rest = parse(data)
        if st == 429 and error_code(rest) == "verify_busy":
            if time.time() > deadline:
                fail("the verifications of clients that left still hold both slots after 5 s")
            time.sleep(0.2)
            continue
        break  # no answer within 1 s (it is verifying) or an answer: a slot was free
    print(f"verify-gone: a slot was free {time.time() - t0:.1f}s after the clients left")
    time.sleep(1.5)  # the probe left too: let it stop before /health
    healthy()


def count_499(endpoint):
    st, text = request("GET", "/metrics")
    key = f'cis2_requests_total{{endpoint="{endpoint}",status="499"}} '.encode()
    for line in text.split(b"\n"):
        if line.startswith(key):
            return int(line[len(key):])
    return 0


def echo_gone(path):
    """An echo request's scoring (taking T when answered) ends within T/2
    once its client leaves: /metrics counts a 499 for it."""
    body = open(path, "rb").read()
    t0 = time.time()
    st, rest = request("POST", "/v1/completions", body, timeout=120)
    whole = time.time() - t0
    if st != 200:
        fail(f"echo: {st} {rest[:300]!r}")
    if whole < 2:
        fail(f"echo scoring took {whole:.1f}s: too short to tell a cancelled scoring from a finished one")
    before = count_499("completions")
    s = conn()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.3)
    s.close()
    left = time.time()
    while count_499("completions") == before:
        if time.time() - left > whole / 2:
            fail(f"the scoring of a client that left went on: no 499 {whole / 2:.1f}s after it left "
                 f"(a whole answer takes {whole:.1f}s)")
        time.sleep(0.1)
    print(f"echo-gone: scored whole in {whole:.1f}s; stopped {time.time() - left:.1f}s after its client left")


def post_status(endpoint, path, status, code, secs):
    body = open(path, "rb").read()
    t0 = time.time()
    st, rest = request("POST", endpoint, body, timeout=secs + 30)
    took = time.time() - t0
    if st != status or error_code(rest) != code:
        fail(f"{endpoint}: {st} {rest[:300]!r}, want {status} {code}")
    if took > secs:
        fail(f"{endpoint} answered {status} after {took:.1f}s, more than {secs}s")
    healthy()


def verify_hold(path):
    body = open(path, "rb").read()
    s = conn(60)
    s.sendall(b"POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    data, closed = read_all(s, 60)
    st, rest = parse(data)
    print(f"verify-hold: status {st} {error_code(rest)}", flush=True)


def main():
    name, args = sys.argv[2], sys.argv[3:]
    if name == "slowloris":
        slowloris(int(args[0]), int(args[1]))
    elif name == "framing":
        framing()
    elif name == "verify-beside":
        verify_beside(args[0])
    elif name == "verify-gone":
        verify_gone(args[0])
    elif name == "verify-status":
        post_status("/v1/verify", args[0], int(args[1]), args[2], float(args[3]))
    elif name == "echo-status":
        post_status("/v1/completions", args[0], int(args[1]), args[2], float(args[3]))
    elif name == "echo-gone":
        echo_gone(args[0])
    elif name == "verify-hold":
        verify_hold(args[0])
        return
    else:
        fail("unknown check " + name)
    healthy()


main()

"""The package under Ctrl-C, odd floats, close() from a callback, and huge
max_batch (docs/python.md).

  a. SIGINT during a call with a callback (on_token, logits=True, a
     session's on_token, verify's on_step) raises KeyboardInterrupt, never
     Cancelled, and Python prints no "Exception ignored on calling ctypes
     callback" traceback: both when the signal arrives inside the callback
     (os.kill from on_token) and while C code runs (a thread sends it; it
     then fires at the next callback's first instruction).  Run in a child
     process, whose stderr is checked.
  b. temperature / top_p / min_p are checked on the binary32 bits the
     library gets (docs/sampling.md §S2.2, §S2.3): -0.0, subnormals and a
     nonzero value that underflows to +0.0 are refused, never run greedy;
     what the library refuses raises the C API's own message.
  c. close() of the engine or session from its own callback raises
     UsageError instead of freeing what the running call uses.
  d. generate_batch(max_batch=2**63 or 2**64-1) returns (it once spun
     forever); values outside size_t are refused.
"""
import ctypes
import subprocess
import sys
import textwrap

import pytest

import cis2
from cis2 import _lib
from conftest import PROMPT, ROOT

CHILD_TIMEOUT = 300


def child(code, *args):
    """Runs code in a fresh interpreter (the package from this tree) -> CompletedProcess."""
    import os
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)] + [str(a) for a in args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=CHILD_TIMEOUT,
                          universal_newlines=True)


# ------------------------------------------------------------- a. Ctrl-C

SIGINT_CHILD = r"""
import os, signal, sys, threading, time
import cis2

# Python installs its KeyboardInterrupt handler only when SIGINT is not
# ignored at start-up; a shell runs background jobs (`make check &`, a CI
# step, tools/fresh-machine's chroot) with SIGINT ignored, so install it.
signal.signal(signal.SIGINT, signal.default_int_handler)
e = cis2.Engine(sys.argv[1])
mode, how = sys.argv[2], sys.argv[3]
pid = os.getpid()
steps = [0]

def on_token(ev):
    steps[0] += 1
    if how == "self" and steps[0] == 2:   # inside the callback: the handler runs there
        os.kill(pid, signal.SIGINT)
    return 0

# made once: finalizers (Receipt, Session) are not what is tested here
receipts = [cis2.Receipt.parse(e.generate("Once upon a time", gen_toks=4).receipt)] * 6 if mode == "verify" else None
session = e.session(on_token=on_token) if mode == "session" else None

def once(gen):
    steps[0] = 0
    if mode == "generate":
        e.generate("Once upon a time", gen_toks=gen, on_token=on_token, twice=False)
    elif mode == "logits":            # logits=True alone: no user callback at all
        e.generate("Once upon a time", gen_toks=gen, logits=True, twice=False)
    elif mode == "batch":
        e.generate_batch(["Once upon a time", "The quick brown fox"], gen_toks=gen, on_token=on_token,
                         logits=True, twice=False)
    elif mode == "session":
        session.add("Once upon a time", gen_toks=gen)
        session.add("The quick brown fox", gen_toks=gen)
        session.run()
    elif mode == "verify":
        e.verify(receipts, replay="decode", on_step=on_token)

for i in range(int(sys.argv[4])):
    try:
        if how == "self":
            once(48)
        else:
            # from another thread, a few ms on: most likely while this thread
            # is in C code, so Python raises it at a callback's first
            # instruction; the calls repeat until it has landed somewhere
            t = threading.Timer(0.003, os.kill, (pid, signal.SIGINT))
            t.start()
            try:
                end = time.monotonic() + 20
                while time.monotonic() < end:   # lost, it would loop forever: "no exception"
                    once(24)
            finally:
                t.join()
        print("iteration %d: no exception" % i)
    except KeyboardInterrupt:
        print("iteration %d: KeyboardInterrupt" % i)
    except BaseException as x:
        print("iteration %d: %s: %s" % (i, type(x).__name__, x))
# the engine is still whole, not marked busy, and closes
if session is not None:
    session.close()
r = e.generate("Once upon a time", gen_toks=2)
e.close()
print("after: ok", len(r.token_ids))
"""

SIGINT_CASES = [("generate", "self", 2), ("generate", "thread", 12), ("logits", "thread", 12), ("batch", "self", 2),
                ("batch", "thread", 12), ("session", "self", 2), ("session", "thread", 12), ("verify", "self", 2),
                ("verify", "thread", 12)]


@pytest.mark.parametrize("mode,how,n", SIGINT_CASES, ids=["%s-%s" % c[:2] for c in SIGINT_CASES])
def test_sigint_raises_keyboard_interrupt(tiny, mode, how, n):
    p = child(SIGINT_CHILD, tiny, mode, how, n)
    assert "Exception ignored" not in p.stderr, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "after: ok 2", p.stdout + p.stderr
    got = [ln.split(": ", 1)[1] for ln in lines[:-1]]
    assert got == ["KeyboardInterrupt"] * n, p.stdout


# ------------------------------------------------------ b. binary32 bits

def c_api_error(engine, **fields):
    """The C API's own answer (code, message) for a cis2_sampling with these
    bit patterns: cis2_generate through ctypes, no Python checks between."""
    L = _lib.get()
    s = _lib.Sampling(top_p=1.0)
    for k, bits in fields.items():
        ctypes.c_uint32.from_buffer(s, getattr(_lib.Sampling, k).offset).value = bits
    b = PROMPT.encode()
    q = _lib.Request(text=b, text_len=len(b), max_tokens=1, sampling=ctypes.pointer(s))
    res = ctypes.POINTER(_lib.Result)()
    err = _lib.Err()
    rc = L.cis2_generate(engine._h, ctypes.byref(q), 1, None, ctypes.byref(res), ctypes.byref(err))
    if rc == 0:
        L.cis2_results_free(res, 1)
        return 0, None
    return rc, err.msg.decode()


# (keyword, Python value, the bits the library gets)
REFUSED_BY_THE_LIBRARY = [("temperature", -0.0, 0x80000000), ("temperature", 1e-40, 0x000116C2),
                          ("temperature", -1e-46, 0x80000000), ("temperature", float("nan"), 0x7FC00000),
                          ("temperature", float("inf"), 0x7F800000), ("temperature", 1e39, 0x7F800000),
                          ("temperature", -1.0, 0xBF800000),
                          ("top_p", -0.0, 0x80000000), ("top_p", 1e-40, 0x000116C2), ("top_p", 1.0000001, 0x3F800001),
                          ("min_p", -0.0, 0x80000000), ("min_p", 1e-40, 0x000116C2), ("min_p", 1e-20, 0x1E3CE508)]


@pytest.mark.parametrize("key,value,bits", REFUSED_BY_THE_LIBRARY,
                         ids=["%s=%r" % c[:2] for c in REFUSED_BY_THE_LIBRARY])
def test_refused_like_the_c_api(engine, key, value, bits):
    assert cis2.engine._f32(key, value)[1] == bits
    code, msg = c_api_error(engine, **{key: bits})
    assert code == cis2.UsageError.code and key in msg, (code, msg)
    for kw in ({key: value}, {key: value, "temperature": 0.5, "seed": 3} if key != "temperature" else {key: value}):
        with pytest.raises(cis2.UsageError) as ei:
            engine.generate(PROMPT, gen_toks=1, **kw)
        assert ei.value.message == msg


@pytest.mark.parametrize("key", ["temperature", "top_p", "min_p"])
@pytest.mark.parametrize("value", [1e-46, 5e-324, 7e-46])
def test_underflow_to_zero_is_refused(engine, key, value):
    """A nonzero float that rounds to binary32 +0.0 would be greedy / off in
    the library: refused here (§S2.3), naming the parameter."""
    assert cis2.engine._f32(key, 0.0)[1] == 0 and ctypes.c_float(value).value == 0.0
    with pytest.raises(cis2.UsageError, match=r"^cis2: %s .* underflow" % key):
        engine.generate(PROMPT, gen_toks=1, **{key: value})


def test_top_p_zero_is_refused(engine):
    """1.0 is off in Python (the default); 0 is out of §S2.2's range, as in
    the CLI and the server (the C struct's +0.0 'not set' is not Python's)."""
    for v in (0.0, 0):
        with pytest.raises(cis2.UsageError, match=r"top_p 0x00000000 is not in \(0, 1\]"):
            engine.generate(PROMPT, gen_toks=1, top_p=v)


def test_only_positive_zero_is_greedy(engine):
    plain = engine.generate(PROMPT, gen_toks=3)
    for kw in ({"temperature": 0.0}, {"temperature": 0}, {"top_p": 1.0, "min_p": 0.0}, {"top_p": 1}):
        assert engine.generate(PROMPT, gen_toks=3, **kw).receipt == plain.receipt
    for v in (-0.0, 1e-46, 1e-40, 1e-300):
        with pytest.raises(cis2.UsageError, match="temperature"):
            engine.generate(PROMPT, gen_toks=3, temperature=v)


def test_not_a_number(engine):
    for v in ("0.5", None, True, 1j):
        with pytest.raises(cis2.UsageError, match="temperature must be a number"):
            engine.generate(PROMPT, gen_toks=1, temperature=v)


# ------------------------------------------------ c. close() from a callback

CLOSE_CHILD = r"""
import sys
import cis2

e = cis2.Engine(sys.argv[1])
def close_engine(ev):
    e.close()

def check(what, fn, cls=cis2.UsageError):
    try:
        fn()
        print("%s: no exception" % what)
    except cls as x:
        print("%s: %s: %s" % (what, type(x).__name__, x))
    print("%s: after: %s" % (what, e.generate("Once upon a time", gen_toks=2).token_ids != []))

check("generate", lambda: e.generate("Once upon a time", gen_toks=4, on_token=close_engine))
check("logits", lambda: e.generate("Once upon a time", gen_toks=4, on_token=close_engine, logits=True))
receipt = e.generate("Once upon a time", gen_toks=3).receipt
check("verify", lambda: e.verify([receipt], on_step=lambda ev: e.close()))
s = e.session(on_token=close_engine)
s.add("Once upon a time", gen_toks=4)
check("session engine", s.run)
s.close()
closing = [True]
s = e.session(on_token=lambda ev: closing[0] and s.close())
s.add("Once upon a time", gen_toks=4)
check("session close", s.run)
closing[0] = False
s.add("Once upon a time", gen_toks=2)   # the session is still open
s.run()
s.close()
e.close()
e.close()
print("closed:", repr(e))
"""


def test_close_inside_a_callback(tiny):
    p = child(CLOSE_CHILD, tiny)
    assert p.returncode == 0, "child died (rc %d):\n%s%s" % (p.returncode, p.stdout, p.stderr)
    out = p.stdout.splitlines()
    eng = ("UsageError: cis2: Engine.close() while a call on this engine is running (from its own callback, "
           "or another thread); close it after the call returns")
    ses = ("UsageError: cis2: Session.close() while this session's step() is running (from its own callback?); "
           "close it after step() returns")
    assert out == ["generate: " + eng, "generate: after: True", "logits: " + eng, "logits: after: True",
                   "verify: " + eng, "verify: after: True", "session engine: " + eng, "session engine: after: True",
                   "session close: " + ses, "session close: after: True", "closed: Engine('<closed>')"], p.stdout


# ---------------------------------------------------------- d. max_batch

MAX_BATCH_CHILD = r"""
import sys
import cis2

e = cis2.Engine(sys.argv[1])
prompts = ["Once upon a time", "The quick brown fox", "odd"]
ref = [r.witness for r in e.generate_batch(prompts, gen_toks=3)]
for mb in (2 ** 64 - 1, 2 ** 63, 2 ** 63 + 1, 2 ** 62, 3, 1):
    for twice in (True, False):
        got = [r.witness for r in e.generate_batch(prompts, gen_toks=3, max_batch=mb, twice=twice)]
        print(mb, twice, got == ref)
"""


def test_huge_max_batch_returns(tiny):
    p = child(MAX_BATCH_CHILD, tiny)   # a spin is the child's timeout, not a hung test run
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 12 and all(ln.endswith(" True") for ln in lines), p.stdout


def test_max_batch_outside_size_t(engine):
    for mb in (-1, 2 ** 64, 1.5, None):
        with pytest.raises(cis2.UsageError, match="max_batch"):
            engine.generate_batch([PROMPT], gen_toks=1, max_batch=mb)
        with pytest.raises(cis2.UsageError, match="max_batch"):
            engine.session(max_batch=mb)
    with pytest.raises(cis2.UsageError, match="prefill_chunk"):
        engine.session(prefill_chunk=-1)
    with engine.session(max_batch=2 ** 64 - 1, prefill_chunk=2 ** 64 - 1) as s:
        i = s.add(PROMPT, gen_toks=2)
        s.run()
        assert s.take(i).token_ids == engine.generate(PROMPT, gen_toks=2).token_ids

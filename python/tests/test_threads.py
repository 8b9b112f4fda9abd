"""Engines and threads: two engines in one process, two threads each with
its own engine, and two threads sharing one engine (allowed: engines are
read-only after open, cis2.h "Threads") all give the same bits as one
engine alone.  ctypes releases the GIL during library calls, so the
threads really run at once."""
import threading

import cis2
from conftest import PROMPT

PROMPTS = [PROMPT, "The quick brown fox", "Another prompt, longer than the others so far"]


def bits(e, prompt):
    r = e.generate(prompt, gen_toks=6, logits=True)
    return r.receipt, r.logits.tobytes()


def test_two_engines_in_one_process(models):
    with cis2.Engine(models["tiny"]) as a, cis2.Engine(models["tiny"], threads=1) as b, \
            cis2.Engine(models["odd"]) as c:
        for p in PROMPTS:
            assert bits(a, p) == bits(b, p)
        ref_c = bits(c, PROMPT)
        assert bits(a, PROMPT) != ref_c        # really different checkpoints
    with cis2.Engine(models["odd"]) as c2:
        assert bits(c2, PROMPT) == ref_c


def _race(targets):
    out, errors = {}, []

    def work(name, e, p):
        try:
            for i in range(3):
                out[(name, i)] = bits(e, p)
        except BaseException as ex:  # reported by the main thread
            errors.append(ex)
    ts = [threading.Thread(target=work, args=t) for t in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return out


def test_two_threads_each_with_its_own_engine(tiny):
    with cis2.Engine(tiny, threads=1) as ref:
        want = {p: bits(ref, p) for p in PROMPTS[:2]}
    a, b = cis2.Engine(tiny, threads=1), cis2.Engine(tiny, threads=2)
    try:
        out = _race([("a", a, PROMPTS[0]), ("b", b, PROMPTS[1])])
    finally:
        a.close()
        b.close()
    for (name, _), got in out.items():
        assert got == want[PROMPTS[0] if name == "a" else PROMPTS[1]]


def test_two_threads_sharing_one_engine(engine):
    want = {p: bits(engine, p) for p in PROMPTS[:2]}
    out = _race([("a", engine, PROMPTS[0]), ("b", engine, PROMPTS[1])])
    for (name, _), got in out.items():
        assert got == want[PROMPTS[0] if name == "a" else PROMPTS[1]]


def test_verify_beside_generate_on_one_engine(tiny):
    """A verify's background hashing once rode the engine's shared pool,
    so a generate on another thread ran its steps too: a segfault or a
    wrong verdict.  Verdicts and bits equal each call alone."""
    with cis2.Engine(tiny, threads=2) as e:
        receipts = [cis2.Receipt.parse(e.generate(p, gen_toks=40, temperature=0.8, seed=i).receipt)
                    for i, p in enumerate(PROMPTS * 3)]
        want_v = [v.name for v in e.verify(receipts)]
        want_g = {p: bits(e, p) for p in PROMPTS}
        got_v, got_g, errors = [], [], []

        def verifier():
            try:
                for _ in range(4):
                    got_v.append([v.name for v in e.verify(receipts)])
            except BaseException as ex:
                errors.append(ex)

        def generator():
            try:
                for _ in range(4):
                    for p in PROMPTS:
                        got_g.append(bits(e, p) == want_g[p])
            except BaseException as ex:
                errors.append(ex)
        ts = [threading.Thread(target=verifier), threading.Thread(target=verifier), threading.Thread(target=generator)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors
        assert want_v == ["OK"] * len(receipts)
        assert got_v == [want_v] * 8
        assert all(got_g) and len(got_g) == 4 * len(PROMPTS)

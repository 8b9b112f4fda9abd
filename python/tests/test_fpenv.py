"""The interpreter's floating-point environment is the caller's before,
during (in callbacks) and after library calls: subnormals are neither
flushed (FTZ) nor read as zero (DAZ) by numpy or by Python floats, rounding
stays to nearest, and the library's own probe says the calling thread is
not pinned.  The library pins FTZ/DAZ for its own work only."""
import numpy as np

import cis2
from cis2 import _lib
from conftest import PROMPT


def probe(one=1.0, tiny=2.0 ** -1070, third=3.0):
    """Bits of results that FTZ, DAZ or another rounding mode would change."""
    f32 = np.float32
    sub = np.array([1e-40, -3e-42, 1.4e-45], dtype=f32)           # float32 subnormals
    vals = [
        (sub * f32(one)).view(np.uint32).tolist(),                 # DAZ would zero them
        (np.array([1e-38], f32) / f32(1000.0)).view(np.uint32).tolist(),   # FTZ would flush the result
        np.float64(tiny * one).view(np.uint64).item(),            # float64 subnormal
        (np.array([one], f32) / f32(third)).view(np.uint32).tolist(),      # round to nearest: 0x3eaaaaab
        (one + 1.5 * 2.0 ** -53).hex(),                            # nearest: 1.0000000000000002
        (sub[0] > f32(0.0)).item(),                                # DAZ compares a subnormal as 0
    ]
    return vals


BASE = probe()


def test_baseline_is_ieee():
    assert BASE[0][0] != 0 and BASE[1][0] != 0 and BASE[2] != 0 and BASE[3] == [0x3EAAAAAB]
    assert BASE[4] == "0x1.0000000000001p+0" and BASE[5] is True


def test_unchanged_after_calls_and_inside_callbacks(engine, tiny):
    L = _lib.get()
    assert L.cis2_fpenv_is_pinned() == 0
    inside = []

    def on_token(ev):
        inside.append((probe(), L.cis2_fpenv_is_pinned()))
    with cis2.Engine(tiny) as e:
        assert probe() == BASE
        r = e.generate(PROMPT, gen_toks=3, on_token=on_token, logits=True)
        assert probe() == BASE and L.cis2_fpenv_is_pinned() == 0
        e.tokenize("text")
        v = cis2.Receipt.parse(r.receipt).verify(e, on_step=on_token)
        assert v.ok
        assert probe() == BASE
        cis2.Receipt.parse(r.receipt).check()
        try:
            e.generate(PROMPT, gen_toks=0)
        except cis2.UsageError:
            pass
        assert probe() == BASE and L.cis2_fpenv_is_pinned() == 0
    assert probe() == BASE
    assert len(inside) == 6 and all(p == BASE and pinned == 0 for p, pinned in inside)


def test_the_probe_sees_a_pinned_thread():
    """What the tests above would see if the library leaked its pin: a
    thread of our own pinned with cis2_fpenv_pin (FTZ/DAZ) flushes the
    probe's subnormals.  The pin stays on that thread, which then ends."""
    import threading
    got = []

    def pinned():
        err = _lib.Err()
        _lib.check(_lib.get().cis2_fpenv_pin(err), err)
        got.append((probe(), _lib.get().cis2_fpenv_is_pinned()))
    t = threading.Thread(target=pinned)
    t.start()
    t.join()
    p, is_pinned = got[0]
    assert is_pinned == 1 and p != BASE
    assert p[0] == [0, 0x80000000, 0] and p[1] == [0] and p[5] is False
    assert probe() == BASE and _lib.get().cis2_fpenv_is_pinned() == 0

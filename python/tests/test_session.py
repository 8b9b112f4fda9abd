"""Sessions (continuous batching) from Python: sequences added at different
steps give the results, receipts and logits of their solo runs; cancel,
done, pending and take behave as cis2.h section 6 says."""
import pytest

import cis2
from conftest import PROMPT


def test_session_results_equal_solo_runs(engine):
    solo = {p: engine.generate(p, gen_toks=n, logits=True) for p, n in ((PROMPT, 5), ("Late joiner", 3))}
    seen = []
    with engine.session(max_batch=4, prefill_chunk=4, logits=True, on_token=lambda ev: seen.append(ev.index)) as s:
        a = s.add(PROMPT, gen_toks=5)
        assert s.pending == 1 and not s.done(a)
        s.step()
        s.step()
        b = s.add(cis2.Request("Late joiner", gen_toks=3))
        s.run()
        assert s.pending == 0 and s.done(a) and s.done(b)
        ra, rb = s.take(a), s.take(b)
        with pytest.raises(cis2.UsageError):
            s.done(a)   # taken: unknown now
    for r, p in ((ra, PROMPT), (rb, "Late joiner")):
        assert (r.receipt, r.witness) == (solo[p].receipt, solo[p].witness)
        assert r.logits.tobytes() == solo[p].logits.tobytes()
    assert sorted(seen) == sorted([a] * 5 + [b] * 3)


def test_session_cancel(engine):
    with engine.session() as s:
        a = s.add(PROMPT, gen_toks=8)
        s.step()
        s.cancel(a)
        assert s.done(a)
        r = s.take(a)
        assert r.finish == "cancelled" and len(r.token_ids) < 8
        with pytest.raises(cis2.UsageError):
            s.cancel(12345)
        with pytest.raises(cis2.UsageError, match="not finished"):
            s.take(s.add(PROMPT, gen_toks=2))


def test_session_callback_cancels_its_sequence(engine):
    with engine.session(on_token=lambda ev: ev.step == 1) as s:
        a = s.add(PROMPT, gen_toks=6)
        s.run()
        r = s.take(a)
        assert r.finish == "cancelled" and len(r.token_ids) == 2


def test_session_callback_exception(engine):
    def boom(ev):
        raise RuntimeError("boom")
    with engine.session(on_token=boom) as s:
        s.add(PROMPT, gen_toks=3)
        with pytest.raises(RuntimeError, match="boom"):
            s.run()


def test_closing_the_engine_closes_its_sessions(tiny):
    e = cis2.Engine(tiny)
    s = e.session()
    s.add(PROMPT, gen_toks=2)
    e.close()
    with pytest.raises(cis2.UsageError, match="closed"):
        s.step()

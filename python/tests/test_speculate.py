"""Speculative decoding from Python (Engine.speculate, docs/speculate.md):
generate, batches and sessions with lookup drafting and with a draft model
(the model itself, and the tiny shape: same synthetic tokenizer) give plain decoding's
receipts, witnesses, tokens, logprobs and logits, byte for byte.  Oracle:
the same engine's plain decoding (speculate "off")."""

import pytest

import cis2
from conftest import PROMPT, same_result as _same

REP = "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat"
SAMPLED = dict(temperature=0.7, top_k=8, seed=42, logprobs=True, top_logprobs=3)


@pytest.mark.parametrize("shape", ["tiny", "tiny-qwen", "odd"])
def test_speculate_equals_plain(models, shape):
    with cis2.Engine(models[shape]) as e:
        assert e.speculate == "off"
        cases = [(PROMPT, 30, {}), (REP, 40, {}), (REP, 40, SAMPLED)]
        plain = [e.generate(p, gen_toks=n, logits=True, **kw) for p, n, kw in cases]
        batch = e.generate_batch([cis2.Request(p, n, **kw) for p, n, kw in cases], logits=True)
        for spec in ("lookup:1", "lookup", "lookup:8", f"draft:{models[shape]}:3", f"draft:{models['tiny']}"):
            e.speculate = spec
            assert e.speculate == spec
            for (p, n, kw), ref in zip(cases, plain):
                _same(e.generate(p, gen_toks=n, logits=True, **kw), ref)
            for r, ref in zip(e.generate_batch([cis2.Request(p, n, **kw) for p, n, kw in cases], logits=True), batch):
                _same(r, ref)
            with e.session(max_batch=2, prefill_chunk=8, logits=True) as s:
                ids = [s.add(cis2.Request(p, n, **kw)) for p, n, kw in cases]
                s.run()
                for i, ref in zip(ids, plain):
                    _same(s.take(i), ref)
        e.speculate = None
        assert e.speculate == "off"


def test_speculate_bad_spec(engine):
    for bad in ("lookup:0", "lookup:17", "draft", "lookup:", "draft:", "draft:x:0"):
        with pytest.raises(cis2.UsageError):
            engine.speculate = bad
    assert engine.speculate == "off"


def test_speculate_draft_refused(engine, tmp_path):
    """A draft directory that does not exist is a FileError (exit class io) and the setting
    stays as it was."""
    engine.speculate = "lookup:2"
    with pytest.raises(cis2.FileError):
        engine.speculate = f"draft:{tmp_path}/none:4"
    assert engine.speculate == "lookup:2"
    engine.speculate = "off"

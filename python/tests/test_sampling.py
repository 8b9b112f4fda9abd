"""Sampling, stop rules and logprobs (docs/sampling.md) from Python: passed
through to the library, so a sampled or stopped run's receipt, witness,
tokens, finish reason, logits and logprob bits are `cis2 run`'s with the
same flags, byte for byte; seeded runs are reproducible and equal in a
batch.  Against a library without the extension (it answers Unsupported)
these tests skip.  Greedy defaults given explicitly are the plain run."""
import math

import numpy as np
import pytest

import cis2
from conftest import PROMPT


def run_or_skip(fn):
    try:
        return fn()
    except cis2.Unsupported as e:
        pytest.skip("library: %s" % e)


@pytest.fixture(scope="module")
def sampling(engine):
    """Skips when the library does not sample yet; logprobs arrive with it."""
    run_or_skip(lambda: engine.generate(PROMPT, gen_toks=1, temperature=1.0, seed=1))


def test_explicit_greedy_defaults(engine):
    plain = engine.generate(PROMPT, gen_toks=4)
    r = engine.generate(PROMPT, gen_toks=4, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, stop=None,
                        stop_at_eos=False)
    assert r.receipt == plain.receipt


def test_seeded_sampling_is_reproducible(engine, sampling):
    kw = dict(gen_toks=8, temperature=0.8, top_k=40, top_p=0.9, min_p=0.01, seed=1234)
    a = engine.generate(PROMPT, **kw)
    b = engine.generate_batch(["other", PROMPT], **kw)[1]
    assert (a.token_ids, a.witness, a.receipt) == (b.token_ids, b.witness, b.receipt)
    assert a.receipt.startswith("CIS-2-RECEIPT ext-sampling-1\n")
    assert cis2.Receipt.parse(a.receipt).verify(engine).ok
    c = engine.generate(PROMPT, **dict(kw, seed=1235))
    d = engine.generate(PROMPT, **dict(kw, sequence=1))
    assert c.witness != a.witness and d.witness != a.witness   # the params digest is in the witness (§S7.6)


def test_stop_rules(engine):
    greedy = engine.generate(PROMPT, gen_toks=6)
    stop_id = greedy.token_ids[2]
    first = greedy.token_ids.index(stop_id)
    r = run_or_skip(lambda: engine.generate(PROMPT, gen_toks=6, stop=[stop_id]))
    assert r.finish == "stop-id" and r.token_ids == greedy.token_ids[:first + 1]
    s = run_or_skip(lambda: engine.generate(PROMPT, gen_toks=6, stop=greedy.text[-2:]))
    assert s.finish in ("stop-string", "length")
    assert s.receipt.startswith("CIS-2-RECEIPT ext-sampling-1\n") and cis2.Receipt.parse(s.receipt).verify(engine).ok


def test_stop_at_eos(engine, models):
    """The tiny checkpoint's config has no eos_token_id: stop-at-eos is
    refused there (docs/sampling.md §S5.1)."""
    assert engine.config.eos_token_ids == ()
    try:
        engine.generate(PROMPT, gen_toks=3, stop_at_eos=True)
    except cis2.Unsupported as e:
        pytest.skip("library: %s" % e)
    except cis2.UsageError:
        pass
    else:
        raise AssertionError("stop_at_eos without eos ids was accepted")


def test_generation_config_eos(models, tmp_path):
    """A generation_config.json beside config.json adds its eos_token_id to
    the eos list (docs/sampling.md §S5.1): stop_at_eos stops at its first
    id met, as explicit stop ids do, and the receipt records the list."""
    import json
    import shutil
    d = tmp_path / "m"
    shutil.copytree(models["tiny"], d)
    with cis2.Engine(str(d)) as e:
        assert e.config.eos_token_ids == ()
        base = run_or_skip(lambda: e.generate(PROMPT, gen_toks=12, temperature=1.0, seed=3))
    seen = base.token_ids
    k = next(i for i in range(2, len(seen)) if seen[i] not in seen[:i])   # a first appearance, not at once
    a, b = seen[k], 600   # b: an id the vocabulary (512) cannot draw
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [a, b], "temperature": 0.3}))
    with cis2.Engine(str(d)) as e:
        assert e.config.eos_token_ids == (a, b)
        r = e.generate(PROMPT, gen_toks=12, temperature=1.0, seed=3, stop_at_eos=True)
        x = e.generate(PROMPT, gen_toks=12, temperature=1.0, seed=3, stop=[a, b])
        assert r.finish == "eos" and r.token_ids == seen[:k + 1] == x.token_ids and x.finish == "stop-id"
        assert "\nstop-eos %d,%d\n" % (a, b) in r.receipt
        assert cis2.Receipt.parse(r.receipt).verify(e).ok
    (d / "generation_config.json").write_text('{"eos_token_id": "x"}')
    with pytest.raises(cis2.FormatError, match="generation_config.json: eos_token_id"):
        cis2.Engine(str(d))


def test_logprobs(engine, sampling):
    r = engine.generate(PROMPT, gen_toks=4, logits=True, logprobs=True, top_logprobs=3)
    assert len(r.logprobs) == 4 and len(r.top_logprobs) == 4 and all(len(t) == 3 for t in r.top_logprobs)
    for step, lp in enumerate(r.logprobs):
        row = r.logits[step].astype(np.float64)
        ref = row[r.token_ids[step]] - (row.max() + math.log(np.exp(row - row.max()).sum()))
        assert lp <= 0.0 and abs(lp - ref) < 1e-3
        assert r.top_logprobs[step][0][0] == r.token_ids[step]   # greedy: the top alternative is the pick


def bits(x):
    import struct
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


SAMPLED = [
    # (CLI flags, Python keyword arguments): binary32-exact values, so the
    # CLI's decimal conversion and Python's float -> binary32 agree
    (["--temperature", "0.75", "--top-k", "40", "--top-p", "0.875", "--min-p", "0.0625", "--seed", "99",
      "--logprobs", "2"],
     dict(temperature=0.75, top_k=40, top_p=0.875, min_p=0.0625, seed=99, top_logprobs=2)),
    (["--temperature", "1.5", "--seed", "7", "--sequence", "3", "--stop-id", "95,440"],
     dict(temperature=1.5, seed=7, sequence=3, stop=[95, 440])),
    (["--stop", "__", "--logprobs", "0"], dict(stop="__", logprobs=True)),
    (["--temperature", "0.5", "--seed", "1", "--stop", "_", "--stop", "q"], dict(temperature=0.5, seed=1, stop=["_", b"q"])),
]


@pytest.mark.parametrize("flags,kw", SAMPLED, ids=["filters", "stop-ids", "stop-string", "two-stops"])
def test_sampled_run_equals_cli(engine, tiny, tmp_path, flags, kw):
    run_or_skip(lambda: engine.generate(PROMPT, gen_toks=1, temperature=1.0, seed=1))
    from conftest import cli_run
    j, receipt, dump = cli_run(tiny, tmp_path, "s", "--prompt", PROMPT, "--gen-toks", 8, *flags)
    r = engine.generate(PROMPT, gen_toks=8, logits=True, **kw)
    assert r.receipt == receipt and r.receipt.startswith("CIS-2-RECEIPT ext-sampling-1\n")
    assert (r.witness, r.token_ids, r.finish, r.text) == (j["cis2_ref"], j["generated_token_ids"],
                                                          j["finish_reason"], j["completion"])
    assert r.logits.tobytes() == dump
    if "logprobs" in j:
        assert [bits(x) for x in r.logprobs] == [s["bits"] for s in j["logprobs"]]
        assert [[(i, bits(x)) for i, x in top] for top in r.top_logprobs] == \
            [[(t["id"], t["bits"]) for t in s["top"]] for s in j["logprobs"]]
    else:
        assert r.logprobs is None
    assert cis2.Receipt.parse(r.receipt).verify(engine).ok
    b = engine.generate_batch(["other prompt", PROMPT], gen_toks=8, **kw)[1]
    assert b.receipt == receipt

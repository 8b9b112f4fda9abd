"""Scoring (cis2_score, Engine.score; docs/sampling.md §S11) against second
routes: the logprob bits generate() reports when it generates the same
tokens (greedy and seeded sampling: the decode's logits rows, cached,
against the score's teacher-forced prefill), the rank and greedy flag from
the decode's logits by numpy, the sums recomputed from the per-token bits,
a context-shared batch against each continuation alone, and tokenization
against Engine.tokenize of each part."""
import struct

import numpy as np
import pytest

import cis2
from conftest import PROMPT


def bits(v):
    return "%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


def numpy_rank(row, tok):
    """1 + the candidates before tok (§S3.3: logit descending, ties by id), from numpy."""
    x = row[tok]
    ok = ~np.isnan(row)
    return 1 + int(np.sum(ok & ((row > x) | ((row == x) & (np.arange(len(row)) < tok)))))


@pytest.mark.parametrize("kw", [dict(), dict(temperature=0.9, top_k=30, seed=11),
                                dict(temperature=1.3, top_p=0.95, seed=4, sequence=2)])
def test_score_equals_generated_logprobs(engine, kw):
    g = engine.generate(PROMPT, 10, logprobs=True, top_logprobs=4, logits=True, twice=False, **kw)
    s = engine.score(PROMPT, g.token_ids, top_logprobs=4)
    assert s.context_ids == g.prompt_ids and s.ids == g.token_ids and s.first == 0 and s.n_scored == 10
    assert s.bits == [bits(v) for v in g.logprobs]
    assert [[(i, bits(v)) for i, v in t] for t in s.top_logprobs] == \
           [[(i, bits(v)) for i, v in t if i != 0xFFFFFFFF] for t in g.top_logprobs]
    for k, tok in enumerate(g.token_ids):
        row = g.logits[k]
        assert s.ranks[k] == numpy_rank(row, tok)
        assert s.greedy[k] == (int(np.argmax(row)) == tok)
    if not kw:
        assert s.all_greedy and s.ranks == [1] * 10


def test_sums_are_the_sequential_sums_of_the_bits(engine):
    s = engine.score(PROMPT, " and then the end of it all")
    f = np.float32(0.0)
    d = 0.0
    for b in s.bits:
        v = np.frombuffer(bytes.fromhex(b), ">f4")[0]
        f = np.float32(f + v)
        d = d + float(v)
    assert s.sum_bits == bits(f) and s.sum_f64 == d
    assert s.all_greedy == all(s.greedy)


def test_shared_context_batch_equals_each_alone(engine):
    ctx = "Once upon a time there was a"
    conts = [" cat", " dog that ran", "n owl", [5, 6, 7], " cat"]
    both = engine.score_batch([(ctx, c) for c in conts] + [("Another context", " cat"), (None, "solo text")],
                              top_logprobs=3)
    alone = [engine.score(ctx, c, top_logprobs=3) for c in conts] + \
            [engine.score("Another context", " cat", top_logprobs=3), engine.score(None, "solo text", top_logprobs=3)]
    for a, b in zip(alone, both):
        assert (a.context_ids, a.ids, a.bits, a.ranks, a.greedy, a.sum_bits, a.sum_f64) == \
               (b.context_ids, b.ids, b.bits, b.ranks, b.greedy, b.sum_bits, b.sum_f64)
        assert [[(i, bits(v)) for i, v in t] for t in a.top_logprobs] == \
               [[(i, bits(v)) for i, v in t] for t in b.top_logprobs]
    assert engine.score(ctx, conts) is not None and len(engine.score(ctx, conts)) == len(conts)


def test_contexts_sharing_a_prefix_equal_each_alone(engine):
    """Contexts that begin alike and then differ (a few-shot prompt before
    different questions; one a prefix of another) share their common ids'
    KV (share.h): each result is still the one it gets alone, bit for bit."""
    base = "Q: what is two and two? A: four. Q: what is three and three? A: six. Q:"
    reqs = [(base + " what is one and one? A:", " two"), (base + " what is five and five? A:", " ten"),
            (base, " what"), (base + " what", " is one"), ("Q: what", " is"), (base[:5], " what is it")]
    both = engine.score_batch(reqs, top_logprobs=2)
    for (c, x), b in zip(reqs, both):
        a = engine.score(c, x, top_logprobs=2)
        assert (a.context_ids, a.ids, a.bits, a.ranks, a.greedy, a.sum_bits, a.sum_f64) == \
               (b.context_ids, b.ids, b.bits, b.ranks, b.greedy, b.sum_bits, b.sum_f64)
        assert [[(i, bits(v)) for i, v in t] for t in a.top_logprobs] == \
               [[(i, bits(v)) for i, v in t] for t in b.top_logprobs]


def test_parts_are_tokenized_apart(engine):
    s = engine.score("Hello wor", "ld peace")
    assert s.context_ids == engine.tokenize("Hello wor") and s.ids == engine.tokenize("ld peace")


def test_no_context_leaves_the_first_token_unscored(engine):
    ids = engine.tokenize("Once upon a time")
    s = engine.score(None, ids)
    assert s.first == 1 and s.logprobs[0] is None and s.bits[0] is None and s.ranks[0] == 0
    assert s.top_logprobs[0] == [] and s.n_scored == len(ids) - 1
    t = engine.score(ids[:1], ids[1:])
    assert s.bits[1:] == t.bits and s.sum_bits == t.sum_bits
    one = engine.score(None, ids[:1])
    assert one.n_scored == 0 and one.sum == 0.0 and one.all_greedy


def test_bad_requests(engine):
    V = engine.config.vocab_size
    with pytest.raises(cis2.UsageError, match="continuation has no tokens"):
        engine.score("x", "")
    with pytest.raises(cis2.UsageError, match="top_logprobs 21"):
        engine.score("x", "y", top_logprobs=21)
    with pytest.raises(cis2.UsageError, match="outside the vocabulary"):
        engine.score([1, 2], [V])
    with pytest.raises(cis2.Unsupported, match="max_position_embeddings"):
        engine.score([1] * engine.config.max_position_embeddings, [2])


def receipt_lines(text):
    return dict(line.split(" ", 1) for line in text.rstrip("\n").split("\n")[1:])


def test_score_receipts_verify_and_name_a_doctored_score(engine, tiny, tmp_path):
    """receipt=True (cis2_score_receipts): each receipt carries the Score's
    bits and a logprob-digest recomputed here by hashlib from the Score's
    figures (docs/receipts.md "Score receipts"), verifies OK on the engine,
    equals the CLI's `cis2 score --receipt`, and a doctored logprob is named."""
    import hashlib
    from conftest import cli
    ss = engine.score(PROMPT, [" the cat", " a dog sat"], top_logprobs=2, receipt=True)
    plain = engine.score(PROMPT, [" the cat", " a dog sat"], top_logprobs=2)
    for s, p in zip(ss, plain):
        assert s.bits == p.bits and s.sum_bits == p.sum_bits and p.receipt is None
        assert s.receipt.startswith("CIS-2-RECEIPT ext-score-1\n")
        kv = receipt_lines(s.receipt)
        assert kv["logprob-bits"] == ",".join(s.bits) and kv["sum-bits"] == s.sum_bits
        assert kv["continuation-token-ids"] == ",".join(map(str, s.ids))
        h = hashlib.sha256()
        for k in range(s.first, len(s.ids)):
            h.update(struct.pack("<IIB", int(s.bits[k], 16), s.ranks[k], 1 if s.greedy[k] else 0))
            alts = [(i, int(bits(v), 16)) for i, v in s.top_logprobs[k]]
            alts += [(0xFFFFFFFF, 0)] * (2 - len(alts))
            for i, b in alts:
                h.update(struct.pack("<II", i, b))
        assert kv["logprob-digest"] == h.hexdigest()
        v = cis2.Receipt.parse(s.receipt).verify(engine)
        assert v.ok, v.summary
    out = str(tmp_path / "s")
    cli("score", "--model-dir", tiny, "--context", PROMPT, "--continuation", " the cat", "--continuation",
        " a dog sat", "--top-logprobs", "2", "--receipt", out)
    for i, s in enumerate(ss):
        with open("%s.%d" % (out, i)) as f:
            assert f.read() == s.receipt
    kv = receipt_lines(ss[0].receipt)
    b = kv["logprob-bits"].split(",")
    b[0] = "%08x" % (int(b[0], 16) ^ 1)
    doctored = ss[0].receipt.replace("logprob-bits " + kv["logprob-bits"], "logprob-bits " + ",".join(b))
    v = cis2.Receipt.parse(doctored).verify(engine)
    assert not v.ok and v.field("logprob-bits").status == "mismatch", v.summary

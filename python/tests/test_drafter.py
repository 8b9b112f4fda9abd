"""Speculative decoding with drafts of the caller's own (Engine.set_drafter,
cis2_engine_set_drafter; docs/speculate.md "How to use it"): on every
`make matrix` shape (tiny, tiny-qwen, odd, smollm2-135m and the families'
small shapes l3, q3, sm3, ol2, ph3, gm3 of tools/matrix), greedy and seeded
sampling with logprobs and a stop id met mid-way, a drafter that is
always right (the plain run's continuation), always wrong and right at
random gives plain decoding's receipt, witness, argmax digest, tokens,
finish, text, logprob bits, alternatives and logits, byte for byte, at 1
and 2 threads and on every kernel this machine runs.  Oracle: the same
engine's plain decoding (no drafter).  The right drafter must make fewer
passes than tokens: checked through the drafter's own call count."""
import json
import pathlib
import random

import pytest

import cis2
from conftest import PROMPT, TOKENIZER_135M, same_result as _same

# tools/matrix's family shapes (docs/models.md §M1-§M7), tests/families/*.json
FAMILY_DIR = pathlib.Path(__file__).resolve().parents[2] / "tests" / "families"
FAMILIES = {p.stem: json.loads(p.read_text()) for p in sorted(FAMILY_DIR.glob("*.json"))}
assert {"l3", "q3", "sm3", "ol2", "ph3", "gm3"} <= set(FAMILIES), FAMILY_DIR
KERNELS = [k for k in ("scalar", "avx2", "avx512", "neon") if cis2.kernel_available(k)]


@pytest.fixture(scope="module")
def shapes(models, tmp_path_factory):
    from conftest import cli
    out = {k: v for k, v in models.items()}
    base = tmp_path_factory.mktemp("fams")
    for name, cfg in FAMILIES.items():
        c = base / (name + ".json")
        c.write_text(json.dumps(cfg))
        cli("synth", "--config", c, "--seed", 3, "--out", base / name)
        out[name] = str(base / name)
    return out


class Drafter:
    """Proposes the known continuation of each prompt (its plain run's
    tokens): all of it (right), each token changed (wrong), or each token
    right with probability 1/2 (random); counts its calls."""

    def __init__(self, known, vocab, mode, seed=1):
        self.known, self.vocab, self.mode, self.calls = known, vocab, mode, 0
        self.rng = random.Random(seed)

    def __call__(self, prompt, gen, max_k):
        self.calls += 1
        cont = self.known.get(tuple(prompt))
        if cont is None or cont[:len(gen)] != list(gen):
            return []
        nxt = cont[len(gen):len(gen) + max_k]
        if self.mode == "right":
            return nxt
        if self.mode == "wrong":
            return [(t + 1) % self.vocab for t in nxt]
        return [t if self.rng.random() < 0.5 else (t + 7) % self.vocab for t in nxt]


SHAPES = ["tiny", "tiny-qwen", "odd", "smollm2-135m"] + list(FAMILIES)


@pytest.mark.parametrize("shape", SHAPES)
def test_drafters_equal_plain(shapes, shape):
    if shape not in shapes:
        pytest.skip("%s not found" % TOKENIZER_135M)
    big = shape == "smollm2-135m"
    with cis2.Engine(shapes[shape]) as e:
        V = e._info().vocab_size
        n = 12 if big else 24
        sampled = dict(temperature=0.9, top_k=16, seed=5, logprobs=True, top_logprobs=3)
        probe = e.generate(PROMPT, gen_toks=n, twice=False, **sampled)
        stop = probe.token_ids[n // 2]  # a stop id the sampled run meets mid-way
        cases = [(PROMPT, n, {}), (PROMPT, n, dict(sampled, stop=stop))]
        plain = [e.generate(p, gen_toks=k, logits=True, twice=False, **kw) for p, k, kw in cases]
        assert plain[1].finish == "stop-id" and len(plain[1].token_ids) <= n // 2 + 1
        known = {}
        for (p, k, kw), r in zip(cases, plain):
            known.setdefault(tuple(r.prompt_ids), r.token_ids)
        # the sampled run's prompt is the greedy one's: give each case its own drafter
        kernels = KERNELS[-1:] if big else KERNELS
        for kern in kernels:
            e.kernel = kern
            for threads in (1, 2):
                e.threads = threads
                for mode in ("right", "wrong", "random"):
                    for K in ((4,) if big else (1, 4, 8)):
                        for (p, k, kw), ref in zip(cases, plain):
                            d = Drafter({tuple(ref.prompt_ids): ref.token_ids}, V, mode, seed=K)
                            e.set_drafter(d, K)
                            _same(e.generate(p, gen_toks=k, logits=True, twice=False, **kw), ref)
                            e.set_drafter(None)
                            if mode == "right" and K > 1:
                                # drafts kept: fewer drafting calls (one per pass) than tokens
                                assert d.calls < len(ref.token_ids) - 1, (mode, K, d.calls)
        e.kernel = "auto"


def test_drafter_session_and_batch(shapes):
    """Several sequences in one session (continuous batching) and a batch,
    each drafted by prompt, random drafts: plain decoding's results."""
    with cis2.Engine(shapes["tiny"]) as e:
        V = e._info().vocab_size
        prompts = [PROMPT, "the cat sat on the mat", "1234567890"]
        kw = dict(temperature=0.8, top_k=20, seed=9, logprobs=True, top_logprobs=2)
        plain = [e.generate(p, gen_toks=20, logits=True, twice=False, **kw) for p in prompts]
        d = Drafter({tuple(r.prompt_ids): r.token_ids for r in plain}, V, "random", seed=3)
        e.set_drafter(d, 6)
        for r, ref in zip(e.generate_batch([cis2.Request(p, 20, **kw) for p in prompts], logits=True), plain):
            _same(r, ref)
        with e.session(max_batch=2, prefill_chunk=8, logits=True) as s:
            ids = [s.add(cis2.Request(p, 20, **kw)) for p in prompts]
            s.run()
            for i, ref in zip(ids, plain):
                _same(s.take(i), ref)
        e.set_drafter(None)
        assert e.speculate == "off"


def test_drafter_hostile_answers(shapes):
    """Ids outside the vocabulary, more than max_k ids, exceptions: never a
    crash or a changed bit; a bad k is refused."""
    with cis2.Engine(shapes["tiny"]) as e:
        V = e._info().vocab_size
        ref = e.generate(PROMPT, gen_toks=16, logits=True, twice=False)
        for fn in (lambda p, g, k: [V, V + 1, 0xFFFFFFFF][:k],
                   lambda p, g, k: list(ref.token_ids[len(g):len(g) + 40]),
                   lambda p, g, k: [ref.token_ids[len(g)] if len(g) < 16 else 0, V * 3],
                   lambda p, g, k: 1 / 0):
            e.set_drafter(fn, 4)
            _same(e.generate(PROMPT, gen_toks=16, logits=True, twice=False), ref)
        e.set_drafter(None)
        for bad in (0, 17):
            with pytest.raises(cis2.UsageError):
                e.set_drafter(lambda p, g, k: [], bad)


def test_draft_length_follows_kept_drafts(shapes):
    """The draft length adapts (docs/speculate.md, time only): after a step
    that kept every draft the drafter is asked for K again; after one that
    kept j < d of its d drafts, for at most 2j + 1; a step that kept none
    is also followed by plain steps (the back-off) before the next
    drafting step.  The drafter sees this as the max_k it is asked for."""
    with cis2.Engine(shapes["tiny"]) as e:
        V = e._info().vocab_size
        ref = e.generate(PROMPT, gen_toks=40, logits=True, twice=False)
        right = [2, 0, 9, 9, 9, 9]  # drafts right per call, the rest wrong
        asked = []

        def drafter(prompt, gen, max_k):
            n = right[len(asked)] if len(asked) < len(right) else 0
            asked.append((len(gen), max_k))
            cont = ref.token_ids[len(gen):len(gen) + max_k]
            return [t if i < n else (t + 1) % V for i, t in enumerate(cont)]

        e.set_drafter(drafter, 8)
        _same(e.generate(PROMPT, gen_toks=40, logits=True, twice=False), ref)
        e.set_drafter(None)
        # call 0 at step 1: 8 asked, 2 kept (3 tokens) -> call 1 at step 4: 5 asked, none kept ->
        # one plain step -> call 2 at step 6: 1 asked and kept -> K again
        assert asked[:5] == [(1, 8), (4, 5), (6, 1), (8, 8), (17, 8)], asked[:6]

"""Generation from Python against the cis2 program, byte for byte: receipts,
witnesses, digests, token ids and the completion of `cis2 run --json`,
logits equal to `cis2 run --dump-logits`, on synthetic checkpoints of four
shapes (tiny, Qwen-shaped, odd dimensions, the 135M shape with the real
tokenizer); batches equal solo runs and `--prompt-file` runs; tokenize and
detokenize equal `cis2 tokenize` / `detokenize`; config and hashes."""
import json
import os

import numpy as np
import pytest

import cis2
from conftest import PROMPT, cli, cli_run

CASES = [("tiny", PROMPT, 8), ("tiny-qwen", "The quick brown fox", 6), ("odd", "odd shapes", 5),
         ("smollm2-135m", PROMPT, 3)]


@pytest.mark.parametrize("shape,prompt,n", CASES, ids=[c[0] for c in CASES])
def test_run_equals_cli(models, tmp_path, shape, prompt, n):
    if shape not in models:
        pytest.skip("no %s checkpoint" % shape)
    j, receipt, dump = cli_run(models[shape], tmp_path, "ref", "--prompt", prompt, "--gen-toks", n)
    events = []
    with cis2.Engine(models[shape]) as e:
        r = e.generate(prompt, gen_toks=n, logits=True, on_token=events.append)
        assert e.weights_sha256 == j["weights_sha256"]
        assert e.config_sha256 == j["config_sha256"]
        assert e.tokenizer_sha256 == j["tokenizer_sha256"]
        assert e.table_digest == j["table_digest"]
        assert e.inv_freq_table_digest == j["inv_freq_table_digest"]
        assert e.config.vocab_size == r.logits.shape[1]
    assert r.receipt == receipt
    assert r.witness == j["cis2_ref"]
    assert r.argmax_digest == j["argmax_digest"]
    assert r.prompt_ids == j["prompt_token_ids"]
    assert r.token_ids == j["generated_token_ids"]
    assert r.text == j["completion"]
    assert r.prompt == prompt.encode()
    assert r.finish == "length"
    assert r.logits.dtype == np.float32 and r.logits.shape == (n, len(dump) // 4 // n)
    assert r.logits.tobytes() == dump
    assert [(ev.index, ev.step, ev.token) for ev in events] == [(0, i, t) for i, t in enumerate(r.token_ids)]
    assert events[-1].finish == "length" and all(ev.finish is None for ev in events[:-1])


def test_logits_only_when_asked(engine):
    assert engine.generate(PROMPT, gen_toks=2).logits is None


def test_prompt_as_ids_and_bytes(engine, tiny, tmp_path):
    ids = engine.tokenize(PROMPT)
    j, receipt, _ = cli_run(tiny, tmp_path, "ids", "--prompt-ids", ",".join(map(str, ids)), "--gen-toks", 4)
    r = engine.generate(ids, gen_toks=4)
    assert (r.witness, r.token_ids, r.receipt) == (j["cis2_ref"], j["generated_token_ids"], receipt)
    assert engine.generate(PROMPT.encode(), gen_toks=4).receipt == receipt
    assert r.prompt == PROMPT.encode()   # the bytes the ids decode to (they round-trip)


def test_ids_without_prompt_bytes_have_an_ids_receipt(engine, tiny, tmp_path):
    # any ids of the vocabulary run and get a receipt that records them as ids
    # (docs/receipts.md "Prompts given as ids"): token-in, token-out
    for ids, hex_ in (([300, 301], "none"), ([79, 110, 99, 101, 32, 195], "4f6e636520c3")):
        r = engine.generate(ids, gen_toks=2)       # ids the byte-level tokenizer never produces
        assert r.prompt is None and len(r.token_ids) == 2
        assert "\nprompt-from ids\nprompt-hex %s\nprompt-token-ids %s\n" % (hex_, ",".join(map(str, ids))) in r.receipt
        _, receipt, _ = cli_run(tiny, tmp_path, "ids", "--prompt-ids", ",".join(map(str, ids)), "--gen-toks", 2)
        assert r.receipt == receipt
        rc = cis2.Receipt.parse(r.receipt)
        assert rc.get("prompt-from") == "ids" and rc.keys()[4] == "prompt-from"
        v = rc.verify(engine)
        assert v.ok, v.report()


def test_cis2_ref_line(engine, tiny):
    line = [l for l in cli("run", "--model-dir", tiny, "--gen-toks", 3).stdout.decode().splitlines()
            if l.startswith("CIS2_REF")][0]
    assert engine.generate(PROMPT, gen_toks=3).cis2_ref == line


def test_batch_equals_solo_and_prompt_file(engine, tiny, tmp_path):
    prompts = ["Once upon a time", "A", "The quick brown fox jumps", "Once upon a time"]
    batch = engine.generate_batch(prompts, gen_toks=5, logits=True)
    solo = [engine.generate(p, gen_toks=5, logits=True) for p in prompts]
    for b, s in zip(batch, solo):
        assert (b.receipt, b.witness, b.token_ids) == (s.receipt, s.witness, s.token_ids)
        assert b.logits.tobytes() == s.logits.tobytes()
    pf = tmp_path / "prompts.json"
    pf.write_text(json.dumps(prompts))
    cli("run", "--model-dir", tiny, "--prompt-file", pf, "--gen-toks", 5, "--receipt", tmp_path / "r",
        "--dump-logits", tmp_path / "l")
    for i, b in enumerate(batch):
        assert b.receipt == (tmp_path / ("r.%d" % i)).read_text()
        assert b.logits.tobytes() == (tmp_path / ("l.%d" % i)).read_bytes()


def test_batch_mixed_requests_and_events(engine):
    reqs = [cis2.Request("Once", gen_toks=2), cis2.Request([65, 66, 67], gen_toks=4), "xyz"]
    seen = []
    rs = engine.generate_batch(reqs, gen_toks=3, on_token=lambda ev: seen.append((ev.index, ev.step)),
                               max_batch=2)
    assert [len(r.token_ids) for r in rs] == [2, 4, 3]
    for i, r in enumerate(rs):
        assert [s for (k, s) in seen if k == i] == list(range(len(r.token_ids)))
    assert rs[1].witness == engine.generate([65, 66, 67], gen_toks=4).witness


def test_event_logits_are_the_step_logits(engine):
    rows = []
    held = []

    def on_token(ev):
        rows.append(ev.logits)
        held.append(ev)
    r = engine.generate(PROMPT, gen_toks=3, logits=True, on_token=on_token)
    assert np.array_equal(np.stack(rows).view(np.uint32), r.logits.view(np.uint32))
    assert [int(np.argmax(row)) for row in rows] == r.token_ids
    with pytest.raises(cis2.UsageError):
        held[0].logits   # only valid during the callback


def test_once_matches_twice(engine):
    a, b = engine.generate(PROMPT, gen_toks=4, twice=False), engine.generate(PROMPT, gen_toks=4)
    assert (a.receipt, a.witness) == (b.receipt, b.witness)


def test_tokenize_detokenize_equal_cli(engine135, m135):
    tok = os.path.join(m135, "tokenizer.json")
    for text in [PROMPT, "Héllo, wörld! 12345 <|im_start|>user\n", " \t\n  spaces"]:
        ids = engine135.tokenize(text)
        ref = cli("tokenize", "--tokenizer", tok, "--text", text).stdout.decode().strip()
        assert ",".join(map(str, ids)) == ref
        assert cis2.Tokenizer(tok).encode(text) == ids
        csv = ",".join(map(str, ids))
        assert engine135.detokenize(ids) + "\n" == cli("detokenize", "--tokenizer", tok, csv).stdout.decode()
        assert engine135.detokenize(ids) == text
        assert engine135.detokenize(ids, raw=True) == text.encode()
    assert engine135.tokenize(PROMPT) == [6403, 1980, 253, 655]   # README, §13.1


def test_detokenize_invalid_utf8(engine):
    assert engine.detokenize([0xC3]) == "\ufffd"
    assert engine.detokenize([0xC3], raw=True) == b"\xc3"
    assert engine.detokenize([0xC3, 0xA9]) == "é"


def test_config(engine, engine135):
    c = engine.config
    assert (c.model_type, c.hidden_size, c.num_layers, c.vocab_size, c.tied) == ("llama", 64, 2, 512, True)
    c135 = engine135.config
    assert (c135.hidden_size, c135.num_layers, c135.num_heads, c135.num_kv_heads, c135.head_dim) == (576, 30, 9, 3, 64)
    assert c135.vocab_size == 49152 and c135.tied and not c135.qkv_bias
    with pytest.raises(AttributeError):
        c.hidden_size = 1
    assert engine.has_tokenizer and engine.tokenizer_normative
    assert engine.weight_bytes > 0


def test_qwen_config(models):
    with cis2.Engine(models["tiny-qwen"]) as e:
        assert e.config.model_type == "qwen2" and e.config.qkv_bias and not e.config.tied


def test_kernel_and_threads_never_change_a_bit(tiny):
    ref = None
    for kernel in ["scalar", "auto"] + [k for k in ("avx2", "avx512", "neon") if cis2.kernel_available(k)]:
        for threads in (1, 2):
            with cis2.Engine(tiny, threads=threads, kernel=kernel) as e:
                assert e.threads == threads
                r = e.generate(PROMPT, gen_toks=3, logits=True)
                got = (r.receipt, r.logits.tobytes())
                assert ref is None or got == ref, (kernel, threads)
                ref = got
    with cis2.Engine(tiny, kernel="scalar") as e:
        assert e.kernel == "scalar"
        e.kernel = None
        assert e.kernel != "scalar" or not any(cis2.kernel_available(k) for k in ("avx2", "avx512", "neon"))
        e.threads = 1
        assert e.threads == 1


def test_synth_equals_cli(models, tmp_path):
    cis2.synth("odd", 5, str(tmp_path / "odd"))
    for f in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (tmp_path / "odd" / f).read_bytes() == open(os.path.join(models["odd"], f), "rb").read(), f

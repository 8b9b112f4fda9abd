"""Receipts and verdicts from Python against the cis2 program: parse and
render round-trip byte for byte; verify, check and compare give the
verdicts (and the report text) of `cis2 verify`, `cis2 check` and `cis2
compare`, with the same exit class; doctored receipts fail verification
naming the doctored field."""
import os

import pytest

import cis2
from conftest import PROMPT, cli


@pytest.fixture(scope="module")
def run(engine):
    return engine.generate(PROMPT, gen_toks=6)


def doctor(text, key, fn):
    out = []
    for line in text.split("\n"):
        if line.startswith(key + " "):
            line = key + " " + fn(line[len(key) + 1:])
        out.append(line)
    return "\n".join(out)


def flip_hex(h):
    return ("1" if h[0] == "0" else "0") + h[1:]


def cli_report(cmd, *args):
    p = cli(cmd, *args, check=False)
    return p.returncode, p.stdout.decode()


def test_parse_render_save_load(run, tmp_path):
    r = cis2.Receipt.parse(run.receipt)
    assert r.text == run.receipt == str(r)
    assert r["witness-digest"] == r.witness == run.witness
    assert r.get("generated-token-ids") == ",".join(map(str, run.token_ids))
    assert r.get("no-such-key") is None
    with pytest.raises(KeyError):
        r["no-such-key"]
    assert r.keys()[0] == "spec-version" and r.keys()[-1] == "witness-digest" and len(r.keys()) == 13
    assert r.as_dict()["prompt-hex"] == PROMPT.encode().hex()
    r.save(tmp_path / "r")
    assert (tmp_path / "r").read_text() == run.receipt
    assert cis2.Receipt.load(tmp_path / "r") == r
    assert cis2.Receipt.parse(run.receipt.encode()) == r


@pytest.mark.parametrize("key,fn,name,code", [
    (None, None, "OK", 0),
    ("witness-digest", flip_hex, "OUTPUT-MISMATCH", 1),
    ("argmax-digest", flip_hex, "OUTPUT-MISMATCH", 1),
    ("generated-token-ids", lambda v: "7" + v[1:] if v[0] != "7" else "8" + v[1:], "OUTPUT-MISMATCH", 1),
    ("weights-sha256", flip_hex, "ARTIFACT-MISMATCH", 6),
    ("tokenizer-sha256", flip_hex, "ARTIFACT-MISMATCH", 6),
    ("spec-version", lambda v: "0.4", "UNSUPPORTED", 5),
])
def test_verify_equals_cli(engine, tiny, run, tmp_path, key, fn, name, code):
    text = doctor(run.receipt, key, fn) if key else run.receipt
    path = tmp_path / "r"
    path.write_text(text)
    rc, report = cli_report("verify", path, "--model-dir", tiny)
    v = cis2.Receipt.parse(text).verify(engine)
    assert (v.name, v.code, rc) == (name, code, code)
    assert v.ok == (code == 0)
    assert v.report() == report
    if key and code != 5:
        f = v.field(key)
        assert f.status == "mismatch" and f.detail.startswith("MISMATCH"), f
        with pytest.raises(cis2.error_class(code)):
            v.raise_for_status()
    if key == "generated-token-ids":
        assert v.first_bad_step == 0 and v.claimed_token != v.expected_token
    elif code == 0:
        assert v.first_bad_step is None and v.raise_for_status() is v


def test_verify_batch_and_paths(engine, run, tmp_path):
    good = tmp_path / "good"
    good.write_text(run.receipt)
    bad = doctor(run.receipt, "witness-digest", flip_hex)
    other = engine.generate("Another prompt", gen_toks=2).receipt
    vs = engine.verify([good, bad, other])
    assert [v.name for v in vs] == ["OK", "OUTPUT-MISMATCH", "OK"]
    assert [v.name for v in engine.verify([run.receipt], replay="decode", twice=True)] == ["OK"]
    with pytest.raises(cis2.UsageError):
        engine.verify([run.receipt], replay="sideways")


def test_verify_a_group_of_one_prompt(engine):
    # an RL group: samples of one prompt long enough that verify computes its prefix once
    prompt = (PROMPT + " ") * 4
    group = [engine.generate(prompt, gen_toks=5, temperature=1.0, seed=9, sequence=i).receipt for i in range(4)]
    group.append(doctor(group[1], "generated-token-ids", lambda v: ",".join(["1" if v.split(",")[0] != "1" else "2"] + v.split(",")[1:])))
    together = engine.verify(group)
    assert [v.name for v in together] == ["OK"] * 4 + ["OUTPUT-MISMATCH"]
    assert together[4].first_bad_step == 0
    alone = [cis2.Receipt.parse(r).verify(engine, replay="decode") for r in group]
    assert [v.report() for v in together] == [v.report() for v in alone]


def test_verify_on_step_sees_recomputed_logits(engine):
    r = engine.generate(PROMPT, gen_toks=4, logits=True)
    rows = []
    v = cis2.Receipt.parse(r.receipt).verify(engine, on_step=lambda ev: rows.append((ev.step, ev.token, ev.logits)))
    assert v.ok and [s for s, _, _ in rows] == [0, 1, 2, 3] and [t for _, t, _ in rows] == r.token_ids
    assert all(row.tobytes() == r.logits[i].tobytes() for i, (_, _, row) in enumerate(rows))


@pytest.mark.parametrize("with_files", [False, True])
def test_check_equals_cli(tiny, run, tmp_path, with_files):
    path = tmp_path / "r"
    path.write_text(run.receipt)
    tok, cfg = os.path.join(tiny, "tokenizer.json"), os.path.join(tiny, "config.json")
    args = ["--tokenizer", tok, "--config", cfg] if with_files else []
    rc, report = cli_report("check", path, *args)
    v = cis2.Receipt.parse(run.receipt).check(**({"tokenizer": tok, "config": cfg} if with_files else {}))
    assert v.name == "CONSISTENT" and rc == v.code == 0
    assert v.report() == report
    assert (v.field("prompt-token-ids").status == "ok") == with_files


def test_check_catches_a_doctored_argmax_digest(run):
    v = cis2.Receipt.parse(doctor(run.receipt, "argmax-digest", flip_hex)).check()
    assert v.name == "OUTPUT-MISMATCH" and v.field("argmax-digest").status == "mismatch"


def test_compare_equals_cli(engine, run, tmp_path):
    longer = engine.generate(PROMPT, gen_toks=8).receipt
    other = engine.generate("Different", gen_toks=6).receipt
    contra = doctor(run.receipt, "witness-digest", flip_hex)
    collision = doctor(other, "witness-digest", lambda v: run.witness)
    a = tmp_path / "a"
    a.write_text(run.receipt)
    for b_text, name, code in ((run.receipt, "SAME", 0), (longer, "DIFFERENT-RUN", 0), (other, "DIFFERENT-RUN", 0),
                               (contra, "CONTRADICTION", 1), (collision, "WITNESS-COLLISION", 1)):
        b = tmp_path / "b"
        b.write_text(b_text)
        rc, report = cli_report("compare", a, b)
        v = cis2.compare(run.receipt, b_text)
        assert (v.name, v.code, rc) == (name, code, code)
        assert v.report() == report
        assert cis2.compare(a, b).summary == v.summary   # paths (os.PathLike) are loaded
    with pytest.raises(TypeError):
        cis2.compare(run.receipt, 42)


def test_receipt_of_a_qwen_run_verifies(models):
    with cis2.Engine(models["tiny-qwen"]) as e:
        r = e.generate("qwen", gen_toks=3)
        assert cis2.Receipt.parse(r.receipt).verify(e).name == "OK"
        assert cis2.Receipt.parse(doctor(r.receipt, "config-sha256", flip_hex)).verify(e).name == "ARTIFACT-MISMATCH"

"""Fixtures of the Python package's tests: the reference `cis2` program,
synthetic checkpoints written by it, and engines on them.

The tests compare the binding with the cis2 program (the reference for
byte identity), so they need a built source tree: $CIS2 (default
build/cis2) and the library the binding loads ($CIS2_LIBRARY, default
build/libcis2.so).  tests/api/t_python.sh runs them with Debian's
/usr/bin/python3 from the repository root.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
os.environ.setdefault("CIS2_LIBRARY", os.path.join(BUILD, "libcis2.so"))
CIS2 = os.path.abspath(os.environ.get("CIS2") or os.path.join(BUILD, "cis2"))
SHARED = os.path.abspath(os.environ.get("SHARED") or os.path.join(ROOT, "..", "shared"))
TOKENIZER_135M = os.path.join(SHARED, "models", "smollm2-135m", "tokenizer.json")
PROMPT = "Once upon a time"

import cis2  # noqa: E402  (after CIS2_LIBRARY is set)


def cli(*args, check=True, stdin=None):
    """Runs the cis2 program -> CompletedProcess (stdout/stderr as bytes)."""
    p = subprocess.run([CIS2] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, input=stdin)
    if check and p.returncode != 0:
        raise AssertionError("cis2 %s: exit %d: %s" % (" ".join(map(str, args)), p.returncode, p.stderr.decode()))
    return p


def cli_run(model_dir, out_dir, name, *extra):
    """`cis2 run --json --receipt --dump-logits` -> (json dict, receipt text, logits bytes)."""
    import json
    rec, dump = os.path.join(out_dir, name + ".receipt"), os.path.join(out_dir, name + ".f32")
    p = cli("run", "--model-dir", model_dir, "--json", "--receipt", rec, "--dump-logits", dump, *extra)
    with open(rec) as f, open(dump, "rb") as g:
        return json.loads(p.stdout), f.read(), g.read()


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Synthetic checkpoints written by `cis2 synth`, by shape name."""
    base = tmp_path_factory.mktemp("models")
    out = {}
    for shape, seed, tok in (("tiny", 7, None), ("tiny-qwen", 3, None), ("odd", 5, None),
                             ("smollm2-135m", 1, TOKENIZER_135M)):
        if tok and not os.path.exists(tok):
            continue
        d = str(base / shape)
        cli("synth", "--shape", shape, "--seed", seed, "--out", d, *(["--tokenizer", tok] if tok else []))
        out[shape] = d
    return out


@pytest.fixture(scope="session")
def tiny(models):
    return models["tiny"]


@pytest.fixture(scope="session")
def engine(tiny):
    with cis2.Engine(tiny) as e:
        yield e


@pytest.fixture(scope="session")
def m135(models):
    if "smollm2-135m" not in models:
        pytest.skip("%s not found" % TOKENIZER_135M)
    return models["smollm2-135m"]


@pytest.fixture(scope="session")
def engine135(m135):
    with cis2.Engine(m135) as e:
        yield e


def same_result(a, b):
    """Two Results are the same bytes: receipt, witness, argmax digest,
    tokens, finish, text, logprob bits, alternatives and logits (the
    speculative-decoding tests' oracle is plain decoding)."""
    import struct
    assert (a.receipt, a.witness, a.argmax_digest, a.token_ids, a.finish, a.text) == \
        (b.receipt, b.witness, b.argmax_digest, b.token_ids, b.finish, b.text)
    bits = lambda r: None if r.logprobs is None else [struct.pack("<f", x) for x in r.logprobs]
    assert bits(a) == bits(b)
    assert a.top_logprobs == b.top_logprobs
    assert a.logits.tobytes() == b.logits.tobytes()

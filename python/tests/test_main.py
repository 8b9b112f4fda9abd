"""`python3 -m cis2 ...` prints what the cis2 program prints, with the same
exit code, for run (text and --json, receipt and logits files), verify,
check, compare, tokenize, detokenize, synth and an error."""
import os
import subprocess
import sys

import pytest

import cis2
from conftest import PROMPT, cli


def py(*args):
    return subprocess.run([sys.executable, "-m", "cis2"] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.path.dirname(cis2.__path__[0])))


def same(*args):
    a, b = py(*args), cli(*args, check=False)
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout), (args, a.stderr, b.stderr)
    return a


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    d = tmp_path_factory.mktemp("main")
    cli("run", "--model-dir", tiny, "--gen-toks", 5, "--receipt", d / "r", "--dump-logits", d / "l")
    bad = (d / "r").read_text().replace("witness-digest ", "witness-digest f", 1)[:-2] + "\n"
    (d / "bad").write_text(bad)
    return d


def test_run(tiny, files, tmp_path):
    same("run", "--model-dir", tiny, "--gen-toks", 5)
    same("run", "--model-dir", tiny, "--gen-toks", 3, "--json", "--prompt", "A \"quoted\"\tprompt\n")
    same("run", "--model-dir", tiny, "--gen-toks", 2, "--prompt-ids", "79,110,99")
    p = py("run", "--model-dir", tiny, "--gen-toks", 5, "--receipt", tmp_path / "r", "--dump-logits", tmp_path / "l")
    assert p.returncode == 0
    assert (tmp_path / "r").read_bytes() == (files / "r").read_bytes()
    assert (tmp_path / "l").read_bytes() == (files / "l").read_bytes()


def test_run_with_unprintable_completion(models):
    """The odd shape's completion holds control characters and invalid
    UTF-8 (shown as U+FFFD): the JSON escaping must be jansson's."""
    same("run", "--model-dir", models["odd"], "--gen-toks", 8)
    same("run", "--model-dir", models["odd"], "--gen-toks", 8, "--json")


def test_verify_check_compare(tiny, files):
    assert same("verify", files / "r", "--model-dir", tiny).returncode == 0
    assert same("verify", files / "bad", "--model-dir", tiny).returncode == 1
    same("check", files / "r", "--config", os.path.join(tiny, "config.json"))
    same("compare", files / "r", files / "r")
    assert same("compare", files / "r", files / "bad").returncode == 1


def test_tokens_and_synth(tiny, tmp_path):
    tok = os.path.join(tiny, "tokenizer.json")
    same("tokenize", "--tokenizer", tok, "--text", PROMPT)
    same("tokenize", "--tokenizer", tok, "--text", PROMPT, "--json")
    same("detokenize", "--tokenizer", tok, "79,110,99,101")
    assert py("synth", "--shape", "tiny", "--seed", 7, "--out", tmp_path / "m").returncode == 0
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == open(os.path.join(tiny, "model.safetensors"), "rb").read()


def test_errors(tmp_path):
    a, b = py("run", "--model-dir", tmp_path / "none"), cli("run", "--model-dir", tmp_path / "none", check=False)
    assert (a.returncode, a.stderr) == (b.returncode, b.stderr) == (3, b.stderr)
    a, b = py("verify", tmp_path / "none"), cli("verify", tmp_path / "none", check=False)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
    assert py("run", "--gen-toks", "x").returncode == 2
    assert "libcis2" in py("version").stdout.decode()

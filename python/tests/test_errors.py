"""Errors as exceptions: one class per status code, each raised by a bad
input where one exists, carrying the library's one-line message (the same
line the cis2 program prints after "cis2: "); codes with no reachable bad
input (7, 8, 9, 10) go through the library's own cis2_fail.  An exception
raised in a callback cancels the run and comes out unchanged."""
import ctypes
import os

import pytest

import cis2
from cis2 import _lib
from conftest import PROMPT, cli

CLASSES = {1: cis2.Mismatch, 2: cis2.UsageError, 3: cis2.FileError, 4: cis2.FormatError, 5: cis2.Unsupported,
           6: cis2.HashMismatch, 7: cis2.FPEnvError, 8: cis2.NondeterminismError, 9: cis2.OutOfMemory,
           10: cis2.InternalError, 11: cis2.Cancelled}


def cli_message(*args):
    p = cli(*args, check=False)
    return p.returncode, p.stderr.decode().strip().splitlines()[-1]


def test_one_class_per_code():
    assert len(set(CLASSES.values())) == 11
    for code, cls in CLASSES.items():
        assert issubclass(cls, cis2.Error) and cls.code == code and cis2.error_class(code) is cls
        # no class catches another's errors
        assert [c for c in CLASSES.values() if issubclass(cls, c)] == [cls]


@pytest.mark.parametrize("code", sorted(CLASSES))
def test_status_names_are_the_librarys(code):
    assert CLASSES[code].status == _lib.get().cis2_status_name(code).decode()


@pytest.mark.parametrize("code", sorted(CLASSES))
def test_library_errors_map_to_classes(code):
    """cis2_fail fills a cis2_error as every library function does."""
    err = _lib.Err()
    rc = _lib.get().cis2_fail(ctypes.byref(err), code, b"%s", b"message from the library")
    with pytest.raises(CLASSES[code]) as ei:
        _lib.check(rc, err)
    assert ei.value.code == code and ei.value.message == str(ei.value) == "message from the library"


def test_builtin_bases():
    assert issubclass(cis2.UsageError, ValueError) and issubclass(cis2.FileError, OSError)
    assert issubclass(cis2.OutOfMemory, MemoryError)
    assert str(cis2.FileError("x: missing")) == "x: missing"


def test_file_error(tmp_path):
    missing = str(tmp_path / "nowhere")
    rc, msg = cli_message("run", "--model-dir", missing, "--gen-toks", 1)
    with pytest.raises(cis2.FileError) as ei:
        cis2.Engine(missing)
    assert (ei.value.code, "cis2: " + ei.value.message) == (rc, msg) == (3, msg)
    with pytest.raises(cis2.FileError):
        cis2.Receipt.load(missing)


def test_usage_errors(engine):
    with pytest.raises(cis2.UsageError, match="max_tokens must be at least 1"):
        engine.generate(PROMPT, gen_toks=0)
    with pytest.raises(cis2.UsageError, match="empty prompt"):
        engine.generate("", gen_toks=1)
    with pytest.raises(cis2.UsageError, match="outside the vocabulary"):
        engine.generate([100000], gen_toks=1)
    with pytest.raises(cis2.UsageError, match="top_logprobs 21"):
        engine.generate(PROMPT, gen_toks=1, top_logprobs=21)
    with pytest.raises(cis2.UsageError):
        engine.generate_batch([])
    for kw in ({"gen_toks": -1}, {"gen_toks": 2 ** 32}, {"seed": -1, "temperature": 1.0}, {"top_k": 1.5},
               {"top_logprobs": -3}):
        with pytest.raises(cis2.UsageError, match=list(kw)[0]):   # ctypes would wrap these silently
            engine.generate(PROMPT, **dict({"gen_toks": 1}, **kw))


def test_format_errors(engine, tmp_path):
    with pytest.raises(cis2.FormatError, match="line 1"):
        cis2.Receipt.parse("not a receipt\n", name="bad.txt")
    with pytest.raises(cis2.FormatError):
        engine.tokenize(b"\xff\xfe")
    with pytest.raises(cis2.FormatError):
        engine.generate(b"\xc3(", gen_toks=1)
    bad = tmp_path / "bad"
    bad.write_text("CIS-2-RECEIPT v1\nspec-version  0.3b\n")
    rc, msg = cli_message("check", bad)
    with pytest.raises(cis2.FormatError) as ei:
        cis2.Receipt.load(bad)
    assert (ei.value.code, "cis2: " + ei.value.message) == (rc, msg)


def test_format_error_from_a_damaged_checkpoint(tiny, tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    for f in ("model.safetensors", "tokenizer.json"):
        os.symlink(os.path.join(tiny, f), d / f)
    (d / "config.json").write_text("{ not json")
    rc, msg = cli_message("run", "--model-dir", d, "--gen-toks", 1)
    with pytest.raises(cis2.FormatError) as ei:
        cis2.Engine(str(d))
    assert (ei.value.code, "cis2: " + ei.value.message) == (rc, msg)


def test_unsupported(tiny, engine):
    other = "avx2" if cis2.isa() == "aarch64" else "neon"
    with pytest.raises(cis2.Unsupported, match=other):
        cis2.Engine(tiny, kernel=other)
    with pytest.raises(cis2.Unsupported, match="max_position_embeddings"):
        engine.generate(PROMPT, gen_toks=engine.config.max_position_embeddings)
    with pytest.raises(cis2.Unsupported):
        engine.kernel = other


def test_hash_mismatch(tiny, engine):
    good = engine.weights_sha256
    with cis2.Engine(tiny, expect_weights_sha256=good, expect_config_sha256=bytes.fromhex(engine.config_sha256)):
        pass
    bad = ("0" if good[0] != "0" else "1") + good[1:]
    with pytest.raises(cis2.HashMismatch) as ei:
        cis2.Engine(tiny, expect_weights_sha256=bad)
    assert good in ei.value.message and bad in ei.value.message
    with pytest.raises(cis2.UsageError):
        cis2.Engine(tiny, expect_tokenizer_sha256="abc")


def test_cancelled(engine):
    steps = []
    with pytest.raises(cis2.Cancelled, match="cancelled"):
        engine.generate(PROMPT, gen_toks=6, on_token=lambda ev: steps.append(ev.step) or ev.step == 2)
    assert steps == [0, 1, 2]


def test_mismatch_from_a_verdict(engine):
    r = engine.generate(PROMPT, gen_toks=3)
    text = r.receipt.replace(r.witness, r.witness[::-1])
    v = cis2.Receipt.parse(text).verify(engine)
    with pytest.raises(cis2.Mismatch) as ei:
        v.raise_for_status()
    assert ei.value.message == v.summary and ei.value.code == 1


def test_callback_exception_propagates(engine):
    class Boom(Exception):
        pass

    def cb(ev):
        raise Boom(ev.step)

    with pytest.raises(Boom):
        engine.generate(PROMPT, gen_toks=4, on_token=cb)
    with pytest.raises(Boom):
        engine.generate_batch(["a", "b"], gen_toks=2, on_token=cb, logits=True)
    assert len(engine.generate(PROMPT, gen_toks=2).token_ids) == 2   # the engine is fine afterwards


def test_closed_engine(tiny):
    e = cis2.Engine(tiny)
    e.close()
    e.close()
    with pytest.raises(cis2.UsageError, match="closed"):
        e.generate(PROMPT, gen_toks=1)


def test_library_not_found(tmp_path):
    import subprocess
    import sys
    env = dict(os.environ, CIS2_LIBRARY=str(tmp_path / "libnothing.so"))
    p = subprocess.run([sys.executable, "-c", "import cis2\ntry:\n cis2.library_version()\n"
                        "except cis2.LibraryNotFound as e:\n print(e)\n"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=os.path.dirname(cis2.__path__[0]))
    out = p.stdout.decode()
    assert "cannot load libcis2.so" in out and "CIS2_LIBRARY=" + str(tmp_path / "libnothing.so") in out, out + p.stderr.decode()

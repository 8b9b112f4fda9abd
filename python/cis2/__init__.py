"""cis2 from Python: canonical fp32 transformer inference with receipts.

A thin ctypes binding of libcis2.so (include/cis2.h); every number comes
from the library, so tokens, witnesses, digests, receipts and logits are
bit for bit those of the C engine and of the ``cis2`` program.

    import cis2
    with cis2.Engine("models/SmolLM2-135M") as e:
        r = e.generate("Once upon a time", gen_toks=16, logits=True)
        print(r.text, r.witness, r.logits.shape)
        print(cis2.Receipt.parse(r.receipt).verify(e).summary)   # OK

The library is found through $CIS2_LIBRARY (the path of libcis2.so, e.g.
build/libcis2.so of a source tree), else where `make install` put it
(see cis2._lib).  The library pins its own floating-point environment and
restores the interpreter's on return and around callbacks.

This file owns the public namespace and the few module-level functions.
"""
from ctypes import byref

from . import _lib
from .engine import Config, Engine, Request, Result, Score, Session, TokenEvent
from .errors import (Cancelled, Error, FileError, FormatError, FPEnvError, HashMismatch, InternalError,
                     LibraryNotFound, Mismatch, NondeterminismError, OutOfMemory, Unsupported, UsageError,
                     error_class)
from .receipt import Field, Receipt, Verdict, compare
from .tokenizer import Tokenizer

__version__ = "0.3.0"
SPEC_VERSION = "0.3b"

__all__ = ["Engine", "Config", "Request", "Result", "Score", "Session", "TokenEvent", "Tokenizer", "Receipt", "Verdict", "Field",
           "compare", "synth", "library_version", "library_path", "isa", "kernel_available",
           "Error", "Mismatch", "UsageError", "FileError", "FormatError", "Unsupported", "HashMismatch",
           "FPEnvError", "NondeterminismError", "OutOfMemory", "InternalError", "Cancelled", "LibraryNotFound",
           "error_class", "SPEC_VERSION"]


def library_version():
    """The loaded libcis2's CIS2_VERSION ("0.3.0")."""
    return _lib.get().cis2_version().decode()


def library_path():
    """The path (or soname) libcis2 was loaded from."""
    return _lib.get().path


def isa():
    """"x86-64" or "aarch64": the ISA leg compiled into the library."""
    return _lib.get().cis2_isa_name().decode()


def kernel_available(name):
    """True if this build and CPU can run the named matrix kernel."""
    return bool(_lib.get().cis2_kernel_available(name.encode()))


def synth(shape, seed, out_dir, tokenizer=None):
    """Writes a deterministic synthetic checkpoint of a shape ("tiny",
    "tiny-qwen", "odd", "smollm2-135m", ...) to out_dir, as `cis2 synth`;
    tokenizer: a tokenizer.json to copy (else a minimal byte-level one)."""
    err = _lib.Err()
    _lib.check(_lib.get().cis2_synth_write(shape.encode(), int(seed), _lib.path(out_dir),
                                           _lib.path(tokenizer) if tokenizer is not None else None,
                                           byref(err)), err)
    return out_dir

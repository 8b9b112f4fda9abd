"""Receipts and verdicts: include/cis2.h section 7 in Python.

Receipt wraps a cis2_receipt (parsed strictly by the library: a malformed
text raises FormatError naming the line); verify, check and compare return
Verdict objects, plain Python copies of cis2_verdict made before the C
verdicts are freed.  Verdict.report() is the text `cis2 verify`, `cis2
check` and `cis2 compare` print; Verdict.raise_for_status() raises the
exception class of the verdict's code (Mismatch, HashMismatch, ...).
"""
import ctypes
import os
from ctypes import byref, c_char, c_size_t, c_void_p, POINTER

from . import _lib
from ._callback import _Callback, _catching
from ._handle import _Handle
from .errors import UsageError, make_error

FIELD_STATUS = ("ok", "mismatch", "input", "unverified", "same", "differs", "note")  # enum cis2_field_status


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else None


class Field:
    """One line of a verdict: key (a receipt key), status ("ok",
    "mismatch", "input", "unverified", "same", "differs", "note") and
    detail (the rest of the report line)."""

    __slots__ = ("key", "status", "detail")

    def __init__(self, key, status, detail):
        self.key, self.status, self.detail = key, status, detail

    def __repr__(self):
        return "Field(%r, %r, %r)" % (self.key, self.status, self.detail)


class Verdict:
    """The outcome of verify, check or compare (a copy of cis2_verdict).

    name ("OK", "OUTPUT-MISMATCH", ...), summary (the whole verdict line),
    code (0, or the status class: 1, 4, 5, 6), ok (code == 0), kind (enum
    cis2_verdict_kind), source, fields (list of Field); for verify the
    first step whose claimed token is wrong (first_bad_step, else None)
    with the claimed and expected tokens and their logits' bits."""

    __slots__ = ("kind", "code", "name", "summary", "source", "fields", "first_bad_step", "claimed_token",
                 "expected_token", "claimed_logit_bits", "expected_logit_bits")

    def __init__(self, v):
        self.kind, self.code = v.kind, v.code
        self.name, self.summary, self.source = _s(v.name), _s(v.summary), _s(v.source) or ""
        self.fields = [Field(_s(f.key), FIELD_STATUS[f.status] if 0 <= f.status < len(FIELD_STATUS) else str(f.status),
                             _s(f.detail)) for f in (v.fields[i] for i in range(v.n_fields))]
        self.first_bad_step = v.first_bad_step if v.first_bad_step >= 0 else None
        self.claimed_token, self.expected_token = v.claimed_token, v.expected_token
        self.claimed_logit_bits, self.expected_logit_bits = v.claimed_logit_bits, v.expected_logit_bits

    @property
    def ok(self):
        return self.code == 0

    def field(self, key):
        """The Field of a receipt key, or None."""
        for f in self.fields:
            if f.key == key:
                return f
        return None

    def report(self):
        """The text the cis2 program prints for this verdict (one line per
        field, then `verdict: SUMMARY`), LF-terminated."""
        lines = [f.detail if not f.key else "%s %s" % (f.key, f.detail) for f in self.fields]
        lines.append("verdict: %s" % self.summary)
        return "\n".join(lines) + "\n"

    def raise_for_status(self):
        """Raises the exception class of code (with the summary) unless ok."""
        if self.code:
            raise make_error(self.code, self.summary)
        return self

    def __repr__(self):
        return "Verdict(%r)" % self.summary


def _take_verdicts(L, vs, n):
    try:
        return [Verdict(vs[i]) for i in range(n)]
    finally:
        L.cis2_verdicts_free(vs, n)


class Receipt(_Handle):
    """A CIS-2 receipt (cis2_receipt).  Make one with Receipt.parse(text),
    Receipt.load(path) or from a Result: Receipt.parse(result.receipt)."""

    _what = "receipt"

    def __init__(self, handle):
        self._h = handle

    @classmethod
    def parse(cls, text, name="receipt"):
        """Strict parse of a receipt's text (str or bytes); FormatError
        ("NAME: line N: reason") when it is malformed."""
        b = _lib.text(text)
        h = c_void_p()
        err = _lib.Err()
        _lib.check(_lib.get().cis2_receipt_parse(b, len(b), name.encode(), byref(h), byref(err)), err)
        return cls(h)

    @classmethod
    def load(cls, path):
        """Reads and parses a receipt file (FileError, FormatError)."""
        h = c_void_p()
        err = _lib.Err()
        _lib.check(_lib.get().cis2_receipt_load(_lib.path(path), byref(h), byref(err)), err)
        return cls(h)

    def close(self):
        h, self._h = self._h, None
        if h:
            _lib.get().cis2_receipt_free(h)

    @property
    def text(self):
        """The receipt's text (LF line ends), as the library renders it."""
        L = _lib.get()
        t = POINTER(c_char)()
        n = c_size_t()
        err = _lib.Err()
        _lib.check(L.cis2_receipt_render(self._handle(), byref(t), byref(n), byref(err)), err)
        return _lib.take_bytes(t, n.value).decode("ascii")

    __str__ = lambda self: self.text

    def save(self, path):
        """Writes the receipt to path, whole or not at all."""
        err = _lib.Err()
        _lib.check(_lib.get().cis2_receipt_save(self._handle(), _lib.path(path), byref(err)), err)

    def get(self, key, default=None):
        """The value of a key as written ("witness-digest" -> 64 hex digits)."""
        v = _lib.get().cis2_receipt_get(self._handle(), key.encode())
        return default if v is None else v.decode("ascii")

    def __getitem__(self, key):
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def keys(self):
        """The receipt's keys, in order."""
        return [line.split(" ", 1)[0] for line in self.text.split("\n")[1:] if line]

    def as_dict(self):
        return {k: self[k] for k in self.keys()}

    @property
    def witness(self):
        return self.get("witness-digest")

    def verify(self, engine, replay="prefill", twice=False, on_step=None):
        """Recomputes every field from engine's files -> Verdict."""
        return verify_many(engine, [self], replay, twice, on_step)[0]

    def check(self, tokenizer=None, config=None, tokenizer_ext=False):
        """The checks that need no weights (table and argmax digests, with
        a tokenizer.json / config.json path their hashes, the prompt's ids
        and the inv-freq digest) -> Verdict (CONSISTENT when nothing
        contradicts)."""
        L = _lib.get()
        v = POINTER(_lib.Verdict)()
        err = _lib.Err()
        _lib.check(L.cis2_check(self._handle(), _lib.path(tokenizer) if tokenizer is not None else None,
                                _lib.path(config) if config is not None else None,
                                _lib.OPEN_TOKENIZER_EXT if tokenizer_ext else 0, byref(v), byref(err)), err)
        return _take_verdicts(L, v, 1)[0]

    def __eq__(self, other):
        return isinstance(other, Receipt) and self.text == other.text

    __hash__ = None

    def __repr__(self):
        return "Receipt(witness-digest=%s)" % (self.witness if self._h else "<closed>")


def as_receipt(x):
    """A Receipt from a Receipt, receipt text (str/bytes) or a path (os.PathLike)."""
    if isinstance(x, Receipt):
        return x
    if isinstance(x, os.PathLike):
        return Receipt.load(x)
    if isinstance(x, (str, bytes)):
        return Receipt.parse(x)
    raise TypeError("expected a Receipt, receipt text or a path, not %s" % type(x).__name__)


def compare(a, b):
    """Judges two receipts against each other -> Verdict: SAME,
    DIFFERENT-RUN (different inputs), CONTRADICTION (same inputs, different
    outputs) or WITNESS-COLLISION (different inputs, same witness)."""
    a, b = as_receipt(a), as_receipt(b)
    L = _lib.get()
    v = POINTER(_lib.Verdict)()
    err = _lib.Err()
    _lib.check(L.cis2_compare(a._handle(), b._handle(), byref(v), byref(err)), err)
    return _take_verdicts(L, v, 1)[0]


def verify_many(engine, receipts, replay="prefill", twice=False, on_step=None):
    """Engine.verify: the receipts recomputed on engine -> list of Verdict."""
    rs = [as_receipt(r) for r in receipts]
    if not rs:
        raise UsageError("cis2: verify needs at least one receipt")
    modes = {"prefill": _lib.REPLAY_PREFILL, "decode": _lib.REPLAY_DECODE}
    if replay not in modes:
        raise UsageError("cis2: replay is 'prefill' or 'decode', not %r" % (replay,))
    cb = _Callback(on_step, None)
    o = _lib.VerifyOpts(replay=modes[replay], twice=1 if twice else 0)
    if on_step is not None:
        o.on_step = cb.fn
    arr = (c_void_p * len(rs))(*[r._handle() for r in rs])
    L = _lib.get()
    v = POINTER(_lib.Verdict)()
    err = _lib.Err()
    with engine._using() as h:   # close() from on_step: UsageError, not a freed engine
        with _catching(cb):      # KeyboardInterrupt at on_step's entry: re-raised below
            rc = L.cis2_verify(h, arr, len(rs), byref(o), byref(v), byref(err))
    if cb.exc is not None:   # re-raised whether the C call stopped at once or ran to its end
        if not rc:
            L.cis2_verdicts_free(v, len(rs))
        raise cb.exc
    _lib.check(rc, err)
    return _take_verdicts(L, v, len(rs))

"""Token callbacks: the cis2_token_fn behind generate's on_token and
logits=True, a session's on_token (engine.py) and verify's on_step
(receipt.py), and the TokenEvent they see.

Callbacks (on_token, logits=True, a session's on_token, verify's on_step)
run inside a C call.  Whatever they raise, KeyboardInterrupt from Ctrl-C
included, is kept, the C call is cancelled (the callback returns
nonzero) and the caller re-raises that same exception once the C call
has returned.  A signal that arrives while C code runs is raised by
Python at the next callback's very first instruction, before any try
block of ours can run; ctypes then reports it as "Exception ignored on
calling ctypes callback" and drops it.  So while such a call runs,
sys.unraisablehook is chained (_unraisable) to take exactly those
exceptions of our callbacks back, and hands every other one on.
"""
import contextlib
import ctypes
import sys
import threading

from . import _lib
from .errors import UsageError

try:
    import numpy as _np
except ImportError:  # numpy is optional: only logits=True needs it
    _np = None

_NO_NUMPY = ("cis2: logits=True needs numpy, which is not importable here "
             "(Debian: apt-get install python3-numpy)")


def _need_numpy():
    if _np is None:
        raise ImportError(_NO_NUMPY)
    return _np


def _finish(code):
    name = _lib.get().cis2_finish_name(code).decode()
    return name or None


class TokenEvent:
    """One generated token as reported to an on_token callback.

    index: the request's index in the batch (generate) or its id (session);
    step, token, finish (None, or "length", "eos", ... on the last token),
    logprob and top_logprobs (list of (id, logprob)) when requested.
    ``logits`` is a numpy copy of the vocab logits the token was chosen
    from, available during the callback only."""

    __slots__ = ("index", "step", "token", "finish", "logprob", "top_logprobs", "_ev", "_valid")

    def __init__(self, ev):
        self.index = ev.seq
        self.step = ev.step
        self.token = ev.token
        self.finish = _finish(ev.finish) if ev.finish else None
        self.logprob = ev.logprob
        self.top_logprobs = [(ev.top_ids[i], ev.top_logprobs[i]) for i in range(ev.n_top)] if ev.n_top else []
        self._ev = ev
        self._valid = True

    @property
    def logits(self):
        if not self._valid:
            raise UsageError("cis2: TokenEvent.logits is valid during the callback only")
        np = _need_numpy()
        ev = self._ev
        return np.ctypeslib.as_array(ev.logits, shape=(ev.vocab,)).copy()

    def __repr__(self):
        return "TokenEvent(index=%d, step=%d, token=%d, finish=%r)" % (self.index, self.step, self.token,
                                                                      self.finish)


class _Callback:
    """The cis2_token_fn behind on_token / logits=True / on_step.  Logit
    rows are memmoved straight into each request's array; any exception
    (BaseException: KeyboardInterrupt too) raised in the callback cancels
    the run and is re-raised by the caller.  Run the C call inside
    ``with _catching(cb):`` so that one raised before the callback's first
    line (a signal, see the module's docstring) is kept as well."""

    def __init__(self, on_token, logit_steps):
        self.on_token = on_token
        self.logit_steps = logit_steps   # {seq: max steps} when logits are kept, else None
        self.logits = {}                 # seq -> ndarray [max steps, vocab]
        self.rows = {}                   # seq -> rows written
        self.exc = None
        self.fn = _lib.TOKEN_FN(self._call)

    def active(self):
        return self.on_token is not None or self.logit_steps is not None

    def keep(self, e):
        """Keeps the first exception; a KeyboardInterrupt (or any other
        non-Exception) replaces an ordinary one, so Ctrl-C is never lost."""
        old = self.exc
        if old is None or (isinstance(old, Exception) and not isinstance(e, Exception)):
            self.exc = e

    def _call(self, ctx, evp):
        if self.exc is not None:   # already cancelled: the C side may still call for other sequences
            return 1
        try:
            ev = evp.contents
            if self.logit_steps is not None and ev.seq in self.logit_steps:
                a = self.logits.get(ev.seq)
                if a is None:
                    a = self.logits[ev.seq] = _np.empty((self.logit_steps[ev.seq], ev.vocab), _np.float32)
                ctypes.memmove(a.ctypes.data + ev.step * ev.vocab * 4, ev.logits, ev.vocab * 4)
                self.rows[ev.seq] = ev.step + 1
            if self.on_token is not None:
                te = TokenEvent(ev)
                try:
                    stop = self.on_token(te)
                finally:
                    te._valid = False
                return 1 if stop else 0
            return 0
        except BaseException as e:  # noqa: B902 - re-raised by the caller, KeyboardInterrupt too
            self.keep(e)
            return 1

    def take_logits(self, seq):
        if self.logit_steps is None:
            return None
        a = self.logits.pop(seq, None)
        if a is None:
            return _np.empty((0, 0), _np.float32)
        n = self.rows.get(seq, 0)
        return a if n == a.shape[0] else a[:n].copy()


# ------------------------------------------ exceptions ctypes would drop
_hook_lock = threading.Lock()
_hook_prev = None        # the sys.unraisablehook ours hands on to
_active = set()          # _Callback objects whose C call is running


def _unraisable(u):
    """sys.unraisablehook while a call with a callback runs: an exception
    that escaped one of our callbacks (raised before its try block, e.g.
    by the SIGINT handler at its first instruction) goes to that callback,
    to be re-raised by the caller; every other one to the previous hook.
    ctypes names the callback in u.object (Python <= 3.11) or in the
    message (3.12+: "... ctypes callback function <bound method ...>")."""
    obj = getattr(u, "object", None)
    cb = getattr(obj, "__self__", None)
    if not (isinstance(cb, _Callback) and cb in _active):
        msg = getattr(u, "err_msg", None) or ""
        cb = next((c for c in list(_active) if "ctypes callback" in msg and repr(c) in msg), None)
    if cb is not None and u.exc_value is not None:
        cb.keep(u.exc_value)
        return
    (_hook_prev or sys.__unraisablehook__)(u)


@contextlib.contextmanager
def _catching(cb):
    """Around a C call that may call cb: chains _unraisable in (once for
    all concurrent calls) and takes it out when the last one returns.
    A KeyboardInterrupt may land between any two calls here, so the
    bookkeeping is single calls (set.add / set.discard) inside the try."""
    global _hook_prev
    if cb is None or not cb.active():
        yield
        return
    try:
        with _hook_lock:
            if sys.unraisablehook is not _unraisable:
                prev = sys.unraisablehook
                _hook_prev = prev
                sys.unraisablehook = _unraisable
            _active.add(cb)
        yield
    finally:
        _active.discard(cb)
        with _hook_lock:
            if not _active and sys.unraisablehook is _unraisable:
                sys.unraisablehook = _hook_prev or sys.__unraisablehook__
                _hook_prev = None

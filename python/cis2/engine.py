"""Engines, generation and sessions: include/cis2.h sections 3-6 in Python.

Engine wraps a cis2_engine (one loaded checkpoint); generate and
generate_batch wrap cis2_generate, Session wraps cis2_session.  A Result
is a plain Python copy of a cis2_result (token ids, text, witness,
argmax digest, the receipt's text) made before the C result is freed,
plus, when asked, the logits: copied inside the token callback (the only
place the library exposes them) into one numpy float32 array per request,
so their bits are the engine's.  Nothing here computes anything a C user
would also need: every number comes from the library.

Callbacks (on_token, logits=True, a session's on_token, verify's on_step)
run inside a C call; whatever they raise, KeyboardInterrupt from Ctrl-C
included, is kept and re-raised by the caller once the C call has
returned (_callback.py).

An engine or session is never freed under a running call of its own:
close() from its own callback (or from another thread while it computes)
raises UsageError instead of freeing what the call is using.

Sampling floats become binary32 by one rounding of the Python float; a
nonzero value that rounds to +0.0 is refused here (docs/sampling.md
§S2.3: an underflow is not 0), everything else goes to the library,
whose §S2.2 check refuses -0.0, subnormals, NaN, infinities and values
out of range with the C API's own message.
"""
import contextlib
import ctypes
import math
import numbers
import os
import threading
import weakref
from ctypes import byref, c_char, c_float, c_size_t, c_uint8, c_uint32, c_uint64, c_void_p, POINTER

from . import _lib
from ._callback import TokenEvent, _Callback, _catching, _finish, _need_numpy  # TokenEvent: cis2.TokenEvent
from ._handle import _Handle
from .errors import Error, UsageError, make_error
from .receipt import verify_many


def _uint(name, v, bits):
    """An unsigned int parameter, checked here because ctypes would wrap a
    negative or oversized one silently."""
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < (1 << bits):
        raise UsageError("cis2: %s must be an int in 0..%d, not %r" % (name, (1 << bits) - 1, v))
    return v


_SIZE_BITS = ctypes.sizeof(c_size_t) * 8


def _f32(name, v):
    """A binary32 parameter -> (its value as a Python float, its bits).

    One rounding of the Python float to nearest binary32 (docs/sampling.md
    §S2.3).  A nonzero value that rounds to +0.0 is refused: the library
    would read +0.0 as greedy / off, so an underflow must never reach it
    (§S2.3).  Everything else, -0.0, subnormals, NaN, infinities and values
    out of range, is left to the library's §S2.2 check and its message."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise UsageError("cis2: %s must be a number, not %r" % (name, v))
    try:
        x = float(v)
    except OverflowError:   # an int beyond the double range: an infinity, refused by §S2.2
        x = math.copysign(math.inf, v)
    f = c_float(x)
    b = c_uint32.from_buffer_copy(f).value
    if b == 0 and x != 0.0:
        raise UsageError("cis2: %s %r is not zero but rounds to binary32 +0.0 (an underflow, refused: "
                         "docs/sampling.md §S2.3)" % (name, v))
    return f.value, b




class Config:
    """An engine's model configuration (cis2_model_info), read-only."""

    __slots__ = ("model_type", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                 "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tied",
                 "qkv_bias", "eos_token_ids")

    def __init__(self, mi):
        for k in self.__slots__[:-1]:
            v = getattr(mi, k)
            if k == "model_type":
                v = v.decode()
            elif k in ("tied", "qkv_bias"):
                v = bool(v)
            object.__setattr__(self, k, v)
        object.__setattr__(self, "eos_token_ids", tuple(mi.eos_ids[:mi.n_eos]))

    def __setattr__(self, k, v):
        raise AttributeError("Config is read-only")

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "Config(%s)" % ", ".join("%s=%r" % kv for kv in self.as_dict().items())




class Request:
    """One prompt and how to continue it, for generate_batch and sessions.

    prompt: str (UTF-8), bytes (raw prompt bytes) or a sequence of token
    ids.  The keyword arguments are those of Engine.generate."""

    __slots__ = ("prompt", "gen_toks", "temperature", "top_k", "top_p", "min_p", "seed", "sequence", "stop",
                 "stop_at_eos", "logprobs", "top_logprobs")

    def __init__(self, prompt, gen_toks=16, *, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, sequence=0,
                 stop=None, stop_at_eos=False, logprobs=False, top_logprobs=0):
        self.prompt, self.gen_toks = prompt, gen_toks
        self.temperature, self.top_k, self.top_p, self.min_p = temperature, top_k, top_p, min_p
        self.seed, self.sequence = seed, sequence
        self.stop, self.stop_at_eos = stop, stop_at_eos
        self.logprobs, self.top_logprobs = logprobs, top_logprobs

    def _c(self, keep):
        """The cis2_request, with every buffer it points to appended to keep."""
        r = _lib.Request()
        p = self.prompt
        if isinstance(p, (str, bytes, bytearray, memoryview)):
            b = _lib.text(p)
            buf = ctypes.create_string_buffer(b, len(b) + 1)
            keep.append(buf)
            r.text = ctypes.cast(buf, ctypes.c_char_p)
            r.text_len = len(b)
        else:
            arr, n = _lib.u32_array(p)
            keep.append(arr)
            r.ids = ctypes.cast(arr, POINTER(c_uint32))
            r.n_ids = n
        r.max_tokens = _uint("gen_toks", self.gen_toks, 32)   # 0: the library's own message
        t_bits = _f32("temperature", self.temperature)[1]
        top_p_bits = _f32("top_p", self.top_p)[1]
        min_p_bits = _f32("min_p", self.min_p)[1]
        top_k, seed = _uint("top_k", self.top_k, 32), _uint("seed", self.seed, 64)
        sequence = _uint("sequence", self.sequence, 32)
        # always the parameters as given: the library checks them (§S2.2)
        # and decides greedy and the receipt's kind (§S2.4, §S7.1)
        s = _lib.Sampling(top_k=top_k, seed=seed, sequence=sequence)
        for field, b in (("temperature", t_bits), ("top_p", top_p_bits), ("min_p", min_p_bits)):
            # the checked bits themselves (no second float conversion)
            c_uint32.from_buffer(s, getattr(_lib.Sampling, field).offset).value = b
        keep.append(s)
        r.sampling = ctypes.pointer(s)
        stop = self.stop
        if stop is None:
            stop = []
        elif isinstance(stop, (str, bytes, int)):
            stop = [stop]
        ids = [x for x in stop if isinstance(x, int) and not isinstance(x, bool)]
        strs = [_lib.text(x) for x in stop if not (isinstance(x, int) and not isinstance(x, bool))]
        if ids or strs or self.stop_at_eos:
            st = _lib.Stop(eos=1 if self.stop_at_eos else 0)
            if ids:
                arr, n = _lib.u32_array(ids)
                keep.append(arr)
                st.ids, st.n_ids = ctypes.cast(arr, POINTER(c_uint32)), n
            if strs:
                bufs = [ctypes.create_string_buffer(s, len(s) + 1) for s in strs]
                ptrs = (ctypes.c_char_p * len(strs))(*[ctypes.cast(b, ctypes.c_char_p) for b in bufs])
                lens = (c_size_t * len(strs))(*[len(s) for s in strs])
                keep += [bufs, ptrs, lens]
                st.strings, st.string_lens, st.n_strings = ptrs, lens, len(strs)
            keep.append(st)
            r.stop = ctypes.pointer(st)
        r.top_logprobs = _uint("top_logprobs", self.top_logprobs, 32)
        r.logprobs = 1 if (self.logprobs or self.top_logprobs) else 0
        return r


class Result:
    """One generated sequence (a copy of cis2_result).

    token_ids, prompt_ids (lists of ints), prompt (the prompt bytes, or None
    for ids that do not round-trip), text (the completion for display),
    finish ("length", ...), witness (CIS2_REF) and argmax_digest (64 hex
    digits each), receipt (the CIS-2 receipt's text, also for ids that do
    not round-trip: it then records them as ids, with a `prompt-from ids`
    line, docs/receipts.md "Prompts given as ids"; raises the library's
    error when the run has none, e.g. a cancelled run), logprobs
    (one float per step: the binary32 value) and top_logprobs (per step a
    list of (id, logprob)) when requested, else None; logits (numpy float32
    [steps, vocab]) when asked with logits=True, else None."""

    __slots__ = ("token_ids", "prompt_ids", "prompt", "text", "finish", "witness", "argmax_digest", "logprobs",
                 "top_logprobs", "logits", "_receipt", "_receipt_err")

    def __init__(self, engine, r, logits):
        self.prompt = ctypes.string_at(r.prompt, r.prompt_len) if r.prompt else None
        self.prompt_ids = r.prompt_ids[:r.n_prompt] if r.n_prompt else []
        self.token_ids = r.tokens[:r.n_tokens] if r.n_tokens else []
        self.text = ctypes.string_at(r.text, r.text_len).decode("utf-8", "replace") if r.text else None
        self.finish = _finish(r.finish) if r.finish else None
        self.witness = _lib.hexs(r.witness)
        self.argmax_digest = _lib.hexs(r.argmax_digest)
        self.logprobs = r.logprobs[:r.n_tokens] if r.logprobs else None
        if r.n_top and r.top_ids:
            k = r.n_top
            ids, lps = r.top_ids[:k * r.n_tokens], r.top_logprobs[:k * r.n_tokens]
            self.top_logprobs = [list(zip(ids[i * k:(i + 1) * k], lps[i * k:(i + 1) * k])) for i in range(r.n_tokens)]
        else:
            self.top_logprobs = [[] for _ in range(r.n_tokens)] if r.logprobs else None
        self.logits = logits
        self._receipt, self._receipt_err = None, None
        L = _lib.get()
        err = _lib.Err()
        h = c_void_p()
        try:
            _lib.check(L.cis2_receipt_make(engine._handle(), byref(r), byref(h), byref(err)), err)
            txt = POINTER(c_char)()
            n = c_size_t()
            _lib.check(L.cis2_receipt_render(h, byref(txt), byref(n), byref(err)), err)
            self._receipt = _lib.take_bytes(txt, n.value).decode("ascii")
        except Error as e:
            self._receipt_err = (e.code, e.message)
        finally:
            L.cis2_receipt_free(h)

    @property
    def receipt(self):
        """The receipt's text, byte for byte what `cis2 run --receipt` writes."""
        if self._receipt is None:
            raise make_error(*self._receipt_err)
        return self._receipt

    @property
    def cis2_ref(self):
        """The spec's CIS2_REF line, as `cis2 run` prints it (prompt_idx=0)."""
        return "CIS2_REF digest=%s prompt_idx=0 prompt_toks=%d gen_toks=%d dtype=fp32" % (
            self.witness, len(self.prompt_ids), len(self.token_ids))

    def __repr__(self):
        return "Result(token_ids=%r, witness=%r)" % (self.token_ids, self.witness)


def _f32_hex(v):
    return "%08x" % c_uint32.from_buffer_copy(c_float(v)).value


class Score:
    """The scores of one continuation after one context (a copy of
    cis2_score_result, docs/sampling.md §S11).

    context_ids, ids (the continuation's ids, lists of ints); first: the
    index of the first scored token (1 with no context: the first token
    has no row to be scored by, else 0); per continuation token: logprobs
    (the binary32 value as a float, None when unscored), bits (its 8 hex
    digits, None when unscored), ranks (1-based in the candidate order of
    §S3.3; 0 when unscored or NaN), greedy (bool: §11.2's argmax of its
    row), top_logprobs (a list of (id, logprob), [] when unscored);
    n_scored, sum (the §S11.3 f32 sum, a float), sum_bits, sum_f64,
    all_greedy; receipt: the score receipt's text ("CIS-2-RECEIPT
    ext-score-1", docs/receipts.md "Score receipts") when scored with
    receipt=True, else None."""

    __slots__ = ("context_ids", "ids", "first", "logprobs", "bits", "ranks", "greedy", "top_logprobs", "n_scored",
                 "sum", "sum_bits", "sum_f64", "all_greedy", "receipt")

    def __init__(self, r):
        n, k = r.n_ids, r.n_top
        self.context_ids = r.context_ids[:r.n_context] if r.n_context else []
        self.ids = r.ids[:n]
        self.first = r.first
        lps = r.logprobs[:n]
        scored = [i >= r.first for i in range(n)]
        self.logprobs = [lp if s else None for lp, s in zip(lps, scored)]
        self.bits = [_f32_hex(lp) if s else None for lp, s in zip(lps, scored)]
        self.ranks = r.ranks[:n]
        self.greedy = [bool(g) for g in r.greedy[:n]]
        if k:
            ids, tl = r.top_ids[:k * n], r.top_logprobs[:k * n]
            self.top_logprobs = [[(ids[i * k + j], tl[i * k + j]) for j in range(k) if ids[i * k + j] != 0xFFFFFFFF]
                                 for i in range(n)]
        else:
            self.top_logprobs = [[] for _ in range(n)]
        self.n_scored = r.n_scored
        self.sum = r.sum
        self.sum_bits = _f32_hex(r.sum)
        self.sum_f64 = r.sum_f64
        self.all_greedy = bool(r.all_greedy)
        self.receipt = None

    def __repr__(self):
        return "Score(ids=%r, sum=%r, all_greedy=%r)" % (self.ids, self.sum, self.all_greedy)


def _score_part(req, name, v, keep):
    """Fills the text or ids fields of one part (context / continuation)."""
    if v is None:
        return
    if isinstance(v, (str, bytes, bytearray, memoryview)):
        b = _lib.text(v)
        buf = ctypes.create_string_buffer(b, len(b) + 1)
        keep.append(buf)
        setattr(req, name, ctypes.cast(buf, ctypes.c_char_p))
        setattr(req, name + "_len", len(b))
    else:
        arr, n = _lib.u32_array(v)
        keep.append(arr)
        setattr(req, name + "_ids", ctypes.cast(arr, POINTER(c_uint32)))
        setattr(req, "n_" + name + "_ids", n)


def _is_one_part(v):
    """A single continuation (text, bytes or a list of ids), not a list of them."""
    if isinstance(v, (str, bytes, bytearray, memoryview)):
        return True
    v = list(v)
    return bool(v) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


def _as_request(p, kw):
    return p if isinstance(p, Request) else Request(p, **kw)


class Engine(_Handle):
    """One loaded checkpoint (cis2_engine): model_dir/model.safetensors,
    config.json and tokenizer.json, hashed and packed.

    threads: worker threads incl. the caller (None: online CPUs); kernel:
    "auto" (None), "scalar", "avx2", "avx512", "neon"; tokenizer_ext:
    admit Qwen2.5's tokenizer shape (outside CIS-2 v0.3b §3);
    expect_*_sha256: pinned hashes (hex or 32 bytes), else HashMismatch.
    Use as a context manager, or call close()."""

    _what = "engine"

    def __init__(self, model_dir, threads=None, kernel=None, *, tokenizer_ext=False, expect_weights_sha256=None,
                 expect_config_sha256=None, expect_tokenizer_sha256=None):
        L = _lib.get()
        self._h = None
        self._lock = threading.Lock()
        self._calls = []      # one token per call running on this engine (close() refuses meanwhile)
        self._sessions = weakref.WeakSet()
        o = _lib.EngineOpts(threads=int(threads or 0), kernel=kernel.encode() if kernel else None,
                            flags=_lib.OPEN_TOKENIZER_EXT if tokenizer_ext else 0)
        keep = []
        for name, v in (("weights", expect_weights_sha256), ("config", expect_config_sha256),
                        ("tokenizer", expect_tokenizer_sha256)):
            if v is None:
                continue
            try:
                raw = bytes.fromhex(v) if isinstance(v, str) else bytes(v)
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise UsageError("cis2: expect_%s_sha256 must be 64 hex digits or 32 bytes" % name)
            buf = (c_uint8 * 32)(*raw)
            keep.append(buf)
            setattr(o, "expect_%s_sha256" % name, ctypes.cast(buf, POINTER(c_uint8)))
        h = c_void_p()
        err = _lib.Err()
        _lib.check(L.cis2_engine_open(byref(h), _lib.path(model_dir), byref(o), byref(err)), err)
        self._h = h

    # -------------------------------------------------------- lifetime
    def close(self):
        """Releases the engine (its weights and worker threads), closing its
        sessions first.  UsageError while a call on it runs (from its own
        callback, or another thread generating with it): close it after
        the call returns."""
        lock = getattr(self, "_lock", None)
        if lock is None:   # __init__ failed before there was anything to close
            return
        with lock:
            if self._calls:
                raise UsageError("cis2: Engine.close() while a call on this engine is running (from its own "
                                 "callback, or another thread); close it after the call returns")
            h, self._h = self._h, None
            sessions = list(self._sessions)
        for s in sessions:
            s._close_for_engine()
        if h:
            _lib.get().cis2_engine_close(h)

    @contextlib.contextmanager
    def _using(self):
        """The handle, held for a call: close() refuses until it returns.
        The call's token goes in and out by single list operations inside
        the try, so a KeyboardInterrupt between any two statements never
        leaves the engine marked busy."""
        tok = object()
        try:
            with self._lock:   # not closed meanwhile: close() checks _calls under the lock
                h = self._handle()
                self._calls.append(tok)
            yield h
        finally:
            try:
                self._calls.remove(tok)
            except ValueError:   # interrupted before it went in
                pass

    # ------------------------------------------- configuration, digests
    def _info(self):
        return _lib.get().cis2_engine_info(self._handle()).contents

    @property
    def config(self):
        """The model configuration (Config)."""
        return Config(self._info())

    weights_sha256 = property(lambda self: _lib.hexs(self._info().weights_sha256), doc="§2.1")
    config_sha256 = property(lambda self: _lib.hexs(self._info().config_sha256), doc="§2.1")
    tokenizer_sha256 = property(lambda self: _lib.hexs(self._info().tokenizer_sha256), doc="§2.1")
    table_digest = property(lambda self: _lib.hexs(self._info().table_digest), doc="§6.6")
    inv_freq_table_digest = property(lambda self: _lib.hexs(self._info().inv_freq_table_digest), doc="§7.2")
    weight_bytes = property(lambda self: self._info().weight_bytes,
                            doc="packed weight bytes read per decoded token")
    has_tokenizer = property(lambda self: bool(self._info().has_tokenizer))
    tokenizer_normative = property(lambda self: bool(self._info().tokenizer_normative))
    model_dir = property(lambda self: os.fsdecode(self._info().model_dir))

    @property
    def kernel(self):
        """The matrix kernel in use; assign a name to change it (never changes a bit)."""
        return self._info().kernel.decode()

    @kernel.setter
    def kernel(self, name):
        err = _lib.Err()
        _lib.check(_lib.get().cis2_engine_set_kernel(self._handle(), name.encode() if name else None,
                                                     byref(err)), err)

    @property
    def threads(self):
        """Worker threads incl. the caller; assign to change (never changes a bit)."""
        return self._info().threads

    @threads.setter
    def threads(self, n):
        err = _lib.Err()
        _lib.check(_lib.get().cis2_engine_set_threads(self._handle(), int(n or 0), byref(err)), err)

    @property
    def speculate(self):
        """Speculative decoding of later generate and session calls: "off"
        (default), "lookup" or "lookup:K" (prompt lookup), "draft:DIR" or
        "draft:DIR:K" (a smaller model in DIR with the same tokenizer.json
        drafts; K 1..16, default 4; docs/speculate.md).
        Assign to change; never changes a bit, only the time."""
        return getattr(self, "_speculate", "off")

    @speculate.setter
    def speculate(self, spec):
        spec = spec or "off"
        err = _lib.Err()
        _lib.check(_lib.get().cis2_engine_set_speculate(self._handle(), spec.encode(), byref(err)), err)
        self._speculate = spec
        self._drafter = None

    def set_drafter(self, fn, k=4):
        """Speculative decoding with drafts of your own (cis2_engine_set_drafter):
        fn(prompt_ids, generated_ids, max_k) -> a list of up to max_k
        proposed next ids, called per decoding sequence per step; every
        draft is checked, so none changes a bit (only the time).  fn None
        turns speculation off.  An exception in fn counts as no draft."""
        err = _lib.Err()
        if fn is None:
            _lib.check(_lib.get().cis2_engine_set_drafter(self._handle(), _lib.DRAFT_FN(), None, 0, byref(err)), err)
            self._drafter, self._speculate = None, "off"
            return

        def cb(_ctx, prompt, n_prompt, gen, n_gen, max_k, out):
            try:
                d = list(fn(prompt[:n_prompt], gen[:n_gen], max_k))[:max_k]
                for i, t in enumerate(d):
                    out[i] = int(t) & 0xFFFFFFFF
                return len(d)
            except Exception:  # a drafter's error is no draft: the output cannot change
                return 0
        c = _lib.DRAFT_FN(cb)
        _lib.check(_lib.get().cis2_engine_set_drafter(self._handle(), c, None, _uint("k", k, 32), byref(err)), err)
        self._drafter, self._speculate = c, "drafter:%d" % k

    def __repr__(self):
        return "Engine(%r)" % (self.model_dir if self._h else "<closed>")

    # ------------------------------------------------------------ tokens
    def tokenize(self, text):
        """§3.1 encoding of text (str, or bytes taken as they are) -> list of ids."""
        b = _lib.text(text)
        L = _lib.get()
        ids = POINTER(c_uint32)()
        n = c_size_t()
        err = _lib.Err()
        _lib.check(L.cis2_engine_tokenize(self._handle(), b, len(b), byref(ids), byref(n), byref(err)), err)
        try:
            return ids[:n.value] if n.value else []
        finally:
            L.cis2_free(ctypes.cast(ids, c_void_p))

    def detokenize(self, ids, raw=False):
        """The ids' text (invalid UTF-8 shown as U+FFFD), or with raw=True their bytes."""
        arr, n = _lib.u32_array(ids)
        L = _lib.get()
        txt = POINTER(c_char)()
        ln = c_size_t()
        err = _lib.Err()
        _lib.check(L.cis2_engine_detokenize(self._handle(), arr, n, 0 if raw else 1, byref(txt), byref(ln),
                                            byref(err)), err)
        b = _lib.take_bytes(txt, ln.value)
        return b if raw else b.decode("utf-8", "replace")

    # -------------------------------------------------------- generation
    def generate(self, prompt, gen_toks=16, on_token=None, logits=False, *, twice=True, **kw):
        """Generates gen_toks tokens after prompt (str, bytes or ids) -> Result.

        on_token(event) is called for each token (a truthy return cancels:
        Cancelled; an exception it raises, KeyboardInterrupt included,
        cancels and comes out as it was); logits=True keeps every step's
        logits in result.logits.
        twice: the §12.4 double run, as the CLI does (NondeterminismError).
        Sampling and stop rules (docs/sampling.md): temperature, top_k,
        top_p, min_p, seed, sequence, stop (a str/bytes stop string, an int
        stop id, or a list of them), stop_at_eos, logprobs, top_logprobs;
        the floats become binary32 by one rounding of the Python float
        (a nonzero one that rounds to +0.0 is refused: only 0.0 is greedy).
        The library validates the bits (UsageError, docs/sampling.md §S2.2:
        -0.0, subnormals, NaN, infinities, top_p 0 are refused)."""
        if isinstance(prompt, Request):
            if kw or gen_toks != 16:
                raise UsageError("cis2: give the options in the Request or as arguments, not both")
            req = prompt
        else:
            req = Request(prompt, gen_toks, **kw)
        return self.generate_batch([req], on_token=on_token, logits=logits, twice=twice)[0]

    def generate_batch(self, prompts, gen_toks=16, on_token=None, logits=False, *, twice=True, max_batch=0, **kw):
        """Generates for many prompts together, sharing every weight pass ->
        list of Result, each bit for bit its solo run.  Elements are prompts
        (options from the keyword arguments) or Request objects; on_token
        events carry the request's index.  max_batch: sequences decoded
        together (0: the library's 32; any size_t, and one above the number
        of prompts means all of them)."""
        reqs = [_as_request(p, dict(kw, gen_toks=gen_toks)) for p in prompts]
        if not reqs:
            raise UsageError("cis2: generate_batch needs at least one prompt")
        if logits:
            _need_numpy()
        # any size_t: the library reads one above the number of prompts as all of them
        max_batch = _uint("max_batch", max_batch, _SIZE_BITS)
        keep = []
        creqs = (_lib.Request * len(reqs))(*[r._c(keep) for r in reqs])
        cb = _Callback(on_token, {i: r.gen_toks for i, r in enumerate(reqs)} if logits else None)
        o = _lib.GenOpts(twice=1 if twice else 0, max_batch=max_batch)
        if cb.active():
            o.on_token = cb.fn
        L = _lib.get()
        res = POINTER(_lib.Result)()
        err = _lib.Err()
        with self._using() as h:
            with _catching(cb):
                rc = L.cis2_generate(h, creqs, len(reqs), byref(o), byref(res), byref(err))
            if cb.exc is not None:
                if not rc:
                    L.cis2_results_free(res, len(reqs))
                raise cb.exc
            _lib.check(rc, err)
            try:
                return [Result(self, res[i], cb.take_logits(i)) for i in range(len(reqs))]
            finally:
                L.cis2_results_free(res, len(reqs))

    # ----------------------------------------------------------- scoring
    def score(self, context, continuations, top_logprobs=0, receipt=False):
        """The logprobs of continuation tokens after context (docs/sampling.md
        §S11) -> Score, or a list of Score for a list of continuations.

        context: str, bytes, a list of ids, or None (no context: the first
        continuation token is not scored); continuations: one continuation
        (str, bytes or a list of ids) or a list of them.  Text is tokenized
        on its own (context and continuation apart, then joined: §S11.1).
        The continuations of one context share its prefill and every weight
        pass; each Score is bit for bit the one computed alone, and each
        logprob is the one generate(..., logprobs=True) reports when it
        generates the same token.  receipt=True also makes each Score's
        receipt (cis2_score_receipts), which Receipt.parse(s.receipt)
        .verify(engine) re-derives."""
        one = _is_one_part(continuations)
        conts = [continuations] if one else list(continuations)
        out = self.score_batch([(context, c) for c in conts], top_logprobs, receipt)
        return out[0] if one else out

    def score_batch(self, pairs, top_logprobs=0, receipt=False):
        """Scores many (context, continuation) pairs together, sharing every
        weight pass and computing each distinct context once -> list of Score
        (with receipt=True each with its receipt's text)."""
        pairs = list(pairs)
        if not pairs:
            raise UsageError("cis2: score needs at least one continuation")
        keep = []
        creqs = (_lib.ScoreRequest * len(pairs))()
        t = _uint("top_logprobs", top_logprobs, 32)
        for q, (ctx, cont) in zip(creqs, pairs):
            _score_part(q, "context", ctx, keep)
            if cont is None:
                raise UsageError("cis2: a continuation is required")
            _score_part(q, "continuation", cont, keep)
            q.top_logprobs = t
        L = _lib.get()
        n = len(pairs)
        res = POINTER(_lib.ScoreResult)()
        err = _lib.Err()
        if not receipt:
            with self._using() as h:
                _lib.check(L.cis2_score(h, creqs, n, byref(res), byref(err)), err)
                try:
                    return [Score(res[i]) for i in range(n)]
                finally:
                    L.cis2_score_results_free(res, n)
        rs = (c_void_p * n)()
        with self._using() as h:
            _lib.check(L.cis2_score_receipts(h, creqs, n, byref(res), rs, byref(err)), err)
        try:
            out = [Score(res[i]) for i in range(n)]
            for s, r in zip(out, rs):
                txt, k = POINTER(c_char)(), c_size_t()
                _lib.check(L.cis2_receipt_render(r, byref(txt), byref(k), byref(err)), err)
                s.receipt = _lib.take_bytes(txt, k.value).decode("ascii")
            return out
        finally:
            L.cis2_score_results_free(res, n)
            for r in rs:
                if r:
                    L.cis2_receipt_free(r)

    def session(self, max_batch=0, prefill_chunk=0, on_token=None, logits=False):
        """A Session on this engine (continuous batching)."""
        return Session(self, max_batch, prefill_chunk, on_token, logits)

    # ------------------------------------------------------ verification
    def verify(self, receipts, replay="prefill", twice=False, on_step=None):
        """Recomputes every field of the receipts (Receipt objects, receipt
        text, or os.PathLike paths) from this engine's files, sharing each
        weight pass and computing a prompt prefix they share once -> list
        of Verdict.  replay: "prefill" (teacher-forced,
        the default) or "decode"; on_step(event) sees every recomputed step
        (event.logits are the recomputed logits)."""
        return verify_many(self, receipts, replay, twice, on_step)


class Session(_Handle):
    """Sequences that join and leave a running batch (cis2_session).

    add() queues a request and returns its id; step() is one pass of the
    model (every running sequence advances a token) and returns how many
    are still running or queued; take(id) returns a finished sequence's
    Result.  Each result is bit for bit the same request run alone.  One
    thread at a time per session."""

    _what = "session"

    def __init__(self, engine, max_batch=0, prefill_chunk=0, on_token=None, logits=False):
        if logits:
            _need_numpy()
        self._engine = engine
        self._h = None
        self._stepping = []   # a token while step() runs: close() refuses meanwhile
        self._cb = _Callback(on_token, {} if logits else None)
        o = _lib.SessionOpts(max_batch=_uint("max_batch", max_batch, _SIZE_BITS),
                             prefill_chunk=_uint("prefill_chunk", prefill_chunk, _SIZE_BITS))
        if self._cb.active():
            o.on_token = self._cb.fn
        self._keep = {}   # id -> the buffers its request points to, until taken
        h = c_void_p()
        err = _lib.Err()
        _lib.check(_lib.get().cis2_session_open(byref(h), engine._handle(), byref(o), byref(err)), err)
        self._h = h
        engine._sessions.add(self)

    def close(self):
        """Releases the session.  UsageError during its own step() (from its
        callback): close it after step() returns."""
        if getattr(self, "_stepping", None):
            raise UsageError("cis2: Session.close() while this session's step() is running (from its own "
                             "callback?); close it after step() returns")
        self._close_for_engine()

    def _close_for_engine(self):
        h, self._h = self._h, None
        if h:
            _lib.get().cis2_session_close(h)

    def add(self, prompt, gen_toks=16, **kw):
        """Queues a prompt (or a Request) -> its id."""
        req = prompt if isinstance(prompt, Request) else Request(prompt, gen_toks, **kw)
        keep = []
        cr = req._c(keep)
        i = c_uint64()
        err = _lib.Err()
        _lib.check(_lib.get().cis2_session_add(self._handle(), byref(cr), byref(i), byref(err)), err)
        self._keep[i.value] = keep
        if self._cb.logit_steps is not None:
            self._cb.logit_steps[i.value] = req.gen_toks
        return i.value

    def step(self):
        """One pass of the model -> sequences still running or queued."""
        n = c_size_t()
        err = _lib.Err()
        h = self._handle()
        tok = object()
        with self._engine._using():
            try:
                self._stepping.append(tok)
                with _catching(self._cb):
                    rc = _lib.get().cis2_session_step(h, byref(n), byref(err))
            finally:
                try:
                    self._stepping.remove(tok)
                except ValueError:   # interrupted before it went in
                    pass
        if self._cb.exc is not None:
            e, self._cb.exc = self._cb.exc, None
            raise e
        _lib.check(rc, err)
        return n.value

    def run(self):
        """Steps until nothing is running or queued."""
        while self.step():
            pass

    def cancel(self, seq_id):
        """Ends a queued or running sequence now (its finish is "cancelled")."""
        rc = _lib.get().cis2_session_cancel(self._handle(), seq_id)
        if rc:
            raise make_error(rc, "session: cannot cancel sequence %d (%s)"
                             % (seq_id, _lib.get().cis2_status_name(rc).decode()))

    def done(self, seq_id):
        """True once the sequence has finished (UsageError for an unknown id)."""
        d = _lib.get().cis2_session_done(self._handle(), seq_id)
        if d < 0:
            raise UsageError("session: no sequence %d" % seq_id)
        return bool(d)

    def take(self, seq_id):
        """The finished sequence's Result (it leaves the session)."""
        L = _lib.get()
        res = POINTER(_lib.Result)()
        err = _lib.Err()
        with self._engine._using():
            _lib.check(L.cis2_session_take(self._handle(), seq_id, byref(res), byref(err)), err)
            try:
                self._keep.pop(seq_id, None)
                if self._cb.logit_steps is not None:
                    self._cb.logit_steps.pop(seq_id, None)
                return Result(self._engine, res[0], self._cb.take_logits(seq_id))
            finally:
                L.cis2_results_free(res, 1)

    @property
    def pending(self):
        """Sequences running or queued."""
        return _lib.get().cis2_session_pending(self._handle())

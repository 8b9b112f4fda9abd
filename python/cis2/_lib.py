"""Finding and loading libcis2.so, and its C API mirrored in ctypes.

This module owns the binding itself: where the shared library is looked
for, the ctypes.Structure mirror of every public struct of
include/cis2.h (field for field, in order, with the same types), the
argument and result types of every function the package calls, and the
one place where a status code becomes an exception (``check``).  Nothing
here knows about engines or receipts as Python objects; engine.py and
receipt.py build those on top.

Where the library is looked for, in order (the first of the right
version wins):

1. ``$CIS2_LIBRARY``: the path of libcis2.so (or of a directory holding
   it), e.g. ``build/libcis2.so`` of a build tree; when set, nothing else
   is tried;
2. ``lib/libcis2.so.0`` of the prefix this package is installed in: the
   library ``make install PREFIX=P`` put beside ``pip install --prefix P``
   (also under Debian's P/local/lib/python3.X/dist-packages) or beside a
   virtual environment P's site-packages.  It comes before the loader's
   search so that an older copy elsewhere (the ld.so cache after an
   earlier ``make install`` + ldconfig) cannot shadow the library that was
   installed with the package (docs/python.md "Finding the library");
3. ``libcis2.so.0`` through the dynamic loader's own search
   (LD_LIBRARY_PATH, the ld.so cache), then ``ctypes.util.find_library``;
4. ``lib/libcis2.so.0`` of ``sys.prefix`` and of /usr/local (``make
   install``'s default prefix, found even before ldconfig has run).

The library is loaded on first use, not at import, so ``import cis2`` and
its exception classes work without it.  The struct layouts are those of
CIS2_VERSION ABI_VERSION and CIS2_ABI_VERSION STRUCT_ABI below; a library
of another version is passed over (and unloaded) for the next place.  If
none is right, LibraryNotFound names every place tried and why each
failed, the wrong versions with their paths first.
"""
import ctypes
import ctypes.util
import os
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_float, c_int, c_longlong, c_size_t,
                    c_uint, c_uint8, c_uint32, c_uint64, c_void_p)

from .errors import LibraryNotFound, make_error

ENV_VAR = "CIS2_LIBRARY"
ABI_VERSION = "0.3"   # major.minor of CIS2_VERSION these structs mirror
STRUCT_ABI = 3        # CIS2_ABI_VERSION (include/cis2.h) of the structs mirrored below
SONAME = "libcis2.so.0"

# enum cis2_status (include/cis2.h section 1)
OK, E_MISMATCH, E_USAGE, E_IO, E_FORMAT, E_UNSUPPORTED, E_HASH, E_FPENV, E_NONDET, E_NOMEM, E_INTERNAL, \
    E_CANCELLED = range(12)
OPEN_TOKENIZER_EXT = 1      # CIS2_OPEN_TOKENIZER_EXT
TOK_ALLOW_NONNORMATIVE = 1  # CIS2_TOK_ALLOW_NONNORMATIVE
REPLAY_PREFILL, REPLAY_DECODE = 0, 1
MAX_TOP_LOGPROBS = 20


# ---------------------------------------------------------------- structs
# Each mirrors the struct of the same name in include/cis2.h; field order
# and types must match it exactly (python/tests/test_abi.py compiles a C
# program against the header and compares every offset and size).

class Err(Structure):  # cis2_error
    _fields_ = [("code", c_int), ("msg", c_char * 512)]


class EngineOpts(Structure):  # cis2_engine_opts
    _fields_ = [("threads", c_int), ("kernel", c_char_p), ("flags", c_uint),
                ("expect_weights_sha256", POINTER(c_uint8)), ("expect_config_sha256", POINTER(c_uint8)),
                ("expect_tokenizer_sha256", POINTER(c_uint8))]


class ModelInfo(Structure):  # cis2_model_info
    _fields_ = [("model_type", c_char * 32),
                ("hidden_size", c_size_t), ("intermediate_size", c_size_t), ("num_layers", c_size_t),
                ("num_heads", c_size_t), ("num_kv_heads", c_size_t), ("head_dim", c_size_t),
                ("vocab_size", c_size_t), ("max_position_embeddings", c_size_t),
                ("rms_norm_eps", c_float), ("rope_theta", c_float), ("tied", c_int), ("qkv_bias", c_int),
                ("weight_bytes", c_size_t),
                ("weights_sha256", c_uint8 * 32), ("config_sha256", c_uint8 * 32),
                ("tokenizer_sha256", c_uint8 * 32), ("table_digest", c_uint8 * 32),
                ("inv_freq_table_digest", c_uint8 * 32),
                ("n_eos", c_size_t), ("eos_ids", c_uint32 * 64), ("eos_malformed", c_int), ("has_tokenizer", c_int),
                ("tokenizer_normative", c_int), ("kernel", c_char_p), ("threads", c_int), ("model_dir", c_char_p)]


class Sampling(Structure):  # cis2_sampling
    _fields_ = [("temperature", c_float), ("top_k", c_uint32), ("top_p", c_float), ("min_p", c_float),
                ("seed", c_uint64), ("sequence", c_uint32)]


class Stop(Structure):  # cis2_stop
    _fields_ = [("eos", c_int), ("ids", POINTER(c_uint32)), ("n_ids", c_size_t),
                ("strings", POINTER(c_char_p)), ("string_lens", POINTER(c_size_t)), ("n_strings", c_size_t)]


class Request(Structure):  # cis2_request
    _fields_ = [("text", c_char_p), ("text_len", c_size_t), ("ids", POINTER(c_uint32)), ("n_ids", c_size_t),
                ("max_tokens", c_size_t), ("sampling", POINTER(Sampling)), ("stop", POINTER(Stop)),
                ("top_logprobs", c_uint), ("logprobs", c_int), ("user", c_void_p)]


class TokenEvent(Structure):  # cis2_token_event
    _fields_ = [("seq", c_uint64), ("user", c_void_p), ("step", c_size_t), ("token", c_uint32),
                ("logits", POINTER(c_float)), ("vocab", c_size_t), ("finish", c_int), ("logprob", c_float),
                ("n_top", c_size_t), ("top_ids", POINTER(c_uint32)), ("top_logprobs", POINTER(c_float))]


TOKEN_FN = CFUNCTYPE(c_int, c_void_p, POINTER(TokenEvent))                     # cis2_token_fn
STOP_FN = CFUNCTYPE(c_int, c_void_p)                                           # cis2_verify_opts.should_stop
TRACE_FN = CFUNCTYPE(None, c_void_p, c_size_t, c_size_t, c_int, c_char_p, POINTER(c_float), c_size_t)
DRAFT_FN = CFUNCTYPE(c_size_t, c_void_p, POINTER(c_uint32), c_size_t, POINTER(c_uint32), c_size_t, c_size_t,
                     POINTER(c_uint32))                                          # cis2_draft_fn


class GenOpts(Structure):  # cis2_gen_opts
    _fields_ = [("twice", c_int), ("on_token", TOKEN_FN), ("on_token_ctx", c_void_p),
                ("on_trace", TRACE_FN), ("on_trace_ctx", c_void_p), ("max_batch", c_size_t),
                ("recompute", c_int)]


class Result(Structure):  # cis2_result
    _fields_ = [("prompt", POINTER(c_char)), ("prompt_len", c_size_t), ("prompt_ids", POINTER(c_uint32)),
                ("n_prompt", c_size_t), ("tokens", POINTER(c_uint32)), ("n_tokens", c_size_t),
                ("finish", c_int), ("witness", c_uint8 * 32), ("argmax_digest", c_uint8 * 32),
                ("text", POINTER(c_char)), ("text_len", c_size_t), ("logprobs", POINTER(c_float)),
                ("n_top", c_size_t), ("top_ids", POINTER(c_uint32)), ("top_logprobs", POINTER(c_float)),
                ("priv", c_void_p)]


class SessionOpts(Structure):  # cis2_session_opts
    _fields_ = [("max_batch", c_size_t), ("prefill_chunk", c_size_t), ("on_token", TOKEN_FN),
                ("on_token_ctx", c_void_p), ("kv_budget", c_size_t)]


class Field(Structure):  # cis2_field
    _fields_ = [("key", c_char_p), ("status", c_int), ("detail", c_char_p)]


class Verdict(Structure):  # cis2_verdict
    _fields_ = [("kind", c_int), ("code", c_int), ("name", c_char_p), ("summary", c_char_p),
                ("source", c_char_p), ("n_fields", c_size_t), ("fields", POINTER(Field)),
                ("first_bad_step", c_longlong), ("claimed_token", c_uint32), ("expected_token", c_uint32),
                ("claimed_logit_bits", c_uint32), ("expected_logit_bits", c_uint32), ("priv", c_void_p)]


class VerifyOpts(Structure):  # cis2_verify_opts
    _fields_ = [("replay", c_int), ("twice", c_int), ("on_step", TOKEN_FN), ("on_step_ctx", c_void_p),
                ("should_stop", STOP_FN), ("should_stop_ctx", c_void_p)]


class ScoreRequest(Structure):  # cis2_score_request
    _fields_ = [("context", c_char_p), ("context_len", c_size_t), ("context_ids", POINTER(c_uint32)),
                ("n_context_ids", c_size_t), ("continuation", c_char_p), ("continuation_len", c_size_t),
                ("continuation_ids", POINTER(c_uint32)), ("n_continuation_ids", c_size_t),
                ("top_logprobs", c_uint), ("user", c_void_p)]


class ScoreResult(Structure):  # cis2_score_result
    _fields_ = [("context_ids", POINTER(c_uint32)), ("n_context", c_size_t), ("ids", POINTER(c_uint32)),
                ("n_ids", c_size_t), ("first", c_size_t), ("logprobs", POINTER(c_float)),
                ("ranks", POINTER(c_uint32)), ("greedy", POINTER(c_uint8)), ("n_top", c_size_t),
                ("top_ids", POINTER(c_uint32)), ("top_logprobs", POINTER(c_float)), ("n_scored", c_size_t),
                ("sum", c_float), ("sum_f64", ctypes.c_double), ("all_greedy", c_int)]


STRUCTS = {"cis2_error": Err, "cis2_engine_opts": EngineOpts, "cis2_model_info": ModelInfo,
           "cis2_sampling": Sampling, "cis2_stop": Stop, "cis2_request": Request,
           "cis2_token_event": TokenEvent, "cis2_gen_opts": GenOpts, "cis2_result": Result,
           "cis2_session_opts": SessionOpts, "cis2_field": Field, "cis2_verdict": Verdict,
           "cis2_verify_opts": VerifyOpts, "cis2_score_request": ScoreRequest,
           "cis2_score_result": ScoreResult}

# ------------------------------------------------------------- prototypes
P = POINTER
VP = c_void_p
E = P(Err)
_PROTOS = {
    # name: (restype, argtypes)
    "cis2_version": (c_char_p, []),
    "cis2_status_name": (c_char_p, [c_int]),
    "cis2_fail": (c_int, [E, c_int, c_char_p, c_char_p]),   # always called with fmt "%s"
    "cis2_free": (None, [VP]),
    "cis2_fpenv_is_pinned": (c_int, []),
    "cis2_fpenv_pin": (c_int, [E]),
    "cis2_isa_name": (c_char_p, []),
    "cis2_kernel_available": (c_int, [c_char_p]),
    "cis2_engine_open": (c_int, [P(VP), c_char_p, P(EngineOpts), E]),
    "cis2_engine_close": (None, [VP]),
    "cis2_engine_info": (P(ModelInfo), [VP]),
    "cis2_engine_set_kernel": (c_int, [VP, c_char_p, E]),
    "cis2_engine_set_threads": (c_int, [VP, c_int, E]),
    "cis2_engine_set_speculate": (c_int, [VP, c_char_p, E]),
    "cis2_engine_set_drafter": (c_int, [VP, DRAFT_FN, VP, c_uint, E]),
    "cis2_engine_tokenize": (c_int, [VP, c_char_p, c_size_t, P(P(c_uint32)), P(c_size_t), E]),
    "cis2_engine_detokenize": (c_int, [VP, P(c_uint32), c_size_t, c_int, P(P(c_char)), P(c_size_t), E]),
    "cis2_finish_name": (c_char_p, [c_int]),
    "cis2_generate": (c_int, [VP, P(Request), c_size_t, P(GenOpts), P(P(Result)), E]),
    "cis2_results_free": (None, [P(Result), c_size_t]),
    "cis2_session_open": (c_int, [P(VP), VP, P(SessionOpts), E]),
    "cis2_session_close": (None, [VP]),
    "cis2_session_add": (c_int, [VP, P(Request), P(c_uint64), E]),
    "cis2_session_step": (c_int, [VP, P(c_size_t), E]),
    "cis2_session_cancel": (c_int, [VP, c_uint64]),
    "cis2_session_done": (c_int, [VP, c_uint64]),
    "cis2_session_take": (c_int, [VP, c_uint64, P(P(Result)), E]),
    "cis2_session_pending": (c_size_t, [VP]),
    "cis2_receipt_make": (c_int, [VP, P(Result), P(VP), E]),
    "cis2_receipt_parse": (c_int, [c_char_p, c_size_t, c_char_p, P(VP), E]),
    "cis2_receipt_load": (c_int, [c_char_p, P(VP), E]),
    "cis2_receipt_render": (c_int, [VP, P(P(c_char)), P(c_size_t), E]),
    "cis2_receipt_save": (c_int, [VP, c_char_p, E]),
    "cis2_receipt_get": (c_char_p, [VP, c_char_p]),
    "cis2_receipt_free": (None, [VP]),
    "cis2_verify": (c_int, [VP, P(VP), c_size_t, P(VerifyOpts), P(P(Verdict)), E]),
    "cis2_check": (c_int, [VP, c_char_p, c_char_p, c_uint, P(P(Verdict)), E]),
    "cis2_compare": (c_int, [VP, VP, P(P(Verdict)), E]),
    "cis2_verdicts_free": (None, [P(Verdict), c_size_t]),
    "cis2_score": (c_int, [VP, P(ScoreRequest), c_size_t, P(P(ScoreResult)), E]),
    "cis2_score_results_free": (None, [P(ScoreResult), c_size_t]),
    "cis2_score_receipts": (c_int, [VP, P(ScoreRequest), c_size_t, P(P(ScoreResult)), P(VP), E]),
    "cis2_synth_write": (c_int, [c_char_p, c_uint64, c_char_p, c_char_p, E]),
    "cis2_tokenizer_load_ext": (c_int, [P(VP), c_char_p, c_uint, E]),
    "cis2_tokenizer_free": (None, [VP]),
    "cis2_tokenizer_encode": (c_int, [VP, c_char_p, c_size_t, P(P(c_uint32)), P(c_size_t), E]),
    "cis2_tokenizer_decode_n": (P(c_char), [VP, P(c_uint32), c_size_t, P(c_size_t)]),
    "cis2_tokenizer_vocab_size": (c_size_t, [VP]),
    "cis2_tokenizer_is_normative": (c_int, [VP]),
}


# ---------------------------------------------------------------- loading

def _prefix_dirs():
    """The lib directories of the prefix this package is installed in."""
    dirs = []
    d = os.path.dirname(os.path.abspath(__file__))
    while True:   # .../PREFIX/lib/python3.X/site-packages/cis2 -> PREFIX/lib
        parent = os.path.dirname(d)
        if parent == d:
            return dirs
        if os.path.basename(parent) in ("lib", "lib64"):
            dirs.append(parent)
            up = os.path.dirname(parent)
            if os.path.basename(up) == "local":   # Debian's pip: --prefix P puts packages in P/local/lib
                dirs.append(os.path.join(os.path.dirname(up), os.path.basename(parent)))
        d = parent


def _candidates():
    """(label, what to hand to CDLL) in search order; a path is its own label."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = env
        if os.path.isdir(path):
            path = os.path.join(path, "libcis2.so")
        return [("$%s=%s" % (ENV_VAR, env), path)]   # an explicit choice is never replaced by another library
    paths = [os.path.join(d, SONAME) for d in _prefix_dirs()]
    out = [(p, p) for p in paths]
    out.append(("the dynamic loader's search for %s" % SONAME, SONAME))
    found = ctypes.util.find_library("cis2")
    if found and found != SONAME:
        out.append(("ctypes.util.find_library('cis2')", found))
    for d in (sys.prefix, "/usr/local"):
        p = os.path.join(d, "lib", SONAME)
        if p not in paths:
            paths.append(p)
            out.append((p, p))
    return out


_lock = threading.Lock()
_lib = None


def get():
    """The loaded library (loading it on first use), prototypes set."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            _lib = _load()
    return _lib


class _DlInfo(Structure):  # Dl_info of <dlfcn.h>
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p), ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


def _file_of(lib, target):
    """The file a loaded library came from (dladdr), else what was asked for."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [c_void_p, POINTER(_DlInfo)]
        dladdr.restype = c_int
        info = _DlInfo()
        if dladdr(ctypes.cast(lib.cis2_version, c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except (OSError, AttributeError):
        pass
    return target


def _unload(lib):
    """dlclose of a library passed over (best effort: it is never used)."""
    try:
        import _ctypes
        _ctypes.dlclose(lib._handle)
    except (ImportError, AttributeError, OSError):
        pass


def _versions(lib):
    """(CIS2_VERSION, CIS2_ABI_VERSION or None) of a loaded library; AttributeError if it is not libcis2."""
    lib.cis2_version.restype = c_char_p
    lib.cis2_version.argtypes = []
    version = lib.cis2_version().decode("utf-8", "replace")
    abi = None
    if hasattr(lib, "cis2_abi_version"):
        lib.cis2_abi_version.restype = ctypes.c_uint
        lib.cis2_abi_version.argtypes = []
        abi = lib.cis2_abi_version()
    return version, abi


def _load():
    tried, wrong = [], []
    for label, target in _candidates():
        try:
            lib = ctypes.CDLL(target)
        except OSError as e:
            tried.append(str(e) if label == target and target in str(e) else "%s: %s" % (label, e))
            continue
        try:
            version, abi = _versions(lib)
        except AttributeError:
            tried.append("%s: not libcis2 (no cis2_version)" % label)
            _unload(lib)
            continue
        where = _file_of(lib, target)
        if version.split(".")[:2] != ABI_VERSION.split(".") or abi != STRUCT_ABI:
            wrong.append("%s%s is libcis2 %s (ABI %s)" % (where, "" if where == label else " (%s)" % label, version,
                                                         abi))
            tried.append(wrong[-1])
            _unload(lib)
            continue
        missing = [name for name in _PROTOS if not hasattr(lib, name)]
        if missing:
            wrong.append("%s%s claims libcis2 %s (ABI %s) but lacks %s" % (
                where, "" if where == label else " (%s)" % label, version, abi, ", ".join(missing[:3])))
            tried.append(wrong[-1])
            _unload(lib)
            continue
        for name, (res, args) in _PROTOS.items():
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = args
        lib.path = where
        return lib
    want = "libcis2 %s.x (ABI %d, include/cis2.h)" % (ABI_VERSION, STRUCT_ABI)
    if wrong:
        head = ("cis2: found no %s, the version this package mirrors: %s.  Install the Python package and the "
                "library from the same source tree (`make install PREFIX=P` puts it in P/lib, where a package "
                "installed in P looks first), or set %s to the right libcis2.so."
                % (want, "; ".join(wrong), ENV_VAR))
    else:
        head = ("cis2: cannot load libcis2.so; set %s to its path (e.g. build/libcis2.so of a built source tree) "
                "or run `make install PREFIX=P` for the P this package is installed in." % ENV_VAR)
    raise LibraryNotFound("%s Tried:\n  %s" % (head, "\n  ".join(tried)))


# ---------------------------------------------------------------- helpers

def check(rc, err):
    """Raises the exception class of status rc with the library's message."""
    if rc:
        msg = err.msg.decode("utf-8", "replace") if err.code else ""
        if not msg:
            msg = get().cis2_status_name(rc).decode()
        raise make_error(rc, msg)


def hexs(arr):
    """A uint8[32] as 64 lowercase hex digits."""
    return bytes(arr).hex()


def text(s):
    """A str (UTF-8) or bytes-like as bytes."""
    if isinstance(s, str):
        return s.encode("utf-8")
    if isinstance(s, (bytes, bytearray, memoryview)):
        return bytes(s)
    raise TypeError("expected str or bytes, not %s" % type(s).__name__)


def path(p):
    """A path (str, bytes or os.PathLike) as bytes for the C side."""
    return os.fsencode(p)


def u32_array(ids):
    """A sequence of token ids as a ctypes uint32 array (TypeError/ValueError on bad ids)."""
    ids = list(ids)
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError("token ids must be ints, not %s" % type(i).__name__)
        if not 0 <= i <= 0xFFFFFFFF:
            raise ValueError("token id %d is outside 0..4294967295" % i)
    return (c_uint32 * max(len(ids), 1))(*ids), len(ids)


def take_bytes(ptr, n):
    """Copies n bytes from a library buffer and frees it (cis2_free)."""
    try:
        return ctypes.string_at(ptr, n) if n else b""
    finally:
        get().cis2_free(ctypes.cast(ptr, c_void_p))

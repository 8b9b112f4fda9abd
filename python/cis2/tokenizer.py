"""The tokenizer on its own (include/cis2_toolkit.h section 3): §3.1 byte-level
BPE from a tokenizer.json, exact to Hugging Face `tokenizers` 0.23.1,
without loading any weights.  An Engine tokenizes with its own copy; this
class is for tokenizing where there is no checkpoint (datasets, checks).
"""
import ctypes
from ctypes import byref, c_size_t, c_uint32, c_void_p, POINTER

from . import _lib
from ._handle import _Handle
from .errors import OutOfMemory, UsageError


class Tokenizer(_Handle):
    """A loaded tokenizer.json.  ext=True also admits Qwen2.5's shape (NFC
    normalizer, Split pre-tokenizer; outside CIS-2 v0.3b §3).  FileError,
    FormatError or Unsupported (naming the field) when it cannot load."""

    _what = "tokenizer"

    def __init__(self, path, ext=False):
        self._h = None
        h = c_void_p()
        err = _lib.Err()
        _lib.check(_lib.get().cis2_tokenizer_load_ext(byref(h), _lib.path(path),
                                                      _lib.TOK_ALLOW_NONNORMATIVE if ext else 0, byref(err)), err)
        self._h = h

    def close(self):
        h, self._h = self._h, None
        if h:
            _lib.get().cis2_tokenizer_free(h)

    def encode(self, text):
        """text (str, or bytes as they are) -> list of ids, as encode(text, add_special_tokens=False)."""
        b = _lib.text(text)
        L = _lib.get()
        ids = POINTER(c_uint32)()
        n = c_size_t()
        err = _lib.Err()
        _lib.check(L.cis2_tokenizer_encode(self._handle(), b, len(b), byref(ids), byref(n), byref(err)), err)
        try:
            return ids[:n.value] if n.value else []
        finally:
            L.cis2_free(ctypes.cast(ids, c_void_p))

    def decode(self, ids):
        """ids -> text for display (invalid UTF-8 as U+FFFD, unknown ids skipped)."""
        arr, n = _lib.u32_array(ids)
        ln = c_size_t()
        p = _lib.get().cis2_tokenizer_decode_n(self._handle(), arr, n, byref(ln))
        if not p:
            raise OutOfMemory("out of memory")
        return _lib.take_bytes(p, ln.value).decode("utf-8", "replace")

    @property
    def vocab_size(self):
        """Max id + 1 over the model vocab and the added tokens."""
        return _lib.get().cis2_tokenizer_vocab_size(self._handle())

    @property
    def normative(self):
        """False when the file uses the non-normative extension (NFC / Qwen Split)."""
        return bool(_lib.get().cis2_tokenizer_is_normative(self._handle()))

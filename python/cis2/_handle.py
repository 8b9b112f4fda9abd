"""What every handle class of the package shares (Engine, Session,
Tokenizer, Receipt): the C handle in self._h (None once closed, or when __init__
failed before there was one), use as a context manager, close() on
garbage collection, and _handle() that refuses a closed one.  Each
subclass names itself in _what and defines close()."""
import _thread

from .errors import UsageError


class _Handle:
    _what = "handle"
    _h = None

    def close(self):   # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except KeyboardInterrupt:   # Ctrl-C landed in a finalizer, which would print and drop it:
            _thread.interrupt_main()   # delivered again, at the next instruction outside
        except Exception:
            pass

    def _handle(self):
        if not self._h:
            raise UsageError("cis2: the %s is closed" % self._what)
        return self._h

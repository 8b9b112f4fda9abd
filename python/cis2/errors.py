"""Exceptions: one class per status code of the library (enum cis2_status).

Every failing call of libcis2 returns a code and fills a cis2_error with a
one-line message; the Python layer raises the class for that code with the
library's message unchanged.  Each class carries ``.code`` (the number, the
same as the ``cis2`` program's exit code) and ``.message``.  A few also
derive from the builtin a Python caller would naturally catch (UsageError
is a ValueError, FileError an OSError, OutOfMemory a MemoryError).
"""


class Error(Exception):
    """Base class: a libcis2 call failed.  ``code`` is the enum cis2_status
    value (the CLI's exit code), ``message`` the library's one-line message."""

    code = 0
    status = "error"

    def __init__(self, message):
        # one positional argument only: OSError would read two as (errno, strerror)
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message


class Mismatch(Error):
    """1: a conformance or verification value differs."""
    code, status = 1, "mismatch"


class UsageError(Error, ValueError):
    """2: bad arguments."""
    code, status = 2, "usage"


class FileError(Error, OSError):
    """3: a file is missing, unreadable or unwritable."""
    code, status = 3, "io"

    def __str__(self):
        return self.message


class FormatError(Error):
    """4: a malformed input (JSON, safetensors, receipt, invalid UTF-8...)."""
    code, status = 4, "format"


class Unsupported(Error):
    """5: a well-formed input outside what cis2 runs."""
    code, status = 5, "unsupported"


class HashMismatch(Error):
    """6: an artifact's sha256 differs from the expected one (§2.1)."""
    code, status = 6, "hash"


class FPEnvError(Error):
    """7: the FTZ/DAZ pin or its self-test failed (§1.3)."""
    code, status = 7, "fpenv"


class NondeterminismError(Error):
    """8: the two in-process runs differ (§12.4)."""
    code, status = 8, "nondeterminism"


class OutOfMemory(Error, MemoryError):
    """9: an allocation failed or a size limit was exceeded."""
    code, status = 9, "nomem"


class InternalError(Error):
    """10: a bug in cis2."""
    code, status = 10, "internal"


class Cancelled(Error):
    """11: a token callback asked to stop."""
    code, status = 11, "cancelled"


class LibraryNotFound(ImportError):
    """libcis2.so could not be loaded; the message names every place tried."""


ERRORS = {c.code: c for c in (Mismatch, UsageError, FileError, FormatError, Unsupported, HashMismatch,
                              FPEnvError, NondeterminismError, OutOfMemory, InternalError, Cancelled)}


def error_class(code):
    """The exception class for a status code (Error for an unknown one)."""
    return ERRORS.get(code, Error)


def make_error(code, message):
    """An exception instance for code with message; unknown codes keep theirs."""
    cls = error_class(code)
    e = cls(message)
    if cls is Error:
        e.code = code
    return e

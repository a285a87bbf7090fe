"""The exception tree of perfgate, and the exit code each maps to.

::

    PerfgateError                 exit 2: the tool could not decide
    ├── InputError                a file, field or value the user supplied is wrong
    │   └── SchemaVersionError    a run file written by a newer perfgate
    ├── ConfigError               the configuration (pyproject/perfgate.toml, flags) is wrong
    ├── MismatchError             runs that must not be compared (model, machine)
    ├── OutputError               an output path cannot or must not be written
    └── StorageError              the store could not be opened, read or written

:func:`os_error_text` turns an :class:`OSError` into the short reason these messages
carry (``no space left on the device; free some or write elsewhere``), the same words
for every file perfgate reads or writes.

A suite's own errors subclass these (a damaged data file of a suite is an :class:`InputError`),
so that they too are one line and exit 2.

Only :func:`perfgate.cli.main` catches these; it prints the message on one line to
stderr and exits with :data:`EXIT_ERROR`. A regression is not an exception: it is a
verdict, and the command that found it returns :data:`EXIT_REGRESSION`.
"""

from __future__ import annotations

import errno

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "ConfigError",
    "InputError",
    "MismatchError",
    "OutputError",
    "PerfgateError",
    "SchemaVersionError",
    "StorageError",
    "os_error_text",
]

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_ERROR = 2


class PerfgateError(Exception):
    """Root of every error perfgate raises on purpose.

    Args:
        message: what was wrong and what to do about it.
        source: the file, URL or flag it came from, if any; prefixed to the message.
        field: the field or key inside ``source``, if any.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.message = message
        self.source = source
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.source:
            where = str(self.source)
        if self.field:
            where = f"{where}: field {self.field!r}" if where else f"field {self.field!r}"
        return f"{where}: {self.message}" if where else self.message


class InputError(PerfgateError):
    """A run file, argument or value supplied by the user is invalid."""


class SchemaVersionError(InputError):
    """A run file declares a schema_version this perfgate cannot read."""


class ConfigError(PerfgateError):
    """The configuration is invalid."""


class MismatchError(PerfgateError):
    """Two runs cannot be compared (different model or machine)."""


class StorageError(PerfgateError):
    """The result store could not be opened, read or written."""


class OutputError(PerfgateError):
    """An output path cannot be written (a directory, no permission, a full disk), or must not
    be (it is an input of the same command, a block device)."""


# errno -> what it means for a path given on the command line, and what to do
_OS_REASONS = {
    errno.ENOENT: "no such file or directory; check the path",
    errno.ENOTDIR: "a component of the path is not a directory; check the path",
    errno.EISDIR: "is a directory; give the path of a file",
    errno.EACCES: "permission denied; choose a location you may write to (or read from)",
    errno.EPERM: "operation not permitted; choose another location",
    errno.EROFS: "read-only file system; choose a writable location",
    errno.ENOSPC: "no space left on the device; free some or write elsewhere",
    errno.EDQUOT: "disk quota exceeded; free some space or write elsewhere",
    errno.EFBIG: "file too large for this file system; write elsewhere",
    errno.ENAMETOOLONG: "file name too long; choose a shorter path",
    errno.ELOOP: "too many levels of symbolic links; check the links on the path",
    errno.EXDEV: "cannot move a file across file systems; write elsewhere",
    errno.EBUSY: "device or resource busy; choose another path",
    errno.ETXTBSY: "text file busy; choose another path",
    errno.EIO: "input/output error; the device failed (check it, or write elsewhere)",
    errno.EINVAL: "invalid argument for this kind of file (a /proc or /sys entry?); choose a regular file",
    errno.EPIPE: "the reader went away (broken pipe)",
    errno.ENXIO: "no such device or address (a FIFO without a reader, or a missing device)",
    errno.ENODEV: "no such device; choose another path",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
}


def os_error_text(exc: OSError) -> str:
    """The reason of ``exc`` in a few words with what to do, on one line, without the path."""
    reason = _OS_REASONS.get(exc.errno or -1)
    if reason is None:
        reason = exc.strerror or str(exc) or type(exc).__name__
    return " ".join(str(reason).split())

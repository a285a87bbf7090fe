"""The exception tree of perfgate, and the exit code each maps to.

::

    PerfgateError                 exit 2: the tool could not decide
    ├── InputError                a file, field or value the user supplied is wrong
    │   ├── SchemaVersionError    a run file written by a newer perfgate
    │   └── DataError             a market-data (DBN) file is damaged or unsupported
    ├── ConfigError               the configuration (pyproject/perfgate.toml, flags) is wrong
    ├── MismatchError             runs that must not be compared (model, machine)
    └── StorageError              the store could not be opened, read or written

Only :func:`perfgate.cli.main` catches these; it prints the message on one line to
stderr and exits with :data:`EXIT_ERROR`. A regression is not an exception: it is a
verdict, and the command that found it returns :data:`EXIT_REGRESSION`.
"""

from __future__ import annotations

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "ConfigError",
    "DataError",
    "InputError",
    "MismatchError",
    "PerfgateError",
    "SchemaVersionError",
    "StorageError",
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


class DataError(InputError):
    """A market-data file (DBN) is damaged, truncated or unsupported."""


class ConfigError(PerfgateError):
    """The configuration is invalid."""


class MismatchError(PerfgateError):
    """Two runs cannot be compared (different model or machine)."""


class StorageError(PerfgateError):
    """The result store could not be opened, read or written."""

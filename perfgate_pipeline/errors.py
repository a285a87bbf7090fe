"""The reference pipeline's own error: a market-data file it cannot read.

:class:`DataError` is an :class:`perfgate.errors.InputError`: the command line prints it on one
line, naming the file, the byte offset or field and what to do, and exits 2.
"""

from __future__ import annotations

from perfgate.errors import InputError

__all__ = ["DataError"]


class DataError(InputError):
    """A market-data file (DBN) is damaged, truncated or unsupported."""

"""Which result store a command uses: ``--store``, else ``PERFGATE_STORE``, else the configuration's.

Each URL resolved here is remembered (:mod:`perfgate.app.secrets`), so that its password is
masked in whatever the command prints.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfgate.app.secrets import remember_store_url
from perfgate.config import Config
from perfgate.errors import PerfgateError

__all__ = ["chosen_store", "store_file", "store_url"]


def chosen_store(url: str | None, config: Config) -> str | None:
    """The store the user chose: ``url`` (``--store``), else ``PERFGATE_STORE``, else the configuration;
    None for none.

    For commands that use a store only when one is chosen (``bench`` and ``import`` record
    their run there, ``check`` takes its baseline from it).
    """
    from perfgate.store import resolve_store_url

    if url is None and not os.environ.get("PERFGATE_STORE", "").strip() and config.store is None:
        return None
    return remember_store_url(resolve_store_url(url, config.store))


def store_url(url: str | None, config: Config) -> str:
    """The store of a command that needs one: :func:`chosen_store`, else the default SQLite file."""
    from perfgate.store import resolve_store_url

    return remember_store_url(resolve_store_url(url, config.store))


def store_file(url: str | None, configured: str | None = None) -> Path | None:
    """The file of the SQLite store a command will open (an input no output may replace), or None."""
    from perfgate.store import resolve_store_url

    try:
        resolved = remember_store_url(resolve_store_url(url, configured))
    except PerfgateError:
        return None  # the command itself reports it
    if resolved.startswith("sqlite:///") and len(resolved) > len("sqlite:///"):
        return Path(resolved[len("sqlite:///") :])
    return None

"""Result stores: one protocol, chosen by URL (``sqlite:///…``, ``postgresql://…``, ``memory://``).

``open_store(url)`` imports the backend lazily (psycopg only for PostgreSQL). The default is
an embedded SQLite file in the project's ``.perfgate/`` folder; ``PERFGATE_STORE`` or
``--store`` choose another. The protocol and its value types are in
:mod:`perfgate.store.base`, which imports no backend; the backends import it.
"""

from __future__ import annotations

import os
import re

from perfgate.errors import StorageError
from perfgate.safe import redact
from perfgate.store._rows import created_key
from perfgate.store.base import (
    DEFAULT_STORE_URL,
    SERIES_STATISTICS,
    BaselineRecord,
    RunQuery,
    RunStatus,
    SeriesPoint,
    Store,
)

__all__ = [
    "DEFAULT_STORE_URL",
    "SERIES_STATISTICS",
    "BaselineRecord",
    "RunQuery",
    "RunStatus",
    "SeriesPoint",
    "Store",
    "created_key",
    "mask_url",
    "open_store",
    "resolve_store_url",
]


def resolve_store_url(url: str | None, configured: str | None = None) -> str:
    """--store wins, then PERFGATE_STORE, then the configuration, then the default.

    An empty ``--store ""`` is an error (a variable that expanded to nothing in a CI
    script), not the default store; an empty PERFGATE_STORE counts as unset.
    """
    if url is not None and not url.strip():
        raise StorageError("is empty; give a store URL such as sqlite:///.perfgate/perfgate.db", source="--store")
    if configured is not None and not configured.strip():
        raise StorageError("is empty; give a store URL or remove the key", source="configuration key 'store'")
    return url or os.environ.get("PERFGATE_STORE", "").strip() or configured or DEFAULT_STORE_URL


def mask_url(url: str) -> str:
    """``url``, one store URL as given (white space included), with any password replaced by
    ``***`` (see :func:`perfgate.safe.redact.mask_one_url`)."""
    return redact.mask_one_url(url)


def open_store(url: str) -> Store:
    """Open the store at ``url``, creating and migrating it as needed.

    ``sqlite:///relative.db`` or ``sqlite:////absolute.db``, ``postgresql://user:pw@host:port/db``
    (also ``postgres://``), or ``memory://`` (one process only, for tests).
    """
    if url.startswith("sqlite://"):
        from perfgate.store.sqlite import SQLiteStore

        return SQLiteStore(url)
    if url.startswith(("postgresql://", "postgres://")):
        from perfgate.store.postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("memory://"):
        from perfgate.store.memory import MemoryStore

        return MemoryStore(url)
    # only a scheme's letters are named: the text before a ':' may be a libpq string's password
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.\-]*(?=:)", url)
    what = f"unsupported store scheme {scheme.group()!r}" if scheme else "not a store URL (no scheme)"
    raise StorageError(
        f"{what}; use sqlite:///path/to/file.db, postgresql://user@host/db or memory://", source=mask_url(url)
    )

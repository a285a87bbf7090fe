"""The store protocol and the URL that picks a backend."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from perfgate.core.schema import Run
from perfgate.errors import StorageError

__all__ = ["DEFAULT_STORE_URL", "RunQuery", "Store", "open_store", "resolve_store_url"]

DEFAULT_STORE_URL = "sqlite:///.perfgate/perfgate.db"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Which runs to list; unset fields match everything. Newest first."""

    model: str | None = None  # normalised model key
    machine: str | None = None  # fingerprint
    branch: str | None = None
    suite: str | None = None
    limit: int | None = None


class Store(Protocol):
    """What every backend provides. Writes are transactions: a run is stored whole or not at all."""

    url: str

    def add_run(self, run: Run) -> bool:
        """Store ``run`` (which must have a run_id); False if that run_id was already stored."""
        ...

    def get_run(self, run_id: str) -> Run:
        """The run with this id; :class:`StorageError` if there is none."""
        ...

    def runs(self, query: RunQuery) -> list[Run]:
        """Runs matching ``query``, newest first."""
        ...

    def close(self) -> None: ...


def resolve_store_url(url: str | None, configured: str | None = None) -> str:
    """--store wins, then PERFGATE_STORE, then the configuration, then the default."""
    return url or os.environ.get("PERFGATE_STORE") or configured or DEFAULT_STORE_URL


def open_store(url: str) -> Store:
    """Open the store at ``url``, creating and migrating it as needed."""
    if url.startswith("sqlite://"):
        from perfgate.store.sqlite import SQLiteStore

        return SQLiteStore(url)
    if url.startswith("memory://"):
        from perfgate.store.memory import MemoryStore

        return MemoryStore(url)
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise StorageError(f"unsupported store scheme {scheme!r}; use sqlite:///path/to/file.db or memory://", source=url)

"""``perfgate store compact``: rewrite a result store's runs in their bounded form, in place.

Runs recorded before the bounded form (:mod:`perfgate.core.reduced`) keep every sample: a
real pytest-benchmark suite's run costs 120-130 MB of a store. :func:`compact` rewrites each
such run, a batch of runs to a transaction, then gives the space back (SQLite: VACUUM). Killed
at any moment, it loses nothing; run again, it finishes the work and leaves compacted runs alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app.numbers import checked_number
from perfgate.app.stores import store_url
from perfgate.config import load_config

if TYPE_CHECKING:
    from perfgate.store.base import Compaction

__all__ = ["DEFAULT_BATCH", "CompactRequest", "compact"]

DEFAULT_BATCH = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactRequest:
    """The store to compact, and how many runs to rewrite per transaction (1 to 10,000)."""

    batch_size: int = DEFAULT_BATCH
    store: str | None = None
    config: Path | None = None


def compact(request: CompactRequest, progress: Callable[[int, int], None]) -> Compaction:
    """Compact the store, telling ``progress`` how many of the runs are done after each batch.

    Raises:
        InputError: a batch size outside 1 to 10,000.
    """
    from perfgate.store import open_store

    batch = checked_number(request.batch_size, "--batch-size", at_least=1, at_most=10_000)
    config = load_config(request.config)
    store = open_store(store_url(request.store, config))
    try:
        return store.compact(batch=batch or DEFAULT_BATCH, progress=progress)
    finally:
        store.close()

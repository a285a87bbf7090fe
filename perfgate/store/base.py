"""The store protocol and its value types.

Every backend keeps, per run: the whole run document (raw samples, git commit and branch,
machine fingerprint and details, config), one summary row per metric (n, mean, median, p95,
p99, min, max) so that series and baseline queries never decode documents, the verdict of
the last check of that run (:class:`RunStatus`), and the baselines formed from the history
(:class:`BaselineRecord`). A metric's samples are kept in their bounded form
(:mod:`perfgate.core.reduced`: a group of more than 1,001 samples as its order statistics and
its count), so a run of a real suite costs about 1 MB, not hundreds. Writes are transactions: a
run and its metric rows are stored together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from perfgate.core.schema import Run, normalize_model

__all__ = [
    "DEFAULT_STORE_URL",
    "SERIES_STATISTICS",
    "BaselineRecord",
    "Compaction",
    "RunQuery",
    "RunStatus",
    "SeriesPoint",
    "Store",
]

DEFAULT_STORE_URL = "sqlite:///.perfgate/perfgate.db"

# what a series can be made of: a column of the metrics table ("p50" is the median)
SERIES_STATISTICS = ("median", "p50", "mean", "p95", "p99", "min", "max")


class RunStatus(StrEnum):
    """What the gate said about a run; only ``flagged`` runs stay out of baselines."""

    RECORDED = "recorded"  # in the history, never checked against a store baseline
    PASSED = "passed"  # a check found no regression
    FLAGGED = "flagged"  # a check found a regression: kept out of baselines
    ACCEPTED = "accepted"  # flagged, then accepted by a person: enters baselines again


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Which runs to list; unset fields match everything. Newest first."""

    model: str | None = None  # normalised model key
    machine: str | None = None  # fingerprint
    branch: str | None = None
    suite: str | None = None
    limit: int | None = None
    include_flagged: bool = True  # False: leave out runs a check flagged (and nobody accepted)


class Compaction(NamedTuple):
    """What :meth:`Store.compact` did: runs looked at, runs rewritten in their bounded form,
    and the store's size in bytes before and after (None where the backend cannot say)."""

    runs: int
    rewritten: int
    bytes_before: int | None
    bytes_after: int | None


class SeriesPoint(NamedTuple):
    """One point of a metric's history, oldest first in a series."""

    run_id: str
    created_at: str | None
    commit: str | None
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BaselineRecord:
    """A baseline kept in the store: which runs of (suite, model, machine, branch) form it."""

    suite: str
    model: str  # normalised model key
    machine: str | None
    branch: str
    run_ids: tuple[str, ...]  # newest first
    created_at: str  # UTC ISO-8601, when it was formed
    method: str = "pooled"

    def __post_init__(self) -> None:
        if not self.run_ids:
            raise ValueError("a baseline needs at least one run id")
        object.__setattr__(self, "model", normalize_model(self.model))


class Store(Protocol):
    """What every backend provides (memory, SQLite, PostgreSQL; one contract test suite)."""

    url: str  # for messages: any password is masked

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        ...

    def add_run(self, run: Run) -> bool:
        """Store ``run`` (which must have a run_id); False if that run_id was already stored."""
        ...

    def add_runs(self, runs: Sequence[Run]) -> list[bool]:
        """Store several runs in one transaction (all or none); per run, whether it was new."""
        ...

    def get_run(self, run_id: str) -> Run:
        """The run with this id; :class:`StorageError` if there is none."""
        ...

    def has_run(self, run_id: str) -> bool: ...

    def runs(self, query: RunQuery) -> list[Run]:
        """Runs matching ``query``, newest first."""
        ...

    def latest(self, query: RunQuery) -> list[Run]:
        """The newest run of each (suite, model, machine) matching ``query``, by model then machine.

        The query's ``limit`` is ignored.
        """
        ...

    def series(
        self,
        model: str,
        machine: str | None,
        metric: str,
        statistic: str = "median",
        *,
        branch: str | None = None,
        suite: str | None = None,
        limit: int | None = None,
    ) -> list[SeriesPoint]:
        """A metric's history, oldest first; ``limit`` keeps the newest points; None matches any."""
        ...

    def set_status(self, run_id: str, status: RunStatus, note: str = "") -> None:
        """Record what a check (or a person) said about a run; the run need not be stored yet."""
        ...

    def status(self, run_id: str) -> RunStatus | None:
        """The run's status: None if the id is neither stored nor checked, RECORDED if never checked."""
        ...

    def save_baseline(self, record: BaselineRecord) -> None:
        """Keep ``record`` as the current baseline of its key (older ones stay as history)."""
        ...

    def baseline(self, *, suite: str, model: str, machine: str | None, branch: str) -> BaselineRecord | None:
        """The current baseline of a key, or None."""
        ...

    def baselines(self, model: str | None = None) -> list[BaselineRecord]:
        """The current baseline of every key (of one model), ordered by model, machine, branch."""
        ...

    def compact(self, *, batch: int = 20, progress: Callable[[int, int], None] | None = None) -> Compaction:
        """Rewrite every stored run in its bounded form (:func:`perfgate.core.reduced.bound_run`),
        ``batch`` runs to a transaction, and give the space back; killed at any moment, it loses
        nothing, and running it again finishes it. ``progress(done, total)`` after each batch."""
        ...

    def close(self) -> None: ...

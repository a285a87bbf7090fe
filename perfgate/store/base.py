"""The store protocol, its value types, and the URL that picks a backend.

Every backend keeps, per run: the whole run document (raw samples, git commit and branch,
machine fingerprint and details, config), one summary row per metric (n, mean, median, p95,
p99, min, max) so that series and baseline queries never decode documents, the verdict of
the last check of that run (:class:`RunStatus`), and the baselines formed from the history
(:class:`BaselineRecord`). Writes are transactions: a run and its metric rows are stored
together or not at all.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from perfgate.core import redact
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import StorageError

__all__ = [
    "DEFAULT_STORE_URL",
    "SERIES_STATISTICS",
    "BaselineRecord",
    "MetricRow",
    "RunQuery",
    "RunStatus",
    "SeriesPoint",
    "Store",
    "created_from_key",
    "created_key",
    "mask_url",
    "metric_rows",
    "open_store",
    "resolve_store_url",
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


class MetricRow(NamedTuple):
    """The summary row kept next to a run document, one per metric."""

    metric: str
    unit: str
    direction: str
    n: int
    mean: float
    median: float
    p95: float
    p99: float
    min: float
    max: float


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

    def close(self) -> None: ...


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
    """``url`` with any password replaced by ``***`` (see :func:`perfgate.core.redact.mask_url`)."""
    return redact.mask_url(url)


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
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise StorageError(
        f"unsupported store scheme {scheme!r}; use sqlite:///path/to/file.db, postgresql://user@host/db or memory://",
        source=mask_url(url),
    )


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$")


def created_key(created_at: str | None) -> str:
    """A sort key for ``created_at``: fixed-width microseconds, so text order is time order.

    ``"2026-11-29T18:00:00Z"`` and ``"2026-11-29T18:00:00.5Z"`` differ in width, and ``.``
    sorts before ``Z``; the key pads both to ``...:00.000000Z``. No timestamp sorts first.
    """
    if not created_at:
        return ""
    match = _STAMP.match(created_at)
    if match is None:
        return created_at
    return f"{match.group(1)}.{(match.group(2) or '').ljust(6, '0')}Z"


def created_from_key(key: str) -> str | None:
    """The inverse of :func:`created_key` for keys it wrote (as the codec writes timestamps)."""
    if not key:
        return None
    if key.endswith(".000000Z"):
        return key[: -len(".000000Z")] + "Z"
    return key


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, "type 7")."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def metric_rows(run: Run) -> list[MetricRow]:
    """The summary rows of ``run``'s metrics (quantiles as numpy's default, like core.stats).

    Plain Python: for the few dozen samples of a metric it is ~50x faster than numpy's
    per-call overhead, which would dominate recording (benchmarks/store.py).
    """
    rows = []
    for name, metric in run.metrics.items():
        ordered = sorted(metric.samples)
        rows.append(
            MetricRow(
                metric=name,
                unit=metric.unit,
                direction=metric.direction.value,
                n=len(ordered),
                mean=math.fsum(ordered) / len(ordered),
                median=_quantile(ordered, 0.5),
                p95=_quantile(ordered, 0.95),
                p99=_quantile(ordered, 0.99),
                min=float(ordered[0]),
                max=float(ordered[-1]),
            )
        )
    return rows

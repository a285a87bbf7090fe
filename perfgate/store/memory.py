"""An in-memory store for unit tests; same contract as the real backends (one process only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from perfgate.core.reduced import bound_run
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import StorageError
from perfgate.store._rows import MetricRow, created_key, metric_rows
from perfgate.store.base import SERIES_STATISTICS, BaselineRecord, Compaction, RunQuery, RunStatus, SeriesPoint

__all__ = ["MemoryStore", "matches"]


def matches(run: Run, query: RunQuery) -> bool:
    return (
        (query.model is None or run.model_key == normalize_model(query.model))
        and (query.machine is None or run.machine.fingerprint == query.machine)
        and (query.branch is None or run.git.branch == query.branch)
        and (query.suite is None or run.suite == query.suite)
    )


def _newest_first(run: Run) -> tuple[str, str]:
    return created_key(run.created_at), run.run_id or ""


class MemoryStore:
    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, Run] = {}
        self._rows: dict[str, list[MetricRow]] = {}
        self._status: dict[str, tuple[RunStatus, str]] = {}
        self._baselines: list[BaselineRecord] = []

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_run(self, run: Run) -> bool:
        return self.add_runs([run])[0]

    def add_runs(self, runs: Sequence[Run]) -> list[bool]:
        if any(not r.run_id for r in runs):
            raise StorageError("a run needs a run_id to be stored", source=self.url)
        runs = [bound_run(r) for r in runs]  # a group of more than 1,001 samples is kept in its bounded form
        rows = {r.run_id: metric_rows(r) for r in runs}  # everything computed before anything is kept
        added = []
        for r in runs:
            assert r.run_id is not None
            new = r.run_id not in self._runs
            if new:
                self._runs[r.run_id] = r
                self._rows[r.run_id] = rows[r.run_id]
            added.append(new)
        return added

    def compact(self, *, batch: int = 20, progress: Callable[[int, int], None] | None = None) -> Compaction:
        """Each kept run in its bounded form (:meth:`perfgate.store._sql.SQLStore.compact`)."""
        ids = sorted(self._runs)
        rewritten = 0
        for done, run_id in enumerate(ids, start=1):
            bounded = bound_run(self._runs[run_id])
            if bounded is not self._runs[run_id]:
                self._runs[run_id] = bounded
                self._rows[run_id] = metric_rows(bounded)
                rewritten += 1
            if progress is not None and (done % max(batch, 1) == 0 or done == len(ids)):
                progress(done, len(ids))
        return Compaction(runs=len(ids), rewritten=rewritten, bytes_before=None, bytes_after=None)

    def get_run(self, run_id: str) -> Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise StorageError(f"no run with id {run_id!r}", source=self.url) from None

    def has_run(self, run_id: str) -> bool:
        return run_id in self._runs

    def _eligible(self, run: Run, query: RunQuery) -> bool:
        if not matches(run, query):
            return False
        return query.include_flagged or self._status.get(run.run_id or "", (None, ""))[0] is not RunStatus.FLAGGED

    def runs(self, query: RunQuery) -> list[Run]:
        found = sorted((r for r in self._runs.values() if self._eligible(r, query)), key=_newest_first, reverse=True)
        return found[: query.limit] if query.limit is not None else found

    def latest(self, query: RunQuery) -> list[Run]:
        newest: dict[tuple[str, str, str | None], Run] = {}
        for r in self.runs(dataclasses.replace(query, limit=None)):
            newest.setdefault((r.suite, r.model_key, r.machine.fingerprint), r)
        return sorted(newest.values(), key=lambda r: (r.model_key, r.machine.fingerprint or "", r.suite))

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
        if statistic not in SERIES_STATISTICS:
            raise StorageError(f"unknown statistic {statistic!r}; choose from {', '.join(SERIES_STATISTICS)}")
        column = "median" if statistic == "p50" else statistic
        query = RunQuery(model=model, machine=machine, branch=branch, suite=suite, limit=None)
        points = []
        for r in self.runs(query):
            assert r.run_id is not None
            for row in self._rows[r.run_id]:
                if row.metric == metric:
                    points.append(SeriesPoint(r.run_id, r.created_at, r.git.commit, float(getattr(row, column))))
        if limit is not None:
            points = points[:limit]
        return points[::-1]

    def set_status(self, run_id: str, status: RunStatus, note: str = "") -> None:
        self._status[run_id] = (RunStatus(status), note)

    def status(self, run_id: str) -> RunStatus | None:
        if run_id in self._status:
            return self._status[run_id][0]
        return RunStatus.RECORDED if run_id in self._runs else None

    def save_baseline(self, record: BaselineRecord) -> None:
        self._baselines.append(record)

    def baseline(self, *, suite: str, model: str, machine: str | None, branch: str) -> BaselineRecord | None:
        key = (suite, normalize_model(model), machine, branch)
        for record in reversed(self._baselines):
            if (record.suite, record.model, record.machine, record.branch) == key:
                return record
        return None

    def baselines(self, model: str | None = None) -> list[BaselineRecord]:
        current: dict[tuple[str, str, str | None, str], BaselineRecord] = {}
        for record in self._baselines:
            if model is None or record.model == normalize_model(model):
                current[(record.suite, record.model, record.machine, record.branch)] = record
        return sorted(current.values(), key=lambda b: (b.model, b.machine or "", b.branch, b.suite))

    def close(self) -> None:
        pass

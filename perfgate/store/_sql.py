"""What the SQL backends share: the tables, the queries, and turning driver errors into messages.

SQLite and PostgreSQL run the same statements (``ON CONFLICT``, window functions and
``LIMIT`` parameters exist in both); a backend supplies the connection, the placeholder,
its write transaction and its migrations (:mod:`perfgate.store._migrations`, where the DDL
is). The tables, after all migrations, the same columns, types and ``NOT NULL`` in both:

``runs``        one row per run: the keys queries filter on and the whole JSON document (its
                metrics in their bounded form since perfgate.core.reduced; ``compact`` rewrites
                older rows so)
``metrics``     one summary row per (run, metric): n, mean, median, p95, p99, min, max,
                with the run's keys copied so that a series is one index range scan
``run_status``  the verdict of the last check of a run, or a person's acceptance
``baselines``   every baseline ever formed (key, run ids, when); the newest per key counts

``created_at`` columns hold :func:`~perfgate.store.created_key` (fixed width, so text
order is time order; empty when the run had no timestamp).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple

from perfgate.core.codec import format_timestamp, run_from_dict, run_to_dict
from perfgate.core.reduced import bound_run
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import PerfgateError, StorageError
from perfgate.store._rows import MetricRow, created_from_key, created_key, metric_rows
from perfgate.store.base import SERIES_STATISTICS, BaselineRecord, Compaction, RunQuery, RunStatus, SeriesPoint

__all__ = [
    "INSERT_METRIC",
    "INSERT_RUN",
    "PreparedRun",
    "SQLStore",
    "check_schema_version",
    "hint",
    "now_utc",
    "one_line",
]

_COLUMN = {
    "median": "median",
    "p50": "median",
    "mean": "mean",
    "p95": "p95",
    "p99": "p99",
    "min": "min_value",
    "max": "max_value",
}


def check_schema_version(version: int, known: int, url: str) -> bool:
    """True when migrations are due; a store newer than this perfgate is refused."""
    if version > known:
        raise StorageError(
            f"store schema version {version} is newer than this perfgate ({known}); upgrade perfgate", source=url
        )
    return version < known


def now_utc() -> str:
    return format_timestamp(datetime.now(UTC))


def one_line(exc: BaseException) -> str:
    """A driver's message on one line (libpq's span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def hint(message: str) -> str:
    """What to do about a driver's error message, as a clause to append ("" if nothing useful)."""
    text = message.lower()
    if "readonly" in text or "read-only" in text or "permission denied" in text:
        return "; check that the store (file and folder, or database role) is writable"
    if "full" in text or "too large" in text or "no space" in text:
        return "; free disk space (or raise the size limit) and retry"
    if "disk i/o error" in text:
        return "; the disk may be full or failing: free space and retry"
    if "unable to open" in text:
        return "; check that the file and its folder exist and are readable and writable"
    if "locked" in text or "busy" in text:
        return "; another process holds the store too long, retry"
    return ""


INSERT_RUN = (
    "INSERT INTO runs (run_id, suite, model, machine, branch, git_commit, created_at, document)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING"
)
INSERT_METRIC = (
    "INSERT INTO metrics (run_id, metric, suite, model, machine, branch, git_commit, created_at, unit, direction,"
    " n, mean, median, p95, p99, min_value, max_value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_NOT_FLAGGED = "NOT EXISTS (SELECT 1 FROM run_status s WHERE s.run_id = r.run_id AND s.status = 'flagged')"


class PreparedRun(NamedTuple):
    """A run ready to insert: encoded before the transaction starts, so the transaction is short."""

    run: Run
    key: str  # created_key(run.created_at)
    document: str
    rows: list[MetricRow]

    def run_values(self) -> tuple[Any, ...]:
        r = self.run
        return (
            r.run_id,
            r.suite,
            r.model_key,
            r.machine.fingerprint,
            r.git.branch,
            r.git.commit,
            self.key,
            self.document,
        )

    def metric_values(self) -> list[tuple[Any, ...]]:
        r = self.run
        keys = (r.run_id, r.suite, r.model_key, r.machine.fingerprint, r.git.branch, r.git.commit, self.key)
        return [
            (keys[0], row.metric, *keys[1:], *row[1:])  # unit, direction, n, mean, median, p95, p99, min, max
            for row in self.rows
        ]


class SQLStore:
    """The queries of both SQL backends. Subclasses set ``url`` and implement the hooks below."""

    url: str
    placeholder = "?"
    driver_errors: tuple[type[BaseException], ...] = ()

    # --- hooks -----------------------------------------------------------------------
    def _transaction(self) -> AbstractContextManager[Any]:
        """A write transaction; yields a cursor with ``execute``, ``executemany`` and ``rowcount``."""
        raise NotImplementedError

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # --- helpers ---------------------------------------------------------------------
    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except PerfgateError:
            raise
        except self.driver_errors as exc:
            message = self._scrub(one_line(exc))
            raise StorageError(f"cannot {doing}: {message}{hint(message)}", source=self.url) from None

    def _scrub(self, message: str) -> str:
        """``message`` without secrets (the PostgreSQL backend removes its password)."""
        return message

    def _decode(self, run_id: str, document: str) -> Run:
        try:
            return run_from_dict(json.loads(document), source=f"{self.url} run {run_id}")
        except (ValueError, PerfgateError) as exc:
            raise StorageError(f"stored run {run_id} cannot be read: {exc}", source=self.url) from None

    def _documents(self, sql: str, params: Sequence[Any]) -> list[Run]:
        return [self._decode(run_id, doc) for run_id, doc in self._fetch(self._sql(sql), params)]

    # --- writes ----------------------------------------------------------------------
    def add_run(self, run: Run) -> bool:
        return self.add_runs([run])[0]

    def add_runs(self, runs: Sequence[Run]) -> list[bool]:
        if not runs:
            return []
        prepared: list[PreparedRun] = []
        for run in runs:
            if not run.run_id:
                raise StorageError("a run needs a run_id to be stored (runs written by perfgate bench have one)")
            run = bound_run(run)  # a group of more than 1,001 samples is stored in its bounded form
            doc = json.dumps(run_to_dict(run), sort_keys=True, allow_nan=False, separators=(",", ":"))
            prepared.append(PreparedRun(run, created_key(run.created_at), doc, metric_rows(run)))
        what = f"record run {runs[0].run_id}" if len(runs) == 1 else f"record {len(runs)} runs"
        unique = list({p.run.run_id: p for p in reversed(prepared)}.values())[::-1]  # first of each run_id
        with self._guard(what), self._transaction() as cur:
            inserted = self._insert_runs(cur, unique)
            self._insert_metrics(cur, [p for p, new in zip(unique, inserted, strict=True) if new])
        fresh = {p.run.run_id for p, new in zip(unique, inserted, strict=True) if new}
        added = []
        for p in prepared:  # a run_id given twice is new once
            added.append(p.run.run_id in fresh)
            fresh.discard(p.run.run_id)
        return added

    def _insert_runs(self, cur: Any, prepared: list[PreparedRun]) -> list[bool]:
        """Insert the run rows (skipping stored run_ids); per run, whether it was new."""
        added = []
        for p in prepared:
            cur.execute(self._sql(INSERT_RUN), p.run_values())
            added.append(cur.rowcount == 1)
        return added

    def _insert_metrics(self, cur: Any, prepared: list[PreparedRun]) -> None:
        """Insert the metric rows of runs just inserted (same transaction)."""
        rows = [values for p in prepared for values in p.metric_values()]
        if rows:
            cur.executemany(self._sql(INSERT_METRIC), rows)

    def compact(self, *, batch: int = 20, progress: Callable[[int, int], None] | None = None) -> Compaction:
        """Rewrite every stored run whose metrics have a group of more than 1,001 samples in its
        bounded form (:func:`perfgate.core.reduced.bound_run`), then give the space back.

        Rows are rewritten ``batch`` runs to a transaction, each run's document and its metric
        rows together, so a compaction killed at any moment leaves every run whole, in one form or
        the other, and running it again finishes the work: a run already bounded is left as it is.
        ``progress(done, total)`` is called after each committed batch.
        """
        with self._guard("list the stored runs"):
            ids = [row[0] for row in self._fetch(self._sql("SELECT run_id FROM runs ORDER BY run_id"))]
        rewritten = 0
        for start in range(0, len(ids), max(batch, 1)):
            chunk = ids[start : start + max(batch, 1)]
            with self._guard("compact the store"), self._transaction() as cur:
                for run_id in chunk:  # one document at a time: an old one may hold millions of samples
                    row = cur.execute(self._sql("SELECT document FROM runs WHERE run_id = ?"), (run_id,)).fetchone()
                    if row is None:
                        continue
                    old = self._decode(run_id, row[0])
                    bounded = bound_run(old)
                    if bounded is old:
                        continue
                    doc = json.dumps(run_to_dict(bounded), sort_keys=True, allow_nan=False, separators=(",", ":"))
                    p = PreparedRun(bounded, created_key(bounded.created_at), doc, metric_rows(bounded))
                    cur.execute(self._sql("UPDATE runs SET document = ? WHERE run_id = ?"), (doc, run_id))
                    cur.execute(self._sql("DELETE FROM metrics WHERE run_id = ?"), (run_id,))
                    self._insert_metrics(cur, [p])
                    rewritten += 1
            if progress is not None:
                progress(start + len(chunk), len(ids))
        before = self._size()
        with self._guard("give the compacted space back"):
            self._reclaim()
        return Compaction(runs=len(ids), rewritten=rewritten, bytes_before=before, bytes_after=self._size())

    def _reclaim(self) -> None:
        """Give the space of rewritten rows back. SQLite: VACUUM (outside a transaction: the
        connection is in autocommit outside its write transactions), then fold the write-ahead log
        back into the file and truncate it. PostgreSQL's autovacuum makes the old rows' space
        reusable on its own (only VACUUM FULL, which locks the tables, would return it to the disk)."""
        if self.placeholder == "?":
            self._fetch("VACUUM")
            self._fetch("PRAGMA wal_checkpoint(TRUNCATE)")

    def _size(self) -> int | None:
        """The bytes the store's tables take (SQLite: the whole file, without its log)."""
        if self.placeholder == "?":
            sql = "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
        else:
            sql = "SELECT pg_total_relation_size('runs') + pg_total_relation_size('metrics')"
        with self._guard("read the store's size"):
            rows = self._fetch(sql)
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_status(self, run_id: str, status: RunStatus, note: str = "") -> None:
        status = RunStatus(status)
        with self._guard(f"record the status of run {run_id}"), self._transaction() as cur:
            cur.execute(
                self._sql(
                    "INSERT INTO run_status (run_id, status, note, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, note = excluded.note,"
                    " updated_at = excluded.updated_at"
                ),
                (run_id, status.value, note, now_utc()),
            )

    def save_baseline(self, record: BaselineRecord) -> None:
        with self._guard(f"save the baseline of model {record.model}"), self._transaction() as cur:
            cur.execute(
                self._sql(
                    "INSERT INTO baselines (suite, model, machine, branch, run_ids, method, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)"
                ),
                (
                    record.suite,
                    record.model,
                    record.machine or "",
                    record.branch,
                    json.dumps(list(record.run_ids)),
                    record.method,
                    record.created_at,
                ),
            )

    # --- reads -----------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        with self._guard(f"read run {run_id}"):
            found = self._documents("SELECT run_id, document FROM runs WHERE run_id = ?", (run_id,))
        if not found:
            raise StorageError(f"no run with id {run_id!r}", source=self.url)
        return found[0]

    def has_run(self, run_id: str) -> bool:
        with self._guard(f"read run {run_id}"):
            return bool(self._fetch(self._sql("SELECT 1 FROM runs WHERE run_id = ?"), (run_id,)))

    @staticmethod
    def _where(query: RunQuery) -> tuple[str, list[Any]]:
        clauses, params = [], []
        model = normalize_model(query.model) if query.model is not None else None
        for column, value in (
            ("r.model", model),
            ("r.machine", query.machine),
            ("r.branch", query.branch),
            ("r.suite", query.suite),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if not query.include_flagged:
            clauses.append(_NOT_FLAGGED)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def runs(self, query: RunQuery) -> list[Run]:
        where, params = self._where(query)
        sql = f"SELECT r.run_id, r.document FROM runs r{where} ORDER BY r.created_at DESC, r.run_id DESC"
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(int(query.limit))
        with self._guard("query runs"):
            return self._documents(sql, params)

    def latest(self, query: RunQuery) -> list[Run]:
        where, params = self._where(query)
        newest = (
            "SELECT run_id FROM (SELECT r.run_id, ROW_NUMBER() OVER (PARTITION BY r.suite, r.model, r.machine"
            f" ORDER BY r.created_at DESC, r.run_id DESC) AS rn FROM runs r{where}) t WHERE rn = 1"
        )
        sql = (
            f"SELECT r.run_id, r.document FROM runs r WHERE r.run_id IN ({newest})"
            " ORDER BY r.model, COALESCE(r.machine, ''), r.suite"
        )
        with self._guard("query the latest runs"):
            return self._documents(sql, params)

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
        if statistic not in _COLUMN:
            raise StorageError(f"unknown statistic {statistic!r}; choose from {', '.join(SERIES_STATISTICS)}")
        clauses: list[str] = ["model = ?", "metric = ?"]
        params: list[Any] = [normalize_model(model), metric]
        for column, value in (("machine", machine), ("branch", branch), ("suite", suite)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        sql = (
            f"SELECT run_id, created_at, git_commit, {_COLUMN[statistic]} FROM metrics"
            f" WHERE {' AND '.join(clauses)} ORDER BY created_at DESC, run_id DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self._guard(f"query the series of {metric}"):
            rows = self._fetch(self._sql(sql), params)
        return [SeriesPoint(r, created_from_key(c), g, float(v)) for r, c, g, v in reversed(rows)]

    def status(self, run_id: str) -> RunStatus | None:
        with self._guard(f"read the status of run {run_id}"):
            rows = self._fetch(self._sql("SELECT status FROM run_status WHERE run_id = ?"), (run_id,))
        if rows:
            return RunStatus(rows[0][0])
        return RunStatus.RECORDED if self.has_run(run_id) else None

    @staticmethod
    def _record(row: tuple[Any, ...]) -> BaselineRecord:
        suite, model, machine, branch, run_ids, method, created_at = row
        return BaselineRecord(
            suite=suite,
            model=model,
            machine=machine or None,
            branch=branch,
            run_ids=tuple(json.loads(run_ids)),
            method=method,
            created_at=created_at,
        )

    _BASELINE_COLUMNS = "suite, model, machine, branch, run_ids, method, created_at"

    def baseline(self, *, suite: str, model: str, machine: str | None, branch: str) -> BaselineRecord | None:
        sql = (
            f"SELECT {self._BASELINE_COLUMNS} FROM baselines WHERE model = ? AND machine = ? AND branch = ?"
            " AND suite = ? ORDER BY id DESC LIMIT 1"
        )
        with self._guard(f"read the baseline of model {model}"):
            rows = self._fetch(self._sql(sql), (normalize_model(model), machine or "", branch, suite))
        return self._record(rows[0]) if rows else None

    def baselines(self, model: str | None = None) -> list[BaselineRecord]:
        sql = (
            f"SELECT {self._BASELINE_COLUMNS} FROM baselines WHERE id IN"
            " (SELECT MAX(id) FROM baselines GROUP BY suite, model, machine, branch)"
        )
        params: list[Any] = []
        if model is not None:
            sql += " AND model = ?"
            params.append(normalize_model(model))
        sql += " ORDER BY model, machine, branch, suite"
        with self._guard("read the baselines"):
            return [self._record(row) for row in self._fetch(self._sql(sql), params)]

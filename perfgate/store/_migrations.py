"""The numbered schema migrations of the SQL stores, applied in order on open.

Each migration is frozen as it shipped: its DDL is written out here, and a data step
(:func:`_sqlite_2_backfill`) reads stored documents with its own code, never with the
live codec or summary functions, so that changing those later cannot change what an
upgrade of an old store does. Never edit a migration that has shipped; add the next one.

History, SQLite:

1. ``runs``: one row per run, the keys the queries filter on and the whole JSON document.
2. ``metrics`` (one summary row per run and metric, the run's keys copied), ``run_status``
   and ``baselines``; ``runs.created_at`` rewritten as a fixed-width sort key, and the
   metric rows of the stored runs computed from their documents.
3. ``runs.created_at`` ``NOT NULL``, and the run ids of ``runs`` and ``run_status`` (as in
   PostgreSQL): a run without a timestamp has the empty key, which migration 2 already wrote.
4. the keys of runs stored before run format version 3 (:func:`_run_format_3_keys`).

History, PostgreSQL:

1. all four tables as SQLite has them after its migration 3 (``BIGSERIAL`` for the
   auto-increment key), the documents compressed with lz4 where the server has it.
2. as SQLite's migration 4.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["POSTGRES", "SQLITE"]


# --- SQLite ------------------------------------------------------------------------------

_SQLITE_1 = """
    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY,
        suite       TEXT NOT NULL,
        model       TEXT NOT NULL,
        machine     TEXT,
        branch      TEXT,
        git_commit  TEXT,
        created_at  TEXT,
        document    TEXT NOT NULL
    );
    CREATE INDEX runs_model_machine ON runs (model, machine, created_at);
    CREATE INDEX runs_branch ON runs (branch, created_at);
    """


def _tables_2(id_column: str) -> list[str]:
    """The metrics, run_status and baselines tables as SQLite's migration 2 and PostgreSQL's
    migration 1 made them (``id_column``: each one's auto-increment key)."""
    return [
        """
        CREATE TABLE metrics (
            run_id      TEXT NOT NULL REFERENCES runs (run_id),
            metric      TEXT NOT NULL,
            suite       TEXT NOT NULL,
            model       TEXT NOT NULL,
            machine     TEXT,
            branch      TEXT,
            git_commit  TEXT,
            created_at  TEXT NOT NULL,
            unit        TEXT NOT NULL,
            direction   TEXT NOT NULL,
            n           INTEGER NOT NULL,
            mean        DOUBLE PRECISION NOT NULL,
            median      DOUBLE PRECISION NOT NULL,
            p95         DOUBLE PRECISION NOT NULL,
            p99         DOUBLE PRECISION NOT NULL,
            min_value   DOUBLE PRECISION NOT NULL,
            max_value   DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run_id, metric)
        )
        """,
        "CREATE INDEX metrics_series ON metrics (model, metric, machine, created_at)",
        """
        CREATE TABLE run_status (
            run_id      TEXT PRIMARY KEY,
            status      TEXT NOT NULL,
            note        TEXT NOT NULL,
            updated_at  TEXT NOT NULL
        )
        """,
        f"""
        CREATE TABLE baselines (
            id          {id_column},
            suite       TEXT NOT NULL,
            model       TEXT NOT NULL,
            machine     TEXT NOT NULL,
            branch      TEXT NOT NULL,
            run_ids     TEXT NOT NULL,
            method      TEXT NOT NULL,
            created_at  TEXT NOT NULL
        )
        """,
        "CREATE INDEX baselines_key ON baselines (model, machine, branch, suite, id)",
    ]


_STAMP_2 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$")


def _sort_key_2(created_at: str | None) -> str:
    """The created_at sort key of schema 2: microseconds padded to six digits; "" for none."""
    if not created_at:
        return ""
    match = _STAMP_2.match(created_at)
    if match is None:
        return created_at
    return f"{match.group(1)}.{(match.group(2) or '').ljust(6, '0')}Z"


def _quantile_2(ordered: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), as schema 2 stores them."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def _sqlite_2_backfill(conn: Any) -> None:
    """The tables of schema 2, then each stored run's created_at key and metric rows.

    A schema-1 document has ``metrics: {name: {unit, direction, samples, ...}}``; the run's
    keys (suite, normalised model, fingerprint, branch, commit) are its ``runs`` columns.
    """
    for statement in _tables_2("INTEGER PRIMARY KEY AUTOINCREMENT"):
        conn.execute(statement)
    stored = conn.execute(
        "SELECT run_id, suite, model, machine, branch, git_commit, created_at, document FROM runs"
    ).fetchall()
    for run_id, suite, model, machine, branch, commit, created, document in stored:
        key = _sort_key_2(created)
        conn.execute("UPDATE runs SET created_at = ? WHERE run_id = ?", (key, run_id))
        rows = []
        for name, metric in json.loads(document)["metrics"].items():
            ordered = sorted(float(v) for v in metric["samples"])
            rows.append(
                (
                    *(run_id, name, suite, model, machine, branch, commit, key),
                    *(metric["unit"], metric["direction"], len(ordered), math.fsum(ordered) / len(ordered)),
                    *(_quantile_2(ordered, 0.5), _quantile_2(ordered, 0.95), _quantile_2(ordered, 0.99)),
                    *(ordered[0], ordered[-1]),
                )
            )
        conn.executemany(
            "INSERT INTO metrics (run_id, metric, suite, model, machine, branch, git_commit, created_at, unit,"
            " direction, n, mean, median, p95, p99, min_value, max_value)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


# SQLite cannot add NOT NULL to a column: the tables are rebuilt (the documented way, with
# their indexes made again); the metrics table's reference names the table, so it still holds.
# A TEXT PRIMARY KEY admits NULL in SQLite (unlike an INTEGER one, or any in PostgreSQL), so
# the run ids get NOT NULL too; no perfgate wrote a NULL one, and such a row could not be read.
_SQLITE_3 = """
    CREATE TABLE runs_v3 (
        run_id      TEXT NOT NULL PRIMARY KEY,
        suite       TEXT NOT NULL,
        model       TEXT NOT NULL,
        machine     TEXT,
        branch      TEXT,
        git_commit  TEXT,
        created_at  TEXT NOT NULL,
        document    TEXT NOT NULL
    );
    INSERT INTO runs_v3 (run_id, suite, model, machine, branch, git_commit, created_at, document)
        SELECT run_id, suite, model, machine, branch, git_commit, COALESCE(created_at, ''), document
        FROM runs WHERE run_id IS NOT NULL;
    DROP TABLE runs;
    ALTER TABLE runs_v3 RENAME TO runs;
    CREATE INDEX runs_model_machine ON runs (model, machine, created_at);
    CREATE INDEX runs_branch ON runs (branch, created_at);
    CREATE TABLE run_status_v3 (
        run_id      TEXT NOT NULL PRIMARY KEY,
        status      TEXT NOT NULL,
        note        TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    INSERT INTO run_status_v3 (run_id, status, note, updated_at)
        SELECT run_id, status, note, updated_at FROM run_status WHERE run_id IS NOT NULL;
    DROP TABLE run_status;
    ALTER TABLE run_status_v3 RENAME TO run_status;
    """


# --- both: the keys of runs stored before run format version 3 -----------------------------

# run format 3 fingerprints the hardware alone; up to version 2 perfgate hashed these fields
_FINGERPRINT_2 = ("cpu", "cores", "memory_gib", "os", "arch", "python", "torch", "gpu", "gpu_driver")
_FINGERPRINT_3 = ("cpu", "cores", "memory_gib", "arch", "gpu")
# what a bench run's memory_usage_mb meant up to version 2: now round_memory_mb
_MEMORY_2 = "peak RSS above the process state at the start of each round (includes set-up)"


def _fingerprint_4(details: dict[str, Any], keys: tuple[str, ...]) -> str:
    identity = {key: details.get(key) for key in keys}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _run_format_3_keys(conn: Any, *, placeholder: str) -> None:
    """Give the runs stored before run format version 3 the keys that version reads them under.

    A document is upgraded when it is read, but the queries filter on columns written when the
    run was stored, so an old store would keep its history under fingerprints no new run has,
    and a bench run's old per-round memory figure under the name the pipeline's peak has now:

    * a fingerprint perfgate computed itself (it equals the version-2 hash of the document's
      machine details) becomes the hash of the hardware fields, in ``runs``, ``metrics`` and
      ``baselines``; any other fingerprint (an import's, one set by hand) stays;
    * the ``memory_usage_mb`` metric row of a bench run that measured it per round is
      ``round_memory_mb``, informational.

    ``placeholder`` is the connection's parameter marker (``?`` or ``%s``).
    """
    p = placeholder
    stored = conn.execute("SELECT run_id, machine, document FROM runs").fetchall()
    moved: dict[str, str] = {}
    for run_id, machine, document in stored:
        doc = json.loads(document)
        if not isinstance(doc, dict) or doc.get("schema_version") not in (1, 2):
            continue
        details = doc.get("machine")
        if isinstance(details, dict) and isinstance(machine, str) and machine == details.get("fingerprint"):
            if machine == _fingerprint_4(details, _FINGERPRINT_2):
                new = _fingerprint_4(details, _FINGERPRINT_3)
                moved[machine] = new
                conn.execute(f"UPDATE runs SET machine = {p} WHERE run_id = {p}", (new, run_id))
                conn.execute(f"UPDATE metrics SET machine = {p} WHERE run_id = {p}", (new, run_id))
        config, metrics = doc.get("config"), doc.get("metrics")
        if (
            isinstance(config, dict)
            and config.get("memory_definition") == _MEMORY_2
            and isinstance(metrics, dict)
            and "memory_usage_mb" in metrics
            and "round_memory_mb" not in metrics
        ):
            conn.execute(
                f"UPDATE metrics SET metric = 'round_memory_mb', direction = 'informational' "
                f"WHERE run_id = {p} AND metric = 'memory_usage_mb'",
                (run_id,),
            )
    for old, new in moved.items():
        conn.execute(f"UPDATE baselines SET machine = {p} WHERE machine = {p}", (new, old))


#: SQLite: a script of ``;``-separated statements, or a function of the connection.
SQLITE: list[str | Callable[[Any], None]] = [
    _SQLITE_1,
    _sqlite_2_backfill,
    _SQLITE_3,
    functools.partial(_run_format_3_keys, placeholder="?"),
]


# --- PostgreSQL --------------------------------------------------------------------------

#: PostgreSQL: the statements of each migration, or functions of the cursor.
POSTGRES: list[list[str | Callable[[Any], None]]] = [
    [
        """
        CREATE TABLE runs (
            run_id      TEXT PRIMARY KEY,
            suite       TEXT NOT NULL,
            model       TEXT NOT NULL,
            machine     TEXT,
            branch      TEXT,
            git_commit  TEXT,
            created_at  TEXT NOT NULL,
            document    TEXT NOT NULL
        )
        """,
        # lz4 compresses the documents about twice as fast as the default pglz (benchmarks/store.py);
        # servers before 14, or built without lz4, keep the default
        "DO $$ BEGIN ALTER TABLE runs ALTER COLUMN document SET COMPRESSION lz4;"
        " EXCEPTION WHEN OTHERS THEN NULL; END $$",
        "CREATE INDEX runs_model_machine ON runs (model, machine, created_at)",
        "CREATE INDEX runs_branch ON runs (branch, created_at)",
        *_tables_2("BIGSERIAL PRIMARY KEY"),
    ],
    [functools.partial(_run_format_3_keys, placeholder="%s")],
]

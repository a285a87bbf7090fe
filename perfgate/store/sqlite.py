"""The embedded SQLite store (the default).

WAL mode and a busy timeout let several CI jobs on one machine record at once; every
write is one transaction, so a killed writer leaves either the whole run or nothing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from perfgate.core.codec import run_from_dict, run_to_dict
from perfgate.core.schema import Run
from perfgate.errors import InputError, StorageError
from perfgate.store.base import RunQuery

__all__ = ["MIGRATIONS", "SQLiteStore"]

# Numbered schema migrations, applied in order on open; never edit one that has shipped.
MIGRATIONS: list[str] = [
    # 1: runs with their whole document, and the keys the queries filter on
    """
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
    """,
]


def _path_of(url: str) -> Path:
    # sqlite:///relative/path.db and sqlite:////absolute/path.db, as in SQLAlchemy
    rest = url[len("sqlite://") :]
    if not rest.startswith("/") or rest == "/":
        raise StorageError("expected sqlite:///path/to/file.db", source=url)
    return Path(rest[1:])


class SQLiteStore:
    def __init__(self, url: str) -> None:
        self.url = url
        path = _path_of(url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout = 30000")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot open the SQLite store: {exc}", source=url) from None

    def _migrate(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            if done and max(done) > len(MIGRATIONS):
                raise StorageError(
                    f"store schema version {max(done)} is newer than this perfgate ({len(MIGRATIONS)}); "
                    "upgrade perfgate",
                    source=self.url,
                )
            for number, script in enumerate(MIGRATIONS, start=1):
                if number not in done:
                    for statement in filter(str.strip, script.split(";")):
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (number,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def add_run(self, run: Run) -> bool:
        if not run.run_id:
            raise InputError("a run needs a run_id to be stored (runs written by perfgate bench have one)")
        doc = json.dumps(run_to_dict(run), sort_keys=True, allow_nan=False)
        try:
            cur = self._conn.execute(
                "INSERT OR IGNORE INTO runs (run_id, suite, model, machine, branch, git_commit, created_at, document)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    run.suite,
                    run.model_key,
                    run.machine.fingerprint,
                    run.git.branch,
                    run.git.commit,
                    run.created_at,
                    doc,
                ),
            )
        except sqlite3.Error as exc:
            raise StorageError(f"cannot record run {run.run_id}: {exc}", source=self.url) from None
        return cur.rowcount == 1

    def _decode(self, document: str) -> Run:
        return run_from_dict(json.loads(document), source=self.url)

    def get_run(self, run_id: str) -> Run:
        try:
            row = self._conn.execute("SELECT document FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read run {run_id}: {exc}", source=self.url) from None
        if row is None:
            raise StorageError(f"no run with id {run_id!r}", source=self.url)
        return self._decode(row[0])

    def runs(self, query: RunQuery) -> list[Run]:
        clauses, params = [], []
        for column, value in (
            ("model", query.model),
            ("machine", query.machine),
            ("branch", query.branch),
            ("suite", query.suite),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        sql = "SELECT document FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY created_at DESC, run_id DESC"
        if query.limit is not None:
            sql += f" LIMIT {int(query.limit)}"
        try:
            rows = self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot query runs: {exc}", source=self.url) from None
        return [self._decode(row[0]) for row in rows]

    def close(self) -> None:
        self._conn.close()

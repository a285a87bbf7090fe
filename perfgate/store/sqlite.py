"""The embedded SQLite store (the default).

WAL mode and a busy timeout let several CI jobs on one machine record at once; every
write is one ``BEGIN IMMEDIATE`` transaction, so a killed writer leaves either the whole
run (document and metric rows) or nothing, and concurrent writers queue instead of losing
runs. Migrations run on open, in one transaction, only when the file is behind; a store
that is up to date is opened without writing (so a read-only copy can still be read).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perfgate.errors import StorageError
from perfgate.store import _migrations
from perfgate.store._sql import SQLStore, check_schema_version, hint, one_line

__all__ = ["MIGRATIONS", "SQLiteStore"]


# Numbered schema migrations, applied in order on open (their history: perfgate.store._migrations).
MIGRATIONS: list[str | Callable[[Any], None]] = _migrations.SQLITE


def _path_of(url: str) -> Path:
    # sqlite:///relative/path.db and sqlite:////absolute/path.db, as in SQLAlchemy
    rest = url[len("sqlite://") :]
    if not rest.startswith("/") or rest == "/":
        raise StorageError("expected sqlite:///path/to/file.db", source=url)
    return Path(rest[1:])


class SQLiteStore(SQLStore):
    placeholder = "?"
    driver_errors = (sqlite3.Error, OSError)

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = _path_of(url)
        self.read_only = False
        if self.path.exists() and not self.path.is_file():  # /dev/null would get a -journal beside it in /dev
            kind = "a directory" if self.path.is_dir() else "not a regular file"
            raise StorageError(f"the store path is {kind}; give the path of an SQLite file", source=url)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            if not self._open_read_only():
                message = one_line(exc)
                raise StorageError(f"cannot open the SQLite store: {message}{hint(message)}", source=url) from None
            return
        try:
            self._conn.execute("PRAGMA busy_timeout = 60000")
            self._refuse_foreign()
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            self._conn.close()
            if not self._open_read_only():
                message = one_line(exc)
                raise StorageError(f"cannot open the SQLite store: {message}{hint(message)}", source=url) from None
        except BaseException:
            self._conn.close()
            raise

    def _open_read_only(self) -> bool:
        """A store in a folder perfgate may not write (a read-only mount, an archive) can still
        be read: open it read-only when it is a perfgate store of the current schema. Writing
        to it then fails with a message that says the store is read-only."""
        if not self.path.is_file():
            return False
        target = f"file:{quote(str(self.path.resolve()))}"
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(f"{target}?{flags}", uri=True, timeout=60.0, isolation_level=None)
                self._conn = conn
                self._refuse_foreign()
                if check_schema_version(self._version(), len(MIGRATIONS), self.url):
                    conn.close()
                    raise StorageError(
                        "the store is read-only here and has an older schema; open it once where it can be "
                        "written, so that perfgate can upgrade it",
                        source=self.url,
                    )
            except sqlite3.Error:
                continue
            self.read_only = True
            return True
        return False

    def _version(self) -> int:
        conn = self._conn
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone():
            return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0])
        return 0

    def _refuse_foreign(self) -> None:
        """Someone else's database: adding perfgate's tables (or WAL mode) to it would be a surprise."""
        if self._version() != 0:
            return
        foreign = self._foreign_tables()
        if foreign:
            shown = ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")
            raise StorageError(
                f"is an SQLite database of something else (tables {shown}), not a perfgate store; perfgate "
                "changes nothing in it: give a new file or an existing perfgate store",
                source=self.url,
            )

    def _foreign_tables(self) -> list[str]:
        rows = self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        return [str(r[0]) for r in rows]

    def _migrate(self) -> None:
        if not check_schema_version(self._version(), len(MIGRATIONS), self.url):
            return
        with self._transaction() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for number, step in enumerate(MIGRATIONS, start=1):
                if number in done:
                    continue
                if callable(step):
                    step(conn)
                else:
                    for statement in filter(str.strip, step.split(";")):
                        conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (number,))

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _Cursor(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the journal undoes it on the next open
            raise

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        self._conn.close()


class _Cursor:
    """sqlite3's connection, with ``rowcount`` of the last statement like a DB-API cursor."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.rowcount = -1

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        cur = self._conn.execute(sql, params)
        self.rowcount = cur.rowcount
        return cur

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

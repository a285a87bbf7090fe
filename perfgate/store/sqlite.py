"""The embedded SQLite store (the default).

WAL mode and a busy timeout let several CI jobs on one machine record at once; every
write is one ``BEGIN IMMEDIATE`` transaction, so a killed writer leaves either the whole
run (document and metric rows) or nothing, and concurrent writers queue instead of losing
runs. Migrations run on open, in one transaction, only when the file is behind; a store
that is up to date is opened without writing (so a read-only copy can still be read).

Many processes may open a store that does not exist yet at once (CI jobs): each reads the
version in one read transaction, and creating or migrating the schema happens inside the
write lock, where the version is read again, so exactly one of them does it and the others
wait for it. An open that fails creates nothing beside the file (no -wal, -shm).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perfgate.errors import StorageError
from perfgate.store import _migrations
from perfgate.store._sql import SQLStore, check_schema_version, hint, one_line

try:
    import fcntl
except ImportError:  # no POSIX locks (Windows)
    fcntl = None  # type: ignore[assignment]

__all__ = ["MIGRATIONS", "SQLiteStore"]


# Numbered schema migrations, applied in order on open (their history: perfgate.store._migrations).
MIGRATIONS: list[str | Callable[[Any], None]] = _migrations.SQLITE


_BUSY_TIMEOUT_S = 60.0
# errors for which opening the store read-only is no answer: it is busy, or damaged
_NOT_ABOUT_PERMISSION = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _code(exc: BaseException) -> int | None:
    """The primary SQLite result code of a driver error (None for other errors)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _writable(path: Path) -> bool:
    """Whether this process may write the file and create its -wal beside it. access(), not a
    trial open: closing any descriptor of the file would drop this process's SQLite locks on it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def _wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL mode (bytes 18 and 19 are 2)."""
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\x00") and len(header) == 20 and 2 in (header[18], header[19])


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


# where SQLite's unix VFS takes its locks (os_unix.c): a read lock on these 510 bytes is its
# SHARED lock, a write lock on them its EXCLUSIVE one; the bytes are never data
_PENDING_BYTE = 0x40000000
_SHARED_FIRST, _SHARED_SIZE = _PENDING_BYTE + 2, 510


@contextmanager
def _shared_lock(path: Path) -> Iterator[bool]:
    """SQLite's SHARED lock on ``path``, taken without waiting; yields whether it is held.

    It keeps every SQLite connection from writing the file itself (they need the EXCLUSIVE lock
    for that) until the block ends. A POSIX lock: closing any descriptor of the file in this
    process drops it. Where there are no POSIX locks (Windows), it is never held."""
    if fcntl is None:
        yield False
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, _SHARED_SIZE, _SHARED_FIRST, os.SEEK_SET)
            held = True
        except OSError:  # someone holds the EXCLUSIVE lock: they are writing the file now
            held = False
        yield held
    finally:
        os.close(fd)


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
        if self.path.is_file() and not _writable(self.path):
            self._open_read_only(None)  # opened for writing, it would get a -wal and -shm beside it
            return
        self._refuse_damaged()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            self._open_read_only(exc)
            return
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            version = self._checked_version()
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self._enter_wal()
            if check_schema_version(version, len(MIGRATIONS), self.url):
                self._migrate()
        except (sqlite3.Error, OSError) as exc:
            self._conn.close()
            if _code(exc) in _NOT_ABOUT_PERMISSION:  # retrying or reading cannot help
                raise self._open_error(exc) from None
            self._open_read_only(exc)
        except BaseException:
            self._conn.close()
            raise

    def _open_error(self, exc: BaseException) -> StorageError:
        message = one_line(exc)
        return StorageError(f"cannot open the SQLite store: {message}{hint(message)}", source=self.url)

    def _open_read_only(self, cause: BaseException | None) -> None:
        """A store perfgate may not write (a read-only file, mount or folder, an archive) can
        still be read: open it read-only when it is a perfgate store of the current schema.
        Writing to it then fails with a message that says the store is read-only.

        Without a -wal beside a WAL-mode file, it is opened ``immutable`` (no locks, nothing
        created beside it: a plain read-only connection would leave a -wal and -shm in a
        folder it may write); with one, someone writes it, and its last commits are in the -wal.
        Raises StorageError naming ``cause`` (else the read-only open's error) when it cannot."""
        if not self.path.is_file():
            raise self._open_error(cause or FileNotFoundError("no such file"))
        target = f"file:{quote(str(self.path.resolve()))}"
        modes = ["mode=ro&immutable=1"]
        if not _wal_mode(self.path) or _wal_of(self.path).exists():
            modes.insert(0, "mode=ro")
        error: BaseException | None = cause
        for flags in modes:
            try:
                self._conn = sqlite3.connect(
                    f"{target}?{flags}", uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None
                )
            except sqlite3.Error as exc:
                error = error or exc
                continue
            try:
                version = self._checked_version()
            except sqlite3.Error as exc:
                self._conn.close()
                error = error or exc
                continue
            except BaseException:
                self._conn.close()
                raise
            if check_schema_version(version, len(MIGRATIONS), self.url):
                self._conn.close()
                state, action = (
                    ("has an older schema", "upgrade it") if version else ("has no perfgate tables yet", "create them")
                )
                raise StorageError(
                    f"the store is read-only here and {state}; open it once where it can be written, so that "
                    f"perfgate can {action}",
                    source=self.url,
                )
            self.read_only = True
            return
        raise self._open_error(error or sqlite3.OperationalError("unable to open database file")) from None

    def _refuse_damaged(self) -> None:
        """Refuse a damaged WAL-mode file before SQLite, opening it for writing, creates a -wal
        and -shm beside it that it cannot remove again.

        The file is read as the open reads it, ``immutable`` (no locks, nothing created beside
        it), only when no -wal is beside it and while this process holds SQLite's own shared
        lock on it (:func:`_shared_lock`). A WAL-mode file is written only from its -wal, and
        the last connection to close copies the -wal into it holding SQLite's exclusive lock;
        without the shared lock, a connection could open, write and close between the look for
        a -wal and the read, and the read would see the file half copied: "malformed", though
        nothing is damaged (regression: a ``record`` started with other commands on a new
        store exited 2 so). While the shared lock is held no connection can copy its -wal in,
        or remove it, so a file that reads as damaged with no -wal beside it, before and after
        the read, is damaged. When the lock cannot be had at once, someone is writing the file:
        the open waits for them instead. A file that is not an SQLite database at all gets
        nothing beside it (SQLite refuses it on its header)."""
        wal = _wal_of(self.path)
        if not _wal_mode(self.path) or wal.exists():
            return
        with _shared_lock(self.path) as held:
            if not held or wal.exists():
                return  # in use: SQLite's own locks order the open below
            try:
                conn = sqlite3.connect(
                    f"file:{quote(str(self.path.resolve()))}?mode=ro&immutable=1", uri=True, isolation_level=None
                )
            except sqlite3.Error:
                return  # the open itself will say what is wrong
            try:
                names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "schema_migrations" in names:
                    conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
            except sqlite3.Error as exc:
                # decided before the connection closes: closing any descriptor of the file
                # drops this process's locks on it, the shared lock too
                if _code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) and not wal.exists():
                    raise self._open_error(exc) from None
            finally:
                conn.close()

    def _checked_version(self) -> int:
        """The schema version, after refusing someone else's database, both read in one read
        transaction: another process may be creating the store this moment, and two separate
        reads could see its tables but not yet its version (or the reverse)."""
        self._conn.execute("BEGIN")
        try:
            self._refuse_foreign()
            return self._version()
        finally:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")

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

    def _enter_wal(self) -> None:
        """Switch the file to WAL mode (it stays so), which lets readers and a writer work at once.

        The switch needs the file to itself, and SQLite does not wait for that: its busy handler
        is not called when a connection that reads the file asks to write it, to avoid a deadlock.
        Several processes opening a new store at once all ask, so retry, with random pauses, for
        as long as the busy timeout; once one has switched, the others find WAL mode."""
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        pause = 0.001
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if _code(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or time.monotonic() > deadline:
                    raise
            time.sleep(random.uniform(0.0, pause))
            pause = min(2 * pause, 0.05)

    def _migrate(self) -> None:
        """Create or upgrade the schema in one write transaction. Its lock serialises the
        processes that open a new store at once: each reads the version again inside it, and
        only the first finds anything to do."""
        with self._transaction() as conn:
            self._refuse_foreign()
            if not check_schema_version(self._version(), len(MIGRATIONS), self.url):
                return
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

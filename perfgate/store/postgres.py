"""The PostgreSQL store, for a team whose CI runners share one history.

The driver is psycopg 3 (``pip install 'psycopg[binary]'``), imported only when a
``postgresql://`` URL is opened. The connection runs in autocommit mode; every write is one
explicit transaction, so a writer that dies (killed job, lost connection) leaves nothing
behind: the server rolls the open transaction back. Migrations take a transaction-scoped
advisory lock, so CI jobs that open a fresh database at once migrate it exactly once.
Messages name the URL with its password masked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from perfgate.errors import StorageError
from perfgate.safe.redact import mask, mask_one_url, url_secrets
from perfgate.store import _migrations
from perfgate.store._sql import INSERT_RUN, PreparedRun, SQLStore, check_schema_version, hint, one_line

__all__ = ["MIGRATIONS", "PostgresStore"]

# Numbered schema migrations, applied in order on open (their history: perfgate.store._migrations).
MIGRATIONS: list[list[str | Callable[[Any], None]]] = _migrations.POSTGRES

_MIGRATION_LOCK = 0x70657266676174  # "perfgat": one advisory lock id for schema changes
_CONNECT_TIMEOUT_S = 10


def _connect_hint(message: str) -> str:
    text = message.lower()
    if "password" in text or "authentication" in text:
        return "; check the user and password (in the URL, PGPASSWORD or ~/.pgpass)"
    if "does not exist" in text:
        return "; create the database (createdb) or fix the URL"
    if "refused" in text or "timeout" in text or "could not" in text or "no route" in text:
        return "; check that the server is running and reachable at that host and port"
    return ""


class PostgresStore(SQLStore):
    placeholder = "%s"

    def __init__(self, url: str) -> None:
        self.url = mask_one_url(url)
        self._secrets = url_secrets(url)
        try:
            import psycopg
        except ImportError:
            raise StorageError(
                "the PostgreSQL store needs the psycopg driver: pip install 'psycopg[binary]'", source=self.url
            ) from None
        self.driver_errors = (psycopg.Error,)
        try:
            self._conn = psycopg.connect(
                url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S, application_name="perfgate"
            )
        except psycopg.Error as exc:
            message = self._scrub(one_line(exc))
            raise StorageError(
                f"cannot connect to the PostgreSQL store: {message}{_connect_hint(message)}", source=self.url
            ) from None
        try:
            self._migrate()
        except psycopg.Error as exc:
            self._conn.close()
            message = self._scrub(one_line(exc))
            raise StorageError(f"cannot open the PostgreSQL store: {message}{hint(message)}", source=self.url) from None
        except BaseException:
            self._conn.close()
            raise

    def _scrub(self, message: str) -> str:
        return mask(message, self._secrets)

    def _version(self) -> int:
        if self._fetch("SELECT to_regclass('schema_migrations')")[0][0] is None:
            return 0
        return int(self._fetch("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")[0][0])

    def _migrate(self) -> None:
        if not check_schema_version(self._version(), len(MIGRATIONS), self.url):
            return
        with self._transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            cur.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            cur.execute("SELECT version FROM schema_migrations")
            done = {row[0] for row in cur.fetchall()}
            for number, statements in enumerate(MIGRATIONS, start=1):
                if number in done:
                    continue
                for statement in statements:
                    if callable(statement):
                        statement(cur)
                    else:
                        cur.execute(statement)
                cur.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))

    def _insert_runs(self, cur: Any, prepared: list[PreparedRun]) -> list[bool]:
        # one pipelined batch instead of a round trip per run; RETURNING says which were new
        cur.executemany(self._sql(INSERT_RUN) + " RETURNING run_id", [p.run_values() for p in prepared], returning=True)
        new = set()
        while True:
            row = cur.fetchone()
            if row is not None:
                new.add(row[0])
            if not cur.nextset():
                break
        return [p.run.run_id in new for p in prepared]

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def close(self) -> None:
        self._conn.close()

"""A throwaway PostgreSQL server for tests and benchmarks (docs/design.md §8: real parts in the tests).

``initdb`` refuses to run as root, so as root the server programs run as the ``postgres``
user (``runuser``) in a private directory chowned to it. TCP connections need a password
(scram-sha-256), so a wrong password is a real authentication failure; the server listens
on 127.0.0.1 only, on a free port, with durability settings off (for speed: never in
production). Stopped with ``pg_ctl -m immediate`` and removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["TempPostgres", "find_pg_bindir", "pg_unavailable_reason"]


def find_pg_bindir() -> Path | None:
    """The directory with initdb and pg_ctl: ``pg_config --bindir``, else Debian's versioned folders."""
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=30)
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def pg_unavailable_reason() -> str | None:
    """Why a test server cannot be started here, or None if it can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if find_pg_bindir() is None:
        return "PostgreSQL server programs (initdb, pg_ctl) not found; apt-get install postgresql"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root but runuser is missing (initdb refuses to run as root)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TempPostgres:
    """Start with :meth:`start`, make databases with :meth:`create_database`, end with :meth:`stop`."""

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_pg_bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL server programs not found")
        self.password = secrets.token_hex(12)
        self.port = 0
        self.dir: Path | None = None
        self._sockets = Path("/nonexistent")
        self._admin = None

    def _as_postgres(self, *argv: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)

    def url(self, database: str = "postgres", *, password: str | None = None, port: int | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql://postgres:{secret}@127.0.0.1:{port or self.port}/{database}"

    def start(self) -> str:
        self.dir = Path(tempfile.mkdtemp(prefix="perfgate-pg-"))
        self.dir.chmod(0o755)
        # the Unix socket's path must stay under 108 bytes, whatever TMPDIR is: keep it in /tmp
        self._sockets = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp" if Path("/tmp").is_dir() else None))
        self._sockets.chmod(0o755)
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            shutil.chown(self._sockets, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        data = self.dir / "data"
        subprocess.run(
            self._as_postgres(
                str(self.bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        last_error = ""
        for _attempt in range(3):  # another process may take the free port first
            self.port = _free_port()
            options = (
                f"-k {self._sockets} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            result = subprocess.run(
                self._as_postgres(
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(self.dir / "log"),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    options,
                    "start",
                ),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if result.returncode == 0:
                break
            last_error = result.stderr + (self.dir / "log").read_text(errors="replace")[-2000:]
        else:
            self.stop()
            raise RuntimeError(f"pg_ctl start failed: {last_error}")
        import psycopg

        self._admin = psycopg.connect(self.url(), autocommit=True)
        return self.url()

    def create_database(self, name: str) -> str:
        assert self._admin is not None
        self._admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        assert self._admin is not None
        self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def execute(self, sql: str) -> None:
        assert self._admin is not None
        self._admin.execute(sql)

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self.dir is None:
            return
        data = self.dir / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(
                self._as_postgres(str(self.bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"),
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self._sockets, ignore_errors=True)
        self.dir = None

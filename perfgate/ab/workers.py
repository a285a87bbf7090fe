"""The coordinator's side of a resident worker: start it, talk to it with deadlines, end it.

Each worker is a fresh interpreter (``python -m perfgate.ab.worker``) started in its
revision's own tree, so it imports that revision's code, with its own memory layout and so
its own per-process offset, independent of every other worker's. A revision of perfgate from
before the :mod:`perfgate.ab` package has its worker under an older module name, speaking the
same protocol: :func:`worker_module` names the one the tree has.

Every exchange has a deadline. A worker that ends early, answers nonsense or misses its
deadline raises :class:`WorkerFailed` with the last line of its stderr, and every worker
is killed however the coordinator leaves (error, Ctrl-C, SIGTERM, time-out): :class:`Workers` is a
context manager that owns them all. It owns the processes that run once to their end too
(:meth:`Workers.run`: the counted and preparing processes of ``--measure counts``), which
threads start side by side: :meth:`Workers.end` kills them all at once, so that an interrupt
never waits for a thread whose process runs on.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError

__all__ = [
    "OLD_WORKER_MODULE",
    "WORKER_MODULE",
    "Channel",
    "WorkerFailed",
    "WorkerHung",
    "Workers",
    "allow",
    "last_line",
    "module_missing",
    "pin",
    "worker_module",
]

WORKER_MODULE = "perfgate.ab.worker"
# where a revision of perfgate from before the perfgate.ab package has its resident worker
OLD_WORKER_MODULE = "perfgate.bench.resident"


class WorkerFailed(PerfgateError):
    """A resident worker crashed, hung or answered an error; the message is one line."""


class WorkerHung(WorkerFailed):
    """A resident worker missed its deadline (and has been killed); the caller says what it was doing."""


def worker_module(tree: Path) -> str | None:
    """The module that runs a resident worker in ``tree``, the revision's own tree.

    :data:`WORKER_MODULE` when the tree has it; :data:`OLD_WORKER_MODULE` when the tree is a
    perfgate from before the move and has that file instead; ``None`` when the tree is a perfgate
    older than both (it has no resident worker: the caller falls back); else (a tree that is not
    perfgate, whose workers import the installed perfgate) :data:`WORKER_MODULE`. The older
    perfgate is told by its files, not by starting a worker: an editable install of a newer
    perfgate would otherwise lend that worker its own ``perfgate.ab``. When one side has the
    older name, the two sides' command lines differ in length by five characters, which moves
    that side's initial stack by as many bytes on top of the padding each worker's layout draws
    at random (up to a page).
    """
    if _module_file(tree, WORKER_MODULE).is_file():
        return WORKER_MODULE
    if _module_file(tree, OLD_WORKER_MODULE).is_file():
        return OLD_WORKER_MODULE
    if (tree / "perfgate").is_dir():
        return None
    return WORKER_MODULE


def _module_file(tree: Path, module: str) -> Path:
    return tree.joinpath(*module.split(".")).with_suffix(".py")


def module_missing(error: str, module: str) -> bool:
    """Whether a worker's start ``error`` says that ``module`` or its package cannot be found."""
    package = module.rpartition(".")[0]
    return (
        f"No module named {module}" in error
        or f"No module named '{package}'" in error
        or f"No module named '{package}." in error
    )


def last_line(text: str) -> str:
    """The line of a process's stderr that says what went wrong: a traceback's exception, else the last."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no output"
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:  # the exception line is the first unindented line after the last "Traceback"
        raised = [line for line in lines[starts[-1] + 1 :] if not line[0].isspace()]
        if raised:
            return raised[0].strip()
    return lines[-1].strip()


def pin(pid: int, cpu: int) -> bool:
    """Pin every thread of process ``pid`` to ``cpu``; False where the OS does not allow it."""
    return allow(pid, {cpu})


def allow(pid: int, cpus: set[int]) -> bool:
    """Let every thread of process ``pid`` run on ``cpus`` only; False where the OS does not allow it."""
    setaffinity = getattr(os, "sched_setaffinity", None)
    if setaffinity is None:
        return False
    try:
        tids = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        tids = [pid]
    try:
        for tid in tids:
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                setaffinity(tid, cpus)
    except OSError:
        return False
    return True


class Channel:
    """One resident worker: JSON lines both ways over its stdin and stdout."""

    def __init__(
        self,
        *,
        label: str,
        pid: int,
        read_fd: int,
        write_fd: int,
        stderr: Path,
        proc: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.label = label
        self.pid = pid
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._stderr = stderr
        self._proc = proc
        self._buf = b""
        self.closed = False

    def stderr_tail(self) -> str:
        try:
            with self._stderr.open("rb") as f:
                f.seek(max(0, self._stderr.stat().st_size - 65536))
                return last_line(f.read().decode("utf-8", "replace"))
        except OSError:
            return "no output"

    def _fail(self, what: str, *, hung: bool = False) -> WorkerFailed:
        self.kill()
        return (WorkerHung if hung else WorkerFailed)(f"the {self.label} {what}: {self.stderr_tail()}")

    def send(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._write_fd, data) :]
        except OSError:
            raise self._fail("ended before it was asked to " + str(obj.get("op"))) from None

    def receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"did not answer within {timeout:.0f} s (hung?)", hung=True)
            ready, _, _ = select.select([self._read_fd], [], [], min(left, 1.0))
            if not ready:
                continue
            try:
                chunk = os.read(self._read_fd, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                raise self._fail("ended unexpectedly")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise self._fail("answered something that is not the worker protocol") from None
        if not isinstance(reply, dict):
            raise self._fail("answered something that is not the worker protocol")
        return reply

    def request(self, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply; an error reply raises :class:`WorkerFailed`."""
        self.send(obj)
        reply = self.receive(timeout)
        if reply.get("ok") is not True:
            self.kill()
            raise WorkerFailed(f"the {self.label}: {reply.get('error', 'failed without a message')}")
        return reply

    def close(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit; kill it when it does not."""
        if self.closed:
            return
        try:
            self.send({"op": "exit"})
            self.receive(timeout)
        except WorkerFailed:
            pass
        self.kill()

    def kill(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            for f in (self._proc.stdin, self._proc.stdout):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    return state in ("Z", "X")  # a zombie has ended; its parent reaps it


def _wait_gone(pids: list[int], timeout: float = 5.0) -> None:
    """Wait (briefly) until killed workers have really ended, so nothing outlives the check."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if not _gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if not _gone(p)]


class Workers:
    """All resident workers of one check; every one is killed on exit, however it is left."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        self._tmp = Path(tempfile.mkdtemp(prefix="perfgate-workers-"))
        self._all: list[Channel] = []
        self._runs: list[subprocess.Popen[str]] = []  # the processes of run()
        self._lock = threading.Lock()
        self._ended = False
        self._count = 0

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()
        for path in self._tmp.iterdir():
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            self._tmp.rmdir()

    def _stderr_path(self, label: str) -> Path:
        self._count += 1
        return self._tmp / f"{self._count:03d}-{label.split()[0]}.stderr"

    def end(self) -> None:
        """Kill every worker and process started here, wait until they are gone, and start no more."""
        with self._lock:
            self._ended = True
            channels, runs = list(self._all), list(self._runs)
        for ch in channels:
            ch.kill()
        for proc in runs:
            with contextlib.suppress(OSError):
                proc.kill()
        _wait_gone([ch.pid for ch in channels] + [proc.pid for proc in runs])

    def run(
        self, argv: Sequence[str], *, input: str, cwd: Path | None, env: Mapping[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run one process to its end, ``input`` on its stdin and its output captured, from any thread.

        Past ``timeout`` seconds it is killed and :class:`subprocess.TimeoutExpired` raised with
        what it wrote; :meth:`end` (or leaving the owner) kills it sooner, and it then returns
        with the kill's exit status. After :meth:`end` nothing starts: :class:`WorkerFailed`.
        """
        with self._lock:  # so that end() cannot miss a process that starts meanwhile
            if self._ended:
                raise WorkerFailed(f"{argv[0]} was not started: the check is ending")
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=cwd,
                env=dict(env),
            )
            self._runs.append(proc)
        with proc:
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err) from None
            except BaseException:
                proc.kill()
                raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def spawn(
        self,
        label: str,
        cwd: Path,
        env: dict[str, str],
        args: Sequence[str] = ("-m", WORKER_MODULE),
        *,
        under: Sequence[str] = (),
    ) -> Channel:
        """A fresh worker in ``cwd`` (its revision's tree); ``args`` follow the interpreter (see ``layout``),
        ``under`` precedes it (valgrind's command line, for a worker that profiles under callgrind)."""
        stderr = self._stderr_path(label)
        with stderr.open("wb") as err:
            proc = subprocess.Popen(
                [*under, self.python, *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        assert proc.stdin is not None and proc.stdout is not None
        ch = Channel(
            label=label,
            pid=proc.pid,
            read_fd=proc.stdout.fileno(),
            write_fd=proc.stdin.fileno(),
            stderr=stderr,
            proc=proc,
        )
        self._all.append(ch)
        return ch

"""Starting perfgate's own worker processes and owning them: one way to start them, one owner to end them.

A worker is a fresh interpreter that runs a module of perfgate by name (``python -m MODULE``, or
through the layout's bootstrap: :func:`perfgate.workers.layout.worker_args`), in the tree of the
revision it measures, so that it imports that revision's code. Two kinds are started here: a
process that runs once to its end, its job on standard input (:meth:`Workers.run`, :func:`run_job`:
the bench workers, the counted processes and the native pass; :mod:`perfgate.workers.protocol`),
ended at :data:`PROCESS_DEADLINE`; and a resident worker that answers requests for as long as it
lives, JSON lines both ways (:meth:`Workers.spawn`, :class:`Channel`;
:mod:`perfgate.workers.resident`), each exchange with its own deadline.

An older revision of perfgate has its workers under older module names, speaking the same
protocols: :func:`worker_module` and :func:`module_in` name the one a tree has.

A worker that ends early, answers nonsense or misses its deadline raises :class:`WorkerFailed`
with the last line of its stderr, and every process is killed however the command leaves
(error, Ctrl-C, SIGTERM, time-out): :class:`Workers` is a context manager that owns them all,
whichever threads started them: :meth:`Workers.end` kills them all at once, so that an interrupt
never waits for a thread whose process runs on.

Internal: shared with ``ab``; not part of the Python API (README, "Python API").
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
from perfgate.workers.protocol import last_line

__all__ = [
    "OLD_WORKER_MODULES",
    "PROCESS_DEADLINE",
    "WORKER_MODULE",
    "Channel",
    "WorkerFailed",
    "WorkerHung",
    "Workers",
    "allow",
    "has_module",
    "module_in",
    "module_missing",
    "pin",
    "run_job",
    "worker_module",
]

# seconds one measuring process may take, set-up included (a bench worker, a counted process under
# callgrind: a DQN one takes 70-95 s here, Mamba-2's a few minutes); a stage that hangs ends the
# run at this deadline (docs/limits.md)
PROCESS_DEADLINE = 1_800.0

WORKER_MODULE = "perfgate.workers.resident"
# where older revisions of perfgate have their resident worker, newest first: a protocol between
# versions, not an import
OLD_WORKER_MODULES = ("perfgate.ab.worker", "perfgate.bench.resident")


class WorkerFailed(PerfgateError):
    """A resident worker crashed, hung or answered an error; the message is one line."""


class WorkerHung(WorkerFailed):
    """A resident worker missed its deadline (and has been killed); the caller says what it was doing."""


def has_module(tree: Path, module: str) -> bool:
    """Whether ``tree`` has the file of ``module`` (a plain module, not a package)."""
    return tree.joinpath(*module.split(".")).with_suffix(".py").is_file()


def worker_module(tree: Path) -> str | None:
    """The module that runs a resident worker in ``tree``, the revision's own tree.

    :data:`WORKER_MODULE` when the tree has it; one of :data:`OLD_WORKER_MODULES` when the tree
    is an older perfgate that has that file instead; ``None`` when the tree is a perfgate older
    than all of them (it has no resident worker: the caller falls back); else (a tree that is not
    perfgate, whose workers import the installed perfgate) :data:`WORKER_MODULE`. The older
    perfgate is told by its files, not by starting a worker: an editable install of a newer
    perfgate would otherwise lend that worker its own module. When one side has an older name,
    the two sides' command lines differ in length by a few characters, which moves that side's
    initial stack by as many bytes on top of the padding each worker's layout draws at random
    (up to a page).
    """
    for module in (WORKER_MODULE, *OLD_WORKER_MODULES):
        if has_module(tree, module):
            return module
    if (tree / "perfgate").is_dir():
        return None
    return WORKER_MODULE


def module_in(tree: Path | None, module: str, older: Sequence[str] = ()) -> str:
    """``module`` (a worker's), or the first of its ``older`` names when ``tree`` is a perfgate
    that has only that one; ``module`` when ``tree`` has none of them (or is None: this process's)."""
    if tree is None or has_module(tree, module):
        return module
    return next((old for old in older if has_module(tree, old)), module)


def module_missing(error: str, module: str) -> bool:
    """Whether a worker's start ``error`` says that ``module`` or its package cannot be found."""
    package = module.rpartition(".")[0]
    return (
        f"No module named {module}" in error
        or f"No module named '{package}'" in error
        or f"No module named '{package}." in error
    )


def run_job(
    owner: Workers, argv: list[str], job: Mapping[str, Any], env: Mapping[str, str], cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    """One worker process that runs once, started by ``owner``, which kills it when the command is
    left (an error, Ctrl-C, SIGTERM): the job as JSON on its stdin, its output captured, ended at
    :data:`PROCESS_DEADLINE` (``subprocess.TimeoutExpired``)."""
    return owner.run(argv, input=json.dumps(job, sort_keys=True), cwd=cwd, env=env, timeout=PROCESS_DEADLINE)


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
    """The owner of every worker process of one command; every one is killed on exit, however it is left."""

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
        self, argv: Sequence[str], *, input: str, cwd: Path | None, env: Mapping[str, str], timeout: float | None
    ) -> subprocess.CompletedProcess[str]:
        """Run one process to its end, ``input`` on its stdin and its output captured, from any thread.

        Past ``timeout`` seconds (None: no limit) it is killed and :class:`subprocess.TimeoutExpired` raised with
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
                raise subprocess.TimeoutExpired(proc.args, timeout or 0.0, output=out, stderr=err) from None
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

"""SIGINT and SIGTERM sent to perfgate's own process in counts mode (`bench` and `ab --measure counts`).

A terminal's Ctrl-C reaches the whole process group, valgrind's processes too; a supervisor,
`docker stop` or a CI runner's cancellation signals perfgate's process only. Regression for
counts mode ignoring that: `bench --measure counts` waited for its counted processes after
SIGINT (up to their 1,800 s deadline) and, killed by SIGTERM, left both valgrind processes
running and their folders behind; `ab --measure counts` sat 20 s and more with its worktrees
and workers alive. The timed `ab` ends its workers at once (:class:`perfgate.workers.spawn.Workers`);
counts mode starts its processes through the same owner.

Each test runs perfgate in a folder of its own as TMPDIR, so its valgrind processes are the
ones whose command line names that folder (callgrind's output and log files are in it), and
sends the signal once the counted processes hang in a stage that never returns: nothing but
the signal can end them. The timed `ab` gets the same signals, its workers in worktrees under
that folder. No time is asserted; the timeouts are hang guards.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_counts import STAGES

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")

SIGNALS = [signal.SIGINT, signal.SIGTERM]


def _theirs(tmp: Path) -> list[int]:
    """The processes whose command line names ``tmp`` (the test's valgrind processes), or that
    run in a folder under it (the timed `ab`'s workers, in their worktrees)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = str((entry / "cwd").readlink())
        except (OSError, IndexError):
            continue  # ended meanwhile
        if (str(tmp).encode() in cmdline or cwd.startswith(f"{tmp}/")) and state != "Z":
            found.append(int(entry.name))
    return found


def _hanging(tmp: Path) -> int:
    """How many counted processes have reached the stage that hangs (their progress files say so)."""
    return sum(
        1
        for progress in tmp.glob("perfgate-counts-*/progress.txt")
        if "hangs" in (progress.read_text(errors="replace").splitlines() or [""])[-1]
    )


def _interrupt(
    argv: list[str], cwd: Path, tmp: Path, signum: signal.Signals, ready: Callable[[Path], bool] | None = None
) -> tuple[int, str, list[str]]:
    """Run perfgate, signal its process once ``ready`` (default: the counted processes hang),
    and return its exit code, its stderr and what was in ``tmp`` when the signal was sent."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfgate", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        hanging = min(2, os.cpu_count() or 1)  # processes run side by side, one per CPU
        ready = ready or (lambda tmp: _hanging(tmp) >= hanging)
        for _ in range(3000):  # hang guard: 300 s for valgrind to start and set the suite up
            if ready(tmp) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert _theirs(tmp), "no process of the test's folder runs"
        made = sorted(p.name for p in tmp.iterdir())
        os.kill(proc.pid, signum)  # the process, not its group
        sent = time.monotonic()
        _, err = proc.communicate(timeout=120)  # hang guard; the deadline it would wait for is 1,800 s
        took = time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait()
        left = _theirs(tmp)
        for pid in left:  # what a failing test would leave behind: this test's processes only
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"valgrind processes left running: {left}"
    print(f"{' '.join(argv[:1] + argv[-3:-2])}: {signum.name} to a clean exit in {took:.2f} s")
    return proc.returncode, err.decode(), made


def _clean_exit(code: int, err: str, command: str, signum: signal.Signals, tmp: Path) -> None:
    assert code == 128 + signum, err
    assert err.strip().splitlines()[-1] == f"perfgate {command}: interrupted ({signum.name})", err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp.iterdir()) == [], "left in the temporary folder"


@needs_valgrind
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_bench_counts_ends_its_valgrind_processes_on_a_signal_to_its_process(tmp_path, signum):
    (tmp_path / "tinystages.py").write_text(STAGES)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = ["bench", "--suite", "hanging", "--stages-module", "tinystages", "--model", "x", "--measure", "counts"]
    code, err, made = _interrupt([*argv, "--output", str(tmp_path / "run.json")], tmp_path, tmp, signum)
    assert sum(name.startswith("perfgate-counts-") for name in made) >= 1, made
    _clean_exit(code, err, "bench", signum, tmp)
    assert not (tmp_path / "run.json").exists()


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=perfgate", "-c", "user.email=perfgate@example.invalid"]
    cmd += ["-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "tinystages.py").write_text(STAGES)
    _git(repo, "add", "tinystages.py")
    _git(repo, "commit", "-q", "-m", "the tiny suite")
    return repo


def _ab_argv(repo: Path, measure: str) -> list[str]:
    argv = ["ab", "--repo", str(repo), "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite", "hanging"]
    return [*argv, "--stages-module", "tinystages", "--model", "x", "--measure", measure]


@needs_valgrind
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_ab_counts_ends_its_workers_and_worktrees_on_a_signal_to_its_process(tmp_path, signum):
    repo = _repo(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = [*_ab_argv(repo, "counts"), "--output", str(tmp_path / "ab.md")]
    code, err, made = _interrupt(argv, tmp_path, tmp, signum)
    assert any(name.startswith("perfgate-ab-") for name in made), made  # the worktrees' folder
    _clean_exit(code, err, "ab", signum, tmp)
    assert _git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1  # the repository's own
    assert not (tmp_path / "ab.md").exists()


def _workers_started(tmp: Path) -> bool:
    """Whether a resident worker of the timed `ab` has started (its stderr file exists)."""
    return any(folder.is_dir() and any(folder.iterdir()) for folder in tmp.glob("perfgate-workers-*"))


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_timed_ab_says_which_signal_ended_it(tmp_path, signum):
    """The same signals to the timed `ab`. Regression for SIGTERM read as Ctrl-C there (exit 130,
    "interrupted (SIGINT)"): `ab` put a second SIGTERM handler over the command's own."""
    repo = _repo(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = [*_ab_argv(repo, "times"), "--output", str(tmp_path / "ab.md")]
    code, err, made = _interrupt(argv, tmp_path, tmp, signum, ready=_workers_started)
    assert any(name.startswith("perfgate-ab-") for name in made), made
    _clean_exit(code, err, "ab", signum, tmp)
    assert _git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1

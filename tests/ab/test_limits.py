"""`perfgate ab` within its limits: --quick runs, a hung stage ends the check, numeric flags are checked.

A tiny git repository holds a user stage module. Regression for `ab --quick` (a TypeError,
max_pairs given twice), for a hung stage that kept `ab --time-budget 20` running past 120 s
(fixed 300 s and 60 s deadlines), and for `--time-budget inf|nan` (a traceback, or a run).
The only time asserted is a generous upper bound for a hang: the budget, its grace, and a
margin for start-up and clean-up.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest

from perfgate.ab.resident import grace_seconds
from perfgate.cli import main
from tests.safety.procs import one_line_error, perfgate

STAGES = '''\
"""A user stage for the perfgate ab limit tests."""

import time

from perfgate.bench import stage

HANG = {hang!r}


@stage("work", metric="work_time_ms", unit="ms", suite="abtest")
def work(ctx):
    if HANG == "setup":
        time.sleep(1000)
    data = list(range(200))

    def once():
        if HANG == "call":
            time.sleep(1000)
        return sum(data)

    return once
'''


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=perfgate", "-c", "user.email=perfgate@example.invalid"]
    cmd += ["-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def make_repo(path: Path, hang: str | None = None) -> Path:
    """A repository of two commits with the same stage; ``hang`` ("setup", "call") makes the second hang there."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "mystages.py").write_text(STAGES.format(hang=None))
    git(path, "add", "mystages.py")
    git(path, "commit", "-q", "-m", "baseline")
    (path / "mystages.py").write_text(STAGES.format(hang=hang))
    git(path, "commit", "-q", "--allow-empty", "-am", "current")
    return path


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def marked_processes(mark: str) -> list[int]:
    """Live processes whose environment holds ``mark`` (the check's workers inherit it)."""
    found = []
    needle = f"AB_LIMITS_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


ARGS = ("--baseline-ref", "HEAD~1", "--current-ref", "HEAD", "--suite", "abtest", "--stages-module", "mystages")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no perfgate configuration of the project's own checkout applies


def test_quick_runs_end_to_end(tmp_path, capsys):
    """Regression for `ab --quick`: ResidentOptions got max_pairs twice, a TypeError on every call."""
    repo = make_repo(tmp_path / "repo")
    code = main(["ab", "--repo", str(repo), *ARGS, "--model", "any", "--quick", "--time-budget", "20", "--quiet"])
    assert code in (0, 1), capsys.readouterr().err  # a smoke run decides nothing; it must not be an error
    assert worktrees(repo) == [f"worktree {repo}"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hang", "words"), [("setup", "did not finish its set-up"), ("call", "did not return from its first calls")]
)
def test_a_hung_stage_ends_the_check_within_its_budget_and_grace(tmp_path, hang, words):
    """Regression: a stage that sleeps 1000 s kept `ab --time-budget 20` running past 120 s."""
    repo = make_repo(tmp_path / "repo", hang=hang)
    temp = tmp_path / "tmp"
    temp.mkdir()
    mark = uuid.uuid4().hex
    budget = 20.0
    env = {"AB_LIMITS_MARK": mark, "TMPDIR": str(temp)}
    started = time.monotonic()
    done = perfgate("ab", "--repo", repo, *ARGS, "--model", "any", "--time-budget", f"{budget:g}", env=env)
    took = time.monotonic() - started
    assert done.code == 2, done.err
    lines = [line for line in done.err.splitlines() if line.strip() and not line.startswith("perfgate ab: pair")]
    one_line_error(lines[-1])
    assert "Traceback" not in done.err
    assert f"stage 'work' {words}" in lines[-1] and "current `HEAD`" in lines[-1], lines[-1]
    assert f"--time-budget {budget:g} s plus {grace_seconds(budget):.0f} s grace" in lines[-1]
    # ended: the budget, its grace, and a generous margin for starting and stopping Python on a busy machine
    assert took < budget + grace_seconds(budget) + 45, took
    assert marked_processes(mark) == []  # no worker left behind
    assert worktrees(repo) == [f"worktree {repo}"] and list(temp.iterdir()) == []


NUMERIC = [
    ("--time-budget", "inf"),
    ("--time-budget", "nan"),
    ("--time-budget", "0"),
    ("--time-budget", "-1"),
    ("--time-budget", "1e300"),
    ("--pairs", "0"),
    ("--pairs", "-1"),
    ("--pairs", "2"),
    ("--pairs", "9" * 400),
    ("--order-seed", "-1"),
    ("--order-seed", "9" * 400),
    ("--threshold", "nan"),
    ("--threshold", "inf"),
    ("--threshold", "-1"),
    ("--alpha", "0"),
    ("--alpha", "nan"),
    ("--alpha", "inf"),
    ("--alpha", "-1"),
    ("--alpha", "1"),
    ("--rounds", "0"),
    ("--rounds", "-1"),
    ("--rounds", "9" * 400),
    ("--repeat", "0"),
    ("--repeat", "-1"),
    ("--repeat", "9" * 400),
]


@pytest.mark.parametrize(("flag", "value"), NUMERIC)
def test_a_numeric_flag_out_of_range_is_one_line_naming_it(tmp_path, capsys, flag, value):
    """Regression for `ab --time-budget inf` (a traceback) and `--time-budget nan` (ran, exit 1)."""
    argv = ["ab", "--repo", str(tmp_path), *ARGS, "--model", "any", flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert f"field '{flag}'" in err, err


@pytest.mark.parametrize("value", ["nan", "abc", "1.5"])
def test_a_flag_argparse_cannot_read_names_it_without_a_traceback(tmp_path, capsys, value):
    assert main(["ab", "--repo", str(tmp_path), *ARGS, "--model", "any", "--pairs", value]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "argument --pairs" in err.strip().splitlines()[-1]

"""`perfgate ab`: two revisions of a real git repository measured interleaved, checked paired.

The repository is a tiny one in a temporary folder with a user stage module; its second
commit does 30 % more work than the first. The only timing behaviour asserted is that
designed slowdown being found (resident workers alternate blocks on one CPU, the test runs
across fresh worker pairs); an A/A run must never be called a regression. The engine's own
behaviour (block order, pinning, worker ends, crashes) is tested in ``test_resident.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.ab.fallback import AbOptions, abba_order
from perfgate.ab.revisions import WORKTREE, checkout
from perfgate.cli import main
from perfgate.errors import InputError

STAGES = '''\
"""A user stage for the perfgate ab tests: a fixed numpy computation, allocation-free."""

import numpy as np

from perfgate.bench import stage

WORK = {work}


@stage("work", metric="work_time_ms", unit="ms", suite="abtest", repeat=30, warmup=3)
def work(ctx):
    x = np.linspace(0.0, 1.0, 10_000)
    y = np.empty_like(x)

    def once():
        y[:] = x
        for _ in range(WORK):
            np.sin(y, out=y)
            np.multiply(y, 0.5, out=y)
            np.add(y, 0.25, out=y)
        return y

    return once
'''
BASE_WORK = 10
SLOWER_WORK = 13  # the current commit: 30 % more work


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=perfgate", "-c", "user.email=perfgate@example.invalid"]
    cmd += ["-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def write_stages(repo: Path, work: int) -> None:
    (repo / "mystages.py").write_text(STAGES.format(work=work))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A git repository: commit 1 the baseline stage, commit 2 the same with SLOWER times the work."""
    path = tmp_path_factory.mktemp("abrepo")
    git(path, "init", "-q", "-b", "main")
    write_stages(path, BASE_WORK)
    git(path, "add", "mystages.py")
    git(path, "commit", "-q", "-m", "baseline")
    first = git(path, "rev-parse", "HEAD")
    write_stages(path, SLOWER_WORK)
    git(path, "commit", "-q", "-am", "more work")
    second = git(path, "rev-parse", "HEAD")
    return path, first, second


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no perfgate configuration of the project's own checkout applies


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def ab(repo: Path, baseline: str, current: str | None, tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    report, js = tmp_path / "report.md", tmp_path / "report.json"
    argv = ["ab", "--repo", str(repo), "--baseline-ref", baseline, "--suite", "abtest"]
    argv += ["--stages-module", "mystages", "--model", "dqn", "--time-budget", "20", "--output", str(report)]
    argv += ["--json", str(js), *extra]
    if current is not None:
        argv += ["--current-ref", current]
    code = main(argv)
    text = report.read_text() if report.exists() else ""
    data = json.loads(js.read_text()) if js.exists() else {}
    return code, text, data


def verdicts(data: dict) -> dict[str, str]:
    return {c["metric"]: c["verdict"] for c in data["comparisons"] if c["statistic"] == "median"}


# --- the order -----------------------------------------------------------------------


def test_abba_order():
    assert "".join(abba_order(4)) == "ABBAABBA"
    assert "".join(abba_order(1)) == "AB"
    assert "".join(abba_order(3)) == "ABBAAB"


@pytest.mark.parametrize("pairs", [1, 2, 5, 6, 11])
def test_abba_order_pairs_hold_one_of_each(pairs):
    order = abba_order(pairs)
    assert len(order) == 2 * pairs
    assert all(sorted(order[2 * i : 2 * i + 2]) == ["A", "B"] for i in range(pairs))
    firsts = [order[2 * i] for i in range(pairs)]
    assert firsts.count("A") - firsts.count("B") in (0, 1)  # neither side is always measured first


def test_abba_order_refuses_no_pairs():
    with pytest.raises(ValueError, match="pairs"):
        abba_order(0)


def test_options_need_three_pairs_and_one_model():
    with pytest.raises(InputError, match="--pairs"):
        AbOptions(model="dqn", pairs=2)
    with pytest.raises(InputError, match="one model"):
        AbOptions(model="all")


# --- end to end ----------------------------------------------------------------------


@pytest.mark.slow
def test_more_work_is_a_paired_regression(repo, tmp_path):
    path, first, second = repo
    code, text, data = ab(path, first, second, tmp_path, "--order-seed", "7")
    assert code == 1
    assert verdicts(data)["work_time_ms"] == "regressed"
    assert data["regressions"] == ["work_time_ms"]
    assert "interleaved A/B in resident workers" in text and "random order (seed 7)" in text
    assert "work_time_ms" in text.split("### Regressions")[1].split("###")[0]
    assert "**Baseline**: " in text and f"(commit: {first})" in text and f"(commit: {second})" in text
    info = data["ab"]
    assert info["engine"] == "resident workers" and info["seed"] == 7
    assert info["pairs"] >= 3 and info["looks"] and info["looks"][-1] == info["pairs"]
    assert (info["baseline_commit"], info["current_commit"], info["current_dirty"]) == (first, second, False)
    work = next(c for c in data["comparisons"] if c["metric"] == "work_time_ms")
    assert "worker pairs" in work["noise"]
    assert worktrees(path) == [f"worktree {path}"]


@pytest.mark.slow
def test_a_revision_without_resident_workers_is_measured_process_by_process(repo, tmp_path, monkeypatch):
    from perfgate.ab import ProtocolMissing
    from perfgate.ab import check as engine

    def old_perfgate(*args, **kwargs):
        raise ProtocolMissing("the baseline has no resident worker")

    monkeypatch.setattr(engine, "measure_resident", old_perfgate)
    path, first, second = repo
    code, text, data = ab(path, first, second, tmp_path, "--pairs", "4")
    assert code in (0, 1)
    assert data["ab"]["engine"] == "process-level ABBA" and data["ab"]["order"] == "ABBAABBA"
    assert "the older process-level design was used" in text
    assert worktrees(path) == [f"worktree {path}"]


@pytest.mark.slow
def test_same_ref_on_both_sides_is_never_a_regression(repo, tmp_path):
    path, first, _ = repo
    html = tmp_path / "report.html"
    code, text, data = ab(path, first, first, tmp_path, "--html", str(html))
    assert code == 0
    assert verdicts(data)["work_time_ms"] in ("unchanged", "inconclusive")
    assert "No Regression Detected" in text
    assert "interleaved A/B in resident workers" in html.read_text()
    assert worktrees(path) == [f"worktree {path}"]


@pytest.mark.slow
def test_worktree_measures_uncommitted_changes_and_is_the_default_when_dirty(repo, tmp_path):
    # HEAD does SLOWER times the work; the uncommitted edit takes it back to the baseline's amount.
    # Measuring HEAD instead of the edit would be the regression the test above finds.
    path, first, _ = repo
    write_stages(path, BASE_WORK)
    try:
        code, _, data = ab(path, first, None, tmp_path)
    finally:
        git(path, "checkout", "--", "mystages.py")
    assert code == 0
    assert verdicts(data)["work_time_ms"] != "regressed"
    assert data["ab"]["current_ref"] == WORKTREE and data["ab"]["current_dirty"] is True
    assert worktrees(path) == [f"worktree {path}"]


# --- errors: exit 2, one line, worktrees removed -----------------------------------------


def test_unknown_ref_exit_2_names_the_ref(repo, tmp_path, capsys):
    path, first, _ = repo
    code, text, _ = ab(path, "no-such-branch", first, tmp_path)
    assert code == 2 and text == ""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--baseline-ref" in err[0] and "'no-such-branch'" in err[0]
    code, _, _ = ab(path, first, "deadbeef" * 5, tmp_path)
    assert code == 2
    assert "'deadbeef" in capsys.readouterr().err
    assert worktrees(path) == [f"worktree {path}"]


def test_not_a_repository_exit_2(tmp_path, capsys):
    code, _, _ = ab(tmp_path, "main", "HEAD", tmp_path)
    assert code == 2
    assert "not inside a git repository" in capsys.readouterr().err


def test_too_few_pairs_exit_2(repo, tmp_path, capsys):
    path, first, second = repo
    code, _, _ = ab(path, first, second, tmp_path, "--pairs", "2")
    assert code == 2
    assert "--pairs" in capsys.readouterr().err


def test_failing_measurement_exit_2_and_worktrees_removed(repo, tmp_path, capsys):
    path, first, second = repo
    code, _, _ = ab(path, first, second, tmp_path, "--stages-module", "no_such_module")
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "the baseline" in err[0] and "cannot be imported" in err[0] and "no_such_module" in err[0]
    assert worktrees(path) == [f"worktree {path}"]


def test_worktrees_removed_on_interrupt(repo):
    path, first, second = repo
    seen: list[Path] = []
    with pytest.raises(KeyboardInterrupt), checkout(path, first, second) as (base, cur):
        seen += [base.path, cur.path]
        assert (base.path / "mystages.py").read_text() == STAGES.format(work=BASE_WORK)
        assert (cur.path / "mystages.py").read_text() == STAGES.format(work=SLOWER_WORK)
        assert len(worktrees(path)) == 3
        raise KeyboardInterrupt
    assert not any(p.exists() for p in seen)
    assert worktrees(path) == [f"worktree {path}"]


def test_subprocess_help_smoke():
    out = subprocess.run(
        [sys.executable, "-m", "perfgate", "ab", "--help"], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0
    assert "--baseline-ref" in out.stdout and WORKTREE in out.stdout


def test_a_hung_stage_ends_a_process_level_check_within_its_budget(tmp_path, monkeypatch, capsys):
    """Regression for the process-level engine (revisions without resident workers) running a
    hung stage's `perfgate bench` without any deadline: it now ends at the budget plus its grace."""
    import time

    from perfgate.ab import ProtocolMissing
    from perfgate.ab import check as engine
    from perfgate.ab import fallback as process_level

    def old_perfgate(*args, **kwargs):
        raise ProtocolMissing("the baseline has no resident worker")

    monkeypatch.setattr(engine, "measure_resident", old_perfgate)
    monkeypatch.setattr(process_level, "PROCESS_FLOOR", 1.0)
    path = tmp_path / "hangs"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "mystages.py").write_text(
        "import time\nfrom perfgate.bench import stage\n\n\n"
        '@stage("work", metric="work_time_ms", unit="ms", suite="abtest")\n'
        "def work(ctx):\n    return lambda: time.sleep(1000)\n"
    )
    git(path, "add", "mystages.py")
    git(path, "commit", "-q", "-m", "hangs")
    started = time.monotonic()
    argv = ["ab", "--repo", str(path), "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--suite", "abtest"]
    code = main([*argv, "--stages-module", "mystages", "--model", "dqn", "--time-budget", "5", "--pairs", "3"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2, err
    assert "did not finish" in err and "--time-budget" in err
    assert took < 5 + 10 + 30, took  # the budget, its grace, and a generous margin for start-up
    assert worktrees(path) == [f"worktree {path}"]


def test_the_pipeline_data_is_one_read_only_file_for_both_sides(repo, tmp_path, monkeypatch):
    """Each side used to synthesise its own copy of the data in its own tree: byte-identical
    files that load at different speeds, which an A/A check read as a DBN-load change. Both
    sides now get one file, written once for the check, read-only, removed afterwards."""
    import stat

    from perfgate.ab import check as engine
    from perfgate.ab._plan import setup_request
    from perfgate.errors import PerfgateError

    seen = {}

    def capture(sides, options, policy, progress=None):
        path = options.data
        seen.update(path=path, mode=stat.S_IMODE(path.stat().st_mode), size=path.stat().st_size)
        seen["request"] = setup_request(options)  # the one set-up request both sides are sent
        with path.open("rb") as handle:
            seen["head"] = handle.read(4)
        raise PerfgateError("stop here: the measurement itself is not what this test is about")

    monkeypatch.setattr(engine, "measure_resident", capture)
    path, first, second = repo
    argv = ["ab", "--repo", str(path), "--baseline-ref", first, "--current-ref", second, "--model", "dqn"]
    assert main([*argv, "--time-budget", "20"]) == 2
    assert seen["mode"] & 0o222 == 0  # nobody may write it
    assert seen["request"]["data"] == str(seen["path"])
    assert seen["head"][:3] == b"DBN" and seen["size"] > 0
    assert not seen["path"].exists()  # removed with the check


def _older_perfgate(tree: Path) -> None:
    """A copy of this perfgate in ``tree`` without the bench worker: a revision from before it."""
    import shutil

    import perfgate

    shutil.copytree(Path(perfgate.__file__).parent, tree / "perfgate", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "perfgate" / "workers" / "bench.py").unlink()


def test_the_fallback_starts_the_bench_worker_unless_the_tree_is_an_older_perfgate(tmp_path):
    from perfgate.ab.fallback import bench_worker
    from perfgate.workers.repeat import WORKER_MODULE

    new, older, other = tmp_path / "new", tmp_path / "older", tmp_path / "other"
    (new / "perfgate" / "workers").mkdir(parents=True)
    (new / "perfgate" / "workers" / "bench.py").write_text("")
    (older / "perfgate" / "cli").mkdir(parents=True)  # a perfgate with only `perfgate bench`
    other.mkdir()  # not perfgate: its processes import the installed perfgate
    assert WORKER_MODULE == "perfgate.workers.bench"
    assert (bench_worker(new), bench_worker(older), bench_worker(other)) == (WORKER_MODULE, None, WORKER_MODULE)


@pytest.mark.parametrize("older", [False, True])
def test_a_fallback_measurement_is_a_bench_worker_or_an_older_trees_perfgate_bench(tmp_path, older):
    from perfgate.ab.fallback import AbOptions, revision_bench
    from perfgate.ab.revisions import Revision

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "mystages.py").write_text(STAGES.format(work=1))
    if older:
        _older_perfgate(tree)
    options = AbOptions(model="dqn", suite="abtest", stages_modules=("mystages",), quick=True, rounds=2, repeat=3)
    bench = revision_bench(Revision(ref="HEAD", commit="0" * 40, path=tree), options, "baseline")
    assert (bench.worker is None) is older
    if older:
        assert {"--processes", "--stages-module", "--config", "--quick"} <= bench.flags
    run = bench.measure(tmp_path / "run.json")
    assert run.model == "dqn" and run.suite == "abtest" and run.metrics["work_time_ms"].samples
    assert run.config["quick"] is True

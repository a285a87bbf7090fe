"""Where it went: two revisions of a real git repository profiled on a stage (`perfgate explain`, `ab`).

The repository's stages module has a pure-Python helper beside a steady part; its second commit
gives the helper twice the work, and its third adds a torch operator (a sort) to a training-like
step. The profiles must name the helper first, in times mode (pyinstrument) and in counts mode
(the interpreter's bytecodes, exact), name the added operator (torch.profiler), and name nothing
on identical code. Only rankings and names are asserted, never a time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfgate.cli import main
from tests.ab.test_command import git

STAGES = '''\
"""Stages for the perfgate explain tests: a pure-Python helper beside a steady part, and a torch step."""

import torch

from perfgate.bench import stage

HELPER_LOOPS = {loops}
SORTED = {sorted}


def busy_helper(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def steady_part(n):
    total = 0
    for i in range(n):
        total += i ^ 3
    return total


@stage("work", metric="work_time_ms", unit="ms", suite="explaintest", repeat=20, warmup=2)
def work(ctx):
    def once():
        return busy_helper(HELPER_LOOPS) + steady_part(30_000)

    return once


@stage("step", metric="step_time_ms", unit="ms", suite="explaintest", repeat=20, warmup=2)
def step(ctx):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layer = torch.nn.Linear(128, 128)
    x = torch.randn(512, 128)

    def once():
        with torch.no_grad():
            y = torch.relu(layer(x))
            if SORTED:
                y = torch.sort(y, dim=0).values
            return float(y.sum())

    return once
'''
NUMPY_STAGES = '''\
"""A numpy stage for the callgrind test: no torch, so that its workers start quickly under valgrind."""

import numpy as np

from perfgate.bench import stage

KERNEL = {kernel}
X = np.random.default_rng(0).standard_normal(4_000)


def smooth(x, k):
    return np.convolve(x, np.ones(k) / k, mode="same")


@stage("np", metric="np_time_ms", unit="ms", suite="explainnp", repeat=20, warmup=2)
def np_stage(ctx):
    def once():
        return float(smooth(X, KERNEL)[0]) + float(np.sort(X)[0])

    return once
'''
# a package of the tree's own that hides the real profiler: the tree is first on the workers' PYTHONPATH
HIDDEN = 'raise ImportError("hidden by the test")\n'


def write(repo: Path, loops: int, sorted_: bool) -> None:
    (repo / "explainstages.py").write_text(STAGES.format(loops=loops, sorted=sorted_))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Commits: base; helper (the helper does 2× the work); sort (an added torch operator, and a numpy call
    with 6× the work); hidden (no profiler)."""
    path = tmp_path_factory.mktemp("explainrepo")
    git(path, "init", "-q", "-b", "main")
    commits = {}
    for name, loops, sorted_ in (("base", 30_000, False), ("helper", 60_000, False), ("sort", 30_000, True)):
        write(path, loops, sorted_)
        (path / "npstages.py").write_text(NUMPY_STAGES.format(kernel=96 if name == "sort" else 16))
        git(path, "add", "explainstages.py", "npstages.py")
        git(path, "commit", "-q", "-m", name)
        commits[name] = git(path, "rev-parse", "HEAD")
    (path / "pyinstrument").mkdir()
    (path / "pyinstrument" / "__init__.py").write_text(HIDDEN)
    write(path, 60_000, False)
    git(path, "add", "pyinstrument", "explainstages.py")
    git(path, "commit", "-q", "-m", "hidden")
    commits["hidden"] = git(path, "rev-parse", "HEAD")
    return path, commits


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def explain(repo: Path, base: str, cur: str, tmp_path: Path, *extra: str) -> tuple[int, list[dict], str]:
    out, md = tmp_path / "explain.json", tmp_path / "explain.md"
    argv = ["explain", "--repo", str(repo), "--baseline-ref", base, "--current-ref", cur, "--model", "dqn"]
    argv += ["--suite", "explaintest", "--stages-module", "explainstages", "--json", str(out), "--output", str(md)]
    argv += ["--quiet", "--seconds", "0.6", *extra]
    code = main(argv)
    data = json.loads(out.read_text()) if out.exists() else []
    return code, data, md.read_text() if md.exists() else ""


def named(explanation: dict) -> list[str]:
    return [c["name"] for c in explanation["contributors"] if c["named"]]


@pytest.mark.parametrize("measure", ["times", "counts"])
def test_a_slowed_helper_is_named_first(repo, tmp_path, measure):
    path, commits = repo
    # counts: workers under valgrind import torch (the module's other stage needs it): give them time
    budget = ("--explain-budget", "400") if measure == "counts" else ()
    code, data, md = explain(
        path, commits["base"], commits["helper"], tmp_path, "--stage", "work", "--measure", measure, *budget
    )
    assert code == 0
    # counts: the bytecodes of each Python function first, then each C function's instructions under callgrind
    kinds = [e["instrument"].split()[0] for e in data]
    assert kinds == (["bytecodes", "callgrind"] if measure == "counts" else ["pyinstrument"])
    work = data[0]
    assert work["stage"] == "work" and not work["reason"]
    assert named(work)[:1] == ["busy_helper"], work["contributors"]
    assert "steady_part" not in named(work)
    # times: the stage's calls were timed bare beside the profiles (the helper's 2x work: well over +10 %);
    # counts: exact profiles, whose totals are the counts
    assert (work["timed_change"] is None) if measure == "counts" else work["timed_change"] > 0.1, work
    assert "busy_helper" in md and "Where it went" in md


def test_identical_code_names_nothing(repo, tmp_path):
    path, commits = repo
    code, data, md = explain(path, commits["base"], commits["base"], tmp_path, "--stage", "work", "--stage", "step")
    assert code == 0
    assert [e["stage"] for e in data] == ["work", "step"]
    for e in data:
        assert not e["reason"] and named(e) == [], e["contributors"]
    # nothing named; the summary says so (or that the stage's functions moved alike, when a busy machine
    # made one side's processes slower as a whole)
    assert md.lower().count("no function's change stands above") + md.count("moved alike") == 2, md


def test_an_added_torch_operator_is_named(repo, tmp_path):
    path, commits = repo
    code, data, _ = explain(path, commits["base"], commits["sort"], tmp_path, "--stage", "step")
    assert code == 0
    (step,) = data
    assert step["unit"] == "s" and "torch" in step["instrument"]
    assert any("sort" in name for name in named(step)[:2]), step["contributors"]


def test_a_missing_profiler_is_one_line_and_exit_2(repo, tmp_path, capsys):
    path, commits = repo
    code, data, _ = explain(path, commits["hidden"], commits["hidden"], tmp_path, "--stage", "work")
    assert code == 2
    (work,) = data
    assert "pyinstrument" in work["reason"] and "\n" not in work["reason"]
    assert not work["contributors"]


def test_ab_attaches_where_it_went_and_a_missing_profiler_leaves_the_verdict(repo, tmp_path):
    """`ab` on the doubled helper: the report names the helper; with the profiler hidden on the current
    side the report says why there is no table, in one line, and the exit code is the verdict's all the
    same. (Under heavy load a +60-90 % change can stay inconclusive in the budget: an inconclusive stage
    past the threshold is explained too, and the exit code must follow the verdicts either way.)"""
    path, commits = repo
    for current, expect in ((commits["helper"], "busy_helper"), (commits["hidden"], "pyinstrument")):
        report, js = tmp_path / f"{expect}.md", tmp_path / f"{expect}.json"
        argv = ["ab", "--repo", str(path), "--baseline-ref", commits["base"], "--current-ref", current]
        argv += ["--suite", "explaintest", "--stages-module", "explainstages", "--model", "dqn", "--quiet"]
        argv += ["--time-budget", "40", "--output", str(report), "--json", str(js)]
        code = main(argv)
        data = json.loads(js.read_text())
        verdicts = {c["metric"]: c["verdict"] for c in data["comparisons"] if c["statistic"] == "median"}
        assert verdicts["work_time_ms"] in ("regressed", "inconclusive")
        assert code == (1 if "regressed" in verdicts.values() else 0)
        (work,) = [e for e in data["explanations"] if e["metric"] == "work_time_ms"]
        if expect == "busy_helper":
            assert named(work)[:1] == ["busy_helper"]
        else:
            assert "pyinstrument" in work["reason"] and "\n" not in work["reason"] and not work["contributors"]
        assert expect in report.read_text()
        assert data["ab"]["explain_seconds"] > 0


def test_the_pass_starts_no_round_that_would_end_past_its_budget(monkeypatch):
    """Rounds whose chunks get slower: the pass stops where the slowest round so far no longer fits,
    says after how many rounds, and has spent no more than its budget (a fake clock)."""
    from perfgate.ab import explain as pass_
    from perfgate.ab._plan import ResidentOptions
    from perfgate.core.profiles import Profile

    now = [0.0]
    monkeypatch.setattr(pass_.time, "monotonic", lambda: now[0])
    how = pass_.ExplainOptions(instrument="sampling", seconds=10.0, budget=30.0)
    one = pass_._Pass((None, None), ResidentOptions(model="m", suite="s"), how, None)  # type: ignore[arg-type]
    one.workers = [pass_._Worker(name, None, None) for name in "AABB"]  # type: ignore[arg-type]
    one.known = {"m_time_ms": "m"}
    asked = []

    def ask(w, metric, request):
        asked.append(request)
        now[0] += 0.5 + 0.05 * len(asked)  # each chunk a little slower than the last
        return Profile(instrument="pyinstrument 5.1.3", unit="s", calls=1, stacks={"f": 1.0})

    def timed(w, metric, stage, chunk):
        now[0] += 0.25  # the stage's bare calls after each chunk
        return [1e-3]

    monkeypatch.setattr(one, "_ask", ask)
    monkeypatch.setattr(one, "_time", timed)
    one.profile("m_time_ms")
    rounds = len(asked) // 4
    assert len(asked) == 4 * rounds and 1 <= rounds < 20  # whole rounds only, fewer than asked for
    assert now[0] <= how.budget
    assert one.notes["m_time_ms"] == [f"the profiling pass's 30 s were spent after {rounds} of 20 rounds"]


def test_a_stage_whose_chunks_cost_more_is_cut_inside_its_round_and_the_round_dropped(monkeypatch):
    """A first stage's rounds are quick; the second stage's chunks take 6 s each. Its first round would end
    past the budget: it is cut before the chunk that would, the partial round dropped, and the stage says
    why in one line, all within the budget (a fake clock)."""
    from perfgate.ab import explain as pass_
    from perfgate.ab._plan import ResidentOptions
    from perfgate.core.profiles import Profile

    now = [0.0]
    monkeypatch.setattr(pass_.time, "monotonic", lambda: now[0])
    how = pass_.ExplainOptions(instrument="sampling", seconds=1.5, budget=30.0)
    one = pass_._Pass((None, None), ResidentOptions(model="m", suite="s"), how, None)  # type: ignore[arg-type]
    one.workers = [pass_._Worker(name, None, None) for name in "AABB"]  # type: ignore[arg-type]
    one.known = {"quick_ms": "quick", "slow_ms": "slow"}
    cost = {"quick": 0.5, "slow": 6.0}

    def ask(w, metric, request):
        now[0] += cost[request["stage"]]
        return Profile(instrument="pyinstrument 5.1.3", unit="s", calls=1, stacks={"f": 1.0})

    def timed(w, metric, stage, chunk):
        now[0] += 0.25
        return [1e-3]

    monkeypatch.setattr(one, "_ask", ask)
    monkeypatch.setattr(one, "_time", timed)
    for metric in ("quick_ms", "slow_ms"):
        one.profile(metric)
    assert now[0] <= how.budget
    assert [len(w.chunks["quick_ms"]) for w in one.workers] == [3, 3, 3, 3]
    assert all("slow_ms" not in w.chunks for w in one.workers)  # the partial round is not kept
    assert one.explained("slow_ms").reason == "not profiled: the profiling pass's 30 s were spent"

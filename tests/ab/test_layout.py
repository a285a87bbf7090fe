"""Both sides of ``perfgate ab`` start alike, each worker with a memory layout drawn at random.

The randomiser is perfgate.workers.layout.

Regression for false alarms on identical code: a comment moved a numpy matrix's address mod
4096 the same way in every fresh process, and the paths, the start order and the layout
differed by side (docs/noise.md §5). Asserted here: recorded addresses and layout draws,
equal-length paths and environments, side balance. No time is asserted.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from scipy import stats as sps

from perfgate.ab.resident import Side, measure_resident
from perfgate.core.compare import Verdict
from perfgate.core.policy import Policy
from perfgate.workers.layout import BOOTSTRAP, HEAP_BASE, Layout, draw, start_order, worker_args
from tests.ab.test_resident import options, resident_processes

# a 96x96 matrix made at import, its address mod 4096 logged with the worker's tree and its layout draw
STAGES = """\
import json, os

import numpy as np

from perfgate.bench import stage

# {comment}
M = np.random.default_rng(0).standard_normal((96, 96))
with open(os.environ["AB_LAYOUT_LOG"], "a") as f:
    f.write(json.dumps({{
        "tree": os.path.basename(os.environ["PYTHONPATH"]),
        "pid": os.getpid(),
        "offset": M.__array_interface__["data"][0] % 4096,
        "heap_bytes": os.environ.get("PERFGATE_LAYOUT_HEAP_BYTES"),
        "env_bytes": len(os.environ.get("PERFGATE_LAYOUT_PAD", "")),
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
    }}) + "\\n")


@stage("numpy", metric="numpy_time_ms", unit="ms", suite="abtest")
def numpy_stage(ctx):
    def once():
        x = M
        for _ in range(3):
            x = np.tanh(x @ M * 0.01)
        return x

    return once
"""


def comment_only_sides(root: Path, log: Path) -> tuple[Side, Side]:
    """Two trees whose stage modules differ only in a comment, at paths of equal length."""
    out = []
    for role, name, comment in (("baseline", "a", "a"), ("current", "b", "a-again")):
        path = root / name
        path.mkdir()
        (path / "mystages.py").write_text(STAGES.format(comment=comment))
        env = {**os.environ, "PYTHONPATH": str(path), "AB_LAYOUT_LOG": str(log), "OPENBLAS_NUM_THREADS": "1"}
        out.append(Side(role=role, label=f"{role} `{name}`", path=path, env=env))
    return out[0], out[1]


def _entries(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _int(value: object) -> int:
    return int(str(value))


# --- the draws ------------------------------------------------------------------------------


def test_layout_draws_are_reproducible_independent_per_worker_and_span_a_page():
    assert draw(5, 3, "A") == draw(5, 3, "A")
    draws = [(draw(5, p, "A"), draw(5, p, "B")) for p in range(400)]
    for a, b in draws:
        assert a.hash_seed == b.hash_seed  # one hash seed per pair: both set-ups iterate alike
        assert a.heap_bytes % 16 == 0 and HEAP_BASE <= a.heap_bytes < HEAP_BASE + 4096
        assert 0 <= a.env_bytes < 4096
    assert len({a.hash_seed for a, _ in draws}) == 400
    # the pads drawn independently per worker, from one distribution for both sides
    assert sum(a.heap_bytes == b.heap_bytes for a, b in draws) < 10
    shifts_a = Counter(a.heap_bytes % 4096 for a, _ in draws)
    assert len(shifts_a) > 200  # most of the page's 256 steps of 16 bytes
    ks = sps.ks_2samp([a.heap_bytes for a, _ in draws], [b.heap_bytes for _, b in draws])
    assert ks.pvalue > 0.001


def test_start_order_is_drawn_per_pair_and_balanced():
    orders = [start_order(9, p) for p in range(400)]
    assert orders == [start_order(9, p) for p in range(400)]
    first_a = sum(o == ("A", "B") for o in orders)
    assert set(orders) == {("A", "B"), ("B", "A")}
    assert sps.binomtest(first_a, 400).pvalue > 0.001


def test_no_randomisation_is_the_plain_module_and_hash_seed_zero():
    assert worker_args("perfgate.workers.resident", randomise=False) == ["-m", "perfgate.workers.resident"]
    assert worker_args("m", randomise=True) == ["-c", BOOTSTRAP, "m"]
    env = Layout().env({"X": "1"})
    assert env["PYTHONHASHSEED"] == "0" and env["PERFGATE_LAYOUT_PAD"] == "" and env["X"] == "1"
    with pytest.raises(ValueError, match="heap_bytes"):
        Layout(heap_bytes=-1)


# --- a comment-only change, measured --------------------------------------------------------


def test_a_comment_only_change_gets_a_layout_drawn_per_worker_and_its_aa_check_passes(tmp_path):
    """Regression for a comment that moved a matrix's address mod 4096 the same way in every fresh process.

    Without the randomisation the 24 workers show only the few offsets that the source text
    and the start-up allow (3-4 per side here); with it almost every worker has its own.
    """
    log = tmp_path / "layout.log"
    pairs = 12
    opts = options(seed=31, max_pairs=pairs, looks=1, min_blocks=3, max_blocks=3)
    outcome = measure_resident(comment_only_sides(tmp_path, log), opts, Policy(threshold_pct=50))
    entries = _entries(log)
    measured = {e["pid"] for e in entries}
    assert outcome.pairs == pairs and len(outcome.layouts) == 2 * pairs
    offsets = [e["offset"] for e in entries]
    assert len(entries) >= 2 * pairs and len(measured) == len(entries)
    assert len(set(offsets)) >= 18, Counter(offsets)  # without the randomisation: about 6-8 values
    # every worker got the draw the check recorded for it
    recorded = {(d["heap_bytes"], d["env_bytes"], d["hash_seed"]) for d in outcome.layouts}
    assert {(_int(e["heap_bytes"]), e["env_bytes"], _int(e["hash_seed"])) for e in entries} <= recorded
    assert {d["side"] for d in outcome.layouts} == {"A", "B"}
    assert "drawn at random" in outcome.result.baseline_source
    verdicts = {c.metric: c.verdict for c in outcome.result.comparisons}
    assert verdicts["numpy_time_ms"] is not Verdict.REGRESSED
    assert resident_processes(tmp_path) == []


def test_same_tree_on_both_sides_lands_its_offsets_on_either_side_alike(tmp_path):
    """Side balance: over many pairs, which side has the larger offset is a fair coin, and so is who starts first."""
    log = tmp_path / "layout.log"
    path = tmp_path / "a"
    path.mkdir()
    (path / "mystages.py").write_text(STAGES.format(comment="a"))
    env = {**os.environ, "PYTHONPATH": str(path), "AB_LAYOUT_LOG": str(log), "OPENBLAS_NUM_THREADS": "1"}
    same = tuple(Side(role=role, label=role, path=path, env=env) for role in ("baseline", "current"))
    pairs = 16
    opts = options(seed=77, max_pairs=pairs, looks=1, min_blocks=3, max_blocks=3)
    outcome = measure_resident(same, opts, Policy(threshold_pct=50))  # type: ignore[arg-type]
    assert outcome.pairs == pairs
    first_a = sum(d["first"] and d["side"] == "A" for d in outcome.layouts)
    assert 0 < first_a < pairs  # neither side always starts first
    # each worker found by its draw (heap and environment padding: unique in a check, almost surely)
    offset_by_draw = {(_int(e["heap_bytes"]), e["env_bytes"]): _int(e["offset"]) for e in _entries(log)}
    offset_of = {
        (d["pair"], d["side"]): offset_by_draw[(d["heap_bytes"], d["env_bytes"])]
        for d in outcome.layouts
        if (d["heap_bytes"], d["env_bytes"]) in offset_by_draw
    }
    larger_b = sum(offset_of[(p, "B")] > offset_of[(p, "A")] for p in range(pairs) if (p, "B") in offset_of)
    differ = sum(offset_of[(p, "B")] != offset_of[(p, "A")] for p in range(pairs) if (p, "B") in offset_of)
    assert differ >= pairs - 2  # a layout per worker, not one per pair
    assert sps.binomtest(larger_b, differ).pvalue > 0.001
    # the check's estimate is centred on 0: its interval covers no change
    c = next(c for c in outcome.result.comparisons if c.metric == "numpy_time_ms")
    assert c.verdict is not Verdict.REGRESSED
    assert resident_processes(tmp_path) == []


def test_without_randomisation_every_worker_starts_with_hash_seed_zero_and_no_padding(tmp_path):
    log = tmp_path / "layout.log"
    opts = options(seed=3, randomise_layout=False)
    outcome = measure_resident(comment_only_sides(tmp_path, log), opts, Policy(threshold_pct=50))
    entries = _entries(log)
    assert {e["hash_seed"] for e in entries} == {"0"} and {e["heap_bytes"] for e in entries} == {"0"}
    assert all(d["heap_bytes"] == 0 for d in outcome.layouts)
    assert "not randomised" in outcome.result.baseline_source


# --- the trees and environments of both sides --------------------------------------------


@pytest.mark.parametrize("worktree", [False, True])
def test_both_sides_have_paths_of_equal_length_and_environments_alike(repo_with_two_commits, worktree):
    from perfgate.ab.revisions import WORKTREE, checkout, sides

    path, first, second = repo_with_two_commits
    with checkout(path, first, WORKTREE if worktree else second) as (base, cur):
        assert len(str(base.path)) == len(str(cur.path)) and base.path != cur.path
        a, b = sides(base, cur)
        assert a.env.keys() == b.env.keys()
        differ = {k for k in a.env if a.env[k] != b.env[k]}
        assert differ <= {"PYTHONPATH"}
        assert len(a.env["PYTHONPATH"]) == len(b.env["PYTHONPATH"])
        assert a.env["PYTHONSAFEPATH"] == "1"  # the resolved working folder stays off sys.path
        assert (cur.path / "mystages.py").exists()
    assert path.exists() and (path / "mystages.py").exists()  # the link removed, never what it points to


@pytest.fixture
def repo_with_two_commits(tmp_path: Path) -> tuple[Path, str, str]:
    import subprocess

    def git(*args: str) -> str:
        cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    repo = tmp_path / "some-repository-with-a-long-name"
    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "mystages.py").write_text("# a\n")
    git("add", ".")
    git("commit", "-q", "-m", "a")
    first = git("rev-parse", "HEAD")
    (repo / "mystages.py").write_text("# a-again\n")
    git("commit", "-q", "-am", "b")
    return repo, first, git("rev-parse", "HEAD")

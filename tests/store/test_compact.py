"""``perfgate store compact``: an old store whose runs keep every sample is read and checked as
before, rewritten in place in the bounded form (perfgate.core.reduced) with the same verdicts, and
a compaction killed half-way (a real SIGKILL) loses nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from perfgate.cli import main
from perfgate.core.compare import compare_runs
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.schema import GitInfo, Machine, Metric, Run
from perfgate.store import RunQuery, open_store
from perfgate.store._rows import created_key, metric_rows
from perfgate.store._sql import INSERT_METRIC, INSERT_RUN
from perfgate.store.baseline import pooled_baseline

SAMPLES = 20_000
RUNS = 24


def _run(i: int, scale: float = 1.0) -> Run:
    rng = np.random.default_rng(i)
    metrics = {
        name: Metric(
            name=name,
            unit="us",
            direction=Direction.LOWER,
            samples=tuple((base * scale * rng.lognormal(0.0, 0.1, SAMPLES)).tolist()),
        )
        for name, base in (("test_a_time_us", 10.0), ("test_b_time_us", 250.0))
    }
    return Run(
        model="suite",
        suite="pytest-benchmark",
        run_id=f"run-{i:03d}",
        created_at=f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00Z",
        git=GitInfo(commit=f"c{i}", branch="main"),
        machine=Machine(fingerprint="m1"),
        metrics=metrics,
    )


def _old_store(path: Path, runs: int) -> str:
    """A store as perfgate wrote it before the bounded form: version-4 documents, every sample."""
    url = f"sqlite:///{path}"
    open_store(url).close()  # the tables
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        for i in range(runs):
            run = _run(i)
            doc = {
                "schema_version": 4,
                "measure": "times",
                "run_id": run.run_id,
                "suite": run.suite,
                "model": run.model,
                "created_at": run.created_at,
                "git": {"commit": run.git.commit, "branch": "main"},
                "machine": {"fingerprint": "m1"},
                "config": {},
                "metrics": {
                    n: {"unit": m.unit, "direction": m.direction.value, "samples": list(m.samples)}
                    for n, m in run.metrics.items()
                },
            }
            keys = (run.run_id, run.suite, "suite", "m1", "main", run.git.commit, created_key(run.created_at))
            conn.execute(INSERT_RUN, (*keys, json.dumps(doc, separators=(",", ":"))))
            for row in metric_rows(run):
                conn.execute(INSERT_METRIC, (keys[0], row.metric, *keys[1:], *row[1:]))
    conn.close()
    return url


def _verdicts(url: str, current: Run) -> dict[tuple[str, str], tuple[str, tuple[float, float] | None]]:
    with open_store(url) as store:
        baseline, _source = pooled_baseline(store, current)
    result = compare_runs(baseline, current, Policy())
    return {(c.metric, c.statistic): (c.verdict.value, c.ci) for c in result.comparisons}


def test_an_old_store_is_read_checked_and_compacted_with_the_same_verdicts(tmp_path, capsys):
    url = _old_store(tmp_path / "old.db", 8)
    with open_store(url) as store:
        runs = store.runs(RunQuery(model="suite"))
        assert len(runs) == 8 and all(m.sizes is None and m.n == SAMPLES for r in runs for m in r.metrics.values())
    slower = _run(100, scale=1.5)
    before = _verdicts(url, slower)
    size_before = (tmp_path / "old.db").stat().st_size

    assert main(["store", "compact", "--store", url]) == 0
    assert "8 of 8 runs rewritten" in capsys.readouterr().err
    with open_store(url) as store:
        runs = store.runs(RunQuery(model="suite"))
        assert len(runs) == 8
        for r in runs:
            for m in r.metrics.values():
                assert m.sizes == (SAMPLES,) and len(m.samples) == 1001
        assert {p.value for p in store.series("suite", "m1", "test_a_time_us", "median")} == {
            float(np.median(_run(i).metrics["test_a_time_us"].samples)) for i in range(8)
        }
    assert (tmp_path / "old.db").stat().st_size < size_before / 5  # VACUUM gave the space back
    after = _verdicts(url, slower)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}
    assert "regressed" in {v[0] for v in before.values()}  # a check that decides something
    for key, (_verdict, ci) in before.items():
        if ci is not None:
            moved = max(abs(after[key][1][0] - ci[0]), abs(after[key][1][1] - ci[1]))  # type: ignore[index]
            assert moved <= 0.025 * (ci[1] - ci[0]), key

    assert main(["store", "compact", "--store", url]) == 0  # again: nothing left to do
    assert "0 of 8 runs rewritten" in capsys.readouterr().err


def _check_whole(url: str) -> int:
    """Every run is there, readable, with one metric row per metric and every sample counted;
    returns how many are in their bounded form."""
    import sqlite3

    with open_store(url) as store:
        runs = {r.run_id: r for r in store.runs(RunQuery(model="suite"))}
    assert len(runs) == RUNS
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        rows = dict(conn.execute("SELECT run_id, COUNT(*) FROM metrics GROUP BY run_id").fetchall())
    finally:
        conn.close()
    assert rows == dict.fromkeys(runs, 2)  # a run's document and its metric rows change together
    for run_id, run in runs.items():
        i = int(run_id.split("-")[1])
        for name, m in run.metrics.items():
            assert m.n == SAMPLES
            assert np.median(m.samples) == pytest.approx(np.median(_run(i).metrics[name].samples), rel=1e-12)
    return sum(r.metrics["test_a_time_us"].sizes is not None for r in runs.values())


@pytest.mark.slow
def test_a_compaction_killed_half_way_loses_nothing(tmp_path):
    """Killed (SIGKILL) again and again, at a moment drawn after each first committed batch, the
    compaction leaves every run whole, in one form or the other; run once more, it finishes."""
    url = _old_store(tmp_path / "old.db", RUNS)
    rng = np.random.default_rng(0)
    bounded, kills = 0, 0
    while bounded < RUNS and kills < RUNS:
        child = subprocess.Popen(
            [sys.executable, "-m", "perfgate", "store", "compact", "--store", url, "--batch-size", "1"],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        with child.stderr:
            line = child.stderr.readline()  # a batch is committed
            start = time.monotonic()
            line = child.stderr.readline()  # and the next: how long one takes
            time.sleep(float(rng.uniform(0.0, 1.0)) * (time.monotonic() - start))  # into the one after, anywhere
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        kills += 1
        assert "compacted" in line or "runs rewritten" in line, line
        now = _check_whole(url)
        assert now >= bounded
        if kills == 1:
            assert now < RUNS, "the first kill lands half-way"  # (two runs a round: at most 12 rounds)
        bounded = now
    assert kills >= 2
    assert main(["store", "compact", "--store", url]) == 0  # run again, it finishes
    assert _check_whole(url) == RUNS

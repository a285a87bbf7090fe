"""``perfgate history``: series from the store, change points with commit, size and p-value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfgate.cli import main
from perfgate.cli._history import sparkline
from perfgate.store import open_store
from tests.store.helpers import run, stamp

ROOT = Path(__file__).resolve().parents[2]


def _level(i: int) -> dict[str, float]:
    """Step +20 % in training time at run 40; ten +1 % steps of throughput loss from run 30."""
    drift = 0.99 ** min(max(i - 29, 0), 10)
    return {
        "training_step_time_ms": 100.0 * (1.2 if i >= 40 else 1.0),
        "throughput_samples_per_sec": 5000.0 * drift,
        "memory_usage_mb": 120.0,
    }


@pytest.fixture
def history_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/h.db"
    rng = np.random.default_rng(0)
    runs = []
    for i in range(60):
        samples = {name: [float(v) for v in level * rng.lognormal(0.0, 0.005, 20)] for name, level in _level(i).items()}
        runs.append(run(f"run{i:02d}", commit=f"c{i:02d}", created_at=stamp(i), samples=samples))
    runs.append(run("pr1", branch="feature", created_at=stamp(70), samples={"training_step_time_ms": [500.0]}))
    runs.append(run("other", fingerprint="machine-b", created_at=stamp(0), samples={"memory_usage_mb": [1.0]}))
    with open_store(url) as s:
        s.add_runs(runs)
    return url


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_step_is_reported_at_its_commit_as_worse(history_url, capsys):
    args = ["history", "--model", "DQN", "--metric", "training_step_time_ms", "--changepoints", "--format", "json"]
    out = _json(capsys, [*args, "--store", history_url])
    assert (out["model"], out["machine"], out["branch"], out["statistic"]) == ("dqn", "machine-a", "main", "median")
    (metric,) = out["metrics"]
    assert metric["unit"] == "ms" and metric["direction"] == "lower_is_better"
    assert [p["run_id"] for p in metric["points"]] == [f"run{i:02d}" for i in range(60)]
    assert metric["points"][0]["created_at"] == stamp(0) and metric["points"][0]["commit"] == "c00"
    (cp,) = metric["changepoints"]
    assert (cp["index"], cp["commit"], cp["run_id"]) == (40, "c40", "run40")
    assert cp["change"] == pytest.approx(0.2, abs=0.01)
    assert cp["worse"] is True and cp["p_value"] < 1e-6


@pytest.mark.parametrize("method", ["seeded", "binseg", "edivisive"])
def test_slow_throughput_drift_is_a_worse_change(history_url, capsys, method):
    args = ["history", "--model", "dqn", "--metric", "throughput_samples_per_sec", "--changepoints", "--format", "json"]
    out = _json(capsys, [*args, "--method", method, "--store", history_url])
    cps = out["metrics"][0]["changepoints"]
    assert cps and all(30 <= c["index"] <= 41 for c in cps)
    assert all(c["worse"] is True and c["change"] < 0 for c in cps)  # higher is better: a drop is worse


def test_every_metric_of_the_latest_run_and_no_false_change(history_url, capsys):
    out = _json(capsys, ["history", "--model", "dqn", "--changepoints", "--format", "json", "--store", history_url])
    names = [m["metric"] for m in out["metrics"]]
    assert names == ["memory_usage_mb", "throughput_samples_per_sec", "training_step_time_ms"]
    assert out["metrics"][0]["changepoints"] == []


def test_statistic_limit_branches_and_machine(history_url, capsys):
    base = [
        "history",
        "--model",
        "dqn",
        "--metric",
        "training_step_time_ms",
        "--format",
        "json",
        "--store",
        history_url,
    ]
    p95 = _json(capsys, [*base, "--statistic", "p95", "--trend-runs", "5"])["metrics"][0]["points"]
    assert [p["run_id"] for p in p95] == [f"run{i}" for i in range(55, 60)]
    with open_store(history_url) as s:
        samples = s.get_run("run59").metrics["training_step_time_ms"].samples
    assert p95[-1]["value"] == pytest.approx(float(np.percentile(samples, 95)))
    everything = _json(capsys, [*base, "--all-branches"])
    assert everything["branch"] is None and everything["metrics"][0]["points"][-1]["run_id"] == "pr1"
    other = _json(
        capsys, ["history", "--model", "dqn", "--machine", "machine-b", "--format", "json", "--store", history_url]
    )
    assert other["machine"] == "machine-b" and [m["metric"] for m in other["metrics"]] == ["memory_usage_mb"]


def test_terminal_output_has_sparkline_table_and_change_points(history_url, capsys):
    args = ["history", "--model", "dqn", "--metric", "training_step_time_ms", "--changepoints", "--store", history_url]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "training_step_time_ms" in captured.out and "60 run(s)" in captured.out
    assert "▁" in captured.out and "█" in captured.out
    assert "change points (seeded, alpha 0.001)" in captured.out and "c40" in captured.out
    assert "worse" in captured.out and "+20." in captured.out
    assert "machine-b" in captured.err  # the other machine is named, with how to choose it


def test_errors_exit_2_with_what_the_store_has(history_url, tmp_path, capsys):
    assert main(["history", "--model", "tft", "--store", history_url]) == 2
    assert "no runs of model 'tft'" in capsys.readouterr().err
    assert main(["history", "--model", "dqn", "--metric", "nope", "--store", history_url]) == 2
    err = capsys.readouterr().err
    assert "no values of metric 'nope'" in err and "training_step_time_ms" in err
    assert main(["history", "--model", "dqn", "--changepoint-alpha", "2", "--store", history_url]) == 2
    assert main(["history", "--model", "dqn", "--store", f"sqlite:///{tmp_path}/empty.db"]) == 2
    assert "record some" in capsys.readouterr().err


def test_sparkline():
    assert sparkline([]) == ""
    assert sparkline([1.0, 1.0]) == "▅▅"
    assert sparkline([0.0, 7.0]) == "▁█"
    assert sparkline([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]) == "▁▂▃▄▅▆▇█"
    assert len(sparkline([float(i) for i in range(1000)], width=50)) == 50


def test_history_in_a_subprocess(history_url):
    out = subprocess.run(
        [sys.executable, "-m", "perfgate", "history", "--model", "dqn", "--changepoints", "--store", history_url],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "training_step_time_ms" in out.stdout and "c40" in out.stdout


def test_a_slow_hour_of_the_machine_is_no_change_point_when_normalised(tmp_path, capsys):
    """Runs 20-29 are 30 % slower raw because the machine was (their reference kernel too); from run 40 the
    code itself is 30 % slower. The normalised series keeps only the second, at its commit."""
    import dataclasses

    from perfgate.core.schema import Reference

    url = f"sqlite:///{tmp_path}/n.db"
    rng = np.random.default_rng(3)
    runs = []
    for i in range(60):
        machine = 1.3 if 20 <= i < 30 else 1.0
        code = 1.3 if i >= 40 else 1.0
        samples = [float(v) for v in 100.0 * machine * code * rng.lognormal(0.0, 0.005, 20)]
        r = run(f"run{i:02d}", commit=f"c{i:02d}", created_at=stamp(i), samples={"training_step_time_ms": samples})
        metric = r.metrics["training_step_time_ms"]
        ref = Reference(kernel="interpreter", seconds=(4e-4 * machine,) * len(samples))
        runs.append(dataclasses.replace(r, metrics={metric.name: dataclasses.replace(metric, reference=ref)}))
    with open_store(url) as s:
        s.add_runs(runs)
    args = ["history", "--model", "dqn", "--metric", "training_step_time_ms", "--changepoints", "--format", "json"]
    (metric,) = _json(capsys, [*args, "--store", url])["metrics"]
    assert len(metric["normalised"]) == 60
    assert [cp["commit"] for cp in metric["changepoints"]] == ["c40"]
    assert metric["changepoints"][0]["worse"] is True

"""`perfgate calibrate` learns the run-to-run noise; `perfgate check` uses it for that machine."""

from __future__ import annotations

import json

from perfgate.calibration import load_noise
from perfgate.cli import main


def _history(run_doc, write_json, url, levels):
    files = [
        write_json(
            f"h{i}.json",
            run_doc(
                {"training_step_time_ms": level},
                seed=i,
                run_id=f"h{i}",
                n=30,
                cv=0.01,
                created_at=f"2026-11-29T18:{i:02d}:00Z",
            ),
        )
        for i, level in enumerate(levels)
    ]
    assert main(["record", *map(str, files), "--store", url]) == 0


def test_calibrate_then_check_uses_the_noise(run_doc, write_json, tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/s.db"
    # unchanged code whose run medians wander by about 8 % from run to run
    _history(run_doc, write_json, url, [100, 108, 95, 104, 92, 110, 99, 93, 106, 101])
    noise = tmp_path / "noise.json"
    assert main(["calibrate", "--model", "dqn", "--store", url, "--machine", "machine-a", "--output", str(noise)]) == 0
    sigma = load_noise(noise, machine="machine-a", model="dqn")
    assert 0.03 < sigma["training_step_time_ms"] < 0.2
    assert load_noise(noise, machine="other", model="dqn") == {}

    base = write_json("b.json", run_doc({"training_step_time_ms": 100.0}, seed=50, n=30, cv=0.01))
    cur = write_json("c.json", run_doc({"training_step_time_ms": 114.0}, seed=51, n=30, cv=0.01))
    report = tmp_path / "r.md"
    # without a calibration the run-to-run noise is assumed (about 14 % for one run): +14 % is inconclusive
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(report)]) == 0
    assert "Run-to-run noise unknown on this machine: assumed" in report.read_text()
    # with this machine's calibration (about 8 %), two single runs still cannot tell it from noise
    assert (
        main(["check", "--baseline", str(base), "--current", str(cur), "--noise", str(noise), "--output", str(report)])
        == 0
    )
    text = report.read_text()
    assert "### Inconclusive" in text and "learned from 10 runs of this machine" in text and "perfgate ab" in text
    assert "assumed" not in text
    # a machine whose unchanged runs agree within about 1 %: the same +14 % is a regression
    quiet_url = f"sqlite:///{tmp_path}/quiet.db"
    _history(run_doc, write_json, quiet_url, [100, 101, 99.5, 100.5, 99, 100.8, 100.2, 99.6, 100.1, 99.8])
    quiet = tmp_path / "quiet.json"
    assert (
        main(["calibrate", "--model", "dqn", "--store", quiet_url, "--machine", "machine-a", "--output", str(quiet)])
        == 0
    )
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--noise", str(quiet), "--quiet"]) == 1


def test_calibrate_needs_three_runs(run_doc, write_json, tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/s.db"
    _history(run_doc, write_json, url, [100, 101])
    assert (
        main(
            [
                "calibrate",
                "--model",
                "dqn",
                "--store",
                url,
                "--machine",
                "machine-a",
                "--output",
                str(tmp_path / "n.json"),
            ]
        )
        == 2
    )
    assert "need 3" in capsys.readouterr().err


def test_bad_calibration_file_is_exit_2(run_doc, write_json, tmp_path, capsys):
    bad = write_json("noise.json", json.dumps({"schema_version": 7}))
    base = write_json("b.json", run_doc())
    assert main(["check", "--baseline", str(base), "--current", str(base), "--noise", str(bad)]) == 2
    assert "noise.json" in capsys.readouterr().err


def test_the_noise_is_learned_within_the_segments_between_change_points():
    """The default branch's history is not all unchanged code: differences across a change
    point (a step of the code) are left out of the successive-difference estimate."""
    import math

    import numpy as np
    import pytest

    from perfgate.core.noise import _MAD_DIFF, calibrate_sigma

    # hand values: two segments; the step between them is not a difference of noise
    values = [100.0, 101.0, 100.0, 150.0, 151.5, 150.0]
    diffs = [math.log(101 / 100), math.log(100 / 101), math.log(151.5 / 150), math.log(150 / 151.5)]
    expected = float(np.median(np.abs(diffs))) / _MAD_DIFF
    assert calibrate_sigma(values, breaks=[3]) == pytest.approx(expected)
    # a history with two steps of the code: they are found, and the differences across them left out
    rng = np.random.default_rng(3)
    history = list(np.repeat([100.0, 150.0, 100.0], 10) * rng.lognormal(0, 0.02, 30))
    from perfgate.calibration import _breaks

    assert _breaks(history) == [10, 20]
    logs = np.log(history)
    inside = np.concatenate([np.diff(logs[0:10]), np.diff(logs[10:20]), np.diff(logs[20:30])])
    assert calibrate_sigma(history, [10, 20]) == pytest.approx(float(np.median(np.abs(inside))) / _MAD_DIFF)


def test_calibrate_learns_the_counts_residue_of_the_counts_machine_and_check_uses_it(tmp_path, capsys, monkeypatch):
    """Counts runs carry the counts machine (the instruction set valgrind presents), not the host:
    calibrate, with no --machine, finds it in the store and learns each metric's residue between
    processes; a check of two counts runs then tests with it and says so."""
    from perfgate.core.metrics import Direction
    from perfgate.core.schema import GitInfo, Machine, Metric, Run
    from perfgate.runfile import save_run

    fingerprint = "counts-0123456789ab"

    def counts_run(i: int, level: float, spread: float) -> Run:
        groups = [[level * (1 + spread)] * 5, [level * (1 - spread)] * 5]
        metric = Metric(
            name="load_est_cycles",
            unit="cycles",
            direction=Direction.LOWER,
            samples=tuple(v for g in groups for v in g),
            groups=(5, 5),
        )
        return Run(
            model="dqn",
            run_id=f"c{i}",
            created_at=f"2026-11-29T18:{i:02d}:00Z",
            git=GitInfo(commit=f"{i:040x}", branch="main"),
            machine=Machine(fingerprint=fingerprint, details={"host_fingerprint": "some-host"}),
            config={"measure": "counts", "processes": 2},
            metrics={"load_est_cycles": metric},
        )

    monkeypatch.chdir(tmp_path)  # no calibration file of the working folder applies
    url = f"sqlite:///{tmp_path}/s.db"
    files = []
    for i in range(4):
        path = tmp_path / f"c{i}.json"
        save_run(path, counts_run(i, 8e6, 0.012))
        files.append(str(path))
    assert main(["record", *files, "--store", url]) == 0
    noise = tmp_path / "noise.json"
    assert main(["calibrate", "--model", "dqn", "--store", url, "--output", str(noise)]) == 0
    assert "between-process residue from 4 runs" in capsys.readouterr().err
    sigma = load_noise(noise, machine=fingerprint, model="dqn")
    assert 0.015 < sigma["load_est_cycles@process"] < 0.02  # log(1.012/0.988)/sqrt(2)
    assert sigma["load_est_cycles@process_df"] == 4.0

    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    save_run(base, counts_run(10, 8e6, 0.0005))
    save_run(cur, counts_run(11, 8e6 * 0.98, 0.0005))  # 2 % fewer: within what this stage's layouts move it
    js = tmp_path / "r.json"
    argv = ["check", "--baseline", str(base), "--current", str(cur), "--threshold", "1", "--json", str(js), "--quiet"]
    # alone, two processes per side that agree to 0.1 % make the 2 % look like an improvement
    assert main(argv) == 0
    (row,) = [c for c in json.loads(js.read_text())["comparisons"] if c["statistic"] == "median"]
    assert row["verdict"] == "improved"
    assert main([*argv, "--noise", str(noise)]) == 0
    (row,) = [c for c in json.loads(js.read_text())["comparisons"] if c["statistic"] == "median"]
    assert row["verdict"] != "improved" and "learned from 4 runs of this machine" in row["noise"]

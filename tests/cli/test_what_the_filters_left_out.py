"""When a store query finds nothing, the message names the filter that left the runs out and
the flag that widens it: the branch (``--all-branches``, ``--baseline-branch``, recording with
``--branch``), the machine (``--machine``), or metrics no runs share."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from perfgate.cli import main
from tests.importers.conftest import FIXTURES


def _record(run_doc, tmp_path: Path, url: str, n: int, *, branch: str | None, extra: list[str] = ()) -> list[Path]:
    files = []
    for i in range(n):
        doc = run_doc(seed=i, run_id=f"r{branch}{i}", created_at=f"2026-11-29T18:{i:02d}:00Z")
        if branch is None:
            del doc["git"]["branch"]
        else:
            doc["git"]["branch"] = branch
        path = tmp_path / f"run-{branch}-{i}.json"
        path.write_text(json.dumps(doc))
        files.append(path)
    assert main(["record", *map(str, files), "--store", url, *extra]) == 0
    return files


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/store.db"


def test_history_names_the_branch_filter_and_how_to_widen_it(run_doc, tmp_path, url, capsys):
    """Regression for "it has no runs (record some with perfgate record)" after runs recorded
    without a git branch: the runs were there, left out by the branch filter."""
    _record(run_doc, tmp_path, url, 3, branch=None)
    _record(run_doc, tmp_path, url, 2, branch="feature")
    capsys.readouterr()
    assert main(["history", "--model", "dqn", "--store", url]) == 2
    err = capsys.readouterr().err
    assert "it has no runs" not in err, err
    assert "3 were recorded without a branch" in err and "--branch main" in err, err
    assert "2 are on other branches (feature 2)" in err and "--baseline-branch" in err, err
    assert "--all-branches" in err, err
    assert main(["history", "--model", "dqn", "--store", url, "--all-branches"]) == 0
    assert main(["history", "--model", "dqn", "--store", url, "--machine", "machine-z", "--all-branches"]) == 2
    err = capsys.readouterr().err
    assert "from machine(s) machine-a: choose one with --machine" in err, err


def test_check_names_the_branch_not_the_machine(run_doc, tmp_path, url, capsys):
    """Regression for "no run … on machine machine-a …; it has runs of this model from machine(s)
    machine-a": the machine named as missing was there; the branch left its runs out."""
    _record(run_doc, tmp_path, url, 3, branch=None)
    current = tmp_path / "current.json"
    current.write_text(json.dumps(run_doc(seed=9, run_id="cur")))
    capsys.readouterr()
    assert main(["check", "--current", str(current), "--store", url]) == 2
    err = capsys.readouterr().err
    assert "from machine(s) machine-a" not in err, err
    assert "3 were recorded without a branch" in err and "record runs with --branch main" in err, err
    _record(run_doc, tmp_path, url, 3, branch="feature")
    capsys.readouterr()
    assert main(["check", "--current", str(current), "--store", url]) == 2
    err = capsys.readouterr().err
    assert "3 are on other branches (feature 3), which --baseline-branch NAME selects" in err, err
    argv = ["check", "--current", str(current), "--store", url, "--quiet"]
    assert main([*argv, "--baseline-branch", "feature"]) in (0, 1)


def test_check_names_other_machines_and_flagged_runs(run_doc, tmp_path, url, capsys):
    from perfgate.store import RunStatus, open_store

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(run_doc(fingerprint="machine-b", run_id="b1")))
    assert main(["record", str(elsewhere), "--store", url]) == 0
    current = tmp_path / "current.json"
    current.write_text(json.dumps(run_doc(seed=9, run_id="cur")))
    capsys.readouterr()
    assert main(["check", "--current", str(current), "--store", url]) == 2
    err = capsys.readouterr().err
    assert "from other machine(s) only: machine-b" in err, err
    # this machine's only run on main was flagged by an earlier check: that is the reason given
    _record(run_doc, tmp_path, url, 1, branch="main")
    with open_store(url) as store:
        store.set_status("rmain0", RunStatus.FLAGGED, "regressed")
    capsys.readouterr()
    assert main(["check", "--current", str(current), "--store", url]) == 2
    err = capsys.readouterr().err
    assert "that a check did not flag: its 1 run(s) there regressed" in err and "baseline accept" in err, err
    assert main(["baseline", "accept", "rmain0", "--store", url]) == 0
    assert main(["check", "--current", str(current), "--store", url, "--quiet"]) in (0, 1)


def test_calibrate_with_no_metric_shared_by_enough_runs_exits_2_and_writes_nothing(run_doc, tmp_path, url, capsys):
    """Regression for "σ from 10 runs: " (nothing after it), a calibration file written and exit 0
    when every run measured other metrics."""
    files = []
    for i in range(10):
        doc = run_doc(seed=i, run_id=f"u{i}", created_at=f"2026-11-29T18:{i:02d}:00Z")
        doc["metrics"] = {f"stage{i}_time_ms": {**doc["metrics"]["training_step_time_ms"], "unit": "ms",
                                                "direction": "lower_is_better"}}  # fmt: skip
        path = tmp_path / f"u{i}.json"
        path.write_text(json.dumps(doc))
        files.append(path)
    assert main(["record", *map(str, files), "--store", url]) == 0
    noise = tmp_path / "noise.json"
    capsys.readouterr()
    code = main(["calibrate", "--model", "dqn", "--machine", "machine-a", "--store", url, "--output", str(noise)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no metric is shared by enough runs" in err and "of the 10 runs of dqn" in err, err
    assert "σ from" not in err, err
    assert not noise.exists()


def test_calibrate_names_the_machines_that_have_runs_and_the_flag(tmp_path, url, capsys):
    """Regression for "no model has 3 runs on main from machine <this one>" after importing
    pytest-benchmark files, whose runs carry the machine the file was written on."""
    source = json.loads((FIXTURES / "pytest-benchmark" / "3.2.3.json").read_text())
    fingerprints = set()
    for i in range(5):
        doc = copy.deepcopy(source)
        doc["datetime"] = f"2026-11-29T19:{i:02d}:21.114646"
        for bench in doc["benchmarks"]:
            bench["stats"]["data"] = [x * (1 + 0.01 * ((i * 7) % 5)) for x in bench["stats"]["data"]]
        path = tmp_path / f"pb{i}.json"
        path.write_text(json.dumps(doc))
        out = tmp_path / f"imported{i}.json"
        argv = ["import", "pytest-benchmark", str(path), "--output", str(out), "--branch", "main", "--store", url]
        assert main(argv) == 0
        fingerprints.add(json.loads(out.read_text())["machine"]["fingerprint"])
    (fingerprint,) = fingerprints
    noise = tmp_path / "noise.json"
    capsys.readouterr()
    assert main(["calibrate", "--model", "pytest-benchmark", "--store", url, "--output", str(noise)]) == 2
    err = capsys.readouterr().err
    assert f"come from machine(s) {fingerprint} (5 runs)" in err and "--machine" in err, err
    argv = ["calibrate", "--model", "pytest-benchmark", "--store", url, "--output", str(noise)]
    assert main([*argv, "--machine", fingerprint]) == 0
    assert noise.exists()


def test_record_takes_the_branch_as_import_does(run_doc, tmp_path, url, capsys):
    """``record --branch main``: runs written without a branch are recorded on main, where
    ``check --store`` and ``history`` look by default."""
    _record(run_doc, tmp_path, url, 3, branch=None, extra=["--branch", "main"])
    current = tmp_path / "current.json"
    current.write_text(json.dumps(run_doc(seed=9, run_id="cur")))
    assert main(["check", "--current", str(current), "--store", url, "--quiet"]) in (0, 1)
    assert main(["history", "--model", "dqn", "--store", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["branch"] == "main"
    assert main(["record", str(current), "--branch", " ", "--store", url]) == 2
    assert "--branch" in capsys.readouterr().err

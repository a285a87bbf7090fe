"""The store from the command line: record, check --store (verdicts), baseline update/accept/show/export.

Each flow runs against SQLite and the real PostgreSQL server (``shared_url``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.runfile import load_run
from perfgate.store import RunStatus, open_store
from perfgate.store.base import RunQuery

ROOT = Path(__file__).resolve().parents[2]


def test_cli_record_then_check_from_store(run_doc, write_json, shared_url, tmp_path, capsys):
    url = shared_url
    files = [
        write_json(f"r{i}.json", run_doc(seed=i, run_id=f"r{i}", created_at=f"2026-11-29T18:0{i}:00Z"))
        for i in range(3)
    ]
    assert main(["record", *map(str, files), "--store", url]) == 0
    assert main(["record", str(files[0]), "--store", url]) == 0
    assert "already recorded" in capsys.readouterr().err
    slow = write_json(
        "slow.json",
        run_doc(
            {"training_step_time_ms": 130.0, "dbn_load_time_ms": 2.0},
            seed=7,
            run_id="slow",
            created_at="2026-11-29T19:00:00Z",
            branch="pr",
        ),
    )
    report = tmp_path / "r.md"
    assert main(["check", "--store", url, "--current", str(slow), "--output", str(report)]) == 1
    text = report.read_text()
    assert "samples pooled from the last 3 run(s) on main" in text
    other = write_json("other.json", run_doc(fingerprint="elsewhere", run_id="o"))
    assert main(["check", "--store", url, "--current", str(other)]) == 2
    assert "machine-a" in capsys.readouterr().err


def test_cli_record_seed_file_gets_stable_id(seed_files, shared_url, capsys):
    base, _ = seed_files
    url = shared_url
    assert main(["record", str(base), "--store", url]) == 0
    first = capsys.readouterr().err
    assert main(["record", str(base), "--store", url]) == 0
    assert "already recorded" in capsys.readouterr().err
    assert "recorded" in first


def test_cli_record_bad_file_records_nothing(run_doc, write_json, shared_url):
    url = shared_url
    good = write_json("good.json", run_doc(run_id="g"))
    bad = write_json("bad.json", json.dumps({"schema_version": 1, "model": "dqn", "metrics": {}}))
    assert main(["record", str(good), str(bad), "--store", url]) == 2
    s = open_store(url)
    assert s.runs(RunQuery()) == []
    s.close()


def _history(run_doc, write_json, url, count=4):
    files = [
        write_json(f"h{i}.json", run_doc(seed=i, run_id=f"h{i}", created_at=f"2026-11-29T18:0{i}:00Z", commit=f"c{i}"))
        for i in range(count)
    ]
    assert main(["record", *map(str, files), "--store", url]) == 0


def test_flagged_run_stays_out_of_the_baseline_until_accepted(run_doc, write_json, shared_url, capsys):
    url = shared_url
    _history(run_doc, write_json, url)
    slow = write_json(
        "slow.json",
        run_doc(
            {"training_step_time_ms": 140.0, "dbn_load_time_ms": 2.0},
            seed=9,
            run_id="slow",
            created_at="2026-11-29T18:30:00Z",
            commit="bad",
        ),
    )
    assert main(["check", "--store", url, "--current", str(slow), "--quiet"]) == 1
    with open_store(url) as s:
        assert s.status("slow") is RunStatus.FLAGGED  # checked before it was recorded
    assert main(["record", str(slow), "--store", url]) == 0
    assert "status flagged" in capsys.readouterr().err
    assert main(["baseline", "update", "--store", url, "--baseline-runs", "10"]) == 0
    assert "4 run(s), newest h3 (commit c3)" in capsys.readouterr().err
    assert main(["baseline", "show", "--store", url, "--model", "DQN"]) == 0
    shown = capsys.readouterr().out
    assert "h0 " in shown and "h3 " in shown and "slow " not in shown
    assert "samples pooled from 4 run(s) on main" in shown
    assert main(["baseline", "accept", "slow", "--store", url]) == 0
    assert "accepted run slow" in capsys.readouterr().out
    assert main(["baseline", "accept", "h1", "--store", url]) == 0
    assert "not flagged (status recorded)" in capsys.readouterr().out
    assert main(["baseline", "update", "--store", url, "--model", "dqn", "--baseline-runs", "3"]) == 0
    assert "3 run(s), newest slow (commit bad)" in capsys.readouterr().err
    with open_store(url) as s:
        record = s.baseline(suite="pipeline", model="dqn", machine="machine-a", branch="main")
        assert record is not None and record.run_ids == ("slow", "h3", "h2")
        assert s.status("slow") is RunStatus.ACCEPTED


def test_check_takes_the_stored_baseline_and_records_passed(run_doc, write_json, shared_url, tmp_path):
    url = shared_url
    _history(run_doc, write_json, url, count=5)
    assert main(["baseline", "update", "--store", url, "--baseline-runs", "2"]) == 0
    same = write_json("same.json", run_doc(seed=42, run_id="same", created_at="2026-11-29T19:00:00Z"))
    report = tmp_path / "r.md"
    assert main(["check", "--store", url, "--current", str(same), "--output", str(report), "--quiet"]) == 0
    text = report.read_text()
    assert "kept by `perfgate baseline update`" in text and "last 2 run(s) on main" in text
    with open_store(url) as s:
        assert s.status("same") is RunStatus.PASSED


def test_check_of_a_run_without_id_flags_the_id_record_gives_it(run_doc, write_json, shared_url, capsys):
    _history(run_doc, write_json, shared_url, count=2)
    slow = run_doc({"training_step_time_ms": 300.0, "dbn_load_time_ms": 2.0}, seed=5)
    assert "run_id" not in slow
    cur = write_json("noid.json", slow)
    assert main(["check", "--store", shared_url, "--current", str(cur), "--quiet"]) == 1
    assert main(["record", str(cur), "--store", shared_url]) == 0
    assert "status flagged" in capsys.readouterr().err


def test_export_writes_a_seed_style_file_that_check_reads(run_doc, write_json, shared_url, tmp_path, capsys):
    url = shared_url
    _history(run_doc, write_json, url, count=3)
    out = tmp_path / "exported" / "dqn_baseline.json"
    assert main(["baseline", "update", "--store", url]) == 0
    assert main(["baseline", "export", "--model", "dqn", "--output", str(out), "--store", url]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) == {"training_step_time_ms", "dbn_load_time_ms", "timestamp", "git_commit", "model_type"}
    assert doc["model_type"] == "dqn" and doc["git_commit"] == "c2"
    with open_store(url) as s:
        pooled = [v for i in range(3) for v in s.get_run(f"h{i}").metrics["training_step_time_ms"].samples]
    import numpy as np

    assert doc["training_step_time_ms"] == pytest.approx(float(np.median(pooled)))
    flat = load_run(out)
    assert flat.single_sample_format and flat.metrics["training_step_time_ms"].samples == (
        doc["training_step_time_ms"],
    )
    current = write_json("c.json", run_doc(seed=3, run_id="c"))
    assert main(["check", "--baseline", str(out), "--current", str(current), "--quiet"]) == 0
    capsys.readouterr()


def test_export_asks_for_a_machine_when_there_are_several(run_doc, write_json, shared_url, tmp_path, capsys):
    url = shared_url
    files = [write_json(f"m{fp}.json", run_doc(run_id=f"m{fp}", fingerprint=fp)) for fp in ("fp-one", "fp-two")]
    assert main(["record", *map(str, files), "--store", url]) == 0
    assert main(["baseline", "update", "--store", url]) == 0
    out = tmp_path / "b.json"
    assert main(["baseline", "export", "--model", "dqn", "--output", str(out), "--store", url]) == 2
    err = capsys.readouterr().err
    assert "fp-one" in err and "fp-two" in err and "--machine" in err and not out.exists()
    args = ["baseline", "export", "--model", "dqn", "--output", str(out), "--store", url, "--machine", "fp-two"]
    assert main(args) == 0
    assert json.loads(out.read_text())["model_type"] == "dqn"


def test_baseline_commands_without_history_exit_2(shared_url, tmp_path, capsys):
    assert main(["baseline", "update", "--store", shared_url]) == 2
    assert "no unflagged run of any model on branch 'main'" in capsys.readouterr().err
    assert main(["baseline", "update", "--store", shared_url, "--baseline-runs", "0"]) == 2
    assert main(["baseline", "accept", "ghost", "--store", shared_url]) == 2
    assert "no run or check with id 'ghost'" in capsys.readouterr().err
    assert main(["baseline", "show", "--store", shared_url]) == 2
    assert "perfgate baseline update" in capsys.readouterr().err
    args = ["baseline", "export", "--model", "dqn", "--output", str(tmp_path / "x.json"), "--store", shared_url]
    assert main(args) == 2


def test_store_from_the_environment(run_doc, write_json, tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path}/env.db"
    monkeypatch.setenv("PERFGATE_STORE", url)
    f = write_json("e.json", run_doc(run_id="e"))
    assert main(["record", str(f)]) == 0
    assert main(["baseline", "update"]) == 0
    assert "newest e" in capsys.readouterr().err
    assert (tmp_path / "env.db").exists()


def test_baseline_update_in_a_subprocess(run_doc, write_json, tmp_path):
    url = f"sqlite:///{tmp_path}/p.db"
    f = write_json("p.json", run_doc(run_id="p"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (["record", str(f), "--store", url], ["baseline", "update", "--store", url]):
        out = subprocess.run(
            [sys.executable, "-m", "perfgate", *argv], capture_output=True, text=True, env=env, timeout=120
        )
        assert out.returncode == 0, out.stderr
    assert "baseline of dqn on machine machine-a (main): 1 run(s)" in out.stderr

"""Smaller hostile-input cases: flat files without a model, zero baselines, someone else's
SQLite database, a store in a read-only folder, an empty --store."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from perfgate.cli import main
from tests.conftest import SEED_BASELINE
from tests.safety.procs import one_line_error


def test_flat_file_without_model_type_names_model_type(tmp_path, seed_files, capsys):
    """Regression: the error named schema_version, which a flat file never has."""
    base, _cur = seed_files
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({k: v for k, v in SEED_BASELINE.items() if k != "model_type"}))
    assert main(["check", "--baseline", str(base), "--current", str(flat)]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "'model_type'" in err and "schema_version" not in err


def test_zero_baseline_gets_a_hint_that_fits(tmp_path, capsys):
    """Regression: a baseline of 0 was told that "the change sits at the threshold"."""
    base = tmp_path / "b.json"
    cur = tmp_path / "c.json"
    base.write_text(json.dumps({**SEED_BASELINE, "training_step_time_ms": 0.0}))
    cur.write_text(json.dumps(SEED_BASELINE))
    main(["check", "--baseline", str(base), "--current", str(cur)])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| training_step_time_ms"))
    assert "baseline of 0" in row and "sits at the threshold" not in row


def test_someone_elses_sqlite_database_is_left_alone(tmp_path, seed_files, capsys):
    """Regression: perfgate added its tables (and WAL mode) to an unrelated database."""
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    before = db.read_bytes()
    assert main(["record", str(seed_files[0]), "--store", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "not a perfgate store" in err and "users" in err
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["app.db", "dqn_baseline.json", "dqn_current.json"]
    )


def test_empty_store_flag_is_an_error(capsys):
    """Regression: --store "" silently used the default store."""
    assert main(["history", "--model", "dqn", "--store", ""]) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "--store" in err and "empty" in err


@pytest.fixture
def immutable_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=False, capture_output=True)


def test_store_in_a_read_only_folder_can_be_read(immutable_folder, run_doc, capsys):
    """Regression: a store in a read-only folder could not even be read (its WAL files)."""
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr to make a folder read-only even for root")
    run = immutable_folder.parent / "run.json"
    run.write_text(json.dumps(run_doc()))
    url = f"sqlite:///{immutable_folder / 's.db'}"
    assert main(["record", str(run), "--store", url]) == 0
    if subprocess.run(["chattr", "+i", str(immutable_folder)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable attribute")
    capsys.readouterr()
    assert main(["history", "--model", "dqn", "--store", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]
    assert main(["record", str(run), "--store", url]) in (0, 2)  # already recorded: nothing to write
    other = immutable_folder.parent / "other.json"
    other.write_text(json.dumps(run_doc(seed=9, run_id="other")))
    assert main(["record", str(other), "--store", url]) == 2
    err = capsys.readouterr().err
    assert "readonly" in err and "writable" in err and "Traceback" not in err
    assert sorted(p.name for p in immutable_folder.iterdir()) == ["s.db"]
    assert Path(immutable_folder / "s.db").is_file()

"""``perfgate import`` options: model, suite, units, provenance, the store."""

from __future__ import annotations

import json

from perfgate.cli import main
from perfgate.store import RunQuery, open_store
from tests.conftest import validate_run_file
from tests.importers.conftest import FIXTURES

PYPERF = FIXTURES / "pyperf/1.7.1.json"


def test_model_suite_and_time_unit(tmp_path):
    out = tmp_path / "r.json"
    args = ["import", "pyperf", str(PYPERF), "--output", str(out), "--model", "Tokenizer", "--suite", "text"]
    assert main([*args, "--time-unit", "ns", "--git-commit", "abc"]) == 0
    doc = validate_run_file(out)
    assert (doc["model"], doc["suite"]) == ("Tokenizer", "text")
    assert set(doc["metrics"]) == {"join_100_time_ns", "sorted_200_time_ns"}
    assert doc["config"]["imported_from"] == "pyperf"


def test_provenance_from_the_file_unless_overridden(tmp_path):
    asv = FIXTURES / "asv/0.5.1/results/oldbox/9ca6cbff-existing-py3.11.json"
    out = tmp_path / "r.json"
    assert main(["import", "asv", str(asv), "--output", str(out), "--branch", "main"]) == 0
    doc = validate_run_file(out)
    assert doc["git"]["commit"] == "9ca6cbff379f285ee46aee117523a8c8d822389f"
    assert doc["git"]["branch"] == "main"
    assert doc["created_at"].startswith("2026-")


def test_machine_from_the_file_or_from_here(tmp_path):
    from_file, here = tmp_path / "a.json", tmp_path / "b.json"
    base = ["import", "pyperf", str(PYPERF), "--git-commit", "abc"]
    assert main([*base, "--output", str(from_file)]) == 0
    assert main([*base, "--output", str(here), "--machine", "here"]) == 0
    a, b = (json.loads(p.read_text())["machine"] for p in (from_file, here))
    assert a["fingerprint"] != b["fingerprint"]
    assert "memory_gib" in b  # perfgate's own description of this machine


def test_the_same_file_imported_twice_is_one_run_in_the_store(tmp_path, capsys):
    store = f"sqlite:///{tmp_path / 'p.db'}"
    args = ["import", "pyperf", str(PYPERF), "--output", str(tmp_path / "r.json"), "--git-commit", "abc"]
    assert main([*args, "--branch", "main", "--store", store]) == 0
    assert "recorded in" in capsys.readouterr().err
    assert main([*args, "--branch", "main", "--store", store]) == 0
    assert "already recorded" in capsys.readouterr().err
    opened = open_store(store)
    try:
        runs = opened.runs(RunQuery(model="pyperf"))
    finally:
        opened.close()
    assert len(runs) == 1 and runs[0].suite == "pyperf"


def test_check_against_the_store_after_import(tmp_path):
    store = f"sqlite:///{tmp_path / 'p.db'}"
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    common = ["--branch", "main", "--store", store]
    assert main(["import", "pyperf", str(PYPERF), "--output", str(first), "--git-commit", "abc", *common]) == 0
    assert main(["import", "pyperf", str(PYPERF), "--output", str(second), "--git-commit", "def", *common]) == 0
    report = tmp_path / "r.md"
    assert main(["check", "--store", store, "--current", str(second), "--output", str(report), "--quiet"]) == 0
    assert "samples pooled from the last 1 run(s)" in report.read_text()

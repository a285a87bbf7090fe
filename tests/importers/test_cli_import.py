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
    assert main([*base, "--output", str(here), "--machine-from", "here"]) == 0
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


def test_a_python_upgrade_is_an_environment_change_not_another_machine(tmp_path, capsys):
    """The fingerprint of an import hashes the hardware the tool recorded; the Python version
    goes to the run's software, and a check names its change instead of refusing (exit 2)."""
    doc = json.loads(PYPERF.read_text())
    upgraded = json.loads(PYPERF.read_text())
    upgraded["metadata"]["python_version"] = "3.12.1 (64-bit)"
    files = []
    for i, data in enumerate((doc, upgraded)):
        source, out = tmp_path / f"pyperf{i}.json", tmp_path / f"run{i}.json"
        source.write_text(json.dumps(data))
        assert main(["import", "pyperf", str(source), "--output", str(out), "--git-commit", f"c{i}"]) == 0
        files.append(json.loads(out.read_text()))
    assert files[0]["machine"]["fingerprint"] == files[1]["machine"]["fingerprint"]
    assert (files[0]["software"], files[1]["software"]) == ({"python": "3.11.7"}, {"python": "3.12.1"})
    capsys.readouterr()
    report = tmp_path / "report.md"
    code = main(["check", "--baseline", str(tmp_path / "run0.json"), "--current", str(tmp_path / "run1.json"),
                 "--output", str(report), "--quiet"])  # fmt: skip
    assert code in (0, 1)
    assert "**Environment changed** (baseline → current): python 3.11.7 → 3.12.1." in report.read_text()


def test_the_python_implementation_is_named_beside_its_version():
    from perfgate.importers._common import python_software

    assert python_software("3.10.14 (64-bit)", "PyPy") == {"python": "pypy 3.10.14"}
    assert python_software("3.11.7", "cpython") == {"python": "3.11.7"}
    assert python_software(None, "cpython") == {}

"""An imported benchmark keeps its metric across runs, and a check follows the benchmark, not the name.

Two benchmarks of one file may sanitise alike (``test_sort[100]`` and ``test_sort_100``).
The one whose name already is a metric stem keeps the plain name; the other is told apart by
a hash of its own name. Each run records which benchmark every metric measures, and a check
(or a store) between two such runs compares a benchmark with itself whatever it is called.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.core.baseline import pool_runs
from perfgate.core.benchmark_names import BENCHMARK_NAMES, align, benchmark_names, hashed_stem
from perfgate.core.codec import run_from_dict, run_to_dict
from perfgate.errors import MismatchError
from perfgate.importers import parse_document
from perfgate.store import RunQuery, open_store
from tests.conftest import validate_run_file
from tests.importers.conftest import FIXTURES

# written by pytest-benchmark 3.2.3 with --benchmark-save-data
REAL = json.loads((FIXTURES / "pytest-benchmark/3.2.3.json").read_text())
PARAMETRISED = "test_sort[100]"
PLAIN = "test_sort_100"
SHARED = "test_sort_100_time_us"  # what both names sanitise to
PARAMETRISED_HASHED = f"{hashed_stem(PARAMETRISED)}_time_us"
PLAIN_HASHED = f"{hashed_stem(PLAIN)}_time_us"


def _bench(name: str, *, slower: float = 1.0) -> dict:
    """A benchmark entry as pytest-benchmark writes it, cut from the real file."""
    entry = copy.deepcopy(next(b for b in REAL["benchmarks"] if b["name"] == "test_sort"))
    entry["name"] = name
    entry["fullname"] = f"test_sorting.py::{name}"
    if "[" in name:
        entry["param"] = name[name.index("[") + 1 : -1]
        entry["params"] = {"n": int(entry["param"])}
    entry["stats"]["data"] = [v * slower for v in entry["stats"]["data"]]
    return entry


def _document(*names: str, slower: dict[str, float] | None = None, when: str | None = None) -> dict:
    doc = copy.deepcopy(REAL)
    doc["datetime"] = when or doc["datetime"]
    doc["benchmarks"] = [_bench(n, slower=(slower or {}).get(n, 1.0)) for n in names]
    return doc


def _import(tmp_path: Path, label: str, doc: dict, *extra: str) -> Path:
    source, out = tmp_path / f"{label}.pytest.json", tmp_path / f"{label}.run.json"
    source.write_text(json.dumps(doc))
    args = ["import", "pytest-benchmark", str(source), "--output", str(out), "--git-commit", label, "--branch", "main"]
    assert main([*args, *extra]) == 0
    validate_run_file(out)
    return out


def _check(tmp_path: Path, baseline: Path, current: Path, capsys) -> tuple[int, dict, str]:
    report = tmp_path / f"{current.stem}.report.json"
    capsys.readouterr()
    code = main(["check", "--baseline", str(baseline), "--current", str(current), "--json", str(report)])
    return code, json.loads(report.read_text()), capsys.readouterr().err


def _by_metric(report: dict) -> dict[str, dict]:
    return {c["metric"]: c for c in report["comparisons"]}


def _same(row: dict) -> bool:
    """Compared with itself: identical samples (five rounds decide nothing beyond the threshold)."""
    return row["verdict"] in ("unchanged", "inconclusive") and row["change"] == pytest.approx(0.0)


def _names(doc: dict) -> dict[str, str]:
    run = parse_document("pytest-benchmark", doc, source="x.json").run
    return dict(benchmark_names(run) or {})


def test_a_benchmark_named_like_a_stem_keeps_its_name_and_any_order_gives_the_same_names():
    forward = _names(_document("test_join", PARAMETRISED, PLAIN))
    backward = _names(_document(PLAIN, PARAMETRISED, "test_join"))
    assert forward == backward
    assert forward == {
        "test_join_time_us": "test_join",
        SHARED: PLAIN,  # already a stem: keeps the plain name
        PARAMETRISED_HASHED: PARAMETRISED,  # told apart by a hash of its own name
    }
    assert _names(_document(PARAMETRISED)) == {SHARED: PARAMETRISED}  # alone, it has the plain name


def test_names_that_are_not_stems_get_hashes_of_their_own_in_any_order():
    names = ["sum 100", "sum-100", "sum(100)"]
    expected = {f"{hashed_stem(n)}_time_us": n for n in names}
    assert _names(_document(*names)) == expected
    assert _names(_document(*reversed(names))) == expected


def test_the_issue_a_colliding_benchmark_added_later_does_not_rename_the_original(tmp_path, capsys):
    """Run 1 has test_sort[100]; run 2 adds test_sort_100. The check compares test_sort[100]
    with itself (no alarm) and reports test_sort_100 as new."""
    first = _import(tmp_path, "first", _document("test_join", PARAMETRISED))
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED, PLAIN))
    assert json.loads(first.read_text())["config"][BENCHMARK_NAMES][SHARED] == PARAMETRISED
    stored = json.loads(second.read_text())["config"][BENCHMARK_NAMES]
    assert stored == {"test_join_time_us": "test_join", SHARED: PLAIN, PARAMETRISED_HASHED: PARAMETRISED}

    code, report, err = _check(tmp_path, first, second, capsys)
    assert code == 0, err
    rows = _by_metric(report)
    assert _same(rows[SHARED])  # test_sort[100] against itself
    assert rows[PLAIN_HASHED]["verdict"] == "new"  # test_sort_100, which the baseline never had
    assert PLAIN in rows[PLAIN_HASHED]["reason"] and PARAMETRISED in rows[PLAIN_HASHED]["reason"]
    assert report["missing"] == []
    assert f"{PARAMETRISED_HASHED} is named {SHARED} as in the baseline" in err
    assert f"{SHARED} is benchmark {PARAMETRISED!r} in the baseline and {PLAIN!r} in this run, never one metric" in err


def test_a_slower_renamed_benchmark_is_still_caught(tmp_path, capsys):
    first = _import(tmp_path, "first", _document("test_join", PARAMETRISED))
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED, PLAIN, slower={PARAMETRISED: 3.0}))
    code, report, err = _check(tmp_path, first, second, capsys)
    assert code == 1, err
    assert [c["metric"] for c in report["comparisons"] if c["verdict"] == "regressed"] == [SHARED]


def test_the_reverse_a_parametrised_twin_added_later_leaves_the_original_alone(tmp_path, capsys):
    first = _import(tmp_path, "first", _document("test_join", PLAIN))
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED, PLAIN))
    assert set(json.loads(second.read_text())["metrics"]) == {"test_join_time_us", SHARED, PARAMETRISED_HASHED}

    code, report, err = _check(tmp_path, first, second, capsys)
    assert code == 0, err
    rows = _by_metric(report)
    assert _same(rows[SHARED])  # test_sort_100 against itself
    assert rows[PARAMETRISED_HASHED]["verdict"] == "new"
    assert report["missing"] == [] and "note" not in err  # nothing to rename


def test_a_collision_that_goes_away_is_followed_back(tmp_path, capsys):
    """Run 1 had both; run 2 dropped test_sort_100, so test_sort[100] has its plain name again."""
    first = _import(tmp_path, "first", _document("test_join", PARAMETRISED, PLAIN))
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED))
    code, report, err = _check(tmp_path, first, second, capsys)
    rows = _by_metric(report)
    assert _same(rows[PARAMETRISED_HASHED])  # under the baseline's name
    assert rows[SHARED]["verdict"] == "missing"  # test_sort_100 went: a gated metric missing fails
    assert report["missing"] == [SHARED] and code == 1
    assert "not in this run" in rows[SHARED]["reason"]
    assert f"{SHARED} is named {PARAMETRISED_HASHED} as in the baseline" in err


def test_one_name_for_two_benchmarks_is_never_compared_as_one(tmp_path, capsys):
    """test_sort_100 was replaced by test_sort[100]: both are called test_sort_100_time_us alone."""
    first = _import(tmp_path, "first", _document("test_join", PLAIN))
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED, slower={PARAMETRISED: 0.5}))
    code, report, err = _check(tmp_path, first, second, capsys)
    rows = _by_metric(report)
    assert rows[SHARED]["verdict"] == "missing" and rows[PARAMETRISED_HASHED]["verdict"] == "new"
    assert "improved" not in {c["verdict"] for c in report["comparisons"]}
    assert code == 1 and report["missing"] == [SHARED]
    assert f"{SHARED} is benchmark {PLAIN!r} in the baseline and {PARAMETRISED!r} in this run" in err


def test_runs_without_the_record_are_compared_by_name(tmp_path):
    old = parse_document("pytest-benchmark", _document(PARAMETRISED), source="a.json").run
    new = parse_document("pytest-benchmark", _document(PARAMETRISED, PLAIN), source="b.json").run
    bare = run_from_dict({**run_to_dict(old), "config": {"imported_from": "pytest-benchmark"}})
    assert align(bare, new).run is new
    assert align(new, bare).run is bare
    assert align(old, new).run is not new


def test_the_record_survives_the_run_file_the_store_and_pooling(tmp_path):
    run = parse_document("pytest-benchmark", _document("test_join", PARAMETRISED, PLAIN), source="a.json").run
    assert run_from_dict(json.loads(json.dumps(run_to_dict(run)))) == run
    store = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        store.add_run(dataclasses.replace(run, run_id="r1"))
        (back,) = store.runs(RunQuery(model="pytest-benchmark"))
    finally:
        store.close()
    assert benchmark_names(back) == benchmark_names(run)
    assert benchmark_names(pool_runs([back, back])) == benchmark_names(run)


def test_the_store_keeps_one_name_per_benchmark(tmp_path, capsys):
    store = f"sqlite:///{tmp_path / 'p.db'}"
    first = _import(tmp_path, "first", _document("test_join", PARAMETRISED), "--store", store)
    later = "2026-11-30T08:00:00"
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED, PLAIN, when=later), "--store", store)
    err = capsys.readouterr().err
    assert f"{PARAMETRISED_HASHED} is named {SHARED} as in the store" in err
    assert set(json.loads(second.read_text())["metrics"]) == {"test_join_time_us", SHARED, PARAMETRISED_HASHED}
    opened = open_store(store)
    try:
        newest, oldest = opened.runs(RunQuery(model="pytest-benchmark"))
        series = opened.series("pytest-benchmark", None, SHARED)
    finally:
        opened.close()
    assert benchmark_names(oldest) == {"test_join_time_us": "test_join", SHARED: PARAMETRISED}
    assert benchmark_names(newest) == {"test_join_time_us": "test_join", SHARED: PARAMETRISED, PLAIN_HASHED: PLAIN}
    assert len(series) == 2  # test_sort[100] has one unbroken history

    report = tmp_path / "store.json"
    args = ["check", "--store", store, "--current", str(second), "--json", str(report), "--quiet"]
    assert main(args) == 0
    rows = _by_metric(json.loads(report.read_text()))
    assert _same(rows[SHARED]) and rows[PLAIN_HASHED]["verdict"] == "new"
    assert first.exists()


def test_perfgate_record_stores_under_the_stores_names(tmp_path, capsys):
    first = _import(tmp_path, "first", _document("test_join", PARAMETRISED))
    later = "2026-11-30T08:00:00"
    second = _import(tmp_path, "second", _document("test_join", PARAMETRISED, PLAIN, when=later))
    store = f"sqlite:///{tmp_path / 'p.db'}"
    capsys.readouterr()
    assert main(["record", str(first), str(second), "--store", store]) == 0
    assert f"{PARAMETRISED_HASHED} is named {SHARED} as in the store" in capsys.readouterr().err
    opened = open_store(store)
    try:
        newest = opened.runs(RunQuery(model="pytest-benchmark"))[0]
    finally:
        opened.close()
    assert benchmark_names(newest) == {"test_join_time_us": "test_join", SHARED: PARAMETRISED, PLAIN_HASHED: PLAIN}


def test_a_record_edited_into_a_conflict_is_refused():
    baseline = parse_document("pytest-benchmark", _document(PARAMETRISED), source="a.json").run
    taken = {**benchmark_names(baseline), PLAIN_HASHED: "something else"}
    metrics = {**baseline.metrics, PLAIN_HASHED: dataclasses.replace(baseline.metrics[SHARED], name=PLAIN_HASHED)}
    baseline = dataclasses.replace(baseline, metrics=metrics, config={**baseline.config, BENCHMARK_NAMES: taken})
    current = parse_document("pytest-benchmark", _document(PLAIN), source="b.json").run
    with pytest.raises(MismatchError, match="cannot be given a name of its own"):
        align(baseline, current)

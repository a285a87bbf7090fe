"""Importing result files of every format, old versions included, and gating on them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perfgate.cli import main
from perfgate.core.metrics import Direction
from perfgate.importers import ImportOptions, import_file
from perfgate.runfile import load_run, save_run
from tests.conftest import validate_run_file
from tests.importers.conftest import FIXTURES

ASV_051 = FIXTURES / "asv/0.5.1/results/oldbox/9ca6cbff-existing-py3.11.json"
ASV_V1 = FIXTURES / "asv/v1/results/box/4e4f2c0a-py3.6.json"


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


def test_pytest_benchmark_323_keeps_every_round_in_microseconds():
    raw = _raw(FIXTURES / "pytest-benchmark/3.2.3.json")
    result = import_file("pytest-benchmark", FIXTURES / "pytest-benchmark/3.2.3.json")
    run = result.run
    assert set(run.metrics) == {"test_join_time_us", "test_sort_time_us"}
    join = run.metrics["test_join_time_us"]
    data = raw["benchmarks"][0]["stats"]["data"]
    assert len(join.samples) == raw["benchmarks"][0]["stats"]["rounds"] == len(data) == 6
    assert join.samples == pytest.approx([v * 1e6 for v in data])
    assert join.unit == "us" and join.direction is Direction.LOWER
    assert run.model == "pytest-benchmark" and run.suite == "pytest-benchmark"
    assert run.git.commit is None  # "unversioned"
    assert run.git.branch is None  # "(unknown)"
    assert run.created_at == "2026-11-29T19:47:21.114646Z"  # the file says 2026-11-29T19:47:21.114646 (UTC)
    assert run.machine.fingerprint is not None
    assert [n for n in result.notes if "measured each benchmark in one process" not in n] == []


def test_pytest_benchmark_without_data_imports_the_median_once_and_says_so():
    path = FIXTURES / "pytest-benchmark/5.3.1-autosave-no-data.json"
    raw = _raw(path)
    result = import_file("pytest-benchmark", path)
    sort = result.run.metrics["test_sort_time_us"]
    assert sort.samples == pytest.approx([raw["benchmarks"][1]["stats"]["median"] * 1e6])
    assert any("--benchmark-save-data" in n for n in result.notes)


def test_pyperf_171_pools_the_values_of_all_worker_runs():
    raw = _raw(FIXTURES / "pyperf/1.7.1.json")
    run = import_file("pyperf", FIXTURES / "pyperf/1.7.1.json").run
    assert set(run.metrics) == {"join_100_time_us", "sorted_200_time_us"}
    values = [v for r in raw["benchmarks"][0]["runs"] for v in r.get("values", [])]
    assert len(values) == 6
    assert run.metrics["join_100_time_us"].samples == pytest.approx([v * 1e6 for v in values])
    assert run.config["tool_version"] == "1.7.1"
    assert run.machine.details["cpu"] == "AMD EPYC"


def test_pyperf_format_5_reads_samples_and_common_metadata_and_skips_calibration():
    run = import_file("pyperf", FIXTURES / "pyperf/v5-perf-0.8.3.json").run
    telco = run.metrics["telco_time_us"]
    assert telco.samples == pytest.approx([12140, 12290, 11980, 12210, 12030, 12100])
    assert run.created_at == "2016-11-05T12:13:15.101211Z"  # the first run with values
    assert run.machine.details["python"] == "3.5.2"


def test_pyperf_format_6_units_byte_and_second():
    run = import_file("pyperf", FIXTURES / "pyperf/v6-perf-0.9.6.json").run
    assert run.metrics["telco_time_us"].samples == pytest.approx([11140, 11290, 10980, 11210, 11030, 11100])
    mem = run.metrics["mem_peak_bytes"]
    assert (mem.unit, mem.samples) == ("B", (25165824.0, 25169920.0))
    assert run.config["format_version"] == "6"


def test_pyperf_time_unit_option():
    run = import_file("pyperf", FIXTURES / "pyperf/v6-perf-0.9.6.json", ImportOptions(time_unit="ms")).run
    assert run.metrics["telco_time_ms"].samples[0] == pytest.approx(11.14)


def test_asv_051_with_benchmarks_json_types_units_and_parameters():
    result = import_file("asv", ASV_051)
    run = result.run
    assert set(run.metrics) == {
        "bench_timesuite_mem_list_bytes",
        "bench_timesuite_time_sum_time_us",
        "bench_timesuite_track_value_widgets",
        "bench_time_param2_n_10_time_us",
        "bench_time_param2_n_100_time_us",
        "bench_time_sorted_time_us",
    }
    raw = _raw(ASV_051)
    columns = raw["result_columns"]
    samples = raw["results"]["bench.time_param2"][columns.index("samples")]
    assert run.metrics["bench_time_param2_n_100_time_us"].samples == pytest.approx([v * 1e6 for v in samples[1]])
    assert len(run.metrics["bench_time_sorted_time_us"].samples) == 4
    assert run.metrics["bench_timesuite_track_value_widgets"].unit == "widgets"
    assert run.metrics["bench_timesuite_mem_list_bytes"].samples == (856.0,)
    assert run.git.commit == raw["commit_hash"]
    assert [n for n in result.notes if "measured each benchmark in one process" not in n] == []


def test_asv_result_format_1_without_benchmarks_json():
    result = import_file("asv", ASV_V1)
    run = result.run
    assert set(run.metrics) == {
        "benchmarks_timesuite_time_iterkeys_time_us",
        "benchmarks_time_range_10_time_us",
        "benchmarks_time_range_100_time_us",
        "benchmarks_mem_list_bytes",
        "benchmarks_track_ops_value",
    }
    assert run.metrics["benchmarks_time_range_100_time_us"].samples == pytest.approx([9.8, 9.9, 10.1])
    assert run.created_at == "2018-03-02T14:15:00Z"  # started_at of the first benchmark
    assert any("benchmarks.json" in n for n in result.notes)
    assert any("time_broken" in n for n in result.notes)


def test_hyperfine_1150_times_in_milliseconds():
    raw = _raw(FIXTURES / "hyperfine/1.15.0.json")
    run = import_file("hyperfine", FIXTURES / "hyperfine/1.15.0.json").run
    assert set(run.metrics) == {"true_time_ms", "sleep_0_001_time_ms"}
    assert run.metrics["true_time_ms"].samples == pytest.approx([t * 1e3 for t in raw["results"][0]["times"]])
    assert run.machine.fingerprint is None  # hyperfine records no machine; the CLI adds this one


def test_hyperfine_summary_only_export():
    result = import_file("hyperfine", FIXTURES / "hyperfine/summary-only.json")
    assert result.run.metrics["sleep_0_1_time_ms"].samples == pytest.approx([102.31])  # the mean: no median
    assert result.run.metrics["make_j4_build_time_ms"].samples == pytest.approx([2541.2])
    assert any("times" in n for n in result.notes)


def test_google_benchmark_171_repetitions_and_throughput_counter():
    raw = _raw(FIXTURES / "google-benchmark/1.7.1.json")
    result = import_file("google-benchmark", FIXTURES / "google-benchmark/1.7.1.json")
    run = result.run
    reps = [b["real_time"] for b in raw["benchmarks"] if b["run_name"] == "BM_Sum/64" and b["run_type"] == "iteration"]
    assert len(reps) == 3
    assert run.metrics["bm_sum_64_time_ns"].samples == pytest.approx(reps)
    items = run.metrics["bm_sum_64_items_per_sec"]
    assert items.direction is Direction.HIGHER and items.unit == "items/s" and len(items.samples) == 3
    assert run.created_at == "2026-11-29T19:39:26Z"
    assert any("debug build" in n for n in result.notes)


def test_google_benchmark_14_style_aggregates_by_name_and_units_per_benchmark():
    run = import_file("google-benchmark", FIXTURES / "google-benchmark/1.4-style.json").run
    assert set(run.metrics) == {"bm_copy_8_time_ns", "bm_copy_8_bytes_per_sec", "bm_sleep_1_time_ms"}
    assert run.metrics["bm_copy_8_time_ns"].samples == (25.1, 24.9, 25.4)  # no _mean/_median/_stddev
    assert run.metrics["bm_sleep_1_time_ms"].samples == (1.08, 1.07, 1.09)
    assert run.created_at == "2018-09-06T14:41:29Z"
    converted = import_file(
        "google-benchmark", FIXTURES / "google-benchmark/1.4-style.json", ImportOptions(time_unit="us")
    ).run
    assert converted.metrics["bm_sleep_1_time_us"].samples == pytest.approx([1080, 1070, 1090])


ALL = [
    ("pytest-benchmark", FIXTURES / "pytest-benchmark/3.2.3.json"),
    ("pytest-benchmark", FIXTURES / "pytest-benchmark/5.3.1-autosave-no-data.json"),
    ("pyperf", FIXTURES / "pyperf/1.7.1.json"),
    ("pyperf", FIXTURES / "pyperf/v5-perf-0.8.3.json"),
    ("pyperf", FIXTURES / "pyperf/v6-perf-0.9.6.json"),
    ("asv", ASV_051),
    ("asv", ASV_V1),
    ("hyperfine", FIXTURES / "hyperfine/1.15.0.json"),
    ("hyperfine", FIXTURES / "hyperfine/summary-only.json"),
    ("google-benchmark", FIXTURES / "google-benchmark/1.7.1.json"),
    ("google-benchmark", FIXTURES / "google-benchmark/1.4-style.json"),
]


@pytest.mark.parametrize(("fmt", "path"), ALL, ids=[f"{f}:{p.name}" for f, p in ALL])
def test_every_fixture_writes_a_valid_run_that_checks_clean_against_itself(fmt, path, tmp_path):
    out = tmp_path / "run.json"
    assert main(["import", fmt, str(path), "--output", str(out), "--git-commit", "abc123", "--branch", "main"]) == 0
    doc = validate_run_file(out)
    assert doc["git"]["commit"] == "abc123"
    assert main(["check", "--baseline", str(out), "--current", str(out), "--quiet"]) == 0


def _slowed(run_path: Path, metric: str, factor: float, out: Path) -> Path:
    run = load_run(run_path)
    doc = json.loads(run_path.read_text())
    doc["metrics"][metric]["samples"] = [v * factor for v in run.metrics[metric].samples]
    out.write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize(
    ("fmt", "path", "metric", "factor"),
    [
        ("pytest-benchmark", FIXTURES / "pytest-benchmark/3.2.3.json", "test_join_time_us", 3.0),
        ("pyperf", FIXTURES / "pyperf/1.7.1.json", "sorted_200_time_us", 3.0),
    ],
)
def test_a_slower_imported_run_fails_the_gate(fmt, path, metric, factor, tmp_path):
    base = tmp_path / "base.json"
    assert main(["import", fmt, str(path), "--output", str(base), "--git-commit", "abc123"]) == 0
    cur = _slowed(base, metric, factor, tmp_path / "cur.json")
    report = tmp_path / "report.md"
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--output", str(report), "--quiet"]) == 1
    assert metric in report.read_text().split("### Regressions")[1]


@pytest.mark.parametrize(
    ("fmt", "path", "metric", "factor"),
    [
        ("asv", ASV_051, "bench_time_sorted_time_us", 1.3),
        ("google-benchmark", FIXTURES / "google-benchmark/1.7.1.json", "bm_sum_64_items_per_sec", 1 / 1.3),
    ],
)
def test_too_few_imported_samples_are_inconclusive_not_a_pass(fmt, path, metric, factor, tmp_path):
    """4 (asv) or 3 (google-benchmark) samples a side, from one process, with the run-to-run noise
    assumed: a 30 % change cannot be told from noise, and the report says so."""
    base = tmp_path / "base.json"
    assert main(["import", fmt, str(path), "--output", str(base), "--git-commit", "abc123"]) == 0
    cur = _slowed(base, metric, factor, tmp_path / "cur.json")
    out = tmp_path / "report.json"
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--json", str(out), "--quiet"]) == 0
    verdicts = {c["metric"]: c["verdict"] for c in json.loads(out.read_text())["comparisons"]}
    assert verdicts[metric] == "inconclusive"


def test_direction_of_rate_units_survives_save_and_load(tmp_path):
    run = import_file("google-benchmark", FIXTURES / "google-benchmark/1.7.1.json").run
    save_run(tmp_path / "r.json", run)
    again = load_run(tmp_path / "r.json")
    assert again.metrics["bm_sum_1024_items_per_sec"].direction is Direction.HIGHER
    assert all(math.isfinite(v) for m in again.metrics.values() for v in m.samples)

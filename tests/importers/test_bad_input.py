"""Bad input: an InputError naming the file and the field, exit code 2 on the command line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from perfgate.cli import main
from perfgate.errors import InputError
from perfgate.importers import ImportOptions, import_file, parse_document
from perfgate.importers._common import MAX_BASE, metric_name, sanitize
from tests.conftest import ROOT, validate_run_file
from tests.importers.conftest import FIXTURES

GOOD_PYTEST = {"benchmarks": [{"name": "test_a", "stats": {"data": [0.001, 0.002]}}]}


@pytest.mark.parametrize(
    ("fmt", "doc", "field"),
    [
        ("pytest-benchmark", [], None),
        ("pytest-benchmark", {}, "benchmarks"),
        ("pytest-benchmark", {"benchmarks": {}}, "benchmarks"),
        ("pytest-benchmark", {"benchmarks": [{"name": "a"}]}, "benchmarks[0].stats"),
        ("pytest-benchmark", {"benchmarks": [{"name": 3, "stats": {}}]}, "benchmarks[0].name"),
        (
            "pytest-benchmark",
            {"benchmarks": [{"name": "a", "stats": {"data": [0.1, -1]}}]},
            "benchmarks[0].stats.data[1]",
        ),
        (
            "pytest-benchmark",
            {"benchmarks": [{"name": "a", "stats": {"data": [0.1, "x"]}}]},
            "benchmarks[0].stats.data[1]",
        ),
        ("pytest-benchmark", {"benchmarks": [{"name": "a", "stats": {"data": []}}]}, "benchmarks[0].stats.data"),
        ("pytest-benchmark", {"benchmarks": [{"name": "a", "stats": {"mean": 1}}]}, "benchmarks[0].stats"),
        ("pytest-benchmark", {"benchmarks": []}, "benchmarks"),
        ("pyperf", {"version": "9.9", "benchmarks": []}, "version"),
        ("pyperf", {"version": "1.0"}, "benchmarks"),
        (
            "pyperf",
            {"version": "1.0", "benchmarks": [{"metadata": {"name": "x"}, "runs": [{"values": [1, True]}]}]},
            "benchmarks[0].runs[0].values[1]",
        ),
        (
            "pyperf",
            {"version": "1.0", "benchmarks": [{"metadata": {}, "runs": [{"values": [1.0]}]}]},
            "benchmarks[0].metadata.name",
        ),
        (
            "pyperf",
            {
                "version": "1.0",
                "benchmarks": [{"metadata": {"name": "x", "unit": "parsec"}, "runs": [{"values": [1.0]}]}],
            },
            "benchmarks[0].metadata.unit",
        ),
        ("hyperfine", {"results": [{"command": "x", "times": [0.1, float("nan")]}]}, "results[0].times[1]"),
        ("hyperfine", {"results": [{"times": [0.1]}]}, "results[0].command"),
        ("hyperfine", {"results": [{"command": "x"}]}, "results[0].mean"),
        (
            "google-benchmark",
            {"benchmarks": [{"name": "a", "real_time": 1, "time_unit": "fortnight"}]},
            "benchmarks[0].time_unit",
        ),
        ("google-benchmark", {"benchmarks": [{"name": "a", "time_unit": "ns"}]}, "benchmarks[0].real_time"),
        ("google-benchmark", {"benchmarks": [{"real_time": 1.0}]}, "benchmarks[0].run_name"),
        (
            "google-benchmark",
            {
                "benchmarks": [
                    {"name": "a", "real_time": 1, "time_unit": "ns"},
                    {"name": "a", "real_time": 1, "time_unit": "ms"},
                ]
            },
            "benchmarks[1].time_unit",
        ),
        (
            "google-benchmark",
            {"benchmarks": [{"name": "a", "real_time": 1, "time_unit": ["ns"]}]},
            "benchmarks[0].time_unit",
        ),
        ("asv", {"version": 3, "results": {}}, "version"),
        ("asv", {"version": 2, "results": {}}, "result_columns"),
        (
            "asv",
            {"version": 2, "result_columns": ["result", "params"], "results": {"time_x": [[1e-3, 2e-3], []]}},
            "results.time_x.params",
        ),
        ("asv", {"version": 2, "result_columns": ["result"], "results": {"time_x": 5}}, "results.time_x"),
        (
            "asv",
            {"version": 2, "result_columns": ["result", "params"], "results": {"time_x": [[1e-3], [2.5]]}},
            "results.time_x.params",
        ),
    ],
)
def test_bad_documents_name_the_field(fmt, doc, field):
    with pytest.raises(InputError) as info:
        parse_document(fmt, doc, source="bad.json")
    assert info.value.source == "bad.json"
    assert info.value.field == field
    assert "\n" not in str(info.value)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cli_bad_file_exit_2_names_file_and_field(tmp_path, capsys):
    bad = _write(tmp_path, "pb.json", json.dumps({"benchmarks": [{"name": "a", "stats": {"data": [-1.0]}}]}))
    out = tmp_path / "run.json"
    assert main(["import", "pytest-benchmark", str(bad), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "benchmarks[0].stats.data[0]" in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(("content", "says"), [("{not json", "invalid JSON at line 1"), ("", "invalid JSON")])
def test_cli_unreadable_json(tmp_path, capsys, content, says):
    bad = _write(tmp_path, "x.json", content)
    assert main(["import", "hyperfine", str(bad), "--output", str(tmp_path / "o.json")]) == 2
    assert says in capsys.readouterr().err


def test_cli_missing_file_and_unknown_format(tmp_path, capsys):
    assert main(["import", "hyperfine", str(tmp_path / "nope.json"), "--output", str(tmp_path / "o.json")]) == 2
    assert "file not found" in capsys.readouterr().err
    assert main(["import", "criterion", "x.json", "--output", "o.json"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_gzip_pyperf_and_a_broken_gzip(tmp_path):
    gz = tmp_path / "b.json.gz"
    gz.write_bytes(gzip.compress((FIXTURES / "pyperf/1.7.1.json").read_bytes()))
    assert set(import_file("pyperf", gz).run.metrics) == {"join_100_time_us", "sorted_200_time_us"}
    broken = tmp_path / "c.json.gz"
    broken.write_bytes(gz.read_bytes()[:40])
    with pytest.raises(InputError, match="cannot read gzip file") as info:
        import_file("pyperf", broken)
    assert info.value.source == str(broken)


def test_unknown_time_unit_option():
    with pytest.raises(InputError, match="time unit"):
        ImportOptions(time_unit="minutes")


def test_asv_benchmarks_json_that_is_not_an_object(tmp_path):
    results = tmp_path / "results" / "box"
    results.mkdir(parents=True)
    result = results / "abc.json"
    result.write_text((FIXTURES / "asv/v1/results/box/4e4f2c0a-py3.6.json").read_text())
    (tmp_path / "results" / "benchmarks.json").write_text("[]")
    with pytest.raises(InputError, match="benchmarks") as info:
        import_file("asv", result)
    assert info.value.source.endswith("benchmarks.json")


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("test_sort[100]", "test_sort_100"),
        ("sum 100", "sum_100"),
        ("bench.TimeSuite.time_x", "bench_timesuite_time_x"),
        ("<script>alert(1)</script>", "script_alert_1_script"),
        ("<!channel> *bold* `code` [link](http://x)", "channel_bold_code_link_http_x"),
        ("Größe/µs", "grosse_s"),  # NFKD folds to ASCII where it can; µ has no ASCII form
        ("42nd", "b_42nd"),
        ("!!!", "benchmark"),
        ("a\nb\tc", "a_b_c"),
    ],
)
def test_sanitize(name, stem):
    assert sanitize(name) == stem


def test_long_names_stay_distinct_and_bounded():
    a, b = "x" * 200 + "a", "x" * 200 + "b"
    assert sanitize(a) != sanitize(b)
    assert len(sanitize(a)) == MAX_BASE
    assert metric_name(a, "time", "us").endswith("_time_us")


def test_names_that_sanitise_alike_are_told_apart(tmp_path):
    doc = {
        "benchmarks": [
            {"name": "sum 100", "stats": {"data": [0.001]}},
            {"name": "sum-100", "stats": {"data": [0.002]}},
            {"name": "other", "stats": {"data": [0.003]}},
        ]
    }
    result = parse_document("pytest-benchmark", doc, source="x.json")
    names = list(result.run.metrics)
    assert len(names) == 3 and "other_time_us" in names
    assert all(n.startswith("sum_100_") and n.endswith("_time_us") for n in names[:2])
    assert {result.names[n] for n in names} == {"sum 100", "sum-100", "other"}


def test_the_same_benchmark_twice_is_an_error():
    doc = {"benchmarks": [{"name": "a", "stats": {"data": [0.001]}}, {"name": "a", "stats": {"data": [0.002]}}]}
    with pytest.raises(InputError, match="appears twice"):
        parse_document("pytest-benchmark", doc, source="x.json")


def test_hostile_names_make_valid_runs(tmp_path):
    doc = {"results": [{"command": "<script>alert('x')</script>; rm -rf / `id`", "times": [0.1, 0.2]}]}
    path = _write(tmp_path, "h.json", json.dumps(doc))
    out = tmp_path / "run.json"
    assert main(["import", "hyperfine", str(path), "--output", str(out), "--git-commit", "abc"]) == 0
    saved = validate_run_file(out)
    assert list(saved["metrics"]) == ["script_alert_x_script_rm_rf_id_time_ms"]


def test_subprocess_smoke(tmp_path):
    out = tmp_path / "run.json"
    fixture = FIXTURES / "hyperfine/1.15.0.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perfgate", "import", "hyperfine", str(fixture), "--output", str(out), "--model", "cli"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 metric(s)" in proc.stderr
    assert validate_run_file(out)["model"] == "cli"

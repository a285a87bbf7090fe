"""Each tool, for real, on a tiny benchmark: its file imported, validated and checked by perfgate.

pytest-benchmark, pyperf and asv come from the ``dev`` extra; hyperfine, g++ and Google
Benchmark (``libbenchmark-dev``) from ``.ci/run``. Missing, they skip here and fail in CI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from perfgate.cli import main
from perfgate.core.metrics import Direction
from perfgate.runfile import load_run
from tests.conftest import validate_run_file
from tests.importers.conftest import need, run, which

pytestmark = pytest.mark.slow


def _import_and_check(fmt: str, result_file: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"{fmt}.json"
    code = main(
        ["import", fmt, str(result_file), "--output", str(out), "--git-commit", "feed", "--branch", "main", *extra]
    )
    assert code == 0
    doc = validate_run_file(out)
    report = tmp_path / f"{fmt}.md"
    assert main(["check", "--baseline", str(out), "--current", str(out), "--output", str(report), "--quiet"]) == 0
    text = report.read_text()
    assert "No Regression Detected" in text
    for name in doc["metrics"]:
        assert name in text
    return doc


def _run_pytest_benchmark(folder: Path, result: Path, *options: str) -> None:
    """The real pytest-benchmark on ``folder/test_tiny.py``, its results written to ``result``."""
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_tiny.py"]
    run([*pytest_cmd, f"--benchmark-json={result}", *options], cwd=folder)


def test_pytest_benchmark(tmp_path):
    need("pytest-benchmark", importlib.util.find_spec("pytest_benchmark") is not None, "pip install -e .[dev]")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_tiny.py").write_text(
        "def test_join(benchmark):\n"
        "    benchmark.pedantic(','.join, args=(['a'] * 100,), rounds=12, iterations=20)\n"
        "\n"
        "def test_sort(benchmark):\n"
        "    benchmark(sorted, list(range(300, 0, -1)))\n"
    )
    result_file = tmp_path / "out.json"
    _run_pytest_benchmark(
        tmp_path, result_file, "--benchmark-save-data", "--benchmark-min-rounds=8", "--benchmark-max-time=0.05"
    )
    raw = json.loads(result_file.read_text())
    doc = _import_and_check("pytest-benchmark", result_file, tmp_path)
    join = doc["metrics"]["test_join_time_us"]
    assert len(join["samples"]) == 12
    stats = next(b["stats"] for b in raw["benchmarks"] if b["name"] == "test_join")
    assert join["samples"] == pytest.approx([v * 1e6 for v in stats["data"]])
    sort = doc["metrics"]["test_sort_time_us"]
    rounds = stats_rounds(raw, "test_sort")
    if rounds <= 1001:  # every round kept
        assert len(sort["samples"]) == rounds and "sizes" not in sort
    else:  # the bounded form: the rounds' 1,001 order statistics and their count (perfgate.core.reduced)
        data = np.sort(next(b["stats"]["data"] for b in raw["benchmarks"] if b["name"] == "test_sort")) * 1e6
        assert sort["sizes"] == [rounds] and len(sort["samples"]) == 1001
        assert sort["samples"][500] == pytest.approx(float(np.median(data)), rel=1e-12)
        assert (sort["samples"][0], sort["samples"][-1]) == pytest.approx((data[0], data[-1]), rel=1e-12)


def stats_rounds(raw: dict, name: str) -> int:
    return next(b["stats"]["rounds"] for b in raw["benchmarks"] if b["name"] == name)


def test_pyperf(tmp_path):
    need("pyperf", importlib.util.find_spec("pyperf") is not None, "pip install -e .[dev]")
    (tmp_path / "bench.py").write_text(
        "import pyperf\n"
        "runner = pyperf.Runner()\n"
        "runner.timeit('join 100', stmt=\"','.join(['a'] * 100)\")\n"
        "runner.bench_func('sorted/300', sorted, list(range(300, 0, -1)))\n"
    )
    result_file = tmp_path / "out.json"
    # fixed loops skip calibration; 2 worker processes x 4 values each
    run(
        [sys.executable, "bench.py", "-p", "2", "-n", "4", "-l", "32", "-w", "1", "-o", str(result_file), "--quiet"],
        cwd=tmp_path,
    )
    doc = _import_and_check("pyperf", result_file, tmp_path)
    assert set(doc["metrics"]) == {"join_100_time_us", "sorted_300_time_us"}
    assert all(len(m["samples"]) == 8 for m in doc["metrics"].values())
    assert doc["machine"]["cores"] == os.cpu_count()


ASV_CONF = {
    "version": 1,
    "project": "tiny",
    "project_url": "http://example.invalid/",
    "repo": ".",
    "branches": ["HEAD"],
    "environment_type": "existing",
    "benchmark_dir": "benchmarks",
    "results_dir": "results",
    "html_dir": "html",
}

ASV_BENCH = """
class Suite:
    def setup(self):
        self.data = list(range(200))

    def time_sum(self):
        sum(self.data)

    def mem_list(self):
        return [0] * 100

    def track_rate(self):
        return 1234.0

    track_rate.unit = "ops/s"


def time_range(n):
    sum(range(n))


time_range.params = [10, 1000]
time_range.param_names = ["n"]
"""


def test_asv(tmp_path):
    asv = which("asv")
    need("asv", asv is not None, "pip install -e .[dev]")
    need("git", shutil.which("git") is not None, "apt-get install git")
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "asv.conf.json").write_text(json.dumps(ASV_CONF))
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench.py").write_text(ASV_BENCH)
    home = tmp_path / "home"  # asv keeps its machine file in ~/.asv-machine.json
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    run(["git", "init", "-q"], cwd=repo, env=env)
    run(["git", "add", "-A"], cwd=repo, env=env)
    run(["git", "commit", "-q", "-m", "tiny"], cwd=repo, env=env)
    commit = run(["git", "rev-parse", "HEAD"], cwd=repo, env=env).strip()
    run([asv, "machine", "--yes", "--machine", "ci"], cwd=repo, env=env)
    run(
        [
            asv,
            "run",
            "--python=same",
            "--machine",
            "ci",
            "--record-samples",
            "--set-commit-hash",
            commit,
            "-a",
            "repeat=6",
            "-a",
            "number=20",
            "-a",
            "warmup_time=0",
            "-a",
            "rounds=1",
        ],
        cwd=repo,
        env=env,
    )
    files = [p for p in (repo / "results" / "ci").glob("*.json") if p.name != "machine.json"]
    assert len(files) == 1, files
    doc = _import_and_check("asv", files[0], tmp_path)
    names = set(doc["metrics"])
    assert names == {
        "bench_suite_time_sum_time_us",
        "bench_suite_mem_list_bytes",
        "bench_suite_track_rate_ops_s",
        "bench_time_range_n_10_time_us",
        "bench_time_range_n_1000_time_us",
    }
    assert len(doc["metrics"]["bench_suite_time_sum_time_us"]["samples"]) == 6
    run_ = load_run(tmp_path / "asv.json")
    assert run_.metrics["bench_suite_track_rate_ops_s"].direction is Direction.HIGHER
    assert run_.git.commit == "feed"  # --git-commit wins over the file's
    ten, thousand = (run_.metrics[f"bench_time_range_n_{n}_time_us"].samples for n in (10, 1000))
    assert sorted(ten)[3] < sorted(thousand)[3]  # the parameter labels are not swapped


def test_hyperfine(tmp_path):
    hyperfine = shutil.which("hyperfine")
    need("hyperfine", hyperfine is not None, "apt-get install hyperfine (.ci/run)")
    result_file = tmp_path / "out.json"
    run(
        [
            hyperfine,
            "-N",
            "--runs",
            "6",
            "--warmup",
            "1",
            "--export-json",
            str(result_file),
            "--command-name",
            "no-op",
            "true",
            "sleep 0.002",
        ],
        cwd=tmp_path,
    )
    doc = _import_and_check("hyperfine", result_file, tmp_path)
    assert set(doc["metrics"]) == {"no_op_time_ms", "sleep_0_002_time_ms"}
    assert all(len(m["samples"]) == 6 for m in doc["metrics"].values())
    assert min(doc["metrics"]["sleep_0_002_time_ms"]["samples"]) >= 2.0  # milliseconds, not seconds
    assert doc["machine"]["fingerprint"]  # hyperfine records no machine: this one's is used


GBENCH_SOURCE = r"""
#include <benchmark/benchmark.h>
#include <numeric>
#include <vector>

static void BM_Sum(benchmark::State& state) {
  std::vector<int> v(state.range(0), 1);
  for (auto _ : state) benchmark::DoNotOptimize(std::accumulate(v.begin(), v.end(), 0));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Sum)->Arg(64)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
"""


def test_google_benchmark(tmp_path):
    gxx = shutil.which("g++")
    need("g++", gxx is not None, "apt-get install g++ (.ci/run)")
    need(
        "Google Benchmark headers",
        Path("/usr/include/benchmark/benchmark.h").exists(),
        "apt-get install libbenchmark-dev (.ci/run)",
    )
    (tmp_path / "bench.cc").write_text(GBENCH_SOURCE)
    run([gxx, "-O2", "bench.cc", "-o", "bench", "-lbenchmark", "-lpthread"], cwd=tmp_path)
    result_file = tmp_path / "out.json"
    run(
        [
            str(tmp_path / "bench"),
            "--benchmark_repetitions=5",
            "--benchmark_min_time=0.01",
            f"--benchmark_out={result_file}",
            "--benchmark_out_format=json",
        ],
        cwd=tmp_path,
    )
    doc = _import_and_check("google-benchmark", result_file, tmp_path)
    assert set(doc["metrics"]) == {
        "bm_sum_64_time_us",
        "bm_sum_64_items_per_sec",
        "bm_sum_4096_time_us",
        "bm_sum_4096_items_per_sec",
    }
    assert all(len(m["samples"]) == 5 for m in doc["metrics"].values())
    assert doc["metrics"]["bm_sum_4096_items_per_sec"]["direction"] == "higher_is_better"


def _check_pair(fmt: str, first: Path, second: Path, tmp_path: Path) -> dict:
    """Import two result files of identical work and check the second against the first."""
    files = []
    for i, result in enumerate((first, second)):
        out = tmp_path / f"{fmt}-{i}.json"
        assert main(["import", fmt, str(result), "--output", str(out), "--git-commit", f"c{i}"]) == 0
        files.append(out)
    report = tmp_path / f"{fmt}-pair.json"
    code = main(["check", "--baseline", str(files[0]), "--current", str(files[1]), "--json", str(report), "--quiet"])
    doc = json.loads(report.read_text())
    assert code == 0 and doc["regressions"] == [], doc["regressions"]
    # each comparison folded in run-to-run noise that it did not learn from these two runs
    assert all(c["noise_assumed"] for c in doc["comparisons"] if c["p_value"] is not None)
    return doc


def test_pyperf_identical_work_recorded_twice_raises_no_alarm(tmp_path):
    """Two real pyperf runs of the same work, one after the other: their worker processes are
    groups, and consecutive processes do not stand in for the spread between runs."""
    need("pyperf", importlib.util.find_spec("pyperf") is not None, "pip install -e .[dev]")
    (tmp_path / "bench.py").write_text(
        "import pyperf\nrunner = pyperf.Runner()\nrunner.bench_func('sorted/300', sorted, list(range(300, 0, -1)))\n"
    )
    results = []
    for i in range(2):
        result = tmp_path / f"pyperf{i}.json"
        run(
            [sys.executable, "bench.py", "-p", "3", "-n", "5", "-l", "64", "-w", "1", "-o", str(result), "--quiet"],
            cwd=tmp_path,
        )
        results.append(result)
    _check_pair("pyperf", results[0], results[1], tmp_path)
    assert load_run(tmp_path / "pyperf-0.json").metrics["sorted_300_time_us"].groups == (5, 5, 5)


def test_pytest_benchmark_identical_work_recorded_twice_raises_no_alarm(tmp_path):
    """Two real pytest-benchmark runs of the same work, seconds apart, each of hundreds of rounds
    from one process: the rounds are not independent of the machine's phase."""
    need("pytest-benchmark", importlib.util.find_spec("pytest_benchmark") is not None, "pip install -e .[dev]")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_tiny.py").write_text(
        "def test_sort(benchmark):\n    benchmark(sorted, list(range(300, 0, -1)))\n"
    )
    results = []
    for i in range(2):
        result = tmp_path / f"pytest{i}.json"
        _run_pytest_benchmark(
            tmp_path, result, "--benchmark-save-data", "--benchmark-min-rounds=200", "--benchmark-max-time=0.2"
        )
        results.append(result)
    doc = _check_pair("pytest-benchmark", results[0], results[1], tmp_path)
    # every round was imported, so the comparison was a test, not the threshold alone
    (sort,) = doc["comparisons"]
    assert sort["p_value"] is not None and not sort["threshold_only"]
    assert len(load_run(tmp_path / "pytest-benchmark-0.json").metrics["test_sort_time_us"].samples) >= 200

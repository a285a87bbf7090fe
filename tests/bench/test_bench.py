"""The runner and `perfgate bench` on a user-registered suite (no timings asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfgate.bench.memory import PeakMemory
from perfgate.bench.registry import Stage, StageContext, clear, stage, stages_for
from perfgate.bench.runner import BenchOptions, run_benchmark
from perfgate.cli import main
from perfgate.core.metrics import Direction
from perfgate.core.schema import GitInfo
from tests.conftest import validate_run_file

SUITE = "unit-test-suite"


@pytest.fixture
def suite():
    calls = {"load": 0, "step": 0}

    @stage("load", metric="dbn_load_time_ms", unit="ms", suite=SUITE, warmup=2, repeat=4)
    def load(ctx: StageContext):
        def once():
            calls["load"] += 1
            ctx.state["data"] = np.arange(1000.0)

        return once

    @stage(
        "step",
        metric="training_step_time_ms",
        unit="ms",
        suite=SUITE,
        warmup=1,
        repeat=3,
        items_per_call=64,
        throughput_metric="throughput_samples_per_sec",
    )
    def step(ctx: StageContext):
        data = ctx.state["data"]  # left by the stage before, during its warm-up

        def once():
            calls["step"] += 1
            return float(np.sum(data * data))

        return once

    @stage("only_ppo", metric="inference_latency_us", unit="us", suite=SUITE, models=["ppo"])
    def only_ppo(ctx: StageContext):
        return lambda: None

    yield calls
    clear(SUITE)


def _run(software=None, **kw):
    options = BenchOptions(model="dqn", suite=SUITE, rounds=2, **kw)
    return run_benchmark(
        options,
        run_id="r1",
        created_at="2026-11-29T18:00:00Z",
        git=GitInfo(commit="abc"),
        machine={"fingerprint": "fp", "cores": 2},
        software=software,
    )


def test_runner_counts_and_metrics(suite):
    run = _run()
    assert suite == {"load": 2 + 2 * 4, "step": 1 + 2 * 3}  # warm-up once, then each round
    dropped = {name: run.config["stages"][name]["warmup_dropped"] for name in ("load", "step")}
    assert all(0 <= d <= 3 for d in dropped.values())  # never more than half
    assert len(run.metrics["dbn_load_time_ms"].samples) == 8 - dropped["load"]
    assert len(run.metrics["training_step_time_ms"].samples) == 6 - dropped["step"]
    assert run.metrics["throughput_samples_per_sec"].direction is Direction.HIGHER
    step = run.metrics["training_step_time_ms"].samples
    rate = run.metrics["throughput_samples_per_sec"].samples
    assert rate == pytest.approx([64 / (s / 1e3) for s in step])
    assert len(run.metrics["peak_memory_mb"].samples) == 2  # one per round
    assert "inference_latency_us" not in run.metrics  # registered for ppo only
    assert run.config["stages"]["load"]["repeat_per_round"] == 4


def test_automatic_repeat_is_bounded(suite):
    clear(SUITE)

    @stage("fast", metric="inference_latency_us", unit="us", suite=SUITE)
    def fast(ctx):
        return lambda: None

    run = _run(max_repeat=50, round_time=10.0)
    dropped = run.config["stages"]["fast"]["warmup_dropped"]
    assert len(run.metrics["inference_latency_us"].samples) == 2 * 50 - dropped


def test_no_stages_for_model_is_input_error(suite):
    from perfgate.errors import InputError

    with pytest.raises(InputError, match="no stages"):
        run_benchmark(
            BenchOptions(model="dqn", suite="empty"),
            run_id="r",
            created_at="2026-11-29T18:00:00Z",
            git=GitInfo(),
            machine={},
        )


def test_stage_validation():
    with pytest.raises(ValueError, match="unit"):
        Stage(name="x", metric="m", unit="minutes", setup=lambda ctx: lambda: None)
    with pytest.raises(ValueError, match="together"):
        Stage(name="x", metric="m", unit="ms", setup=lambda ctx: lambda: None, items_per_call=3)


def test_peak_memory_sees_a_large_allocation():
    with PeakMemory() as small:
        pass
    with PeakMemory() as big:
        block = np.ones(40_000_000 // 8)  # 40 MB, touched
        block[::512] = 2.0
        del block
    assert big.peak_bytes >= 30_000_000
    assert big.peak_bytes > small.peak_bytes


def test_cli_bench_writes_a_valid_run_file(suite, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "dqn_current.json"
    code = main(
        [
            "bench",
            "--suite",
            SUITE,
            "--model",
            "DQN",
            "--output",
            str(out),
            "--git-commit",
            "cafe",
            "--rounds",
            "1",
            "--store",
            f"sqlite:///{tmp_path}/s.db",
        ]
    )
    assert code == 0
    doc = validate_run_file(out)
    assert doc["git"]["commit"] == "cafe"
    assert doc["model"] == "dqn"
    assert len(doc["machine"]["fingerprint"]) == 16
    assert set(doc["metrics"]) == {
        "dbn_load_time_ms",
        "training_step_time_ms",
        "throughput_samples_per_sec",
        "peak_memory_mb",
        "round_memory_mb",
    }
    from perfgate.store import open_store
    from perfgate.store.base import RunQuery

    store = open_store(f"sqlite:///{tmp_path}/s.db")
    assert [r.run_id for r in store.runs(RunQuery(model="dqn"))] == [doc["run_id"]]
    store.close()


def test_cli_bench_all_models_names_files(suite, tmp_path):
    """``--model all`` of a suite of one's own: every name its stages list (here the four built-in names)."""

    @stage("named", metric="feature_extraction_time_ms", suite=SUITE, models=["dqn", "ppo", "mamba2", "tft"])
    def named(ctx: StageContext):
        return lambda: None

    code = main(
        ["bench", "--suite", SUITE, "--model", "all", "--output", str(tmp_path / "{model}_run.json"), "--rounds", "1"]
    )
    assert code == 0
    assert sorted(p.name for p in tmp_path.glob("*_run.json")) == [
        "dqn_run.json",
        "mamba2_run.json",
        "ppo_run.json",
        "tft_run.json",
    ]
    assert "inference_latency_us" in json.loads((tmp_path / "ppo_run.json").read_text())["metrics"]


def test_unknown_model_exit_2(capsys, tmp_path):
    assert main(["bench", "--model", "gpt5", "--output", str(tmp_path / "x.json")]) == 2
    assert "unknown model" in capsys.readouterr().err


def test_registry_order_and_model_filter(suite):
    assert [s.name for s in stages_for(SUITE, "dqn")] == ["load", "step"]
    assert [s.name for s in stages_for(SUITE, "ppo")] == ["load", "step", "only_ppo"]


def _write_stage_module(tmp_path, name="pg_user_stages"):
    (tmp_path / f"{name}.py").write_text(
        "import numpy as np\n"
        "from perfgate.bench import stage\n\n"
        "@stage('work', metric='work_time_ms', unit='ms', suite='userproc', repeat=5, warmup=1)\n"
        "def work(ctx):\n"
        "    a = np.ones((64, 64))\n"
        "    return lambda: a @ a\n"
    )
    return name


def _bench_user_stages(tmp_path, monkeypatch, module: str, *extra: str) -> Path:
    name = _write_stage_module(tmp_path, module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{Path(__file__).resolve().parents[2]}")
    out = tmp_path / "run.json"
    argv = ["bench", "--suite", "userproc", "--stages-module", name, "--model", "dqn", "--output", str(out)]
    assert main([*argv, *extra, "--rounds", "1"]) == 0
    return out


def test_stages_module_and_worker_processes(tmp_path, monkeypatch):
    """Your own stages from --stages-module, measured in 3 worker processes: 3 groups per metric."""
    out = _bench_user_stages(tmp_path, monkeypatch, "pg_user_stages", "--processes", "3")
    doc = validate_run_file(out)
    groups = doc["metrics"]["work_time_ms"]["groups"]
    assert len(groups) == 3 and all(3 <= g <= 5 for g in groups)  # 5 per process, less any warm-up dropped
    assert doc["config"]["processes"] == 3
    assert "load_avg_1m_start" in doc["config"]["environment"]


def test_time_budget_stops_early_on_quiet_metrics(tmp_path, monkeypatch):
    out = _bench_user_stages(tmp_path, monkeypatch, "pg_user_stages_budget", "--time-budget", "120", "--processes", "6")
    groups = json.loads(out.read_text())["metrics"]["work_time_ms"]["groups"]
    assert 2 <= len(groups) <= 6


def test_missing_stages_module_is_exit_2(tmp_path, capsys):
    assert (
        main(["bench", "--stages-module", "no_such_module_xyz", "--model", "dqn", "--output", str(tmp_path / "r.json")])
        == 2
    )
    assert "no_such_module_xyz" in capsys.readouterr().err


def test_runner_drops_a_slow_first_step(suite):
    """A first timed step 10x slower than the rest is warm-up: dropped, never an alarm."""
    clear(SUITE)
    import time as _time

    calls = {"n": 0}

    @stage("step", metric="training_step_time_ms", unit="ms", suite=SUITE, warmup=0, repeat=30)
    def slow_start(ctx):
        def once():
            calls["n"] += 1
            _time.sleep(0.02 if calls["n"] == 1 else 0.002)

        return once

    run = _run()
    info = run.config["stages"]["step"]
    assert info["warmup_dropped"] >= 1
    assert len(run.metrics["training_step_time_ms"].samples) == 60 - info["warmup_dropped"]


def test_a_stage_of_a_declared_kind_carries_its_reference_kernel(suite):
    """Each sample of a stage with a kind keeps the reference time of its block; the run has the index."""
    clear(SUITE)

    @stage("kinded", metric="feature_extraction_time_ms", unit="ms", suite=SUITE, warmup=1, repeat=40, kind="compute")
    def kinded(ctx):
        return lambda: sum(range(200))

    @stage("plain", metric="dbn_load_time_ms", unit="ms", suite=SUITE, warmup=1, repeat=5)
    def plain(ctx):
        return lambda: None

    run = _run()
    metric = run.metrics["feature_extraction_time_ms"]
    assert metric.reference is not None and metric.reference.kernel == "compute"
    assert len(metric.reference.seconds) == len(metric.samples)
    # blocks of several calls share one reference timing (a block lasts about 5 ms)
    assert len(set(metric.reference.seconds)) < len(metric.samples)
    assert run.metrics["dbn_load_time_ms"].reference is None
    assert set(run.machine_index) == {"compute", "interpreter", "memory"}
    assert all(v > 0 for v in run.machine_index.values())


def test_stage_kind_is_validated():
    with pytest.raises(ValueError, match="kind must be one of"):
        Stage(name="x", metric="x_ms", unit="ms", setup=lambda ctx: lambda: None, kind="gpu")


HOLD_STAGES = """\
import numpy as np
from perfgate.bench import stage

@stage('hold', metric='hold_time_ms', unit='ms', suite='holdsuite', repeat=5, warmup=1)
def hold(ctx):
    block = np.ones(100 * 2**20 // 8)  # 100 MB, every page touched, held for the whole run
    ctx.state['block'] = block
    return lambda: float(block[::4096].sum())
"""


def test_memory_held_by_a_set_up_counts_in_memory_usage(tmp_path, monkeypatch):
    """Regression for memory_usage_mb measuring only the peak above each round's start: a set-up's
    100 MB (a model, a replay buffer) read as a few MB. In 2 worker processes: each process's
    figure is its own peak, and combining them keeps them per process (never a sum)."""
    (tmp_path / "pg_hold_stages.py").write_text(HOLD_STAGES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{Path(__file__).resolve().parents[2]}")
    out = tmp_path / "run.json"
    argv = ["bench", "--suite", "holdsuite", "--stages-module", "pg_hold_stages", "--model", "m", "--output", str(out)]
    assert main([*argv, "--rounds", "2", "--processes", "2"]) == 0
    doc = validate_run_file(out)
    memory = doc["metrics"]["peak_memory_mb"]
    assert memory["groups"] == [2, 2]
    assert all(100 <= mb < 200 for mb in memory["samples"]), memory["samples"]
    # what the calls add on top of the held block is reported apart, and it is not the block
    assert doc["metrics"]["round_memory_mb"]["direction"] == "informational"
    assert all(mb < 100 for mb in doc["metrics"]["round_memory_mb"]["samples"])
    assert "before the first set-up" in doc["config"]["memory_definition"]
    assert doc["config"]["memory_method"] in ("vmhwm", "sampled")


def test_memory_usage_counts_a_set_up_peak_that_was_freed(suite):
    """A set-up's transient peak (a 60 MB temporary) is part of the pipeline's peak; the runner's own
    figure sees it even though the rounds never reach it again."""
    clear(SUITE)

    @stage("spike", metric="dbn_load_time_ms", unit="ms", suite=SUITE, warmup=1, repeat=2)
    def spike(ctx):
        temporary = np.ones(60 * 2**20 // 8)
        total = float(temporary[::4096].sum())
        del temporary
        return lambda: total

    run = _run()
    assert all(mb >= 55 for mb in run.metrics["peak_memory_mb"].samples)
    assert all(mb < 55 for mb in run.metrics["round_memory_mb"].samples)


def test_runner_records_software_apart_from_the_machine(suite):
    run = _run(software={"python": "3.11.7", "torch": "2.14.0"})
    assert dict(run.software) == {"python": "3.11.7", "torch": "2.14.0"}
    assert "torch" not in run.machine.details


def test_unmeasured_work_in_a_set_up_is_left_out_of_memory_usage(suite):
    """Writing a cached data file on a fresh machine is not the pipeline: a first run must not look heavier."""
    from perfgate.bench import unmeasured

    clear(SUITE)

    @stage("cached", metric="dbn_load_time_ms", unit="ms", suite=SUITE, warmup=1, repeat=2)
    def cached(ctx):
        with unmeasured():
            temporary = np.ones(60 * 2**20 // 8)  # building the cache: 60 MB, freed
            total = float(temporary[::4096].sum())
            del temporary
        return lambda: total

    run = _run()
    assert all(mb < 55 for mb in run.metrics["peak_memory_mb"].samples)


def test_memory_usage_without_the_kernel_high_water_mark_falls_back_to_sampling(suite, monkeypatch):
    """Where /proc/self/clear_refs cannot be written, RSS is sampled; a held set-up still counts."""
    import perfgate.bench.memory as memory

    monkeypatch.setattr(memory, "_reset_hwm", lambda: False)
    clear(SUITE)

    @stage("hold", metric="dbn_load_time_ms", unit="ms", suite=SUITE, warmup=1, repeat=2)
    def hold(ctx):
        block = np.ones(80 * 2**20 // 8)
        ctx.state["block"] = block
        return lambda: float(block[::4096].sum())

    run = _run()
    assert run.config["memory_method"] == "sampled"
    assert all(mb >= 80 for mb in run.metrics["peak_memory_mb"].samples)


def test_the_suite_names_the_runners_own_figures(suite):
    """A suite's declaration names the runner's figures (the reference pipeline: memory_usage_mb); None leaves
    one out; a suite that declares none gets the generic names (peak_memory_mb, round_memory_mb)."""
    from perfgate.core.metrics import RunnerMetrics, SuiteDeclaration, declare_suite, declared_suite, forget_suite

    pipeline = declared_suite("pipeline")
    assert pipeline is not None and pipeline.runner_metrics.peak_memory == "memory_usage_mb"
    assert pipeline.runner_metrics.gpu_utilization == "gpu_utilization_pct"
    declare_suite(
        SuiteDeclaration(
            name=SUITE, stages_module="unused", runner_metrics=RunnerMetrics(peak_memory="rss_mb", round_memory=None)
        )
    )
    try:
        run = _run()
    finally:
        forget_suite(SUITE)
    assert len(run.metrics["rss_mb"].samples) == 2
    assert not {"peak_memory_mb", "round_memory_mb", "memory_usage_mb"} & set(run.metrics)
    assert {"peak_memory_mb", "round_memory_mb"} <= set(_run().metrics)

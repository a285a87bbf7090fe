"""`perfgate bench` on the reference pipeline, end to end and in-process (no timings asserted)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from perfgate.bench.registry import StageContext, clear, stage
from perfgate.bench.runner import BenchOptions, run_benchmark
from perfgate.cli import main
from perfgate.core.schema import GitInfo
from perfgate.errors import InputError
from tests.conftest import validate_run_file

torch = pytest.importorskip("torch")

MODELS = ("dqn", "ppo", "mamba2", "tft")
BARS = 12_000


@pytest.fixture(scope="module")
def bars_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic OHLCV file with two instruments (the stages must pick one)."""
    from perfgate_pipeline.synth import write_synthetic

    path = tmp_path_factory.mktemp("data") / "bars.dbn"
    write_synthetic(path, schema="ohlcv-1m", records=BARS, seed=5, instruments=2)
    return path


def _bench(out: Path, model: str, data: Path, *extra: str) -> int:
    return main(
        [
            "bench",
            "--model",
            model,
            "--output",
            str(out),
            "--git-commit",
            "c0ffee",
            "--data",
            str(data),
            "--quick",
            *extra,
        ]
    )


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_quick_bench_writes_a_valid_run_and_a_checkpoint(model, bars_file, tmp_path):
    out = tmp_path / f"{model}.json"
    assert _bench(out, model, bars_file) == 0
    doc = validate_run_file(out)
    assert doc["model"] == model and doc["git"]["commit"] == "c0ffee"
    metrics = doc["metrics"]
    assert set(metrics) == {
        "dbn_load_time_ms",
        "feature_extraction_time_ms",
        "training_step_time_ms",
        "throughput_samples_per_sec",
        "training_memory_mb",
        "inference_latency_us",
        "inference_latency_torch_us",
        "memory_usage_mb",
        "round_memory_mb",
    }  # on the CPU: no GPU metrics
    assert len(metrics["inference_latency_us"]["samples"]) >= 1000
    assert len(metrics["training_memory_mb"]["samples"]) == 2  # one per round
    assert all(v > 0 for v in metrics["training_memory_mb"]["samples"])
    # regression for memory_usage_mb leaving out what set-ups hold (DQN read 5 MB): the pipeline's
    # peak holds the training stage's model, optimiser and buffers, and more
    pipeline = np.median(metrics["memory_usage_mb"]["samples"])
    assert pipeline >= np.median(metrics["training_memory_mb"]["samples"])
    assert np.median(metrics["round_memory_mb"]["samples"]) < pipeline
    assert doc["config"]["quick"] is True
    assert "stage_memory_definition" in doc["config"]

    from perfgate_pipeline.models import fast_server
    from perfgate_pipeline.stages import load_checkpoint

    model_obj = load_checkpoint(tmp_path / f"{model}.model.pt")
    server = fast_server(model_obj)
    dim = model_obj.config.obs_dim if model in ("dqn", "ppo") else 16
    assert np.isfinite(server(np.zeros(dim, dtype=np.float32))).all()


@pytest.mark.slow
def test_check_of_two_quick_runs_decides(bars_file, tmp_path):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert _bench(first, "dqn", bars_file) == 0
    assert _bench(second, "dqn", bars_file) == 0
    code = main(["check", "--baseline", str(first), "--current", str(second), "--output", str(tmp_path / "r.md")])
    assert code in (0, 1)  # same code and machine: never "could not decide"
    assert "inference_latency_torch_us" in (tmp_path / "r.md").read_text()


def test_device_selection():
    from perfgate_pipeline.stages import resolve_device

    assert resolve_device("cpu") == "cpu"
    with pytest.raises(InputError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="CUDA is not available"):
            resolve_device("cuda")
        with pytest.raises(InputError, match="CUDA is not available"):
            resolve_device("cuda:1")


def test_bench_on_a_missing_gpu_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = main(["bench", "--model", "dqn", "--output", str(tmp_path / "x.json"), "--device", "cuda"])
    assert code == 2
    assert "CUDA is not available" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.hardware
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.slow
def test_quick_bench_on_cuda_reports_gpu_memory(bars_file, tmp_path):
    out = tmp_path / "dqn.json"
    assert _bench(out, "dqn", bars_file, "--device", "cuda") == 0
    doc = validate_run_file(out)
    assert "gpu_memory_mb" in doc["metrics"]


class _FakeCuda:
    """Just enough of ``torch.cuda`` for the runner's GPU path."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def synchronize(self, device: object = None) -> None:
        self.calls.append("sync")

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self.calls.append("reset")

    def max_memory_allocated(self, device: object = None) -> int:
        return 3 * 2**20

    def utilization(self, device: object = None) -> float:
        return 40.0


def test_runner_gpu_path_reports_gpu_metrics_and_cpu_path_none(monkeypatch):
    suite = "gpu-path-test"

    @stage("work", metric="training_step_time_ms", suite=suite, warmup=1, repeat=3)
    def work(ctx: StageContext):
        return lambda: sum(range(20_000))  # long enough for a utilisation reading or none; both are valid

    fake = SimpleNamespace(cuda=_FakeCuda(), device=lambda d: d)
    import perfgate.bench.runner as runner

    def run(device: str):  # type: ignore[no-untyped-def]
        return run_benchmark(
            BenchOptions(model="dqn", suite=suite, rounds=2, device=device),
            run_id="r",
            created_at="2026-11-29T18:00:00Z",
            git=GitInfo(),
            machine={},
        )

    try:
        cpu = run("cpu")
        assert not any(name.startswith("gpu_") for name in cpu.metrics)
        monkeypatch.setattr(runner, "cuda_torch", lambda device: fake if device.startswith("cuda") else None)
        monkeypatch.setattr(runner, "_synchronizer", lambda st, device: lambda: fake.cuda.synchronize())
        gpu = run("cuda")
    finally:
        clear(suite)
    assert gpu.metrics["gpu_memory_mb"].samples == (3.0, 3.0)
    assert fake.cuda.calls.count("reset") == 2  # one per round
    assert fake.cuda.calls.count("sync") >= 2 * 3 * 2  # around every timed call


def test_stages_pick_the_instrument_with_most_bars(bars_file):
    from perfgate_pipeline.dbn import load_dbn
    from perfgate_pipeline.stages import one_instrument

    dbn = load_dbn(bars_file)
    rec = one_instrument(dbn)
    assert len(np.unique(rec["instrument_id"])) == 1
    assert len(rec) >= BARS // 2


def test_run_file_names_the_memory_definition(tmp_path):
    # the stage-memory definition travels with every run that has a stage memory metric
    suite = "memory-def-test"

    @stage("s", metric="training_step_time_ms", suite=suite, warmup=0, repeat=2, memory_metric="training_memory_mb")
    def s(ctx: StageContext):
        ctx.state["kept"] = np.ones(2_000_000)  # 16 MB kept by the set-up: counted
        return lambda: np.ones(1_000_000).sum()  # 8 MB transient per call: counted

    try:
        run = run_benchmark(
            BenchOptions(model="dqn", suite=suite, rounds=2),
            run_id="r",
            created_at="2026-11-29T18:00:00Z",
            git=GitInfo(),
            machine={},
        )
    finally:
        clear(suite)
    assert "set-up" in run.config["stage_memory_definition"]
    assert all(v >= 20 for v in run.metrics["training_memory_mb"].samples)


@pytest.mark.parametrize("model", MODELS)
def test_every_stage_is_set_up_from_the_set_ups_before_it_alone(model, bars_file):
    """Regression: `bench --measure counts --warmup 0` failed with KeyError 'bars': the features'
    set-up read what only the DBN load's calls stored. No set-up may need another stage's calls
    (the native pass of --measure counts runs set-ups only)."""
    import perfgate_pipeline.stages  # noqa: F401  (registers the reference pipeline)
    from perfgate.bench.registry import stages_and_context

    stages, ctx = stages_and_context(
        suite="pipeline", model=model, data_path=bars_file, seed=0, device="cpu", params={"quick": True}
    )
    for st in stages:
        assert callable(st.setup(ctx)), st.name


def test_warmup_0_with_fixed_repeats_times_every_stage(bars_file, tmp_path):
    """The same regression measured by times: no call runs between two set-ups."""
    out = tmp_path / "dqn.json"
    assert _bench(out, "dqn", bars_file, "--warmup", "0", "--repeat", "2", "--rounds", "1") == 0
    assert validate_run_file(out)["metrics"]["feature_extraction_time_ms"]["samples"]


def test_counts_with_warmup_0_sets_every_stage_up(bars_file):
    """--measure counts --warmup 0, without valgrind: the counted worker's steps with a switch that counts nothing."""
    import perfgate_pipeline.stages  # noqa: F401
    from perfgate.bench.counting import CountOptions, count_stages

    class NoSwitch:
        def label(self, name: str) -> None: ...
        def instrument(self, on: bool) -> None: ...
        def toggle(self) -> None: ...
        def dump(self, label: str) -> None: ...

    steps: list[str] = []
    options = CountOptions(model="ppo", data_path=bars_file, warmup=0, calls=1, params={"quick": True})
    result = count_stages(options, NoSwitch(), steps.append)  # type: ignore[arg-type]
    assert [st["name"] for st in result["stages"]] == [
        "dbn_load",
        "features",
        "training_step_ppo",
        "inference",
        "inference_torch",
    ]

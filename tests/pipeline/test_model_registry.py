"""The model registry: every path that handles models by name reads it, so a model registered
from outside (here a toy linear model, through the public ``register``) is built, trained,
checkpointed, served and benched like the built-in four."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfgate_pipeline import models

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from perfgate_pipeline.env import MarketData  # noqa: E402
from perfgate_pipeline.features import N_FEATURES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "perfgate_pipeline"


@dataclass
class ToyConfig:
    n_features: int = N_FEATURES
    seq_len: int = 16
    batch_size: int = 8
    lr: float = 1e-2


class ToyNet(nn.Module):
    """(B, T, 16) -> (B, T, 1): the next return as a linear function of the bar's features."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        self.fc = nn.Linear(config.n_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class ToyServer:
    def __init__(self, model: ToyNet) -> None:
        self.w = model.fc.weight.detach().numpy()[0].astype(np.float32).copy()
        self.b = float(model.fc.bias.detach()[0])
        self.out = np.zeros(1, dtype=np.float32)
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.out[0] = x @ self.w + self.b
        return self.out


def _toy_task(config: ToyConfig, data: MarketData, *, device: str = "cpu", seed: int = 0) -> Any:
    from perfgate_pipeline.train import SequenceTask

    torch.manual_seed(seed)

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ((out[..., 0] - y) ** 2).mean()

    return SequenceTask(
        ToyNet(config).to(device),
        data.features,
        data.returns.astype(np.float32),
        loss_fn,
        seq_len=config.seq_len,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=seed,
    )


TOY = models.ModelSpec(name="toy", config=ToyConfig, model=ToyNet, task=_toy_task, server=ToyServer, kind=None)


@pytest.fixture
def toy():
    from perfgate.bench.registry import _REGISTRY

    models.register("toy", TOY)
    yield TOY
    models.unregister("toy")
    _REGISTRY.pop(("pipeline", "training_step_toy"), None)


def _data(n: int = 200) -> MarketData:
    rng = np.random.default_rng(0)
    return MarketData(
        features=rng.standard_normal((n, N_FEATURES)).astype(np.float32),
        returns=(rng.standard_normal(n) * 1e-3).astype(np.float32),
    )


def test_the_built_in_models_are_registered_in_order():
    assert tuple(models.MODELS) == ("dqn", "ppo", "mamba2", "tft")
    assert [models.spec(name).name for name in models.MODELS] == list(models.MODELS)


def test_the_command_line_reads_the_registry():
    from perfgate.suites import find

    suite = find("pipeline")
    assert suite is not None and suite.models is models.MODELS  # the live registry, not a copy


def test_a_registered_model_is_built_trained_checkpointed_and_served(toy, tmp_path):
    from perfgate.bench.registry import StageContext, stages_for
    from perfgate_pipeline.serve import eager_server
    from perfgate_pipeline.stages import load_checkpoint, save_checkpoint
    from perfgate_pipeline.train import Trainer

    assert "toy" in models.MODELS and models.MODELS[-1] == "toy"
    assert models.default_config("toy") == ToyConfig()
    task = models.build_task("toy", _data())
    trainer = Trainer(task)
    losses = trainer.fit(3)
    assert len(losses) == 3 and all(np.isfinite(losses))

    [training] = [s for s in stages_for("pipeline", "toy") if s.name.startswith("training_step")]
    assert training.name == "training_step_toy" and training.items_per_call == ToyConfig.batch_size
    assert training.kind is None
    assert not any(s.name == "training_step_toy" for s in stages_for("pipeline", "dqn"))

    ctx = StageContext(model="toy", state={"task": task, "trainer": trainer})
    loaded = load_checkpoint(save_checkpoint(ctx, tmp_path / "toy.pt"))
    assert isinstance(loaded, ToyNet)
    server = models.fast_server(loaded)
    assert isinstance(server, ToyServer)
    x = _data(1).features[0]
    with torch.no_grad():
        expected = task.model(torch.from_numpy(x)[None]).numpy()[0]
    np.testing.assert_allclose(server(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(eager_server(loaded)(x).numpy()[0], expected, rtol=1e-5, atol=1e-6)


def test_a_registered_model_is_benched_through_the_command_line(toy, tmp_path):
    from perfgate.cli import main
    from perfgate_pipeline.stages import load_checkpoint
    from perfgate_pipeline.synth import write_synthetic
    from tests.conftest import validate_run_file

    data = tmp_path / "bars.dbn"
    write_synthetic(data, schema="ohlcv-1m", records=2_000, seed=1, instruments=1)
    out = tmp_path / "toy.json"
    argv = ["bench", "--model", "TOY", "--output", str(out), "--git-commit", "c0ffee", "--data", str(data), "--quick"]
    assert main(argv) == 0
    doc = validate_run_file(out)
    assert doc["model"] == "toy"
    assert {"training_step_time_ms", "throughput_samples_per_sec", "inference_latency_us"} <= set(doc["metrics"])
    assert doc["config"]["model_config"] == {"n_features": N_FEATURES, "seq_len": 8, "batch_size": 8, "lr": 1e-2}
    assert isinstance(load_checkpoint(tmp_path / "toy.model.pt"), ToyNet)


def test_unknown_models_are_named_with_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown model 'gpt'; choose from dqn, ppo, mamba2, tft"):
        models.spec("gpt")
    with pytest.raises(TypeError, match="not a registered model"):
        models.spec_of(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="lower-case letters and digits"):
        models.register("My-Net", "somewhere")
    with pytest.raises(ValueError, match="spec is named 'toy'"):
        models.register("other", TOY)


def _string_literals(path: Path) -> set[str]:
    return {
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_no_model_is_named_outside_its_own_module_and_the_registry():
    """Regression for the model list kept in six places: no code outside the model files and
    the registry spells a built-in model's name as a string (docstrings and help text aside)."""
    names = set(models.MODELS)
    own = {PIPELINE / "models" / f"{n}.py" for n in names} | {PIPELINE / "models" / "__init__.py"}
    found = []
    for path in sorted([*(ROOT / "perfgate").rglob("*.py"), *PIPELINE.rglob("*.py")]):
        if path in own:
            continue
        for literal in _string_literals(path):
            if literal in names or re.fullmatch(r"perfgate_pipeline\.models\.\w+", literal):
                found.append(f"{path.relative_to(ROOT)}: {literal!r}")
    assert found == []


@pytest.mark.parametrize("model", ["dqn", "ppo", "mamba2", "tft"])
def test_counts_gate_only_the_stages_whose_counts_were_measured_to_track_time(model):
    """benchmarks/counts_results.txt: the load's and the features' instructions moved 2.5-3x their
    wall time; the training step's and the fast inference path's within x0.7-1.3."""
    import perfgate_pipeline.stages  # noqa: F401  (registers the suite)
    from perfgate.bench.registry import stages_for

    stages = {s.name: s for s in stages_for("pipeline", model)}
    informational = {name for name, s in stages.items() if s.counts_informational}
    assert informational == {"dbn_load", "features"}
    assert "counts_results.txt" in stages["dbn_load"].counts_informational

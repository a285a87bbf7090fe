"""What the pipeline needs to know about one model (:class:`ModelSpec`): a leaf that each model
module ends with and the registry (:mod:`perfgate_pipeline.models`) reads, so neither imports
the other for it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelSpec"]


def _batch_size(config: Any) -> int:
    return int(config.batch_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """What the pipeline needs to know about one model.

    Attributes:
        name: the model key (lower-case letters and digits), as ``--model`` takes it.
        config: the model's config dataclass; ``config()`` is the benchmark's config, and a
            checkpoint stores ``asdict`` of one.
        model: the ``nn.Module`` class, built as ``model(config)``.
        task: ``task(config, data, device=..., seed=...)``: the training task
            (:class:`perfgate_pipeline.train.Task`) of the model on a
            :class:`~perfgate_pipeline.env.MarketData`.
        server: ``server(model)``: the fast single-sample server of a trained model (a
            :data:`perfgate_pipeline.serve.Server`).
        kind: what one training step is bound by (``compute``, ``interpreter`` or
            ``memory``; see :mod:`perfgate.bench.registry`), or ``None`` for raw times.
        items_per_call: samples one training step processes, from the config (the
            throughput's unit); the config's ``batch_size`` unless given.
        uncounted: why ``--measure counts`` leaves the training step out by default
            (:attr:`perfgate.bench.registry.Stage.uncounted`); ``None``: counted.
        prepares: the task makes something expensive and deterministic before its first
            update (PPO: the first rollout) that ``--measure counts`` makes once natively and
            every counted process loads (:meth:`perfgate.bench.registry.StageContext.prepare`);
            the task then has ``prepare()`` (make it now), ``save_prepared(path)`` and
            ``load_prepared(path)``.
        counted_warmup, counted_calls: the training step's warm-up and counted calls under
            ``--measure counts`` (:attr:`perfgate.bench.registry.Stage.counted_warmup`,
            :attr:`~perfgate.bench.registry.Stage.counted_calls`), for a step that takes a
            minute under valgrind; ``None``: the defaults.
    """

    name: str
    config: type
    model: type
    task: Callable[..., Any]
    server: Callable[[Any], Any]
    kind: str | None = None
    items_per_call: Callable[[Any], int] = _batch_size
    uncounted: str | None = None
    prepares: bool = False
    counted_warmup: int | None = None
    counted_calls: int | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]+", self.name):
            raise ValueError(f"model name must be lower-case letters and digits, got {self.name!r}")

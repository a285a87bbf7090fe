"""The demo's code change: feature extraction that does 30 % more work of its own kind.

``make demo`` benchmarks the DQN pipeline three times: a baseline, the same code again, and
the pipeline with this module given as ``--stages-module``. It wraps the registered feature
stage so that every call, after computing the indicators, does numpy work of the same kind
(small matrix products) sized at set-up to 30 % of the call's own median time: real work, not a
sleep, in every call, so the stage's median moves by about 30 % and no other stage moves. The
check of that run is expected to name ``feature_extraction_time_ms`` and exit 1.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

import numpy as np

import perfgate_pipeline.stages  # noqa: F401  (registers the pipeline's stages)
from perfgate.bench import registry

SHARE = float(os.environ.get("PERFGATE_DEMO_EXTRA", "0.3"))
_A = np.random.default_rng(0).standard_normal((48, 48)) * 0.1


def _work(iterations: int) -> np.ndarray:
    x = _A
    for _ in range(iterations):
        x = np.tanh(x @ _A)
    return x


def _median_seconds(fn: Callable[[], object], k: int) -> float:
    times = []
    for _ in range(k):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[k // 2]


def _slower(stage: registry.Stage) -> registry.Stage:
    def setup(ctx: registry.StageContext) -> Callable[[], object]:
        call = stage.setup(ctx)
        for _ in range(3):
            call()
        nominal = _median_seconds(call, 15)
        per_iteration = _median_seconds(lambda: _work(20), 15) / 20
        iterations = max(1, round(SHARE * nominal / per_iteration))

        def once() -> object:
            out = call()
            _work(iterations)
            return out

        return once

    return dataclasses.replace(stage, setup=setup)


for (_suite, _name), _stage in list(registry._REGISTRY.items()):
    if _name == "features":
        registry.register(_slower(_stage))

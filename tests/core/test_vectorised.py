"""The vectorised statistics of a check (:class:`perfgate.core.decision._samplestats.BatchStats`) equal the
reference path that computes them one metric at a time (``compare_runs(..., vectorised=False)``).

Seeded random runs of many shapes: sample counts from 1 to 301 (threshold-only, too few for a
tail, enough for p99), worker-process groups, reference kernels, a baseline pooled from runs,
zeros, a calibrated machine, tail statistics, both directions, derived throughputs.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from perfgate.core.compare import Comparison, compare_runs
from perfgate.core.decision._samplestats import BatchStats, ReferenceStats
from perfgate.core.metrics import Direction, MetricInfo
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Reference, Run
from perfgate.core.stats import QUANTILES

_SIZES = (1, 2, 3, 5, 8, 30, 61, 100, 301)


def _metric(rng: np.random.Generator, name: str, n: int, *, shift: float, kind: int) -> Metric:
    direction = Direction.HIGHER if kind % 5 == 4 else Direction.LOWER
    samples = rng.lognormal(math.log(1.0 + kind % 9), 0.02 + 0.3 * rng.random(), n) * (1.0 + shift)
    if kind % 11 == 3:
        samples = np.round(samples, 1)  # ties
    if kind % 17 == 5:
        samples[: max(n // 2, 1)] = 0.0  # a vanished time: zeros
    groups = None
    if kind % 3 == 1 and n >= 6:
        cut = sorted(rng.choice(np.arange(1, n), size=2, replace=False))
        groups = (int(cut[0]), int(cut[1] - cut[0]), int(n - cut[1]))
    reference = None
    if kind % 4 == 2:
        reference = Reference(kernel="compute", seconds=tuple(float(s) for s in rng.lognormal(-6.0, 0.1, n)))
    return Metric(
        name=name,
        unit="ms" if kind % 7 else "MB",
        direction=direction,
        samples=tuple(float(s) for s in samples),
        groups=groups,
        reference=reference,
    )


def _pair(seed: int, metrics: int, *, pooled: bool = False) -> tuple[Run, Run, dict[str, MetricInfo]]:
    rng = np.random.default_rng(seed)
    base: dict[str, Metric] = {}
    cur: dict[str, Metric] = {}
    info: dict[str, MetricInfo] = {}
    for i in range(metrics):
        name = f"m{i:04d}"
        n_base, n_cur = int(rng.choice(_SIZES)), int(rng.choice(_SIZES))
        shift = float(rng.choice([0.0, 0.0, 0.03, 0.15, 0.5, -0.3]))
        base[name] = _metric(rng, name, n_base, shift=0.0, kind=i)
        cur[name] = _metric(rng, name, n_cur, shift=shift, kind=i)
        if i % 6 == 0:
            info[name] = MetricInfo(
                unit=cur[name].unit, direction=cur[name].direction, label=name, statistics=("p50", "p95", "p99")
            )
    # a training step and its throughput, the batch over each call's time: a derived metric
    step = rng.lognormal(math.log(100.0), 0.05, 80)
    for runs, factor in ((base, 1.0), (cur, 1.12)):
        times = tuple(float(t) * factor for t in step)
        runs["training_step_time_ms"] = Metric(
            name="training_step_time_ms", unit="ms", direction=Direction.LOWER, samples=times
        )
        runs["throughput_samples_per_sec"] = Metric(
            name="throughput_samples_per_sec",
            unit="samples/s",
            direction=Direction.HIGHER,
            samples=tuple(128_000.0 / t for t in times),
        )
    config = {"pooled_run_ids": [f"r{i}" for i in range(4)]} if pooled else {}
    if pooled:  # a pooled baseline: each metric's groups are runs
        base = {
            k: dataclasses.replace(m, groups=_four(len(m.samples)), reference=None) if len(m.samples) >= 4 else m
            for k, m in base.items()
        }
    return Run(model="dqn", metrics=base, config=config), Run(model="dqn", metrics=cur), info


def _four(n: int) -> tuple[int, ...]:
    q = n // 4
    return (q, q, q, n - 3 * q)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _same(fast: Comparison, ref: Comparison) -> None:
    where = f"{ref.label}"
    assert fast.verdict is ref.verdict, where
    for field in ("baseline_value", "current_value", "change", "worse", "p_value", "p_adjusted", "raw_change"):
        assert _close(getattr(fast, field), getattr(ref, field)), (
            where,
            field,
            getattr(fast, field),
            getattr(ref, field),
        )
    if ref.ci is None:
        assert fast.ci is None, where
    else:
        assert fast.ci is not None and all(_close(x, y) for x, y in zip(fast.ci, ref.ci, strict=True)), where
    for side in ("baseline", "current"):
        a, b = getattr(fast, side), getattr(ref, side)
        assert (a is None) == (b is None), where
        if a is not None:
            for f in dataclasses.fields(a):
                assert _close(getattr(a, f.name), getattr(b, f.name)), (where, side, f.name)
    for field in ("required_unit", "reason", "noise", "noise_assumed", "reference", "derived_from", "threshold_only"):
        assert getattr(fast, field) == getattr(ref, field), (where, field)
    if ref.required_n is None or fast.required_n is None:
        assert fast.required_n == ref.required_n, where
    else:  # a ceiling of figures equal to rounding may land one apart
        assert abs(fast.required_n - ref.required_n) <= max(1, ref.required_n // 10**9), where


@pytest.mark.parametrize(
    ("seed", "pooled", "calibrated"),
    [(0, False, False), (1, False, True), (2, True, False), (3, False, False), (4, True, True)],
)
def test_vectorised_check_equals_the_reference_path(seed: int, pooled: bool, calibrated: bool) -> None:
    base, cur, info = _pair(seed, 120, pooled=pooled)
    noise = {name: 0.04 for name in list(cur.metrics)[::3]} if calibrated else {}
    policy = Policy(metric_info=info, noise=noise)
    fast = compare_runs(base, cur, policy)
    ref = compare_runs(base, cur, policy, vectorised=False)
    assert [c.label for c in fast.comparisons] == [c.label for c in ref.comparisons]
    for a, b in zip(fast.comparisons, ref.comparisons, strict=True):
        _same(a, b)
    verdicts = {c.verdict for c in ref.comparisons}
    assert len(verdicts) >= 4  # the data reach several rules, not one
    assert any(c.derived_from for c in ref.comparisons)


def test_batch_statistics_equal_the_per_metric_functions() -> None:
    rng = np.random.default_rng(7)
    metrics = [
        Metric(name=f"x{i}", unit="ms", direction=Direction.LOWER, samples=tuple(rng.gamma(2.0, 3.0, n)))
        for i, n in enumerate([1, 2, 2, 3, 10, 10, 10, 59, 60, 299, 300, 1000])
    ]
    batch, ref = BatchStats(metrics, 0.95), ReferenceStats(0.95)
    for m in metrics:
        assert batch.summary(m) == pytest.approx(ref.summary(m)) or _summaries_close(batch, ref, m)
        for stat, q in QUANTILES.items():
            assert _close(batch.value(m, stat), ref.value(m, stat))
            assert batch.ci(m, stat) == ref.ci(m, stat)  # the same order statistics, exactly
            assert np.allclose(batch.group_logs(m, q), ref.group_logs(m, q), rtol=1e-12)
    outsider = Metric(name="y", unit="ms", direction=Direction.LOWER, samples=(1.0, 2.0, 4.0))
    assert batch.summary(outsider) == ref.summary(outsider)  # a metric it was not built with


def _summaries_close(batch: BatchStats, ref: ReferenceStats, m: Metric) -> bool:
    a, b = batch.summary(m), ref.summary(m)
    return all(_close(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))

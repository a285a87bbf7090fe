"""Big check results, built directly (the statistics of 5,000 metrics take far longer than rendering them)."""

from __future__ import annotations

import os

from perfgate.core.compare import CheckResult, Comparison, Verdict
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.schema import GitInfo, Metric, Run
from perfgate.core.stats import Summary

_CYCLE = [Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.INCONCLUSIVE, Verdict.NEW, Verdict.MISSING]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _summary(value: float) -> Summary:
    return Summary(
        n=30, mean=value, median=value, stdev=0.01, mad=0.01, min=value, max=value, p50=value, p95=value, p99=value
    )


def big_result(n: int, *, name_length: int = 0, model: str = "dqn") -> CheckResult:
    """A check of ``n`` metrics with every verdict; names padded to ``name_length`` characters."""
    names = [f"metric_{i:05d}_time_ms".ljust(name_length, "x") for i in range(n)]
    comparisons = []
    for i, name in enumerate(names):
        verdict = _CYCLE[i % len(_CYCLE)]
        base, cur = 10.0 + i % 97, (10.0 + i % 97) * (1.0 + (i % 13) / 20)
        change = cur / base - 1
        comparisons.append(
            Comparison(
                metric=name,
                statistic="median",
                unit="ms",
                direction=Direction.LOWER,
                baseline=None if verdict is Verdict.NEW else _summary(base),
                current=None if verdict is Verdict.MISSING else _summary(cur),
                baseline_value=base,
                current_value=cur,
                change=change,
                worse=change,
                ci=(change / 2, change * 2),
                p_value=0.0001,
                p_adjusted=0.0004,
                threshold=0.1,
                verdict=verdict,
                reason="too few samples" if verdict is Verdict.INCONCLUSIVE else "",
                required_n=120 if verdict is Verdict.INCONCLUSIVE else None,
            )
        )
    metrics = {n_: Metric(name=n_, unit="ms", direction=Direction.LOWER, samples=(1.0,)) for n_ in names}
    current = Run(model=model, metrics=metrics, git=GitInfo(commit="def456"), created_at="2026-11-29T18:00:00Z")
    baseline = Run(model=model, metrics=metrics, git=GitInfo(commit="abc123"), created_at="2026-11-28T18:00:00Z")
    return CheckResult(
        current=current,
        baseline=baseline,
        comparisons=tuple(comparisons),
        budgets=(),
        policy=Policy(),
        baseline_source="store `sqlite:///.perfgate/perfgate.db`",
    )

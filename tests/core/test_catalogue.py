"""One metric catalogue (:class:`perfgate.core.metrics.MetricCatalogue`), one "worse" sense
(:meth:`perfgate.core.metrics.Direction.worse`), and the rule alone (:func:`perfgate.core.decision.decide`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfgate.core.codec import run_from_dict
from perfgate.core.decision import Grounds, check_budgets, decide, estimate_unpaired
from perfgate.core.metrics import Direction, MetricCatalogue, MetricInfo
from perfgate.core.policy import Budget, Policy
from perfgate.core.result import Verdict
from perfgate.core.schema import Metric, Run

LATENCY = MetricInfo(unit="us", direction=Direction.LOWER, label="latency", statistics=("median", "p99"))


@pytest.mark.parametrize("change", [0.25, -0.5, 0.0, math.inf])
def test_worse_is_its_own_inverse_and_flips_only_a_higher_is_better_change(change: float) -> None:
    assert Direction.LOWER.worse(change) == change
    assert Direction.HIGHER.worse(change) == -change
    for direction in Direction:
        assert direction.worse(direction.worse(change)) == change
        assert direction.sign * change == direction.worse(change)
    logs = np.array([0.1, -0.2])
    assert list(Direction.HIGHER.sign * logs) == [-0.1, 0.2]


def test_the_catalogue_puts_the_configuration_over_the_suites_and_a_run_over_both() -> None:
    policy = Policy(metric_info={"x_latency": LATENCY})
    assert policy.catalogue.get("x_latency") == LATENCY
    assert policy.catalogue.get("not_declared") is None
    assert "x_latency" in policy.catalogue and "not_declared" not in policy.catalogue
    own = policy.catalogue.of(Metric(name="x_latency", unit="ms", direction=Direction.LOWER, samples=(1.0,)))
    assert (own.unit, own.label, own.statistics) == ("ms", "latency", ("median", "p99"))
    plain = policy.catalogue.of(Metric(name="other", unit="MB", direction=Direction.LOWER, samples=(1.0,)))
    assert (plain.label, plain.statistics) == ("other", ("median",))
    with pytest.raises(AttributeError):
        policy.catalogue._defined = {}  # type: ignore[misc]
    assert MetricCatalogue.over(policy.catalogue) is policy.catalogue


def test_the_codec_and_the_budgets_read_the_same_catalogue() -> None:
    policy = Policy(metric_info={"x_latency": LATENCY})
    run = run_from_dict(
        {"model_type": "m", "timestamp": "2024-01-01T00:00:00Z", "x_latency": 5.0}, metric_info=policy.catalogue
    )
    assert run.metrics["x_latency"].unit == "us"
    budget = Budget(model="m", metric="x_latency", statistic="p99", limit=10.0)
    (check,) = check_budgets(
        Run(model="m", metrics={"y": Metric(name="y", unit="s", direction=Direction.LOWER, samples=(1.0,))}),
        (budget,),
        policy.catalogue,
    )
    assert (check.unit, check.direction, check.measured) == ("us", Direction.LOWER, False)


def test_decide_gives_the_verdict_and_its_grounds_only() -> None:
    base = Metric(name="t", unit="ms", direction=Direction.LOWER, samples=(10.0,))
    cur = Metric(name="t", unit="ms", direction=Direction.LOWER, samples=(12.0,))
    policy = Policy()
    estimate = estimate_unpaired(base, cur, "median", policy)
    ruling = decide(estimate, policy, 1, p_adjusted=None, ci=None, z_ci=math.nan)
    assert (ruling.verdict, ruling.grounds, ruling.margin) == (Verdict.REGRESSED, Grounds.THRESHOLD_ONLY, None)

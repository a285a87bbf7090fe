"""A gated metric the current run lacks fails the check (exit 1) or makes it refuse (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfgate.config import parse_config
from perfgate.core.compare import budgets_only, compare_runs
from perfgate.core.metrics import Direction
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Metric, Run
from perfgate.errors import ConfigError
from perfgate.report.json import render_json
from perfgate.report.markdown import render_markdown


def _run(names: dict[str, Direction], seed: int = 0) -> Run:
    rng = np.random.default_rng(seed)
    return Run(
        model="dqn",
        metrics={
            name: Metric(
                name=name,
                unit="%" if d is Direction.INFO else "us",
                direction=d,
                samples=tuple(rng.lognormal(3.0, 0.05, 20)),
            )
            for name, d in names.items()
        },
    )


BASE = {
    "inference_latency_us": Direction.LOWER,
    "dbn_load_time_ms": Direction.LOWER,
    "gpu_utilization_pct": Direction.INFO,
}


def test_a_budgeted_metric_that_goes_missing_fails() -> None:
    """Regression: removing a stage turned its p99 budget green."""
    budget = Budget(model="dqn", metric="inference_latency_us", statistic="p99", limit=1e9)
    policy = Policy.quiet(budgets=(budget,))
    cur = _run({"dbn_load_time_ms": Direction.LOWER}, seed=1)
    result = budgets_only(cur, policy)
    assert result.missing == ("inference_latency_us",)
    assert result.failed and result.exit_code == 1
    assert result.broken_budgets == []  # nothing measured broke the limit
    (check,) = result.budgets
    assert not check.ok and not check.measured
    refused = budgets_only(cur, Policy.quiet(budgets=(budget,), missing_metric="refuse"))
    assert refused.refused and refused.exit_code == 2


def test_a_baseline_metric_missing_now_fails_and_an_informational_one_does_not() -> None:
    base = _run(BASE)
    cur = _run({"dbn_load_time_ms": Direction.LOWER, "gpu_utilization_pct": Direction.INFO}, seed=1)
    result = compare_runs(base, cur, Policy.quiet())
    assert result.missing == ("inference_latency_us",)
    assert result.exit_code == 1 and not result.regressions
    assert compare_runs(base, cur, Policy.quiet(missing_metric="refuse")).exit_code == 2
    no_gpu = _run({"dbn_load_time_ms": Direction.LOWER, "inference_latency_us": Direction.LOWER}, seed=1)
    assert compare_runs(base, no_gpu, Policy.quiet()).missing == ()
    assert compare_runs(base, no_gpu, Policy.quiet()).exit_code == 0


def test_reports_say_so_at_the_top() -> None:
    base = _run(BASE)
    cur = _run({"dbn_load_time_ms": Direction.LOWER, "gpu_utilization_pct": Direction.INFO}, seed=1)
    result = compare_runs(base, cur, Policy.quiet(missing_metric="refuse"))
    text = render_markdown(result)
    head = text.split("\n## ")[0]  # before the verdict heading
    assert "not measured in this run" in head and "inference_latency_us" in head
    assert "exit 2" in head
    doc = json.loads(render_json(result))
    assert doc["missing"] == ["inference_latency_us"]
    assert doc["exit_code"] == 2
    assert doc["policy"]["missing_metric"] == "refuse"


def test_missing_metric_setting() -> None:
    assert parse_config({"missing_metric": "refuse"}, source="t.toml").policy.missing_metric == "refuse"
    assert parse_config({}, source="t.toml").policy.missing_metric == "fail"
    with pytest.raises(ConfigError) as err:
        parse_config({"missing_metric": "ignore"}, source="t.toml")
    assert "missing_metric" in str(err.value)
    with pytest.raises(ValueError, match="missing_metric"):
        Policy(missing_metric="skip")


def test_hostile_missing_names_stay_inert_in_the_top_block() -> None:
    from tests.safety.hostile import HOSTILE, benign_names
    from tests.safety.hostile import rendered as _render

    def report(names: list[str]) -> str:
        lower = dict.fromkeys(names, Direction.LOWER)
        base = _run({**lower, "kept_ms": Direction.LOWER})
        cur = _run({"kept_ms": Direction.LOWER}, seed=1)
        return render_markdown(compare_runs(base, cur, Policy.quiet()))

    hostile, benign = _render(report(HOSTILE)), _render(report(benign_names(len(HOSTILE))))
    assert hostile.tags == benign.tags
    assert hostile.comments == [] and hostile.hrefs == []

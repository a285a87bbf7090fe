"""Holm's family of a check (perfgate.core.decision._family): one rule for the stored and the paired decision.

A derived metric (a rate of a stage's own calls) counts once: beside a tested source it takes
that source's test and stays out of the family; with no test of its source it is tested in its
place and counts. Both paths are held to the same family for the same situation.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.decision import family_members, holm_family
from perfgate.core.decision._estimate import Estimate
from perfgate.core.decision._significance import holm
from perfgate.core.metrics import Direction
from perfgate.core.paired import decide_look
from perfgate.core.policy import Policy
from perfgate.core.result import Verdict
from perfgate.core.schema import Metric, Run

BATCH = 64.0


def _estimate(name: str, p_value: float | None, *, derived_from: str = "", statistic: str = "median") -> Estimate:
    m = Metric(name=name, unit="ms", direction=Direction.LOWER, samples=(1.0, 2.0))
    return Estimate(
        base=m,
        cur=m,
        statistic=statistic,
        threshold=0.1,
        base_value=1.0,
        cur_value=1.2,
        log_worse=0.18,
        se=0.05,
        p_value=p_value,
        derived_from=derived_from,
    )


def test_a_derived_estimate_beside_its_tested_source_takes_its_test_and_counts_once():
    given = (_estimate("step", 0.004), _estimate("rate", 0.3, derived_from="step"), _estimate("load", 0.02))
    family = holm_family(given, alpha=0.05, confidence=0.95, common=False)
    assert family_members(given) == (0, 2)
    assert family.size == 2 and family.shift is None and family.metric_alpha == 0.05
    step, rate, _load = family.estimates
    assert family.adjusted == (0.008, 0.008, 0.02)  # Holm over two: 2 × 0.004, then 0.02; the rate takes the step's
    assert rate.p_value == step.p_value
    assert rate.noise == "derived from step: tested with it, counted once"
    assert given[1].p_value == 0.3 and given[1].noise == ""  # a new estimate; the given ones are as they were
    with pytest.raises(dataclasses.FrozenInstanceError):
        given[0].p_value = 0.5  # type: ignore[misc]


def test_a_derived_estimate_whose_source_has_no_test_counts_in_its_place():
    untested = dataclasses.replace(_estimate("step", None), fixed=Verdict.INCONCLUSIVE, reason="too few samples")
    given = (untested, _estimate("rate", 0.004, derived_from="step"), _estimate("load", 0.02))
    family = holm_family(given, alpha=0.05, confidence=0.95, common=False)
    assert family_members(given) == (1, 2) and family.size == 2
    step, rate, _load = family.estimates
    assert family.adjusted == (None, 0.008, 0.02) and step.fixed is Verdict.INCONCLUSIVE
    assert rate.p_value == 0.004
    assert rate.noise == ""  # tested on its own


def test_a_derived_statistic_falls_back_to_its_sources_median():
    given = (_estimate("step", 0.01), _estimate("rate", 0.2, derived_from="step", statistic="p99"))
    family = holm_family(given, alpha=0.05, confidence=0.95, common=False)
    assert family.size == 1 and family.adjusted == (0.01, 0.01)


# --- both paths, one situation -------------------------------------------------------------


def _runs(with_source: bool) -> tuple[Run, Run, dict[str, str]]:
    """A stage's times, the rate of the same calls (derived from them) and another stage's times;
    the current run is slower on both stages. Without the source, the baseline lacks the stage's
    times (a metric new in the current run has no test)."""
    rng = np.random.default_rng(11)

    def run(step: np.ndarray, load: np.ndarray, source: bool) -> Run:
        metrics = {
            "step_ms": Metric(name="step_ms", unit="ms", direction=Direction.LOWER, samples=tuple(step)),
            "rate_per_s": Metric(
                name="rate_per_s",
                unit="1/s",
                direction=Direction.HIGHER,
                samples=tuple(BATCH * 1000.0 / t for t in step),
            ),
            "load_ms": Metric(name="load_ms", unit="ms", direction=Direction.LOWER, samples=tuple(load)),
        }
        if not source:
            del metrics["step_ms"]
        return Run(model="m", metrics=metrics)

    step = [rng.lognormal(np.log(20.0), 0.03, 40) for _ in range(2)]
    load = [rng.lognormal(np.log(50.0), 0.03, 40) for _ in range(2)]
    base = run(step[0], load[0], with_source)
    cur = run(step[1] * 1.3, load[1] * 1.25, True)
    return base, cur, {"rate_per_s": "step_ms"}


def _paired(base: Run, cur: Run, derived: dict[str, str]) -> CheckResult:
    rng = np.random.default_rng(12)
    ratios = {
        ("step_ms", "median"): list(np.log(1.3) + rng.normal(0.0, 0.01, 6)),
        ("load_ms", "median"): list(np.log(1.25) + rng.normal(0.0, 0.01, 6)),
    }
    ratios[("rate_per_s", "median")] = [-x for x in ratios[("step_ms", "median")]]
    return decide_look(base, cur, ratios, Policy.quiet(), alpha=0.05, derived=derived)


def _counted(result: CheckResult) -> set[tuple[str, str]]:
    """The comparisons that count in Holm's family, after checking their adjusted p-values are
    Holm's over exactly them."""
    counted = [c for c in result.comparisons if c.p_adjusted is not None and not c.noise.startswith("derived from")]
    assert [c.p_adjusted for c in counted] == holm([c.p_value for c in counted if c.p_value is not None])
    return {(c.metric, c.statistic) for c in counted}


@pytest.mark.parametrize("with_source", [True, False], ids=["source tested", "source without a test"])
def test_the_stored_and_the_paired_check_count_a_derived_metric_alike(with_source):
    base, cur, derived = _runs(with_source)
    stored = compare_runs(base, cur, Policy.quiet())
    paired = _paired(base, cur, derived)
    by = {c.metric: c for c in stored.comparisons}
    assert by["rate_per_s"].derived_from == "step_ms"  # the stored check found the relation itself
    expected = {("load_ms", "median"), ("step_ms" if with_source else "rate_per_s", "median")}
    assert _counted(stored) == _counted(paired) == expected
    for result in (stored, paired):
        cs = {c.metric: c for c in result.comparisons}
        rate = cs["rate_per_s"]
        assert rate.derived_from == "step_ms" and rate.verdict is Verdict.REGRESSED
        if with_source:
            assert (rate.p_value, rate.p_adjusted) == (cs["step_ms"].p_value, cs["step_ms"].p_adjusted)
        else:
            assert cs["step_ms"].verdict is Verdict.NEW and cs["step_ms"].p_adjusted is None
            assert "derived from" not in rate.noise  # tested on its own, in the family

"""The run's common shift (``perfgate.core.decision._common_shift``): a stored comparison whose timing
metrics all moved together is tested as one shift before each metric is, with α split.

Hand cases (600 doubled metrics, with and without reference kernels, with a calibration),
seeded A/A simulations of metrics sharing a phase, and the rule reducing to Holm's when no
metric carries a phase term.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from perfgate.core.compare import compare_runs
from perfgate.core.decision._common_shift import ALPHA_SHARE, MIN_METRICS
from perfgate.core.metrics import Direction
from perfgate.core.noise import ASSUMED_RAW
from perfgate.core.policy import Policy
from perfgate.core.result import Verdict
from perfgate.core.schema import Metric, Reference, Run
from perfgate.errors import EXIT_ERROR, EXIT_OK, EXIT_REGRESSION


def _runs(
    k: int, factor: float, *, seed: int = 0, n: int = 20, kernel_factor: float | None = None, phase: float = 0.0
) -> tuple[Run, Run]:
    """Two runs of ``k`` timing metrics; every current value ``factor`` times the baseline's,
    times a shared phase draw ``exp(N(0, phase))`` (one per run)."""
    rng = np.random.default_rng(seed)
    base_phase, cur_phase = np.exp(rng.normal(0, phase, 2)) if phase else (1.0, 1.0)
    base: dict[str, Metric] = {}
    cur: dict[str, Metric] = {}
    for i in range(k):
        name = f"m{i}_time_us"
        level = 100.0 * (1 + i % 7)
        b = level * base_phase * rng.lognormal(0, 0.01, n)
        c = level * cur_phase * factor * rng.lognormal(0, 0.01, n)
        mb = Metric(name=name, unit="us", direction=Direction.LOWER, samples=tuple(b))
        mc = Metric(name=name, unit="us", direction=Direction.LOWER, samples=tuple(c))
        if kernel_factor is not None:
            mb = dataclasses.replace(mb, reference=Reference(kernel="compute", seconds=(1e-3,) * n))
            mc = dataclasses.replace(mc, reference=Reference(kernel="compute", seconds=(1e-3 * kernel_factor,) * n))
        base[name], cur[name] = mb, mc
    return Run(model="big", metrics=base), Run(model="big", metrics=cur)


def test_600_doubled_metrics_without_kernels_are_not_passed_silently():
    """Regression for 600 metrics that all doubled exiting 0 as "600 inconclusive" (adjusted p
    0.243 after Holm over 600, each interval [+32.8 %, +195.4 %])."""
    base, cur = _runs(600, 2.0)
    result = compare_runs(base, cur, Policy())
    shift = result.common_shift
    assert shift is not None and shift.metrics == 600
    assert shift.worse == pytest.approx(1.0, rel=0.01)
    assert shift.ambiguous and not shift.regressed
    assert result.exit_code == EXIT_ERROR
    assert "2.00× slower" in shift.sentence() and "the code or the machine" in shift.sentence()
    assert not result.regressions  # no metric is claimed regressed on its own


def test_600_doubled_metrics_with_kernels_that_did_not_move_regress():
    base, cur = _runs(600, 2.0, kernel_factor=1.0)
    result = compare_runs(base, cur, Policy())
    assert result.common_shift is not None and result.common_shift.regressed
    assert result.common_shift.decided_by == "the reference kernels"
    assert result.exit_code == EXIT_REGRESSION


def test_kernels_that_doubled_too_say_it_was_the_machine():
    base, cur = _runs(600, 2.0, kernel_factor=2.0)
    result = compare_runs(base, cur, Policy())
    assert result.common_shift is not None and not result.common_shift.significant
    assert result.exit_code == EXIT_OK


def test_a_measured_noise_decides_the_shift():
    """A run-to-run SD of 3 % learned on this machine: a doubling of the whole run is beyond what
    its t tail (``perfgate.core.decision._tail``) leaves to chance. With 5 % it would not be (p 0.0035
    against the step's 0.0025): raw runs of this machine jump by 20 robust SDs now and then."""
    base, cur = _runs(600, 2.0)
    calibrated = {f"m{i}_time_us": 0.03 for i in range(600)}
    result = compare_runs(base, cur, Policy(noise=calibrated))
    assert result.common_shift is not None and result.common_shift.regressed
    assert result.exit_code == EXIT_REGRESSION


def test_a_single_tripled_metric_is_still_flagged():
    """(Doubled, a raw time with the assumed noise is inconclusive: a neighbour's job does that
    to a whole run now and then, and the run-to-run term has a t tail, ``perfgate.core.decision._tail``.)"""
    base, cur = _runs(1, 3.0)
    result = compare_runs(base, cur, Policy())
    assert result.common_shift is None  # fewer than MIN_METRICS: no common step
    assert [c.verdict for c in result.comparisons] == [Verdict.REGRESSED]


def test_no_phase_term_reduces_to_holm():
    """With a quiet policy no metric carries a shared term: no common step, the whole α for Holm."""
    base, cur = _runs(20, 1.0, seed=3)
    quiet = compare_runs(base, cur, Policy.quiet())
    assert quiet.common_shift is None
    # and a metric that regressed on its own is flagged at the whole α, as by Holm alone
    base, cur = _runs(MIN_METRICS + 2, 1.0, seed=4)
    slower = cur.metrics["m0_time_us"]
    slower = dataclasses.replace(slower, samples=tuple(v * 1.2 for v in slower.samples))
    cur = dataclasses.replace(cur, metrics={**cur.metrics, "m0_time_us": slower})
    result = compare_runs(base, cur, Policy.quiet())
    assert result.common_shift is None
    assert result.regressions and result.regressions[0].metric == "m0_time_us"


def test_the_split_of_alpha_is_stated_and_spent():
    base, cur = _runs(10, 1.0, seed=5)
    policy = Policy()
    result = compare_runs(base, cur, policy)
    assert result.common_shift is not None
    assert result.common_shift.alpha == pytest.approx(policy.alpha * ALPHA_SHARE)


@pytest.mark.parametrize("phase", [0.0, 0.12])
def test_aa_with_a_shared_phase_stays_within_alpha(phase):
    """Seeded A/A: 600 metrics, a shared phase drawn per run from the assumed model's size;
    any verdict other than unchanged or inconclusive, or exit 1, counts. A whole run that moved
    past the threshold exits 2 (could not decide), never 1, and only then."""
    trials = 200
    policy = Policy()
    wrong = 0
    for seed in range(trials):
        base, cur = _runs(600, 1.0, seed=seed, n=10, phase=phase)
        result = compare_runs(base, cur, policy)
        claims = [c for c in result.comparisons if c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)]
        wrong += bool(claims) or result.exit_code == EXIT_REGRESSION
        shift = result.common_shift
        assert shift is not None
        assert (result.exit_code == EXIT_ERROR) == shift.slower_past, (seed, shift.worse)
    tolerance = 3 * math.sqrt(policy.alpha * (1 - policy.alpha) / trials)
    assert wrong / trials <= policy.alpha + tolerance, wrong


def test_the_report_says_why_in_one_line():
    from perfgate.report.comment import render_comment
    from perfgate.report.json import result_to_dict
    from perfgate.report.markdown import render_markdown

    base, cur = _runs(50, 2.0)
    result = compare_runs(base, cur, Policy())
    markdown = render_markdown(result)
    lines = [line for line in markdown.splitlines() if "the whole run is 2.00× slower" in line]
    assert len(lines) == 1 and "Could not decide" in lines[0]
    assert "Could Not Decide" in markdown
    assert "the whole run is 2.00× slower" in render_comment(result)
    data = result_to_dict(result)
    assert data["common_shift"]["verdict"] == "ambiguous" and data["exit_code"] == EXIT_ERROR


def test_a_whole_run_faster_by_the_machine_claims_no_improvement():
    """Everything 2× faster, as this machine's phase alone has done on unchanged code: without
    kernels or a measured noise, no metric is called improved (five metrics: each one's own
    test would reach α)."""
    base, cur = _runs(5, 0.5)
    result = compare_runs(base, cur, Policy())
    assert result.common_shift is not None and result.common_shift.faster
    assert not result.with_verdict(Verdict.IMPROVED)
    assert "faster" in result.common_shift.sentence()
    with_kernels = compare_runs(*_runs(5, 0.5, kernel_factor=1.0), Policy())
    assert with_kernels.with_verdict(Verdict.IMPROVED)  # the kernels say it was the code


def test_metrics_of_an_ambiguous_shift_are_not_called_regressed_on_their_own():
    rng = np.random.default_rng(2)
    base, cur = _runs(40, 1.6)
    # one metric's own offset makes it stand out: still part of a shift nothing can explain
    name = "m0_time_us"
    louder = dataclasses.replace(cur.metrics[name], samples=tuple(v * 1.5 for v in cur.metrics[name].samples))
    cur = dataclasses.replace(cur, metrics={**cur.metrics, name: louder})
    # a normal tail, so that the metric's own test reaches α (with the raw t tail it would need
    # some 1000× among 40 metrics, and the shift would have nothing to withhold)
    normal = Policy(assumed_raw=dataclasses.replace(ASSUMED_RAW, tail_df=None))
    result = compare_runs(base, cur, normal)
    assert rng is not None and result.common_shift is not None and result.common_shift.ambiguous
    assert not result.regressions
    (c,) = [c for c in result.comparisons if c.metric == name]
    # one process a side: a benchmark standing out alone may be that process's offset, said once
    assert c.verdict is Verdict.INCONCLUSIVE
    assert result.shared_phase is not None and result.shared_phase.single_process
    assert result.exit_code == EXIT_ERROR


def test_bar_level_cases_stay_caught():
    """+20 % on 60 samples with the noise configured quiet, and +30 % on two of eight stages in
    4 + 4 processes with the assumed noise and the machine-speed index: the common step takes
    none of their power."""
    base, cur = _runs(1, 1.2, n=60)
    assert [c.verdict for c in compare_runs(base, cur, Policy.quiet()).comparisons] == [Verdict.REGRESSED]
    base, cur = _runs(8, 1.0, n=40, kernel_factor=1.0)
    base, cur = (
        dataclasses.replace(
            r, metrics={k: dataclasses.replace(m, groups=(10, 10, 10, 10)) for k, m in r.metrics.items()}
        )
        for r in (base, cur)
    )  # 4 worker processes a side
    slowed = {
        name: dataclasses.replace(m, samples=tuple(v * 1.3 for v in m.samples))
        for name, m in cur.metrics.items()
        if name in ("m0_time_us", "m1_time_us")
    }
    result = compare_runs(base, dataclasses.replace(cur, metrics={**cur.metrics, **slowed}), Policy())
    assert result.common_shift is not None and not result.common_shift.significant
    assert sorted(c.metric for c in result.regressions) == ["m0_time_us", "m1_time_us"]

"""What a check found: per-metric comparisons, budgets, gated metrics that went missing.

The report and the exit code are derived from a :class:`CheckResult`; the decision that
fills it is :mod:`perfgate.core.decision`, which imports these types (this module imports nothing of it).
The run's common shift (:class:`CommonShift`) and the run as its own control (:class:`SharedPhase`,
one :class:`Control` per clock) are results of a stored check too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from perfgate.core.metrics import Direction, describe
from perfgate.core.policy import Budget, Policy
from perfgate.core.profiles import StageExplanation
from perfgate.core.schema import Run
from perfgate.core.stats import Summary
from perfgate.errors import EXIT_ERROR, EXIT_OK, EXIT_REGRESSION

__all__ = ["ALONE", "BudgetCheck", "CheckResult", "CommonShift", "Comparison", "Control", "SharedPhase", "Verdict"]

# the reason of a metric without residual noise of its own (one process a side, no history), which
# makes no claim alone (perfgate.core.decision._shared_phase)
ALONE = "one process a side and no history: not judged alone"


class Verdict(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    INFORMATIONAL = "informational"
    MISSING = "missing"
    NEW = "new"


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One metric (and one location statistic of it) compared across two runs.

    ``change`` is the raw relative change of the statistic (current / baseline - 1);
    ``worse`` the direction-adjusted one, positive when the current run is worse (a 15 %
    throughput drop is ``worse = +0.15``). ``ci`` bounds ``worse`` at the policy's
    confidence level. ``derived_from`` names the metric a derived one (a throughput: the
    batch over the time of the same calls) was computed from; it shares that metric's test
    and counts once in the family-wise correction.
    """

    metric: str
    statistic: str
    unit: str
    direction: Direction
    baseline: Summary | None
    current: Summary | None
    baseline_value: float | None
    current_value: float | None
    change: float | None
    worse: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_adjusted: float | None
    threshold: float
    verdict: Verdict
    reason: str = ""
    required_n: int | None = None
    required_unit: str = "samples"  # or "processes", or "pairs" (perfgate ab): what more of would decide it
    required_seconds: float | None = None  # perfgate ab: the time budget those pairs would take
    threshold_only: bool = False
    noise: str = ""  # the run-to-run noise folded into the test, when there was any
    noise_assumed: bool = False  # that noise was the default assumption, not measured on this machine
    reference: str = ""  # the reference kernel both sides were normalised by ("" = raw values compared)
    raw_change: float | None = None  # with a reference: the raw relative change, beside the normalised one
    index_change: float | None = None  # with a reference: its kernel's relative change between the runs
    derived_from: str = ""  # the metric this one is derived from ("" = measured on its own)
    # the run's common shift (direction-adjusted log) the change was measured against, when the metric
    # was tested against the rest of its run (perfgate.core.decision._shared_phase); None: its whole change
    relative_to: float | None = None

    @property
    def label(self) -> str:
        return self.metric if self.statistic == "median" else f"{self.metric} ({self.statistic})"

    @property
    def description(self) -> str:
        return describe(self.metric)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCheck:
    """One budget evaluated on the current run.

    A budget whose metric the run did not measure is not met: ``value`` is None and ``ok``
    False, and the check counts it among :attr:`CheckResult.missing`, not among the broken
    budgets (there is no value that broke the limit).
    """

    budget: Budget
    unit: str
    direction: Direction
    value: float | None  # None: the metric was not measured
    n: int
    ok: bool
    note: str = ""
    derived_from: str = ""  # a derived rate's source metric; its value is then the run's overall rate

    @property
    def measured(self) -> bool:
        return self.value is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommonShift:
    """The common shift of a check's timing metrics and what it says.

    ``worse`` is direction-adjusted like :attr:`Comparison.worse` (+1.0: the whole run took
    twice as long); ``ci`` bounds it at the policy's confidence. ``decided_by`` names what
    tells the machine from the code, "" when nothing does.
    """

    metrics: int
    worse: float
    ci: tuple[float, float]
    p_value: float  # one-sided, that the whole run is worse
    p_better: float  # one-sided, that the whole run is better
    alpha: float  # the share of α this test spends
    threshold: float
    decided_by: str
    names: frozenset[str] = frozenset()  # the metrics whose medians made the shift

    @property
    def slower_past(self) -> bool:
        """The whole run moved slower past the threshold (its estimate, tested or not)."""
        return self.worse > self.threshold

    @property
    def faster_past(self) -> bool:
        """The whole run moved faster past the threshold (its estimate, tested or not)."""
        return -self.worse / (1.0 + self.worse) > self.threshold

    @property
    def significant(self) -> bool:
        return self.p_value < self.alpha and self.slower_past

    @property
    def faster(self) -> bool:
        """The whole run is faster beyond the threshold (significant at this step's α)."""
        return self.p_better < self.alpha and self.faster_past

    @property
    def regressed(self) -> bool:
        """The whole run is slower beyond the threshold, and the kernels or a measured noise say it is the code."""
        return self.significant and bool(self.decided_by)

    @property
    def improved(self) -> bool:
        """The whole run is faster beyond the threshold, and the kernels or a measured noise say it is the code."""
        return self.faster and bool(self.decided_by)

    @property
    def ambiguous(self) -> bool:
        """The whole run moved slower past the threshold, and nothing tells the code from the machine:
        no kernels or measured noise, or they could not call it significant."""
        return self.slower_past and not self.regressed

    @property
    def factor(self) -> float:
        return 1.0 + self.worse

    def sentence(self) -> str:
        """One line for the report and the terminal."""
        if self.faster_past and not self.slower_past:
            how = (
                "an improvement"
                if self.improved
                else "the code or the machine, so no metric is called improved for moving with it"
            )
            faster = f"the whole run is {1.0 / self.factor:.2f}× faster"
            return f"{faster} ({self.metrics} timing metrics moved together): {how}"
        whole = (
            f"the whole run is {self.factor:.2f}× slower ({self.metrics} timing metrics moved together "
            f"by {self.worse:+.0%}; interval {self.ci[0]:+.0%} to {self.ci[1]:+.0%})"
        )
        if self.regressed:
            return f"{whole}: a regression, since {self.decided_by} take the machine's speed out"
        if self.decided_by:
            return f"{whole}: {self.decided_by} cannot tell it from noise; measure again, or compare with perfgate ab"
        return (
            f"{whole}: the code or the machine; the machine-speed index (reference kernels), a calibration "
            "(perfgate calibrate), history in a store or perfgate ab would tell"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Control:
    """One clock's control: the run's common shift on it and where the residual noise came from.

    ``shift`` is the direction-adjusted raw log shift (+0.1: the run took 10.5 % longer);
    ``members``: the medians it was estimated from; ``moved``: those of them that moved
    with it (within the threshold of it); ``source``: the residual noise used ("history",
    "calibration", "processes" or "none")."""

    clock: str
    shift: float
    shift_se: float
    members: frozenset[str]
    moved: frozenset[str]
    source: str
    tested: frozenset[str] = frozenset()  # every metric tested against the shift (throughputs too)
    # in units of kernels: the raw shift, which a metric whose raw test was the narrower is taken against
    raw_shift: float | None = None

    @property
    def whole_run(self) -> bool:
        """Whether the metrics that moved with the shift are a majority of its members, the only case
        the shift may be tested as the whole run's (a minority is never one). One process a side without
        history has the plain median for a shift, whose members scatter past the threshold around it."""
        return 2 * len(self.moved) > len(self.members) or self.source == "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedPhase:
    """What :func:`relative_to_run` found: a control per clock that had one, and what to say once."""

    controls: tuple[Control, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def single_process(self) -> bool:
        return any(c.source == "none" for c in self.controls)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """Everything one check found; the report and the exit code are derived from it.

    ``missing`` lists the gated metrics the current run lacks: in the baseline (and not
    informational), or under a budget. Each fails the check (exit 1), or, with the policy's
    ``missing_metric = "refuse"``, makes the check refuse to decide (exit 2). ``notes`` say
    which imported metrics were compared under the baseline's name for their benchmark, and
    which were not compared because a name means different benchmarks on the two sides
    (:func:`perfgate.core.benchmark_names.align`).
    """

    current: Run
    baseline: Run | None
    comparisons: tuple[Comparison, ...]
    budgets: tuple[BudgetCheck, ...]
    policy: Policy
    machine_mismatch: bool = False
    baseline_source: str = ""
    missing: tuple[str, ...] = ()
    common_shift: CommonShift | None = None  # what every timing metric moved together (stored checks)
    shared_phase: SharedPhase | None = None  # the run as its own control (stored checks)
    notes: tuple[str, ...] = ()  # imported metrics renamed to follow their benchmark, one line each
    # where each regressed stage's change went (perfgate.core.profiles): attached by `ab` and `explain`
    explanations: tuple[StageExplanation, ...] = ()
    # one line each, a hint of why a changed stage moved that is not a profile (`ab`: its page faults a call
    # differ between the sides pair after pair); never part of a verdict
    hints: tuple[str, ...] = ()

    def with_verdict(self, verdict: Verdict) -> list[Comparison]:
        return [c for c in self.comparisons if c.verdict is verdict]

    def to_explain(self) -> tuple[str, ...]:
        """The metrics whose stages a differential profile should explain: each regressed one, and each
        inconclusive one whose estimate is past its threshold (a change the check could not confirm). A
        derived metric (a throughput) stands for the metric it is derived from: its stage is that one's."""
        out: list[str] = []
        for c in self.comparisons:
            past = c.worse is not None and c.worse >= self.policy.threshold_for(c.metric)
            metric = c.derived_from or c.metric
            if (c.verdict is Verdict.REGRESSED or (c.verdict is Verdict.INCONCLUSIVE and past)) and metric not in out:
                out.append(metric)
        return tuple(out)

    @property
    def regressions(self) -> list[Comparison]:
        return self.with_verdict(Verdict.REGRESSED)

    @property
    def broken_budgets(self) -> list[BudgetCheck]:
        """Budgets whose measured value is beyond the limit (unmeasured ones are in ``missing``)."""
        return [b for b in self.budgets if not b.ok and b.measured]

    @property
    def refused(self) -> bool:
        """A gated metric is missing and the policy refuses to decide without it."""
        return bool(self.missing) and self.policy.missing_metric == "refuse"

    @property
    def shift_regressed(self) -> bool:
        """The whole run is slower beyond the threshold, and it is the code (kernels or measured noise say so)."""
        return self.common_shift is not None and self.common_shift.regressed

    @property
    def shift_ambiguous(self) -> bool:
        """The whole run is slower beyond the threshold, and nothing tells the code from the machine."""
        return self.common_shift is not None and self.common_shift.ambiguous

    @property
    def failed(self) -> bool:
        return bool(self.regressions or self.broken_budgets or self.missing or self.shift_regressed)

    @property
    def exit_code(self) -> int:
        """0 nothing regressed; 1 a regression, a broken budget or a missing gated metric; 2 refused,
        or a common shift that nothing can tell from the machine's (no metric regressed on its own)."""
        if self.refused:
            return EXIT_ERROR
        if self.failed:
            return EXIT_REGRESSION
        return EXIT_ERROR if self.shift_ambiguous else EXIT_OK

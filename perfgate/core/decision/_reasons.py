"""The reasons a stored or paired check gives for its verdicts, worded in one place.

Each is one plain sentence a report prints beside the verdict (the Markdown, the comment, the
terminal); the rule that gives the verdict (:mod:`perfgate.core.decision._rule`) and the steps after
it (:mod:`perfgate.core.decision._prepare`) say which, with the figures it names.
"""

from __future__ import annotations

from perfgate.core.decision._estimate import Estimate
from perfgate.core.decision._rule import Grounds, Ruling
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.result import CommonShift

__all__ = [
    "INFORMATIONAL",
    "MISSING",
    "NEW",
    "against_the_run",
    "below_memory_floor",
    "moved_together",
    "of_ruling",
    "too_few_samples",
    "with_the_run",
    "zero_to_test",
]

MISSING = "in the baseline, not measured now"
NEW = "no baseline for this metric yet"
INFORMATIONAL = "informational: reported, never gates"


def too_few_samples(statistic: str, needed: int, n_base: int, n_cur: int) -> str:
    """A tail statistic compared from fewer samples than it is read from."""
    return f"{statistic} is compared from {needed} samples per side; this check has {n_base}/{n_cur}"


def zero_to_test(side: str, statistic: str) -> str:
    """A side whose statistic is 0, so that there is no log ratio to test."""
    return f"the {side} {statistic} is 0; the log-ratio test is undefined"


def _in_own_terms(worse: float, direction: Direction) -> str:
    """A direction-adjusted change said in the metric's own terms: +15.7 % worse of a throughput
    is "−15.7 % (worse)", so a row never mixes the two conventions."""
    return f"{direction.worse(worse):+.1%} (worse)"


def of_ruling(
    ruling: Ruling, p: Estimate, policy: Policy, p_adjusted: float | None, ci: tuple[float, float] | None
) -> str:
    """The reason of the rule's verdict: its grounds in words, or the estimate's own reason."""
    if ruling.grounds is Grounds.ZERO_BASELINE:
        return f"the baseline {p.statistic} is 0; a relative change is undefined"
    if ruling.grounds is Grounds.THRESHOLD_ONLY:
        return "one sample per side: only the threshold applies, no significance test"
    if ruling.grounds is Grounds.NOT_SIGNIFICANT:
        return f"over the threshold but not significant (adjusted p = {p_adjusted:.3g} ≥ α = {policy.alpha:g})"
    if ruling.grounds is Grounds.TOO_NOISY:
        assert ci is not None
        return (
            f"the {policy.confidence:.0%} interval reaches {_in_own_terms(ci[1], p.cur.direction)}, "
            f"past the {p.threshold:.0%} threshold: too noisy to rule out a regression"
        )
    return p.reason


def below_memory_floor(change_mb: float, floor_mb: float) -> str:
    """A memory metric's change under the policy's ``memory_floor_mb``."""
    return (
        f"a change of {change_mb:+.3g} MB, below the {floor_mb:g} MB that a memory metric is gated at (memory_floor_mb)"
    )


def moved_together(moved: int, of: int, word: str, p: float) -> str:
    """Many single-process metrics past the threshold one way, claimed together (a breadth claim)."""
    return (
        f"{moved} of {of} benchmarks moved {word} together, apart from the run "
        f"(binomial p = {p:.2g}): more than per-process offsets explain"
    )


def with_the_run(shift: CommonShift, slower: bool, decided: bool) -> str:
    """A metric that moved with a run that moved as a whole: the code's, or the code or the machine."""
    if decided:
        return f"moved with the whole run ({shift.factor:.2f}×), which {shift.decided_by} call the code's"
    return (
        f"the whole run is {'slower' if slower else 'faster'} together ({shift.metrics} metrics): "
        "the code or the machine"
    )


def against_the_run(slower: bool) -> str:
    """A metric that moved against a run that moved as a whole, and not past the threshold on its own."""
    return f"{'faster' if slower else 'slower'} than a run that moved as a whole: the code or the machine"

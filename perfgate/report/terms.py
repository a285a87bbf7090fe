"""The words the reports use: verdict names, and what a change means in a metric's own terms.

A change is always shown as the metric's own relative change (throughput 1000 → 700 is
``-30.0%``), its interval in the same sign, and a word that says which way that is for the
metric: "slower", "faster", "lower throughput", "higher throughput", "more memory", "less
memory" — or "worse"/"better" for a metric perfgate has no noun for. The change shown is the
one the verdict and the interval are about (:func:`shown_change`), so the interval always
contains it.

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math

from perfgate.core.advice import measured_seconds, repetitions, seconds_to_decide
from perfgate.core.compare import CheckResult, Comparison, Verdict
from perfgate.core.metrics import Direction
from perfgate.core.result import ALONE
from perfgate.report.escape import Markdown, md_text
from perfgate.report.formatting import fmt_change, fmt_duration, fmt_p, fmt_value

__all__ = [
    "VERDICT_TITLES",
    "advice",
    "change_ci",
    "count_line",
    "effect_word",
    "is_time_unit",
    "presence_row",
    "shown_change",
    "unchanged_note",
]

# section titles, most severe first (the original specification's "Regressions" first)
VERDICT_TITLES: dict[Verdict, str] = {
    Verdict.REGRESSED: "Regressions",
    Verdict.INCONCLUSIVE: "Inconclusive",
    Verdict.IMPROVED: "Improvements",
    Verdict.UNCHANGED: "Unchanged",
    Verdict.INFORMATIONAL: "Informational",
    Verdict.NEW: "New",
    Verdict.MISSING: "Missing",
}

_TIME_UNITS = frozenset({"ns", "us", "µs", "μs", "ms", "s", "sec", "seconds", "min"})
_MEMORY_UNITS = frozenset({"B", "bytes", "KB", "KiB", "kB", "MB", "MiB", "GB", "GiB"})


def is_time_unit(unit: str) -> bool:
    return unit in _TIME_UNITS


def _is_rate(unit: str, metric: str) -> bool:
    return unit.endswith(("/s", "/sec")) or "throughput" in metric or "per_sec" in metric


def shown_change(c: Comparison) -> float | None:
    """The change a report shows for ``c``: the metric's own relative change that its verdict
    and its interval (:func:`change_ci`) are about.

    That is ``c.change`` (normalised, with a reference kernel), except in a paired check: there
    the test's estimate is the mean of the pairs' log ratios, which can lie on the other side
    of 0 than the ratio of the pooled medians (``-2.3%`` beside an interval of ``[-2.3%,
    +2.6%]`` around ``+0.1%``). ``c.worse`` is that estimate, direction-adjusted; said in the
    metric's own terms it is the same number as ``c.change`` wherever the two agree.
    """
    if c.worse is None:
        return c.change
    return c.direction.worse(c.worse)


def effect_word(c: Comparison) -> str:
    """Which way the change goes, in the metric's terms; "" when there is no change to name."""
    change = shown_change(c)
    if change is None or round(change * 100, 1) == 0:
        return ""
    up = change > 0
    if c.direction is Direction.INFO:
        return "higher" if up else "lower"
    if is_time_unit(c.unit) and c.direction is Direction.LOWER:
        return "slower" if up else "faster"
    if c.unit in _MEMORY_UNITS or "memory" in c.metric:
        return "more memory" if up else "less memory"
    if _is_rate(c.unit, c.metric):
        return "higher throughput" if up else "lower throughput"
    return "worse" if c.direction.worse(change) > 0 else "better"


def change_ci(c: Comparison) -> tuple[float, float] | None:
    """The interval of :func:`shown_change` (the metric's own change), from ``c.ci``, which bounds ``worse``.

    For lower-is-better metrics the two are the same number; for higher-is-better ones
    ``worse = -change``, so the bounds swap and change sign.
    """
    if c.ci is None:
        return None
    lo, hi = c.ci
    if c.direction is Direction.HIGHER:
        return (-hi, -lo)
    return (lo, hi)


def _advice_time(c: Comparison, result: CheckResult, seconds: float | None) -> str:
    assert c.required_n is not None
    if seconds is None:
        return "a longer measurement (how long is unknown: the run records no time metric)"
    have = repetitions(result.current, c.metric, c.required_unit)
    need = seconds_to_decide(c.required_n, have, seconds)
    if need > 86_400:
        return "more than a day of measurement per side"
    return f"about {fmt_duration(need)} of measurement per side (timed calls only; set-up adds to it)"


_UNSET = -1.0
# a reference kernel's change between the runs from which it decides what would settle a comparison
_INDEX_MOVED = 0.10


def advice(c: Comparison, result: CheckResult, seconds: float | None = _UNSET) -> Markdown:
    """What a person can do to decide an inconclusive metric: a time, or another way to measure.

    Never a bare count of samples, processes or pairs; never ``perfgate ab`` in a report that
    ``perfgate ab`` wrote (its runs carry ``config["ab"]``). ``seconds`` is
    :func:`~perfgate.core.advice.measured_seconds` of the current run, when the caller has it
    (a report with many inconclusive metrics computes it once).
    """
    if seconds == _UNSET:
        seconds = measured_seconds(result.current)
    ab = "ab" in result.current.config
    if c.required_n is None and c.baseline_value == 0:  # no relative change exists, whatever the samples
        return Markdown("none: a change relative to a baseline of 0 is undefined; set an absolute budget instead")
    if c.required_unit == "pairs":  # perfgate ab: more worker pairs, that is a longer time budget
        if c.required_seconds is not None:
            budget = math.ceil(c.required_seconds)
            return Markdown(f"a longer run: `--time-budget {budget:,}` (about {fmt_duration(budget)})")
        return Markdown("a longer run: a larger `--time-budget`")
    if c.reason == ALONE:  # one process a side, no history: a process's offset hides any one metric's change
        return Markdown(
            "several processes a side (`--processes 4`), a history recorded on main (`perfgate record`, then "
            "`check --store`), or `perfgate calibrate`"
        )
    if c.required_n is None:
        if c.reference and c.index_change is not None and abs(c.index_change) >= _INDEX_MOVED and not ab:
            # the kernel's change between the runs dominates: neither more samples nor a calibration remove it
            return Markdown(
                f"`perfgate ab` (paired), or a baseline measured at the machine's present speed (its "
                f"{md_text(c.reference)} reference kernel changed {fmt_change(c.index_change)} since)"
            )
        if c.noise:  # unpaired: the noise of a whole run, which more samples don't touch
            if ab:
                return Markdown("`perfgate calibrate` from this machine's history")
            return Markdown("`perfgate ab` (paired), or `perfgate calibrate` from this machine's history")
        return Markdown("more samples will not settle it: the change sits at the threshold" if c.reason else "—")
    if ab:
        return Markdown(f"a longer run (more `--pairs`): {md_text(_advice_time(c, result, seconds))}")
    return Markdown(f"`perfgate ab` (paired), or {md_text(_advice_time(c, result, seconds))}")


def unchanged_note(c: Comparison, alpha: float) -> str:
    """Why an unchanged metric with a notable change is still unchanged ("" when nothing needs saying)."""
    if c.verdict is not Verdict.UNCHANGED or c.worse is None or c.threshold_only:
        return ""
    if "memory_floor_mb" in c.reason:  # a memory change too small in MB to count, whatever its share
        return c.reason
    if c.worse > 0 and c.p_adjusted is not None and c.p_adjusted < alpha:
        return (
            f"below the threshold: significant (p (Holm) {fmt_p(c.p_adjusted)}) but smaller than {c.threshold * 100:g}%"
        )
    if -c.worse > c.threshold:
        return f"better by more than {c.threshold * 100:g}%, but the interval does not rule out no change"
    return ""


def count_line(result: CheckResult) -> str:
    """How many comparisons fell in each verdict class, inconclusive ones included."""
    compared = [c for c in result.comparisons if c.verdict not in (Verdict.NEW, Verdict.MISSING)]
    parts = []
    for verdict, word in (
        (Verdict.REGRESSED, "regressed"),
        (Verdict.INCONCLUSIVE, "inconclusive"),
        (Verdict.IMPROVED, "improved"),
        (Verdict.UNCHANGED, "unchanged"),
        (Verdict.INFORMATIONAL, "informational"),
    ):
        n = sum(1 for c in compared if c.verdict is verdict)
        if n:
            parts.append(f"{n} {word}")
    metrics = len({c.metric for c in compared})
    head = f"{metrics} metric(s) compared"
    if len(compared) != metrics:
        head += f" ({len(compared)} statistics)"
    line = head + (": " + ", ".join(parts) if parts else "")
    others = [
        f"{n} {word}"
        for verdict, word in ((Verdict.NEW, "new"), (Verdict.MISSING, "missing"))
        if (n := len(result.with_verdict(verdict)))
    ]
    broken = len(result.broken_budgets)
    if broken:
        others.append(f"{broken} budget(s) broken")
    return line + ("; " + ", ".join(others) if others else "") + "."


def presence_row(c: Comparison) -> list[str]:
    """A new or missing metric's row: its name, what happened, the value the side that has it
    measured, and why."""
    value = c.baseline_value if c.verdict is Verdict.MISSING else c.current_value
    return [c.label, c.verdict.value, fmt_value(value), c.reason]

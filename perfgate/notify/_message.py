"""What a notification says, built once from a check and rendered per channel.

:func:`summarize_check` turns a :class:`~perfgate.core.compare.CheckResult` into a
:class:`Summary` of plain values. Metric names are data from the benchmarked code and may
be hostile (``<!channel>``, ``<script>``, Markdown, new lines): the summary keeps them
verbatim, and each channel escapes them for its own syntax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from perfgate.core.compare import CheckResult, Comparison, Verdict
from perfgate.report.formatting import fmt_change, fmt_value

__all__ = ["MAX_ROWS", "Row", "Summary", "events_of", "summarize_check"]

MAX_ROWS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One line of a notification: a metric that changed, or a budget that broke."""

    kind: str  # "regressed", "over_budget", "improved", "inconclusive"
    metric: str
    statistic: str
    unit: str
    baseline: float | None
    current: float | None
    change: float | None  # relative, current / baseline - 1
    limit: float | None = None  # budgets only

    @property
    def text(self) -> str:
        """Plain text, e.g. ``+20.0% (100.00 → 120.00 ms)``; the metric name is not included."""
        if self.kind == "over_budget":
            return f"{self.statistic} = {fmt_value(self.current)} {self.unit} (limit {fmt_value(self.limit)})"
        stat = "" if self.statistic == "median" else f"{self.statistic}: "
        return f"{stat}{fmt_change(self.change)} ({fmt_value(self.baseline)} → {fmt_value(self.current)} {self.unit})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """A check, as notifications tell it."""

    status: str  # the most severe event: "regression", "inconclusive" or "improvement"
    events: tuple[str, ...]
    model: str
    commit: str | None
    branch: str | None
    counts: Mapping[str, int]
    rows: tuple[Row, ...]
    more: int  # rows left out beyond MAX_ROWS
    exit_code: int
    baseline_source: str = ""
    url: str | None = None

    @property
    def headline(self) -> str:
        """One line of plain text (the e-mail subject, the Slack fallback)."""
        what = {
            "regression": "performance regression",
            "inconclusive": "inconclusive performance check",
            "improvement": "performance improvement",
        }[self.status]
        n = self.counts.get("regressed", 0) + self.counts.get("over_budget", 0)
        detail = f" ({n} failing)" if self.status == "regression" else ""
        at = f" at {self.commit[:12]}" if self.commit else ""
        return f"perfgate: {what} in {self.model}{detail}{at}"


def events_of(result: CheckResult) -> tuple[str, ...]:
    """The notification events a check raises, most severe first."""
    events = []
    if result.failed:
        events.append("regression")
    if result.with_verdict(Verdict.INCONCLUSIVE):
        events.append("inconclusive")
    if result.with_verdict(Verdict.IMPROVED):
        events.append("improvement")
    return tuple(events)


def _row(c: Comparison) -> Row:
    return Row(
        kind=c.verdict.value,
        metric=c.metric,
        statistic=c.statistic,
        unit=c.unit,
        baseline=c.baseline_value,
        current=c.current_value,
        change=c.change,
    )


def _severity(c: Comparison) -> float:
    return abs(c.worse) if c.worse is not None else 0.0


def summarize_check(result: CheckResult, events: tuple[str, ...], *, url: str | None = None) -> Summary:
    """The :class:`Summary` of ``result`` for the ``events`` being notified (non-empty)."""
    rows: list[Row] = []
    if "regression" in events:
        rows += [_row(c) for c in sorted(result.regressions, key=_severity, reverse=True)]
        rows += [
            Row(
                kind="over_budget",
                metric=b.budget.metric,
                statistic=b.budget.statistic,
                unit=b.unit,
                baseline=None,
                current=b.value,
                change=None,
                limit=b.budget.limit,
            )
            for b in result.broken_budgets
        ]
    for event, verdict in (("inconclusive", Verdict.INCONCLUSIVE), ("improvement", Verdict.IMPROVED)):
        if event in events:
            rows += [_row(c) for c in sorted(result.with_verdict(verdict), key=_severity, reverse=True)]
    counts = {v.value: len(result.with_verdict(v)) for v in Verdict}
    counts["over_budget"] = len(result.broken_budgets)
    return Summary(
        status=events[0],
        events=events,
        model=result.current.model,
        commit=result.current.git.commit,
        branch=result.current.git.branch,
        counts=counts,
        rows=tuple(rows[:MAX_ROWS]),
        more=max(0, len(rows) - MAX_ROWS),
        exit_code=result.exit_code,
        baseline_source=result.baseline_source,
        url=url,
    )

"""The Markdown report of a check, shaped after the original specification's example report.

Sections, most severe first: regressions (the original specification's table and detail
sentences), over budget, inconclusive, improvements, unchanged, new/missing. Each verdict
class has one table that carries its own statistics, in one sign convention: the change of
the metric in its own terms (throughput ``-30.0%``), its interval in the same sign, and a
word for which way that is (:mod:`perfgate.report.terms`). p-values appear only where they
explain a decision: a regression's, an inconclusive metric's reason, an unchanged metric
whose significant change is below its threshold. After the tables, "Where it went": the
differential profile of each explained stage (:mod:`perfgate.report.where`). Optional
columns nobody's row fills are left out. However many metrics there are, the report stays
under :data:`MAX_CHARS` (GitHub's comment limit is 65,536): rows are sorted by size of
change and the tail of each long section is summarised in one line. The compact
pull-request form is :mod:`perfgate.report.comment`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from perfgate.core.advice import measured_seconds
from perfgate.core.compare import BudgetCheck, CheckResult, Comparison, Verdict
from perfgate.core.decision import COUNT_UNITS, NOT_TIMES, informational_line, left_out_line
from perfgate.core.metrics import Direction
from perfgate.core.units import MEMORY_UNITS
from perfgate.report._conditions import conditions
from perfgate.report._missing import missing_markdown
from perfgate.report.environment import environment_markdown
from perfgate.report.escape import md_cell, md_code, md_prose, md_text
from perfgate.report.formatting import fmt_change, fmt_interval, fmt_p, fmt_time, fmt_value, unit_label
from perfgate.report.shift import shift_markdown
from perfgate.report.terms import (
    VERDICT_TITLES,
    advice,
    change_ci,
    count_line,
    effect_word,
    presence_row,
    shown_change,
    unchanged_note,
)
from perfgate.report.where import hint_lines, markdown_where

__all__ = ["MAX_CHARS", "render_markdown", "verdict_heading"]

MAX_CHARS = 60_000


def _severity(c: Comparison) -> float:
    return abs(c.worse) if c.worse is not None else 0.0


def _table(header: Sequence[str], rows: list[list[str]], cap: int | None, what: str) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("-" * (len(h) + 2) for h in header) + "|"]
    shown = rows if cap is None else rows[:cap]
    lines += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in shown]
    if len(rows) > len(shown):
        lines += ["", f"… and {len(rows) - len(shown)} more {what} (smaller changes; all are in the JSON report)"]
    return lines


def _n(c: Comparison) -> str:
    nb = c.baseline.n if c.baseline else 0
    nc = c.current.n if c.current else 0
    return f"{nb}/{nc}"


def _sentence(c: Comparison) -> str:
    change = shown_change(c) or 0
    verb = "increased" if change > 0 else "decreased"
    what = md_text(c.description if c.statistic == "median" else f"{c.description} {c.statistic}")
    size = abs(change) * 100
    sentence = f"{what} {verb} by {size:.1f}% ({fmt_value(c.baseline_value)} → {fmt_value(c.current_value)})"
    if c.relative_to is not None and c.raw_change is not None:
        run = math.expm1(c.direction.worse(c.relative_to))
        sentence = (
            f"{what} {verb} by {size:.1f}% apart from the rest of its run "
            f"({fmt_value(c.baseline_value)} → {fmt_value(c.current_value)}: {fmt_change(c.raw_change)} in all, "
            f"the run as a whole {fmt_change(run)})"
        )
    return sentence


def _threshold_text(regressions: list[Comparison], default: float) -> str:
    values = {c.threshold for c in regressions}
    if len(values) == 1:
        return f">{next(iter(values)) * 100:g}%"
    return f"beyond their thresholds (default {default:g}%)"


def verdict_heading(result: CheckResult) -> str:
    """The verdict as the original specification's heading names it (without the ``## ``)."""
    if result.regressions or result.shift_regressed:
        return "❌ Regression Detected"
    if result.broken_budgets:
        return "❌ Budget Exceeded"
    if result.missing:
        return "❌ Gated Metric Missing"
    if result.shift_ambiguous:
        return "⚠️ Could Not Decide: The Whole Run Shifted"
    return "✅ No Regression Detected"


def _verdict_block(result: CheckResult, cap: int | None) -> list[str]:
    regs = sorted(result.regressions, key=_severity, reverse=True)
    broken = result.broken_budgets
    lines: list[str] = [f"## {verdict_heading(result)}"]
    if regs:
        regressed = {c.metric for c in regs}
        names = [name for name in result.current.metrics if name in regressed]  # the run's own order
        listed = ", ".join(md_text(n) for n in (names if cap is None else names[:cap]))
        if cap is not None and len(names) > cap:
            listed += f" and {len(names) - cap} more"
        lines += [
            "",
            f"Performance regression detected: {len(names)} metric(s) degraded by "
            f"{_threshold_text(regs, result.policy.threshold_pct)}: {listed}",
        ]
    elif not broken and not result.missing:
        unsure = result.with_verdict(Verdict.INCONCLUSIVE)
        if unsure:
            lines += [
                "",
                f"No regression detected, but {len(unsure)} metric(s) could not be decided: over the threshold "
                "without a significant test, or too noisy to rule a regression out (see Inconclusive).",
            ]
        else:
            lines += ["", "No metric degraded beyond its threshold."]
    if broken:
        lines += [
            "",
            f"Performance budget exceeded: {len(broken)} budget(s) broken: "
            + ", ".join(md_text(f"{b.budget.metric} {b.budget.statistic}") for b in broken),
        ]
    return lines


def _notes(result: CheckResult) -> list[str]:
    notes = []
    if result.machine_mismatch and result.baseline is not None:
        notes.append(
            f"⚠️ **Cross-machine comparison**: baseline from machine {md_code(result.baseline.machine.fingerprint)}, "
            f"current from {md_code(result.current.machine.fingerprint)} (allowed by --allow-machine-mismatch); "
            "differences may be the hardware, not the change."
        )
    if any(c.threshold_only for c in result.comparisons):
        notes.append(
            "ℹ️ One sample per side for some metrics: only the threshold applies to them, "
            "without a significance test. Record several repetitions to get one."
        )
    if result.baseline_source:
        notes.append(f"Baseline: {md_prose(result.baseline_source)}.")
    notes += [f"ℹ️ {md_prose(n[:1].upper() + n[1:])}." for n in result.notes]
    notes += _noise_notes(result)
    p = result.policy
    tests = sum(1 for c in result.comparisons if c.p_adjusted is not None)
    rule = f"Rule: a metric regresses when it is worse by more than its threshold (default {p.threshold_pct:g}%)"
    if tests:
        rule += f" and a one-sided test is significant at family-wise α = {p.alpha:g} (Holm, over {tests} tests)"
    notes.append(rule + ".")
    return [line for note in notes for line in ("", f"> {note}")]


def _noise_notes(result: CheckResult) -> list[str]:
    """How the run-to-run noise entered the decision: assumed, and whether times were normalised."""
    notes = []
    p = result.policy
    ab = "ab" in result.current.config
    if any(c.unit in COUNT_UNITS for c in result.comparisons):
        notes.append(f"ℹ️ {NOT_TIMES}")
        for line in (left_out_line(result.current), informational_line(result.current)):
            if line is not None:
                notes.append(f"ℹ️ {md_prose(line)}")
    notes += _control_notes(result)
    if any(c.noise_assumed and c.relative_to is None and c.unit not in MEMORY_UNITS for c in result.comparisons):
        processes = result.current.config.get("processes")
        g = processes if isinstance(processes, int) and processes > 0 else 1
        notes.append(
            f"ℹ️ Run-to-run noise unknown on this machine: assumed σ {p.assumed_raw.sigma(1, g):.0%} for raw times "
            f"and {p.assumed_normalised.sigma(1, g):.0%} for times in units of their reference kernel "
            f"(one run of {g} process(es)); "
            + (
                "`perfgate calibrate` would measure it."
                if ab
                else "`perfgate calibrate` or `perfgate ab` would decide."
            )
        )
    if any(fmt_change(shown_change(c)) != fmt_change(c.change) for c in result.comparisons if not c.reference):
        notes.append(
            "ℹ️ Compared in pairs: Change and its interval are those of the mean of the pairs' log ratios, the "
            "estimate that was tested; the pooled values shown beside it can give another ratio."
        )
    if any(c.reference and c.relative_to is None for c in result.comparisons):
        notes.append(
            "ℹ️ Stage times are compared in units of a reference kernel of the stage's kind, timed with every block "
            "of its calls (the machine-speed index): Change is that normalised change, the raw one is beside it."
        )
        moved = _index_moves(result)
        if moved:
            notes.append(
                f"ℹ️ The machine ran at another speed than when the baseline was measured (reference kernels: {moved}). "
                "A stage's time follows its kernel only roughly, so each test allows for an error about as large as "
                "its kernel's change; a comparison in one job (`perfgate ab`) does not depend on it."
            )
    elif result.baseline is not None and bool(result.baseline.machine_index) != bool(result.current.machine_index):
        side = "baseline" if not result.baseline.machine_index else "current run"
        notes.append(f"ℹ️ The {side} has no machine-speed index: raw times were compared.")
    return notes


_SOURCES = {
    "history": "learned from the baseline's runs",
    "calibration": "learned by perfgate calibrate",
    "processes": "measured between the runs' worker processes",
    "none": "unknown (one process a side, no history)",
}


def _control_notes(result: CheckResult) -> list[str]:
    """How the run served as its own control (:mod:`perfgate.core.decision._shared_phase`), said once."""
    phase = result.shared_phase
    if phase is None:
        return []
    notes = []
    for control in phase.controls:
        shift = math.expm1(control.shift)
        raw = "" if control.raw_shift is None else f" ({fmt_change(math.expm1(control.raw_shift))} raw)"
        notes.append(
            f"ℹ️ The run is its own control on the {md_text(control.clock)}: "
            f"it moved {fmt_change(shift)}{raw} as a whole "
            f"(the median of {len(control.members)} timing metrics), and each metric's Change is how far it moved "
            f"apart from that, tested against its residual noise, {_SOURCES[control.source]}. "
            "Its values (Baseline, Current) show the whole change, and so do the details of a regression."
        )
    notes += [f"ℹ️ {md_prose(n[:1].upper() + n[1:])}." for n in phase.notes]
    return notes


# a kernel change from which the report says the machine ran at another speed
_INDEX_NOTE = 0.05


def _index_moves(result: CheckResult) -> str:
    """``"compute -28.0%, interpreter -18.7% to -29.2%"``: each reference kernel whose time changed
    by 5 % or more between the runs (the change the normalised tests allowed for; a range where
    the stages timed with it saw different changes); "" when none did."""
    moves: dict[str, list[float]] = {}
    for c in result.comparisons:
        if c.reference and c.index_change is not None:
            moves.setdefault(c.reference, []).append(c.index_change)
    parts = []
    for kernel, changes in sorted(moves.items()):
        largest, smallest = max(changes, key=abs), min(changes, key=abs)
        if abs(largest) < _INDEX_NOTE:
            continue
        span = fmt_change(largest) if largest == smallest else f"{fmt_change(smallest)} to {fmt_change(largest)}"
        parts.append(f"{md_text(kernel)} {span}")
    return ", ".join(parts)


def _change(c: Comparison) -> str:
    if c.reference and c.raw_change is not None and c.relative_to is None:
        return f"{fmt_change(shown_change(c))} (raw {fmt_change(c.raw_change)})"
    return fmt_change(shown_change(c))


def _regression_sections(result: CheckResult, regs: list[Comparison], cap: int | None) -> list[str]:
    """The original specification's table (Metric, Baseline, Current, Change) with the statistics that decided."""
    if not regs:
        return []
    columns: list[Column] = [
        _METRIC,
        ("Baseline", lambda c: fmt_value(c.baseline_value), False),
        ("Current", lambda c: fmt_value(c.current_value), False),
        _CHANGE,
        _EFFECT,
        _CI,
        ("p (Holm)", _p_holm, True),
        _N,
    ]
    cols = _stat_columns(result, regs, columns)
    lines = ["", "### Regressions", "", *_columns_table(cols, regs, cap, "regressions", drop_n=_only_one_sample(regs))]
    shown = regs if cap is None else regs[:cap]
    lines += ["", "### Details", ""] + [f"- {_sentence(c)}" for c in shown]
    return lines


def _budget_section(budgets: Sequence[BudgetCheck], cap: int | None) -> list[str]:
    broken = [b for b in budgets if not b.ok]
    if not budgets:
        return []
    rows = []
    for b in sorted(budgets, key=lambda b: b.ok):
        op = "≥" if b.direction is Direction.HIGHER else "≤"
        status = "❌ not measured" if b.value is None else "❌ over budget" if not b.ok else "✅ ok"
        rows.append(
            [
                f"{b.budget.metric} ({b.budget.statistic})",
                f"{op} {fmt_value(b.budget.limit)} {unit_label(b.unit)}",
                fmt_value(b.value),
                str(b.n),
                status,
                b.note,
            ]
        )
    title = "### Over Budget" if broken else "### Budgets"
    return [
        "",
        title,
        "",
        *_table(["Metric", "Limit", "Current", "n", "Status", "Note"], rows, cap, "budgets"),
    ]


def _pair(c: Comparison) -> str:
    return f"{fmt_value(c.baseline_value)} → {fmt_value(c.current_value)}"


def _ci(c: Comparison) -> str:
    return fmt_interval(change_ci(c))


def _p_holm(c: Comparison) -> str:
    return fmt_p(c.p_adjusted)


def _threshold(c: Comparison) -> str:
    return f"{c.threshold * 100:g}%"


# a column: its header, its cell, and whether a column that is empty ("" or "—") in every row is left out
Column = tuple[str, Callable[[Comparison], str], bool]

_METRIC: Column = ("Metric", lambda c: c.label, False)
_PAIR: Column = ("Baseline → Current", _pair, False)
_CHANGE: Column = ("Change", _change, False)
_EFFECT: Column = ("Effect", effect_word, True)
_CI: Column = ("95% CI", _ci, True)
_N: Column = ("n (base/cur)", _n, True)


def _columns_table(
    columns: Sequence[Column], items: Sequence[Comparison], cap: int | None, what: str, *, drop_n: bool = False
) -> list[str]:
    """A table of ``items``, one row each, leaving out optional columns nobody's row fills."""
    shown = items if cap is None else items[:cap]
    cells = [[cell(c) for _, cell, _ in columns] for c in shown]
    keep = [
        i
        for i, (header, _, optional) in enumerate(columns)
        if not (header == _N[0] and drop_n) and not (optional and all(row[i] in ("", "—") for row in cells))
    ]
    header = [columns[i][0] for i in keep]
    rows = [[row[i] for i in keep] for row in cells]
    lines = _table(header, rows, None, what)
    if len(items) > len(shown):
        lines += ["", f"… and {len(items) - len(shown)} more {what} (smaller changes; all are in the JSON report)"]
    return lines


def _stat_columns(result: CheckResult, items: Sequence[Comparison], first: Sequence[Column]) -> list[Column]:
    cols = [*first]
    if any(abs(c.threshold * 100 - result.policy.threshold_pct) > 1e-9 for c in items):
        cols.append(("Threshold", _threshold, False))
    return cols


def _only_one_sample(items: Sequence[Comparison]) -> bool:
    return all(c.threshold_only for c in items)


def _section(
    result: CheckResult,
    verdict: Verdict,
    items: list[Comparison],
    cap: int | None,
    what: str,
    columns: Sequence[Column],
) -> list[str]:
    if not items:
        return []
    cols = _stat_columns(result, items, columns)
    title = VERDICT_TITLES[verdict]
    return ["", f"### {title}", "", *_columns_table(cols, items, cap, what, drop_n=_only_one_sample(items))]


def _why(c: Comparison) -> str:
    return f"{c.reason}; {c.noise}" if c.noise else c.reason


# rows undecided for one reason from which the reason is said once, above the table
_SAID_ONCE = 3


def _shared_reason(items: Sequence[Comparison]) -> str:
    """The reason most of ``items`` share, when at least :data:`_SAID_ONCE` do; "" otherwise."""
    counts: dict[str, int] = {}
    for c in items:
        counts[_why(c)] = counts.get(_why(c), 0) + 1
    if not counts:
        return ""
    reason, n = max(counts.items(), key=lambda kv: kv[1])
    return reason if n >= _SAID_ONCE else ""


def _when(created_at: str | None) -> str:
    return md_text(fmt_time(created_at))


def _footer(result: CheckResult) -> list[str]:
    base = result.baseline
    cur = result.current
    lines = [""]
    if base is not None:
        lines.append(f"**Baseline**: {_when(base.created_at)} (commit: {md_text(base.git.commit or 'unknown')})")
        lines.append("")
    lines.append(f"**Current**: {_when(cur.created_at)} (commit: {md_text(cur.git.commit or 'unknown')})")
    return lines


def _render(result: CheckResult, cap: int | None) -> str:
    by = {v: sorted(result.with_verdict(v), key=_severity, reverse=True) for v in Verdict}
    alpha = result.policy.alpha
    lines = [
        "# Performance Regression Check",
        *missing_markdown(result),
        *shift_markdown(result),
        "",
        *_verdict_block(result, cap),
        "",
        count_line(result),
    ]
    lines += _notes(result)
    lines += _regression_sections(result, by[Verdict.REGRESSED], cap)
    lines += hint_lines(result.hints)
    lines += _budget_section(result.budgets, cap)
    seconds = measured_seconds(result.current)
    shared = _shared_reason(by[Verdict.INCONCLUSIVE])
    same = [c for c in by[Verdict.INCONCLUSIVE] if shared and _why(c) == shared]
    remedy = {advice(c, result, seconds) for c in same}
    once = len(remedy) == 1
    why: Column = ("Why", lambda c: "the reason above" if shared and _why(c) == shared else _why(c), False)
    decide: Column = (
        "What would decide it",
        lambda c: "as above" if once and shared and _why(c) == shared else advice(c, result, seconds),
        False,
    )
    section = _section(
        result, Verdict.INCONCLUSIVE, by[Verdict.INCONCLUSIVE], cap, "inconclusive metrics",
        [_METRIC, _PAIR, _CHANGE, _EFFECT, _CI, why, decide, _N],
    )  # fmt: skip
    if shared and section:
        said = f"{len(same)} of them for one reason: {md_prose(shared)}"
        if once:
            said += f". What would decide them: {next(iter(remedy))}"
        section[3:3] = [f"> {said}.", ""]
    lines += section
    lines += _section(
        result, Verdict.IMPROVED, by[Verdict.IMPROVED], cap, "improvements", [_METRIC, _PAIR, _CHANGE, _EFFECT, _CI, _N]
    )
    note: Column = ("Note", lambda c: unchanged_note(c, alpha), True)
    lines += _section(
        result, Verdict.UNCHANGED, by[Verdict.UNCHANGED], cap, "unchanged metrics",
        [_METRIC, _PAIR, _CHANGE, _EFFECT, _CI, note, _N],
    )  # fmt: skip
    lines += _section(
        result, Verdict.INFORMATIONAL, by[Verdict.INFORMATIONAL], cap, "informational metrics",
        [_METRIC, _PAIR, _CHANGE, _EFFECT, _N],
    )  # fmt: skip
    other = by[Verdict.NEW] + by[Verdict.MISSING]
    if other:
        rows = [presence_row(c) for c in other]
        lines += [
            "",
            "### New and missing metrics",
            "",
            *_table(["Metric", "Status", "Median", "Note"], rows, cap, "metrics"),
        ]
    lines += markdown_where(result.explanations, cap)
    lines += conditions(result, cap)
    lines += environment_markdown(result)
    lines += _footer(result)
    return "\n".join(lines) + "\n"


def render_markdown(result: CheckResult, max_chars: int = MAX_CHARS) -> str:
    """The report for ``result``, at most ``max_chars`` characters long."""
    text = _render(result, None)
    cap = 200
    while len(text) > max_chars and cap >= 1:
        text = _render(result, cap)
        cap //= 2
    if len(text) > max_chars:  # pathological: enormous metric names; keep the verdict and cut
        marker = "\n\n… report truncated to fit; the JSON report has every metric.\n"
        text = text[: max_chars - len(marker)] + marker
    return text

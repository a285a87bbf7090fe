"""The compact form of a check for a pull-request comment, beside the full Markdown report.

A reviewer reads it in a narrow column: no table has more than six columns, the verdict
line comes first, regressions and broken budgets are open, and everything else
(inconclusive, improved, unchanged, new and missing metrics, and how the decision was
made) is folded in ``<details>``. Changes read as in the full report: the metric's own
change, its interval in the same sign, and a word ("+20.0% slower").

GitHub refuses a comment over 65,536 characters. The form stays under :data:`MAX_BYTES`
UTF-8 bytes (never fewer than characters) whatever the number of metrics: each table shows
its largest changes first, and a section cut short ends with "N more metrics, see the full
report". Each explained stage ("where it went", :mod:`perfgate.report.where`) follows the
regressions, folded, all of them within :data:`~perfgate.report.where.COMMENT_BYTES`. Every
piece of data goes through :mod:`perfgate.report.escape`.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.core.advice import measured_seconds
from perfgate.core.compare import BudgetCheck, CheckResult, Comparison, Verdict
from perfgate.core.decision import COUNT_UNITS, NOT_TIMES, informational_line, left_out_line
from perfgate.core.metrics import Direction
from perfgate.report.escape import Markdown, md_cell, md_code, md_prose, md_text
from perfgate.report.formatting import fmt_change, fmt_interval, fmt_p, fmt_time, fmt_value, unit_label
from perfgate.report.markdown import verdict_heading
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
from perfgate.report.where import comment_where, hint_lines

__all__ = ["MAX_BYTES", "MAX_COLUMNS", "render_comment"]

MAX_BYTES = 60_000
MAX_COLUMNS = 6
_CAPS = (None, 100, 50, 25, 12, 6, 3, 1, 0)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _severity(c: Comparison) -> float:
    return abs(c.worse) if c.worse is not None else 0.0


_OPTIONAL = frozenset({"Note", "95% CI"})  # left out when no row has anything in them


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], total: int) -> list[str]:
    keep = [i for i, h in enumerate(header) if h not in _OPTIONAL or any(row[i] not in ("", "—") for row in rows)]
    header = [header[i] for i in keep]
    rows = [[row[i] for i in keep] for row in rows]
    assert len(header) <= MAX_COLUMNS
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in rows]
    if total > len(rows):
        lines += ["", f"… {total - len(rows):,} more metrics, see the full report."]
    return lines


def _change(c: Comparison) -> str:
    text = fmt_change(shown_change(c))
    if c.reference and c.raw_change is not None:
        text += f" (raw {fmt_change(c.raw_change)})"
    word = effect_word(c)
    return f"{text} {word}" if word else text


def _pair(c: Comparison) -> str:
    return f"{fmt_value(c.baseline_value)} → {fmt_value(c.current_value)}"


def _shown(items: list[Comparison], cap: int | None) -> list[Comparison]:
    return items if cap is None else items[:cap]


def _regressions(regs: list[Comparison], cap: int | None) -> list[str]:
    shown = _shown(regs, cap)
    tested = any(c.p_adjusted is not None for c in regs)
    header = ["Metric", "Baseline → Current", "Change", "95% CI"] + (["p (Holm)"] if tested else [])
    rows = [
        [c.label, _pair(c), _change(c), fmt_interval(change_ci(c))] + ([fmt_p(c.p_adjusted)] if tested else [])
        for c in shown
    ]
    return ["", "**Regressions**", "", *_table(header, rows, len(regs))]


def _budget_rows(budgets: Sequence[BudgetCheck]) -> list[list[str]]:
    rows = []
    for b in budgets:
        op = "≥" if b.direction is Direction.HIGHER else "≤"
        status = "❌ over budget" if not b.ok else ("— not measured" if b.value is None else "✅ ok")
        rows.append(
            [
                f"{b.budget.metric} ({b.budget.statistic})",
                f"{op} {fmt_value(b.budget.limit)} {unit_label(b.unit)}",
                fmt_value(b.value),
                status,
                b.note,
            ]
        )
    return rows


def _folded(title: str, count: int | None, body: list[str]) -> list[str]:
    # perfgate's own words in <summary>; data only ever in the Markdown body
    summary = title if count is None else f"{title} ({count:,})"
    return ["", "<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>"]


def _why(c: Comparison, result: CheckResult, seconds: float | None) -> Markdown:
    reason = f"{c.reason}; {c.noise}" if c.noise else c.reason
    return Markdown(f"{md_text(reason)}. Decide with: {advice(c, result, seconds)}")


def _classes(result: CheckResult, by: dict[Verdict, list[Comparison]], cap: int | None) -> list[str]:
    alpha = result.policy.alpha
    lines: list[str] = []
    unsure = by[Verdict.INCONCLUSIVE]
    if unsure:
        seconds = measured_seconds(result.current)
        rows = [
            [c.label, _pair(c), _change(c), fmt_interval(change_ci(c)), _why(c, result, seconds)]
            for c in _shown(unsure, cap)
        ]
        table = _table(
            ["Metric", "Baseline → Current", "Change", "95% CI", "Why, and what would decide it"], rows, len(unsure)
        )
        lines += _folded(VERDICT_TITLES[Verdict.INCONCLUSIVE], len(unsure), table)
    better = by[Verdict.IMPROVED]
    if better:
        rows = [[c.label, _pair(c), _change(c), fmt_interval(change_ci(c))] for c in _shown(better, cap)]
        lines += _folded(
            VERDICT_TITLES[Verdict.IMPROVED],
            len(better),
            _table(["Metric", "Baseline → Current", "Change", "95% CI"], rows, len(better)),
        )
    same = by[Verdict.UNCHANGED]
    if same:
        rows = [[c.label, _pair(c), _change(c), unchanged_note(c, alpha)] for c in _shown(same, cap)]
        lines += _folded(
            VERDICT_TITLES[Verdict.UNCHANGED],
            len(same),
            _table(["Metric", "Baseline → Current", "Change", "Note"], rows, len(same)),
        )
    info = by[Verdict.INFORMATIONAL]
    if info:
        rows = [[c.label, _pair(c), _change(c)] for c in _shown(info, cap)]
        lines += _folded(
            VERDICT_TITLES[Verdict.INFORMATIONAL],
            len(info),
            _table(["Metric", "Baseline → Current", "Change"], rows, len(info)),
        )
    other = by[Verdict.NEW] + by[Verdict.MISSING]
    if other:
        rows = [presence_row(c) for c in _shown(other, cap)]
        lines += _folded(
            "New and missing", len(other), _table(["Metric", "Status", "Median", "Note"], rows, len(other))
        )
    return lines


def _how(result: CheckResult, cap: int | None) -> list[str]:
    """How the decision was made: the baseline, the rule, the budgets that held."""
    p = result.policy
    body: list[str] = []
    tests = sum(1 for c in result.comparisons if c.p_adjusted is not None)
    rule = f"A metric regresses when it is worse by more than its threshold (default {p.threshold_pct:g}%)"
    if tests:
        rule += f" and a one-sided test is significant at family-wise α = {p.alpha:g} (Holm, over {tests} tests)"
    body.append(rule + ".")
    if any(c.threshold_only for c in result.comparisons):
        body += ["", "One sample per side for some metrics: only the threshold applies to them."]
    held = [b for b in result.budgets if b.ok]
    if held:
        shown = held if cap is None else held[:cap]
        body += ["", *_table(["Budget", "Limit", "Current", "Status", "Note"], _budget_rows(shown), len(held))]
    for run, side in ((result.baseline, "Baseline"), (result.current, "Current")):
        if run is not None:
            body += [
                "",
                f"{side} run: {md_text(fmt_time(run.created_at))} (commit: {md_text(run.git.commit or 'unknown')}).",
            ]
    return _folded("How this was decided", None, body)


def _section(label: str, result: CheckResult, cap: int | None, level: str) -> list[str]:
    by = {v: sorted(result.with_verdict(v), key=_severity, reverse=True) for v in Verdict}
    title = verdict_heading(result)
    lines = [f"{level} {title}" + (f": {md_text(label)}" if label else ""), *shift_markdown(result)]
    lines += ["", count_line(result)]
    if result.baseline_source:
        lines += ["", f"Baseline: {md_prose(result.baseline_source)}."]
    if any(c.unit in COUNT_UNITS for c in result.comparisons):
        lines += ["", f"ℹ️ {NOT_TIMES}"]
        for line in (left_out_line(result.current), informational_line(result.current)):
            if line is not None:
                lines += ["", f"ℹ️ {md_prose(line)}"]
    if result.machine_mismatch and result.baseline is not None:
        lines += [
            "",
            f"⚠️ **Cross-machine comparison**: baseline from machine {md_code(result.baseline.machine.fingerprint)}, "
            f"current from {md_code(result.current.machine.fingerprint)}; differences may be the hardware.",
        ]
    if by[Verdict.REGRESSED]:
        lines += _regressions(by[Verdict.REGRESSED], cap)
    lines += hint_lines(result.hints)
    broken = [b for b in result.budgets if not b.ok]
    if broken:
        shown = broken if cap is None else broken[:cap]
        lines += [
            "",
            "**Over budget**",
            "",
            *_table(["Budget", "Limit", "Current", "Status", "Note"], _budget_rows(shown), len(broken)),
        ]
    lines += comment_where(result.explanations, cap)
    lines += _classes(result, by, cap)
    lines += _how(result, cap)
    return lines


def _render(sections: Sequence[tuple[str, CheckResult]], cap: int | None) -> str:
    lines: list[str] = []
    level = "##" if len(sections) == 1 else "###"
    if len(sections) != 1:
        failed = sum(r.failed for _, r in sections)
        head = f"❌ {failed} of {len(sections)} failed." if failed else f"✅ No regression in {len(sections)} check(s)."
        lines += ["## Performance check", "", head]
    for label, result in sections:
        if lines:
            lines.append("")
        lines += _section(label, result, cap, level)
    return "\n".join(lines) + "\n"


def render_comment(checks: CheckResult | Sequence[tuple[str, CheckResult]], *, max_bytes: int = MAX_BYTES) -> str:
    """The compact comment for one check, or for several labelled ones; at most ``max_bytes`` UTF-8 bytes."""
    sections = [("", checks)] if isinstance(checks, CheckResult) else list(checks)
    text = ""
    for cap in _CAPS:
        text = _render(sections, cap)
        if _size(text) <= max_bytes:
            return text
    # pathological (enormous names): keep the verdict lines and cut at a line boundary
    notice = "\n… comment truncated to fit; see the full report.\n"
    room = max_bytes - _size(notice)
    kept: list[str] = []
    used = 0
    for line in text.splitlines():
        cost = _size(line) + 1
        if used + cost > room:
            break
        kept.append(line)
        used += cost
    unclosed = sum(line == "<details>" for line in kept) - sum(line == "</details>" for line in kept)
    closing = "".join("\n</details>\n" for _ in range(unclosed))
    while kept and used + _size(closing) > room:
        used -= _size(kept.pop()) + 1
        unclosed = sum(line == "<details>" for line in kept) - sum(line == "</details>" for line in kept)
        closing = "".join("\n</details>\n" for _ in range(unclosed))
    return "\n".join(kept) + notice + closing

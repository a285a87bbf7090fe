"""Where it went: the differential profile of a regressed stage, in the Markdown report and
the pull-request comment (the HTML report draws its flame graph, :mod:`perfgate.report.flame`).

Per :class:`~perfgate.core.profiles.StageExplanation`: what was profiled and the stage's
profiled cost per call on each side, then either the table of its largest own changes
(named functions first, bold; the others marked "within the A/A spread", or "under 10% of
the change" when that is why they are not named), or, when no function's change stands
above the spread of one revision profiled twice, the explanation's own summary line and no
table, so that nothing is offered as a cause. A stage that could not be profiled has one
line, its reason. The instrument's notes follow, one line each.

Every name (stage, metric, function, file) goes through :mod:`perfgate.report.escape`.
The comment folds each stage in ``<details>`` and keeps the whole part under
:data:`COMMENT_BYTES`, cutting rows and then stages with a "… N more" line.

Internal: not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfgate.core.profiles import FLOOR_Z, MIN_SHARE, Contributor, StageExplanation
from perfgate.report._svg import TIME_UNITS
from perfgate.report.escape import Markdown, md_cell, md_html, md_prose, md_text
from perfgate.report.formatting import fmt_change

__all__ = [
    "COMMENT_BYTES",
    "comment_where",
    "fmt_cost",
    "fmt_cost_change",
    "hint_lines",
    "markdown_where",
    "ordered",
    "short",
]

COMMENT_BYTES = 4_096  # the comment's "where it went" part, all stages together
HEADER = ("Function", "Where", "Own Δ", "Inclusive Δ", "Share of change")
_COMMENT_ROWS = (5, 3, 1, 0)  # rows per stage tried in the comment, most first
_NAME_CHARS = 60  # a function or stage name in the comment is cut to this many characters
_WHERE_CHARS = 40  # a file and line in the comment keeps its last characters

_SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"))
_TIME_STEPS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _time(seconds: float) -> str:
    size = abs(seconds)
    if size == 0:
        return "0 s"
    for scale, label in _TIME_STEPS:
        if size >= scale * 0.9995:
            return f"{seconds / scale:.3g} {label}"
    return f"{seconds / 1e-9:.3g} ns"


def _count(value: float) -> str:
    size = abs(value)
    for scale, suffix in _SI:
        if size >= scale * 0.9995 and size >= 10_000:
            return f"{value / scale:.3g}{suffix}"
    if size >= 100 or value == round(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def fmt_cost(value: float, unit: str) -> str:
    """A profiled cost in its unit: times scaled (``1.24 ms``, ``830 µs``), counts with a
    thousands separator or k/M/G (``1,234 bytecodes``, ``56.7k instructions``)."""
    if not math.isfinite(value):
        return "—"
    if unit in TIME_UNITS:
        return _time(value * TIME_UNITS[unit])
    shown = _count(value)
    return f"{shown} {unit}" if unit else shown


def fmt_cost_change(value: float, unit: str, scale: float = 0.0) -> str:
    """A signed change of a profiled cost: ``+1.20 ms``, ``-340 instructions``, ``0 s``; a change
    under a billionth of ``scale`` (the stage's cost: a rounding error of the sums) is 0."""
    if abs(value) <= 1e-9 * abs(scale):
        value = 0.0
    shown = fmt_cost(abs(value), unit)
    if value > 0:
        return f"+{shown}"
    if value < 0:
        return f"-{shown}"
    return shown


def short(text: str, limit: int, *, keep_end: bool = False) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (its end kept for a file and line)."""
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :] if keep_end else text[: limit - 1] + "…"


def ordered(explanation: StageExplanation) -> list[Contributor]:
    """The table's rows: the named functions first, each group in the explanation's order."""
    return sorted(explanation.contributors, key=lambda c: not c.named)


def _profiled(e: StageExplanation) -> str:
    """What was profiled and the stage's cost per call on each side (Markdown, data escaped)."""
    pa, pb = e.profiles
    ca, cb = e.calls
    calls = f"{ca:,} calls of the stage each" if ca == cb else f"{ca:,} / {cb:,} calls of the stage each"
    change = "" if e.baseline_total <= 0 else f" ({fmt_change(e.current_total / e.baseline_total - 1.0)})"
    return (
        f"Profiled with {md_text(e.instrument or 'an unnamed instrument')}: {pa} profile(s) of the baseline and "
        f"{pb} of the current revision, {calls}. The stage's profiled cost per call: "
        f"{md_text(fmt_cost(e.baseline_total, e.unit))} → {md_text(fmt_cost(e.current_total, e.unit))}{change}"
        + ("." if e.timed_change is None else f"; its calls timed beside the profiles: {fmt_change(e.timed_change)}.")
    )


def _summary(e: StageExplanation, name_chars: int | None = None) -> str:
    """The explanation's summary line as Markdown (a named function's name cut in the comment)."""
    if not e.named:
        text = e.summary()
        return md_text(text[:1].upper() + text[1:]) + "."
    top = e.named[0]
    line = f"**{_name(top.name, name_chars)}** explains {top.share:.0%} of the change"
    if e.spread_thin:
        line += f". The change is spread thin: the named functions explain {e.explained:.0%} of it"
    elif len(e.named) > 1:
        line += f"; the {len(e.named)} named functions explain {e.explained:.0%} of it together"
    return line + "."


def _name(name: str, limit: int | None) -> str:
    """A function's name as Markdown text; stripped, so that ``**`` around it always makes it bold."""
    name = name.strip() or "(unnamed frame)"
    return md_text(name if limit is None else short(name, limit))


def _cell_name(c: Contributor, limit: int | None, change: float = 0.0) -> Markdown:
    """The name, bold when named; else why not: its part did not move past the floor in the stage's
    direction (within the A/A spread), or it did but its own change is a small share of the stage's."""
    shown = _name(c.name, limit)
    if c.named:
        return Markdown(f"**{shown}**")
    beyond = (c.z if change >= 0 else -c.z) >= FLOOR_Z
    why = f"under {MIN_SHARE:.0%} of the change" if beyond else "within the A/A spread"
    return Markdown(f"{shown} ({why})")


def _share(share: float) -> str:
    return "0%" if abs(share) < 0.005 else f"{share:.0%}"


def _row(e: StageExplanation, c: Contributor, name_chars: int | None, where_chars: int | None) -> list[str]:
    where = c.where if where_chars is None else short(c.where, where_chars, keep_end=True)
    scale = max(e.baseline_total, e.current_total)
    return [
        _cell_name(c, name_chars, e.change),
        where or "—",
        fmt_cost_change(c.own_change, e.unit, scale),
        fmt_cost_change(c.inclusive_change, e.unit, scale),
        _share(c.share),
    ]


def _table(
    e: StageExplanation, rows: int, *, name_chars: int | None = None, where_chars: int | None = None
) -> list[str]:
    shown = ordered(e)[:rows]
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(md_cell(cell) for cell in _row(e, c, name_chars, where_chars)) + " |" for c in shown]
    left = len(e.contributors) - len(shown)
    if left > 0:
        lines += ["", f"… {left} more function(s), see the full report."]
    return lines


_LEGEND = (
    f"Bold: named, its own change is beyond {FLOOR_Z:g} standard errors of the spread of one revision profiled "
    f"twice and at least {MIN_SHARE:.0%} of the stage's change. Own Δ: the change of the function's own cost per "
    "call of the stage; Inclusive Δ: of everything spent while it was on the stack."
)


def _notes(e: StageExplanation) -> list[str]:
    return [f"- ℹ️ {md_prose(note)}" for note in e.notes]


def _markdown_one(e: StageExplanation) -> list[str]:
    lines = ["", f"#### {md_text(e.stage)} ({md_text(e.metric)})", ""]
    if not e.available:
        lines.append(f"Not profiled: {md_prose(e.reason)}.")
    else:
        lines += [_profiled(e), "", _summary(e)]
        if e.named:
            lines += ["", *_table(e, len(e.contributors)), "", _LEGEND]
    if e.notes:
        lines += ["", *_notes(e)]
    return lines


def hint_lines(hints: Sequence[str]) -> list[str]:
    """A check's hints of why a stage moved (:attr:`~perfgate.core.result.CheckResult.hints`), a line each."""
    return [line for h in hints for line in ("", f"ℹ️ {md_prose(h[:1].upper() + h[1:])}.")]


def markdown_where(explanations: Sequence[StageExplanation], cap: int | None = None) -> list[str]:
    """The report's "Where it went" section (no lines without explanations); ``cap`` stages at most."""
    if not explanations:
        return []
    shown = explanations if cap is None else explanations[:cap]
    lines = ["", "### Where it went"]
    for e in shown:
        lines += _markdown_one(e)
    if len(explanations) > len(shown):
        lines += ["", f"… and {len(explanations) - len(shown)} more stages explained (all are in the JSON report)"]
    return lines


# ---- the pull-request comment ---------------------------------------------------------------


def _size(lines: Sequence[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _headline(e: StageExplanation) -> str:
    """The ``<summary>`` of a stage's fold (HTML-escaped: raw HTML is not Markdown)."""
    stage = md_html(short(e.stage, _NAME_CHARS))
    if not e.available:
        return f"Where it went: {stage} — not profiled"
    if not e.named:
        return f"Where it went: {stage} — no function stands above the A/A spread"
    top = e.named[0]
    line = f"Where it went: {stage} — {md_html(short(top.name, _NAME_CHARS))} explains {top.share:.0%}"
    return line + (", spread thin" if e.spread_thin else "")


def _comment_one(e: StageExplanation, rows: int) -> list[str]:
    body: list[str] = []
    if not e.available:
        body.append(f"Not profiled: {md_prose(short(e.reason, 300))}.")
    else:
        body.append(
            f"{md_text(e.metric)}, profiled with {md_text(e.instrument)}: "
            f"{md_text(fmt_cost(e.baseline_total, e.unit))} → {md_text(fmt_cost(e.current_total, e.unit))} per call."
        )
        body += ["", _summary(e, _NAME_CHARS)]
        if e.named and rows:
            body += ["", *_table(e, rows, name_chars=_NAME_CHARS, where_chars=_WHERE_CHARS)]
    if e.notes and rows:
        body += ["", *(f"- ℹ️ {md_prose(short(note, 200))}" for note in e.notes)]
    return ["", "<details>", f"<summary>{_headline(e)}</summary>", "", *body, "", "</details>"]


def comment_where(
    explanations: Sequence[StageExplanation], cap: int | None = None, budget: int = COMMENT_BYTES
) -> list[str]:
    """Each stage folded in ``<details>``, all of them within ``budget`` UTF-8 bytes: rows are cut
    first (5, 3, 1, none), then the stages left are counted in a "… N more" line."""
    if not explanations:
        return []
    shown = list(explanations if cap is None else explanations[:cap])
    lines: list[str] = []
    used = 0
    kept = 0
    for i, e in enumerate(shown):
        more = len(explanations) - i - 1
        reserve = _size(["", f"… {more:,} more stages explained, see the full report."]) if more else 0
        block = next(
            (b for b in (_comment_one(e, r) for r in _COMMENT_ROWS) if used + _size(b) + reserve <= budget), None
        )
        if block is None:
            break
        lines += block
        used += _size(block)
        kept += 1
    left = len(explanations) - kept
    if left:
        lines += ["", f"… {left:,} more stages explained, see the full report."]
    return lines

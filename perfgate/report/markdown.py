"""The Markdown report of a check, shaped after the original specification's example report.

Sections, most severe first: regressions (the original specification's table and detail sentences), over
budget, inconclusive, improvements, unchanged, new/missing, then the statistics of every
comparison. However many metrics there are, the report stays under :data:`MAX_CHARS`
(GitHub's comment limit is 65,536): rows are sorted by size of change and the tail of
each long section is summarised in one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from perfgate.core.compare import BudgetCheck, CheckResult, Comparison, Verdict
from perfgate.core.metrics import Direction
from perfgate.report.environment import environment_markdown
from perfgate.report.escape import Markdown, md_cell, md_code, md_prose, md_text
from perfgate.report.format import fmt_change, fmt_ci, fmt_p, fmt_time, fmt_value

__all__ = ["MAX_CHARS", "render_markdown"]

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
    verb = "increased" if (c.change or 0) > 0 else "decreased"
    what = md_text(c.description if c.statistic == "median" else f"{c.description} {c.statistic}")
    size = abs(c.change or 0) * 100
    return f"{what} {verb} by {size:.1f}% ({fmt_value(c.baseline_value)} → {fmt_value(c.current_value)})"


def _threshold_text(regressions: list[Comparison], default: float) -> str:
    values = {c.threshold for c in regressions}
    if len(values) == 1:
        return f">{next(iter(values)) * 100:g}%"
    return f"beyond their thresholds (default {default:g}%)"


def _verdict_block(result: CheckResult, cap: int | None) -> list[str]:
    regs = sorted(result.regressions, key=_severity, reverse=True)
    broken = result.broken_budgets
    lines: list[str] = []
    if regs:
        lines.append("## ❌ Regression Detected")
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
    elif broken:
        lines.append("## ❌ Budget Exceeded")
    else:
        lines.append("## ✅ No Regression Detected")
        compared = len({c.metric for c in result.comparisons if c.verdict not in (Verdict.NEW, Verdict.MISSING)})
        lines += ["", f"No metric degraded beyond its threshold ({compared} metric(s) compared)."]
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
    if any(c.noise_assumed for c in result.comparisons):
        processes = result.current.config.get("processes")
        g = processes if isinstance(processes, int) and processes > 0 else 1
        notes.append(
            f"ℹ️ Run-to-run noise unknown on this machine: assumed σ {p.assumed_raw.sigma(1, g):.0%} for raw times "
            f"and {p.assumed_normalised.sigma(1, g):.0%} for times in units of their reference kernel "
            f"(one run of {g} process(es)); `perfgate calibrate` or `perfgate ab` would decide."
        )
    if any(c.reference for c in result.comparisons):
        notes.append(
            "ℹ️ Stage times are compared in units of a reference kernel of the stage's kind, timed with every block "
            "of its calls (the machine-speed index): Change is that normalised change, the raw one is beside it."
        )
    elif result.baseline is not None and bool(result.baseline.machine_index) != bool(result.current.machine_index):
        side = "baseline" if not result.baseline.machine_index else "current run"
        notes.append(f"ℹ️ The {side} has no machine-speed index: raw times were compared.")
    return notes


def _change(c: Comparison) -> str:
    if c.reference and c.raw_change is not None:
        return f"{fmt_change(c.change)} (raw {fmt_change(c.raw_change)})"
    return fmt_change(c.change)


def _regression_sections(regs: list[Comparison], cap: int | None) -> list[str]:
    if not regs:
        return []
    rows = [[c.label, fmt_value(c.baseline_value), fmt_value(c.current_value), _change(c)] for c in regs]
    lines = ["", "### Regressions", "", *_table(["Metric", "Baseline", "Current", "Change"], rows, cap, "regressions")]
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
        status = "❌ over budget" if not b.ok else ("— not measured" if b.value is None else "✅ ok")
        rows.append(
            [
                b.budget.metric,
                b.budget.statistic,
                f"{op} {fmt_value(b.budget.limit)} {b.unit}",
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
        *_table(["Metric", "Statistic", "Limit", "Current", "n", "Status", "Note"], rows, cap, "budgets"),
    ]


def _stat_row(c: Comparison) -> list[str]:
    return [
        c.label,
        _n(c),
        fmt_value(c.baseline_value),
        fmt_value(c.current_value),
        _change(c),
        fmt_ci(c.ci),
        fmt_p(c.p_value),
        fmt_p(c.p_adjusted),
        f"{c.threshold * 100:g}%",
    ]


_STAT_HEADER = [
    "Metric",
    "n (base/cur)",
    "Baseline",
    "Current",
    "Change",
    "95% CI (worse)",
    "p",
    "p (Holm)",
    "Threshold",
]


def _section(
    title: str,
    items: list[Comparison],
    cap: int | None,
    what: str,
    extra: Callable[[Comparison], list[str]] | None = None,
    extra_header: Sequence[str] = (),
) -> list[str]:
    if not items:
        return []
    rows = [_stat_row(c) + (extra(c) if extra else []) for c in items]
    return ["", f"### {title}", "", *_table([*_STAT_HEADER, *extra_header], rows, cap, what)]


def _decide_text(c: Comparison) -> Markdown:
    if c.required_n is None and c.baseline_value == 0:  # no relative change exists, whatever the samples
        return Markdown("none: a change relative to a baseline of 0 is undefined; set an absolute budget instead")
    if c.required_n is None and c.noise:  # unpaired: the noise of a whole run, which more samples don't touch
        return Markdown("`perfgate ab` (paired), or `perfgate calibrate` from this machine's history")
    if c.required_n is None:
        return Markdown("more samples will not settle it: the change sits at the threshold" if c.reason else "—")
    if c.required_unit == "pairs":  # perfgate ab: more worker pairs, that is a longer time budget
        if c.required_seconds is not None:
            return Markdown(f"about {c.required_n:,} worker pairs: `--time-budget {math.ceil(c.required_seconds):,}`")
        return Markdown(f"about {c.required_n:,} worker pairs: a larger `--time-budget`")
    return Markdown(f"{c.required_n:,} {md_text(c.required_unit)} per side (or `perfgate ab`)")


def _why(c: Comparison) -> str:
    return f"{c.reason}; {c.noise}" if c.noise else c.reason


def _conditions(result: CheckResult, cap: int | None) -> list[str]:
    """What disturbed the current run, and which metrics were too noisy for their threshold.

    A metric is flagged unstable when its robust coefficient of variation exceeds a third of
    its threshold on either side (as ``pyperf check`` and ``bencher noise`` warn).
    """
    env = result.current.config.get("environment")
    unstable = []
    # an interleaved A/B run tests block and pair ratios, not the spread of its pooled samples
    for c in [] if "ab" in result.current.config else result.comparisons:
        if c.statistic != "median" or c.baseline is None or c.current is None:
            continue
        cv = max(c.baseline.cv, c.current.cv)
        if c.threshold > 0 and cv > c.threshold / 3:
            unstable.append((cv, c))
    index = _index_line(result)
    if not unstable and not isinstance(env, dict) and not index:
        return []
    lines = ["", "### Measurement conditions", ""]
    if isinstance(env, dict):
        parts = []
        if "load_avg_1m_start" in env:
            parts.append(f"load average {md_text(env['load_avg_1m_start'])} → {md_text(env.get('load_avg_1m_end'))}")
        if "other_processes_cpu_pct" in env:
            parts.append(f"other processes used {md_text(env['other_processes_cpu_pct'])}% of the CPU")
        if "steal_pct" in env:
            parts.append(f"steal {md_text(env['steal_pct'])}%")
        if env.get("governor"):
            parts.append(f"governor {md_text(env['governor'])}")
        if parts:
            lines.append("Current run: " + ", ".join(parts) + ".")
    processes = result.current.config.get("processes")
    if isinstance(processes, int) and processes > 1:
        lines.append(f"Measured in {processes} worker processes; the spread between them is part of the test.")
    if index:
        lines.append(index)
    if unstable:
        unstable.sort(key=lambda t: t[0], reverse=True)
        shown = unstable if cap is None else unstable[:cap]
        lines += [
            "",
            "Unstable metrics (robust CV above a third of the threshold): "
            + ", ".join(f"{md_text(c.metric)} {cv:.0%}" for cv, c in shown)
            + ". Run more worker processes (`perfgate bench --processes N` or `--time-budget S`) "
            "or compare interleaved (`perfgate ab`).",
        ]
    return lines


def _index_line(result: CheckResult) -> str:
    """The machine-speed index of both runs: how much slower or faster the machine itself was."""
    base, cur = result.baseline, result.current
    if base is None or not base.machine_index or not cur.machine_index:
        return ""
    parts = [
        f"{kind} {base.machine_index[kind] * 1e3:.3g} → {cur.machine_index[kind] * 1e3:.3g} ms "
        f"({fmt_change(cur.machine_index[kind] / base.machine_index[kind] - 1.0)})"
        for kind in sorted(set(base.machine_index) & set(cur.machine_index))
    ]
    return "Machine-speed index (reference kernel times, baseline → current): " + ", ".join(parts) + "."


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
    lines = ["# Performance Regression Check", "", *_verdict_block(result, cap), *_notes(result)]
    lines += _regression_sections(by[Verdict.REGRESSED], cap)
    lines += _budget_section(result.budgets, cap)
    lines += _section(
        "Inconclusive",
        by[Verdict.INCONCLUSIVE],
        cap,
        "inconclusive metrics",
        extra=lambda c: [_why(c), _decide_text(c)],
        extra_header=["Why", "Samples that would decide"],
    )
    lines += _section("Improvements", by[Verdict.IMPROVED], cap, "improvements")
    lines += _section("Unchanged", by[Verdict.UNCHANGED], cap, "unchanged metrics")
    lines += _section("Informational", by[Verdict.INFORMATIONAL], cap, "informational metrics")
    other = by[Verdict.NEW] + by[Verdict.MISSING]
    if other:
        rows = [
            [
                c.label,
                c.verdict.value,
                fmt_value(c.baseline_value if c.verdict is Verdict.MISSING else c.current_value),
                c.reason,
            ]
            for c in other
        ]
        lines += [
            "",
            "### New and missing metrics",
            "",
            *_table(["Metric", "Status", "Median", "Note"], rows, cap, "metrics"),
        ]
    lines += _section("Regression statistics", by[Verdict.REGRESSED], cap, "regressions")
    lines += _conditions(result, cap)
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

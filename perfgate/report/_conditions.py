"""The "Measurement conditions" section of the Markdown report: what disturbed the current
run, how fast the machine itself was (the machine-speed index), which metrics were too noisy
for their threshold."""

from __future__ import annotations

from perfgate.core.compare import CheckResult
from perfgate.report.escape import md_text
from perfgate.report.formatting import fmt_change

__all__ = ["conditions", "index_line"]


def conditions(result: CheckResult, cap: int | None) -> list[str]:
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
    index = index_line(result)
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
            *([""] if lines[-1] else []),
            "Unstable metrics (samples spread by more than a third of the threshold around their median): "
            + ", ".join(f"{md_text(c.metric)} {cv:.0%}" for cv, c in shown)
            + ". Run more worker processes (`perfgate bench --processes N` or `--time-budget S`) "
            "or compare interleaved (`perfgate ab`).",
        ]
    return lines


def index_line(result: CheckResult) -> str:
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

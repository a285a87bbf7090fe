"""The report's first word on gated metrics the current run lacks.

A metric in the baseline, or under a budget, that the current run did not measure fails
the check (or makes it refuse to decide, ``missing_metric = "refuse"``); a reader must see
that before anything else, since every other section is silent about what was not measured.
"""

from __future__ import annotations

from perfgate.core.result import CheckResult
from perfgate.report.escape import md_text

__all__ = ["missing_markdown"]

_SHOWN = 20


def missing_markdown(result: CheckResult) -> list[str]:
    """Markdown lines for the top of the report (none when nothing gated is missing)."""
    if not result.missing:
        return []
    names = ", ".join(md_text(n) for n in result.missing[:_SHOWN])
    if len(result.missing) > _SHOWN:
        names += f" and {len(result.missing) - _SHOWN} more"
    if result.refused:
        outcome = 'the check refuses to decide without them (exit 2, `missing_metric = "refuse"`)'
    else:
        outcome = 'the check fails (exit 1, `missing_metric = "fail"`)'
    return [
        "",
        f"> ❌ **Gated metric(s) not measured in this run**: {names}. They are in the baseline or under a "
        f"budget, so {outcome}. Measure them again, or remove them from the baseline and the budgets.",
    ]

"""The run's common shift in every report: one line that says what moved together and why
the check did or did not decide it (:mod:`perfgate.core.decision._common_shift`).

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

from typing import Any

from perfgate.core.result import CheckResult

__all__ = ["shift_json", "shift_markdown", "shift_terminal"]


def shift_markdown(result: CheckResult) -> list[str]:
    """Markdown lines for the top of the report (none unless the whole run shifted)."""
    shift = result.common_shift
    if shift is None or not (shift.regressed or shift.ambiguous):
        return []
    if shift.regressed:
        return ["", f"> ❌ **The whole run regressed**: {shift.sentence()} (exit 1)."]
    return ["", f"> ⚠️ **Could not decide**: {shift.sentence()} (exit 2)."]


def shift_terminal(result: CheckResult) -> str:
    """The terminal's line, plain text ("" unless the whole run shifted)."""
    shift = result.common_shift
    if shift is None or not (shift.regressed or shift.ambiguous):
        return ""
    return ("✗ " if shift.regressed else "? could not decide: ") + shift.sentence()


def shift_json(result: CheckResult) -> dict[str, Any] | None:
    shift = result.common_shift
    if shift is None:
        return None
    return {
        "metrics": shift.metrics,
        "worse": shift.worse,
        "ci": list(shift.ci),
        "p_value": shift.p_value,
        "alpha": shift.alpha,
        "threshold": shift.threshold,
        "decided_by": shift.decided_by or None,
        "verdict": "regressed" if shift.regressed else "ambiguous" if shift.ambiguous else "none",
    }

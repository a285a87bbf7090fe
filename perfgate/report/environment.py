"""The software that changed between the baseline and the current run, for every report format.

A torch, numpy or Python upgrade is compared like any other change (the machine fingerprint
is hardware only, :mod:`perfgate.core.machine`); the reports say it happened, so a reader
knows what else changed besides the code.

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

from typing import Any

from perfgate.core.compare import CheckResult
from perfgate.core.machine import SoftwareChange, describe_software_changes, software_changes
from perfgate.report.escape import md_text

__all__ = ["environment_changes", "environment_json", "environment_markdown", "environment_text"]


def environment_changes(result: CheckResult) -> tuple[SoftwareChange, ...]:
    """What differs between the two runs' ``software`` records (nothing without a baseline)."""
    if result.baseline is None:
        return ()
    return software_changes(result.baseline.software, result.current.software)


def environment_text(result: CheckResult) -> str:
    """``"Environment changed: torch 2.13.0 → 2.14.0"`` (plain text, unescaped), or ``""``."""
    return describe_software_changes(environment_changes(result))


def environment_markdown(result: CheckResult) -> list[str]:
    """The Markdown lines (a paragraph) naming the changes, or none."""
    changes = environment_changes(result)
    if not changes:
        return []
    parts = [f"{md_text(c.name)} {md_text(c.baseline)} → {md_text(c.current)}" for c in changes]
    return ["", "**Environment changed** (baseline → current): " + ", ".join(parts) + "."]


def environment_json(result: CheckResult) -> list[dict[str, Any]]:
    """``[{"name": "torch", "baseline": "2.13.0", "current": "2.14.0"}, …]``."""
    return [{"name": c.name, "baseline": c.baseline, "current": c.current} for c in environment_changes(result)]

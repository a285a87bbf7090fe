"""Inconclusive metrics of a perfgate JSON report as GitHub warning annotations.

``python annotate.py MODEL REPORT.json`` prints one ``::warning`` line per inconclusive
metric (at most 20, then a count), naming what would decide it, so a check that passed
without deciding everything is visible in the pull request's checks, not only in the report.
A run-wide shift that nothing could tell from the machine's is one more warning.
Prints nothing for a report it cannot read: the gate step reports that failure itself.
"""

from __future__ import annotations

import json
import sys

_SHOWN = 20


def _escape(text: str) -> str:
    # workflow commands end at a new line; % , and : are escaped as GitHub documents
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _decide_text(c: dict) -> str:
    need, unit, seconds = c.get("required_n"), c.get("required_unit") or "samples", c.get("required_seconds")
    if need:
        extra = f" (about {seconds:.0f} s)" if isinstance(seconds, int | float) else ""
        return f"about {need} {unit} per side would decide it{extra}"
    return "more measurements would decide it"


def annotations(model: str, report: dict) -> list[str]:
    lines = []
    inconclusive = [c for c in report.get("comparisons", []) if c.get("verdict") == "inconclusive"]
    for c in inconclusive[:_SHOWN]:
        label = c["metric"] if c.get("statistic") in (None, "median") else f"{c['metric']} ({c['statistic']})"
        text = f"{model}: {label} inconclusive: {c.get('reason') or 'not decided'}; {_decide_text(c)}"
        lines.append(f"::warning title=perfgate inconclusive::{_escape(text)}")
    if len(inconclusive) > _SHOWN:
        more = f"{model}: {len(inconclusive) - _SHOWN} more, in the report"
        lines.append(f"::warning title=perfgate inconclusive::{more}")
    shift = report.get("common_shift") or {}
    if shift.get("verdict") == "ambiguous":
        text = f"{model}: the whole run moved by {shift['worse']:+.0%}: the code or the machine"
        lines.append(f"::warning title=perfgate could not decide::{_escape(text)}")
    return lines


def main(argv: list[str]) -> int:
    model, path = argv[1], argv[2]
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        return 0
    for line in annotations(model, report):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

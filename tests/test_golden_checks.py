"""``perfgate check`` on the committed run files, end to end: its Markdown report, JSON report and
pull-request comment stay byte-identical (golden files under ``tests/golden/check``).

They pin what a user sees when the code is moved around without meaning to change a result. To
refresh them after an intended change: run with PERFGATE_REFRESH_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from perfgate.cli import main

RUNS = Path(__file__).parent / "data" / "runs"
GOLDEN = Path(__file__).parent / "golden" / "check"

# (baseline, current, the exit status the check gives)
PAIRS = [
    ("seed_flat_dqn", "v1_dqn", 1),
    ("v1_dqn", "v2_dqn", 1),
    ("v2_dqn", "v3_dqn", 1),
    ("seed_flat_dqn", "v3_dqn", 1),
    ("v3_dqn", "v3_dqn", 0),
    # the demo's two verdicts (``make demo``, scripts/demo.sh): DQN in 4 worker processes on this
    # machine, 120 calls of each process kept per stage; the same code again passes, feature
    # extraction doing 30 % more work (scripts/demo_slower_features.py) is named, exit 1
    ("demo_baseline", "demo_unchanged", 0),
    ("demo_baseline", "demo_slower", 1),
]


@pytest.mark.parametrize(("baseline", "current", "status"), PAIRS, ids=[f"{b}-{c}" for b, c, _ in PAIRS])
def test_check_reports_are_byte_identical(tmp_path, monkeypatch, baseline, current, status):
    for name in {baseline, current}:
        shutil.copy(RUNS / f"{name}.json", tmp_path / f"{name}.json")
    monkeypatch.chdir(tmp_path)  # relative paths: the reports name the files, not where the test ran
    code = main(
        [
            "check",
            "--baseline", f"{baseline}.json",
            "--current", f"{current}.json",
            "--allow-machine-mismatch",
            "--output", "report.md",
            "--json", "report.json",
            "--comment", "comment.md",
            "--no-notify",
            "--quiet",
        ]
    )  # fmt: skip
    assert code == status
    for produced, suffix in (("report.md", "md"), ("report.json", "json"), ("comment.md", "comment.md")):
        golden = GOLDEN / f"{baseline}__{current}.{suffix}"
        text = (tmp_path / produced).read_bytes()
        if os.environ.get("PERFGATE_REFRESH_GOLDEN"):
            golden.write_bytes(text)
        assert text == golden.read_bytes(), f"{golden.name} changed"

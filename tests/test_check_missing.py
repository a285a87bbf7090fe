"""`perfgate check` when a gated metric went missing from the current run: never exit 0.

Regression for the green budget of a removed stage: the budget said "not measured in this
run" and the check passed.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfgate.cli import main
from tests.conftest import SEED_BASELINE

MEASURED = ("dbn_load_time_ms", "feature_extraction_time_ms", "training_step_time_ms", "memory_usage_mb")


def _write(path: Path, doc: dict[str, object]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_a_budgeted_metric_that_goes_missing_does_not_exit_0(tmp_path: Path) -> None:
    kept = {k: v for k, v in SEED_BASELINE.items() if k in MEASURED or not k.endswith(("_ms", "_us", "_sec", "_mb"))}
    base = _write(tmp_path / "base.json", kept)  # neither file has inference: only its budget gates it
    cur = _write(tmp_path / "cur.json", kept)
    config = tmp_path / "perfgate.toml"
    config.write_text("[budgets.dqn]\ninference_latency_us = { p99 = 50.0 }\n")
    report, as_json = tmp_path / "r.md", tmp_path / "r.json"
    args = ["check", "--baseline", str(base), "--current", str(cur), "--config", str(config), "--quiet"]
    assert main([*args, "--output", str(report), "--json", str(as_json)]) == 1
    assert "inference_latency_us" in report.read_text().split("\n## ")[0]  # said at the top
    assert json.loads(as_json.read_text())["missing"] == ["inference_latency_us"]
    config.write_text('missing_metric = "refuse"\n[budgets.dqn]\ninference_latency_us = { p99 = 50.0 }\n')
    assert main(args) == 2
    config.write_text("[budgets.dqn]\nmemory_usage_mb = { max = 500.0 }\n")
    assert main(args) == 0  # the same files, every gated metric measured


def test_a_baseline_metric_missing_now_exits_1(tmp_path: Path) -> None:
    base = _write(tmp_path / "base.json", SEED_BASELINE)
    cur = _write(tmp_path / "cur.json", {k: v for k, v in SEED_BASELINE.items() if k != "inference_latency_us"})
    (tmp_path / "perfgate.toml").write_text("threshold = 10.0\n")
    config = tmp_path / "perfgate.toml"
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--config", str(config), "--quiet"]) == 1

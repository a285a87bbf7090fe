"""Terminal output: names are printed as plain text. rich markup in a metric name is not
interpreted, ANSI escapes and new lines are shown escaped, and nothing crashes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfgate.cli import main
from tests.safety.hostile import HOSTILE


def _doc(factor: float, when: str, names: list[str]) -> dict:
    rng = np.random.default_rng(3)
    return {
        "schema_version": 1,
        "suite": "pipeline",
        "model": "dqn",
        "created_at": when,
        "git": {"commit": "[/]\x1b[2J", "branch": "main"},
        "machine": {"fingerprint": "m[/]"},
        "metrics": {
            n: {
                "unit": "[/]ms",
                "direction": "lower_is_better",
                "samples": [float(v) for v in (10 + i) * factor * rng.lognormal(0, 0.01, 20)],
            }
            for i, n in enumerate(names)
        },
    }


@pytest.fixture
def hostile_runs(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "base.json"
    cur = tmp_path / "cur.json"
    base.write_text(json.dumps(_doc(1.0, "2026-11-29T18:00:00Z", HOSTILE)))
    cur.write_text(json.dumps(_doc(1.5, "2026-11-29T19:00:00Z", HOSTILE)))
    return base, cur


def _clean(text: str) -> None:
    assert "Traceback" not in text and "internal error" not in text
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\x00" not in text


def test_check_prints_hostile_names_as_text(hostile_runs, tmp_path, capsys):
    """Regression: "[/]" in a metric name crashed check (exit 2 with a traceback)."""
    base, cur = hostile_runs
    quiet = tmp_path / "perfgate.toml"  # simulated samples: a machine without run-to-run noise
    quiet.write_text("[tool.perfgate.assumed_noise]\nphase_pct = 0\nprocess_pct = 0\nmemory_pct = 0\n")
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--config", str(quiet)]) == 1
    out, err = capsys.readouterr()
    _clean(out + err)
    assert "[/]" in err and "[link=http://evil.example]click[/link]" in err
    assert "\\x1b[31mred" in err  # the escape, shown
    assert "x\\x0a## Injected heading" in err


def test_history_prints_hostile_names_as_text(hostile_runs, tmp_path, capsys):
    """Regression: "[/]" in a metric name crashed history."""
    base, cur = hostile_runs
    store = f"sqlite:///{tmp_path / 'h.db'}"
    assert main(["record", str(base), str(cur), "--store", store]) == 0
    capsys.readouterr()
    assert main(["history", "--model", "dqn", "--store", store, "--changepoints"]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
    assert "[/]" in out and "[bold red]styled[/]" in out
    assert main(["history", "--model", "dqn", "--store", store, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {m["metric"] for m in doc["metrics"]} == set(HOSTILE)  # JSON keeps the names exact


def test_baseline_show_prints_hostile_names_as_text(hostile_runs, tmp_path, capsys):
    base, _cur = hostile_runs
    folder = tmp_path / "baselines"
    assert main(["baseline", "save", str(base), "--dir", str(folder)]) == 0
    assert main(["baseline", "show", "--model", "dqn", "--dir", str(folder)]) == 0
    out, err = capsys.readouterr()
    _clean(out + err)
    assert "[/]" in out

"""Strict configuration: a broken file found by discovery is an error, never skipped; budgets
that can never be met are refused; names a check cannot use are warned about by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.cli import main
from tests.safety.procs import one_line_error


def _check(base: Path, cur: Path, *extra: str) -> list[str]:
    return ["check", "--baseline", str(base), "--current", str(cur), *extra]


def test_broken_pyproject_found_by_discovery_is_an_error(tmp_path, seed_files, monkeypatch, capsys):
    """Regression: a malformed pyproject.toml was skipped, its budgets vanished, and the gate passed."""
    base, cur = seed_files
    (tmp_path / "pyproject.toml").write_text("[tool.perfgate\nthreshold = 50\n")
    monkeypatch.chdir(tmp_path)
    assert main(_check(base, cur)) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert "pyproject.toml" in err and "invalid TOML" in err and "--config" in err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"threshold = 10\n\xff\xfe\n", "not UTF-8"),
        (b"tool = 5\n", "'tool' must be a table"),
        (b"[tool]\nperfgate = 5\n", "[tool.perfgate] must be a table"),
        (b"metrics = 5\n", "expected a table"),
        (b"budgets = [1]\n", "expected a table"),
        (b"[metrics.x]\nunit = 'ms'\ndirection = ['a']\n", "direction must be one of"),
        (b"[metrics.x]\nunit = 'ms'\ndirection = 'lower_is_better'\nstatistics = 5\n", "statistics must be"),
        # regression: a statistic perfgate does not compute was a KeyError in the first check that gated on it
        (b"[metrics.x]\nunit = 'ms'\ndirection = 'lower_is_better'\nstatistics = ['p999']\n", "'p999' is not one"),
        (b"[budgets.dqn]\ninference_latency_us = { p99 = -5 }\n", "negative"),
        (b"[budgets.dqn]\nmemory_usage_mb = { min = 10, max = 1 }\n", "empty range"),
    ],
)
def test_bad_configuration_is_a_one_line_error(content, says, tmp_path, seed_files, capsys):
    base, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_bytes(content)
    assert main(_check(base, cur, "--config", str(config))) == 2
    err = capsys.readouterr().err
    one_line_error(err)
    assert says in err and str(config) in err


def test_config_that_is_a_directory_or_missing(tmp_path, seed_files, capsys):
    base, cur = seed_files
    for target, says in (
        (tmp_path, "is a directory"),
        (tmp_path / "nope.toml", "not found"),
        ("", "is a directory"),
    ):  # argparse makes "" the folder "."
        assert main(_check(base, cur, "--config", str(target) if target != "" else "")) == 2
        err = capsys.readouterr().err
        one_line_error(err)
        assert says in err


def test_names_the_check_cannot_use_are_warned_about(tmp_path, seed_files, capsys):
    base, cur = seed_files
    config = tmp_path / "perfgate.toml"
    config.write_text(
        "[thresholds]\ninference_latency_ms = 5\n"  # a typo: the metric is inference_latency_us
        "[budgets.dqn]\ninference_latency_ms = { p99 = 50 }\n"
        "[budgets.dqnn]\ninference_latency_us = { p99 = 50 }\n"
    )
    assert main(_check(base, cur, "--config", str(config))) == 1
    err = capsys.readouterr().err
    assert "thresholds.inference_latency_ms: no metric of that name" in err
    assert "budgets.dqn.inference_latency_ms: the run has no metric" in err
    assert "budgets.dqnn.inference_latency_us: no model 'dqnn'" in err

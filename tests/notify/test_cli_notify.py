"""``perfgate check --notify``: sent after the report, failures on stderr, exit code untouched, no secret shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from tests.conftest import ROOT
from tests.notify.conftest import HOSTILE, SECRET_TOKEN


def _samples(median: float) -> list[float]:
    return [median * (1 + 0.01 * ((i % 7) - 3) / 3) for i in range(30)]


def _runs(tmp_path: Path, factor: float) -> tuple[Path, Path]:
    names = ["training_step_time_ms", *HOSTILE]
    docs = []
    for f, commit in ((1.0, "abc1234"), (factor, "def5678")):
        metrics = {
            n: {"unit": "ms", "direction": "lower_is_better", "samples": _samples((10 + i) * f)}
            for i, n in enumerate(names)
        }
        docs.append({"schema_version": 1, "model": "dqn", "git": {"commit": commit}, "metrics": metrics})
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(docs[0]))
    cur.write_text(json.dumps(docs[1]))
    return base, cur


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "perfgate.toml"
    # a machine without a run-wide phase: every metric 3x slower is then a plain regression (with the
    # assumed phase it would be a whole-run shift nothing tells from the machine's, exit 2)
    quiet = "" if "assumed_noise" in extra else "[tool.perfgate.assumed_noise]\nphase_pct = 0\n"
    path.write_text(
        quiet + "[tool.perfgate.notify]\n"
        'slack_webhook_env = "TEST_SLACK_HOOK"\n'
        'webhook_url_env = "TEST_JSON_HOOK"\n'
        "backoff = 0.0\n"
        "timeout = 2.0\n" + extra
    )
    return path


def _check(tmp_path: Path, factor: float, *flags: str, extra: str = "") -> int:
    base, cur = _runs(tmp_path, factor)
    args = ["check", "--baseline", str(base), "--current", str(cur), "--config", str(_config(tmp_path, extra))]
    args += ["--output", str(tmp_path / "report.md"), "--json", str(tmp_path / "report.json"), *flags]
    return main(args)


@pytest.fixture
def hooks(receiver, monkeypatch):
    monkeypatch.setenv("TEST_SLACK_HOOK", receiver.url)
    monkeypatch.setenv("TEST_JSON_HOOK", receiver.url + "/json")
    return receiver


def test_regression_is_notified_after_the_report(hooks, tmp_path, capsys):
    assert _check(tmp_path, 3.0, "--notify") == 1
    assert (tmp_path / "report.md").exists()
    assert len(hooks.requests) == 2
    slack, generic = hooks.bodies
    assert "performance regression in dqn" in slack["text"]
    assert generic["status"] == "regression" and generic["exit_code"] == 1
    err = capsys.readouterr().err
    assert "perfgate notify: Slack webhook ($TEST_SLACK_HOOK) sent" in err


def test_failing_target_changes_nothing_and_shows_no_secret(hooks, tmp_path, capsys):
    hooks.statuses = [500]
    assert _check(tmp_path, 3.0, "--notify") == 1
    assert len(hooks.requests) == 6  # 3 attempts each, then given up
    out, err = capsys.readouterr()
    assert "failed after 3 attempt(s): the server answered HTTP 500" in err
    for text in (out, err, (tmp_path / "report.md").read_text(), (tmp_path / "report.json").read_text()):
        assert SECRET_TOKEN not in text
        assert "127.0.0.1" not in text


def test_failing_target_on_a_passing_check_still_exits_0(hooks, tmp_path, capsys):
    hooks.statuses = [400]
    # a quiet machine (no run-to-run noise assumed): unchanged runs are unchanged, not inconclusive
    quiet = "[tool.perfgate.assumed_noise]\nphase_pct = 0\nprocess_pct = 0\n"
    code = _check(tmp_path, 1.0, "--notify", extra='on = ["regression", "improvement", "inconclusive"]\n' + quiet)
    assert code == 0
    # nothing changed, so nothing to notify
    assert hooks.requests == []
    base, cur = _runs(tmp_path, 0.7)  # an improvement, notified, and the target refuses it
    args = ["check", "--baseline", str(base), "--current", str(cur), "--config", str(tmp_path / "perfgate.toml")]
    assert main([*args, "--notify", "--quiet"]) == 0
    assert len(hooks.requests) == 2  # 400: no retry
    assert "HTTP 400; not retried" in capsys.readouterr().err


def test_unreachable_target_keeps_exit_code(monkeypatch, closed_port_url, tmp_path, capsys):
    monkeypatch.setenv("TEST_SLACK_HOOK", closed_port_url)
    monkeypatch.delenv("TEST_JSON_HOOK", raising=False)
    assert _check(tmp_path, 3.0, "--notify") == 1
    err = capsys.readouterr().err
    assert "connection failed" in err
    assert "webhook ($TEST_JSON_HOOK) skipped: $TEST_JSON_HOOK is not set" in err
    assert SECRET_TOKEN not in err


def test_not_sent_without_the_flag_unless_enabled(hooks, tmp_path):
    assert _check(tmp_path, 3.0) == 1
    assert hooks.requests == []
    assert _check(tmp_path, 3.0, extra="enabled = true\n") == 1
    assert len(hooks.requests) == 2
    assert _check(tmp_path, 3.0, "--no-notify", extra="enabled = true\n") == 1
    assert len(hooks.requests) == 2


def test_a_bug_in_notifying_never_changes_the_exit_code(hooks, tmp_path, capsys, monkeypatch):
    import perfgate.notify.dispatch as dispatch

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(dispatch, "notify_check", broken)
    assert _check(tmp_path, 3.0, "--notify") == 1
    assert "internal error (RuntimeError)" in capsys.readouterr().err


def test_subprocess_secret_never_printed(receiver, tmp_path):
    receiver.statuses = [503]
    base, cur = _runs(tmp_path, 3.0)
    config = _config(tmp_path, "attempts = 2\n")
    env = {"PATH": "/usr/bin:/bin", "TEST_SLACK_HOOK": receiver.url, "TEST_JSON_HOOK": receiver.url}
    command = [sys.executable, "-m", "perfgate", "check", "--baseline", str(base), "--current", str(cur)]
    proc = subprocess.run(
        [*command, "--config", str(config), "--notify"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "failed after 2 attempt(s)" in proc.stderr
    assert SECRET_TOKEN not in proc.stdout + proc.stderr
    assert len(receiver.requests) == 4

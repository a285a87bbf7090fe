"""``perfgate summary``: one comment body within GitHub's 65,536-character limit, whatever goes in."""

from __future__ import annotations

import subprocess
import sys

import pytest

from perfgate.app.summary import DEFAULT_MARKER, GITHUB_COMMENT_LIMIT, Section, compose, size
from perfgate.cli import main
from perfgate.report.markdown import render_markdown
from tests.ci.conftest import big_result
from tests.conftest import ROOT


def _fits(body: str, limit: int = GITHUB_COMMENT_LIMIT) -> None:
    # every way GitHub might count: characters, UTF-16 code units, UTF-8 bytes
    assert len(body) <= limit
    assert len(body.encode("utf-16-le")) // 2 <= limit
    assert size(body) <= limit


def test_5000_metric_check_comment_fits(tmp_path):
    report = render_markdown(big_result(5000))
    paths = []
    for model in ("dqn", "ppo", "mamba2", "tft"):
        path = tmp_path / f"{model}.md"
        path.write_text(report)
        paths.append(str(path))
    out = tmp_path / "comment.md"
    assert main(["summary", *paths, "--output", str(out)]) == 0
    body = out.read_text()
    _fits(body)
    assert body.startswith(DEFAULT_MARKER + "\n")
    assert body.count("<details open>") == 4  # every model failed: all open
    assert body.count("✂️ *Truncated by perfgate summary") == 4
    assert "## ❌ Regression Detected" in body  # the verdict survives the cut


def test_one_5000_metric_report_with_enormous_names_fits(tmp_path):
    report = render_markdown(big_result(5000, name_length=400))
    path = tmp_path / "dqn.md"
    path.write_text(report)
    out = tmp_path / "comment.md"
    assert main(["summary", str(path), "--output", str(out)]) == 0
    _fits(out.read_text())


def test_a_report_that_fits_passes_whole():
    report = "# Performance Regression Check\n\n## ✅ No Regression Detected\n\nNo metric degraded.\n"
    body = compose([Section("dqn", report)], details_url="https://ci.example/run/7")
    assert body == (
        f"{DEFAULT_MARKER}\n## Performance check\n\n✅ No regression in 1 report(s).\n\n"
        "<details>\n<summary><b>dqn</b>: ✅ No Regression Detected</summary>\n\n"
        "## ✅ No Regression Detected\n\nNo metric degraded.\n\n</details>\n\n"
        "Full reports (HTML, JSON, run files): [workflow run](https://ci.example/run/7).\n"
    )


def test_failing_reports_come_first_and_get_room():
    ok = Section("a_ok", "## ✅ No Regression Detected\n" + "fine\n" * 5000)
    bad = Section("b_bad", "## ❌ Regression Detected\n" + "| row |\n" * 5000)
    body = compose([ok, bad], limit=20_000)
    _fits(body, 20_000)
    assert body.index("b_bad") < body.index("a_ok")
    assert "❌ 1 of 2 report(s) failed or could not decide." in body


def test_short_reports_leave_their_share_to_long_ones():
    short = Section("short", "## ✅ No Regression Detected\nok\n")
    long = Section("long", "## ✅ No Regression Detected\n" + "line\n" * 10_000)
    body = compose([short, long], limit=10_000)
    _fits(body, 10_000)
    assert size(body) > 9_000  # the long one used what the short one left


def test_a_section_without_verdict_counts_as_failed():
    body = compose([Section("tft", "perfgate crashed\n")])
    assert "<details open>" in body and "⚠️ no verdict" in body


def test_labels_are_escaped_and_can_be_given(tmp_path):
    path = tmp_path / "r.md"
    path.write_text("## ✅ No Regression Detected\n")
    out = tmp_path / "c.md"
    assert main(["summary", f"<img src=x>={path}", "--output", str(out)]) == 0
    assert "<b>&lt;img src=x&gt;</b>" in out.read_text()


def test_append_to_the_step_summary(tmp_path):
    path = tmp_path / "dqn.md"
    path.write_text("## ✅ No Regression Detected\n")
    summary = tmp_path / "step_summary"
    summary.write_text("earlier step\n")
    assert main(["summary", str(path), "--append", str(summary)]) == 0
    text = summary.read_text()
    assert text.startswith("earlier step\n" + DEFAULT_MARKER)


def test_no_reports_says_so():
    body = compose([])
    assert "No report was produced" in body


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-chars", "100"], "--max-chars"),
        (["--marker", "a\nb"], "--marker"),
    ],
)
def test_bad_options(tmp_path, capsys, args, says):
    path = tmp_path / "dqn.md"
    path.write_text("## ✅ No Regression Detected\n")
    assert main(["summary", str(path), *args]) == 2
    assert says in capsys.readouterr().err


def test_missing_report_exit_2(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "nope.md")]) == 2
    assert "report not found" in capsys.readouterr().err


def test_subprocess_smoke(tmp_path):
    path = tmp_path / "dqn.md"
    path.write_text("## ❌ Regression Detected\n\n| a | b |\n")
    proc = subprocess.run(
        [sys.executable, "-m", "perfgate", "summary", str(path), "--max-chars", "2000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(DEFAULT_MARKER) and "<details open>" in proc.stdout

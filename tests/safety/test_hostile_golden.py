"""Hostile names through every writer, byte for byte: the Markdown report, the HTML report's
text, the terminal verdict and the Prometheus exposition (golden files in tests/golden/).

To refresh after an intended change: run with PERFGATE_REFRESH_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from perfgate.cli._output import print_verdict
from perfgate.export.latest import RunState
from perfgate.export.prometheus import PerfgateCollector, exposition, make_registry
from perfgate.report.html import render_check_html
from perfgate.report.markdown import render_markdown
from tests.export.conftest import need
from tests.safety.hostile import HOSTILE, benign_names, hostile_result

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
COMMIT = "abc\n# heading <img src=x onerror=alert(1)> [/]"


def _result(names=HOSTILE, commit=COMMIT, fingerprint="fp<b>[/]\x1b[0m", source="file `b<script>.json`"):
    return hostile_result(list(names), commit=commit, fingerprint=fingerprint, source=source)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PERFGATE_REFRESH_GOLDEN"):
        path.write_bytes(text.encode("utf-8"))
    assert text == path.read_bytes().decode("utf-8")


def test_markdown_golden():
    _golden("hostile_report.md", render_markdown(_result()))


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style")

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.text.append(data.strip())


def _html(result) -> _Html:
    parser = _Html()
    parser.feed(render_check_html(result))
    parser.close()
    return parser


def test_html_text_golden_and_no_extra_element():
    hostile = _html(_result())
    benign = _html(_result(benign_names(len(HOSTILE)), "abc123", "fp", "file `b.json`"))
    assert hostile.tags == benign.tags
    _golden("hostile_report.html.txt", "\n".join(hostile.text) + "\n")


def test_terminal_golden():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        print_verdict(_result())
    text = err.getvalue()
    assert "\x1b" not in text and "\r" not in text
    _golden("hostile_terminal.txt", text)


def test_prometheus_golden_and_round_trip():
    prometheus_client = pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    result = _result()
    state = RunState(run=result.current, result=result, budgets=result.policy.budgets_for("dqn"))
    text = exposition(make_registry(PerfgateCollector(lambda: [state], {})))
    assert prometheus_client is not None
    labels = {
        sample.labels.get("metric")
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "metric" in sample.labels
    }
    assert set(HOSTILE) <= labels  # every name survives the exposition exactly, escaped
    _golden("hostile.prom", text)
    promtool = need("promtool", "prometheus")
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr

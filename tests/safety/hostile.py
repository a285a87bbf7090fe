"""Hostile names and the runs that carry them, shared by the output-safety tests.

Each name is something a run file may hold and a careless writer would act on: Markdown
and HTML markup, the comment marker of ``perfgate summary``, rich console markup, ANSI
escapes, new lines, Prometheus exposition syntax.
"""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser
from typing import Any

import numpy as np
from markdown_it import MarkdownIt

from perfgate.core.codec import run_from_dict
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.policy import Budget, Policy

HOSTILE = [
    "x\n## Injected heading",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[click](javascript:alert(1))",
    "![remote](http://evil.example/pixel.png)",
    "```\nfenced\n```",
    "<!-- perfgate-report -->",
    "*bold* _em_ ~~strike~~ $x^2$",
    "a|b||c",
    "&lt;entity&gt; &#60;b&#62;",
    "[/]",
    "[link=http://evil.example]click[/link]",
    "[bold red]styled[/]",
    "\x1b[31mred\x1b[0m\x1b]8;;http://evil.example\x07link\x1b]8;;\x07",
    "tab\tcarriage\rreturn\x00nul\u202eevil",
    'quote"back\\slash{brace}',
    "<details open><summary>forged</summary>",
    "    indented code",
    "> quoted",
    "- item",
    "@org/security-team www.evil.example https://evil.example/x",
]


def _samples(median: float, rng: np.random.Generator, n: int = 20) -> list[float]:
    return [float(v) for v in median * rng.lognormal(0.0, 0.01, n)]


def hostile_result(names: list[str], *, commit: str, fingerprint: str, source: str) -> CheckResult:
    """A check with every verdict section filled, its names, commit, fingerprint and source as given."""
    rng = np.random.default_rng(7)
    factors = [1.5, 0.6, 1.0, 1.04]  # regressed, improved, unchanged, inconclusive-ish
    base: dict[str, Any] = {}
    cur: dict[str, Any] = {}
    for i, name in enumerate(names):
        median = 10.0 + i
        spec = {"unit": "ms", "direction": "lower_is_better"}
        base[name] = {**spec, "samples": _samples(median, rng)}
        cur[name] = {**spec, "samples": _samples(median * factors[i % len(factors)], rng)}

    def doc(metrics: dict[str, Any], fp: str, when: str) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "suite": "pipeline",
            "model": "dqn",
            "created_at": when,
            "git": {"commit": commit, "branch": commit},
            "machine": {"fingerprint": fp},
            "config": {"environment": {"governor": commit, "load_avg_1m_start": commit, "load_avg_1m_end": 1.0}},
            "metrics": metrics,
        }

    baseline = run_from_dict(doc(base, fingerprint, "2026-11-29T18:00:00Z"))
    current = run_from_dict(doc(cur, fingerprint + "-other", "2026-11-29T19:00:00Z"))
    budgets = tuple(Budget(model="dqn", metric=name, statistic="p99", limit=1.0) for name in names[:3])
    policy = Policy.quiet(budgets=budgets)  # simulated samples: no run-to-run noise assumed
    return compare_runs(baseline, current, policy, allow_machine_mismatch=True, baseline_source=source)


def benign_names(n: int) -> list[str]:
    """Names of the same count that no writer could misread (their order as the hostile ones)."""
    return [f"metric{i:02d}" for i in range(n)]


_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


class Elements(HTMLParser):
    """What a rendered report is made of: its tags, comments, link targets and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.comments: list[str] = []
        self.text: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        self.hrefs += [v or "" for k, v in attrs if k in ("href", "src")]

    def handle_comment(self, data):
        self.comments.append(data)

    def handle_data(self, data):
        self.text.append(data)


def rendered(markdown: str) -> Elements:
    """``markdown`` rendered as GitHub renders it (CommonMark, tables, raw HTML allowed), then parsed."""
    parser = Elements()
    parser.feed(_MD.render(markdown))
    parser.close()
    return parser

"""The Markdown report and its compact comment form: the original specification's example byte for
byte (golden file), one sign convention, one table per verdict class, advice a person can act on,
size limits.

To refresh the golden files after an intended change: run with PERFGATE_REFRESH_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from markdown_it import MarkdownIt

from perfgate.cli import main
from perfgate.core.advice import measured_seconds, repetitions, seconds_to_decide
from perfgate.core.codec import run_from_dict
from perfgate.core.compare import CheckResult, Verdict, compare_runs
from perfgate.core.policy import Budget, Policy
from perfgate.report.comment import MAX_COLUMNS, render_comment
from perfgate.report.formatting import fmt_duration
from perfgate.report.markdown import MAX_CHARS, render_markdown
from tests.ci.conftest import big_result
from tests.conftest import SEED_BASELINE, SEED_CURRENT
from tests.safety.hostile import HOSTILE, benign_names, hostile_result

GOLDEN = Path(__file__).parents[1] / "golden"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PERFGATE_REFRESH_GOLDEN"):
        path.write_bytes(text.encode("utf-8"))
    assert text == path.read_bytes().decode("utf-8")


def _original_spec_report() -> str:
    base = run_from_dict(SEED_BASELINE, source="dqn_baseline.json")
    cur = run_from_dict(SEED_CURRENT, source="dqn_current.json")
    return render_markdown(compare_runs(base, cur, Policy.quiet(), baseline_source="file `dqn_baseline.json`"))


def test_original_spec_example_golden():
    """The original specification's example report is the skeleton: its heading, sentence, table and details."""
    text = _original_spec_report()
    _golden("original_spec_example.md", text)
    assert "| Metric | Baseline | Current | Change | Effect |" in text  # no empty CI or p column for one sample
    assert "| dbn_load_time_ms | 0.70 | 0.81 | +15.7% | slower |" in text


def _runs(n_metrics: int, n: int = 50):
    rng = np.random.default_rng(3)

    def doc(scale_of):
        return {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                f"stage_{i:04d}_with_a_rather_long_descriptive_name_time_ms": {
                    "unit": "ms",
                    "direction": "lower_is_better",
                    "samples": list(100 * scale_of(i) * rng.lognormal(0, 0.02, n)),
                }
                for i in range(n_metrics)
            },
        }

    return run_from_dict(doc(lambda i: 1.0)), run_from_dict(doc(lambda i: 1.0 + (i % 7) * 0.05))


def test_report_stays_under_the_limit_with_thousands_of_metrics():
    base, cur = _runs(1200)
    result = compare_runs(base, cur, Policy.quiet())
    text = render_markdown(result)
    assert len(text) <= MAX_CHARS
    assert text.startswith("# Performance Regression Check\n\n## ❌ Regression Detected")
    assert "more regressions" in text
    # largest first: the first regression row has the largest change
    first_row = text.split("### Regressions")[1].split("\n")[4]
    largest = max(c.change for c in result.regressions)
    assert f"| {largest * 100:+.1f}% | slower |" in first_row


def test_sections_for_each_verdict():
    rng = np.random.default_rng(0)

    def samples(m, n=80, cv=0.02):
        return list(m * rng.lognormal(0, cv, n))

    base = run_from_dict(
        {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                "training_step_time_ms": {"samples": samples(100)},
                "throughput_samples_per_sec": {"samples": samples(1000)},
                "feature_extraction_time_ms": {"samples": samples(10)},
                "dbn_load_time_ms": {"samples": samples(1.0, n=3, cv=0.3)},
                "gpu_utilization_pct": {"samples": samples(50)},
                "memory_usage_mb": {"samples": samples(100)},
            },
        }
    )
    cur = run_from_dict(
        {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                "training_step_time_ms": {"samples": samples(130)},
                "throughput_samples_per_sec": {"samples": samples(1300)},
                "feature_extraction_time_ms": {"samples": samples(10)},
                "dbn_load_time_ms": {"samples": samples(1.3, n=3, cv=0.3)},
                "gpu_utilization_pct": {"samples": samples(60)},
                "inference_latency_us": {"samples": samples(40, n=400)},
            },
        }
    )
    policy = Policy.quiet(budgets=(Budget(model="dqn", metric="inference_latency_us", statistic="p99", limit=30.0),))
    text = render_markdown(compare_runs(base, cur, policy))
    for title in (
        "### Regressions",
        "### Details",
        "### Over Budget",
        "### Inconclusive",
        "### Improvements",
        "### Unchanged",
        "### Informational",
        "### New and missing metrics",
    ):
        assert text.count(title) == 1, title
    assert "Regression statistics" not in text  # the regressions' statistics are in their own table
    assert "Throughput increased by" not in text  # an improvement is not a regression sentence
    inconclusive = text.split("### Inconclusive")[1].split("###")[0]
    assert "dbn_load_time_ms" in inconclusive
    assert re.search(r"about \d[\d,.]* (s|min|h) of measurement per side", inconclusive), inconclusive
    assert "samples per side" not in text and "processes per side" not in text


def _section(text: str, title: str) -> str:
    return text.split(f"### {title}\n")[1].split("\n### ")[0].split("\n**Baseline**")[0]


def _row(text: str, title: str, metric: str) -> list[str]:
    """The cells of ``metric``'s row in section ``title``, by header."""
    lines = [line for line in _section(text, title).splitlines() if line.startswith("| ")]
    header = [h.strip() for h in lines[0].strip("|").split(" | ")]
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if cells[0] == metric:
            return dict(zip(header, cells, strict=True))  # type: ignore[return-value]
    raise AssertionError(f"{metric} not in {title}")


def _mixed_result() -> CheckResult:
    """The case of the complaint: a throughput change, an inconclusive memory rise over its
    threshold, a significant rise in training memory below it, and a faster stage."""
    rng = np.random.default_rng(11)

    def m(level, cv, n=40, unit="ms", direction="lower_is_better"):
        return {"unit": unit, "direction": direction, "samples": list(level * rng.lognormal(0, cv, n))}

    def doc(throughput, memory, training_memory, step):
        return run_from_dict(
            {
                "schema_version": 1,
                "model": "dqn",
                "metrics": {
                    "throughput_samples_per_sec": m(throughput, 0.02, unit="samples/s", direction="higher_is_better"),
                    "memory_usage_mb": m(memory, 0.25, n=5, unit="MB"),
                    "training_memory_mb": m(training_memory, 0.005, unit="MB"),
                    "training_step_time_ms": m(step, 0.02),
                },
            }
        )

    return compare_runs(doc(1000, 100, 50, 100), doc(700, 115.5, 51.5, 60), Policy.quiet())


def test_one_sign_convention_with_a_word():
    """Regression for a report that showed throughput as +48.6% under Change and [-71.2%, -29.1%] under its interval."""
    result = _mixed_result()
    text = render_markdown(result)
    (tp,) = [c for c in result.comparisons if c.metric == "throughput_samples_per_sec"]
    assert tp.verdict is Verdict.REGRESSED and tp.change is not None and tp.change < 0
    row = _row(text, "Regressions", "throughput_samples_per_sec")
    assert row["Change"].startswith("-") and row["Effect"] == "lower throughput"
    lo, hi = (float(x) for x in re.findall(r"([+-]\d+\.\d)%", row["95% CI"]))
    assert lo < tp.change * 100 < hi < 0  # the interval brackets the change, in its sign
    faster = _row(text, "Improvements", "training_step_time_ms")
    assert faster["Change"].startswith("-") and faster["Effect"] == "faster"
    assert re.fullmatch(r"\\\[-\d+\.\d%, -\d+\.\d%\\\]", faster["95% CI"]), faster  # escaped brackets


def test_verdict_line_counts_inconclusive_metrics():
    """Regression: "No metric degraded beyond its threshold" above an inconclusive +15.5 % memory rise."""
    base, cur = (
        run_from_dict({"schema_version": 1, "model": "dqn", "metrics": {"memory_usage_mb": {"samples": s}}})
        for s in ([100.0, 80.0, 125.0, 95.0, 110.0], [118.0, 92.0, 140.0, 109.0, 125.0])
    )
    result = compare_runs(base, cur, Policy.quiet())
    (c,) = result.comparisons
    assert c.verdict is Verdict.INCONCLUSIVE and c.worse is not None and c.worse > 0.10
    text = render_markdown(result)
    assert "## ✅ No Regression Detected" in text
    assert "No metric degraded beyond its threshold" not in text
    assert "1 metric(s) could not be decided" in text and "1 metric(s) compared: 1 inconclusive." in text
    comment = render_comment(result)
    assert "1 metric(s) compared: 1 inconclusive." in comment.splitlines()[2]


def test_p_values_only_where_they_explain_a_decision():
    """Regression: improvements showed p 0.9984 / p (Holm) 1.0000; an unchanged metric with p (Holm) < α said
    nothing about why."""
    result = _mixed_result()
    text = render_markdown(result)
    assert "p (Holm)" in _section(text, "Regressions")
    assert "p (Holm)" not in _section(text, "Improvements") and "| p |" not in text
    (tm,) = [c for c in result.comparisons if c.metric == "training_memory_mb"]
    assert tm.verdict is Verdict.UNCHANGED and tm.p_adjusted is not None and tm.p_adjusted < 0.01
    note = _row(text, "Unchanged", "training_memory_mb")["Note"]
    assert note.startswith("below the threshold: significant") and "smaller than 10%" in note
    assert _row(text, "Unchanged", "training_memory_mb")["Effect"] == "more memory"


def _with(result: CheckResult, metric: str, **changes) -> CheckResult:
    comparisons = tuple(dataclasses.replace(c, **changes) if c.metric == metric else c for c in result.comparisons)
    return dataclasses.replace(result, comparisons=comparisons)


def test_advice_is_a_time_and_never_a_count_of_processes():
    """Regression: "85 processes per side"; the advice is the time 85 processes would take, or perfgate ab."""
    result = _mixed_result()
    (mem,) = [c for c in result.comparisons if c.metric == "memory_usage_mb"]
    assert mem.verdict is Verdict.INCONCLUSIVE
    result = _with(result, "memory_usage_mb", required_n=85, required_unit="processes")
    seconds = measured_seconds(result.current)
    assert seconds is not None
    expected = fmt_duration(seconds_to_decide(85, repetitions(result.current, "memory_usage_mb", "processes"), seconds))
    advice = _row(render_markdown(result), "Inconclusive", "memory_usage_mb")["What would decide it"]
    assert (
        advice
        == f"`perfgate ab` (paired), or about {expected} of measurement per side (timed calls only; set-up adds to it)"
    )
    assert "85" not in advice


def test_an_ab_report_never_advises_perfgate_ab():
    result = _mixed_result()
    result = _with(result, "memory_usage_mb", required_n=85, required_unit="processes")
    current = dataclasses.replace(result.current, config={"ab": {"role": "current", "label": "HEAD"}})
    for changed in (
        dataclasses.replace(result, current=current),
        _with(dataclasses.replace(result, current=current), "memory_usage_mb", required_n=None, noise="assumed σ 2%"),
    ):
        for text in (render_markdown(changed), render_comment(changed)):
            assert "perfgate ab" not in text
            assert "processes per side" not in text


def test_advice_without_any_time_metric_says_the_time_is_unknown():
    base, cur = (
        run_from_dict({"schema_version": 1, "model": "dqn", "metrics": {"memory_usage_mb": {"samples": s}}})
        for s in ([100.0, 80.0, 125.0, 95.0, 110.0], [118.0, 92.0, 140.0, 109.0, 125.0])
    )
    text = render_markdown(compare_runs(base, cur, Policy.quiet()))
    assert "how long is unknown: the run records no time metric" in text


def test_measured_seconds_and_the_time_to_decide_by_hand():
    run = run_from_dict(
        {
            "schema_version": 2,
            "model": "m",
            "metrics": {
                "a_ms": {"unit": "ms", "direction": "lower_is_better", "samples": [100.0, 200.0], "groups": [1, 1]},
                "b_us": {
                    "unit": "us",
                    "direction": "lower_is_better",
                    "samples": [500.0, 500.0],
                    "reference": {"kernel": "interpreter", "seconds": [0.25, 0.25], "counts": [1, 1]},
                },
                "rate": {"unit": "samples/s", "direction": "higher_is_better", "samples": [5.0, 6.0]},
                "mem_mb": {"unit": "MB", "direction": "lower_is_better", "samples": [9.0, 9.0]},
            },
        }
    )
    assert measured_seconds(run) == pytest.approx(0.1 + 0.2 + 0.0005 + 0.0005 + 0.5)
    assert repetitions(run, "a_ms", "processes") == 2 and repetitions(run, "b_us", "processes") == 1
    assert repetitions(run, "a_ms", "samples") == 2
    assert seconds_to_decide(80, 20, 30.0) == 120.0
    assert [fmt_duration(s) for s in (0.2, 45, 89.5, 91, 5399, 5400, 36_000, 400_000)] == [
        "1 s", "45 s", "90 s", "2 min", "90 min", "1.5 h", "10.0 h", "5 days",
    ]  # fmt: skip
    assert measured_seconds(run_from_dict({"schema_version": 1, "model": "m", "metrics": {"mem_mb": {
        "unit": "MB", "direction": "lower_is_better", "samples": [1.0]}}})) is None  # fmt: skip


def test_json_report_writes_unbounded_interval_as_null():
    """Regression for render_json raising on an infinite interval end from a tiny skewed sample."""

    from perfgate.report.json import render_json

    base = run_from_dict(
        {"schema_version": 1, "model": "m", "metrics": {"training_step_time_ms": {"samples": [1.0, 1.0, 1004.0]}}}
    )
    cur = run_from_dict(
        {"schema_version": 1, "model": "m", "metrics": {"training_step_time_ms": {"samples": [2.0, 2.0, 2008.0]}}}
    )
    doc = json.loads(render_json(compare_runs(base, cur, Policy.quiet())))
    ci = doc["comparisons"][0]["ci"]
    assert ci is not None and None in ci


def test_measurement_conditions_flag_unstable_metrics():
    rng = np.random.default_rng(4)

    def doc(extra=None):
        d = {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                "training_step_time_ms": {"samples": list(100 * rng.lognormal(0, 0.2, 60))},
                "dbn_load_time_ms": {"samples": list(1.0 * rng.lognormal(0, 0.005, 60))},
            },
        }
        if extra:
            d["config"] = extra
        return run_from_dict(d)

    env = {
        "environment": {
            "load_avg_1m_start": 1.5,
            "load_avg_1m_end": 2.0,
            "other_processes_cpu_pct": 40.0,
            "steal_pct": 0.5,
        },
        "processes": 3,
    }
    text = render_markdown(compare_runs(doc(), doc(env), Policy.quiet()))
    block = text.split("### Measurement conditions")[1]
    assert "load average 1.5 → 2.0" in block and "other processes used 40.0% of the CPU" in block
    assert "3 worker processes" in block
    assert "training_step_time_ms" in block and "dbn_load_time_ms" not in block


# --- the compact comment form -------------------------------------------------------------

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _table_widths(text: str) -> list[int]:
    """The column count of every table: from each delimiter row (| --- | --- |)."""
    return [line.count("|") - 1 for line in text.splitlines() if re.fullmatch(r"\|(-+\|)+", line)]


def test_comment_is_narrow_verdict_first_regressions_open_the_rest_folded():
    for result in (_mixed_result(), hostile_result(HOSTILE, commit="abc", fingerprint="fp", source="file `b.json`")):
        text = render_comment(result)
        widths = _table_widths(text)
        assert widths and max(widths) <= MAX_COLUMNS
        assert text.startswith("## ❌ Regression Detected\n\n") and "compared:" in text.splitlines()[2]
        open_part, _, folded = text.partition("<details>")
        assert "**Regressions**" in open_part
        for title in ("Inconclusive", "Improvements", "Unchanged", "How this was decided"):
            if title in text:
                assert title not in open_part and f"<summary>{title}" in folded, title
        assert text.count("<details>") == text.count("</details>")


def test_comment_changes_read_as_in_the_full_report():
    text = render_comment(_mixed_result())
    row = next(line for line in text.splitlines() if line.startswith("| throughput_samples_per_sec |"))
    change, ci = row.split(" | ")[2:4]
    assert change.startswith("-") and change.endswith(" lower throughput")
    assert re.fullmatch(r"\\\[-\d+\.\d%, -\d+\.\d%\\\]", ci), ci


@pytest.mark.parametrize("name_length", [0, 400])
def test_comment_stays_under_githubs_limit_with_5000_metrics(name_length):
    result = big_result(5000, name_length=name_length)  # every verdict class, names padded
    text = render_comment(result)
    assert len(text.encode("utf-8")) < 65_536
    assert re.match(r"## ❌ Regression Detected\n\n\d+ metric\(s\) compared: \d+ regressed, \d+ inconclusive", text)
    assert re.search(r"… [\d,]+ more metrics, see the full report\.", text)
    assert max(_table_widths(text)) <= MAX_COLUMNS
    assert text.count("<details>") == text.count("</details>")
    # the largest regression is the first row shown
    largest = max(result.regressions, key=lambda c: c.worse or 0.0)
    first = next(line for line in text.split("**Regressions**")[1].splitlines() if line.startswith("| metric"))
    assert f"{largest.change * 100:+.1f}% slower" in first


class _Elements:
    def __init__(self, html: str) -> None:
        from collections import Counter
        from html.parser import HTMLParser

        self.tags: Counter[str] = Counter()
        self.hrefs: list[str] = []
        self.comments: list[str] = []
        outer = self

        class P(HTMLParser):
            def handle_starttag(self, tag, attrs):
                outer.tags[tag] += 1
                outer.hrefs += [v or "" for k, v in attrs if k in ("href", "src")]

            def handle_comment(self, data):
                outer.comments.append(data)

        parser = P(convert_charrefs=True)
        parser.feed(html)
        parser.close()


def test_comment_keeps_hostile_names_inert():
    """Names with Markdown, HTML and control characters render as text: the same elements as harmless names."""
    commit = "abc\n# heading <img src=x onerror=alert(1)>"
    hostile = _Elements(_MD.render(render_comment(hostile_result(HOSTILE, commit=commit, fingerprint="fp`<b>`",
                                                                 source="file `we<script>ird.json`"))))  # fmt: skip
    benign = _Elements(
        _MD.render(
            render_comment(
                hostile_result(benign_names(len(HOSTILE)), commit="abc", fingerprint="fp", source="file `b`")
            )
        )
    )
    assert hostile.tags == benign.tags
    assert hostile.comments == [] and hostile.hrefs == []


def test_check_and_report_write_the_comment(tmp_path, seed_files):
    base, cur = seed_files
    comment = tmp_path / "comment.md"
    rc = main(["check", "--baseline", str(base), "--current", str(cur), "--quiet", "--comment", str(comment)])
    assert rc == 1
    text = comment.read_text()
    assert (
        text.startswith("## ❌ Regression Detected")
        and "| training_step_time_ms | 100.00 → 120.00 | +20.0% slower |" in text
    )
    same = ["check", "--baseline", str(base), "--current", str(cur), "--quiet"]
    assert main([*same, "--output", str(comment), "--comment", str(comment)]) == 2

    from perfgate.store import open_store
    from tests.export.sample_store import sample_runs

    url = f"sqlite:///{tmp_path / 'perfgate.db'}"
    store = open_store(url)
    try:
        store.add_runs(sample_runs())
    finally:
        store.close()
    out = tmp_path / "store-comment.md"
    assert main(["report", "--store", url, "--html", str(tmp_path / "r.html"), "--comment", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("## Performance check\n\n")
    assert text.count("\n### ") >= 2 and " on " in text  # one section per model/machine
    assert max(_table_widths(text)) <= MAX_COLUMNS

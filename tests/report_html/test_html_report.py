"""The HTML report: no script, safe markup, the Markdown report's text, charts on the right
axes, the size limit, the commands, and real rendering in headless Chromium (every chart
drawn and not blank, no console error, no request leaving the file, and names that carry
markup shown as text, never run).

Golden file: tests/report_html/golden/check_example.html; to refresh after an intended change,
run with PERFGATE_REFRESH_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from perfgate.cli import main
from perfgate.core.codec import run_from_dict
from perfgate.core.compare import compare_runs
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.export.latest import latest_states
from perfgate.report._svg import Scale
from perfgate.report.html import NO_HISTORY, ReportSection, render_check_html, render_html
from perfgate.report.markdown import render_markdown
from perfgate.report.plots import STRIP_POINTS
from perfgate.store import open_store
from tests.conftest import SEED_BASELINE, SEED_CURRENT
from tests.export.sample_store import HOSTILE_METRIC, HOSTILE_MODEL, hostile_runs, sample_store
from tests.report_html.conftest import Watched, distinct_colours, ink_fractions

GOLDEN = Path(__file__).resolve().parent / "golden" / "check_example.html"
MAX_BYTES = 1_500_000
SVG = "{http://www.w3.org/2000/svg}"
PLOT_WIDTH = 640 - 16 - 118  # the distribution chart's data area (plots.distribution_chart)


def example_check_html() -> str:
    result = compare_runs(run_from_dict(SEED_BASELINE), run_from_dict(SEED_CURRENT), Policy(), baseline_source="file")
    return render_check_html(result)


def one_metric_run(name: str, samples: list[float], **extra: Any) -> Run:
    return run_from_dict({"schema_version": 1, "model": "dqn", "metrics": {name: {"samples": samples, **extra}}})


def charts(page: str) -> list[ET.Element]:
    """Every chart of the page, parsed as XML (so also: each one is well-formed SVG)."""
    return [ET.fromstring(m) for m in re.findall(r'<svg class="chart.*?</svg>', page, flags=re.S)]


def texts(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.parts.append(data.strip())


def page_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return "\n".join(parser.parts)


def test_check_report_matches_the_golden_file():
    page = example_check_html()
    if os.environ.get("PERFGATE_REFRESH_GOLDEN"):
        GOLDEN.write_text(page)
    assert page == GOLDEN.read_text()


def test_the_verdict_comes_first():
    page = example_check_html()
    assert page.index("Regression detected") < page.index("<section")
    assert page.index("<header") < page.index("<main>")


def test_no_script_and_nothing_to_fetch():
    page = example_check_html()
    assert "<script" not in page.lower()
    assert not re.search(r"\b(src|href)=\"(?!#)", page)  # only links inside the page
    assert not re.search(r"\bon[a-z]+=", page)


def test_the_markdown_report_is_all_there():
    # a noisy metric that moved by about the threshold: unstable, inconclusive, with what would decide
    base = one_metric_run("training_step_time_ms", [100.0 * (1 + 0.2 * ((i * 7) % 5 - 2) / 2) for i in range(6)])
    cur = one_metric_run("training_step_time_ms", [112.0 * (1 + 0.2 * ((i * 3) % 5 - 2) / 2) for i in range(6)])
    result = compare_runs(base, cur, Policy(), baseline_source="file")
    markdown, text = render_markdown(result), page_text(render_check_html(result))
    for heading in re.findall(r"^#+ (.*)$", markdown, flags=re.M):
        assert heading.replace("**", "") in text
    for phrase in ("Inconclusive", "What would decide it", "Measurement conditions", "Unstable metrics"):
        assert phrase in markdown and phrase in text
    assert "| " not in text  # the tables were rendered as tables


def test_no_history_is_said_once():
    runs = [run_from_dict({**SEED_BASELINE}), run_from_dict({**SEED_CURRENT})]
    page = render_check_html(compare_runs(*runs, Policy()))
    assert len(charts(page)) == 6
    assert page.count("No history given") == 1 and page_text(page).count(NO_HISTORY) == 1


def test_times_are_on_a_log_axis_so_microsecond_boxes_are_not_flat():
    # regression for 3-10 µs boxes drawn as flat lines on a linear axis up to 8,000 µs
    samples = [3.0 + 7.0 * (i % 50) / 49 for i in range(400)] + [4000.0, 8000.0]
    runs = [one_metric_run("inference_latency_us", samples) for _ in range(2)]
    (dist,) = charts(render_check_html(compare_runs(*runs, Policy())))
    boxes = [r for r in dist.iter(f"{SVG}rect") if r.get("class") == "box"]
    assert len(boxes) == 2
    assert all(float(b.get("width", 0)) > 20 for b in boxes)  # a linear axis would give 0.2 px
    labels = texts(dist)
    assert "µs (log scale)" in labels
    assert {"10", "100", "1,000"} <= set(labels)
    assert not any(re.search(r"\bus\b", t) for t in labels)


def test_memory_is_on_an_axis_from_zero():
    # regression for +1.4 % drawn as a jump on an axis that started at the data's minimum
    base = one_metric_run("memory_usage_mb", [120.0 + 0.1 * (i % 3) for i in range(10)])
    cur = one_metric_run("memory_usage_mb", [121.7 + 0.1 * (i % 3) for i in range(10)])
    (dist,) = charts(render_check_html(compare_runs(base, cur, Policy())))
    labels = texts(dist)
    assert "MB (axis from 0)" in labels and "0" in labels
    medians = [float(m.get("x1", 0)) for m in dist.iter(f"{SVG}line") if m.get("class") == "med"]
    assert len(medians) == 2
    assert 0 < medians[1] - medians[0] < 0.03 * PLOT_WIDTH


@pytest.mark.parametrize(
    ("lo", "hi", "log", "expected"),
    [
        (3.0, 8000.0, True, [10.0, 100.0, 1000.0]),  # more than 3 decades: powers of ten only... and 1-2-5 within 4
        (0.0, 125.0, False, [0.0, 25.0, 50.0, 75.0, 100.0, 125.0]),
    ],
)
def test_ticks(lo, hi, log, expected):
    ticks = Scale(lo, hi, 0.0, 100.0, log=log).ticks()
    assert set(expected) <= set(ticks)
    assert all(lo <= t <= hi for t in ticks)


def test_log_scale_maps_decades_evenly():
    s = Scale(1.0, 1000.0, 0.0, 300.0, log=True)
    assert [s(v) for v in (1.0, 10.0, 100.0, 1000.0)] == pytest.approx([0.0, 100.0, 200.0, 300.0])
    narrow = Scale.for_values([40.0, 41.0], 0.0, 100.0, log=True, zero=False)
    assert narrow.lo < 40.0 < 41.0 < narrow.hi and len(narrow.ticks()) >= 2


def test_many_samples_are_thinned_and_the_page_stays_small():
    metrics = {
        f"stage_{k}_time_ms": {
            "unit": "ms",
            "direction": "lower_is_better",
            "samples": [40.0 + (j % 997) / 10 + k for j in range(10_000)],
        }
        for k in range(30)
    }
    runs = [run_from_dict({"schema_version": 1, "model": "dqn", "metrics": metrics}) for _ in range(2)]
    page = render_check_html(compare_runs(*runs, Policy()))
    assert len(page.encode()) <= MAX_BYTES
    svgs = charts(page)
    assert len(svgs) == 30
    for svg in svgs:
        strips = [p.get("d", "") for p in svg.iter(f"{SVG}path") if p.get("class") == "pts"]
        assert [d.count("h0") for d in strips] == [STRIP_POINTS, STRIP_POINTS]
        assert "current (n=10000)" in texts(svg)


def test_hostile_names_are_escaped_in_the_markup():
    store = sample_store()  # any store will do; the hostile runs make their own key
    store.add_runs(hostile_runs())
    states = [s for s in latest_states(store, Policy()) if s.run.model == HOSTILE_MODEL]
    page = render_html([ReportSection(result=states[0].result)])
    assert HOSTILE_MODEL not in page and HOSTILE_METRIC not in page
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt;_ms" in page
    chart_texts = [t for svg in charts(page) for t in texts(svg)]  # the charts' own text too
    assert f"{HOSTILE_METRIC}: baseline vs current" in chart_texts


# ---- the commands ----------------------------------------------------------------------------


def test_check_html(seed_files, tmp_path, capsys):
    base, cur = seed_files
    out = tmp_path / "report.html"
    rc = main(["check", "--baseline", str(base), "--current", str(cur), "--html", str(out), "--quiet"])
    assert rc == 1  # the example regresses; the HTML is written all the same
    page = out.read_text()
    assert "<script" not in page and len(charts(page)) == 6
    assert len(page.encode()) <= MAX_BYTES


def test_report_command(sample_sqlite, sample_config, tmp_path, capsys):
    out = tmp_path / "store.html"
    assert main(["report", "--store", sample_sqlite, "--config", str(sample_config), "--html", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"wrote .*store\.html \(\d\.\d MB, 5 model/machine section\(s\)\)", err), err
    page = out.read_text()
    assert "Regression detected" in page and "change point +25.1%" in page
    assert "No history given" not in page
    assert page.count('class="chart index"') == 4  # the machine-speed index: every section but laptop-b's one run
    assert len(page.encode()) <= MAX_BYTES


def _history_doc(run: int, *, machine_slow: float, code_slow: float, n: int = 40) -> dict[str, Any]:
    """A run whose stage time and reference kernel both scale with the machine's slowness."""
    ref = 3.5e-4 * machine_slow
    metrics = {
        name: {
            "samples": [round(median * machine_slow * code_slow * (1 + 0.01 * ((i * 7) % 5 - 2)), 6) for i in range(n)],
            "reference": {"kernel": "compute", "seconds": [ref], "counts": [n]},
        }
        for name, median in (("training_step_time_ms", 100.0), ("feature_extraction_time_ms", 5.0))
    }
    metrics["memory_usage_mb"] = {"samples": [300.0 + i % 3 for i in range(10)]}
    return {
        "schema_version": 2,
        "machine_index": {"compute": ref, "memory": 6e-4 * machine_slow},
        "run_id": f"run-{run:03d}",
        "model": "dqn",
        "created_at": f"2026-11-{1 + run // 24:02d}T{run % 24:02d}:00:00Z",
        "git": {"commit": f"c{run:03d}", "branch": "main"},
        "machine": {"fingerprint": "ci-runner-a"},
        "metrics": metrics,
    }


def _report_of(tmp_path: Path, docs: list[dict[str, Any]], *extra: str) -> str:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    with open_store(url) as store:
        store.add_runs([run_from_dict(d) for d in docs])
    out = tmp_path / "history.html"
    assert main(["report", "--store", url, "--html", str(out), *extra]) == 0
    return out.read_text()


def test_change_points_are_searched_on_the_machine_normalised_series(tmp_path, capsys):
    # the machine is 30 % slower from run 8 on: the raw times step, the normalised ones do not
    slow = [_history_doc(r, machine_slow=1.3 if r >= 8 else 1.0, code_slow=1.0) for r in range(16)]
    text = page_text(_report_of(tmp_path, slow))
    assert "change points searched in the machine-normalised median: none found" in text
    assert "median, machine-normalised" in text
    assert "change point +30.0%" not in text


def test_a_slower_code_is_a_change_point_on_the_normalised_series(tmp_path, capsys):
    code = [_history_doc(r, machine_slow=1.0, code_slow=1.3 if r >= 8 else 1.0) for r in range(16)]
    text = page_text(_report_of(tmp_path, code))
    assert "change points searched in the machine-normalised median: +30.0% at commit c008" in text
    assert "change point +30.0%" in text


def test_a_long_history_stays_under_the_size_limit(tmp_path, capsys):
    docs = [_history_doc(r, machine_slow=1.0 + 0.05 * (r % 7) / 7, code_slow=1.0, n=400) for r in range(100)]
    page = _report_of(tmp_path, docs, "--trend-runs", "100")
    assert len(page.encode()) <= MAX_BYTES
    index = [svg for svg in charts(page) if "index" in (svg.get("class") or "")]
    assert len(index) == 1
    lines = [p for p in index[0].iter(f"{SVG}path") if p.get("class") == "line"]
    assert ["".join(p.itertext()) for p in lines] == ["compute", "memory"]
    assert [p.get("d", "").count("L") for p in lines] == [99, 99]  # every run


def test_report_of_one_model(sample_sqlite, tmp_path):
    out = tmp_path / "dqn.html"
    assert main(["report", "--store", sample_sqlite, "--model", "DQN", "--html", str(out)]) == 0
    page = out.read_text()
    assert page.count('<section class="model"') == 2  # dqn on both machines


def test_report_of_an_unknown_model_exits_2(sample_sqlite, tmp_path, capsys):
    assert main(["report", "--store", sample_sqlite, "--model", "nosuch", "--html", str(tmp_path / "x.html")]) == 2
    assert "no run of model 'nosuch'" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


# ---- in the browser --------------------------------------------------------------------------

# what a chart holds besides its data (axes, title, legend, budget and change-point lines),
# hidden for the non-blank check: a chart with all of that but no data counts as blank
FRAME_ONLY = "svg.chart :is(.axis, .ttl, .lgd, .budget, .change) { visibility: hidden !important; }"
MIN_INK = 0.002  # share of a chart's pixels its data must colour (the sparsest here, 10 memory samples: ~0.005)


def load(w: Watched, path: Path) -> int:
    w.page.goto(path.as_uri())
    w.page.wait_for_load_state("load")
    return w.page.locator("svg.chart").count()


def chart_inks(browser: Any, page: Any) -> dict[str, float]:
    """Each chart's ink (keyed by its position and title) in one full-page screenshot."""
    boxes = page.evaluate(
        """() => [...document.querySelectorAll("svg.chart")].map((el, i) => {
            const r = el.getBoundingClientRect();
            return {key: i + " " + el.getAttribute("aria-label"),
                    x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height};
        })"""
    )
    shot = page.screenshot(full_page=True)
    return dict(zip([b["key"] for b in boxes], ink_fractions(browser, shot, boxes), strict=True))


def test_store_report_renders_in_chromium(browser, watched, sample_sqlite, sample_config, tmp_path):
    out = tmp_path / "store.html"
    assert main(["report", "--store", sample_sqlite, "--config", str(sample_config), "--html", str(out)]) == 0
    count = load(watched, out)
    page = watched.page
    assert count > 40 and page.locator("script").count() == 0
    history = page.locator("#s0-m5 svg.chart.hist")  # the regression's history, with its change point
    assert "change point +25.1%" in (history.text_content() or "")
    assert page.locator("header h1").inner_text().endswith("Regression detected")
    assert distinct_colours(browser, page.screenshot(path=str(tmp_path / "report.png"))) > 50
    page.add_style_tag(content=FRAME_ONLY)
    inks = chart_inks(browser, page)
    assert len(inks) == count
    assert min(inks.values()) > MIN_INK, inks
    # the check can fail: a chart without its data is blank
    page.evaluate("document.querySelector('svg.chart .data').remove()")
    first = next(iter(chart_inks(browser, page).values()))
    assert first < MIN_INK / 10, first
    assert watched.errors == [] and watched.external == [] and watched.dialogs == []


def test_hostile_names_are_text_in_chromium(browser, watched, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    store = open_store(url)
    try:
        store.add_runs(hostile_runs())
    finally:
        store.close()
    out = tmp_path / "hostile.html"
    assert main(["report", "--store", url, "--html", str(out)]) == 0
    assert load(watched, out) > 0
    page = watched.page
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert watched.dialogs == [] and watched.errors == [] and watched.external == []
    assert HOSTILE_MODEL in page.locator("section.model h2").first.inner_text()
    assert HOSTILE_METRIC in page.locator("article.metric h3 code").all_inner_texts()
    assert page.locator("img").count() == 0  # the "<img" in the metric name stayed text
    assert page.locator("script").count() == 0
    titles = page.locator("svg.chart text.ttl").all_text_contents()  # the charts' own text
    assert f"{HOSTILE_METRIC}: baseline vs current" in titles


def test_budget_lines_are_drawn(browser, watched, sample_sqlite, sample_config, tmp_path):
    out = tmp_path / "tft.html"
    args = ["report", "--store", sample_sqlite, "--model", "tft", "--config", str(sample_config)]
    assert main([*args, "--html", str(out)]) == 0
    load(watched, out)
    latency = watched.page.locator("#s0-m2")  # inference_latency_us, sorted third
    assert "inference_latency_us" in latency.locator("h3").inner_text()
    text = latency.locator("svg.chart.dist").text_content() or ""
    assert "budget p99 ≤ 50.00 µs" in text
    assert latency.locator("svg.chart.dist g.budget line").count() == 1
    assert watched.errors == []


def test_report_help_in_a_subprocess():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "perfgate", "report", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--html" in out.stdout and "--model" in out.stdout

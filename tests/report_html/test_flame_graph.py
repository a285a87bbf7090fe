"""The differential flame graph of an explained stage in the HTML report: the merged call tree
and its widths, the colours, thin frames left out, the tooltips, hostile names as text, and the
page rendered in headless Chromium with no request leaving the file."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from typing import Any

from perfgate.report.flame import MIN_FRACTION, call_tree, colour, flame_graph
from perfgate.report.html import render_check_html
from tests.report.where_fixtures import (
    HELPER,
    benign_explanation,
    check_with,
    hostile_explanation,
    not_profiled,
    same_revision,
    slower_helper,
)
from tests.report_html.conftest import Watched, ink_fractions
from tests.safety.hostile import HOSTILE

SVG = "{http://www.w3.org/2000/svg}"
RED, BLUE, GREY = "#c62828", "#1565c0", "#c8c8c8"


class _Attributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: Counter[tuple[str, str]] = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.update((tag, name) for name, _ in attrs)


def attributes(page: str) -> Counter[tuple[str, str]]:
    """Each (element, attribute) pair of the page, counted."""
    parser = _Attributes()
    parser.feed(page)
    parser.close()
    return parser.seen


def flames(page: str) -> list[ET.Element]:
    """Every flame graph of the page, parsed as XML (so also: each one is well-formed SVG)."""
    return [ET.fromstring(m) for m in re.findall(r'<svg class="chart flame.*?</svg>', page, flags=re.S)]


def frames(svg: ET.Element) -> dict[str, ET.Element]:
    """Each drawn frame's rect by the first line of its tooltip (name, and where when known)."""
    out = {}
    for rect in svg.iter(f"{SVG}rect"):
        if rect.get("class") == "frame":
            title = rect.find(f"{SVG}title")
            assert title is not None and title.text
            out[title.text.split("\n")[0]] = rect
    return out


def test_the_merged_tree_keeps_vanished_frames_at_their_baseline_width():
    tree = call_tree("stage", {"a;b": 4.0, "a;gone": 2.0, "a": 1.0}, {"a;b": 6.0, "a;new": 1.0, "a": 1.0})
    a = tree.children["a"]
    assert (a.inclusive_baseline, a.inclusive_current) == (7.0, 8.0)
    assert a.children["gone"].width == 2.0 and a.children["gone"].inclusive_current == 0.0
    assert a.children["new"].width == 1.0 and a.children["b"].width == 6.0
    assert a.width == 1.0 + 6.0 + 1.0 + 2.0  # its own cost, its callees', and what vanished under it
    assert tree.width == a.width


def test_recursion_and_deep_stacks_need_no_recursion_limit():
    deep = ";".join(["f"] * 3000)
    tree = call_tree("stage", {deep: 1.0}, {deep: 2.0})
    assert tree.width == 2.0


def test_colours_warm_for_slower_cold_for_faster_grey_within_two_percent():
    assert colour(100.0, 101.9) == colour(100.0, 98.1) == GREY
    assert colour(100.0, 160.0) == RED and colour(0.0, 1.0) == RED  # full at +50 % and for a new frame
    assert colour(100.0, 40.0) == BLUE and colour(1.0, 0.0) == BLUE  # full at -50 % and for a vanished frame
    warm, warmer = colour(100.0, 110.0), colour(100.0, 130.0)
    assert warm != warmer and int(warmer[3:5], 16) < int(warm[3:5], 16)  # less green: a deeper red
    cold = colour(100.0, 80.0)
    assert int(cold[5:7], 16) > int(cold[1:3], 16)  # blue over red


def test_the_flame_graph_draws_each_frame_with_its_tooltip():
    drawn = flame_graph(slower_helper())
    assert drawn is not None
    (svg,) = flames(drawn[0])
    by_name = frames(svg)
    helper = by_name[f"{HELPER} (features.py:12)"]
    assert helper.get("fill") == RED  # +60 %
    tip = helper.find(f"{SVG}title").text  # type: ignore[union-attr]
    assert "inclusive: baseline 1 ms → current 1.6 ms per call (+60.0%)" in tip
    assert by_name["parse"].get("fill") == GREY and by_name["load"].get("fill") == GREY
    assert set(by_name) == {"features (the stage)", "features", "run", f"{HELPER} (features.py:12)", "load", "parse"}
    # the root (the stage) spans the whole width; "other", 0.1 % of the stage, is not drawn
    root = next(r for r in svg.iter(f"{SVG}rect") if r.get("class") == "frame")
    assert float(root.get("width", 0)) > 900
    assert ">other<" not in drawn[0] and "1 frame(s) narrower than 0.5%" in drawn[1]
    assert MIN_FRACTION == 0.005
    # the helper is as wide as its current cost: 1.6 / 7.52 of the stage
    assert abs(float(helper.get("width", 0)) / float(root.get("width", 0)) - 1.6 / 7.52) < 0.01
    assert drawn == flame_graph(slower_helper())  # the same bytes for the same profiles


def test_nothing_is_drawn_for_a_stage_that_was_not_profiled():
    assert flame_graph(not_profiled()) is None
    page = render_check_html(check_with([not_profiled()]))
    assert flames(page) == [] and "Not profiled: py-spy is not installed" in page


def test_the_page_has_a_flame_graph_per_profiled_stage_and_the_table():
    page = render_check_html(check_with([slower_helper(), same_revision(), not_profiled()]))
    assert len(flames(page)) == 2 and page.count('<article class="metric where"') == 2
    assert "<th>Share of change</th>" in page and f"<strong>{HELPER}</strong>" in page
    assert "<script" not in page.lower() and not re.search(r"\b(src|href)=\"(?!#)", page)
    assert all(r.get("fill") == GREY for r in frames(flames(page)[1]).values())  # A/A: all within ±2 %


def test_hostile_names_are_text_in_the_flame_graph():
    page = render_check_html(check_with([hostile_explanation()]))
    benign = render_check_html(check_with([benign_explanation()]))
    (svg,) = flames(page)
    assert len(frames(svg)) == len(frames(flames(benign)[0]))
    tips = [t.text or "" for t in svg.iter(f"{SVG}title")]
    assert any(t.startswith(HOSTILE[2].replace(";", ",")) for t in tips)  # "<script>…" as text
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<details" not in page.lower()
    assert attributes(page) == attributes(benign)  # no element got an event handler or anything else


def _flame_page(watched: Watched, tmp_path: Any, explanations: list[Any]) -> Any:
    out = tmp_path / "where.html"
    out.write_text(render_check_html(check_with(explanations)))
    watched.page.goto(out.as_uri())
    watched.page.wait_for_load_state("load")
    return watched.page


def test_the_flame_graph_renders_in_chromium_with_no_request(browser, watched, tmp_path):
    page = _flame_page(watched, tmp_path, [slower_helper(), same_revision()])
    assert page.locator("svg.chart.flame").count() == 2 and page.locator("script").count() == 0
    rects = page.locator("svg.chart.flame").first.locator("rect.frame")
    assert rects.count() == 6
    titles = [t or "" for t in rects.locator("title").all_text_contents()]
    assert any(t.startswith(f"{HELPER} (features.py:12)") for t in titles)
    helper = rects.nth(next(i for i, t in enumerate(titles) if t.startswith(HELPER)))
    box = helper.bounding_box()
    assert box is not None and box["width"] > 50 and box["height"] > 10  # laid out and visible
    assert helper.evaluate("el => getComputedStyle(el).fill") == "rgb(198, 40, 40)"
    # the chart is drawn, not blank: its frames colour a good part of it
    chart = page.locator("svg.chart.flame").first.bounding_box()
    assert chart is not None
    (ink,) = ink_fractions(browser, page.screenshot(full_page=True), [chart])
    assert ink > 0.2, ink
    assert watched.errors == [] and watched.external == [] and watched.dialogs == []
    assert all(u.startswith("file:") for u in watched.requests), watched.requests


def test_hostile_names_are_text_in_chromium(browser, watched, tmp_path):
    page = _flame_page(watched, tmp_path, [hostile_explanation()])
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0 and page.locator("script").count() == 0
    assert page.locator("details").count() == 0
    titles = page.locator("svg.chart.flame rect.frame title").all_text_contents()
    assert any(t.startswith(HOSTILE[2]) for t in titles)  # "<script>alert(1)</script>" shown as text
    assert watched.errors == [] and watched.external == [] and watched.dialogs == []

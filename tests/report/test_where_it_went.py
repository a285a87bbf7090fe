"""Where it went, in the Markdown report, the pull-request comment and the JSON report: the
named helper first with its share, nothing claimed on an A/A check, one line for a stage that
could not be profiled, the comment's size limit, and hostile names kept inert."""

from __future__ import annotations

import dataclasses
import json
import re

from perfgate.core.profiles import Contributor, Profile, StageExplanation, explain
from perfgate.report.comment import render_comment
from perfgate.report.json import render_json
from perfgate.report.markdown import render_markdown
from perfgate.report.where import COMMENT_BYTES, fmt_cost, fmt_cost_change
from perfgate.safe.text import plain
from tests.report.where_fixtures import (
    HELPER,
    benign_explanation,
    check_with,
    hostile_explanation,
    not_profiled,
    same_revision,
    slower_helper,
)
from tests.safety.hostile import HOSTILE, rendered


def where_section(markdown: str) -> str:
    """The report's "Where it went" section, up to the next section or the footer."""
    start = markdown.index("### Where it went")
    rest = markdown[start + 1 :]
    ends = [i for i in (rest.find("\n### "), rest.find("\n**Baseline**"), rest.find("\n**Current**")) if i >= 0]
    return markdown[start : start + 1 + min(ends)]


# ---- Markdown -------------------------------------------------------------------------------


def test_the_table_names_the_helper_first_with_its_share():
    e = slower_helper()
    # the table puts the named function first whatever the explanation's order
    shuffled = dataclasses.replace(e, contributors=tuple(reversed(e.contributors)))
    section = where_section(render_markdown(check_with([shuffled])))
    assert "#### features (features_time_ms)" in section
    assert "Profiled with sampling: 3 profile(s) of the baseline and 3 of the current revision" in section
    assert "6.92 ms → 7.52 ms (+8.7%)" in section  # the stage's profiled cost per call, baseline → current
    assert f"**{HELPER}** explains 100% of the change." in section
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "| Function | Where | Own Δ | Inclusive Δ | Share of change |"
    assert rows[1] == f"| **{HELPER}** | features.py:12 | +600 µs | +600 µs | 100% |"
    assert len(rows) == 1 + len(e.contributors) and len(e.contributors) == 5
    assert all("(within the A/A spread)" in row for row in rows[2:])
    assert "| features (within the A/A spread) | — | 0 s | +600 µs | 0% |" in rows  # slower only through its callee
    assert "- ℹ️ native code is seen as the Python frame that called it" in section


def test_the_section_comes_after_the_comparisons():
    markdown = render_markdown(check_with([slower_helper()]))
    assert markdown.index("### Regressions") < markdown.index("### Details") < markdown.index("### Where it went")
    assert markdown.index("### Where it went") < markdown.index("**Current**")


def test_an_aa_check_names_no_function():
    section = where_section(render_markdown(check_with([same_revision()])))
    assert "No function's change stands above the spread of the same revision profiled twice (1% of" in section
    assert HELPER not in section and "explains" not in section and "| Function |" not in section
    for name in ("features ", "parse", "load "):  # no frame is offered as a cause either
        assert f"| {name}" not in section


def test_a_stage_that_was_not_profiled_has_one_line():
    section = where_section(render_markdown(check_with([not_profiled()])))
    body = [line for line in section.splitlines()[1:] if line.strip()]
    assert body == ["#### load (load_time_ms)", "Not profiled: py-spy is not installed: pip install py-spy."]


def _counts(n: int, helpers: int, helper: float, small: float) -> list[Profile]:
    """``helpers`` functions of 10 instructions a call become ``helper``, 20 others become ``small``."""
    out = []
    for jitter in (0.01, -0.01, 0.0):
        stacks = {f"run;h{i}": (helper if n else 10.0) * 1000 * (1 + jitter) for i in range(helpers)}
        stacks |= {f"run;f{i:02d}": (small if n else 10.0) * 1000 * (1 + jitter) for i in range(20)}
        out.append(Profile(instrument="callgrind", unit="instructions", calls=1000, stacks=stacks))
    return out


def test_a_change_spread_thin_is_said_and_counts_are_counts():
    # two helpers +3 instructions a call, twenty functions +1 each: each helper 11.5 % of the change (named),
    # together 23 %: spread thin; each small one grew about as much as the whole stage did, so its part of the
    # stage is within the spread (the test is on a function's part: a stage slower as a whole names none)
    e = explain("step", "step_instructions", _counts(0, 2, 0, 0), _counts(1, 2, 13.0, 11.0))
    assert e.spread_thin and len(e.named) == 2
    section = where_section(render_markdown(check_with([e])))
    assert "**h0** explains 12% of the change. The change is spread thin: the named functions explain 23% of it." in (
        section
    )
    assert "220 instructions → 246 instructions (+11.8%)" in section
    assert "| **h0** | — | +3 instructions | +3 instructions | 12% |" in section
    assert "| f00 (within the A/A spread) | — | +1 instructions | +1 instructions | 4% |" in section


def test_costs_are_shown_in_their_unit():
    assert fmt_cost(0.00123, "s") == "1.23 ms"
    assert fmt_cost(0.00083, "s") == "830 µs"
    assert fmt_cost(2.5, "us") == "2.5 µs"
    assert fmt_cost(1.5, "s") == "1.5 s"
    assert fmt_cost(4e-8, "s") == "40 ns"
    assert fmt_cost(1234, "bytecodes") == "1,234 bytecodes"
    assert fmt_cost(56_700, "instructions") == "56.7k instructions"
    assert fmt_cost(1_200_000, "instructions") == "1.2M instructions"
    assert fmt_cost(2.5, "bytecodes") == "2.5 bytecodes"
    assert fmt_cost_change(-0.0005, "s") == "-500 µs"
    assert fmt_cost_change(12_345, "instructions") == "+12.3k instructions"
    assert fmt_cost_change(1e-19, "s", scale=0.007) == "0 s"  # a rounding error of the sums


def test_no_explanation_no_section():
    result = check_with([])
    assert "Where it went" not in render_markdown(result)
    assert "Where it went" not in render_comment(result)
    assert "explanations" not in json.loads(render_json(result))


def test_the_markdown_section_is_capped_with_the_rest():
    result = check_with([slower_helper(stage=f"stage{i}") for i in range(30)])
    short = render_markdown(result, max_chars=12_000)
    assert len(short) <= 12_000
    assert "more stages explained (all are in the JSON report)" in short


# ---- the pull-request comment ---------------------------------------------------------------


def test_the_comment_folds_each_stage():
    comment = render_comment(check_with([slower_helper(), same_revision(), not_profiled()]))
    assert f"<details>\n<summary>Where it went: features — {HELPER} explains 100%</summary>\n" in comment
    assert "<summary>Where it went: features — no function stands above the A/A spread</summary>" in comment
    assert "<summary>Where it went: load — not profiled</summary>" in comment
    assert f"| **{HELPER}** | features.py:12 | +600 µs | +600 µs | 100% |" in comment
    assert comment.index("**Regressions**") < comment.index("Where it went") < comment.index("How this was decided")
    assert comment.count("<details>") == comment.count("</details>")


def _long_hostile(i: int, k: int) -> str:
    return (HOSTILE[(i + k) % len(HOSTILE)] * 12).replace(";", ",")  # ";" would split the frame


def _crowded() -> list[StageExplanation]:
    out = []
    for i in range(10):
        names = [_long_hostile(i, k) + f"#{k}" for k in range(6)]
        out.append(slower_helper(stage=_long_hostile(i, 7), names=names, where=_long_hostile(i, 8) + ".py:1"))
    assert all(len(e.contributors) == 5 for e in out)
    return out


def test_the_comment_stays_under_6_kib_with_ten_stages_of_long_hostile_names():
    comment = render_comment(check_with(_crowded()))
    size = len(comment.encode("utf-8"))
    assert size <= 6_144, size
    assert comment.count("<details>") == comment.count("</details>")
    assert "more stages explained, see the full report." in comment
    assert comment.count("<summary>Where it went:") >= 1 and "| Function |" in comment  # the first one is there
    where = comment[comment.index("<summary>Where it went:") : comment.index("<summary>How this was decided")]
    assert len(where.encode("utf-8")) <= COMMENT_BYTES


def test_the_comment_keeps_the_explanations_inside_its_limit():
    result = check_with(_crowded())
    for limit in (2_500, 4_000):
        comment = render_comment(result, max_bytes=limit)
        assert len(comment.encode("utf-8")) <= limit
        assert comment.count("<details>") == comment.count("</details>")


# ---- hostile names --------------------------------------------------------------------------


def test_hostile_names_are_inert_in_the_markdown_report_and_the_comment():
    hostile, benign = check_with([hostile_explanation()]), check_with([benign_explanation()])
    for render in (render_markdown, render_comment):
        got, want = rendered(render(hostile)), rendered(render(benign))
        assert got.tags == want.tags, render.__name__
        assert got.comments == [] and got.hrefs == []
        shown = " ".join("".join(got.text).replace("\u200b", "").split())
        for name in (*HOSTILE[:2], HOSTILE[2].replace(";", ","), HOSTILE[8]):
            assert " ".join(plain(name).split()).strip() in shown, (render.__name__, name)
    markdown = render_markdown(hostile)
    assert "\n## Injected heading" not in markdown
    assert not re.search(r"(?<!\\)<(img|script|details)", markdown)  # each "<" of a name is escaped


# ---- JSON -----------------------------------------------------------------------------------


def test_the_json_report_has_every_field_with_the_stacks():
    e = slower_helper()
    text = render_json(check_with([e, not_profiled()]))
    assert text == render_json(check_with([e, not_profiled()]))  # deterministic
    (first, second) = json.loads(text)["explanations"]
    assert {f.name for f in dataclasses.fields(StageExplanation)} <= set(first)
    assert {f.name for f in dataclasses.fields(Contributor)} | {"own_change", "inclusive_change"} <= set(
        first["contributors"][0]
    )
    top = first["contributors"][0]
    assert top["name"] == HELPER and top["named"] is True and top["where"] == "features.py:12"
    assert abs(top["own_change"] - 0.0006) < 1e-9 and abs(top["share"] - 1.0) < 1e-6
    assert first["profiles"] == {"baseline": 3, "current": 3} and first["calls"] == {"baseline": 100, "current": 100}
    assert abs(first["stacks_current"][f"run;features;{HELPER}"] - 0.0016) < 1e-9
    assert first["stacks_baseline"] == dict(e.stacks_baseline)
    assert first["summary"] == e.summary() and first["notes"] == list(e.notes)
    assert second["available"] is False and second["reason"].startswith("py-spy is not installed")
    assert second["contributors"] == [] and second["stacks_current"] == {}
    # keys sorted like the rest of the report
    assert list(first) == sorted(first)


def test_perfgate_explains_own_report_escapes_its_title_and_draws_offline():
    from perfgate.report.explain import explanations_json, render_explain_html, render_explain_markdown

    e = slower_helper()
    title = "baseline main (abc) → current <script>x</script> `b`"
    page = render_explain_html([e], title)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    markdown = render_explain_markdown([e], title)
    assert markdown.startswith("## perfgate explain: ") and HELPER in markdown
    assert json.loads(explanations_json([e]))[0]["contributors"][0]["name"] == HELPER
    assert "No stage was profiled" in render_explain_markdown([], title)

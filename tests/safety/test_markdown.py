"""The Markdown escaper, tested by rendering: a CommonMark renderer with raw HTML allowed (as
GitHub's pipeline is, before its sanitiser) must show hostile names as text and produce
exactly the elements it produces for harmless names."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.app.summary import DEFAULT_MARKER, Section, compose
from perfgate.report.escape import md_code, md_link_url, md_prose, md_text
from perfgate.report.markdown import render_markdown
from perfgate.safe.text import plain
from tests.safety.hostile import HOSTILE, benign_names, hostile_result, rendered


def _report(names: list[str], commit: str, fingerprint: str, source: str) -> str:
    return render_markdown(hostile_result(names, commit=commit, fingerprint=fingerprint, source=source))


def test_hostile_names_render_as_text_and_add_no_element():
    """Regression: a new line in a metric name injected a heading; <img>, <script>, links,
    images, fences and the comment marker passed through the report."""
    commit = "abc\n# heading <img src=x onerror=alert(1)>"
    hostile = rendered(_report(HOSTILE, commit, "fp`<b>x</b>`", "file `we<script>ird.json`"))
    benign = rendered(_report(benign_names(len(HOSTILE)), "abc123", "fp", "file `base.json`"))
    assert hostile.tags == benign.tags
    assert hostile.comments == [] and hostile.hrefs == []
    shown = "".join(hostile.text).replace("\u200b", "")  # the zero-width spaces that defuse GitHub's autolinks
    for name in HOSTILE:
        assert " ".join(plain(name).split()) in " ".join(shown.split()), name
    assert "heading <img src=x onerror=alert(1)>" in shown  # the commit, as text


def test_summary_keeps_one_marker_and_escapes_labels_and_title():
    report = _report(HOSTILE[:4], "abc", "fp", "file `b.json`")
    sections = [Section(f"{DEFAULT_MARKER}\n</summary><img src=x>", report + f"\n{DEFAULT_MARKER}\n")]
    body = compose(sections, title="<script>x</script>\n# t", details_url="https://ci.example/run/1?a=(b)")
    benign_body = compose(
        [Section("label", _report(benign_names(4), "abc", "fp", "file `b.json`") + "\nplain line\n")],
        title="t",
        details_url="https://ci.example/run/1",
    )
    got, want = rendered(body), rendered(benign_body)
    assert got.tags == want.tags
    assert got.comments == [" perfgate-report "]  # the marker perfgate writes, once, first
    assert body.startswith(DEFAULT_MARKER + "\n") and body.count(DEFAULT_MARKER) == 1
    assert all(h.startswith("https://ci.example/") for h in got.hrefs)


def test_details_url_must_be_http():
    import pytest

    from perfgate.errors import InputError

    with pytest.raises(InputError, match="--details-url"):
        md_link_url("javascript:alert(1)", field="--details-url")


def test_github_autolinks_are_defused():
    """A metric called @org/team must not notify the team from a PR comment."""
    out = md_text("@org/team and https://evil.example and www.evil.example")
    assert "@org" not in out and "https://" not in out and "www." not in out
    assert out.replace("\u200b", "") == "@org/team and https://evil.example and www.evil.example"


def test_code_span_cannot_be_closed_early():
    for text in ["a`b", "``", "`x`", "a ``` b", ""]:
        out = rendered(f"x {md_code(text)} y")
        assert out.tags == Counter({"p": 1, "code": 1}), text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_any_text_renders_as_itself(text):
    for escaped in (md_text(text), md_prose(text)):
        out = rendered(f"x {escaped} y")
        assert set(out.tags) <= {"p", "code"} and not out.comments and not out.hrefs, repr(text)
        if "`" not in text:
            shown = "".join(out.text).replace("\u200b", "")
            assert " ".join(shown.split()) == " ".join(f"x {plain(text)} y".split()), repr(text)

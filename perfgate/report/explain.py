"""The report of ``perfgate explain``: the "Where it went" of each profiled stage, without a verdict.

The same section, flame graphs and JSON objects ``ab`` attaches to a regressed stage
(:mod:`perfgate.report.where`, :mod:`perfgate.report.flame`, :func:`perfgate.report.json.explanation_to_dict`),
under a title naming the two revisions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from perfgate.core.profiles import StageExplanation
from perfgate.report.escape import md_text
from perfgate.report.html import _where, markdown_html, page
from perfgate.report.json import explanation_to_dict
from perfgate.report.where import markdown_where

__all__ = ["explanations_json", "render_explain_html", "render_explain_markdown"]


def render_explain_markdown(explanations: Sequence[StageExplanation], title: str) -> str:
    """``## perfgate explain: TITLE`` and the section (``title`` is plain text: escaped here)."""
    lines = [f"## perfgate explain: {md_text(title)}", *markdown_where(explanations)]
    if not explanations:
        lines += ["", "No stage was profiled: none of the asked stages is set up on both sides."]
    return "\n".join(lines) + "\n"


def explanations_json(explanations: Sequence[StageExplanation]) -> str:
    return json.dumps([explanation_to_dict(e) for e in explanations], sort_keys=True, indent=2, allow_nan=False) + "\n"


def render_explain_html(explanations: Sequence[StageExplanation], title: str) -> str:
    """One page: the Markdown section, then each stage's differential flame graph (offline SVG)."""
    body = markdown_html(render_explain_markdown(explanations, title))
    graphs = [drawn for k, e in enumerate(explanations) if (drawn := _where(0, k, e))]
    return page(
        "perfgate explain: " + title,
        [f'<main><section class="model" id="s0"><div class="md">{body}</div>', *graphs, "</section></main>"],
    )

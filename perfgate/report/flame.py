"""The differential flame graph of an explained stage, drawn as SVG when the report is written.

The baseline's and the current revision's folded stacks (``"run;features;rsi"`` → own cost
per call, :attr:`StageExplanation.stacks_baseline` and ``stacks_current``) are merged into
one call tree, rooted at the stage. Each frame is a box on top of its caller:

* its width is its inclusive cost per call in the current revision; a frame that vanished
  keeps its baseline cost, so a caller is as wide as its own cost and its callees' boxes
  (the current inclusive cost, plus what vanished under it);
* its colour is the change of its inclusive cost from the baseline: red for slower (the
  warmer, the more, full at +50 % and for a new frame), blue for faster (full at -50 % and
  for a vanished frame), grey within ±2 %;
* its ``<title>`` (the browser's tooltip) gives its name, its file and line where the
  profiler told it, and its inclusive and own cost, baseline → current.

Frames narrower than :data:`MIN_FRACTION` of the stage are not drawn, nor their callees
(the note under the chart counts them); callees sit in name order, so the same profiles
always give the same bytes. No script, no font or stylesheet to fetch: every label goes
through :func:`perfgate.report._svg.text`.

Internal: not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from perfgate.core.profiles import SEPARATOR, StageExplanation
from perfgate.report._svg import num, text
from perfgate.report.formatting import fmt_change
from perfgate.report.where import fmt_cost

__all__ = ["MIN_FRACTION", "Frame", "call_tree", "colour", "flame_graph"]

WIDTH = 960.0
ROW = 18.0  # height of one level of the stack
TOP = 48.0  # room for the title and the legend
MIN_FRACTION = 0.005  # of the stage's width: a narrower frame is not drawn
MAX_DEPTH = 64  # levels drawn; deeper frames are counted with the narrow ones
GREY_BAND = 0.02  # an inclusive change within ±2 % is grey
FULL = 0.5  # the change at which the colour is full (±50 %)
CHAR = 6.4  # px per character of an 11 px label, for cutting labels to their box

_GREY = (200, 200, 200)
_WARM = ((248, 206, 190), (198, 40, 40))  # slower: light to full red
_COLD = ((200, 218, 244), (21, 101, 192))  # faster: light to full blue


@dataclass(slots=True)
class Frame:
    """One frame of the merged call tree: costs per call of the stage, each side.

    ``width`` is what its box spans: the current inclusive cost with what vanished below it,
    or, for a frame that vanished, its baseline inclusive cost (set by :func:`call_tree`).
    """

    name: str
    own_baseline: float = 0.0
    own_current: float = 0.0
    inclusive_baseline: float = 0.0
    inclusive_current: float = 0.0
    width: float = 0.0
    children: dict[str, Frame] = field(default_factory=dict)


def call_tree(root: str, baseline: Mapping[str, float], current: Mapping[str, float]) -> Frame:
    """The merged call tree of two sides' folded stacks, under a frame named ``root`` (the stage)."""
    tree = Frame(root)
    for side, stacks in (("baseline", baseline), ("current", current)):
        for stack, cost in stacks.items():
            node = tree
            _add(node, side, cost, own=False)
            for name in stack.split(SEPARATOR):
                node = node.children.setdefault(name, Frame(name))
                _add(node, side, cost, own=False)
            _add(node, side, cost, own=True)
    # widths callees first, without recursion (a deep recursive stack stays within Python's limit)
    order: list[Frame] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        order.append(node)
        pending.extend(node.children.values())
    for node in reversed(order):
        if node.inclusive_current <= 0:
            node.width = node.inclusive_baseline
        else:
            node.width = node.own_current + sum(child.width for child in node.children.values())
    return tree


def _add(node: Frame, side: str, cost: float, *, own: bool) -> None:
    if side == "baseline":
        if own:
            node.own_baseline += cost
        else:
            node.inclusive_baseline += cost
    elif own:
        node.own_current += cost
    else:
        node.inclusive_current += cost


def _mix(pair: tuple[tuple[int, int, int], tuple[int, int, int]], t: float) -> str:
    (r0, g0, b0), (r1, g1, b1) = pair
    rgb = (round(a + (b - a) * t) for a, b in ((r0, r1), (g0, g1), (b0, b1)))
    return "#" + "".join(f"{v:02x}" for v in rgb)


def colour(baseline: float, current: float) -> str:
    """The fill for an inclusive cost that went from ``baseline`` to ``current``."""
    if baseline <= 0:
        return _mix(_WARM, 1.0) if current > 0 else _mix((_GREY, _GREY), 0.0)
    change = current / baseline - 1.0
    if abs(change) <= GREY_BAND:
        return _mix((_GREY, _GREY), 0.0)
    t = min((abs(change) - GREY_BAND) / (FULL - GREY_BAND), 1.0)
    return _mix(_WARM if change > 0 else _COLD, t)


def _change(baseline: float, current: float) -> str:
    if baseline <= 0:
        return "new" if current > 0 else "no cost"
    if current <= 0:
        return "gone"
    return fmt_change(current / baseline - 1.0)


def _tip(frame: Frame, where: str, unit: str) -> str:
    head = text(frame.name) + (f" ({text(where)})" if where else "")
    inclusive = (
        f"inclusive: baseline {fmt_cost(frame.inclusive_baseline, unit)} → current "
        f"{fmt_cost(frame.inclusive_current, unit)} per call "
        f"({_change(frame.inclusive_baseline, frame.inclusive_current)})"
    )
    own = f"own: {fmt_cost(frame.own_baseline, unit)} → {fmt_cost(frame.own_current, unit)}"
    return "\n".join([head, text(inclusive), text(own)])


def _label(name: str, width: float) -> str:
    chars = int((width - 6) / CHAR)
    if chars < 3:
        return ""
    return name if len(name) <= chars else name[: chars - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Box:
    frame: Frame
    depth: int
    x: float  # in cost, from the left edge
    width: float
    is_root: bool


def _boxes(tree: Frame, total: float) -> tuple[list[_Box], int]:
    """The boxes to draw, depth first in name order, and how many frames were too thin or deep."""
    boxes: list[_Box] = []
    hidden = 0
    stack: list[tuple[Frame, int, float]] = [(tree, 0, 0.0)]
    while stack:
        frame, depth, x = stack.pop()
        if frame is not tree and (frame.width < MIN_FRACTION * total or depth > MAX_DEPTH):
            hidden += _count(frame)
            continue
        boxes.append(_Box(frame, depth, x, frame.width, frame is tree))
        offset = x
        placed = []
        for name in sorted(frame.children):
            child = frame.children[name]
            placed.append((child, depth + 1, offset))
            offset += child.width
        stack.extend(reversed(placed))
    return boxes, hidden


def _count(frame: Frame) -> int:
    """The frames of the subtree under (and with) ``frame``."""
    count = 0
    pending = [frame]
    while pending:
        node = pending.pop()
        count += 1
        pending.extend(node.children.values())
    return count


def flame_graph(explanation: StageExplanation) -> tuple[str, str] | None:
    """The chart of ``explanation`` and a note for the reader; None when there is nothing to draw
    (the stage was not profiled, or its profiles hold no cost)."""
    e = explanation
    if not e.available or not (e.stacks_baseline or e.stacks_current):
        return None
    tree = call_tree(e.stage, e.stacks_baseline, e.stacks_current)
    total = tree.width
    if not math.isfinite(total) or total <= 0:
        return None
    where = {c.name: c.where for c in e.contributors if c.where}
    boxes, hidden = _boxes(tree, total)
    depth = max(b.depth for b in boxes)
    left, right = 8.0, WIDTH - 8.0
    scale = (right - left) / total
    bottom = TOP + ROW * (depth + 1)
    height = bottom + 10
    title = f"{e.stage}: where the change went ({e.metric})"
    legend = (
        "width: cost per call in the current revision (a vanished frame: in the baseline) · colour: change of "
        "the inclusive cost, red slower, blue faster, grey within ±2 %"
    )
    parts = [
        f'<svg class="chart flame" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {num(WIDTH)} {num(height)}" '
        f'width="{num(WIDTH)}" height="{num(height)}" role="img" aria-label="{text(title)}">',
        f"<title>{text(title)}</title>",
        f'<rect class="bg" width="{num(WIDTH)}" height="{num(height)}" fill="#fff"/>',
        f'<text class="ttl" x="8" y="18">{text(title)}</text>',
        f'<text class="lgd" x="8" y="36">{text(legend)}</text>',
        '<g class="data" font-size="11">',
    ]
    for box in boxes:
        frame = box.frame
        x = left + box.x * scale
        w = box.width * scale
        y = bottom - ROW * (box.depth + 1)
        fill = colour(frame.inclusive_baseline, frame.inclusive_current)
        tip = _tip(frame, "the stage" if box.is_root else where.get(frame.name, ""), e.unit)
        parts.append(
            f'<rect class="frame" x="{num(x)}" y="{num(y)}" width="{num(max(w - 0.5, 0.5))}" '
            f'height="{num(ROW - 1)}" rx="1" fill="{fill}"><title>{tip}</title></rect>'
        )
        label = _label(frame.name, w)
        if label:
            parts.append(
                f'<text x="{num(x + 3)}" y="{num(y + ROW - 5.5)}" fill="#212121" pointer-events="none">'
                f"{text(label)}</text>"
            )
    parts += ["</g>", "</svg>"]
    note = "Hover a frame for its costs."
    if hidden:
        note += (
            f" {hidden:,} frame(s) narrower than {MIN_FRACTION:.1%} of the stage or deeper than {MAX_DEPTH} "
            "levels are not drawn."
        )
    return "".join(parts), note

"""One sign convention in every row of every report format.

A row of a report (a table row, and the sentences that go with it) speaks of one metric's
change in the metric's own terms: ``+`` means the metric's value went up, whatever its
direction (a throughput that fell is ``-30.0%``, its interval ``[-31.2%, -28.7%]``). A
percentage of another quantity names it ("raw", "its compute reference kernel changed"), and
a magnitude without a sign names its direction in words ("decreased by", "better by").
Regression for an inconclusive throughput row, up 25.7 % with the interval
[-15.7 %, +87.6 %], that explained "the 95 % interval reaches +15.7 %": the direction-adjusted
("worse") convention inside a row that otherwise uses the metric's own.

Checks are built on the real compare path (:func:`compare_runs`, and the look of ``perfgate
ab``, :func:`decide_look`) for metrics of both directions, changed up and down, in every
verdict, with broken budgets, derived rates, reference kernels, paired runs and the run's
common shift; every row is rendered in the four formats (Markdown, the pull-request comment,
the HTML page's text, the terminal's lines at a fixed width) and every signed percentage in
it is held to the comparison's own estimate and interval, computed here from
``Comparison.worse`` and ``Comparison.ci`` (which bound the direction-adjusted change).
"""

from __future__ import annotations

import dataclasses
import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from html.parser import HTMLParser

import numpy as np
import pytest
from rich.console import Console

import perfgate.cli._output as cli_common
from perfgate.core.compare import CheckResult, Comparison, Verdict, compare_runs
from perfgate.core.distributions import norm_ppf
from perfgate.core.metrics import Direction, MetricInfo
from perfgate.core.paired import decide_look
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Metric, Reference, Run
from perfgate.report.comment import render_comment
from perfgate.report.html import render_check_html
from perfgate.report.markdown import render_markdown

LOWER, HIGHER, INFO = Direction.LOWER, Direction.HIGHER, Direction.INFO
TERMINAL_WIDTH = 120

# --- checks built on the real compare path ---------------------------------------------------


def _pattern(n: int, cv: float, order: int) -> np.ndarray:
    """``n`` log-normal factors with median exactly 1 (n odd): normal quantiles, shuffled."""
    z = np.array([norm_ppf((i + 0.5) / n) for i in range(n)])
    return np.exp(cv * z[np.random.default_rng(order).permutation(n)])


def _pair(
    name: str, unit: str, direction: Direction, level: float, factor: float, cv: float, n: int, order: int = 0
) -> tuple[Metric, Metric]:
    """A metric on both sides: the current median ``factor`` times the baseline's, same spread."""
    base = Metric(name=name, unit=unit, direction=direction, samples=tuple(level * _pattern(n, cv, order)))
    cur = Metric(name=name, unit=unit, direction=direction, samples=tuple(level * factor * _pattern(n, cv, order + 1)))
    return base, cur


def _check(pairs: Sequence[tuple[Metric | None, Metric | None]], policy: Policy, **kwargs: object) -> CheckResult:
    base = Run(model="dqn", metrics={b.name: b for b, _ in pairs if b is not None})
    cur = Run(model="dqn", metrics={c.name: c for _, c in pairs if c is not None})
    return compare_runs(base, cur, policy, **kwargs)  # type: ignore[arg-type]


def _both_directions() -> CheckResult:
    """Every verdict of times and throughputs, changed up and down, with budgets, tails, a
    derived rate, one-sample metrics, memory under its floor, informational, new and missing."""
    t, r = ("ms", LOWER), ("items/s", HIGHER)
    pairs: list[tuple[Metric | None, Metric | None]] = [
        _pair("time_up_ms", *t, 100, 1.30, 0.02, 41),  # regressed
        _pair("time_down_ms", *t, 100, 0.70, 0.02, 41),  # improved
        _pair("time_flat_ms", *t, 100, 1.004, 0.02, 41),  # unchanged
        _pair("time_small_up_ms", *t, 100, 1.05, 0.005, 41),  # unchanged: significant, below the threshold
        _pair("time_noisy_up_ms", *t, 100, 1.20, 0.30, 7),  # inconclusive: over the threshold, not significant
        _pair("time_noisy_down_ms", *t, 100, 0.87, 0.15, 9, 3),  # inconclusive: the interval reaches past it
        _pair("time_better_ms", *t, 100, 0.85, 0.15, 9, 3),  # unchanged: better, but not ruled out
        _pair("rate_down", *r, 1000, 0.70, 0.02, 41),  # regressed
        _pair("rate_up", *r, 1000, 1.30, 0.02, 41),  # improved
        _pair("rate_flat", *r, 1000, 0.996, 0.02, 41),  # unchanged
        _pair("rate_small_down", *r, 1000, 0.95, 0.005, 41),  # unchanged: significant, below the threshold
        _pair("rate_noisy_down", *r, 1000, 0.80, 0.30, 7, 5),  # inconclusive: over the threshold
        _pair("rate_noisy_up", *r, 1000, 1.257, 0.30, 7),  # inconclusive: the case of the complaint
        _pair("rate_better", *r, 1000, 1.15, 0.15, 9, 3),  # unchanged: better, but not ruled out
        _pair("tail_time_ms", *t, 10, 1.30, 0.02, 81, 7),  # median and p95 regressed, p99 too few samples
        _pair("tail_rate", *r, 10, 0.70, 0.02, 81, 7),  # the same, of a rate
        _pair("time_single_ms", *t, 0.70, 0.81 / 0.70, 0.0, 1),  # one sample: the threshold alone
        _pair("rate_single", *r, 1000, 0.85, 0.0, 1),
        _pair("memory_usage_mb", "MB", LOWER, 5.0, 1.15, 0.002, 41),  # regressed by share, under the MB floor
        _pair("gpu_utilization_pct", "%", INFO, 50, 1.2, 0.02, 41),
        (None, _pair("time_new_ms", *t, 100, 1.0, 0.02, 41)[1]),
        (_pair("time_gone_ms", *t, 100, 1.0, 0.02, 41)[0], None),
    ]
    step_b, step_c = _pair("step_time_ms", *t, 100, 1.25, 0.02, 41, 11)
    rate = [
        Metric(name="step_rate", unit="items/s", direction=HIGHER, samples=tuple(3200.0 / v for v in m.samples))
        for m in (step_b, step_c)
    ]
    pairs += [(step_b, step_c), (rate[0], rate[1])]  # a derived rate: the step's times, inverted
    info = {
        "tail_time_ms": MetricInfo(unit="ms", direction=LOWER, label="tail_time_ms", statistics=("p50", "p95", "p99")),
        "tail_rate": MetricInfo(unit="items/s", direction=HIGHER, label="tail_rate", statistics=("p50", "p95")),
    }
    budgets = (
        Budget(model="dqn", metric="time_up_ms", statistic="median", limit=110.0),  # broken: 130
        Budget(model="dqn", metric="rate_down", statistic="median", limit=800.0),  # broken: 700
        Budget(model="dqn", metric="rate_up", statistic="median", limit=800.0),  # held
        Budget(model="dqn", metric="step_rate", statistic="mean", limit=40.0),  # broken: 25.6
    )
    return _check(pairs, Policy.quiet(metric_info=info, budgets=budgets))


def _with_kernel(pair: tuple[Metric, Metric], kernel_factor: float) -> tuple[Metric, Metric]:
    """Both sides timed with a reference kernel; the current run's kernel ``kernel_factor`` times as slow."""
    b, c = pair
    return (
        dataclasses.replace(b, reference=Reference(kernel="compute", seconds=(1e-3,) * len(b.samples))),
        dataclasses.replace(c, reference=Reference(kernel="compute", seconds=(1e-3 * kernel_factor,) * len(c.samples))),
    )


def _kernels() -> CheckResult:
    """Reference kernels that moved: the normalised change and the raw one differ, even in sign.
    Three metrics, fewer than a run needs to be its own control: each is tested on its own."""
    t, r = ("ms", LOWER), ("items/s", HIGHER)
    pairs = [
        _with_kernel(_pair("k_time_up_ms", *t, 100, 1.20, 0.02, 21), 1.30),  # raw +20 %, normalised -7.7 %
        _with_kernel(_pair("k_time_down_ms", *t, 100, 0.80, 0.02, 21, 3), 0.70),  # raw -20 %, normalised +14 %
        _with_kernel(_pair("k_rate_up", *r, 1000, 1.20, 0.02, 21, 5), 0.70),  # raw +20 %, normalised -16 %
    ]
    return _check(pairs, Policy())


def _shift(factor: float, *, kernels: bool) -> CheckResult:
    """Five timing metrics and a rate that moved together by ``factor`` (the assumed run-to-run noise)."""
    pairs = [_pair(f"s{i}_time_ms", "ms", LOWER, 100.0 * (i + 1), factor, 0.01, 21, i) for i in range(5)]
    pairs.append(_pair("s_rate", "items/s", HIGHER, 1000, 1 / factor, 0.01, 21, 9))
    if kernels:
        pairs = [_with_kernel(p, 1.0) for p in pairs]
    return _check(pairs, Policy())


def _grouped(name: str, direction: Direction, unit: str, levels: list[float], order: int) -> Metric:
    """A metric of interleaved repetitions (``perfgate ab``): one group of 21 samples per level."""
    samples = [v for i, level in enumerate(levels) for v in level * _pattern(21, 0.005, order + i)]
    return Metric(name=name, unit=unit, direction=direction, samples=tuple(samples), groups=(21,) * len(levels))


def _paired() -> CheckResult:
    """Paired repetitions, 11 pairs. Where the current processes fall in two groups (six 3 %
    faster, five 4 % slower, or the reverse for the rate), the median of the pooled samples moves
    one way and the mean of the pairs' log ratios, which is tested, the other."""
    flat = [100.0] * 11
    skew_down = [97.0] * 6 + [104.0] * 5  # pooled median -3 %, paired mean +0.1 %
    skew_up = [103.0] * 6 + [96.0] * 5  # pooled median +3 %, paired mean -0.2 %
    specs = [
        ("p_time_up_ms", LOWER, "ms", flat, [130.0] * 11),
        ("p_time_down_ms", LOWER, "ms", flat, [70.0] * 11),
        ("p_time_skew_ms", LOWER, "ms", flat, skew_down),
        ("p_rate_down", HIGHER, "items/s", flat, [70.0] * 11),
        ("p_rate_up", HIGHER, "items/s", flat, [130.0] * 11),
        ("p_rate_skew", HIGHER, "items/s", flat, skew_up),
    ]
    pairs: list[tuple[Metric | None, Metric | None]] = [
        (_grouped(name, d, u, b, 10 * i), _grouped(name, d, u, c, 10 * i + 100))
        for i, (name, d, u, b, c) in enumerate(specs)
    ]
    return _check(pairs, Policy.quiet(), paired=True)


def _ab_look() -> CheckResult:
    """A look of ``perfgate ab`` in resident workers: the pairs' log ratios, a variance borrowed
    within one unit, and a time and a rate past the threshold only with one pair far off."""
    shape = [0.0, 0.0, 0.01, 0.0, 0.01, 0.34]  # the sixth pair far off
    ratios: dict[tuple[str, str], list[float]] = {}
    base: dict[str, Metric] = {}
    for i in range(8):
        name, direction = (f"a{i}_time_ms", LOWER) if i % 2 == 0 else (f"a{i}_rate", HIGHER)
        base[name] = Metric(name=name, unit="ms", direction=direction, samples=(1.0,) * len(shape))
        worse = {0: 1.0, 1: 1.0, 2: -1.0, 3: -1.0}.get(i)  # a time up, a rate down; then the reverse
        if worse is None:
            ratios[(name, "median")] = [0.005 * i - 0.02 + x for x in shape]
        else:  # log(current / baseline): a rate that got worse fell
            sign = worse if direction is LOWER else -worse
            ratios[(name, "median")] = [sign * (0.05 + x) for x in shape]
    current = {  # one pooled sample per pair: the pair's ratio to a baseline of 1
        name: dataclasses.replace(m, samples=tuple(math.exp(x) for x in ratios[(name, "median")]))
        for name, m in base.items()
    }
    return decide_look(
        Run(model="dqn", metrics=base), Run(model="dqn", metrics=current), ratios, Policy.quiet(), alpha=0.01
    )


SCENARIOS: dict[str, Callable[[], CheckResult]] = {
    "both_directions": _both_directions,
    "kernels": _kernels,
    # 5×: with the raw t tail a metric's own test among six reaches α only past about 4.5×, and
    # only then does the ambiguous shift have a claim to withhold (and a reason to give)
    "shift_ambiguous": lambda: _shift(5.0, kernels=False),
    "shift_faster": lambda: _shift(0.5, kernels=False),
    "shift_regressed": lambda: _shift(2.0, kernels=True),
    "paired": _paired,
    "ab_look": _ab_look,
}
_RESULTS: dict[str, CheckResult] = {}


def _result(name: str) -> CheckResult:
    if name not in _RESULTS:
        _RESULTS[name] = SCENARIOS[name]()
    return _RESULTS[name]


# --- the metric's own change, from the direction-adjusted one --------------------------------


def _own(worse: float, direction: Direction) -> float:
    """A direction-adjusted change (positive: worse) as the change of the metric's value."""
    return -worse if direction is HIGHER else worse


def own_estimate(c: Comparison) -> float | None:
    """The estimate the verdict and the interval are about, as the change of the metric's value."""
    if c.worse is not None:
        return _own(c.worse, c.direction)
    return c.change


def own_interval(c: Comparison) -> tuple[float, float] | None:
    if c.ci is None:
        return None
    a, b = (_own(x, c.direction) for x in c.ci)
    return (min(a, b), max(a, b))


# --- rows of each format ---------------------------------------------------------------------

Row = tuple[str, str]  # (the label or sentence the row starts with, the whole row's text)


def _is_shift_line(row: str) -> bool:
    """The run's common shift, said once for the whole run: "the whole run is 2.00× slower (…)"."""
    return bool(re.search(r"the whole run is \d+\.\d+×", row))


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _markdown_rows(text: str) -> Iterator[Row]:
    for line in text.splitlines():
        if line.startswith("| ") and not set(line) <= set("|- "):
            cells = [_unescape(cell.strip()) for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            yield cells[0], " | ".join(cells)
        elif line.startswith("- "):
            sentence = _unescape(line[2:])
            yield sentence, sentence
        elif _is_shift_line(line):
            yield "", _unescape(line)


class _HtmlRows(HTMLParser):
    """The text of each table row (cells joined by " | ") and list item of the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[Row] = []
        self._cells: list[str] | None = None
        self._item: list[str] | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "svg", "title"):
            self._skip += 1
        elif tag == "tr":
            self._cells = []
        elif tag in ("td", "th") and self._cells is not None:
            self._cells.append("")
        elif tag in ("li", "p"):
            self._item = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "svg", "title"):
            self._skip -= 1
        elif tag == "tr" and self._cells is not None:
            cells = [" ".join(cell.split()) for cell in self._cells]
            self.rows.append((cells[0], " | ".join(cells)))
            self._cells = None
        elif tag in ("li", "p") and self._item is not None:
            sentence = " ".join("".join(self._item).split())
            if tag == "li" or _is_shift_line(sentence):
                self.rows.append((sentence, sentence))
            self._item = None

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._cells:
            self._cells[-1] += data
        if self._item is not None:
            self._item.append(data)


def _html_rows(text: str) -> Iterator[Row]:
    parser = _HtmlRows()
    parser.feed(text)
    parser.close()
    yield from parser.rows


def terminal_text(result: CheckResult) -> str:
    """What the terminal shows of a check, from rich at a fixed width, without colour."""
    out = io.StringIO()
    console = Console(file=out, width=TERMINAL_WIDTH, color_system=None, highlight=False, emoji=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli_common, "stderr_console", lambda: console)
        cli_common.print_verdict(result)
    return out.getvalue()


def _terminal_rows(text: str) -> Iterator[Row]:
    for line in text.splitlines():
        if line.startswith("  ") and ": " in line:
            label, _, rest = line.strip().partition(": ")
            yield label, f"{label} | {rest}"
        elif line.strip():
            yield line.strip(), line.strip()


FORMATS: dict[str, Callable[[CheckResult], list[Row]]] = {
    "markdown": lambda r: list(_markdown_rows(render_markdown(r))),
    "comment": lambda r: list(_markdown_rows(render_comment(r))),
    "html": lambda r: list(_html_rows(render_check_html(r))),
    "terminal": lambda r: list(_terminal_rows(terminal_text(r))),
}


def _sentence_subject(c: Comparison) -> str:
    return c.description if c.statistic == "median" else f"{c.description} {c.statistic}"


def _owner(head: str, result: CheckResult) -> Comparison | None:
    """The comparison a row is about: its first cell is the label, or its sentence starts with
    the metric's description (the longest that fits, so ``x`` does not take ``x (p95)``'s)."""
    for c in result.comparisons:
        if head == c.label:
            return c
    fits = [
        c for c in result.comparisons if re.match(re.escape(_sentence_subject(c)) + r" (increased|decreased) by ", head)
    ]
    return max(fits, key=lambda c: len(_sentence_subject(c)), default=None)


# --- percentages -----------------------------------------------------------------------------

_NUMBER = r"(?:\d+(?:\.\d+)?|∞)"
SIGNED = re.compile(rf"(?<![\w.])([+\-−]){_NUMBER}%")
INTERVAL = re.compile(rf"\[\s*([+\-−]{_NUMBER}%)\s*,\s*([+\-−]{_NUMBER}%)\s*\]")
# a percentage of another quantity, which the words before it name
OTHER_QUANTITY = re.compile(r"(raw|kernel changed|kernel's change of)\s*$")
# an end of the interval, quoted in a sentence
BOUND = re.compile(r"interval reaches\s*$")
# a magnitude whose direction is said in words, and what the words mean (+1: the value went up)
WORDED = re.compile(rf"\b(increased|decreased) by ({_NUMBER})%")
# the change said as better or worse than the threshold
BETTER_BY = re.compile(r"\b(better|worse) by more than\b")


def _value(token: str) -> float:
    """``-30.0%`` -> -0.30 (with ``−`` and ``∞`` as the reports write them)."""
    sign = -1.0 if token[0] in "-−" else 1.0
    body = token[1:].rstrip("%")
    return sign * (math.inf if body == "∞" else float(body) / 100.0)


def _tolerance(token: str) -> float:
    """Half a unit of the last digit shown, as a fraction, plus a hair for the binary float."""
    body = token.lstrip("+-−").rstrip("%")
    decimals = len(body.split(".")[1]) if "." in body else 0
    return 0.5 * 10.0 ** (-decimals) / 100.0 + 1e-12


def _shows(token: str, value: float | None) -> bool:
    """Whether ``token`` is ``value`` written as a signed percentage: same sign, same rounded size."""
    if value is None:
        return False
    shown = _value(token)
    if math.isinf(shown) or math.isinf(value):
        return shown == value
    same_sign = (shown < 0) == (value < 0) or shown == 0 == round(value * 100, 6)
    return same_sign and abs(shown - value) <= _tolerance(token)


def violations(c: Comparison, row: str) -> list[str]:
    """What in ``row`` breaks the rule for comparison ``c`` (empty: nothing)."""
    found: list[str] = []
    estimate, interval = own_estimate(c), own_interval(c)
    covered: set[int] = set()
    for m in INTERVAL.finditer(row):
        covered.update((m.start(1), m.start(2)))
        lo, hi = m.group(1), m.group(2)
        where = f"interval {m.group(0)}"
        if interval is None:
            found.append(f"{where}: the comparison has no interval")
            continue
        if _value(lo) > _value(hi):
            found.append(f"{where}: its ends are the wrong way round")
        if not (_shows(lo, interval[0]) and _shows(hi, interval[1])):
            found.append(
                f"{where}: not the interval of the metric's own change, {interval[0]:+.2%} to {interval[1]:+.2%}"
            )
        if estimate is not None and not (_value(lo) - _tolerance(lo) <= estimate <= _value(hi) + _tolerance(hi)):
            found.append(f"{where}: does not contain the estimate {estimate:+.2%}")
    for m in SIGNED.finditer(row):
        if m.start() in covered:
            continue
        token = m.group(0)
        named = OTHER_QUANTITY.search(row[: m.start()])
        if named:  # "raw +20.0%", "its compute reference kernel changed +30.0% since"
            other = c.raw_change if named.group(1) == "raw" else c.index_change
            if not _shows(token, other):
                found.append(f"{token} (of the quantity named before it) is not {other}")
            continue
        if BOUND.search(row[: m.start()]):  # "the interval reaches -15.7%": one of its ends
            if not any(_shows(token, v) for v in interval or ()):
                found.append(f"{token} is neither end of the interval of the metric's own change, {interval}")
        elif not _shows(token, estimate):
            found.append(
                f"{token} is not the metric's own change, {estimate if estimate is None else f'{estimate:+.2%}'}"
            )
    for m in WORDED.finditer(row):
        up = m.group(1) == "increased"
        size = _value("+" + m.group(2) + "%")
        if estimate is None or (estimate > 0) != up or abs(abs(estimate) - size) > _tolerance(m.group(2) + "%"):
            found.append(f"{m.group(0)!r} does not say the estimate {estimate}")
    for m in BETTER_BY.finditer(row):
        if c.worse is None or (c.worse < 0) != (m.group(1) == "better"):
            found.append(f"{m.group(0)!r} is the other way than the change, worse by {c.worse}")
    return found


def _rows_of(result: CheckResult, fmt: str) -> list[tuple[Comparison | None, str]]:
    return [(_owner(head, result), text) for head, text in FORMATS[fmt](result)]


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_percentage_of_a_row_is_in_the_metrics_own_terms(scenario: str, fmt: str) -> None:
    result = _result(scenario)
    found = []
    checked = 0
    for c, row in _rows_of(result, fmt):
        if c is None:
            # a row about no comparison (a budget, a note) carries no signed change to misread
            stray = [m.group(0) for m in SIGNED.finditer(row)]
            assert not stray or _is_shift_line(row), f"{fmt}: a signed percentage in a row of no metric: {row}"
            continue
        checked += 1
        found += [
            f"{fmt}: {c.label} [{c.direction.value}, {c.verdict.value}]: {v}\n    {row}" for v in violations(c, row)
        ]
    assert not found, "\n".join(found)
    assert checked or fmt == "terminal", f"no row of {scenario} found in the {fmt} output"


@pytest.mark.parametrize("fmt", ["markdown", "comment", "html", "terminal"])
@pytest.mark.parametrize("scenario", ["shift_ambiguous", "shift_regressed"])
def test_the_common_shift_line_says_its_direction_and_brackets_its_factor(scenario: str, fmt: str) -> None:
    """ "the whole run is 2.00× slower (6 timing metrics moved together, +80% to +123%)": a time's
    change, named "slower", and its interval contains the factor's."""
    result = _result(scenario)
    shift = result.common_shift
    assert shift is not None and shift.significant
    lines = [row for _, row in FORMATS[fmt](result) if _is_shift_line(row)]
    assert lines, f"no common-shift line in the {fmt} output"
    for line in lines:
        m = re.search(rf"(\d+\.\d+)× slower \(.*?([+\-−]{_NUMBER}%) to ([+\-−]{_NUMBER}%)\)", line)
        assert m, line
        lo, hi = _value(m.group(2)), _value(m.group(3))
        assert lo - _tolerance(m.group(2)) <= float(m.group(1)) - 1 <= hi + _tolerance(m.group(3)), line
        assert 0 < lo <= hi, line  # slower, all of it


def test_the_checks_cover_every_verdict_of_both_directions() -> None:
    """The rows above are all there is to check: every decided verdict of a time and of a rate,
    each way, broken budgets of both directions, and rows the run's common shift decided."""
    seen = {
        (c.direction, c.verdict, (own_estimate(c) or 0) > 0)
        for name in SCENARIOS
        for c in _result(name).comparisons
        if c.worse is not None
    }
    for direction in (LOWER, HIGHER):
        for verdict in (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.INCONCLUSIVE, Verdict.UNCHANGED):
            for up in (True, False):
                if (verdict, direction, up) in {
                    (Verdict.REGRESSED, LOWER, False),
                    (Verdict.REGRESSED, HIGHER, True),
                    (Verdict.IMPROVED, LOWER, True),
                    (Verdict.IMPROVED, HIGHER, False),
                }:
                    continue  # a time that fell does not regress
                assert (direction, verdict, up) in seen, (direction.value, verdict.value, "up" if up else "down")
    both = _result("both_directions")
    assert {b.direction for b in both.broken_budgets} == {LOWER, HIGHER}
    assert {c.verdict for c in both.comparisons} >= {Verdict.INFORMATIONAL, Verdict.NEW, Verdict.MISSING}
    assert any(c.derived_from for c in both.comparisons) and any(c.threshold_only for c in both.comparisons)
    assert any("interval reaches" in c.reason for c in both.comparisons if c.direction is HIGHER)
    ambiguous, faster, regressed = (_result(f"shift_{k}").common_shift for k in ("ambiguous", "faster", "regressed"))
    assert ambiguous is not None and ambiguous.ambiguous and faster is not None and faster.faster
    assert regressed is not None and regressed.regressed
    assert any("the whole run is" in c.reason for c in _result("shift_ambiguous").comparisons)
    kernels = _result("kernels").comparisons
    assert any((c.raw_change or 0) * (c.change or 0) < 0 for c in kernels)  # raw and normalised differ in sign
    assert any("past the threshold only with pair" in c.reason for c in _result("ab_look").comparisons)
    paired = _result("paired").comparisons
    skewed = [c for c in paired if "skew" in c.metric]
    assert len(skewed) == 2 and all(
        c.change is not None and (own_estimate(c) or 0) * c.change < 0 for c in skewed
    )  # the pooled medians and the tested pairs disagree


def test_the_complaint_reads_in_one_convention() -> None:
    """A throughput up 25.7 % with an interval reaching a drop: the sentence quotes the interval's
    own lower end, signed as in the cell."""
    (c,) = [c for c in _result("both_directions").comparisons if c.metric == "rate_noisy_up"]
    interval = own_interval(c)
    assert c.verdict is Verdict.INCONCLUSIVE and interval is not None and interval[0] < -c.threshold
    assert c.change == pytest.approx(0.257)
    (row,) = [r for owner, r in _rows_of(_result("both_directions"), "markdown") if owner is c]
    assert f"[{interval[0]:+.1%}, {interval[1]:+.1%}]" in row
    assert f"reaches {interval[0]:+.1%}" in row, row

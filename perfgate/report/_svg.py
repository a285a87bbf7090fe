"""Small SVG building blocks for the HTML report's charts: scales, ticks, axes, text.

The charts are drawn in Python when the report is written (see :mod:`perfgate.report.plots`
for why). Everything here returns markup strings; every piece of text goes through
:func:`text`, which escapes it with :func:`html.escape` after showing control characters
as escapes, so a name from a run can never open an element. Coordinates are rounded to
0.1 px, so the same input always gives the same bytes (the golden tests rely on it).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.report.formatting import unit_label
from perfgate.safe.text import plain

__all__ = [
    "TIME_UNITS",
    "Scale",
    "is_time_unit",
    "num",
    "text",
    "tick_label",
    "unit_label",
]

# seconds per unit, for the units a time metric may carry
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}


def is_time_unit(unit: str) -> bool:
    return unit in TIME_UNITS


def text(value: object) -> str:
    """``value`` as inert markup text (also safe inside a quoted attribute)."""
    return html.escape(plain(value), quote=True)


def num(value: float) -> str:
    """A coordinate: one decimal, no trailing ``.0``, never ``-0``."""
    s = f"{value:.1f}"
    if s.endswith(".0"):
        s = s[:-2]
    return "0" if s == "-0" else s


def tick_label(value: float) -> str:
    """A tick's number: 4,000 · 250 · 12.5 · 0.7 · 0.0035."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= m * power:
            return m * power
    return 10.0 * power


@dataclass(frozen=True, slots=True)
class Scale:
    """A map from data values in ``[lo, hi]`` to pixels in ``[start, end]`` (end may be < start)."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    @staticmethod
    def for_values(values: Sequence[float], start: float, end: float, *, log: bool, zero: bool) -> Scale:
        """A scale that holds ``values``: on a log10 axis (``log``, all values > 0), or a linear one
        that starts at 0 when ``zero`` (and all values are >= 0), otherwise at the minimum."""
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            return Scale(0.0, 1.0, start, end)
        lo, hi = min(finite), max(finite)
        if log and lo > 0:
            if hi / lo < 1.5:  # a narrow range: pad to show some context around the values
                mid = math.sqrt(lo * hi)
                lo, hi = mid / 1.3, mid * 1.3
            pad = (math.log10(hi) - math.log10(lo)) * 0.06
            return Scale(10 ** (math.log10(lo) - pad), 10 ** (math.log10(hi) + pad), start, end, log=True)
        if zero and lo >= 0:
            lo = 0.0
        if hi == lo:
            hi = lo + (abs(lo) or 1.0)
        pad = (hi - lo) * 0.06
        return Scale(lo if lo == 0.0 else lo - pad, hi + pad, start, end)

    def __call__(self, value: float) -> float:
        if self.log:
            a, b, v = math.log10(self.lo), math.log10(self.hi), math.log10(max(value, self.lo * 1e-3))
        else:
            a, b, v = self.lo, self.hi, value
        return self.start + (v - a) / (b - a) * (self.end - self.start)

    def ticks(self, count: int = 5) -> list[float]:
        """Round values inside the domain: 1-2-5 per decade on a log axis spanning a decade or
        more (only powers of ten past 4 decades), otherwise evenly spaced round numbers."""
        lo, hi = self.lo, self.hi
        if self.log and hi / lo >= 10:
            decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            steps = (1.0,) if len(decades) > 4 else (1.0, 2.0, 5.0)
            return [m * 10.0**d for d in decades for m in steps if lo <= m * 10.0**d <= hi]
        step = _nice_step(hi - lo, count)
        first = math.ceil(lo / step - 1e-9)
        out = []
        k = first
        while k * step <= hi + 1e-9 * step:
            out.append(round(k * step, 12))
            k += 1
        return out

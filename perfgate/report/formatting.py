"""Number, change and timestamp formatting shared by the reports.

Internal: shared with ``cli``, ``notify``; not part of the Python API (README, "Python API")."""

from __future__ import annotations

import math

__all__ = ["fmt_change", "fmt_ci", "fmt_duration", "fmt_interval", "fmt_p", "fmt_time", "fmt_value", "unit_label"]


def fmt_value(value: float | None) -> str:
    """Two decimals as in the original specification's report (0.70, 100.00); significant digits for tiny values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value != 0 and abs(value) < 0.1:
        return f"{value:.3g}"
    if abs(value) >= 10_000:
        return f"{value:,.2f}"
    return f"{value:.2f}"


def fmt_change(change: float | None) -> str:
    if change is None:
        return "—"
    if math.isinf(change):
        return "+∞%" if change > 0 else "−∞%"
    return f"{change * 100:+.1f}%"


def fmt_ci(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "—"
    return f"[{ci[0] * 100:+.1f}%, {ci[1] * 100:+.1f}%]"


def fmt_interval(ci: tuple[float, float] | None) -> str:
    """An interval of relative changes, each end signed (an unbounded end as ∞): ``[-71.2%, -29.1%]``."""
    if ci is None:
        return "—"
    return f"[{fmt_change(ci[0])}, {fmt_change(ci[1])}]"


def fmt_duration(seconds: float) -> str:
    """A time a person plans with: ``45 s``, ``6 min``, ``1.5 h``, rounded up (never promising less)."""
    if not math.isfinite(seconds):
        return "an unbounded time"
    if seconds < 90:
        return f"{max(math.ceil(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"{math.ceil(seconds / 60)} min"
    hours = math.ceil(seconds / 360) / 10
    return f"{hours:,.1f} h" if hours < 48 else f"{math.ceil(hours / 24):,} days"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "—"
    if p < 1e-4:
        return "<0.0001"
    return f"{p:.4f}"


def fmt_time(iso: str | None) -> str:
    """``2025-10-15T10:00:00Z`` -> ``2025-10-15 10:00:00`` (UTC), as in the original specification's report."""
    if not iso:
        return "unknown"
    return iso.replace("T", " ").rstrip("Z").split(".")[0]


_UNIT_LABELS = {"us": "µs", "μs": "µs"}


def unit_label(unit: str) -> str:
    """The unit as a reader writes it: ``us`` is shown as ``µs``."""
    return _UNIT_LABELS.get(unit, unit)

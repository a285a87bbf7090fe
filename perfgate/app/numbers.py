"""Numbers of a request checked before any work: finite, and within the bounds a flag allows."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, TypeVar

from perfgate.errors import InputError

__all__ = ["checked_number"]

_Number = TypeVar("_Number", int, float)


def checked_number(
    value: _Number | None,
    flag: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
    what: str = "",
) -> _Number | None:
    """``value`` of the numeric ``flag`` when it is finite and within the bounds given, else an
    :class:`~perfgate.errors.InputError` naming the flag (exit 2, one line).

    ``None`` (an optional flag that was not given) passes. NaN and infinity never pass: every
    comparison with NaN is false, so ``--time-budget nan`` would otherwise slip past a
    ``<= 0`` check and run without a budget. ``what`` says what the number counts
    (``"seconds"``) in the message. Used as ``checked_number(args.pairs, "--pairs", at_least=3,
    at_most=1000)``; ``perfgate ab`` checks every numeric flag this way.
    """
    if value is None:
        return None
    bounds: list[tuple[float | None, str, Callable[[Any, Any], bool]]] = [
        (above, ">", operator.gt),
        (at_least, ">=", operator.ge),
        (at_most, "<=", operator.le),
        (below, "<", operator.lt),
    ]
    wanted = " and ".join(
        f"{sign} {bound:,}" if isinstance(bound, int) else f"{sign} {bound:,g}"
        for bound, sign, _ in bounds
        if bound is not None
    )
    kind = "a whole number" if isinstance(value, int) else "a finite number"
    need = f"must be {kind}{f' of {what}' if what else ''}{f' {wanted}' if wanted else ''}"
    if isinstance(value, float):
        shown = f"{value:g}"
    else:  # an integer of thousands of digits is not printed (nor, past 4300 digits, printable)
        shown = str(value) if abs(value) < 10**30 else f"a number of about {int(value.bit_length() * 0.30103)} digits"
    finite = not isinstance(value, float) or math.isfinite(value)
    if not finite or not all(ok(value, bound) for bound, _, ok in bounds if bound is not None):
        raise InputError(f"{need}, got {shown}", field=flag)
    return value

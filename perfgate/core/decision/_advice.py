"""How much more measurement would decide an inconclusive estimate: samples, worker processes, or
repetitions of the whole run (pairs, in ``perfgate ab``), at the policy's α and power.

The figure the reports turn into time (:mod:`perfgate.core.advice`).
"""

from __future__ import annotations

import math

from perfgate.core.decision._estimate import Estimate

__all__ = ["MAX_REQUIRED_N", "required", "required_unit"]

MAX_REQUIRED_N = 10_000_000
_NO_MARGIN = 1e-12  # in log-ratio units: nothing left to resolve


def _required_n(n_now: int, se: float | None, margin: float, z: float) -> int | None:
    """Samples per side at which an estimate ``margin`` away from the boundary is decided."""
    if se is None or se <= 0 or n_now < 2:
        return None
    if margin <= _NO_MARGIN:
        return None
    need = math.ceil(n_now * (z * se / margin) ** 2)
    return min(max(need, n_now + 1), MAX_REQUIRED_N)


def _required_groups(sigma: float, margin: float, z: float, have: int) -> int | None:
    """Independent repetitions per side at which ``margin`` is resolved against ``sigma``."""
    if sigma <= 0 or margin <= _NO_MARGIN:
        return None
    return min(max(math.ceil(2.0 * (z * sigma / margin) ** 2), have + 1), MAX_REQUIRED_N)


def _required_processes(p: Estimate, margin: float, z: float) -> int | None:
    """Worker processes per side that would resolve ``margin``; None when no number would,
    because the part of the noise shared by a whole run (its phase) is larger than that."""
    if p.process_sigma <= 0 or margin <= _NO_MARGIN:
        return None
    room = (margin / z) ** 2 - p.within_se**2 - p.fixed_variance
    if room <= 0:
        return None
    need = math.ceil(2.0 * p.process_sigma**2 / room)
    return min(max(need, min(p.groups) + 1), MAX_REQUIRED_N)


def required(p: Estimate, margin: float, z: float) -> int | None:
    """How many of :func:`required_unit` per side would resolve ``margin`` (a log ratio) at ``z``."""
    if p.sigma_run is not None:  # paired: more repetitions of the whole run, not more samples, decide it
        return _required_groups(p.sigma_run, margin, z, min(p.groups))
    if p.noise and (p.fixed_variance > 0 or p.process_sigma > 0):
        # unpaired: more worker processes, when the run-wide noise leaves room for them
        return _required_processes(p, margin, z)
    return _required_n(min(p.base.n, p.cur.n), p.se, margin, z)


def required_unit(p: Estimate) -> str:
    """What more of would decide an estimate: ``"processes"`` where the noise between runs or processes
    is part of its test, else ``"samples"``."""
    return "processes" if p.sigma_run is not None or p.fixed_variance > 0 or p.process_sigma > 0 else "samples"

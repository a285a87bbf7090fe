"""What disturbed a run: load, steal time, other processes' CPU share, the frequency governor.

Read from ``/proc`` and ``/sys`` at the start and end of a run (Linux; elsewhere the fields
are simply absent). Stored in the run's ``config["environment"]`` so that a report can say
why a metric was noisy.

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Snapshot", "environment_between", "snapshot"]

_STAT = Path("/proc/stat")
_GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


@dataclass(frozen=True, slots=True)
class Snapshot:
    wall: float
    cpu_ticks: tuple[int, ...] | None  # the aggregate "cpu" line of /proc/stat
    own_cpu: float  # seconds of CPU used by this process and its waited-for children
    load: tuple[float, float, float] | None


def _cpu_ticks() -> tuple[int, ...] | None:
    try:
        first = _STAT.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    return tuple(int(v) for v in first[1:])


def snapshot() -> Snapshot:
    times = os.times()
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return Snapshot(
        wall=time.perf_counter(),
        cpu_ticks=_cpu_ticks(),
        own_cpu=times.user + times.system + times.children_user + times.children_system,
        load=load,
    )


def _governor() -> str | None:
    try:
        return _GOVERNOR.read_text().strip() or None
    except OSError:
        return None


def environment_between(start: Snapshot, end: Snapshot) -> dict[str, Any]:
    """Conditions over the interval between two snapshots."""
    env: dict[str, Any] = {"cores": os.cpu_count() or 0, "governor": _governor()}
    if start.load is not None and end.load is not None:
        env["load_avg_1m_start"] = round(start.load[0], 2)
        env["load_avg_1m_end"] = round(end.load[0], 2)
    if start.cpu_ticks is not None and end.cpu_ticks is not None:
        delta = [b - a for a, b in zip(start.cpu_ticks, end.cpu_ticks, strict=False)]
        total = sum(delta)
        if total > 0:
            # fields: user nice system idle iowait irq softirq steal guest guest_nice
            idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
            steal = delta[7] if len(delta) > 7 else 0
            hz = os.sysconf("SC_CLK_TCK")
            own = (end.own_cpu - start.own_cpu) * hz
            busy = total - idle - steal
            env["steal_pct"] = round(100.0 * steal / total, 2)
            env["other_processes_cpu_pct"] = round(100.0 * max(0.0, busy - own) / total, 2)
    return env

"""A stage's time by torch operator: torch.profiler's operator tree.

What it measures: every aten operator the stage's calls ran on the calling thread, with the
operators it called beneath it (``aten::linear;aten::addmm``), each charged its *self* CPU
time (its time less its children's, microseconds turned into seconds): the host's cost of
dispatching and, on the CPU, computing. With CUDA a second profile charges each operator the
device time of the kernels it launched (unit ``s (CUDA)``), since on a GPU the host's time is
mostly launching and the work is elsewhere.

Why torch.profiler: a model's time is spent in operators, which a Python sampling profiler
charges to whichever Python line called the module; torch's own tracer names the operator,
its place in the operator tree and, on a GPU, its kernels' time, and it ships with torch. It
is a tracer, so its counts are exact, but its times jitter and it adds a small cost to every
operator (resolution 0: the floor is left to the spread of repeated profiles).

torch is imported only when called (``import perfgate`` never loads it); :func:`operator_share`
is what ``instrument="auto"`` asks of one call.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from perfgate.core.profiles import SEPARATOR, Profile
from perfgate.profile import ProfilerMissing

__all__ = ["NOTES", "UNIT_CUDA", "fold_events", "operator_share", "profile_torch", "torch_notes"]

US = 1e-6  # torch.profiler's times are in microseconds
UNIT_CUDA = "s (CUDA)"
NOTES = (
    "torch: only torch operators are seen; the Python code between them (and numpy) is not",
    "torch: each operator's CPU time includes the profiler's own cost of recording it, "
    "which weighs most on small operators",
)
NOTE_NO_CUDA = "torch: CUDA is not available, so no device time was profiled (CPU operators only)"
NOTE_CUDA = (
    "torch: the CPU profile is the host's cost of each operator (mostly launching kernels); "
    "the kernels' time is in the device profile (unit s (CUDA))"
)
MISSING = "torch is not installed: pip install torch (the profiler is torch.profiler)"


def _torch() -> ModuleType:
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise ProfilerMissing(MISSING) from None


def _uses_cuda(torch: ModuleType, device: str) -> bool:
    return device.startswith("cuda") and bool(torch.cuda.is_available())


def torch_notes(device: str = "cpu") -> tuple[str, ...]:
    """What :func:`profile_torch` cannot see on ``device``."""
    if not device.startswith("cuda"):
        return NOTES
    return (*NOTES, NOTE_CUDA if _uses_cuda(_torch(), device) else NOTE_NO_CUDA)


def _is_cpu(event: Any) -> bool:
    kind = getattr(event, "device_type", None)
    return kind is None or getattr(kind, "name", str(kind).rsplit(".", 1)[-1]) == "CPU"


def _self_device_us(event: Any) -> float:
    """An operator's own device time: ``self_device_time_total`` (torch 2.4+), else ``self_cuda_time_total``."""
    if hasattr(event, "self_device_time_total"):
        return float(event.self_device_time_total)
    return float(event.self_cuda_time_total)


def _self_cpu_us(event: Any) -> float:
    return float(event.self_cpu_time_total)


def _stack(event: Any) -> str:
    names: list[str] = []
    while event is not None:
        names.append(str(event.name).replace(SEPARATOR, ","))
        event = event.cpu_parent
    return SEPARATOR.join(reversed(names))


def fold_events(events: Iterable[Any], cost: Callable[[Any], float]) -> dict[str, float]:
    """Folded operator stacks (root: a top-level operator) and each one's own ``cost`` in seconds.

    Only host-side events are folded: a device event (a kernel) is already counted in the
    device time of the operator that launched it. Costs of 0 are left out.
    """
    stacks: dict[str, float] = {}
    for event in events:
        if not _is_cpu(event):
            continue
        seconds = cost(event) * US
        if seconds > 0:
            key = _stack(event)
            stacks[key] = stacks.get(key, 0.0) + seconds
    return stacks


def _activities(torch: ModuleType, device: str) -> list[Any]:
    activity = torch.profiler.ProfilerActivity
    return [activity.CPU, activity.CUDA] if _uses_cuda(torch, device) else [activity.CPU]


def profile_torch(call: Callable[[], Any], *, seconds: float, min_calls: int = 3, device: str = "cpu") -> list[Profile]:
    """``call`` under torch.profiler until ``seconds`` have passed and at least ``min_calls`` calls.

    Returns the CPU profile (unit ``s``), then, where ``device`` is a CUDA device and CUDA is
    available, the device profile (unit ``s (CUDA)``).

    Raises:
        ProfilerMissing: torch is not installed.
    """
    torch = _torch()
    cuda = _uses_cuda(torch, device)
    calls = 0
    with torch.profiler.profile(activities=_activities(torch, device)) as prof:
        start = time.perf_counter()
        while calls < min_calls or time.perf_counter() - start < seconds:
            call()
            calls += 1
        if cuda:
            torch.cuda.synchronize()  # the last call's kernels end inside the profile
    events = list(prof.events())
    instrument = f"torch.profiler {torch.__version__}"
    profiles = [Profile(instrument=instrument, unit="s", calls=calls, stacks=fold_events(events, _self_cpu_us))]
    if cuda:
        profiles.append(
            Profile(instrument=instrument, unit=UNIT_CUDA, calls=calls, stacks=fold_events(events, _self_device_us))
        )
    return profiles


_UNCOUNTED = "perfgate: profiler start"


def _has_ancestor(event: Any, uncounted: str) -> bool:
    """Whether an aten operator (or the uncounted first call) is above ``event``: only outermost operators count."""
    parent = event.cpu_parent
    while parent is not None:
        name = str(parent.name)
        if name.startswith("aten::") or name == uncounted:
            return True
        parent = parent.cpu_parent
    return False


def operator_share(call: Callable[[], Any], *, device: str = "cpu") -> float:
    """The share of one call's wall time that aten operators took (outermost operators' CPU time).

    Raises:
        ProfilerMissing: torch is not installed.
    """
    torch = _torch()
    cuda = _uses_cuda(torch, device)
    with torch.profiler.profile(activities=_activities(torch, device)) as prof:
        # a first call under a new profile pays the profiler's own start (its first operators take
        # ten times as long): it is recorded but not counted
        with torch.profiler.record_function(_UNCOUNTED):
            call()
            if cuda:
                torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    operators = sum(
        float(e.cpu_time_total) * US
        for e in prof.events()
        if _is_cpu(e) and str(e.name).startswith("aten::") and not _has_ancestor(e, _UNCOUNTED)
    )
    return operators / wall if wall > 0 else 0.0

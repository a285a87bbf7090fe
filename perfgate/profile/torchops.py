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
from typing import Any, NamedTuple

from perfgate.core.profiles import SEPARATOR, Profile
from perfgate.profile._missing import ProfilerMissing

__all__ = ["NOTES", "UNIT_CUDA", "RawEvent", "fold_raw", "operator_share", "profile_torch", "raw_events", "torch_notes"]

NS = 1e-9  # the collector's times are in nanoseconds
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


# torch.profiler's own bookkeeping, which its tables leave out too (torch.autograd.profiler_util._filter_name)
_FILTERED = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)


class RawEvent(NamedTuple):
    """One event as the profiler's collector recorded it, before torch's tables are built.

    ``thread`` is the thread it started on; ``correlation`` its id, and ``linked`` (> 0) the id
    of the host operator a device kernel or a runtime call belongs to.
    """

    name: str
    start_ns: int
    duration_ns: int
    thread: int
    cpu: bool = True
    synchronous: bool = True
    correlation: int = 0
    linked: int = 0


def raw_events(prof: Any) -> list[RawEvent]:
    """A finished ``torch.profiler.profile``'s events, read from its collector's results.

    Not ``prof.events()``: building torch's event tables costs about 17 s of Python per second
    profiled on DQN's training step (217,000 events), the collector's own results 0.1 s, and the
    profile needs only names, times, threads and the links of kernels to operators.
    """
    cpu_kind = importlib.import_module("torch").autograd.DeviceType.CPU
    out = []
    for e in prof.profiler.kineto_results.events():
        name = e.name()
        if name in _FILTERED or e.is_hidden_event():
            continue
        thread = e.start_thread_id()
        fields = (
            name,
            e.start_ns(),
            e.duration_ns(),
            thread,
            e.device_type() == cpu_kind,
            not e.is_async() and thread == e.end_thread_id(),
            e.correlation_id(),
            e.linked_correlation_id(),
        )
        out.append(RawEvent(*fields))
    return out


def fold_raw(events: Iterable[RawEvent]) -> tuple[dict[str, float], dict[str, float]]:
    """Folded operator stacks and each one's own time in seconds: (host CPU, device).

    A host event's parent is the innermost host event on its thread whose interval holds its
    own (torch's rule; a runtime call linked to an operator is placed on that operator's
    thread). Its own CPU time is its duration less its children's. Its own device time is the
    time of the kernels linked to it, so a kernel is counted once, on the operator that
    launched it. Stacks that cost 0 are left out.
    """
    host = [e for e in events if e.cpu and e.synchronous]
    thread_of = {e.correlation: e.thread for e in host if e.linked == 0}
    device_ns: dict[int, float] = {}
    for e in events:
        if not e.cpu and e.linked > 0:
            device_ns[e.linked] = device_ns.get(e.linked, 0.0) + e.duration_ns
    by_thread: dict[int, list[RawEvent]] = {}
    for e in host:
        by_thread.setdefault(thread_of.get(e.linked, e.thread) if e.linked else e.thread, []).append(e)
    cpu: dict[str, float] = {}
    device: dict[str, float] = {}

    def close(frame: list[Any]) -> None:
        _, key, correlation, children, duration = frame
        own = (duration - children) * NS
        if own > 0:
            cpu[key] = cpu.get(key, 0.0) + own
        kernels = device_ns.get(correlation, 0.0) * NS if correlation else 0.0
        if kernels > 0:
            device[key] = device.get(key, 0.0) + kernels

    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e.start_ns, -e.duration_ns))
        # the open events, innermost last: [end, folded stack, correlation, children's time, duration]
        open_: list[list[Any]] = []
        for e in thread_events:
            end = e.start_ns + e.duration_ns
            while open_ and (e.start_ns >= open_[-1][0] or end > open_[-1][0]):
                close(open_.pop())
            name = e.name.replace(SEPARATOR, ",")
            if open_:
                open_[-1][3] += e.duration_ns
                key = open_[-1][1] + SEPARATOR + name
            else:
                key = name
            open_.append([end, key, e.correlation if e.linked == 0 else 0, 0, e.duration_ns])
        while open_:
            close(open_.pop())
    return cpu, device


def _activities(torch: ModuleType, device: str) -> list[Any]:
    activity = torch.profiler.ProfilerActivity
    return [activity.CPU, activity.CUDA] if _uses_cuda(torch, device) else [activity.CPU]


_UNCOUNTED = "perfgate: profiler start"


def _counted(stacks: dict[str, float]) -> dict[str, float]:
    """The stacks outside the uncounted first call."""
    return {k: v for k, v in stacks.items() if k.split(SEPARATOR, 1)[0] != _UNCOUNTED}


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
        # a new profile's first call pays the profiler's own start (DQN's training step: 1.6x a later
        # call's time, charged to whichever operators run first): recorded, not counted
        with torch.profiler.record_function(_UNCOUNTED):
            call()
            if cuda:
                torch.cuda.synchronize()
        start = time.perf_counter()
        while calls < min_calls or time.perf_counter() - start < seconds:
            call()
            calls += 1
        if cuda:
            torch.cuda.synchronize()  # the last call's kernels end inside the profile
    cpu, kernels = (_counted(stacks) for stacks in fold_raw(raw_events(prof)))
    instrument = f"torch.profiler {torch.__version__}"
    profiles = [Profile(instrument=instrument, unit="s", calls=calls, stacks=cpu)]
    if cuda:
        profiles.append(Profile(instrument=instrument, unit=UNIT_CUDA, calls=calls, stacks=kernels))
    return profiles


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
    cpu, _ = fold_raw(raw_events(prof))
    # the time inside outermost aten operators: every stack with an operator in it, outside the first call
    operators = sum(
        seconds for key, seconds in _counted(cpu).items() if any(n.startswith("aten::") for n in key.split(SEPARATOR))
    )
    return operators / wall if wall > 0 else 0.0

"""A stage's wall time by Python function: pyinstrument's statistical profiler.

What it measures: every ``interval`` (0.1 ms) of wall time pyinstrument records the calling
thread's Python stack and charges the time since the last sample to its innermost frame; the
frames' own times, per call path, are the folded stacks (unit ``s``, resolution the interval).

Why pyinstrument: it samples from the interpreter's profile hook in the process itself (no
second process, no ptrace, no root), so the resident worker can profile one stage between its
timed blocks; its overhead is small and evenly spread (a statistical profiler does not add a
fixed cost per call the way a deterministic one such as cProfile does, which would inflate
small functions); it records wall time, so a stage's waiting shows; and it gives each frame's
file and line. Time spent in C (numpy, torch operators, an ``a @ b``) has no Python frame of
its own: it is charged to the Python function that called it, and a built-in function shows as
a frame where a sample caught its return.

The profiling loop's own frames (and everything above it: the worker, this module,
pyinstrument) are dropped: each stack's root is the stage's function.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.core.profiles import Profile
from perfgate.profile._frames import Identity, fold, labels, qualname
from perfgate.profile._missing import ProfilerMissing

if TYPE_CHECKING:
    from pyinstrument.frame import Frame

__all__ = ["INTERVAL", "NOTES", "profile_sampling"]

# seconds between samples. pyinstrument takes a sample at the first interpreter event after the
# interval, so a C call longer than the interval (numpy's correlate, 0.47 ms) is seen late: at
# 0.5 ms, a stage's 0.70 ms convolution was charged 0.20 ms and its other functions the rest;
# at 0.1 ms, 0.46 ms. The cost is a stack taken ten times a millisecond, in a pass after the decision.
INTERVAL = 0.0001
NOTES = (
    f"sampling: one sample every {INTERVAL * 1e3:g} ms of wall time; a function shorter than that per call "
    "is seen only on average over the calls",
    "sampling: C code (numpy, torch operators, a @ b) is charged to the Python function that called it; "
    "a built-in function shows only where a sample caught its return",
    "sampling: only the calling thread is sampled; other threads' work shows as its waiting",
)
MISSING = "pyinstrument is not installed: pip install 'perfgate[profile]'"

_HERE = os.path.normcase(Path(__file__).resolve())
_DRIVER = "_drive"


def _drive(call: Callable[[], Any], seconds: float, min_calls: int) -> int:
    """The profiled loop (its frame marks where the stage's stacks begin): the number of calls made."""
    calls = 0
    start = time.perf_counter()
    while calls < min_calls or time.perf_counter() - start < seconds:
        call()
        calls += 1
    return calls


def profile_sampling(
    call: Callable[[], Any], *, seconds: float, min_calls: int = 3, interval: float = INTERVAL
) -> Profile:
    """``call`` under pyinstrument until ``seconds`` have passed and at least ``min_calls`` calls.

    Raises:
        ProfilerMissing: pyinstrument is not installed.
    """
    try:
        import pyinstrument
    except ImportError:
        raise ProfilerMissing(MISSING) from None
    profiler = pyinstrument.Profiler(interval=interval, async_mode="disabled")
    profiler.start()
    try:
        calls = _drive(call, seconds, min_calls)
    finally:
        session = profiler.stop()
    paths: dict[tuple[Identity, ...], float] = {}
    root = session.root_frame(trim_stem=False)
    if root is not None:
        for driver in _drivers(root):
            for child in driver.children:
                if not _skipped(child) and not _is_clock(child):
                    _walk(child, paths)
    names, where = labels(ident for path in paths for ident in path)
    return Profile(
        instrument=f"pyinstrument {pyinstrument.__version__}",
        unit="s",
        calls=calls,
        stacks=fold(paths, names),
        where=where,
        resolution=interval,
    )


def _identity(frame: Frame) -> Identity:
    """(qualified name, file, first line). Not pyinstrument's ``class_name``: that is the class of
    ``self`` in the samples that saw the frame most, so a method ``Module._call_impl`` that
    ``Linear`` and ``ReLU`` share would be named after either from one profile to the next."""
    file, line = frame.file_path or "", frame.line_no or 0
    return (qualname(file, line, frame.function), file, line)


def _is_pyinstrument(frame: Frame) -> bool:
    path = frame.file_path or ""
    return f"{os.sep}pyinstrument{os.sep}" in path


def _skipped(frame: Frame) -> bool:
    """A synthetic frame (its time is its parent's own) or one of pyinstrument's."""
    return frame.is_synthetic or _is_pyinstrument(frame)


def _is_clock(frame: Frame) -> bool:
    """The loop's own ``time.perf_counter`` (a built-in a sample may catch)."""
    return frame.file_path == "<built-in>" and frame.function == "perf_counter" and not frame.children


def _drivers(root: Frame) -> list[Frame]:
    """The frames of :func:`_drive` in the tree (outermost only; iterative: a stack can be deep)."""
    found: list[Frame] = []
    pending = [root]
    while pending:
        frame = pending.pop()
        path = frame.file_path or ""
        if frame.function == _DRIVER and path and os.path.normcase(Path(path).resolve()) == _HERE:
            found.append(frame)
        else:
            pending.extend(frame.children)
    return found


def _walk(top: Frame, paths: dict[tuple[Identity, ...], float]) -> None:
    """Each frame's own time under ``top`` by its path from ``top`` (iterative: a stack can be deep)."""
    pending: list[tuple[Frame, tuple[Identity, ...]]] = [(top, ())]
    while pending:
        frame, parent = pending.pop()
        path = (*parent, _identity(frame))
        own = frame.total_self_time  # less its real children's time, pyinstrument's own included
        if own > 0:
            paths[path] = paths.get(path, 0.0) + own
        # a synthetic child's time is the frame's own; pyinstrument's own time is nobody's
        pending.extend((child, path) for child in frame.children if not _skipped(child))

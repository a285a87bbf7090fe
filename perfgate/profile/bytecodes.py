"""A stage's bytecodes by Python function: an exact count, for counts mode.

What it measures: every bytecode instruction the interpreter executes for the stage's calls,
charged to the Python function executing it, along the real call path (the caller's frames
above it, ``run;features;rsi``). The count is exact and deterministic: the same code on the
same data executes the same bytecodes, so two profiles of one revision agree to the
instruction and any difference between revisions is the code's (unit ``bytecodes``,
resolution 0).

Why bytecodes: counts mode (``--measure counts``) gates on instructions counted under
callgrind, where Python 3.11 shows only the interpreter's C functions (every Python function
runs inside ``_PyEval_EvalFrameDefault``). A count of bytecodes per Python function is the
same kind of quantity, exact where a sampler is statistical, and names the Python functions.
It is taken with ``sys.settrace`` and per-opcode events (``frame.f_trace_opcodes``), which
Python 3.11 has; ``sys.monitoring`` (3.12+) would be faster but is not needed for a few calls.
Tracing makes the calls many times slower, which a count does not mind. C code (numpy, torch,
built-in functions) executes no bytecodes: its work is not counted.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from perfgate.core.profiles import Profile
from perfgate.profile._frames import Identity, fold, labels

__all__ = ["INSTRUMENT", "NOTES", "UNIT", "profile_bytecodes"]

INSTRUMENT = "bytecodes (sys.settrace)"
UNIT = "bytecodes"
NOTES = (
    "bytecodes: C code (numpy, torch operators, built-in functions) executes no bytecodes; "
    "its work is not counted, only the Python code around it",
    "bytecodes: only the calling thread is traced; other threads' code is not counted",
)

_TraceFunction = Callable[[FrameType, str, Any], Any]


def _identity(code: CodeType) -> Identity:
    return (getattr(code, "co_qualname", code.co_name), code.co_filename, code.co_firstlineno)


def profile_bytecodes(call: Callable[[], Any], *, calls: int = 3) -> Profile:
    """Exactly ``calls`` calls of ``call``, each bytecode executed charged to its function and path.

    The previous trace function (a debugger, coverage) is restored afterwards.
    """
    if calls < 1:
        raise ValueError(f"calls must be at least 1, got {calls}")
    counts: dict[tuple[CodeType, ...], int] = {}
    paths: dict[FrameType, tuple[CodeType, ...]] = {}  # each frame on the traced stack, its path

    def on_call(frame: FrameType, event: str, arg: Any) -> _TraceFunction | None:
        if event != "call":
            return None
        parent = paths.get(frame.f_back) if frame.f_back is not None else None
        path = (*parent, frame.f_code) if parent is not None else (frame.f_code,)
        paths[frame] = path
        frame.f_trace_lines = False
        frame.f_trace_opcodes = True
        executed = 0

        def local(frame: FrameType, event: str, arg: Any) -> _TraceFunction:
            nonlocal executed
            if event == "opcode":
                executed += 1
            elif event == "return":  # also when an exception leaves the frame, and at a generator's yield
                counts[path] = counts.get(path, 0) + executed
                executed = 0
                paths.pop(frame, None)
            return local

        return local

    # the collector off while counting: a collection in the middle of a call runs other objects'
    # finalizers (__del__, weakref callbacks) in this thread, and their bytecodes would be charged to
    # the stage, in one profile and not the next (a full test run showed it on identical code)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        for _ in range(calls):
            call()
    finally:
        sys.settrace(previous)
        if was_enabled:
            gc.enable()
        paths.clear()
    by_identity: dict[tuple[Identity, ...], float] = {}
    for codes, n in counts.items():
        key = tuple(_identity(code) for code in codes)
        by_identity[key] = by_identity.get(key, 0.0) + n
    names, where = labels(ident for path in by_identity for ident in path)
    return Profile(
        instrument=INSTRUMENT, unit=UNIT, calls=calls, stacks=fold(by_identity, names), where=where, resolution=0.0
    )

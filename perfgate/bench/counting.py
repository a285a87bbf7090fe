"""Counting a suite's stages inside one process that runs under callgrind.

The process starts with valgrind instrumenting nothing (``--instr-atstart=no``), so imports,
set-up and warm-up run at valgrind's cheapest speed. Then, in order:

1. every stage's set-up and warm-up calls (``warmup``; else the stage's ``counted_warmup``,
   its ``warmup``, or 2), uninstrumented;
2. instrumentation on (:class:`~perfgate.bench.callgrind.Callgrind`);
3. the switch's own cost: ``calls`` counted calls of an empty function, each with
   collection toggled on right before and off right after it and dumped on its own;
   what they count (a few thousand instructions of ctypes and the interpreter) is
   subtracted from every stage's calls by the coordinator;
4. per stage: garbage collected, one uncounted call (valgrind translates the stage's code
   and the simulated caches hold its data, as they would after a warm-up natively), then
   ``calls`` counted calls (at most the stage's ``counted_calls``), each dumped on its own.

Every step is announced on ``progress`` first, so a process that dies names the stage and
the step it died in.

When a stage keeps an expensive set-up product (``Stage.prepares``,
:meth:`~perfgate.bench.registry.StageContext.prepare`), :func:`prepare_stages` runs first, once
per revision, in a native process (no valgrind): the stages' set-ups in order, up to the last
stage that prepares, each product saved in a folder that the counted processes are given
(``CountOptions.prepared``) and load from, read-only. With ``compile_calls`` the same native
pass sets every stage up and calls each counted stage once, after every set-up: numba kernels
cached on disk (``cache=True``) are compiled there for the CPU its environment names (the one
valgrind presents, :func:`perfgate.bench.callgrind.valgrind_jit_target`) and loaded by the
counted processes instead of compiled under valgrind.

Internal: shared with ``workers``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.bench.callgrind import Callgrind
from perfgate.bench.registry import Stage, StageContext, stages_and_context
from perfgate.core.metrics import default_suite
from perfgate.errors import InputError

__all__ = ["NULL_LABEL", "CountOptions", "count_stages", "prepare_stages"]

# the dump label of the empty calls that measure the switch's own cost
NULL_LABEL = "perfgate:switch"


@dataclass(frozen=True, slots=True, kw_only=True)
class CountOptions:
    """What one counted process measures."""

    model: str
    suite: str = field(default_factory=default_suite)
    data_path: Path | None = None
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    warmup: int | None = None
    calls: int = 5
    count_all: bool = False  # count the stages that say counts cannot see their time too
    prepared: Path | None = None  # the native pass's folder of set-up products (read-only here)

    def __post_init__(self) -> None:
        if self.calls < 1:
            raise InputError(f"counted calls per stage must be >= 1, got {self.calls}", field="--repeat")
        if self.warmup is not None and self.warmup < 0:
            raise InputError(f"warmup must be >= 0, got {self.warmup}", field="--warmup")


def _counted(switch: Callgrind, call: Callable[[], object], label: str, calls: int) -> None:
    # the same code for the empty function and every stage, so the switch costs them alike
    for _ in range(calls):
        switch.toggle()
        call()
        switch.toggle()
        switch.dump(label)


def _stages(options: CountOptions) -> tuple[list[Stage], StageContext]:
    return stages_and_context(
        suite=options.suite,
        model=options.model,
        data_path=options.data_path,
        seed=options.seed,
        device="cpu",
        params=dict(options.params),
    )


def _left_out(st: Stage, options: CountOptions) -> bool:
    return bool(st.uncounted) and not options.count_all


def prepare_stages(
    options: CountOptions, folder: Path, progress: Callable[[str], None], *, compile_calls: bool = False
) -> tuple[list[str], list[str]]:
    """The native pass: set the stages up in order, up to the last one that prepares, with
    ``folder`` given to :meth:`~perfgate.bench.registry.StageContext.prepare` for saving.

    With ``compile_calls``, every stage is set up and then each one the counted processes count
    is called once (its numba kernels compile, for the CPU the environment names, into their
    cache on disk; module docstring). The calls come after every set-up, so no product depends
    on them: a set-up makes what it needs.

    Returns the names of the stages that prepare (none: the counted processes are given no
    folder) and of the stages called.
    """
    stages, ctx = _stages(options)
    preparing = [st.name for st in stages if st.prepares]
    if not preparing and not compile_calls:
        return [], []
    if preparing:
        ctx.prepared, ctx.preparing = folder, True
    last = len(stages) - 1 if compile_calls else max(i for i, st in enumerate(stages) if st.prepares)
    calls = []
    for st in stages[: last + 1]:
        progress(f"native set-up\t{st.name}")
        with st.running("its set-up"):
            call = st.setup(ctx)
        if compile_calls and not _left_out(st, options):
            calls.append((st, call))
    for st, call in calls:
        progress(f"native call\t{st.name}")
        with st.running("its native call"):
            call()
    progress("done\t")
    return preparing, [st.name for st, _ in calls]


def _warmup(st: Stage, options: CountOptions) -> int:
    """Uninstrumented calls before a stage's uncounted one: ``--warmup``, else its own for counts,
    else its own, else 2."""
    for n in (options.warmup, st.counted_warmup, st.warmup):
        if n is not None:
            return n
    return 2


def _calls(st: Stage, options: CountOptions) -> int:
    """Counted calls of a stage per process: ``--repeat``, at most its own ``counted_calls``."""
    return min(options.calls, st.counted_calls) if st.counted_calls is not None else options.calls


def count_stages(options: CountOptions, switch: Callgrind, progress: Callable[[str], None]) -> dict[str, Any]:
    """Set up, warm up and count every stage of ``options.suite`` for ``options.model``.

    Returns what the coordinator needs to read the dumps: the labels in the order they were
    dumped (``[[label, calls], ...]``, the empty function's first), each counted stage's metric,
    and the stages left out (a stage's ``uncounted`` reason, unless ``options.count_all``).
    """
    stages, ctx = _stages(options)
    ctx.prepared = options.prepared
    left_out = [st for st in stages if _left_out(st, options)]
    prepared = []
    for st in stages:
        progress(f"set-up\t{st.name}")
        with st.running("its set-up"):
            call = st.setup(ctx)
        if st in left_out:
            continue  # set up all the same: a later stage may use what it made (inference, the trained model)
        progress(f"warm-up\t{st.name}")
        with st.running("its warm-up calls"):
            for _ in range(_warmup(st, options)):
                call()
        prepared.append((st, call, _calls(st, options)))
    labels = [(NULL_LABEL, options.calls), *((f"stage:{st.name}", calls) for st, _, calls in prepared)]
    for label, _ in labels:
        switch.label(label)  # the C strings exist before anything is counted
    progress("instrumenting\t")
    switch.instrument(True)

    def nothing() -> None:
        return None

    nothing()
    _counted(switch, nothing, NULL_LABEL, options.calls)
    for st, call, calls in prepared:
        progress(f"counted calls\t{st.name}")
        gc.collect()
        with st.running("its counted calls"):
            call()
            _counted(switch, call, f"stage:{st.name}", calls)
    switch.instrument(False)
    progress("done\t")
    return {
        "dumps": [[label, calls] for label, calls in labels],
        "stages": [
            {
                "name": st.name,
                "metric": st.metric,
                **({"informational": st.counts_informational} if st.counts_informational else {}),
                **({"calls": calls} if calls != options.calls else {}),
            }
            for st, _, calls in prepared
        ],
        "left_out": [{"name": st.name, "metric": st.metric, "why": st.uncounted} for st in left_out],
    }

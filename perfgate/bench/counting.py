"""Counting a suite's stages inside one process that runs under callgrind.

The process starts with valgrind instrumenting nothing (``--instr-atstart=no``), so imports,
set-up and warm-up run at valgrind's cheapest speed. Then, in order:

1. every stage's set-up and warm-up calls (``warmup``, default 2), uninstrumented;
2. instrumentation on (:class:`~perfgate.bench.callgrind.Callgrind`);
3. the switch's own cost: ``calls`` counted calls of an empty function, each with
   collection toggled on right before and off right after it and dumped on its own;
   what they count (a few thousand instructions of ctypes and the interpreter) is
   subtracted from every stage's calls by the coordinator;
4. per stage: garbage collected, one uncounted call (valgrind translates the stage's code
   and the simulated caches hold its data, as they would after a warm-up natively), then
   ``calls`` counted calls, each dumped on its own.

Every step is announced on ``progress`` first, so a process that dies names the stage and
the step it died in.

When a stage keeps an expensive set-up product (``Stage.prepares``,
:meth:`~perfgate.bench.registry.StageContext.prepare`), :func:`prepare_stages` runs first, once
per revision, in a native process (no valgrind): the stages' set-ups in order, up to the last
stage that prepares, each product saved in a folder that the counted processes are given
(``CountOptions.prepared``) and load from, read-only.

Internal: shared with ``cli``, ``orchestrate``; not part of the Python API (README, "Python API").
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


def prepare_stages(options: CountOptions, folder: Path, progress: Callable[[str], None]) -> list[str]:
    """The native pass: set the stages up in order, up to the last one that prepares, with
    ``folder`` given to :meth:`~perfgate.bench.registry.StageContext.prepare` for saving.

    Returns the names of the stages that prepare (none: nothing was set up, and the counted
    processes are given no folder). No stage is called: a set-up makes what it needs.
    """
    stages, ctx = _stages(options)
    preparing = [st.name for st in stages if st.prepares]
    if not preparing:
        return []
    ctx.prepared, ctx.preparing = folder, True
    last = max(i for i, st in enumerate(stages) if st.prepares)
    for st in stages[: last + 1]:
        progress(f"native set-up\t{st.name}")
        with st.running("its set-up"):
            st.setup(ctx)
    progress("done\t")
    return preparing


def count_stages(options: CountOptions, switch: Callgrind, progress: Callable[[str], None]) -> dict[str, Any]:
    """Set up, warm up and count every stage of ``options.suite`` for ``options.model``.

    Returns what the coordinator needs to read the dumps: the labels in the order they were
    dumped (``[[label, calls], ...]``, the empty function's first), each counted stage's metric,
    and the stages left out (a stage's ``uncounted`` reason, unless ``options.count_all``).
    """
    stages, ctx = _stages(options)
    ctx.prepared = options.prepared
    left_out = [st for st in stages if st.uncounted and not options.count_all]
    prepared = []
    for st in stages:
        progress(f"set-up\t{st.name}")
        with st.running("its set-up"):
            call = st.setup(ctx)
        if st in left_out:
            continue  # set up all the same: a later stage may use what it made (inference, the trained model)
        progress(f"warm-up\t{st.name}")
        warmup = options.warmup if options.warmup is not None else (st.warmup if st.warmup is not None else 2)
        with st.running("its warm-up calls"):
            for _ in range(warmup):
                call()
        prepared.append((st, call))
    labels = [NULL_LABEL, *(f"stage:{st.name}" for st, _ in prepared)]
    for label in labels:
        switch.label(label)  # the C strings exist before anything is counted
    progress("instrumenting\t")
    switch.instrument(True)

    def nothing() -> None:
        return None

    nothing()
    _counted(switch, nothing, NULL_LABEL, options.calls)
    for st, call in prepared:
        progress(f"counted calls\t{st.name}")
        gc.collect()
        with st.running("its counted calls"):
            call()
            _counted(switch, call, f"stage:{st.name}", options.calls)
    switch.instrument(False)
    progress("done\t")
    return {
        "dumps": [[label, options.calls] for label in labels],
        "stages": [
            {
                "name": st.name,
                "metric": st.metric,
                **({"informational": st.counts_informational} if st.counts_informational else {}),
            }
            for st, _ in prepared
        ],
        "left_out": [{"name": st.name, "metric": st.metric, "why": st.uncounted} for st in left_out],
    }

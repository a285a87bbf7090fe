"""Counting a model's stages under valgrind's callgrind into one run of counts.

The one use case behind ``perfgate bench --measure counts`` and :func:`perfgate.api.count_stages`:
``processes`` counted processes (:mod:`perfgate.workers.counts`), each counting ``calls`` calls of
every stage, into a run of ``<stem>_instructions`` and ``<stem>_est_cycles`` per stage.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.errors import InputError

if TYPE_CHECKING:
    from perfgate.bench.provenance import Provenance
    from perfgate.core.schema import Run

__all__ = ["CountRequest", "check_countable", "count"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CountRequest:
    """What to count.

    ``suite_hooks``: this process has the suite's stages registered (``perfgate bench`` does), so
    the suite's ``default_data_path`` hook makes the data once, here, its ``run_config`` hook adds to
    the run's configuration, and the native pass runs only when a stage prepares or the suite uses
    numba; without it (the Python API) the data is the workers' own and the native pass always runs.
    """

    model: str
    suite: str
    stages_modules: tuple[str, ...] = ()
    data: Path | None = None
    seed: int = 0
    quick: bool = False
    warmup: int | None = None
    calls: int = 5
    count_all: bool = False
    processes: int = 2
    threads: int | None = None
    suite_hooks: bool = False


def check_countable(*, device: str, threads: int | None, time_budget: float | None) -> None:
    """Refuse what ``--measure counts`` cannot do, before any work; valgrind must be installed."""
    if device != "cpu":
        raise InputError(
            f"--measure counts runs on the CPU only (got --device {device}): callgrind simulates the CPU and "
            "cannot see GPU kernels; measure a GPU with --measure times",
            field="--device",
        )
    if threads not in (None, 1):
        raise InputError("--measure counts runs every stage on one thread; leave out --threads", field="--threads")
    if time_budget is not None:
        raise InputError(
            "--time-budget does not apply to --measure counts (the counts do not wobble)", field="--measure"
        )
    from perfgate.bench.callgrind import find_valgrind

    find_valgrind()


def count(request: CountRequest, provenance: Provenance, progress: Callable[[str], None] | None = None) -> Run:
    """Count ``request.model``'s stages in ``request.processes`` processes (at least 2) into one run."""
    from perfgate.workers.counts import counts_job, measure_counts

    data: Path | str | None = request.data
    config = None
    prepare = True
    if request.suite_hooks:
        from perfgate.bench.registry import stages_for
        from perfgate.suites import find, hook
        from perfgate.workers.measure import run_config

        default_data_path = hook(find(request.suite), "default_data_path") if data is None else None
        if default_data_path is not None:
            data = default_data_path(request.seed)  # made once, natively: not under valgrind in every process
    job = counts_job(
        suite=request.suite,
        stages_modules=request.stages_modules,
        data=data,
        seed=request.seed,
        params={"quick": True} if request.quick else {},
        warmup=request.warmup,
        calls=request.calls,
        count_all=request.count_all,
    )
    if request.suite_hooks:
        config = run_config(request.suite, request.model, quick=request.quick, threads=request.threads)
        # the stages are registered here too: the native pass only when one of them prepares, or
        # when the suite uses numba (the pass compiles its cached kernels for valgrind's CPU)
        prepare = any(st.prepares for st in stages_for(request.suite, request.model)) or "numba" in sys.modules
    return measure_counts(
        job,
        request.model,
        processes=request.processes,
        run_id=provenance.run_id,
        created_at=provenance.created_at,
        git=provenance.git,
        machine=provenance.machine,
        software=provenance.software,
        config=config,
        progress=progress,
        prepare=prepare,
    )

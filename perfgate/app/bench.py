"""``perfgate bench``: measure the stages of one model, or of every model of a suite, into run files.

Each model is measured in this process, in fresh bench workers one after another
(``--processes``, ``--time-budget``: :mod:`perfgate.workers.repeat`), or counted under callgrind
(``--measure counts``: :mod:`perfgate.app.count`); its run file is written, and with a store the
runs are recorded there too. A suite is found the same way whoever wrote it: declared by an
installed package (:mod:`perfgate.suites`), or registered by its stages modules.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.core.schema import normalize_model
from perfgate.errors import InputError
from perfgate.output import check_distinct, is_replaceable
from perfgate.runfile import save_run
from perfgate.suites import find, hook, import_stages
from perfgate.workers.measure import MeasureOptions, checkpoint_path, measure_model, resolved_device
from perfgate.workers.stages import import_stage_modules

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from perfgate.bench.provenance import Provenance
    from perfgate.bench.runner import ProgressFn
    from perfgate.core.schema import Run

__all__ = ["BenchRequest", "BenchResult", "Benched", "bench", "output_path"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRequest:
    """What ``perfgate bench`` was asked.

    ``model`` is a model's name or ``all``; ``output`` the run file, whose ``{model}`` is replaced
    (or ``_<model>`` added) when there are several. ``threshold_pct`` is the regression threshold
    a time budget aims its precision at (a third of it). ``inputs``: the files no output may
    replace, by what they are (``--data``, ``--config``, the store's file).
    """

    model: str
    output: Path
    options: MeasureOptions
    processes: int = 1
    time_budget: float | None = None
    measure: str = "times"
    count_all_stages: bool = False
    threshold_pct: float = 10.0
    store_url: str | None = None
    inputs: Mapping[str, Path | None] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Benched:
    """One model measured: its run, the file it was written to, and its trained model's file if one was saved."""

    model: str
    path: Path
    run: Run
    checkpoint: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchResult:
    """Every run made, in order, and the store they were recorded in (None: no store)."""

    runs: tuple[Run, ...]
    recorded_in: str | None = None


def output_path(template: Path, model: str, many: bool) -> Path:
    """The run file of ``model``: ``{model}`` in ``template`` replaced, or ``_<model>`` added when ``many``."""
    text = str(template)
    if "{model}" in text:
        return Path(text.replace("{model}", model))
    if many:
        return template.with_name(f"{template.stem}_{model}{template.suffix}")
    return template


def _own_suite_models(suite: str, requested: str, imported: tuple[str, ...]) -> list[str]:
    """The models to measure in a suite of the user's, or an error that says what to pass."""
    from perfgate.bench.registry import registered, stages_for

    stages = registered(suite)
    if not stages:
        if imported:
            where = f"the module(s) imported ({', '.join(imported)}) registered none"
        else:
            where = "no --stages-module was given, so no module of yours was imported"
        others = sorted({s.suite for s in registered()})
        known = f"; suites registered: {', '.join(others)}" if others else ""
        raise InputError(
            f"no stages registered in suite {suite!r}: {where}{known}; pass --stages-module MODULE, the module "
            f"whose @stage(..., suite={suite!r}) functions define the suite",
            field="--suite",
        )
    named = sorted({normalize_model(m) for s in stages if s.models is not None for m in s.models})
    if requested == "all":
        if not named:
            raise InputError(
                f"the stages of suite {suite!r} name no models (none has models=); give --model NAME", field="--model"
            )
        return named
    if not stages_for(suite, requested):
        raise InputError(
            f"no stage of suite {suite!r} applies to model {requested!r}; its stages accept: {', '.join(named)}",
            field="--model",
        )
    return [requested]


def _no_bar(model: str) -> AbstractContextManager[ProgressFn | None]:
    return contextlib.nullcontext(None)


def bench(
    request: BenchRequest,
    provenance: Provenance,
    *,
    measured: Callable[[Benched], None] | None = None,
    progress: Callable[[str], None] | None = None,
    bar: Callable[[str], AbstractContextManager[ProgressFn | None]] = _no_bar,
) -> BenchResult:
    """Measure every model ``request`` names, write each run file, and record the runs in the store.

    ``measured`` is told of each model as soon as its run file is written; ``progress`` gets the
    lines of the worker and counted processes; ``bar`` gives the progress callback of a model
    measured in this process, for as long as it is measured.
    """
    from perfgate.bench.disturbance import environment_between, snapshot

    options = request.options
    if request.measure == "counts":
        from perfgate.app.count import check_countable

        check_countable(device=options.device, threads=options.threads, time_budget=request.time_budget)
    elif request.count_all_stages:
        raise InputError("--count-all-stages goes with --measure counts", field="--count-all-stages")
    import_stage_modules(options.stages_modules)
    requested = normalize_model(request.model)
    suite = find(options.suite)
    declared = list(suite.models) if suite is not None else []
    if declared and requested != "all" and requested not in declared:  # before its stages are imported
        raise InputError(f"unknown model {request.model!r}; choose from {', '.join(declared)} or all", field="--model")
    if suite is not None:  # a declared suite registers its stages on import, and may pick the device
        import_stages(suite)
        options = resolved_device(options)
    if declared:
        models = declared if requested == "all" else [requested]
    else:
        models = _own_suite_models(options.suite, requested, options.stages_modules)
    runs = []
    paths = {model: output_path(request.output, model, len(models) > 1) for model in models}
    check_distinct({f"--output ({m})": p for m, p in paths.items()}, dict(request.inputs))
    save_checkpoint = hook(suite, "save_checkpoint")
    for model in models:
        path = paths[model]
        made = provenance.renewed()
        before = snapshot()
        result = _measure(request, options, model, made, path, progress, bar)
        result = dataclasses.replace(
            result, config={**result.config, "environment": environment_between(before, snapshot())}
        )
        save_run(path, result)
        runs.append(result)
        checkpoint = checkpoint_path(path)
        saved = save_checkpoint is not None and is_replaceable(path) and checkpoint.exists()
        if measured is not None:
            measured(Benched(model=model, path=path, run=result, checkpoint=checkpoint if saved else None))
    recorded_in = None
    if request.store_url is not None:
        from perfgate.store import open_store

        store = open_store(request.store_url)
        try:
            for r in runs:
                store.add_run(r)
        finally:
            store.close()
        recorded_in = store.url
    return BenchResult(runs=tuple(runs), recorded_in=recorded_in)


def _measure(
    request: BenchRequest,
    options: MeasureOptions,
    model: str,
    provenance: Provenance,
    path: Path,
    progress: Callable[[str], None] | None,
    bar: Callable[[str], AbstractContextManager[ProgressFn | None]],
) -> Run:
    """One model, measured the way the request asks."""
    if request.measure == "counts":
        from perfgate.app.count import CountRequest, count

        counted = CountRequest(
            model=model,
            suite=options.suite,
            stages_modules=options.stages_modules,
            data=options.data,
            seed=options.seed,
            quick=options.quick,
            warmup=options.warmup,
            calls=options.repeat if options.repeat is not None else 5,
            count_all=request.count_all_stages,
            processes=request.processes,
            threads=options.threads,
            suite_hooks=True,
        )
        return count(counted, provenance, progress)
    if request.processes > 1 or request.time_budget is not None:
        from perfgate.workers.repeat import measure_in_processes

        budget = request.time_budget
        return measure_in_processes(
            options,
            model,
            processes=request.processes if budget is None or request.processes > 1 else 20,
            time_budget=budget,
            target_precision=request.threshold_pct / 100 / 3,
            run_id=provenance.run_id,
            progress=progress,
        )
    with bar(model) as report:
        return measure_model(
            options,
            model,
            run_id=provenance.run_id,
            created_at=provenance.created_at,
            git=provenance.git,
            machine=dict(provenance.machine),
            out=path,
            progress=report,
        )

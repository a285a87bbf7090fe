"""Measuring one model once, in this process, from what ``perfgate bench`` was asked.

``perfgate bench`` without ``--processes`` measures here, in its own process, and so does each
of its bench workers (:mod:`perfgate.workers.bench`), which gets its :class:`MeasureOptions` as
JSON on standard input (:class:`BenchJob`), never a copy of the parent's command line. A suite
whose stages module defines ``save_checkpoint`` (the reference pipeline does) also gets the
trained model next to the run file (``run.json`` -> ``run.model.pt``).

Internal: shared with ``ab``, ``app``, ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import InputError, PerfgateError
from perfgate.output import is_replaceable, open_output
from perfgate.suites import find, hook

if TYPE_CHECKING:
    from perfgate.bench.registry import StageContext
    from perfgate.bench.runner import BenchOptions, ProgressFn
    from perfgate.core.schema import GitInfo, Run

__all__ = ["BenchJob", "MeasureOptions", "checkpoint_path", "measure_model", "resolved_device", "run_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureOptions:
    """What measuring a model needs of ``perfgate bench``'s flags: no store, no Pushgateway, no
    configuration file (a worker measures and writes its run file; the parent records and pushes)."""

    suite: str
    data: Path | None = None
    seed: int = 0
    device: str = "cpu"
    rounds: int | None = None
    repeat: int | None = None
    warmup: int | None = None
    quick: bool = False
    threads: int | None = None
    stages_modules: tuple[str, ...] = ()
    git_commit: str | None = None
    branch: str | None = None


_FIELDS = tuple(f.name for f in dataclasses.fields(MeasureOptions))


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchJob:
    """One bench worker's job: measure ``model`` once with ``options`` into the run file ``output``,
    writing each step to ``progress`` as it begins (so that the parent can name the step of a worker
    it killed at its deadline)."""

    options: MeasureOptions
    model: str
    output: Path
    progress: Path

    def to_json(self) -> dict[str, object]:
        """The job as JSON values: the options' fields, ``model``, ``output`` and ``progress``."""
        values: dict[str, object] = {name: getattr(self.options, name) for name in _FIELDS}
        values["data"] = str(self.options.data.resolve()) if self.options.data is not None else None
        values["stages_modules"] = list(self.options.stages_modules)
        return {**values, "model": self.model, "output": str(self.output), "progress": str(self.progress)}

    @classmethod
    def from_json(cls, values: object) -> BenchJob:
        """The job :meth:`to_json` wrote; anything else is an error that names the fields."""
        expected = {*_FIELDS, "model", "output", "progress"}
        if not isinstance(values, Mapping) or set(values) != expected:
            got = sorted(values) if isinstance(values, Mapping) else type(values).__name__
            raise PerfgateError(f"worker options must have exactly the fields {sorted(expected)}, got {got}")
        fields: dict[str, Any] = {name: values[name] for name in _FIELDS}
        fields["data"] = Path(fields["data"]) if fields["data"] is not None else None
        fields["stages_modules"] = tuple(fields["stages_modules"])
        return cls(
            options=MeasureOptions(**fields),
            model=str(values["model"]),
            output=Path(values["output"]),
            progress=Path(values["progress"]),
        )


def checkpoint_path(run_path: Path) -> Path:
    """Where the trained model of a run goes: beside the run file, ``<stem>.model.pt``."""
    return run_path.with_name(f"{run_path.stem}.model.pt")


def resolved_device(options: MeasureOptions) -> MeasureOptions:
    """``options`` with the device the declared suite's ``resolve_device`` hook picks (imports its stages)."""
    resolve_device = hook(find(options.suite), "resolve_device")
    if resolve_device is None:
        return options
    return dataclasses.replace(options, device=resolve_device(options.device))


def _bench_options(options: MeasureOptions, model: str) -> BenchOptions:
    from perfgate.bench.runner import BenchOptions

    params: dict[str, object] = {}
    if options.threads is not None:
        params["threads"] = options.threads
    extra: dict[str, Any] = {}
    rounds = 3
    if options.quick:
        # a smoke run: every stage still runs, in two rounds of a few calls
        extra = {"warmup_time": 0.02, "round_time": 0.05, "min_repeat": 1, "samples_cap": 500, "max_repeat": 1000}
        params["quick"] = True
        rounds = 2
    elif (suite := find(options.suite)) is not None:  # the suite's own rounds and calls per round
        if suite.min_repeat is not None:
            extra = {"min_repeat": suite.min_repeat}
        rounds = suite.rounds if suite.rounds is not None else rounds
    return BenchOptions(
        model=model,
        suite=options.suite,
        data_path=options.data,
        seed=options.seed,
        device=options.device,
        rounds=options.rounds if options.rounds is not None else rounds,
        repeat=options.repeat,
        warmup=options.warmup,
        params=params,
        **extra,
    )


def run_config(suite: str, model: str, *, quick: bool, threads: int | None) -> dict[str, object]:
    """What the run file records beyond the runner's own: smoke run or not, and the suite's ``run_config``."""
    config: dict[str, object] = {"quick": True} if quick else {}
    hooked = hook(find(suite), "run_config")
    if hooked is not None:
        config.update(hooked(model, quick=quick, threads=threads))
    return config


def measure_model(
    options: MeasureOptions,
    model: str,
    *,
    run_id: str,
    created_at: str,
    git: GitInfo,
    machine: dict[str, Any],
    out: Path,
    progress: ProgressFn | None = None,
) -> Run:
    """Measure ``model`` once in this process (the stages registered already); its trained model,
    when the suite saves one, goes beside ``out``."""
    from perfgate.bench.runner import run_benchmark

    bench_options = _bench_options(options, model)
    on_finish: Callable[[StageContext], None] | None = None
    save_checkpoint = hook(find(options.suite), "save_checkpoint")
    if save_checkpoint is not None:

        def on_finish(ctx: StageContext) -> None:
            if is_replaceable(out):  # never /dev/null.model.pt beside --output /dev/null
                with open_output(checkpoint_path(out)) as handle:
                    save_checkpoint(ctx, handle)

    if options.data is not None and not options.data.exists():
        raise InputError(
            "data file not found; check the path or leave out --data for synthetic bars",
            source=str(options.data),
            field="--data",
        )
    return run_benchmark(
        bench_options,
        run_id=run_id,
        created_at=created_at,
        git=git,
        machine=machine,
        config=run_config(options.suite, model, quick=options.quick, threads=options.threads),
        on_finish=on_finish,
        progress=progress,
    )

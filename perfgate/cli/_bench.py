"""``perfgate bench``: run the stages of a model and write a run file (the original specification's quick benchmark).

A suite whose stages module defines ``save_checkpoint`` (the reference pipeline does) also gets
the trained model next to the run file (``run.json`` -> ``run.model.pt``); ``--quick`` is a smoke
run: two rounds, fewer calls. A suite is found the same way whoever wrote it: declared by an
installed package (:mod:`perfgate.suites`), or registered by ``--stages-module``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.app.numbers import checked_number
from perfgate.app.runs import model_key
from perfgate.app.stores import chosen_store, store_file
from perfgate.cli._flags import add_config_argument, add_flag, add_store_argument, config_from
from perfgate.cli._output import stderr_console, term
from perfgate.core.codec import format_timestamp
from perfgate.core.metrics import default_suite
from perfgate.core.schema import Run
from perfgate.errors import InputError
from perfgate.output import check_distinct, is_replaceable, open_output, output_file
from perfgate.runfile import save_run
from perfgate.safe.text import plain
from perfgate.suites import find, hook, import_stages

if TYPE_CHECKING:
    from perfgate.bench.registry import StageContext
    from perfgate.bench.runner import BenchOptions, ProgressFn

__all__ = ["WORKER_FIELDS", "add_arguments", "output_path", "run", "run_worker", "worker_options"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--model", required=True)
    parser.add_argument(
        "--output",
        type=output_file,
        required=True,
        help="run file to write; with --model all, {model} in the name is replaced (or _<model> is added)",
    )
    add_flag(parser, "--git-commit", default=None, default_text="git rev-parse HEAD")
    add_flag(parser, "--branch", default=None, default_text="from git or the CI's variables")
    add_flag(parser, "--data", type=Path, default=None, default_text="synthetic OHLCV-1m bars")
    add_store_argument(parser)
    add_flag(parser, "--push-metrics", metavar="URL")
    add_flag(parser, "--rounds", type=int, default=None, default_text="the suite's own, else 3; 2 with --quick")
    add_flag(parser, "--repeat", type=int, default=None, default_text="from each stage's speed")
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed calls per stage first (default: from each stage's speed)"
    )
    add_flag(parser, "--seed", type=int, default=0, default_text="0")
    add_flag(parser, "--device", default="cpu", default_text="cpu")
    add_flag(
        parser, "--suite", default=None, default_text="the installed default suite: pipeline, with the pipeline extra"
    )
    add_flag(parser, "--quick", action="store_true")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads for training steps (default 1; inference uses 1)"
    )
    add_flag(parser, "--stages-module", action="append", default=[], dest="stages_modules", metavar="MODULE")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="fresh worker processes measuring one after another, so that the check sees how much a timing "
        "moves from one process to the next (default 1)",
    )
    add_flag(
        parser,
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        default_text="none; with a budget at least 2 processes, at most --processes (20 when --processes is 1), "
        "until every timing's median is known to within a third of the regression threshold",
    )
    add_flag(parser, "--measure", choices=("times", "counts"), default="times", default_text="times")
    add_flag(parser, "--count-all-stages", action="store_true")
    add_config_argument(parser)


def output_path(template: Path, model: str, many: bool) -> Path:
    text = str(template)
    if "{model}" in text:
        return Path(text.replace("{model}", model))
    if many:
        return template.with_name(f"{template.stem}_{model}{template.suffix}")
    return template


def checkpoint_path(run_path: Path) -> Path:
    """Where the trained model of a run goes: beside the run file, ``<stem>.model.pt``."""
    return run_path.with_name(f"{run_path.stem}.model.pt")


def _options(args: argparse.Namespace, model: str) -> BenchOptions:
    from perfgate.bench.runner import BenchOptions

    params: dict[str, object] = {}
    if args.threads is not None:
        params["threads"] = args.threads
    extra: dict[str, Any] = {}
    rounds = 3
    if args.quick:
        # a smoke run: every stage still runs, in two rounds of a few calls
        extra = {"warmup_time": 0.02, "round_time": 0.05, "min_repeat": 1, "samples_cap": 500, "max_repeat": 1000}
        params["quick"] = True
        rounds = 2
    elif (suite := find(args.suite)) is not None:  # the suite's own rounds and calls per round
        if suite.min_repeat is not None:
            extra = {"min_repeat": suite.min_repeat}
        rounds = suite.rounds if suite.rounds is not None else rounds
    return BenchOptions(
        model=model,
        suite=args.suite,
        data_path=args.data,
        seed=args.seed,
        device=args.device,
        rounds=args.rounds if args.rounds is not None else rounds,
        repeat=args.repeat,
        warmup=args.warmup,
        params=params,
        **extra,
    )


def _measure(  # type: ignore[no-untyped-def]
    args: argparse.Namespace, model: str, machine: dict, git, out: Path, progress: ProgressFn | None = None
) -> Run:
    from perfgate.bench.runner import run_benchmark

    options = _options(args, model)
    on_finish: Callable[[StageContext], None] | None = None
    save_checkpoint = hook(find(args.suite), "save_checkpoint")
    if save_checkpoint is not None:

        def on_finish(ctx: StageContext) -> None:
            if is_replaceable(out):  # never /dev/null.model.pt beside --output /dev/null
                with open_output(checkpoint_path(out)) as handle:
                    save_checkpoint(ctx, handle)

    if args.data is not None and not args.data.exists():
        raise InputError(
            "data file not found; check the path or leave out --data for synthetic bars",
            source=str(args.data),
            field="--data",
        )
    measure = functools.partial(
        run_benchmark,
        options,
        run_id=uuid.uuid4().hex,
        created_at=format_timestamp(datetime.now(UTC)),
        git=git,
        machine=machine,
        config=_config(args, model),
        on_finish=on_finish,
    )
    if progress is not None:  # a worker process's progress file
        return measure(progress=progress)
    if not sys.stderr.isatty():
        return measure()
    from rich.progress import Progress

    with Progress(transient=True, console=stderr_console()) as bar:
        task = bar.add_task(f"{model}", total=1)

        def report(what: str, done: int, total: int) -> None:
            bar.update(task, description=f"{model}: {what}", completed=done, total=total)

        return measure(progress=report)


def _config(args: argparse.Namespace, model: str) -> dict[str, object]:
    """What the run file records beyond the runner's own: smoke run or not, and the suite's ``run_config``."""
    config: dict[str, object] = {"quick": True} if args.quick else {}
    run_config = hook(find(args.suite), "run_config")
    if run_config is not None:
        config.update(run_config(model, quick=args.quick, threads=args.threads))
    return config


def _import_stage_modules(names: list[str]) -> None:
    """Import ``names`` with the working directory first on ``sys.path``, as ``python -m`` and pytest do.

    The ``perfgate`` script's own folder is what Python puts first, so without this a
    ``mystages.py`` beside the user would need ``PYTHONPATH=.``.
    """
    import importlib

    from perfgate.usercode import loading

    if not names:
        return
    here = str(Path.cwd())
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    for name in names:
        # a module that raises, exits or interrupts itself on import is an error of its own, exit 2
        with loading(f"stages module {name!r}", field="--stages-module"):
            try:
                importlib.import_module(name)
            except ImportError as exc:
                raise InputError(
                    f"cannot import {name!r}: {exc}; perfgate looks for it in the working directory ({here}) "
                    "and on PYTHONPATH",
                    field="--stages-module",
                ) from None


def _set_up_suite(args: argparse.Namespace) -> None:
    """Import a declared suite's stages (registering them) and resolve the device by its hook."""
    suite = find(args.suite)
    if suite is not None:
        import_stages(suite)
        resolve_device = hook(suite, "resolve_device")
        if resolve_device is not None:
            args.device = resolve_device(args.device)


def _own_suite_models(suite: str, requested: str, imported: list[str]) -> list[str]:
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
    named = sorted({model_key(m) for s in stages if s.models is not None for m in s.models})
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


# what a worker process measures with: the parsed options it needs, never the parent's command line
WORKER_FIELDS = (
    "suite",
    "data",
    "seed",
    "device",
    "rounds",
    "repeat",
    "warmup",
    "quick",
    "threads",
    "stages_module",
    "git_commit",
    "branch",
)


def worker_options(args: argparse.Namespace) -> dict[str, object]:
    """The options of one worker process, as JSON values: the fields of :data:`WORKER_FIELDS`.

    No store, no Pushgateway, no configuration file: a worker measures and writes its run
    file; the parent combines the runs and records and pushes the result once.
    """
    options: dict[str, object] = {name: getattr(args, name) for name in WORKER_FIELDS if name != "stages_module"}
    options["data"] = str(args.data.resolve()) if args.data is not None else None
    options["stages_module"] = list(args.stages_modules)
    return options


def run_worker(options: Mapping[str, Any]) -> int:
    """Measure one model once with ``options`` (from :func:`worker_options`, plus ``model``, ``output``
    and ``progress``, the file where each step is written as it begins, so that the parent can
    name the step of a worker it killed at its deadline)."""
    from perfgate.bench.gitinfo import collect_git
    from perfgate.bench.machine import collect_machine
    from perfgate.errors import PerfgateError

    expected = {*WORKER_FIELDS, "model", "output", "progress"}
    if not isinstance(options, Mapping) or set(options) != expected:
        got = sorted(options) if isinstance(options, Mapping) else type(options).__name__
        raise PerfgateError(f"worker options must have exactly the fields {sorted(expected)}, got {got}")
    values = dict(options)
    values["data"] = Path(values["data"]) if values["data"] is not None else None
    output = Path(values.pop("output"))
    model = str(values.pop("model"))
    steps = Path(values.pop("progress"))
    args = argparse.Namespace(**values)
    with steps.open("a", encoding="utf-8") as log:

        def began(what: str, done: int = 0, total: int = 0) -> None:
            log.write(f"{what}\n")
            log.flush()

        began("import of the stages modules and set-up of the suite")
        _import_stage_modules(args.stages_module)
        _set_up_suite(args)
        result = _measure(args, model, collect_machine(), collect_git(args.git_commit, args.branch), output, began)
    save_run(output, result)
    return 0


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse what --measure counts cannot do, before any work."""
    if args.device != "cpu":
        raise InputError(
            f"--measure counts runs on the CPU only (got --device {args.device}): callgrind simulates the CPU and "
            "cannot see GPU kernels; measure a GPU with --measure times",
            field="--device",
        )
    if args.threads not in (None, 1):
        raise InputError("--measure counts runs every stage on one thread; leave out --threads", field="--threads")
    if args.time_budget is not None:
        raise InputError(
            "--time-budget does not apply to --measure counts (the counts do not wobble)", field="--measure"
        )
    from perfgate.orchestrate.counts import find_valgrind

    find_valgrind()


def _counted(args: argparse.Namespace, model: str, machine: dict, git) -> Run:  # type: ignore[no-untyped-def]
    from perfgate.bench.machine import collect_software
    from perfgate.bench.registry import stages_for
    from perfgate.orchestrate.counts import counts_job, measure_counts

    data = args.data
    default_data_path = hook(find(args.suite), "default_data_path") if data is None else None
    if default_data_path is not None:
        data = default_data_path(args.seed)  # made once, natively: not under valgrind in every process
    job = counts_job(
        suite=args.suite,
        stages_modules=args.stages_modules,
        data=data,
        seed=args.seed,
        params={"quick": True} if args.quick else {},
        warmup=args.warmup,
        calls=args.repeat if args.repeat is not None else 5,
        count_all=args.count_all_stages,
    )
    console = stderr_console()
    return measure_counts(
        job,
        model,
        processes=args.processes,
        run_id=uuid.uuid4().hex,
        created_at=format_timestamp(datetime.now(UTC)),
        git=git,
        machine=machine,
        software=collect_software(),
        config=_config(args, model),
        progress=lambda line: console.print(plain(line), markup=False),
        # the stages are registered here too: the native pass only when one of them prepares, or
        # when the suite uses numba (the pass compiles its cached kernels for valgrind's CPU)
        prepare=any(st.prepares for st in stages_for(args.suite, model)) or "numba" in sys.modules,
    )


def _in_processes(args: argparse.Namespace, model: str, threshold_pct: float) -> Run:
    from perfgate.orchestrate.workers import measure_in_processes

    budget = args.time_budget
    processes = args.processes if budget is None or args.processes > 1 else 20
    console = stderr_console()
    return measure_in_processes(
        worker_options(args),
        model,
        processes=processes,
        time_budget=budget,
        target_precision=threshold_pct / 100 / 3,
        run_id=uuid.uuid4().hex,
        progress=lambda line: console.print(plain(line), markup=False),
    )


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    checked_number(args.processes, "--processes", at_least=1, at_most=10_000)
    checked_number(args.time_budget, "--time-budget", above=0, at_most=7 * 24 * 3600, what="seconds")
    checked_number(args.threads, "--threads", at_least=1, at_most=4096)
    checked_number(args.rounds, "--rounds", at_least=1, at_most=1_000_000)
    checked_number(args.repeat, "--repeat", at_least=1, at_most=100_000_000)
    checked_number(args.warmup, "--warmup", at_least=0, at_most=1_000_000)
    checked_number(args.seed, "--seed", at_least=0, below=2**63)
    if args.measure == "counts":
        _check_counts(args)
    elif args.count_all_stages:
        raise InputError("--count-all-stages goes with --measure counts", field="--count-all-stages")
    args.suite = args.suite or default_suite()
    _import_stage_modules(args.stages_modules)
    requested = model_key(args.model)
    suite = find(args.suite)
    declared = list(suite.models) if suite is not None else []
    if declared and requested != "all" and requested not in declared:  # before its stages are imported
        raise InputError(f"unknown model {args.model!r}; choose from {', '.join(declared)} or all", field="--model")
    _set_up_suite(args)
    if declared:
        models = declared if requested == "all" else [requested]
    else:
        models = _own_suite_models(args.suite, requested, args.stages_modules)
    from perfgate.bench.gitinfo import collect_git
    from perfgate.bench.machine import collect_machine

    machine = collect_machine()
    git = collect_git(args.git_commit, args.branch)
    console = stderr_console()
    runs = []
    paths = {model: output_path(args.output, model, len(models) > 1) for model in models}
    url = chosen_store(args.store, config)  # record the runs there too: --store, PERFGATE_STORE or the configuration
    store_path = store_file(url) if url is not None else None
    inputs = {"--data": args.data, "--config": config.source, "the store": store_path}
    check_distinct({f"--output ({m})": p for m, p in paths.items()}, inputs)
    save_checkpoint = hook(suite, "save_checkpoint")
    for model in models:
        path = paths[model]
        from perfgate.bench.disturbance import environment_between, snapshot

        before = snapshot()
        if args.measure == "counts":
            result = _counted(args, model, machine, git)
        elif args.processes > 1 or args.time_budget is not None:
            result = _in_processes(args, model, config.policy.threshold_pct)
        else:
            result = _measure(args, model, machine, git, path)
        result = dataclasses.replace(
            result, config={**result.config, "environment": environment_between(before, snapshot())}
        )
        save_run(path, result)
        runs.append(result)
        medians = ", ".join(
            f"{name} {sorted(m.samples)[len(m.samples) // 2]:.4g}" for name, m in result.metrics.items()
        )
        console.print(f"[bold]{term(model)}[/] → {term(path)}: {term(medians)}")
        if save_checkpoint is not None and is_replaceable(path) and checkpoint_path(path).exists():
            console.print(f"trained model → {plain(checkpoint_path(path))}", markup=False)
    if url is not None:
        from perfgate.store import open_store

        store = open_store(url)
        try:
            for r in runs:
                store.add_run(r)
        finally:
            store.close()
        console.print(f"recorded {len(runs)} run(s) in {plain(store.url)}", markup=False)
    if args.push_metrics is not None:
        from perfgate.app.export import push_runs

        push_runs(args.push_metrics, runs, config.policy)  # reports failures on stderr; never changes the exit code
    return 0

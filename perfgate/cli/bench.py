"""``perfgate bench``: run the stages of a model and write a run file (the original specification's quick benchmark).

For the reference pipeline it also writes the trained model next to the run file
(``run.json`` -> ``run.model.pt``); ``--quick`` is a smoke run: two rounds, fewer calls.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.cli._common import (
    add_config_argument,
    config_from,
    model_key,
    needs_extra,
    stderr_console,
    store_file,
    term,
)
from perfgate.core.codec import format_timestamp
from perfgate.core.schema import Run
from perfgate.core.text import plain
from perfgate.errors import InputError
from perfgate.output import check_distinct, is_replaceable, open_output
from perfgate.pipeline.models import MODELS  # the registry's names: imports no torch
from perfgate.runfile import save_run

if TYPE_CHECKING:
    from perfgate.bench.registry import StageContext
    from perfgate.bench.runner import BenchOptions

__all__ = ["MODELS", "add_arguments", "output_path", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        help=f"the model to measure (case-insensitive): with the built-in suite one of {', '.join(MODELS)} or all; "
        "with --suite NAME any name that suite's stages accept (a stage without models= accepts every name), "
        "or all for every name its stages list",
    )
    parser.add_argument(
        "--output",
        type=Path,
        required=True,
        help="run file to write; with --model all, {model} in the name is replaced (or _<model> is added)",
    )
    parser.add_argument("--git-commit", default=None, help="commit to record (default: git rev-parse HEAD)")
    parser.add_argument("--branch", default=None, help="branch to record (default: from git / CI)")
    parser.add_argument("--data", type=Path, default=None, help="DBN file to load (default: synthetic OHLCV-1m)")
    parser.add_argument("--store", default=None, help="also record the run in this store (sqlite:///… URL)")
    parser.add_argument("--push-metrics", metavar="URL", help="push the fresh runs to this Prometheus Pushgateway")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds over all stages (default 3; 5 for the reference pipeline, 2 with --quick)",
    )
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per stage and round (default: auto)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up calls per stage (default: auto)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and the models")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--suite", default="pipeline", help="registered suite to run (default: pipeline)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2 rounds, at least 1 call per stage and round, fewer inference calls, quarter-length "
        "training windows for Mamba-2/TFT (not for baselines)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads for training steps (default 1; inference uses 1)"
    )
    parser.add_argument(
        "--stages-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module first (it registers your own stages), found in the working directory or on "
        "PYTHONPATH, e.g. mystages or bench.stages; repeatable",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="independent worker processes, one after another; the spread between them enters the check (default 1)",
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="adaptive: at least 2 worker processes, more until every timing is pinned to ±1/3 of the "
        "threshold or the budget is spent (at most --processes, or 20 when --processes is 1)",
    )
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
    elif args.suite == "pipeline":
        # More, shorter rounds: on a shared machine a burst of another tenant's work can slow
        # one round several-fold; spread over 5 rounds it reaches a fifth of the samples, not a
        # third, and a single-sample p99 follows it less (one such round moved a p99 +366 %).
        extra = {"min_repeat": 2}
        rounds = 5
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


def _measure(args: argparse.Namespace, model: str, machine: dict, git, out: Path) -> Run:  # type: ignore[no-untyped-def]
    from perfgate.bench.runner import run_benchmark

    options = _options(args, model)
    on_finish: Callable[[StageContext], None] | None = None
    if args.suite == "pipeline":
        from perfgate.pipeline.stages import save_checkpoint

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
    if not sys.stderr.isatty():
        return measure()
    from rich.progress import Progress

    with Progress(transient=True, console=stderr_console()) as bar:
        task = bar.add_task(f"{model}", total=1)

        def report(what: str, done: int, total: int) -> None:
            bar.update(task, description=f"{model}: {what}", completed=done, total=total)

        return measure(progress=report)


def _config(args: argparse.Namespace, model: str) -> dict[str, object]:
    """What the run file records beyond the runner's own: smoke run or not, threads, model sizes."""
    config: dict[str, object] = {"quick": True} if args.quick else {}
    if args.suite == "pipeline":
        from dataclasses import asdict

        from perfgate.pipeline.stages import training_config

        config["training_threads"] = args.threads if args.threads is not None else 1
        config["model_config"] = asdict(training_config(model, quick=args.quick))
    return config


def _import_stage_modules(names: list[str]) -> None:
    """Import ``names`` with the working directory first on ``sys.path``, as ``python -m`` and pytest do.

    The ``perfgate`` script's own folder is what Python puts first, so without this a
    ``mystages.py`` beside the user would need ``PYTHONPATH=.``.
    """
    import importlib

    if not names:
        return
    here = str(Path.cwd())
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InputError(
                f"cannot import {name!r}: {exc}; perfgate looks for it in the working directory ({here}) "
                "and on PYTHONPATH",
                field="--stages-module",
            ) from None


def _own_suite_models(suite: str, requested: str, imported: list[str]) -> list[str]:
    """The models to measure in a suite of the user's, or an error that says what to pass."""
    from perfgate.bench.registry import registered, stages_for

    stages = registered(suite)
    if not stages:
        if imported:
            where = f"the module(s) imported ({', '.join(imported)}) registered none"
        else:
            where = "no --stages-module was given, so no module of yours was imported"
        others = sorted({s.suite for s in registered()} - {"pipeline"})
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


def _in_processes(args: argparse.Namespace, model: str, threshold_pct: float) -> Run:
    from perfgate.bench.workers import measure_in_processes

    budget = args.time_budget
    processes = args.processes if budget is None or args.processes > 1 else 20
    console = stderr_console()
    return measure_in_processes(
        getattr(args, "raw_argv", []),
        model,
        processes=processes,
        time_budget=budget,
        target_precision=threshold_pct / 100 / 3,
        run_id=uuid.uuid4().hex,
        progress=lambda line: console.print(plain(line), markup=False),
    )


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    if args.processes < 1:
        raise InputError(f"must be at least 1, got {args.processes}", field="--processes")
    if args.time_budget is not None and args.time_budget <= 0:
        raise InputError(f"must be positive, got {args.time_budget}", field="--time-budget")
    _import_stage_modules(args.stages_module)
    requested = model_key(args.model)
    if requested != "all" and requested not in MODELS and args.suite == "pipeline":
        raise InputError(f"unknown model {args.model!r}; choose from {', '.join(MODELS)} or all", field="--model")
    if args.suite == "pipeline":
        models = list(MODELS) if requested == "all" else [requested]
    else:
        models = _own_suite_models(args.suite, requested, args.stages_module)
    if args.suite == "pipeline":
        with needs_extra("pipeline", "the built-in pipeline (--suite pipeline)"):
            from perfgate.pipeline.stages import resolve_device  # importing registers the reference pipeline

        args.device = resolve_device(args.device)
    from perfgate.bench.gitinfo import collect_git
    from perfgate.bench.machine import collect_machine

    machine = collect_machine()
    git = collect_git(args.git_commit, args.branch)
    console = stderr_console()
    runs = []
    paths = {model: output_path(args.output, model, len(models) > 1) for model in models}
    store = store_file(args.store, config.store) if args.store is not None or config.store is not None else None
    inputs = {"--data": args.data, "--config": config.source, "the store": store}
    check_distinct({f"--output ({m})": p for m, p in paths.items()}, inputs)
    for model in models:
        path = paths[model]
        from perfgate.bench.disturbance import environment_between, snapshot

        before = snapshot()
        if args.processes > 1 or args.time_budget is not None:
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
        if args.suite == "pipeline" and is_replaceable(path) and checkpoint_path(path).exists():
            console.print(f"trained model → {plain(checkpoint_path(path))}", markup=False)
    if args.store is not None or config.store is not None:
        from perfgate.store import open_store, resolve_store_url

        store = open_store(resolve_store_url(args.store, config.store))
        try:
            for r in runs:
                store.add_run(r)
        finally:
            store.close()
        console.print(f"recorded {len(runs)} run(s) in {plain(store.url)}", markup=False)
    if args.push_metrics is not None:
        from perfgate.cli.export import push_runs

        push_runs(args.push_metrics, runs, config.policy)  # reports failures on stderr; never changes the exit code
    return 0

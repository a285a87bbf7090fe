"""``perfgate bench``: run the stages of a model and write a run file (the seed's quick benchmark)."""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

from perfgate.cli._common import add_config_argument, config_from, model_key, stderr_console
from perfgate.core.codec import format_timestamp
from perfgate.core.schema import Run
from perfgate.errors import InputError
from perfgate.runfile import save_run

__all__ = ["MODELS", "add_arguments", "output_path", "run"]

MODELS = ("dqn", "ppo", "mamba2", "tft")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help=f"one of {', '.join(MODELS)}, or all (case-insensitive)")
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
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all stages (default 3)")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per stage and round (default: auto)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up calls per stage (default: auto)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and the models")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--suite", default="pipeline", help="registered suite to run (default: pipeline)")
    add_config_argument(parser)


def output_path(template: Path, model: str, many: bool) -> Path:
    text = str(template)
    if "{model}" in text:
        return Path(text.replace("{model}", model))
    if many:
        return template.with_name(f"{template.stem}_{model}{template.suffix}")
    return template


def _measure(args: argparse.Namespace, model: str, machine: dict, git) -> Run:  # type: ignore[no-untyped-def]
    from perfgate.bench.runner import BenchOptions, run_benchmark

    options = BenchOptions(
        model=model,
        suite=args.suite,
        data_path=args.data,
        seed=args.seed,
        device=args.device,
        rounds=args.rounds,
        repeat=args.repeat,
        warmup=args.warmup,
    )
    if args.data is not None and not args.data.exists():
        raise InputError(
            "data file not found; check the path or leave out --data for synthetic bars",
            source=str(args.data),
            field="--data",
        )
    created = format_timestamp(datetime.now(UTC))
    run_id = uuid.uuid4().hex
    if sys.stderr.isatty():
        from rich.progress import Progress

        with Progress(transient=True, console=stderr_console()) as bar:
            task = bar.add_task(f"{model}", total=1)

            def report(what: str, done: int, total: int) -> None:
                bar.update(task, description=f"{model}: {what}", completed=done, total=total)

            return run_benchmark(options, run_id=run_id, created_at=created, git=git, machine=machine, progress=report)
    return run_benchmark(options, run_id=run_id, created_at=created, git=git, machine=machine)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    requested = model_key(args.model)
    if requested != "all" and requested not in MODELS and args.suite == "pipeline":
        raise InputError(f"unknown model {args.model!r}; choose from {', '.join(MODELS)} or all", field="--model")
    models = list(MODELS) if requested == "all" else [requested]
    if args.suite == "pipeline":
        import perfgate.pipeline.stages  # noqa: F401  (registers the reference pipeline)
    from perfgate.bench.gitinfo import collect_git
    from perfgate.bench.machine import collect_machine

    machine = collect_machine()
    git = collect_git(args.git_commit, args.branch)
    console = stderr_console()
    runs = []
    for model in models:
        result = _measure(args, model, machine, git)
        path = output_path(args.output, model, len(models) > 1)
        save_run(path, result)
        runs.append(result)
        medians = ", ".join(
            f"{name} {sorted(m.samples)[len(m.samples) // 2]:.4g}" for name, m in result.metrics.items()
        )
        console.print(f"[bold]{model}[/] → {path}: {medians}")
    if args.store is not None or config.store is not None:
        from perfgate.store import open_store, resolve_store_url

        store = open_store(resolve_store_url(args.store, config.store))
        try:
            for r in runs:
                store.add_run(r)
        finally:
            store.close()
        console.print(f"recorded {len(runs)} run(s) in {store.url}")
    return 0

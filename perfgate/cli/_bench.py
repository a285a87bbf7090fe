"""``perfgate bench``: run the stages of a model and write a run file (the original specification's quick benchmark).

This module reads the flags, builds the request of :mod:`perfgate.app.bench` (the use case) and
prints what it measured. A suite whose stages module defines ``save_checkpoint`` (the reference
pipeline does) also gets the trained model next to the run file (``run.json`` -> ``run.model.pt``);
``--quick`` is a smoke run: two rounds, fewer calls.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app.numbers import checked_number
from perfgate.app.stores import chosen_store, store_file
from perfgate.cli._flags import add_config_argument, add_flag, add_store_argument, config_from
from perfgate.cli._output import stderr_console, term
from perfgate.core.metrics import default_suite
from perfgate.output import output_file
from perfgate.safe.text import plain

if TYPE_CHECKING:
    from perfgate.app.bench import Benched
    from perfgate.bench.runner import ProgressFn
    from perfgate.workers.measure import MeasureOptions

__all__ = ["add_arguments", "measure_options", "run"]


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


def measure_options(args: argparse.Namespace) -> MeasureOptions:
    """What measuring a model needs of the parsed flags: never the store, the Pushgateway or the configuration."""
    from perfgate.workers.measure import MeasureOptions

    return MeasureOptions(
        suite=args.suite or default_suite(),
        data=args.data,
        seed=args.seed,
        device=args.device,
        rounds=args.rounds,
        repeat=args.repeat,
        warmup=args.warmup,
        quick=args.quick,
        threads=args.threads,
        stages_modules=tuple(args.stages_modules),
        git_commit=args.git_commit,
        branch=args.branch,
    )


@contextlib.contextmanager
def _bar(model: str) -> Iterator[ProgressFn | None]:
    """A progress bar on a terminal's stderr while ``model`` is measured here; none elsewhere."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True, console=stderr_console()) as bar:
        task = bar.add_task(f"{model}", total=1)

        def report(what: str, done: int, total: int) -> None:
            bar.update(task, description=f"{model}: {what}", completed=done, total=total)

        yield report


def run(args: argparse.Namespace) -> int:
    from perfgate.app.bench import BenchRequest, bench
    from perfgate.bench.provenance import collect

    config = config_from(args)
    checked_number(args.processes, "--processes", at_least=1, at_most=10_000)
    checked_number(args.time_budget, "--time-budget", above=0, at_most=7 * 24 * 3600, what="seconds")
    checked_number(args.threads, "--threads", at_least=1, at_most=4096)
    checked_number(args.rounds, "--rounds", at_least=1, at_most=1_000_000)
    checked_number(args.repeat, "--repeat", at_least=1, at_most=100_000_000)
    checked_number(args.warmup, "--warmup", at_least=0, at_most=1_000_000)
    checked_number(args.seed, "--seed", at_least=0, below=2**63)
    url = chosen_store(args.store, config)  # record the runs there too: --store, PERFGATE_STORE or the configuration
    request = BenchRequest(
        model=args.model,
        output=args.output,
        options=measure_options(args),
        processes=args.processes,
        time_budget=args.time_budget,
        measure=args.measure,
        count_all_stages=args.count_all_stages,
        threshold_pct=config.policy.threshold_pct,
        store_url=url,
        inputs={
            "--data": args.data,
            "--config": config.source,
            "the store": store_file(url) if url is not None else None,
        },
    )
    console = stderr_console()

    def measured(done: Benched) -> None:
        run = done.run
        medians = ", ".join(f"{name} {sorted(m.samples)[len(m.samples) // 2]:.4g}" for name, m in run.metrics.items())
        console.print(f"[bold]{term(done.model)}[/] → {term(done.path)}: {term(medians)}")
        if done.checkpoint is not None:
            console.print(f"trained model → {plain(done.checkpoint)}", markup=False)

    result = bench(
        request,
        collect(args.git_commit, args.branch),
        measured=measured,
        progress=lambda line: console.print(plain(line), markup=False),
        bar=_bar,
    )
    if result.recorded_in is not None:
        console.print(f"recorded {len(result.runs)} run(s) in {plain(result.recorded_in)}", markup=False)
    if args.push_metrics is not None:
        from perfgate.app.export import push_runs

        # reports failures on stderr; never changes the exit code
        push_runs(args.push_metrics, result.runs, config.policy)
    return 0

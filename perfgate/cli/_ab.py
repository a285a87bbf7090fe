"""``perfgate ab``: two revisions measured interleaved in one job, then checked paired.

This module reads the flags, builds the request of :mod:`perfgate.app.ab` (the use case, which
says how each revision is measured) and writes the reports. The reports and exit codes are
``perfgate check``'s (0 pass, 1 regression or broken budget, 2 could not decide).

``--current-ref`` defaults to ``HEAD`` when the working tree is clean and to ``WORKTREE``
(the working tree as it is, measured in place) when tracked files have uncommitted
changes: what a developer who runs ``perfgate ab --baseline-ref main`` means to compare.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from perfgate.app.numbers import checked_number
from perfgate.app.policy import policy_from
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, config_from
from perfgate.cli._output import exit_code_of, stderr_console, write_reports
from perfgate.core.compare import CheckResult
from perfgate.core.metrics import default_suite
from perfgate.output import check_distinct, output_file
from perfgate.report.json import render_json

__all__ = ["add_arguments", "run"]

MAX_PAIRS = 1_000  # worker pairs: at ~2 s a pair, far past any budget a CI job has
TIMED_PAIRS = 20  # at most, by default (the time budget usually ends a check first)
COUNT_PAIRS = 2  # pairs of counted processes by default: the residue between them is pooled (core._counts)
MAX_ROUNDS = 1_000  # the older process-level design's perfgate bench flags
MAX_REPEAT = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfgate.ab import DEFAULT_PAIRS, DEFAULT_TIME_BUDGET

    add_flag(parser, "--baseline-ref", required=True)
    add_flag(parser, "--current-ref", default=None)
    add_flag(parser, "--model", required=True)
    add_flag(
        parser,
        "--time-budget",
        type=float,
        default=DEFAULT_TIME_BUDGET,
        metavar="SECONDS",
        default_text=f"{DEFAULT_TIME_BUDGET:g}, enough for a DQN or PPO check; give Mamba-2 or TFT about 240",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=None,
        metavar="N",
        help=f"at most N fresh worker pairs (default 20); a revision too old for resident workers is measured "
        f"in min(N, {DEFAULT_PAIRS}) pairs of whole perfgate bench processes; with --measure counts, exactly N "
        f"pairs of counted processes (default {COUNT_PAIRS})",
    )
    parser.add_argument(
        "--order-seed",
        type=int,
        default=None,
        metavar="N",
        help="random seed of the order in which the two sides' blocks alternate (default: random; the report "
        "gives it, so a check can be repeated)",
    )
    add_removed_spelling(parser, "--seed", "--order-seed")
    parser.add_argument(
        "--no-randomise-layout",
        action="store_false",
        dest="randomise_layout",
        help="start every worker with the same memory layout (fixed string hashing, no padding) instead of one "
        "drawn at random per worker (from the --order-seed random seed); a layout-only change (a comment) can then "
        "read as a regression",
    )
    add_flag(parser, "--suite", default=None, default_text="the installed default suite (pipeline, with its extra)")
    add_flag(
        parser,
        "--stages-module",
        action="append",
        default=[],
        dest="stages_modules",
        metavar="MODULE",
        default_text="none; each side imports it from its own revision's tree",
    )
    add_flag(parser, "--quick", action="store_true")
    add_flag(
        parser,
        "--rounds",
        type=int,
        default=None,
        default_text="perfgate bench's; used only for a revision too old for resident workers",
    )
    add_flag(
        parser,
        "--repeat",
        type=int,
        default=None,
        default_text="perfgate bench's; used only for a revision too old for resident workers",
    )
    add_flag(parser, "--device", default=None, default_text="cpu")
    add_flag(parser, "--data", type=Path, default=None, default_text="synthetic OHLCV-1m bars")
    add_flag(parser, "--threshold", type=float, default=None, default_text="10")
    add_flag(parser, "--alpha", type=float, default=None, default_text="0.01")
    parser.add_argument("--output", type=output_file, help="write the Markdown report here (default: standard output)")
    add_flag(parser, "--json", type=output_file)
    add_flag(parser, "--html", type=output_file)
    add_flag(parser, "--comment", type=output_file)
    add_flag(parser, "--repo", type=Path, default=None)
    add_flag(parser, "--quiet", action="store_true")
    add_flag(parser, "--fail-on-inconclusive", action="store_true")
    add_flag(parser, "--measure", choices=("times", "counts"), default="times", default_text="times")
    add_flag(parser, "--count-all-stages", action="store_true")
    add_explain_arguments(parser)
    add_config_argument(parser)


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-explain`` and ``--explain-budget``: the profiling pass after a regression (``perfgate.ab.explain``)."""
    from perfgate.ab.explain import DEFAULT_EXPLAIN_BUDGET

    add_flag(parser, "--no-explain", action="store_false", dest="explain")
    add_flag(parser, "--explain-budget", type=float, default=DEFAULT_EXPLAIN_BUDGET)


def _check_numbers(args: argparse.Namespace) -> None:
    """Every numeric flag finite and in range (``--threshold`` and ``--alpha``: :func:`policy_from`)."""
    from perfgate.ab import MAX_TIME_BUDGET, MIN_PAIRS

    checked_number(args.time_budget, "--time-budget", above=0, at_most=MAX_TIME_BUDGET, what="seconds")
    if args.pairs is None:
        args.pairs = COUNT_PAIRS if args.measure == "counts" else TIMED_PAIRS
    checked_number(args.pairs, "--pairs", at_least=2 if args.measure == "counts" else MIN_PAIRS, at_most=MAX_PAIRS)
    checked_number(args.order_seed, "--order-seed", at_least=0, below=2**63)
    checked_number(args.rounds, "--rounds", at_least=1, at_most=MAX_ROUNDS)
    checked_number(args.repeat, "--repeat", at_least=1, at_most=MAX_REPEAT)
    checked_number(args.explain_budget, "--explain-budget", above=0, at_most=MAX_TIME_BUDGET, what="seconds")


def _json(result: CheckResult, ab: dict[str, object]) -> str:
    data = json.loads(render_json(result))
    data["ab"] = ab
    return json.dumps(data, sort_keys=True, indent=2, allow_nan=False) + "\n"


def run(args: argparse.Namespace) -> int:
    from perfgate.app.ab import AbRequest, check_ab

    _check_numbers(args)
    config = config_from(args)
    policy = policy_from(config, args)
    check_distinct(
        {"--output": args.output, "--json": args.json, "--html": args.html, "--comment": args.comment},
        {"--data": args.data, "--config": config.source},
    )
    request = AbRequest(
        baseline_ref=args.baseline_ref,
        current_ref=args.current_ref,
        model=args.model,
        suite=args.suite or default_suite(),
        time_budget=args.time_budget,
        pairs=args.pairs,
        order_seed=args.order_seed,
        randomise_layout=args.randomise_layout,
        stages_modules=tuple(args.stages_modules),
        quick=args.quick,
        rounds=args.rounds,
        repeat=args.repeat,
        device=args.device,
        data=args.data,
        repo=args.repo,
        measure=args.measure,
        count_all_stages=args.count_all_stages,
        explain=args.explain,
        explain_budget=args.explain_budget,
    )
    console = stderr_console()

    def progress(what: str) -> None:
        if not args.quiet:
            console.print(f"perfgate ab: {what}", markup=False)

    checked = check_ab(request, policy, progress)
    result = checked.result
    write_reports(args, result, _json(result, checked.info) if args.json is not None else None)
    return exit_code_of(result, args, "ab")

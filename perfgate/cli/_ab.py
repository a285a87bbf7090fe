"""``perfgate ab``: two revisions measured interleaved in one job, then checked paired.

Both refs are checked out into temporary git worktrees. Each revision gets resident worker
processes that import its own tree; fresh pairs of them alternate short blocks of every
stage on one CPU until every gated metric is decided or ``--time-budget`` is spent
(:mod:`perfgate.ab.resident`, decided by :mod:`perfgate.core.paired`). A revision whose
perfgate predates the resident worker is measured the older way, one fresh ``perfgate
bench`` process per measurement, alternating A B B A (:mod:`perfgate.ab.fallback`), and the report
says so. The engine and its choice are :mod:`perfgate.ab`'s; this module reads the flags, builds
the options and writes the reports. The reports and exit codes are ``perfgate check``'s (0 pass,
1 regression or broken budget, 2 could not decide).

``--current-ref`` defaults to ``HEAD`` when the working tree is clean and to ``WORKTREE``
(the working tree as it is, measured in place) when tracked files have uncommitted
changes: what a developer who runs ``perfgate ab --baseline-ref main`` means to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.cli._common import (
    add_config_argument,
    add_flag,
    add_removed_spelling,
    checked_number,
    config_from,
    exit_code_of,
    policy_from,
    stderr_console,
    write_reports,
)
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.metrics import default_suite
from perfgate.core.policy import Policy
from perfgate.core.schema import normalize_model
from perfgate.errors import InputError
from perfgate.output import check_distinct, output_file
from perfgate.report.json import render_json
from perfgate.suites import find, hook

if TYPE_CHECKING:
    from perfgate.ab import AbOptions, ResidentOptions, Side
    from perfgate.core.profiles import StageExplanation

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
    add_flag(parser, "--json", type=output_file, dest="json_output")
    add_flag(parser, "--html", type=output_file, dest="html_output")
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


def _bench_args(args: argparse.Namespace) -> tuple[str, ...]:
    out: list[str] = []
    if args.rounds is not None:
        out += ["--rounds", str(args.rounds)]
    if args.repeat is not None:
        out += ["--repeat", str(args.repeat)]
    if args.device is not None:
        out += ["--device", args.device]
    if args.data is not None:
        if not args.data.exists():
            raise InputError("data file not found", source=str(args.data), field="--data")
        out += ["--data", str(args.data.resolve())]  # the measuring processes run in other folders
    return tuple(out)


def _starting(args: argparse.Namespace) -> tuple[int, Path, str, Callable[[str], None]]:
    """What every way of measuring starts from: the order's random seed, the repository, the
    current ref (the working tree when it has changes and none was given) and the progress line."""
    import secrets

    from perfgate.ab import WORKTREE, git_toplevel, is_dirty

    seed = args.order_seed if args.order_seed is not None else secrets.randbelow(2**31)
    repo = git_toplevel(args.repo if args.repo is not None else Path.cwd())
    current_ref = args.current_ref or (WORKTREE if is_dirty(repo) else "HEAD")
    console = stderr_console()

    def progress(what: str) -> None:
        if not args.quiet:
            console.print(f"perfgate ab: {what}", markup=False)

    return seed, repo, current_ref, progress


def _counts(args: argparse.Namespace, policy: Policy) -> int:
    """``ab --measure counts``: pairs of counted processes, one per revision, checked as two runs of counts."""
    from datetime import UTC, datetime

    from perfgate.ab import checkout, sides
    from perfgate.ab.counts import count_revisions
    from perfgate.bench.callgrind import find_valgrind
    from perfgate.bench.machine import collect_machine, collect_software
    from perfgate.cli._check import with_calibration
    from perfgate.core.codec import format_timestamp

    if (args.device or "cpu") != "cpu":
        raise InputError(
            f"--measure counts runs on the CPU only (got --device {args.device}): callgrind simulates the CPU and "
            "cannot see GPU kernels; measure a GPU with --measure times",
            field="--device",
        )
    if args.rounds is not None:
        raise InputError(
            "--rounds does not apply to --measure counts (use --repeat for counted calls)", field="--rounds"
        )
    if not args.randomise_layout:
        raise InputError(
            "--measure counts always draws each process's layout: leave out --no-randomise-layout",
            field="--no-randomise-layout",
        )
    find_valgrind()
    seed, repo, current_ref, progress = _starting(args)
    with checkout(repo, args.baseline_ref, current_ref) as (base_rev, cur_rev):
        counted = count_revisions(
            base_rev,
            cur_rev,
            model=normalize_model(args.model),
            suite=args.suite,
            stages_modules=tuple(args.stages_modules),
            data=args.data,
            quick=args.quick,
            calls=args.repeat if args.repeat is not None else 5,
            count_all=args.count_all_stages,
            pairs=args.pairs,
            seed=seed,
            created_at=format_timestamp(datetime.now(UTC)),
            machine=collect_machine(),
            software=collect_software(),
            progress=progress,
        )
        info = counted.info
        # each count metric's residue between processes, learned from this counts machine's stored runs
        policy = with_calibration(None, policy, counted.current)
        result = compare_runs(counted.baseline, counted.current, policy, baseline_source=counted.source)
        result = _explained(
            args,
            result,
            sides(base_rev, cur_rev),
            _resident_options(args, policy, seed),
            instruments_for("counts"),
            info,
            progress,
        )
    if args.quick:
        result = dataclasses.replace(
            result, baseline_source=result.baseline_source + ". A smoke run (--quick): not for decisions"
        )
    write_reports(args, result, _json(result, info) if args.json_output is not None else None)
    return exit_code_of(result, args, "ab")


def _json(result: CheckResult, ab: dict[str, object]) -> str:
    data = json.loads(render_json(result))
    data["ab"] = ab
    return json.dumps(data, sort_keys=True, indent=2, allow_nan=False) + "\n"


def _resident_options(args: argparse.Namespace, policy: Policy, seed: int) -> ResidentOptions:
    from perfgate.ab import ResidentOptions

    smoke: dict[str, object] = {"max_pairs": max(args.pairs, 3)}
    if args.quick:  # a smoke run: every stage runs on both sides, nothing is decided from it
        # (it replaces --pairs: regression for `ab --quick` passing max_pairs twice, a TypeError)
        smoke = {"max_pairs": 3, "looks": 1, "stage_time": 0.1, "min_blocks": 3, "block_time": 0.005}
    return ResidentOptions(
        model=normalize_model(args.model),
        suite=args.suite,
        stages_modules=tuple(args.stages_modules),
        seed=seed,
        device=args.device or "cpu",
        params={"quick": True} if args.quick else {},
        data=args.data.resolve() if args.data is not None else None,
        time_budget=args.time_budget,
        randomise_layout=args.randomise_layout,
        metric_info=policy.metric_info,
        **smoke,  # type: ignore[arg-type]
    )


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


@contextlib.contextmanager
def shared_data(suite: str, seed: int = 0) -> Iterator[Path | None]:
    """The suite's default data, written once for the whole check by its ``write_shared_data``
    hook (:mod:`perfgate.suites`) and made read-only; ``None`` for a suite without the hook.

    Without it each side's workers would make their own copy in their own tree: the same bytes
    in two files, which load at different speeds (two copies of one file differed by 28 % in one
    process, and an A/A check read the difference as a −10.7 % change of DBN load). Both sides
    read this one file; it is removed when the check ends.
    """
    write = hook(find(suite), "write_shared_data")
    if write is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="perfgate-ab-data-") as folder:
        path = Path(write(Path(folder), seed))
        path.chmod(0o444)
        yield path


def run(args: argparse.Namespace) -> int:
    _check_numbers(args)
    args.suite = args.suite or default_suite()
    if args.data is not None:
        return _run(args)
    with shared_data(args.suite) as data:
        args.data = data
        return _run(args)


def _fallback_options(args: argparse.Namespace, policy: Policy) -> AbOptions:
    """The process-level engine's options, for a revision whose perfgate predates the resident worker."""
    from perfgate.ab import DEFAULT_PAIRS, AbOptions

    return AbOptions(
        model=args.model,
        suite=args.suite,
        pairs=min(args.pairs, DEFAULT_PAIRS) if args.pairs >= 3 else args.pairs,
        stages_modules=tuple(args.stages_modules),
        quick=args.quick,
        bench_args=_bench_args(args),
        metric_info=policy.metric_info,
        time_budget=args.time_budget,
    )


def _explained(
    args: argparse.Namespace,
    result: CheckResult,
    pair: tuple[Side, Side],
    resident: ResidentOptions,
    instruments: Sequence[str],
    info: dict[str, object],
    progress: Callable[[str], None],
) -> CheckResult:
    """The result with where each regressed stage's change went: both revisions profiled on it after the
    decision, within ``--explain-budget`` (``perfgate.ab.explain``); the verdict is not touched."""
    import time

    metrics = result.to_explain()
    if not args.explain or args.quick or not metrics:
        return result
    started = time.monotonic()
    explanations = explained_with(pair, resident, metrics, instruments, args.explain_budget, progress)
    info["explain_seconds"] = round(time.monotonic() - started, 1)
    return dataclasses.replace(result, explanations=explanations)


def instruments_for(measure: str, instrument: str | None = None) -> tuple[str, ...]:
    """The profilers of a profiling pass: the one asked for; else, for counts, each Python function's
    bytecodes and then each C function's instructions under callgrind; for times, ``auto``."""
    if instrument is not None:
        return (instrument,)
    return ("bytecodes", "callgrind") if measure == "counts" else ("auto",)


def explained_with(
    pair: tuple[Side, Side],
    resident: ResidentOptions,
    metrics: Sequence[str],
    instruments: Sequence[str],
    budget: float,
    progress: Callable[[str], None],
    **how: Any,
) -> tuple[StageExplanation, ...]:
    """Each instrument's pass in turn, within ``budget`` seconds together (a pass gets what is left)."""
    import time

    from perfgate.ab.explain import ExplainOptions, explain_metrics

    started, out = time.monotonic(), []
    for instrument in instruments:
        left = max(budget - (time.monotonic() - started), 1.0)
        options = ExplainOptions(instrument=instrument, budget=left, **how)
        out += explain_metrics(pair, resident, metrics, options, progress=progress)
    return tuple(out)


def _run(args: argparse.Namespace) -> int:
    from perfgate.ab import check_revisions, checkout, sides

    _check_numbers(args)
    config = config_from(args)
    policy = policy_from(config, args)
    check_distinct(
        {"--output": args.output, "--json": args.json_output, "--html": args.html_output, "--comment": args.comment},
        {"--data": args.data, "--config": config.source},
    )
    if args.measure == "counts":
        return _counts(args, policy)
    if args.count_all_stages:
        raise InputError("--count-all-stages goes with --measure counts", field="--count-all-stages")
    fallback = _fallback_options(args, policy)
    seed, repo, current_ref, progress = _starting(args)
    resident = _resident_options(args, policy, seed)
    info: dict[str, object] = {"paired": True, "interleaved": True, "seed": seed}
    with checkout(repo, args.baseline_ref, current_ref) as (base_rev, cur_rev):
        info.update(
            baseline_ref=base_rev.ref,
            baseline_commit=base_rev.commit,
            current_ref=cur_rev.ref,
            current_commit=cur_rev.commit,
            current_dirty=cur_rev.dirty,
        )
        checked = check_revisions(base_rev, cur_rev, resident, fallback, policy, progress=progress)
        info.update(checked.details)
        result = _explained(
            args, checked.result, sides(base_rev, cur_rev), resident, instruments_for("times"), info, progress
        )
    if args.quick:
        result = dataclasses.replace(
            result, baseline_source=result.baseline_source + ". A smoke run (--quick): not for decisions"
        )
    write_reports(args, result, _json(result, info) if args.json_output is not None else None)
    return exit_code_of(result, args, "ab")

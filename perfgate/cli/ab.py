"""``perfgate ab``: two revisions measured alternately in one job, then checked paired.

Both refs are checked out into temporary git worktrees and measured in ABBA order, each
measurement a fresh ``perfgate bench`` process (:mod:`perfgate.bench.ab`); the check is
``perfgate check``'s, with the paired test over the pairs, and writes the same reports
with the same exit codes (0 pass, 1 regression or broken budget, 2 could not decide).

``--current-ref`` defaults to ``HEAD`` when the working tree is clean and to ``WORKTREE``
(the working tree as it is, measured in place) when tracked files have uncommitted
changes: what a developer who runs ``perfgate ab --baseline-ref main`` means to compare.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from perfgate.cli._common import add_config_argument, config_from, policy_from, print_verdict, stderr_console
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.errors import InputError
from perfgate.report.json import render_json
from perfgate.report.markdown import render_markdown
from perfgate.runfile import write_text_atomic

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfgate.bench.ab import DEFAULT_PAIRS, WORKTREE

    parser.add_argument("--baseline-ref", required=True, help="git ref of the baseline (branch, tag or SHA)")
    parser.add_argument(
        "--current-ref",
        default=None,
        help=f"git ref of the current version, or {WORKTREE} for the working tree as it is "
        f"(default: HEAD when the working tree is clean, {WORKTREE} when it has uncommitted changes)",
    )
    parser.add_argument("--model", required=True, help="the model to measure (one)")
    parser.add_argument(
        "--pairs", type=int, default=DEFAULT_PAIRS, help=f"pairs of measurements, ABBA order (default {DEFAULT_PAIRS})"
    )
    parser.add_argument("--suite", default="pipeline", help="registered suite to run (default: pipeline)")
    parser.add_argument(
        "--stages-module",
        action="append",
        default=[],
        dest="stages_modules",
        metavar="MODULE",
        help="module each side imports to register its stages (repeatable; from that side's tree)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run of each measurement (not for decisions)")
    parser.add_argument("--rounds", type=int, default=None, help="perfgate bench --rounds for every measurement")
    parser.add_argument("--repeat", type=int, default=None, help="perfgate bench --repeat for every measurement")
    parser.add_argument("--device", default=None, help="perfgate bench --device for every measurement")
    parser.add_argument("--data", type=Path, default=None, help="perfgate bench --data for every measurement")
    parser.add_argument("--threshold", type=float, default=None, help="regression threshold in percent (default 10)")
    parser.add_argument("--alpha", type=float, default=None, help="family-wise significance level (default 0.01)")
    parser.add_argument("--output", type=Path, help="write the Markdown report here")
    parser.add_argument("--json", type=Path, dest="json_output", help="write the machine-readable report here")
    parser.add_argument("--html", type=Path, dest="html_output", help="write the HTML report with plots here")
    parser.add_argument(
        "--repo", type=Path, default=None, help="the git repository (default: the one holding the working directory)"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_config_argument(parser)


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


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Let a CI cancellation (SIGTERM) unwind like Ctrl-C, so the worktrees are removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _json(result: CheckResult, ab: dict[str, object]) -> str:
    data = json.loads(render_json(result))
    data["ab"] = ab
    return json.dumps(data, sort_keys=True, indent=2, allow_nan=False) + "\n"


def run(args: argparse.Namespace) -> int:
    from perfgate.bench.ab import WORKTREE, AbOptions, git_toplevel, is_dirty, run_ab

    config = config_from(args)
    policy = policy_from(config, args)
    options = AbOptions(
        model=args.model,
        suite=args.suite,
        pairs=args.pairs,
        stages_modules=tuple(args.stages_modules),
        quick=args.quick,
        bench_args=_bench_args(args),
        metric_info=policy.metric_info,
    )
    repo = git_toplevel(args.repo if args.repo is not None else Path.cwd())
    current_ref = args.current_ref or (WORKTREE if is_dirty(repo) else "HEAD")
    console = stderr_console()

    def progress(what: str) -> None:
        if not args.quiet:
            console.print(f"perfgate ab: measured {what}", markup=False)

    with _sigterm_as_interrupt():
        ab = run_ab(repo, args.baseline_ref, current_ref, options, progress=progress)
    result = compare_runs(ab.baseline, ab.current, policy, paired=True, baseline_source=ab.describe())
    markdown = render_markdown(result)
    if args.output is not None:
        write_text_atomic(args.output, markdown)
    if args.json_output is not None:
        info: dict[str, object] = {
            "paired": True,
            "interleaved": True,
            "pairs": ab.pairs,
            "order": "".join(ab.order),
            "baseline_ref": ab.baseline_rev.ref,
            "baseline_commit": ab.baseline_rev.commit,
            "current_ref": ab.current_rev.ref,
            "current_commit": ab.current_rev.commit,
            "current_dirty": ab.current_rev.dirty,
        }
        write_text_atomic(args.json_output, _json(result, info))
    if args.html_output is not None:
        from perfgate.report.html import render_check_html

        write_text_atomic(args.html_output, render_check_html(result))
    if not args.quiet:
        if args.output is None:
            sys.stdout.write(markdown)
        print_verdict(result)
    return result.exit_code

"""``perfgate explain``: where a stage's time went between two revisions, on demand.

Both refs are checked out into temporary git worktrees, as ``perfgate ab`` does; fresh
resident workers of each revision set the stages up and profile the named stages (all of
them by default), each side in two processes so that the spread between two profiles of one
revision is the floor (:mod:`perfgate.ab.explain`). The report is the "Where it went" table
``ab`` attaches to a regressed stage: no verdict, only the difference of the profiles.

Exit 0 when every asked stage was profiled (whether or not a function stands out), 2 when
none could be (the reason in one line: a profiler not installed, a revision too old).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app.ab import explained_with, instruments_for, shared_data
from perfgate.cli._ab import add_explain_arguments
from perfgate.cli._common import add_flag, checked_number, stderr_console
from perfgate.core.metrics import default_suite
from perfgate.core.schema import normalize_model
from perfgate.errors import EXIT_ERROR, EXIT_OK, InputError
from perfgate.output import check_distinct, output_file, to_stdout, write_outputs

if TYPE_CHECKING:
    from perfgate.core.profiles import StageExplanation

__all__ = ["add_arguments", "run"]

INSTRUMENTS = ("auto", "sampling", "torch", "bytecodes", "callgrind")


def add_arguments(parser: argparse.ArgumentParser) -> None:

    add_flag(parser, "--baseline-ref", required=True)
    add_flag(parser, "--current-ref", default=None)
    add_flag(parser, "--model", required=True)
    parser.add_argument(
        "--stage",
        action="append",
        default=[],
        dest="stages",
        metavar="STAGE",
        help="profile this stage (its name or its metric's); repeat for more (default: every stage)",
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
    add_flag(parser, "--device", default="cpu", default_text="cpu")
    add_flag(parser, "--data", type=Path, default=None, default_text="synthetic OHLCV-1m bars")
    add_flag(parser, "--quick", action="store_true")
    add_flag(parser, "--measure", choices=("times", "counts"), default="times", default_text="times")
    parser.add_argument(
        "--instrument",
        choices=INSTRUMENTS,
        default=None,
        help="the profiler, overriding --measure: auto (torch's operators for a torch stage, else pyinstrument), "
        "sampling (pyinstrument), torch (torch.profiler), bytecodes (exact counts) or callgrind (valgrind)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=1.5,
        metavar="SECONDS",
        help="seconds of a stage's calls per profile, at least 3 calls (default 1.5)",
    )
    parser.add_argument(
        "--profiles",
        type=int,
        default=3,
        metavar="N",
        help="processes per revision, each profiling every stage; the spread between them is the floor (default 3)",
    )
    parser.add_argument("--output", type=output_file, help="write the Markdown report here (default: standard output)")
    add_flag(parser, "--json", type=output_file, dest="json_output")
    add_flag(parser, "--html", type=output_file, dest="html_output")
    add_flag(parser, "--repo", type=Path, default=None)
    add_flag(parser, "--quiet", action="store_true")
    add_explain_arguments(parser)


def run(args: argparse.Namespace) -> int:
    checked_number(args.seconds, "--seconds", above=0, at_most=3600, what="seconds")
    checked_number(args.profiles, "--profiles", at_least=2, at_most=20)
    checked_number(args.explain_budget, "--explain-budget", above=0, at_most=86_400, what="seconds")
    if not args.explain:
        raise InputError("--no-explain makes perfgate explain do nothing: leave it out", field="--no-explain")
    if args.data is not None and not args.data.exists():
        raise InputError("data file not found", source=str(args.data), field="--data")
    args.suite = args.suite or default_suite()
    check_distinct(
        {"--output": args.output, "--json": args.json_output, "--html": args.html_output},
        {"--data": args.data},
    )
    if args.data is not None:
        return _run(args, args.data.resolve())
    with shared_data(args.suite) as data:
        return _run(args, data)


def _run(args: argparse.Namespace, data: Path | None) -> int:
    import secrets

    from perfgate.ab import (
        WORKTREE,
        ResidentOptions,
        checkout,
        git_toplevel,
        is_dirty,
        sides,
    )

    repo = git_toplevel(args.repo if args.repo is not None else Path.cwd())
    current_ref = args.current_ref or (WORKTREE if is_dirty(repo) else "HEAD")
    console = stderr_console()

    def progress(what: str) -> None:
        if not args.quiet:
            console.print(f"perfgate explain: {what}", markup=False)

    resident = ResidentOptions(
        model=normalize_model(args.model),
        suite=args.suite,
        stages_modules=tuple(args.stages_modules),
        seed=secrets.randbelow(2**31),
        device=args.device,
        params={"quick": True} if args.quick else {},
        data=data,
        time_budget=args.explain_budget,
    )
    with checkout(repo, args.baseline_ref, current_ref) as (base_rev, cur_rev):
        explanations = explained_with(
            sides(base_rev, cur_rev),
            resident,
            args.stages or ["*"],
            instruments_for(args.measure, args.instrument),
            args.explain_budget,
            progress,
            seconds=args.seconds,
            repeats=args.profiles,
        )
        title = f"baseline {base_rev.ref} ({base_rev.commit[:12]}) → current {cur_rev.ref} ({cur_rev.commit[:12]})"
    return _report(args, explanations, title)


def _report(args: argparse.Namespace, explanations: tuple[StageExplanation, ...], title: str) -> int:
    from perfgate.report.explain import explanations_json, render_explain_html, render_explain_markdown

    markdown = render_explain_markdown(explanations, title)
    outputs: list[tuple[Path, str]] = []
    if args.output is not None:
        outputs.append((args.output, markdown))
    if args.json_output is not None:
        outputs.append((args.json_output, explanations_json(explanations)))
    if args.html_output is not None:
        outputs.append((args.html_output, render_explain_html(explanations, title)))
    write_outputs(outputs)
    if not args.quiet and args.output is None and not any(to_stdout(p) for p in (args.json_output, args.html_output)):
        print(markdown, end="")
    if explanations and not any(e.available for e in explanations):
        stderr_console().print(f"perfgate explain: {explanations[0].reason}", markup=False)
        return EXIT_ERROR
    return EXIT_OK

"""``perfgate explain``: where a stage's time went between two revisions, on demand
(:mod:`perfgate.app.explain`).

Exit 0 when every asked stage was profiled (whether or not a function stands out), 2 when
none could be (the reason in one line: a profiler not installed, a revision too old).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.app.ab import instruments_for, shared_data
from perfgate.app.explain import INSTRUMENTS, Explained, ExplainRequest, explain, prepared
from perfgate.cli._ab import add_explain_arguments
from perfgate.cli._flags import add_flag
from perfgate.cli._output import stderr_console
from perfgate.errors import EXIT_ERROR, EXIT_OK
from perfgate.output import output_file, to_stdout, write_outputs

__all__ = ["add_arguments", "run"]


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
    add_flag(parser, "--json", type=output_file)
    add_flag(parser, "--html", type=output_file)
    add_flag(parser, "--repo", type=Path, default=None)
    add_flag(parser, "--quiet", action="store_true")
    add_explain_arguments(parser)


def run(args: argparse.Namespace) -> int:
    request = ExplainRequest(
        baseline_ref=args.baseline_ref,
        current_ref=args.current_ref,
        model=args.model,
        stages=tuple(args.stages),
        suite=args.suite,
        stages_modules=tuple(args.stages_modules),
        device=args.device,
        data=args.data,
        quick=args.quick,
        instruments=instruments_for(args.measure, args.instrument),
        seconds=args.seconds,
        profiles=args.profiles,
        explain=args.explain,
        explain_budget=args.explain_budget,
        repo=args.repo,
        outputs=(("--output", args.output), ("--json", args.json), ("--html", args.html)),
    )
    request = prepared(request)
    console = stderr_console()

    def progress(what: str) -> None:
        if not args.quiet:
            console.print(f"perfgate explain: {what}", markup=False)

    if request.data is not None:
        return _report(args, explain(request, request.data.resolve(), progress))
    with shared_data(request.suite or "") as data:
        return _report(args, explain(request, data, progress))


def _report(args: argparse.Namespace, explained: Explained) -> int:
    from perfgate.report.explain import explanations_json, render_explain_html, render_explain_markdown

    explanations, title = explained.explanations, explained.title
    markdown = render_explain_markdown(explanations, title)
    outputs: list[tuple[Path, str]] = []
    if args.output is not None:
        outputs.append((args.output, markdown))
    if args.json is not None:
        outputs.append((args.json, explanations_json(explanations)))
    if args.html is not None:
        outputs.append((args.html, render_explain_html(explanations, title)))
    write_outputs(outputs)
    if not args.quiet and args.output is None and not any(to_stdout(p) for p in (args.json, args.html)):
        print(markdown, end="")
    if explained.failed:
        stderr_console().print(f"perfgate explain: {explanations[0].reason}", markup=False)
        return EXIT_ERROR
    return EXIT_OK

"""What the command line prints: rich consoles that never wrap a pipe, data escaped for the
terminal, the verdict of a check, its reports, and its exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfgate.core.compare import CheckResult, Verdict
from perfgate.report.formatting import fmt_change
from perfgate.safe.text import plain

__all__ = [
    "console_for",
    "exit_code_of",
    "print_verdict",
    "stderr_console",
    "term",
    "term_cell",
    "write_reports",
]


def console_for(stream=None):  # type: ignore[no-untyped-def]
    """A rich console on ``stream`` (stdout by default) that never wraps or cuts when it is not a terminal.

    rich assumes 80 columns for a pipe or a file, so a CI log or a test would see names cut
    (``dbn_lo…``) or lines broken at a width that depends on the length of a temporary path.
    A terminal keeps its own width.
    """
    from rich.console import Console

    stream = stream if stream is not None else sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    # emoji=False: a metric called ":x:" is printed as such, not as an emoji
    return Console(file=stream, highlight=False, emoji=False, soft_wrap=not tty, width=None if tty else 1_000)


def term(value: object) -> str:
    """Data inside a rich string that has markup: its own markup escaped (``[/]`` in a metric
    name must not close a style, ``[link=…]`` must not make a hyperlink) and control
    characters (ANSI escapes, new lines) shown as escapes."""
    from rich.markup import escape

    return escape(plain(value))


def term_cell(value: object):  # type: ignore[no-untyped-def]
    """Data as a rich table cell: a Text, which is never parsed as markup."""
    from rich.text import Text

    return Text(plain(value))


def stderr_console():  # type: ignore[no-untyped-def]
    """A console on stderr (:func:`console_for`): progress, notes and verdicts, beside a report on stdout."""
    return console_for(sys.stderr)


def write_reports(args: argparse.Namespace, result: CheckResult, json_text: str | None = None) -> None:
    """The reports of a check (``check``, ``ab``): ``--output`` (Markdown), ``--json`` (``json_text``,
    or the plain JSON report), ``--html`` and ``--comment``, then, unless ``--quiet``, the
    Markdown on standard output and the verdict on stderr.

    The Markdown goes to standard output when ``--output`` is not given and no other report
    is written there (``--json - | jq`` must read JSON only).
    """
    from perfgate.output import to_stdout, write_outputs
    from perfgate.report.markdown import render_markdown

    markdown = render_markdown(result)
    outputs: list[tuple[Path, str]] = []  # rendered first, then written all or nothing
    if args.output is not None:
        outputs.append((args.output, markdown))
    if args.json is not None:
        from perfgate.report.json import render_json

        outputs.append((args.json, json_text if json_text is not None else render_json(result)))
    if args.html is not None:
        from perfgate.report.html import render_check_html

        outputs.append((args.html, render_check_html(result)))
    if args.comment is not None:
        from perfgate.report.comment import render_comment

        outputs.append((args.comment, render_comment(result)))
    write_outputs(outputs)
    if not args.quiet:
        others = (args.json, args.html, args.comment)
        if args.output is None and not any(to_stdout(path) for path in others):
            sys.stdout.write(markdown)
        print_verdict(result)


def exit_code_of(result: CheckResult, args: argparse.Namespace, command: str) -> int:
    """The exit code of ``check`` and ``ab``: the result's, except that with
    ``--fail-on-inconclusive`` a pass with inconclusive metrics is exit 2 (could not decide)."""
    code = result.exit_code
    inconclusive = result.with_verdict(Verdict.INCONCLUSIVE)
    if code == 0 and inconclusive and getattr(args, "fail_on_inconclusive", False):
        names = ", ".join(plain(c.label) for c in inconclusive[:5]) + (" …" if len(inconclusive) > 5 else "")
        print(
            f"perfgate {command}: {len(inconclusive)} metric(s) could not be decided ({names}); "
            "--fail-on-inconclusive makes that exit 2",
            file=sys.stderr,
        )
        return 2
    return code


def print_verdict(result: CheckResult) -> None:
    """A few lines on stderr: what regressed, which budgets broke, or that nothing did."""
    console = stderr_console()
    from perfgate.report.environment import environment_text
    from perfgate.report.shift import shift_terminal
    from perfgate.report.terms import shown_change

    if changed := environment_text(result):
        console.print(f"[yellow]{term(changed)}[/]")
    if result.regressions:
        console.print(f"[bold red]✗ regression[/] in {len(result.regressions)} comparison(s):")
        for c in result.regressions:
            console.print(f"  {term(c.label)}: {fmt_change(shown_change(c))}")
    for b in result.broken_budgets:
        console.print(
            f"[bold red]✗ over budget[/]: {term(b.budget.metric)} {term(b.budget.statistic)} = {b.value:.4g} "
            f"(limit {b.budget.limit:g} {term(b.unit)})"
        )
    if result.missing:
        names = ", ".join(term(n) for n in result.missing[:10]) + (" …" if len(result.missing) > 10 else "")
        what = "refusing to decide" if result.refused else "fails the check"
        console.print(f"[bold red]✗ gated metric(s) not measured[/] ({what}): {names}")
    if shifted := shift_terminal(result):
        console.print(term(shifted), style="bold red" if result.shift_regressed else "bold yellow")
    if not result.failed and not result.shift_ambiguous:
        inconclusive = len(result.with_verdict(Verdict.INCONCLUSIVE))
        extra = f" ({inconclusive} inconclusive)" if inconclusive else ""
        console.print(f"[bold green]✓ no regression[/]{extra}")

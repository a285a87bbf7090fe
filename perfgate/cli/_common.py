"""Small helpers shared by the command modules."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import re
import sys
from pathlib import Path
from typing import NoReturn, TypeVar

from perfgate.cli._secrets import remember_store_url
from perfgate.config import Config, load_config
from perfgate.core.codec import dumps
from perfgate.core.compare import CheckResult, Verdict
from perfgate.core.policy import Policy
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import ConfigError, InputError, PerfgateError
from perfgate.report.formatting import fmt_change
from perfgate.safe.text import plain

__all__ = [
    "FLAG_HELP",
    "Parser",
    "add_config_argument",
    "add_flag",
    "add_removed_spelling",
    "add_store_argument",
    "checked_number",
    "chosen_store",
    "config_from",
    "config_warnings",
    "console_for",
    "content_run_id",
    "exit_code_of",
    "model_key",
    "policy_from",
    "print_verdict",
    "stderr_console",
    "store_file",
    "store_url",
    "term",
    "term_cell",
]


class Parser(argparse.ArgumentParser):
    """perfgate's argument parser: no abbreviations of long flags.

    With abbreviations, ``--stor`` would mean ``--store`` today and become ambiguous (an
    error) the day another flag starting with ``--stor`` is added; a flag is spelt in full.
    Sub-parsers (``perfgate baseline update``) are of the same class, so they refuse them too.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        super().error(removed_hint(self.prog, message))


class _ModelHelp(str):
    """The help of ``--model``: names no model itself; the models the installed suites declare are
    filled in when argparse formats the help (``%``), so they are read only when help is printed."""

    WHERE = "one that its suite declares"

    def __add__(self, other: str) -> _ModelHelp:  # a command's "(default …)" keeps it a _ModelHelp
        return _ModelHelp(str(self) + other)

    def __mod__(self, params: object) -> str:
        from perfgate.core.metrics import declared_suites

        named = [
            f"{suite.name}: " + _either([m.replace("%", "%%") for m in suite.models])
            for suite in declared_suites().values()
            if suite.models
        ]
        text = self.replace(self.WHERE, f"{self.WHERE} ({'; '.join(named)})", 1) if named else str(self)
        return str.__mod__(text, params)


def _either(names: list[str]) -> str:
    """``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


# One help text per flag name, for every command that has the flag: a flag name means one
# thing everywhere. A command may add what its default is, as a final "(default …)".
FLAG_HELP: dict[str, str] = {
    "--alpha": "family-wise significance level: the chance of a false alarm in any of the metrics compared",
    "--baseline-branch": "the branch whose recorded runs are read as the reference: baselines, trends, noise",
    "--baseline-ref": "git ref of the baseline (branch, tag or SHA)",
    "--current-ref": "git ref of the current version, or WORKTREE for the working tree as it is (default: HEAD when "
    "the working tree is clean, WORKTREE when it has uncommitted changes)",
    "--repo": "the git repository (default: the one holding the working directory)",
    "--no-explain": "do not profile a regressed stage after the check (by default both revisions are profiled on it, "
    "and the report says where its change went)",
    "--explain-budget": "seconds the profiling pass may add (default 60)",
    "--baseline-runs": "how many of the newest recorded runs of the baseline branch are used",
    "--branch": "the git branch to record with the new run",
    "--comment": "write the compact pull-request comment form here (6 columns at most, details folded); - for "
    "standard output",
    "--config": "perfgate.toml or pyproject.toml with [tool.perfgate]",
    "--data": "DBN market-data file to load (.dbn or .dbn.zst)",
    "--device": "cpu or cuda[:N]",
    "--git-commit": "the commit to record with the new run",
    "--html": "write the HTML report (one self-contained file, with plots) here; - for standard output",
    "--json": "write the machine-readable report (JSON) here; - for standard output",
    "--fail-on-inconclusive": "exit 2 when any metric is inconclusive, instead of passing what the check could "
    "not decide",
    "--format": "text, for people (tables), or json, for programs",
    "--measure": "times: wall time of each call; counts: instructions and estimated cycles per call under "
    "valgrind's callgrind, in processes run side by side (no times: counts do not wobble between processes or days, "
    "but do not see memory bandwidth, threads, I/O, GPU kernels or tail latency; --repeat is the counted calls per "
    "stage, default 5)",
    "--count-all-stages": "with --measure counts, also count the stages whose time counts cannot see (TFT's training "
    "step, bound by memory bandwidth, takes minutes a call under valgrind); without it they are left out and the "
    "report says so",
    "--machine": "machine fingerprint, as perfgate history and the reports show it",
    "--model": _ModelHelp(
        f"the model, by name, any case (DQN is dqn): {_ModelHelp.WHERE}; with --suite NAME any name that suite's "
        "stages accept; all for every model, where the command takes several"
    ),
    "--push-metrics": "push the new results as Prometheus metrics to this Pushgateway URL",
    "--quick": "smoke run: fewer and shorter repetitions, to see that every stage runs (not for baselines or "
    "decisions)",
    "--quiet": "print nothing but errors",
    "--repeat": "timed calls per stage and round",
    "--rounds": "rounds over all stages",
    "--seed": "random seed of the measured work: the synthetic data, and the models' initial weights where there "
    "are models",
    "--stages-module": "import this module first (it registers your own stages with @stage), e.g. mystages or "
    "bench.stages, found in the working directory or on PYTHONPATH; repeatable",
    "--store": "result store URL: sqlite:///path.db or postgresql://user@host/db (default: the PERFGATE_STORE "
    "environment variable, else the configuration's store; a command that needs a store falls back to "
    "sqlite:///.perfgate/perfgate.db)",
    "--suite": "the suite: pipeline (the built-in ML pipeline) or the name of one of your own",
    "--time-budget": "seconds the measurement may take: worker processes are added while they fit and some "
    "timing is still uncertain",
    "--threshold": "regression threshold in percent: a change smaller than this never fails the check",
    "--trend-runs": "how many of the newest recorded runs are drawn in each trend",
}


_METAVARS = {
    "--baseline-branch": "BRANCH",
    "--explain-budget": "SECONDS",
    "--branch": "BRANCH",
    "--config": "FILE",
    "--data": "FILE",
    "--git-commit": "SHA",
    "--comment": "FILE",
    "--html": "FILE",
    "--json": "FILE",
    "--machine": "FINGERPRINT",
    "--baseline-runs": "K",
}


def add_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    *,
    default_text: str | None = None,
    **kwargs: object,
) -> argparse.Action:
    """Add ``flag`` with its one help text of :data:`FLAG_HELP` (and this command's default, if given)."""
    text = FLAG_HELP[flag] + (f" (default: {default_text})" if default_text else "")
    if flag in _METAVARS and kwargs.get("action") is None and "metavar" not in kwargs:
        kwargs["metavar"] = _METAVARS[flag]
    return parser.add_argument(flag, help=text, **kwargs)  # type: ignore[arg-type]


# Spellings that were removed, per command: a use of one is an error that names the spelling
# to use instead (CHANGELOG.md, "Removed"). They are not registered, so no flag name has two
# meanings and no help lists them.
_REMOVED: dict[str, dict[str, str]] = {}


def add_removed_spelling(parser: argparse.ArgumentParser | argparse._ArgumentGroup, old: str, new: str) -> None:
    """``old`` was once a spelling of ``new`` in this command: give it as an error that says so."""
    root = parser
    while not isinstance(root, argparse.ArgumentParser):
        root = root._container  # type: ignore[attr-defined]  # an argument group's parser
    command = root.prog.split()[1] if len(root.prog.split()) > 1 else root.prog
    _REMOVED.setdefault(command, {})[old] = new


def removed_hint(prog: str, message: str) -> str:
    """``message`` (argparse's) with, for each removed spelling it names, what to use instead."""
    words = prog.split()
    removed = _REMOVED.get(words[1] if len(words) > 1 else prog, {})
    found = re.search(r"unrecognized arguments: (.*)$", message)
    if not found or not removed:
        return message
    given = {word.split("=", 1)[0] for word in found.group(1).split()}
    hints = [f"{old} was removed: use {new}" for old, new in removed.items() if old in given]
    return message + (f" ({'; '.join(hints)})" if hints else "")


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--config", type=Path, default=None, default_text="found from the working directory")


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    """``--store URL``, the same in every command; read it with :func:`store_url` or :func:`chosen_store`."""
    add_flag(parser, "--store", metavar="URL", default=None)


def chosen_store(args: argparse.Namespace, config: Config) -> str | None:
    """The store the user chose: ``--store``, else ``PERFGATE_STORE``, else the configuration; None for none.

    For commands that use a store only when one is chosen (``bench`` and ``import`` record
    their run there, ``check`` takes its baseline from it).
    """
    from perfgate.store import resolve_store_url

    url = getattr(args, "store", None)
    if url is None and not os.environ.get("PERFGATE_STORE", "").strip() and config.store is None:
        return None
    return remember_store_url(resolve_store_url(url, config.store))


def store_url(args: argparse.Namespace, config: Config) -> str:
    """The store of a command that needs one: :func:`chosen_store`, else the default SQLite file."""
    from perfgate.store import resolve_store_url

    return remember_store_url(resolve_store_url(getattr(args, "store", None), config.store))


def config_from(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "config", None))


def content_run_id(run: Run) -> str:
    """A stable id for a run file that has none (flat-format files): hash of its content."""
    return hashlib.sha256(dumps(run).encode()).hexdigest()[:32]


def model_key(name: str) -> str:
    return normalize_model(name)


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
    return console_for(sys.stderr)


def _declared_models() -> list[str]:
    """The models the installed suites declare, in their order."""
    from perfgate.core.metrics import declared_suites

    return list(dict.fromkeys(m for suite in declared_suites().values() for m in suite.models))


def config_warnings(policy: Policy, runs: list[Run]) -> list[str]:
    """Names in the configuration that this check cannot use, each named: a typo there would
    otherwise switch a threshold or a budget off without a word."""
    from perfgate.core.metrics import known_metrics

    present = {name for run in runs for name in run.metrics}
    known = present | set(known_metrics()) | set(policy.metric_info)
    models = {run.model_key for run in runs}
    out = []
    for name in sorted(set(policy.thresholds_pct) - known):
        out.append(f"thresholds.{name}: no metric of that name in this check or built in; check the spelling")
    for budget in policy.budgets:
        where = f"budgets.{budget.model}.{budget.metric}"
        if budget.model in models and budget.metric not in present:
            have = ", ".join(sorted(present)[:8]) + (" …" if len(present) > 8 else "")
            outcome = (
                "fails the check (missing_metric = 'fail')"
                if policy.missing_metric == "fail"
                else "leaves the check undecided (missing_metric = 'refuse')"
            )
            out.append(f"{where}: the run has no metric {budget.metric!r}, so this budget {outcome}; it has {have}")
        elif budget.model not in models and budget.model not in (declared := _declared_models()):
            out.append(
                f"{where}: no model {budget.model!r} in this check or an installed suite ({', '.join(declared)}); "
                "check the spelling"
            )
    return sorted(set(out), key=out.index)


def store_file(url: str | None, configured: str | None = None) -> Path | None:
    """The file of the SQLite store a command will open (an input no output may replace), or None."""
    from perfgate.store import resolve_store_url

    try:
        resolved = remember_store_url(resolve_store_url(url, configured))
    except PerfgateError:
        return None  # the command itself reports it
    if resolved.startswith("sqlite:///") and len(resolved) > len("sqlite:///"):
        return Path(resolved[len("sqlite:///") :])
    return None


_Number = TypeVar("_Number", int, float)


def checked_number(
    value: _Number | None,
    flag: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
    what: str = "",
) -> _Number | None:
    """``value`` of the numeric ``flag`` when it is finite and within the bounds given, else an
    :class:`~perfgate.errors.InputError` naming the flag (exit 2, one line).

    ``None`` (an optional flag that was not given) passes. NaN and infinity never pass: every
    comparison with NaN is false, so ``--time-budget nan`` would otherwise slip past a
    ``<= 0`` check and run without a budget. ``what`` says what the number counts
    (``"seconds"``) in the message. Used as ``checked_number(args.pairs, "--pairs", at_least=3,
    at_most=1000)``; ``perfgate ab`` checks every numeric flag this way.
    """
    if value is None:
        return None
    bounds = [
        (above, ">", lambda v, b: v > b),
        (at_least, ">=", lambda v, b: v >= b),
        (at_most, "<=", lambda v, b: v <= b),
        (below, "<", lambda v, b: v < b),
    ]
    wanted = " and ".join(
        f"{sign} {bound:,}" if isinstance(bound, int) else f"{sign} {bound:,g}"
        for bound, sign, _ in bounds
        if bound is not None
    )
    kind = "a whole number" if isinstance(value, int) else "a finite number"
    need = f"must be {kind}{f' of {what}' if what else ''}{f' {wanted}' if wanted else ''}"
    if isinstance(value, float):
        shown = f"{value:g}"
    else:  # an integer of thousands of digits is not printed (nor, past 4300 digits, printable)
        shown = str(value) if abs(value) < 10**30 else f"a number of about {int(value.bit_length() * 0.30103)} digits"
    finite = not isinstance(value, float) or math.isfinite(value)
    if not finite or not all(ok(value, bound) for bound, _, ok in bounds if bound is not None):
        raise InputError(f"{need}, got {shown}", field=flag)
    return value


def policy_from(config: Config, args: argparse.Namespace) -> Policy:
    """The configured policy with ``--threshold`` and ``--alpha`` from the command line applied."""
    checked_number(args.threshold, "--threshold", at_least=0, what="percent")
    checked_number(args.alpha, "--alpha", above=0, below=1)
    overrides = {}
    if args.threshold is not None:
        overrides["threshold_pct"] = args.threshold
    if args.alpha is not None:
        overrides["alpha"] = args.alpha
    try:
        return dataclasses.replace(config.policy, **overrides)
    except ValueError as exc:
        raise ConfigError(str(exc), source="command line") from None


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
    if args.json_output is not None:
        from perfgate.report.json import render_json

        outputs.append((args.json_output, json_text if json_text is not None else render_json(result)))
    if args.html_output is not None:
        from perfgate.report.html import render_check_html

        outputs.append((args.html_output, render_check_html(result)))
    if args.comment is not None:
        from perfgate.report.comment import render_comment

        outputs.append((args.comment, render_comment(result)))
    write_outputs(outputs)
    if not args.quiet:
        others = (args.json_output, args.html_output, args.comment)
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

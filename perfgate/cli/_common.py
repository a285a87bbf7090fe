"""Small helpers shared by the command modules."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perfgate.config import Config, load_config
from perfgate.core.codec import dumps
from perfgate.core.compare import CheckResult, Verdict
from perfgate.core.policy import Policy
from perfgate.core.schema import Run, normalize_model
from perfgate.core.text import plain
from perfgate.errors import ConfigError, PerfgateError
from perfgate.report.format import fmt_change

__all__ = [
    "add_config_argument",
    "config_from",
    "config_warnings",
    "console_for",
    "content_run_id",
    "model_key",
    "needs_extra",
    "policy_from",
    "print_verdict",
    "stderr_console",
    "store_file",
    "term",
    "term_cell",
]


# the third-party packages each optional extra brings (pyproject.toml's [project.optional-dependencies])
EXTRA_PACKAGES = {
    "pipeline": frozenset({"torch", "databento_dbn", "zstandard", "numba", "onnx", "onnxruntime"}),
    "export": frozenset({"prometheus_client", "plotly", "grafana_foundation_sdk"}),
}
_HOW = {
    "pipeline": "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu (the CPU build), then "
    "pip install 'perfgate[pipeline]'; a suite of your own needs neither (--suite NAME --stages-module MODULE)",
    "export": "pip install 'perfgate[export]'",
}


@contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Turn a missing package of perfgate's ``extra`` into a one-line error saying what to install.

    A core install (``pip install perfgate``) has no torch; the built-in pipeline, for one,
    does not work there, and that is an expected error (exit 2), not a crash.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in EXTRA_PACKAGES[extra]:
            raise
        raise ConfigError(f"{what} needs {top}, from perfgate's {extra} extra: {_HOW[extra]}") from None


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="perfgate.toml or pyproject.toml with [tool.perfgate] (default: found from the working directory)",
    )


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


_BUILTIN_MODELS = ("dqn", "ppo", "mamba2", "tft")


def config_warnings(policy: Policy, runs: list[Run]) -> list[str]:
    """Names in the configuration that this check cannot use, each named: a typo there would
    otherwise switch a threshold or a budget off without a word."""
    from perfgate.core.metrics import BUILTIN_METRICS

    present = {name for run in runs for name in run.metrics}
    known = present | set(BUILTIN_METRICS) | set(policy.metric_info)
    models = {run.model_key for run in runs}
    out = []
    for name in sorted(set(policy.thresholds_pct) - known):
        out.append(f"thresholds.{name}: no metric of that name in this check or built in; check the spelling")
    for budget in policy.budgets:
        where = f"budgets.{budget.model}.{budget.metric}"
        if budget.model in models and budget.metric not in present:
            have = ", ".join(sorted(present)[:8]) + (" …" if len(present) > 8 else "")
            out.append(
                f"{where}: the run has no metric {budget.metric!r}, so this budget is not checked (it has {have})"
            )
        elif budget.model not in models and budget.model not in _BUILTIN_MODELS:
            out.append(
                f"{where}: no model {budget.model!r} in this check or built in ({', '.join(_BUILTIN_MODELS)}); "
                "check the spelling"
            )
    return sorted(set(out), key=out.index)


def store_file(url: str | None, configured: str | None = None) -> Path | None:
    """The file of the SQLite store a command will open (an input no output may replace), or None."""
    from perfgate.store import resolve_store_url

    try:
        resolved = resolve_store_url(url, configured)
    except PerfgateError:
        return None  # the command itself reports it
    if resolved.startswith("sqlite:///") and len(resolved) > len("sqlite:///"):
        return Path(resolved[len("sqlite:///") :])
    return None


def policy_from(config: Config, args: argparse.Namespace) -> Policy:
    """The configured policy with ``--threshold`` and ``--alpha`` from the command line applied."""
    overrides = {}
    if args.threshold is not None:
        overrides["threshold_pct"] = args.threshold
    if args.alpha is not None:
        overrides["alpha"] = args.alpha
    try:
        return dataclasses.replace(config.policy, **overrides)
    except ValueError as exc:
        raise ConfigError(str(exc), source="command line") from None


def print_verdict(result: CheckResult) -> None:
    """A few lines on stderr: what regressed, which budgets broke, or that nothing did."""
    console = stderr_console()
    from perfgate.report.environment import environment_text

    if changed := environment_text(result):
        console.print(f"[yellow]{term(changed)}[/]")
    if result.regressions:
        console.print(f"[bold red]✗ regression[/] in {len(result.regressions)} comparison(s):")
        for c in result.regressions:
            console.print(f"  {term(c.label)}: {fmt_change(c.change)}")
    for b in result.broken_budgets:
        console.print(
            f"[bold red]✗ over budget[/]: {term(b.budget.metric)} {term(b.budget.statistic)} = {b.value:.4g} "
            f"(limit {b.budget.limit:g} {term(b.unit)})"
        )
    if not result.failed:
        inconclusive = len(result.with_verdict(Verdict.INCONCLUSIVE))
        extra = f" ({inconclusive} inconclusive)" if inconclusive else ""
        console.print(f"[bold green]✓ no regression[/]{extra}")

"""The command line's flags: perfgate's parser, one help text per flag name, and removed spellings.

Every command adds its flags with :func:`add_flag`, so that a flag name has one help text and
one attribute (its name without the dashes, ``-`` as ``_``) in every command that has it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import NoReturn

from perfgate.config import Config, load_config

__all__ = [
    "FLAG_HELP",
    "Parser",
    "add_config_argument",
    "add_flag",
    "add_removed_spelling",
    "add_store_argument",
    "config_from",
    "removed_hint",
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


# One help text per flag name, for every command that has the flag: a flag name means one
# thing everywhere. A command may add what its default is, as a final "(default …)".
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
    "--suite": "the suite: one that an installed package declares, or the name of one of your own",
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
    """``--config FILE``, the same in every command; read by the use case, or by :func:`config_from`."""
    add_flag(parser, "--config", type=Path, default=None, default_text="found from the working directory")


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    """``--store URL``, the same in every command; resolved by :func:`perfgate.app.stores.store_url` or
    :func:`perfgate.app.stores.chosen_store`."""
    add_flag(parser, "--store", metavar="URL", default=None)


def config_from(args: argparse.Namespace) -> Config:
    """The configuration that ``--config`` names, else the one found from the working directory."""
    return load_config(getattr(args, "config", None))

"""perfgate's command line: one module per command, errors mapped to exit codes here only.

Each command module has ``add_arguments(parser)`` and ``run(args) -> int``; modules are
imported only when their command runs, so ``perfgate check`` never pays for torch.

An installed package adds commands of its own through the ``perfgate.commands`` entry point
group, each naming a module that also has ``HELP``, its one-line help::

    [project.entry-points."perfgate.commands"]
    mycommand = "mypackage.command"

The group is read only when the first word is not one of perfgate's own commands (:data:`COMMANDS`,
which an installed command cannot replace). A module that cannot be loaded (it fails to import, or
lacks ``HELP``, ``add_arguments`` or ``run``) breaks no other command: ``perfgate --help`` lists it
as unusable, and only running it exits 2 with the reason, naming the entry point
(:mod:`perfgate.cli.toolkit` is what such a command uses to behave like perfgate's own).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from perfgate import __version__
from perfgate.app.secrets import forget, scrub
from perfgate.errors import EXIT_ERROR, ConfigError, PerfgateError
from perfgate.guard import run_guarded

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["COMMANDS", "COMMAND_GROUP", "commands", "guarded", "main"]

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("perfgate.cli._bench", "run the benchmark stages of a model and write a run file"),
    "check": ("perfgate.cli._check", "compare a run against its baseline; exit 1 on regression"),
    "record": ("perfgate.cli._record", "add finished runs to the result store"),
    "baseline": ("perfgate.cli._baseline", "per-model baselines: save, show, update, accept, export"),
    "history": ("perfgate.cli._history", "a model's metrics over time from the store, with change points"),
    "calibrate": ("perfgate.cli._calibrate", "learn this machine's run-to-run noise from unchanged runs"),
    "import": ("perfgate.cli._import", "convert pytest-benchmark, pyperf, asv, hyperfine or google-benchmark results"),
    "summary": ("perfgate.cli._summary", "join Markdown reports into one PR comment or job summary within the limit"),
    "export": ("perfgate.cli._export", "export the newest results as Prometheus metrics (serve, push, textfile)"),
    "dashboard": ("perfgate.cli._dashboard", "write the Grafana dashboard of perfgate's Prometheus metrics"),
    "report": ("perfgate.cli._report", "write the HTML report with plots of a store's newest runs"),
    "ab": ("perfgate.cli._ab", "measure two git revisions alternately in one job and check them paired"),
    "explain": ("perfgate.cli._explain", "profile two git revisions on a stage and show where its time went"),
    "store": ("perfgate.cli._store", "maintain a result store: compact its runs into their bounded form"),
}


COMMAND_GROUP = "perfgate.commands"
_COMMAND_FIX = "fix the package's command or uninstall it"


@functools.cache
def _installed() -> dict[str, tuple[str, EntryPoint]]:
    """The commands installed packages add: name -> (the entry point in words, the entry point)."""
    from importlib.metadata import entry_points

    found = {}
    for entry in entry_points(group=COMMAND_GROUP):
        if entry.name in COMMANDS or entry.name in found:
            continue
        dist = getattr(entry, "dist", None)
        package = f" of distribution {dist.name} {dist.version}" if dist is not None else ""
        found[entry.name] = (f"entry point {COMMAND_GROUP} '{entry.name} = {entry.value}'{package}", entry)
    return found


def commands() -> list[str]:
    """Every command's name: perfgate's own, then those installed packages add."""
    return [*COMMANDS, *_installed()]


def _module(name: str) -> ModuleType:
    """The module of command ``name``.

    Raises:
        ConfigError: an installed command's module cannot be used (module docstring).
    """
    if name in COMMANDS:
        return importlib.import_module(COMMANDS[name][0])
    from perfgate.usercode import loading

    origin, entry = _installed()[name]
    with loading(origin, error=ConfigError, advice=_COMMAND_FIX):
        module = entry.load()
    if not isinstance(module, ModuleType):
        raise ConfigError(f"{origin}: names a {type(module).__name__}, not a module; {_COMMAND_FIX}")
    lacking = [attr for attr in ("add_arguments", "run") if not callable(getattr(module, attr, None))]
    if not isinstance(getattr(module, "HELP", None), str):
        lacking.insert(0, "HELP")
    if lacking:
        raise ConfigError(f"{origin}: module {module.__name__} lacks {', '.join(lacking)}; {_COMMAND_FIX}")
    return module


def _help(name: str) -> str:
    """Command ``name``'s one-line help."""
    if name in COMMANDS:
        return COMMANDS[name][1]
    try:
        return str(_module(name).HELP)
    except PerfgateError:
        return f"(cannot be used: run 'perfgate {name}' for why)"


def _build_parser() -> argparse.ArgumentParser:
    from perfgate.cli._flags import Parser

    parser = Parser(
        prog="perfgate",
        description="Performance-regression gate for ML training pipelines.",
    )
    parser.add_argument("--version", action="version", version=f"perfgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands():
        help_text = _help(name)
        sub.add_parser(name, help=help_text, description=help_text, add_help=False)
    return parser


def _command_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    module = _module(name)
    from perfgate.cli._flags import Parser

    parser = Parser(prog=f"perfgate {name}", description=_help(name))
    module.add_arguments(parser)
    return parser, module


def main(argv: Sequence[str] | None = None) -> int:
    """Run perfgate with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    0 nothing regressed, 1 a regression or broken budget, 2 the tool could not decide; 130
    interrupted by Ctrl-C, 143 by SIGTERM (:func:`guarded`).
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or (args_list[0] not in COMMANDS and args_list[0] not in _installed()):
        top = _build_parser()
        if args_list and not args_list[0].startswith("-"):
            top.print_usage(sys.stderr)
            print(
                f"perfgate: error: unknown command {args_list[0]!r}; choose from {', '.join(commands())}",
                file=sys.stderr,
            )
            return EXIT_ERROR
        try:
            top.parse_args(args_list)
        except SystemExit as exc:
            return int(exc.code or 0)
        top.print_help()
        return EXIT_ERROR
    name = args_list[0]

    def command() -> int:
        parser, module = _command_parser(name)
        try:
            args = parser.parse_args(args_list[1:])
        except SystemExit as exc:  # argparse: --help exits 0, a usage error exits 2
            return int(exc.code or 0)
        from perfgate.cli._files import check_files

        check_files(parser, args)  # no FIFO for an input, no output over an input, before any work
        return int(module.run(args))  # type: ignore[attr-defined]

    return guarded(name, command)


def guarded(name: str, command: Callable[[], int]) -> int:
    """Run ``command`` with perfgate's error handling: every error a one-line message and exit 2.

    An interrupt is not an error: Ctrl-C (SIGINT) exits 130 and SIGTERM 143, the shell's
    128 + the signal's number, after the command's clean-up ran (docs/design.md §4).
    """
    forget()  # the secrets of this command's store URLs, none yet
    return run_guarded(name, command, mask=scrub)

"""The files a command reads and writes, found from its parser and checked before the command does
any work (:mod:`perfgate.app.files`): :func:`check_files` runs for every command once its
arguments are parsed (``cli.main``).

The inputs are found from the parser, not listed per command, so that a new flag cannot
skip the check: every flag typed :class:`~pathlib.Path` is an input, except the folders of
:data:`FOLDERS`; every flag typed :func:`~perfgate.output.output_file` is an output. Beside
them: the configuration file (given or found), the SQLite store, the ``[LABEL=]REPORT.md``
arguments of ``summary``, and the file of each ``--stages-module``, found as an import from
the working directory would find it, without running any of its code.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from perfgate.app import files
from perfgate.app.files import FilesRequest, module_files
from perfgate.output import output_file

__all__ = ["FOLDERS", "check_files", "input_files", "output_files"]

# Path-typed flags that name a folder: read (baseline show --dir, ab --repo) or filled (baseline save --dir)
FOLDERS = frozenset({"dir", "repo"})
_STAGES = ("stages_modules",)  # --stages-module


def _actions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Iterator[argparse.Action]:
    """The actions of ``parser`` and of the sub-command ``args`` chose (``baseline show``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if getattr(args, action.dest, None) == name:
                    yield from _actions(sub, args)
        else:
            yield action


def _label(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else str(action.metavar or action.dest)


def _values(value: object) -> list[object]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def input_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Path | str]:
    """Every file the command of ``args`` names to read, by the flag (or argument) that names it
    (the configuration and the store are added by :func:`perfgate.app.files.check_files`)."""
    found: dict[str, Path | str] = {}

    def add(label: str, path: Path | str) -> None:
        found.setdefault(label if label not in found else f"{label} {path}", path)

    for action in _actions(parser, args):
        value = getattr(args, action.dest, None)
        if action.type is Path and action.dest not in FOLDERS:
            for path in _values(value):
                add(_label(action), Path(str(path)))
        elif action.dest == "reports":  # summary's [LABEL=]REPORT.md
            from perfgate.app.summary import report_path

            for arg in _values(value):
                add(_label(action), report_path(str(arg)))
        elif action.dest in _STAGES:
            for name in _values(value):
                for path in module_files(str(name)):
                    add(f"--stages-module {name}", path)
    return found


def output_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Path | str | None]:
    """Every file the command of ``args`` writes, by flag."""
    return {
        _label(action): getattr(args, action.dest, None)
        for action in _actions(parser, args)
        if action.type is output_file
    }


def check_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, an input that is not a regular file and an output that names an input
    (:func:`perfgate.app.files.check_files`)."""
    request = FilesRequest(
        inputs=tuple(input_files(parser, args).items()),
        outputs=tuple(output_files(parser, args).items()),
        reads_config=hasattr(args, "config"),
        config=getattr(args, "config", None),
        reads_store=hasattr(args, "store"),
        store=getattr(args, "store", None),
    )
    files.check_files(request)

"""The files a command reads and writes, checked before the command does any work.

:func:`check_files` runs for every command once its arguments are parsed (``cli.main``):

- every input is a regular file: a FIFO would block until a writer came, perhaps forever;
  ``/dev/zero`` never ends; a directory is no file (:func:`perfgate.inputs.check_input_file`);
- no output names an input (:func:`perfgate.output.check_distinct`), through a symbolic
  link, a hard link or ``./`` or not: ``bench --output mystages.py`` would replace the
  user's code with a run file.

The inputs are found from the parser, not listed per command, so that a new flag cannot
skip the check: every flag typed :class:`~pathlib.Path` is an input, except the folders of
:data:`FOLDERS`; every flag typed :func:`~perfgate.output.output_file` is an output. Beside
them: the configuration file (given or found), the SQLite store, the ``[LABEL=]REPORT.md``
arguments of ``summary``, and the file of each ``--stages-module``, found as an import from
the working directory would find it, without running any of its code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from perfgate.inputs import check_input_file
from perfgate.output import check_distinct, output_file

__all__ = ["FOLDERS", "check_files", "input_files", "module_files", "output_files"]

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


def module_files(name: str) -> list[Path]:
    """The files an import of module ``name`` would run: its own and its packages'
    ``__init__.py``, found without running any of them (:func:`importlib.util.find_spec`
    would import the packages of a dotted name). The working directory comes first, as
    ``--stages-module`` imports it. Nothing for a module that is not found (the import
    reports it) or has no file."""
    from importlib.machinery import PathFinder

    loaded = sys.modules.get(name)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
        return [Path(origin)] if origin else []
    files: list[Path] = []
    search: list[str] = [str(Path.cwd()), *sys.path]
    for part in name.split("."):
        try:
            spec = PathFinder.find_spec(part, search)
        except (ImportError, ValueError):
            return files
        if spec is None:
            return files
        if spec.has_location and spec.origin:
            files.append(Path(spec.origin))
        search = list(spec.submodule_search_locations or [])
    return files


def input_files(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, config: Path | str | None, store: Path | None
) -> dict[str, Path | str]:
    """Every file the command of ``args`` reads, by the flag (or argument) that names it."""
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
    if config is not None:
        found.setdefault("--config", config)
    if store is not None:
        found["the store"] = store
    return found


def output_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Path | str | None]:
    """Every file the command of ``args`` writes, by flag."""
    return {
        _label(action): getattr(args, action.dest, None)
        for action in _actions(parser, args)
        if action.type is output_file
    }


def check_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, an input that is not a regular file and an output that names an input.

    Raises:
        InputError: an input is a FIFO, a directory, a device or a socket.
        OutputError: an output names an input, or two outputs name one file.
    """
    from perfgate.app.stores import store_file
    from perfgate.cli._flags import config_from

    for label, path in input_files(parser, args, config=None, store=None).items():
        check_input_file(path, flag=label)
    config = config_from(args) if hasattr(args, "config") else None  # the configuration refuses a FIFO itself
    store = store_file(args.store, config.store if config else None) if hasattr(args, "store") else None
    inputs = input_files(parser, args, config=config.source if config else None, store=store)
    check_distinct(output_files(parser, args), inputs)

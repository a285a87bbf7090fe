"""The files a command reads and writes, checked before the command does any work.

- every input is a regular file: a FIFO would block until a writer came, perhaps forever;
  ``/dev/zero`` never ends; a directory is no file (:func:`perfgate.inputs.check_input_file`);
- no output names an input (:func:`perfgate.output.check_distinct`), through a symbolic
  link, a hard link or ``./`` or not: ``bench --output mystages.py`` would replace the
  user's code with a run file.

Beside the files the command's options name: the configuration file (given or found), the
SQLite store, and the file of each stages module (:func:`module_files`), found as an import
from the working directory would find it, without running any of its code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from perfgate.app.stores import store_file
from perfgate.config import load_config
from perfgate.inputs import check_input_file
from perfgate.output import check_distinct

__all__ = ["FilesRequest", "check_files", "module_files"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FilesRequest:
    """A command's files by the flag (or argument) that names them: what it reads, what it writes,
    and whether it reads a configuration (``config``: the one given) and a store (``store``: the one given)."""

    inputs: tuple[tuple[str, Path | str], ...]
    outputs: tuple[tuple[str, Path | str | None], ...]
    reads_config: bool = False
    config: Path | None = None
    reads_store: bool = False
    store: str | None = None


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


def check_files(request: FilesRequest) -> None:
    """Refuse, before any work, an input that is not a regular file and an output that names an input.

    Raises:
        InputError: an input is a FIFO, a directory, a device or a socket.
        OutputError: an output names an input, or two outputs name one file.
    """
    for label, path in request.inputs:
        check_input_file(path, flag=label)
    config = load_config(request.config) if request.reads_config else None  # the configuration refuses a FIFO itself
    store = store_file(request.store, config.store if config else None) if request.reads_store else None
    inputs = dict(request.inputs)
    if config is not None and config.source is not None:
        inputs.setdefault("--config", config.source)
    if store is not None:
        inputs["the store"] = store
    check_distinct(dict(request.outputs), inputs)

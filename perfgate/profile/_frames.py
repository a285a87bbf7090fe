"""The frame labels and places the Python-level profilers share (sampling, bytecodes).

A frame's *label* is its function's qualified name (``Module._call_impl``: the class that
defines a method, ``outer.<locals>.inner``: the function that defines another); two
different functions that share a name (two ``run`` methods, two ``<lambda>``) are told apart by
their place, ``"run (stages.py:12)"``. A frame's *place* (``where``) is its file, relative to
the working directory when it lies under it and its base name otherwise, and its first line.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from perfgate.core.profiles import SEPARATOR

__all__ = ["Identity", "fold", "labels", "place", "qualname"]

# a function as a profiler sees it: (name, file, first line)
Identity = tuple[str, str, int]


def place(file: str, line: int) -> str:
    """``"stages.py:12"``; a file that is no path (``<built-in>``, ``<frozen …>``) as it is."""
    if not file:
        return ""
    if file.startswith("<"):
        shown = file
    else:
        try:
            rel = os.path.relpath(file)
        except ValueError:  # another drive
            rel = ""
        shown = rel if rel and not rel.startswith(os.pardir) else Path(file).name
    if file == "<built-in>" or line <= 0:
        return shown
    return f"{shown}:{line}"


def qualname(file: str, line: int, name: str) -> str:
    """The qualified name of the function ``name`` whose code starts at ``line`` of ``file``, read
    from its source (``co_qualname`` where the profiler has no code object); ``name`` where the
    source cannot be read or the function is not found (a lambda, a comprehension)."""
    return _qualnames(file).get((line, name), name)


@functools.lru_cache(maxsize=512)
def _qualnames(file: str) -> dict[tuple[int, str], str]:
    """(first line, name) -> qualified name of every function and class in ``file``.

    The first line is the code object's: a decorated function's starts at its first decorator.
    """
    if not file or file.startswith("<"):
        return {}
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[tuple[int, str], str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                name = f"{prefix}{child.name}"
                out[(first, child.name)] = name
                visit(child, f"{name}." if isinstance(child, ast.ClassDef) else f"{name}.<locals>.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _clean(label: str) -> str:
    return label.replace(SEPARATOR, ",")


def labels(identities: Iterable[Identity]) -> tuple[dict[Identity, str], dict[str, str]]:
    """Each function's label, and each label's place.

    A name is suffixed with its place only where two different functions share it; where even
    the places collide (the same base name and line in two folders) the full path is used.
    """
    by_name: dict[str, set[Identity]] = {}
    for ident in identities:
        by_name.setdefault(ident[0], set()).add(ident)
    out: dict[Identity, str] = {}
    for name, group in by_name.items():
        if len(group) == 1:
            (ident,) = group
            out[ident] = _clean(name)
            continue
        shown = {ident: f"{name} ({place(ident[1], ident[2])})" for ident in group}
        if len(set(shown.values())) < len(group):
            shown = {ident: f"{name} ({ident[1]}:{ident[2]})" for ident in group}
        out.update((ident, _clean(label)) for ident, label in shown.items())
    where: dict[str, str] = {label: place(ident[1], ident[2]) for ident, label in out.items()}
    return out, where


def fold(paths: Mapping[tuple[Identity, ...], float], names: Mapping[Identity, str]) -> dict[str, float]:
    """Folded stacks from paths of functions (root first) and their own costs; costs of 0 left out."""
    stacks: dict[str, float] = {}
    for path, cost in paths.items():
        if cost <= 0:
            continue
        key = SEPARATOR.join(names[ident] for ident in path)
        stacks[key] = stacks.get(key, 0.0) + cost
    return stacks

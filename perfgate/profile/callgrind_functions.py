"""A callgrind output file's instructions by C function, as a profile.

What it measures: each function's own instructions (``Ir``, callgrind's first event when it
counts no other name first) in one callgrind output file, that is its cost lines' counts
outside the calls it made; the cost line after a ``calls=`` line is the callee's inclusive
cost and belongs to the callee, which the file counts in its own lines too. Stacks are flat
(one frame per function: callgrind's file keeps callers and callees pairwise, not whole paths),
``where`` is the function's source file or, without debug information, its object (unit
``instructions``, resolution 0: a count). Callgrind's recursion levels of a function
(``_PyEval_EvalFrameDefault'2``) are that one function.

Why read the file: ``--measure counts`` already runs every counted call under callgrind
(:mod:`perfgate.workers.counts`), so where its instructions went is in the dump it wrote,
at no further cost. The format is callgrind's (https://valgrind.org/docs/manual/cl-format.html):
``fl=``/``fi=``/``fe=`` name the file, ``fn=`` the function of the cost lines that follow
(``fi``/``fe`` an inlined file, the function unchanged), ``cfl=``/``cfi=``, ``cob=`` and
``cfn=`` the callee of the next ``calls=`` line, and a name may be given once as ``(id) name``
and then as ``(id)`` (files, objects and functions each have their own ids).

Python 3.11 runs every Python function inside the interpreter's ``_PyEval_EvalFrameDefault``,
so callgrind names the interpreter's C functions and the libraries', never the stage's Python
functions (:data:`NOTE_PYTHON`; the bytecodes instrument names those).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from perfgate.core.profiles import SEPARATOR, Profile

__all__ = ["INSTRUMENT", "NOTE_PYTHON", "UNIT", "read_functions"]

INSTRUMENT = "callgrind (Ir)"
UNIT = "instructions"
NOTE_PYTHON = (
    "callgrind: Python 3.11 runs every Python function inside the interpreter's _PyEval_EvalFrameDefault, "
    "so these are the interpreter's and the libraries' C functions, not the stage's Python functions"
)

# name-compression tables: which table each key's (id) refers to
_TABLE = {"fl": "file", "fi": "file", "fe": "file", "cfl": "file", "cfi": "file",
          "ob": "object", "cob": "object", "fn": "function", "cfn": "function"}  # fmt: skip
_UNKNOWN = "???"
# callgrind's name for a recursion level of a function (--separate-recs): ``f'2``, one function here
_RECURSION = re.compile(r"'\d+$")


def _number(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


class _Names:
    """The three tables of callgrind's name compression."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, str]] = {"file": {}, "object": {}, "function": {}}

    def resolve(self, key: str, value: str) -> str:
        value = value.strip()
        if not value.startswith("("):
            return value
        close = value.find(")")
        if close < 0:
            return value
        ident, name = value[1:close], value[close + 1 :].strip()
        table = self.tables[_TABLE[key]]
        if name:
            table[ident] = name
            return name
        if ident not in table:
            raise ValueError(f"callgrind file: ({ident}) used before it was named, in {key}={value}")
        return table[ident]


def read_functions(path: Path, *, calls: int) -> Profile:
    """Each function's own instructions in the callgrind output file ``path``, over ``calls`` stage calls.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is no callgrind output (no ``events:`` line) or a line of it is malformed.
    """
    names = _Names()
    positions = 1  # "positions: line" unless the header says otherwise
    event = -1  # the column of Ir among the events
    obj = file = function = ""
    after_calls = False
    own: dict[tuple[str, str, str], int] = {}  # (object, file, function) -> instructions
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            head = line[0]
            if head.isdigit() or head in "+-*":
                if event < 0:
                    raise ValueError(f"{path}:{number}: a cost line before the events: header")
                if after_calls:  # the callee's inclusive cost: not the caller's own
                    after_calls = False
                    continue
                fields = line.split()
                column = positions + event
                if len(fields) > column:  # events left off at the end are 0
                    site = (obj, file, function)
                    own[site] = own.get(site, 0) + _number(fields[column])
                continue
            key, sep, value = line.partition("=")
            if sep and key in _TABLE:
                name = names.resolve(key, value)
                if key == "ob":
                    obj = name
                elif key == "fl":
                    file = name
                elif key == "fn":
                    function = _RECURSION.sub("", name)
                # fi/fe: an inlined file's lines, still the function's; cfl/cfi/cob/cfn: the callee
                continue
            if sep and key == "calls":
                after_calls = True
                continue
            if sep and key in ("jump", "jcnd"):
                continue
            key, sep, value = line.partition(":")
            if sep and key == "positions":
                positions = len(value.split())
            elif sep and key == "events":
                found = value.split()
                event = found.index("Ir") if "Ir" in found else 0
    if event < 0:
        raise ValueError(f"{path}: not a callgrind output file (no events: line)")
    stacks, where = _flat(own)
    return Profile(instrument=INSTRUMENT, unit=UNIT, calls=calls, stacks=stacks, where=where)


def _flat(own: dict[tuple[str, str, str], int]) -> tuple[dict[str, float], dict[str, str]]:
    """Flat stacks labelled by function name; where two functions share a name, its object is added
    (or, in one object, its file)."""
    by_name: dict[str, list[tuple[str, str, str]]] = {}
    for key, cost in own.items():
        if cost > 0:
            by_name.setdefault(key[2] or _UNKNOWN, []).append(key)
    stacks: dict[str, float] = {}
    where: dict[str, str] = {}
    for name, keys in by_name.items():
        by_object = len({key[0] for key in keys}) > 1
        for key in keys:
            label = name
            if len(keys) > 1:
                label = f"{name} ({_base(key[0] if by_object else key[1]) or _UNKNOWN})"
            label = label.replace(SEPARATOR, ",")
            stacks[label] = stacks.get(label, 0.0) + own[key]
            where.setdefault(label, _where(key))
    return stacks, where


def _where(key: tuple[str, str, str]) -> str:
    obj, file, _ = key
    if file and file != _UNKNOWN:
        return _base(file)
    return _base(obj) if obj and obj != _UNKNOWN else ""


def _base(path: str) -> str:
    return PurePosixPath(path).name

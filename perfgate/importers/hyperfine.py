"""hyperfine JSON (``hyperfine --export-json FILE …``).

Each entry of ``results`` is one command with ``times``, the wall-clock seconds of every
run — the samples. Files from hyperfine releases before ``times`` was exported carry only
summaries; their ``median`` (else ``mean``) is imported as one sample. The metric name is
the command, or the name given with ``--command-name``; with ``--parameter-scan`` or
``--parameter-list`` the command already contains the parameter value. hyperfine records
nothing about the machine or the time of the run.
"""

from __future__ import annotations

from collections.abc import Mapping

from perfgate.errors import InputError
from perfgate.importers._common import (
    ImportOptions,
    ImportResult,
    build_run,
    number,
    numbers,
    require,
    summary_note,
    time_spec,
)

__all__ = ["DEFAULT_TIME_UNIT", "FORMAT", "parse"]

FORMAT = "hyperfine"
DEFAULT_TIME_UNIT = "ms"


def parse(data: object, *, source: str, options: ImportOptions) -> ImportResult:
    """Read a decoded hyperfine JSON export."""
    if not isinstance(data, Mapping):
        raise InputError("expected a JSON object with 'results'", source=source)
    results = require(data, "results", list, source=source, field="results")
    unit = options.time_unit or DEFAULT_TIME_UNIT
    specs = []
    summaries_only = 0
    failed = []
    for i, entry in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError("expected an object", source=source, field=where)
        command = require(entry, "command", str, source=source, field=f"{where}.command")
        if "times" in entry:
            seconds = numbers(entry["times"], source=source, field=f"{where}.times")
        else:
            key = "median" if "median" in entry else "mean"
            seconds = (number(entry.get(key), source=source, field=f"{where}.{key}"),)
            summaries_only += 1
        codes = entry.get("exit_codes")
        if isinstance(codes, list) and any(c not in (0, None) for c in codes):
            failed.append(command)
        specs.append(time_spec(command, seconds, unit, f"{where}.times"))
    notes = []
    if summaries_only:
        notes.append(summary_note(summaries_only, "command(s)", "no 'times': an old hyperfine"))
    if failed:
        notes.append(f"{len(failed)} command(s) exited non-zero in some runs (hyperfine -i): their times may mislead")
    return build_run(specs, tool=FORMAT, options=options, source=source, notes=notes)

"""Google Benchmark JSON (``--benchmark_out=FILE --benchmark_out_format=json`` or ``--benchmark_format=json``).

With ``--benchmark_repetitions=N`` every repetition is one entry of ``benchmarks`` with
``run_type`` ``iteration``; they are grouped by ``run_name`` and their ``real_time`` values
(in the entry's ``time_unit``: ns, us, ms or s) are the samples. Aggregates (``run_type``
``aggregate``: mean, median, stddev, cv, or user-defined) are skipped: perfgate derives
its own. Throughput counters ``items_per_second`` and ``bytes_per_second`` become
higher-is-better metrics. Entries with ``error_occurred`` are skipped with a note.

Files from releases before ``run_name``/``run_type`` (Google Benchmark < 1.5) are read
by name: aggregates then end in ``_mean``, ``_median``, ``_stddev``, ``_cv``, ``_BigO`` or ``_RMS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfgate.core.metrics import Direction
from perfgate.errors import InputError
from perfgate.importers._common import (
    TIME_UNITS,
    ImportOptions,
    ImportResult,
    MetricSpec,
    build_run,
    creation_time,
    number,
    require,
)

__all__ = ["FORMAT", "parse"]

FORMAT = "google-benchmark"
_AGGREGATE_SUFFIXES = ("_mean", "_median", "_stddev", "_cv", "_BigO", "_RMS")
_COUNTERS = {"items_per_second": ("items_per_sec", "items/s"), "bytes_per_second": ("bytes_per_sec", "B/s")}


def _is_aggregate(entry: Mapping[str, Any]) -> bool:
    if "run_type" in entry:
        return bool(entry["run_type"] == "aggregate")
    if "aggregate_name" in entry:
        return True
    name = entry.get("name")
    return isinstance(name, str) and name.endswith(_AGGREGATE_SUFFIXES)


def parse(data: object, *, source: str, options: ImportOptions) -> ImportResult:
    """Read a decoded Google Benchmark JSON document."""
    if not isinstance(data, Mapping):
        raise InputError("expected a JSON object with 'context' and 'benchmarks'", source=source)
    entries = require(data, "benchmarks", list, source=source, field="benchmarks")
    # run name -> (time unit, real times, counters, first field)
    groups: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    errors = 0
    for i, entry in enumerate(entries):
        where = f"benchmarks[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError("expected an object", source=source, field=where)
        if _is_aggregate(entry):
            continue
        if entry.get("error_occurred"):
            errors += 1
            continue
        name = entry.get("run_name", entry.get("name"))
        if not isinstance(name, str) or not name:
            raise InputError("expected the benchmark's name", source=source, field=f"{where}.run_name")
        unit = entry.get("time_unit", "ns")
        if not isinstance(unit, str) or unit not in TIME_UNITS:
            raise InputError(
                f"unknown time unit {unit!r}; expected one of {', '.join(TIME_UNITS)}",
                source=source,
                field=f"{where}.time_unit",
            )
        group = groups.setdefault(name, {"unit": unit, "times": [], "counters": {}, "field": where})
        if unit != group["unit"]:
            raise InputError(
                f"time unit {unit!r} differs from the benchmark's earlier repetitions ({group['unit']!r})",
                source=source,
                field=f"{where}.time_unit",
            )
        group["times"].append(number(entry.get("real_time"), source=source, field=f"{where}.real_time"))
        for counter in _COUNTERS:
            if counter in entry:
                value = number(entry[counter], source=source, field=f"{where}.{counter}")
                group["counters"].setdefault(counter, []).append(value)
    if errors:
        notes.append(f"{errors} benchmark run(s) reported error_occurred; skipped")
    specs: list[MetricSpec] = []
    wanted = options.time_unit
    for name, group in groups.items():
        unit = group["unit"]
        times = tuple(group["times"])
        if wanted is not None and wanted != unit:
            factor = TIME_UNITS[wanted] / TIME_UNITS[unit]
            times, unit = tuple(t * factor for t in times), wanted
        specs.append(
            MetricSpec(
                base=name, quantity="time", unit=unit, direction=Direction.LOWER, samples=times, field=group["field"]
            )
        )
        for counter, values in group["counters"].items():
            quantity, label = _COUNTERS[counter]
            specs.append(
                MetricSpec(
                    base=name,
                    quantity=quantity,
                    unit=label,
                    direction=Direction.HIGHER,
                    samples=tuple(values),
                    field=group["field"],
                )
            )
    if groups and all(len(g["times"]) == 1 for g in groups.values()):
        notes.append(
            "one repetition per benchmark: run with --benchmark_repetitions=N (and "
            "--benchmark_enable_random_interleaving) to get samples; only the threshold will apply"
        )
    raw_context = data.get("context")
    context: Mapping[str, Any] = raw_context if isinstance(raw_context, Mapping) else {}
    created_at = creation_time(context.get("date"), source=source, field="context.date", notes=notes)
    cores = context.get("num_cpus")
    details = {
        "cores": cores if isinstance(cores, int) and not isinstance(cores, bool) else None,
        "hostname": context.get("host_name"),
    }
    caches = context.get("caches")
    identity = {
        "num_cpus": cores,
        "caches": [{k: c.get(k) for k in ("type", "level", "size")} for c in caches if isinstance(c, Mapping)]
        if isinstance(caches, list)
        else None,
    }
    config: dict[str, Any] = {}
    for key in ("executable", "library_build_type", "library_version"):
        if isinstance(context.get(key), str):
            config[key] = context[key]
    if context.get("library_build_type") == "debug":
        notes.append("the benchmark library says it is a debug build; its timings may mislead")
    return build_run(
        specs,
        tool=FORMAT,
        options=options,
        source=source,
        created_at=created_at,
        machine=details,
        identity=identity,
        config=config,
        notes=notes,
    )

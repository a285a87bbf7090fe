"""pyperf JSON (``python bench.py -o FILE.json``, ``pyperf timeit -o``), plain or ``.json.gz``.

A file holds ``benchmarks``, each with ``runs``; every run (one worker process) has
``values``, already divided by the loop count, in the benchmark's ``unit`` metadata
(``second``, ``byte`` or ``integer``; seconds when absent). All values of all runs are the
samples; calibration runs have none and are skipped. Metadata is merged as pyperf does:
file, then benchmark, then run.

Format versions read (pyperf's ``_JSON_VERSION`` history): ``5`` (perf 0.8.3, values
under ``samples``, benchmark metadata under ``common_metadata``), ``6`` (perf 0.9.6,
``values`` and a file-level ``metadata``) and ``"1.0"`` (pyperf 1.0 to today).
pyperf records its dates in local time without a zone; they are taken as UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfgate.core.metrics import Direction
from perfgate.errors import InputError
from perfgate.importers._common import (
    ImportOptions,
    ImportResult,
    MetricSpec,
    build_run,
    creation_time,
    numbers,
    python_software,
    require,
    time_spec,
)

__all__ = ["DEFAULT_TIME_UNIT", "FORMAT", "VERSIONS", "parse"]

FORMAT = "pyperf"
DEFAULT_TIME_UNIT = "us"
VERSIONS = {5: "perf 0.8.3", 6: "perf 0.9.6", "1.0": "pyperf 1.0"}


def _metadata(value: object, *, source: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError("expected an object", source=source, field=field)
    return dict(value)


def _spec(
    name: str, unit: str, values: tuple[float, ...], time_unit: str, where: str, groups: tuple[int, ...]
) -> MetricSpec:
    if unit == "second":
        return time_spec(name, values, time_unit, where, groups)
    quantity, label = ("bytes", "B") if unit == "byte" else ("count", "count")
    return MetricSpec(
        base=name, quantity=quantity, unit=label, direction=Direction.LOWER, samples=values, field=where, groups=groups
    )


def _identity(meta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    cores = meta.get("cpu_count")
    python = meta.get("python_version")
    details = {
        "cpu": meta.get("cpu_model_name"),
        "cores": cores if isinstance(cores, int) and not isinstance(cores, bool) else None,
        "python": python.split(" ")[0] if isinstance(python, str) else None,
        "hostname": meta.get("hostname"),
    }
    details = {k: v for k, v in details.items() if v is not None}
    identity = {k: details.get(k) for k in ("cpu", "cores")}
    return details, identity


def parse(data: object, *, source: str, options: ImportOptions) -> ImportResult:
    """Read a decoded pyperf JSON document (one benchmark or a suite)."""
    if not isinstance(data, Mapping):
        raise InputError("expected a JSON object with 'benchmarks'", source=source)
    version = data.get("version")
    if version not in VERSIONS:
        known = ", ".join(repr(v) for v in VERSIONS)
        raise InputError(
            f"pyperf format version {version!r} is not supported (known: {known})", source=source, field="version"
        )
    old = version == 5
    file_meta = {} if old else _metadata(data.get("metadata"), source=source, field="metadata")
    benchmarks = require(data, "benchmarks", list, source=source, field="benchmarks")
    time_unit = options.time_unit or DEFAULT_TIME_UNIT
    specs: list[MetricSpec] = []
    dates: list[str] = []
    notes: list[str] = []
    first_meta: dict[str, Any] = dict(file_meta)
    for i, bench in enumerate(benchmarks):
        where = f"benchmarks[{i}]"
        if not isinstance(bench, Mapping):
            raise InputError("expected an object", source=source, field=where)
        key = "common_metadata" if old else "metadata"
        meta = {**file_meta, **_metadata(bench.get(key), source=source, field=f"{where}.{key}")}
        runs = require(bench, "runs", list, source=source, field=f"{where}.runs")
        values: list[float] = []
        groups: list[int] = []  # one group per pyperf worker process: the values it measured
        unit = meta.get("unit", "second")
        for j, run in enumerate(runs):
            rwhere = f"{where}.runs[{j}]"
            if not isinstance(run, Mapping):
                raise InputError("expected an object", source=source, field=rwhere)
            run_meta = {**meta, **_metadata(run.get("metadata"), source=source, field=f"{rwhere}.metadata")}
            if i == 0 and j == 0:
                first_meta = run_meta
            unit = run_meta.get("unit", unit)
            vkey = "samples" if old else "values"
            raw = run.get(vkey)
            if not raw:
                continue  # a calibration run
            measured = numbers(raw, source=source, field=f"{rwhere}.{vkey}")
            values.extend(measured)
            groups.append(len(measured))
            date = run_meta.get("date")
            if isinstance(date, str):
                dates.append(date)
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("benchmark without a name", source=source, field=f"{where}.{key}.name")
        if unit not in ("second", "byte", "integer"):
            raise InputError(
                f"unknown unit {unit!r} (pyperf writes second, byte or integer)",
                source=source,
                field=f"{where}.{key}.unit",
            )
        if not values:
            notes.append(f"benchmark {name!r} has only calibration runs; skipped")
            continue
        specs.append(_spec(name, unit, tuple(values), time_unit, f"{where}.runs", tuple(groups)))
    created_at = creation_time(min(dates) if dates else None, source=source, field="runs.metadata.date", notes=notes)
    details, identity = _identity(first_meta)
    perf_version = first_meta.get("perf_version")
    config: dict[str, Any] = {"format_version": str(version)}
    if isinstance(perf_version, str):
        config["tool_version"] = perf_version
    return build_run(
        specs,
        tool=FORMAT,
        options=options,
        source=source,
        created_at=created_at,
        machine=details,
        identity=identity,
        software=python_software(first_meta.get("python_version"), first_meta.get("python_implementation")),
        config=config,
        notes=notes,
    )

"""asv (airspeed velocity) result files: ``results/<machine>/<commit>-<env>.json``.

Result format version 2 (asv 0.5 to today) stores each benchmark as a row of
``result_columns`` (``result``, ``params``, …, ``samples``); version 1 (asv ≤ 0.4) as an
object with ``result``, ``params``, ``stats`` and ``samples``. Parameterised benchmarks
hold one value per combination of parameters (their Cartesian product, in order); each
combination becomes its own metric (``time_sort[n=100]`` → ``time_sort_n_100_time_us``).

Raw samples exist when asv ran with ``--record-samples``; otherwise the result (asv's
median) is imported as one sample. Units and benchmark types come from
``results/benchmarks.json`` next to the machine folder when present, else from the name
(``time_`` seconds, ``mem_``/``peakmem_`` bytes, ``track_`` unitless). Like asv, a larger
value is worse, except for ``track_`` benchmarks whose unit is a rate (``…/s``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfgate.core.codec import format_timestamp
from perfgate.core.metrics import Direction
from perfgate.core.schema import GitInfo
from perfgate.errors import InputError
from perfgate.importers._common import (
    ImportOptions,
    ImportResult,
    MetricSpec,
    build_run,
    direction_for_unit,
    number,
    numbers,
    python_software,
    require,
    sanitize,
    summary_note,
    time_spec,
)

__all__ = ["DEFAULT_TIME_UNIT", "FORMAT", "benchmarks_file", "parse"]

FORMAT = "asv"
DEFAULT_TIME_UNIT = "us"

_PREFIX_TYPES = (("time_", "time"), ("peakmem_", "peakmemory"), ("mem_", "memory"), ("track_", "track"))


def benchmarks_file(result_file: Path) -> Path:
    """Where asv keeps the benchmark descriptions for a result file."""
    return result_file.parent.parent / "benchmarks.json"


def _rows_v2(data: Mapping[str, Any], *, source: str) -> dict[str, dict[str, Any]]:
    columns = require(data, "result_columns", list, source=source, field="result_columns")
    results = require(data, "results", dict, source=source, field="results")
    rows = {}
    for name, row in results.items():
        if not isinstance(row, list):
            raise InputError("expected a list of column values", source=source, field=f"results.{name}")
        rows[name] = dict(zip(columns, row, strict=False))  # asv drops trailing empty columns
    return rows


def _rows_v1(data: Mapping[str, Any], *, source: str) -> dict[str, dict[str, Any]]:
    results = require(data, "results", dict, source=source, field="results")
    raw_started = data.get("started_at")
    started: Mapping[str, Any] = raw_started if isinstance(raw_started, Mapping) else {}
    rows = {}
    for name, value in results.items():
        if not isinstance(value, Mapping):
            value = {"result": value}
        result = value.get("result")
        rows[name] = {
            "result": result if isinstance(result, list) else [result],
            "params": value.get("params") or [],
            "samples": value.get("samples"),
            "started_at": started.get(name),
        }
    return rows


def _kind(name: str, described: Mapping[str, Any] | None) -> tuple[str, str]:
    if described is not None and isinstance(described.get("type"), str):
        return described["type"], str(described.get("unit", ""))
    leaf = name.rsplit(".", 1)[-1]
    for prefix, kind in _PREFIX_TYPES:
        if leaf.startswith(prefix):
            return kind, {"time": "seconds", "memory": "bytes", "peakmemory": "bytes"}.get(kind, "unit")
    return "track", "unit"


def _labels(params: Sequence[Sequence[str]], names: Sequence[str]) -> list[str]:
    if not params:
        return [""]
    labels = []
    for combo in itertools.product(*params):
        if len(names) == len(combo):
            parts = [f"{n}={v}" for n, v in zip(names, combo, strict=True)]
        else:
            parts = [str(v) for v in combo]
        labels.append("[" + ", ".join(parts) + "]")
    return labels


def _spec(base: str, kind: str, unit: str, samples: tuple[float, ...], time_unit: str, where: str) -> MetricSpec:
    if kind == "time":
        return time_spec(base, samples, time_unit, where)
    if kind in ("memory", "peakmemory"):
        return MetricSpec(
            base=base, quantity="bytes", unit="B", direction=Direction.LOWER, samples=samples, field=where
        )
    quantity = "value" if unit in ("", "unit") else sanitize(unit)
    return MetricSpec(
        base=base,
        quantity=quantity,
        unit=unit or "unit",
        direction=direction_for_unit(unit),
        samples=samples,
        field=where,
    )


def _epoch_ms(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return format_timestamp(datetime.fromtimestamp(value / 1000, UTC))


def _machine(params: object) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(params, Mapping):
        return {}, {}
    cores = params.get("num_cpu")
    details = {
        "cpu": params.get("cpu"),
        "cores": int(cores) if isinstance(cores, str) and cores.isdigit() else None,
        "os": params.get("os"),
        "arch": params.get("arch"),
        "asv_machine": params.get("machine"),
    }
    details = {k: v for k, v in details.items() if v not in (None, "")}
    identity = {k: params.get(k) for k in ("arch", "cpu", "num_cpu", "ram")}
    return details, identity


def parse(
    data: object,
    *,
    source: str,
    options: ImportOptions,
    benchmarks: Mapping[str, Any] | None = None,
) -> ImportResult:
    """Read a decoded asv result document; ``benchmarks`` is the decoded ``benchmarks.json``, if any."""
    if not isinstance(data, Mapping):
        raise InputError("expected a JSON object with 'results'", source=source)
    version = data.get("version")
    if version == 2:
        rows = _rows_v2(data, source=source)
    elif version == 1:
        rows = _rows_v1(data, source=source)
    else:
        raise InputError(
            f"asv result format version {version!r} is not supported (known: 1, 2)", source=source, field="version"
        )
    time_unit = options.time_unit or DEFAULT_TIME_UNIT
    notes: list[str] = []
    if benchmarks is None:
        notes.append("no benchmarks.json next to the results folder: units and types guessed from benchmark names")
    specs: list[MetricSpec] = []
    started: list[str] = []
    no_samples = 0
    for name, row in rows.items():
        where = f"results.{name}"
        described = benchmarks.get(name) if benchmarks is not None else None
        described = described if isinstance(described, Mapping) else None
        kind, unit = _kind(name, described)
        results = row.get("result")
        if results is None:
            notes.append(f"benchmark {name!r} has no result (it failed or was skipped); skipped")
            continue
        if not isinstance(results, list):
            raise InputError("expected a list", source=source, field=f"{where}.result")
        params = row.get("params") or []
        if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
            raise InputError("expected a list of parameter value lists", source=source, field=f"{where}.params")
        names = described.get("param_names", []) if described else []
        labels = _labels(params, names if isinstance(names, list) else [])
        if len(labels) != len(results):
            raise InputError(
                f"{len(results)} result(s) for {len(labels)} parameter combination(s)",
                source=source,
                field=f"{where}.params",
            )
        samples_per = row.get("samples")
        if not isinstance(samples_per, list):
            samples_per = [None] * len(results)
        stamp = _epoch_ms(row.get("started_at"))
        if stamp:
            started.append(stamp)
        for k, (label, result) in enumerate(zip(labels, results, strict=True)):
            if result is None:
                notes.append(f"benchmark {name}{label} has no result (it failed or was skipped); skipped")
                continue
            raw = samples_per[k] if k < len(samples_per) else None
            if raw:
                samples = numbers(raw, source=source, field=f"{where}.samples[{k}]")
            else:
                samples = (number(result, source=source, field=f"{where}.result[{k}]"),)
                no_samples += kind == "time"
            specs.append(_spec(f"{name}{label}", kind, unit, samples, time_unit, where))
    if no_samples:
        notes.append(summary_note(no_samples, "timing(s)", "run asv with --record-samples"))
    details, identity = _machine(data.get("params"))
    commit = data.get("commit_hash")
    python = data.get("python")
    if isinstance(python, str):
        details["asv_python"] = python
    software = python_software(python)
    if isinstance(details.get("os"), str):
        software["os"] = details["os"]
    config: dict[str, Any] = {"format_version": version}
    if isinstance(data.get("env_name"), str):
        config["env_name"] = data["env_name"]
    return build_run(
        specs,
        tool=FORMAT,
        options=options,
        source=source,
        created_at=min(started) if started else _epoch_ms(data.get("date")),
        git=GitInfo(commit=commit if isinstance(commit, str) else None),
        machine=details,
        identity=identity,
        software=software,
        config=config,
        notes=notes,
    )

"""pytest-benchmark JSON (``--benchmark-json FILE`` or a saved ``.benchmarks/…/0001_*.json``).

Each entry of ``benchmarks`` has ``name``, ``fullname`` and ``stats``; with
``--benchmark-save-data`` the stats carry ``data``, the time of one call in seconds for
every round — the raw samples perfgate wants. Without it only summaries exist, and the
``median`` is imported as a single sample (perfgate then gates on the threshold alone, and
says so). The file layout has been the same since pytest-benchmark 3.0.

A fast benchmark has a round for every call it made in its ``max_time``: a real suite's file
holds millions (300 MB for 64 benchmarks). :func:`parse_stream` reads the file as a stream
(:mod:`perfgate.importers._stream`): each ``data`` array goes into the bounded form of its
metric (:mod:`perfgate.core.reduced`) as it is read, so memory is bounded by what is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO

from perfgate.core.schema import GitInfo
from perfgate.errors import InputError
from perfgate.importers._common import (
    ImportOptions,
    ImportResult,
    MetricSpec,
    build_run,
    creation_time,
    number,
    numbers,
    python_software,
    require,
    summary_note,
    time_spec,
)
from perfgate.importers._stream import Samples, stream_document

__all__ = ["DEFAULT_TIME_UNIT", "FORMAT", "parse", "parse_stream"]

FORMAT = "pytest-benchmark"
DEFAULT_TIME_UNIT = "us"


def _git(info: object) -> GitInfo:
    if not isinstance(info, Mapping):
        return GitInfo()
    commit = info.get("id")
    branch = info.get("branch")
    dirty = info.get("dirty")
    return GitInfo(
        commit=commit if isinstance(commit, str) and commit != "unversioned" else None,
        branch=branch if isinstance(branch, str) and branch not in ("(unknown)", "HEAD") else None,
        dirty=dirty if isinstance(dirty, bool) else None,
    )


def _machine(info: object) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(info, Mapping):
        return {}, {}
    raw_cpu = info.get("cpu")
    cpu: Mapping[str, Any] = raw_cpu if isinstance(raw_cpu, Mapping) else {}
    cores = cpu.get("count")
    details = {
        "cpu": cpu.get("brand_raw") or cpu.get("brand") or info.get("processor") or None,
        "cores": cores if isinstance(cores, int) and not isinstance(cores, bool) else None,
        "os": info.get("system"),
        "arch": info.get("machine"),
        "python": info.get("python_version"),
        "hostname": info.get("node"),
    }
    details = {k: v for k, v in details.items() if v not in (None, "")}
    identity = {k: details.get(k) for k in ("cpu", "cores", "arch")}
    return details, identity


def _software(info: object) -> dict[str, str]:
    if not isinstance(info, Mapping):
        return {}
    software = python_software(info.get("python_version"), info.get("python_implementation"))
    system, release = info.get("system"), info.get("release")
    if isinstance(system, str) and system:
        software["os"] = f"{system} {release}" if isinstance(release, str) and release else system
    return software


def parse(data: object, *, source: str, options: ImportOptions) -> ImportResult:
    """Read a decoded pytest-benchmark JSON document."""
    if not isinstance(data, Mapping):
        raise InputError("expected a JSON object with 'benchmarks'", source=source)
    benchmarks = require(data, "benchmarks", list, source=source, field="benchmarks")
    unit = options.time_unit or DEFAULT_TIME_UNIT
    specs: list[MetricSpec] = []
    summaries_only: list[str] = []
    for i, bench in enumerate(benchmarks):
        where = f"benchmarks[{i}]"
        if not isinstance(bench, Mapping):
            raise InputError("expected an object", source=source, field=where)
        name = require(bench, "name", str, source=source, field=f"{where}.name")
        stats = require(bench, "stats", dict, source=source, field=f"{where}.stats")
        size = None
        if isinstance(stats.get("data"), Samples):  # read as a stream: already checked, maybe bounded
            seconds, size = stats["data"].values, stats["data"].count
        elif "data" in stats:
            seconds = numbers(stats["data"], source=source, field=f"{where}.stats.data")
        else:
            if "median" not in stats:
                raise InputError("neither 'data' nor 'median' present", source=source, field=f"{where}.stats")
            seconds = (number(stats["median"], source=source, field=f"{where}.stats.median"),)
            summaries_only.append(name)
        specs.append(time_spec(name, seconds, unit, f"{where}.stats", size=size))
    notes = []
    if summaries_only:
        notes.append(summary_note(len(summaries_only), "benchmark(s)", "run pytest with --benchmark-save-data"))
    created_at = creation_time(data.get("datetime"), source=source, field="datetime", notes=notes)
    details, identity = _machine(data.get("machine_info"))
    version = data.get("version")
    return build_run(
        specs,
        tool=FORMAT,
        options=options,
        source=source,
        created_at=created_at,
        git=_git(data.get("commit_info")),
        machine=details,
        identity=identity,
        software=_software(data.get("machine_info")),
        config={"tool_version": version} if isinstance(version, str) else {},
        notes=notes,
    )


def _is_data(prefix: str) -> bool:
    return prefix == "benchmarks.item.stats.data"


def _field(path: list[object]) -> str:
    # ["benchmarks", 3, "stats", "data"] -> benchmarks[3].stats.data
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def parse_stream(handle: BinaryIO, *, source: str, options: ImportOptions) -> ImportResult:
    """Read a pytest-benchmark JSON file from ``handle`` as a stream, each benchmark's rounds in
    bounded memory (:mod:`perfgate.importers._stream`); the run is what :func:`parse` gives."""
    return parse(
        stream_document(handle, source=source, samples_at=_is_data, field_of=_field), source=source, options=options
    )

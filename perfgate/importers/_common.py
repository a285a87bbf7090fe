"""What every importer shares: options, metric naming, unit conversion, errors, the Run.

Metric names are derived from benchmark names (:mod:`perfgate.core.benchmark_names`): lower
case, every run of characters other than ``a-z0-9`` becomes one ``_``, then a suffix says the
quantity and unit (``test_sort[100]`` → ``test_sort_100_time_us``). Names longer than
:data:`MAX_BASE` are cut and given a hash of the full name, so that two long names stay distinct.

When benchmarks of one file sanitise alike, a benchmark whose name already is a stem
(``test_sort_100``) keeps its plain name, and every other one of them is told apart by a
hash of its own full name (``test_sort_100_31bf4d_time_us``). The rule looks at the set of
names, never at their order in the file, and a benchmark named like a metric stem keeps its
name whatever benchmarks are added beside it. Only a benchmark whose name is not a stem can
change name between runs (when another that sanitises alike appears or goes), so the run
records the benchmark of every metric in ``config["benchmark_names"]`` (metric name → the
tool's benchmark name), and a check or a store follows the benchmark, not the name.

Time units are fixed per format (overridable), never chosen from the values: a metric
whose median crossed 1 ms would otherwise change its name and unit between two runs and
stop being compared.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfgate.core.benchmark_names import BENCHMARK_NAMES, MAX_BASE, hashed_stem, sanitize
from perfgate.core.codec import parse_timestamp
from perfgate.core.metrics import Direction
from perfgate.core.reduced import bound_metric
from perfgate.core.schema import MAX_METRICS, GitInfo, Machine, Metric, Run
from perfgate.core.units import TIME_UNITS
from perfgate.errors import InputError

__all__ = [
    "MAX_BASE",
    "TIME_UNITS",
    "ImportOptions",
    "ImportResult",
    "MetricSpec",
    "build_run",
    "creation_time",
    "direction_for_unit",
    "fingerprint",
    "metric_name",
    "number",
    "numbers",
    "python_software",
    "require",
    "sanitize",
    "scale",
    "summary_note",
    "time_spec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOptions:
    """What the user asked for on the command line.

    ``model`` and ``suite`` default to the format's name; ``time_unit`` to the format's
    own default (one of :data:`TIME_UNITS`).
    """

    model: str | None = None
    suite: str | None = None
    time_unit: str | None = None

    def __post_init__(self) -> None:
        if self.time_unit is not None and self.time_unit not in TIME_UNITS:
            raise InputError(f"time unit must be one of {', '.join(TIME_UNITS)}, got {self.time_unit!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricSpec:
    """One benchmark's samples before naming: ``base`` is its (unsanitised) benchmark name."""

    base: str
    quantity: str  # "time", "bytes", "items_per_sec", ...
    unit: str
    direction: Direction
    samples: tuple[float, ...]
    field: str  # where in the file it came from, for error messages
    groups: tuple[int, ...] | None = None  # sample counts of the tool's worker processes, in order
    size: int | None = None  # samples measured, when ``samples`` are their order statistics (one group)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    """The imported run and what the user should know about it (one line each)."""

    run: Run
    notes: tuple[str, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)  # metric name -> benchmark name


def metric_name(base: str, quantity: str, unit: str | None = None, *, stem: str | None = None) -> str:
    """``<sanitised base>_<quantity>[_<unit>]``, e.g. ``test_sum_time_us``."""
    return "_".join(p for p in (stem or sanitize(base), quantity, unit) if p)


def direction_for_unit(unit: str) -> Direction:
    """Rates (``ops/s``, ``items per second``) are higher-is-better; everything else lower."""
    text = unit.strip().lower()
    if text.endswith(("/s", "/sec", "/second", "per second", "per_second", "per sec", "hz")):
        return Direction.HIGHER
    return Direction.LOWER


def scale(seconds: Iterable[float], unit: str) -> tuple[float, ...]:
    """Convert samples in seconds to ``unit`` (a key of :data:`TIME_UNITS`)."""
    factor = TIME_UNITS[unit]
    return tuple(value * factor for value in seconds)


def time_spec(
    base: str,
    seconds: Iterable[float],
    unit: str,
    field: str,
    groups: tuple[int, ...] | None = None,
    *,
    size: int | None = None,
) -> MetricSpec:
    """A timing benchmark: its samples in seconds, converted to ``unit``; lower is better.
    ``size``: how many samples ``seconds`` stands for, when it holds their order statistics."""
    return MetricSpec(
        base=base,
        quantity="time",
        unit=unit,
        direction=Direction.LOWER,
        samples=scale(seconds, unit),
        field=field,
        groups=groups,
        size=size,
    )


def summary_note(count: int, what: str, how: str) -> str:
    """The note for ``count`` benchmarks the file has only a summary of (``how``: what gives samples)."""
    return (
        f"{count} {what} without raw samples ({how}); their median was imported as one sample, so only the "
        "threshold will apply to them"
    )


def creation_time(text: object, *, source: str, field: str, notes: list[str]) -> str | None:
    """The run's creation time from the file's timestamp ``text`` (ISO 8601, a space for the ``T``
    accepted); none when the file has none, and a note when it has one that cannot be read."""
    if not isinstance(text, str):
        return None
    try:
        return parse_timestamp(text.replace(" ", "T", 1), source=source, field=field)
    except InputError:
        notes.append(f"unreadable {field} {text!r}; the run has no creation time")
        return None


def require(mapping: Mapping[str, Any], key: str, kind: type | tuple[type, ...], *, source: str, field: str) -> Any:
    """``mapping[key]``, which must be an instance of ``kind``; else an :class:`InputError` naming ``field``."""
    if key not in mapping:
        raise InputError("missing; is this file really in this format?", source=source, field=field)
    value = mapping[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise InputError(f"expected {names}, got {type(value).__name__}", source=source, field=field)
    return value


def number(value: object, *, source: str, field: str) -> float:
    """A finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a number, got {value!r}", source=source, field=field)
    result = float(value)
    if not math.isfinite(result) or result < 0:
        raise InputError(f"expected a finite number >= 0, got {value!r}", source=source, field=field)
    return result


def numbers(values: object, *, source: str, field: str) -> tuple[float, ...]:
    """A non-empty list of finite, non-negative numbers."""
    if not isinstance(values, list | tuple):
        raise InputError(f"expected a list of numbers, got {type(values).__name__}", source=source, field=field)
    if not values:
        raise InputError("empty list; a benchmark needs at least one sample", source=source, field=field)
    return tuple(number(v, source=source, field=f"{field}[{i}]") for i, v in enumerate(values))


def python_software(version: object, implementation: object = None) -> dict[str, str]:
    """The Python a benchmark ran on, for :attr:`Run.software`: ``{"python": "3.11.2"}``, or
    ``"pypy 3.10.14"`` for another implementation; empty when the tool did not say."""
    if not isinstance(version, str) or not version.strip():
        return {}
    text = version.split(" ")[0]
    if isinstance(implementation, str) and implementation.strip().lower() not in ("", "cpython"):
        text = f"{implementation.strip().lower()} {text}"
    return {"python": text}


def fingerprint(tool: str, identity: Mapping[str, Any]) -> str | None:
    """A stable hash of what the tool recorded about the machine; ``None`` when it recorded nothing.

    The tool's name is part of the hash: two tools describe one machine differently, and
    perfgate's own fingerprint is computed from other fields, so none of them may match by accident.
    """
    present = {k: v for k, v in identity.items() if v not in (None, "", [], {})}
    if not present:
        return None
    text = json.dumps({"tool": tool, **present}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _name(spec: MetricSpec, stem: str | None = None) -> str:
    return metric_name(spec.base, spec.quantity, spec.unit if spec.quantity == "time" else None, stem=stem)


def _unique_names(specs: Sequence[MetricSpec]) -> list[str]:
    """Each benchmark's metric name: the plain one, unless others of the file sanitise alike.

    Of benchmarks whose plain names collide, the one whose name is already a stem keeps it
    (if two are, neither does); every other one gets a hash of its own full name. The result
    does not depend on the order.
    """
    names = [_name(s) for s in specs]
    colliding: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        colliding.setdefault(name, []).append(i)
    for group in colliding.values():
        if len(group) < 2:
            continue
        stems = [i for i in group if sanitize(specs[i].base) == specs[i].base]
        keeps = stems[0] if len(stems) == 1 else None
        for i in group:
            if i != keeps:
                names[i] = _name(specs[i], hashed_stem(specs[i].base))
    return names


def build_run(
    specs: Sequence[MetricSpec],
    *,
    tool: str,
    options: ImportOptions,
    source: str,
    created_at: str | None = None,
    git: GitInfo | None = None,
    machine: Mapping[str, Any] | None = None,
    identity: Mapping[str, Any] | None = None,
    software: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    notes: Iterable[str] = (),
) -> ImportResult:
    """Assemble the :class:`Run` of an import; ``specs`` in the file's order.

    ``identity`` is what the tool recorded about the hardware, hashed into the fingerprint;
    ``software`` the versions it recorded (Python, the OS), kept beside it as
    :attr:`Run.software`, so a Python upgrade is a change to gate, not another machine.
    """
    if not specs:
        raise InputError("no benchmark results with samples in this file", source=source, field="benchmarks")
    if len(specs) > MAX_METRICS:
        raise InputError(
            f"has {len(specs):,} benchmark results; a run holds at most {MAX_METRICS:,} metrics (docs/limits.md): "
            "import it in parts",
            source=source,
            field="benchmarks",
        )
    metrics: dict[str, Metric] = {}
    names: dict[str, str] = {}
    for spec, name in zip(specs, _unique_names(specs), strict=True):
        if name in metrics and names[name] == spec.base:  # the same benchmark twice (identical full names)
            raise InputError(f"benchmark {spec.base!r} appears twice", source=source, field=spec.field)
        if name in metrics:  # a hashed name that another benchmark has as its plain name
            raise InputError(
                f"benchmarks {names[name]!r} and {spec.base!r} both get the metric name {name!r}; rename one",
                source=source,
                field=spec.field,
            )
        try:
            sizes = (spec.size,) if spec.size is not None and spec.size > len(spec.samples) else None
            # every import is kept in its bounded form: a group of more than 1,001 samples as its
            # order statistics and its count (perfgate.core.reduced)
            metrics[name] = bound_metric(
                Metric(
                    name=name,
                    unit=spec.unit,
                    direction=spec.direction,
                    samples=spec.samples,
                    groups=spec.groups if spec.groups and len(spec.groups) > 1 else None,
                    sizes=sizes,
                )
            )
        except ValueError as exc:
            raise InputError(str(exc), source=source, field=spec.field) from None
        names[name] = spec.base
    details = {k: v for k, v in (machine or {}).items() if v is not None}
    if all(m.groups is None for m in metrics.values()):
        notes = [
            *notes,
            f"{tool} measured each benchmark in one process: a check against another run assumes the run-to-run "
            "noise unless this machine is calibrated (perfgate calibrate)",
        ]
    run = Run(
        model=options.model or tool,
        suite=options.suite or tool,
        metrics=metrics,
        created_at=created_at,
        git=git or GitInfo(),
        machine=Machine(fingerprint=fingerprint(tool, identity or {}), details=details),
        config={"imported_from": tool, **(config or {}), BENCHMARK_NAMES: names},
        software={k: str(v) for k, v in (software or {}).items() if v not in (None, "")},
    )
    return ImportResult(run=run, notes=tuple(notes), names=names)

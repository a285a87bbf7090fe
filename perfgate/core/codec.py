"""Run files: dict/JSON <-> :class:`~perfgate.core.schema.Run`, versioned and deterministic.

Two formats are read:

* the versioned run format (``schema_version`` 5, documented in
  ``perfgate/schemas/run.schema.json``), upgraded step by step from
  older versions through :data:`UPGRADES` and refused when newer than this perfgate;
* the original specification's flat format (one number per metric plus ``timestamp``, ``git_commit``,
  ``model_type``), read as one sample per metric.

Writing always produces the current version with sorted keys. Errors are
:class:`~perfgate.errors.InputError` naming the file (``source``) and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from perfgate.core.machine import SOFTWARE_KEYS, hardware_fingerprint, v2_fingerprint
from perfgate.core.metrics import Direction, MetricCatalogue, MetricInfo, default_suite, known_metrics
from perfgate.core.schema import (
    MAX_METRICS,
    MAX_SAMPLE,
    MEASURES,
    REFERENCE_KINDS,
    SCHEMA_VERSION,
    GitInfo,
    Machine,
    Metric,
    Reference,
    Run,
)
from perfgate.errors import InputError, SchemaVersionError

__all__ = [
    "FLAT_FIELDS",
    "UPGRADES",
    "dumps",
    "format_timestamp",
    "is_flat_format",
    "parse_timestamp",
    "run_from_dict",
    "run_to_dict",
]


def _upgrade_1_to_2(doc: dict[str, Any]) -> dict[str, Any]:
    # version 2 only adds optional fields (metrics' ``reference``, the run's
    # ``machine_index``); a version-1 document is a version-2 document without them
    return doc


# what ``perfgate bench`` measured as ``memory_usage_mb`` up to version 2: the figure now named
# ``round_memory_mb`` (the pipeline's peak, set-up included, is ``memory_usage_mb`` since)
_V2_MEMORY_DEFINITION = "peak RSS above the process state at the start of each round (includes set-up)"


def _upgrade_2_to_3(doc: dict[str, Any]) -> dict[str, Any]:
    doc = _rename_round_memory(doc)
    # software versions move out of ``machine`` into ``software``; a fingerprint perfgate
    # computed itself (it hashed them too) is recomputed from the hardware alone, so the
    # baseline keeps matching runs on the same machine. A fingerprint from anywhere else
    # (an importer's, one set by hand) is left as it was.
    machine = doc.get("machine")
    if not isinstance(machine, Mapping):
        return doc
    machine = dict(machine)
    fingerprint = machine.get("fingerprint")
    if isinstance(fingerprint, str) and fingerprint == v2_fingerprint(machine):
        machine["fingerprint"] = hardware_fingerprint(machine)
    software = {key: machine.pop(key) for key in SOFTWARE_KEYS if key in machine}
    doc = {**doc, "machine": machine}
    if "software" not in doc:
        doc["software"] = {key: str(value) for key, value in software.items() if value is not None}
    return doc


def _upgrade_4_to_5(doc: dict[str, Any]) -> dict[str, Any]:
    # version 5 only adds ``sizes`` to a metric in its bounded form; in a version-4 file every
    # group keeps every sample
    return doc


def _upgrade_3_to_4(doc: dict[str, Any]) -> dict[str, Any]:
    # ``measure`` says what the metrics are; a version-3 run counted under callgrind said so in
    # its config (``perfgate bench --measure counts``), every other one measured times
    config = doc.get("config")
    counted = isinstance(config, Mapping) and config.get("measure") == "counts"
    return {**doc, "measure": "counts" if counted else "times"}


def _rename_round_memory(doc: dict[str, Any]) -> dict[str, Any]:
    # a bench run's old memory_usage_mb is the per-round figure, not the pipeline's peak: it
    # keeps its meaning under its new name, so an old baseline never compares it with the new
    # figure (which would read as a regression of many times). A memory_usage_mb recorded any
    # other way (the Python API, an import, a flat file) is what its author measured, and stays.
    config, metrics = doc.get("config"), doc.get("metrics")
    if not isinstance(config, Mapping) or config.get("memory_definition") != _V2_MEMORY_DEFINITION:
        return doc
    if not isinstance(metrics, Mapping) or "memory_usage_mb" not in metrics or "round_memory_mb" in metrics:
        return doc
    metrics = dict(metrics)
    old = metrics.pop("memory_usage_mb")
    metrics["round_memory_mb"] = {**old, "direction": "informational"} if isinstance(old, Mapping) else old
    config = {k: v for k, v in config.items() if k != "memory_definition"}
    config["round_memory_definition"] = _V2_MEMORY_DEFINITION
    return {**doc, "config": config, "metrics": metrics}


# version N -> function turning a version-N document into version N+1; keep every step
# (old files live forever)
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _upgrade_1_to_2,
    2: _upgrade_2_to_3,
    3: _upgrade_3_to_4,
    4: _upgrade_4_to_5,
}

FLAT_FIELDS = ("timestamp", "git_commit", "model_type")


def parse_timestamp(value: object, *, source: str | None, field: str) -> str:
    """Normalise an ISO-8601 timestamp to UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``.

    A timestamp without a zone is taken as UTC (the original specification writes UTC).
    """
    if not isinstance(value, str):
        raise InputError(f"expected an ISO-8601 timestamp string, got {value!r}", source=source, field=field)
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # chrono writes nanoseconds; datetime takes at most microseconds
    if "." in text:
        head, _, rest = text.partition(".")
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}" if digits else head + zone
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"not an ISO-8601 timestamp: {value!r}", source=source, field=field) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_timestamp(moment)


def format_timestamp(moment: datetime) -> str:
    """UTC ISO-8601 with a ``Z``; microseconds only when present."""
    moment = moment.astimezone(UTC)
    spec = "%Y-%m-%dT%H:%M:%S.%fZ" if moment.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    return moment.strftime(spec)


def is_flat_format(data: Mapping[str, Any]) -> bool:
    """True for the original specification's flat single-number files."""
    if "metrics" in data or "schema_version" in data:
        return False
    # a flat file that lost its model_type is still flat: its error must name model_type
    return "model_type" in data or "model" in data or any(k in data for k in (*FLAT_FIELDS, *known_metrics()))


def _sample(value: object, *, source: str | None, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a number, got {value!r}", source=source, field=field)
    if abs(value) > MAX_SAMPLE and (isinstance(value, int) or math.isfinite(value)):  # and ints beyond a float
        raise InputError(
            f"sample {str(value)[:12]}… is beyond {MAX_SAMPLE:g}; samples must be at most that",
            source=source,
            field=field,
        )
    number = float(value)
    if not math.isfinite(number):
        raise InputError(
            f"{number!r} is not allowed; samples must be finite numbers (re-run the benchmark)",
            source=source,
            field=field,
        )
    if number < 0:
        raise InputError(f"negative sample {number!r}; samples must be >= 0", source=source, field=field)
    return number


def _metric(name: str, raw: object, *, source: str | None, known: MetricCatalogue) -> Metric:
    where = f"metrics.{name}"
    if not isinstance(raw, Mapping):
        raise InputError("expected an object with 'samples'", source=source, field=where)
    info = known.get(name)
    unit = raw.get("unit", info.unit if info else None)
    direction = raw.get("direction", info.direction if info else None)
    if unit is None or direction is None:
        missing = "unit" if unit is None else "direction"
        raise InputError(
            f"unknown metric without {missing}; add 'unit' and 'direction' to the file or declare the metric "
            "under [tool.perfgate.metrics] in the configuration",
            source=source,
            field=where,
        )
    if not isinstance(unit, str):
        raise InputError(f"unit must be a string, got {unit!r}", source=source, field=f"{where}.unit")
    try:
        direction = Direction(direction)
    except ValueError:
        choices = ", ".join(d.value for d in Direction)
        raise InputError(
            f"direction {direction!r} is not one of {choices}", source=source, field=f"{where}.direction"
        ) from None
    samples = raw.get("samples")
    if not isinstance(samples, list | tuple):
        raise InputError("expected a list of numbers", source=source, field=f"{where}.samples")
    if not samples:
        raise InputError("no samples; a metric needs at least one", source=source, field=f"{where}.samples")
    values = tuple(_sample(v, source=source, field=f"{where}.samples[{i}]") for i, v in enumerate(samples))
    groups = raw.get("groups")
    if groups is not None:
        if not isinstance(groups, list | tuple) or not all(
            isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in groups
        ):
            raise InputError("expected a list of positive sample counts", source=source, field=f"{where}.groups")
        if sum(groups) != len(values):
            raise InputError(
                f"groups add up to {sum(groups)} samples but there are {len(values)}",
                source=source,
                field=f"{where}.groups",
            )
        groups = tuple(groups)
    reference = None
    if raw.get("reference") is not None:
        reference = _reference(raw["reference"], len(values), source=source, where=f"{where}.reference")
    sizes = _sizes(raw.get("sizes"), groups or (len(values),), source=source, where=f"{where}.sizes")
    try:
        return Metric(
            name=name, unit=unit, direction=direction, samples=values, groups=groups, reference=reference, sizes=sizes
        )
    except ValueError as exc:
        raise InputError(str(exc), source=source, field=where) from None


def _sizes(raw: object, kept: tuple[int, ...], *, source: str | None, where: str) -> tuple[int, ...] | None:
    """How many samples each group measured (version 5, a metric in its bounded form)."""
    if raw is None:
        return None
    if not isinstance(raw, list | tuple) or not all(isinstance(s, int) and not isinstance(s, bool) for s in raw):
        raise InputError("expected a list of sample counts, one per group", source=source, field=where)
    if len(raw) != len(kept):
        raise InputError(f"{len(raw)} sample counts for {len(kept)} groups", source=source, field=where)
    for i, (size, stored) in enumerate(zip(raw, kept, strict=True)):
        if size < stored:
            raise InputError(
                f"group {i} measured {size} samples but keeps {stored} values", source=source, field=f"{where}[{i}]"
            )
    return tuple(raw)


def _reference(raw: object, n: int, *, source: str | None, where: str) -> Reference:
    """A metric's reference timings, stored run-length encoded: ``seconds[i]`` for ``counts[i]`` samples."""
    if not isinstance(raw, Mapping):
        raise InputError("expected an object with 'kernel', 'seconds' and 'counts'", source=source, field=where)
    kernel = raw.get("kernel")
    if kernel not in REFERENCE_KINDS:
        choices = ", ".join(REFERENCE_KINDS)
        raise InputError(f"kernel must be one of {choices}, got {kernel!r}", source=source, field=f"{where}.kernel")
    seconds, counts = raw.get("seconds"), raw.get("counts")
    if not isinstance(seconds, list | tuple) or not seconds:
        raise InputError("expected a non-empty list of seconds", source=source, field=f"{where}.seconds")
    if not isinstance(counts, list | tuple) or len(counts) != len(seconds):
        raise InputError("expected one count per entry of 'seconds'", source=source, field=f"{where}.counts")
    values = []
    for i, value in enumerate(seconds):
        number = _sample(value, source=source, field=f"{where}.seconds[{i}]")
        if number <= 0:
            raise InputError("reference timings must be > 0 seconds", source=source, field=f"{where}.seconds[{i}]")
        values.append(number)
    if not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise InputError("expected positive sample counts", source=source, field=f"{where}.counts")
    if sum(counts) != n:
        raise InputError(
            f"counts add up to {sum(counts)} samples but the metric has {n}", source=source, field=f"{where}.counts"
        )
    per_sample = tuple(v for v, c in zip(values, counts, strict=True) for _ in range(c))
    return Reference(kernel=kernel, seconds=per_sample)


def _machine_index(raw: object, *, source: str | None) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError("expected an object of reference kernel times", source=source, field="machine_index")
    index = {}
    for kind, value in raw.items():
        if kind not in REFERENCE_KINDS:
            raise InputError(
                f"unknown kernel {kind!r} (one of {', '.join(REFERENCE_KINDS)})", source=source, field="machine_index"
            )
        number = _sample(value, source=source, field=f"machine_index.{kind}")
        if number <= 0:
            raise InputError("kernel times must be > 0 seconds", source=source, field=f"machine_index.{kind}")
        index[str(kind)] = number
    return index


def _software(raw: object, *, source: str | None) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError("expected an object of component name -> version string", source=source, field="software")
    for name, version in raw.items():
        if not isinstance(version, str):
            raise InputError(f"expected a version string, got {version!r}", source=source, field=f"software.{name}")
    return {str(name): version for name, version in raw.items() if name}


def _flat_to_run(data: Mapping[str, Any], *, source: str | None, known: MetricCatalogue) -> Run:
    model = data.get("model_type", data.get("model"))
    if not isinstance(model, str) or not model.strip():
        raise InputError("expected the model name (a non-empty string)", source=source, field="model_type")
    metrics: dict[str, Metric] = {}
    for key, value in data.items():
        if key in FLAT_FIELDS or key == "model":
            continue
        info = known.get(key)
        if info is None:
            if isinstance(value, int | float) and not isinstance(value, bool):
                raise InputError(
                    "unknown metric without unit/direction; declare it under [tool.perfgate.metrics] "
                    "or use the versioned run format",
                    source=source,
                    field=key,
                )
            continue  # other metadata a flat file may carry
        number = _sample(value, source=source, field=key)
        metrics[key] = Metric(name=key, unit=info.unit, direction=info.direction, samples=(number,))
    if not metrics:
        raise InputError("no metrics found (expected e.g. dbn_load_time_ms)", source=source, field="metrics")
    created = data.get("timestamp")
    commit = data.get("git_commit")
    if commit is not None and not isinstance(commit, str):
        raise InputError(f"expected a string, got {commit!r}", source=source, field="git_commit")
    return Run(
        model=model.strip(),
        metrics=metrics,
        created_at=None if created is None else parse_timestamp(created, source=source, field="timestamp"),
        git=GitInfo(commit=commit),
        single_sample_format=True,
    )


def _upgrade(data: dict[str, Any], *, source: str | None) -> dict[str, Any]:
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputError(f"expected a positive integer, got {version!r}", source=source, field="schema_version")
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"schema_version {version} is newer than this perfgate reads ({SCHEMA_VERSION}); upgrade perfgate",
            source=source,
            field="schema_version",
        )
    while version < SCHEMA_VERSION:
        data = UPGRADES[version](data)
        version += 1
        data["schema_version"] = version
    return data


def _optional_str(data: Mapping[str, Any], key: str, *, source: str | None, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"expected a string, got {value!r}", source=source, field=where)
    return value


def _check_count(count: int, *, source: str | None) -> None:
    if count > MAX_METRICS:
        raise InputError(
            f"has {count:,} metrics; a run holds at most {MAX_METRICS:,} (docs/limits.md): "
            "split it into several suites",
            source=source,
            field="metrics",
        )


def run_from_dict(
    data: object, *, source: str | None = None, metric_info: Mapping[str, MetricInfo] | None = None
) -> Run:
    """Build a :class:`Run` from a decoded JSON document (either format).

    Args:
        data: the decoded JSON value.
        source: the file it came from, named in every error.
        metric_info: the configuration's metric definitions for names outside the declared suites
            (a :class:`~perfgate.core.metrics.MetricCatalogue`, such as a policy's ``catalogue``, is read
            as it is).

    Raises:
        InputError: a missing or invalid field; the message names it.
        SchemaVersionError: the document is newer than this perfgate.
    """
    known = MetricCatalogue.over(metric_info)
    if not isinstance(data, Mapping):
        raise InputError(f"expected a JSON object at the top level, got {type(data).__name__}", source=source)
    if is_flat_format(data):
        return _flat_to_run(data, source=source, known=known)
    doc = _upgrade(dict(data), source=source)
    model = doc.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InputError("expected the model name (a non-empty string)", source=source, field="model")
    raw_metrics = doc.get("metrics")
    if not isinstance(raw_metrics, Mapping) or not raw_metrics:
        raise InputError("expected a non-empty object of metrics", source=source, field="metrics")
    _check_count(len(raw_metrics), source=source)
    metrics = {name: _metric(name, raw, source=source, known=known) for name, raw in raw_metrics.items()}
    git = doc.get("git") or {}
    machine = doc.get("machine") or {}
    config = doc.get("config") or {}
    for key, value in (("git", git), ("machine", machine), ("config", config)):
        if not isinstance(value, Mapping):
            raise InputError("expected an object", source=source, field=key)
    dirty = git.get("dirty")
    if dirty is not None and not isinstance(dirty, bool):
        raise InputError(f"expected true or false, got {dirty!r}", source=source, field="git.dirty")
    created = doc.get("created_at")
    suite = doc["suite"] if "suite" in doc else default_suite()  # a file that names none: the default suite
    if not isinstance(suite, str) or not suite:
        raise InputError(f"expected a non-empty string, got {suite!r}", source=source, field="suite")
    measure = doc.get("measure", "times")
    if measure not in MEASURES:
        raise InputError(f"expected one of {', '.join(MEASURES)}, got {measure!r}", source=source, field="measure")
    return Run(
        measure=measure,
        schema_version=SCHEMA_VERSION,
        run_id=_optional_str(doc, "run_id", source=source, where="run_id"),
        suite=suite,
        model=model.strip(),
        created_at=None if created is None else parse_timestamp(created, source=source, field="created_at"),
        git=GitInfo(
            commit=_optional_str(git, "commit", source=source, where="git.commit"),
            branch=_optional_str(git, "branch", source=source, where="git.branch"),
            dirty=dirty,
        ),
        machine=Machine(
            fingerprint=_optional_str(machine, "fingerprint", source=source, where="machine.fingerprint"),
            details={k: v for k, v in machine.items() if k != "fingerprint"},
        ),
        config=config,
        metrics=metrics,
        machine_index=_machine_index(doc.get("machine_index"), source=source),
        software=_software(doc.get("software"), source=source),
    )


def _metric_doc(metric: Metric) -> dict[str, Any]:
    doc: dict[str, Any] = {"unit": metric.unit, "direction": metric.direction.value, "samples": list(metric.samples)}
    if metric.groups is not None:
        doc["groups"] = list(metric.groups)
    if metric.sizes is not None:
        doc["sizes"] = list(metric.sizes)
    if metric.reference is not None:
        seconds: list[float] = []
        counts: list[int] = []
        for value in metric.reference.seconds:
            if seconds and seconds[-1] == value:
                counts[-1] += 1
            else:
                seconds.append(value)
                counts.append(1)
        doc["reference"] = {"kernel": metric.reference.kernel, "seconds": seconds, "counts": counts}
    return doc


def run_to_dict(run: Run) -> dict[str, Any]:
    """The current-version document for ``run`` (a flat-format run is written upgraded)."""
    machine: dict[str, Any] = dict(run.machine.details)
    if run.machine.fingerprint is not None:
        machine["fingerprint"] = run.machine.fingerprint
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "measure": run.measure,
        "suite": run.suite,
        "model": run.model,
        "git": {
            k: v
            for k, v in (("commit", run.git.commit), ("branch", run.git.branch), ("dirty", run.git.dirty))
            if v is not None
        },
        "machine": machine,
        "config": dict(run.config),
        "metrics": {name: _metric_doc(m) for name, m in run.metrics.items()},
    }
    if run.run_id is not None:
        doc["run_id"] = run.run_id
    if run.created_at is not None:
        doc["created_at"] = run.created_at
    if run.machine_index:
        doc["machine_index"] = dict(run.machine_index)
    if run.software:
        doc["software"] = dict(run.software)
    return doc


def dumps(run: Run) -> str:
    """Deterministic JSON text of ``run``: sorted keys, two-space indent, trailing newline."""
    return json.dumps(run_to_dict(run), sort_keys=True, indent=2, allow_nan=False) + "\n"

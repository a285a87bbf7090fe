"""Configuration: ``[tool.perfgate]`` in pyproject.toml, or a perfgate.toml, into a Policy.

Example::

    [tool.perfgate]
    threshold = 10.0          # percent, all metrics
    alpha = 0.01              # family-wise, per check
    store = "sqlite:///.perfgate/perfgate.db"
    missing_metric = "fail"   # a gated metric the run lacks: "fail" (exit 1) or "refuse" (exit 2)
    memory_floor_mb = 1.0     # a memory change smaller than this is never a regression

    [tool.perfgate.thresholds]
    inference_latency_us = 15.0

    [tool.perfgate.budgets.dqn]
    inference_latency_us = { p99 = 50.0 }
    training_memory_mb = { max = 150 }   # the model's class in the original specification
    memory_usage_mb = { max = 300 }      # the whole pipeline's peak (bench's definition, README)
    throughput_samples_per_sec = { min = 1000 }

    [tool.perfgate.metrics.tokenizer_time_ms]
    unit = "ms"
    direction = "lower_is_better"

    # the run-to-run noise assumed when this machine has no calibration (percent of the
    # location; defaults measured on a shared 2-core cloud VM): lower it on quiet hardware
    [tool.perfgate.assumed_noise]
    phase_pct = 12.0              # shared by everything one run measures
    process_pct = 8.0             # each worker process's own offset
    normalised_phase_pct = 3.0    # the same, for times in units of their reference kernel
    normalised_process_pct = 6.0
    memory_pct = 3.0              # memory figures: per process, no phase
    index_shift_pct = 50.0        # how far a normalised time may be off, per change of its kernel

Secrets never live here; notification credentials come from the environment
(``[tool.perfgate.notify]``, see :mod:`perfgate.notify.settings`).
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.core.metrics import Direction, MetricInfo
from perfgate.core.noise import ASSUMED_MEMORY, ASSUMED_NORMALISED, ASSUMED_RAW, NoiseModel
from perfgate.core.policy import BUDGET_STATISTICS, MISSING_METRIC_RULES, Budget, Policy
from perfgate.core.schema import normalize_model
from perfgate.errors import ConfigError, os_error_text
from perfgate.notify.settings import NotifyConfig, parse_notify
from perfgate.safe.text import one_line

__all__ = ["Config", "find_config", "load_config", "parse_config"]

_MAX_TOML_BYTES = 4 << 20
_KNOWN_KEYS = {
    "threshold",
    "alpha",
    "store",
    "thresholds",
    "budgets",
    "metrics",
    "confidence",
    "notify",
    "assumed_noise",
    "missing_metric",
    "memory_floor_mb",
}
_NOISE_KEYS = (
    "phase_pct",
    "process_pct",
    "normalised_phase_pct",
    "normalised_process_pct",
    "memory_pct",
    "index_shift_pct",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    policy: Policy = field(default_factory=Policy)
    store: str | None = None
    source: str | None = None
    notify: NotifyConfig = field(default_factory=NotifyConfig)  # [tool.perfgate.notify]


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; anything wrong with it is a :class:`ConfigError` naming the file."""
    source = str(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError("configuration file not found; check the path", source=source) from None
    except IsADirectoryError:
        raise ConfigError("is a directory; give perfgate.toml or pyproject.toml", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {os_error_text(exc)}", source=source) from None
    except ValueError as exc:  # a NUL byte in the path
        raise ConfigError(f"cannot read: {exc}", source=source) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError("is a directory; give perfgate.toml or pyproject.toml", source=source)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                "is not a regular file (a device, FIFO or socket); give perfgate.toml or pyproject.toml", source=source
            )
        if info.st_size > _MAX_TOML_BYTES:  # before reading a byte: a sparse 2 GiB file costs nothing
            raise ConfigError(f"larger than {_MAX_TOML_BYTES >> 20} MiB; not a configuration file", source=source)
        try:
            raw = handle.read(_MAX_TOML_BYTES + 1)  # the file may grow between the stat and the read
        except OSError as exc:
            raise ConfigError(f"cannot read: {os_error_text(exc)}", source=source) from None
    if len(raw) > _MAX_TOML_BYTES:
        raise ConfigError(f"larger than {_MAX_TOML_BYTES >> 20} MiB; not a configuration file", source=source)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte offset {exc.start}); TOML must be UTF-8", source=source) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {one_line(exc)}", source=source) from None
    except RecursionError:
        raise ConfigError("invalid TOML: nested too deeply", source=source) from None


def _perfgate_table(data: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    """``[tool.perfgate]`` of ``data`` (or the whole of a perfgate.toml), None when absent."""
    tool = data.get("tool")
    if tool is not None and not isinstance(tool, Mapping):
        raise ConfigError(f"'tool' must be a table, got {type(tool).__name__}", source=str(path), field="tool")
    table = tool.get("perfgate") if tool is not None else None
    if table is not None and not isinstance(table, Mapping):
        raise ConfigError(
            f"[tool.perfgate] must be a table, got {type(table).__name__}", source=str(path), field="tool.perfgate"
        )
    if path.name == "pyproject.toml":
        return table
    return table if table is not None else data


def find_config(start: Path | None = None) -> Path | None:
    """The nearest perfgate.toml, or pyproject.toml with a [tool.perfgate] table, upwards.

    A pyproject.toml on the way that cannot be read or parsed is an error, never skipped:
    its [tool.perfgate] table (budgets, thresholds, notifications) would vanish silently.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "perfgate.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = _read_toml(pyproject)
            except ConfigError as exc:
                raise ConfigError(
                    f"{exc.message} (found while looking for [tool.perfgate]; fix it, or name the "
                    "configuration with --config)",
                    source=exc.source,
                    field=exc.field,
                ) from None
            if _perfgate_table(data, pyproject) is not None:
                return pyproject
    return None


def _number(value: object, *, source: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"expected a number, got {value!r}", source=source, field=field)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(f"expected a finite number, got {str(value)[:40]}", source=source, field=field)
    return number


def _table_of(table: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = table.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a table, got {type(value).__name__}", source=source, field=key)
    return value


def _check_budgets(budgets: list[Budget], *, source: str) -> None:
    """Refuse budgets that can never be met, or that read as an empty range."""
    by_key: dict[tuple[str, str], dict[str, float]] = {}
    for b in budgets:
        if b.limit < 0:
            raise ConfigError(
                f"limit {b.limit:g} is negative; samples are never negative, so this budget could never be met "
                "(or never fail); give the limit in the metric's unit",
                source=source,
                field=f"budgets.{b.model}.{b.metric}.{b.statistic}",
            )
        by_key.setdefault((b.model, b.metric), {})[b.statistic] = b.limit
    for (model, metric), limits in by_key.items():
        if "min" in limits and "max" in limits and limits["min"] > limits["max"]:
            raise ConfigError(
                f"min = {limits['min']:g} is above max = {limits['max']:g}, an empty range; each limit is a bound "
                "on its own statistic in the metric's direction (at most, for a lower-is-better metric), so "
                "give the bounds in order or keep one",
                source=source,
                field=f"budgets.{model}.{metric}",
            )


def parse_config(table: Mapping[str, Any], *, source: str) -> Config:
    """Validate a ``[tool.perfgate]`` table."""
    unknown = set(table) - _KNOWN_KEYS
    if unknown:
        raise ConfigError(f"unknown keys {sorted(unknown)}; known: {sorted(_KNOWN_KEYS)}", source=source)
    kwargs: dict[str, Any] = {}
    for key in ("threshold", "alpha", "confidence"):
        if key in table:
            kwargs["threshold_pct" if key == "threshold" else key] = _number(table[key], source=source, field=key)
    thresholds = table.get("thresholds", {})
    if not isinstance(thresholds, Mapping):
        raise ConfigError("expected a table of metric = percent", source=source, field="thresholds")
    kwargs["thresholds_pct"] = {
        name: _number(v, source=source, field=f"thresholds.{name}") for name, v in thresholds.items()
    }
    metrics: dict[str, MetricInfo] = {}
    for name, spec in _table_of(table, "metrics", source).items():
        where = f"metrics.{name}"
        if not isinstance(spec, Mapping) or "unit" not in spec or "direction" not in spec:
            raise ConfigError("expected a table with 'unit' and 'direction'", source=source, field=where)
        try:
            direction = Direction(str(spec["direction"]))
        except ValueError:
            choices = ", ".join(d.value for d in Direction)
            raise ConfigError(f"direction must be one of {choices}", source=source, field=where) from None
        stats = spec.get("statistics", ("median",))
        if not isinstance(stats, list | tuple) or not all(isinstance(x, str) for x in stats):
            raise ConfigError('statistics must be a list of names, e.g. ["median", "p99"]', source=source, field=where)
        try:
            metrics[name] = MetricInfo(
                unit=str(spec["unit"]), direction=direction, label=str(spec.get("label", name)), statistics=tuple(stats)
            )
        except ValueError as exc:
            raise ConfigError(str(exc), source=source, field=where) from None
    kwargs["metric_info"] = metrics
    budgets: list[Budget] = []
    for model, per_metric in _table_of(table, "budgets", source).items():
        if not isinstance(per_metric, Mapping):
            raise ConfigError(
                "expected a table of metric = { statistic = limit }", source=source, field=f"budgets.{model}"
            )
        for metric, limits in per_metric.items():
            where = f"budgets.{model}.{metric}"
            if isinstance(limits, int | float) and not isinstance(limits, bool):
                limits = {"median": limits}
            if not isinstance(limits, Mapping) or not limits:
                raise ConfigError("expected { statistic = limit }, e.g. { p99 = 50 }", source=source, field=where)
            for statistic, limit in limits.items():
                if statistic not in BUDGET_STATISTICS:
                    raise ConfigError(
                        f"statistic must be one of {', '.join(BUDGET_STATISTICS)}",
                        source=source,
                        field=f"{where}.{statistic}",
                    )
                budgets.append(
                    Budget(
                        model=normalize_model(model),
                        metric=metric,
                        statistic=statistic,
                        limit=_number(limit, source=source, field=f"{where}.{statistic}"),
                    )
                )
    _check_budgets(budgets, source=source)
    kwargs["budgets"] = tuple(budgets)
    kwargs.update(_assumed_noise(table.get("assumed_noise"), source=source))
    if "missing_metric" in table:
        rule = table["missing_metric"]
        if rule not in MISSING_METRIC_RULES:
            raise ConfigError(
                f"expected one of {', '.join(repr(r) for r in MISSING_METRIC_RULES)}, got {rule!r}: "
                '"fail" fails the check when a gated metric is missing, "refuse" exits 2',
                source=source,
                field="missing_metric",
            )
        kwargs["missing_metric"] = rule
    if "memory_floor_mb" in table:
        kwargs["memory_floor_mb"] = _number(table["memory_floor_mb"], source=source, field="memory_floor_mb")
    try:
        policy = Policy(**kwargs)
    except ValueError as exc:
        raise ConfigError(str(exc), source=source) from None
    store = table.get("store")
    if store is not None and not isinstance(store, str):
        raise ConfigError("expected a store URL string", source=source, field="store")
    notify = parse_notify(table.get("notify"), source=source)
    return Config(policy=policy, store=store, source=source, notify=notify)


def _assumed_noise(table: object, *, source: str) -> dict[str, object]:
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise ConfigError("expected a table of percentages", source=source, field="assumed_noise")
    unknown = set(table) - set(_NOISE_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown keys {sorted(unknown)}; known: {list(_NOISE_KEYS)}", source=source, field="assumed_noise"
        )
    values = {}
    for key in _NOISE_KEYS:
        if key in table:
            value = _number(table[key], source=source, field=f"assumed_noise.{key}")
            if value < 0:
                raise ConfigError("must be a non-negative percentage", source=source, field=f"assumed_noise.{key}")
            values[key] = value / 100.0
    raw, norm = ASSUMED_RAW, ASSUMED_NORMALISED
    shift = {"index_shift": values["index_shift_pct"]} if "index_shift_pct" in values else {}
    return {
        **shift,
        "assumed_raw": NoiseModel(
            phase=values.get("phase_pct", raw.phase), process=values.get("process_pct", raw.process)
        ),
        "assumed_normalised": NoiseModel(
            phase=values.get("normalised_phase_pct", norm.phase),
            process=values.get("normalised_process_pct", norm.process),
        ),
        "assumed_memory": NoiseModel(phase=0.0, process=values.get("memory_pct", ASSUMED_MEMORY.process)),
    }


def load_config(path: Path | str | None = None) -> Config:
    """Read the configuration from ``path``, or find it from the working directory."""
    if path is not None and str(path) == "":
        raise ConfigError("an empty path; give perfgate.toml or pyproject.toml", field="--config")
    found = Path(path) if path is not None else find_config()
    if found is None:
        return Config()
    table = _perfgate_table(_read_toml(found), found)
    return parse_config(table or {}, source=str(found))

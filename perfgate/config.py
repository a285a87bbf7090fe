"""Configuration: ``[tool.perfgate]`` in pyproject.toml, or a perfgate.toml, into a Policy.

Example::

    [tool.perfgate]
    threshold = 10.0          # percent, all metrics
    alpha = 0.01              # family-wise, per check
    store = "sqlite:///.perfgate/perfgate.db"

    [tool.perfgate.thresholds]
    inference_latency_us = 15.0

    [tool.perfgate.budgets.dqn]
    inference_latency_us = { p99 = 50.0 }
    memory_usage_mb = { max = 150 }
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

Secrets never live here; notification credentials come from the environment
(``[tool.perfgate.notify]``, see :mod:`perfgate.notify.settings`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.core.metrics import Direction, MetricInfo
from perfgate.core.noise import ASSUMED_MEMORY, ASSUMED_NORMALISED, ASSUMED_RAW, NoiseModel
from perfgate.core.policy import BUDGET_STATISTICS, Budget, Policy
from perfgate.core.schema import normalize_model
from perfgate.errors import ConfigError
from perfgate.notify.settings import NotifyConfig, parse_notify

__all__ = ["Config", "find_config", "load_config", "parse_config"]

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
}
_NOISE_KEYS = ("phase_pct", "process_pct", "normalised_phase_pct", "normalised_process_pct", "memory_pct")


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    policy: Policy = field(default_factory=Policy)
    store: str | None = None
    source: str | None = None
    notify: NotifyConfig = field(default_factory=NotifyConfig)  # [tool.perfgate.notify]


def find_config(start: Path | None = None) -> Path | None:
    """The nearest perfgate.toml, or pyproject.toml with a [tool.perfgate] table, upwards."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "perfgate.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if "perfgate" in data.get("tool", {}):
                return pyproject
    return None


def _number(value: object, *, source: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"expected a number, got {value!r}", source=source, field=field)
    return float(value)


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
    for name, spec in (table.get("metrics") or {}).items():
        where = f"metrics.{name}"
        if not isinstance(spec, Mapping) or "unit" not in spec or "direction" not in spec:
            raise ConfigError("expected a table with 'unit' and 'direction'", source=source, field=where)
        try:
            direction = Direction(spec["direction"])
        except ValueError:
            choices = ", ".join(d.value for d in Direction)
            raise ConfigError(f"direction must be one of {choices}", source=source, field=where) from None
        stats = tuple(spec.get("statistics", ("median",)))
        metrics[name] = MetricInfo(
            unit=str(spec["unit"]), direction=direction, label=str(spec.get("label", name)), statistics=stats
        )
    kwargs["metric_info"] = metrics
    budgets: list[Budget] = []
    for model, per_metric in (table.get("budgets") or {}).items():
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
    kwargs["budgets"] = tuple(budgets)
    kwargs.update(_assumed_noise(table.get("assumed_noise"), source=source))
    try:
        policy = Policy(**kwargs)
    except ValueError as exc:
        raise ConfigError(str(exc), source=source) from None
    store = table.get("store")
    if store is not None and not isinstance(store, str):
        raise ConfigError("expected a store URL string", source=source, field="store")
    notify = parse_notify(table.get("notify"), source=source)
    return Config(policy=policy, store=store, source=source, notify=notify)


def _assumed_noise(table: object, *, source: str) -> dict[str, NoiseModel]:
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
    return {
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
    found = Path(path) if path is not None else find_config()
    if found is None:
        return Config()
    try:
        data = tomllib.loads(found.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("configuration file not found", source=str(found)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=str(found)) from None
    table = data.get("tool", {}).get("perfgate", {}) if found.name == "pyproject.toml" else data
    if found.name != "pyproject.toml" and "tool" in data and "perfgate" in data["tool"]:
        table = data["tool"]["perfgate"]
    return parse_config(table, source=str(found))

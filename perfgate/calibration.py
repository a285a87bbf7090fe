"""The calibration file: each machine's run-to-run noise per model and metric.

``perfgate calibrate`` writes it from the history of unchanged runs (by default
``.perfgate/noise.json``); ``perfgate check`` reads the entry of the current run's machine
and model into :attr:`perfgate.core.policy.Policy.noise`. Format (schema_version 1)::

    {"schema_version": 1,
     "machines": {"<fingerprint>": {"<model>": {
         "sigma": {"training_step_time_ms": 0.041, "inference_latency_us:p99": 0.12,
                   "training_step_time_ms@normalised": 0.018},
         "runs": 12, "branch": "main", "created_at": "2026-11-29T18:00:00Z"}}}}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perfgate.core.changepoints import detect
from perfgate.core.decision import PROCESS_DF_KEY, is_count, learned_residue
from perfgate.core.metrics import Direction, metric_info
from perfgate.core.noise import calibrate_sigma, normalised, residuals_of
from perfgate.core.policy import noise_key, residual_key
from perfgate.core.schema import Run
from perfgate.core.stats import QUANTILES
from perfgate.core.units import MEMORY_UNITS
from perfgate.errors import ConfigError
from perfgate.runfile import load_json, write_text_atomic

__all__ = [
    "DEFAULT_NOISE_FILE",
    "NOISE_VERSION",
    "PROCESS_DF_KEY",
    "Calibration",
    "estimate_noise",
    "load_calibration",
    "load_noise",
    "save_noise",
]

NOISE_VERSION = 1
DEFAULT_NOISE_FILE = Path(".perfgate") / "noise.json"


def _breaks(values: Sequence[float]) -> list[int]:
    """Where the series' segments start: its significant change points (a change of the code
    or of the machine), found on the log values; none in a short or constant series."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 6 or len(logs) != len(values):
        return []
    # a liberal level: a false break only drops one difference, a missed one keeps a step in
    return [cp.index for cp in detect(logs, alpha=0.05)]


def estimate_noise(runs: Sequence[Run]) -> dict[str, float]:
    """Run-to-run SD of each gated statistic's log value over ``runs`` (oldest first).

    The default branch's runs are not all of unchanged code: each series is split at its
    change points (:func:`perfgate.core.changepoints.detect`), and the successive-difference
    estimator reads only the differences within a segment (:func:`calibrate_sigma`).

    For metrics measured with a reference kernel it also learns the residual noise of the
    normalised values (keys ending ``@normalised``, see :func:`perfgate.core.policy.noise_key`),
    from the runs that have one: what remains once the machine's speed is taken out.

    Counts have no run-to-run phase: for them it learns the residue between the processes of
    each run instead (keys ending ``@process`` and ``@process_df``,
    :func:`perfgate.core.decision.learned_residue`), which a counts check tests each metric with.
    """
    names: dict[str, None] = {}
    for run in runs:
        names.update(dict.fromkeys(run.metrics))
    # counts: each metric's residue between the processes of a run, pooled over the runs
    sigma: dict[str, float] = learned_residue(runs)
    for name in names:
        metrics = [r.metrics[name] for r in runs if name in r.metrics]
        if not metrics or metrics[0].direction is Direction.INFO or is_count(metrics[0]):
            continue
        info = metric_info(name)
        scaled = [n for n in (normalised(m) for m in metrics) if n is not None]
        for statistic in info.statistics if info else ("median",):
            for values_of, is_normalised in ((metrics, False), (scaled, True)):
                values = [float(np.percentile(m.samples, 100 * QUANTILES[statistic])) for m in values_of]
                s = calibrate_sigma(values, _breaks(values))
                if s is not None:
                    sigma[noise_key(name, statistic, normalised=is_normalised)] = s
    sigma.update(estimate_residuals(runs))
    return sigma


def estimate_residuals(runs: Sequence[Run]) -> dict[str, float]:
    """Each timing statistic's residual noise over ``runs``: the SD of its log value once each
    run's common shift (from the run's medians) is taken out (keys ending ``@residual``,
    :func:`perfgate.core.policy.residual_key`), of the raw values and, for metrics every run
    timed with a reference kernel, of the values in its units. The same estimate a check makes
    from a pooled baseline's runs (:func:`perfgate.core.noise.residual_sigmas`), so a calibration
    file decides a file-to-file check as the store decides its own."""
    if len(runs) < 3:
        return {}
    shared = set(runs[0].metrics).intersection(*(r.metrics for r in runs[1:]))
    out: dict[str, float] = {}
    for scaled in (False, True):
        columns: dict[tuple[str, str], np.ndarray] = {}
        for name in sorted(shared):
            m = runs[0].metrics[name]
            if m.direction is Direction.INFO or is_count(m) or m.unit in MEMORY_UNITS:
                continue
            metrics = [r.metrics[name] for r in runs]
            if scaled:
                metrics = [n for n in (normalised(x) for x in metrics) if n is not None]
                if len(metrics) != len(runs):
                    continue
            info = metric_info(name)
            for statistic in info.statistics if info else ("median",):
                values = np.array([float(np.percentile(x.samples, 100 * QUANTILES[statistic])) for x in metrics])
                if np.all(values > 0):
                    logs = np.log(values)
                    columns[(name, statistic)] = m.direction.sign * logs
        sd = residuals_of(columns, [k for k in columns if k[1] in ("median", "p50")])
        out.update({residual_key(n, st, normalised=scaled): v for (n, st), v in sd.items()})
    return out


@dataclass(frozen=True, slots=True)
class Calibration:
    """The calibration of one machine and model: each metric's run-to-run sigma, and how many
    recorded runs it was learned from (0: not said)."""

    sigma: dict[str, float]
    runs: int


def load_calibration(path: Path | str, *, machine: str | None, model: str) -> Calibration:
    """The calibration of ``machine`` and ``model`` in the file ``path``, read once; its sigma is
    empty when the file has none."""
    doc = load_json(path)
    source = str(path)
    if not isinstance(doc, Mapping) or doc.get("schema_version") != NOISE_VERSION:
        raise ConfigError(f"expected a calibration file with schema_version {NOISE_VERSION}", source=source)
    machines = doc.get("machines", {})
    entry = machines.get(machine or "", {}).get(model) if isinstance(machines, Mapping) else None
    if not entry:
        return Calibration(sigma={}, runs=0)
    sigma = entry.get("sigma", {})
    if not isinstance(sigma, Mapping) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in sigma.values()
    ):
        raise ConfigError(
            "sigma must map metric names to non-negative numbers",
            source=source,
            field=f"machines.{machine}.{model}.sigma",
        )
    runs = entry.get("runs") if isinstance(entry, Mapping) else None
    return Calibration(
        sigma={str(k): float(v) for k, v in sigma.items()},
        runs=runs if isinstance(runs, int) and not isinstance(runs, bool) and runs > 0 else 0,
    )


def load_noise(path: Path | str, *, machine: str | None, model: str) -> dict[str, float]:
    """The calibrated sigmas for one machine and model; empty when the file has none."""
    return load_calibration(path, machine=machine, model=model).sigma


def save_noise(
    path: Path | str,
    *,
    machine: str,
    model: str,
    sigma: Mapping[str, float],
    runs: int,
    branch: str,
    created_at: str,
    run_ids: Sequence[str] = (),
) -> None:
    """Add or replace one (machine, model) entry, keeping the others."""
    target = Path(path)
    doc: dict[str, Any] = {"schema_version": NOISE_VERSION, "machines": {}}
    if target.exists():
        existing = load_json(target)
        if isinstance(existing, dict) and existing.get("schema_version") == NOISE_VERSION:
            doc = existing
    doc.setdefault("machines", {}).setdefault(machine, {})[model] = {
        "sigma": dict(sorted(sigma.items())),
        "runs": runs,
        "run_ids": list(run_ids),  # the runs the noise was learned from, oldest first
        "branch": branch,
        "created_at": created_at,
    }
    write_text_atomic(target, json.dumps(doc, sort_keys=True, indent=2) + "\n")

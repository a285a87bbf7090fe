"""Every run of a store's history as OpenMetrics, each sample stamped with its run's own time.

The live exposition (:mod:`perfgate.export.prometheus`) shows the newest run; a scrape stamps
it with the scrape's time, so plotted over time it is a flat line at the newest value. This
module writes one point per run instead, for Prometheus's backfill::

    perfgate export prometheus --openmetrics history.om
    promtool tsdb create-blocks-from openmetrics history.om /var/lib/prometheus/metrics2

Prometheus loads blocks moved into its data directory at its next block reload (about once a
minute), with no restart. The families are the live ones with ``history_`` after the prefix
(``perfgate_history_duration_seconds``, ``perfgate_history_memory_bytes``, …, the machine-speed
index as ``perfgate_history_machine_reference_seconds``), the same labels, and
``perfgate_history_flagged``: 1 for a run the gate flagged as a regression (and nobody accepted
since), else 0. Different names keep the history apart from the live series, which a scrape
stamps with its own time. Runs without a ``created_at`` have no place in time and are left out.

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from perfgate.core.metrics import MetricInfo
from perfgate.core.schema import Run, normalize_model
from perfgate.export.prometheus import Families, add_machine_index, add_values, unix_time
from perfgate.store.base import RunQuery, Store

__all__ = ["HISTORY_PREFIX", "history_families", "history_openmetrics", "read_history"]

HISTORY_PREFIX = "perfgate_history_"
_RUNS = "each run, at the run's time"
_KEY_LABELS = ["model", "machine", "suite"]
_NO_INFO: Mapping[str, MetricInfo] = MappingProxyType({})


def read_history(
    store: Store,
    *,
    model: str | None = None,
    machine: str | None = None,
    branch: str | None = None,
    suite: str | None = None,
) -> tuple[list[Run], frozenset[str]]:
    """The runs matching the filters, oldest first, and the ids of those the gate flagged.

    Two queries, whatever the number of runs: every run, and every run but the flagged ones.
    """
    query = RunQuery(model=normalize_model(model) if model else None, machine=machine, branch=branch, suite=suite)
    runs = store.runs(query)
    kept = {r.run_id for r in store.runs(replace(query, include_flagged=False))}
    flagged = frozenset(r.run_id for r in runs if r.run_id and r.run_id not in kept)
    return list(reversed(runs)), flagged


def history_families(
    runs: Sequence[Run],
    flagged: frozenset[str] = frozenset(),
    metric_info: Mapping[str, MetricInfo] = _NO_INFO,
) -> list[Any]:
    """The metric families of ``runs``, every sample at its run's ``created_at``.

    Within a family the samples are ordered by series, then time (OpenMetrics wants a series'
    points contiguous and in time order); a second run of one series at the same second is
    left out (the backfill refuses two values at one time).
    """
    out = Families(HISTORY_PREFIX)
    for run in runs:
        stamp = unix_time(run.created_at)
        if stamp is None:
            continue
        key = [run.model_key, run.machine.fingerprint or "unknown", run.suite]
        add_values(out, run, key, metric_info, runs=_RUNS, timestamp=stamp)
        add_machine_index(out, run, key, timestamp=stamp)
        out.gauge(
            "flagged", "1 for a run the gate flagged as a regression (and nobody accepted), else 0.", _KEY_LABELS
        ).add_metric(key, 1.0 if run.run_id in flagged else 0.0, stamp)
    families = list(out)
    for family in families:
        seen: set[tuple[Any, ...]] = set()
        ordered = []
        for sample in sorted(family.samples, key=lambda s: (sorted(s.labels.items()), s.timestamp)):
            point = (tuple(sorted(sample.labels.items())), sample.timestamp)
            if point not in seen:
                seen.add(point)
                ordered.append(sample)
        family.samples[:] = ordered
    return families


class _Fixed:
    """A collector that yields families built once."""

    def __init__(self, families: list[Any]) -> None:
        self._families = families

    def collect(self) -> Any:
        return iter(self._families)

    def describe(self) -> list[Any]:
        return []


def history_openmetrics(
    runs: Sequence[Run],
    flagged: frozenset[str] = frozenset(),
    metric_info: Mapping[str, MetricInfo] = _NO_INFO,
) -> str:
    """``runs`` in the OpenMetrics text format (ending in ``# EOF``), for ``promtool tsdb create-blocks-from``."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(history_families(runs, flagged, metric_info)))
    text: bytes = generate_latest(registry)  # type: ignore[no-untyped-call]
    return text.decode("utf-8")

"""perfgate results as Prometheus metrics: a custom Collector on a private registry.

One collection holds, per (model, machine, suite), the newest run and its check
(:mod:`perfgate.export.latest`). Names follow Prometheus conventions: base units (perfgate's
``ms``/``us`` become seconds, ``MB`` — MiB as measured — becomes bytes, ``%`` a 0–1 ratio),
no ``_total`` (nothing here is a counter), and bounded labels: ``model``, ``machine`` (the
fingerprint), ``suite``, ``metric`` (perfgate's metric name, as in reports and the
configuration) and ``statistic`` (``median``, ``p95``, ``p99`` of the samples; a budget's
may also be ``mean``, ``min`` or ``max``). Run id and commit live only in ``perfgate_run_info``.
(Not ``quantile``: promtool reserves that label for summaries, and these are gauges.)

====================================  ===================================================
family                                value
====================================  ===================================================
``perfgate_duration_seconds``         time metrics: the median, plus p95 and p99 for
                                      metrics that gate on them (inference latency)
``perfgate_memory_bytes``             memory metrics
``perfgate_throughput_per_second``    rates (``samples/s``, ``ops/s``)
``perfgate_utilization_ratio``        percentages, as 0–1
``perfgate_instructions``             counts (``--measure counts``): instructions per call
``perfgate_estimated_cycles``         counts: estimated cycles per call (simulated caches)
``perfgate_value``                    any other unit (its ``unit`` label says which)
``perfgate_change_ratio``             current / baseline - 1 of each compared statistic
``perfgate_degradation_ratio``        the same change direction-adjusted: positive is worse
``perfgate_check_regressions``        comparisons the last check found regressed
``perfgate_check_budgets_broken``     budgets the last run broke
``perfgate_check_threshold_ratio``    each compared statistic's own threshold (0.10 is
                                      10 %), on the scale of the degradation
``perfgate_check_verdict``            1 for the verdict of the last check, 0 for the
                                      others (:data:`VERDICTS`)
``perfgate_budget_<family>``          each budget's limit, in its family's unit
``perfgate_machine_reference_seconds`` the machine-speed index: each reference kernel's
                                      median time in the run (``kernel`` label); when
                                      it rises, the machine itself was slow
``perfgate_run_timestamp_seconds``    when the run was made (Unix time)
``perfgate_run_info``                 1, with ``run_id``, ``commit`` and ``branch``
====================================  ===================================================

The ways out (a textfile, an HTTP endpoint, a Pushgateway) are :mod:`perfgate.export.outlets`.
Samples carry no timestamps, so an exposition of fixed store content is byte-for-byte
stable (``tests/golden/*.prom``); the history of every run, each sample at its run's own
time, is :mod:`perfgate.export.history`. prometheus_client is imported only here, lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from perfgate.core.compare import Verdict
from perfgate.core.metrics import MetricCatalogue, MetricInfo
from perfgate.core.metrics import metric_info as declared_metric
from perfgate.core.schema import Run
from perfgate.core.stats import quantile
from perfgate.export.latest import RunState, state_key

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "VERDICTS",
    "Families",
    "PerfgateCollector",
    "UnitFamily",
    "add_machine_index",
    "add_values",
    "exposition",
    "make_registry",
    "metric_families",
    "run_verdict",
    "unit_family",
    "unix_time",
]

# The verdict of a check, least to most severe (the dashboard's verdict panel shows the most
# severe over a selection): nothing changed beyond its threshold; something improved and
# nothing else moved; a change over its threshold that the test could not confirm, or too few
# samples to tell; an absolute budget broken; the check could not be made (exit 2, e.g. a
# metric changed its unit); a regression.
VERDICTS = ("passed", "improved", "inconclusive", "over_budget", "metric_missing", "could_not_decide", "regressed")
_PREFIX = "perfgate_"
_RUN_LABELS = ["model", "machine", "suite"]
_VALUE_LABELS = [*_RUN_LABELS, "metric", "statistic"]
_NO_INFO: Mapping[str, MetricInfo] = MappingProxyType({})
# the statistic label of a comparison or a budget: p50 is the median
_STATISTIC_LABEL = {
    "median": "median",
    "p50": "median",
    "p95": "p95",
    "p99": "p99",
    "mean": "mean",
    "min": "min",
    "max": "max",
}
_SAMPLE_STATISTICS = ("median", "p95", "p99")

_SECONDS = {"ns": 1e9, "us": 1e6, "µs": 1e6, "μs": 1e6, "ms": 1e3, "s": 1.0, "sec": 1.0, "seconds": 1.0}
_BYTES = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": 2**10,
    "kib": 2**10,
    "mb": 2**20,
    "mib": 2**20,
    "gb": 2**30,
    "gib": 2**30,
}
_PERCENT = {"%", "pct", "percent"}
_RATE_SUFFIXES = ("/s", "/sec", "/second", "per second", "per_second", "per sec", "hz")


@dataclass(frozen=True, slots=True)
class UnitFamily:
    """Where a unit's values go: the family suffix and the conversion to its base unit."""

    suffix: str
    what: str  # the help text with ``{runs}`` for whose values they are
    convert: Callable[[float], float]
    unit_label: bool = False

    def help(self, runs: str = "the newest run") -> str:
        return self.what.format(runs=runs)


def unit_family(unit: str) -> UnitFamily:
    """The family of a perfgate unit, with the conversion of its values to the base unit.

    >>> unit_family("ms").suffix, unit_family("ms").convert(1.5)
    ('duration_seconds', 0.0015)
    """
    text = unit.strip()
    low = text.lower()
    if text in _SECONDS or low in _SECONDS:
        divisor = _SECONDS.get(text, _SECONDS.get(low, 1.0))
        return UnitFamily("duration_seconds", "Time metrics of {runs}, in seconds.", lambda v: v / divisor)
    if low in _BYTES:
        factor = _BYTES[low]
        return UnitFamily(
            "memory_bytes", "Memory metrics of {runs}, in bytes (perfgate's MB is MiB).", lambda v: v * factor
        )
    if low in _PERCENT:
        return UnitFamily("utilization_ratio", "Percentage metrics of {runs}, as a 0-1 ratio.", lambda v: v / 100.0)
    if low.endswith(_RATE_SUFFIXES):
        return UnitFamily("throughput_per_second", "Rate metrics of {runs}, per second.", lambda v: v)
    if low == "instructions":
        return UnitFamily(
            "instructions",
            "Instructions per call of {runs}, counted under callgrind (counts, not times).",
            lambda v: v,
        )
    if low == "cycles":
        return UnitFamily(
            "estimated_cycles",
            "Estimated cycles per call of {runs}: L1 hits + 5 x LL hits + 35 x RAM accesses of callgrind's "
            "simulated caches (counts, not times).",
            lambda v: v,
        )
    return UnitFamily("value", "Metrics of {runs} in other units (see the unit label).", lambda v: v, True)


def _statistics(name: str, known: MetricCatalogue) -> list[str]:
    """The statistics exported for a metric: the median, then the tails it gates on."""
    info = known.get(name)
    gated = {_STATISTIC_LABEL.get(s, s) for s in (info.statistics if info else ())}
    return [s for s in _SAMPLE_STATISTICS if s == "median" or s in gated]


def unix_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()  # perfgate's times are UTC


class Families:
    """Gauge families by name, created on first use and emitted in name order."""

    def __init__(self, prefix: str = _PREFIX) -> None:
        self._prefix = prefix
        self._by_name: dict[str, Any] = {}

    def gauge(self, name: str, help_text: str, labels: list[str]) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        if name not in self._by_name:
            self._by_name[name] = GaugeMetricFamily(self._prefix + name, help_text, labels=labels)
        return self._by_name[name]

    def info(self, name: str, help_text: str, labels: list[str]) -> Any:
        from prometheus_client.core import InfoMetricFamily

        if name not in self._by_name:
            self._by_name[name] = InfoMetricFamily(self._prefix + name, help_text, labels=labels)
        return self._by_name[name]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._by_name[n] for n in sorted(self._by_name))


def add_values(
    out: Families,
    run: Run,
    key: list[str],
    metric_info: Mapping[str, MetricInfo],
    *,
    runs: str = "the newest run",
    timestamp: float | None = None,
) -> None:
    """The run's metric values (median, and the tails they gate on) into their unit's family."""
    known = MetricCatalogue.over(metric_info)
    for name in sorted(run.metrics):
        metric = run.metrics[name]
        fam = unit_family(metric.unit)
        labels = _VALUE_LABELS + (["unit"] if fam.unit_label else [])
        gauge = out.gauge(fam.suffix, fam.help(runs), labels)
        for stat in _statistics(name, known):
            value = fam.convert(quantile(metric.samples, stat))
            gauge.add_metric([*key, name, stat, *([metric.unit] if fam.unit_label else [])], value, timestamp)


def add_machine_index(out: Families, run: Run, key: list[str], *, timestamp: float | None = None) -> None:
    """The run's machine-speed index: one series per reference kernel."""
    if not run.machine_index:
        return
    index = out.gauge(
        "machine_reference_seconds",
        "The machine-speed index: median time of each reference kernel during the run.",
        [*_RUN_LABELS, "kernel"],
    )
    for kernel in sorted(run.machine_index):
        index.add_metric([*key, kernel], run.machine_index[kernel], timestamp)


def run_verdict(state: RunState) -> str | None:
    """The verdict of ``state``'s check (one of :data:`VERDICTS`); None when it was never checked."""
    result = state.result
    if result is None:
        return "could_not_decide" if state.note else None
    if result.regressions:
        return "regressed"
    if result.missing:
        return "could_not_decide" if result.refused else "metric_missing"
    if result.broken_budgets:
        return "over_budget"
    if result.with_verdict(Verdict.INCONCLUSIVE):
        return "inconclusive"
    if result.with_verdict(Verdict.IMPROVED):
        return "improved"
    return "passed"


def _add_verdict(out: Families, state: RunState, key: list[str]) -> None:
    verdict = run_verdict(state)
    if verdict is None:  # a fresh run, not compared with anything: no verdict is invented
        return
    gauge = out.gauge(
        "check_verdict", "1 for the verdict of the last check, 0 for the others.", [*_RUN_LABELS, "verdict"]
    )
    for v in VERDICTS:
        gauge.add_metric([*key, v], 1.0 if v == verdict else 0.0)


def _add_check(out: Families, state: RunState, key: list[str]) -> None:
    result = state.result
    if result is None:
        return
    change = out.gauge("change_ratio", "Relative change against the baseline (current / baseline - 1).", _VALUE_LABELS)
    worse = out.gauge(
        "degradation_ratio", "Direction-adjusted change against the baseline: positive means worse.", _VALUE_LABELS
    )
    limit = out.gauge(
        "check_threshold_ratio",
        "The threshold of each compared statistic, on the scale of perfgate_degradation_ratio (0.1 is 10 %).",
        _VALUE_LABELS,
    )
    seen: set[tuple[str, str]] = set()
    for c in sorted(result.comparisons, key=lambda c: (c.metric, c.statistic)):
        stat = _STATISTIC_LABEL.get(c.statistic, c.statistic)
        if (c.metric, stat) in seen:  # "median" and "p50" of one metric are one series
            continue
        seen.add((c.metric, stat))
        # the whole change, current / baseline - 1, also for a metric the check tested against the
        # rest of its run (its tested change is in the report; a dashboard shows what happened)
        whole = c.raw_change if c.relative_to is not None else c.change
        if whole is not None:
            change.add_metric([*key, c.metric, stat], whole)
        degraded = c.direction.worse(whole) if c.relative_to is not None and whole is not None else c.worse
        if degraded is not None:
            worse.add_metric([*key, c.metric, stat], degraded)
            limit.add_metric([*key, c.metric, stat], c.threshold)
    out.gauge("check_regressions", "Comparisons the last check found regressed.", _RUN_LABELS).add_metric(
        key, float(len(result.regressions))
    )
    out.gauge("check_budgets_broken", "Budgets the newest run broke.", _RUN_LABELS).add_metric(
        key, float(len(result.broken_budgets))
    )


def _add_budgets(out: Families, state: RunState, key: list[str]) -> None:
    for budget in sorted(state.budgets, key=lambda b: (b.metric, b.statistic)):
        measured = state.run.metrics.get(budget.metric)
        info = declared_metric(budget.metric)
        unit = measured.unit if measured is not None else info.unit if info is not None else None
        if unit is None:  # a budget on a metric of unknown unit that this run did not measure
            continue
        fam = unit_family(unit)
        labels = [*_RUN_LABELS, "metric", "statistic"] + (["unit"] if fam.unit_label else [])
        gauge = out.gauge(f"budget_{fam.suffix}", f"Budget limits, in the unit of perfgate_{fam.suffix}.", labels)
        gauge.add_metric(
            [*key, budget.metric, _STATISTIC_LABEL[budget.statistic], *([unit] if fam.unit_label else [])],
            fam.convert(budget.limit),
        )


def metric_families(states: Sequence[RunState], metric_info: Mapping[str, MetricInfo] = _NO_INFO) -> list[Any]:
    """The metric families (prometheus_client ``Metric`` objects) of ``states``, in a stable order.

    Args:
        states: the runs to expose, at most one per (model, machine, suite).
        metric_info: definitions of metrics outside the declared suites (the p95/p99 they gate on are exported).
    """
    out = Families()
    for state in sorted(states, key=state_key):
        run = state.run
        key = [run.model_key, state.machine, run.suite]
        add_values(out, run, key, metric_info)
        _add_check(out, state, key)
        _add_verdict(out, state, key)
        _add_budgets(out, state, key)
        add_machine_index(out, run, key)
        stamp = unix_time(run.created_at)
        if stamp is not None:
            out.gauge("run_timestamp_seconds", "When the newest run was made, as Unix time.", _RUN_LABELS).add_metric(
                key, stamp
            )
        out.info("run", "The newest run of each model and machine: run id, commit and branch.", _RUN_LABELS).add_metric(
            key,
            {
                "run_id": run.run_id or "unknown",
                "commit": run.git.commit or "unknown",
                "branch": run.git.branch or "unknown",
            },
        )
    return list(out)


class PerfgateCollector:
    """A prometheus_client Collector: every collection asks ``states`` for fresh data.

    ``states`` is called on each scrape (it may open the store, read and close it again),
    so one collector serves an HTTP endpoint for as long as it runs.
    """

    def __init__(
        self,
        states: Callable[[], Sequence[RunState]],
        metric_info: Mapping[str, MetricInfo] = _NO_INFO,
    ) -> None:
        self._states = states
        self._metric_info = metric_info

    def collect(self) -> Iterator[Any]:
        yield from metric_families(self._states(), self._metric_info)

    def describe(self) -> list[Any]:
        # nothing to declare up front: registering must not read the store
        return []


def make_registry(collector: PerfgateCollector) -> CollectorRegistry:
    """A private registry holding only ``collector`` (no process or platform metrics)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> str:
    """The registry in Prometheus text format 0.0.4 (what node_exporter's textfile collector reads)."""
    from prometheus_client import generate_latest

    return generate_latest(registry).decode("utf-8")

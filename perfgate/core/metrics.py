"""What perfgate knows about metric names and suites, from the suites' own declarations.

A run file carries the unit and direction of each of its metrics. A **suite** declares its
metrics beside its stages (:class:`SuiteDeclaration`): their units, directions, labels, the
statistics that gate, and the panels and targets of its dashboard. With that, a file in the
original specification's flat format may omit units, a report labels a metric in words and
gates a latency on its tails, and the dashboard draws the suite's panels. perfgate itself names
no suite and no metric: the table is empty until a suite is declared.

Installed suites declare themselves through the ``perfgate.suites`` entry point group; they
are read on the first lookup (:func:`install_loader`, set by ``perfgate/__init__.py``), so
the core itself reads no package metadata. A process that names no suite falls back to
:data:`FALLBACK_SUITE`.

An installed declaration that cannot be used (its package fails to import, a field is wrong,
it clashes with another package's) is not declared; the loader records why (:func:`refuse`),
and only a lookup of what it spoils — its suite's name, a metric two packages declare
differently, the default suite — raises :class:`~perfgate.errors.ConfigError` with that
reason. Everything else keeps working.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol

__all__ = [
    "FALLBACK_SUITE",
    "STATISTICS",
    "DashboardPanel",
    "Direction",
    "MetricCatalogue",
    "MetricInfo",
    "RunnerMetrics",
    "SuiteDeclaration",
    "declare_suite",
    "declared_suite",
    "declared_suites",
    "default_suite",
    "describe",
    "forget_suite",
    "install_loader",
    "known_metrics",
    "metric_info",
    "refuse",
    "runner_metrics",
]

FALLBACK_SUITE = "default"  # the suite of a run or stage that names none, when no installed suite is the default
# the statistics a metric may gate on: the keys of perfgate.core.stats.QUANTILES (a test holds them equal;
# that module imports numpy, this one must not)
STATISTICS = ("median", "p50", "p95", "p99")


class Direction(StrEnum):
    """Which way is better. ``informational`` metrics are reported but never gate."""

    LOWER = "lower_is_better"
    HIGHER = "higher_is_better"
    INFO = "informational"

    @property
    def sign(self) -> float:
        """-1.0 for a higher-is-better metric, else 1.0: what turns the metric's own change (of its log,
        or of a whole array of logs) into the change in the "worse" sense, positive when it got worse."""
        return -1.0 if self is Direction.HIGHER else 1.0

    def worse(self, change: float) -> float:
        """``change`` (a log ratio, a relative change, a difference) in the "worse" sense: as it is for a
        lower-is-better metric, negated for a higher-is-better one. Its own inverse: a change in the
        "worse" sense, given back, is the metric's own. Informational metrics are read as lower-is-better."""
        return -change if self is Direction.HIGHER else change


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricInfo:
    """What perfgate knows about a metric name."""

    unit: str
    direction: Direction
    label: str  # noun phrase for report sentences ("DBN data loading time")
    statistics: tuple[str, ...] = ("median",)  # the location statistics that gate

    def __post_init__(self) -> None:
        stats = self.statistics
        if isinstance(stats, str) or not isinstance(stats, tuple | list) or not stats:
            raise ValueError(f"statistics must be a non-empty tuple of names among {STATISTICS}, got {stats!r}")
        unknown = [s for s in stats if s not in STATISTICS]
        if unknown:
            raise ValueError(f"statistics: {unknown[0]!r} is not one of {', '.join(STATISTICS)}")
        object.__setattr__(self, "statistics", tuple(stats))


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardPanel:
    """One panel a suite puts on the Grafana dashboard (``perfgate dashboard``).

    Attributes:
        metric: the metric it plots.
        title, description: what the panel says.
        style: ``series`` (one point per run, over time) or ``bars`` (the newest run of each model).
        per_statistic: one line per exported statistic (median, p95, p99) instead of the median.
        budgets: also plot the budgets configured on the metric, as series.
        target: a fixed target in the metric's own unit, drawn as a dashed red line (``None``: none).
        row: the dashboard row it goes in.
        width: its width in the 24 columns of a row.
    """

    metric: str
    title: str
    description: str
    style: str = "series"
    per_statistic: bool = False
    budgets: bool = False
    target: float | None = None
    row: str = ""
    width: int = 12

    def __post_init__(self) -> None:
        if self.style not in ("series", "bars"):
            raise ValueError(f"panel {self.title!r}: style must be 'series' or 'bars', got {self.style!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerMetrics:
    """The names under which ``perfgate bench``'s runner records its own figures of a suite's run, beside
    the stages' metrics; ``None`` leaves a figure out. A suite that declares none gets these names.

    Attributes:
        peak_memory: per round, the peak resident memory of the suite's stages: what their set-ups hold
            plus the round's peak above that (:class:`perfgate.bench.memory.PipelineMemory`).
        round_memory: per round, the round's peak above the resident memory at its start (informational).
        gpu_memory: per round, the peak GPU memory allocated (on a CUDA device).
        gpu_utilization: per round, the GPU's utilisation (on a CUDA device, where NVML reads it).
    """

    peak_memory: str | None = "peak_memory_mb"
    round_memory: str | None = "round_memory_mb"
    gpu_memory: str | None = "gpu_memory_mb"
    gpu_utilization: str | None = "gpu_utilization_pct"


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteDeclaration:
    """A suite as perfgate knows it before (and without) importing its stages.

    Attributes:
        name: the suite's name (``--suite``, ``@stage(..., suite=)``, the runs' ``suite``).
        stages_module: the module whose import registers its stages (``@stage``).
        models: what ``--model`` accepts and ``--model all`` measures (a live sequence may grow as
            models register); empty: the models its stages name.
        metrics: its metrics' units, directions, labels and gated statistics.
        panels: its dashboard panels, in order.
        default: the suite of ``perfgate bench`` and of a run file that names none.
        rounds: ``perfgate bench``'s rounds for it (``None``: the runner's default).
        min_repeat: the fewest timed calls per round (``None``: the runner's default).
        requires: modules it imports that a plain ``pip install perfgate`` lacks.
        install: how to install them (said when one is missing).
        runner_metrics: the names of the runner's own figures of its runs (peak memory, GPU).
        dashboard_title: the Grafana dashboard's title when it is the default suite (empty: perfgate's own).
    """

    name: str
    stages_module: str
    models: Sequence[str] = ()
    metrics: Mapping[str, MetricInfo] = field(default_factory=dict)
    panels: tuple[DashboardPanel, ...] = ()
    default: bool = False
    rounds: int | None = None
    min_repeat: int | None = None
    requires: tuple[str, ...] = ()
    install: str = ""
    runner_metrics: RunnerMetrics = RunnerMetrics()
    dashboard_title: str = ""


_lock = threading.RLock()
_suites: dict[str, SuiteDeclaration] = {}
_metrics: dict[str, MetricInfo] = {}
_loader: list[Callable[[], None]] = []  # run once, on the first lookup
_loaded = [False]
# what the loader could not declare, and why: ("suite", name), ("metric", name) or ("default", "")
_refused: dict[tuple[str, str], str] = {}


def install_loader(load: Callable[[], None]) -> None:
    """Set what declares the installed suites; it runs once, before the first lookup."""
    with _lock:
        _loader[:] = [load]
        _loaded[0] = False
        _refused.clear()


def refuse(why: str, *, suite: str | None = None, metrics: Sequence[str] = (), default: bool = False) -> None:
    """Record that an installed declaration cannot be used: from now on looking up the suite
    ``suite``, one of ``metrics`` or (``default``) the default suite raises ``ConfigError(why)``.

    ``why`` is the whole message: which package, which field, what to do. The first reason
    recorded for a name is kept.
    """
    with _lock:
        keys = [("metric", m) for m in metrics]
        if suite is not None:
            keys.append(("suite", suite))
        if default:
            keys.append(("default", ""))
        for key in keys:
            _refused.setdefault(key, why)


def _refusal(kind: str, name: str) -> None:
    why = _refused.get((kind, name))
    if why is not None:
        from perfgate.errors import ConfigError  # here: `import perfgate` imports this module and stays light

        raise ConfigError(why)


def _ensure_loaded() -> None:
    if _loaded[0]:
        return
    with _lock:
        if _loaded[0]:
            return
        _loaded[0] = True  # before the call: the loader declares through this module
        for load in _loader:
            load()


def declare_suite(suite: SuiteDeclaration) -> None:
    """Declare ``suite``; declaring the same suite again is harmless.

    Raises:
        ValueError: another suite of the same name, a metric another suite declares
            differently, or a second default suite.
    """
    with _lock:
        known = _suites.get(suite.name)
        if known is not None and known != suite:
            raise ValueError(f"suite {suite.name!r} is declared twice, differently")
        for name, info in suite.metrics.items():
            if _metrics.get(name, info) != info:
                raise ValueError(f"metric {name!r} of suite {suite.name!r} is declared differently by another suite")
        if suite.default and any(s.default and s.name != suite.name for s in _suites.values()):
            raise ValueError(f"suite {suite.name!r} and another both declare themselves the default suite")
        _suites[suite.name] = suite
        _metrics.update(suite.metrics)


def forget_suite(name: str) -> None:
    """Undo :func:`declare_suite` (for tests); a metric another declared suite names stays."""
    with _lock:
        _suites.pop(name, None)
        _metrics.clear()
        for suite in _suites.values():
            _metrics.update(suite.metrics)


def declared_suites() -> Mapping[str, SuiteDeclaration]:
    """Every declared suite by name, the installed ones included."""
    _ensure_loaded()
    return MappingProxyType(_suites)


def known_metrics() -> Mapping[str, MetricInfo]:
    """Every metric the declared suites name."""
    _ensure_loaded()
    return MappingProxyType(_metrics)


def declared_suite(name: str) -> SuiteDeclaration | None:
    """The declared suite ``name``, or ``None``.

    Raises:
        ConfigError: an installed declaration of that name cannot be used (:func:`refuse`).
    """
    suites = declared_suites()
    _refusal("suite", name)
    return suites.get(name)


def metric_info(name: str) -> MetricInfo | None:
    """What a declared suite says about ``name``, or ``None``.

    Raises:
        ConfigError: an installed declaration of that metric cannot be used (:func:`refuse`).
    """
    known = known_metrics()
    _refusal("metric", name)
    return known.get(name)


def default_suite() -> str:
    """The suite a run or stage belongs to when it names none: the declared default, else :data:`FALLBACK_SUITE`.

    Raises:
        ConfigError: which installed suite is the default cannot be told (:func:`refuse`).
    """
    suites = declared_suites()
    _refusal("default", "")
    return next((s.name for s in suites.values() if s.default), FALLBACK_SUITE)


def runner_metrics(suite: str) -> RunnerMetrics:
    """The names of the runner's own figures of a run of ``suite``: its declaration's, else the generic ones.

    Raises:
        ConfigError: an installed declaration of that name cannot be used (:func:`refuse`).
    """
    declared = declared_suite(suite)
    return declared.runner_metrics if declared is not None else RunnerMetrics()


class _Measured(Protocol):
    """A metric as a run carries it (:class:`perfgate.core.schema.Metric`): its own unit and direction."""

    @property
    def name(self) -> str: ...

    @property
    def unit(self) -> str: ...

    @property
    def direction(self) -> Direction: ...


class MetricCatalogue(Mapping[str, MetricInfo]):
    """What a check knows about each metric name, in one immutable mapping: the configuration's own
    definitions (``[tool.perfgate.metrics]``) first, then the declared suites'.

    Everything that needs a metric's unit, direction, label or gated statistics reads it here (a run
    file's decoding, the statistics a check compares, the budgets, the memory floor), so that a name
    the configuration defines means the same everywhere. :meth:`of` adds what a run says of its own
    metric: the unit and direction the run carries. The declared suites are read through the registry,
    so a refused declaration raises :class:`~perfgate.errors.ConfigError` on the lookup of its name
    (:func:`metric_info`) and on no other.
    """

    __slots__ = ("_defined",)
    _defined: Mapping[str, MetricInfo]

    def __init__(self, defined: Mapping[str, MetricInfo] | None = None) -> None:
        object.__setattr__(self, "_defined", MappingProxyType(dict(defined or {})))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a MetricCatalogue is immutable: cannot set {name}")

    @classmethod
    def over(cls, defined: Mapping[str, MetricInfo] | None) -> MetricCatalogue:
        """The catalogue of the definitions ``defined`` over the declared suites': ``defined`` itself when it
        is a catalogue already (a policy's)."""
        return defined if isinstance(defined, MetricCatalogue) else cls(defined)

    @property
    def defined(self) -> Mapping[str, MetricInfo]:
        """The configuration's own definitions, which come before the declared suites'."""
        return self._defined

    def get(self, name: str, default: MetricInfo | None = None) -> MetricInfo | None:  # type: ignore[override]
        """The definition of ``name``: the configuration's, else a declared suite's, else ``default``."""
        return self._defined.get(name) or metric_info(name) or default

    def __getitem__(self, name: str) -> MetricInfo:
        info = self.get(name)
        if info is None:
            raise KeyError(name)
        return info

    def __iter__(self) -> Iterator[str]:
        return iter({**known_metrics(), **self._defined})

    def __len__(self) -> int:
        return len({**known_metrics(), **self._defined})

    def __repr__(self) -> str:
        return f"MetricCatalogue({dict(self._defined)!r})"

    def __reduce__(self) -> tuple[type[MetricCatalogue], tuple[dict[str, MetricInfo]]]:
        return (MetricCatalogue, (dict(self._defined),))

    def of(self, metric: _Measured) -> MetricInfo:
        """A run's metric as the check reads it: the unit and direction the run carries, the label and
        gated statistics of its definition (else its name, and the median)."""
        info = self.get(metric.name)
        return MetricInfo(
            unit=metric.unit,
            direction=metric.direction,
            label=info.label if info else metric.name,
            statistics=info.statistics if info else ("median",),
        )


def describe(name: str) -> str:
    """A readable label for a metric name: its suite's label, or the name itself."""
    info = metric_info(name)
    return info.label if info else name

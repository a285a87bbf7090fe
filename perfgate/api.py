"""A Python API for use inside a training script: record metrics, keep a baseline, check.

The counterpart of the original specification's ``PerformanceTracker``::

    from perfgate.api import PerformanceTracker

    tracker = PerformanceTracker("dqn", directory="benchmark_results")
    for batch in loader:
        with tracker.timer("training_step_time_ms"):
            train_step(batch)
    tracker.record("memory_usage_mb", memory.peak_mb)  # from perfgate.bench.memory.PipelineMemory
    run = tracker.save("benchmark_results/dqn_current.json")
    if not tracker.baseline_exists():
        tracker.save_baseline()
    result = tracker.check()          # a CheckResult; result.failed, result.regressions
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.metrics import Direction, default_suite, known_metrics, metric_info
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run, normalize_model
from perfgate.core.units import TIME_UNITS
from perfgate.errors import InputError
from perfgate.runfile import load_run, save_run

__all__ = ["MakesRun", "PerformanceTracker", "count_stages"]

P = ParamSpec("P")
R = TypeVar("R")


class MakesRun(Protocol):
    """What :meth:`PerformanceTracker.record_metrics` takes: figures measured elsewhere that make a run of
    one sample per metric (a suite's own record of one run)."""

    def to_run(self) -> Run: ...


@dataclass(slots=True)
class PerformanceTracker:
    """Collects samples per metric during a script, then saves and checks them."""

    model: str
    directory: Path | str = "benchmark_results"
    policy: Policy = field(default_factory=Policy)
    git_commit: str | None = None
    suite: str = field(default_factory=default_suite)
    units: dict[str, tuple[str, Direction]] = field(default_factory=dict)
    # what was recorded so far: state, not a setting (not an argument, not in the repr)
    _samples: dict[str, list[float]] = field(default_factory=dict, init=False, repr=False)

    def record(
        self, metric: str, value: float, *, unit: str | None = None, direction: Direction | str | None = None
    ) -> None:
        """Add one sample. Metrics outside the built-in table need ``unit`` and ``direction`` once."""
        if unit is not None or direction is not None:
            if unit is None or direction is None:
                raise InputError("give unit and direction together", field=metric)
            self.units[metric] = (unit, Direction(direction))
        elif metric not in known_metrics() and metric not in self.units:
            raise InputError("unknown metric: pass unit= and direction= the first time", field=metric)
        self._samples.setdefault(metric, []).append(float(value))

    def record_metrics(self, metrics: MakesRun) -> None:
        """Add each metric of ``metrics.to_run()`` as one sample (its first)."""
        for name, metric in metrics.to_run().metrics.items():
            self.record(name, metric.samples[0])

    @contextmanager
    def timer(self, metric: str, *, unit: str | None = None) -> Iterator[None]:
        """Time the ``with`` block into ``metric`` (unit from the metric table or ``unit``)."""
        info = metric_info(metric)
        chosen = unit or (info.unit if info else None) or (self.units.get(metric, ("ms",))[0])
        if chosen not in TIME_UNITS:
            raise InputError(f"cannot time into unit {chosen!r}; use one of {sorted(TIME_UNITS)}", field=metric)
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            elapsed = (time.perf_counter_ns() - start) / 1e9 * TIME_UNITS[chosen]
            if metric in known_metrics() or metric in self.units:
                self.record(metric, elapsed)
            else:
                self.record(metric, elapsed, unit=chosen, direction=Direction.LOWER)

    def timed(self, metric: str, *, unit: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Decorator form of :meth:`timer`: every call of the function is one sample."""

        def decorate(fn: Callable[P, R]) -> Callable[P, R]:
            @wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
                with self.timer(metric, unit=unit):
                    return fn(*args, **kwargs)

            return wrapper

        return decorate

    def to_run(self, *, config: Mapping[str, Any] | None = None) -> Run:
        if not self._samples:
            raise InputError("nothing recorded yet", field=self.model)
        metrics = {}
        for name, samples in self._samples.items():
            info = metric_info(name)
            unit, direction = self.units.get(name) or (info.unit, info.direction)  # type: ignore[union-attr]
            metrics[name] = Metric(name=name, unit=unit, direction=direction, samples=tuple(samples))
        from perfgate.bench.provenance import collect

        made = collect(self.git_commit)
        return Run(
            model=self.model,
            suite=self.suite,
            metrics=metrics,
            run_id=made.run_id,
            created_at=made.created_at,
            git=made.git,
            machine=made.machine_record(),
            config=dict(config or {}),
            software=dict(made.software),
        )

    @property
    def baseline_path(self) -> Path:
        return Path(self.directory) / f"{normalize_model(self.model)}_baseline.json"

    def baseline_exists(self) -> bool:
        return self.baseline_path.exists()

    def save(self, path: Path | str) -> Run:
        """Write what was recorded as a run file and return the run."""
        run = self.to_run()
        save_run(path, run)
        return run

    def save_baseline(self, run: Run | None = None) -> Path:
        """Make ``run`` (default: what was recorded) this model's baseline file."""
        save_run(self.baseline_path, run or self.to_run())
        return self.baseline_path

    def check(self, run: Run | None = None, *, allow_machine_mismatch: bool = False) -> CheckResult:
        """Compare ``run`` (default: what was recorded) against the saved baseline."""
        baseline = load_run(self.baseline_path, self.policy.metric_info)
        return compare_runs(
            baseline,
            run or self.to_run(),
            self.policy,
            allow_machine_mismatch=allow_machine_mismatch,
            baseline_source=f"file `{self.baseline_path}`",
        )


def count_stages(
    model: str,
    *,
    suite: str | None = None,
    stages_module: tuple[str, ...] | list[str] = (),
    processes: int = 2,
    calls: int = 5,
    warmup: int | None = None,
    seed: int = 0,
    data: Path | str | None = None,
) -> Run:
    """Count a suite's stages under valgrind's callgrind: ``perfgate bench --measure counts`` as a function.

    Each of ``processes`` (at least 2) worker processes imports ``stages_module``, sets the
    stages up and warms them up uninstrumented, then counts ``calls`` calls of each stage.
    The run holds ``<stem>_instructions`` and ``<stem>_est_cycles`` per stage and no times;
    compare it with :func:`perfgate.core.compare.compare_runs` against another counts run.

    Raises:
        InputError: valgrind is not installed (the message names the package).
        PerfgateError: a stage failed under valgrind (the message names it).
    """
    from perfgate.app.count import CountRequest, count
    from perfgate.bench.provenance import collect

    request = CountRequest(
        model=normalize_model(model),
        suite=suite or default_suite(),
        stages_modules=tuple(stages_module),
        data=Path(data) if data is not None else None,
        seed=seed,
        warmup=warmup,
        calls=calls,
        processes=processes,
    )
    return count(request, collect())

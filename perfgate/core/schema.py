"""The data model: a :class:`Run` of :class:`Metric` samples.

Values are immutable and validated on construction; every summary (median, percentiles,
confidence intervals) is derived from the raw samples, never read from a file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from perfgate.core.metrics import Direction, default_suite

__all__ = [
    "MAX_METRICS",
    "MAX_SAMPLE",
    "MEASURES",
    "REFERENCE_KINDS",
    "SCHEMA_VERSION",
    "GitInfo",
    "Machine",
    "Metric",
    "Reference",
    "Run",
    "normalize_model",
]

# Run-file format history:
#   1: first version (schema_version, run_id, suite, model, created_at, git, machine,
#      config, metrics{name: {unit, direction, samples, groups}}).
#   2: the machine-speed index: metrics may carry ``reference`` (the reference kernel timed
#      with each sample), runs ``machine_index`` (each kernel's median time in the run).
#      A version-1 file is a valid version-2 file without either.
#   3: ``software`` (name -> version: python, torch, numpy, os, gpu_driver) beside ``machine``,
#      and the machine fingerprint hashes hardware only (perfgate.core.machine). The upgrade
#      moves those versions out of ``machine`` and recomputes a fingerprint perfgate wrote
#      itself, so an old baseline still matches runs on the same hardware.
#   4: ``measure``: what the run's metrics are, ``times`` (what every earlier run measured) or
#      ``counts`` (instructions and estimated cycles under callgrind, no times). A perfgate that
#      reads only version 3 refuses a counts run instead of taking its counts for times; the
#      upgrade names a version-3 run ``counts`` when its config said so.
#   5: ``sizes`` on a metric in its bounded form (perfgate.core.reduced): per group, how many
#      samples it measured; a group of more than 1,001 keeps its 1,001 evenly spaced order
#      statistics, sorted. A perfgate that reads only version 4 refuses such a file instead of
#      taking 1,001 values for the whole sample (its intervals would be ten times too wide). A
#      version-4 file is a version-5 file whose groups keep every sample.
SCHEMA_VERSION = 5
# what a run's metrics are (Run.measure)
MEASURES = ("times", "counts")

# the kinds of reference kernel (perfgate.bench.reference): what a stage's time tracks
REFERENCE_KINDS = ("compute", "interpreter", "memory")
MAX_SAMPLE = 1e150
# A check costs about 0.17 ms and 5 kB per metric on a 2-core runner (100,000 metrics: 17 s,
# 550 MB peak); a million would take minutes and gigabytes. docs/limits.md names the cap.
MAX_METRICS = 100_000


def normalize_model(name: str) -> str:
    """Canonical model key: lower case, letters and digits only ("MAMBA-2" -> "mamba2")."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


def _positive_seconds(values: tuple[float, ...], what: str) -> None:
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{what}[{i}] must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """The reference kernel of one kind, timed right before the block each sample belongs to.

    ``seconds[i]`` goes with the metric's ``samples[i]``: dividing a time by it takes out
    the machine's speed at that moment (:func:`perfgate.core.noise.normalised`).
    """

    kernel: str
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.kernel not in REFERENCE_KINDS:
            raise ValueError(f"reference kernel must be one of {', '.join(REFERENCE_KINDS)}, got {self.kernel!r}")
        _positive_seconds(self.seconds, "reference seconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One measured quantity and its raw samples (one float per repetition).

    ``groups`` splits the samples, in order, into independent repetitions of the whole
    measurement (worker processes, or the runs a baseline was pooled from): ``(40, 40, 40)``
    means three processes of 40 samples each. Samples inside one group share the process's
    memory layout and the machine's phase; the spread *between* groups is the run-to-run
    noise the decision must not mistake for a change. ``None`` means one group.

    ``sizes`` is set on a metric in its bounded form (:mod:`perfgate.core.reduced`): how many
    samples each group measured. A group that measured more than it keeps holds its evenly
    spaced order statistics, sorted, instead of every sample; ``None`` means every group
    keeps every sample. :attr:`n` is the number of samples measured.
    """

    name: str
    unit: str
    direction: Direction
    samples: tuple[float, ...]
    groups: tuple[int, ...] | None = None
    reference: Reference | None = None
    sizes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("metric name must not be empty")
        if not isinstance(self.direction, Direction):
            raise ValueError(f"metric {self.name!r}: direction must be a Direction, got {self.direction!r}")
        if len(self.samples) == 0:
            raise ValueError(f"metric {self.name!r}: samples must not be empty")
        for i, value in enumerate(self.samples):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"metric {self.name!r}: samples[{i}] is not a number: {value!r}")
            if abs(value) > MAX_SAMPLE and (isinstance(value, int) or math.isfinite(value)):  # squares overflow
                raise ValueError(f"metric {self.name!r}: samples[{i}] is beyond 1e150; samples must be at most that")
            if not math.isfinite(value):
                raise ValueError(f"metric {self.name!r}: samples[{i}] is {value!r}; samples must be finite")
            if value < 0:
                raise ValueError(f"metric {self.name!r}: samples[{i}] is negative ({value!r})")
        if self.groups is not None:
            if any(isinstance(g, bool) or not isinstance(g, int) or g < 1 for g in self.groups):
                raise ValueError(f"metric {self.name!r}: groups must be positive sample counts, got {self.groups!r}")
            if sum(self.groups) != len(self.samples):
                raise ValueError(
                    f"metric {self.name!r}: groups add up to {sum(self.groups)} samples, the metric has "
                    f"{len(self.samples)}"
                )
        if self.reference is not None and len(self.reference.seconds) != len(self.samples):
            raise ValueError(
                f"metric {self.name!r}: {len(self.reference.seconds)} reference timings for {len(self.samples)} samples"
            )
        if self.sizes is not None:
            self._check_sizes()

    def _check_sizes(self) -> None:
        assert self.sizes is not None
        kept = self.groups if self.groups is not None else (len(self.samples),)
        if len(self.sizes) != len(kept) or any(isinstance(s, bool) or not isinstance(s, int) for s in self.sizes):
            raise ValueError(f"metric {self.name!r}: sizes must give one sample count per group, got {self.sizes!r}")
        start = 0
        for i, (size, stored) in enumerate(zip(self.sizes, kept, strict=True)):
            values = self.samples[start : start + stored]
            start += stored
            if size < stored:
                raise ValueError(f"metric {self.name!r}: group {i} keeps {stored} values of {size} samples")
            if size > stored and (stored < 2 or any(b < a for a, b in itertools.pairwise(values))):
                raise ValueError(
                    f"metric {self.name!r}: group {i} stands for {size} samples, so its {stored} values must be "
                    "its order statistics (at least 2, sorted)"
                )
        if self.reference is not None and any(s > k for s, k in zip(self.sizes, kept, strict=True)):
            raise ValueError(f"metric {self.name!r}: a metric with reference timings keeps every sample")
        if all(s == k for s, k in zip(self.sizes, kept, strict=True)):
            object.__setattr__(self, "sizes", None)  # every sample kept: the plain form

    @property
    def n(self) -> int:
        """How many samples were measured (more than are kept in the bounded form)."""
        return sum(self.sizes) if self.sizes is not None else len(self.samples)

    def group_samples(self) -> list[tuple[float, ...]]:
        """The samples split by group (one group when ``groups`` is None)."""
        if self.groups is None:
            return [self.samples]
        out, start = [], 0
        for size in self.groups:
            out.append(self.samples[start : start + size])
            start += size
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class GitInfo:
    """Where the measured code came from."""

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """The machine fingerprint and what it was made of (CPU, cores, memory, OS, ...)."""

    fingerprint: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", _frozen(self.details))

    @classmethod
    def of(cls, collected: Mapping[str, Any]) -> Machine:
        """The machine from what :func:`perfgate.bench.machine.collect_machine` returns: the
        fingerprint, and every other key as a detail."""
        details = {key: value for key, value in collected.items() if key != "fingerprint"}
        return cls(fingerprint=collected.get("fingerprint"), details=details)


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One benchmark run of one model: metrics with raw samples plus provenance.

    ``created_at`` is a UTC ISO-8601 string ("2026-11-29T18:00:00Z") or ``None`` when the
    source did not say; ``single_sample_format`` marks runs read from the original specification's flat files.
    ``machine_index`` is the median time in seconds of each reference kernel over the run:
    how fast the machine was while it ran (empty when the run was not measured with them).
    ``software`` maps a component (python, torch, numpy, os, gpu_driver) to the version the run
    was measured with; it is not part of the machine fingerprint, so a check compares across
    an upgrade and reports it (:func:`perfgate.core.machine.software_changes`). ``measure`` says
    what the metrics are: ``times``, or ``counts`` (``perfgate bench --measure counts``).
    """

    model: str
    metrics: Mapping[str, Metric]
    schema_version: int = SCHEMA_VERSION
    run_id: str | None = None
    suite: str = field(default_factory=default_suite)
    created_at: str | None = None
    git: GitInfo = field(default_factory=GitInfo)
    machine: Machine = field(default_factory=Machine)
    config: Mapping[str, Any] = field(default_factory=dict)
    single_sample_format: bool = False
    machine_index: Mapping[str, float] = field(default_factory=dict)
    software: Mapping[str, str] = field(default_factory=dict)
    measure: str = "times"

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("run model must not be empty")
        if self.measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}, got {self.measure!r}")
        if not self.metrics:
            raise ValueError(f"run of model {self.model!r} has no metrics")
        for key, metric in self.metrics.items():
            if key != metric.name:
                raise ValueError(f"metrics key {key!r} does not match metric name {metric.name!r}")
        for kind, seconds in self.machine_index.items():
            if kind not in REFERENCE_KINDS:
                raise ValueError(f"machine_index: unknown kernel {kind!r} (one of {', '.join(REFERENCE_KINDS)})")
            _positive_seconds((seconds,), f"machine_index.{kind}")
        for name, version in self.software.items():
            if not isinstance(name, str) or not name or not isinstance(version, str):
                raise ValueError(f"software: {name!r} must map to a version string, got {version!r}")
        object.__setattr__(self, "metrics", _frozen(self.metrics))
        object.__setattr__(self, "config", _frozen(self.config))
        object.__setattr__(self, "machine_index", _frozen(self.machine_index))
        object.__setattr__(self, "software", _frozen(self.software))

    @property
    def model_key(self) -> str:
        return normalize_model(self.model)

"""Metric names of imported benchmarks, and following a benchmark from run to run.

An importer (:mod:`perfgate.importers`) names each metric after the benchmark it measures:
the tool's benchmark name as a stem (:func:`sanitize`: ``[a-z0-9_]``), then the quantity and
unit (``test_sort[100]`` → ``test_sort_100_time_us``). When benchmarks of one file sanitise
alike, a benchmark whose name already is a stem (``test_sort_100``) keeps its plain name and
every other one takes :func:`hashed_stem`, the stem and a hash of its own full name
(``test_sort_100_31bf4d_time_us``). A name therefore depends on the benchmark alone, except
that a benchmark whose name is not a stem moves to its hashed name while its file holds
another that sanitises alike, and back when that one goes.

So that a comparison follows the benchmark and not the name, an imported run records the
benchmark of each of its metrics in ``config["benchmark_names"]`` (metric name → the tool's
benchmark name). :func:`align` renames the current run's metrics after the baseline's when
both runs carry that record: the metric of a benchmark and quantity is compared under the
baseline's name for it, and a name that means different benchmarks on the two sides is
never compared as one (the current run's metric moves to its hashed name and is new; the
baseline's, if nothing else took its name, is missing). :func:`perfgate.core.compare.compare_runs`
aligns every comparison; a store aligns a run with its newest run of the same suite and model
when it is recorded (:func:`perfgate.store.baseline.align_with_history`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from perfgate.core.schema import Run
from perfgate.errors import MismatchError

__all__ = [
    "BENCHMARK_NAMES",
    "MAX_BASE",
    "Alignment",
    "align",
    "benchmark_names",
    "hashed_stem",
    "pooled_benchmark_names",
    "sanitize",
]

MAX_BASE = 80
BENCHMARK_NAMES = "benchmark_names"  # the key of Run.config that records each metric's benchmark

_NOT_NAME = re.compile(r"[^a-z0-9]+")
_NOTES_SHOWN = 10


def sanitize(name: str) -> str:
    """``name`` as a metric-name stem: ``[a-z0-9_]``, no leading digit, at most :data:`MAX_BASE` long.

    A longer name is cut and given a hash of the full name, so that two long names stay distinct.
    """
    ascii_name = unicodedata.normalize("NFKD", name.casefold()).encode("ascii", "ignore").decode("ascii")
    stem = _NOT_NAME.sub("_", ascii_name).strip("_") or "benchmark"
    if stem[0].isdigit():
        stem = f"b_{stem}"
    if len(stem) > MAX_BASE:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        stem = f"{stem[: MAX_BASE - 9].rstrip('_')}_{digest}"
    return stem


def hashed_stem(name: str) -> str:
    """The stem of a benchmark whose name collides: :func:`sanitize` and a hash of the full ``name``."""
    return f"{sanitize(name)}_{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def benchmark_names(run: Run) -> Mapping[str, str] | None:
    """The benchmark each metric of ``run`` measures (metric name → the tool's name), or None
    when the run does not record it (a run of perfgate's own, an import of an older perfgate)."""
    record = run.config.get(BENCHMARK_NAMES)
    if not isinstance(record, Mapping):
        return None
    return {k: v for k, v in record.items() if isinstance(k, str) and isinstance(v, str) and k in run.metrics}


def pooled_benchmark_names(runs: Sequence[Run]) -> dict[str, str] | None:
    """The record of a baseline pooled from ``runs`` (newest first): the newest run's word for
    each name; None unless every run carries the record."""
    records = [benchmark_names(r) for r in runs]
    if not records or any(r is None for r in records):
        return None
    merged: dict[str, str] = {}
    for record in records:
        for name, benchmark in (record or {}).items():
            merged.setdefault(name, benchmark)
    return merged


@dataclass(frozen=True, slots=True, kw_only=True)
class Alignment:
    """The current run with its metrics named as in the baseline, and what that changed.

    ``renamed`` maps a metric's name in the current run to the name it is compared under;
    ``reasons`` says, for a metric that is new or missing because its name means another
    benchmark on the other side, why; ``notes`` are one line each for the user.
    """

    run: Run
    renamed: Mapping[str, str] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _quantity(name: str, benchmark: str) -> str | None:
    """What follows the stem in ``name`` (``time_us``), or None when ``name`` is not named after ``benchmark``."""
    for stem in (hashed_stem(benchmark), sanitize(benchmark)):
        if name.startswith(stem + "_"):
            return name[len(stem) + 1 :]
    return None


def _identity(name: str, record: Mapping[str, str]) -> tuple[str | None, str]:
    """What a metric measures: (benchmark, quantity); the name itself when the record does not say."""
    benchmark = record.get(name)
    quantity = None if benchmark is None else _quantity(name, benchmark)
    if benchmark is None or quantity is None:
        return (None, f"{benchmark or ''}\0{name}")
    return (benchmark, quantity)


def _shown(notes: list[str]) -> tuple[str, ...]:
    if len(notes) <= _NOTES_SHOWN:
        return tuple(notes)
    return (*notes[: _NOTES_SHOWN - 1], f"and {len(notes) - _NOTES_SHOWN + 1} more metric(s) renamed or moved alike")


def align(baseline: Run, current: Run, *, reference: str = "the baseline") -> Alignment:
    """``current`` with its metrics named as in ``baseline``, where both record their benchmarks.

    A metric of the same benchmark and quantity takes the baseline's name; a current metric
    whose name is, in the baseline, another benchmark's moves to its hashed name (and is
    new). Without the record on both sides, ``current`` is returned as it is. ``reference``
    names the baseline in the notes and reasons.

    Raises:
        MismatchError: a moved metric's hashed name is taken as well (possible only with a
            record edited by hand).
    """
    base_record, cur_record = benchmark_names(baseline), benchmark_names(current)
    if base_record is None or cur_record is None:
        return Alignment(run=current)
    # a name that means the same benchmark on both sides stays; only the others are looked at
    target = {n: n for n in current.metrics if n in baseline.metrics and cur_record.get(n) == base_record.get(n)}
    if len(target) == len(current.metrics):
        return Alignment(run=current)
    claimed = set(target)
    in_baseline: dict[tuple[str | None, str], str] = {}
    for name in baseline.metrics:
        if name not in claimed:
            in_baseline.setdefault(_identity(name, base_record), name)
    renames: list[str] = []
    for name in current.metrics:
        if name in target:
            continue
        found = in_baseline.get(_identity(name, cur_record))
        if found is not None and found not in claimed:
            target[name] = found
            claimed.add(found)
            if found != name:
                renames.append(f"{name} is named {found} as in {reference}: both are benchmark {cur_record[name]!r}")
    reasons: dict[str, str] = {}
    moves: list[str] = []
    taken = set(claimed)
    for name in current.metrics:
        if name in target:
            continue
        if name not in baseline.metrics:
            target[name] = name
            taken.add(name)
            continue
        ours, theirs = cur_record.get(name, "unknown"), base_record.get(name, "unknown")
        quantity = _quantity(name, ours) if name in cur_record else None
        moved = f"{hashed_stem(ours)}_{quantity}" if quantity is not None else None
        if moved is None or moved in taken or moved in baseline.metrics or (moved in current.metrics and moved != name):
            raise MismatchError(
                f"metric {name!r} is benchmark {theirs!r} in {reference} and {ours!r} now, and cannot be given "
                "a name of its own; re-record the baseline"
            )
        target[name] = moved
        taken.add(moved)
        reasons[moved] = f"no baseline for benchmark {ours!r}: {name} in {reference} is benchmark {theirs!r}"
        moves.append(
            f"{name} is benchmark {theirs!r} in {reference} and {ours!r} in this run, never one metric: "
            f"this run's is named {moved}"
        )
    for name in current.metrics:  # the baseline's metric of this name measured a benchmark this run lacks
        if name in baseline.metrics and name not in claimed:
            ours, theirs = cur_record.get(name, "unknown"), base_record.get(name, "unknown")
            reasons[name] = f"benchmark {theirs!r} is not in this run: {name} here is benchmark {ours!r}"
    renamed = {old: new for old, new in target.items() if old != new}
    if not renamed:
        return Alignment(run=current)
    metrics = {
        target[name]: metric if target[name] == name else dataclasses.replace(metric, name=target[name])
        for name, metric in current.metrics.items()
    }
    record = {target[name]: benchmark for name, benchmark in cur_record.items()}
    run = dataclasses.replace(current, metrics=metrics, config={**current.config, BENCHMARK_NAMES: record})
    return Alignment(run=run, renamed=renamed, reasons=reasons, notes=_shown(moves + renames))

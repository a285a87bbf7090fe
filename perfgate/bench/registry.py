"""The stage registry: the pieces of a pipeline that ``perfgate bench`` measures.

A stage is a function that takes a :class:`StageContext`, does its set-up (not timed)
and returns a zero-argument callable; the runner times each call of that callable::

    from perfgate.bench import stage

    @stage("my_load", metric="dbn_load_time_ms", unit="ms")
    def my_load(ctx):
        path = ctx.data_path           # set-up: not timed
        def once():
            ctx.state["bars"] = load(path)
        return once                    # timed: one sample per call

Stages run in registration order; a stage may leave values in ``ctx.state`` for the
stages after it. ``items_per_call`` turns each timing into a throughput sample as well;
``memory_metric`` adds the stage's own peak memory per round; ``samples`` asks for at least
that many timed calls in all (a latency tail needs thousands). ``kind`` says what the
stage's time is bound by (``compute``, ``interpreter`` or ``memory``): the runner then times
the reference kernel of that kind with its calls (:mod:`perfgate.bench.reference`), and a
check compares the stage's time in units of that reference, which takes out most of a
shared machine's slow phases. A stage without a kind is compared on raw times.

A set-up whose product is expensive to make and deterministic (a rollout collected with the
model's initial weights, a table built from the data) may keep it with
:meth:`StageContext.prepare` and declare ``prepares=True``: ``--measure counts`` then runs the
suite's set-ups once natively per revision, where the product is made and saved, and every
counted process (under valgrind, where torch runs hundreds of times slower) loads it instead of making it
again. Measured by times, nothing changes: the product is made where it always was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfgate.bench.memory import unmeasured  # for set-ups: work that is not the pipeline's memory
from perfgate.core.metrics import default_suite
from perfgate.core.schema import REFERENCE_KINDS
from perfgate.core.units import TIME_UNITS as _TIME_UNITS
from perfgate.usercode import running

__all__ = [
    "Stage",
    "StageContext",
    "clear",
    "register",
    "stage",
    "stages_and_context",
    "stages_for",
    "unmeasured",
]


@dataclass(slots=True, kw_only=True)
class StageContext:
    """What a stage's set-up may read, and where stages share what they made."""

    model: str
    suite: str = field(default_factory=default_suite)
    data_path: Path | None = None
    seed: int = 0
    device: str = "cpu"
    params: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    # the folder of set-up products (--measure counts): None when measured by times
    prepared: Path | None = None
    preparing: bool = False  # this process makes the products (the native pass) rather than loading them

    def prepare(
        self,
        name: str,
        *,
        make: Callable[[], object],
        save: Callable[[Path], object],
        load: Callable[[Path], object],
    ) -> Literal["made", "saved", "loaded", "none"]:
        """Make a set-up's expensive, deterministic product once per revision, natively.

        ``make()`` makes it (in the set-up's own objects); ``save(path)`` writes it to
        ``path`` (a file or a folder of the stage's choosing); ``load(path)`` puts it where
        ``make()`` would have. The stage declares ``prepares=True`` so that ``--measure
        counts`` runs the native pass at all. What happens:

        * no folder (measured by times, or counted without a native pass): nothing; returns
          ``"none"``, and the stage makes the product wherever it always did;
        * the native pass (:attr:`preparing`): ``make()``, then ``save()``; returns ``"saved"``;
        * a counted process: ``load()`` when the native pass saved it (``"loaded"``), else
          ``make()`` (``"made"``). The folder is read-only: a counted process never writes it.

        The product must be what the counted process would have made: the same code, the
        same random seed, data and parameters (the folder is made for one revision and one
        run's options, never shared), and made from the set-ups alone, never from a call.
        """
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ValueError(f"a prepared product's name is a plain file name, got {name!r}")
        if self.prepared is None:
            return "none"
        path = self.prepared / name
        if self.preparing:
            make()
            save(path)
            return "saved"
        if path.exists():
            load(path)
            return "loaded"
        make()
        return "made"


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """One registered stage.

    Attributes:
        name: unique stage name within its suite.
        metric: the metric its per-call wall times go to.
        unit: time unit of that metric: ``s``, ``ms``, ``us`` or ``ns``.
        setup: ``setup(ctx) -> callable``; the callable is what gets timed.
        suite: the suite it belongs to.
        models: the models it applies to; ``None`` for every model.
        warmup: calls before timing; ``None`` lets the runner choose.
        repeat: timed calls; ``None`` lets the runner choose.
        items_per_call: samples processed per call; with ``throughput_metric`` each
            timing also yields ``items_per_call / seconds``.
        throughput_metric: name of that throughput metric.
        synchronize: wait for asynchronous devices (CUDA) around each timed call.
        memory_metric: name of a metric for the stage's own peak resident memory, one
            sample per round: what its set-up kept plus its peak above the state before
            its calls (see :mod:`perfgate.bench.runner`).
        samples: at least this many timed calls over all rounds when ``repeat`` is
            chosen automatically.
        kind: what the stage's time is bound by, ``compute``, ``interpreter`` or
            ``memory``; the reference kernel of that kind is timed with its calls.
            ``None``: no reference, raw times only.
        uncounted: why ``--measure counts`` leaves the stage out unless asked
            (``--count-all-stages``): what its time is made of that counts cannot see.
            ``None``: counted.
        counts_informational: why ``--measure counts`` reports the stage's counts but never
            gates on them: measured, they do not track its wall time (a copy or a vectorised
            kernel bound by memory bandwidth counts 2.5-3x its time's change). ``None``: its
            counts gate as any metric.
        prepares: its set-up keeps a product with :meth:`StageContext.prepare`, so
            ``--measure counts`` runs the set-ups once natively first (module docstring).
        counted_warmup: warm-up calls under ``--measure counts`` before its one uncounted
            call, for a stage whose calls take a minute there; ``None``: ``warmup``, else 2.
            0 makes that uncounted call its first: only right when the counts of its second
            call are already those of every later one (measured, as for Mamba-2's training step).
        counted_calls: at most this many counted calls per process under ``--measure counts``,
            whatever ``--repeat`` asks (which may ask fewer): for a slow stage whose calls
            count the same work to a small fraction of the residue between processes.
            ``None``: ``--repeat``.
    """

    name: str
    metric: str
    unit: str
    setup: Callable[[StageContext], Callable[[], object]]
    suite: str = field(default_factory=default_suite)
    models: tuple[str, ...] | None = None
    warmup: int | None = None
    repeat: int | None = None
    items_per_call: int | None = None
    throughput_metric: str | None = None
    synchronize: bool = True
    memory_metric: str | None = None
    samples: int | None = None
    kind: str | None = None
    uncounted: str | None = None
    counts_informational: str | None = None
    prepares: bool = False
    counted_warmup: int | None = None
    counted_calls: int | None = None

    def __post_init__(self) -> None:
        if self.unit not in _TIME_UNITS:
            raise ValueError(f"stage {self.name!r}: unit must be one of {sorted(_TIME_UNITS)}, got {self.unit!r}")
        if (self.items_per_call is None) != (self.throughput_metric is None):
            raise ValueError(f"stage {self.name!r}: items_per_call and throughput_metric go together")
        if self.warmup is not None and self.warmup < 0:
            raise ValueError(f"stage {self.name!r}: warmup must be >= 0, got {self.warmup}")
        if self.repeat is not None and self.repeat < 1:
            raise ValueError(f"stage {self.name!r}: repeat must be >= 1, got {self.repeat}")
        if self.counted_warmup is not None and self.counted_warmup < 0:
            raise ValueError(f"stage {self.name!r}: counted_warmup must be >= 0, got {self.counted_warmup}")
        if self.counted_calls is not None and self.counted_calls < 1:
            raise ValueError(f"stage {self.name!r}: counted_calls must be >= 1, got {self.counted_calls}")
        if self.samples is not None and self.samples < 1:
            raise ValueError(f"stage {self.name!r}: samples must be >= 1, got {self.samples}")
        if self.kind is not None and self.kind not in REFERENCE_KINDS:
            raise ValueError(
                f"stage {self.name!r}: kind must be one of {', '.join(REFERENCE_KINDS)} (or None), got {self.kind!r}"
            )

    def running(self, during: str) -> AbstractContextManager[None]:
        """Run the stage's own code ``during`` (``"its set-up"``, ``"a timed call"``): an exit, an
        error or an interrupt of its own is one :class:`~perfgate.errors.InputError` (exit 2) naming
        the stage and its module, never the command's end (:func:`perfgate.usercode.running`)."""
        module = getattr(self.setup, "__module__", None)
        of = f" (module {module})" if isinstance(module, str) else ""
        return running(f"stage {self.name!r} of suite {self.suite!r}{of}", during=during, advice="fix the stage")

    @property
    def scale(self) -> float:
        """Factor from seconds to this stage's unit."""
        return _TIME_UNITS[self.unit]

    def applies_to(self, model: str) -> bool:
        """Whether the stage measures ``model``; names compare as model keys ("My-Net" is "mynet")."""
        from perfgate.core.schema import normalize_model

        return self.models is None or normalize_model(model) in {normalize_model(m) for m in self.models}


_REGISTRY: dict[tuple[str, str], Stage] = {}


def register(entry: Stage) -> Stage:
    """Add a stage; a stage of the same suite and name is replaced."""
    _REGISTRY[(entry.suite, entry.name)] = entry
    return entry


def stage(
    name: str,
    *,
    metric: str,
    unit: str = "ms",
    suite: str | None = None,
    models: Iterable[str] | None = None,
    warmup: int | None = None,
    repeat: int | None = None,
    items_per_call: int | None = None,
    throughput_metric: str | None = None,
    synchronize: bool = True,
    memory_metric: str | None = None,
    samples: int | None = None,
    kind: str | None = None,
    uncounted: str | None = None,
    counts_informational: str | None = None,
    prepares: bool = False,
    counted_warmup: int | None = None,
    counted_calls: int | None = None,
) -> Callable[[Callable[[StageContext], Callable[[], object]]], Callable[[StageContext], Callable[[], object]]]:
    """Decorator form of :func:`register`; returns the set-up function unchanged."""

    def decorate(
        setup: Callable[[StageContext], Callable[[], object]],
    ) -> Callable[[StageContext], Callable[[], object]]:
        register(
            Stage(
                name=name,
                metric=metric,
                unit=unit,
                setup=setup,
                suite=suite if suite is not None else default_suite(),
                models=tuple(models) if models is not None else None,
                warmup=warmup,
                repeat=repeat,
                items_per_call=items_per_call,
                throughput_metric=throughput_metric,
                synchronize=synchronize,
                memory_metric=memory_metric,
                samples=samples,
                kind=kind,
                uncounted=uncounted,
                counts_informational=counts_informational,
                prepares=prepares,
                counted_warmup=counted_warmup,
                counted_calls=counted_calls,
            )
        )
        return setup

    return decorate


def stages_for(suite: str, model: str) -> list[Stage]:
    """The stages of ``suite`` that apply to ``model``, in registration order."""
    return [s for (su, _), s in _REGISTRY.items() if su == suite and s.applies_to(model)]


def stages_and_context(
    *,
    suite: str,
    model: str,
    data_path: Path | None,
    seed: int,
    device: str,
    params: dict[str, Any],
) -> tuple[list[Stage], StageContext]:
    """The stages of ``suite`` for ``model`` and the context they are set up in, however they are
    measured (timed, or counted under valgrind).

    Raises:
        InputError: no stage of ``suite`` applies to ``model``.
    """
    from perfgate.errors import InputError

    stages = stages_for(suite, model)
    if not stages:
        raise InputError(f"no stages registered for model {model!r} in suite {suite!r}", field="--model")
    ctx = StageContext(model=model, suite=suite, data_path=data_path, seed=seed, device=device, params=dict(params))
    return stages, ctx


def registered(suite: str | None = None) -> list[Stage]:
    """Every registered stage (of one suite), in registration order."""
    return [s for (su, _), s in _REGISTRY.items() if suite is None or su == suite]


def clear(suite: str | None = None) -> None:
    """Forget registered stages (of one suite, or all); for tests."""
    for key in [k for k in _REGISTRY if suite is None or k[0] == suite]:
        del _REGISTRY[key]

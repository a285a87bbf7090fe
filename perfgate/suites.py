"""The installed suites: found through the ``perfgate.suites`` entry point group, declared to the core.

A package that ships a suite names its declaration in its metadata::

    [project.entry-points."perfgate.suites"]
    mysuite = "mypackage.perfsuite:SUITE"

where ``SUITE`` is a :class:`perfgate.core.metrics.SuiteDeclaration`. perfgate reads these
on the first lookup of a metric or suite (``perfgate/__init__.py`` installs
:func:`declare_installed` as the core's loader), without importing any suite's stages: a
declaration module must stay light (no torch). The reference pipeline (the ``pipeline``
extra) is declared this way, as any other suite would be.

A declaration that cannot be used is left out, so perfgate and every other suite keep
working without it: a package that fails to import (raises, exits, interrupts itself:
:mod:`perfgate.usercode`), an entry point that names no :class:`SuiteDeclaration` or one of
another name, a field of the wrong kind, two packages that declare the same suite or a metric
differently, two default suites. Only a command that needs what it names — the suite (``bench
--suite``, a ``check`` of its runs), a metric two packages declare differently, the default
suite (a run or ``bench`` that names none) — exits 2 with the reason, naming the entry point,
its distribution and the field (:func:`perfgate.core.metrics.refuse`); a ``check`` of another
suite's runs, ``history`` and the rest go on as if the package were not there. Its stages module
is checked when it is imported (:func:`import_stages`).

A suite's stages module may also define these hooks, each optional:

* ``resolve_device(device) -> str``: the device the stages run on (``auto`` resolved);
* ``run_config(model, *, quick, threads) -> dict``: what the run file records beyond the
  runner's own (sizes, threads);
* ``save_checkpoint(ctx, handle)``: writes what the stages made (a trained model) beside
  the run file, ``<stem>.model.pt``;
* ``default_data_path(seed) -> Path``: the data file the stages read when no ``--data`` is
  given, made before the counted processes start (``--measure counts``);
* ``write_shared_data(folder, seed) -> Path``: writes that data into ``folder`` once for both
  sides of a ``perfgate ab`` check, and returns its path.

A hook that exits, raises or interrupts itself ends the command with exit 2 and one line naming
it and its module (:func:`hook`), as a stage's set-up or call does (``Stage.running``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from perfgate.core.metrics import (
    DashboardPanel,
    MetricInfo,
    RunnerMetrics,
    SuiteDeclaration,
    declare_suite,
    declared_suite,
    refuse,
)
from perfgate.errors import ConfigError
from perfgate.usercode import loading, running

__all__ = ["GROUP", "declare_installed", "find", "hook", "import_stages", "suite_requirements"]

GROUP = "perfgate.suites"


_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_FIX = "fix the package's declaration or uninstall it"
_origins: dict[str, str] = {}  # suite name -> the entry point that declared it, for messages


def _origin(entry: importlib.metadata.EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    package = f" of distribution {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {GROUP} '{entry.name} = {entry.value}'{package}"


def _problem(suite: object, name: str) -> str | None:
    """What is wrong with the declaration an entry point ``name`` loaded (field and value), or ``None``."""
    if not isinstance(suite, SuiteDeclaration):
        return f"names a {type(suite).__name__}, not a perfgate.core.metrics.SuiteDeclaration"
    if suite.name != name:
        return f"field 'name': {suite.name!r} is not the entry point's name {name!r}; make them the same"
    if not isinstance(suite.stages_module, str) or not _MODULE_NAME.fullmatch(suite.stages_module):
        return f"field 'stages_module': expected a module name such as 'mypackage.stages', got {suite.stages_module!r}"
    if isinstance(suite.models, str) or not isinstance(suite.models, Sequence):
        return f"field 'models': expected a sequence of model names, got {suite.models!r}"
    if not all(isinstance(m, str) for m in suite.models):
        return f"field 'models': every model name must be a string, got {list(suite.models)!r}"
    if not isinstance(suite.metrics, Mapping):
        return f"field 'metrics': expected a mapping of metric name to MetricInfo, got {type(suite.metrics).__name__}"
    for metric, info in suite.metrics.items():
        if not isinstance(metric, str) or not isinstance(info, MetricInfo):
            return f'field "metrics[{metric!r}]": expected a MetricInfo under a string name, got {info!r}'
    if not isinstance(suite.panels, tuple) or not all(isinstance(p, DashboardPanel) for p in suite.panels):
        return "field 'panels': expected a tuple of DashboardPanel"
    if not isinstance(suite.default, bool):
        return f"field 'default': expected True or False, got {suite.default!r}"
    for field in ("rounds", "min_repeat"):
        value = getattr(suite, field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"field {field!r}: expected a whole number ≥ 1 or None, got {value!r}"
    if not isinstance(suite.requires, tuple | list) or not all(isinstance(r, str) for r in suite.requires):
        return f"field 'requires': expected a tuple of module names, got {suite.requires!r}"
    if not isinstance(suite.install, str):
        return f"field 'install': expected a string, got {suite.install!r}"
    if not isinstance(suite.runner_metrics, RunnerMetrics):
        return f"field 'runner_metrics': expected a perfgate.core.metrics.RunnerMetrics, got {suite.runner_metrics!r}"
    for figure in ("peak_memory", "round_memory", "gpu_memory", "gpu_utilization"):
        value = getattr(suite.runner_metrics, figure)
        if value is not None and (not isinstance(value, str) or not value):
            return f"field 'runner_metrics.{figure}': expected a metric name or None, got {value!r}"
    if not isinstance(suite.dashboard_title, str):
        return f"field 'dashboard_title': expected a string, got {suite.dashboard_title!r}"
    return None


def _declarations() -> tuple[list[tuple[str, SuiteDeclaration]], list[tuple[str, object, str]]]:
    """Load every entry point of :data:`GROUP`: the usable declarations ``(origin, suite)`` and
    the others ``(origin, what it loaded or None, why)``, each refused by name here."""
    usable: list[tuple[str, SuiteDeclaration]] = []
    broken: list[tuple[str, object, str]] = []
    for entry in importlib.metadata.entry_points(group=GROUP):
        origin = _origin(entry)
        try:
            with loading(origin, error=ConfigError, advice=_FIX):
                suite = entry.load()
        except ConfigError as exc:  # its package cannot be imported: perfgate works without it
            refuse(f"suite {entry.name!r} cannot be used: {exc}", suite=entry.name)
            broken.append((origin, None, str(exc)))
            continue
        problem = _problem(suite, entry.name)
        if problem is None:
            usable.append((origin, suite))
            continue
        why = f"suite {entry.name!r} cannot be used: {origin}: {problem}; {_FIX}"
        refuse(why, suite=entry.name)
        if isinstance(suite, SuiteDeclaration) and isinstance(suite.name, str):
            refuse(why, suite=suite.name)
        broken.append((origin, suite, why))
    return usable, broken


def _claims(suite: object) -> tuple[dict[str, object], bool]:
    """The metrics and the default a declaration (perhaps a broken one) claims."""
    metrics = getattr(suite, "metrics", None)
    claimed = {m: i for m, i in metrics.items() if isinstance(m, str)} if isinstance(metrics, Mapping) else {}
    return claimed, getattr(suite, "default", False) is True


def declare_installed() -> None:
    """Declare every suite an installed package names in :data:`GROUP`; one that cannot be used is
    left out and refused (module docstring)."""
    usable, broken = _declarations()
    # two packages, one suite name: neither can be trusted
    by_name: dict[str, list[tuple[str, SuiteDeclaration]]] = {}
    for origin, suite in usable:
        by_name.setdefault(suite.name, []).append((origin, suite))
    good: list[tuple[str, SuiteDeclaration]] = []
    for name, same in by_name.items():
        if all(s == same[0][1] for _o, s in same):
            good.append(same[0])
            continue
        why = (
            f"suite {name!r} is declared differently by {same[0][0]} and by {same[1][0]} (field 'name'); "
            "uninstall one of the packages or rename its suite"
        )
        refuse(why, suite=name)
        broken.extend((origin, suite, why) for origin, suite in same)
    # metrics: every claim, a broken declaration's too, must agree and be a MetricInfo; what only a
    # broken suite declares stays undeclared (a check of that suite's runs is refused by its suite)
    claims: dict[str, list[tuple[str, object]]] = {}  # metric -> (origin, info)
    for origin, loaded in [*good, *((origin, loaded) for origin, loaded, _why in broken)]:
        for metric, info in _claims(loaded)[0].items():
            claims.setdefault(metric, []).append((origin, info))
    refused_metrics = set()
    for metric, said in claims.items():
        malformed = next((c for c in said if not isinstance(c[1], MetricInfo)), None)
        other = next((c for c in said if c[1] != said[0][1]), None)
        if malformed is not None:
            refuse(
                f'{malformed[0]}: field "metrics[{metric!r}]": expected a MetricInfo, got {malformed[1]!r}; {_FIX}',
                metrics=[metric],
            )
        elif other is not None:
            refuse(
                f"metric {metric!r} is declared differently by {said[0][0]} and by {other[0]} "
                f'(field "metrics[{metric!r}]"); uninstall one of the packages or make their declarations agree',
                metrics=[metric],
            )
        else:
            continue
        refused_metrics.add(metric)
    # the default: one claim, by a usable suite
    defaults: list[tuple[str, str | None]] = [(origin, None) for origin, suite in good if suite.default]
    defaults += [(origin, why) for origin, loaded, why in broken if _claims(loaded)[1]]
    if len(defaults) > 1:
        refuse(
            f"{defaults[0][0]} and {defaults[1][0]} both declare default=True (field 'default'); "
            "perfgate cannot tell which suite a run or bench that names none belongs to: uninstall one of the "
            "packages, or name the suite (--suite, the run file's 'suite')",
            default=True,
        )
    elif defaults and defaults[0][1] is not None:
        refuse(str(defaults[0][1]), default=True)
    no_default = len(defaults) > 1
    for origin, suite in good:
        if refused_metrics & set(suite.metrics) or (no_default and suite.default):
            suite = dataclasses.replace(
                suite,
                metrics={m: i for m, i in suite.metrics.items() if m not in refused_metrics},
                default=suite.default and not no_default,
            )
        try:
            declare_suite(suite)
        except ValueError as exc:  # it clashes with a suite this process declared itself
            refuse(f"{origin}: {exc}; {_FIX}", suite=suite.name)
            continue
        _origins[suite.name] = origin


def find(name: str) -> SuiteDeclaration | None:
    """The declared suite ``name``, or ``None`` (a suite that only ``--stages-module`` registers).

    Raises:
        ConfigError: an installed declaration of ``name`` cannot be used (module docstring).
    """
    return declared_suite(name)


@contextmanager
def suite_requirements(suite: SuiteDeclaration, what: str) -> Iterator[None]:
    """Turn a missing package the suite needs into a one-line error saying what to install."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in suite.requires:
            raise
        how = f": {suite.install}" if suite.install else ""
        raise ConfigError(f"{what} needs {top}, which suite {suite.name!r} requires{how}") from None


def import_stages(suite: SuiteDeclaration) -> ModuleType:
    """Import the suite's stages module (registering its stages); a missing requirement is one line,
    and so is a module that cannot be imported, raises or exits (:mod:`perfgate.usercode`)."""
    origin = _origins.get(suite.name)
    what = f"the stages module {suite.stages_module!r} of suite {suite.name!r}"
    advice = "fix the module, or reinstall its package" if origin else "fix the module"
    with loading(what, error=ConfigError, source=origin, field="stages_module" if origin else None, advice=advice):
        with suite_requirements(suite, f"suite {suite.name!r}"):
            return importlib.import_module(suite.stages_module)


def hook(suite: SuiteDeclaration | None, name: str) -> Any:
    """The suite's optional hook ``name`` (module docstring), or ``None``; imports its stages.

    The hook comes guarded: an exit, an error or an interrupt of its own is one
    :class:`~perfgate.errors.ConfigError` (exit 2) naming it (:func:`perfgate.usercode.running`).
    """
    if suite is None:
        return None
    found = getattr(import_stages(suite), name, None)
    if found is None:
        return None
    what = f"hook {name!r} of suite {suite.name!r} (module {suite.stages_module})"

    @functools.wraps(found)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with running(what, error=ConfigError, advice="fix the hook"):
            return found(*args, **kwargs)

    return guarded

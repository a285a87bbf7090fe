"""The installed suites: found through the ``perfgate.suites`` entry point group, declared to the core.

A package that ships a suite names its declaration in its metadata::

    [project.entry-points."perfgate.suites"]
    mysuite = "mypackage.perfsuite:SUITE"

where ``SUITE`` is a :class:`perfgate.core.metrics.SuiteDeclaration`. perfgate reads these
on the first lookup of a metric or suite (``perfgate/__init__.py`` installs
:func:`declare_installed` as the core's loader), without importing any suite's stages: a
declaration module must stay light (no torch). An entry point whose package is missing or
broken is left out, so perfgate and every other suite keep working without it. The
reference pipeline (the ``pipeline`` extra) is declared this way, as any other suite would be.

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
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from perfgate.core.metrics import SuiteDeclaration, declare_suite, declared_suites
from perfgate.errors import ConfigError

__all__ = ["GROUP", "declare_installed", "find", "hook", "import_stages", "suite_requirements"]

GROUP = "perfgate.suites"


def declare_installed() -> None:
    """Declare every suite an installed package names in :data:`GROUP`; a broken one is left out."""
    for entry in importlib.metadata.entry_points(group=GROUP):
        try:
            suite = entry.load()
        except Exception:  # its package was removed or cannot be imported: perfgate works without it
            continue
        if isinstance(suite, SuiteDeclaration) and suite.name == entry.name:
            declare_suite(suite)


def find(name: str) -> SuiteDeclaration | None:
    """The declared suite ``name``, or ``None`` (a suite that only ``--stages-module`` registers)."""
    return declared_suites().get(name)


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
    """Import the suite's stages module (registering its stages); a missing requirement is one line."""
    with suite_requirements(suite, f"suite {suite.name!r}"):
        return importlib.import_module(suite.stages_module)


def hook(suite: SuiteDeclaration | None, name: str) -> Any:
    """The suite's optional hook ``name`` (module docstring), or ``None``; imports its stages."""
    if suite is None:
        return None
    return getattr(import_stages(suite), name, None)

"""perfgate: a performance-regression gate for ML training pipelines.

The names below are the public Python API, the list in the README's "Python API" section::

    from perfgate import PerformanceTracker, compare_runs, load_run, render_markdown

Each is loaded from its module on first use (a module ``__getattr__``, PEP 562), so
``import perfgate`` imports neither torch, numpy nor rich: the command line and a training
script pay only for what they touch. These names are the API that stays; the modules are
in two kinds: a module whose name begins with an underscore (``perfgate.core.decision._prepare``)
is an implementation detail that may change in any version, and the others are what the
README and docs name — the data model, the reports, the stores, the importers, the
reference pipeline, the entry points one revision of ``perfgate ab`` starts in another —
stable enough to read, though only the root's names are promised. ``tests/test_public_api.py``
holds both lists to the README and the tree.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "Budget",
    "BudgetCheck",
    "CheckResult",
    "Comparison",
    "ConfigError",
    "Direction",
    "InputError",
    "Metric",
    "MismatchError",
    "OutputError",
    "PerfgateError",
    "PerformanceTracker",
    "PipelineMemory",
    "Policy",
    "Run",
    "SchemaVersionError",
    "StageContext",
    "StorageError",
    "Store",
    "Verdict",
    "__version__",
    "compare_runs",
    "load_run",
    "open_store",
    "render_markdown",
    "save_run",
    "stage",
]

# public name -> the module that defines it; read by __getattr__ on first use
_SOURCES: dict[str, str] = {
    # a training script's own measurements (the original specification's classes)
    "PerformanceTracker": "perfgate.api",
    "PipelineMemory": "perfgate.bench.memory",
    # stages of your own for `perfgate bench`
    "stage": "perfgate.bench.registry",
    "StageContext": "perfgate.bench.registry",
    # runs, their files and the policy of a check
    "Run": "perfgate.core.schema",
    "Metric": "perfgate.core.schema",
    "Direction": "perfgate.core.metrics",
    "load_run": "perfgate.runfile",
    "save_run": "perfgate.runfile",
    "Policy": "perfgate.core.policy",
    "Budget": "perfgate.core.policy",
    # comparing two runs and what it returns
    "compare_runs": "perfgate.core.compare",
    "CheckResult": "perfgate.core.result",
    "Comparison": "perfgate.core.result",
    "BudgetCheck": "perfgate.core.result",
    "Verdict": "perfgate.core.result",
    "render_markdown": "perfgate.report.markdown",
    # the result store
    "open_store": "perfgate.store",
    "Store": "perfgate.store.base",
    # errors and exit codes
    "PerfgateError": "perfgate.errors",
    "InputError": "perfgate.errors",
    "SchemaVersionError": "perfgate.errors",
    "ConfigError": "perfgate.errors",
    "MismatchError": "perfgate.errors",
    "OutputError": "perfgate.errors",
    "StorageError": "perfgate.errors",
    "EXIT_OK": "perfgate.errors",
    "EXIT_REGRESSION": "perfgate.errors",
    "EXIT_ERROR": "perfgate.errors",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads these
    from perfgate.api import PerformanceTracker
    from perfgate.bench.memory import PipelineMemory
    from perfgate.bench.registry import StageContext, stage
    from perfgate.core.compare import compare_runs
    from perfgate.core.metrics import Direction
    from perfgate.core.policy import Budget, Policy
    from perfgate.core.result import BudgetCheck, CheckResult, Comparison, Verdict
    from perfgate.core.schema import Metric, Run
    from perfgate.errors import (
        EXIT_ERROR,
        EXIT_OK,
        EXIT_REGRESSION,
        ConfigError,
        InputError,
        MismatchError,
        OutputError,
        PerfgateError,
        SchemaVersionError,
        StorageError,
    )
    from perfgate.report.markdown import render_markdown
    from perfgate.runfile import load_run, save_run
    from perfgate.store import open_store
    from perfgate.store.base import Store


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name stays an error there

    def __getattr__(name: str) -> Any:
        """Import the module that defines ``name`` and keep the value here for the next look-up."""
        source = _SOURCES.get(name)
        if source is None:
            raise AttributeError(f"module 'perfgate' has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _declare_installed_suites() -> None:
    from perfgate.suites import declare_installed

    declare_installed()


# the suites installed packages declare (perfgate.suites), read on the first lookup of a metric or suite
importlib.import_module("perfgate.core.metrics").install_loader(_declare_installed_suites)

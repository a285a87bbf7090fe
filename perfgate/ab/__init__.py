"""``perfgate ab``'s engine: two git revisions measured interleaved in one job, then decided paired.

What is where:

* :mod:`perfgate.ab.check` — one check of two checked-out revisions: the engine chosen (resident
  workers, or the fallback for a revision too old for them), the paired decision, and what the
  JSON report records about how it was measured (:func:`check_revisions`);
* :mod:`perfgate.ab.revisions` — both revisions in temporary git worktrees, and the environment
  each side's processes run in (:func:`checkout`, :func:`sides`);
* :mod:`perfgate.ab.resident` — the resident-worker engine (:func:`measure_resident`), in three
  private steps: :mod:`perfgate.ab._plan` (what to measure: the options, the stages and blocks,
  the looks), :mod:`perfgate.ab._schedule` (pair after pair: the workers' start, the blocks,
  the deadlines, the stopping rule) and :mod:`perfgate.ab._collect` (pairs to samples, runs and
  the paired decision of :mod:`perfgate.core.paired`);
* :mod:`perfgate.ab.counts` — ``--measure counts``: both revisions counted under callgrind, pair by
  pair (:func:`~perfgate.ab.counts.count_revisions`);
* the workers themselves are :mod:`perfgate.workers`'s: the resident worker and its protocol
  (:mod:`perfgate.workers.resident`, started as ``python -m perfgate.workers.resident`` in each
  revision's own tree; an older revision keeps it under an older name:
  :func:`perfgate.workers.spawn.worker_module`), their start, deadlines, pinning and end
  (:mod:`perfgate.workers.spawn`), and the memory layout each is started with
  (:mod:`perfgate.workers.layout`);
* :mod:`perfgate.ab.fallback` — the process-level engine: whole ``perfgate bench`` processes,
  alternating A B B A (:func:`measure_interleaved`);
* :mod:`perfgate.ab.jitcache` — numba's compiled code kept between checks, one folder per tree.

The names below are loaded from their modules on first use, so that ``import perfgate.ab``
stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "DEFAULT_EXPLAIN_BUDGET",
    "DEFAULT_PAIRS",
    "DEFAULT_TIME_BUDGET",
    "MAX_TIME_BUDGET",
    "MIN_PAIRS",
    "WORKTREE",
    "AbCheck",
    "AbOptions",
    "AbRuns",
    "ExplainOptions",
    "ProtocolMissing",
    "ResidentOptions",
    "ResidentOutcome",
    "Revision",
    "Side",
    "check_revisions",
    "checkout",
    "explain_metrics",
    "git_toplevel",
    "is_dirty",
    "measure_interleaved",
    "measure_resident",
    "sides",
]

# public name -> the module that defines it; read by __getattr__ on first use
_SOURCES: dict[str, str] = {
    **dict.fromkeys(("AbCheck", "check_revisions"), "perfgate.ab.check"),
    **dict.fromkeys(("DEFAULT_EXPLAIN_BUDGET", "ExplainOptions", "explain_metrics"), "perfgate.ab.explain"),
    **dict.fromkeys(("WORKTREE", "Revision", "checkout", "git_toplevel", "is_dirty", "sides"), "perfgate.ab.revisions"),
    **dict.fromkeys(
        (
            "DEFAULT_TIME_BUDGET",
            "MAX_TIME_BUDGET",
            "ProtocolMissing",
            "ResidentOptions",
            "ResidentOutcome",
            "Side",
            "measure_resident",
        ),
        "perfgate.ab.resident",
    ),
    **dict.fromkeys(
        ("DEFAULT_PAIRS", "MIN_PAIRS", "AbOptions", "AbRuns", "measure_interleaved"), "perfgate.ab.fallback"
    ),
}

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ loads these
    from perfgate.ab.check import AbCheck, check_revisions
    from perfgate.ab.explain import DEFAULT_EXPLAIN_BUDGET, ExplainOptions, explain_metrics
    from perfgate.ab.fallback import DEFAULT_PAIRS, MIN_PAIRS, AbOptions, AbRuns, measure_interleaved
    from perfgate.ab.resident import (
        DEFAULT_TIME_BUDGET,
        MAX_TIME_BUDGET,
        ProtocolMissing,
        ResidentOptions,
        ResidentOutcome,
        Side,
        measure_resident,
    )
    from perfgate.ab.revisions import WORKTREE, Revision, checkout, git_toplevel, is_dirty, sides


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""The decision of a check: each metric's estimate, its test, the family's correction and the verdict.

What the other packages and the checks of :mod:`perfgate.core.compare` and :mod:`perfgate.core.paired`
use of it is named here; its modules are private to it:

* ``_estimate``: a comparison's values, its log ratio and its one-sided test (:class:`Estimate`);
* ``_samplestats``: the statistics of the samples, one metric at a time or for a whole check at once;
* ``_significance``, ``_tail``, ``_moderated``: the standard error of a log ratio, Holm's correction,
  the t-tailed noise of a test, and the variance a paired metric borrows from its group;
* ``_counts``: the between-process residue that count metrics (callgrind's) are tested with;
* ``_shared_phase``: the run as its own control (each metric tested against the rest of its run);
* ``_common_shift``: what every timing metric of a run moved together, tested once;
* ``_family``: the family of tests that both the stored and the paired check correct over;
* ``_rule``: the rule that gives one estimate its verdict (:func:`decide`);
* ``_advice``: how much more measurement would decide an inconclusive one;
* ``_memory_floor``: the least change of a memory metric that may count;
* ``_reasons``: the reasons the verdicts are given with, worded in one place;
* ``_prepare``: every comparison of a stored check, estimated, tested and judged (:func:`judge`: the
  rule's verdict with its reason, its advice and the memory floor);
* ``_budgets``: absolute limits on one run.

The result types (:class:`~perfgate.core.result.Comparison`, :class:`~perfgate.core.result.CommonShift`,
:class:`~perfgate.core.result.SharedPhase`) are in :mod:`perfgate.core.result`, below this package.
"""

from __future__ import annotations

from perfgate.core.decision._budgets import check_budgets, counts_budget_note
from perfgate.core.decision._counts import (
    COUNT_UNITS,
    NOT_TIMES,
    PROCESS_DF_KEY,
    Residue,
    informational_line,
    is_count,
    is_counts_run,
    learned_residue,
    left_out_line,
    pooled_residues,
)
from perfgate.core.decision._estimate import Estimate, OneSidedTest, Sides, sides_of
from perfgate.core.decision._family import Family, family_members, holm_family
from perfgate.core.decision._moderated import Prior, fit_prior, guarded
from perfgate.core.decision._prepare import estimate_unpaired, judge, prepare, split_metrics, statistics_of, unmatched
from perfgate.core.decision._rule import Grounds, Ruling, decide, log_threshold
from perfgate.core.decision._samplestats import BatchStats, ReferenceStats, SampleStats

__all__ = [
    "COUNT_UNITS",
    "NOT_TIMES",
    "PROCESS_DF_KEY",
    "BatchStats",
    "Estimate",
    "Family",
    "Grounds",
    "OneSidedTest",
    "Prior",
    "ReferenceStats",
    "Residue",
    "Ruling",
    "SampleStats",
    "Sides",
    "check_budgets",
    "counts_budget_note",
    "decide",
    "estimate_unpaired",
    "family_members",
    "fit_prior",
    "guarded",
    "holm_family",
    "informational_line",
    "is_count",
    "is_counts_run",
    "judge",
    "learned_residue",
    "left_out_line",
    "log_threshold",
    "pooled_residues",
    "prepare",
    "sides_of",
    "split_metrics",
    "statistics_of",
    "unmatched",
]

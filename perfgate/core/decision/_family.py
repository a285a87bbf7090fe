"""The family of a check: which estimates are tested together, and what the family says of each.

Both decisions call :func:`holm_family`: the stored check (:mod:`perfgate.core.decision._prepare`)
and the paired gate of ``perfgate ab`` (:mod:`perfgate.core.paired`). It takes the check's
:class:`~perfgate.core.decision._estimate.Estimate`\\ s and returns new ones, so that nothing is
changed in place:

* **Holm's family** is every estimate with a test of its own (a p-value, no verdict fixed
  before the test), less the derived metrics that add no evidence (:func:`family_members`).
  Each member gets its Holm-adjusted p-value.
* **A derived metric counts once.** A metric derived from another (a throughput: the batch
  over each call of a stage, :mod:`perfgate.core._derived`) carries nothing its source's
  times do not. When its source has a test of its own for the same statistic (or its
  median), the derived metric is left out of the family and takes that test: the same
  p-value and adjusted p-value. When its source has none (no pairs of it, too few samples,
  an undefined ratio), the derived metric is the only evidence about those calls, so it is
  tested in its source's place and counts in the family. Leaving it out then would decide it
  on nothing; counting it beside a tested source would count one piece of evidence twice.
* **The correlated family.** In a stored comparison the machine's phase is shared by every
  timing metric of a run; with ``common=True`` the family's medians that carry a run-to-run
  term are first tested together for a common shift (:mod:`perfgate.core.decision._common_shift`),
  which spends a share of α, and the per-metric tests spend what is left
  (:attr:`Family.metric_alpha`). A paired check has no such term (its pairs cancel the phase)
  and passes ``common=False``.

Tested in ``tests/core/test_family.py``, ``tests/core/test_derived.py`` and
``tests/core/test_common_shift.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.core.decision._common_shift import common_shift
from perfgate.core.decision._estimate import Estimate
from perfgate.core.decision._significance import holm
from perfgate.core.result import CommonShift

__all__ = ["Family", "family_members", "holm_family"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """A check's estimates once the family has spoken, in the order they were given.

    ``estimates``: every estimate of the check, each derived one outside the family with its
    source's test. ``adjusted``: beside each estimate, Holm's adjusted p-value (a member's, or a
    derived one's source's), ``None`` for an estimate without a test. ``size``: the number of tests in
    Holm's family. ``shift``: the common shift, when that step ran and applied.
    ``metric_alpha``: the α the per-metric tests spend (α less the common step's share).
    """

    estimates: tuple[Estimate, ...]
    adjusted: tuple[float | None, ...]
    size: int
    shift: CommonShift | None
    metric_alpha: float


def family_members(estimates: Sequence[Estimate]) -> tuple[int, ...]:
    """The indices of the estimates in Holm's family: those with a test of their own, a derived
    one only when the metric it is derived from has no test of its own for that statistic (or
    its median). Known before the tests' values are: only which estimates have a test counts."""
    tested = [e for e in estimates if e.tested]
    own = {e.key for e in tested if not e.derived_from}
    return tuple(
        i
        for i, e in enumerate(estimates)
        if e.tested
        and (not e.derived_from or ((e.derived_from, e.statistic) not in own and (e.derived_from, "median") not in own))
    )


def holm_family(
    estimates: Sequence[Estimate],
    *,
    alpha: float,
    confidence: float,
    common: bool,
    shift_of: Sequence[Estimate] | None = None,
) -> Family:
    """The family of a check's ``estimates`` at family-wise level ``alpha`` (see the module).

    ``common``: test the common shift of the family's medians first (a stored comparison; a
    paired one passes False). ``shift_of``: the estimates of the metrics that moved with the
    run, whose whole change the common shift is tested on, when the run is its own control
    (:mod:`perfgate.core.decision._shared_phase`); else the family's own. ``confidence``: the level of
    the common shift's interval.
    """
    members = family_members(estimates)
    out = list(estimates)
    adjusted: list[float | None] = [None] * len(out)
    for i, p_adjusted in zip(
        members, holm([p for i in members if (p := estimates[i].p_value) is not None]), strict=True
    ):
        adjusted[i] = p_adjusted
    by_key = {out[i].key: i for i in members}
    in_family = set(members)
    for i, e in enumerate(out):
        if not e.derived_from or i in in_family or not e.tested:
            continue
        source = by_key.get((e.derived_from, e.statistic), by_key.get((e.derived_from, "median")))
        if source is None:
            continue
        out[i] = e.evolve(
            p_value=out[source].p_value, noise=f"derived from {e.derived_from}: tested with it, counted once"
        )
        adjusted[i] = adjusted[source]
    shifted = list(shift_of) if shift_of is not None else [out[i] for i in members]
    shift = common_shift(shifted, alpha=alpha, confidence=confidence) if common else None
    return Family(
        estimates=tuple(out),
        adjusted=tuple(adjusted),
        size=len(members),
        shift=shift,
        metric_alpha=alpha if shift is None else alpha - shift.alpha,
    )

"""The newest run of every (suite, model, machine) in a store, and the check it gets.

What the Prometheus exporter and the HTML report show for a store. The store keeps a run's
status (passed/flagged) but not the comparisons of its check, so the check is computed
again here, exactly as ``perfgate check --store`` computes it: the baseline ``perfgate
baseline update`` kept, else the pooled last K unflagged runs of the branch (never the run
itself). A key with no baseline yet gets a budgets-only check.

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.core.compare import CheckResult, budgets_only, compare_runs
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import MismatchError
from perfgate.store.base import RunQuery, Store
from perfgate.store.baseline import baseline_for

__all__ = ["RunState", "fresh_states", "latest_states", "state_key"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunState:
    """One run to show, with the check it got (if any) and its model's budgets.

    ``result`` is None when the run was not compared with anything (a fresh ``perfgate
    bench``), or when the comparison was impossible; ``note`` then says why.
    """

    run: Run
    result: CheckResult | None
    budgets: tuple[Budget, ...] = ()
    note: str = ""

    @property
    def machine(self) -> str:
        return self.run.machine.fingerprint or "unknown"


def state_key(state: RunState) -> tuple[str, str, str]:
    """Sort and group key: (model, machine, suite)."""
    return (state.run.model_key, state.machine, state.run.suite)


def latest_states(
    store: Store,
    policy: Policy,
    *,
    model: str | None = None,
    machine: str | None = None,
    suite: str | None = None,
    branch: str = "main",
    baseline_runs: int = 5,
) -> list[RunState]:
    """The newest run of each (suite, model, machine) matching the filters, checked; sorted by key.

    Args:
        model: one model (any spelling) or None for all.
        machine: one machine fingerprint or None for all.
        branch: the branch whose runs form the baselines.
        baseline_runs: runs pooled into a baseline when none was kept.
    """
    query = RunQuery(model=normalize_model(model) if model else None, machine=machine, suite=suite)
    states = []
    for run in store.latest(query):
        budgets = policy.budgets_for(run.model_key)
        try:
            baseline, source = baseline_for(store, run, branch=branch, k=baseline_runs)
        except MismatchError:  # no run to compare with yet: the budgets still hold
            states.append(RunState(run=run, result=budgets_only(run, policy), budgets=budgets))
            continue
        try:
            result = compare_runs(baseline, run, policy, baseline_source=source)
        except MismatchError as exc:  # e.g. a metric changed its unit: say so, export the values
            states.append(RunState(run=run, result=None, budgets=budgets, note=str(exc)))
            continue
        states.append(RunState(run=run, result=result, budgets=budgets))
    return sorted(states, key=state_key)


def fresh_states(runs: Sequence[Run], policy: Policy) -> list[RunState]:
    """Runs just measured, not compared with anything (``perfgate bench --push-metrics``)."""
    return sorted((RunState(run=r, result=None, budgets=policy.budgets_for(r.model_key)) for r in runs), key=state_key)

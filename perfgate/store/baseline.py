"""Baselines kept from the history: formed by ``baseline update``, used by ``check --store``.

The rule: the baseline of (suite, model, machine
fingerprint) is formed from the last K runs of the main branch that the gate did not flag
(or that a person accepted), with their samples pooled (:func:`perfgate.core.baseline.pool_runs`
says why). Never the best-ever run, never a single run when more exist. A check records its
verdict for the current run, so a run that regressed stays out of later baselines until
``perfgate baseline accept RUN_ID``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from perfgate.core.baseline import pool_runs
from perfgate.core.benchmark_names import Alignment, align, benchmark_names
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import MismatchError, StorageError
from perfgate.store.base import BaselineRecord, RunQuery, RunStatus, Store

__all__ = [
    "DEFAULT_BASELINE_RUNS",
    "accept_run",
    "align_with_history",
    "baseline_for",
    "baseline_runs",
    "branch_advice",
    "pooled_baseline",
    "record_verdict",
    "stored_baseline",
    "update_baselines",
]

DEFAULT_BASELINE_RUNS = 10


def _ids(runs: Sequence[Run]) -> str:
    return ", ".join(f"`{(r.run_id or '?')[:12]}`" for r in runs)


_SCAN = 500  # newest runs looked through to say why none matched


def branch_advice(runs: Sequence[Run], branch: str) -> str:
    """Where ``runs`` (none of them on ``branch``) are and how to reach them, as a clause:
    ``2 are on other branches (feature 2), which --baseline-branch NAME selects; 3 were recorded
    without a branch ...``. A run without a branch (a run file with no ``git.branch``, recorded
    where git could not say) is selected by no branch: ``--branch`` names it when recording."""
    named = Counter(r.git.branch for r in runs if r.git.branch)
    unnamed = len(runs) - sum(named.values())
    parts = []
    if named:
        shown = ", ".join(f"{b} {n}" for b, n in named.most_common(5)) + (" …" if len(named) > 5 else "")
        parts.append(f"{sum(named.values())} are on other branches ({shown}), which --baseline-branch NAME selects")
    if unnamed:
        parts.append(
            f"{unnamed} were recorded without a branch, which no --baseline-branch selects: record runs with "
            f"--branch {branch} (perfgate record, import or bench)"
        )
    return "; ".join(parts)


def _no_runs(store: Store, current: Run, branch: str | None) -> MismatchError:
    """Why no run could form the baseline: the machine, the branch, the gate's flags, or the
    current run being the only one; each names what to do."""
    machine = current.machine.fingerprint
    where = f" on branch {branch!r}" if branch else ""
    head = f"the store {store.url} has no run of model {current.model!r} on machine {machine or 'unknown'}{where}"
    query = RunQuery(model=current.model_key, suite=current.suite, limit=_SCAN)
    mine = [r for r in store.runs(dataclasses.replace(query, machine=machine)) if r.run_id != current.run_id]
    if not mine:
        others = store.latest(query)
        prints = sorted({r.machine.fingerprint or "unknown" for r in others} - {machine or "unknown"})
        if prints:
            return MismatchError(
                f"{head}; it has runs of this model from other machine(s) only: {', '.join(prints)} "
                "(timings do not carry across machines: record runs on this one)"
            )
        alone = " but the current run itself" if store.has_run(current.run_id or "") else " at all"
        return MismatchError(f"{head}; it has no runs of this model{alone} (record some with perfgate record)")
    on_branch = [r for r in mine if branch is None or r.git.branch == branch]
    if not on_branch:
        return MismatchError(f"{head}; of this machine's runs of this model, {branch_advice(mine, branch or '')}")
    return MismatchError(
        f"{head} that a check did not flag: its {len(on_branch)} run(s) there regressed; accept one as the new "
        "normal with perfgate baseline accept RUN_ID, or record runs of the fixed code"
    )


def pooled_baseline(store: Store, current: Run, *, branch: str | None = "main", k: int = 5) -> tuple[Run, str]:
    """The pooled last ``k`` unflagged runs for ``current`` and a sentence saying where they came from.

    Raises:
        MismatchError: the store has no run of this model on this machine (and branch);
            the message names the machine fingerprints it does have.
    """
    if k < 1:
        raise MismatchError(f"--baseline-runs must be at least 1, got {k}")
    query = RunQuery(
        model=current.model_key,
        machine=current.machine.fingerprint,
        branch=branch,
        suite=current.suite,
        limit=k + 1,
        include_flagged=False,
    )
    runs = [r for r in store.runs(query) if r.run_id != current.run_id][:k]
    if not runs:
        raise _no_runs(store, current, branch)
    source = (
        f"store `{store.url}`, samples pooled from the last {len(runs)} run(s) on {branch or 'any branch'}: "
        f"{_ids(runs)}"
    )
    return pool_runs(runs), source


def stored_baseline(store: Store, current: Run, *, branch: str = "main") -> tuple[Run, str] | None:
    """The baseline ``baseline update`` kept for ``current``'s key, or None if there is none.

    A stored baseline that contains ``current`` itself is not used (a run is never its own
    baseline); the caller falls back to the pooled history without it.
    """
    record = store.baseline(
        suite=current.suite, model=current.model_key, machine=current.machine.fingerprint, branch=branch
    )
    if record is None or (current.run_id is not None and current.run_id in record.run_ids):
        return None
    runs = [store.get_run(run_id) for run_id in record.run_ids]
    source = (
        f"store `{store.url}`, baseline kept by `perfgate baseline update` at {record.created_at}: "
        f"samples pooled from the last {len(runs)} run(s) on {branch}: {_ids(runs)}"
    )
    return pool_runs(runs), source


def baseline_for(store: Store, current: Run, *, branch: str = "main", k: int = 5) -> tuple[Run, str]:
    """What ``check --store`` compares with: the stored baseline, else the pooled last ``k`` runs."""
    return stored_baseline(store, current, branch=branch) or pooled_baseline(store, current, branch=branch, k=k)


def align_with_history(store: Store, run: Run) -> Alignment:
    """``run`` with its imported metrics named as in the store's newest run of its suite and model.

    An imported benchmark whose name is not a metric stem may be named differently from run to
    run (:mod:`perfgate.core.benchmark_names`); aligning each run when it is recorded keeps one
    name per benchmark in the store, so its series and pooled baselines stay whole. A run that
    does not record its benchmarks, or the first of its model, is returned as it is.
    """
    if benchmark_names(run) is None:
        return Alignment(run=run)
    query = RunQuery(model=run.model_key, suite=run.suite, limit=2)
    newest = [r for r in store.runs(query) if r.run_id != run.run_id][:1]
    return align(newest[0], run, reference="the store") if newest else Alignment(run=run)


def baseline_runs(
    store: Store, *, suite: str, model: str, machine: str | None, branch: str = "main", k: int
) -> list[Run]:
    """The runs a baseline of this key is formed from: the newest ``k`` unflagged ones, newest first."""
    query = RunQuery(model=model, machine=machine, branch=branch, suite=suite, limit=k, include_flagged=False)
    return store.runs(query)


def update_baselines(
    store: Store,
    *,
    created_at: str,
    model: str | None = None,
    branch: str = "main",
    k: int = DEFAULT_BASELINE_RUNS,
) -> list[tuple[BaselineRecord, list[Run]]]:
    """Form and keep the baseline of every (suite, model, machine) with runs on ``branch``.

    Args:
        created_at: when (UTC ISO-8601); the shell reads the clock.
        model: one model (any spelling) or None for all.
        k: runs per baseline.

    Raises:
        StorageError: no run of ``model`` (or none at all) on ``branch``.
    """
    if k < 1:
        raise StorageError(f"--runs must be at least 1, got {k}", source=store.url)
    keys = store.latest(RunQuery(model=normalize_model(model) if model else None, branch=branch))
    done = []
    for newest in keys:
        runs = baseline_runs(
            store, suite=newest.suite, model=newest.model_key, machine=newest.machine.fingerprint, branch=branch, k=k
        )
        if not runs:  # every run of this key is flagged
            continue
        record = BaselineRecord(
            suite=newest.suite,
            model=newest.model_key,
            machine=newest.machine.fingerprint,
            branch=branch,
            run_ids=tuple(r.run_id or "" for r in runs),
            created_at=created_at,
        )
        store.save_baseline(record)
        done.append((record, runs))
    if not done:
        what = f"model {model!r}" if model else "any model"
        raise StorageError(
            f"no unflagged run of {what} on branch {branch!r}; record runs of that branch with perfgate record "
            "(or accept flagged ones with perfgate baseline accept RUN_ID)",
            source=store.url,
        )
    return done


def record_verdict(store: Store, run_id: str, *, regressed: bool, note: str = "") -> RunStatus:
    """Keep a check's verdict for ``run_id``: ``flagged`` on regression, else ``passed``.

    A run a person accepted stays accepted when it is checked again.
    """
    if store.status(run_id) is RunStatus.ACCEPTED:
        return RunStatus.ACCEPTED
    status = RunStatus.FLAGGED if regressed else RunStatus.PASSED
    store.set_status(run_id, status, note)
    return status


def accept_run(store: Store, run_id: str, note: str = "accepted by perfgate baseline accept") -> RunStatus:
    """Let a flagged run into baselines again; returns the status it had.

    Raises:
        StorageError: the store has neither a run nor a check with this id.
    """
    before = store.status(run_id)
    if before is None:
        raise StorageError(
            f"no run or check with id {run_id!r}; list runs with perfgate history or baseline show", source=store.url
        )
    if before is RunStatus.FLAGGED:
        store.set_status(run_id, RunStatus.ACCEPTED, note)
    return before

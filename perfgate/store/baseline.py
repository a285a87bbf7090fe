"""Baselines taken from a store: the pooled last K runs of a model on a machine and branch."""

from __future__ import annotations

import dataclasses

from perfgate.core.baseline import pool_runs
from perfgate.core.schema import Run
from perfgate.errors import MismatchError
from perfgate.store.base import RunQuery, Store

__all__ = ["pooled_baseline"]


def pooled_baseline(store: Store, current: Run, *, branch: str | None = "main", k: int = 5) -> tuple[Run, str]:
    """The baseline for ``current`` and a sentence saying where it came from.

    Raises:
        MismatchError: the store has no run of this model on this machine (and branch);
            the message names the machine fingerprints it does have.
    """
    if k < 1:
        raise MismatchError(f"--baseline-runs must be at least 1, got {k}")
    query = RunQuery(model=current.model_key, machine=current.machine.fingerprint, branch=branch, suite=current.suite)
    candidates = [r for r in store.runs(dataclasses.replace(query, limit=k + 1)) if r.run_id != current.run_id]
    runs = candidates[:k]
    if not runs:
        others = store.runs(RunQuery(model=current.model_key, suite=current.suite))
        prints = sorted({r.machine.fingerprint or "unknown" for r in others})
        where = f" on branch {branch!r}" if branch else ""
        have = (
            f"; it has runs of this model from machine(s) {', '.join(prints)}"
            if prints
            else "; it has no runs of this model at all (record some with perfgate record)"
        )
        raise MismatchError(
            f"the store {store.url} has no run of model {current.model!r} on machine "
            f"{current.machine.fingerprint or 'unknown'}{where}{have}"
        )
    ids = ", ".join(f"`{(r.run_id or '?')[:12]}`" for r in runs)
    source = f"store `{store.url}`, samples pooled from the last {len(runs)} run(s) on {branch or 'any branch'}: {ids}"
    return pool_runs(runs), source

"""``perfgate record``: add finished run files to the result store.

Every file is read first, so that one bad file records nothing. A run file without an id gets
the hash of its content; a run recorded for the first time is named as the store's runs of its
model are (:func:`perfgate.store.baseline.align_with_history`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfgate.app.runs import content_run_id
from perfgate.app.stores import store_url
from perfgate.config import load_config
from perfgate.errors import InputError
from perfgate.runfile import load_run

__all__ = ["RecordRequest", "record"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordRequest:
    """The run files to record, the branch to record them on (None: each file's), and the store."""

    runs: tuple[Path, ...]
    branch: str | None = None
    store: str | None = None
    config: Path | None = None


def record(request: RecordRequest, *, note: Callable[[str], None], say: Callable[[str], None]) -> None:
    """Record the runs of ``request``, telling ``note`` how a run's metrics were named after the
    store's, and ``say`` what happened to each run (recorded or already recorded, and the verdict
    that a run checked before it was recorded keeps).

    Raises:
        InputError: a run file cannot be read, an empty branch name.
    """
    from perfgate.store import RunStatus, open_store
    from perfgate.store.baseline import align_with_history

    config = load_config(request.config)
    # read every file first: one bad file records nothing
    runs = [load_run(path, config.policy.metric_info) for path in request.runs]
    runs = [r if r.run_id else dataclasses.replace(r, run_id=content_run_id(r)) for r in runs]
    if request.branch is not None:  # as perfgate import --branch: the branch the runs are recorded on
        if not request.branch.strip():
            raise InputError("is empty; give the branch name (e.g. main)", field="--branch")
        runs = [dataclasses.replace(r, git=dataclasses.replace(r.git, branch=request.branch)) for r in runs]
    store = open_store(store_url(request.store, config))
    try:
        for path, r in zip(request.runs, runs, strict=True):
            # an imported run names each benchmark as the store's runs do (perfgate.core.benchmark_names)
            aligned = align_with_history(store, r) if not store.has_run(r.run_id or "") else None
            added = store.add_run(aligned.run if aligned is not None else r)
            for text in aligned.notes if aligned is not None else ():
                note(f"note: {text}")
            state = "recorded" if added else "already recorded"
            verdict = store.status(r.run_id or "")  # a run checked before it was recorded keeps its verdict
            kept = f", status {verdict}" if verdict not in (None, RunStatus.RECORDED) else ""
            say(f"{state}: {path} → run {r.run_id} (model {r.model}, commit {r.git.commit or 'unknown'}{kept})")
    finally:
        store.close()

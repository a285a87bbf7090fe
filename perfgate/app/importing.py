"""``perfgate import``: another tool's results (pytest-benchmark, pyperf, asv, hyperfine,
google-benchmark) as a perfgate run file.

With a store (``--store``, ``PERFGATE_STORE`` or the configuration) the run is recorded there
too, its metrics named as in the store's newest run of the model wherever a benchmark's
name changed (:func:`perfgate.store.baseline.align_with_history`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfgate.app.runs import content_run_id
from perfgate.app.stores import chosen_store, store_file
from perfgate.config import load_config
from perfgate.core.codec import format_timestamp
from perfgate.core.schema import GitInfo, Run
from perfgate.importers import ImportOptions, import_file
from perfgate.output import check_distinct
from perfgate.runfile import save_run

__all__ = ["ImportRequest", "Imported", "Recorded", "import_results"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportRequest:
    """The tool's result ``file`` in ``format``, the run file to write, and what the run is of:
    model and suite (None: the format's name), the unit of its times, where its machine comes
    from (``file`` or ``here``), and its commit and branch (None: the file's, else git's)."""

    format: str
    file: Path
    output: Path
    model: str | None = None
    suite: str | None = None
    time_unit: str | None = None
    machine_from: str = "file"
    git_commit: str | None = None
    branch: str | None = None
    store: str | None = None
    config: Path | None = None


@dataclass(frozen=True, slots=True)
class Imported:
    """The run written, and the notes of the import (benchmarks renamed, values left out)."""

    run: Run
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Recorded:
    """The run ``run_id`` as recorded in the store ``url``: ``added`` False when it was there already."""

    url: str
    run_id: str | None
    added: bool
    notes: tuple[str, ...]


def _provenance(run: Run, request: ImportRequest) -> Run:
    """What the imported run lacks of where it comes from, taken from here
    (:func:`perfgate.bench.provenance.collect`)."""
    changes: dict[str, Any] = {}
    git = run.git
    wants_git = git.commit is None or git.branch is None or bool(request.git_commit or request.branch)
    wants_machine = request.machine_from == "here" or run.machine.fingerprint is None
    if wants_git or wants_machine:
        from perfgate.bench.provenance import collect

        here = collect(request.git_commit or git.commit, request.branch or git.branch)
        if wants_git:
            # the working tree's state says something only about a commit taken from it
            from_tree = request.git_commit is None and git.commit is None
            changes["git"] = GitInfo(
                commit=here.git.commit, branch=here.git.branch, dirty=here.git.dirty if from_tree else git.dirty
            )
        if wants_machine:
            changes["machine"] = here.machine_record()
    if run.created_at is None:
        changes["created_at"] = format_timestamp(datetime.now(UTC))
    run = dataclasses.replace(run, **changes)
    return dataclasses.replace(run, run_id=content_run_id(run))


def import_results(request: ImportRequest, imported: Callable[[Imported], None]) -> Recorded | None:
    """Convert the file of ``request`` into a run file, tell ``imported`` of it, and record the run in
    the chosen store; what was recorded (None: no store chosen).

    Raises:
        InputError: the file cannot be read or is not of ``format``; an output that names an input.
    """
    config = load_config(request.config)
    url = chosen_store(request.store, config)  # record the run there too: --store, PERFGATE_STORE, configuration
    store_path = store_file(url) if url is not None else None
    check_distinct(
        {"--output": request.output}, {"FILE": request.file, "--config": config.source, "the store": store_path}
    )
    options = ImportOptions(model=request.model, suite=request.suite, time_unit=request.time_unit)
    result = import_file(request.format, request.file, options)
    run = _provenance(result.run, request)
    save_run(request.output, run)
    imported(Imported(run=run, notes=tuple(result.notes)))
    if url is None:
        return None
    from perfgate.store import open_store
    from perfgate.store.baseline import align_with_history

    store = open_store(url)
    try:  # the stored copy names each benchmark as the store's runs do; the run file keeps the file's names
        aligned = align_with_history(store, run) if not store.has_run(run.run_id or "") else None
        added = store.add_run(aligned.run if aligned is not None else run)
    finally:
        store.close()
    return Recorded(
        url=store.url, run_id=run.run_id, added=added, notes=tuple(aligned.notes) if aligned is not None else ()
    )

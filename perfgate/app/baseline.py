"""``perfgate baseline``: per-model baselines, as files or kept in the store.

Files (as the original specification): :func:`save` writes ``<dir>/<model>_baseline.json``;
:func:`baseline_files` reads them. From the store (what CI runs on a merge to main):
:func:`update` forms the baseline of every model and machine from the last K unflagged runs of
the baseline branch, :func:`accept` lets a run the gate flagged into baselines,
:func:`stored_baselines` says which runs each baseline came from, and :func:`export` writes one
as a flat file of the original specification's format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app.numbers import checked_number
from perfgate.app.runs import model_key
from perfgate.app.stores import chosen_store, store_file, store_url
from perfgate.config import load_config
from perfgate.core.baseline import flat_baseline, pool_runs
from perfgate.core.codec import format_timestamp
from perfgate.core.schema import Run
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.runfile import load_run, save_run, write_text_atomic

if TYPE_CHECKING:
    from perfgate.store import RunStatus
    from perfgate.store.base import BaselineRecord, Store

__all__ = [
    "DEFAULT_DIR",
    "BaselineExport",
    "ExportRequest",
    "ShowRequest",
    "StoreRequest",
    "StoredBaseline",
    "UpdateRequest",
    "accept",
    "baseline_files",
    "baseline_path",
    "export",
    "save",
    "stored_baselines",
    "update",
    "uses_store",
]

DEFAULT_DIR = Path("benchmark_results")


def baseline_path(directory: Path, model: str) -> Path:
    """The baseline file of ``model`` in ``directory``: ``<model>_baseline.json``."""
    return directory / f"{model_key(model)}_baseline.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreRequest:
    """The store of a baseline action: ``--store``, else ``PERFGATE_STORE``, else the configuration's."""

    store: str | None = None
    config: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShowRequest(StoreRequest):
    """The baselines to show: one model's (None: every model's), from the files of ``dir`` or the store."""

    model: str | None = None
    dir: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateRequest(StoreRequest):
    """Form the baselines of one model (``all``: every model) from its newest ``baseline_runs``
    unflagged runs of ``baseline_branch``."""

    model: str = "all"
    baseline_runs: int = 10
    baseline_branch: str = "main"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRequest(StoreRequest):
    """Write the baseline kept for ``model`` (on ``machine``, when it has several) to ``output``."""

    model: str
    output: Path
    machine: str | None = None
    baseline_branch: str = "main"


@dataclass(frozen=True, slots=True)
class StoredBaseline:
    """A baseline kept in the store, the runs it was formed from and their status, and their pool."""

    store_url: str
    record: BaselineRecord
    runs: list[Run]
    statuses: list[RunStatus | None]
    pooled: Run


@dataclass(frozen=True, slots=True)
class BaselineExport:
    """The baseline written by :func:`export`: its pooled run and the record it came from."""

    base: Run
    record: BaselineRecord


def save(run: Path, directory: Path) -> tuple[Run, Path]:
    """Copy the run file ``run`` to the baseline file of its model in ``directory``; the run and the file."""
    base = load_run(run)
    target = baseline_path(directory, base.model)
    save_run(target, base)
    return base, target


def uses_store(request: ShowRequest) -> bool:
    """Whether ``show`` reads the store: no ``--dir``, and a store chosen (``--store``,
    ``PERFGATE_STORE`` or the configuration)."""
    return request.dir is None and chosen_store(request.store, load_config(request.config)) is not None


def baseline_files(request: ShowRequest) -> Iterator[tuple[Path, Run]]:
    """The baseline files of ``request`` (its ``dir``, else ``benchmark_results``), each read in turn.

    Raises:
        InputError: no baseline file of the model (or of any model).
    """
    directory = request.dir if request.dir is not None else DEFAULT_DIR
    paths = [baseline_path(directory, request.model)] if request.model else sorted(directory.glob("*_baseline.json"))
    if not paths or not all(p.exists() for p in paths):
        what = f"model {request.model!r}" if request.model else "any model"
        raise InputError(
            f"no baseline for {what}; save one with perfgate baseline save RUN.json", source=str(directory)
        )
    for path in paths:
        yield path, load_run(path)


def _open(request: StoreRequest) -> Store:
    from perfgate.store import open_store

    return open_store(store_url(request.store, load_config(request.config)))


def _stored(store: Store, model: str | None) -> list[BaselineRecord]:
    records = store.baselines(None if model in (None, "all") else model)
    if not records:
        what = f"model {model!r}" if model not in (None, "all") else "any model"
        raise InputError(
            f"no baseline kept for {what}; form one with perfgate baseline update (after recording runs of main)",
            source=store.url,
        )
    return records


def stored_baselines(request: ShowRequest) -> Iterator[StoredBaseline]:
    """The baselines kept in the store for ``request.model`` (every model: None), each read in turn.

    Raises:
        InputError: no baseline kept for the model (or any model).
    """
    with _open(request) as store:
        for record in _stored(store, request.model):
            runs = [store.get_run(run_id) for run_id in record.run_ids]
            statuses = [store.status(r.run_id or "") for r in runs]
            yield StoredBaseline(store.url, record, runs, statuses, pool_runs(runs))


def update(request: UpdateRequest, formed: Callable[[BaselineRecord, list[Run]], None]) -> None:
    """Form the baselines of ``request``, telling ``formed`` of each (its record and its runs, newest first).

    Raises:
        InputError: ``baseline_runs`` outside 1 to 10,000.
    """
    from perfgate.store.baseline import update_baselines

    checked_number(request.baseline_runs, "--baseline-runs", at_least=1, at_most=10_000)
    now = format_timestamp(datetime.now(UTC))
    model = None if request.model == "all" else request.model
    with _open(request) as store:
        for record, runs in update_baselines(
            store, created_at=now, model=model, branch=request.baseline_branch, k=request.baseline_runs
        ):
            formed(record, runs)


def accept(run_id: str, request: StoreRequest) -> RunStatus:
    """Let the run ``run_id`` into baselines; its status before (only a flagged run changes)."""
    from perfgate.store.baseline import accept_run

    with _open(request) as store:
        return accept_run(store, run_id)


def export(request: ExportRequest) -> BaselineExport:
    """Write the one baseline of ``request`` as a flat file of the original specification's format.

    Raises:
        InputError: no baseline, or several (on different machines) where one was meant.
    """
    config = load_config(request.config)
    check_distinct(
        {"--output": request.output},
        {"the store": store_file(store_url(request.store, config)), "--config": config.source},
    )
    with _open(request) as store:
        records = [r for r in _stored(store, request.model) if r.branch == request.baseline_branch]
        if request.machine is not None:
            records = [r for r in records if r.machine == request.machine]
        if len(records) != 1:
            machines = ", ".join(sorted({r.machine or "unknown" for r in _stored(store, request.model)}))
            problem = "none" if not records else f"{len(records)}"
            raise InputError(
                f"{problem} baseline(s) of model {request.model!r} match on branch {request.baseline_branch!r}"
                f"{f' and machine {request.machine}' if request.machine else ''}; it has baselines for machine(s) "
                f"{machines}: choose one with --machine",
                source=store.url,
            )
        record = records[0]
        base = pool_runs([store.get_run(run_id) for run_id in record.run_ids])
    doc = flat_baseline(base, timestamp=record.created_at)
    write_text_atomic(request.output, json.dumps(doc, sort_keys=True, indent=2) + "\n")
    return BaselineExport(base=base, record=record)

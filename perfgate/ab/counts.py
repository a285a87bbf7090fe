"""``perfgate ab --measure counts``: both revisions counted under callgrind, pair by pair, into two runs.

Pair ``i`` is one counted process of each revision (:mod:`perfgate.workers.counts`), started in
the order :func:`perfgate.workers.layout.start_order` draws, each with its own memory layout drawn
as the timed paired gate draws its workers'; each revision's processes become one run, and the two
runs are checked like two stored runs of counts (:mod:`perfgate.app.ab`). Every process of both
sides is owned by one :class:`~perfgate.workers.spawn.Workers`: an error, Ctrl-C or SIGTERM ends
them all at once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.ab.revisions import Revision, sides
from perfgate.bench.callgrind import find_valgrind, valgrind_version
from perfgate.core.schema import GitInfo, Run
from perfgate.workers.counts import (
    MIN_PROCESSES,
    Counted,
    CountSide,
    count_process,
    counts_job,
    counts_run,
    default_jobs,
    in_parallel,
    prepared,
)
from perfgate.workers.layout import draw, start_order
from perfgate.workers.spawn import Workers

__all__ = ["CountedRevisions", "count_revisions", "measure_counts_paired"]


def measure_counts_paired(
    job: Mapping[str, Any],
    model: str,
    sides: tuple[CountSide, CountSide],
    *,
    pairs: int,
    seed: int,
    run_ids: tuple[str, str],
    created_at: str,
    gits: tuple[GitInfo, GitInfo],
    machine: Mapping[str, Any],
    software: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    jobs: int | None = None,
) -> tuple[Run, Run]:
    """``perfgate ab --measure counts``: ``pairs`` pairs of counted processes, one per side, into two runs.

    The two processes of a pair start together (in the order :func:`~perfgate.workers.layout.start_order`
    draws), each with its own layout from :func:`~perfgate.workers.layout.draw` (the hash seed is the
    pair's), exactly as the paired gate's timed workers start; ``sides`` give each revision's folder
    and environment. Process ``i`` of each run is pair ``i``.
    """
    valgrind = find_valgrind()
    version = valgrind_version(valgrind)
    pairs = max(pairs, MIN_PROCESSES)
    tasks: list[Callable[[], Counted]] = []
    roles: list[int] = []
    lock = threading.Lock()
    done = [0]
    with Workers() as owner, prepared(job, model, sides, True, progress, owner, valgrind) as products:
        # each revision's counted processes read its own products, never the other's
        side_jobs = [p.job(job) for p in products]

        def one(pair: int, which: int) -> Callable[[], Counted]:
            side = sides[which]

            def task() -> Counted:
                layout = draw(seed, pair, "AB"[which])
                counted = count_process(pair, side_jobs[which], valgrind, model, layout, owner, side)
                with lock:
                    done[0] += 1
                    if progress:
                        progress(
                            f"{model}: counted the {side.label} in pair {pair + 1} of {pairs} "
                            f"in {counted.seconds:.1f} s"
                        )
                return counted

            return task

        for pair in range(pairs):
            for name in start_order(seed, pair):
                which = 0 if name == "A" else 1
                tasks.append(one(pair, which))
                roles.append(which)
        counted = in_parallel(tasks, owner, jobs if jobs is not None else default_jobs(2 * pairs))
    runs = []
    for which in (0, 1):
        mine = [c for c, r in zip(counted, roles, strict=True) if r == which]
        runs.append(
            counts_run(
                mine,
                job,
                model,
                run_id=run_ids[which],
                created_at=created_at,
                git=gits[which],
                machine=machine,
                software={**software, "valgrind": version},
                config={**(config or {}), "pair_seed": seed},
                prepared=products[which],
            )
        )
    return runs[0], runs[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class CountedRevisions:
    """Both revisions' runs of counts, and what the JSON report records about how they were measured."""

    baseline: Run
    current: Run
    info: dict[str, object]
    source: str


def count_revisions(
    base_rev: Revision,
    cur_rev: Revision,
    *,
    model: str,
    suite: str,
    stages_modules: tuple[str, ...],
    data: Path | None,
    quick: bool,
    calls: int,
    count_all: bool,
    pairs: int,
    seed: int,
    created_at: str,
    machine: Mapping[str, Any],
    software: Mapping[str, str],
    progress: Callable[[str], None] | None = None,
) -> CountedRevisions:
    """Count ``model``'s stages in ``pairs`` pairs of processes of the two checked-out revisions."""
    a, b = sides(base_rev, cur_rev)
    job = counts_job(
        suite=suite,
        stages_modules=stages_modules,
        data=data,
        seed=0,  # the data's and the weights' random seed: the same on both sides
        params={"quick": True} if quick else {},
        warmup=None,
        calls=calls,
        count_all=count_all,
    )
    info: dict[str, object] = {
        "paired": True,
        "measure": "counts",
        "engine": "counted processes",
        "seed": seed,
        "pairs": pairs,
        "baseline_ref": base_rev.ref,
        "baseline_commit": base_rev.commit,
        "current_ref": cur_rev.ref,
        "current_commit": cur_rev.commit,
        "current_dirty": cur_rev.dirty,
    }
    baseline, current = measure_counts_paired(
        job,
        model,
        (CountSide(label=a.label, cwd=a.path, env=a.env), CountSide(label=b.label, cwd=b.path, env=b.env)),
        pairs=pairs,
        seed=seed,
        run_ids=(uuid.uuid4().hex, uuid.uuid4().hex),
        created_at=created_at,
        gits=(a.git, b.git),
        machine=machine,
        software=software,
        config={"ab": info},
        progress=progress,
    )
    source = (
        f"{a.label}, counted in this job: {pairs} pairs of processes under callgrind, one per revision, "
        "each with its own memory layout"
    )
    return CountedRevisions(baseline=baseline, current=current, info=info, source=source)

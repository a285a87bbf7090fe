"""``perfgate calibrate``: learn this machine's run-to-run noise from the history of unchanged runs.

For each model (or all of them), :func:`calibrate` takes the newest recorded runs of the
baseline branch from this machine, and from the counts machines that carry across hosts,
estimates each metric's noise (:func:`perfgate.calibration.estimate_noise`) and writes it to
the calibration file that ``perfgate check`` reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from perfgate.app.runs import model_key
from perfgate.app.stores import store_file, store_url
from perfgate.calibration import DEFAULT_NOISE_FILE, estimate_noise, save_noise
from perfgate.config import load_config
from perfgate.core.codec import format_timestamp
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.store import open_store
from perfgate.store.base import RunQuery, Store

__all__ = ["CalibrateRequest", "Calibrated", "calibrate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrateRequest:
    """Whose noise: a model (or ``all``) on a machine (None: this one), from the newest
    ``baseline_runs`` runs (at least 3) of ``baseline_branch``; written to ``output``."""

    model: str
    machine: str | None = None
    baseline_branch: str = "main"
    baseline_runs: int = 20
    output: Path = DEFAULT_NOISE_FILE
    store: str | None = None
    config: Path | None = None


@dataclass(frozen=True, slots=True)
class Calibrated:
    """What became of one model on one machine: ``runs`` found; ``sigma`` learned and written
    (empty: skipped, with fewer than 3 runs, or no metric in 3 of them)."""

    model: str
    machine: str
    runs: int
    sigma: dict[str, float]


_COUNTS_SCAN = 500  # newest runs of a model looked through for counts machines


def _counted(values: list[str | None], *, none: str) -> str:
    """``a (7 runs), b (3 runs)``: the most frequent first, at most 5."""
    counts = Counter(v if v else none for v in values)
    shown = ", ".join(f"{v} ({n} run{'s' if n > 1 else ''})" for v, n in counts.most_common(5))
    return shown + (" …" if len(counts) > 5 else "")


def _nothing_learned(
    store: Store, request: CalibrateRequest, machine: str, unshared: list[tuple[str, str, int]]
) -> str:
    """Why no noise was learned, and the flag that would find the runs where there are some."""
    branch = request.baseline_branch
    if unshared:
        model, fingerprint, n = unshared[0]
        return (
            f"no metric is shared by enough runs to learn the noise: of the {n} runs of {model} on {branch} from "
            f"machine {fingerprint}, no metric is in 3 or more; record runs that measure the same metrics "
            "(nothing was written)"
        )
    wanted = None if model_key(request.model) == "all" else model_key(request.model)
    what = f"model {wanted}" if wanted else "any model"
    head = f"no model has 3 runs on {branch} from machine {machine}"
    on_branch = store.runs(RunQuery(model=wanted, branch=branch, limit=_COUNTS_SCAN))
    others = [fp for r in on_branch if (fp := r.machine.fingerprint) != machine]
    if others:  # an imported run carries the machine of the file it came from, not this one
        return (
            f"{head}; runs of {what} on {branch} come from machine(s) {_counted(others, none='unknown')}: "
            "calibrate one of them with --machine FINGERPRINT"
        )
    elsewhere = store.runs(RunQuery(model=wanted, limit=_COUNTS_SCAN))
    here = [r for r in elsewhere if r.machine.fingerprint == machine]
    if here:
        return (
            f"{head}; the runs of {what} from that machine are on branch(es) "
            f"{_counted([r.git.branch for r in here], none='no branch')}: choose one with --baseline-branch, "
            f"or record runs with --branch {branch}"
        )
    if elsewhere:
        return (
            f"{head}; runs of {what} are on branch(es) {_counted([r.git.branch for r in elsewhere], none='no branch')} "
            f"from machine(s) {_counted([r.machine.fingerprint for r in elsewhere], none='unknown')}: choose them "
            "with --baseline-branch and --machine FINGERPRINT"
        )
    return f"{head}; record more runs first"


def calibrate(request: CalibrateRequest, told: Callable[[Calibrated], None]) -> None:
    """Learn and write the noise of ``request``, telling ``told`` of each model and machine as it is
    done (a model with too few runs only for the machine asked for).

    Raises:
        InputError: fewer than 3 runs asked for; nothing learned (the message says where the runs are).
    """
    config = load_config(request.config)
    check_distinct(
        {"--output": request.output},
        {"the store": store_file(store_url(request.store, config)), "--config": config.source},
    )
    if request.baseline_runs < 3:
        raise InputError(
            f"need at least 3 runs to estimate noise, got {request.baseline_runs}", field="--baseline-runs"
        )
    machine = request.machine
    if machine is None:
        from perfgate.bench.machine import collect_machine

        machine = collect_machine()["fingerprint"]
    store = open_store(store_url(request.store, config))
    try:
        models = (
            sorted({r.model_key for r in store.runs(RunQuery(machine=machine))})
            if model_key(request.model) == "all"
            else [model_key(request.model)]
        )
        done = 0
        unshared: list[tuple[str, str, int]] = []  # (model, machine, runs) with runs but no metric shared by 3
        for model in models:
            machines = [machine]
            if request.machine is None:
                # counts carry across the hosts of one kind: a counts run's machine is the instruction
                # set valgrind presents (docs/design.md §12), calibrated wherever it was recorded
                recent = store.runs(RunQuery(model=model, branch=request.baseline_branch, limit=_COUNTS_SCAN))
                machines += sorted({fp for r in recent if (fp := r.machine.fingerprint) and fp.startswith("counts-")})
            for fingerprint in machines:
                query = RunQuery(
                    model=model, machine=fingerprint, branch=request.baseline_branch, limit=request.baseline_runs
                )
                runs = store.runs(query)
                if len(runs) < 3:
                    if fingerprint == machine:
                        told(Calibrated(model=model, machine=machine, runs=len(runs), sigma={}))
                    continue
                runs.reverse()  # oldest first: successive differences follow time
                sigma = estimate_noise(runs)
                if not sigma:  # each metric in fewer than 3 of the runs: nothing to learn, nothing written
                    unshared.append((model, fingerprint, len(runs)))
                    told(Calibrated(model=model, machine=fingerprint, runs=len(runs), sigma={}))
                    continue
                save_noise(
                    request.output,
                    machine=fingerprint,
                    model=model,
                    sigma=sigma,
                    runs=len(runs),
                    run_ids=[r.run_id or "" for r in runs],
                    branch=request.baseline_branch,
                    created_at=format_timestamp(datetime.now(UTC)),
                )
                done += 1
                told(Calibrated(model=model, machine=fingerprint, runs=len(runs), sigma=sigma))
        if not done:
            raise InputError(_nothing_learned(store, request, machine, unshared), source=store.url)
    finally:
        store.close()

"""``perfgate ab``: two revisions measured interleaved in one job, then checked paired.

Both refs are checked out into temporary git worktrees. Each revision gets resident worker
processes that import its own tree (:mod:`perfgate.ab.resident`, decided by
:mod:`perfgate.core.paired`); a revision whose perfgate predates the resident worker is measured
the older way, process by process (:mod:`perfgate.ab.fallback`); with ``--measure counts`` both
are counted under callgrind, pair by pair (:mod:`perfgate.ab.counts`). After a regression, both
revisions are profiled on each regressed stage (:mod:`perfgate.ab.explain`). The result is
``perfgate check``'s, with what the JSON report records about how it was measured.

``current_ref`` defaults to ``HEAD`` when the working tree is clean and to ``WORKTREE`` (the
working tree as it is, measured in place) when tracked files have uncommitted changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.app.check import with_calibration
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.policy import Policy
from perfgate.core.schema import normalize_model
from perfgate.errors import InputError
from perfgate.suites import find, hook

if TYPE_CHECKING:
    from perfgate.ab import AbOptions, ResidentOptions, Side
    from perfgate.core.profiles import StageExplanation

__all__ = ["AbRequest", "AbResult", "check_ab", "explained_with", "instruments_for", "shared_data"]

ProgressFn = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AbRequest:
    """What ``perfgate ab`` was asked; ``pairs`` is the number the measure's own default made it.

    ``current_ref`` None: ``HEAD``, or the working tree when it has changes. ``order_seed`` None:
    drawn at random. ``data`` None: the suite's shared data when it writes one, else each side's own.
    ``rounds``, ``repeat`` and ``device`` None: ``perfgate bench``'s own.
    """

    baseline_ref: str
    current_ref: str | None = None
    model: str
    suite: str
    time_budget: float
    pairs: int
    order_seed: int | None = None
    randomise_layout: bool = True
    stages_modules: tuple[str, ...] = ()
    quick: bool = False
    rounds: int | None = None
    repeat: int | None = None
    device: str | None = None
    data: Path | None = None
    repo: Path | None = None
    measure: str = "times"
    count_all_stages: bool = False
    explain: bool = True
    explain_budget: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AbResult:
    """The paired check's result and what the JSON report records about how it was measured (``ab``)."""

    result: CheckResult
    info: dict[str, object]


@contextlib.contextmanager
def shared_data(suite: str, seed: int = 0) -> Iterator[Path | None]:
    """The suite's default data, written once for the whole check by its ``write_shared_data``
    hook (:mod:`perfgate.suites`) and made read-only; ``None`` for a suite without the hook.

    Without it each side's workers would make their own copy in their own tree: the same bytes
    in two files, which load at different speeds (two copies of one file differed by 28 % in one
    process, and an A/A check read the difference as a −10.7 % change of DBN load). Both sides
    read this one file; it is removed when the check ends.
    """
    write = hook(find(suite), "write_shared_data")
    if write is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="perfgate-ab-data-") as folder:
        path = Path(write(Path(folder), seed))
        path.chmod(0o444)
        yield path


def check_ab(request: AbRequest, policy: Policy, progress: ProgressFn) -> AbResult:
    """Measure both revisions as ``request`` asks and check them paired with ``policy`` (for a run of
    counts, with this machine's calibrated noise folded in: each count metric's residue between
    processes, learned from the counts machine's stored runs)."""
    if request.data is not None:
        return _check(request, policy, progress)
    with shared_data(request.suite) as data:
        return _check(dataclasses.replace(request, data=data), policy, progress)


def _check(request: AbRequest, policy: Policy, progress: ProgressFn) -> AbResult:
    if request.measure == "counts":
        return _counts(request, policy, progress)
    if request.count_all_stages:
        raise InputError("--count-all-stages goes with --measure counts", field="--count-all-stages")
    from perfgate.ab import check_revisions, checkout, sides

    fallback = _fallback_options(request, policy)
    seed, repo, current_ref = _starting(request)
    resident = _resident_options(request, policy, seed)
    info: dict[str, object] = {"paired": True, "interleaved": True, "seed": seed}
    with checkout(repo, request.baseline_ref, current_ref) as (base_rev, cur_rev):
        info.update(
            baseline_ref=base_rev.ref,
            baseline_commit=base_rev.commit,
            current_ref=cur_rev.ref,
            current_commit=cur_rev.commit,
            current_dirty=cur_rev.dirty,
        )
        checked = check_revisions(base_rev, cur_rev, resident, fallback, policy, progress=progress)
        info.update(checked.details)
        result = _explained(
            request, checked.result, sides(base_rev, cur_rev), resident, instruments_for("times"), info, progress
        )
    return AbResult(result=_smoke(request, result), info=info)


def _counts(request: AbRequest, policy: Policy, progress: ProgressFn) -> AbResult:
    """``ab --measure counts``: pairs of counted processes, one per revision, checked as two runs of counts."""
    from perfgate.ab import checkout, sides
    from perfgate.ab.counts import count_revisions
    from perfgate.bench.callgrind import find_valgrind
    from perfgate.bench.provenance import collect

    if (request.device or "cpu") != "cpu":
        raise InputError(
            f"--measure counts runs on the CPU only (got --device {request.device}): callgrind simulates the CPU "
            "and cannot see GPU kernels; measure a GPU with --measure times",
            field="--device",
        )
    if request.rounds is not None:
        raise InputError(
            "--rounds does not apply to --measure counts (use --repeat for counted calls)", field="--rounds"
        )
    if not request.randomise_layout:
        raise InputError(
            "--measure counts always draws each process's layout: leave out --no-randomise-layout",
            field="--no-randomise-layout",
        )
    find_valgrind()
    seed, repo, current_ref = _starting(request)
    with checkout(repo, request.baseline_ref, current_ref) as (base_rev, cur_rev):
        here = collect()
        counted = count_revisions(
            base_rev,
            cur_rev,
            model=normalize_model(request.model),
            suite=request.suite,
            stages_modules=request.stages_modules,
            data=request.data,
            quick=request.quick,
            calls=request.repeat if request.repeat is not None else 5,
            count_all=request.count_all_stages,
            pairs=request.pairs,
            seed=seed,
            created_at=here.created_at,
            machine=here.machine,
            software=here.software,
            progress=progress,
        )
        # each count metric's residue between processes, learned from this counts machine's stored runs
        policy = with_calibration(None, policy, counted.current)
        result = compare_runs(counted.baseline, counted.current, policy, baseline_source=counted.source)
        result = _explained(
            request,
            result,
            sides(base_rev, cur_rev),
            _resident_options(request, policy, seed),
            instruments_for("counts"),
            counted.info,
            progress,
        )
    return AbResult(result=_smoke(request, result), info=counted.info)


def _smoke(request: AbRequest, result: CheckResult) -> CheckResult:
    if not request.quick:
        return result
    return dataclasses.replace(
        result, baseline_source=result.baseline_source + ". A smoke run (--quick): not for decisions"
    )


def _starting(request: AbRequest) -> tuple[int, Path, str]:
    """What every way of measuring starts from: the order's random seed, the repository and the
    current ref (the working tree when it has changes and none was given)."""
    from perfgate.ab import WORKTREE, git_toplevel, is_dirty

    seed = request.order_seed if request.order_seed is not None else secrets.randbelow(2**31)
    repo = git_toplevel(request.repo if request.repo is not None else Path.cwd())
    current_ref = request.current_ref or (WORKTREE if is_dirty(repo) else "HEAD")
    return seed, repo, current_ref


def _resident_options(request: AbRequest, policy: Policy, seed: int) -> ResidentOptions:
    from perfgate.ab import ResidentOptions

    smoke: dict[str, object] = {"max_pairs": max(request.pairs, 3)}
    if request.quick:  # a smoke run: every stage runs on both sides, nothing is decided from it
        # (it replaces --pairs: regression for `ab --quick` passing max_pairs twice, a TypeError)
        smoke = {"max_pairs": 3, "looks": 1, "stage_time": 0.1, "min_blocks": 3, "block_time": 0.005}
    return ResidentOptions(
        model=normalize_model(request.model),
        suite=request.suite,
        stages_modules=request.stages_modules,
        seed=seed,
        device=request.device or "cpu",
        params={"quick": True} if request.quick else {},
        data=request.data.resolve() if request.data is not None else None,
        time_budget=request.time_budget,
        randomise_layout=request.randomise_layout,
        metric_info=policy.metric_info,
        **smoke,  # type: ignore[arg-type]
    )


def _fallback_options(request: AbRequest, policy: Policy) -> AbOptions:
    """The process-level engine's options, for a revision whose perfgate predates the resident worker."""
    from perfgate.ab import DEFAULT_PAIRS, AbOptions

    if request.data is not None and not request.data.exists():
        raise InputError("data file not found", source=str(request.data), field="--data")
    return AbOptions(
        model=request.model,
        suite=request.suite,
        pairs=min(request.pairs, DEFAULT_PAIRS) if request.pairs >= 3 else request.pairs,
        stages_modules=request.stages_modules,
        quick=request.quick,
        rounds=request.rounds,
        repeat=request.repeat,
        device=request.device,
        # the measuring processes run in other folders
        data=request.data.resolve() if request.data is not None else None,
        metric_info=policy.metric_info,
        time_budget=request.time_budget,
    )


def _explained(
    request: AbRequest,
    result: CheckResult,
    pair: tuple[Side, Side],
    resident: ResidentOptions,
    instruments: Sequence[str],
    info: dict[str, object],
    progress: ProgressFn,
) -> CheckResult:
    """The result with where each regressed stage's change went: both revisions profiled on it after the
    decision, within ``explain_budget`` (``perfgate.ab.explain``); the verdict is not touched."""
    metrics = result.to_explain()
    if not request.explain or request.quick or not metrics:
        return result
    started = time.monotonic()
    explanations = explained_with(pair, resident, metrics, instruments, request.explain_budget, progress)
    info["explain_seconds"] = round(time.monotonic() - started, 1)
    return dataclasses.replace(result, explanations=explanations)


def instruments_for(measure: str, instrument: str | None = None) -> tuple[str, ...]:
    """The profilers of a profiling pass: the one asked for; else, for counts, each Python function's
    bytecodes and then each C function's instructions under callgrind; for times, ``auto``."""
    if instrument is not None:
        return (instrument,)
    return ("bytecodes", "callgrind") if measure == "counts" else ("auto",)


def explained_with(
    pair: tuple[Side, Side],
    resident: ResidentOptions,
    metrics: Sequence[str],
    instruments: Sequence[str],
    budget: float,
    progress: ProgressFn,
    **how: Any,
) -> tuple[StageExplanation, ...]:
    """Each instrument's pass in turn, within ``budget`` seconds together (a pass gets what is left)."""
    from perfgate.ab.explain import ExplainOptions, explain_metrics

    started = time.monotonic()
    out: list[StageExplanation] = []
    for instrument in instruments:
        left = max(budget - (time.monotonic() - started), 1.0)
        options = ExplainOptions(instrument=instrument, budget=left, **how)
        out += explain_metrics(pair, resident, metrics, options, progress=progress)
    return tuple(out)

"""``perfgate explain``: where a stage's time went between two revisions, on demand.

Both refs are checked out into temporary git worktrees, as ``perfgate ab`` does; fresh
resident workers of each revision set the stages up and profile the named stages (all of
them by default), each side in several processes so that the spread between two profiles of
one revision is the floor (:mod:`perfgate.ab.explain`). The result is the "Where it went"
table ``ab`` attaches to a regressed stage: no verdict, only the difference of the profiles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app.numbers import checked_number
from perfgate.core.metrics import default_suite
from perfgate.core.schema import normalize_model
from perfgate.errors import InputError
from perfgate.output import check_distinct

if TYPE_CHECKING:
    from perfgate.core.profiles import StageExplanation

__all__ = ["INSTRUMENTS", "ExplainRequest", "Explained", "explain", "prepared"]

INSTRUMENTS = ("auto", "sampling", "torch", "bytecodes", "callgrind")

# the profiling pass of ``perfgate ab``: both sides' stages profiled with each instrument in turn,
# within a budget of seconds; called as (sides, resident, stages, instruments, budget, progress, **how)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplainRequest:
    """The two revisions, the model and its stages (none: every stage), how the workers run them
    (suite, stages modules, device, data, quick), the profilers and how long each profiles, and
    the files the caller will write, by flag."""

    baseline_ref: str
    current_ref: str | None = None
    model: str
    stages: tuple[str, ...] = ()
    suite: str | None = None
    stages_modules: tuple[str, ...] = ()
    device: str = "cpu"
    data: Path | None = None
    quick: bool = False
    instruments: tuple[str, ...] = ("auto",)
    seconds: float = 1.5
    profiles: int = 3
    explain: bool = True
    explain_budget: float = 60.0
    repo: Path | None = None
    outputs: tuple[tuple[str, Path | None], ...] = ()


@dataclass(frozen=True, slots=True)
class Explained:
    """Each asked stage's explanation, and the title naming both revisions."""

    explanations: tuple[StageExplanation, ...]
    title: str

    @property
    def failed(self) -> bool:
        """No stage could be profiled (the first one's reason says why)."""
        return bool(self.explanations) and not any(e.available for e in self.explanations)


def prepared(request: ExplainRequest) -> ExplainRequest:
    """``request`` checked before any work, with its suite (the installed default when not given).

    Raises:
        InputError: a number out of range, the profiling pass switched off, a data file that is
            not there, an output that names an input.
    """
    checked_number(request.seconds, "--seconds", above=0, at_most=3600, what="seconds")
    checked_number(request.profiles, "--profiles", at_least=2, at_most=20)
    checked_number(request.explain_budget, "--explain-budget", above=0, at_most=86_400, what="seconds")
    if not request.explain:
        raise InputError("--no-explain makes perfgate explain do nothing: leave it out", field="--no-explain")
    if request.data is not None and not request.data.exists():
        raise InputError("data file not found", source=str(request.data), field="--data")
    check_distinct(dict(request.outputs), {"--data": request.data})
    return dataclasses.replace(request, suite=request.suite or default_suite())


def explain(request: ExplainRequest, data: Path | None, progress: Callable[[str], None]) -> Explained:
    """Profile the stages of ``request`` in both revisions (the profiling pass ``perfgate ab`` attaches
    to a regressed stage), on ``data`` (None: each side's own), telling ``progress`` what is being done."""
    import secrets

    from perfgate.ab import WORKTREE, ResidentOptions, checkout, git_toplevel, is_dirty, sides
    from perfgate.app.ab import explained_with

    repo = git_toplevel(request.repo if request.repo is not None else Path.cwd())
    current_ref = request.current_ref or (WORKTREE if is_dirty(repo) else "HEAD")
    resident = ResidentOptions(
        model=normalize_model(request.model),
        suite=request.suite or default_suite(),
        stages_modules=request.stages_modules,
        seed=secrets.randbelow(2**31),
        device=request.device,
        params={"quick": True} if request.quick else {},
        data=data,
        time_budget=request.explain_budget,
    )
    with checkout(repo, request.baseline_ref, current_ref) as (base_rev, cur_rev):
        explanations = explained_with(
            sides(base_rev, cur_rev),
            resident,
            list(request.stages) or ["*"],
            request.instruments,
            request.explain_budget,
            progress,
            seconds=request.seconds,
            repeats=request.profiles,
        )
        title = f"baseline {base_rev.ref} ({base_rev.commit[:12]}) → current {cur_rev.ref} ({cur_rev.commit[:12]})"
    return Explained(explanations=explanations, title=title)

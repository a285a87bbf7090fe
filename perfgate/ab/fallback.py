"""Interleaved A/B runs: two revisions measured alternately in one job (``perfgate ab``).

A stored baseline was measured in another process, at another time, often on another
runner; on a shared machine that alone moves timings by up to 2× (``docs/noise.md``).
Measuring both revisions in the same job, alternately, puts them in the
same phases of the machine, and the ratio within each pair cancels the phase.

The contract:

* each revision is checked out into its own temporary git worktree (``WORKTREE`` measures
  the repository's working tree as it is, uncommitted changes included); the worktrees are
  removed again whatever happens (error, Ctrl-C);
* every measurement is a fresh ``python -m perfgate bench --processes 1`` process with its
  working directory and ``PYTHONPATH`` set to that revision's tree (and nothing else), so
  each side runs its own code — its own perfgate when the repository is perfgate, its own
  stage modules (``--stages-module``); flags that revision's perfgate does not know yet
  (``--processes``, ``--config``) are left out, ones that were asked for are an error;
* the processes run in ABBA order (``A B B A A B B A …``, :func:`abba_order`): pair i is
  measurement ``2i`` and ``2i + 1``, and the alternation cancels a linear drift within
  every two pairs as well;
* the A runs and the B runs are combined with :func:`~perfgate.core.noise.combine_repetitions`
  in pair order, so group i of both sides is pair i, which is what
  ``compare_runs(..., paired=True)`` tests on.

The measuring processes get an empty configuration file and no ``PERFGATE_STORE``: A/B runs
are never recorded in a store (they would pollute the baselines' history).

Measured against a stored baseline in ``benchmarks/ab.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.ab import jitcache
from perfgate.ab.resident import Side
from perfgate.ab.workers import last_line as _last_line
from perfgate.core.codec import run_from_dict
from perfgate.core.metrics import MetricInfo
from perfgate.core.noise import combine_repetitions
from perfgate.core.schema import GitInfo, Run, normalize_model
from perfgate.errors import InputError, PerfgateError

__all__ = [
    "DEFAULT_PAIRS",
    "MIN_PAIRS",
    "WORKTREE",
    "AbOptions",
    "AbRuns",
    "Revision",
    "RevisionBench",
    "abba_order",
    "checkout",
    "git_toplevel",
    "is_dirty",
    "measure_interleaved",
    "resolve_commit",
    "revision_bench",
    "run_ab",
    "sides",
]

WORKTREE = "WORKTREE"  # --current-ref value: the working tree as it is, uncommitted changes included
DEFAULT_PAIRS = 6
MIN_PAIRS = 3  # the paired t test needs at least 3 pairs (2 degrees of freedom)

ProgressFn = Callable[[str], None]


def abba_order(pairs: int) -> tuple[str, ...]:
    """The measurement order for ``pairs`` pairs: ``A B B A A B B A …`` (pair i is items 2i, 2i+1).

    Even pairs run A first, odd pairs B first, so neither side is always measured first and
    a drift that is linear over two pairs hits both sides alike.
    """
    if pairs < 1:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    return tuple(side for i in range(pairs) for side in (("A", "B") if i % 2 == 0 else ("B", "A")))


# seconds a measuring process of the process-level engine may always take, whatever is left of the
# budget: a whole `perfgate bench` (imports, set-up, every round) of a revision
PROCESS_FLOOR = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Revision:
    """One side of an A/B run: the ref as given, the commit it names and the tree measured."""

    ref: str
    commit: str
    path: Path
    dirty: bool = False  # the working tree with uncommitted changes (``WORKTREE``)

    @property
    def short(self) -> str:
        return self.commit[:12] + (", with uncommitted changes" if self.dirty else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class AbOptions:
    """What to measure on both sides: the ``perfgate bench`` flags and the number of pairs.

    Attributes:
        model: the model (one; ``all`` is refused: pairs are per model).
        suite: the registered suite to run.
        pairs: pairs of measurements, at least :data:`MIN_PAIRS`.
        stages_modules: modules each side imports to register its stages (``--stages-module``).
        quick: pass ``--quick`` (a smoke run; not for decisions).
        bench_args: further ``perfgate bench`` flags, passed to both sides unchanged.
        python: the interpreter that runs the measuring processes.
        metric_info: metric definitions from the configuration, for decoding the run files.
        time_budget: seconds the check may take (``--time-budget``); with it, each measuring
            process must end by the budget plus its grace, or within :data:`PROCESS_FLOOR`
            seconds of its start when that is later, else it is killed as hung (exit 2).
    """

    model: str
    suite: str = "pipeline"
    pairs: int = DEFAULT_PAIRS
    stages_modules: tuple[str, ...] = ()
    quick: bool = False
    bench_args: tuple[str, ...] = ()
    python: str = field(default_factory=lambda: sys.executable)
    metric_info: Mapping[str, MetricInfo] = field(default_factory=dict)
    time_budget: float | None = None

    def __post_init__(self) -> None:
        if self.pairs < MIN_PAIRS:
            raise InputError(
                f"at least {MIN_PAIRS} pairs are needed for the paired test, got {self.pairs}", field="--pairs"
            )
        if normalize_model(self.model) == "all":
            raise InputError("perfgate ab measures one model at a time; name it", field="--model")


@dataclass(frozen=True, slots=True, kw_only=True)
class AbRuns:
    """The outcome of an interleaved A/B run.

    ``baseline`` and ``current`` are the combined runs (group i = pair i on both sides);
    ``baseline_runs`` and ``current_runs`` the single-process runs in pair order.
    """

    baseline: Run
    current: Run
    baseline_rev: Revision
    current_rev: Revision
    order: tuple[str, ...]
    baseline_runs: tuple[Run, ...]
    current_runs: tuple[Run, ...]

    @property
    def pairs(self) -> int:
        return len(self.baseline_runs)

    def describe(self) -> str:
        """One sentence for the report: what was compared, how, and on which commits."""
        order = "".join(self.order[:8]) + ("…" if len(self.order) > 8 else "")
        return (
            f"interleaved A/B run in one job — baseline `{self.baseline_rev.ref}` ({self.baseline_rev.short}) "
            f"and current `{self.current_rev.ref}` ({self.current_rev.short}) measured alternately in "
            f"{self.pairs} pairs ({order}), each measurement a fresh process in its own tree; "
            "timing metrics compared paired, on the per-pair ratios"
        )


# --- git ------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise PerfgateError(f"cannot run git: {exc}; perfgate ab needs git on PATH") from None


def git_toplevel(path: Path) -> Path:
    """The top of the git repository that holds ``path``."""
    proc = _git(path, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        raise InputError(
            "not inside a git repository; run perfgate ab in one or pass --repo PATH", source=str(path), field="--repo"
        )
    return Path(proc.stdout.strip())


def resolve_commit(repo: Path, ref: str, flag: str) -> str:
    """The full SHA of the commit ``ref`` names in ``repo``; an :class:`InputError` naming it if none."""
    if not ref or ref.startswith("-"):
        raise InputError(f"{ref!r} is not a git ref", field=flag)
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        raise InputError(
            f"git ref {ref!r} names no commit in {repo}; check the branch, tag or SHA "
            "(a shallow CI clone needs it fetched, e.g. fetch-depth: 0)",
            field=flag,
        )
    return proc.stdout.strip()


def is_dirty(repo: Path) -> bool:
    """Whether tracked files have uncommitted changes (untracked files do not count)."""
    proc = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _remove_worktrees(repo: Path, paths: list[Path], tmp: Path) -> None:
    for path in reversed(paths):
        _git(repo, "worktree", "remove", "--force", str(path))
    shutil.rmtree(tmp, ignore_errors=True)
    _git(repo, "worktree", "prune")  # forgets any worktree whose folder is gone (an interrupted add)


@contextmanager
def checkout(repo: Path, baseline_ref: str, current_ref: str) -> Iterator[tuple[Revision, Revision]]:
    """Both revisions of ``repo`` in temporary worktrees, removed on exit however it is left.

    ``current_ref`` may be :data:`WORKTREE`: the repository's own working tree is measured
    in place (commit HEAD, marked dirty when tracked files have changes).

    Both trees are reached through paths of equal length (``…/a`` and ``…/b``; the working
    tree through a link named ``b``): a path's length moves every later allocation of a
    fresh interpreter, and so the memory layout of one side only (``docs/noise.md`` §5).

    Each worktree starts with the numba code compiled by an earlier check of the same git tree,
    and what it compiled is kept for the next (:mod:`perfgate.ab.jitcache`).

    Raises:
        InputError: ``repo`` is not a git repository, or a ref names no commit.
    """
    top = git_toplevel(repo)
    if baseline_ref == WORKTREE:
        raise InputError(f"{WORKTREE} is only for --current-ref; name a commit", field="--baseline-ref")
    base_commit = resolve_commit(top, baseline_ref, "--baseline-ref")
    here = current_ref == WORKTREE
    cur_commit = resolve_commit(top, "HEAD" if here else current_ref, "--current-ref")
    tmp = Path(tempfile.mkdtemp(prefix="perfgate-ab-"))
    added: list[Path] = []
    jit: dict[Path, Path] = {}  # worktree -> the folder its compiled numba code is kept in
    try:
        trees = {}
        for role, commit in (("baseline", base_commit), ("current", None if here else cur_commit)):
            path = tmp / ("a" if role == "baseline" else "b")  # equal lengths: the layout (docstring)
            if commit is None:
                path.symlink_to(top, target_is_directory=True)  # removed with tmp; rmtree does not follow it
                trees[role] = path
                continue
            added.append(path)  # before the add: an interrupted add is cleaned up too
            proc = _git(top, "worktree", "add", "--detach", "--quiet", str(path), commit)
            if proc.returncode != 0:
                raise PerfgateError(f"git worktree add of {commit[:12]} failed: {_last_line(proc.stderr)}")
            trees[role] = path
            folder = _jit_folder(top, commit)
            if folder is not None:
                jitcache.restore(folder, path)
                jit[path] = folder
        baseline = Revision(ref=baseline_ref, commit=base_commit, path=trees["baseline"])
        if here:
            current = Revision(ref=WORKTREE, commit=cur_commit, path=trees["current"], dirty=is_dirty(top))
        else:
            current = Revision(ref=current_ref, commit=cur_commit, path=trees["current"])
        yield baseline, current
    finally:
        for path, folder in jit.items():
            with contextlib.suppress(OSError):
                jitcache.harvest(path, folder)
        _remove_worktrees(top, added, tmp)


def _jit_folder(top: Path, commit: str) -> Path | None:
    """Where the numba code compiled from ``commit``'s tree is kept; None when git cannot name the tree."""
    proc = _git(top, "rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}")
    if proc.returncode != 0:
        return None
    return jitcache.cache_folder(jitcache.cache_root(os.environ), proc.stdout.strip())


# --- measuring ----------------------------------------------------------------------


def _env(rev: Revision) -> dict[str, str]:
    # PERFGATE_STORE is left out: a measuring process records nothing (see the module's docstring)
    # NUMBA_CACHE_DIR too: numba then caches beside the tree's files, where checkout() keys it by tree
    env = {k: v for k, v in os.environ.items() if k not in ("PERFGATE_STORE", "NUMBA_CACHE_DIR")}
    env["PYTHONPATH"] = str(rev.path)  # this revision's code only, never the caller's checkout
    return env


def sides(baseline: Revision, current: Revision) -> tuple[Side, Side]:
    """Both revisions as the resident engine sees them: environments alike but for the tree's path.

    The engine sets the hash seed (one per pair, :mod:`perfgate.ab.layout`).
    ``PYTHONSAFEPATH`` keeps the working folder off ``sys.path``: the tree is imported
    through ``PYTHONPATH``, a path of the same length on both sides, and not through the
    resolved folder, whose length differs when the current side is the working tree.
    """
    out = []
    for role, rev in (("baseline", baseline), ("current", current)):
        env = {**_env(rev), "PYTHONHASHSEED": "0", "PYTHONSAFEPATH": "1"}
        git = GitInfo(commit=rev.commit, branch=None, dirty=rev.dirty)
        out.append(Side(role=role, label=f"{role} `{rev.ref}` ({rev.short})", path=rev.path, env=env, git=git))
    return out[0], out[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class RevisionBench:
    """``perfgate bench`` of one revision, run in its own tree; made by :func:`revision_bench`.

    ``flags`` are the optional flags that revision's perfgate knows (older ones lack some).
    """

    rev: Revision
    options: AbOptions
    label: str
    flags: frozenset[str]

    def argv(self, output: Path, config: Path) -> list[str]:
        o = self.options
        argv = [o.python, "-m", "perfgate", "bench", "--model", o.model, "--suite", o.suite, "--output", str(output)]
        if "--processes" in self.flags:
            argv += ["--processes", "1"]  # one process per measurement: the pairing is ours
        if "--config" in self.flags:
            argv += ["--config", str(config)]
        for module in o.stages_modules:
            argv += ["--stages-module", module]
        if o.quick:
            argv.append("--quick")
        return [*argv, *o.bench_args]

    def measure(self, output: Path, *, what: str = "a measurement", timeout: float | None = None) -> Run:
        """One fresh measuring process; its run file goes to ``output``.

        The process gets an empty configuration file beside ``output``, so it records
        nothing in a configured store. ``timeout``: seconds it may run before it is killed as
        hung (None: no limit).
        """
        config = output.parent / "perfgate-ab.toml"
        if not config.exists():
            config.write_text("# perfgate ab: the measuring processes use no store\n", encoding="utf-8")
        try:
            proc = subprocess.run(
                self.argv(output, config),
                cwd=self.rev.path,
                env=_env(self.rev),
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            told = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            raise PerfgateError(
                f"perfgate bench for the {self.label} `{self.rev.ref}` ({self.rev.short}) did not finish {what} "
                f"within {timeout:.0f} s (the --time-budget plus its grace); a stage hangs, or, if it is only slow, "
                f"give a larger --time-budget: {_last_line(told)}"
            ) from None
        if proc.returncode != 0 or not output.exists():
            raise PerfgateError(
                f"perfgate bench failed for the {self.label} `{self.rev.ref}` ({self.rev.short}) in {what} "
                f"(exit {proc.returncode}): {_last_line(proc.stderr)}"
            )
        doc = json.loads(output.read_text(encoding="utf-8"))
        return run_from_dict(doc, source=str(output), metric_info=self.options.metric_info)


def revision_bench(rev: Revision, options: AbOptions, label: str) -> RevisionBench:
    """Check that ``perfgate bench`` starts in ``rev``'s tree and learn which flags it knows.

    Raises:
        InputError: that perfgate lacks ``--stages-module`` or ``--quick`` and they were asked for.
        PerfgateError: it does not start at all.
    """
    proc = subprocess.run(
        [options.python, "-m", "perfgate", "bench", "--help"],
        cwd=rev.path,
        env=_env(rev),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise PerfgateError(
            f"perfgate bench does not start for the {label} `{rev.ref}` ({rev.short}): {_last_line(proc.stderr)}"
        )
    flags = frozenset(f for f in ("--processes", "--stages-module", "--config", "--quick") if f in proc.stdout)
    for flag, asked in (("--stages-module", bool(options.stages_modules)), ("--quick", options.quick)):
        if asked and flag not in flags:
            raise InputError(
                f"the perfgate that measures the {label} `{rev.ref}` ({rev.short}) has no {flag}; "
                "leave it out or compare newer revisions",
                field=flag,
            )
    return RevisionBench(rev=rev, options=options, label=label, flags=flags)


def _with_ab(run: Run, role: str, rev: Revision, order: tuple[str, ...]) -> Run:
    info = {"role": role, "ref": rev.ref, "commit": rev.commit, "dirty": rev.dirty, "order": "".join(order)}
    return dataclasses.replace(run, config={**run.config, "ab": info})


def measure_interleaved(
    baseline: Revision,
    current: Revision,
    options: AbOptions,
    *,
    run_id: str | None = None,
    progress: ProgressFn | None = None,
) -> AbRuns:
    """Measure both revisions alternately in ABBA order and combine each side's runs by pair.

    Raises:
        InputError: a revision's perfgate lacks a flag that was asked for.
        PerfgateError: a measuring process failed (its error line is in the message).
    """
    benches = {"A": revision_bench(baseline, options, "baseline"), "B": revision_bench(current, options, "current")}
    order = abba_order(options.pairs)
    runs: dict[str, list[Run]] = {"A": [], "B": []}
    deadline = None
    if options.time_budget is not None:
        deadline = time.monotonic() + options.time_budget + max(10.0, 0.25 * options.time_budget)
    with tempfile.TemporaryDirectory(prefix="perfgate-ab-runs-") as tmp:
        for i, side in enumerate(order):
            bench = benches[side]
            what = f"measurement {i + 1} of {len(order)}"
            timeout = None if deadline is None else max(deadline - time.monotonic(), PROCESS_FLOOR)
            runs[side].append(bench.measure(Path(tmp) / f"{i:03d}-{side}.json", what=what, timeout=timeout))
            if progress is not None:
                progress(f"{i + 1}/{len(order)} {side} ({bench.label} {bench.rev.ref})")
    rid = run_id or uuid.uuid4().hex
    return AbRuns(
        baseline=_with_ab(combine_repetitions(runs["A"], run_id=f"{rid}-a"), "baseline", baseline, order),
        current=_with_ab(combine_repetitions(runs["B"], run_id=f"{rid}-b"), "current", current, order),
        baseline_rev=baseline,
        current_rev=current,
        order=order,
        baseline_runs=tuple(runs["A"]),
        current_runs=tuple(runs["B"]),
    )


def run_ab(
    repo: Path,
    baseline_ref: str,
    current_ref: str,
    options: AbOptions,
    *,
    run_id: str | None = None,
    progress: ProgressFn | None = None,
) -> AbRuns:
    """Check out both refs of ``repo``, measure them interleaved, and remove the worktrees."""
    with checkout(repo, baseline_ref, current_ref) as (baseline, current):
        return measure_interleaved(baseline, current, options, run_id=run_id, progress=progress)

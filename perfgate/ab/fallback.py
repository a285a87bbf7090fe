"""The fallback engine of ``perfgate ab``: one whole measuring process per measurement, alternating A B B A.

A revision whose perfgate predates the resident worker (:mod:`perfgate.ab.resident`) is
measured this older way, far less sensitive: one fresh process per measurement. In a tree
that has the bench worker (:mod:`perfgate.workers.bench`), or one without perfgate of its own
(its processes import the installed perfgate), that process is a bench worker, its job on
standard input (:mod:`perfgate.workers.protocol`); in an older perfgate's tree it is that
perfgate's own ``python -m perfgate bench``, with the flags it knows.

A stored baseline was measured in another process, at another time, often on another
runner; on a shared machine that alone moves timings by up to 2× (``docs/noise.md``).
Measuring both revisions in the same job, alternately, puts them in the
same phases of the machine, and the ratio within each pair cancels the phase.

The contract:

* each revision is checked out into its own temporary git worktree
  (:func:`perfgate.ab.revisions.checkout`);
* every measurement is a fresh process (a bench worker, or an older tree's ``python -m perfgate
  bench --processes 1``) with its working directory and ``PYTHONPATH`` set to that revision's
  tree (and nothing else), so each side runs its own code — its own perfgate when the repository
  is perfgate, its own stage modules (``--stages-module``); flags that an older revision's
  perfgate does not know yet (``--processes``, ``--config``) are left out, ones that were asked
  for are an error;
* the processes run in ABBA order (``A B B A A B B A …``, :func:`abba_order`): pair i is
  measurement ``2i`` and ``2i + 1``, and the alternation cancels a linear drift within
  every two pairs as well;
* the A runs and the B runs are combined with :func:`~perfgate.core.noise.combine_repetitions`
  in pair order, so group i of both sides is pair i, which is what
  ``compare_runs(..., paired=True)`` tests on.

A bench worker records nothing; an older tree's ``perfgate bench`` gets an empty configuration
file and no ``PERFGATE_STORE``: A/B runs are never recorded in a store (they would pollute the
baselines' history).

Measured against a stored baseline in ``benchmarks/ab.py``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.ab.revisions import Revision, checkout, revision_env
from perfgate.core.codec import run_from_dict
from perfgate.core.metrics import MetricInfo, default_suite
from perfgate.core.noise import combine_repetitions
from perfgate.core.schema import Run, normalize_model
from perfgate.errors import InputError, PerfgateError
from perfgate.workers.measure import BenchJob, MeasureOptions
from perfgate.workers.protocol import last_line as _last_line
from perfgate.workers.repeat import WORKER_MODULE as BENCH_WORKER
from perfgate.workers.spawn import Workers, has_module

__all__ = [
    "DEFAULT_PAIRS",
    "MIN_PAIRS",
    "PROCESS_FLOOR",
    "AbOptions",
    "AbRuns",
    "RevisionBench",
    "abba_order",
    "bench_worker",
    "measure_interleaved",
    "revision_bench",
    "run_ab",
]

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
class AbOptions:
    """What to measure on both sides: the ``perfgate bench`` flags and the number of pairs.

    Attributes:
        model: the model (one; ``all`` is refused: pairs are per model).
        suite: the registered suite to run.
        pairs: pairs of measurements, at least :data:`MIN_PAIRS`.
        stages_modules: modules each side imports to register its stages (``--stages-module``).
        quick: pass ``--quick`` (a smoke run; not for decisions).
        rounds, repeat, device: ``perfgate bench``'s ``--rounds``, ``--repeat`` and ``--device``
            (None: its own), the same on both sides.
        data: the data file both sides read (``--data``, an absolute path; None: their own).
        python: the interpreter that runs the measuring processes.
        metric_info: metric definitions from the configuration, for decoding the run files.
        time_budget: seconds the check may take (``--time-budget``); with it, each measuring
            process must end by the budget plus its grace, or within :data:`PROCESS_FLOOR`
            seconds of its start when that is later, else it is killed as hung (exit 2).
    """

    model: str
    suite: str = field(default_factory=default_suite)
    pairs: int = DEFAULT_PAIRS
    stages_modules: tuple[str, ...] = ()
    quick: bool = False
    rounds: int | None = None
    repeat: int | None = None
    device: str | None = None
    data: Path | None = None
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


@dataclass(frozen=True, slots=True, kw_only=True)
class RevisionBench:
    """One measurement of one revision, run in its own tree; made by :func:`revision_bench`.

    ``worker``: the bench worker's module when the tree has it (or has no perfgate of its own),
    else None: that older perfgate's ``perfgate bench``, of which ``flags`` are the optional flags
    it knows (older ones lack some).
    """

    rev: Revision
    options: AbOptions
    label: str
    flags: frozenset[str]
    worker: str | None = None

    def argv(self, output: Path, config: Path) -> list[str]:
        """The command line of an older tree's ``perfgate bench``."""
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
        return [*argv, *_bench_flags(o)]

    def job(self, output: Path) -> BenchJob:
        """The bench worker's job: the same options as :meth:`argv` gives ``perfgate bench``."""
        o = self.options
        options = MeasureOptions(
            suite=o.suite,
            data=o.data,
            rounds=o.rounds,
            repeat=o.repeat,
            device=o.device if o.device is not None else "cpu",
            quick=o.quick,
            stages_modules=o.stages_modules,
        )
        progress = output.with_name(f"{output.stem}.progress")
        return BenchJob(options=options, model=normalize_model(o.model), output=output, progress=progress)

    def measure(self, output: Path, *, what: str = "a measurement", timeout: float | None = None) -> Run:
        """One fresh measuring process; its run file goes to ``output``.

        An older tree's ``perfgate bench`` gets an empty configuration file beside ``output``, so
        it records nothing in a configured store. ``timeout``: seconds it may run before it is
        killed as hung (None: no limit).
        """
        if self.worker is not None:
            argv = [self.options.python, "-m", self.worker]
            stdin = json.dumps(self.job(output).to_json(), sort_keys=True)  # perfgate.workers.protocol
        else:
            config = output.parent / "perfgate-ab.toml"
            if not config.exists():
                config.write_text("# perfgate ab: the measuring processes use no store\n", encoding="utf-8")
            argv, stdin = self.argv(output, config), ""
        try:
            with Workers() as owner:  # ended with the check, however it is left
                proc = owner.run(argv, input=stdin, cwd=self.rev.path, env=revision_env(self.rev), timeout=timeout)
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


def _bench_flags(options: AbOptions) -> list[str]:
    out: list[str] = []
    if options.rounds is not None:
        out += ["--rounds", str(options.rounds)]
    if options.repeat is not None:
        out += ["--repeat", str(options.repeat)]
    if options.device is not None:
        out += ["--device", options.device]
    if options.data is not None:
        out += ["--data", str(options.data)]
    return out


def bench_worker(tree: Path) -> str | None:
    """The bench worker's module in ``tree``: the tree's own, or the installed perfgate's when the tree
    has no perfgate; None in an older perfgate's tree, which has only ``perfgate bench``."""
    if has_module(tree, BENCH_WORKER) or not (tree / "perfgate").is_dir():
        return BENCH_WORKER
    return None


def revision_bench(rev: Revision, options: AbOptions, label: str) -> RevisionBench:
    """How ``rev`` is measured: a bench worker where the tree has one; else check that ``perfgate
    bench`` starts in ``rev``'s tree and learn which flags it knows.

    Raises:
        InputError: that perfgate lacks ``--stages-module`` or ``--quick`` and they were asked for.
        PerfgateError: it does not start at all.
    """
    worker = bench_worker(rev.path)
    if worker is not None:
        return RevisionBench(rev=rev, options=options, label=label, flags=frozenset(), worker=worker)
    proc = subprocess.run(
        [options.python, "-m", "perfgate", "bench", "--help"],
        cwd=rev.path,
        env=revision_env(rev),
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

"""Counted worker processes under callgrind, their dumps turned into runs (``bench`` and ``ab --measure counts``).

Each process (at least two per run) runs :mod:`perfgate.workers.count` under
``valgrind --tool=callgrind`` with nothing instrumented until its stages are set up and
warmed up (:mod:`perfgate.bench.counting`), the simulated caches' geometry given explicitly
(:data:`perfgate.bench.callgrind.CACHE`), and its own draw of what must not make a
systematic difference between revisions: the hash seed, the heap offset and the stack
padding (:func:`perfgate.workers.layout.draw`, the randomiser ``perfgate ab`` uses). Thread
counts are pinned to one (BLAS, OpenMP, numba, torch), and recorded. The processes run side
by side, one per CPU: a count is what one process executed on its simulated CPU, and other
processes on the machine do not change it (measured: ``docs/design.md`` §12).

In ``ab``, pair ``i`` is one process of each revision, started in the order
:func:`perfgate.workers.layout.start_order` draws, with the layouts the timed paired gate gives
its workers (:mod:`perfgate.ab.counts`); each revision's processes become one run, checked like
two stored runs of counts.

Per stage and counted call the run keeps ``<stem>_instructions`` (Ir) and
``<stem>_est_cycles`` (:func:`perfgate.bench.callgrind.est_cycles`), each with the switch's
own cost (the median of the empty calls of that process) taken off; the samples of one
process form one group, so the decision sees the residue *between* processes
(:mod:`perfgate.core.decision._counts`). The run records no times. The valgrind version and the
cache geometry go to the run's ``software``, so a change of either is an environment
change the report names. A stage whose time counts cannot see (``Stage.uncounted``: TFT's
training step, bound by memory bandwidth) is left out unless asked, and the run says so.

Nothing is written unless every process finished: a process that fails raises
:class:`~perfgate.errors.PerfgateError` naming the stage and step it died in and the last
line valgrind wrote. Every process, counted or preparing, is started through one owner
(:class:`perfgate.workers.spawn.Workers`, the timed ``ab``'s too): however the command is left, at
an error, Ctrl-C or SIGTERM to perfgate's process alone, it kills them all at once, and
their folders are removed (``docs/limits.md``).

**Set-up products made natively.** When a stage keeps an expensive set-up product
(``Stage.prepares``: PPO's first rollout), one native process per revision
(:mod:`perfgate.workers.prepare`, no valgrind, the same job and thread pins) runs the
set-ups first and saves the products in a folder of its own, named by the revision and a
hash of the job. That revision's counted processes load them from it; the folder is made
read-only, its digest is checked after the counted processes and it is removed with the run.
Products are never shared between revisions: each side of ``ab`` prepares with its own code.
``bench`` asks for the native pass only when one of the model's stages prepares or the suite
uses numba; ``ab`` asks each revision, whose native process ends at once, having set nothing
up, when there is nothing to do.

**numba compiled natively**: the native pass also calls each counted stage once with numba
set to compile for the CPU valgrind presents (:func:`perfgate.bench.callgrind.valgrind_jit_target`),
into the cache the counted processes read.

Internal: shared with ``ab``, ``app``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from perfgate.bench.callgrind import (
    CACHE,
    EVENTS,
    THREADS_ENV,
    est_cycles,
    find_valgrind,
    read_dump,
    valgrind_argv,
    valgrind_jit_target,
    valgrind_version,
)
from perfgate.bench.counting import NULL_LABEL
from perfgate.core.metrics import Direction
from perfgate.core.schema import GitInfo, Machine, Metric, Run
from perfgate.errors import InputError, PerfgateError
from perfgate.workers import spawn
from perfgate.workers.layout import Layout, draw, worker_args
from perfgate.workers.spawn import Workers, module_in, module_missing, run_job

__all__ = [
    "COUNTS_DEFINITION",
    "CYCLES_DEFINITION",
    "HERE",
    "MIN_PROCESSES",
    "OLD_MODULES",
    "PREPARE_MODULE",
    "WORKER_MODULE",
    "CountSide",
    "Counted",
    "Products",
    "count_process",
    "count_stem",
    "counts_job",
    "counts_machine",
    "counts_run",
    "default_jobs",
    "in_parallel",
    "measure_counts",
    "prepared",
]

WORKER_MODULE = "perfgate.workers.count"
PREPARE_MODULE = "perfgate.workers.prepare"  # the native pass (set-up products), no valgrind
# their names in older revisions of perfgate, newest first (``ab --measure counts`` of an older
# commit starts the worker its own tree has): a protocol between versions, not an import
OLD_MODULES: Mapping[str, tuple[str, ...]] = {
    WORKER_MODULE: ("perfgate.cli.countworker", "perfgate.cli._countworker"),
    PREPARE_MODULE: ("perfgate.cli.prepareworker", "perfgate.cli._prepareworker"),
}

MIN_PROCESSES = 2
CYCLES_DEFINITION = (
    "L1 hits + 5 × LL hits + 35 × RAM accesses, from callgrind's simulated caches "
    "(the weights of iai-callgrind/gungraun and CodSpeed)"
)
COUNTS_DEFINITION = (
    "counts, not times: instructions executed and estimated cycles per call under valgrind's callgrind; "
    "they do not see memory bandwidth, contention, threads, system calls, I/O, GPU kernels or tails"
)
_SUFFIXES = ("_ms", "_us", "_ns", "_s")
_T = TypeVar("_T")


def count_stem(metric: str) -> str:
    """The stem a stage's counts are named by: its time metric without the unit and ``_time``
    (``feature_extraction_time_ms`` -> ``feature_extraction``)."""
    stem = metric
    for suffix in _SUFFIXES:
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem.endswith("_time") and len(stem) > len("_time"):
        stem = stem[: -len("_time")]
    return stem


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        line = line.split("== ", 1)[1] if line.startswith("==") and "== " in line else line
        if line.strip():
            return line.strip()
    return "nothing"


def _valgrind_said(log: str) -> str:
    """The line of valgrind's log that says why a process ended: "Process terminating with ..." and
    its reason when there is one, otherwise the last line before callgrind's closing totals."""
    lines = [line.split("== ", 1)[1] if line.startswith("==") and "== " in line else line for line in log.splitlines()]
    lines = [line.strip() for line in lines]
    closing = next((i for i, line in enumerate(lines) if line.startswith("Events    :")), len(lines))
    banner = next((i + 1 for i, line in enumerate(lines) if line.startswith("For interactive control")), 0)
    lines = [line for line in lines[banner:closing] if line]
    for i, line in enumerate(lines):
        if line.startswith("Process terminating"):
            reason = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith(("at 0x", "by 0x")) else ""
            return f"{line}: {reason}" if reason else line
    return lines[-1] if lines else "nothing after its start-up banner"


def _text(out: str | bytes | None) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")


def _failure(
    i: int,
    model: str,
    done: subprocess.CompletedProcess[str],
    progress: Path,
    log: Path,
    side: str = "",
    *,
    hung_after: float | None = None,
) -> PerfgateError:
    steps = progress.read_text(encoding="utf-8", errors="replace").splitlines() if progress.exists() else []
    step, _, stage = (steps[-1] if steps else "start-up\t").partition("\t")
    failed = f"hung for {hung_after:g} s (docs/limits.md)" if hung_after is not None else "failed"
    where = f"stage {stage!r} {failed} during {step}" if stage else f"the process {failed} during {step}"
    log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    own = _last_line(done.stderr) if done.stderr.strip() else ""
    if own.startswith("perfgate bench: error: "):
        own = own.removeprefix("perfgate bench: error: ")
    said = f": {own}" if own and own != "nothing" else ""
    return PerfgateError(
        f"{where} under valgrind (counted process {i + 1} of {model}{f', {side}' if side else ''}, "
        f"exit {done.returncode}){said}; "
        f"valgrind said: {_valgrind_said(log_text)}"
    )


def _read_process(folder: Path, result: Mapping[str, Any]) -> dict[str, list[dict[str, int]]]:
    """Every counted call's events by dump label, in the order the worker dumped them."""
    dumps = sorted((d for p in folder.glob("callgrind.out.*") if (d := read_dump(p)) is not None), key=lambda d: d.part)
    expected = [label for label, calls in result["dumps"] for _ in range(int(calls))]
    got = [d.label for d in dumps]
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), None)
        at = first if first is not None else min(len(got), len(expected))
        raise PerfgateError(
            f"callgrind wrote {len(got)} counted dumps, expected {len(expected)} (they differ from dump {at + 1} on)"
        )
    calls: dict[str, list[dict[str, int]]] = {}
    for d in dumps:
        calls.setdefault(d.label, []).append(dict(d.events))
    return calls


@dataclass(frozen=True, slots=True)
class Counted:
    """What one counted process gave: its layout, its stages, and every counted call's events."""

    layout: Layout
    stages: list[dict[str, str]]
    left_out: list[dict[str, str]]
    calls: dict[str, list[dict[str, int]]]
    seconds: float
    isa: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CountSide:
    """Where a counted process runs: the folder it starts in and its environment (``None``: this process's)."""

    label: str
    cwd: Path | None = None
    env: Mapping[str, str] | None = None


HERE = CountSide(label="")


@dataclass(slots=True, kw_only=True)
class Products:
    """What one revision's native pass made: the folder its counted processes read, if any."""

    side: CountSide
    folder: Path | None = None
    stages: list[str] = field(default_factory=list)
    seconds: float = 0.0
    digest: str = ""
    called: list[str] = field(default_factory=list)  # stages called for numba (compiled for jit_cpu)
    jit_cpu: str = ""

    def job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """The counted processes' job: ``job`` and, when there are products, their folder."""
        return {**job, "prepared": str(self.folder)} if self.folder is not None else dict(job)

    def record(self) -> dict[str, Any]:
        """What the run says about it (``config.counts.prepared_natively``)."""
        return {"stages": list(self.stages), "seconds": round(self.seconds, 1), "sha256": self.digest}

    def compiled(self) -> dict[str, Any]:
        """What the run says about the numba kernels compiled natively (``config.counts.compiled_natively``)."""
        return {"numba_cpu": self.jit_cpu, "stages_called": list(self.called), "seconds": round(self.seconds, 1)}


def _digest(folder: Path) -> str:
    """One hash of every file under ``folder``: relative paths and contents."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _read_only(folder: Path, on: bool = True) -> None:
    """Files and folders under ``folder`` (and ``folder``) made read-only, or writable again."""
    write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for path in [*folder.rglob("*"), folder]:
        mode = path.stat().st_mode
        path.chmod(mode & ~write if on else mode | stat.S_IWUSR)


def _product_key(job: Mapping[str, Any], model: str, side: CountSide) -> str:
    """A name for a revision's products: the side and a hash of everything they are made from."""
    what = {**job, "model": model, "side": side.label, "cwd": str(side.cwd or Path.cwd())}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:12]
    label = re.sub(r"[^A-Za-z0-9]+", "-", side.label).strip("-")[:40]
    return f"{label}-{digest}" if label else digest


def _prepare(
    job: Mapping[str, Any],
    model: str,
    side: CountSide,
    root: Path,
    owner: Workers,
    jit: Mapping[str, str] | None = None,
) -> Products:
    """Run one revision's native pass into a new folder under ``root``; no folder when no stage prepares.

    ``jit``: the numba environment of valgrind's CPU (:func:`valgrind_jit_target`); the pass then
    also calls each counted stage once, compiling its cached kernels for that CPU."""
    t0 = time.perf_counter()
    folder = root / _product_key(job, model, side)
    folder.mkdir()
    products = Products(side=side)
    with tempfile.TemporaryDirectory(prefix="perfgate-prepare-") as tmp:
        out, progress = Path(tmp) / "result.json", Path(tmp) / "progress.txt"
        env = {**(side.env if side.env is not None else os.environ), **THREADS_ENV, **(jit or {})}
        payload = {
            **job,
            "model": model,
            "prepared": str(folder),
            "compile": bool(jit),
            "output": str(out),
            "progress": str(progress),
        }
        module = module_in(side.cwd, PREPARE_MODULE, OLD_MODULES[PREPARE_MODULE])
        argv = [sys.executable, "-m", module]
        try:
            done = run_job(owner, argv, payload, env, side.cwd)
        except subprocess.TimeoutExpired as exc:
            said = f"hung for {spawn.PROCESS_DEADLINE:g} s (docs/limits.md)"
            done = subprocess.CompletedProcess(argv, -9, _text(exc.stdout), f"{_text(exc.stderr)}\n{said}")
        if done.returncode != 0 or not out.exists():
            if module_missing(done.stderr, module):
                # a revision that predates set-up products: nothing to prepare, its counted
                # processes set everything up themselves
                shutil.rmtree(folder)
                return products
            steps = progress.read_text(encoding="utf-8", errors="replace").splitlines() if progress.exists() else []
            step, _, stage = (steps[-1] if steps else "").partition("\t")
            where = f"stage {stage!r}" if stage else "the process"
            of = f"{model}{f', {side.label}' if side.label else ''}"
            if step == "native call":
                what = (
                    "its native call (each counted stage is called once without valgrind first, compiling numba's "
                    f"kernels for the counted processes of {of}"
                )
            else:
                what = f"its native set-up (the set-ups that prepare products for the counted processes of {of} run "
                what += "once without valgrind first"
            own = _last_line(done.stderr).removeprefix("perfgate bench: error: ")
            raise PerfgateError(f"{where} failed during {what}, exit {done.returncode}): {own}")
        result = json.loads(out.read_text())
        products.stages = list(result["prepared"])
        products.called = list(result.get("called", []))  # an older revision's pass calls nothing
        if jit and products.called:
            products.jit_cpu = jit["NUMBA_CPU_NAME"]
    products.seconds = time.perf_counter() - t0
    if not products.stages:
        shutil.rmtree(folder)
        return products
    products.folder = folder
    products.digest = _digest(folder)
    _read_only(folder)
    return products


@contextlib.contextmanager
def prepared(
    job: Mapping[str, Any],
    model: str,
    sides: Sequence[CountSide],
    wanted: bool,
    progress: Callable[[str], None] | None,
    owner: Workers,
    valgrind: str | None = None,
) -> Iterator[list[Products]]:
    """Each side's native pass (side by side), its products kept while the counted processes run.

    On leaving, every folder's digest is checked (a counted process must not have changed
    what it read) and the folders are removed. ``wanted`` False: no native pass at all.
    ``valgrind``: the pass also compiles numba's cached kernels for the CPU it presents.
    """
    if not wanted:
        yield [Products(side=side) for side in sides]
        return
    jit = valgrind_jit_target(valgrind, os.environ) if valgrind else None
    root = Path(tempfile.mkdtemp(prefix="perfgate-prepared-"))
    try:
        made = in_parallel([functools.partial(_prepare, job, model, side, root, owner, jit) for side in sides], owner)
        for p in made:
            where = f" for the {p.side.label}" if p.side.label else ""
            if p.stages and progress:
                progress(f"{model}: set up {', '.join(p.stages)} natively{where} in {p.seconds:.1f} s")
            if p.called and progress:
                progress(
                    f"{model}: called {', '.join(p.called)} natively{where}, numba compiling for valgrind's CPU "
                    f"({p.jit_cpu}), in {p.seconds:.1f} s"
                )
        yield made
        for p in made:
            if p.folder is not None and _digest(p.folder) != p.digest:
                raise PerfgateError(
                    f"the set-up products of {', '.join(p.stages)} changed while the counted processes of {model} "
                    "read them: they are read-only; a set-up must only load them"
                )
    finally:
        with contextlib.suppress(OSError):
            _read_only(root, on=False)  # a read-only folder's files cannot be removed
        shutil.rmtree(root, ignore_errors=True)


def count_process(
    i: int,
    job: Mapping[str, Any],
    valgrind: str,
    model: str,
    layout: Layout,
    owner: Workers,
    side: CountSide = HERE,
) -> Counted:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="perfgate-counts-") as tmp:
        folder = Path(tmp)
        out, progress, log = folder / "result.json", folder / "progress.txt", folder / "valgrind.log"
        env = layout.env({**(side.env if side.env is not None else os.environ), **THREADS_ENV})
        argv = [
            *valgrind_argv(valgrind, folder / "callgrind.out", log),
            sys.executable,
            *worker_args(module := module_in(side.cwd, WORKER_MODULE, OLD_MODULES[WORKER_MODULE]), randomise=True),
        ]
        payload = {**job, "model": model, "output": str(out), "progress": str(progress)}
        try:
            done = run_job(owner, argv, payload, env, side.cwd)
        except subprocess.TimeoutExpired as exc:
            hung = subprocess.CompletedProcess(argv, -9, _text(exc.stdout), _text(exc.stderr))
            raise _failure(i, model, hung, progress, log, side.label, hung_after=spawn.PROCESS_DEADLINE) from None
        if done.returncode != 0 or not out.exists():
            if module_missing(done.stderr, module) or "No module named 'perfgate.cli" in done.stderr:
                raise InputError(
                    f"the {side.label or 'measured'} revision's perfgate has no counted worker (it predates "
                    "--measure counts): count each revision with `perfgate bench --measure counts` and check the "
                    "two runs, or compare times",
                    field="--measure",
                )
            raise _failure(i, model, done, progress, log, side.label)
        result = json.loads(out.read_text())
        return Counted(
            layout=layout,
            stages=list(result["stages"]),
            left_out=list(result.get("left_out", [])),
            calls=_read_process(folder, result),
            seconds=time.perf_counter() - t0,
            isa=tuple(result.get("isa", ())),
        )


def in_parallel(tasks: Sequence[Callable[[], _T]], owner: Workers, jobs: int | None = None) -> list[_T]:
    """Run ``tasks`` (each starts its processes through ``owner``) ``jobs`` at a time (default:
    all at once), in order; the first failure is raised once every started process has ended,
    and no task starts after it.

    An interrupt of this thread (Ctrl-C, or SIGTERM, which perfgate's commands turn into one)
    ends every process at once (:meth:`~perfgate.workers.spawn.Workers.end`) before
    it waits for the threads: they return as soon as their processes are gone, and what they
    made is removed. Otherwise it would wait for processes that may run to their deadline.

    Running them side by side changes no count: callgrind counts what one process executes on
    its one simulated CPU, whatever else the machine runs (``docs/design.md`` §12).
    """
    jobs = len(tasks) if jobs is None else jobs
    if jobs <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    failed = threading.Event()

    def guarded(task: Callable[[], _T]) -> _T | None:
        if failed.is_set():
            return None
        try:
            return task()
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        try:
            futures = [pool.submit(guarded, task) for task in tasks]
            pending: set[Future[_T | None]] = set(futures)
            while pending:  # with a timeout: this thread runs its signal handlers in between
                pending = wait(pending, timeout=0.5).not_done
        except BaseException:
            failed.set()
            owner.end()
            raise
    for future in futures:
        if future.exception() is not None:
            raise future.exception()  # type: ignore[misc]
    return [f.result() for f in futures]  # type: ignore[misc]


def default_jobs(processes: int) -> int:
    """Counted processes run side by side: as many as there are CPUs, at most ``processes``."""
    return max(1, min(processes, os.cpu_count() or 1))


def _per_call(calls: list[dict[str, int]], switch: list[dict[str, int]]) -> tuple[list[float], list[float]]:
    """Instructions and estimated cycles of each call, the switch's median cost taken off."""
    ir0 = statistics.median(c.get("Ir", 0) for c in switch)
    cyc0 = statistics.median(est_cycles(c) for c in switch)
    return (
        [float(max(c.get("Ir", 0) - ir0, 0)) for c in calls],
        [float(max(est_cycles(c) - cyc0, 0)) for c in calls],
    )


def counts_job(
    *,
    suite: str,
    stages_modules: Sequence[str],
    data: Path | str | None,
    seed: int,
    params: Mapping[str, object],
    warmup: int | None,
    calls: int,
    count_all: bool = False,
) -> dict[str, Any]:
    """What every counted process of :func:`measure_counts` is asked to do (one thread, always)."""
    return {
        "suite": suite,
        "stages_module": list(stages_modules),
        "data": str(Path(data).resolve()) if data is not None else None,
        "seed": seed,
        "params": {**params, "threads": 1},
        "warmup": warmup,
        "calls": calls,
        "count_all": count_all,
    }


def measure_counts(
    job: Mapping[str, Any],
    model: str,
    *,
    processes: int,
    run_id: str,
    created_at: str,
    git: GitInfo,
    machine: Mapping[str, Any],
    software: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    jobs: int | None = None,
    prepare: bool = True,
) -> Run:
    """Count ``model``'s stages in ``processes`` valgrind processes, ``jobs`` at a time, into one run.

    ``job`` holds the worker's options as JSON values: ``suite``, ``stages_module`` (a list),
    ``data`` (a path or None), ``seed``, ``params``, ``warmup`` (None: each stage's own, else 2),
    ``calls`` (counted calls per stage and process) and ``count_all`` (count the stages that
    say counts cannot see their time too). ``prepare``: run the native pass first (it sets
    nothing up when no stage prepares and numba is not there to compile for valgrind's CPU);
    False where the caller knows that there is nothing for it to do.
    """
    valgrind = find_valgrind()
    version = valgrind_version(valgrind)
    processes = max(processes, MIN_PROCESSES)
    layout_seed = secrets.randbelow(2**63)
    done = [0]
    lock = threading.Lock()
    # the owner of every process: leaving it, however, kills what still runs
    with Workers() as owner, prepared(job, model, [HERE], prepare, progress, owner, valgrind) as (products,):
        counted_job = products.job(job)

        def one(i: int) -> Callable[[], Counted]:
            def task() -> Counted:
                # each process its own draw of heap offset, stack padding and hash seed (perfgate.workers.layout)
                counted = count_process(i, counted_job, valgrind, model, draw(layout_seed, i, "A"), owner)
                with lock:
                    done[0] += 1
                    if progress:
                        progress(f"{model}: counted process {done[0]} of {processes} in {counted.seconds:.1f} s")
                return counted

            return task

        counted = in_parallel(
            [one(i) for i in range(processes)], owner, jobs if jobs is not None else default_jobs(processes)
        )
    return counts_run(
        counted,
        job,
        model,
        run_id=run_id,
        created_at=created_at,
        git=git,
        machine=machine,
        software={**software, "valgrind": version},
        config=config,
        prepared=products,
    )


def counts_machine(machine: Mapping[str, Any], isa: Sequence[str]) -> Machine:
    """The machine of a counts run: fingerprinted by what a count depends on, not by the host.

    A count depends on the instructions the code executes, and so on the architecture and the
    instruction-set extensions valgrind presents (numpy, BLAS and torch pick their code paths
    from them; valgrind hides AVX-512), not on the CPU model, its clock, core count or memory:
    the simulated caches are given explicitly. Two hosts that present the same extensions get
    one fingerprint, ``counts-`` and a hash of both; the host's own fingerprint is kept as a detail.
    """
    details = {k: v for k, v in machine.items() if k != "fingerprint"}
    arch = str(machine.get("arch") or platform.machine())
    digest = hashlib.sha256(json.dumps([arch, sorted(isa)]).encode()).hexdigest()[:12]
    details.update(host_fingerprint=machine.get("fingerprint"), counts_isa=" ".join(sorted(isa)) or "unknown")
    return Machine(fingerprint=f"counts-{digest}", details=details)


def counts_run(
    counted: Sequence[Counted],
    job: Mapping[str, Any],
    model: str,
    *,
    run_id: str,
    created_at: str,
    git: GitInfo,
    machine: Mapping[str, Any],
    software: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
    prepared: Products | None = None,
) -> Run:
    """One run of counts from its processes (each process's calls one group of every metric)."""
    processes = len(counted)
    samples: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    overhead: list[dict[str, float]] = []
    stages = counted[0].stages
    left_out = counted[0].left_out
    if not stages:
        why = "; ".join(f"{st['name']}: {st['why']}" for st in left_out) or "the suite has no stage for it"
        raise InputError(
            f"no stage of {model} can be counted ({why}); add --count-all-stages to count them anyway, or measure "
            "times (--measure times)",
            field="--measure",
        )
    for c in counted:
        switch = c.calls[NULL_LABEL]
        overhead.append(
            {
                "instructions": statistics.median(x.get("Ir", 0) for x in switch),
                "est_cycles": statistics.median(est_cycles(x) for x in switch),
            }
        )
        for st in c.stages:
            stem = count_stem(st["metric"])
            ir, cycles = _per_call(c.calls[f"stage:{st['name']}"], switch)
            samples.setdefault(f"{stem}_instructions", []).extend(ir)
            samples.setdefault(f"{stem}_est_cycles", []).extend(cycles)
            units[f"{stem}_instructions"], units[f"{stem}_est_cycles"] = "instructions", "cycles"
    calls_per_stage = int(job["calls"])
    # a stage that counts fewer calls than --repeat asks (Stage.counted_calls) says so
    own_calls = {st["name"]: int(st["calls"]) for st in stages if st.get("calls") is not None}
    # a stage whose counts do not track its time (Stage.counts_informational): reported, never gates
    informational = [st for st in stages if st.get("informational")]
    info_names = {
        f"{count_stem(st['metric'])}_{kind}" for st in informational for kind in ("instructions", "est_cycles")
    }
    metrics = {
        name: Metric(
            name=name,
            unit=units[name],
            direction=Direction.INFO if name in info_names else Direction.LOWER,
            samples=tuple(values),
            groups=tuple(len(values) // processes for _ in range(processes)),
        )
        for name, values in samples.items()
    }
    geometry = " ".join(f"{level}={CACHE[level]}" for level in ("I1", "D1", "LL"))
    run_config: dict[str, Any] = {
        "measure": "counts",
        "seed": job["seed"],
        "device": "cpu",
        "processes": processes,
        "counts": {
            "definition": COUNTS_DEFINITION,
            "est_cycles": CYCLES_DEFINITION,
            "events": list(EVENTS),
            "calls_per_stage": calls_per_stage,
            **({"calls_of_stage": own_calls} if own_calls else {}),
            "warmup": job["warmup"] if job["warmup"] is not None else "each stage's own, else 2",
            "cache": dict(CACHE),
            "threads": 1,
            "layouts": [c.layout.record() for c in counted],
            "switch": "valgrind client requests from inside the process (perfgate.bench.callgrind)",
            "switch_cost_subtracted": overhead,
            "left_out": [dict(st) for st in left_out],
            "informational": [
                {"name": st["name"], "metric": st["metric"], "why": st["informational"]} for st in informational
            ],
            "process_seconds": [round(c.seconds, 1) for c in counted],
            **({"prepared_natively": prepared.record()} if prepared is not None and prepared.stages else {}),
            **({"compiled_natively": prepared.compiled()} if prepared is not None and prepared.called else {}),
        },
        "stages": {
            st["name"]: {
                "instructions": f"{count_stem(st['metric'])}_instructions",
                "est_cycles": f"{count_stem(st['metric'])}_est_cycles",
            }
            for st in stages
        },
        **(config or {}),
    }
    if job.get("data"):
        run_config.setdefault("data", str(job["data"]))
    return Run(
        measure="counts",
        run_id=run_id,
        suite=str(job["suite"]),
        model=model,
        created_at=created_at,
        git=git,
        machine=counts_machine(machine, counted[0].isa),
        config=run_config,
        metrics=metrics,
        software={**software, "callgrind_cache": geometry},
    )

"""``perfgate bench --measure counts``: worker processes under callgrind, their dumps turned into a run.

Each process (at least two, one after another) runs :mod:`perfgate.cli._countworker` under
``valgrind --tool=callgrind`` with nothing instrumented until its stages are set up and
warmed up (:mod:`perfgate.bench._counting`), the simulated caches' geometry given explicitly
(:data:`perfgate.bench._callgrind.CACHE`), and its own draw of what must not make a
systematic difference between revisions: the hash seed, the heap offset and the stack
padding (:func:`perfgate.bench._layout.draw`, the randomiser ``perfgate ab`` uses). Thread
counts are pinned to one (BLAS, OpenMP, numba, torch), and recorded.

Per stage and counted call the run keeps ``<stem>_instructions`` (Ir) and
``<stem>_est_cycles`` (:func:`perfgate.bench._callgrind.est_cycles`), each with the switch's
own cost (the median of the empty calls of that process) taken off; the samples of one
process form one group, so the decision sees the residue *between* processes
(:mod:`perfgate.core._counts`). The run records no times. The valgrind version and the
cache geometry go to the run's ``software``, so a change of either is an environment
change the report names.

Nothing is written unless every process finished: a process that fails raises
:class:`~perfgate.errors.PerfgateError` naming the stage and step it died in and the last
line valgrind wrote.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.bench._callgrind import CACHE, EVENTS, est_cycles, read_dump, valgrind_argv
from perfgate.bench._counting import NULL_LABEL
from perfgate.bench._layout import Layout, draw, worker_args
from perfgate.core.metrics import Direction
from perfgate.core.schema import GitInfo, Machine, Metric, Run
from perfgate.errors import InputError, PerfgateError

__all__ = [
    "COUNTS_DEFINITION",
    "CYCLES_DEFINITION",
    "MIN_PROCESSES",
    "WORKER_MODULE",
    "count_stem",
    "counts_job",
    "find_valgrind",
    "measure_counts",
]

WORKER_MODULE = "perfgate.cli._countworker"
MIN_PROCESSES = 2
CYCLES_DEFINITION = (
    "L1 hits + 5 × LL hits + 35 × RAM accesses, from callgrind's simulated caches "
    "(the weights of iai-callgrind/gungraun and CodSpeed)"
)
COUNTS_DEFINITION = (
    "counts, not times: instructions executed and estimated cycles per call under valgrind's callgrind; "
    "they do not see memory bandwidth, contention, threads, system calls, I/O, GPU kernels or tails"
)
# one thread everywhere: callgrind runs threads one at a time, and the count must not depend
# on how a pool's threads were scheduled
_THREADS_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
}
_SUFFIXES = ("_ms", "_us", "_ns", "_s")


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


def find_valgrind() -> str:
    """The valgrind executable on PATH, or an error that says what to install."""
    found = shutil.which("valgrind")
    if found is None:
        raise InputError(
            "valgrind was not found on PATH, and --measure counts runs every process under valgrind's callgrind; "
            "install the Debian/Ubuntu package `valgrind` (apt-get install valgrind), or measure times "
            "(--measure times)",
            field="--measure",
        )
    return found


def valgrind_version(valgrind: str) -> str:
    done = subprocess.run([valgrind, "--version"], capture_output=True, text=True, check=False)
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise PerfgateError(f"{valgrind} --version failed (exit {done.returncode}): {done.stderr.strip()[-200:]}")
    return version.removeprefix("valgrind-")


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


def _failure(i: int, model: str, done: subprocess.CompletedProcess[str], progress: Path, log: Path) -> PerfgateError:
    steps = progress.read_text(encoding="utf-8", errors="replace").splitlines() if progress.exists() else []
    step, _, stage = (steps[-1] if steps else "start-up\t").partition("\t")
    where = f"stage {stage!r} failed during {step}" if stage else f"the process failed during {step}"
    log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    own = _last_line(done.stderr) if done.stderr.strip() else ""
    if own.startswith("perfgate bench: error: "):
        own = own.removeprefix("perfgate bench: error: ")
    said = f": {own}" if own and own != "nothing" else ""
    return PerfgateError(
        f"{where} under valgrind (counted process {i + 1} of {model}, exit {done.returncode}){said}; "
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


def _one_process(
    i: int,
    job: Mapping[str, Any],
    valgrind: str,
    model: str,
    layout: Layout,
) -> tuple[dict[str, Any], dict[str, list[dict[str, int]]]]:
    with tempfile.TemporaryDirectory(prefix="perfgate-counts-") as tmp:
        folder = Path(tmp)
        out, progress, log = folder / "result.json", folder / "progress.txt", folder / "valgrind.log"
        env = layout.env({**os.environ, **_THREADS_ENV})
        argv = [
            *valgrind_argv(valgrind, folder / "callgrind.out", log),
            sys.executable,
            *worker_args(WORKER_MODULE, randomise=True),
        ]
        payload = {**job, "model": model, "output": str(out), "progress": str(progress)}
        done = subprocess.run(
            argv, input=json.dumps(payload, sort_keys=True), capture_output=True, text=True, env=env, check=False
        )
        if done.returncode != 0 or not out.exists():
            raise _failure(i, model, done, progress, log)
        result = json.loads(out.read_text())
        return result, _read_process(folder, result)


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
) -> Run:
    """Count ``model``'s stages in ``processes`` valgrind processes, one after another, into one run.

    ``job`` holds the worker's options as JSON values: ``suite``, ``stages_module`` (a list),
    ``data`` (a path or None), ``seed``, ``params``, ``warmup`` (None: each stage's own, else 2)
    and ``calls`` (counted calls per stage and process).
    """
    valgrind = find_valgrind()
    version = valgrind_version(valgrind)
    processes = max(processes, MIN_PROCESSES)
    samples: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    overhead: list[dict[str, float]] = []
    layouts: list[dict[str, Any]] = []
    stages: list[dict[str, str]] = []
    layout_seed = secrets.randbelow(2**63)
    for i in range(processes):
        t0 = time.perf_counter()
        # each process its own draw of heap offset, stack padding and hash seed (perfgate.bench._layout)
        layout = draw(layout_seed, i, "A")
        result, calls = _one_process(i, job, valgrind, model, layout)
        layouts.append(layout.record())
        stages = result["stages"]
        switch = calls[NULL_LABEL]
        overhead.append(
            {
                "instructions": statistics.median(c.get("Ir", 0) for c in switch),
                "est_cycles": statistics.median(est_cycles(c) for c in switch),
            }
        )
        for st in stages:
            stem = count_stem(st["metric"])
            ir, cycles = _per_call(calls[f"stage:{st['name']}"], switch)
            samples.setdefault(f"{stem}_instructions", []).extend(ir)
            samples.setdefault(f"{stem}_est_cycles", []).extend(cycles)
            units[f"{stem}_instructions"], units[f"{stem}_est_cycles"] = "instructions", "cycles"
        if progress:
            progress(f"{model}: counted process {i + 1} of {processes} in {time.perf_counter() - t0:.1f} s")
    calls_per_stage = int(job["calls"])
    metrics = {
        name: Metric(
            name=name,
            unit=units[name],
            direction=Direction.LOWER,
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
            "warmup": job["warmup"] if job["warmup"] is not None else "each stage's own, else 2",
            "cache": dict(CACHE),
            "threads": 1,
            "layouts": layouts,
            "switch": "valgrind client requests from inside the process (perfgate.bench._callgrind)",
            "switch_cost_subtracted": overhead,
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
        run_id=run_id,
        suite=str(job["suite"]),
        model=model,
        created_at=created_at,
        git=git,
        machine=Machine.of(machine),
        config=run_config,
        metrics=metrics,
        software={**software, "valgrind": version, "callgrind_cache": geometry},
    )

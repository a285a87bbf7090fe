"""Twelve small benchmarks of different kinds, the same work measured two ways.

Each benchmark repeats one operation on fixed data (made from a fixed seed) ``BASE_REPS``
times per call, about 0.2–2 ms in all: numpy matmul, FFT and cumsum; ``sorted`` of a list,
counting words in a dict, a regex ``findall``, a JSON round trip, ``zlib.compress``,
``str.join``, a list comprehension, a set intersection and a pure-Python loop.

``SUITE12_SLOW`` makes the named benchmarks repeat their own operation more often:
``matmul=0.3,sort=0.15`` is 30 % and 15 % more repetitions of the same work (real work, no
sleep); ``all=0.3`` applies to every benchmark, and a named entry overrides it. Per-process
hash randomisation is left on (``PYTHONHASHSEED`` is never set here), so the dict benchmark
lays out its table differently in every process.

The two forms:

* pytest-benchmark: :data:`PYTEST_FILE` has one ``benchmark(fn)`` test per benchmark; one
  ``pytest`` process is one run (:func:`run_pytest`);
* a perfgate suite of one's own (``--suite suite12``): :func:`register` declares a stage per
  benchmark with the ``kind`` its time is bound by, so the run carries reference kernels; one
  ``perfgate bench --processes N`` is one run (:func:`run_bench`).

The files both forms need are written into a work folder by :func:`write_work`, outside the
project's ``tests`` (which is all its own pytest run collects). Directly::

    python benchmarks/suite12.py --times                    # one call of each, in ms
    python benchmarks/suite12.py --form pytest --out r.json
    SUITE12_SLOW=all=0.3 python benchmarks/suite12.py --form bench --out r.json --processes 4
"""

from __future__ import annotations

import os

# single-threaded BLAS wherever numpy is first imported here (the recorder sets it for its children too)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

SUITE = "suite12"
BASE_REPS = 20  # repetitions of the operation per call; +15 % and +30 % are whole numbers of them

# what each benchmark's time is bound by: the reference kernel perfgate times beside it
KINDS = {
    "matmul": "compute",
    "fft": "compute",
    "cumsum": "memory",
    "sort": "interpreter",
    "dict": "interpreter",
    "regex": "interpreter",
    "json": "interpreter",
    "zlib": "compute",
    "join": "memory",
    "listcomp": "interpreter",
    "set": "interpreter",
    "loop": "interpreter",
}
NAMES = tuple(KINDS)


def slowdowns(spec: str | None = None) -> dict[str, float]:
    """Extra work per benchmark from ``SUITE12_SLOW`` (or ``spec``): ``{"sort": 0.3, ...}``."""
    spec = os.environ.get("SUITE12_SLOW", "") if spec is None else spec
    given: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        if name != "all" and name not in KINDS:
            raise ValueError(f"SUITE12_SLOW: unknown benchmark {name!r} (known: all, {', '.join(NAMES)})")
        given[name] = float(value)
    every = given.pop("all", 0.0)
    return {name: given.get(name, every) for name in NAMES}


def _operation(name: str) -> Callable[[], object]:
    """One repetition of the benchmark's work, on data made here from a fixed seed."""
    rng = random.Random(12)
    nrng = np.random.default_rng(12)
    if name == "matmul":
        a = nrng.standard_normal((64, 64))
        b = nrng.standard_normal((64, 64))
        return lambda: a @ b
    if name == "fft":
        x = nrng.standard_normal(4096)
        return lambda: np.fft.fft(x)
    if name == "cumsum":
        x = nrng.standard_normal(20_000)
        return lambda: np.cumsum(x)
    if name == "sort":
        xs = [rng.random() for _ in range(800)]
        return lambda: sorted(xs)
    if name == "dict":
        vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 10))) for _ in range(400)]
        words = [rng.choice(vocab) for _ in range(600)]

        def count() -> dict[str, int]:
            d: dict[str, int] = {}
            for w in words:
                d[w] = d.get(w, 0) + 1
            return d

        return count
    if name == "regex":
        parts = []
        for i in range(200):
            parts.append(f"user{i}@host{i % 17}.com" if i % 5 == 0 else f"word{i} and more")
        text = " ".join(parts)
        pattern = re.compile(r"\b(\w+)@(\w+)\.com\b")
        return lambda: pattern.findall(text)
    if name == "json":
        obj = {f"k{i}": {"id": i, "name": f"item{i}", "tags": ["a", "b", str(i)], "v": i * 0.5} for i in range(40)}
        return lambda: json.loads(json.dumps(obj))
    if name == "zlib":
        data = " ".join(rng.choice(("alpha", "beta", "gamma", "delta", str(rng.random()))) for _ in range(1000))
        raw = data.encode()
        return lambda: zlib.compress(raw, 6)
    if name == "join":
        pieces = [f"piece{i:05d}" for i in range(3000)]
        return lambda: ",".join(pieces)
    if name == "listcomp":
        xs = list(range(1000))
        return lambda: [x * 3 + 1 for x in xs if x & 1]
    if name == "set":
        a = set(rng.sample(range(20_000), 2000))
        b = set(rng.sample(range(20_000), 2000))
        return lambda: a & b
    if name == "loop":

        def loop() -> int:
            t = 0
            for i in range(600):
                t = (t + i * 7) % 1_000_003
            return t

        return loop
    raise ValueError(f"unknown benchmark {name!r}")


def make(name: str, extra: float | None = None) -> Callable[[], object]:
    """One call of benchmark ``name``: its operation ``BASE_REPS × (1 + extra)`` times.

    ``extra`` defaults to the benchmark's share in ``SUITE12_SLOW``.
    """
    if extra is None:
        extra = slowdowns()[name]
    op = _operation(name)
    reps = range(round(BASE_REPS * (1 + extra)))

    def call() -> object:
        out = None
        for _ in reps:
            out = op()
        return out

    return call


def register(repeat: int = 100) -> None:
    """Declare one perfgate stage per benchmark in suite ``suite12`` (any model name)."""
    from perfgate.bench import stage

    for name in NAMES:
        stage(name, metric=f"{name}_time_ms", unit="ms", suite=SUITE, kind=KINDS[name], repeat=repeat, warmup=10)(
            lambda ctx, name=name: make(name)
        )


PYTEST_FILE = "import suite12\n" + "".join(
    f"\n\ndef test_{name}(benchmark):\n    benchmark(suite12.make({name!r}))\n" for name in NAMES
)
STAGES_FILE = "import suite12\n\nsuite12.register()\n"


def write_work(folder: Path) -> None:
    """This module, the pytest-benchmark test file and the perfgate stages module, in ``folder``.

    A copy of this module rather than ``benchmarks/`` on the path: the scripts there would
    shadow modules of the same name.
    """
    (folder / "suite12.py").write_text(Path(__file__).read_text())
    (folder / "test_suite12_bench.py").write_text(PYTEST_FILE)
    (folder / "suite12_stages.py").write_text(STAGES_FILE)


def child_env(slow: str, work: Path) -> dict[str, str]:
    """The environment of a recorded run: single-threaded BLAS, the extra work, hashes randomised."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    env.update(
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        SUITE12_SLOW=slow,
        PYTHONPATH=str(work),
    )
    return env


def run_pytest(out: Path, work: Path, slow: str = "") -> None:
    """One pytest-benchmark run of all twelve: one ``pytest`` process, ``--benchmark-json=out``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_suite12_bench.py",
            f"--benchmark-json={out}",
            "--benchmark-min-rounds=50",
            "--benchmark-max-time=0.3",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
        env=child_env(slow, work),
    )


def run_bench(out: Path, work: Path, slow: str = "", processes: int = 4) -> None:
    """One ``perfgate bench --suite suite12`` run in ``processes`` worker processes."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "perfgate",
            "bench",
            "--suite",
            SUITE,
            "--stages-module",
            "suite12_stages",
            "--model",
            SUITE,
            "--processes",
            str(processes),
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
        env=child_env(slow, work),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--times", action="store_true", help="print the median time of one call of each, in ms")
    parser.add_argument("--form", choices=("pytest", "bench"))
    parser.add_argument("--out")
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    if args.times:
        for name in NAMES:
            call = make(name)
            t = []
            for _ in range(30):
                t0 = time.perf_counter()
                call()
                t.append(time.perf_counter() - t0)
            print(f"{name:<10} {KINDS[name]:<12} {sorted(t)[15] * 1e3:7.3f} ms")
    if args.form:
        with tempfile.TemporaryDirectory() as tmp:
            write_work(Path(tmp))
            t0 = time.perf_counter()
            slow = os.environ.get("SUITE12_SLOW", "")
            if args.form == "pytest":
                run_pytest(Path(args.out).resolve(), Path(tmp), slow)
            else:
                run_bench(Path(args.out).resolve(), Path(tmp), slow, args.processes)
            print(f"{args.form}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

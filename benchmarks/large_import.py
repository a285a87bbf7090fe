"""A real suite's pytest-benchmark file through perfgate, before and after the bounded form.

cattrs' own suite (64 pytest-benchmark benchmarks) writes a 300 MB ``--benchmark-json`` file of
about 7 million rounds, since pytest-benchmark keeps every round of a fast benchmark. This script
writes a file of that size and shape (pytest-benchmark's 4-space indent, one round a line; each
benchmark's rounds log-normal around its own median, their counts spread as a suite's are), and
times perfgate on it:

    python benchmarks/large_import.py [--before /tmp/pg_before] [--store-runs 20] [--before-store-runs 4]

``--before`` is a checkout of perfgate before the bounded form (``git worktree add /tmp/pg_before
<commit>``), run with this virtualenv through ``PYTHONPATH``; it needs ``PERFGATE_MAX_JSON_MB=400``
to read the file at all. For each: the import's seconds and peak memory (the child's VmHWM), the
run file's size, the store's growth per recorded run, and a check's seconds and peak memory from
files and from a store of N runs. Each command runs once, in a fresh process: on a shared machine
the seconds move with the neighbours, the sizes and memory do not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCHMARKS = 64
ROUNDS = 7_000_000

_CHILD = """
import re, sys
from perfgate.cli import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    peak = re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)
print(f"PEAK_KB={peak}", file=sys.stderr)
sys.exit(code)
"""


def write_suite(path: Path, seed: int, slower: float = 1.0) -> None:
    """A pytest-benchmark file of 64 benchmarks and about 7 million rounds, written as a stream."""
    rng = np.random.default_rng(seed)
    weights = np.random.default_rng(0).lognormal(0.0, 1.0, BENCHMARKS)  # the same suite every time
    counts = np.maximum((weights / weights.sum() * ROUNDS).astype(int), 5)
    medians = 10 ** np.random.default_rng(1).uniform(-7, -3, BENCHMARKS)
    head = {
        "machine_info": {"node": "ci", "machine": "x86_64", "python_version": "3.11.7", "system": "Linux",
                         "cpu": {"brand_raw": "AMD EPYC"}},
        "commit_info": {"id": f"c{seed}", "branch": "main", "dirty": False},
    }  # fmt: skip
    with path.open("w") as f:
        f.write(json.dumps(head, indent=4)[:-2] + ',\n    "benchmarks": [\n')
        for i, (n, median) in enumerate(zip(counts, medians, strict=True)):
            x = median * slower * rng.lognormal(0.0, 0.1, n)
            x[rng.random(n) < 0.005] *= 4.0  # a few slow rounds (a collection, a page fault)
            f.write(f'        {{\n            "group": null,\n            "name": "test_case_{i}",\n')
            f.write(f'            "fullname": "bench/test_cases.py::test_case_{i}",\n')
            f.write('            "params": null,\n            "param": null,\n            "extra_info": {},\n')
            f.write('            "stats": {\n')
            f.write(f'                "min": {float(x.min())!r},\n                "max": {float(x.max())!r},\n')
            f.write(f'                "rounds": {n},\n                "median": {float(np.median(x))!r},\n')
            f.write('                "data": [\n')
            f.write(",\n".join("                    " + r for r in map(repr, x.tolist())))
            f.write("\n                ]\n            }\n        }" + (",\n" if i < BENCHMARKS - 1 else "\n"))
        f.write('    ],\n    "datetime": "2026-12-01T10:00:00.000000+00:00",\n    "version": "4.0.0"\n}\n')


def perfgate(code: Path, *args: str) -> tuple[float, float, int, str]:
    """``perfgate ARGS`` with the perfgate at ``code``: (seconds, peak MB, exit code, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(code), "PERFGATE_MAX_JSON_MB": "400", "OPENBLAS_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=env, cwd=code)
    seconds = time.perf_counter() - start
    found = re.search(r"PEAK_KB=(\d+)", done.stderr)
    return seconds, int(found.group(1)) / 1024 if found else float("nan"), done.returncode, done.stderr


def with_id(source: Path, target: Path, i: int) -> None:
    doc = json.loads(source.read_text())
    doc["run_id"] = f"run-{i:03d}"
    doc["created_at"] = f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00Z"
    doc["git"] = {"commit": f"c{i}", "branch": "main"}
    target.write_text(json.dumps(doc))


def measure(label: str, code: Path, files: tuple[Path, Path], work: Path, store_runs: int) -> dict[str, object]:
    base_json, cur_json = files
    row: dict[str, object] = {"code": label}
    runs = []
    for name, source in (("base", base_json), ("cur", cur_json)):
        out = work / f"{name}.run.json"
        seconds, peak, status, err = perfgate(code, "import", "pytest-benchmark", str(source), "--output", str(out))
        assert status == 0, err
        runs.append(out)
        if name == "base":
            row.update(import_s=seconds, import_mb=peak, run_file_mb=out.stat().st_size / 1e6)
    db = work / "store.db"
    url = f"sqlite:///{db}"
    sizes = []
    for i in range(store_runs):
        copy = work / f"stored-{i}.json"
        with_id(runs[0], copy, i)
        _s, _p, status, err = perfgate(code, "record", str(copy), "--store", url)
        assert status == 0, err
        copy.unlink()
        sizes.append(db.stat().st_size + (Path(f"{db}-wal").stat().st_size if Path(f"{db}-wal").exists() else 0))
    row["store_mb_per_run"] = (sizes[-1] - sizes[0]) / max(len(sizes) - 1, 1) / 1e6
    row["store_runs"] = store_runs
    seconds, peak, status, _err = perfgate(
        code, "check", "--baseline", str(runs[0]), "--current", str(runs[1]), "--output", str(work / "f.md"),
        "--no-notify", "--quiet",
    )  # fmt: skip
    row.update(check_files_s=seconds, check_files_mb=peak, check_files_exit=status)
    seconds, peak, status, _err = perfgate(
        code, "check", "--store", url, "--current", str(runs[1]), "--baseline-runs", str(store_runs),
        "--output", str(work / "s.md"), "--no-notify", "--quiet",
    )  # fmt: skip
    row.update(check_store_s=seconds, check_store_mb=peak, check_store_exit=status)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a checkout of perfgate before the bounded form")
    parser.add_argument("--store-runs", type=int, default=20)
    parser.add_argument("--before-store-runs", type=int, default=4, help="old runs cost 130 MB and 10 s each")
    args = parser.parse_args()
    after = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base_json, cur_json = work / "base.json", work / "cur.json"
        write_suite(base_json, seed=0)
        write_suite(cur_json, seed=1, slower=1.0)
        print(f"suite file: {base_json.stat().st_size / 1e6:.0f} MB, {BENCHMARKS} benchmarks, ~{ROUNDS:,} rounds")
        rows = []
        for label, code, runs in (("before", args.before, args.before_store_runs), ("after", after, args.store_runs)):
            if code is None:
                continue
            folder = work / label
            folder.mkdir()
            rows.append(measure(label, code, (base_json, cur_json), folder, runs))
    columns = [
        ("code", "{}"), ("import_s", "{:.1f}"), ("import_mb", "{:.0f}"), ("run_file_mb", "{:.2f}"),
        ("store_mb_per_run", "{:.2f}"), ("store_runs", "{}"), ("check_files_s", "{:.1f}"),
        ("check_files_mb", "{:.0f}"), ("check_files_exit", "{}"), ("check_store_s", "{:.1f}"),
        ("check_store_mb", "{:.0f}"), ("check_store_exit", "{}"),
    ]  # fmt: skip
    print("| " + " | ".join(name for name, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(fmt.format(row[name]) for name, fmt in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

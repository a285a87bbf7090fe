"""Start-up of a small check: ``python -m perfgate check`` of two tiny run files, whole commands.

Two cases: the original specification's flat single-number files (only the threshold
applies, no test: no scipy at all) and two versioned files of 5 samples per metric (the
test runs: numpy and ``scipy.special``). Times whole commands with hyperfine when it is on
the PATH, else by repeated subprocess runs (best and median of ``--runs``), and prints the
top import offenders of the sampled case from ``python -X importtime``.

Usage: ``python benchmarks/startup.py [--runs 20] [--top 15]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAT = {
    "dbn_load_time_ms": 0.70,
    "feature_extraction_time_ms": 12.0,
    "training_step_time_ms": 100.0,
    "inference_latency_us": 45.0,
    "throughput_samples_per_sec": 5000.0,
    "memory_usage_mb": 120.0,
    "timestamp": "2025-10-15T10:00:00Z",
    "git_commit": "abc123",
    "model_type": "DQN",
}


def _sampled(shift: float) -> dict[str, object]:
    times = [100.0, 101.5, 99.2, 100.7, 98.9]
    return {
        "schema_version": 1,
        "model": "dqn",
        "metrics": {
            "training_step_time_ms": {"samples": [t * shift for t in times]},
            "dbn_load_time_ms": {"samples": [0.70, 0.71, 0.69, 0.70, 0.72]},
            "memory_usage_mb": {"samples": [120.0, 121.0, 120.5, 119.8, 120.2]},
        },
    }


def _files(folder: Path) -> dict[str, tuple[Path, Path]]:
    out = {}
    for case, (a, b) in {
        "flat": (FLAT, {**FLAT, "training_step_time_ms": 103.0}),
        "sampled": (_sampled(1.0), _sampled(1.03)),
    }.items():
        pa, pb = folder / f"{case}_baseline.json", folder / f"{case}_current.json"
        pa.write_text(json.dumps(a))
        pb.write_text(json.dumps(b))
        out[case] = (pa, pb)
    return out


def _command(base: Path, cur: Path, report: Path) -> list[str]:
    return [sys.executable, "-m", "perfgate", "check", "--baseline", str(base), "--current", str(cur),
            "--output", str(report), "--quiet"]  # fmt: skip


def _subprocess_times(cmd: list[str], runs: int, env: dict[str, str]) -> list[float]:
    subprocess.run(cmd, env=env, check=False, capture_output=True)  # warm the file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, check=False, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def _importtime(cmd: list[str], env: dict[str, str]) -> list[tuple[int, int, int, str]]:
    """(self µs, cumulative µs, depth, module) of every import of the command."""
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True)
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, self_us, cumulative_us, name = line.replace("import time:", "|").split("|")
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append((int(self_us), int(cumulative_us), depth, name.strip()))
    return rows


def _own(rows: list[tuple[int, int, int, str]], package: str) -> int:
    return sum(r[0] for r in rows if r[3] == package or r[3].startswith(package + "."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = _files(folder)
        hyperfine = shutil.which("hyperfine")
        for case, (base, cur) in files.items():
            cmd = _command(base, cur, folder / f"{case}.md")
            code = subprocess.run(cmd, env=env, check=False, capture_output=True).returncode
            if hyperfine:
                export = folder / f"{case}.json"
                line = " ".join(cmd)
                runner = [
                    hyperfine,
                    "--warmup",
                    "2",
                    "--runs",
                    str(args.runs),
                    "-N",
                    "-i",
                    "--export-json",
                    str(export),
                ]
                subprocess.run([*runner, line], env=env, check=True, capture_output=True)
                result = json.loads(export.read_text())["results"][0]
                times = result["times"]
                how = "hyperfine"
            else:
                times = _subprocess_times(cmd, args.runs, env)
                how = "subprocess"
            print(
                f"{case:8} exit {code}: median {statistics.median(times):.3f} s, best {min(times):.3f} s, "
                f"mean {statistics.fmean(times):.3f} s over {len(times)} runs ({how})"
            )
        base, cur = files["sampled"]
        rows = _importtime(_command(base, cur, folder / "x.md"), env)
        print(f"\nimports of the sampled check (python -X importtime), top {args.top}:")
        print("  by cumulative time, imports up to two levels down:")
        for _, cumulative, depth, name in sorted((r for r in rows if r[2] <= 2), key=lambda r: -r[1])[: args.top]:
            print(f"    {cumulative / 1e6:7.3f} s  {'  ' * depth}{name}")
        print("  by own time, any level:")
        for own, _, _, name in sorted(rows, key=lambda r: -r[0])[: args.top]:
            print(f"    {own / 1e6:7.3f} s  {name}")
        total = sum(r[0] for r in rows)
        print(f"  all imports: {total / 1e6:.3f} s of own time; numpy's part: {_own(rows, 'numpy') / 1e6:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

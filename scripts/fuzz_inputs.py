"""A longer, seeded fuzz run of every input perfgate reads, one fresh process per case.

The pytest suite (tests/safety/test_fuzz.py) runs the same generators in-process, a few
dozen cases each; this runs as many as asked, each in its own ``perfgate`` process, so it
can also check the peak resident memory of every case::

    .venv/bin/python scripts/fuzz_inputs.py --cases 200 --seed 1 [--kinds run,import,dbn,toml,store]

Properties, per case: exit code 0, 1 or 2; an exit 2 prints one line; no traceback and
no "internal error"; peak RSS under ``--max-rss-mb``; the inputs unchanged and nothing
written outside the output folder. A failing case prints its kind and its seed; rerun it with
``--only KIND:SEED``. Exit status: 0 when every case held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.safety import mutate  # noqa: E402
from tests.safety.procs import perfgate  # noqa: E402

FLAT_BASELINE = (ROOT / "tests" / "data" / "runs" / "seed_flat_dqn.json").read_bytes()
FORMATS = sorted(mutate.IMPORT_FIXTURES)


def _run(inputs: Path, outputs: Path, seed: int) -> list[str]:
    (inputs / "base.json").write_bytes(FLAT_BASELINE)
    (inputs / "cur.json").write_bytes(mutate.run_file(random.Random(seed)))
    out = ["--output", str(outputs / "r.md"), "--json", str(outputs / "r.json")]
    return ["check", "--baseline", str(inputs / "base.json"), "--current", str(inputs / "cur.json"), *out]


def _import(inputs: Path, outputs: Path, seed: int) -> list[str]:
    rng = random.Random(seed)
    fmt = rng.choice(FORMATS)
    data, gz = mutate.import_file(fmt, rng)
    path = inputs / ("result.json.gz" if gz else "result.json")
    path.write_bytes(data)
    return ["import", fmt, str(path), "--output", str(outputs / "run.json")]


def _dbn(inputs: Path, outputs: Path, seed: int) -> list[str]:
    data, suffix = mutate.dbn_file(random.Random(seed))
    path = inputs / f"data{suffix}"
    path.write_bytes(data)
    return ["data", "inspect", str(path)]


def _toml(inputs: Path, outputs: Path, seed: int) -> list[str]:
    (inputs / "base.json").write_bytes(FLAT_BASELINE)
    (inputs / "perfgate.toml").write_bytes(mutate.toml_file(random.Random(seed)))
    base = str(inputs / "base.json")
    return ["check", "--baseline", base, "--current", base, "--config", str(inputs / "perfgate.toml"), "--quiet"]


def _store(inputs: Path, outputs: Path, seed: int) -> list[str]:
    return ["history", "--model", "dqn", "--store", mutate.store_url(random.Random(seed), outputs)]


KINDS: dict[str, Callable[[Path, Path, int], list[str]]] = {
    "run": _run,
    "import": _import,
    "dbn": _dbn,
    "toml": _toml,
    "store": _store,
}


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def check_case(kind: str, seed: int, max_rss_mb: float) -> list[str]:
    """The properties this case broke (empty when it held)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs, outputs, cwd = root / "in", root / "out", root / "cwd"
        for folder in (inputs, outputs, cwd):
            folder.mkdir()
        argv = KINDS[kind](inputs, outputs, seed)
        before = _snapshot(inputs)
        done = perfgate(*argv, cwd=cwd)
        problems = []
        if done.code not in (0, 1, 2):
            problems.append(f"exit code {done.code}")
        if "Traceback" in done.err or "internal error" in done.err:
            problems.append("traceback: " + done.err.splitlines()[-1] if done.err else "traceback")
        if done.code == 2 and len([line for line in done.err.splitlines() if "error:" in line]) != 1:
            problems.append(f"not a one-line error: {done.err!r}")
        if done.peak_rss_mb > max_rss_mb:
            problems.append(f"peak RSS {done.peak_rss_mb:.0f} MB > {max_rss_mb:g} MB")
        if _snapshot(inputs) != before:
            problems.append("an input was changed")
        if list(cwd.iterdir()) or {p.name for p in root.iterdir()} != {"in", "out", "cwd"}:
            problems.append("a file appeared outside the output folder")
        return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100, help="cases per kind (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--max-rss-mb", type=float, default=600.0, help="peak RSS bound per case (default 600)")
    parser.add_argument("--only", default=None, metavar="KIND:SEED", help="run one case")
    args = parser.parse_args(argv)
    if args.only:
        kind, _, seed = args.only.partition(":")
        plan = [(kind, int(seed))]
    else:
        kinds = [k for k in args.kinds.split(",") if k]
        unknown = set(kinds) - set(KINDS)
        if unknown:
            parser.error(f"unknown kinds {sorted(unknown)}")
        plan = [(k, args.seed + i) for k in kinds for i in range(args.cases)]
    failures = 0
    start = time.monotonic()
    for n, (kind, seed) in enumerate(plan, 1):
        problems = check_case(kind, seed, args.max_rss_mb)
        if problems:
            failures += 1
            print(f"FAIL {kind}:{seed}: {'; '.join(problems)}", flush=True)
        if n % 50 == 0:
            print(f"{n}/{len(plan)} cases, {failures} failing, {time.monotonic() - start:.0f} s", flush=True)
    print(f"{len(plan)} cases, {failures} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""How well "where it went" names the cause of a change, what it costs, and what it names on identical code.

A temporary clone of this repository gets one commit per injected change, each outside the
product: a user's stages module (``userstages.py``) and the reference pipeline's torch code.

* **python** — a pure-Python helper (``busy_helper``) given 50 % more loop iterations;
* **numpy** — a numpy call with more work (``smooth``'s ``np.convolve`` over a kernel twice as long);
* **torch-op** — an extra operator in DQN's training step (a ``layer_norm`` after the second layer);
* **torch-size** — a slower operator: DQN's second layer twice as wide (its ``addmm`` and ``mm``).

Each check is a real ``perfgate explain`` process (two profiling processes a side) of the base
commit against the changed one, in times mode and, for the stages module's cases, in counts
mode (``--measure counts``: the interpreter's bytecodes per Python function, exact). Printed
per case: how often the injected cause is ranked first among the named functions, the share
of the stage's change it explains, and seconds per check. A/A checks (base against base)
print the largest contributor named on identical code (the target is none). The profiler's
overhead is the time per call under the profiler over the time per call without, in one
process; ``--ab`` adds one DQN ``perfgate ab`` check of the torch-op commit and prints the
seconds its profiling pass added.

    python benchmarks/explain.py --checks 10 --aa 5
    python benchmarks/explain.py --checks 3 --aa 2 --cases python,numpy --ab
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

USER = textwrap.dedent(
    """\
    import numpy as np

    from perfgate.bench import stage

    LOOPS = {loops}  # busy_helper's iterations
    KERNEL = {kernel}  # smooth's convolution kernel length
    X = np.random.default_rng(0).standard_normal(20_000)


    def busy_helper(n):
        total = 0
        for i in range(n):
            total += i * i % 7
        return total


    def steady_part(n):
        total = 0
        for i in range(n):
            total += i ^ 3
        return total


    def smooth(x, k):
        return np.convolve(x, np.ones(k) / k, mode="same")


    def other_numpy(x):
        return np.sort(x)


    @stage("user", metric="user_time_ms", unit="ms", suite="explainbench")
    def user(ctx):
        def once():
            return busy_helper(LOOPS) + steady_part(20_000) + float(smooth(X, KERNEL)[0]) + float(other_numpy(X)[0])

        return once
    """
)
BASE = {"loops": 20_000, "kernel": 100}  # the helper about 1.5 ms a call, the convolution about 0.5 ms
# case -> (the change, stage, names that count as the injected cause, modes)
# In counts mode each check gives two tables: the bytecodes of each Python function (where a slower
# Python helper shows) and the instructions of each C function under callgrind (where a numpy call
# with more work shows); a case is judged on the table of its kind, the other's top name is printed.
COUNTS_TABLE = {"python": "bytecodes", "numpy": "callgrind"}
CASES = {
    "python": ({"loops": 30_000}, "user", ("busy_helper",), ("times", "counts")),
    "numpy": ({"kernel": 200}, "user", ("smooth", "convolve", "correlate", "dot"), ("times", "counts")),
    "torch-op": ("layer_norm", "training_step_dqn", ("layer_norm",), ("times",)),
    "torch-size": ("wider", "training_step_dqn", ("addmm", "aten::mm", "MmBackward", "AddmmBackward"), ("times",)),
}
DQN = "perfgate_pipeline/models/dqn.py"
PATCHES = {
    "layer_norm": (
        "        h = F.relu(self.fc2(h))\n",
        "        h = F.relu(self.fc2(h))\n        h = F.layer_norm(h, h.shape[-1:])\n",
    ),
    "wider": (
        "        self.fc2 = nn.Linear(config.hidden, config.hidden)\n"
        "        self.head = nn.Linear(config.hidden, config.n_actions)\n",
        "        self.fc2 = nn.Linear(config.hidden, 2 * config.hidden)\n"
        "        self.head = nn.Linear(2 * config.hidden, config.n_actions)\n",
    ),
}


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    return subprocess.run(
        [*cmd, "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(root: Path) -> tuple[Path, dict[str, str]]:
    repo = root / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    (repo / "userstages.py").write_text(USER.format(**BASE))
    git(repo, "add", "userstages.py")
    git(repo, "commit", "-q", "-m", "base")
    commits = {"base": git(repo, "rev-parse", "HEAD")}
    for case, (change, *_rest) in CASES.items():
        git(repo, "checkout", "-q", commits["base"])
        if isinstance(change, dict):
            (repo / "userstages.py").write_text(USER.format(**{**BASE, **change}))
        else:
            old, new = PATCHES[change]
            text = (repo / DQN).read_text()
            assert old in text, f"{DQN} no longer has the line the {case} case patches"
            (repo / DQN).write_text(text.replace(old, new))
        git(repo, "commit", "-q", "-am", case)
        commits[case] = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", commits["base"])
    return repo, commits


def explain(repo: Path, base: str, cur: str, stage: str, mode: str, out: Path) -> tuple[list[dict], float]:
    suite = ["--suite", "explainbench", "--stages-module", "userstages"] if stage == "user" else []
    argv = [sys.executable, "-m", "perfgate", "explain", "--repo", str(repo), "--baseline-ref", base]
    argv += ["--current-ref", cur, "--model", "dqn", "--stage", stage, "--measure", mode, "--json", str(out)]
    argv += ["--quiet", *suite]
    t = time.monotonic()
    proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True)
    took = time.monotonic() - t
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"perfgate explain failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(out.read_text()), took


def table(explanations: list[dict], case: str, mode: str) -> dict:
    """The explanation a case is judged on: counts mode's table of its kind, else the one there is."""
    if mode == "counts":
        kind = COUNTS_TABLE.get(case, "bytecodes")
        return next(e for e in explanations if e["instrument"].startswith(kind))
    return explanations[0]


def named(e: dict) -> list[dict]:
    return [c for c in e["contributors"] if c["named"]]


def is_cause(name: str, causes: tuple[str, ...]) -> bool:
    return any(c in name for c in causes)


def overhead(repo: Path) -> list[tuple[str, str, float]]:
    """Time per call under each profiler over time per call without, for the user stage and DQN's training step."""
    code = textwrap.dedent(
        """\
        import json, sys, time
        from perfgate.workers.resident import Worker
        from perfgate.profile import profile_stage
        out = []
        for suite, mods, stage, instruments in (
            ("explainbench", ["userstages"], "user", ("sampling", "bytecodes")),
            ("pipeline", [], "training_step_dqn", ("sampling", "torch")),
        ):
            w = Worker()
            r = w.setup({"suite": suite, "model": "dqn", "stages_modules": mods, "seed": 0, "params": {}})
            assert r["ok"], r
            call = w.prepared[stage].call
            t = time.perf_counter(); n = 0
            while time.perf_counter() - t < 2.0:
                call(); n += 1
            plain = (time.perf_counter() - t) / n
            for inst in instruments:
                t = time.perf_counter()
                prof, _ = profile_stage(call, instrument=inst, seconds=2.0, min_calls=3)
                out.append((stage, inst, (time.perf_counter() - t) / prof.calls / plain))
        print(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, env=_env(repo))
    if proc.returncode != 0:
        raise SystemExit(f"overhead measurement failed: {proc.stderr.strip()[-2000:]}")
    return [tuple(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])]  # type: ignore[misc]


def _env(repo: Path) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(repo)}


def ab_check(repo: Path, commits: dict[str, str], out: Path) -> tuple[float, float, int]:
    argv = [sys.executable, "-m", "perfgate", "ab", "--repo", str(repo), "--baseline-ref", commits["base"]]
    argv += ["--current-ref", commits["torch-op"], "--model", "dqn", "--threshold", "3", "--quiet", "--json", str(out)]
    t = time.monotonic()
    proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True)
    took = time.monotonic() - t
    data = json.loads(out.read_text()) if out.exists() else {}
    return took, float(data.get("ab", {}).get("explain_seconds", float("nan"))), proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=10, help="explain checks per case and mode")
    parser.add_argument("--counts-checks", type=int, default=3, help="explain checks per case in counts mode")
    parser.add_argument("--aa", type=int, default=5, help="A/A checks per stage and mode")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--ab", action="store_true", help="also one DQN ab check of the torch-op commit")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    with tempfile.TemporaryDirectory(prefix="perfgate-explain-bench-") as tmp:
        repo, commits = make_repo(Path(tmp))
        rows = []
        for case in cases:
            _change, stage, causes, modes = CASES[case]
            for mode in modes:
                firsts, shares, secs = 0, [], []
                for i in range(args.checks if mode == "times" else args.counts_checks):
                    got, took = explain(
                        repo, commits["base"], commits[case], stage, mode, Path(tmp) / f"{case}{mode}{i}.json"
                    )
                    e = table(got, case, "times" if case not in COUNTS_TABLE else mode)
                    top = named(e)[:1]
                    first = bool(top) and is_cause(top[0]["name"], causes)
                    firsts += first
                    shares.append(sum(c["share"] for c in named(e) if is_cause(c["name"], causes)))
                    secs.append(took)
                    print(
                        f"{case:10} {mode:6} #{i}: first={top[0]['name'] if top else '-'!s:30} "
                        f"share={shares[-1]:.0%} instrument={e['instrument']} {took:.0f} s",
                        flush=True,
                    )
                    if not first:  # a miss: what the explanation saw, to tell why
                        rows_seen = ", ".join(
                            f"{c['name']} z={c['z']:.1f} share={c['share']:.0%}" for c in e["contributors"][:3]
                        )
                        print(
                            f"    miss: moved={e.get('moved')} timed={e.get('timed_change')} rho={e.get('rho')} "
                            f"profiles={e.get('profiles')} summary={e.get('summary')!r} top: {rows_seen}",
                            flush=True,
                        )
                rows.append(
                    (case, mode, firsts, len(secs), statistics.median(shares), statistics.median(secs), max(secs))
                )
        aa_rows = []
        for stage, modes in (("user", ("times", "counts")), ("training_step_dqn", ("times",))):
            if stage == "training_step_dqn" and not any(c.startswith("torch") for c in cases):
                continue
            for mode in modes:
                largest, named_any = [], 0
                for i in range(args.aa):
                    got, _took = explain(
                        repo, commits["base"], commits["base"], stage, mode, Path(tmp) / f"aa{stage}{mode}{i}.json"
                    )
                    said = [c for e in got for c in named(e)]
                    named_any += bool(said)
                    # the named contributor if any (the target is none), else each table's first row and its z
                    firsts = [f"{c['name']} (named)" for c in said[:1]] or [
                        f"{e['contributors'][0]['name']} z={e['contributors'][0]['z']:.1f}"
                        for e in got
                        if e["contributors"]
                    ]
                    largest.append(", ".join(firsts) or "-")
                aa_rows.append((stage, mode, named_any, args.aa, largest))
        over = overhead(repo)
        ab = ab_check(repo, commits, Path(tmp) / "ab.json") if args.ab else None
    print()
    print("| case | mode | injected cause first | share it explains (median) | s per check (median, max) |")
    print("|---|---|---|---|---|")
    for case, mode, k, n, share, med, mx in rows:
        print(f"| {case} | {mode} | {k}/{n} ({k / n:.0%}) | {share:.0%} | {med:.0f}, {mx:.0f} |")
    print()
    print("| A/A stage | mode | checks naming anything | largest contributor (by its z) per check |")
    print("|---|---|---|---|")
    for stage, mode, k, n, largest in aa_rows:
        print(f"| {stage} | {mode} | {k}/{n} | {'; '.join(largest)} |")
    print()
    print("| stage | profiler | time per call under it / without |")
    print("|---|---|---|")
    for stage, inst, ratio in over:
        print(f"| {stage} | {inst} | {ratio:.2f}× |")
    if ab is not None:
        took, spent, code = ab
        print(
            f"\nDQN ab check of torch-op (threshold 3 %): exit {code}, {took:.0f} s in all, "
            f"profiling pass {spent:.0f} s"
        )


if __name__ == "__main__":
    main()

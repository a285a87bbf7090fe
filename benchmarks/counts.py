"""perfgate bench and ab --measure counts on this machine: wall time, A/A, power, and whether counts track time.

    python benchmarks/counts.py [--cases tiny dqn ppo mamba2 tft dqn-inject] [--runs 7] [--paired 10]
                                [--paired-dqn 2] [--out FOLDER] [--report FOLDER/records.json]

Cases:

* ``tiny`` — a suite of the user's kind without torch, in a temporary git repository
  (``tinystages.py``): ``matmul``, a numpy stage (tanh of a 1600×64 by 64×64 product, into a
  buffer made at set-up), and ``loop``, a pure-Python loop of 40,000 iterations. An injected
  change of X % is extra work of each stage's own kind, in both stages at once: X % more rows
  multiplied (``MATMUL_EXTRA``) and X % more iterations (``COUNTS_EXTRA``), read from the
  environment by stored runs and baked into the module's defaults in the commits the paired
  checks compare. Nothing is injected inside perfgate.
* ``dqn``, ``ppo`` — the built-in pipeline (``--model dqn``, ``--model ppo``).
* ``mamba2``, ``tft`` — one stored counts run each: its wall time, the time of each counted
  process, and (TFT) the stages the run left out by default (``counts.left_out``).
* ``dqn-inject`` — DQN re-registered with +5 % of each stage's own kind of work (the mechanism
  of ``benchmarks/ab.py``: ``INJECT``, ``model_extra``, ``make_repo``): one counts run per side
  and one timed ``perfgate ab --time-budget 90``, to see whether the count change of the feature
  extraction and the training step follows their wall-time change.

Per case: ``--runs`` stored counts runs (``tiny``: one more), recorded in rounds that interleave
all cases, so the runs of one case lie minutes apart; every pair is compared with
``compare_runs`` at thresholds 0.5 and 1 % (the stored A/A). ``--paired`` A/A checks
``perfgate ab --measure counts`` of one commit of the tiny suite against itself and
``--paired-dqn`` of DQN (HEAD against HEAD of this repository). Power of the tiny suite: for
+0.5, +1, +2 and +5 %, ``--power-runs`` stored runs (each compared with every A/A run) and
``--power-checks`` paired checks. Counts against time: ``--time-checks`` timed ``perfgate ab
--time-budget 30`` per change give the wall-time change (their estimate of the median's
change), printed beside the count change with the ratio of the two per stage.

A paired counts check runs at ``--threshold 0.5``; its verdict at 1 % is replayed from its
report: a count's p value does not depend on the threshold, so a regression at 1 % is one at
0.5 % whose estimate exceeds 1 % (likewise an improvement). A benchmark, not a test: it asserts
nothing about times. ``--report FOLDER/records.json`` prints the tables again from the records
that ``--out`` kept. Figures of this machine: ``benchmarks/counts_results.txt``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ab as abbench  # noqa: E402  (beside this script: make_repo, run_check, env, git)
from _proportions import wilson  # noqa: E402

from perfgate.core.compare import compare_runs  # noqa: E402
from perfgate.core.policy import Policy  # noqa: E402
from perfgate.runfile import load_run  # noqa: E402
from perfgate.workers.counts import count_stem  # noqa: E402

ROOT = HERE.parent
STAGES = """\
import os

import numpy as np

from perfgate.bench import stage

EXTRA = float(os.environ.get("COUNTS_EXTRA", "{loop}"))  # more loop iterations in `loop`, as a fraction
MATMUL_EXTRA = float(os.environ.get("MATMUL_EXTRA", "{matmul}"))  # more rows multiplied in `matmul`


@stage("matmul", metric="matmul_time_ms", unit="ms", suite="tiny")
def matmul(ctx):
    rng = np.random.default_rng(ctx.seed)
    b = rng.random((64, 64)) / 64
    a = rng.random((round(1600 * (1 + MATMUL_EXTRA)), 64))
    out = np.empty((a.shape[0], 64))

    def once():
        np.matmul(a, b, out=out)
        return np.tanh(out, out=out)

    return once


@stage("loop", metric="loop_time_ms", unit="ms", suite="tiny")
def loop(ctx):
    n = round(40000 * (1 + EXTRA))

    def once():
        s = 0
        for i in range(n):
            s += i * i
        return s

    return once
"""
TINY = ["--suite", "tiny", "--stages-module", "tinystages", "--model", "x"]
INJECTED = (0.005, 0.01, 0.02, 0.05)
THRESHOLDS = (0.5, 1.0)
TRACKS = (0.7, 1.3)  # a stage tracks time when count change / wall-time change lies here at +2 and +5 %
TARGET_STORED_S = 150
TARGET_PAIRED_DQN_S = 240
ALL_CASES = ("tiny", "dqn", "ppo", "mamba2", "tft", "dqn-inject")

STARTED = time.monotonic()


def log(what: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.0f} s] {what}", file=sys.stderr, flush=True)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without injected work, threads pinned to one, plus ``extra``."""
    env = {k: v for k, v in abbench.env().items() if k not in ("COUNTS_EXTRA", "MATMUL_EXTRA")}
    return {**env, **extra}


def tiny_env(pct: float) -> dict[str, str]:
    return {"COUNTS_EXTRA": str(pct), "MATMUL_EXTRA": str(pct)} if pct else {}


def run_bench(cwd: Path, out: Path, args: list[str], env: dict[str, str]) -> dict:
    """One ``perfgate bench --measure counts``: its wall time and the seconds of each counted process.

    A failure is retried once (the tree is shared with other work); a second one ends the benchmark."""
    argv = [sys.executable, "-m", "perfgate", "bench", *args, "--measure", "counts", "--output", str(out)]
    for attempt in (1, 2):
        t0 = time.monotonic()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        took = time.monotonic() - t0
        if done.returncode == 0:
            config = json.loads(out.read_text())["config"]
            return {"path": str(out), "wall": took, "processes": config["counts"]["process_seconds"]}
        log(f"attempt {attempt}: {' '.join(argv)} failed: {done.stderr.strip()[-400:]}")
    raise SystemExit(f"{' '.join(argv)} failed twice: {done.stderr.strip()[-400:]}")


def run_ab(argv: list[str], out: Path, cwd: Path) -> dict:
    """One ``perfgate ab`` (exit 0 or 1): its JSON report and wall time."""
    argv = [sys.executable, "-m", "perfgate", "ab", *argv, "--json", str(out), "--quiet"]
    for attempt in (1, 2):
        t0 = time.monotonic()
        done = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, check=False)
        took = time.monotonic() - t0
        if done.returncode in (0, 1):
            return {"data": json.loads(out.read_text()), "wall": took}
        log(f"attempt {attempt}: {' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    raise SystemExit(f"{' '.join(argv)} failed twice: {done.stderr.strip()[-400:]}")


def make_tiny_repo(root: Path) -> tuple[Path, dict[float, str]]:
    """A git repository whose commits differ only in the injected work of tinystages.py (0 the baseline)."""
    repo = root / "tinyrepo"
    repo.mkdir()
    abbench.git(repo, "init", "-q", "-b", "main")
    (repo / "tinystages.py").write_text(STAGES.format(loop=0, matmul=0))
    abbench.git(repo, "add", "tinystages.py")
    abbench.git(repo, "commit", "-q", "-m", "baseline")
    commits = {0.0: abbench.git(repo, "rev-parse", "HEAD")}
    for pct in INJECTED:
        abbench.git(repo, "checkout", "-q", "--detach", commits[0.0])
        (repo / "tinystages.py").write_text(STAGES.format(loop=pct, matmul=pct))
        abbench.git(repo, "commit", "-q", "-am", f"+{pct:.1%}")
        commits[pct] = abbench.git(repo, "rev-parse", "HEAD")
    abbench.git(repo, "checkout", "-q", "main")
    return repo, commits


# ---------------------------------------------------------------- decisions


def verdicts_of(base: str, cur: str) -> dict[float, dict[str, dict]]:
    """compare_runs of two stored runs at each threshold: per metric its verdict and estimated change."""
    b, c = load_run(Path(base)), load_run(Path(cur))
    out = {}
    for t in THRESHOLDS:
        result = compare_runs(b, c, Policy(threshold_pct=t))
        out[t] = {x.metric: {"verdict": x.verdict.value, "worse": x.worse} for x in result.comparisons}
    return out


def replayed(data: dict) -> dict[float, dict[str, dict]]:
    """A paired counts check's verdicts (run at 0.5 %) at each threshold (module docstring)."""
    out: dict[float, dict[str, dict]] = {}
    for t in THRESHOLDS:
        rows = {}
        for c in data["comparisons"]:
            verdict, worse = c["verdict"], c["worse"]
            if verdict == "regressed" and not worse > t / 100:
                verdict = "unchanged or inconclusive"
            if verdict == "improved" and not worse < 1 / (1 + t / 100) - 1:
                verdict = "unchanged or inconclusive"
            rows[c["metric"]] = {"verdict": verdict, "worse": worse}
        out[t] = rows
    return out


def spread(path: str) -> dict[str, tuple[float, float]]:
    """Per metric of one run: the largest |group median / first group's median - 1|, and the run's
    estimate (the geometric mean of its groups' medians, what a counts comparison compares)."""
    run = load_run(Path(path))
    out = {}
    for name, metric in run.metrics.items():
        medians = [statistics.median(g) for g in metric.group_samples()]
        out[name] = (max(abs(m / medians[0] - 1) for m in medians), statistics.geometric_mean(medians))
    return out


def fmt(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} [{lo:.0%}, {hi:.0%}]" if n else "–"


def secs(values: list[float]) -> str:
    if not values:
        return "–"
    return f"median {statistics.median(values):.0f}, min {min(values):.0f}, max {max(values):.0f}"


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


# ---------------------------------------------------------------- the plan


class Bench:
    """Every measurement of the benchmark, recorded as it is made (and saved to ``folder/records.json``)."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.args, self.folder = args, folder
        self.rec: dict = {
            "stored": defaultdict(list),  # case -> runs of unchanged code
            "stored_power": defaultdict(list),  # pct -> tiny runs with injected work
            "paired": defaultdict(list),  # case -> A/A checks
            "paired_power": defaultdict(list),  # pct -> tiny checks against an injected commit
            "times": defaultdict(list),  # pct -> timed ab checks of the tiny suite
            "single": {},  # mamba2, tft
            "dqn_inject": {},
            "errors": [],
        }
        self.seed = itertools.count(1000)
        self.tiny_repo: Path | None = None
        self.commits: dict[float, str] = {}

    def save(self) -> None:
        (self.folder / "records.json").write_text(json.dumps(self.rec, indent=1, default=str))

    def step(self, what: str, fn: Callable[[], dict], into: list | dict, key: str | None = None) -> None:
        try:
            got = fn()
        except (SystemExit, subprocess.SubprocessError, OSError, KeyError, ValueError) as exc:
            self.rec["errors"].append(f"{what}: {exc}")  # reported at the end; the other cases go on
            log(f"{what}: FAILED {exc}")
            self.save()
            return
        if key is None:
            into.append(got)  # type: ignore[union-attr]
        else:
            into[key] = got  # type: ignore[index]
        log(f"{what}: {got['wall']:.0f} s")
        self.save()

    # one measurement each
    def tiny_stored(self, pct: float, i: int) -> dict:
        assert self.tiny_repo is not None
        out = self.folder / f"tiny{'' if not pct else f'+{pct:.1%}'}-{i}.json"
        return run_bench(self.tiny_repo, out, TINY, clean_env(**tiny_env(pct)))

    def model_stored(self, model: str, i: int) -> dict:
        return run_bench(ROOT, self.folder / f"{model}-{i}.json", ["--model", model], clean_env())

    def tiny_paired(self, pct: float, name: str) -> dict:
        assert self.tiny_repo is not None
        argv = ["--repo", str(self.tiny_repo), "--baseline-ref", self.commits[0.0], "--current-ref", self.commits[pct]]
        argv += [*TINY, "--measure", "counts", "--threshold", "0.5", "--order-seed", str(next(self.seed))]
        return run_ab(argv, self.folder / f"{name}.json", self.tiny_repo.parent)

    def tiny_timed(self, pct: float, name: str) -> dict:
        assert self.tiny_repo is not None
        argv = ["--repo", str(self.tiny_repo), "--baseline-ref", self.commits[0.0], "--current-ref", self.commits[pct]]
        argv += [*TINY, "--threshold", "1", "--time-budget", "30", "--order-seed", str(next(self.seed))]
        return run_ab(argv, self.folder / f"{name}.json", self.tiny_repo.parent)

    def dqn_paired(self, name: str) -> dict:
        argv = ["--repo", str(ROOT), "--baseline-ref", "HEAD", "--current-ref", "HEAD", "--model", "dqn"]
        argv += ["--measure", "counts", "--threshold", "0.5", "--order-seed", str(next(self.seed))]
        return run_ab(argv, self.folder / f"{name}.json", ROOT)

    def plan(self) -> list[list[tuple[str, Callable[[], None]]]]:
        """Rounds of measurements; each round touches every case, so a case's runs lie minutes apart."""
        a, cases, rec = self.args, set(self.args.cases), self.rec
        rounds: list[list[tuple[str, Callable[[], None]]]] = []

        def at(r: int, what: str, fn: Callable[[], dict], into: list | dict, key: str | None = None) -> None:
            while len(rounds) <= r:
                rounds.append([])
            rounds[r].append((what, lambda: self.step(what, fn, into, key)))

        n_rounds = max(a.runs + 1 if "tiny" in cases else 0, a.runs if cases & {"dqn", "ppo"} else 0, 1)
        for r in range(n_rounds):
            if "tiny" in cases:
                if r < a.runs + 1:
                    at(r, f"tiny stored {r + 1}", lambda r=r: self.tiny_stored(0.0, r), rec["stored"]["tiny"])
                for pct in INJECTED if r < a.power_runs else ():
                    what = f"tiny stored +{pct:.1%} {r + 1}"
                    at(r, what, lambda p=pct, r=r: self.tiny_stored(p, r), rec["stored_power"][str(pct)])
                for k in range(r, a.paired, n_rounds):  # the A/A checks spread over the rounds
                    at(
                        r,
                        f"tiny paired A/A {k + 1}",
                        lambda k=k: self.tiny_paired(0.0, f"ab-aa-{k}"),
                        rec["paired"]["tiny"],
                    )
                for pct in INJECTED if r < a.power_checks else ():
                    what = f"tiny paired +{pct:.1%} {r + 1}"
                    at(
                        r,
                        what,
                        lambda p=pct, r=r: self.tiny_paired(p, f"ab+{p:.1%}-{r}"),
                        rec["paired_power"][str(pct)],
                    )
                for pct in INJECTED if r < a.time_checks else ():
                    what = f"tiny timed ab +{pct:.1%} {r + 1}"
                    at(r, what, lambda p=pct, r=r: self.tiny_timed(p, f"timed+{p:.1%}-{r}"), rec["times"][str(pct)])
            for model in ("dqn", "ppo"):
                if model in cases and r < a.runs:
                    at(r, f"{model} stored {r + 1}", lambda m=model, r=r: self.model_stored(m, r), rec["stored"][model])
            if "dqn" in cases and r < a.paired_dqn:
                at(r, f"dqn paired A/A {r + 1}", lambda r=r: self.dqn_paired(f"ab-dqn-aa-{r}"), rec["paired"]["dqn"])
        last = len(rounds)
        for model in ("mamba2", "tft"):
            if model in cases:
                at(last, f"{model} stored", lambda m=model: self.model_stored(m, 0), rec["single"], model)
        if "dqn-inject" in cases:
            at(last, "dqn-inject", self.dqn_inject, rec, "dqn_inject")
        return rounds

    def dqn_inject(self) -> dict:
        """DQN with +5 % of each stage's own kind: a counts run per side and one timed ab."""
        t0 = time.monotonic()
        (self.folder / "dqn-inject").mkdir(parents=True, exist_ok=True)
        repo, base, commits, cal = abbench.make_repo(self.folder / "dqn-inject", "dqn", [5.0])
        out: dict = {"extra": abbench.model_extra(cal, 5.0, "dqn"), "runs": {}}
        inject = ["--suite", "injected", "--stages-module", "inject", "--model", "dqn"]
        for side, commit in (("base", base), ("+5%", commits[5.0])):
            abbench.git(repo, "checkout", "-q", "--detach", commit)
            out["runs"][side] = run_bench(repo, self.folder / f"dqn-inject-{side}.json", inject, clean_env())
            log(f"dqn-inject counts {side}: {out['runs'][side]['wall']:.0f} s")
        abbench.git(repo, "checkout", "-q", "main")
        argv = ["--repo", str(repo), "--baseline-ref", base, "--current-ref", commits[5.0], *inject]
        argv += ["--threshold", "1", "--time-budget", "90", "--order-seed", str(next(self.seed))]
        out["timed"] = run_ab(argv, self.folder / "dqn-inject-timed.json", repo.parent)
        out["wall"] = time.monotonic() - t0
        return out

    def run(self) -> None:
        if "tiny" in self.args.cases:
            self.tiny_repo, self.commits = make_tiny_repo(self.folder)
        rounds = self.plan()
        for r, jobs in enumerate(rounds):
            log(f"round {r + 1} of {len(rounds)}: {len(jobs)} measurements")
            for _, job in jobs:
                job()


# ---------------------------------------------------------------- the report


def others(runs: list[dict]) -> str:
    """The median CPU share other processes took while the runs ran (recorded in each run)."""
    shares = []
    for r in runs:
        env = json.loads(Path(r["path"]).read_text())["config"].get("environment", {})
        if env.get("other_processes_cpu_pct") is not None:
            shares.append(env["other_processes_cpu_pct"])
    return f"{statistics.median(shares):.0f} % (max {max(shares):.0f})" if shares else ""


def against(walls: list[float], target: float) -> str:
    over = [w for w in walls if w > target]
    return f"<= {target}: met" if not over else f"<= {target}: missed by {len(over)} of {len(walls)}"


def report(rec: dict, args: argparse.Namespace) -> None:
    stored, single = rec["stored"], rec["single"]
    print("## Wall time per run (seconds)\n")
    rows = []
    for case, runs in stored.items():
        walls = [r["wall"] for r in runs]
        per = [p for r in runs for p in r["processes"]]
        target = against(walls, TARGET_STORED_S) if case in ("dqn", "ppo") else ""
        rows.append([f"{case} stored counts run", str(len(runs)), secs(walls), secs(per), others(runs), target])
    for pct, runs in sorted(rec["stored_power"].items(), key=lambda kv: float(kv[0])):
        walls = [r["wall"] for r in runs]
        per = [p for r in runs for p in r["processes"]]
        rows.append(
            [f"tiny stored counts run +{float(pct):.1%}", str(len(runs)), secs(walls), secs(per), others(runs), ""]
        )
    for case, checks in rec["paired"].items():
        walls = [c["wall"] for c in checks]
        target = against(walls, TARGET_PAIRED_DQN_S) if case == "dqn" else ""
        rows.append([f"{case} paired counts ab A/A (2 pairs)", str(len(walls)), secs(walls), "", "", target])
    power_checks = [c["wall"] for checks in rec["paired_power"].values() for c in checks]
    if power_checks:
        rows.append(
            ["tiny paired counts ab, injected (2 pairs)", str(len(power_checks)), secs(power_checks), "", "", ""]
        )
    timed = [c["wall"] for checks in rec["times"].values() for c in checks]
    if timed:
        rows.append(["tiny timed ab (--time-budget 30)", str(len(timed)), secs(timed), "", "", ""])
    for model, run in single.items():
        rows.append(
            [f"{model} stored counts run", "1", f"{run['wall']:.0f}", secs(run["processes"]), others([run]), ""]
        )
    if rec["dqn_inject"]:
        d = rec["dqn_inject"]
        for side, run in d["runs"].items():
            rows.append([f"DQN injected, counts run {side}", "1", f"{run['wall']:.0f}", secs(run["processes"]), "", ""])
        rows.append(["DQN injected, timed ab (--time-budget 90)", "1", f"{d['timed']['wall']:.0f}", "", "", ""])
    header = ["what", "n", "wall s per run", "s per counted process", "others' CPU (median)", "target"]
    table(header, rows)
    print("Stored counts runs: 2 processes side by side. Others' CPU: the share of the CPUs that processes")
    print("other than the run's took while it ran (the run's config.environment).\n")

    if "tft" in single:
        config = json.loads(Path(single["tft"]["path"]).read_text())["config"]["counts"]
        left = config.get("left_out") or []
        print("TFT, counts.left_out of the run: " + ("; ".join(f"{x['name']} ({x['why']})" for x in left) or "none"))
        metrics = sorted(json.loads(Path(single["tft"]["path"]).read_text())["metrics"])
        print(f"TFT, counted metrics: {', '.join(metrics)}\n")

    print("## Spread of counts of unchanged code: between the processes of a run, and between runs\n")
    print("Between processes: largest |group median / first group's median - 1| of a run. Between runs: the")
    print("largest / smallest run estimate - 1 (a run's estimate: geometric mean of its processes' medians).\n")
    rows = []
    runs_of = {**stored, **{model: [run] for model, run in single.items()}}
    for case, runs in runs_of.items():
        per_metric = defaultdict(list)
        for r in runs:
            for name, got in spread(r["path"]).items():
                per_metric[name].append(got)
        for name, got in sorted(per_metric.items()):
            within = [w for w, _ in got]
            estimates = [e for _, e in got]
            between = f"{max(estimates) / min(estimates) - 1:.4%}" if len(estimates) > 1 else "–"
            rows.append([case, name, str(len(got)), f"{statistics.median(within):.4%}", f"{max(within):.4%}", between])
    table(["case", "metric", "runs", "between processes: median", "largest", "between runs"], rows)

    aa = {
        case: [verdicts_of(x["path"], y["path"]) for x, y in itertools.combinations(runs, 2)]
        for case, runs in stored.items()
    }
    print("## Stored A/A: every pair of stored runs of unchanged code, compare_runs (earlier run the baseline)\n")
    print("Pairs share runs, so they are not independent: the intervals are those of independent checks.\n")
    rows = []
    for case, checks in aa.items():
        for t in THRESHOLDS:
            n = len(checks)
            alarms = sum(any(v["verdict"] == "regressed" for v in c[t].values()) for c in checks)
            better = sum(any(v["verdict"] == "improved" for v in c[t].values()) for c in checks)
            target = "met" if alarms / max(n, 1) <= 0.01 and better / max(n, 1) <= 0.01 else "missed"
            rows.append([case, f"{t:g} %", str(n), fmt(alarms, n), fmt(better, n), f"<= 1 %: {target}"])
    table(["case", "threshold", "comparisons", "false alarms (any metric)", "false improvements", "target"], rows)
    rows = []
    for case, checks in aa.items():
        names = sorted({m for c in checks for m in c[1.0]})
        for m in names:
            changes = [c[1.0][m]["worse"] for c in checks if c[1.0][m]["worse"] is not None]
            regressed = {t: sum(c[t][m]["verdict"] == "regressed" for c in checks) for t in THRESHOLDS}
            improved = {t: sum(c[t][m]["verdict"] == "improved" for c in checks) for t in THRESHOLDS}
            rows.append(
                [
                    case,
                    m,
                    f"{max(abs(x) for x in changes):.3%}" if changes else "–",
                    " / ".join(f"{regressed[t]}, {improved[t]}" for t in THRESHOLDS),
                ]
            )
    table(["case", "metric", "largest |estimated change|", "regressed, improved at 0.5 / 1 %"], rows)

    if rec["paired"]:
        print("## Paired A/A: perfgate ab --measure counts, one commit against itself (2 pairs)\n")
        rows = []
        for case, checks in rec["paired"].items():
            decided = [replayed(c["data"]) for c in checks]
            n = len(decided)
            for t in THRESHOLDS:
                alarms = sum(any(v["verdict"] == "regressed" for v in d[t].values()) for d in decided)
                better = sum(any(v["verdict"] == "improved" for v in d[t].values()) for d in decided)
                largest = max(
                    (abs(v["worse"]) for d in decided for v in d[t].values() if v["worse"] is not None), default=0
                )
                walls = [c["wall"] for c in checks]
                rows.append([case, f"{t:g} %", str(n), fmt(alarms, n), fmt(better, n), f"{largest:.3%}", secs(walls)])
        table(
            ["case", "threshold", "checks", "false alarms", "false improvements", "largest |change|", "s per check"],
            rows,
        )

    power(rec)
    tracking(rec)
    if rec["dqn_inject"]:
        dqn_tracking(rec["dqn_inject"])
    elif "dqn-inject" not in args.cases:
        print("DQN +5 % counts against time: not run (case dqn-inject not selected).\n")
    for error in rec.get("errors", []):
        print(f"FAILED: {error}")


def power(rec: dict) -> None:
    stored_a = rec["stored"].get("tiny", [])
    if not rec["stored_power"] and not rec["paired_power"]:
        return
    print("## Power, tiny suite: +X % work of each stage's own kind in both stages (caught = regressed)\n")
    names = ["matmul_instructions", "matmul_est_cycles", "loop_instructions", "loop_est_cycles"]
    rows = []
    for pct in INJECTED:
        key = str(pct)
        stored = [verdicts_of(a["path"], b["path"]) for b in rec["stored_power"].get(key, []) for a in stored_a]
        paired = [replayed(c["data"]) for c in rec["paired_power"].get(key, [])]
        for mode, checks in (("stored", stored), ("paired", paired)):
            if not checks:
                continue
            for t in THRESHOLDS:
                cells = [
                    fmt(sum(c[t].get(m, {}).get("verdict") == "regressed" for c in checks), len(checks)) for m in names
                ]
                change = [
                    statistics.mean(c[t][m]["worse"] for c in checks if m in c[t]) for m in names if m in checks[0][t]
                ]
                rows.append(
                    [f"+{pct:.1%}", mode, f"{t:g} %", str(len(checks)), *cells, ", ".join(f"{x:+.2%}" for x in change)]
                )
    table(["injected", "gate", "threshold", "checks", *names, "mean estimated change (same order)"], rows)
    print(
        "Stored: each injected run compared with every A/A run of the tiny suite; paired: perfgate ab --measure counts"
    )
    print("of the baseline commit against the injected one.\n")


def _timed(data: dict, metric: str) -> tuple[float, float, float] | None:
    """A timed check's estimate of ``metric``'s median change and its interval."""
    for c in data["comparisons"]:
        if c["metric"] == metric and c["statistic"] == "median" and c["worse"] is not None and c["ci"]:
            return c["worse"], c["ci"][0], c["ci"][1]
    return None


def pooled(estimates: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """The inverse-variance mean of checks' estimates, with its 95 % interval (each check's from its own)."""
    weights = [(2 * 1.96 / (hi - lo)) ** 2 for _, lo, hi in estimates]
    mean = sum(w * x for w, (x, _, _) in zip(weights, estimates, strict=True)) / sum(weights)
    half = 1.96 / math.sqrt(sum(weights))
    return mean, mean - half, mean + half


def ratio_interval(count: float, time_lo: float, time_hi: float) -> str:
    return f"{count / time_hi:.2f}–{count / time_lo:.2f}" if time_lo > 0 else f"{count / time_hi:.2f}–∞"


def tracking(rec: dict) -> None:
    if not rec["times"]:
        return
    print("## Counts track time? Tiny suite: count change beside the wall-time change of the same commits\n")
    print("Count change: mean estimate of the paired counts checks of the injected commit. Wall-time change:")
    print("timed perfgate ab (--time-budget 30) of the same commits, the estimate of the median's change; the")
    print("checks pooled by inverse variance, with the 95 % interval. Ratio: count change / wall-time change,")
    print("with the range the wall-time interval allows.\n")
    rows = []
    judged: dict[str, dict[float, tuple[float, float, float]]] = defaultdict(dict)  # ratio, its range
    for pct in INJECTED:
        key = str(pct)
        counted = [replayed(c["data"])[1.0] for c in rec["paired_power"].get(key, [])]
        timed = rec["times"].get(key, [])
        for stage in ("matmul", "loop"):
            instr = [c[f"{stage}_instructions"]["worse"] for c in counted]
            cycles = [c[f"{stage}_est_cycles"]["worse"] for c in counted]
            each = [x for x in (_timed(c["data"], f"{stage}_time_ms") for c in timed) if x is not None]
            if not instr or not each:
                continue
            i, y = statistics.mean(instr), statistics.mean(cycles)
            w, lo, hi = pooled(each)
            judged[stage][pct] = (i / w, i / hi, i / lo if lo > 0 else math.inf)
            rows.append(
                [
                    f"+{pct:.1%}",
                    stage,
                    f"{i:+.2%}",
                    f"{y:+.2%}",
                    f"{w:+.2%} [{lo:+.2%}, {hi:+.2%}]",
                    ", ".join(f"{x:+.1%}" for x, _, _ in each),
                    f"{i / w:.2f} ({ratio_interval(i, lo, hi)})",
                    f"{y / w:.2f}",
                ]
            )
    header = ["injected", "stage", "instructions", "est. cycles", "wall time [95 %]", "each timed check"]
    table([*header, "ratio instr/time (range)", "ratio cycles/time"], rows)
    low, high = TRACKS
    for stage, by in judged.items():
        big = {p: r for p, r in by.items() if p >= 0.02}
        inside = bool(big) and all(low <= r <= high for r, _, _ in big.values())
        if all(low <= lo and hi <= high for _, lo, hi in big.values()):
            sure = "the wall-time intervals confirm it"
        elif any(hi < low or lo > high for _, lo, hi in big.values()):
            sure = "a wall-time interval rules the band out"
        else:
            sure = "the wall-time intervals are too wide to tell either way"
        said = ", ".join(f"+{p:.0%}: {r:.2f} ({lo:.2f}–{hi:.2f})" for p, (r, lo, hi) in big.items())
        verdict = "tracks time" if inside else "does not track time"
        print(f"- {stage}: ratio {said} -> {verdict} (band {low}–{high}); {sure}")
    print("  (+0.5 and +1 % are printed but not judged: they lie within the timed checks' noise)\n")


def dqn_tracking(d: dict) -> None:
    print("## Counts track time? DQN, +5 % of each stage's own kind (benchmarks/ab.py's injection)\n")
    print(f"Injected units per call: {d['extra']} (5 % of each stage's median; inference: of its p99)\n")
    counted = verdicts_of(d["runs"]["base"]["path"], d["runs"]["+5%"]["path"])[1.0]
    rows = []
    for c in d["timed"]["data"]["comparisons"]:
        # a latency's middle is its p50, every other stage's its median
        if c["statistic"] != ("p50" if c["metric"].startswith("inference_latency") else "median"):
            continue
        stem = count_stem(c["metric"])
        instr = counted.get(f"{stem}_instructions", {}).get("worse")
        cycles = counted.get(f"{stem}_est_cycles", {}).get("worse")
        w = c["worse"]
        rows.append(
            [
                c["metric"],
                f"{instr:+.2%}" if instr is not None else "–",
                f"{cycles:+.2%}" if cycles is not None else "–",
                f"{w:+.2%}" if w is not None else "–",
                f"{instr / w:.2f}" if instr is not None and w else "–",
                f"{cycles / w:.2f}" if cycles is not None and w else "–",
                _judged(instr, w),
            ]
        )
    table(
        [
            "stage (time metric)",
            "instructions",
            "est. cycles",
            "wall time (timed ab)",
            "ratio instr/time",
            "ratio cycles/time",
            "instructions track time?",
        ],
        rows,
    )


def _judged(instr: float | None, wall: float | None) -> str:
    """The issue's rule on one injected change: the count change within x0.7-1.3 of the time's."""
    if instr is None or wall is None:
        return "–"
    if abs(wall) < 0.02:
        return "not judged (under 2 % in time: nothing was injected that it sees)"
    low, high = TRACKS
    return "yes" if low <= instr / wall <= high else "no"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=ALL_CASES, default=list(ALL_CASES))
    parser.add_argument("--runs", type=int, default=7, help="stored runs per case (tiny: one more)")
    parser.add_argument("--paired", type=int, default=10, help="paired A/A checks of the tiny suite")
    parser.add_argument("--paired-dqn", type=int, default=2, help="paired A/A checks of DQN")
    parser.add_argument("--power-runs", type=int, default=3, help="stored tiny runs per injected change")
    parser.add_argument("--power-checks", type=int, default=3, help="paired tiny checks per injected change")
    parser.add_argument("--time-checks", type=int, default=3, help="timed tiny ab checks per injected change")
    parser.add_argument("--out", type=Path, default=None, help="keep run files and records.json here")
    parser.add_argument("--report", type=Path, default=None, help="only print the report of this records.json")
    args = parser.parse_args()
    if args.report is not None:
        report(json.loads(args.report.read_text()), args)
        return 0
    folder = args.out or Path(tempfile.mkdtemp(prefix="perfgate-counts-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    bench = Bench(args, folder)
    bench.run()
    print(
        f"perfgate {abbench.git(ROOT, 'rev-parse', '--short', 'HEAD')}; {os.cpu_count()} CPUs; total wall time "
        f"{time.monotonic() - STARTED:.0f} s; run files in {folder}\n"
    )
    report(json.loads((folder / "records.json").read_text()), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

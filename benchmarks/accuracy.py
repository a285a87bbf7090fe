"""The unpaired gate's accuracy on real runs of this machine: false alarms, power, time.

Two steps, so that one recorded corpus can be checked under every rule:

    python benchmarks/accuracy.py record --out corpus/ [--aa 21 --ab 10 --slowdowns 10,20 --processes 4]
    python benchmarks/accuracy.py evaluate corpus/
    python benchmarks/accuracy.py shared [--trials 200 --metrics 600]
    python benchmarks/accuracy.py record --out hist/ --tools bench --lead 20 --aa 8 --ab 6 --processes 2
    python benchmarks/accuracy.py history hist/ [--lengths 0,5,10,20]

``record`` runs, spread over time and interleaved:

* ``perfgate bench`` of DQN in 4 worker processes per run: unchanged code (A) and code whose
  feature extraction and training step do a known amount of extra work of their own kind
  (+10 %, +20 %, injected by a stages module this script writes: compute work after each
  feature call, interpreter work after each training step; the product has no switch);
* real pyperf runs (8 worker processes x 5 values) and real pytest-benchmark runs of a
  numeric kernel, with identical work (A) and with 10 % and 20 % more iterations.

``evaluate`` checks, at the default threshold (10 %) and alpha (0.01):

* A/A: each unchanged run against the unchanged run recorded before it; a check with any
  regression is a false alarm, and one with any improvement a false improvement;
* power: each slowed run against the unchanged run recorded just before it; a hit is the
  slowed metric flagged as regressed;

``shared`` simulates checks of many metrics that share the run's phase (seeded; a
t-distributed phase with 4 degrees of freedom, scaled to the assumed 12 %, and an 8 %
process term per metric): unchanged, and every metric 2× slower. It prints, with and without
the common-shift step (:mod:`perfgate.core.decision._common_shift`), the share of checks that claim a
regression or an improvement, that exit 0, 1 and 2, with Wilson intervals.

for stored comparisons with 4 processes and with 1 process per side (process 1 of each run),
each with the machine-speed index and without it (the same runs, references removed), for
the imported pyperf and pytest-benchmark files, and for the original flat-file rule (medians
over the threshold) on the same single-process runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _proportions import wilson  # noqa: E402  (beside this script)

from perfgate.core.compare import Verdict, compare_runs  # noqa: E402
from perfgate.core.metrics import Direction  # noqa: E402
from perfgate.core.noise import normalised  # noqa: E402
from perfgate.core.policy import Policy  # noqa: E402
from perfgate.core.schema import Metric, Reference, Run  # noqa: E402
from perfgate.importers import ImportOptions, import_file  # noqa: E402
from perfgate.runfile import load_run  # noqa: E402

SLOWED = {"feature_extraction_time_ms": "features", "training_step_time_ms": "training_step_dqn"}

INJECT = textwrap.dedent(
    """
    # Written by benchmarks/accuracy.py: extra work of each stage's own kind after every call.
    import dataclasses, os, time
    import numpy as np
    import perfgate_pipeline.stages  # noqa: F401  (registers the pipeline)
    from perfgate.bench import registry

    FACTOR = float(os.environ["PERFGATE_ACCURACY_SLOWDOWN"])
    STAGES = os.environ.get("PERFGATE_ACCURACY_STAGES", "features,training_step").split(",")
    _a = np.random.default_rng(0).standard_normal((48, 48)) * 0.1

    def _compute(n):
        x = _a
        for _ in range(n):
            x = np.tanh(x @ _a)
        return x

    def _interpreter(n):
        t = 0
        for i in range(n * 50):
            t = (t + i * 7) % 1000003
        return t

    def _median(fn, k):
        t = []
        for _ in range(k):
            t0 = time.perf_counter(); fn(); t.append(time.perf_counter() - t0)
        return sorted(t)[k // 2]

    def slowed(original, extra):
        def setup(ctx):
            call = original.setup(ctx)
            for _ in range(3):
                call()
            nominal = _median(call, 15)
            per_iter = _median(lambda: extra(20), 15) / 20
            iters = max(1, round(FACTOR * nominal / per_iter))

            def once():
                out = call()
                extra(iters)
                return out

            return once
        return dataclasses.replace(original, setup=setup)

    for (suite, name), st in list(registry._REGISTRY.items()):
        if name == "features" and "features" in STAGES:
            registry.register(slowed(st, _compute))
        elif name.startswith("training_step_") and "training_step" in STAGES:
            registry.register(slowed(st, _interpreter))
    """
)

KERNEL = textwrap.dedent(
    """
    import os
    import numpy as np
    ITERS = int(os.environ.get("PERFGATE_ACCURACY_ITERS", "100"))
    _a = np.random.default_rng(0).standard_normal((96, 96)) * 0.05
    _l = list(range(300, 0, -1))

    def numeric():
        x = _a
        for _ in range(ITERS):
            x = np.tanh(x @ _a)
        return x

    def sort():  # interpreter work: what tests/importers/test_real_tools.py times
        for _ in range(ITERS):
            y = sorted(_l)
        return y

    kernel = sort if os.environ.get("PERFGATE_ACCURACY_WORK") == "sort" else numeric
    """
)

PYPERF_SCRIPT = "import pyperf\nfrom accuracy_kernel import kernel\npyperf.Runner().bench_func('kernel', kernel)\n"
PYTEST_SCRIPT = "from accuracy_kernel import kernel\n\ndef test_kernel(benchmark):\n    benchmark(kernel)\n"


# ---------------------------------------------------------------- record


WORK = {"work": "numeric"}  # record's --work: the imported tools' kernel


def _env(extra: dict[str, str], path: str) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": path,
        "PERFGATE_ACCURACY_WORK": WORK["work"],
        **extra,
    }


def _bench(out: Path, factor: float, processes: int, module_dir: Path, stages: str = "features,training_step") -> None:
    cmd = [
        sys.executable,
        "-m",
        "perfgate",
        "bench",
        "--model",
        "dqn",
        "--output",
        str(out),
        "--processes",
        str(processes),
    ]
    extra = {}
    if factor:
        cmd += ["--stages-module", "perfgate_accuracy_inject"]
        extra["PERFGATE_ACCURACY_SLOWDOWN"] = str(factor)
        extra["PERFGATE_ACCURACY_STAGES"] = stages
    subprocess.run(
        cmd, check=True, capture_output=True, text=True, cwd=module_dir, env=_env(extra, f"{module_dir}:{ROOT}")
    )


def _pyperf(out: Path, factor: float, work: Path) -> None:
    iters = str(round(100 * (1 + factor)))
    subprocess.run(
        [
            sys.executable,
            str(work / "pyperf_kernel.py"),
            "--processes",
            "8",
            "--values",
            "5",
            "--quiet",
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
        env=_env({"PERFGATE_ACCURACY_ITERS": iters}, str(work)),
    )


def _pytest_benchmark(out: Path, factor: float, work: Path) -> None:
    iters = str(round(100 * (1 + factor)))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_kernel_bench.py",
            f"--benchmark-json={out}",
            "--benchmark-min-rounds=200",
            "--benchmark-max-time=0.5",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
        env=_env({"PERFGATE_ACCURACY_ITERS": iters}, str(work)),
    )


def _freeze(work: Path) -> str:
    """HEAD's perfgate and perfgate_pipeline, unpacked in ``work`` (first on the children's PYTHONPATH).

    So the runs measure committed code however the working tree changes while they are recorded.
    """
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True)
    tar = subprocess.run(
        ["git", "archive", "HEAD", "perfgate", "perfgate_pipeline"], cwd=ROOT, check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(work)], input=tar.stdout, check=True)
    return commit.stdout.strip()


def record(args: argparse.Namespace) -> None:
    WORK["work"] = args.work
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    factors = [float(v) / 100 for v in args.slowdowns.split(",")]
    manifest: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        commit = _freeze(work)
        print(f"  perfgate of {commit[:12]} (HEAD), frozen in {work}", file=sys.stderr)
        (work / "perfgate_accuracy_inject.py").write_text(INJECT)
        (work / "accuracy_kernel.py").write_text(KERNEL)
        (work / "pyperf_kernel.py").write_text(PYPERF_SCRIPT)
        (work / "test_kernel_bench.py").write_text(PYTEST_SCRIPT)
        # rounds: each has one A run, and a B run of each slowdown while B runs remain; A runs first and
        # between, so every B run has an A run recorded just before it
        plan: list[tuple[str, float]] = [("A", 0.0)] * args.lead  # a history recorded before the checks
        for i in range(max(args.aa, args.ab)):
            if i < args.aa:
                plan.append(("A", 0.0))
            if i < args.ab:
                plan.extend(("B", f) for f in factors)
        started = time.perf_counter()
        draw = np.random.default_rng(args.seed)
        for k, (kind, factor) in enumerate(plan):
            tag = f"{k:03d}_{kind}{round(factor * 100)}"
            loaded = bool(draw.random() < args.load)
            burners = (
                [  # a neighbour on every CPU, as when other jobs share the machine
                    subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)
                ]
                if loaded
                else []
            )
            try:
                for tool, fn in (
                    ("bench", lambda p, f: _bench(p, f, args.processes, work, args.stages)),
                    ("pyperf", lambda p, f: _pyperf(p, f, work)),
                    ("pytest_benchmark", lambda p, f: _pytest_benchmark(p, f, work)),
                ):
                    if tool not in args.tools.split(","):
                        continue
                    path = out / f"{tool}_{tag}.json"
                    t0 = time.perf_counter()
                    fn(path, factor)
                    manifest.append(
                        {
                            "tool": tool,
                            "index": k,
                            "kind": kind,
                            "factor": factor,
                            **({"slowed": args.stages.split(",") if factor else []} if tool == "bench" else {}),
                            "file": path.name,
                            "seconds": round(time.perf_counter() - t0, 2),
                            "loaded": loaded,
                            "at": round(time.time(), 1),
                        }
                    )
            finally:
                for b in burners:
                    b.kill()
                    b.wait()
            (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
            print(f"  {k + 1}/{len(plan)} {kind} {factor:g} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)


def record_suite(args: argparse.Namespace) -> None:
    """Runs of benchmarks/suite12.py, both forms per run: unchanged, a third of it slowed, all of it slowed."""
    import suite12  # beside this script

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subset = args.slowed.split(",")
    suite12.slowdowns(",".join(f"{n}=0" for n in subset))  # unknown names fail here, not an hour in
    factors = [float(v) / 100 for v in args.slowdowns.split(",")]
    # rounds: one A run each, first in its round; the slowed runs spread evenly over the rounds
    rounds: list[list[tuple[str, float, list[str]]]] = [[("A", 0.0, [])] for _ in range(args.aa)]
    for kind, factor, names, n in [
        *(("B", f, subset, args.ab) for f in factors),
        ("ALL", args.all / 100, ["all"], args.n_all),
    ]:
        for j in range(n):
            rounds[(j * args.aa) // n + (args.aa // n) // 2].append((kind, factor, names))
    plan = [run for r in rounds for run in r]
    manifest: list[dict[str, object]] = []
    draw = np.random.default_rng(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        commit = _freeze(work)
        suite12.write_work(work)
        print(f"  {len(plan)} runs; perfgate of {commit[:12]} (HEAD), frozen in {work}", file=sys.stderr)
        for k, (kind, factor, names) in enumerate(plan):
            if k and args.gap and kind == "A":
                time.sleep(args.gap)  # spread the rounds over time
            tag = f"{k:03d}_{kind}{round(factor * 100)}"
            slow = ",".join(f"{n}={factor:g}" for n in names) if factor else ""
            loaded = bool(draw.random() < args.load)
            burners = (
                [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
                if loaded
                else []
            )
            try:
                for tool, fn in (
                    ("pytest_benchmark", lambda p, s=slow: suite12.run_pytest(p, work, s)),
                    ("bench", lambda p, s=slow: suite12.run_bench(p, work, s, args.processes)),
                ):
                    path = out / f"{tool}_{tag}.json"
                    t0 = time.perf_counter()
                    fn(path)
                    manifest.append(
                        {
                            "tool": tool,
                            "index": k,
                            "kind": kind,
                            "factor": factor,
                            "slowed": sorted(suite12.NAMES) if names == ["all"] else sorted(names),
                            "file": path.name,
                            "seconds": round(time.perf_counter() - t0, 2),
                            "loaded": loaded,
                            "at": round(time.time(), 1),
                            "perfgate_commit": commit,
                        }
                    )
            finally:
                for b in burners:
                    b.kill()
                    b.wait()
            (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
            print(f"  {k + 1}/{len(plan)} {kind} {factor:g} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)


# ---------------------------------------------------------------- evaluate


def without_index(run: Run) -> Run:
    metrics = {n: replace(m, reference=None) for n, m in run.metrics.items()}
    return replace(run, metrics=metrics, machine_index={})


def single_process(run: Run, index: int = 0) -> Run:
    """Worker process ``index`` of a multi-process run, as if it had been run alone."""
    metrics = {}
    for name, m in run.metrics.items():
        groups = m.groups or (len(m.samples),)
        start = sum(groups[: min(index, len(groups) - 1)])
        size = groups[min(index, len(groups) - 1)]
        ref = None
        if m.reference is not None:
            ref = Reference(kernel=m.reference.kernel, seconds=m.reference.seconds[start : start + size])
        metrics[name] = Metric(
            name=name, unit=m.unit, direction=m.direction, samples=m.samples[start : start + size], reference=ref
        )
    return replace(run, metrics=metrics, run_id=f"{run.run_id}-p{index}", config={**run.config, "processes": 1})


def original_rule(base: Run, cur: Run, threshold: float) -> set[str]:
    hits = set()
    for name, c in cur.metrics.items():
        b = base.metrics.get(name)
        if b is None or c.direction is Direction.INFO:
            continue
        mb, mc = float(np.median(b.samples)), float(np.median(c.samples))
        if mb > 0 and (mc / mb - 1 if c.direction is Direction.LOWER else 1 - mc / mb) > threshold / 100:
            hits.add(name)
    return hits


POLICY: dict[str, object] = {}  # evaluate's options for the product's policy


def perfgate_rule(base: Run, cur: Run, threshold: float) -> set[str]:
    result = compare_runs(base, cur, Policy(threshold_pct=threshold, **POLICY), allow_machine_mismatch=True)
    return {c.metric for c in result.regressions}


def perfgate_better(base: Run, cur: Run, threshold: float) -> set[str]:
    """The metrics a check calls improved: on unchanged code, as false a claim as a regression."""
    result = compare_runs(base, cur, Policy(threshold_pct=threshold, **POLICY), allow_machine_mismatch=True)
    return {c.metric for c in result.comparisons if c.verdict.value == "improved"}


def original_better(base: Run, cur: Run, threshold: float) -> set[str]:
    return original_rule(cur, base, threshold)  # better by more than the threshold: the other way round


def _load(corpus: Path, entry: dict[str, object]) -> Run:
    path = corpus / str(entry["file"])
    if entry["tool"] == "bench":
        return load_run(path)
    return import_file(str(entry["tool"]).replace("_", "-"), path, ImportOptions(model="kernel")).run


def evaluate(args: argparse.Namespace) -> None:
    corpus = Path(args.corpus)
    manifest = json.loads((corpus / "manifest.json").read_text())
    threshold = args.threshold
    if args.index_shift is not None:
        POLICY["index_shift"] = args.index_shift / 100.0
    if args.normal_tail:  # the rule before the t tail: a normal run-to-run term
        POLICY["assumed_raw"] = replace(Policy().assumed_raw, tail_df=None)
        POLICY["assumed_normalised"] = replace(Policy().assumed_normalised, tail_df=None)
    views = {
        "4 processes, index": lambda r: r,
        "4 processes, no index": without_index,
        "1 process, index": single_process,
        "1 process, no index": lambda r: without_index(single_process(r)),
    }
    shift = POLICY.get("index_shift", Policy().index_shift)
    print(
        f"threshold {threshold:g} %, alpha 0.01, index shift {shift:.0%}; A/A: each unchanged run against the one "
        "before it; power: each slowed run against the unchanged run just before it\n"
    )
    print(
        f"{'case':<34} {'rule':<10} {'A/A alarms':>12} {'A/A improved':>13} {'power +10 %':>16} {'power +20 %':>16} "
        f"{'s/run':>6}"
    )
    for tool in ("bench", "pyperf", "pytest_benchmark"):
        entries = [e for e in manifest if e["tool"] == tool]
        if not entries:
            continue
        runs = {e["file"]: _load(corpus, e) for e in entries}
        a_seq = [e for e in entries if e["kind"] == "A"]
        if args.all_pairs:  # every earlier unchanged run as a baseline of every later one (checks not independent)
            aa = [(runs[x["file"]], runs[y["file"]]) for x, y in itertools.combinations(a_seq, 2)]
        else:
            aa = [(runs[a_seq[i - 1]["file"]], runs[a_seq[i]["file"]]) for i in range(1, len(a_seq))]
        ab: dict[float, list[tuple[Run, Run]]] = {}
        for e in entries:
            if e["kind"] != "B":
                continue
            before = [a for a in a_seq if a["index"] <= e["index"]]
            if before:
                ab.setdefault(float(e["factor"]), []).append((runs[before[-1]["file"]], runs[e["file"]]))
        seconds = float(np.median([float(e["seconds"]) for e in entries]))
        targets = set(SLOWED) if tool == "bench" else {"kernel_time_ms", "kernel_ms", "kernel"}
        cases = views.items() if tool == "bench" else [(f"imported {tool.replace('_', '-')}", lambda r: r)]
        for label, view in cases:
            rules = [("perfgate", perfgate_rule, perfgate_better)]
            if label.startswith("1 process, no"):
                rules.append(("original", original_rule, original_better))
            for rule_name, rule, better in rules:
                alarms = [sorted(rule(view(b), view(c), threshold)) for b, c in aa]
                n_alarm = sum(bool(a) for a in alarms)
                n_better = sum(bool(better(view(b), view(c), threshold)) for b, c in aa)
                cells = []
                for factor in (0.10, 0.20):
                    pairs = ab.get(factor, [])
                    per_metric = []
                    for metric in sorted(targets):
                        hits = [metric in rule(view(b), view(c), threshold) for b, c in pairs if metric in c.metrics]
                        if hits:
                            per_metric.append(f"{sum(hits)}/{len(hits)}")
                    cells.append(" ".join(per_metric) if per_metric else "—")
                print(
                    f"{label:<34} {rule_name:<10} {f'{n_alarm}/{len(aa)}':>12} {f'{n_better}/{len(aa)}':>13} "
                    f"{cells[0]:>16} {cells[1]:>16} "
                    f"{seconds:>6.0f}"
                )
                if args.verbose and n_alarm:
                    print("    alarms:", [a for a in alarms if a])
        if tool == "bench":
            noise_components([runs[e["file"]] for e in a_seq])
            for metric in sorted(SLOWED):
                for factor, pairs in sorted(ab.items()):
                    ratios = [
                        float(np.median(c.metrics[metric].samples) / np.median(b.metrics[metric].samples))
                        for b, c in pairs
                    ]
                    scaled = [
                        float(np.median(nc.samples) / np.median(nb.samples))
                        for nb, nc in ((normalised(b.metrics[metric]), normalised(c.metrics[metric])) for b, c in pairs)
                        if nb is not None and nc is not None
                    ]
                    line = (
                        f"    measured {metric} at nominal +{factor:.0%}: median ratio raw "
                        f"{np.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})"
                    )
                    if scaled:
                        line += f", normalised {np.median(scaled):.3f} (range {min(scaled):.3f}-{max(scaled):.3f})"
                    print(line)


def history(args: argparse.Namespace) -> None:
    """Power and A/A of the stored check against how many recorded runs its noise is learned from.

    The corpus's first ``--lead`` unchanged DQN runs (``record --lead``) are the history, in the
    order they were recorded; for a length ``h`` the noise is learned from the newest ``h`` of them
    as ``perfgate calibrate`` learns it (:func:`perfgate.calibration.estimate_noise`; 0: none, the
    assumed noise). The checks are the runs recorded after the history: A/A each unchanged run
    against the one before it, power each slowed run against the unchanged run just before it,
    at the default threshold and α.
    """
    from perfgate.calibration import estimate_noise

    corpus = Path(args.corpus)
    manifest = json.loads((corpus / "manifest.json").read_text())
    entries = [e for e in manifest if e["tool"] == "bench"]
    runs = {e["file"]: _load(corpus, e) for e in entries}
    a_seq = [e for e in entries if e["kind"] == "A"]
    lead, checked = a_seq[: args.lead], a_seq[args.lead :]
    last_lead = lead[-1]["index"] if lead else -1
    aa = [(runs[checked[i - 1]["file"]], runs[checked[i]["file"]]) for i in range(1, len(checked))]
    ab: dict[float, list[tuple[Run, Run]]] = {}
    for e in entries:
        if e["kind"] != "B" or e["index"] <= last_lead:
            continue
        before = [a for a in checked if a["index"] <= e["index"]]
        if before:
            ab.setdefault(float(e["factor"]), []).append((runs[before[-1]["file"]], runs[e["file"]]))
    from perfgate.core.noise import CALIBRATED_TAIL_DF

    raw_df, norm_df = Policy().assumed_raw.tail_df, Policy().assumed_normalised.tail_df
    tail = (
        "normal"
        if args.normal_tail
        else f"t tail, df raw {raw_df:g} assumed / {CALIBRATED_TAIL_DF['raw']:g} learned, "
        f"normalised {norm_df:g} / {CALIBRATED_TAIL_DF['normalised']:g}"
    )
    print(
        f"run-to-run term: {tail}; "
        f"history: {len(lead)} unchanged DQN runs; checked after it: {len(aa)} A/A pairs, "
        + ", ".join(f"{len(v)} at +{k:.0%}" for k, v in sorted(ab.items()))
        + "; default threshold (10 %) and α (0.01); power = the slowed metric flagged regressed\n"
    )
    header = f"{'history':>8} {'A/A claims':>18}"
    for factor in sorted(ab):
        for metric in sorted(SLOWED):
            header += f" {f'+{factor:.0%} {SLOWED[metric]}':>28}"
    print(header)
    for h in (int(x) for x in args.lengths.split(",") if x and aa):
        if h > len(lead):
            print(f"{h:>8} (the corpus has a history of {len(lead)} runs)")
            continue
        learned = [runs[e["file"]] for e in lead[len(lead) - h :]] if h else []
        policy = Policy(noise=estimate_noise(learned), noise_runs=h) if h >= 3 else Policy()
        if args.normal_tail:  # the rule before the t tail: a normal run-to-run term
            policy = replace(
                policy,
                assumed_raw=replace(policy.assumed_raw, tail_df=None),
                assumed_normalised=replace(policy.assumed_normalised, tail_df=None),
            )
        claims = 0
        for b, c in aa:
            result = compare_runs(b, c, policy, allow_machine_mismatch=True)
            claims += bool(result.regressions or result.with_verdict(Verdict.IMPROVED))
        lo, hi = wilson(claims, len(aa))
        line = f"{h:>8} {f'{claims}/{len(aa)} [{lo:.0%}, {hi:.0%}]':>18}"
        for factor in sorted(ab):
            for metric in sorted(SLOWED):
                hits = [
                    metric in {r.metric for r in compare_runs(b, c, policy, allow_machine_mismatch=True).regressions}
                    for b, c in ab[factor]
                ]
                lo, hi = wilson(sum(hits), len(hits))
                line += f" {f'{sum(hits)}/{len(hits)} [{lo:.0%}, {hi:.0%}]':>28}"
        print(line)
    if a_seq:
        phase_fit([runs[e["file"]] for e in a_seq], " of perfgate bench")
        raw_tails([without_index(runs[e["file"]]) for e in a_seq], len(lead))
    for tool in ("pyperf", "pytest_benchmark"):  # imported runs of a corpus recorded with them
        unchanged = [_load(corpus, e) for e in manifest if e["tool"] == tool and e["kind"] == "A"]
        if unchanged:
            phase_fit(unchanged, f" of {tool.replace('_', '-')}")


def _t_fit(d: np.ndarray) -> tuple[float, float, tuple[float, float]]:
    """Student t fitted by maximum likelihood to ``d`` (location 0): df, scale, and the df's 95 %
    profile-likelihood interval (a df of 999 stands for a normal)."""
    from scipy import optimize
    from scipy import stats as sps

    df, _, scale = sps.t.fit(d, floc=0.0)
    df = min(df, 999.0)

    def profile(nu: float) -> float:
        res = optimize.minimize_scalar(
            lambda ls: -float(np.sum(sps.t.logpdf(d, nu, scale=math.exp(ls)))),
            bounds=(math.log(scale) - 3, math.log(scale) + 3),
            method="bounded",
        )
        return -float(res.fun)

    best = max(profile(df), float(np.sum(sps.t.logpdf(d, df, scale=scale))))
    cut = best - 1.92  # half the 95 % chi-square(1) quantile
    grid = np.exp(np.linspace(math.log(0.5), math.log(999.0), 120))
    inside = [nu for nu in grid if profile(float(nu)) >= cut]
    return df, scale, (float(min(inside)), float(max(inside))) if inside else (math.nan, math.nan)


def raw_tails(unchanged: list[Run], lead: int) -> None:
    """A/A of raw times (the kernels removed) with the noise learned from the first ``lead`` runs,
    under a normal tail and t tails of a few degrees of freedom: every 7th pair of unchanged runs."""
    from perfgate.calibration import estimate_noise

    pairs = list(itertools.combinations(unchanged, 2))[::7]
    learned = Policy(noise=estimate_noise(unchanged[:lead]), noise_runs=lead)
    print(f"\nraw times, noise learned from {lead} runs: A/A claims over {len(pairs)} pairs of unchanged runs")
    from perfgate.core.noise import CALIBRATED_TAIL_DF

    product = dict(CALIBRATED_TAIL_DF)
    for df in (None, 1.0, 2.0, 3.0, 5.0):
        CALIBRATED_TAIL_DF["raw"] = df if df is not None else product["raw"]  # a learned noise's tail too
        for label, base in (("assumed", Policy()), ("learned", learned)):
            policy = replace(base, assumed_raw=replace(base.assumed_raw, tail_df=df))
            claims = 0
            for b, c in pairs:
                result = compare_runs(b, c, policy, allow_machine_mismatch=True)
                claims += bool(result.regressions or result.with_verdict(Verdict.IMPROVED) or result.shift_regressed)
            lo, hi = wilson(claims, len(pairs))
            tail = "normal" if df is None else f"t, {df:g} df"
            print(f"  {tail:<10} {label:<8} {claims}/{len(pairs)} [{lo:.0%}, {hi:.0%}]")
    CALIBRATED_TAIL_DF.update(product)


def phase_fit(unchanged: list[Run], label: str = "") -> None:
    """The shape of the run-to-run phase on these unchanged runs: a t distribution fitted to the
    successive differences of each metric's log median over √2 (raw, and normalised by the
    reference kernel where the run has one), beside the normal model the product assumes; then
    one fit per kind to every metric's differences, each over its own robust SD (MAD / 0.6745)."""
    print(
        f"\nphase shape on {len(unchanged)} unchanged runs{label} (successive differences of log medians / √2; "
        "t fitted by maximum likelihood; a large df is a normal phase; 95 % profile-likelihood interval of df)"
    )
    print(
        f"{'metric':<32} {'kind':<11} {'n':>3} {'SD':>7} {'robust SD':>10} {'t df':>7} {'df 95 %':>13} "
        f"{'t scale':>8} {'largest |d|':>12}"
    )
    names = sorted({n for r in unchanged for n, m in r.metrics.items() if m.direction is not Direction.INFO})
    pooled: dict[str, list[float]] = {"raw": [], "normalised": []}
    for name in names:
        first = next(r.metrics[name] for r in unchanged if name in r.metrics)
        if name.startswith("throughput") or first.unit in ("MB", "B", "KB", "GB"):
            continue  # the training step's time as a rate (the same numbers); memory, which has no phase
        for kind in ("raw", "normalised"):
            logs = []
            for run in unchanged:
                metric = run.metrics.get(name)
                values = None if metric is None else (normalised(metric) if kind == "normalised" else metric)
                if values is not None and float(np.median(values.samples)) > 0:
                    logs.append(math.log(float(np.median(values.samples))))
            if len(logs) < 8:
                continue
            d = np.diff(logs) / math.sqrt(2)
            robust = float(np.median(np.abs(d)) / 0.6744897501960817)
            df, scale, (lo, hi) = _t_fit(d)
            if robust > 0:
                pooled[kind].extend(float(x) for x in d / robust)
            print(
                f"{name:<32} {kind:<11} {len(d):>3} {float(np.std(d, ddof=1)):>7.2%} {robust:>10.2%} {df:>7.1f} "
                f"{f'{lo:.1f}-{hi:.0f}':>13} {scale:>8.2%} {float(np.max(np.abs(d))):>12.2%}"
            )
    for kind, values in pooled.items():
        if len(values) >= 8:
            d = np.asarray(values)
            df, scale, (lo, hi) = _t_fit(d)
            print(
                f"{'all metrics, each / robust SD':<32} {kind:<11} {len(d):>3} {float(np.std(d, ddof=1)):>7.2f} "
                f"{1.0:>10.2f} {df:>7.1f} {f'{lo:.1f}-{hi:.0f}':>13} {scale:>8.2f} {float(np.max(np.abs(d))):>12.2f}"
            )


def _locations(metric: Metric, scaled: bool) -> list[float]:
    """Log median of each worker process of a metric (normalised by its reference when ``scaled``)."""
    values = normalised(metric) if scaled else metric
    if values is None:
        return []
    return [math.log(float(np.median(g))) for g in values.group_samples() if np.median(g) > 0]


def noise_components(runs: list[Run]) -> None:
    """The run-to-run noise of unchanged runs, raw and normalised: what the assumed defaults rest on.

    ``1 process`` is the SD of process 1's log median across runs, ``4 processes`` that of the
    run's pooled median (both from successive differences, as ``perfgate calibrate`` does);
    ``between processes`` the pooled SD of the processes of one run around their mean.
    """
    print("\nrun-to-run noise of the unchanged runs (SD of log location; successive differences)")
    print(f"{'metric':<32} {'':<11} {'1 process':>10} {'4 processes':>12} {'between processes':>18}")
    for name in sorted(runs[0].metrics):
        metric = runs[0].metrics[name]
        if metric.direction is Direction.INFO or metric.unit == "MB":
            continue
        for scaled in (False, True):
            if scaled and metric.reference is None:
                continue
            first, pooled, spread, df = [], [], 0.0, 0
            for run in runs:
                locs = _locations(run.metrics[name], scaled)
                if not locs:
                    continue
                first.append(locs[0])
                whole = normalised(run.metrics[name]) if scaled else run.metrics[name]
                pooled.append(math.log(float(np.median(whole.samples))))  # type: ignore[union-attr]
                spread += float(np.sum((np.array(locs) - np.mean(locs)) ** 2))
                df += len(locs) - 1
            one = float(np.median(np.abs(np.diff(first))) / (0.6745 * math.sqrt(2))) if len(first) > 2 else math.nan
            four = float(np.median(np.abs(np.diff(pooled))) / (0.6745 * math.sqrt(2))) if len(pooled) > 2 else math.nan
            between = math.sqrt(spread / df) if df else math.nan
            label = "normalised" if scaled else "raw"
            print(f"{name:<32} {label:<11} {one:>10.1%} {four:>12.1%} {between:>18.1%}")


def _shared_runs(rng: np.random.Generator, k: int, factor: float) -> tuple[Run, Run]:
    runs = []
    for side_factor in (1.0, factor):
        phase = math.exp(0.12 * float(rng.standard_t(4)) / math.sqrt(2.0))  # t(4) has variance 2
        metrics = {}
        for i in range(k):
            offset = math.exp(float(rng.normal(0, 0.08)))
            values = 100.0 * side_factor * phase * offset * rng.lognormal(0, 0.01, 20)
            name = f"m{i}_time_us"
            metrics[name] = Metric(name=name, unit="us", direction=Direction.LOWER, samples=tuple(values))
        runs.append(Run(model="shared", metrics=metrics))
    return runs[0], runs[1]


def shared(args: argparse.Namespace) -> None:
    import perfgate.core.decision._family as decision

    with_step = decision.common_shift
    print(
        f"{args.metrics} metrics sharing the run's phase (t(4), 12 %) and an 8 % process term, 20 samples a side, "
        f"{args.trials} seeded checks per row, threshold 10 %, alpha 0.01; 95 % Wilson intervals\n"
    )
    print(f"{'case':<12} {'rule':<22} {'claims regression':>22} {'claims improvement':>22} {'exit 0/1/2':>14}")
    for label, factor in (("unchanged", 1.0), ("2x slower", 2.0)):
        for rule, step in (("common shift, then Holm", with_step), ("Holm only (before)", lambda *a, **k: None)):
            decision.common_shift = step  # type: ignore[assignment]
            rng = np.random.default_rng(args.seed)
            regress = improve = 0
            codes = [0, 0, 0]
            for _ in range(args.trials):
                base, cur = _shared_runs(rng, args.metrics, factor)
                result = compare_runs(base, cur, Policy())
                verdicts = {c.verdict.value for c in result.comparisons}
                regress += "regressed" in verdicts or result.shift_regressed
                improve += "improved" in verdicts
                codes[result.exit_code] += 1
            cells = []
            for hits in (regress, improve):
                lo, hi = wilson(hits, args.trials)
                cells.append(f"{hits}/{args.trials} [{lo:.1%}, {hi:.1%}]")
            print(f"{label:<12} {rule:<22} {cells[0]:>22} {cells[1]:>22} {'/'.join(map(str, codes)):>14}")
    decision.common_shift = with_step


# ---------------------------------------------------------------- evaluate-suite


def _suite_forms(corpus: Path, manifest: list[dict[str, object]]) -> dict[str, list[tuple[dict[str, object], Run]]]:
    """Each recorded run of the suite corpus in the forms a user would check: pytest-benchmark
    (one process a run), perfgate bench in 4 processes with and without its reference kernels,
    and one process of it."""
    forms: dict[str, list[tuple[dict[str, object], Run]]] = {
        "pytest-benchmark (1 process)": [],
        "bench, 4 processes, kernels": [],
        "bench, 4 processes, no kernels": [],
        "bench, 1 process, no kernels": [],
    }
    for entry in manifest:
        run = _load(corpus, entry)
        if entry["tool"] == "pytest_benchmark":
            forms["pytest-benchmark (1 process)"].append((entry, run))
        else:
            forms["bench, 4 processes, kernels"].append((entry, run))
            forms["bench, 4 processes, no kernels"].append((entry, without_index(run)))
            forms["bench, 1 process, no kernels"].append((entry, without_index(single_process(run))))
    return forms


def _benchmark_of(metric: str) -> str:
    """``test_json_time_us`` and ``json_time_ms`` are both the json benchmark."""
    name = metric.removeprefix("test_")
    return name.split("_time_")[0]


def _check(base: Run, cur: Run, policy: Policy) -> tuple[int, set[str], set[str]]:
    """(exit code, regressed benchmarks, improved benchmarks); a check refused as not comparable is exit 2."""
    from perfgate.errors import MismatchError

    try:
        result = compare_runs(base, cur, policy)
    except MismatchError:
        return 2, set(), set()
    reg = {_benchmark_of(c.metric) for c in result.regressions}
    imp = {_benchmark_of(c.metric) for c in result.comparisons if c.verdict is Verdict.IMPROVED}
    return result.exit_code, reg, imp


def _quiet_benchmarks(history: list[Run], kernels: bool) -> set[str]:
    """The benchmarks whose residual noise learned from ``history`` (what a store's pooled baseline
    and a calibration file both learn, :func:`perfgate.core.noise.residuals_of`) is at most 3 %."""
    from perfgate.calibration import estimate_noise
    from perfgate.core.policy import residual_key

    sigma = estimate_noise(history)
    names = {n for run in history for n in run.metrics}
    return {
        _benchmark_of(n)
        for n in names
        if (s := sigma.get(residual_key(n, "median", normalised=kernels))) is not None and s <= 0.03
    }


def _suite_checks(
    runs: list[tuple[dict[str, object], Run]], history: int, source: str, draws: int, rng: np.random.Generator
) -> list[tuple[dict[str, object], int, set[str], set[str], set[str]]]:
    """Every check of one form: (the current run's manifest entry, exit, regressed, improved).

    Without history each run is checked against every unchanged run recorded before it (a B run
    against every A run). With ``history`` runs, ``draws`` histories of that many unchanged runs
    are drawn from the others for each checked run: from the store (a baseline pooled from them)
    or from a calibration file (learned from them; the baseline file is the newest of them). The
    last item is the benchmarks whose residual noise that history learned is at most 3 %."""
    from perfgate.calibration import estimate_noise
    from perfgate.core.baseline import pool_runs

    unchanged = [(e, r) for e, r in runs if e["kind"] == "A"]
    out = []
    for entry, run in runs:
        others = [(e, r) for e, r in unchanged if e["index"] != entry["index"]]
        if history == 0:
            bases = (
                [r for e, r in others if int(e["index"]) < int(entry["index"])]
                if entry["kind"] == "A"
                else [r for _, r in others]
            )
            for base in bases:
                out.append((entry, *_check(base, run, Policy()), set()))
            continue
        if len(others) < history:
            continue
        for _ in range(draws):
            picked = sorted(
                (others[i] for i in rng.choice(len(others), history, replace=False)), key=lambda er: int(er[0]["index"])
            )
            newest_first = [r for _, r in picked][::-1]
            if source == "store":
                base, policy = pool_runs(newest_first[:5]), Policy()
                if history > 5:  # the store's check pools its default 5 runs; the longer history is there too
                    base = pool_runs(newest_first[:history])
            else:
                noise = estimate_noise([r for _, r in picked])
                base, policy = newest_first[0], Policy(noise=noise, noise_runs=history)
            kernels = any(m.reference is not None for m in run.metrics.values())
            out.append((entry, *_check(base, run, policy), _quiet_benchmarks([r for _, r in picked], kernels)))
    return out


def evaluate_suite(args: argparse.Namespace) -> None:
    corpus = Path(args.corpus)
    manifest = json.loads((corpus / "manifest.json").read_text())
    forms = _suite_forms(corpus, manifest)
    rng = np.random.default_rng(args.seed)
    histories = [int(h) for h in args.histories.split(",")]
    print(f"suite corpus {corpus}: {sum(1 for e in manifest if e['tool'] == 'bench')} runs of each form")
    print("threshold 10 %, alpha 0.01 (the defaults); A/A: any regression is a false alarm, any improvement false")
    header = (
        f"{'form':32} {'history':>12} {'A/A checks':>10} {'alarms':>14} {'false impr.':>12} {'exit 2':>7}"
        f" {'+15 % caught':>13} {'+15 %, σ≤3 %':>13} {'+30 % caught':>13} {'untouched named':>16}"
        f" {'all +30 % exit 0':>17} {'s/check':>8}"
    )
    print(header)
    for form, runs in forms.items():
        for history in histories:
            for source in ("store", "calibration") if history else ("files",):
                t0 = time.perf_counter()
                checks = _suite_checks(runs, history, source, args.draws, rng)
                seconds = (time.perf_counter() - t0) / max(len(checks), 1)
                aa = [c for c in checks if c[0]["kind"] == "A"]
                alarms = sum(1 for _, code, reg, _, _ in aa if reg or code == 1)
                false_imp = sum(1 for _, _, _, imp, _ in aa if imp)
                exit2 = sum(1 for _, code, _, _, _ in aa if code == 2)
                cells = []
                for factor, quiet in ((0.15, False), (0.15, True), (0.30, False)):
                    b = [c for c in checks if c[0]["kind"] == "B" and abs(float(c[0]["factor"]) - factor) < 1e-9]
                    hits = total = 0
                    for c in b:
                        slowed = set(c[0]["slowed"])  # type: ignore[arg-type]
                        if quiet:  # only the slowed benchmarks whose learned noise is at most 3 % (with history)
                            slowed &= c[4]
                        hits += len(slowed & c[2])
                        total += len(slowed)
                    cells.append(f"{hits}/{total} {hits / max(total, 1):.0%}" if total or not quiet else "—")
                b_all = [c for c in checks if c[0]["kind"] == "B"]
                untouched = sum(1 for c in b_all if c[2] - set(c[0]["slowed"]))  # type: ignore[arg-type]
                whole = [c for c in checks if c[0]["kind"] == "ALL"]
                whole_zero = sum(1 for c in whole if c[1] == 0)
                lo, hi = wilson(alarms, len(aa))
                print(
                    f"{form:32} {(f'{history} {source}' if history else 'none'):>12} {len(aa):>10} "
                    f"{f'{alarms} [{lo:.0%}-{hi:.0%}]':>14} {false_imp:>12} {exit2:>7} {cells[0]:>13} {cells[1]:>13} "
                    f"{cells[2]:>13} "
                    f"{f'{untouched}/{len(b_all)}':>16} {f'{whole_zero}/{len(whole)}':>17} {seconds:>8.2f}"
                )


def evaluate_dqn(args: argparse.Namespace) -> None:
    """DQN ``bench`` runs of 4 processes, feature extraction given +20 % and +30 % of its own work
    (``record --stages features``): every slowed run against every unchanged one, and every pair of
    unchanged runs, with the reference kernels and without, and no history (a baseline file)."""
    corpus = Path(args.corpus)
    manifest = json.loads((corpus / "manifest.json").read_text())
    runs = [(e, load_run(corpus / str(e["file"]))) for e in manifest if e["tool"] == "bench"]
    stage = "feature_extraction_time_ms"
    print(f"DQN corpus {corpus}: {len(runs)} runs of 4 processes; threshold 10 %, alpha 0.01")
    print(
        f"{'form':22} {'A/A checks':>10} {'alarms':>7} {'false impr.':>12} {'exit 2':>7}"
        f" {'+20 % caught':>13} {'+30 % caught':>13} {'others named':>13}"
    )
    for label, form in (("kernels", lambda r: r), ("no kernels", without_index)):
        unchanged = [(e, form(r)) for e, r in runs if e["kind"] == "A"]
        aa = [compare_runs(a, b, Policy()) for (ea, a), (eb, b) in itertools.combinations(unchanged, 2)]
        alarms = sum(1 for r in aa if r.regressions)
        false_imp = sum(1 for r in aa if r.with_verdict(Verdict.IMPROVED))
        exit2 = sum(1 for r in aa if r.exit_code == 2)
        cells, others = [], 0
        for factor in (0.2, 0.3):
            slowed = [form(r) for e, r in runs if e["kind"] == "B" and abs(float(e["factor"]) - factor) < 1e-9]
            results = [compare_runs(a, b, Policy()) for b in slowed for _, a in unchanged]
            hits = sum(1 for r in results if stage in {c.metric for c in r.regressions})
            others += sum(1 for r in results if {c.metric for c in r.regressions} - {stage})
            cells.append(f"{hits}/{len(results)}")
        print(
            f"{label:22} {len(aa):>10} {alarms:>7} {false_imp:>12} {exit2:>7}"
            f" {cells[0]:>13} {cells[1]:>13} {others:>13}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the corpus of real runs")
    rec.add_argument("--out", required=True)
    rec.add_argument("--aa", type=int, default=21, help="unchanged runs per tool")
    rec.add_argument("--ab", type=int, default=10, help="slowed runs per slowdown and tool")
    rec.add_argument("--slowdowns", default="10,20", help="injected slowdowns in percent")
    rec.add_argument("--processes", type=int, default=4, help="worker processes per perfgate bench run")
    rec.add_argument("--tools", default="bench,pyperf,pytest_benchmark")
    rec.add_argument("--lead", type=int, default=0, help="unchanged runs recorded first, as a history (see history)")
    rec.add_argument(
        "--load", type=float, default=0.0, help="the share of runs recorded beside a CPU-bound process on every CPU"
    )
    rec.add_argument("--seed", type=int, default=0, help="random seed of which runs are loaded")
    rec.add_argument(
        "--work", choices=("numeric", "sort"), default="numeric", help="the pyperf and pytest-benchmark kernel"
    )
    rec.add_argument(
        "--stages",
        default="features,training_step",
        help="the DQN stages the slowed runs inject extra work into: features, training_step or both",
    )
    rs = sub.add_parser("record-suite", help="record runs of benchmarks/suite12.py in pytest-benchmark and perfgate")
    rs.add_argument("--out", required=True)
    rs.add_argument("--aa", type=int, default=14, help="unchanged runs (one per round)")
    rs.add_argument("--ab", type=int, default=6, help="runs per slowdown with the --slowed benchmarks slowed")
    rs.add_argument("--slowdowns", default="15,30", help="slowdowns of the --slowed benchmarks, in percent")
    rs.add_argument("--slowed", default="matmul,sort,json,loop", help="the benchmarks slowed in the B runs")
    rs.add_argument("--all", type=float, default=30.0, help="slowdown of every benchmark in the ALL runs, in percent")
    rs.add_argument("--n-all", type=int, default=3, help="runs with every benchmark slowed")
    rs.add_argument("--processes", type=int, default=4, help="worker processes per perfgate bench run")
    rs.add_argument("--gap", type=float, default=0.0, help="seconds of pause before each round")
    rs.add_argument(
        "--load", type=float, default=0.0, help="the share of runs recorded beside a busy loop on every CPU"
    )
    rs.add_argument("--seed", type=int, default=0, help="random seed of which runs are loaded")
    ev = sub.add_parser("evaluate", help="check the recorded corpus")
    ev.add_argument("corpus")
    ev.add_argument("--threshold", type=float, default=10.0)
    ev.add_argument("--verbose", action="store_true")
    ev.add_argument(
        "--index-shift",
        type=float,
        default=None,
        help="percent of the reference kernel's change a normalised test allows for (default: the product's)",
    )
    ev.add_argument(
        "--all-pairs", action="store_true", help="A/A over every pair of unchanged runs, not consecutive ones"
    )
    ev.add_argument("--normal-tail", action="store_true", help="the rule with a normal run-to-run term (no t tail)")
    hi = sub.add_parser("history", help="power and A/A against the length of the history the noise is learned from")
    hi.add_argument("corpus")
    hi.add_argument("--lengths", default="0,5,10,20", help="history lengths, comma-separated")
    hi.add_argument("--lead", type=int, default=20, help="the first LEAD unchanged runs are the history")
    hi.add_argument("--normal-tail", action="store_true", help="the rule with a normal run-to-run term (no t tail)")
    sh = sub.add_parser("shared", help="simulated checks of many metrics sharing the run's phase")
    sh.add_argument("--trials", type=int, default=200)
    sh.add_argument("--metrics", type=int, default=600)
    sh.add_argument("--seed", type=int, default=1)
    es = sub.add_parser("evaluate-suite", help="check the recorded suite corpus with 0, 5 and 10 runs of history")
    es.add_argument("corpus")
    es.add_argument("--histories", default="0,5,10")
    es.add_argument("--draws", type=int, default=4, help="histories drawn per checked run")
    es.add_argument("--seed", type=int, default=1)
    ed = sub.add_parser("evaluate-dqn", help="check a DQN corpus recorded with record --stages features")
    ed.add_argument("corpus")
    args = parser.parse_args()
    commands = {
        "evaluate-dqn": evaluate_dqn,
        "record": record,
        "record-suite": record_suite,
        "evaluate": evaluate,
        "shared": shared,
        "evaluate-suite": evaluate_suite,
    }
    {**commands, "history": history}[args.command](args)


if __name__ == "__main__":
    main()

"""A check of runs in their bounded form (perfgate.core.reduced) gives the verdicts of the full samples.

The corpus is what the project commits: the four reference baselines of ``benchmark_results/``
(every sample, up to 25,000 per worker process; their reference timings are left out, since a
metric timed with one keeps every sample anyway), split into their worker processes and slowed or
sped up by known factors, checked run against run and against a baseline pooled from three runs;
the golden runs of ``tests/data/runs`` and the importer fixtures of real tools, which are too small
to bound and so must come back unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from perfgate.core.baseline import pool_runs
from perfgate.core.compare import compare_runs
from perfgate.core.policy import Policy
from perfgate.core.reduced import bound_run
from perfgate.core.schema import Metric, Run
from perfgate.importers import import_file
from perfgate.runfile import load_run

ROOT = Path(__file__).resolve().parent.parent
BASELINES = sorted((ROOT / "benchmark_results").glob("*_baseline.json"))
GOLDEN_RUNS = sorted((ROOT / "tests" / "data" / "runs").glob("*.json"))
FIXTURES = Path(__file__).parent / "importers" / "fixtures"

# What a bounded run may move, measured on this corpus (208 comparisons, every verdict the same):
# each bound of a change's interval by at most 2.5 % of the interval's width (largest: 1.9 %, a p99
# against a pooled baseline; 0.16 % run against run), and the change itself by at most 0.1 points
# for a median or p95 and 1.5 points for a p99 (largest: 0.05, 0.09 and 1.2 points, each against a
# pooled baseline, whose runs are pooled through their count functions; run against run, 0).
INTERVAL_MOVE_OF_WIDTH = 0.025
WORSE_MOVE = {"median": 0.001, "p50": 0.001, "p95": 0.002, "p99": 0.015}


def _process(run: Run, index: int, factors: dict[str, float], run_id: str) -> Run:
    """Worker process ``index`` of ``run`` as a run of its own, its samples times ``factors``."""
    metrics = {}
    for name, m in run.metrics.items():
        parts = m.group_samples()
        part = parts[index % len(parts)]
        f = factors.get(name, 1.0)
        metrics[name] = Metric(name=name, unit=m.unit, direction=m.direction, samples=tuple(v * f for v in part))
    return dataclasses.replace(run, run_id=run_id, metrics=metrics, machine_index={})


def _cases(path: Path) -> list[tuple[str, Run, Run]]:
    run = load_run(path)
    slow = {"inference_latency_us": 2.0, "dbn_load_time_ms": 1.3, "inference_latency_torch_us": 0.5}
    cases = []
    for label, factors in (("A/A", {}), ("slowed", slow)):
        base = _process(run, 0, {}, "b")
        cases.append((f"{path.stem} {label} run", base, _process(run, 3, factors, "c")))
        pooled = pool_runs([_process(run, i, {}, f"b{i}") for i in range(3)])
        cases.append((f"{path.stem} {label} pooled", pooled, _process(run, 3, factors, "c")))
    return cases


CASES = [case for path in BASELINES for case in _cases(path)]


def _outcome(base: Run, cur: Run):
    return compare_runs(base, cur, Policy(), allow_machine_mismatch=True)


@pytest.mark.parametrize(("label", "base", "cur"), CASES, ids=[c[0] for c in CASES])
def test_bounded_runs_give_the_verdicts_of_the_full_samples(label, base, cur):
    bounded_cur = bound_run(cur)
    assert any(m.sizes for m in bounded_cur.metrics.values()), "the corpus must have groups to bound"
    if "pooled" in label:  # as a store pools them: each run stored bounded, then pooled
        run = load_run(next(p for p in BASELINES if label.startswith(p.stem)))
        bounded_base = pool_runs([bound_run(_process(run, i, {}, f"b{i}")) for i in range(3)])
        assert bounded_base.metrics["inference_latency_us"].sizes is not None
    else:
        bounded_base = bound_run(base)
    full, bounded = _outcome(base, cur), _outcome(bounded_base, bounded_cur)
    assert bounded.exit_code == full.exit_code
    by_key = {(c.metric, c.statistic): c for c in bounded.comparisons}
    assert set(by_key) == {(c.metric, c.statistic) for c in full.comparisons}
    for c in full.comparisons:
        b = by_key[(c.metric, c.statistic)]
        assert b.verdict is c.verdict, (c.metric, c.statistic, c.verdict, b.verdict)
        if c.ci is not None:
            assert b.ci is not None
            move = max(abs(b.ci[0] - c.ci[0]), abs(b.ci[1] - c.ci[1]))
            assert move <= INTERVAL_MOVE_OF_WIDTH * (c.ci[1] - c.ci[0]), (c.metric, c.statistic, c.ci, b.ci)
        if c.worse is not None and math.isfinite(c.worse):
            assert b.worse == pytest.approx(c.worse, abs=WORSE_MOVE[c.statistic]), (c.metric, c.statistic)


def test_the_corpus_tells_slowed_from_unchanged():
    """The corpus is not trivial: the slowed metric is measured about 2x slower and is not called
    unchanged, and no A/A check claims a regression (a check that saw nothing would agree trivially)."""
    for label, base, cur in CASES:
        result = _outcome(base, cur)
        if "A/A" in label:
            assert not result.regressions, label
            continue
        latency = next(c for c in result.comparisons if c.metric == "inference_latency_us" and c.statistic == "p50")
        assert latency.worse is not None and latency.worse > 0.5, label
        assert latency.verdict.value in ("regressed", "inconclusive"), (label, latency.verdict)


@pytest.mark.parametrize("path", GOLDEN_RUNS, ids=[p.stem for p in GOLDEN_RUNS])
def test_the_golden_runs_are_unchanged_by_bounding(path):
    run = load_run(path)
    assert bound_run(run) is run


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("pytest-benchmark", "pytest-benchmark/3.2.3.json"),
        ("pytest-benchmark", "pytest-benchmark/5.3.1-autosave-no-data.json"),
        ("pyperf", "pyperf/1.7.1.json"),
        ("hyperfine", "hyperfine/1.15.0.json"),
        ("google-benchmark", "google-benchmark/1.7.1.json"),
    ],
)
def test_real_tools_files_keep_every_sample(fmt, name):
    run = import_file(fmt, FIXTURES / name).run
    assert all(m.sizes is None for m in run.metrics.values())

"""A run is its own control (``perfgate.core.decision._shared_phase``): each timing metric of a stored
comparison tested against what the rest of its run did.

The partial-regression family (k of n metrics moved, every k below n/2), single-process A/A
with per-process offsets as large as the measured ones, a majority shift without kernels, a GPU
stage on its own clock, "not comparable", and the residual noise learned from history (a store's
pooled baseline and a calibration file deciding alike).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from perfgate.calibration import estimate_noise
from perfgate.core.baseline import pool_runs
from perfgate.core.compare import compare_runs
from perfgate.core.decision._shared_phase import SINGLE_PROCESS, breadth, robust_shift, tightest_majority
from perfgate.core.metrics import Direction
from perfgate.core.noise import residual_sigmas
from perfgate.core.policy import Policy, residual_key
from perfgate.core.result import Verdict
from perfgate.core.schema import Metric, Reference, Run
from perfgate.errors import EXIT_ERROR, EXIT_OK, EXIT_REGRESSION, MismatchError


def _side(
    rng: np.random.Generator,
    k: int,
    slower: dict[int, float],
    *,
    processes: int,
    phase: float = 1.0,
    process_sd: float = 0.02,
    offsets: dict[int, float] | None = None,
    n: int = 20,
    kernel: float | None = None,
) -> dict[str, Metric]:
    """``k`` timing metrics of one run: metric i is ``slower[i]`` times slower, the whole run
    ``phase`` times slower, each process has its own log-normal offset, and ``offsets[i]`` is
    a one-process offset of metric i (a bimodal benchmark: string hashing drawn per process)."""
    metrics = {}
    for i in range(k):
        name = f"m{i:02d}_time_us"
        level = 100.0 * (1 + i % 7) * phase * slower.get(i, 1.0) * (offsets or {}).get(i, 1.0)
        groups = [level * math.exp(rng.normal(0, process_sd)) * rng.lognormal(0, 0.01, n) for _ in range(processes)]
        samples = tuple(float(v) for g in groups for v in g)
        reference = Reference(kernel="compute", seconds=(1e-3 * kernel,) * len(samples)) if kernel else None
        metrics[name] = Metric(
            name=name,
            unit="us",
            direction=Direction.LOWER,
            samples=samples,
            groups=(n,) * processes if processes > 1 else None,
            reference=reference,
        )
    return metrics


def _pair(k: int, slower: dict[int, float], *, seed: int, processes: int = 4, **kw: object) -> tuple[Run, Run]:
    rng = np.random.default_rng(seed)
    base_phase, cur_phase = (float(x) for x in np.exp(rng.normal(0, 0.05, 2)))
    base = Run(model="suite", metrics=_side(rng, k, {}, processes=processes, phase=base_phase))
    cur = Run(model="suite", metrics=_side(rng, k, slower, processes=processes, phase=cur_phase, **kw))  # type: ignore[arg-type]
    return base, cur


def _claims(result, verdict: Verdict) -> set[str]:
    return {c.metric for c in result.comparisons if c.verdict is verdict}


@pytest.mark.parametrize("n", [9, 14])
def test_the_partial_regression_family_names_exactly_the_metrics_that_moved(n):
    """k of n metrics +30 %, for every k below n/2, in runs of 4 processes and without history:
    exit 1, naming those metrics and no other; nothing called improved. A shift estimated as
    the mean of the log ratios would make the untouched metrics look faster than the run (and
    the moved ones less slow) as soon as k grows."""
    for k in range(1, (n + 1) // 2):
        moved = set(range(k))
        base, cur = _pair(n, dict.fromkeys(moved, 1.3), seed=100 + k)
        result = compare_runs(base, cur, Policy())
        assert result.exit_code == EXIT_REGRESSION, k
        assert _claims(result, Verdict.REGRESSED) == {f"m{i:02d}_time_us" for i in moved}, k
        assert not _claims(result, Verdict.IMPROVED), k
        assert not (result.common_shift and result.common_shift.slower_past), k  # never a whole-run shift
        assert result.shared_phase is not None and result.shared_phase.controls[0].source == "processes"


def test_the_shift_is_what_most_metrics_moved_not_their_mean():
    logs = [0.0] * 8 + [math.log(1.3)] * 6
    centre, se = robust_shift(logs)
    assert centre == pytest.approx(0.0, abs=1e-12)
    assert statistics_mean(logs) > 0.1  # what a mean would have taken for the run's shift
    assert se >= 0


def statistics_mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_one_metric_doubled_among_six_unchanged_always_exits_1():
    for seed in range(20):
        base, cur = _pair(7, {3: 2.0}, seed=seed)
        result = compare_runs(base, cur, Policy())
        assert result.exit_code == EXIT_REGRESSION, seed
        assert _claims(result, Verdict.REGRESSED) == {"m03_time_us"}, seed


def test_single_process_aa_with_measured_offsets_claims_nothing_and_says_why_once():
    """One process a side, no history: a dict benchmark 25 % off and a matmul 2× off between
    fresh processes of identical code (docs/noise.md §6) raise no alarm, and the report says once
    why no metric was judged alone and what would decide them."""
    from perfgate.report.markdown import render_markdown

    for seed in range(10):
        base, cur = _pair(12, {}, seed=seed, processes=1, offsets={2: 1.25, 7: 2.0})
        result = compare_runs(base, cur, Policy())
        assert result.exit_code == EXIT_OK, seed
        assert not _claims(result, Verdict.REGRESSED) and not _claims(result, Verdict.IMPROVED), seed
        assert result.shared_phase is not None and result.shared_phase.single_process
    report = render_markdown(result)
    assert report.count(SINGLE_PROCESS.split(":")[0][1:]) == 1
    assert report.count("not judged alone") == 1  # the reason once, above the table
    assert "--processes 4" in report


def test_one_benchmark_alone_at_25_percent_stays_undecided_but_many_together_are_caught():
    """The cattrs case: 20 of 64 single-process benchmarks 10-100 % slower, 44 within a few
    percent, is more than per-process offsets explain; one benchmark alone at +25 % is not."""
    base, cur = _pair(12, {0: 1.25}, seed=3, processes=1)
    alone = compare_runs(base, cur, Policy())
    assert alone.exit_code == EXIT_OK and not _claims(alone, Verdict.REGRESSED)
    (row,) = [c for c in alone.comparisons if c.metric == "m00_time_us"]
    assert row.verdict is Verdict.INCONCLUSIVE and "not judged alone" in row.reason
    rng = np.random.default_rng(8)
    slower = {i: float(f) for i, f in zip(range(20), rng.uniform(1.1, 2.0, 20), strict=True)}
    base, cur = _pair(64, slower, seed=4, processes=1)
    many = compare_runs(base, cur, Policy())
    assert many.exit_code == EXIT_REGRESSION
    named = _claims(many, Verdict.REGRESSED)
    assert named and named <= {f"m{i:02d}_time_us" for i in range(20)}
    assert len(named) >= 15


def test_breadth_needs_more_than_offsets_explain_and_one_direction():
    assert breadth(20, 0, 64, 0.01)[0]
    assert not breadth(2, 0, 64, 0.01)[0]  # a couple of flips never decide
    assert not breadth(6, 6, 12, 0.01)[0]  # as many faster as slower: offsets, not code


def test_a_majority_shift_without_kernels_exits_2_and_says_so():
    base, cur = _pair(14, dict.fromkeys(range(10), 1.3), seed=5)
    result = compare_runs(base, cur, Policy())
    assert result.exit_code == EXIT_ERROR
    assert result.common_shift is not None and result.common_shift.ambiguous
    assert "the whole run is" in result.common_shift.sentence()
    assert not _claims(result, Verdict.IMPROVED)  # the four untouched ones are not "faster than the run"
    # every metric +30 %: never exit 0, with or without kernels
    base, cur = _pair(14, dict.fromkeys(range(14), 1.3), seed=6)
    assert compare_runs(base, cur, Policy()).exit_code == EXIT_ERROR
    rng = np.random.default_rng(6)
    base = Run(model="suite", metrics=_side(rng, 14, {}, processes=4, kernel=1.0))
    cur = Run(model="suite", metrics=_side(rng, 14, dict.fromkeys(range(14), 1.3), processes=4, kernel=1.0))
    kernels = compare_runs(base, cur, Policy())
    assert kernels.exit_code == EXIT_REGRESSION and len(_claims(kernels, Verdict.REGRESSED)) == 14


def test_a_gpu_stage_is_never_normalised_by_a_cpu_kernel():
    """A stage synchronised with CUDA records its clock; its Change is its raw change (relative to
    the GPU clock's own control when there is one), never one in units of a CPU kernel."""
    rng = np.random.default_rng(9)
    config = {"device": "cuda", "stages": {"train": {"metric": "m00_time_us", "clock": "cuda"}}}
    # the CPU kernel ran 1.6× slower in the current run, the GPU stage's time did not move
    base = Run(model="dqn", metrics=_side(rng, 2, {}, processes=4, kernel=1.0), config=config)
    cur = Run(model="dqn", metrics=_side(rng, 2, {}, processes=4, kernel=1.6), config=config)
    result = compare_runs(base, cur, Policy())
    (gpu,) = [c for c in result.comparisons if c.metric == "m00_time_us"]
    (cpu,) = [c for c in result.comparisons if c.metric == "m01_time_us"]
    assert gpu.reference == "" and gpu.change is not None and abs(gpu.change) < 0.05
    assert cpu.reference == "compute"  # the CPU stage is still normalised
    without = dataclasses.replace(cur, config={})
    base_without = dataclasses.replace(base, config={})
    (normalised,) = [c for c in compare_runs(base_without, without, Policy()).comparisons if c.metric == "m00_time_us"]
    assert normalised.reference == "compute" and normalised.change is not None and normalised.change < -0.3


def test_kernels_that_moved_past_twice_are_not_comparable():
    rng = np.random.default_rng(10)
    base = Run(model="dqn", metrics=_side(rng, 5, {}, processes=2), machine_index={"interpreter": 8e-3})
    cur = Run(model="dqn", metrics=_side(rng, 5, {}, processes=2), machine_index={"interpreter": 2.4e-3})
    with pytest.raises(MismatchError) as caught:
        compare_runs(base, cur, Policy())
    message = str(caught.value)
    assert "\n" not in message and message.startswith("not comparable")
    assert "3.3× slower in the baseline" in message and "--allow-machine-mismatch" in message
    assert compare_runs(base, cur, Policy(), allow_machine_mismatch=True).exit_code == EXIT_OK


def test_not_comparable_is_one_line_and_exit_2_from_the_command_line(tmp_path, capsys):
    from perfgate.cli import main
    from perfgate.core.codec import run_to_dict

    rng = np.random.default_rng(11)
    for name, index in (("base", 8e-3), ("cur", 2.4e-3)):
        run = Run(model="dqn", metrics=_side(rng, 5, {}, processes=2), machine_index={"interpreter": index})
        (tmp_path / f"{name}.json").write_text(__import__("json").dumps(run_to_dict(run)))
    code = main(["check", "--baseline", str(tmp_path / "base.json"), "--current", str(tmp_path / "cur.json")])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_ERROR
    assert len(err.splitlines()) == 1 and "not comparable" in err and "Traceback" not in err


def _history(count: int, seed: int) -> list[Run]:
    """Single-process runs of 12 benchmarks minutes apart: a shared phase, each benchmark its own
    residual noise (1 % to 6 %), one bimodal between processes (the dict benchmark, ±12 %)."""
    rng = np.random.default_rng(seed)
    sds = [0.01, 0.012, 0.015, 0.01, 0.02, 0.02, 0.03, 0.012, 0.04, 0.06, 0.015, 0.01]
    runs = []
    for r in range(count):
        phase = float(np.exp(rng.normal(0, 0.05)))
        metrics = {}
        for i, sd in enumerate(sds):
            name = f"m{i:02d}_time_us"
            level = 100.0 * (1 + i) * phase * math.exp(rng.normal(0, sd))
            if i == 9:
                level *= 1.25 if rng.random() < 0.5 else 1.0
            samples = tuple(float(v) for v in level * rng.lognormal(0, 0.01, 30))
            metrics[name] = Metric(name=name, unit="us", direction=Direction.LOWER, samples=samples)
        runs.append(Run(model="suite", run_id=f"r{r}", metrics=metrics))
    return runs


def _slowed(run: Run, factors: dict[str, float]) -> Run:
    metrics = {
        name: dataclasses.replace(m, samples=tuple(v * factors.get(name, 1.0) for v in m.samples))
        for name, m in run.metrics.items()
    }
    return dataclasses.replace(run, metrics=metrics, run_id="slowed")


def test_the_learned_residual_is_used_for_a_store_baseline_and_a_calibration_decides_alike():
    """A regex-like benchmark +28 % with 1 % of residual noise, three others +30 %, single-process
    runs: undecidable alone without history; caught from a pooled baseline of history runs (the
    store path) and from a calibration file learned from the same history (the file path)."""
    history = _history(10, seed=12)
    current = _slowed(_history(11, seed=12)[10], {"m00_time_us": 1.28, "m03_time_us": 1.3, "m05_time_us": 1.3})
    moved = {"m00_time_us", "m03_time_us", "m05_time_us"}
    alone = compare_runs(history[-1], current, Policy())
    assert not _claims(alone, Verdict.REGRESSED)
    pooled = pool_runs(history[-5:][::-1])
    store = compare_runs(pooled, current, Policy())
    assert store.shared_phase is not None and store.shared_phase.controls[0].source == "history"
    assert _claims(store, Verdict.REGRESSED) == moved
    sigma = estimate_noise(history)
    assert residual_key("m00_time_us", "median") in sigma
    calibrated = Policy(noise=sigma, noise_runs=len(history))
    from_file = compare_runs(history[-1], current, calibrated)
    assert from_file.shared_phase is not None and from_file.shared_phase.controls[0].source == "calibration"
    assert _claims(from_file, Verdict.REGRESSED) == moved
    # the unchanged run against the same history: nothing, both ways
    unchanged = _history(11, seed=12)[10]
    assert not _claims(compare_runs(pooled, unchanged, Policy()), Verdict.REGRESSED)
    assert not _claims(compare_runs(history[-1], unchanged, calibrated), Verdict.REGRESSED)


def test_the_shift_of_a_run_in_two_clusters_is_its_tightest_majority():
    """Four regressed metrics and two a neighbour slowed make half a run: the plain median falls
    in the gap between the clusters, which is no run's shift; the tightest majority does not."""
    logs = [0.04, 0.04, 0.05, 0.05, 0.05, 0.10, 0.30, 0.31, 0.31, 0.36, 0.45, 0.56]
    assert robust_shift(logs)[0] == pytest.approx(0.20, abs=1e-9)
    centre, se = tightest_majority(logs)
    assert centre == pytest.approx(0.05, abs=1e-9)
    assert se > 0
    # one cluster: the median's neighbourhood
    assert tightest_majority([0.0] * 8 + [math.log(1.3)] * 6)[0] == pytest.approx(0.0, abs=1e-12)


def test_half_a_run_moved_is_never_a_whole_run_shift_with_history():
    """Against a store's pooled baseline, four benchmarks +30 % and two more a neighbour slowed
    (+40 %, +75 %): half the run moved, and nothing tells which half is the machine's. No
    whole-run shift is claimed and no unchanged benchmark is named either way. A shift refined
    toward the tightly measured half called the run 1.3× slower, "the code's", with its metrics."""
    factors = {"m00_time_us": 1.3, "m03_time_us": 1.3, "m05_time_us": 1.3, "m07_time_us": 1.3}
    factors |= {"m01_time_us": 1.4, "m11_time_us": 1.75}
    for seed in (21, 22, 23):
        history = _history(10, seed=seed)
        current = _slowed(_history(11, seed=seed)[10], factors)
        result = compare_runs(pool_runs(history[::-1]), current, Policy())
        assert result.shared_phase is not None and result.shared_phase.controls[0].source == "history"
        assert not (result.common_shift and result.common_shift.slower_past), seed
        assert _claims(result, Verdict.REGRESSED) <= set(factors), seed
        assert not _claims(result, Verdict.IMPROVED), seed
        assert all("whole run" not in c.reason for c in result.comparisons), seed


def test_residual_sigmas_remove_each_runs_shift():
    rng = np.random.default_rng(13)
    shifts = rng.normal(0, 0.3, (12, 1))  # large shared phases
    own = rng.normal(0, 0.02, (12, 6))
    sd = residual_sigmas(shifts + own)
    assert np.all(sd < 0.05)  # the phase is gone, what is left is each metric's own
    assert np.all(np.isnan(residual_sigmas(np.zeros((2, 6)))))


def _with_rates(run: Run) -> Run:
    """Each time metric with a throughput derived from its calls (a batch of 64 over each call)."""
    metrics = dict(run.metrics)
    for name, m in run.metrics.items():
        rate = name.replace("_time_us", "_per_s")
        metrics[rate] = Metric(
            name=rate, unit="items/s", direction=Direction.HIGHER, samples=tuple(64e6 / v for v in m.samples),
            groups=m.groups,
        )  # fmt: skip
    return dataclasses.replace(run, metrics=metrics)


def test_derived_throughputs_are_not_evidence_of_the_shift():
    """A rate derived from a stage's calls moves with it: it is tested with its stage, never
    counted in the run's control. Four times and their four rates are four metrics, not eight:
    with three of the four times +30 %, the run's shift is still that of the untouched one's
    side only if the rates stay out (with them, 6 of 8 would make the slowed ones the majority)."""
    base, cur = _pair(4, {}, seed=14)
    result = compare_runs(_with_rates(base), _with_rates(cur), Policy())
    assert result.shared_phase is not None
    assert result.shared_phase.controls[0].members == {f"m{i:02d}_time_us" for i in range(4)}
    rates = [c for c in result.comparisons if c.metric.endswith("_per_s")]
    assert len(rates) == 4 and all(c.derived_from for c in rates)
    assert all(c.relative_to is not None for c in rates)  # tested against the run like their stages

"""The Markdown report: the original specification's example byte for byte (golden file), sections, size limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfgate.core.codec import run_from_dict
from perfgate.core.compare import compare_runs
from perfgate.core.policy import Budget, Policy
from perfgate.report.markdown import MAX_CHARS, render_markdown
from tests.conftest import SEED_BASELINE, SEED_CURRENT

GOLDEN = Path(__file__).parent / "golden"


def _seed_report() -> str:
    base = run_from_dict(SEED_BASELINE, source="dqn_baseline.json")
    cur = run_from_dict(SEED_CURRENT, source="dqn_current.json")
    return render_markdown(compare_runs(base, cur, Policy.quiet(), baseline_source="file `dqn_baseline.json`"))


def test_seed_example_golden():
    """To refresh after an intended change: write _seed_report() to the golden file and review the diff."""
    assert _seed_report() == (GOLDEN / "seed_example.md").read_text()


def _runs(n_metrics: int, n: int = 50):
    rng = np.random.default_rng(3)

    def doc(scale_of):
        return {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                f"stage_{i:04d}_with_a_rather_long_descriptive_name_time_ms": {
                    "unit": "ms",
                    "direction": "lower_is_better",
                    "samples": list(100 * scale_of(i) * rng.lognormal(0, 0.02, n)),
                }
                for i in range(n_metrics)
            },
        }

    return run_from_dict(doc(lambda i: 1.0)), run_from_dict(doc(lambda i: 1.0 + (i % 7) * 0.05))


def test_report_stays_under_the_limit_with_thousands_of_metrics():
    base, cur = _runs(1200)
    result = compare_runs(base, cur, Policy.quiet())
    text = render_markdown(result)
    assert len(text) <= MAX_CHARS
    assert text.startswith("# Performance Regression Check\n\n## ❌ Regression Detected")
    assert "more regressions" in text
    # largest first: the first regression row has the largest change
    first_row = text.split("### Regressions")[1].split("\n")[4]
    largest = max(c.change for c in result.regressions)
    assert first_row.endswith(f"| {largest * 100:+.1f}% |")


def test_sections_for_each_verdict():
    rng = np.random.default_rng(0)

    def samples(m, n=80, cv=0.02):
        return list(m * rng.lognormal(0, cv, n))

    base = run_from_dict(
        {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                "training_step_time_ms": {"samples": samples(100)},
                "throughput_samples_per_sec": {"samples": samples(1000)},
                "feature_extraction_time_ms": {"samples": samples(10)},
                "dbn_load_time_ms": {"samples": samples(1.0, n=3, cv=0.3)},
                "gpu_utilization_pct": {"samples": samples(50)},
                "memory_usage_mb": {"samples": samples(100)},
            },
        }
    )
    cur = run_from_dict(
        {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                "training_step_time_ms": {"samples": samples(130)},
                "throughput_samples_per_sec": {"samples": samples(1300)},
                "feature_extraction_time_ms": {"samples": samples(10)},
                "dbn_load_time_ms": {"samples": samples(1.3, n=3, cv=0.3)},
                "gpu_utilization_pct": {"samples": samples(60)},
                "inference_latency_us": {"samples": samples(40, n=400)},
            },
        }
    )
    policy = Policy.quiet(budgets=(Budget(model="dqn", metric="inference_latency_us", statistic="p99", limit=30.0),))
    text = render_markdown(compare_runs(base, cur, policy))
    for title in (
        "### Regressions",
        "### Details",
        "### Over Budget",
        "### Inconclusive",
        "### Improvements",
        "### Unchanged",
        "### Informational",
        "### New and missing metrics",
        "### Regression statistics",
    ):
        assert title in text, title
    assert "Throughput increased by" not in text  # an improvement is not a regression sentence
    inconclusive = text.split("### Inconclusive")[1].split("###")[0]
    assert "dbn_load_time_ms" in inconclusive and "per side" in inconclusive


def test_json_report_writes_unbounded_interval_as_null():
    """Regression for render_json raising on an infinite interval end from a tiny skewed sample."""
    import json

    from perfgate.report.json import render_json

    base = run_from_dict(
        {"schema_version": 1, "model": "m", "metrics": {"training_step_time_ms": {"samples": [1.0, 1.0, 1004.0]}}}
    )
    cur = run_from_dict(
        {"schema_version": 1, "model": "m", "metrics": {"training_step_time_ms": {"samples": [2.0, 2.0, 2008.0]}}}
    )
    doc = json.loads(render_json(compare_runs(base, cur, Policy.quiet())))
    ci = doc["comparisons"][0]["ci"]
    assert ci is not None and None in ci


def test_measurement_conditions_flag_unstable_metrics():
    rng = np.random.default_rng(4)

    def doc(extra=None):
        d = {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {
                "training_step_time_ms": {"samples": list(100 * rng.lognormal(0, 0.2, 60))},
                "dbn_load_time_ms": {"samples": list(1.0 * rng.lognormal(0, 0.005, 60))},
            },
        }
        if extra:
            d["config"] = extra
        return run_from_dict(d)

    env = {
        "environment": {
            "load_avg_1m_start": 1.5,
            "load_avg_1m_end": 2.0,
            "other_processes_cpu_pct": 40.0,
            "steal_pct": 0.5,
        },
        "processes": 3,
    }
    text = render_markdown(compare_runs(doc(), doc(env), Policy.quiet()))
    block = text.split("### Measurement conditions")[1]
    assert "load average 1.5 → 2.0" in block and "other processes used 40.0% of the CPU" in block
    assert "3 worker processes" in block
    assert "training_step_time_ms" in block and "dbn_load_time_ms" not in block

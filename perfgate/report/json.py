"""The machine-readable report of a check (``perfgate check --json``)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from perfgate.core.compare import CheckResult, Comparison
from perfgate.core.profiles import Contributor, StageExplanation
from perfgate.report.environment import environment_json
from perfgate.report.shift import shift_json

__all__ = ["REPORT_VERSION", "explanation_to_dict", "render_json", "result_to_dict"]

# report format history: 1: first version (``environment_changes`` added since, an additional key;
# ``explanations``, where each explained stage's change went, present only when a stage was explained;
# ``hints``, a line each of why a changed stage may have moved, present only when there is one).
REPORT_VERSION = 1


def _comparison(c: Comparison) -> dict[str, Any]:
    return {
        "metric": c.metric,
        "statistic": c.statistic,
        "unit": c.unit,
        "direction": c.direction.value,
        "verdict": c.verdict.value,
        "baseline": asdict(c.baseline) if c.baseline else None,
        "current": asdict(c.current) if c.current else None,
        "baseline_value": c.baseline_value,
        "current_value": c.current_value,
        "change": c.change,
        "worse": c.worse,
        "ci": list(c.ci) if c.ci else None,
        "p_value": c.p_value,
        "p_adjusted": c.p_adjusted,
        "threshold": c.threshold,
        "threshold_only": c.threshold_only,
        "required_n": c.required_n,
        "required_unit": c.required_unit,
        "required_seconds": c.required_seconds,
        "reason": c.reason,
        "noise": c.noise,
        "noise_assumed": c.noise_assumed,
        "reference": c.reference or None,
        "raw_change": c.raw_change,
        "index_change": c.index_change,
        "derived_from": c.derived_from or None,
    }


def _contributor(c: Contributor) -> dict[str, Any]:
    return {
        "name": c.name,
        "where": c.where,
        "own_baseline": c.own_baseline,
        "own_current": c.own_current,
        "own_change": c.own_change,
        "inclusive_baseline": c.inclusive_baseline,
        "inclusive_current": c.inclusive_current,
        "inclusive_change": c.inclusive_change,
        "share": c.share,
        "z": c.z,
        "named": c.named,
    }


def explanation_to_dict(e: StageExplanation) -> dict[str, Any]:
    """Every field of a :class:`StageExplanation` (and what follows from them), costs per call of the stage."""
    return {
        "stage": e.stage,
        "metric": e.metric,
        "available": e.available,
        "reason": e.reason,
        "instrument": e.instrument,
        "unit": e.unit,
        "profiles": {"baseline": e.profiles[0], "current": e.profiles[1]},
        "calls": {"baseline": e.calls[0], "current": e.calls[1]},
        "baseline_total": e.baseline_total,
        "current_total": e.current_total,
        "change": e.change,
        "rho": e.rho,
        "moved": e.moved,
        "timed_change": e.timed_change,
        "spread_thin": e.spread_thin,
        "explained": e.explained,
        "summary": e.summary(),
        "notes": list(e.notes),
        "contributors": [_contributor(c) for c in e.contributors],
        "stacks_baseline": dict(e.stacks_baseline),
        "stacks_current": dict(e.stacks_current),
    }


def result_to_dict(result: CheckResult) -> dict[str, Any]:
    base = result.baseline
    out: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "verdict": "fail" if result.failed else "undecided" if result.exit_code else "pass",
        "exit_code": result.exit_code,
        "model": result.current.model,
        "baseline_run_id": base.run_id if base else None,
        "baseline_commit": base.git.commit if base else None,
        "baseline_source": result.baseline_source,
        "current_run_id": result.current.run_id,
        "current_commit": result.current.git.commit,
        "machine_mismatch": result.machine_mismatch,
        "missing": list(result.missing),
        "common_shift": shift_json(result),
        "environment_changes": environment_json(result),
        "policy": {
            "threshold_pct": result.policy.threshold_pct,
            "alpha": result.policy.alpha,
            "thresholds_pct": dict(result.policy.thresholds_pct),
            "missing_metric": result.policy.missing_metric,
            "memory_floor_mb": result.policy.memory_floor_mb,
            "assumed_noise": {
                name: {"phase": model.phase, "process": model.process}
                for name, model in (
                    ("raw", result.policy.assumed_raw),
                    ("normalised", result.policy.assumed_normalised),
                    ("memory", result.policy.assumed_memory),
                )
            },
        },
        "machine_index": {
            "baseline": dict(base.machine_index) if base else {},
            "current": dict(result.current.machine_index),
        },
        "regressions": [c.label for c in result.regressions],
        "comparisons": [_comparison(c) for c in result.comparisons],
        "budgets": [
            {
                "metric": b.budget.metric,
                "statistic": b.budget.statistic,
                "limit": b.budget.limit,
                "value": b.value,
                "unit": b.unit,
                "n": b.n,
                "ok": b.ok,
                "note": b.note,
                "measured": b.measured,
                "derived_from": b.derived_from or None,
            }
            for b in result.budgets
        ],
    }
    if result.explanations:  # only when a stage was explained: reports without one stay as they were
        out["explanations"] = [explanation_to_dict(e) for e in result.explanations]
    if result.hints:  # likewise: only when there is a hint
        out["hints"] = list(result.hints)
    return out


def _finite(value: Any) -> Any:
    # JSON has no infinity: an unbounded interval end (tiny skewed samples) is written as null
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def render_json(result: CheckResult) -> str:
    return json.dumps(_finite(result_to_dict(result)), sort_keys=True, indent=2, allow_nan=False) + "\n"

"""Checks with "where it went" attached, built with :func:`perfgate.core.profiles.explain` on
hand-made profiles: a helper that got slower (named), the same revision profiled twice (nothing
named), a stage that could not be profiled, and hostile names. Shared by tests/report and
tests/report_html."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from perfgate.core.codec import run_from_dict
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.policy import Policy
from perfgate.core.profiles import Profile, StageExplanation, explain, unavailable
from tests.safety.hostile import HOSTILE

HELPER = "rsi_helper"
CALLS = 100
# the same relative wobble of every function between the profiles of one revision (about 1 %)
JITTER_BASELINE = (0.01, -0.01, 0.0)
JITTER_CURRENT = (-0.005, 0.01, -0.005)


def profile(costs: dict[str, float], jitter: float, where: dict[str, str] | None = None) -> Profile:
    """One profile: ``costs`` maps a folded stack to its own cost per call in seconds."""
    return Profile(
        instrument="sampling",
        unit="s",
        calls=CALLS,
        stacks={stack: cost * CALLS * (1.0 + jitter) for stack, cost in costs.items()},
        where=where or {},
    )


def stage_costs(helper: float, names: Sequence[str] = ()) -> dict[str, float]:
    """A feature stage: ``run;features;<helper>`` costs ``helper`` s a call, the rest stays put.
    ``names`` renames the frames (helper, features, run, load, parse, other), for hostile names."""
    h, features, run, load, parse, other = names or (HELPER, "features", "run", "load", "parse", "other")
    return {
        f"{run};{features};{h}": helper,
        f"{run};{features}": 0.0020,
        f"{run};{load};{parse}": 0.0030,
        f"{run};{load}": 0.0004,
        f"{run};{other}": 0.00002,  # 0.3 % of the stage: too thin to draw in the flame graph
        run: 0.0005,
    }


def slower_helper(
    stage: str = "features",
    metric: str = "features_time_ms",
    names: Sequence[str] = (),
    where: str = "features.py:12",
    note: str = "native code is seen as the Python frame that called it",
) -> StageExplanation:
    """The helper takes 1.0 ms → 1.6 ms a call; everything else only wobbles."""
    where_is = {(names[0] if names else HELPER): where}
    base = [profile(stage_costs(0.0010, names), j, where_is) for j in JITTER_BASELINE]
    cur = [profile(stage_costs(0.0016, names), j, where_is) for j in JITTER_CURRENT]
    return explain(stage, metric, base, cur, notes=[note])


def same_revision(stage: str = "features") -> StageExplanation:
    """An A/A check: the same costs profiled three times a side."""
    base = [profile(stage_costs(0.0010), j) for j in JITTER_BASELINE]
    cur = [profile(stage_costs(0.0010), j) for j in JITTER_CURRENT]
    return explain(stage, "features_time_ms", base, cur)


def not_profiled(stage: str = "load") -> StageExplanation:
    return unavailable(stage, "load_time_ms", "py-spy is not installed: pip install py-spy")


def check_with(explanations: Sequence[StageExplanation]) -> CheckResult:
    """A check of one stage metric that regressed by 30 %, with ``explanations`` attached."""

    def run(factor: float) -> dict[str, object]:
        samples = [7.0 * factor * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(20)]
        return {
            "schema_version": 1,
            "model": "dqn",
            "metrics": {"features_time_ms": {"samples": samples, "unit": "ms", "direction": "lower_is_better"}},
        }

    result = compare_runs(run_from_dict(run(1.0)), run_from_dict(run(1.3)), Policy.quiet(), baseline_source="file")
    return dataclasses.replace(result, explanations=tuple(explanations))


# no backtick in the note: a note is perfgate's prose, where `quoted` data becomes a code span
_NOTE = next(h for h in HOSTILE if "`" not in h and "<" in h)


def hostile_explanation() -> StageExplanation:
    names = [h.replace(";", ",") for h in HOSTILE[2:8]]
    return slower_helper(stage=HOSTILE[0], metric=HOSTILE[1], names=names, where=HOSTILE[8], note=_NOTE)


def benign_explanation() -> StageExplanation:
    names = [f"func{k}" for k in range(6)]
    return slower_helper(stage="stage", metric="metric", names=names, where="where.py:1", note="a note")

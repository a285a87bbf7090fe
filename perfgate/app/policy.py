"""The policy a check decides with: the configuration's, with the thresholds given for this check,
and the names in the configuration that the check cannot use."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from perfgate.app.numbers import checked_number
from perfgate.config import Config
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.errors import ConfigError

__all__ = ["Thresholds", "config_warnings", "policy_from"]


class Thresholds(Protocol):
    """The thresholds given for one check (``--threshold``, ``--alpha``); None keeps the configuration's."""

    @property
    def threshold(self) -> float | None: ...

    @property
    def alpha(self) -> float | None: ...


def _declared_models() -> list[str]:
    """The models the installed suites declare, in their order."""
    from perfgate.core.metrics import declared_suites

    return list(dict.fromkeys(m for suite in declared_suites().values() for m in suite.models))


def config_warnings(policy: Policy, runs: list[Run]) -> list[str]:
    """Names in the configuration that this check cannot use, each named: a typo there would
    otherwise switch a threshold or a budget off without a word."""
    from perfgate.core.metrics import known_metrics

    present = {name for run in runs for name in run.metrics}
    known = present | set(known_metrics()) | set(policy.metric_info)
    models = {run.model_key for run in runs}
    out = []
    for name in sorted(set(policy.thresholds_pct) - known):
        out.append(f"thresholds.{name}: no metric of that name in this check or built in; check the spelling")
    for budget in policy.budgets:
        where = f"budgets.{budget.model}.{budget.metric}"
        if budget.model in models and budget.metric not in present:
            have = ", ".join(sorted(present)[:8]) + (" …" if len(present) > 8 else "")
            outcome = (
                "fails the check (missing_metric = 'fail')"
                if policy.missing_metric == "fail"
                else "leaves the check undecided (missing_metric = 'refuse')"
            )
            out.append(f"{where}: the run has no metric {budget.metric!r}, so this budget {outcome}; it has {have}")
        elif budget.model not in models and budget.model not in (declared := _declared_models()):
            out.append(
                f"{where}: no model {budget.model!r} in this check or an installed suite ({', '.join(declared)}); "
                "check the spelling"
            )
    return sorted(set(out), key=out.index)


def policy_from(config: Config, given: Thresholds) -> Policy:
    """The configured policy with ``--threshold`` and ``--alpha`` from the command line applied."""
    checked_number(given.threshold, "--threshold", at_least=0, what="percent")
    checked_number(given.alpha, "--alpha", above=0, below=1)
    overrides: dict[str, Any] = {}
    if given.threshold is not None:
        overrides["threshold_pct"] = given.threshold
    if given.alpha is not None:
        overrides["alpha"] = given.alpha
    try:
        return dataclasses.replace(config.policy, **overrides)
    except ValueError as exc:
        raise ConfigError(str(exc), source="command line") from None

"""``perfgate check``: compare a run against its baseline (a file, the store's, or budgets only).

:func:`check` reads the configuration, the current run, the calibration and the baseline once
each, decides, and keeps the verdict in the store the baseline came from. The reports are the
caller's; :func:`publish` then pushes the result as metrics and notifies, as configured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from perfgate.app.policy import config_warnings, policy_from
from perfgate.app.runs import content_run_id
from perfgate.app.stores import chosen_store, store_file
from perfgate.config import Config, load_config
from perfgate.core.compare import CheckResult, budgets_only, compare_runs
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.report.formatting import fmt_change
from perfgate.runfile import load_run

__all__ = ["CheckOutcome", "CheckRequest", "check", "publish", "with_calibration"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRequest:
    """What to compare, and how.

    ``baseline`` is a run file; without one the baseline comes from ``store`` (``--store``, else
    ``PERFGATE_STORE``, else the configuration's), else only the configured budgets are checked.
    ``outputs`` are the files the caller will write, by flag: none may name an input.
    """

    current: Path
    baseline: Path | None = None
    store: str | None = None
    config: Path | None = None
    noise: Path | None = None
    threshold: float | None = None
    alpha: float | None = None
    baseline_runs: int = 5
    baseline_branch: str = "main"
    allow_machine_mismatch: bool = False
    outputs: tuple[tuple[str, Path | None], ...] = ()
    warn: bool = True  # list the names in the configuration that the check cannot use


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """The result of a check, the policy and configuration it was decided with, and the names in
    the configuration it could not use (:func:`perfgate.app.policy.config_warnings`)."""

    result: CheckResult
    policy: Policy
    config: Config
    warnings: tuple[str, ...]


def with_calibration(noise: Path | None, policy: Policy, current: Run) -> Policy:
    """Fold this machine's calibrated noise (``perfgate calibrate``) into the policy: the file
    ``noise``, else the default one when it exists. The file is read once."""
    from perfgate.calibration import DEFAULT_NOISE_FILE, load_calibration

    path = noise if noise is not None else DEFAULT_NOISE_FILE
    if noise is None and not path.exists():
        return policy
    calibration = load_calibration(path, machine=current.machine.fingerprint, model=current.model_key)
    if not calibration.sigma:
        return policy
    return dataclasses.replace(policy, noise={**calibration.sigma, **policy.noise}, noise_runs=calibration.runs)


def _suite_usable(run: Run, source: object) -> None:
    """Refuse a run of an installed suite whose declaration cannot be used (:mod:`perfgate.suites`):
    without it, what gates its metrics (units, statistics) is not known."""
    from perfgate.errors import ConfigError
    from perfgate.suites import find

    try:
        find(run.suite)
    except ConfigError as exc:
        raise ConfigError(str(exc), source=str(source)) from None


def _baseline_from_store(request: CheckRequest, current: Run, url: str) -> tuple[Run, str]:
    from perfgate.store import open_store
    from perfgate.store.baseline import baseline_for

    store = open_store(url)
    try:  # the baseline `baseline update` kept, else the pooled last K runs
        return baseline_for(store, current, branch=request.baseline_branch, k=request.baseline_runs)
    finally:
        store.close()


def _record_verdict(current: Run, url: str, result: CheckResult) -> None:
    """Keep the verdict for the current run: a flagged run stays out of baselines until accepted."""
    from perfgate.store import open_store
    from perfgate.store.baseline import record_verdict

    note = "; ".join(f"{c.label} {fmt_change(c.change)}" for c in result.regressions)
    store = open_store(url)
    try:
        record_verdict(store, current.run_id or content_run_id(current), regressed=bool(result.regressions), note=note)
    finally:
        store.close()


def check(request: CheckRequest) -> CheckOutcome:
    """Compare ``request.current`` with its baseline.

    Raises:
        InputError: no baseline and no budgets, a run file that cannot be read, an output that
            names an input.
        ConfigError: the configuration, the calibration or a run's suite cannot be used.
    """
    config = load_config(request.config)
    if request.baseline_runs < 1:
        raise InputError(f"must be at least 1, got {request.baseline_runs}", field="--baseline-runs")
    # the store is read only without a baseline file: --store, PERFGATE_STORE, configuration
    url = chosen_store(request.store, config) if request.baseline is None else None
    check_distinct(
        dict(request.outputs),
        {
            "--baseline": request.baseline,
            "--current": request.current,
            "--noise": request.noise,
            "--config": config.source,
            "the store": store_file(url) if url is not None else None,
        },
    )
    policy = policy_from(config, request)
    current = load_run(request.current, policy.metric_info)
    _suite_usable(current, request.current)
    policy = with_calibration(request.noise, policy, current)
    if request.baseline is not None:
        baseline = load_run(request.baseline, policy.metric_info)
        _suite_usable(baseline, request.baseline)
        result = compare_runs(
            baseline,
            current,
            policy,
            allow_machine_mismatch=request.allow_machine_mismatch,
            baseline_source=f"file `{request.baseline}`",
        )
    elif url is not None:
        baseline, source = _baseline_from_store(request, current, url)
        result = compare_runs(
            baseline, current, policy, allow_machine_mismatch=request.allow_machine_mismatch, baseline_source=source
        )
        _record_verdict(current, url, result)
    elif policy.budgets_for(current.model_key):
        result = budgets_only(current, policy)  # budgets hold from the first run
    else:
        raise InputError(
            "give --baseline FILE, or --store URL (or PERFGATE_STORE) to take the baseline from the history "
            "(or configure budgets, which are checked without one)",
            field="--baseline",
        )
    runs = [r for r in (result.baseline, result.current) if r is not None]
    warnings = tuple(config_warnings(policy, runs)) if request.warn else ()
    return CheckOutcome(result=result, policy=policy, config=config, warnings=warnings)


def publish(outcome: CheckOutcome, *, push_metrics: str | None, notify: bool | None) -> None:
    """After the reports are written: push the result to the Pushgateway ``push_metrics``, and notify
    the configured targets (``notify`` None: as the configuration's ``enabled`` says). A failure of
    either is a warning on stderr; it never changes the verdict."""
    if push_metrics is not None:
        from perfgate.app.export import push_check

        push_check(push_metrics, outcome.result, outcome.policy)
    from perfgate.notify.dispatch import maybe_notify

    maybe_notify(outcome.result, outcome.config.notify, notify)

"""``perfgate check``: compare a run against its baseline; exit 1 on regression or broken budget."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from perfgate.cli._common import (
    add_config_argument,
    add_flag,
    add_removed_spelling,
    add_store_argument,
    chosen_store,
    config_from,
    config_warnings,
    exit_code_of,
    policy_from,
    store_file,
    write_reports,
)
from perfgate.core.compare import CheckResult, budgets_only, compare_runs
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.errors import InputError
from perfgate.output import check_distinct, output_file
from perfgate.report.formatting import fmt_change
from perfgate.runfile import load_run
from perfgate.safe.text import plain

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline", type=Path, help="baseline run file (versioned, or the original specification's flat format)"
    )
    parser.add_argument("--current", type=Path, required=True, help="current run file")
    parser.add_argument("--output", type=output_file, help="write the Markdown report here (default: standard output)")
    add_flag(parser, "--json", type=output_file, dest="json_output")
    add_flag(parser, "--html", type=output_file, dest="html_output")
    add_flag(parser, "--comment", type=output_file)
    add_flag(parser, "--push-metrics", metavar="URL")
    add_flag(parser, "--threshold", type=float, default=None, default_text="10")
    add_flag(parser, "--alpha", type=float, default=None, default_text="0.01")
    parser.add_argument(
        "--allow-machine-mismatch",
        action="store_true",
        help="compare runs from different machines (the report says so at the top)",
    )
    add_store_argument(parser)
    add_flag(parser, "--baseline-runs", type=int, default=5, default_text="5, when no baseline was kept")
    add_flag(parser, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(parser, "--branch", "--baseline-branch")
    add_flag(parser, "--quiet", action="store_true")
    add_flag(parser, "--fail-on-inconclusive", action="store_true")
    parser.add_argument(
        "--noise",
        type=Path,
        default=None,
        help="calibration file from perfgate calibrate (default: .perfgate/noise.json when present)",
    )
    parser.add_argument(
        "--notify",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="notify the targets of [tool.perfgate.notify] after the report is written (default: its 'enabled')",
    )
    add_config_argument(parser)


def _baseline_from_store(args: argparse.Namespace, current: Run, url: str) -> tuple[Run, str]:
    from perfgate.store import open_store
    from perfgate.store.baseline import baseline_for

    store = open_store(url)
    try:  # the baseline `baseline update` kept, else the pooled last K runs
        return baseline_for(store, current, branch=args.baseline_branch, k=args.baseline_runs)
    finally:
        store.close()


def _record_verdict(current: Run, url: str, result: CheckResult) -> None:
    """Keep the verdict for the current run: a flagged run stays out of baselines until accepted."""
    from perfgate.cli._common import content_run_id
    from perfgate.store import open_store
    from perfgate.store.baseline import record_verdict

    note = "; ".join(f"{c.label} {fmt_change(c.change)}" for c in result.regressions)
    store = open_store(url)
    try:
        record_verdict(store, current.run_id or content_run_id(current), regressed=bool(result.regressions), note=note)
    finally:
        store.close()


def with_calibration(noise: Path | None, policy: Policy, current: Run) -> Policy:
    """Fold this machine's calibrated noise (``perfgate calibrate``) into the policy: the file
    ``noise``, else the default one when it exists."""
    from perfgate.calibration import DEFAULT_NOISE_FILE, load_noise, noise_runs

    path = noise if noise is not None else DEFAULT_NOISE_FILE
    if noise is None and not path.exists():
        return policy
    machine, model = current.machine.fingerprint, current.model_key
    sigma = load_noise(path, machine=machine, model=model)
    if not sigma:
        return policy
    runs = noise_runs(path, machine=machine, model=model)
    return dataclasses.replace(policy, noise={**sigma, **policy.noise}, noise_runs=runs)


def _suite_usable(run: Run, source: object) -> None:
    """Refuse a run of an installed suite whose declaration cannot be used (:mod:`perfgate.suites`):
    without it, what gates its metrics (units, statistics) is not known."""
    from perfgate.errors import ConfigError
    from perfgate.suites import find

    try:
        find(run.suite)
    except ConfigError as exc:
        raise ConfigError(str(exc), source=str(source)) from None


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    if args.baseline_runs < 1:
        raise InputError(f"must be at least 1, got {args.baseline_runs}", field="--baseline-runs")
    url = chosen_store(args, config) if args.baseline is None else None  # --store, PERFGATE_STORE, configuration
    check_distinct(
        {"--output": args.output, "--json": args.json_output, "--html": args.html_output, "--comment": args.comment},
        {
            "--baseline": args.baseline,
            "--current": args.current,
            "--noise": args.noise,
            "--config": config.source,
            "the store": store_file(url) if url is not None else None,
        },
    )
    policy = policy_from(config, args)
    current = load_run(args.current, policy.metric_info)
    _suite_usable(current, args.current)
    policy = with_calibration(args.noise, policy, current)
    if args.baseline is not None:
        baseline = load_run(args.baseline, policy.metric_info)
        _suite_usable(baseline, args.baseline)
        result = compare_runs(
            baseline,
            current,
            policy,
            allow_machine_mismatch=args.allow_machine_mismatch,
            baseline_source=f"file `{args.baseline}`",
        )
    elif url is not None:
        baseline, source = _baseline_from_store(args, current, url)
        result = compare_runs(
            baseline, current, policy, allow_machine_mismatch=args.allow_machine_mismatch, baseline_source=source
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
    if not args.quiet:
        for warning in config_warnings(policy, [r for r in (result.baseline, result.current) if r is not None]):
            print(f"perfgate check: warning: {plain(warning)}", file=sys.stderr)
        for note in result.notes:  # imported metrics named after the baseline's (perfgate.core.benchmark_names)
            print(f"perfgate check: note: {plain(note)}", file=sys.stderr)
    write_reports(args, result)
    if args.push_metrics is not None:
        from perfgate.cli._export import push_check

        push_check(args.push_metrics, result, policy)  # reports failures on stderr; never changes the exit code
    from perfgate.notify.dispatch import maybe_notify

    maybe_notify(result, config.notify, args.notify)  # reports failures on stderr; never changes the exit code
    return exit_code_of(result, args, "check")

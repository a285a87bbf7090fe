"""``perfgate check``: compare a run against its baseline; exit 1 on regression or broken budget."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from perfgate.cli._common import (
    add_config_argument,
    config_from,
    config_warnings,
    policy_from,
    print_verdict,
    store_file,
)
from perfgate.core.compare import CheckResult, budgets_only, compare_runs
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.core.text import plain
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.report.format import fmt_change
from perfgate.report.json import render_json
from perfgate.report.markdown import render_markdown
from perfgate.runfile import load_run, write_text_atomic

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline", type=Path, help="baseline run file (versioned, or the original specification's flat format)"
    )
    parser.add_argument("--current", type=Path, required=True, help="current run file")
    parser.add_argument("--output", type=Path, help="write the Markdown report here")
    parser.add_argument("--json", type=Path, dest="json_output", help="write the machine-readable report here")
    parser.add_argument("--html", type=Path, dest="html_output", help="write the HTML report with plots here")
    parser.add_argument(
        "--comment",
        type=Path,
        help="write the compact pull-request comment form here (6 columns at most, details folded)",
    )
    parser.add_argument("--push-metrics", metavar="URL", help="push the current run and this check to a Pushgateway")
    parser.add_argument("--threshold", type=float, default=None, help="regression threshold in percent (default 10)")
    parser.add_argument("--alpha", type=float, default=None, help="family-wise significance level (default 0.01)")
    parser.add_argument(
        "--allow-machine-mismatch",
        action="store_true",
        help="compare runs from different machines (the report says so at the top)",
    )
    parser.add_argument("--store", default=None, help="take the baseline from this store (sqlite:///… URL)")
    parser.add_argument("--baseline-runs", type=int, default=5, help="with --store: runs pooled into the baseline")
    parser.add_argument("--branch", default="main", help="with --store: the branch whose runs form the baseline")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
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


def _baseline_from_store(args: argparse.Namespace, current: Run, configured: str | None) -> tuple[Run, str]:
    from perfgate.store import open_store, resolve_store_url
    from perfgate.store.baseline import baseline_for

    store = open_store(resolve_store_url(args.store, configured))
    try:  # the baseline `baseline update` kept, else the pooled last K runs
        return baseline_for(store, current, branch=args.branch, k=args.baseline_runs)
    finally:
        store.close()


def _record_verdict(args: argparse.Namespace, current: Run, configured: str | None, result: CheckResult) -> None:
    """Keep the verdict for the current run: a flagged run stays out of baselines until accepted."""
    from perfgate.cli._common import content_run_id
    from perfgate.store import open_store, resolve_store_url
    from perfgate.store.baseline import record_verdict

    note = "; ".join(f"{c.label} {fmt_change(c.change)}" for c in result.regressions)
    store = open_store(resolve_store_url(args.store, configured))
    try:
        record_verdict(store, current.run_id or content_run_id(current), regressed=bool(result.regressions), note=note)
    finally:
        store.close()


def _with_calibration(args: argparse.Namespace, policy: Policy, current: Run) -> Policy:
    """Fold this machine's calibrated run-to-run noise (``perfgate calibrate``) into the policy."""
    from perfgate.calibration import DEFAULT_NOISE_FILE, load_noise

    path = args.noise if args.noise is not None else DEFAULT_NOISE_FILE
    if args.noise is None and not path.exists():
        return policy
    sigma = load_noise(path, machine=current.machine.fingerprint, model=current.model_key)
    return dataclasses.replace(policy, noise={**sigma, **policy.noise}) if sigma else policy


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    check_distinct(
        {"--output": args.output, "--json": args.json_output, "--html": args.html_output, "--comment": args.comment},
        {
            "--baseline": args.baseline,
            "--current": args.current,
            "--noise": args.noise,
            "--config": config.source,
            "the store": store_file(args.store, config.store) if args.baseline is None else None,
        },
    )
    policy = policy_from(config, args)
    current = load_run(args.current, policy.metric_info)
    policy = _with_calibration(args, policy, current)
    if args.baseline is not None:
        baseline = load_run(args.baseline, policy.metric_info)
        result = compare_runs(
            baseline,
            current,
            policy,
            allow_machine_mismatch=args.allow_machine_mismatch,
            baseline_source=f"file `{args.baseline}`",
        )
    elif args.store is not None or config.store is not None:
        baseline, source = _baseline_from_store(args, current, config.store)
        result = compare_runs(
            baseline, current, policy, allow_machine_mismatch=args.allow_machine_mismatch, baseline_source=source
        )
        _record_verdict(args, current, config.store, result)
    elif policy.budgets_for(current.model_key):
        result = budgets_only(current, policy)  # budgets hold from the first run
    else:
        raise InputError(
            "give --baseline FILE, or --store URL to take the baseline from the history "
            "(or configure budgets, which are checked without one)",
            field="--baseline",
        )
    if not args.quiet:
        for warning in config_warnings(policy, [r for r in (result.baseline, current) if r is not None]):
            print(f"perfgate check: warning: {plain(warning)}", file=sys.stderr)
    markdown = render_markdown(result)
    if args.output is not None:
        write_text_atomic(args.output, markdown)
    if args.json_output is not None:
        write_text_atomic(args.json_output, render_json(result))
    if args.html_output is not None:
        from perfgate.report.html import render_check_html

        write_text_atomic(args.html_output, render_check_html(result))
    if args.comment is not None:
        from perfgate.report.comment import render_comment

        write_text_atomic(args.comment, render_comment(result))
    if not args.quiet:
        if args.output is None:
            sys.stdout.write(markdown)
        print_verdict(result)
    if args.push_metrics is not None:
        from perfgate.cli.export import push_check

        push_check(args.push_metrics, result, policy)  # reports failures on stderr; never changes the exit code
    from perfgate.notify.dispatch import maybe_notify

    maybe_notify(result, config.notify, args.notify)  # reports failures on stderr; never changes the exit code
    return result.exit_code

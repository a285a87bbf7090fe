"""``perfgate check``: compare a run against its baseline; exit 1 on regression or broken budget."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from perfgate.cli._common import add_config_argument, config_from, stderr_console
from perfgate.core.compare import CheckResult, Verdict, budgets_only, compare_runs
from perfgate.core.schema import Run
from perfgate.errors import ConfigError, InputError
from perfgate.report.format import fmt_change
from perfgate.report.json import render_json
from perfgate.report.markdown import render_markdown
from perfgate.runfile import load_run, write_text_atomic

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", type=Path, help="baseline run file (versioned or seed flat format)")
    parser.add_argument("--current", type=Path, required=True, help="current run file")
    parser.add_argument("--output", type=Path, help="write the Markdown report here")
    parser.add_argument("--json", type=Path, dest="json_output", help="write the machine-readable report here")
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
    add_config_argument(parser)


def _baseline_from_store(args: argparse.Namespace, current: Run, configured: str | None) -> tuple[Run, str]:
    from perfgate.store import open_store, resolve_store_url
    from perfgate.store.baseline import pooled_baseline

    store = open_store(resolve_store_url(args.store, configured))
    try:
        return pooled_baseline(store, current, branch=args.branch, k=args.baseline_runs)
    finally:
        store.close()


def _summary(result: CheckResult) -> None:
    console = stderr_console()
    if result.regressions:
        console.print(f"[bold red]✗ regression[/] in {len(result.regressions)} comparison(s):")
        for c in result.regressions:
            console.print(f"  {c.label}: {fmt_change(c.change)}")
    for b in result.broken_budgets:
        console.print(
            f"[bold red]✗ over budget[/]: {b.budget.metric} {b.budget.statistic} = {b.value:.4g} "
            f"(limit {b.budget.limit:g} {b.unit})"
        )
    if not result.failed:
        inconclusive = len(result.with_verdict(Verdict.INCONCLUSIVE))
        extra = f" ({inconclusive} inconclusive)" if inconclusive else ""
        console.print(f"[bold green]✓ no regression[/]{extra}")


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    overrides = {}
    if args.threshold is not None:
        overrides["threshold_pct"] = args.threshold
    if args.alpha is not None:
        overrides["alpha"] = args.alpha
    try:
        policy = dataclasses.replace(config.policy, **overrides)
    except ValueError as exc:
        raise ConfigError(str(exc), source="command line") from None
    current = load_run(args.current, policy.metric_info)
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
    elif policy.budgets_for(current.model_key):
        result = budgets_only(current, policy)  # budgets hold from the first run
    else:
        raise InputError(
            "give --baseline FILE, or --store URL to take the baseline from the history "
            "(or configure budgets, which are checked without one)",
            field="--baseline",
        )
    markdown = render_markdown(result)
    if args.output is not None:
        write_text_atomic(args.output, markdown)
    if args.json_output is not None:
        write_text_atomic(args.json_output, render_json(result))
    if not args.quiet:
        if args.output is None:
            sys.stdout.write(markdown)
        _summary(result)
    return result.exit_code

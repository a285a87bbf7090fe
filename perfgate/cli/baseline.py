"""``perfgate baseline``: one independent baseline file per model (``<dir>/<model>_baseline.json``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.cli._common import model_key
from perfgate.core.stats import summarize
from perfgate.errors import InputError
from perfgate.report.format import fmt_time, fmt_value
from perfgate.runfile import load_run, save_run

__all__ = ["DEFAULT_DIR", "add_arguments", "baseline_path", "run"]

DEFAULT_DIR = Path("benchmark_results")


def baseline_path(directory: Path, model: str) -> Path:
    return directory / f"{model_key(model)}_baseline.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    save = sub.add_parser("save", help="make a run file the baseline of its model")
    save.add_argument("run", type=Path, metavar="RUN.json")
    save.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="baseline folder (default benchmark_results)")
    show = sub.add_parser("show", help="print the baselines (one model or all)")
    show.add_argument("--model", default=None)
    show.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="baseline folder (default benchmark_results)")


def _show(path: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    base = load_run(path)
    table = Table(title=f"{base.model} baseline — {path}", title_justify="left")
    for col in ("metric", "unit", "n", "median", "p95", "p99", "min", "max"):
        table.add_column(col, justify="left" if col in ("metric", "unit") else "right")
    for name, metric in base.metrics.items():
        s = summarize(metric.samples)
        table.add_row(name, metric.unit, str(s.n), *(fmt_value(v) for v in (s.median, s.p95, s.p99, s.min, s.max)))
    console = Console(highlight=False)
    console.print(table)
    console.print(
        f"recorded {fmt_time(base.created_at)} UTC, commit {base.git.commit or 'unknown'}, "
        f"machine {base.machine.fingerprint or 'unknown'}"
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "save":
        base = load_run(args.run)
        target = baseline_path(args.dir, base.model)
        save_run(target, base)
        print(f"saved {args.run} as the {base.model} baseline: {target}")
        return 0
    paths = [baseline_path(args.dir, args.model)] if args.model else sorted(args.dir.glob("*_baseline.json"))
    if not paths or not all(p.exists() for p in paths):
        what = f"model {args.model!r}" if args.model else "any model"
        raise InputError(f"no baseline for {what}; save one with perfgate baseline save RUN.json", source=str(args.dir))
    for path in paths:
        _show(path)
    return 0

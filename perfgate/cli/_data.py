"""``perfgate data``: inspect and synthesise DBN market-data files.

``perfgate data inspect FILE`` loads FILE with the strict loader and prints what it holds
and whether it is valid (exit 0), or the validation failure (exit 2). ``perfgate data
synth`` writes a synthetic DBN file for benchmarks of any size.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.cli._flags import add_flag, add_removed_spelling
from perfgate.core.text import plain
from perfgate.errors import EXIT_ERROR, EXIT_OK, ConfigError, DataError
from perfgate.output import output_file

if TYPE_CHECKING:
    from perfgate_pipeline.dbn import DbnFile

__all__ = ["add_arguments", "run"]

_MAX_SYMBOLS_SHOWN = 10


def _pipeline_requirements(what: str) -> AbstractContextManager[None]:
    """The reference pipeline's own requirements (its declaration, :mod:`perfgate.suites`): a missing
    one is a one-line error saying what to install, as ``perfgate bench --model dqn`` says it."""
    from perfgate.suites import find, suite_requirements

    suite = find("pipeline")
    if suite is None:
        raise ConfigError(
            f"{what} reads and writes DBN files with the reference pipeline, which is not installed: "
            "pip install 'perfgate[pipeline]'"
        )
    return suite_requirements(suite, what)


MAX_SYNTH_RECORDS = 100_000_000  # about 5 GB of MBP-1 records: more is never a test file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    inspect = sub.add_parser(
        "inspect",
        help="show a DBN file's header, record count and time range, and validate every record",
        description="Load a .dbn or .dbn.zst file with perfgate's strict loader. Exit 0 if it is valid, "
        "2 if it is damaged or unsupported.",
    )
    inspect.add_argument("file", type=Path, metavar="FILE", help="a .dbn or .dbn.zst file")
    add_flag(inspect, "--format", choices=("text", "json"), default="text", default_text="text")
    add_removed_spelling(inspect, "--json", "--format json")
    inspect.add_argument(
        "--dbn-version", type=int, choices=(1, 2, 3), default=None, help="DBN version of a header-less fragment"
    )
    add_removed_spelling(inspect, "--version", "--dbn-version")
    inspect.add_argument("--ts-out", action="store_true", help="a header-less fragment's records carry ts_out")
    inspect.add_argument("--mixed", action="store_true", help="accept several record types in one file and count each")
    synth = sub.add_parser(
        "synth",
        help="write a synthetic DBN file (realistic bars or ticks) for benchmarks",
        description="Write a synthetic DBN file; a .zst suffix compresses it with zstd.",
    )
    synth.add_argument("--schema", default="ohlcv-1m", help="record schema (default: ohlcv-1m)")
    synth.add_argument("--records", type=int, required=True, metavar="N", help="number of records")
    add_flag(synth, "--seed", type=int, default=0, default_text="0")
    synth.add_argument("--output", type=output_file, required=True, metavar="FILE", help="FILE.dbn or FILE.dbn.zst")


def run(args: argparse.Namespace) -> int:
    if args.action == "synth":
        return _synth(args)
    return _inspect(args)


def _synth(args: argparse.Namespace) -> int:
    from perfgate.app.numbers import checked_number

    checked_number(args.records, "--records", at_least=1, at_most=MAX_SYNTH_RECORDS)
    checked_number(args.seed, "--seed", at_least=0, below=2**63)
    from perfgate.output import open_output

    with _pipeline_requirements("perfgate data synth"):
        from perfgate_pipeline.synth import write_synthetic_to

    with open_output(args.output) as handle:
        write_synthetic_to(
            handle, schema=args.schema, records=args.records, seed=args.seed, compress=args.output.suffix == ".zst"
        )
        size = handle.tell() if handle.seekable() else None
    shown = f" ({size:,} bytes)" if size is not None else ""
    print(plain(f"wrote {args.records:,} {args.schema} records (seed {args.seed}) to {args.output}{shown}"))
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    from perfgate_pipeline.dbn import load_dbn

    as_json = args.format == "json"
    if args.ts_out and args.dbn_version is None:
        raise DataError("--ts-out applies only to header-less fragments; give --dbn-version too", source=str(args.file))
    try:
        dbn = load_dbn(args.file, version=args.dbn_version, ts_out=args.ts_out, mixed=args.mixed)
    except DataError as exc:
        if not as_json:
            raise  # the CLI prints it on one line and exits 2
        print(json.dumps({"file": str(args.file), "valid": False, "error": str(exc)}, sort_keys=True))
        return EXIT_ERROR
    summary = _summary(dbn)
    if as_json:
        print(json.dumps(summary, sort_keys=True))
    else:
        _print_table(summary)
    return EXIT_OK


def _iso(ns: int | None) -> str | None:
    """ns since the UNIX epoch as ISO 8601 UTC, keeping nanoseconds when there are any."""
    if ns is None:
        return None
    seconds, frac = divmod(ns, 1_000_000_000)
    try:
        text = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"{ns} ns"
    return f"{text}.{frac:09d}Z" if frac else f"{text}Z"


def _summary(dbn: DbnFile) -> dict[str, Any]:
    from perfgate_pipeline.dbn import RTYPE_NAMES, stype_name

    meta = dbn.metadata
    first_last = dbn.ts_event_range()
    return {
        "file": dbn.path,
        "valid": True,
        "error": None,
        "version": dbn.version,
        "compressed": dbn.compressed,
        "fragment": meta is None,
        "schema": dbn.schema,
        "dataset": meta.dataset if meta else None,
        "symbols": list(meta.symbols) if meta else [],
        "stype_in": stype_name(meta.stype_in) if meta else None,
        "stype_out": stype_name(meta.stype_out) if meta else None,
        "ts_out": dbn.ts_out,
        "record_count": dbn.record_count,
        "records_by_type": {RTYPE_NAMES.get(rtype, f"0x{rtype:02X}"): len(arr) for rtype, arr in dbn.groups.items()},
        "start": _iso(meta.start) if meta else None,
        "end": _iso(meta.end) if meta else None,
        "first_ts_event": _iso(first_last[0]) if first_last else None,
        "last_ts_event": _iso(first_last[1]) if first_last else None,
    }


def _rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    symbols = s["symbols"]
    shown = ", ".join(symbols[:_MAX_SYMBOLS_SHOWN]) + (
        f", ... ({len(symbols)} in all)" if len(symbols) > _MAX_SYMBOLS_SHOWN else ""
    )
    kinds = ", ".join(f"{name}: {count:,}" for name, count in s["records_by_type"].items())
    return [
        ("file", s["file"]),
        (
            "format",
            f"DBN v{s['version']}, {'zstd' if s['compressed'] else 'uncompressed'}"
            + (", header-less fragment" if s["fragment"] else ""),
        ),
        ("schema", s["schema"] or ("mixed" if not s["fragment"] else "-")),
        ("dataset", s["dataset"] or "-"),
        ("symbols", shown or "-"),
        ("symbology", f"{s['stype_in']} -> {s['stype_out']}" if s["stype_in"] else "-"),
        ("ts_out", "yes" if s["ts_out"] else "no"),
        ("records", f"{s['record_count']:,}" + (f" ({kinds})" if kinds else "")),
        ("requested range", f"{s['start']} .. {s['end'] or 'open'}" if s["start"] else "-"),
        ("ts_event range", f"{s['first_ts_event']} .. {s['last_ts_event']}" if s["first_ts_event"] else "-"),
        ("validation", "ok"),
    ]


def _print_table(summary: dict[str, Any]) -> None:
    rows = _rows(summary)
    if not sys.stdout.isatty():
        width = max(len(key) for key, _ in rows)
        for key, value in rows:
            print(f"{key:<{width}}  {plain(value)}")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(key, Text(plain(value), style="green" if key == "validation" else ""))  # Text: no markup
    from perfgate.cli._output import console_for

    console_for().print(table)

"""Reading and writing run files on disk: clear errors, atomic writes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from perfgate.core.codec import dumps, run_from_dict
from perfgate.core.metrics import MetricInfo
from perfgate.core.schema import Run
from perfgate.errors import InputError
from perfgate.output import write_output

__all__ = ["load_json", "load_run", "save_run", "write_text_atomic"]


def load_json(path: Path | str) -> object:
    """Decode a JSON file; a missing file or a syntax error is an :class:`InputError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found; check the path", source=str(p)) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a JSON file", source=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(p)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=str(p)) from None


def load_run(path: Path | str, metric_info: Mapping[str, MetricInfo] | None = None) -> Run:
    """Read a run file in the versioned or the original specification's flat format."""
    return run_from_dict(load_json(path), source=str(path), metric_info=metric_info)


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`perfgate.output.write_output` (atomic for files)."""
    write_output(path, text)


def save_run(path: Path | str, run: Run) -> None:
    """Write ``run`` in the current format, deterministically and atomically."""
    write_text_atomic(path, dumps(run))

"""Reading and writing run files on disk: clear errors, atomic writes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from perfgate.core.codec import dumps, run_from_dict
from perfgate.core.metrics import MetricInfo
from perfgate.core.schema import Run
from perfgate.inputs import read_json
from perfgate.output import write_output

__all__ = ["load_json", "load_run", "save_run", "write_text_atomic"]


def load_json(path: Path | str) -> object:
    """Decode a JSON file (``.gz`` too) within the size cap (:func:`perfgate.inputs.read_json`);
    a missing file, a syntax error, a duplicate key or a too large file is an :class:`InputError`."""
    return read_json(path)


def load_run(path: Path | str, metric_info: Mapping[str, MetricInfo] | None = None) -> Run:
    """Read a run file in the versioned or the original specification's flat format."""
    return run_from_dict(load_json(path), source=str(path), metric_info=metric_info)


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`perfgate.output.write_output` (atomic for files)."""
    write_output(path, text)


def save_run(path: Path | str, run: Run) -> None:
    """Write ``run`` in the current format, deterministically and atomically."""
    write_text_atomic(path, dumps(run))

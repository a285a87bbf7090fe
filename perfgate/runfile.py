"""Reading and writing run files on disk: clear errors, atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from perfgate.core.codec import dumps, run_from_dict
from perfgate.core.metrics import MetricInfo
from perfgate.core.schema import Run
from perfgate.errors import InputError

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
    """Write ``text`` so that readers see either the old file or the whole new one.

    The text goes to a temporary file in the same directory, is flushed to disk, then
    renamed over the target (rename is atomic on POSIX).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); a report or run file is as readable as any other
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_run(path: Path | str, run: Run) -> None:
    """Write ``run`` in the current format, deterministically and atomically."""
    write_text_atomic(path, dumps(run))

"""Small helpers shared by the command modules."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from perfgate.config import Config, load_config
from perfgate.core.codec import dumps
from perfgate.core.schema import Run, normalize_model

__all__ = ["add_config_argument", "config_from", "content_run_id", "model_key", "stderr_console"]


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="perfgate.toml or pyproject.toml with [tool.perfgate] (default: found from the working directory)",
    )


def config_from(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "config", None))


def content_run_id(run: Run) -> str:
    """A stable id for a run file that has none (seed-format files): hash of its content."""
    return hashlib.sha256(dumps(run).encode()).hexdigest()[:32]


def model_key(name: str) -> str:
    return normalize_model(name)


def stderr_console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False)

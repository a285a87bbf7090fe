"""Helpers for the importer tests: tools that must exist in CI, and running them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VENV_BIN = Path(sys.executable).parent


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def need(what: str, present: bool, hint: str) -> None:
    """Skip when ``what`` is missing, except in CI (``CI=true``), where that is a failure."""
    if present:
        return
    if in_ci():
        pytest.fail(f"{what} is required in CI ({hint})")
    pytest.skip(f"{what} is not installed ({hint})")


def which(name: str) -> str | None:
    """An executable from the test's virtualenv first, then PATH."""
    local = VENV_BIN / name
    return str(local) if local.exists() else shutil.which(name)


def run(cmd: list[str], *, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    """Run ``cmd``; fail the test with its output when it does not exit 0."""
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout

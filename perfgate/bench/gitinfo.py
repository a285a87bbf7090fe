"""Git provenance of the measured code (commit, branch, dirty), read with the git CLI.

Internal: shared with ``api``, ``cli``; not part of the Python API (README, "Python API")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from perfgate.core.schema import GitInfo

__all__ = ["collect_git"]


def _git(*args: str, cwd: Path | None) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=cwd, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def collect_git(commit: str | None = None, branch: str | None = None, cwd: Path | None = None) -> GitInfo:
    """Commit and branch given on the command line win; otherwise ask git (and CI variables)."""
    commit = commit or _git("rev-parse", "HEAD", cwd=cwd)
    branch = branch or os.environ.get("GITHUB_HEAD_REF") or os.environ.get("GITHUB_REF_NAME")
    branch = branch or _git("rev-parse", "--abbrev-ref", "HEAD", cwd=cwd)
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=cwd)
    dirty = None if commit is None else bool(status)
    return GitInfo(commit=commit, branch=None if branch == "HEAD" else branch, dirty=dirty)

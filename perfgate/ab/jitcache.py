"""numba's compiled code kept between checks, one folder per source tree, never shared between trees.

A fresh worktree has no compiled code, so the first worker pair of every ``perfgate ab`` check
compiled the reference pipeline's numba kernels again: about 3 s of the pair's start (2.4 s for
the features kernel, 0.6 s for the inference kernels), while both sides of the check waited.
numba's own cache (``cache=True``) lives in ``__pycache__`` beside each source file, so it
lasted only as long as the worktree.

Here the cache files a check's worktree ends with (``__pycache__/*.nbi``, ``*.nbc``) are kept
in a per-user folder named after the tree's git object id, and copied into the next worktree
of the same tree before its first worker starts (:func:`restore`, :func:`harvest`). The key is
the whole tree, not only the compiled file: numba checks the compiled function's own source
file, but not the functions it inlines from other modules nor the globals it freezes as
constants (numba's documentation, "Cache invalidation"), so a key of the file alone could
give one revision code compiled from another's source. Two trees that differ in any file get
different folders; the same tree (an A/A check, a re-run) the same one. Each worktree gets
its own copy: nothing is shared between processes while they run.

Only trees that ``perfgate ab`` checked out itself get kept code; the working tree measured in
place (``--current-ref WORKTREE``) keeps numba's own cache beside its files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["CACHE_DIR_VAR", "KEEP", "cache_folder", "cache_root", "harvest", "restore"]

CACHE_DIR_VAR = "PERFGATE_CACHE_DIR"  # where perfgate keeps caches (default: $XDG_CACHE_HOME/perfgate)
KEEP = 16  # trees whose compiled code is kept; the least recently used beyond that are removed
_SUFFIXES = (".nbi", ".nbc")  # numba's index and data files
_SKIP = {".git", ".venv", "node_modules", ".perfgate"}
_STALE_SECONDS = 3600.0  # a staging folder this old belongs to no running check


def cache_root(env: Mapping[str, str]) -> Path:
    """The folder that holds one sub-folder per tree: ``$PERFGATE_CACHE_DIR/numba``, else the XDG cache."""
    if env.get(CACHE_DIR_VAR):
        return Path(env[CACHE_DIR_VAR]) / "numba"
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "perfgate" / "numba"


def cache_folder(root: Path, tree_id: str) -> Path:
    """The folder of the tree whose git object id is ``tree_id`` (content-addressed: equal trees, equal ids)."""
    if not (len(tree_id) in (40, 64) and all(c in "0123456789abcdef" for c in tree_id)):
        raise ValueError(f"tree_id must be a git object id (40 or 64 hex digits), got {tree_id!r}")
    return root / tree_id


def _cache_files(tree: Path) -> Iterator[Path]:
    """numba's cache files in ``tree``'s ``__pycache__`` folders, relative to ``tree``."""
    for folder, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        if Path(folder).name != "__pycache__":
            continue
        for name in files:
            if name.endswith(_SUFFIXES):
                yield (Path(folder) / name).relative_to(tree)


def restore(folder: Path, tree: Path) -> int:
    """Copy the kept cache files of ``folder`` into the fresh worktree ``tree``; returns how many.

    A folder removed meanwhile (another check pruning it) leaves what was copied so far: numba
    compiles whatever it does not find.
    """
    copied = 0
    with contextlib.suppress(OSError):
        os.utime(folder)  # recently used: pruned last
        for rel in _cache_files(folder):
            target = tree / rel
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / rel, target)
            copied += 1
    return copied


def harvest(tree: Path, folder: Path, *, keep: int = KEEP) -> int:
    """Keep ``tree``'s cache files in ``folder`` unless it is already there; returns how many were kept.

    The folder appears whole or not at all (written beside it, then renamed), so a check that
    restores from it meanwhile never sees half of it; when two checks of one tree both harvest, the
    first one's folder stays.
    """
    files = list(_cache_files(tree))
    if not files or folder.exists():
        return 0
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        for rel in files:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / rel, staging / rel)
        staging.rename(folder)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return 0
    _prune(folder.parent, keep)
    return len(files)


def _prune(root: Path, keep: int) -> None:
    """Remove the least recently used tree folders beyond ``keep``, and staging a killed check left."""
    with contextlib.suppress(OSError):
        folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
        trees = [p for p in folders if not p.name.startswith(".")]
        stale = [p for p in folders if p.name.startswith(".") and time.time() - p.stat().st_mtime > _STALE_SECONDS]
        for p in trees[keep:] + stale:
            shutil.rmtree(p, ignore_errors=True)

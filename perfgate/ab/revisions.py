"""The two revisions of ``perfgate ab``: each checked out in its own git worktree, with its environment.

Each revision is checked out into its own temporary git worktree (:data:`WORKTREE` measures
the repository's working tree as it is, uncommitted changes included); the worktrees are
removed again whatever happens (error, Ctrl-C). A process of a revision runs with its working
directory and ``PYTHONPATH`` set to that revision's tree (and nothing else), so each side runs
its own code: its own perfgate when the repository is perfgate, its own stage modules. Both
trees are reached through paths of equal length, and each worktree starts with the numba code
an earlier check of the same tree compiled (:mod:`perfgate.ab.jitcache`).

No process of a revision gets ``PERFGATE_STORE``: A/B runs are never recorded in a store (they
would pollute the baselines' history).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfgate.ab import jitcache
from perfgate.ab.resident import Side
from perfgate.core.schema import GitInfo
from perfgate.errors import InputError, PerfgateError
from perfgate.workers.protocol import last_line as _last_line

__all__ = [
    "WORKTREE",
    "Revision",
    "checkout",
    "git_toplevel",
    "is_dirty",
    "resolve_commit",
    "revision_env",
    "sides",
]

WORKTREE = "WORKTREE"  # --current-ref value: the working tree as it is, uncommitted changes included


@dataclass(frozen=True, slots=True, kw_only=True)
class Revision:
    """One side of an A/B run: the ref as given, the commit it names and the tree measured."""

    ref: str
    commit: str
    path: Path
    dirty: bool = False  # the working tree with uncommitted changes (``WORKTREE``)

    @property
    def short(self) -> str:
        return self.commit[:12] + (", with uncommitted changes" if self.dirty else "")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise PerfgateError(f"cannot run git: {exc}; perfgate ab needs git on PATH") from None


def git_toplevel(path: Path) -> Path:
    """The top of the git repository that holds ``path``."""
    proc = _git(path, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        raise InputError(
            "not inside a git repository; run perfgate ab in one or pass --repo PATH", source=str(path), field="--repo"
        )
    return Path(proc.stdout.strip())


def resolve_commit(repo: Path, ref: str, flag: str) -> str:
    """The full SHA of the commit ``ref`` names in ``repo``; an :class:`InputError` naming it if none."""
    if not ref or ref.startswith("-"):
        raise InputError(f"{ref!r} is not a git ref", field=flag)
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        raise InputError(
            f"git ref {ref!r} names no commit in {repo}; check the branch, tag or SHA "
            "(a shallow CI clone needs it fetched, e.g. fetch-depth: 0)",
            field=flag,
        )
    return proc.stdout.strip()


def is_dirty(repo: Path) -> bool:
    """Whether tracked files have uncommitted changes (untracked files do not count)."""
    proc = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _remove_worktrees(repo: Path, paths: list[Path], tmp: Path) -> None:
    for path in reversed(paths):
        _git(repo, "worktree", "remove", "--force", str(path))
    shutil.rmtree(tmp, ignore_errors=True)
    _git(repo, "worktree", "prune")  # forgets any worktree whose folder is gone (an interrupted add)


@contextmanager
def checkout(repo: Path, baseline_ref: str, current_ref: str) -> Iterator[tuple[Revision, Revision]]:
    """Both revisions of ``repo`` in temporary worktrees, removed on exit however it is left.

    ``current_ref`` may be :data:`WORKTREE`: the repository's own working tree is measured
    in place (commit HEAD, marked dirty when tracked files have changes).

    Both trees are reached through paths of equal length (``…/a`` and ``…/b``; the working
    tree through a link named ``b``): a path's length moves every later allocation of a
    fresh interpreter, and so the memory layout of one side only (``docs/noise.md`` §5).

    Each worktree starts with the numba code compiled by an earlier check of the same git tree,
    and what it compiled is kept for the next (:mod:`perfgate.ab.jitcache`).

    Raises:
        InputError: ``repo`` is not a git repository, or a ref names no commit.
    """
    top = git_toplevel(repo)
    if baseline_ref == WORKTREE:
        raise InputError(f"{WORKTREE} is only for --current-ref; name a commit", field="--baseline-ref")
    base_commit = resolve_commit(top, baseline_ref, "--baseline-ref")
    here = current_ref == WORKTREE
    cur_commit = resolve_commit(top, "HEAD" if here else current_ref, "--current-ref")
    tmp = Path(tempfile.mkdtemp(prefix="perfgate-ab-"))
    added: list[Path] = []
    jit: dict[Path, Path] = {}  # worktree -> the folder its compiled numba code is kept in
    try:
        trees = {}
        for role, commit in (("baseline", base_commit), ("current", None if here else cur_commit)):
            path = tmp / ("a" if role == "baseline" else "b")  # equal lengths: the layout (docstring)
            if commit is None:
                path.symlink_to(top, target_is_directory=True)  # removed with tmp; rmtree does not follow it
                trees[role] = path
                continue
            added.append(path)  # before the add: an interrupted add is cleaned up too
            proc = _git(top, "worktree", "add", "--detach", "--quiet", str(path), commit)
            if proc.returncode != 0:
                raise PerfgateError(f"git worktree add of {commit[:12]} failed: {_last_line(proc.stderr)}")
            trees[role] = path
            folder = _jit_folder(top, commit)
            if folder is not None:
                jitcache.restore(folder, path)
                jit[path] = folder
        baseline = Revision(ref=baseline_ref, commit=base_commit, path=trees["baseline"])
        if here:
            current = Revision(ref=WORKTREE, commit=cur_commit, path=trees["current"], dirty=is_dirty(top))
        else:
            current = Revision(ref=current_ref, commit=cur_commit, path=trees["current"])
        yield baseline, current
    finally:
        for path, folder in jit.items():
            with contextlib.suppress(OSError):
                jitcache.harvest(path, folder)
        _remove_worktrees(top, added, tmp)


def _jit_folder(top: Path, commit: str) -> Path | None:
    """Where the numba code compiled from ``commit``'s tree is kept; None when git cannot name the tree."""
    proc = _git(top, "rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}")
    if proc.returncode != 0:
        return None
    return jitcache.cache_folder(jitcache.cache_root(os.environ), proc.stdout.strip())


def revision_env(rev: Revision) -> dict[str, str]:
    """The environment a process of ``rev`` runs in: this revision's tree on ``PYTHONPATH`` and no store."""
    # PERFGATE_STORE is left out: a measuring process records nothing (see the module's docstring)
    # NUMBA_CACHE_DIR too: numba then caches beside the tree's files, where checkout() keys it by tree
    env = {k: v for k, v in os.environ.items() if k not in ("PERFGATE_STORE", "NUMBA_CACHE_DIR")}
    env["PYTHONPATH"] = str(rev.path)  # this revision's code only, never the caller's checkout
    return env


def sides(baseline: Revision, current: Revision) -> tuple[Side, Side]:
    """Both revisions as the resident engine sees them: environments alike but for the tree's path.

    The engine sets the hash seed (one per pair, :mod:`perfgate.workers.layout`).
    ``PYTHONSAFEPATH`` keeps the working folder off ``sys.path``: the tree is imported
    through ``PYTHONPATH``, a path of the same length on both sides, and not through the
    resolved folder, whose length differs when the current side is the working tree.
    """
    out = []
    for role, rev in (("baseline", baseline), ("current", current)):
        env = {**revision_env(rev), "PYTHONHASHSEED": "0", "PYTHONSAFEPATH": "1"}
        git = GitInfo(commit=rev.commit, branch=None, dirty=rev.dirty)
        out.append(Side(role=role, label=f"{role} `{rev.ref}` ({rev.short})", path=rev.path, env=env, git=git))
    return out[0], out[1]

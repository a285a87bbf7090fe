"""numba code kept between `perfgate ab` checks, one folder per git tree (perfgate.ab.jitcache).

Asserted: a revision's compiled code is never used by a revision whose source differs, even
where numba's own check (the compiled function's file) would take it; the same tree reuses
it; a working tree measured in place is left alone; a folder appears whole and the least
recently used go. No time is asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.ab import jitcache
from perfgate.ab.revisions import WORKTREE, _jit_folder, checkout
from tests.ab.test_command import git

# kern.run inlines helper.scale: numba's cache checks kern.py's text, not helper.py's
HELPER = """\
import numba


@numba.njit(inline="always")
def scale(x):
    return x * {factor}
"""
KERN = """\
import numba

from helper import scale


@numba.njit(cache=True)
def run(x):
    return scale(x) + 1.0
"""
PROBE = "import kern; print(kern.run(1.0))"


def commit(repo: Path, factor: float, message: str) -> str:
    (repo / "helper.py").write_text(HELPER.format(factor=factor))
    (repo / "kern.py").write_text(KERN)
    git(repo, "add", "helper.py", "kern.py")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jitcache.CACHE_DIR_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


def probe(tree: Path) -> float:
    """What the tree's kern.run(1.0) returns, in a fresh interpreter importing that tree."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(tree), PYTHONSAFEPATH="1")
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return float(proc.stdout.strip())


def cache_files(tree: Path) -> list[str]:
    return sorted(p.name for p in tree.rglob("__pycache__/*.nb[ic]"))


def test_trees_that_differ_get_different_folders_equal_trees_the_same(repo: Path) -> None:
    a = commit(repo, 2.0, "a")
    b = commit(repo, 3.0, "b: the inlined helper changes, kern.py does not")
    b_again = commit(repo, 3.0, "b again: an empty commit, the same tree")
    folder_a, folder_b, folder_b_again = (_jit_folder(repo, c) for c in (a, b, b_again))
    assert folder_a is not None and folder_b is not None
    assert folder_a != folder_b
    assert folder_b == folder_b_again
    assert folder_a.parent == jitcache.cache_root(os.environ)


@pytest.mark.slow
def test_a_revisions_compiled_code_is_never_used_by_a_revision_whose_source_differs(repo: Path) -> None:
    """Regression guard: numba alone would give B the code compiled from A (kern.py is byte-identical)."""
    a = commit(repo, 2.0, "a")
    b = commit(repo, 3.0, "b: the inlined helper changes, kern.py does not")
    with checkout(repo, a, a) as (rev_a, _):
        assert cache_files(rev_a.path) == []  # nothing kept yet
        assert probe(rev_a.path) == 3.0  # compiles and writes numba's cache in the worktree
    folder_a = _jit_folder(repo, a)
    assert folder_a is not None and cache_files(folder_a)  # kept when the worktree went
    with checkout(repo, b, b) as (rev_b, _):
        assert cache_files(rev_b.path) == []  # A's code is not copied into B's tree
        assert probe(rev_b.path) == 4.0  # B's source: 1 * 3 + 1, not A's 1 * 2 + 1
    with checkout(repo, a, a) as (rev_a, _):
        assert cache_files(rev_a.path) == cache_files(folder_a)  # the same tree gets its code back
        assert probe(rev_a.path) == 3.0


def test_the_working_tree_measured_in_place_gets_no_kept_code(repo: Path) -> None:
    a = commit(repo, 2.0, "a")
    folder = _jit_folder(repo, a)
    assert folder is not None
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "__pycache__" / "kern.run-7.py311.nbi").write_bytes(b"index")
    with checkout(repo, a, WORKTREE) as (rev_a, here):
        assert cache_files(rev_a.path) == ["kern.run-7.py311.nbi"]
        assert cache_files(here.path) == []
    assert not (repo / "__pycache__" / "kern.run-7.py311.nbi").exists()


def test_harvest_keeps_the_first_folder_whole_and_prunes_the_least_recently_used(tmp_path: Path) -> None:
    root = tmp_path / "numba"
    tree = tmp_path / "tree"
    (tree / "pkg" / "__pycache__").mkdir(parents=True)
    (tree / "pkg" / "__pycache__" / "m.f-3.py311.nbi").write_bytes(b"first")
    (tree / "pkg" / "__pycache__" / "m.f-3.py311.1.nbc").write_bytes(b"code")
    (tree / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"not numba's")
    folder = jitcache.cache_folder(root, "a" * 40)
    assert jitcache.harvest(tree, folder) == 2
    assert cache_files(folder) == ["m.f-3.py311.1.nbc", "m.f-3.py311.nbi"]
    (tree / "pkg" / "__pycache__" / "m.f-3.py311.nbi").write_bytes(b"second")
    assert jitcache.harvest(tree, folder) == 0  # already kept: the first stays
    assert (folder / "pkg" / "__pycache__" / "m.f-3.py311.nbi").read_bytes() == b"first"
    assert [p.name for p in root.iterdir()] == [folder.name]  # no staging left behind
    for i, digit in enumerate("bcd"):
        os.utime(folder, (1_000 + i, 1_000 + i))  # folder a is the oldest throughout
        assert jitcache.harvest(tree, jitcache.cache_folder(root, digit * 40), keep=3) == 2
    assert sorted(p.name[0] for p in root.iterdir()) == ["b", "c", "d"]


def test_cache_folder_refuses_what_is_not_a_git_object_id(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tree_id"):
        jitcache.cache_folder(tmp_path, "../elsewhere")

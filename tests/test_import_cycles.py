"""No import cycle between the modules of perfgate and its reference pipeline, counted strictly.

An edge is anything that makes one module load another:

* an import at any depth of the code: inside a function, and inside ``if TYPE_CHECKING:`` too
  (a loop that only type checkers follow is still a loop a reader must untangle);
* ``from x import y`` as module ``x.y`` when that is a module, and as ``x`` otherwise; relative
  imports resolved;
* the packages a module's import runs first: importing ``perfgate.core.decision._rule`` runs
  ``perfgate/core/decision/__init__.py``, so it is an edge to ``perfgate.core.decision`` too (below the
  top-level packages, whose ``__init__`` loads what it names only on first use, and not to the
  importing module's own packages, which run before it whatever it imports);
* a string that spells a module: what ``importlib.import_module`` loads, and what perfgate
  starts as a process with ``python -m`` (a worker started by name depends on its module as
  surely as an import does): a dotted name anywhere, and a bare package name right after ``-m``.

Two strings are not edges:

* a suite declaration's ``stages_module=``, which names the module perfgate imports for the suite;
  the declaration itself never imports it (the stages import the declaration);
* a module started in another revision's tree (:data:`IN_OTHER_TREES`): that process runs the other
  revision's code, not this tree's (the fallback of ``perfgate ab`` runs an older perfgate's
  ``perfgate bench`` in its own worktree, where no bench worker module exists).

``tests/test_layers.py`` holds the same graph at the scale of packages.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from tests.import_graph import find_cycle

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("perfgate", "perfgate_pipeline")
_DOTTED = re.compile(r"perfgate(_pipeline)?(\.[A-Za-z_][A-Za-z0-9_]*)+")


# (the module that starts it, the module started): processes that run another revision's tree
IN_OTHER_TREES = {("perfgate.ab.fallback", "perfgate.__main__")}


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module that ``name`` (a module, or a module then attributes) loads; None outside the tree."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(module: str) -> set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    handed_over = {
        id(kw.value)
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        for kw in call.keywords
        if kw.arg == "stages_module"
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple):  # ["-m", "perfgate", ...]: the package's __main__
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            names.update(
                f"{after}.__main__" if f"{after}.__main__" in MODULES else after
                for flag, after in itertools.pairwise(items)
                if flag == "-m" and isinstance(after, str) and after in MODULES
            )
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.add(full if full in MODULES else base)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in handed_over
            and _DOTTED.fullmatch(node.value)
            and node.value in MODULES
        ):
            names.add(node.value)
    names -= {started for starter, started in IN_OTHER_TREES if starter == module}
    ancestors = {module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)}
    found = set()
    for name in names:
        if (target := _resolve(name)) is None:
            continue
        parts = target.split(".")
        found.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return {m for m in found if m in MODULES and m != module and m not in ancestors}


def test_the_modules_import_each_other_one_way():
    graph = {module: edges(module) for module in MODULES}
    assert find_cycle(graph) == []


def test_the_graph_sees_every_kind_of_edge():
    """The rules above find what they claim to: an import under TYPE_CHECKING, a submodule taken
    with ``from``, a module named in a string, and not a suite's ``stages_module=``."""
    assert "perfgate_pipeline.env" in edges("perfgate_pipeline.models")  # under TYPE_CHECKING only
    assert "perfgate_pipeline.models.dqn" in edges("perfgate_pipeline.models")  # a registry string
    assert "perfgate_pipeline.stages" not in edges("perfgate_pipeline.suite")  # stages_module=
    started = set().union(*(edges(m) for m in MODULES if not m.startswith("perfgate.workers")))
    assert {m for m in MODULES if m.startswith("perfgate.workers.")} & started  # started with python -m

"""The modules of perfgate_pipeline import each other one way: their graph has no cycle.

An edge is anything that loads another module of the package: an import at any depth of the
code (inside a function too), ``from x import y`` taken as module ``x.y`` when that is a module
and as ``x`` otherwise, and a string that spells a module of the package (the model registry
names its model modules that way, and ``importlib`` imports them). Two things are left out:

* a module's import of its own parent package (``from perfgate_pipeline.models import x``
  in a model module): the parent runs first whatever the child imports;
* the ``stages_module=`` of a suite declaration: it names the module that perfgate imports
  for the suite, beside the declaration, which never imports it itself (the stages import
  the declaration).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.import_graph import find_cycle

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "perfgate_pipeline"


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(name: str) -> str | None:
    """The module of the package that ``name`` (a module, or a module then attributes) loads."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _edges(module: str) -> set[str]:
    names: set[str] = set()
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    handed_over = {id(kw.value) for call in calls for kw in call.keywords if kw.arg == "stages_module"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                # relative: the package of this module, minus one level per dot beyond the first
                anchor = module.split(".") if _is_package(module) else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *filter(None, [base])])
            for alias in node.names:
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            if id(node) not in handed_over:
                names.add(node.value)
    parent = module.rpartition(".")[0]
    found = {m for m in map(_resolve, names) if m is not None}
    return found - {module, parent}


def _graph() -> dict[str, set[str]]:
    return {module: _edges(module) for module in MODULES}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_graph_sees_every_kind_of_edge():
    """The edges the cycle check relies on are found: top-level and in-function imports, strings."""
    graph = _graph()
    assert "perfgate_pipeline.models.dqn" in graph["perfgate_pipeline.models"]  # the registry's string
    assert "perfgate_pipeline.features" in graph["perfgate_pipeline.env"]  # a top-level import
    assert "perfgate_pipeline.serve" in graph["perfgate_pipeline.stages"]  # an import inside a function
    assert "perfgate_pipeline.models" not in graph["perfgate_pipeline.models.tft"]  # its own package
    assert "perfgate_pipeline.stages" not in graph["perfgate_pipeline.suite"]  # handed to perfgate
    assert "perfgate_pipeline.suite" in graph["perfgate_pipeline.stages"]


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_import_cycle_between_the_modules():
    cycle = find_cycle(_graph())
    assert cycle == [], " -> ".join(cycle)


def test_training_and_serving_know_no_model():
    """The shared training loop and the serving machinery reach no module of the models package:
    the models use them, not the other way round."""
    graph = _graph()
    for module in ("perfgate_pipeline.train", "perfgate_pipeline.serve"):
        reached = _reach(graph, module)
        assert sorted(m for m in reached if m.startswith("perfgate_pipeline.models")) == [], module

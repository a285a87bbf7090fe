"""The modules of perfgate_pipeline import each other one way, and the shared parts know no model.

The edges are those of ``tests/test_import_cycles.py`` (every import at any depth, a submodule taken
with ``from``, a module named in a string; a suite declaration's ``stages_module=`` is handed to
perfgate and is no edge); that test also holds the whole tree, this package included, free of cycles.
"""

from __future__ import annotations

from tests.import_graph import find_cycle
from tests.test_import_cycles import MODULES, edges


def _graph() -> dict[str, set[str]]:
    return {module: edges(module) for module in MODULES if module.startswith("perfgate_pipeline")}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), set()) - seen:
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

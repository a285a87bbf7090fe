"""The layers of docs/design.md §2: imports point down only, and `import perfgate` stays light."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.import_graph import find_cycle

PACKAGE = Path(__file__).resolve().parent.parent / "perfgate"
# the reference pipeline: a suite like any user's, in its own package beside perfgate's
PIPELINE = PACKAGE.parent / "perfgate_pipeline"
# what the pipeline may import from perfgate: what any suite imports (the registry, its declaration's types, errors,
# the run's data model to hand over its own figures as a run, the requirements of its declaration) and what a command
# that a package adds to the command line uses (the toolkit of perfgate.cli, output files, safe text)
PIPELINE_USES = {
    "bench.registry",
    "core.metrics",
    "core.schema",
    "core.codec",
    "errors",
    "suites",
    "cli.toolkit",
    "output",
    "safe",
}
# the perfgate layers that may name the pipeline's package: none (it adds `perfgate data` through an entry point)
NAMES_THE_PIPELINE: set[str] = set()

# what each layer may import from perfgate (perfgate.errors and perfgate.safe are the shared leaves)
ALLOWED = {
    "core": {"core", "errors"},
    # the measurement layer runs the user's stages: an exit or error of one is exit 2 naming it (usercode)
    "bench": {"bench", "core", "errors", "usercode"},
    "store": {"store", "core", "errors"},
    "report": {"report", "core", "errors"},
    "export": {"export", "core", "errors", "store", "report"},
    "notify": {"notify", "core", "errors", "report"},
    "importers": {"importers", "core", "errors", "inputs", "runfile"},
    # the A/B engine of `perfgate ab`: both revisions' worker processes, the fallback, the paired decision
    "ab": {"ab", "bench", "core", "errors", "workers"},
    # the profilers (pyinstrument, torch.profiler, bytecodes, callgrind's functions) filling core's Profile
    "profile": {"profile", "core", "errors"},
    # perfgate's own worker processes (bench workers, counted processes, the resident A/B worker): what runs
    # in them (the stages loaded, a model measured, a stage profiled on request), how they are started, laid
    # out in memory and ended, and how their results are read; above the measurement layer
    "workers": {"workers", "bench", "core", "errors", "guard", "output", "profile", "runfile", "suites", "usercode"},
    # the top-level modules: shared leaves (errors, inputs, output), the run file, the
    # configuration, the calibration and the Python API
    "errors": set(),
    # text and URLs made safe to show or send: control characters escaped, secrets masked, outgoing URLs checked
    "safe": {"safe", "errors"},
    "inputs": {"errors"},
    "output": {"errors"},
    "runfile": {"core", "errors", "inputs", "output"},
    "calibration": {"core", "errors", "runfile"},
    "config": {"core", "errors", "notify.settings"},
    # the suites installed packages declare (entry points), declared to the core
    "suites": {"core", "errors", "usercode"},
    # importing and running the user's code (declarations, stages modules, stages, hooks): what it raises or
    # exits with is an error, exit 2
    "usercode": {"errors"},
    # how a perfgate process ends (an error one line and exit 2, an interrupt 130 or 143): every command's
    # and every worker process's
    "guard": {"errors", "safe"},
    # the use cases of the commands: between the interface and every layer below it
    "app": {
        "app",
        "ab",
        "bench",
        "calibration",
        "config",
        "core",
        "errors",
        "export",
        "importers",
        "inputs",
        "notify",
        "output",
        "profile",
        "report",
        "runfile",
        "store",
        "suites",
        "usercode",
        "workers",
    },
    # a tracked run's provenance (bench); count_stages is the counted-run use case (app)
    "api": {"api", "app", "bench", "core", "errors", "runfile"},
    # the root re-exports the public names (README, "Python API"), imported on first use only
    "__init__": {"api", "bench", "core", "errors", "report", "runfile", "store", "suites"},
    "__main__": {"cli"},
}
# the shared leaves that every layer may import: the errors, and the safe text and outgoing URLs
for _layer, _may_import in ALLOWED.items():
    if _layer not in ("errors", "__main__"):
        _may_import.add("safe")
# the interface: every command may import everything below it
ALLOWED["cli"] = {"cli", *(layer for layer in ALLOWED if not layer.startswith("__"))}
FORBIDDEN_IN_CORE = {"torch", "os", "subprocess", "socket", "sqlite3", "psycopg", "time", "pathlib", "random"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _allowed(layer: str, target: str) -> bool:
    return any(target == a or target.startswith(a + ".") for a in ALLOWED[layer])


def test_imports_point_down():
    violations = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        layer = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if layer not in ALLOWED:
            violations.append(f"{rel} belongs to no layer of the layer table")
            continue
        for name in _imports(path):
            if name.startswith("perfgate."):
                target = name[len("perfgate.") :]
                if not _allowed(layer, target):
                    violations.append(f"{rel} imports {name}")
            if layer == "core" and name.split(".")[0] in FORBIDDEN_IN_CORE:
                violations.append(f"{rel} (core) imports {name}")
    assert violations == []


def test_the_pipeline_is_a_suite_like_any_other():
    """perfgate_pipeline uses what a user's suite uses; perfgate's layers below the interface never import it."""
    violations = []
    for path in PIPELINE.rglob("*.py"):
        for name in _imports(path):
            if name.startswith("perfgate.") and not any(
                name[len("perfgate.") :] == a or name[len("perfgate.") :].startswith(a + ".") for a in PIPELINE_USES
            ):
                violations.append(f"{path.relative_to(PIPELINE.parent)} imports {name}")
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        layer = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if layer in NAMES_THE_PIPELINE:
            continue
        if any(n == "perfgate_pipeline" or n.startswith("perfgate_pipeline.") for n in _imports(path)):
            violations.append(f"{rel} imports perfgate_pipeline")
        if "perfgate_pipeline" in path.read_text():
            violations.append(f"{rel} names perfgate_pipeline")
    assert violations == []
    assert PIPELINE.is_dir() and any(PIPELINE.rglob("*.py"))
    # perfgate reaches it only through the entry points any package may declare: its suite and its command
    entry_points = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["entry-points"]
    assert entry_points["perfgate.suites"] == {"pipeline": "perfgate_pipeline.suite:SUITE"}
    assert entry_points["perfgate.commands"] == {"data": "perfgate_pipeline.command"}


def test_every_module_is_in_a_layer():
    layers = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.rglob("*.py")}
    assert layers <= set(ALLOWED), sorted(layers - set(ALLOWED))
    assert {"api", "config", "runfile", "calibration", "cli"} <= layers


def test_import_perfgate_does_not_import_torch():
    code = "import sys, perfgate, perfgate.cli, perfgate.core.compare; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_the_measurement_layer_starts_no_perfgate_command():
    """Code that runs ``python -m perfgate <command>`` knows the command line: it lives above (``ab``'s fallback)."""
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in (PACKAGE / "bench").rglob("*.py")
        if '"-m", "perfgate",' in path.read_text() or "'-m', 'perfgate'," in path.read_text()
    ]
    assert offenders == []


def _private_ab_imports(path: Path) -> list[str]:
    """The ``perfgate.ab._x`` modules that ``path`` imports, in any of the three spellings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("perfgate.ab._")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("perfgate.ab._"):
                found.append(node.module)
            elif node.module == "perfgate.ab":
                found += [f"perfgate.ab.{alias.name}" for alias in node.names if alias.name.startswith("_")]
    return found


def test_no_other_package_imports_a_private_module_of_the_ab_package():
    """perfgate.ab's private modules (its plan, schedule and collect steps) are reached through its public ones."""
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "ab"
        for name in _private_ab_imports(path)
    ]
    assert offenders == []
    assert _private_ab_imports(PACKAGE / "ab" / "resident.py")  # the check sees the package's own imports


# modules that perfgate starts as processes (``python -m …``), named in a string by the code that starts
# them: a process boundary, not an import into the starting process, but a dependency all the same (the
# package cycle test counts them): the bench worker of ``bench --processes``, the counted worker and native
# pass of ``--measure counts`` and the resident worker of ``perfgate ab``
STARTED_AS_PROCESSES = {
    "perfgate.workers.bench",
    "perfgate.workers.count",
    "perfgate.workers.prepare",
    "perfgate.workers.resident",
}
# the names those workers have in the tree of an older revision of perfgate, which ``perfgate ab`` starts
# there: modules of that tree, not of this one
IN_OLDER_TREES = {
    "perfgate.cli.countworker",
    "perfgate.cli.prepareworker",
    "perfgate.cli._countworker",  # the two names in a tree from before they were public
    "perfgate.cli._prepareworker",
    "perfgate.ab.worker",
    "perfgate.bench.resident",
}
_MODULE_NAME = re.compile(r"perfgate(_pipeline)?(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _exists(module: str) -> bool:
    base = PACKAGE.parent.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _all_imports(path: Path, *, processes: bool = False) -> set[str]:
    """Every perfgate module ``path`` reaches: its imports, at any depth of the code, and the module
    names its strings spell (``import_module("…")``, entry points); with ``processes`` the modules it
    starts as processes too (:data:`STARTED_AS_PROCESSES`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            if node.value in IN_OLDER_TREES or (node.value in STARTED_AS_PROCESSES and not processes):
                continue
            names.add(node.value)
    found = set()
    for name in names:
        while name and not _exists(name):  # `from pkg import name`: the module is pkg
            name = name.rpartition(".")[0]
        if name.startswith(("perfgate.", "perfgate_pipeline")):
            found.add(name)
    return found - {_module_of(path)}


def _package(module: str) -> str:
    """perfgate.core.decision._prepare -> perfgate.core; perfgate.api -> perfgate.api; perfgate_pipeline.x -> itself"""
    parts = module.split(".")
    if parts[0] == "perfgate_pipeline":
        return "perfgate_pipeline"
    return ".".join(parts[:2])


def _sources() -> list[Path]:
    return [*PACKAGE.rglob("*.py"), *PIPELINE.rglob("*.py")]


def test_string_imports_point_down_too():
    """A module named in a string (``import_module``, ``python -m``) is an import: the layers hold for it."""
    violations = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        layer = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for name in _all_imports(path):
            if name.startswith("perfgate.") and not _allowed(layer, name[len("perfgate.") :]):
                violations.append(f"{rel} reaches {name}")
    assert violations == []


def test_no_module_imports_a_private_module_of_another_package():
    """``_`` marks what is private to its package; what several packages share is public (and says so)."""
    violations = []
    for path in _sources():
        me = _package(_module_of(path))
        for name in _all_imports(path):
            if _package(name) != me and any(p.startswith("_") for p in name.split(".")[1:]):
                violations.append(f"{_module_of(path)} imports {name}")
    assert violations == []


def test_no_import_cycle_between_packages():
    """Strings and imports inside functions count: a loop hidden in a function is still a loop; and a
    module started as a process by name is a dependency of the package that starts it."""
    graph: dict[str, set[str]] = {}
    for path in _sources():
        me = _package(_module_of(path))
        graph.setdefault(me, set()).update(p for p in map(_package, _all_imports(path, processes=True)) if p != me)
    assert find_cycle(graph) == []


def test_the_workers_started_by_name_are_modules_of_this_tree():
    """A worker's module named in a string is this tree's (or listed as one of an older tree's)."""
    assert all(_exists(module) for module in STARTED_AS_PROCESSES)
    assert not any(_exists(module) for module in IN_OLDER_TREES)
    spelt = {
        node.value
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in STARTED_AS_PROCESSES
    }
    assert spelt == STARTED_AS_PROCESSES

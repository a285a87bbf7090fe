"""The public surface: the names of ``perfgate`` itself, the README's list of them, and ``__all__`` everywhere."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import perfgate

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "perfgate"
README = ROOT / "README.md"
HEAVY = ("torch", "numpy", "rich")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))


def _readme_names() -> list[str]:
    """The backquoted names in the first column of the table in the README's "Python API" section."""
    section = re.search(r"^## Python API\n(.*?)^## ", README.read_text(), re.S | re.M)
    assert section is not None, "README.md has no '## Python API' section"
    rows = [line for line in section.group(1).splitlines() if line.startswith("| `")]
    assert rows, "the README's Python API section has no table of names"
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])]


def test_root_all_is_the_list_in_the_readme():
    documented = _readme_names()
    assert len(documented) == len(set(documented)), "a name is listed twice in the README"
    assert len(perfgate.__all__) == len(set(perfgate.__all__)), "a name is twice in perfgate.__all__"
    assert sorted(perfgate.__all__) == sorted(documented)


def test_every_root_name_is_the_public_object_of_its_module():
    lazy = perfgate._SOURCES
    assert set(lazy) | {"__version__"} == set(perfgate.__all__)
    for name, source in lazy.items():
        module = importlib.import_module(source)
        # public where it is defined too, and the very same object, not a copy
        assert name in module.__all__, f"{source} does not export {name}"
        assert getattr(perfgate, name) is getattr(module, name), name


def test_import_perfgate_is_light():
    # a fresh interpreter: this one has imported half the package already
    code = (
        "import sys, perfgate\n"
        "dir(perfgate); perfgate.__version__\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith('perfgate.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    # only the registry the installed suites declare themselves to (pure Python, read on first lookup)
    assert out.stdout.strip() == "['perfgate.core', 'perfgate.core.metrics']"


def test_a_name_loads_only_what_it_needs():
    code = "import sys\nfrom perfgate import InputError, __version__\nprint('numpy' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_star_import_gives_exactly_all():
    namespace: dict[str, object] = {}
    exec("from perfgate import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(perfgate.__all__)


def test_dir_lists_the_public_names():
    assert set(perfgate.__all__) <= set(dir(perfgate))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'PerformanceTrackr'"):
        _ = perfgate.PerformanceTrackr
    assert not hasattr(perfgate, "_not_a_name")


def _literal_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            value = ast.literal_eval(node.value)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value), path
            return value
    return None


def test_modules_are_found():
    assert len(MODULES) > 100 and "perfgate" in MODULES and "perfgate.core.compare" in MODULES


@pytest.mark.parametrize("module_name", MODULES)
def test_every_module_defines_all(module_name):
    path = PACKAGE.parent / (module_name.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / module_name.replace(".", "/") / "__init__.py"
    names = _literal_all(path)
    assert names is not None, f"{path.relative_to(ROOT)} has no __all__ list at the top level"
    assert len(names) == len(set(names)), f"{path.relative_to(ROOT)}: a name is twice in __all__"
    if module_name == "perfgate.__main__":  # importing it runs the command line
        assert names == []
        return
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("perfgate"):
            pytest.skip(f"{module_name} needs {exc.name}, not installed")
        raise
    assert module.__all__ == names
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == [], f"{module_name}.__all__ names what the module lacks"


# The modules without a leading underscore, and why each is one: everything else under perfgate
# is private (its own name, or a package's, begins with "_"). A new module is private unless it
# is added here with its reason.
PUBLIC_MODULES = {
    # where the root's names live (README, "Python API")
    "perfgate.api", "perfgate.bench.memory", "perfgate.bench.registry", "perfgate.core.compare",
    "perfgate.core.metrics", "perfgate.core.policy", "perfgate.core.result", "perfgate.core.schema",
    "perfgate.errors", "perfgate.report.markdown", "perfgate.runfile", "perfgate.store.base",
    # the data model and the decision's parts that the docs describe (docs/design.md, docs/noise.md)
    "perfgate.core.baseline", "perfgate.core.benchmark_names", "perfgate.core.changepoints", "perfgate.core.codec",
    "perfgate.core.machine", "perfgate.core.noise", "perfgate.core.paired", "perfgate.core.stability",
    "perfgate.core.stats", "perfgate.core.units", "perfgate.core.reduced", "perfgate.calibration", "perfgate.config",
    "perfgate.inputs",
    "perfgate.output",
    # the entry point group by which installed packages declare their suites
    "perfgate.suites",
    # what a command that an installed package adds (the perfgate.commands entry points) uses
    "perfgate.cli.toolkit",
    # what the measurement records, named by the README
    "perfgate.bench.gpu", "perfgate.bench.machine", "perfgate.bench.reference", "perfgate.bench.runner",
    # entry points that one revision of perfgate ab starts in another revision's tree: their names
    # are a protocol between versions
    "perfgate.workers.resident", "perfgate.workers.bench",
    # the A/B engine's parts that the command line uses (docs/design.md §2)
    "perfgate.ab.check", "perfgate.ab.counts", "perfgate.ab.fallback", "perfgate.ab.jitcache",
    "perfgate.ab.resident", "perfgate.ab.revisions",
    # perfgate's worker processes: their protocol, their start and end, their layouts, the stages they
    # load, what they measure and how their results become runs (docs/design.md §2)
    "perfgate.workers.counts", "perfgate.workers.layout", "perfgate.workers.measure", "perfgate.workers.protocol",
    "perfgate.workers.repeat", "perfgate.workers.spawn", "perfgate.workers.stages",
    # the use cases of bench, of counting and of ab, and where a run comes from (perfgate/app)
    "perfgate.app.ab", "perfgate.app.bench", "perfgate.app.count", "perfgate.bench.provenance",
    # the reports, the outlets and the stores by format or backend
    "perfgate.report.comment", "perfgate.report.html", "perfgate.report.json",
    "perfgate.export.grafana", "perfgate.export.prometheus",
    "perfgate.store.baseline", "perfgate.store.memory", "perfgate.store.postgres", "perfgate.store.sqlite",
    "perfgate.notify.base", "perfgate.notify.dispatch", "perfgate.notify.slack", "perfgate.notify.smtp",
    "perfgate.notify.webhook",
    # one module per imported format
    "perfgate.importers.asv", "perfgate.importers.google_benchmark", "perfgate.importers.hyperfine",
    "perfgate.importers.pyperf", "perfgate.importers.pytest_benchmark",
    # internal modules that several packages share (each docstring says "Internal: shared with …"): public
    # names so that "_" keeps meaning "private to its package", not part of the Python API
    "perfgate.bench.callgrind", "perfgate.bench.counting", "perfgate.bench.disturbance", "perfgate.bench.gitinfo",
    "perfgate.guard",
    "perfgate.core.advice", "perfgate.core.distributions", "perfgate.safe.urls",
    "perfgate.safe.redact", "perfgate.safe.text", "perfgate.export.history", "perfgate.export.latest",
    "perfgate.export.outlets", "perfgate.notify.settings", "perfgate.report.environment", "perfgate.report.escape",
    "perfgate.report.formatting", "perfgate.report.plots", "perfgate.report.shift", "perfgate.report.terms",
    # processes that perfgate ab --measure counts starts by name in each revision's tree
    "perfgate.workers.count", "perfgate.workers.prepare",
    # importing and running the user's code, shared with suites, bench, ab and cli: an exit or error is exit 2
    "perfgate.usercode",
    # where a stage's change went (docs/design.md §13): the difference, the pass, the profilers by
    # instrument, and how each report shows it
    "perfgate.core.profiles", "perfgate.ab.explain", "perfgate.profile.sampling", "perfgate.profile.torchops",
    "perfgate.profile.bytecodes", "perfgate.profile.callgrind_functions", "perfgate.report.where",
    "perfgate.report.flame", "perfgate.report.explain",
    # the use cases of the commands (docs/design.md §2): a request and a function each, and what they share
    "perfgate.app.check", "perfgate.app.export", "perfgate.app.numbers", "perfgate.app.policy", "perfgate.app.runs",
    "perfgate.app.secrets", "perfgate.app.stores", "perfgate.app.history", "perfgate.app.record", "perfgate.app.store",
    "perfgate.app.report", "perfgate.app.dashboard", "perfgate.app.calibrate", "perfgate.app.baseline",
    "perfgate.app.importing", "perfgate.app.summary", "perfgate.app.explain", "perfgate.app.files",
}  # fmt: skip


def _private(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split("."))


def test_every_module_is_private_or_listed_with_its_reason():
    packages = {_module_name(p) for p in PACKAGE.rglob("__init__.py")}
    public = {m for m in MODULES if not _private(m) and m not in packages and m != "perfgate.__main__"}
    assert public == PUBLIC_MODULES, "a module is public without a reason here, or a listed one is gone"


def test_the_root_names_come_from_public_modules():
    assert all(not _private(source) for source in perfgate._SOURCES.values()), perfgate._SOURCES

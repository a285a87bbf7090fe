"""Installed suites and stages modules that misbehave: never a verdict, never "a bug in perfgate".

Regression for an installed ``perfgate.suites`` package that exits on import making ``perfgate
check`` pass (exit 0, no report) where it found a regression, and for one broken declaration
(two suites of one name, two defaults, a metric declared twice differently) ending every command
with a traceback. A misbehaving package must cost only the commands that use it, with exit 2
and one line naming the entry point, its distribution and the field; loading user code must
never end perfgate with 0 or 1.

The packages are real installed distributions: a folder on ``PYTHONPATH`` holding a
``*.dist-info`` (``METADATA``, ``entry_points.txt``) beside its modules, which
``importlib.metadata`` finds as it finds any other. perfgate runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfgate.core.metrics import STATISTICS, Direction, MetricInfo
from perfgate.core.stats import QUANTILES
from perfgate.errors import ConfigError, InputError
from perfgate.usercode import loading
from tests.conftest import ROOT

DECLARE = "from perfgate.core.metrics import Direction, MetricInfo, SuiteDeclaration\n"

# what a module may do on import, each an error of its own: exits, raises, interrupts itself
MISBEHAVING = {
    "sys-exit-0": "import sys\nsys.exit(0)\n",
    "sys-exit-1": "import sys\nsys.exit(1)\n",
    "system-exit-text": "raise SystemExit('done here')\n",
    "value-error": "raise ValueError('broken on purpose')\n",
    "import-error": "import no_such_dependency_of_this_probe\n",
    "keyboard-interrupt": "raise KeyboardInterrupt\n",
    "base-exception": "class Odd(BaseException):\n    pass\nraise Odd('odd on purpose')\n",
    "generator-exit": "raise GeneratorExit\n",
    "syntax-error": "def broken(:\n",
}

# declarations that load but cannot be used
BROKEN = {
    "gated-p999": DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='probe_stages', metrics={"
    "'probe_time_ms': MetricInfo(unit='ms', direction=Direction.LOWER, label='t', statistics=('p999',))})\n",
    "not-a-declaration": "SUITE = 42\n",
    "another-name": DECLARE + "SUITE = SuiteDeclaration(name='elsewhere', stages_module='probe_stages')\n",
    "stages-module-not-a-name": DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='not a module')\n",
    "rounds-zero": DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='probe_stages', rounds=0)\n",
}

# declarations that clash with the reference pipeline's (installed with perfgate) or each other's:
# one distribution per (entry point, module text)
CLASHES = {
    "same-name-as-pipeline": [("pipeline", DECLARE + "SUITE = SuiteDeclaration(name='pipeline', stages_module='x')\n")],
    "second-default": [
        ("probe", DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='x', default=True)\n")
    ],
    "metric-unlike-pipeline": [
        (
            "probe",
            DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='x', metrics={"
            "'dbn_load_time_ms': MetricInfo(unit='s', direction=Direction.LOWER, label='load')})\n",
        )
    ],
    "two-packages-one-name": [
        ("twin", DECLARE + "SUITE = SuiteDeclaration(name='twin', stages_module='a')\n"),
        ("twin", DECLARE + "SUITE = SuiteDeclaration(name='twin', stages_module='b')\n"),
    ],
}

OWN_STAGES = """\
from perfgate.bench import stage

@stage("split", metric="split_time_ms", unit="ms", suite="mine", models=["m"])
def split(ctx):
    text = "a b c " * 100
    return lambda: text.split()
"""


def install(root: Path, dist: str, entries: dict[str, str], modules: dict[str, str]) -> Path:
    """An installed distribution ``dist`` under ``root`` (put ``root`` on PYTHONPATH): its
    ``perfgate.suites`` entry points ``name = module:attr`` and its modules' source."""
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[perfgate.suites]\n{lines}")
    for name, text in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))
    return root


def perfgate(cwd: Path, *args: str, path: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str], *named: str) -> str:
    """Exit 2, one line on stderr naming each of ``named``, no traceback; the line."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for name in named:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def run_doc(name: str, suite: str, median: float, when: str) -> dict[str, object]:
    samples = [median * (1 + 0.002 * ((7 * i) % 11 - 5)) for i in range(30)]
    return {
        "schema_version": 1,
        "run_id": name,
        "suite": suite,
        "model": "m",
        "created_at": when,
        "git": {"commit": name, "branch": "main"},
        "machine": {"fingerprint": "probe-machine"},
        "metrics": {"split_time_ms": {"unit": "ms", "direction": "lower_is_better", "samples": samples}},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of a suite no installed package names, the second 3 times slower: ``check`` exits 1."""
    folder = tmp_path_factory.mktemp("runs")
    for name, median, when in (("base", 10.0, "2026-01-01T00:00:00Z"), ("cur", 30.0, "2026-01-02T00:00:00Z")):
        (folder / f"{name}.json").write_text(json.dumps(run_doc(name, "mine", median, when)))
    return folder


def check(runs: Path, path: Path | None, out: Path) -> subprocess.CompletedProcess[str]:
    args = ("check", "--baseline", "base.json", "--current", "cur.json", "--output", str(out), "--quiet")
    return perfgate(runs, *args, path=path)


def test_the_runs_regress_without_any_probe(runs, tmp_path):
    done = check(runs, None, tmp_path / "report.md")
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "report.md").is_file()


# every probe: its distributions, each one entry point and the text of its declaration module
PACKAGES = {
    **{key: [("probe", text)] for key, text in {**MISBEHAVING, **BROKEN}.items()},
    **CLASHES,
}


def install_probe(root: Path, key: str) -> Path:
    """The distributions ``probe_<key>_<i>`` of probe ``key``, installed under ``root``."""
    for i, (entry, text) in enumerate(PACKAGES[key]):
        dist = f"probe_{key.replace('-', '_')}_{i}"
        install(root, dist, {entry: f"{dist}_decl:SUITE"}, {f"{dist}_decl": text})
    return root


@pytest.mark.parametrize("key", sorted(PACKAGES))
def test_check_of_another_suite_keeps_its_verdict_beside_a_broken_package(key, runs, tmp_path):
    """The same exit 1, report written, no traceback, whatever the unrelated package does on import."""
    done = check(runs, install_probe(tmp_path / "site", key), tmp_path / "report.md")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert (tmp_path / "report.md").is_file()


@pytest.mark.parametrize("key", sorted({*MISBEHAVING, *BROKEN} - {"another-name"}))
def test_bench_of_a_broken_installed_suite_is_exit_2_naming_the_package(key, tmp_path):
    site = install_probe(tmp_path / "site", key)
    done = perfgate(tmp_path, "bench", "--suite", "probe", "--model", "m", "--output", "run.json", path=site)
    dist = f"probe_{key.replace('-', '_')}_0"
    line = one_line_error(done, "suite 'probe'", f"distribution {dist} 1.0", f"{dist}_decl:SUITE")
    if key in BROKEN:
        field = {"not-a-declaration": "SuiteDeclaration", "gated-p999": "statistics"}.get(key, "field '")
        assert field in line
    assert not (tmp_path / "run.json").exists()


def test_a_declaration_of_another_name_is_refused_under_both(tmp_path):
    site = install_probe(tmp_path / "site", "another-name")
    for suite in ("probe", "elsewhere"):
        done = perfgate(tmp_path, "bench", "--suite", suite, "--model", "m", "--output", "run.json", path=site)
        one_line_error(done, "field 'name'", "probe_another_name_0")


def test_a_check_of_the_runs_of_a_broken_suite_names_its_package(tmp_path):
    """Its declaration says what gates its metrics; without it the check cannot decide."""
    site = install_probe(tmp_path / "site", "gated-p999")
    for name, median in (("base", 10.0), ("cur", 30.0)):
        (tmp_path / f"{name}.json").write_text(json.dumps(run_doc(name, "probe", median, "2026-01-01T00:00:00Z")))
    done = check(tmp_path, site, tmp_path / "report.md")
    one_line_error(done, "cur.json", "probe_gated_p999_0", "'p999'")


def test_two_defaults_refuse_only_what_needs_the_default(runs, tmp_path):
    site = install_probe(tmp_path / "site", "second-default")
    flat = str(ROOT / "tests" / "data" / "runs" / "seed_flat_dqn.json")
    done = perfgate(tmp_path, "check", "--baseline", flat, "--current", flat, path=site)
    one_line_error(done, "default=True", "probe_second_default_0", "distribution perfgate")
    done = perfgate(tmp_path, "bench", "--model", "m", "--output", "run.json", path=site)
    one_line_error(done, "default=True", "probe_second_default_0")


def test_a_metric_declared_unlike_the_pipelines_refuses_only_that_metric(tmp_path):
    site = install_probe(tmp_path / "site", "metric-unlike-pipeline")
    flat = str(ROOT / "tests" / "data" / "runs" / "seed_flat_dqn.json")
    done = perfgate(tmp_path, "check", "--baseline", flat, "--current", flat, path=site)
    one_line_error(done, "'dbn_load_time_ms'", "probe_metric_unlike_pipeline_0", "distribution perfgate", "metrics[")


@pytest.mark.parametrize(("key", "suite"), [("same-name-as-pipeline", "pipeline"), ("two-packages-one-name", "twin")])
def test_two_packages_declaring_one_suite_refuse_it(key, suite, tmp_path):
    site = install_probe(tmp_path / "site", key)
    done = perfgate(tmp_path, "bench", "--suite", suite, "--model", "m", "--output", "run.json", path=site)
    one_line_error(done, f"suite {suite!r}", f"probe_{key.replace('-', '_')}_0", "field 'name'")


@pytest.mark.parametrize("key", sorted({*MISBEHAVING, "missing"}))
def test_a_declared_stages_module_that_misbehaves_is_exit_2_naming_it(key, tmp_path):
    """The declaration loads; its stages module is missing, exits, raises or interrupts itself."""
    modules = {"probe_decl": DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='probe_stages')\n"}
    if key != "missing":
        modules["probe_stages"] = MISBEHAVING[key]
    site = install(tmp_path / "site", "probe_stages_pkg", {"probe": "probe_decl:SUITE"}, modules)
    done = perfgate(tmp_path, "bench", "--suite", "probe", "--model", "m", "--output", "run.json", path=site)
    one_line_error(done, "'probe_stages'", "probe = probe_decl:SUITE", "probe_stages_pkg 1.0", "stages_module")
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize("key", sorted(MISBEHAVING))
def test_a_stages_module_that_misbehaves_on_import_is_exit_2_naming_it(key, tmp_path):
    (tmp_path / "probe_stages.py").write_text(MISBEHAVING[key])
    args = ("bench", "--suite", "mine", "--stages-module", "probe_stages", "--model", "m", "--output", "run.json")
    line = one_line_error(perfgate(tmp_path, *args), "'probe_stages'", "--stages-module")
    if key not in ("import-error", "syntax-error"):  # these two are not run past their first line
        assert "probe_stages.py, line" in line
    assert not (tmp_path / "run.json").exists()


IN_WORKERS_ONLY = """\
import sys
from perfgate.bench import stage

if sys.argv[0].endswith(("workers/bench.py", "workers/count.py", "workers/prepare.py")):  # the workers
{body}
@stage("split", metric="split_time_ms", unit="ms", suite="mine", models=["m"])
def split(ctx):
    text = "a b c " * 100
    return lambda: text.split()
"""


@pytest.mark.parametrize("key", ["sys-exit-0", "sys-exit-1", "value-error", "keyboard-interrupt"])
def test_a_worker_process_whose_stages_module_misbehaves_makes_bench_exit_2_naming_it(key, tmp_path):
    body = textwrap.indent(MISBEHAVING[key], "    ")
    (tmp_path / "probe_stages.py").write_text(IN_WORKERS_ONLY.format(body=body))
    args = ("bench", "--suite", "mine", "--stages-module", "probe_stages", "--model", "m", "--output", "run.json")
    done = perfgate(tmp_path, *args, "--processes", "2", "--rounds", "2", "--repeat", "2", "--warmup", "1")
    one_line_error(done, "worker process 1", "'probe_stages'")
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize("worker", ["perfgate.workers.prepare", "perfgate.workers.count"])
@pytest.mark.parametrize("key", ["sys-exit-0", "value-error", "keyboard-interrupt"])
def test_a_counted_worker_whose_stages_module_misbehaves_exits_2_naming_it(worker, key, tmp_path):
    """The processes of ``--measure counts`` read their job and import its modules before anything else."""
    (tmp_path / "probe_stages.py").write_text(MISBEHAVING[key])
    job = {
        "stages_module": ["probe_stages"],
        "suite": "mine",
        "model": "m",
        "data": None,
        "seed": 0,
        "params": {},
        "warmup": 1,
        "calls": 1,
        "prepared": str(tmp_path / "prepared"),
        "output": str(tmp_path / "out.json"),
        "progress": str(tmp_path / "progress.txt"),
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", worker],
        input=json.dumps(job),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    one_line_error(done, "'probe_stages'")
    assert not (tmp_path / "out.json").exists()


def test_everything_else_keeps_working_beside_every_broken_package_at_once(runs, tmp_path):
    """``check`` and ``history`` of another suite, and ``bench`` of one's own, with all the probes installed."""
    site = tmp_path / "site"
    for key in PACKAGES:
        install_probe(site, key)
    assert check(runs, site, tmp_path / "report.md").returncode == 1
    store = f"sqlite:///{tmp_path / 'store.db'}"
    done = perfgate(runs, "record", "--store", store, "base.json", "cur.json", path=site)
    assert done.returncode == 0, done.stderr
    done = perfgate(runs, "history", "--model", "m", "--store", store, path=site)
    assert done.returncode == 0, done.stderr
    assert "split_time_ms" in done.stdout
    (tmp_path / "own_stages.py").write_text(OWN_STAGES)
    args = ("bench", "--suite", "mine", "--stages-module", "own_stages", "--model", "m", "--output", "run.json")
    done = perfgate(tmp_path, *args, "--rounds", "2", "--repeat", "2", "--warmup", "1", path=site)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run.json").is_file()


# in-process: what loading() makes of each way out of an import


def test_a_keyboard_interrupt_the_code_raises_itself_is_its_error():
    with pytest.raises(ConfigError, match=r"probe raised KeyboardInterrupt itself .*no Ctrl-C"):
        with loading("probe", error=ConfigError):
            raise KeyboardInterrupt


def test_a_real_ctrl_c_while_loading_stays_an_interrupt():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with loading("probe"):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_an_exit_while_loading_names_the_line_and_an_error_of_perfgate_passes_through():
    with pytest.raises(InputError, match=r"probe called sys.exit\(0\) .*test_installed_suites.py, line"):
        with loading("probe"):
            sys.exit(0)
    with pytest.raises(ConfigError, match=r"^as it was$"):
        with loading("probe"):
            raise ConfigError("as it was")


def test_gated_statistics_are_the_ones_perfgate_computes():
    assert set(STATISTICS) == set(QUANTILES)
    with pytest.raises(ValueError, match="statistics: 'p999'"):
        MetricInfo(unit="ms", direction=Direction.LOWER, label="t", statistics=("p999",))
    with pytest.raises(ValueError, match="statistics"):
        MetricInfo(unit="ms", direction=Direction.LOWER, label="t", statistics="p99")  # type: ignore[arg-type]

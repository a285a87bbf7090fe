"""The difference of two revisions' profiles (perfgate.core.profiles): hand-computed costs, the floor, A/A."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfgate.core.profiles import FLOOR_Z, Profile, explain, pooled, profile_from_record, profile_record

COSTS = {"run": 0.2, "run;features": 1.0, "run;features;rsi": 2.0, "run;features;ema": 3.0, "run;io": 0.5}


def profile(rng: np.random.Generator, costs: dict[str, float], *, spread: float, calls: int = 100) -> Profile:
    """One process's profile: each function's cost drawn around ``costs`` with a relative ``spread``
    (heavy-tailed: Student t with 3 degrees of freedom), the process itself drawn 5 % faster or slower."""
    process = math.exp(rng.normal(0, 0.05))
    stacks = {k: max(v * process * (1 + spread * rng.standard_t(3)), 0.0) * calls for k, v in costs.items()}
    return Profile(instrument="test", unit="s", calls=calls, stacks=stacks)


def test_own_and_inclusive_costs_by_hand():
    p = Profile(instrument="t", unit="s", calls=2, stacks={"a": 2.0, "a;b": 4.0, "a;b;a": 6.0, "c": 8.0})
    assert p.own() == {"a": 4.0, "b": 2.0, "c": 4.0}
    # a is on three paths, counted once per path (its recursion through b is not counted twice)
    assert p.inclusive() == {"a": 6.0, "b": 5.0, "c": 4.0}
    assert p.total() == 10.0


def test_a_doubled_function_is_named_first_with_its_share():
    rng = np.random.default_rng(1)
    slower = {**COSTS, "run;features;rsi": 4.0}
    e = explain(
        "features",
        "f_ms",
        [profile(rng, COSTS, spread=0.02) for _ in range(2)],
        [profile(rng, slower, spread=0.02) for _ in range(2)],
    )
    assert [c.name for c in e.named][:1] == ["rsi"]
    assert 0.6 < e.named[0].share < 1.4
    assert "ema" not in {c.name for c in e.named}


@pytest.mark.parametrize("spread", [0.02, 0.10, 0.30])
def test_identical_code_names_nothing_in_200_draws(spread):
    """A/A: the floor is the spread of the same revision's processes; at most 1 % of draws name anything with
    three processes a side (the default), at most 2 % with two (a budget that left no time for a third)."""
    for per_side, most in ((3, 2), (2, 4)):
        rng = np.random.default_rng(7)
        named = 0
        for _ in range(200):
            e = explain(
                "s",
                "m",
                [profile(rng, COSTS, spread=spread) for _ in range(per_side)],
                [profile(rng, COSTS, spread=spread) for _ in range(per_side)],
            )
            named += bool(e.named)
        assert named <= most, (per_side, named)


def test_a_function_noisier_than_the_rest_is_held_to_its_own_spread():
    """One function bimodal between processes of one revision (25 % apart, as a dict-heavy benchmark is
    between hash seeds, docs/noise.md §6): rarely named on identical code (with the pooled spread alone,
    it would be whenever the two sides drew differently). It can be named when each side's processes
    happen to draw alike and the sides differ: 1 draw in 8 with two processes a side, 1 in 32 with three,
    the default (perfgate.ab.explain.ExplainOptions.repeats)."""
    rng = np.random.default_rng(3)
    named = 0
    for _ in range(100):
        sides = []
        for _side in range(2):
            side = []
            for _ in range(3):
                p = profile(rng, COSTS, spread=0.01)
                stacks = dict(p.stacks)
                stacks["run;jumpy"] = 1.5 * 100 * (1.25 if rng.random() < 0.5 else 1.0)
                side.append(Profile(instrument="test", unit="s", calls=100, stacks=stacks))
            sides.append(side)
        named += "jumpy" in {c.name for c in explain("s", "m", *sides).named}
    assert named <= 3


def test_a_change_spread_thin_is_said():
    rng = np.random.default_rng(5)
    many = {f"run;f{i}": 1.0 for i in range(30)}
    slower = {k: 1.1 for k in many}
    e = explain(
        "s",
        "m",
        [profile(rng, many, spread=0.001) for _ in range(2)],
        [profile(rng, slower, spread=0.001) for _ in range(2)],
    )
    assert not e.named or e.spread_thin


def test_pooled_chunks_and_records_round_trip():
    a = Profile(instrument="t", unit="s", calls=2, stacks={"x": 1.0}, where={"x": "m.py:1"}, resolution=0.001)
    b = Profile(instrument="t", unit="s", calls=3, stacks={"x": 2.0, "y": 1.0}, resolution=0.001)
    both = pooled([a, b])
    assert both.calls == 5 and both.stacks == {"x": 3.0, "y": 1.0} and both.where == {"x": "m.py:1"}
    assert profile_from_record(profile_record(both)) == both
    with pytest.raises(ValueError, match="one instrument"):
        pooled([a, Profile(instrument="u", unit="s", calls=1, stacks={"x": 1.0})])
    with pytest.raises(ValueError, match="lacks the field 'calls'"):
        profile_from_record({"instrument": "t", "unit": "s", "stacks": {}})


def test_floor_z_is_what_names():
    """A change just under the floor is not named, one well past it is (exact counts, the 1 % least spread)."""
    base = Profile(instrument="c", unit="bytecodes", calls=1, stacks={"a": 1000.0, "a;b": 1000.0})
    small = Profile(instrument="c", unit="bytecodes", calls=1, stacks={"a": 1000.0, "a;b": 1000.0 * (1 + 0.02)})
    big = Profile(instrument="c", unit="bytecodes", calls=1, stacks={"a": 1000.0, "a;b": 2000.0})
    # the floor at 1 %: b's part moves 0.504 - 0.5 = 0.005, under FLOOR_Z standard errors of 1 % of it
    assert 0.5 * 1.02 / 2.02 - 0.5 < FLOOR_Z * 0.01 * 0.5
    assert not explain("s", "m", [base, base], [small, small]).named
    assert [c.name for c in explain("s", "m", [base, base], [big, big]).named] == ["b"]


def test_an_added_operator_is_named_though_the_stage_total_is_noisy():
    """A tracer's profiles (resolution 0): an operator in every profile of the current side and in none of
    the baseline's is named even when the stage's total spreads too much to call it moved."""
    rng = np.random.default_rng(2)
    base = [profile(rng, COSTS, spread=0.15) for _ in range(3)]
    added = []
    for _ in range(3):
        p = profile(rng, COSTS, spread=0.15)
        added.append(Profile(instrument="test", unit="s", calls=100, stacks={**p.stacks, "run;features;new_op": 150.0}))
    e = explain("s", "m", base, added)
    assert not e.moved  # this draw's totals spread too much to call the stage moved ...
    assert "new_op" in {c.name for c in e.named}, e.contributors  # ... and the added operator is named all the same


def test_a_sampled_function_seen_on_one_side_only_is_not_named_for_that_alone():
    """With a sampling profiler a thin function's presence is chance: 400 A/A draws, a function of 0.3 % of
    the stage present in about half the profiles, never named."""
    rng = np.random.default_rng(4)
    named = 0
    for _ in range(400):
        sides = []
        for _side in range(2):
            side = []
            for _ in range(3):
                p = profile(rng, COSTS, spread=0.05)
                stacks = dict(p.stacks)
                if rng.random() < 0.5:
                    stacks["run;thin"] = 0.02 * 100
                side.append(Profile(instrument="s", unit="s", calls=100, stacks=stacks, resolution=0.0001))
            sides.append(side)
        named += "thin" in {c.name for c in explain("s", "m", *sides).named}
    assert named <= 4


def _scaled(costs: dict[str, float], factor: float, calls: int = 100) -> Profile:
    return Profile(instrument="t", unit="s", calls=calls, stacks={k: v * factor * calls for k, v in costs.items()})


def test_the_stage_s_timed_calls_say_which_way_it_moved_where_the_profiles_cannot():
    """The current side's processes happened to pay less of the profiler's own cost (every function x0.7), so
    their profiled total fell though rsi doubled; the calls timed without a profiler say +30 %."""
    slower = {**COSTS, "run;features;rsi": 4.0}
    base = [_scaled(COSTS, 1.0), _scaled(COSTS, 1.01)]
    cur = [_scaled(slower, 0.70), _scaled(slower, 0.71)]
    alone = explain("s", "m", base, cur)
    # alone, the profiles call the stage faster and name what shrank in its part: a wrong answer
    assert alone.change < 0 and "rsi" not in {c.name for c in alone.named} and alone.timed_change is None
    timed = explain("s", "m", base, cur, timed=([1.0e-3, 1.01e-3], [1.30e-3, 1.31e-3]))
    assert timed.moved and timed.timed_change == pytest.approx(0.30, abs=0.01)
    assert [c.name for c in timed.named] == ["rsi"]
    # its share is of the timed change in the profile's units: (2.8 - 2.0) / (6.7 x 0.30), per call
    assert timed.named[0].share == pytest.approx((4.0 * 0.705 - 2.0 * 1.005) / (6.7 * 1.005 * 0.30), rel=0.03)


def test_timed_calls_that_did_not_move_name_nothing_a_sampler_saw():
    """The profiles say rsi's part grew, but the stage's calls timed alike on both sides: no change to share."""
    slower = {**COSTS, "run;features;rsi": 4.0}
    sampled = [
        Profile(instrument="s", unit="s", calls=100, stacks=p.stacks, resolution=1e-6)
        for p in (_scaled(COSTS, 1.0), _scaled(COSTS, 1.01), _scaled(slower, 1.0), _scaled(slower, 1.01))
    ]
    assert [c.name for c in explain("s", "m", sampled[:2], sampled[2:]).named] == ["rsi"]
    same = explain("s", "m", sampled[:2], sampled[2:], timed=([1.0e-3, 1.01e-3], [1.0e-3, 1.01e-3]))
    assert not same.moved and not same.named


def test_timed_calls_must_be_positive_on_both_sides():
    with pytest.raises(ValueError, match="timed"):
        explain("s", "m", [_scaled(COSTS, 1.0)], [_scaled(COSTS, 1.0)], timed=([], [1.0]))


# DQN's training step under torch.profiler, µs of each operator's own time per step (measured: benchmarks/explain.py)
STEP = {
    "step;aten::addmm": 283.0,
    "step;aten::mm": 138.0,
    "step;Optimizer.step#AdamW.step": 93.0,
    "step;aten::clamp_min": 30.0,
    "step;aten::copy_": 28.0,
    "step;aten::sqrt": 23.0,
    "step;aten::div": 17.0,
    "step;Optimizer.zero_grad#AdamW.zero_grad": 15.0,
    "step;aten::t": 14.0,
    "step;aten::_to_copy": 13.0,
    "step;aten::add_": 13.0,
    "step;aten::mul_": 12.0,
    "step;aten::linalg_vector_norm": 12.0,
    "step;aten::lerp_": 10.0,
    "step;aten::as_strided": 9.0,
    "step;aten::threshold_backward": 8.0,
    "step;aten::empty": 7.0,
    "step;aten::view": 6.0,
}
# what torch.profiler charged the smallest operators in its costliest processes: several times their cost,
# while the same processes' bare calls timed like the others' (benchmarks/explain_results.txt)
INFLATED = {"step;aten::clamp_min": 6.0, "step;aten::copy_": 3.5, "step;aten::sqrt": 3.0, "step;aten::div": 4.0}
# DQN's second layer twice as wide, as measured: addmm +42 %, mm +57 %, clamp_min +20 %; the step +23 % bare
WIDER = {"step;aten::addmm": 1.42, "step;aten::mm": 1.57, "step;aten::clamp_min": 1.2}


def torch_profile(rng: np.random.Generator, factors: dict[str, float], inflated: bool, calls: int = 700) -> Profile:
    process = math.exp(rng.normal(0, 0.03))
    stacks = {}
    for k, v in STEP.items():
        cost = v * factors.get(k, 1.0) * (INFLATED.get(k, 1.0) if inflated else 1.0)
        stacks[k] = cost * process * (1 + 0.02 * rng.standard_normal()) * calls * 1e-6
    return Profile(instrument="torch.profiler", unit="s", calls=calls, stacks=stacks)


def _torch_sides(rng: np.random.Generator, factors: dict[str, float]) -> tuple[list[Profile], list[Profile]]:
    """Three processes a side; in each side a process or two that the profiler charged the most."""
    sides = []
    for factor in ({}, factors):
        inflated = rng.permutation([True, rng.random() < 0.5, False])
        sides.append([torch_profile(rng, factor, bool(i)) for i in inflated])
    return sides[0], sides[1]


def test_a_wider_layer_is_named_though_the_profiler_inflates_small_operators_in_some_processes():
    """Over each profile's total, the inflated operators shrink every other part with them, and a wider layer's
    addmm stayed under the spread they made (0 of 8 in the benchmark); over the median of ratios it is named."""
    rng = np.random.default_rng(11)
    first = 0
    for _ in range(20):
        base, wider = _torch_sides(rng, WIDER)
        timed = ([1.05e-3 * (1 + 0.01 * rng.standard_normal()) for _ in range(3)], [1.29e-3] * 3)
        e = explain("training_step", "t_ms", base, wider, timed=timed)
        first += [c.name for c in e.named][:1] == ["aten::addmm"]
        assert not {c.name for c in e.named} - {"aten::addmm", "aten::mm"}, e.named
    assert first >= 19


def test_small_operators_inflated_in_some_processes_name_nothing_on_identical_code():
    rng = np.random.default_rng(12)
    named = 0
    for _ in range(200):
        base, same = _torch_sides(rng, {})
        timed = tuple([1.05e-3 * (1 + 0.02 * rng.standard_normal()) for _ in range(3)] for _side in range(2))
        named += bool(explain("training_step", "t_ms", base, same, timed=timed).named)
    assert named <= 2


def test_functions_seen_in_a_few_samples_do_not_set_a_process_s_scale():
    """pyinstrument on a user stage (measured): three functions hold the time, four more are seen in a few of
    the 0.1 ms samples of every profile. Their ratios are chance, so the scale is the profile's total; had they
    set the median, busy_helper +50 % went unnamed (a real check's profiles)."""
    cost = {"busy_helper": 1180.0, "steady_part": 930.0, "correlate": 245.0, "ndarray.sort": 5.0}
    cost |= {"once": 0.5, "convolve": 0.5, "ones": 0.4}
    rng = np.random.default_rng(13)
    first = 0
    for _ in range(20):
        sides = []
        for factor in (1.0, 1.5):
            side = []
            for _ in range(3):
                calls, resolution = 600, 1e-4
                samples = {
                    k: max(rng.poisson(v * (factor if k == "busy_helper" else 1.0) * 1e-6 * calls / resolution), 1)
                    for k, v in cost.items()
                }
                stacks = {f"user;{k}": n * resolution for k, n in samples.items()}
                side.append(
                    Profile(instrument="pyinstrument", unit="s", calls=calls, stacks=stacks, resolution=resolution)
                )
            sides.append(side)
        e = explain("user", "u_ms", *sides, timed=([2.4e-3] * 3, [3.0e-3] * 3))
        first += [c.name for c in e.named][:1] == ["busy_helper"]
    assert first == 20


def test_an_added_operator_the_profiler_inflates_in_one_process_is_named_where_the_stage_moved():
    """A real check's profiles (DQN + layer_norm): aten::native_layer_norm took 121, 54 and 78 µs a step in the
    three current processes (here 130, 45, 70), aten::clamp_min inflated in the first; too spread for FLOOR_Z, but only
    the code puts it there, and the step's timed calls moved +13 %."""
    rng = np.random.default_rng(14)
    base = [torch_profile(rng, {}, inflated) for inflated in (False, False, False)]
    current = []
    for inflated, layer_norm in ((True, 130.0), (False, 45.0), (False, 70.0)):
        p = torch_profile(rng, {}, inflated)
        stacks = {**p.stacks, "step;aten::layer_norm;aten::native_layer_norm": layer_norm * 1e-6 * p.calls}
        current.append(Profile(instrument=p.instrument, unit="s", calls=p.calls, stacks=stacks))
    timed = ([1.04e-3, 1.06e-3, 1.03e-3], [1.21e-3, 1.12e-3, 1.18e-3])
    e = explain("training_step", "t_ms", base, current, timed=timed)
    row = next(c for c in e.contributors if c.name == "aten::native_layer_norm")
    assert row.z < FLOOR_Z  # its own spread is too wide for the floor ...
    assert [c.name for c in e.named][:1] == ["aten::native_layer_norm"]  # ... and it is named all the same
    # where the stage's calls did not move, the z is still asked of it
    still = explain("training_step", "t_ms", base, current, timed=(timed[0], timed[0]))
    assert "aten::native_layer_norm" not in {c.name for c in still.named}


def test_where_the_profiler_s_cost_per_operator_differs_between_processes_the_parts_are_taken_as_profiled():
    """In each process the profiler made every small operator dearer by a factor of its own (drawn, 10 % spread)
    and left addmm and mm as they were: the median of ratios follows the small operators and spreads addmm's
    part by that much, while the costs as profiled agree. Taken as profiled, a wider layer is named every time."""
    rng = np.random.default_rng(15)
    big = ("step;aten::addmm", "step;aten::mm")

    def process(factors: dict[str, float]) -> Profile:
        overhead = math.exp(rng.normal(0, 0.10))
        stacks = {
            k: v * factors.get(k, 1.0) * (1.0 if k in big else overhead) * (1 + 0.01 * rng.standard_normal()) * 7e-4
            for k, v in STEP.items()
        }
        return Profile(instrument="torch.profiler", unit="s", calls=700, stacks=stacks)

    named = 0
    for _ in range(20):
        base, wider = [process({}) for _ in range(3)], [process(WIDER) for _ in range(3)]
        e = explain("training_step", "t_ms", base, wider, timed=([1.05e-3] * 3, [1.29e-3] * 3))
        named += [c.name for c in e.named][:1] == ["aten::addmm"]
    assert named == 20

"""The bytecode counter: exact, deterministic counts along real call paths."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import pytest

from perfgate.core.profiles import SEPARATOR, explain
from perfgate.profile import profile_stage
from perfgate.profile.bytecodes import profile_bytecodes


def loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def helper(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def other() -> int:
    return loop(50)


def stage(factor: int) -> None:
    other()
    helper(100 * factor)


def _counts(call, calls: int = 3):
    profile, notes = profile_stage(call, instrument="bytecodes", seconds=10.0, min_calls=calls)
    assert notes and profile.unit == "bytecodes" and profile.resolution == 0
    assert profile.instrument == "bytecodes (sys.settrace)"
    return profile


def test_equal_runs_give_identical_stacks_and_exactly_min_calls_calls():
    seen = []

    def counted() -> None:
        seen.append(1)
        stage(1)

    a, b = _counts(counted), _counts(counted)
    assert a.calls == b.calls == 3
    assert len(seen) == 2 * (1 + 3)  # one warm-up call, then exactly min_calls counted calls, twice
    assert dict(a.stacks) == dict(b.stacks)
    assert {stack.split(SEPARATOR, 1)[1] for stack in a.stacks if SEPARATOR in stack} == {
        "stage",
        f"stage{SEPARATOR}other",
        f"stage{SEPARATOR}other{SEPARATOR}loop",
        f"stage{SEPARATOR}helper",
    }


def test_a_loop_s_count_grows_by_the_same_number_of_bytecodes_per_iteration():
    own = {n: _counts(functools.partial(loop, n)).own()["loop"] for n in (100, 200, 300, 1000)}
    step = own[200] - own[100]
    assert step > 0 and step == own[300] - own[200]
    assert own[1000] - own[100] == 9 * step
    assert step % 100 == 0  # a whole number of bytecodes per iteration


def test_explain_names_the_helper_that_does_twice_the_loop():
    baseline = [_counts(functools.partial(stage, 1)) for _ in range(2)]
    current = [_counts(functools.partial(stage, 2)) for _ in range(2)]
    result = explain("stage", "bytecodes", baseline, current)
    assert result.named and result.named[0].name == "helper"
    assert result.contributors[0].name == "helper"
    assert result.named[0].where.endswith(f"test_bytecodes.py:{helper.__code__.co_firstlineno}")
    assert result.contributors[0].own_current == pytest.approx(2 * result.contributors[0].own_baseline, rel=0.02)


def test_identical_code_twice_names_nothing():
    baseline = [_counts(functools.partial(stage, 1)) for _ in range(2)]
    current = [_counts(functools.partial(stage, 1)) for _ in range(2)]
    result = explain("stage", "bytecodes", baseline, current)
    assert result.change == 0
    assert result.named == ()


def _raises() -> None:
    raise ValueError("expected")


def _numbers():
    yield from range(3)


def _consume() -> int:
    return sum(_numbers())


def tangled() -> None:
    try:
        _raises()
    except ValueError:
        pass
    _consume()
    sorted([3, 1, 2], key=lambda v: -v)


def test_exceptions_generators_and_callbacks_from_c_keep_the_paths_real():
    profile = _counts(tangled)
    stacks = set(profile.stacks)
    assert f"tangled{SEPARATOR}_raises" in stacks
    assert f"tangled{SEPARATOR}_consume{SEPARATOR}_numbers" in stacks
    assert f"tangled{SEPARATOR}tangled.<locals>.<lambda>" in stacks  # called by sorted, a C function
    assert "tangled" in stacks


def test_two_functions_of_one_name_are_told_apart_by_their_place(tmp_path: Path):
    source = tmp_path / "elsewhere.py"
    source.write_text("def loop(n):\n    return sum(range(n))\n")
    spec = importlib.util.spec_from_file_location("elsewhere_for_profile_test", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def both() -> None:
        loop(10)
        module.loop(10)

    profile = _counts(both)
    leaves = {stack.rsplit(SEPARATOR, 1)[-1] for stack in profile.stacks}
    ours = {leaf for leaf in leaves if leaf.endswith(f"test_bytecodes.py:{loop.__code__.co_firstlineno})")}
    assert len(ours) == 1 and next(iter(ours)).startswith("loop (")
    assert "loop (elsewhere.py:1)" in leaves
    assert profile.where["loop (elsewhere.py:1)"] == "elsewhere.py:1"


def test_the_previous_trace_function_is_restored():
    previous = sys.gettrace()

    def tracer(frame, event, arg):
        return None

    sys.settrace(tracer)
    try:
        profile_bytecodes(functools.partial(loop, 10), calls=2)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(previous)

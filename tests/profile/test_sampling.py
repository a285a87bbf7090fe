"""The sampling profiler (pyinstrument): rankings and names, never a time value."""

from __future__ import annotations

import numpy as np

from perfgate.core.profiles import SEPARATOR
from perfgate.profile import profile_stage

SECONDS = 0.3


def slow_helper() -> int:
    total = 0
    for i in range(60_000):
        total += i * i
    return total


def cheap_helper() -> int:
    return sum(range(50))


def pure_python_stage() -> None:
    cheap_helper()
    slow_helper()
    cheap_helper()


_MATRIX = np.random.default_rng(0).random((250, 250))


def numpy_helper() -> float:
    return float((_MATRIX @ _MATRIX).sum())


def small_python() -> int:
    return sum(i for i in range(200))


def numpy_stage() -> None:
    small_python()
    numpy_helper()


def _top(own: dict[str, float]) -> str:
    return max(own, key=lambda name: own[name])


def test_the_slow_pure_python_helper_has_the_largest_own_cost():
    profile, notes = profile_stage(pure_python_stage, instrument="sampling", seconds=SECONDS)
    own = profile.own()
    assert _top(own) == "slow_helper"
    assert own["slow_helper"] > 5 * own.get("cheap_helper", 0.0)
    assert profile.instrument.startswith("pyinstrument ") and profile.unit == "s"
    assert profile.resolution > 0 and profile.calls >= 3
    assert profile.where["slow_helper"].endswith(f"test_sampling.py:{slow_helper.__code__.co_firstlineno}")
    assert notes and all("\n" not in note for note in notes)


def test_the_stage_is_the_root_of_every_stack_and_the_profiling_loop_is_gone():
    profile, _ = profile_stage(pure_python_stage, instrument="sampling", seconds=SECONDS)
    roots = {stack.split(SEPARATOR)[0] for stack in profile.stacks}
    assert roots == {"pure_python_stage"}
    frames = {frame for stack in profile.stacks for frame in stack.split(SEPARATOR)}
    assert not any("_drive" in frame or "perf_counter" in frame or "profile_stage" in frame for frame in frames)
    assert f"pure_python_stage{SEPARATOR}slow_helper" in profile.stacks


def test_a_numpy_heavy_helper_is_where_the_time_goes():
    """numpy's matrix product has no Python frame: it is charged to the helper (or a numpy frame under it)."""
    profile, _ = profile_stage(numpy_stage, instrument="sampling", seconds=SECONDS)
    costliest = max(profile.stacks, key=lambda stack: profile.stacks[stack])
    assert "numpy_helper" in costliest.split(SEPARATOR)
    inclusive = profile.inclusive()
    assert inclusive["numpy_helper"] > 3 * inclusive.get("small_python", 0.0)


class Worker:
    def step(self) -> int:
        return slow_helper()


def method_stage() -> None:
    Worker().step()


def test_a_method_is_named_after_the_class_that_defines_it():
    profile, _ = profile_stage(method_stage, instrument="sampling", seconds=SECONDS)
    assert f"method_stage{SEPARATOR}Worker.step{SEPARATOR}slow_helper" in profile.stacks

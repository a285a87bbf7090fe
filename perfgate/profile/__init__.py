"""Profilers: where a stage's time (or count) goes, as a :class:`perfgate.core.profiles.Profile`.

:func:`profile_stage` runs one stage's calls under one instrument and returns its folded
stacks, with the notes of what that instrument cannot see (one line each). The instruments:

* ``"sampling"`` (:mod:`perfgate.profile.sampling`): pyinstrument's statistical profiler,
  Python functions (and the built-in functions it catches) by wall time;
* ``"torch"`` (:mod:`perfgate.profile.torchops`): torch.profiler's operator tree, aten
  operators by CPU time (and, on CUDA, by device time);
* ``"bytecodes"`` (:mod:`perfgate.profile.bytecodes`): the bytecodes each Python function
  executes, exact and deterministic, for counts mode;
* ``"auto"``: ``"torch"`` when torch is already imported and its operators took at least
  :data:`TORCH_SHARE` of one call's wall time, ``"sampling"`` otherwise.

:mod:`perfgate.profile.callgrind_functions` reads a callgrind output file into a profile of
C functions (what ``--measure counts`` records under valgrind); it is not an instrument that
runs calls.

The profilers are optional dependencies (``pip install 'perfgate[profile]'``); one that is not
installed raises :class:`ProfilerMissing`. Nothing here is imported by ``import perfgate``, and
importing this package imports neither pyinstrument nor torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from perfgate.core.profiles import Profile
from perfgate.profile._missing import ProfilerMissing

__all__ = ["INSTRUMENTS", "ProfilerMissing", "profile_stage"]

INSTRUMENTS = ("sampling", "torch", "bytecodes", "auto")
# "auto" picks torch when aten operators took at least this share of one call's wall time. DQN's
# eager training step measures 0.4-0.8 from call to call on a busy machine: at 0.5 it was profiled
# with the sampler in 1 of 3 checks (benchmarks/explain.py), where its added layer_norm shows only
# as the Python call that made it
TORCH_SHARE = 0.3


def profile_stage(
    call: Callable[[], Any],
    *,
    instrument: str,
    seconds: float,
    min_calls: int = 3,
    device: str = "cpu",
    warmup: int = 1,
) -> tuple[Profile, tuple[str, ...]]:
    """One stage's calls under ``instrument``: its profile and the notes of what it could not see.

    ``call`` is one call of the stage. After ``warmup`` calls that are not profiled (a first
    call's imports and caches are not the stage's steady cost), it is called until ``seconds``
    have passed and at least ``min_calls`` times (``"bytecodes"``: exactly ``min_calls``
    times; counts need no seconds). Nothing else runs while the profiler records.

    Raises:
        ValueError: an unknown instrument, or ``min_calls`` below 1.
        ProfilerMissing: the instrument's profiler (pyinstrument, torch) is not installed.
    """
    if instrument not in INSTRUMENTS:
        raise ValueError(f"unknown profiling instrument {instrument!r}; expected one of {', '.join(INSTRUMENTS)}")
    if min_calls < 1:
        raise ValueError(f"min_calls must be at least 1, got {min_calls}")
    for _ in range(warmup):
        call()
    if instrument == "auto":
        torch_loaded = sys.modules.get("torch") is not None  # imported by the stage, not by us
        instrument = "torch" if torch_loaded and _operators_dominate(call, device) else "sampling"
    if instrument == "sampling":
        from perfgate.profile import sampling

        return sampling.profile_sampling(call, seconds=seconds, min_calls=min_calls), sampling.NOTES
    if instrument == "torch":
        from perfgate.profile import torchops

        profiles = torchops.profile_torch(call, seconds=seconds, min_calls=min_calls, device=device)
        return profiles[0], torchops.torch_notes(device)
    from perfgate.profile import bytecodes

    return bytecodes.profile_bytecodes(call, calls=min_calls), bytecodes.NOTES


def _operators_dominate(call: Callable[[], Any], device: str) -> bool:
    """Whether aten operators took at least :data:`TORCH_SHARE` of one call's wall time under torch.profiler."""
    from perfgate.profile import torchops

    return torchops.operator_share(call, device=device) >= TORCH_SHARE

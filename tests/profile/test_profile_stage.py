"""profile_stage: the instruments' public face, its choices and its errors."""

from __future__ import annotations

import sys

import pytest

from perfgate.errors import PerfgateError
from perfgate.profile import ProfilerMissing, profile_stage


def stage() -> int:
    return sum(i * i for i in range(2000))


def test_a_missing_pyinstrument_is_one_line_naming_the_package_and_the_remedy(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyinstrument", None)
    with pytest.raises(ProfilerMissing) as raised:
        profile_stage(stage, instrument="sampling", seconds=0.01)
    assert str(raised.value) == "pyinstrument is not installed: pip install 'perfgate[profile]'"
    assert isinstance(raised.value, PerfgateError)


def test_a_missing_torch_is_named_too(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ProfilerMissing) as raised:
        profile_stage(stage, instrument="torch", seconds=0.01)
    message = str(raised.value)
    assert message.startswith("torch is not installed: pip install torch") and "\n" not in message


def test_auto_without_torch_imported_samples(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if the stage never imported torch
    profile, notes = profile_stage(stage, instrument="auto", seconds=0.05)
    assert profile.instrument.startswith("pyinstrument ")
    assert notes and all(note.startswith("sampling:") for note in notes)


def test_sampling_runs_until_the_seconds_and_at_least_min_calls():
    calls = []

    def counted() -> None:
        calls.append(1)

    profile, _ = profile_stage(counted, instrument="sampling", seconds=0.0, min_calls=5, warmup=2)
    assert profile.calls == 5 and len(calls) == 7


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"instrument": "perf", "seconds": 1.0}, "unknown profiling instrument 'perf'"),
        ({"instrument": "sampling", "seconds": 1.0, "min_calls": 0}, "min_calls must be at least 1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        profile_stage(stage, **kwargs)


def test_importing_the_profilers_loads_neither_torch_nor_pyinstrument():
    import subprocess

    code = (
        "import sys, perfgate.profile, perfgate.profile.sampling, perfgate.profile.torchops, "
        "perfgate.profile.bytecodes, perfgate.profile.callgrind_functions; "
        "print('torch' in sys.modules, 'pyinstrument' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]

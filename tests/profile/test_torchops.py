"""torch.profiler's operator tree: the added operator is named, on the CPU; the CUDA path on fakes (and a GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from perfgate.core.profiles import SEPARATOR, explain
from perfgate.profile import profile_stage, torchops

torch = pytest.importorskip("torch")

SECONDS = 0.25


@pytest.fixture(scope="module")
def model():
    # one thread: with a thread per core on a busy machine, one operator can wait a scheduler slice for its pool
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128))
    x = torch.randn(64, 128)
    big = torch.randn(512, 512)

    def without() -> None:
        with torch.no_grad():
            net(x)

    def with_cumsum() -> None:
        with torch.no_grad():
            net(x)
            torch.cumsum(big, 0)  # the added operator: several times the model's own cost

    yield without, with_cumsum
    torch.set_num_threads(threads)


def _frames(profile) -> set[str]:
    return {frame for stack in profile.stacks for frame in stack.split(SEPARATOR)}


def test_the_operator_tree_has_top_level_operators_as_roots(model):
    without, _ = model
    profile, notes = profile_stage(without, instrument="torch", seconds=SECONDS)
    assert profile.instrument == f"torch.profiler {torch.__version__}" and profile.unit == "s"
    assert profile.resolution == 0 and profile.calls >= 3
    roots = {stack.split(SEPARATOR)[0] for stack in profile.stacks}
    assert "aten::linear" in roots
    assert any(stack.startswith(f"aten::linear{SEPARATOR}") for stack in profile.stacks)  # its children below it
    assert notes == torchops.NOTES


def test_the_added_operator_appears_and_is_named_first(model):
    without, with_cumsum = model
    baseline, current = [], []
    for _ in range(2):  # interleaved, so that a change in the machine's load falls on both sides
        baseline.append(profile_stage(without, instrument="torch", seconds=SECONDS)[0])
        current.append(profile_stage(with_cumsum, instrument="torch", seconds=SECONDS)[0])
    assert "aten::cumsum" in _frames(current[0]) and "aten::cumsum" in _frames(current[1])
    assert "aten::cumsum" not in _frames(baseline[0]) | _frames(baseline[1])
    result = explain("forward", "time", baseline, current)
    top = result.contributors[0]
    assert top.name == "aten::cumsum" and top.named, result.contributors


def test_auto_picks_torch_for_an_operator_heavy_call():
    a = torch.randn(384, 384)

    def heavy() -> None:
        torch.mm(a, a)

    profile, _ = profile_stage(heavy, instrument="auto", seconds=0.1)
    assert profile.instrument.startswith("torch.profiler")
    assert "aten::mm" in profile.own()


def test_auto_picks_sampling_when_the_call_is_python():
    def python() -> int:
        return sum(i * i for i in range(20_000))

    profile, notes = profile_stage(python, instrument="auto", seconds=0.1)
    assert profile.instrument.startswith("pyinstrument")
    assert any(note.startswith("sampling:") for note in notes)


# --- the CUDA path, on fake events (torch here is a CPU build) ---------------------------------------------


def _event(name, parent=None, *, cpu=0.0, device=0.0, kind="CPU", legacy_cuda_only=False):
    event = SimpleNamespace(name=name, cpu_parent=parent, device_type=SimpleNamespace(name=kind))
    event.self_cpu_time_total = cpu
    if legacy_cuda_only:
        event.self_cuda_time_total = device
    else:
        event.self_device_time_total = device
    return event


def test_device_time_is_folded_by_operator_and_kernels_are_not_counted_twice():
    linear = _event("aten::linear", cpu=5.0, device=0.0)
    addmm = _event("aten::addmm", linear, cpu=20.0, device=300.0)
    relu = _event("aten::relu", cpu=4.0, device=40.0)
    kernel = _event("ampere_sgemm_128x64", kind="CUDA", device=300.0)  # already addmm's device time
    events = [linear, addmm, relu, kernel]
    cpu = torchops.fold_events(events, torchops._self_cpu_us)
    device = torchops.fold_events(events, torchops._self_device_us)
    assert cpu == pytest.approx(
        {"aten::linear": 5e-6, f"aten::linear{SEPARATOR}aten::addmm": 20e-6, "aten::relu": 4e-6}
    )
    assert device == pytest.approx({f"aten::linear{SEPARATOR}aten::addmm": 300e-6, "aten::relu": 40e-6})


def test_an_older_torch_s_self_cuda_time_total_is_read_when_there_is_no_device_time():
    old = _event("aten::mm", device=12.0, legacy_cuda_only=True)
    assert torchops.fold_events([old], torchops._self_device_us) == pytest.approx({"aten::mm": 12e-6})


def test_with_cuda_there_is_a_second_profile_of_device_time(monkeypatch, model):
    """The CUDA branch's plumbing on a CPU build: CUDA said available, its activity and sync left out."""
    without, _ = model
    synced = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append(1))
    monkeypatch.setattr(torchops, "_activities", lambda torch, device: [torch.profiler.ProfilerActivity.CPU])
    profiles = torchops.profile_torch(without, seconds=0.05, min_calls=3, device="cuda:0")
    assert [p.unit for p in profiles] == ["s", torchops.UNIT_CUDA]
    assert profiles[0].calls == profiles[1].calls >= 3 and synced == [1]
    assert torchops.NOTE_CUDA in torchops.torch_notes("cuda")


def test_cuda_asked_for_without_cuda_profiles_the_cpu_and_says_so(monkeypatch, model):
    without, _ = model
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    profile, notes = profile_stage(without, instrument="torch", seconds=0.05, device="cuda")
    assert profile.unit == "s"
    assert torchops.NOTE_NO_CUDA in notes


@pytest.mark.hardware
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_device_profile_names_the_matrix_product():
    a = torch.randn(2048, 2048, device="cuda")

    def heavy() -> None:
        torch.mm(a, a)

    heavy()
    cpu, device = torchops.profile_torch(heavy, seconds=0.2, min_calls=3, device="cuda")
    assert device.unit == torchops.UNIT_CUDA
    own = device.own()
    assert max(own, key=lambda name: own[name]) == "aten::mm"
    assert "aten::mm" in cpu.own()

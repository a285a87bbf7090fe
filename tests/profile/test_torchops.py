"""torch.profiler's operator tree: the added operator is named, on the CPU; the CUDA path on fakes (and a GPU)."""

from __future__ import annotations

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


def _tables_fold(events) -> dict[str, float]:
    """The same folding done on torch's own tables (``prof.events()``), as the profile once was."""
    stacks: dict[str, float] = {}
    for event in events:
        if str(event.device_type).endswith("CPU") and event.self_cpu_time_total > 0:
            names, parent = [], event
            while parent is not None:
                names.append(parent.name)
                parent = parent.cpu_parent
            key = SEPARATOR.join(reversed(names))
            stacks[key] = stacks.get(key, 0.0) + event.self_cpu_time_total * 1e-6
    return stacks


def test_the_collector_s_events_fold_as_torch_s_own_tables_do(model):
    """The profile reads the collector's raw events (torch's tables cost 8x the profiled time to
    build); the operator tree and every operator's own time are those of torch's tables."""
    without, _ = model
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            without()
    cpu, device = torchops.fold_raw(torchops.raw_events(prof))
    tables = _tables_fold(prof.events())
    assert cpu.keys() == tables.keys() and device == {}
    for key, seconds in tables.items():
        assert cpu[key] == pytest.approx(seconds, rel=1e-6, abs=2e-9), key  # torch's tables round to 1 ns in us


# --- the CUDA path, on fake events (torch here is a CPU build) ---------------------------------------------


def _raw(name, start, duration, *, thread=1, cpu=True, correlation=0, linked=0):
    """A collector event with times in microseconds."""
    return torchops.RawEvent(name, start * 1000, duration * 1000, thread, cpu, True, correlation, linked)


def test_device_time_is_folded_by_the_operator_that_launched_it_and_kernels_are_not_counted_twice():
    events = [
        _raw("aten::linear", 0, 100, correlation=1),
        _raw("aten::addmm", 10, 80, correlation=2),
        _raw("cudaLaunchKernel", 20, 5, thread=7, correlation=90, linked=2),  # the runtime, on its own thread id
        _raw("ampere_sgemm_128x64", 30, 300, thread=0, cpu=False, correlation=91, linked=2),
        _raw("aten::relu", 200, 10, correlation=3),
        _raw("vectorized_elementwise_kernel", 205, 40, thread=0, cpu=False, correlation=92, linked=3),
    ]
    cpu, device = torchops.fold_raw(events)
    addmm = f"aten::linear{SEPARATOR}aten::addmm"
    assert cpu == pytest.approx(
        {"aten::linear": 20e-6, addmm: 75e-6, f"{addmm}{SEPARATOR}cudaLaunchKernel": 5e-6, "aten::relu": 10e-6}
    )
    assert device == pytest.approx({addmm: 300e-6, "aten::relu": 40e-6})


def test_an_event_that_ends_after_its_neighbour_is_not_its_child():
    events = [_raw("aten::a", 0, 50), _raw("aten::b", 40, 50), _raw("aten::c", 60, 10)]
    cpu, _ = torchops.fold_raw(events)
    assert cpu == pytest.approx({"aten::a": 50e-6, "aten::b": 40e-6, f"aten::b{SEPARATOR}aten::c": 10e-6})


def test_with_cuda_there_is_a_second_profile_of_device_time(monkeypatch, model):
    """The CUDA branch's plumbing on a CPU build: CUDA said available, its activity and sync left out."""
    without, _ = model
    synced = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append(1))
    monkeypatch.setattr(torchops, "_activities", lambda torch, device: [torch.profiler.ProfilerActivity.CPU])
    profiles = torchops.profile_torch(without, seconds=0.05, min_calls=3, device="cuda:0")
    assert [p.unit for p in profiles] == ["s", torchops.UNIT_CUDA]
    assert profiles[0].calls == profiles[1].calls >= 3 and synced == [1, 1]  # the uncounted first call, the last
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

"""Run files: both formats read, the current one written deterministically, old files kept readable."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from perfgate.core.codec import UPGRADES, dumps, parse_timestamp, run_from_dict, run_to_dict
from perfgate.core.metrics import Direction
from perfgate.core.schema import SCHEMA_VERSION
from perfgate.errors import InputError, OutputError, SchemaVersionError
from perfgate.runfile import load_run, save_run
from tests.conftest import SCHEMA_PATH, validate_run_file

DATA = Path(__file__).parents[1] / "data" / "runs"


def test_version_1_fixture_is_read_forever():
    run = load_run(DATA / "v1_dqn.json")
    assert run.model == "dqn" and run.run_id == "0f8c4e2a"
    assert run.metrics["throughput_samples_per_sec"].direction is Direction.HIGHER
    assert run.metrics["training_step_time_ms"].samples == (101.2, 99.8)
    assert run.machine.fingerprint == "0123456789abcdef" and run.machine.details["cores"] == 2
    assert run.git.dirty is False


def test_flat_fixture_one_sample_per_metric():
    run = load_run(DATA / "seed_flat_dqn.json")
    assert run.single_sample_format
    assert run.model_key == "dqn"
    assert len(run.metrics) == 6
    assert all(len(m.samples) == 1 for m in run.metrics.values())
    assert run.created_at == "2025-10-15T10:00:00.123456Z"  # chrono's nanoseconds cut to microseconds
    assert run.git.commit == "abc123"


def test_round_trip_is_identical_and_deterministic(tmp_path):
    run = load_run(DATA / "v1_dqn.json")
    out = tmp_path / "out.json"
    save_run(out, run)
    validate_run_file(out)
    again = load_run(out)
    assert again == run
    assert dumps(again) == dumps(run) == out.read_text()
    # a version-1 file comes back as version 5: version 2 only added optional fields, version 3 moved
    # the software versions out of the machine (a fingerprint not computed by perfgate stays as it was),
    # version 4 says what the metrics are (times), version 5 only adds the bounded form's sizes
    old = json.loads((DATA / "v1_dqn.json").read_text())
    machine = {k: v for k, v in old["machine"].items() if k not in ("python", "torch")}
    software = {"python": "3.11.7", "torch": "2.13.0"}
    expected = {**old, "schema_version": 5, "measure": "times", "machine": machine, "software": software}
    assert json.loads(out.read_text()) == expected


def test_flat_file_written_in_current_format_validates(tmp_path):
    out = tmp_path / "upgraded.json"
    save_run(out, load_run(DATA / "seed_flat_dqn.json"))
    doc = validate_run_file(out)
    assert doc["schema_version"] == SCHEMA_VERSION


def test_schema_rejects_what_the_reader_rejects():
    schema = json.loads(SCHEMA_PATH.read_text())
    bad = {"schema_version": 1, "model": "dqn", "metrics": {"x": {"samples": [-1.0]}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    with pytest.raises(InputError):
        run_from_dict(bad)


def test_newer_version_refused():
    with pytest.raises(SchemaVersionError, match="newer"):
        run_from_dict({"schema_version": SCHEMA_VERSION + 1, "model": "dqn", "metrics": {}}, source="f.json")


def test_upgrade_chain_is_applied(monkeypatch):
    """An older document walks every upgrade step (exercised with a fake version-0 step)."""
    import perfgate.core.codec as codec

    monkeypatch.setattr(codec, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(UPGRADES, 2, lambda d: d)  # version 3 is the newest here: the 3 -> 4 step is not walked
    monkeypatch.setitem(UPGRADES, 1, lambda d: {**d, "suite": "upgraded"})
    doc = {"schema_version": 1, "model": "dqn", "metrics": {"training_step_time_ms": {"samples": [1.0]}}}
    assert codec._upgrade(dict(doc), source=None)["suite"] == "upgraded"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-10-15T10:00:00Z", "2025-10-15T10:00:00Z"),
        ("2025-10-15T12:00:00+02:00", "2025-10-15T10:00:00Z"),
        ("2025-10-15T10:00:00", "2025-10-15T10:00:00Z"),
        ("2025-10-15 10:00:00.5Z", "2025-10-15T10:00:00.500000Z"),
    ],
)
def test_timestamps_normalised_to_utc(text, expected):
    assert parse_timestamp(text, source=None, field="t") == expected


def test_bad_timestamp_names_field():
    with pytest.raises(InputError, match="created_at"):
        run_from_dict(
            {
                "schema_version": 1,
                "model": "m",
                "created_at": "yesterday",
                "metrics": {"training_step_time_ms": {"samples": [1.0]}},
            }
        )


def test_custom_metric_with_unit_and_direction():
    run = run_from_dict(
        {
            "schema_version": 1,
            "model": "m",
            "metrics": {"tokens_per_sec": {"unit": "tokens/s", "direction": "higher_is_better", "samples": [1.0, 2.0]}},
        }
    )
    assert run.metrics["tokens_per_sec"].direction is Direction.HIGHER
    assert run_to_dict(run)["metrics"]["tokens_per_sec"]["unit"] == "tokens/s"


def test_atomic_save_leaves_no_partial_file(tmp_path, monkeypatch):
    run = load_run(DATA / "v1_dqn.json")
    target = tmp_path / "run.json"
    save_run(target, run)
    before = target.read_text()

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(Path, "replace", fail)
    with pytest.raises(OutputError, match="disk full"):  # an OSError becomes a one-line exit 2
        save_run(target, run)
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_version_2_round_trip_keeps_the_machine_speed_index(tmp_path):
    """References are read run-length encoded, held one per sample, and written back the same."""
    run = load_run(DATA / "v2_dqn.json")
    step = run.metrics["training_step_time_ms"]
    assert step.reference is not None and step.reference.kernel == "interpreter"
    assert step.reference.seconds == (0.00033, 0.00033, 0.00035, 0.00034, 0.00034, 0.00034)
    assert run.machine_index == {"compute": 0.00035, "interpreter": 0.00033, "memory": 0.0006}
    out = tmp_path / "out.json"
    save_run(out, run)
    validate_run_file(out)
    expected = {**json.loads((DATA / "v2_dqn.json").read_text()), "schema_version": 5, "measure": "times"}
    assert json.loads(out.read_text()) == expected


@pytest.mark.parametrize(
    ("reference", "field"),
    [
        ({"kernel": "gpu", "seconds": [1e-4], "counts": [6]}, "reference.kernel"),
        ({"kernel": "compute", "seconds": [1e-4], "counts": [5]}, "reference.counts"),
        ({"kernel": "compute", "seconds": [0.0], "counts": [6]}, "reference.seconds[0]"),
        ({"kernel": "compute", "seconds": [1e-4, 2e-4], "counts": [6]}, "reference.counts"),
    ],
)
def test_bad_reference_names_its_field(reference, field):
    doc = json.loads((DATA / "v2_dqn.json").read_text())
    doc["metrics"]["training_step_time_ms"]["reference"] = reference
    with pytest.raises(InputError, match="training_step_time_ms") as info:
        run_from_dict(doc, source="r.json")
    assert info.value.field == f"metrics.training_step_time_ms.{field}"


def test_version_3_round_trip_keeps_software_apart_from_the_machine(tmp_path):
    run = load_run(DATA / "v3_dqn.json")
    assert dict(run.software) == {
        "numpy": "2.1.0",
        "os": "Debian GNU/Linux 12 (bookworm)",
        "python": "3.11.7",
        "torch": "2.14.0+cpu",
    }
    assert "torch" not in run.machine.details
    out = tmp_path / "out.json"
    save_run(out, run)
    validate_run_file(out)
    expected = {**json.loads((DATA / "v3_dqn.json").read_text()), "schema_version": 5, "measure": "times"}
    assert json.loads(out.read_text()) == expected


def test_upgrade_recomputes_perfgates_own_fingerprint_from_the_hardware():
    """A version-2 fingerprint hashed Python and torch; the upgrade recomputes the ones perfgate wrote
    (recognised by their hash), so two files differing only in torch end on one machine."""
    from perfgate.core.machine import hardware_fingerprint, v2_fingerprint

    hardware = {"cpu": "AMD EPYC", "cores": 2, "memory_gib": 24, "arch": "x86_64", "gpu": None, "hostname": "vm"}
    prints = set()
    for torch in ("2.13.0", "2.14.0"):
        machine = {**hardware, "os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.7", "torch": torch}
        machine["gpu_driver"] = None
        machine["fingerprint"] = v2_fingerprint(machine)
        doc = {
            "schema_version": 2,
            "model": "dqn",
            "machine": machine,
            "metrics": {"training_step_time_ms": {"samples": [1.0]}},
        }
        run = run_from_dict(doc)
        assert run.machine.fingerprint == hardware_fingerprint(hardware)
        assert dict(run.machine.details) == hardware
        assert dict(run.software) == {"os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.7", "torch": torch}
        prints.add(run.machine.fingerprint)
    assert len(prints) == 1


@pytest.mark.parametrize(("software", "field"), [(["torch"], "software"), ({"torch": 2.14}, "software.torch")])
def test_bad_software_record_names_its_field(software, field):
    doc = json.loads((DATA / "v3_dqn.json").read_text())
    doc["software"] = software
    with pytest.raises(InputError) as info:
        run_from_dict(doc, source="r.json")
    assert info.value.field == field


def test_upgrade_keeps_an_old_bench_memory_figure_under_the_name_that_says_what_it_is():
    """Up to version 2, bench's memory_usage_mb was the per-round peak above the round's start; it
    is round_memory_mb now, so an old baseline does not read the new pipeline peak as a regression."""
    doc = json.loads((DATA / "v2_dqn.json").read_text())
    doc["config"]["memory_definition"] = "peak RSS above the process state at the start of each round (includes set-up)"
    run = run_from_dict(doc)
    assert "memory_usage_mb" not in run.metrics
    assert run.metrics["round_memory_mb"].samples == (7.1, 7.2)
    assert run.metrics["round_memory_mb"].direction.value == "informational"
    assert "memory_definition" not in run.config
    # recorded any other way (no bench definition in its config), the figure is the author's and stays
    plain = run_from_dict(json.loads((DATA / "v2_dqn.json").read_text()))
    assert plain.metrics["memory_usage_mb"].samples == (7.1, 7.2)


def test_a_version_3_counts_run_is_upgraded_to_say_it_measured_counts(tmp_path):
    """Up to version 3 a counts run said so only in its config; version 4 says it as ``measure``,
    which a perfgate that reads version 3 refuses rather than taking counts for times."""
    metric = {"unit": "instructions", "direction": "lower_is_better", "samples": [1e6, 1e6], "groups": [1, 1]}
    v3 = {"schema_version": 3, "model": "x", "config": {"measure": "counts"}, "metrics": {"loop_instructions": metric}}
    run = run_from_dict(v3)
    assert run.measure == "counts"
    out = tmp_path / "counts.json"
    save_run(out, run)
    doc = validate_run_file(out)
    assert doc["schema_version"] == SCHEMA_VERSION == 5 and doc["measure"] == "counts"
    timed = {**v3, "config": {}, "metrics": {"loop_time_ms": {**metric, "unit": "ms"}}}
    assert run_from_dict(timed).measure == "times"
    with pytest.raises(InputError, match="measure"):
        run_from_dict({**v3, "schema_version": 4, "measure": "cycles"})

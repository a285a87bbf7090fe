"""The hardware fingerprint and the software changes a check reports (perfgate.core.machine)."""

from __future__ import annotations

from perfgate.core.machine import (
    describe_software_changes,
    hardware_fingerprint,
    software_changes,
    v2_fingerprint,
)

HARDWARE = {"cpu": "AMD EPYC", "cores": 2, "memory_gib": 24, "arch": "x86_64", "gpu": None}


def test_fingerprint_ignores_software_and_hostname_but_not_hardware():
    base = hardware_fingerprint(HARDWARE)
    assert len(base) == 16
    upgraded = {**HARDWARE, "python": "3.12.1", "torch": "2.14.0", "os": "Ubuntu 24.04", "hostname": "runner-7"}
    assert hardware_fingerprint(upgraded) == base
    for key, other in (
        ("cpu", "Intel Xeon"),
        ("cores", 64),
        ("memory_gib", 256),
        ("arch", "aarch64"),
        ("gpu", "1 x H100"),
    ):
        assert hardware_fingerprint({**HARDWARE, key: other}) != base, key


def test_version_2_fingerprint_hashed_the_software_too():
    """What the upgrade uses to recognise perfgate's own old fingerprints."""
    old = {
        **HARDWARE,
        "os": "Debian GNU/Linux 12 (bookworm)",
        "python": "3.11.7",
        "torch": "2.13.0",
        "gpu_driver": None,
    }
    assert v2_fingerprint(old) != v2_fingerprint({**old, "torch": "2.14.0"})
    assert v2_fingerprint(old) != hardware_fingerprint(old)


def test_software_changes_in_a_fixed_order_and_only_for_components_both_sides_recorded():
    base = {"python": "3.11.7", "torch": "2.13.0", "numpy": "2.1.0", "os": "Debian 12"}
    cur = {"python": "3.11.9", "torch": "2.14.0", "numpy": "2.1.0", "gpu_driver": "550.54"}
    changes = software_changes(base, cur)
    assert [str(c) for c in changes] == ["python 3.11.7 → 3.11.9", "torch 2.13.0 → 2.14.0"]
    assert describe_software_changes(changes) == "Environment changed: python 3.11.7 → 3.11.9, torch 2.13.0 → 2.14.0"
    assert software_changes(base, base) == ()
    assert software_changes({}, cur) == ()  # an imported run records no software: nothing to say
    assert describe_software_changes(()) == ""

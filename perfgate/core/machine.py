"""What makes two runs comparable: the hardware fingerprint, and the software recorded beside it.

A baseline belongs to one machine fingerprint (docs/design.md §4): runs from different fingerprints
are not compared unless the user asks. The fingerprint therefore covers only what changes
timings the way another machine would — CPU model, logical cores, memory size,
architecture, GPU model — and none of the software: a torch or numpy upgrade is the change
most worth gating, so it must be compared against the baseline, not refused as a mismatch.
The software a run was measured with (Python, torch, numpy, OS distribution, GPU driver)
is kept in :attr:`perfgate.core.schema.Run.software`, and a check names what changed
(:func:`software_changes`): "Environment changed: torch 2.13.0 → 2.14.0".

Hostname is left out on purpose: identical CI runners must share a baseline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HARDWARE_KEYS",
    "SOFTWARE_KEYS",
    "SoftwareChange",
    "describe_software_changes",
    "hardware_fingerprint",
    "software_changes",
    "v2_fingerprint",
]

# the machine details the fingerprint hashes
HARDWARE_KEYS = ("cpu", "cores", "memory_gib", "arch", "gpu")
# the software versions a run records beside the machine (run format version 3 on)
SOFTWARE_KEYS = ("python", "torch", "numpy", "os", "gpu_driver")
# what the fingerprint hashed up to run format version 2 (software included)
_V2_IDENTITY = ("cpu", "cores", "memory_gib", "os", "arch", "python", "torch", "gpu", "gpu_driver")


def _hash(details: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    identity = {key: details.get(key) for key in keys}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def hardware_fingerprint(details: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit hash of the hardware fields of ``details`` (:data:`HARDWARE_KEYS`)."""
    return _hash(details, HARDWARE_KEYS)


def v2_fingerprint(details: Mapping[str, Any]) -> str:
    """The fingerprint perfgate wrote up to run format version 2, which also hashed software versions.

    The upgrade to version 3 recognises its own old fingerprints by this and recomputes them,
    so a baseline recorded before the change still matches runs on the same hardware.
    """
    return _hash(details, _V2_IDENTITY)


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftwareChange:
    """One software component whose version differs between baseline and current run."""

    name: str
    baseline: str
    current: str

    def __str__(self) -> str:
        return f"{self.name} {self.baseline} → {self.current}"


def software_changes(baseline: Mapping[str, str], current: Mapping[str, str]) -> tuple[SoftwareChange, ...]:
    """The components recorded on both sides whose versions differ, in :data:`SOFTWARE_KEYS` order, then by name.

    A component recorded on one side only is not a change: older files did not record numpy,
    imported and flat-format runs record nothing, and a GPU driver that appears comes with a
    GPU, which the fingerprint already tells apart.
    """
    order = {name: i for i, name in enumerate(SOFTWARE_KEYS)}
    names = sorted(set(baseline) & set(current), key=lambda n: (order.get(n, len(order)), n))
    return tuple(
        SoftwareChange(name=n, baseline=baseline[n], current=current[n]) for n in names if baseline[n] != current[n]
    )


def describe_software_changes(changes: tuple[SoftwareChange, ...]) -> str:
    """``"Environment changed: torch 2.13.0 → 2.14.0, numpy 1.26.4 → 2.1.0"``, or ``""`` when none."""
    if not changes:
        return ""
    return "Environment changed: " + ", ".join(str(c) for c in changes)

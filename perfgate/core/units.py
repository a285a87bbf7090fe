"""The time units perfgate measures and converts into, with the factor from seconds.

One table for every layer that times or rescales: the stage registry (a stage's unit),
the Python API's timers and the importers (``--time-unit``). The order is the one messages
list them in, smallest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["MEMORY_UNITS", "TIME_UNITS"]

#: unit -> how many of it make one second
TIME_UNITS: Mapping[str, float] = MappingProxyType({"ns": 1e9, "us": 1e6, "ms": 1e3, "s": 1.0})

#: units of memory, which does not follow the machine's speed
MEMORY_UNITS = frozenset({"B", "KB", "KiB", "MB", "MiB", "GB", "GiB", "bytes"})

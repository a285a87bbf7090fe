"""The memory floor: a change of a memory metric too small to be a finding, however large relatively.

A few pages of allocator noise on a stage that holds almost nothing is a large relative change and no
regression; the policy's ``memory_floor_mb`` is the least change, in megabytes, that may count. It
applies to a metric whose catalogue entry (:meth:`perfgate.core.metrics.MetricCatalogue.of`) is in a
unit the floor is said in.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from perfgate.core.metrics import MetricInfo
from perfgate.core.policy import Policy
from perfgate.core.result import Verdict

__all__ = ["FLOORED_VERDICTS", "MEGABYTES", "below_floor"]

#: the memory units the floor applies to, with the megabytes in one of each
MEGABYTES: Mapping[str, float] = MappingProxyType({"MB": 1.0})
#: the verdicts a change under the floor does not keep: it is unchanged instead
FLOORED_VERDICTS = frozenset({Verdict.REGRESSED, Verdict.INCONCLUSIVE})


def below_floor(info: MetricInfo, base_value: float, cur_value: float, policy: Policy) -> bool:
    """Whether a memory metric moved by less than ``policy.memory_floor_mb``."""
    scale = MEGABYTES.get(info.unit)
    return scale is not None and abs(cur_value - base_value) * scale < policy.memory_floor_mb

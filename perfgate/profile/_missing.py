"""The error of a profiler that is not installed, shared by the package face and each instrument."""

from __future__ import annotations

from perfgate.errors import PerfgateError

__all__ = ["ProfilerMissing"]


class ProfilerMissing(PerfgateError):
    """The profiler an instrument needs is not installed; the message names the package and the remedy."""

"""Peak resident memory: of a block of code above the state before it, and of a whole pipeline.

On Linux the kernel keeps the resident high-water mark (``VmHWM``) and lets a process
reset it by writing ``5`` to ``/proc/self/clear_refs``; reading it after the block gives
the exact peak, with no sampling thread and no cost inside the block. Where that is not
available a background thread samples RSS every millisecond (which can miss short peaks;
:attr:`PeakMemory.method` says which was used).

:class:`PipelineMemory` is the runner's peak memory figure (the metric its suite names for it,
:class:`perfgate.core.metrics.RunnerMetrics`): the resident memory the
stages hold plus their peak above that, i.e. the highest RSS from the first stage's set-up
on, above the RSS the process had before it (after the imports, freed heap released). A
model, an optimiser or a replay buffer built in a set-up counts in full. Work a set-up
does that is not the pipeline — writing the cached synthetic data file on a fresh machine —
runs inside :func:`unmeasured`, so a first run is not charged for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["PeakMemory", "PipelineMemory", "current_rss_bytes", "release_free_memory", "unmeasured"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(key: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def current_rss_bytes() -> int:
    """Resident set size of this process now."""
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    import psutil

    return int(psutil.Process().memory_info().rss)


def release_free_memory() -> None:
    """Collect garbage and hand freed heap back to the OS (glibc ``malloc_trim``; a no-op elsewhere).

    glibc keeps freed blocks for reuse, so without this a block's RSS before it already
    holds the memory an earlier block freed, and the peak above it reads near zero.
    """
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    global _trim
    if _trim is None:
        try:
            _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc: nothing to release
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None


def _reset_hwm() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


class PeakMemory:
    """Context manager: ``peak_bytes`` is the block's peak RSS above the RSS at entry."""

    def __init__(self) -> None:
        self.before = 0
        self.peak_bytes = 0
        self.method = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampled = 0

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._sampled = max(self._sampled, current_rss_bytes())

    def __enter__(self) -> PeakMemory:
        self._stop = threading.Event()
        if _reset_hwm():
            self.method = "vmhwm"
            self.before = current_rss_bytes()
        else:
            self.method = "sampled"
            self.before = current_rss_bytes()
            self._sampled = self.before
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.method == "vmhwm":
            peak = (_status_kib("VmHWM") or 0) * 1024
        else:
            self._stop.set()
            assert self._thread is not None
            self._thread.join()
            peak = max(self._sampled, current_rss_bytes())
        self.peak_bytes = max(0, peak - self.before)


class PipelineMemory:
    """The pipeline's peak RSS above the process's state before its first set-up (module docstring).

    Create it after the imports and before the first stage's set-up (that RSS, freed heap
    released, is :attr:`baseline`); wrap every set-up in :meth:`setup`; after each round,
    :meth:`round_mb` of the round's highest RSS gives that round's figure: the highest RSS of
    the set-ups and that round together, above the baseline. Set-up is part of every round's
    figure because a round cannot run without what it built; taking it once per round keeps
    one sample per round, as the timings have.

    In a script of your own, the same figure for a block of code (the Python API)::

        with PipelineMemory() as memory:   # after the imports
            model = build(); train(model)
        tracker.record("peak_memory_mb", memory.peak_mb, unit="MB", direction="lower_is_better")
    """

    def __init__(self) -> None:
        release_free_memory()
        self.baseline = current_rss_bytes()
        self.setup_top = self.baseline
        self.method = ""
        self._block: PeakMemory | None = None

    def __enter__(self) -> PipelineMemory:
        self._block = self.setup()
        self._block.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._block is not None
        self._block.__exit__(exc_type, exc, tb)

    @property
    def peak_mb(self) -> float:
        """MB above the baseline of the highest RSS seen so far in set-ups (or the ``with`` block)."""
        return self.round_mb(0)

    def setup(self) -> PeakMemory:
        """A context manager around one stage's set-up and warm-up; its peak joins :attr:`setup_top`."""
        return _SetupPeak(self)

    def round_mb(self, round_top_bytes: int) -> float:
        """MB above the baseline of the higher of the set-ups' peak and a round's peak (absolute RSS)."""
        return max(0, max(self.setup_top, round_top_bytes) - self.baseline) / 2**20


class _SetupPeak(PeakMemory):
    def __init__(self, owner: PipelineMemory) -> None:
        super().__init__()
        self._owner = owner

    def __enter__(self) -> _SetupPeak:
        super().__enter__()
        _ACTIVE.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        _ACTIVE.remove(self)
        self._owner.setup_top = max(self._owner.setup_top, self.before + self.peak_bytes)
        self._owner.method = self._owner.method or self.method


_ACTIVE: list[_SetupPeak] = []  # the set-up blocks open now (innermost last)


@contextmanager
def unmeasured() -> Iterator[None]:
    """Leave the code inside out of the runner's peak memory figure: its peak is not the pipeline's.

    For work a stage's set-up does once per machine rather than once per run (writing a
    cached data file): the open set-up block is closed before it, with the peak so far, and
    opened again after it with the freed heap released. Outside a set-up it does nothing.
    """
    if not _ACTIVE:
        yield
        return
    block = _ACTIVE[-1]
    block.__exit__(None, None, None)
    try:
        yield
    finally:
        release_free_memory()
        block.__enter__()

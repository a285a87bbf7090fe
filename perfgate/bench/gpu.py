"""GPU measurements for stages that run on CUDA: peak allocated memory and utilisation.

Only used when the benchmark's device is ``cuda``; torch is then already imported by the
stages, so it is taken from ``sys.modules`` rather than imported here. Utilisation is the
mean of NVML's instantaneous readings (``torch.cuda.utilization``) sampled every 20 ms on a
background thread while a round runs.
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any

__all__ = ["GpuRound", "cuda_torch"]


def cuda_torch(device: str) -> Any | None:
    """The torch module when ``device`` is a CUDA device and CUDA is usable, else None."""
    if not device.startswith("cuda"):
        return None
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch


class GpuRound:
    """Context manager around one round: ``peak_mb`` and ``utilization_pct`` after exit."""

    def __init__(self, torch: Any, device: str, interval: float = 0.02) -> None:
        self.torch = torch
        self.device = torch.device(device)
        self.interval = interval
        self.peak_mb = 0.0
        self.utilization_pct: float | None = None
        self._readings: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._readings.append(float(self.torch.cuda.utilization(self.device)))
            except Exception:  # NVML missing (no pynvml) or not permitted: no utilisation figure
                return

    def __enter__(self) -> GpuRound:
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.reset_peak_memory_stats(self.device)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.torch.cuda.synchronize(self.device)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_mb = self.torch.cuda.max_memory_allocated(self.device) / 2**20
        if self._readings:
            self.utilization_pct = sum(self._readings) / len(self._readings)

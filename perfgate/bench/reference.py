"""Reference kernels: fixed amounts of work whose time tracks the machine's speed.

A shared runner changes speed in phases of seconds to minutes (``docs/noise.md``): a stage
measured in a slow phase looks slower although its code did not change. ``perfgate bench``
times a small reference kernel right before every block of a stage's calls, and stores it
beside the stage's samples; a comparison of two runs can then divide each call by the
reference that was measured with it, which takes most of the machine's phase out.

The kernel must be of the stage's own kind: the slow phases of this machine do not slow
every kind of work alike, and a reference of the wrong kind did not help or made the spread
worse (``docs/noise.md`` §2). Three kinds:

* ``compute``: small dense matrix products and ``tanh`` in numpy (BLAS and vectorised
  arithmetic, the work of feature extraction and numeric kernels);
* ``interpreter``: a pure-Python loop (the per-call overhead of torch eager, numba
  dispatch and Python glue, which dominates a small model's training step and inference);
* ``memory``: copies of a 4 MiB array, larger than the caches close to the core (loads,
  parsing into arrays, anything bound by memory bandwidth).

Measured on a 2-core shared runner, the interpreter kernel takes about 0.8 ms and the
compute and memory kernels about 2.5 ms each (``ReferenceKernels().time(kind)``).
The amounts of work are part of the run format's meaning: changing them changes every
normalised value, so they are fixed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

__all__ = ["KINDS", "ReferenceKernels"]

KINDS = ("compute", "interpreter", "memory")

_MATRIX = 48
_MATRIX_STEPS = 40
_LOOP_STEPS = 6000
_COPY_FLOATS = 1 << 19  # 4 MiB of float64
_COPY_STEPS = 4


class ReferenceKernels:
    """The three kernels, with their inputs allocated once (so timing them allocates nothing)."""

    def __init__(self) -> None:
        self._matrix = np.random.default_rng(0).standard_normal((_MATRIX, _MATRIX)) * 0.1
        self._source = np.ones(_COPY_FLOATS)
        self._target = np.empty_like(self._source)
        self._kernels: dict[str, Callable[[], object]] = {
            "compute": self._compute,
            "interpreter": self._interpreter,
            "memory": self._memory,
        }
        for kernel in self._kernels.values():  # first calls fault in pages and warm caches
            kernel()

    def _compute(self) -> object:
        x = self._matrix
        for _ in range(_MATRIX_STEPS):
            x = np.tanh(x @ self._matrix)
        return x

    @staticmethod
    def _interpreter() -> object:
        total = 0
        for i in range(_LOOP_STEPS):
            total = (total + i * 7) % 1_000_003
        return total

    def _memory(self) -> object:
        for _ in range(_COPY_STEPS):
            np.copyto(self._target, self._source)
        return self._target

    def time(self, kind: str) -> float:
        """Seconds one run of the ``kind`` kernel takes now."""
        kernel = self._kernels[kind]
        start = time.perf_counter_ns()
        kernel()
        return (time.perf_counter_ns() - start) / 1e9

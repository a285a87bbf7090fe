"""How the two workers of a pair start: alike but for the code, each with a memory layout drawn at random.

A fresh interpreter is not a fresh layout. The offset of a heap block inside its page is fixed
by what the process allocated before it, and address-space randomisation moves whole pages,
never that offset. So a comment in a stage module, or a worktree path one character longer,
moves an array's address mod 4096 the same way in every fresh process, and can move the
stage's speed by 8–9 % (``docs/noise.md`` §5): every pair of a check carries the same offset,
and the test across pairs takes it for a change. The cure (Curtsinger and Berger, Stabilizer,
ASPLOS 2013; the bias itself: Mytkowicz et al., ASPLOS 2009) is to draw the layout at random
per worker, so that the offset becomes noise with mean zero that the test across pairs sees.

Before anything else runs in the worker, :data:`BOOTSTRAP` (the coordinator's code, the same
for both sides whatever revision of perfgate a side runs) allocates :attr:`Layout.heap_bytes`
and keeps the block alive: every later allocation from the top of the heap moves by that
much. ``heap_bytes`` is ``HEAP_BASE + 16 k`` with ``k`` uniform in ``0 … 255``, so the shift
spans a page in the allocator's 16-byte steps (``HEAP_BASE``, 64 KiB, is larger than any free
block at start-up, so the block comes from the top of the heap, and below glibc's mmap
threshold, so it is not a page of its own). An environment variable of
:attr:`Layout.env_bytes` characters (0 … 4095) moves the initial stack and the copy of the
environment. ``PYTHONHASHSEED`` is drawn per pair, one value for both workers, so both sides'
set-ups iterate their sets and dicts alike.

The draws are **independent per worker** (:func:`draw`), from one distribution for both
sides. The two layouts of a pair are then independent and identically distributed whatever
the change did to the code, so the pair's layout term ``g(X_current) - g(X_baseline)`` is
symmetric about zero: mean zero and median zero, without assuming that a change only shifts
the layout. A draw shared by both workers of a pair would give ``g(x + δ) - g(x)``, the shift
``δ`` being what the change moved: mean zero only if the draw spreads the offset evenly over
the page, and skewed whenever the speed has two states, which is what was measured. The
price is that identical code gets layout noise it would not have with a shared draw; the
test across pairs sees it as noise, and a comment-only change has it anyway.

:func:`start_order` draws which side's worker starts first, per pair; nothing else about the
start differs between the sides (equal-length worktree paths: :mod:`perfgate.ab.revisions`).
The counted processes of ``--measure counts`` (:mod:`perfgate.workers.counts`) reuse :func:`draw`
and :data:`BOOTSTRAP`.

Internal: shared with ``ab``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "BOOTSTRAP",
    "ENV_PAD_VAR",
    "HEAP_BASE",
    "HEAP_VAR",
    "Layout",
    "draw",
    "start_order",
    "worker_args",
]

HEAP_BASE = 65_536  # bytes: above any free block at start-up, below glibc's mmap threshold (128 KiB)
HEAP_STEP = 16  # bytes: glibc's (and pymalloc's) allocation granularity on 64-bit
HEAP_STEPS = 4096 // HEAP_STEP  # one page of shifts
ENV_MAX = 4096  # characters of the padding variable: up to one page of stack
HEAP_VAR = "PERFGATE_LAYOUT_HEAP_BYTES"
ENV_PAD_VAR = "PERFGATE_LAYOUT_PAD"
_HASH_SEEDS = 2**32  # PYTHONHASHSEED takes 0 … 4294967295

# Runs first in every worker (``python -c BOOTSTRAP MODULE``), before perfgate or the suite is imported:
# the block is kept alive by this frame's globals for the process's life.
BOOTSTRAP = (
    "import os, sys\n"
    f"_perfgate_layout = bytearray(int(os.environ.get({HEAP_VAR!r}) or 0))\n"
    "import runpy\n"
    "runpy.run_module(sys.argv[1], run_name='__main__', alter_sys=True)\n"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One worker's layout draw; ``Layout()`` is no randomisation (no padding, hash seed 0)."""

    heap_bytes: int = 0  # kept alive before anything else is allocated
    env_bytes: int = 0  # length of the padding environment variable
    hash_seed: int = 0  # PYTHONHASHSEED, shared by both workers of a pair

    def __post_init__(self) -> None:
        for name, top in (("heap_bytes", 1 << 20), ("env_bytes", 1 << 16), ("hash_seed", _HASH_SEEDS - 1)):
            value = getattr(self, name)
            if not 0 <= value <= top:
                raise ValueError(f"{name} must be between 0 and {top}, got {value}")

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this layout's variables (the padding variable even when empty: equal names on both sides)."""
        return {
            **base,
            "PYTHONHASHSEED": str(self.hash_seed),
            HEAP_VAR: str(self.heap_bytes),
            ENV_PAD_VAR: "x" * self.env_bytes,
        }

    def record(self) -> dict[str, Any]:
        return asdict(self)


def draw(seed: int, pair: int, side: str) -> Layout:
    """The layout of ``side`` (``"A"`` or ``"B"``) in ``pair``, reproducible from the check's random seed.

    The pads are drawn independently per worker, the hash seed once per pair (module docstring).
    """
    if side not in ("A", "B"):
        raise ValueError(f"side must be 'A' or 'B', got {side!r}")
    hash_seed = int(np.random.default_rng([seed, pair, 0]).integers(_HASH_SEEDS))
    rng = np.random.default_rng([seed, pair, 1 if side == "A" else 2])
    return Layout(
        heap_bytes=HEAP_BASE + HEAP_STEP * int(rng.integers(HEAP_STEPS)),
        env_bytes=int(rng.integers(ENV_MAX)),
        hash_seed=hash_seed,
    )


def start_order(seed: int, pair: int) -> tuple[str, str]:
    """Which worker of ``pair`` starts (and is sent its set-up) first: ``("A", "B")`` or ``("B", "A")``."""
    first_a = bool(np.random.default_rng([seed, pair, 3]).random() < 0.5)
    return ("A", "B") if first_a else ("B", "A")


def worker_args(module: str, *, randomise: bool) -> list[str]:
    """The interpreter's arguments that run ``module`` as a worker, through :data:`BOOTSTRAP` when randomised."""
    return ["-c", BOOTSTRAP, module] if randomise else ["-m", module]

"""Callgrind, driven from inside the measured process: its switch, its command line, its files.

**The switch** is valgrind's client request: a no-op instruction sequence that valgrind
recognises when it translates the code (``valgrind/valgrind.h``, amd64: four ``rolq`` of
``%rdi`` by 3, 13, 61 and 51 bits, then ``xchgq %rbx,%rbx``; ``%rax`` points at the request
and its arguments, ``%rdx`` carries the default in and the answer out). perfgate writes those
27 bytes into an executable page and calls them through :mod:`ctypes`: no compiler, no
extension module, no torch. Outside valgrind the sequence does nothing and returns the
default (0), so :func:`running_on_valgrind` tells the two apart.

It was chosen over ``callgrind_control`` driven from the coordinator by measurement
(``docs/design.md`` §12): both count a pure-Python stage to the instruction in four of five
calls, but each ``callgrind_control`` call took 0.22–0.34 s (two per counted call: 12 s per
DQN process), and its window counts every thread while the worker waits on its pipe (a
numpy stage with OpenBLAS threads not pinned: 5.6 M to 95.6 M instructions per call against
2.580–2.607 M with the in-process switch).

**The files**: one ``DUMP_STATS_AT`` per counted call writes ``<prefix>.<pid>.<n>`` whose
header names the trigger (``desc: Trigger: Client Request: LABEL``) and the totals
(``summary:``; events left off at the end are 0). :func:`read_dump` reads only the header.

**Estimated cycles** (:func:`est_cycles`): L1 hits + 5 × LL hits + 35 × RAM accesses, the
weights of iai-callgrind (now gungraun) and CodSpeed, from Itamar Turner-Trauring's
"Cachegrind for benchmarking" (pythonspeed.com). A model of a CPU, not a CPU.

Internal: shared with ``cli``, ``orchestrate``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CACHE",
    "EVENTS",
    "THREADS_ENV",
    "Callgrind",
    "Dump",
    "est_cycles",
    "presented_isa",
    "read_dump",
    "running_on_valgrind",
    "valgrind_argv",
]

# The simulated caches, given explicitly: unset, valgrind sizes them from the host (a 110 MB
# 15-way L3 became 104 MB 26-way here), and two hosts would simulate two different caches.
# 32 KiB 8-way L1s with 64-byte lines are what x86 cores have had for a decade; the 8 MiB
# 16-way last level is one core's share of a server L3, smaller than any stage's data set
# that should be seen to spill. Changing it is an environment change (recorded per run).
CACHE: Mapping[str, str] = {"I1": "32768,8,64", "D1": "32768,8,64", "LL": "8388608,16,64"}
# what --cache-sim=yes records, in callgrind's order
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
# a counted process's numerical libraries run one thread: callgrind counts every thread, and a
# pool's threads spinning while the stage waits are no part of its work
THREADS_ENV: Mapping[str, str] = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
}
# weights of est_cycles: an L1 hit, an LL hit, a RAM access (see the module docstring)
L1_HIT, LL_HIT, RAM = 1, 5, 35

_AMD64_REQUEST = bytes.fromhex(
    "4889f8"  # mov rax, rdi        (the request block)
    "4889f2"  # mov rdx, rsi        (the default answer)
    "48c1c703"
    "48c1c70d"
    "48c1c73d"
    "48c1c733"  # rol rdi, 3 / 13 / 61 / 51: valgrind's preamble
    "4887db"  # xchg rbx, rbx       (the client request)
    "4889d0"  # mov rax, rdx
    "c3"  # ret
)
_RUNNING_ON_VALGRIND = 0x1001
_CALLGRIND = (ord("C") << 24) | (ord("T") << 16)
_DUMP_STATS_AT = _CALLGRIND + 3
_TOGGLE_COLLECT = _CALLGRIND + 2
_START_INSTRUMENTATION = _CALLGRIND + 4
_STOP_INSTRUMENTATION = _CALLGRIND + 5


def valgrind_argv(valgrind: str, out_prefix: Path, log_file: Path) -> list[str]:
    """valgrind's options for a counted worker: nothing instrumented until the worker asks.

    ``--vgdb=no``: no gdbserver, so no FIFOs in the temporary folder, which a process killed
    at its deadline or by an interrupt could not remove (the counts are the same to the
    instruction: 63,335,575 both ways for one Python loop)."""
    return [
        valgrind,
        "--tool=callgrind",
        "--vgdb=no",
        "--instr-atstart=no",
        "--collect-atstart=no",
        "--cache-sim=yes",
        *(f"--{level}={CACHE[level]}" for level in ("I1", "D1", "LL")),
        "--dump-line=no",
        f"--callgrind-out-file={out_prefix}.%p",
        f"--log-file={log_file}",
    ]


class Callgrind:
    """The client requests a counted worker makes (all no-ops outside valgrind)."""

    def __init__(self) -> None:
        if platform.machine().lower() not in ("x86_64", "amd64"):
            raise OSError(f"counting under callgrind needs an x86_64 machine; this one is {platform.machine()}")
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._page.write(_AMD64_REQUEST)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self._call = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)(address)
        # request blocks made once, so a toggle costs the same few thousand instructions every time
        self._blocks: dict[tuple[int, int], ctypes.Array[ctypes.c_size_t]] = {}
        self._names: dict[str, ctypes.Array[ctypes.c_char]] = {}

    def _request(self, code: int, arg: int = 0, default: int = 0) -> int:
        block = self._blocks.get((code, arg))
        if block is None:
            block = self._blocks[(code, arg)] = (ctypes.c_size_t * 6)(code, arg, 0, 0, 0, 0)
        return int(self._call(ctypes.addressof(block), default))

    def running(self) -> bool:
        return self._request(_RUNNING_ON_VALGRIND) > 0

    def instrument(self, on: bool) -> None:
        self._request(_START_INSTRUMENTATION if on else _STOP_INSTRUMENTATION)

    def toggle(self) -> None:
        """Collection on if it was off, off if it was on."""
        self._request(_TOGGLE_COLLECT)

    def label(self, name: str) -> int:
        """The address of ``name`` as a C string, kept alive; make it before counting."""
        buffer = self._names.get(name)
        if buffer is None:
            buffer = self._names[name] = ctypes.create_string_buffer(name.encode())
        return ctypes.addressof(buffer)

    def dump(self, name: str) -> None:
        """Write what was collected since the last dump to a new file, its trigger ``name``."""
        self._request(_DUMP_STATS_AT, self.label(name))


def running_on_valgrind() -> bool:
    return Callgrind().running()


@dataclass(frozen=True, slots=True)
class Dump:
    """One callgrind file: its sequence number, trigger label and event totals."""

    part: int
    label: str
    events: Mapping[str, int]


_PART = re.compile(r"\.(\d+)$")
_TRIGGER = "desc: Trigger: Client Request: "


def read_dump(path: Path) -> Dump | None:
    """The header of one callgrind output file; None for a file not written by a client request."""
    label: str | None = None
    names: list[str] = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith(_TRIGGER):
                label = line.removeprefix(_TRIGGER).strip()
            elif line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:"):
                values = [int(v) for v in line.split()[1:]]
                if label is None:
                    return None
                values += [0] * (len(names) - len(values))  # trailing zero events are left off
                match = _PART.search(path.name)
                return Dump(
                    part=int(match.group(1)) if match else 0, label=label, events=dict(zip(names, values, strict=True))
                )
    return None


def est_cycles(events: Mapping[str, float]) -> float:
    """L1 hits + 5 × LL hits + 35 × RAM accesses from callgrind's cache-simulation events."""
    accesses = sum(events.get(e, 0) for e in ("Ir", "Dr", "Dw"))
    l1_misses = sum(events.get(e, 0) for e in ("I1mr", "D1mr", "D1mw"))
    ram = sum(events.get(e, 0) for e in ("ILmr", "DLmr", "DLmw"))
    return L1_HIT * (accesses - l1_misses) + LL_HIT * (l1_misses - ram) + RAM * ram


def presented_isa() -> list[str]:
    """The instruction-set extensions this process's CPU reports, as numpy's dispatcher found them.

    Under valgrind that is the CPU valgrind presents (it answers ``cpuid`` itself, and hides
    AVX-512 on a host that has it), which is what a count depends on: two hosts that present
    the same extensions run the same code paths in numpy, BLAS and torch. Empty when numpy
    does not say.
    """
    import importlib

    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # numpy 2, numpy 1
        try:
            features = getattr(importlib.import_module(module), "__cpu_features__", None)
        except ImportError:
            continue
        if isinstance(features, dict):
            return sorted(str(name) for name, on in features.items() if on)
    return []

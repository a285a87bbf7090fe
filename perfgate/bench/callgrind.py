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

**valgrind itself**: where it is (:func:`find_valgrind`), its version (:func:`valgrind_version`,
recorded per run) and the CPU it presents to numba (:func:`valgrind_jit_target`).

**numba compiled natively.** numba keys its cache on disk by the CPU it compiles for, and
valgrind presents another CPU than the host's (here ``haswell`` with AVX2 for a ``znver5``
with AVX-512): a counted process found nothing it could load and compiled every kernel under
valgrind, about 33 s of each Mamba-2 process. :func:`valgrind_jit_target` asks valgrind once
which CPU numba sees there (kept in perfgate's cache folder); the native pass of
:mod:`perfgate.workers.counts` then runs with ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` set
to it and calls each counted stage once, so numba compiles the same code for the same target,
natively, into the cache the counted processes read. A kernel whose key does not match is
compiled where it always was.

Internal: shared with ``ab``, ``app``, ``workers``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import mmap
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.errors import InputError, PerfgateError

__all__ = [
    "CACHE",
    "EVENTS",
    "THREADS_ENV",
    "Callgrind",
    "Dump",
    "est_cycles",
    "find_valgrind",
    "presented_isa",
    "read_dump",
    "running_on_valgrind",
    "valgrind_argv",
    "valgrind_jit_target",
    "valgrind_version",
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


def find_valgrind() -> str:
    """The valgrind executable on PATH, or an error that says what to install."""
    found = shutil.which("valgrind")
    if found is None:
        raise InputError(
            "valgrind was not found on PATH, and --measure counts runs every process under valgrind's callgrind; "
            "install the Debian/Ubuntu package `valgrind` (apt-get install valgrind), or measure times "
            "(--measure times)",
            field="--measure",
        )
    return found


def valgrind_version(valgrind: str) -> str:
    done = subprocess.run([valgrind, "--version"], capture_output=True, text=True, check=False)
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise PerfgateError(f"{valgrind} --version failed (exit {done.returncode}): {done.stderr.strip()[-200:]}")
    return version.removeprefix("valgrind-")


# run under valgrind: the CPU numba compiles for there, as numba itself works it out
_JIT_PROBE = """\
import json
try:
    import llvmlite.binding as ll
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features
except Exception:
    print("{}")
else:
    name = config.CPU_NAME or ll.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    print(json.dumps({"NUMBA_CPU_NAME": name, "NUMBA_CPU_FEATURES": features}))
"""
_JIT_PROBE_SECONDS = 300.0


def _host_jit_key(env: Mapping[str, str]) -> tuple[str, set[str]] | None:
    """What the valgrind probe's answer depends on besides valgrind (numba's and llvmlite's
    versions, the host CPU as LLVM sees it, numba's settings), and the host's CPU features;
    None without numba."""
    import importlib
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("numba") is None or importlib.util.find_spec("llvmlite") is None:
        return None
    try:
        ll: Any = importlib.import_module("llvmlite.binding")  # untyped; loaded only here
        name, host = str(ll.get_host_cpu_name()), str(ll.get_host_cpu_features().flatten())
        versions = [importlib.metadata.version(package) for package in ("numba", "llvmlite")]
    except Exception:  # no LLVM here: numba compiles where it always did
        return None
    settings = sorted((k, v) for k, v in env.items() if k.startswith("NUMBA_"))
    key = json.dumps([sys.executable, versions, name, host, settings])
    return key, {f[1:] for f in host.split(",") if f.startswith("+")}


def _cache_folder(env: Mapping[str, str]) -> Path:
    """perfgate's cache folder: ``$PERFGATE_CACHE_DIR``, else ``perfgate`` in the XDG cache (as
    ``perfgate.ab.jitcache`` keeps numba's code there)."""
    if env.get("PERFGATE_CACHE_DIR"):
        return Path(env["PERFGATE_CACHE_DIR"])
    return (Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache") / "perfgate"


def _jit_env(value: object) -> dict[str, str] | None:
    names = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")
    if isinstance(value, dict) and set(value) == set(names) and all(isinstance(value[k], str) for k in names):
        return {k: value[k] for k in names}
    return None


def _probe_jit_target(valgrind: str, env: Mapping[str, str]) -> dict[str, str] | None:
    with tempfile.TemporaryDirectory(prefix="perfgate-jit-probe-") as tmp:
        argv = [*valgrind_argv(valgrind, Path(tmp) / "callgrind.out", Path(tmp) / "valgrind.log")]
        argv += [sys.executable, "-c", _JIT_PROBE]
        try:
            done = subprocess.run(
                argv, env={**env, **THREADS_ENV}, capture_output=True, text=True, timeout=_JIT_PROBE_SECONDS
            )
            lines = done.stdout.strip().splitlines()
            return _jit_env(json.loads(lines[-1])) if done.returncode == 0 and lines else None
        except (OSError, subprocess.SubprocessError, ValueError):
            return None


def valgrind_jit_target(valgrind: str, env: Mapping[str, str]) -> dict[str, str] | None:
    """``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` of the CPU valgrind presents: with them a
    native process compiles numba kernels to what a counted process would compile, under the
    key that process looks up in numba's cache.

    Asked once of a process under valgrind (about 3 s) and kept in perfgate's cache folder,
    keyed by valgrind's version, the interpreter, numba's and llvmlite's versions, the host CPU
    and numba's settings. None without numba, when the probe fails, or when valgrind presents a
    feature the host lacks (code compiled for it could not run natively); a counted process then
    compiles its kernels itself, as before. Never affects a count: a kernel compiled for another
    key is not loaded.
    """
    host = _host_jit_key(env)
    if host is None:
        return None
    key, host_features = host
    digest = hashlib.sha256(json.dumps([valgrind_version(valgrind), key]).encode()).hexdigest()[:16]
    kept = _cache_folder(env) / f"valgrind-numba-cpu-{digest}.json"
    target = None
    with contextlib.suppress(OSError, ValueError):
        target = _jit_env(json.loads(kept.read_text()))
    if target is None:
        target = _probe_jit_target(valgrind, env)
        if target is None:
            return None
        with contextlib.suppress(OSError):  # written whole or not at all
            kept.parent.mkdir(parents=True, exist_ok=True)
            staged = kept.with_name(f".{kept.name}.{os.getpid()}")
            staged.write_text(json.dumps(target, sort_keys=True))
            staged.replace(kept)
    presented = {f[1:] for f in target["NUMBA_CPU_FEATURES"].split(",") if f.startswith("+")}
    return target if presented <= host_features else None

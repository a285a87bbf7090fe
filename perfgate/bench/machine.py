"""This machine: its hardware (fingerprinted) and the software a run is measured with.

The fingerprint (:func:`perfgate.core.machine.hardware_fingerprint`) covers CPU model,
logical cores, total memory (GiB), architecture and GPU model: what makes timings differ
the way another machine would. Software — Python, torch, numpy, the OS distribution, the
GPU driver — is collected apart (:func:`collect_software`) and recorded in the run, so an
upgrade is compared against the baseline and reported as an environment change instead of
making the run a stranger to its own machine. Hostname is left out on purpose: identical
CI runners must share a baseline. Torch is never imported here; its version comes from the
installed package metadata.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from perfgate.core.machine import hardware_fingerprint

__all__ = ["collect_machine", "collect_software", "fingerprint_of"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _os_name() -> str:
    # the distribution, not the kernel build: runners of one image share a baseline
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME", platform.system())
    except OSError:
        return platform.system()


def _memory_gib() -> int:
    try:
        import psutil

        total: int = psutil.virtual_memory().total
        return round(total / 2**30)
    except Exception:  # psutil missing or unreadable /proc: leave it out rather than fail a benchmark
        return 0


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@cache  # one nvidia-smi call for both the machine and the software record
def _gpus() -> tuple[str | None, str | None]:
    if shutil.which("nvidia-smi") is None:
        return None, None
    try:
        out = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            )
            .stdout.strip()
            .splitlines()
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    if not out:
        return None, None
    names = sorted({line.split(",")[0].strip() for line in out})
    driver = out[0].split(",")[-1].strip()
    return f"{len(out)} x {' / '.join(names)}", driver


def fingerprint_of(details: dict[str, Any]) -> str:
    """Stable 16-hex-digit hash of the hardware fields of ``details``."""
    return hardware_fingerprint(details)


def collect_machine() -> dict[str, Any]:
    """Describe this machine's hardware; includes ``fingerprint``."""
    gpu, _ = _gpus()
    details: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "memory_gib": _memory_gib(),
        "arch": platform.machine(),
        "gpu": gpu,
        "hostname": platform.node(),
    }
    details["fingerprint"] = fingerprint_of(details)
    return details


def collect_software() -> dict[str, str]:
    """The versions a run here is measured with; a component that is absent is left out."""
    _, driver = _gpus()
    found = {
        "python": platform.python_version(),
        "torch": _package_version("torch"),
        "numpy": _package_version("numpy"),
        "os": _os_name(),
        "gpu_driver": driver,
    }
    return {name: version for name, version in found.items() if version}

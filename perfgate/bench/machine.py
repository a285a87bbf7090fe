"""The machine fingerprint: what makes timings comparable, hashed.

The fingerprint covers CPU model, logical cores, total memory (GiB), OS and architecture,
Python and torch versions, and GPU model and driver where present. Hostname is left out on
purpose: identical CI runners must share a baseline. Torch is never imported here; its
version comes from the installed package metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["collect_machine", "fingerprint_of"]

_IDENTITY = ("cpu", "cores", "memory_gib", "os", "arch", "python", "torch", "gpu", "gpu_driver")


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

        return round(psutil.virtual_memory().total / 2**30)
    except Exception:  # psutil missing or unreadable /proc: leave it out rather than fail a benchmark
        return 0


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


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
    """Stable 16-hex-digit hash of the identity fields of ``details``."""
    identity = {key: details.get(key) for key in _IDENTITY}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def collect_machine() -> dict[str, Any]:
    """Describe this machine; includes ``fingerprint``."""
    gpu, driver = _gpus()
    details: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "memory_gib": _memory_gib(),
        "os": _os_name(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "torch": _package_version("torch"),
        "gpu": gpu,
        "gpu_driver": driver,
        "hostname": platform.node(),
    }
    details["fingerprint"] = fingerprint_of(details)
    return details

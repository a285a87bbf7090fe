"""Running perfgate in a fresh process and reading its peak resident memory."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the parent across
# fork and exec, so a child of a large pytest process would report the parent's size
_WRAPPER = """
import re, sys
from perfgate.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
with open("/proc/self/status") as status:
    peak = re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)
print(f"\\nPEAK_RSS_KB={peak}", file=sys.stderr)
sys.exit(code)
"""


@dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str  # without the peak-RSS line
    peak_rss_mb: float


def perfgate(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Finished:
    """``perfgate ARGS`` in a new interpreter; its exit code, output and peak RSS."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    lines = proc.stderr.rstrip("\n").split("\n")
    peak = 0.0
    if lines and lines[-1].startswith("PEAK_RSS_KB="):
        peak = int(lines.pop().split("=", 1)[1]) / 1024
    return Finished(proc.returncode, proc.stdout, "\n".join(lines).strip("\n"), peak)


def one_line_error(err: str) -> None:
    """An expected error: one line on stderr, no traceback, never "internal error"."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err

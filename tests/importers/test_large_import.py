"""A real suite's pytest-benchmark file (300 MB, 7 million rounds) is imported with the default
limits in bounded memory, into a run file of about a megabyte (perfgate.importers._stream).

Regression for the 300 MB files of a 64-benchmark suite: refused by the 64 MiB limit, and with the
limit raised, 1.1-1.2 GB of memory and a 198 MB run file.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = 64
ROUNDS = 110_000  # per benchmark: 7 million in all, as the suite's file had
LIMIT_BYTES = 500 << 20

# the child reads its own peak (VmHWM) and address space (VmPeak): getrusage of a child of pytest
# would carry the parent's size over
_CHILD = """
import re, sys
from perfgate.cli import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    text = status.read()
peaks = {k: int(re.search(k + r":\\s+(\\d+) kB", text).group(1)) for k in ("VmHWM", "VmPeak")}
print(f"PEAKS_KB={peaks['VmHWM']},{peaks['VmPeak']}", file=sys.stderr)
sys.exit(code)
"""


def _write_suite(path: Path) -> np.ndarray:
    """A pytest-benchmark file laid out as pytest-benchmark writes it (4-space indent, a round a
    line), written as a stream; every benchmark's rounds are one block of 110,000 timings."""
    rng = np.random.default_rng(0)
    rounds = 1e-6 * rng.lognormal(0.0, 0.1, ROUNDS)
    block = ",\n".join("                    " + repr(v) for v in rounds.tolist())
    head = {"machine_info": {"node": "ci", "machine": "x86_64", "python_version": "3.11.7", "system": "Linux"},
            "commit_info": {"id": "abc123", "branch": "main", "dirty": False}}  # fmt: skip
    with path.open("w") as f:
        f.write(json.dumps(head, indent=4)[:-2] + ',\n    "benchmarks": [\n')
        for i in range(BENCHMARKS):
            f.write(f'        {{\n            "group": null,\n            "name": "test_case_{i}",\n')
            f.write(f'            "fullname": "bench/test_cases.py::test_case_{i}",\n')
            f.write('            "params": null,\n            "extra_info": {},\n            "stats": {\n')
            f.write(f'                "min": {float(rounds.min())!r},\n                "rounds": {ROUNDS},\n')
            f.write('                "data": [\n' + block + "\n                ]\n            }\n        }")
            f.write(",\n" if i < BENCHMARKS - 1 else "\n")
        f.write('    ],\n    "datetime": "2026-12-01T10:00:00.000000+00:00",\n    "version": "4.0.0"\n}\n')
    return rounds


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


@pytest.mark.slow
def test_a_real_suites_file_is_imported_with_default_limits_in_bounded_memory(tmp_path):
    source = tmp_path / "suite.json"
    rounds = _write_suite(source)
    assert source.stat().st_size > 300e6
    out = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_MAX_")}
    # one BLAS thread: its per-thread buffers are address space an import never uses
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, "import", "pytest-benchmark", str(source), "--output", str(out)],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_limit_memory,  # the address space, under which the old import died at once
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    peak_kb, address_kb = (int(v) for v in done.stderr.rsplit("PEAKS_KB=", 1)[1].split(","))
    assert peak_kb < LIMIT_BYTES >> 10 and address_kb < LIMIT_BYTES >> 10
    assert out.stat().st_size < 3 << 20  # a few MB: 64 metrics of 1,001 values
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 5 and len(doc["metrics"]) == BENCHMARKS
    metric = doc["metrics"]["test_case_7_time_us"]
    assert metric["sizes"] == [ROUNDS] and len(metric["samples"]) == 1001
    assert metric["samples"][500] == pytest.approx(float(np.median(rounds)) * 1e6, rel=1e-12)
    assert metric["samples"][-1] == pytest.approx(float(rounds.max()) * 1e6, rel=1e-12)

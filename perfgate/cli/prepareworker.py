"""The native pass of ``--measure counts``: the stages' set-ups, run once per revision without valgrind.

Started by :mod:`perfgate.orchestrate.counts` as ``python -m perfgate.cli.prepareworker``
(no valgrind) before the counted processes of one revision. It reads the same JSON job as
:mod:`perfgate.cli.countworker` plus ``prepared`` (the folder to save into) and ``compile``,
sets the stages up in order up to the last one that declares ``prepares``
(:func:`perfgate.bench.counting.prepare_stages`), with ``compile`` and a suite that imports
numba every stage, then calls each counted stage once (numba compiles its cached kernels for
the CPU that ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` name: valgrind's), and writes
``{"prepared": [stage names], "called": [stage names]}`` to its result file: ``prepared``
empty when no stage prepares, in which case the counted processes get no folder.

A stage that raises ends the process with exit 2 and, as the last line on standard error,
``ExceptionType: message``; the progress file says which stage's set-up it was in.

Internal: shared with ``orchestrate``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from perfgate.cli import guarded

__all__ = ["main"]


def main() -> int:
    def work() -> int:
        from perfgate.bench.counting import prepare_stages
        from perfgate.cli.countworker import logged, read_job
        from perfgate.runfile import write_text_atomic

        job, options = read_job()
        folder = Path(job["prepared"])
        # only a suite that imports numba has kernels to compile (its modules are imported by now)
        compile_calls = bool(job.get("compile", False)) and "numba" in sys.modules
        prepared, called = logged(
            job, lambda progress: prepare_stages(options, folder, progress, compile_calls=compile_calls)
        )
        write_text_atomic(Path(job["output"]), json.dumps({"prepared": prepared, "called": called}, sort_keys=True))
        return 0

    return guarded("bench", work)


if __name__ == "__main__":
    sys.exit(main())

"""The native pass of ``--measure counts``: the stages' set-ups, run once per revision without valgrind.

Started by :mod:`perfgate.workers.counts` as ``python -m perfgate.workers.prepare``
(no valgrind) before the counted processes of one revision. It reads the same JSON job as
:mod:`perfgate.workers.count` plus ``prepared`` (the folder to save into) and ``compile``,
sets the stages up in order up to the last one that declares ``prepares``
(:func:`perfgate.bench.counting.prepare_stages`), with ``compile`` and a suite that imports
numba every stage, then calls each counted stage once (numba compiles its cached kernels for
the CPU that ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` name: valgrind's), and writes
``{"prepared": [stage names], "called": [stage names]}`` to its result file: ``prepared``
empty when no stage prepares, in which case the counted processes get no folder.

A stage that raises ends the process with exit 2 and, as the last line on standard error,
``ExceptionType: message``; the progress file says which stage's set-up it was in.

Internal: started by name (``python -m``), in each revision's tree by ``perfgate ab --measure counts``;
not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfgate.workers.protocol import logged, read_job, run_worker, write_result

__all__ = ["main"]


def main() -> int:
    def work() -> int:
        from perfgate.bench.counting import prepare_stages
        from perfgate.workers.count import count_options

        job = read_job()
        options = count_options(job)
        folder = Path(job["prepared"])
        # only a suite that imports numba has kernels to compile (its modules are imported by now)
        compile_calls = bool(job.get("compile", False)) and "numba" in sys.modules
        prepared, called = logged(
            job["progress"], lambda progress: prepare_stages(options, folder, progress, compile_calls=compile_calls)
        )
        write_result(job["output"], {"prepared": prepared, "called": called})
        return 0

    return run_worker("bench", work)


if __name__ == "__main__":
    sys.exit(main())

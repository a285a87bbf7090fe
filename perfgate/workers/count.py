"""One counted worker process of ``perfgate bench --measure counts``, run under valgrind.

Started by :mod:`perfgate.workers.counts` as
``valgrind --tool=callgrind ... python -m perfgate.workers.count``. It reads its job as
one JSON object on standard input (model, suite, stage modules, data, the random seed, params, warmup,
calls, the native pass's folder of set-up products if there is one, and the paths of its result
and progress files: :mod:`perfgate.workers.protocol`), counts the stages
(:func:`perfgate.bench.counting.count_stages`) and writes what the coordinator needs to
read callgrind's dumps. It records nothing and pushes nothing.

A stage that raises ends the process with exit 2 and, as the last line on standard error,
``stage NAME: ExceptionType: message``; the progress file says which step it was in.

Internal: started by name (``python -m``), in each revision's tree by ``perfgate ab --measure counts``;
not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import PerfgateError
from perfgate.workers.protocol import logged, read_job, run_worker, write_result

if TYPE_CHECKING:
    from perfgate.bench.counting import CountOptions

__all__ = ["count_options", "main"]


def count_options(job: dict[str, Any]) -> CountOptions:
    """The counting options of a counted job, with its stages loaded (shared with the native
    pass, :mod:`perfgate.workers.prepare`)."""
    from perfgate.bench.counting import CountOptions
    from perfgate.workers.stages import load_stages

    load_stages(list(job["stages_module"]), job["suite"])
    return CountOptions(
        model=job["model"],
        suite=job["suite"],
        data_path=Path(job["data"]) if job["data"] else None,
        seed=int(job["seed"]),
        params=dict(job["params"]),
        warmup=job["warmup"],
        calls=int(job["calls"]),
        count_all=bool(job.get("count_all", False)),
        prepared=Path(job["prepared"]) if job.get("prepared") else None,
    )


def main() -> int:
    def work() -> int:
        from perfgate.bench.callgrind import Callgrind, presented_isa
        from perfgate.bench.counting import count_stages

        job = read_job()
        options = count_options(job)
        switch = Callgrind()
        if not switch.running():
            raise PerfgateError("the counted worker must run under valgrind --tool=callgrind")
        result = logged(job["progress"], lambda progress: count_stages(options, switch, progress))
        result["isa"] = presented_isa()
        write_result(job["output"], result)
        return 0

    return run_worker("bench", work)


if __name__ == "__main__":
    sys.exit(main())

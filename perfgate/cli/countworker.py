"""One counted worker process of ``perfgate bench --measure counts``, run under valgrind.

Started by :mod:`perfgate.orchestrate.counts` as
``valgrind --tool=callgrind ... python -m perfgate.cli.countworker``. It reads its options as
one JSON object on standard input (model, suite, stage modules, data, the random seed, params, warmup,
calls, the native pass's folder of set-up products if there is one, and the paths of its result
and progress files), counts the stages
(:func:`perfgate.bench.counting.count_stages`) and writes what the coordinator needs to
read callgrind's dumps. It records nothing and pushes nothing.

A stage that raises ends the process with exit 2 and, as the last line on standard error,
``stage NAME: ExceptionType: message``; the progress file says which step it was in.

Internal: shared with ``orchestrate``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from perfgate.cli import guarded
from perfgate.errors import PerfgateError

T = TypeVar("T")

if TYPE_CHECKING:
    from perfgate.bench.counting import CountOptions

__all__ = ["main", "read_job"]


def read_job() -> tuple[dict[str, Any], CountOptions]:
    """The job on standard input and its options, with the stage modules imported (shared with
    the native pass, :mod:`perfgate.cli.prepareworker`)."""
    from perfgate.bench.counting import CountOptions
    from perfgate.cli._bench import _import_stage_modules
    from perfgate.suites import find, import_stages

    try:
        job = json.loads(sys.stdin.read())
    except json.JSONDecodeError as exc:
        raise PerfgateError(f"worker options on standard input are not JSON: {exc}") from None
    _import_stage_modules(list(job["stages_module"]))
    suite = find(job["suite"])
    if suite is not None:  # a declared suite registers its stages on import (perfgate.suites)
        import_stages(suite)
    options = CountOptions(
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
    return job, options


def logged(job: dict[str, Any], step: Callable[[Callable[[str], None]], T]) -> T:
    """Run ``step`` with a progress callback that appends to the job's progress file (so a
    process that dies names where it was); an error of the user's stage becomes one line."""
    with open(job["progress"], "a", encoding="utf-8") as log:

        def progress(line: str) -> None:
            log.write(line + "\n")
            log.flush()

        try:
            return step(progress)
        except PerfgateError:
            raise
        except Exception as exc:  # the user's stage, not perfgate: say which and what
            text = " ".join(str(exc).split()) or "(no message)"
            raise PerfgateError(f"{type(exc).__name__}: {text}") from None


def main() -> int:
    def work() -> int:
        from perfgate.bench.callgrind import Callgrind, presented_isa
        from perfgate.bench.counting import count_stages
        from perfgate.runfile import write_text_atomic

        job, options = read_job()
        switch = Callgrind()
        if not switch.running():
            raise PerfgateError("the counted worker must run under valgrind --tool=callgrind")
        result = logged(job, lambda progress: count_stages(options, switch, progress))
        result["isa"] = presented_isa()
        write_text_atomic(Path(job["output"]), json.dumps(result, sort_keys=True))
        return 0

    return guarded("bench", work)


if __name__ == "__main__":
    sys.exit(main())

"""One worker process of ``perfgate bench --processes N`` (started by :mod:`perfgate.orchestrate.workers`).

It reads its options as one JSON object on standard input — the options the parent parsed
(:func:`perfgate.cli._bench.worker_options`), never a copy of the parent's command line — and
measures one model once into the run file it is given. It records nothing in a store and
pushes nothing, whatever ``PERFGATE_STORE`` or a configuration file say: the parent records
and pushes the combined run, once.
"""

from __future__ import annotations

import json
import sys

from perfgate.cli import guarded
from perfgate.errors import PerfgateError

__all__ = ["main"]


def main() -> int:
    def work() -> int:
        from perfgate.cli._bench import run_worker

        try:
            options = json.loads(sys.stdin.read())
        except json.JSONDecodeError as exc:
            raise PerfgateError(f"worker options on standard input are not JSON: {exc}") from None
        return run_worker(options)

    return guarded("bench", work)


if __name__ == "__main__":
    sys.exit(main())

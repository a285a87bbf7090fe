"""One bench worker process of ``perfgate bench --processes N`` (started by :mod:`perfgate.workers.repeat`).

It reads its job as one JSON object on standard input (:class:`~perfgate.workers.measure.BenchJob`:
the options the parent parsed, never a copy of the parent's command line) and measures one model
once into the run file it is given. It records nothing in a store and pushes nothing, whatever
``PERFGATE_STORE`` or a configuration file say: the parent records and pushes the combined run, once.
"""

from __future__ import annotations

import sys

from perfgate.workers.protocol import progress_log, read_job, run_worker

__all__ = ["main", "measure_job"]


def measure_job(job: object) -> int:
    """Measure one model once as the JSON ``job`` asks (:meth:`BenchJob.to_json
    <perfgate.workers.measure.BenchJob.to_json>`), each step written to its progress file as it begins."""
    from perfgate.bench.provenance import collect
    from perfgate.runfile import save_run
    from perfgate.workers.measure import BenchJob, measure_model, resolved_device
    from perfgate.workers.stages import load_stages

    bench = BenchJob.from_json(job)
    options = bench.options
    with progress_log(bench.progress) as write:

        def began(what: str, done: int = 0, total: int = 0) -> None:
            write(what)

        began("import of the stages modules and set-up of the suite")
        load_stages(options.stages_modules, options.suite)
        options = resolved_device(options)
        made = collect(options.git_commit, options.branch)
        result = measure_model(
            options,
            bench.model,
            machine=dict(made.machine),
            git=made.git,
            run_id=made.run_id,
            created_at=made.created_at,
            out=bench.output,
            progress=began,
        )
    save_run(bench.output, result)
    return 0


def main() -> int:
    return run_worker("bench", lambda: measure_job(read_job()))


if __name__ == "__main__":
    sys.exit(main())

"""Orchestration above the measurement layer: commands that start other perfgate processes.

:mod:`perfgate.orchestrate.workers` runs ``perfgate bench`` in worker processes (one model,
options handed over explicitly) and :mod:`perfgate.orchestrate.counts` runs counted processes
under callgrind (``perfgate bench --measure counts`` and ``perfgate ab --measure counts``), each
with a memory layout drawn by :mod:`perfgate.ab.layout`. Both know how perfgate's own processes
are started, which :mod:`perfgate.bench` (timers, samplers, the stage registry) does not need to.
The timed A/B engine of ``perfgate ab``, resident workers and its fallback, is :mod:`perfgate.ab`.
"""

__all__: list[str] = []

"""Orchestration above the measurement layer: commands that start other perfgate processes.

:mod:`perfgate.orchestrate._workers` runs ``perfgate bench`` in worker processes (one model,
options handed over explicitly) and :mod:`perfgate.orchestrate._ab` measures two git
revisions alternately. Both know how perfgate's own processes are started, which
:mod:`perfgate.bench` (timers, samplers, the stage registry) does not need to.
"""

__all__: list[str] = []

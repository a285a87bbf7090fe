"""perfgate's own worker processes: what runs in them, how they are started, and how they are driven.

What is where:

* the worker entry modules, each started by name (``python -m``), in its revision's own tree when
  ``perfgate ab`` measures two revisions: :mod:`perfgate.workers.bench` (one ``bench --processes``
  worker), :mod:`perfgate.workers.count` (one counted process under callgrind),
  :mod:`perfgate.workers.prepare` (the native pass of ``--measure counts``) and
  :mod:`perfgate.workers.resident` (the resident A/B worker, which answers requests over its pipes);
* :mod:`perfgate.workers.protocol` — the job on standard input, the progress and result files, the
  error line, which every worker that runs once speaks;
* :mod:`perfgate.workers.spawn` — the one way they are started and the owner that ends them all at
  once (an error, Ctrl-C, SIGTERM), with the deadline of every measuring process;
* :mod:`perfgate.workers.layout` — the memory layout each worker is started with, drawn at random;
* :mod:`perfgate.workers.stages` — the stages modules and the suite's stages, loaded one way in every
  process that measures;
* :mod:`perfgate.workers.measure` — one model measured once in this process, from
  ``perfgate bench``'s options;
* :mod:`perfgate.workers.repeat` — ``bench --processes``: bench workers one after another, their
  runs combined;
* :mod:`perfgate.workers.counts` — ``--measure counts``: counted processes under callgrind, side
  by side, and their dumps turned into a run.

It sits above the measurement layer (:mod:`perfgate.bench`) and below the use cases
(:mod:`perfgate.app`) and ``perfgate ab``'s engine (:mod:`perfgate.ab`), which start its workers.
"""

__all__: list[str] = []

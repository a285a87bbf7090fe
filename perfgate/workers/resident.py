"""A resident benchmark worker: set the stages up once, then serve timed calls over a pipe.

``perfgate ab`` starts one such worker per revision and pair (``python -m
perfgate.workers.resident`` in that revision's tree, so it imports that revision's code;
:mod:`perfgate.workers.spawn`) and
asks both workers of a pair, alternately, for short blocks of timed calls
(:mod:`perfgate.ab.resident`). The worker does nothing on its own.

The protocol (version :data:`PROTOCOL_VERSION`) is one JSON object per line. The worker
speaks first and answers every request with one line:

* ``{"protocol": "perfgate-resident", "version": 1, "pid": …}`` — the greeting;
* ``{"op": "setup", "suite": …, "model": …, "stages_modules": […], "seed": 0, "device":
  "cpu", "data": null, "params": {…}, "warmup_time": 0.05}`` → ``{"ok": true, "stages":
  [{"name", "metric", "unit", "typical_s", "throughput_metric", "items_per_call",
  "memory_metric"}, …], "memory": {metric: MB}}``: imports the stage modules, runs every
  stage's set-up and warm-up in registration order (:func:`perfgate.bench.runner.prepare`),
  times a few more calls for ``typical_s`` and measures memory once (one value per process
  is enough: memory is not noisy); with ``"progress": true`` in the request the worker first
  sends ``{"progress": "import", "module": NAME}`` before it imports each stage module,
  ``{"progress": "setup", "stage": NAME}`` before each stage's set-up and ``{"progress":
  "calls", "stage": NAME}`` before its first calls, so that a coordinator whose deadline passes
  can say which module or stage hung and where (a coordinator that does not ask gets none);
* ``{"op": "time", "stage": NAME, "calls": K}`` → ``{"ok": true, "seconds": [K floats]}``:
  K timed calls of one stage, each timed on its own as the runner times them; with
  ``"encoding": "f64"`` in the request the reply is ``{"ok": true, "seconds_f64": "…"}``, the
  same K floats as base64 of native float64 (the coordinator runs on the same machine): for
  a block of 6,000 calls about a tenth of the cost of JSON numbers, which both the measured
  worker and the coordinator spend between blocks (a coordinator that does not ask gets numbers);
  with ``"rusage": true`` in the request the reply also holds ``"rusage": {"minflt": …,
  "majflt": …, "nivcsw": …}``, the worker's minor and major page faults and involuntary context
  switches over the block (``getrusage``, every thread of the process; absent where the
  platform has none), which the coordinator sums per stage and side;
* ``{"op": "profile", "stage": NAME, "instrument": "auto", "seconds": 1.0, "min_calls": 3,
  "warmup": 1}`` →
  ``{"ok": true, "profile": {…}, "notes": […]}``: the stage's calls under a profiler
  (:mod:`perfgate.profile`; ``instrument`` one of ``auto``, ``sampling``, ``torch``,
  ``bytecodes``), its folded stacks as :func:`perfgate.core.profiles.profile_record` writes
  them; a profiler that is not installed is ``{"ok": false, "error": …, "missing": true}``. A
  worker from before this op answers ``unknown op``, which the coordinator says in one line;
* ``{"op": "exit"}`` → ``{"ok": true}``, and the worker ends.

An expected failure is answered ``{"ok": false, "error": "one line"}``; the worker then
waits for ``exit``. Anything the stages print goes to stderr: the protocol owns stdout.
"""

from __future__ import annotations

import array
import base64
import contextlib
import dataclasses
import functools
import gc
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import IO, Any

from perfgate.errors import PerfgateError
from perfgate.workers.stages import load_stages

__all__ = ["PROTOCOL", "PROTOCOL_VERSION", "Worker", "main"]

PROTOCOL = "perfgate-resident"
# History: 1 — setup / time / exit; later, setup's optional "progress" lines (only when asked for),
# then time's optional "encoding": "f64" (packed samples, only when asked for), then setup's "import"
# progress lines (only when asked for), then the optional "profile" op (only when asked for), then
# time's optional "rusage" counts of the block (only when asked for).
PROTOCOL_VERSION = 1
_TYPICAL_TIME = 0.05  # seconds of extra calls after the warm-up that give a stage's typical call time
_MAX_CALLS = 1_000_000


class Worker:
    """The stages of one suite and model, set up in this process."""

    def __init__(self, notify: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.prepared: dict[str, Any] = {}
        self.device = "cpu"
        self.notify = notify  # sends a progress line to the coordinator

    def load(self, req: dict[str, Any]) -> dict[str, Any]:
        """Import the suite's stage modules (:func:`perfgate.workers.stages.load_stages`); one that
        raises, exits or interrupts itself on import is an error answer naming it
        (:mod:`perfgate.usercode`), never the worker's end."""
        notify = self.notify if req.get("progress") is True else None

        def importing(module: str) -> None:
            if notify is not None:
                notify({"progress": "import", "module": module})

        try:
            load_stages(
                list(req.get("stages_modules", [])),
                str(req.get("suite")),
                hint="is it in this revision's tree?",
                field=None,
                on_import=importing,
            )
        except PerfgateError as exc:
            return _error(str(exc))
        return {"ok": True}

    def setup(self, req: dict[str, Any]) -> dict[str, Any]:
        from pathlib import Path

        from perfgate.bench.memory import PipelineMemory
        from perfgate.bench.registry import StageContext, stages_for
        from perfgate.bench.runner import BenchOptions, memory_round, prepare, timed_for

        loaded = self.load(req)
        if not loaded["ok"]:
            return loaded
        suite, model = str(req["suite"]), str(req["model"])
        stages = stages_for(suite, model)
        if not stages:
            modules = ", ".join(req.get("stages_modules", [])) or "none (no --stages-module)"
            return _error(
                f"no stages registered for model {model!r} in suite {suite!r}; modules imported: {modules}; "
                "pass --stages-module MODULE, the module that defines the suite's stages"
            )
        data = req.get("data")
        options = BenchOptions(
            model=model,
            suite=suite,
            data_path=Path(data) if data else None,
            seed=int(req.get("seed", 0)),
            device=str(req.get("device", "cpu")),
            warmup_time=float(req.get("warmup_time", 0.05)),
            # the coordinator's blocks set how many calls are timed: the runner's calibration of a repeat
            # count would only spend calls (for a 2 s training step, 2 s of every worker's set-up)
            repeat=1,
            params=dict(req.get("params", {})),
        )
        self.device = options.device
        ctx = StageContext(
            model=model,
            suite=suite,
            data_path=options.data_path,
            seed=options.seed,
            device=options.device,
            params=dict(options.params),
        )
        described = []
        with _imports_frozen():  # every full collection of the set-ups skips what the imports left
            whole_memory = PipelineMemory()  # after the imports, before the first set-up
            notify = self.notify if req.get("progress") is True else None
            for st in stages:
                reporting = st
                if notify is not None:
                    notify({"progress": "setup", "stage": st.name})
                    reporting = dataclasses.replace(st, setup=_then_calls(st.setup, st.name, notify))
                with whole_memory.setup():
                    p = prepare(reporting, ctx, options)
                    with st.running("its warm-up calls"):
                        spent = sorted(timed_for(p.call, p.sync, _TYPICAL_TIME, 10_000))
                self.prepared[st.name] = p
                described.append(
                    {
                        "name": st.name,
                        "metric": st.metric,
                        "unit": st.unit,
                        "typical_s": spent[len(spent) // 2],
                        "throughput_metric": st.throughput_metric,
                        "items_per_call": st.items_per_call,
                        "memory_metric": st.memory_metric,
                    }
                )
            memory = memory_round(list(self.prepared.values()), whole_memory)
        return {"ok": True, "stages": described, "memory": memory}

    def time(self, req: dict[str, Any]) -> dict[str, Any]:
        from perfgate.bench.runner import time_call

        p = self.prepared.get(str(req.get("stage")))
        if p is None:
            return _error(f"no stage {req.get('stage')!r} is set up in this worker")
        calls = int(req.get("calls", 1))
        if not 1 <= calls <= _MAX_CALLS:
            return _error(f"calls must be between 1 and {_MAX_CALLS}, got {calls}")
        call, sync = p.call, p.sync
        before = _usage() if req.get("rusage") is True else None
        with p.stage.running("its timed calls"):
            seconds = [time_call(call, sync) for _ in range(calls)]
        reply: dict[str, Any] = {"ok": True}
        if before is not None and (after := _usage()) is not None:
            reply["rusage"] = {k: after[k] - before[k] for k in after}
        if req.get("encoding") == "f64":
            reply["seconds_f64"] = base64.b64encode(array.array("d", seconds).tobytes()).decode("ascii")
        else:
            reply["seconds"] = seconds
        return reply

    def profile(self, req: dict[str, Any]) -> dict[str, Any]:
        """Profile one set-up stage (:mod:`perfgate.profile`): ``seconds`` of calls and at least
        ``min_calls``, under ``instrument``; never during timed blocks (the coordinator asks after them)."""
        from perfgate.core.profiles import profile_record
        from perfgate.profile import ProfilerMissing, profile_stage

        p = self.prepared.get(str(req.get("stage")))
        if p is None:
            return _error(f"no stage {req.get('stage')!r} is set up in this worker")
        seconds, min_calls = float(req.get("seconds", 1.0)), int(req.get("min_calls", 3))
        warmup = int(req.get("warmup", 1))  # calls before the profiler starts (0 for a later chunk)
        if not (0 < seconds <= 3600 and 1 <= min_calls <= _MAX_CALLS and 0 <= warmup <= _MAX_CALLS):
            return _error(f"seconds must be in (0, 3600], min_calls in [1, {_MAX_CALLS}] and warmup not negative")
        call, sync = p.call, p.sync

        def once() -> None:
            call()
            if sync is not None:
                sync()

        if req.get("instrument") == "callgrind":
            return self._callgrind(p.stage, once, str(req.get("stage")), str(req.get("out", "")), min_calls, warmup)
        try:
            with p.stage.running("its profiled calls"):
                profile, notes = profile_stage(
                    once,
                    instrument=str(req.get("instrument", "auto")),
                    seconds=seconds,
                    min_calls=min_calls,
                    device=self.device,
                    warmup=warmup,
                )
        except ProfilerMissing as exc:
            return {**_error(str(exc)), "missing": True}
        return {"ok": True, "profile": profile_record(profile), "notes": list(notes)}

    def _callgrind(
        self, stage: Any, once: Callable[[], None], name: str, out: str, calls: int, warmup: int
    ) -> dict[str, Any]:
        """``calls`` calls counted by callgrind (this worker runs under valgrind, instrumentation off until
        now), dumped and read back as each C function's own instructions."""
        from pathlib import Path

        from perfgate.bench.callgrind import Callgrind
        from perfgate.core.profiles import profile_record
        from perfgate.profile.callgrind_functions import NOTE_PYTHON, read_functions

        switch = Callgrind()
        if not switch.running() or not out:
            return _error("the callgrind instrument needs a worker started under valgrind, and its output prefix")
        label = f"profile:{name}"
        switch.label(label)
        with stage.running("its profiled calls"):
            for _ in range(warmup):
                once()
            switch.instrument(True)
            once()  # the first call after instrumenting translates the code again; not counted
            switch.toggle()
            for _ in range(calls):
                once()
            switch.toggle()
            switch.dump(label)
            switch.instrument(False)
        prefix = Path(out)
        dumps = sorted(prefix.parent.glob(f"{prefix.name}.{os.getpid()}.*"), key=lambda f: int(f.suffix[1:] or 0))
        if not dumps:
            return _error(f"callgrind wrote no file beside {out}")
        try:
            profile = read_functions(dumps[-1], calls=calls)
        finally:
            for path in dumps:
                path.unlink(missing_ok=True)
        return {"ok": True, "profile": profile_record(profile), "notes": [NOTE_PYTHON]}


@contextlib.contextmanager
def _imports_frozen() -> Iterator[None]:
    """Keep the objects the imports made out of the full garbage collections while the stages are set up.

    The set-ups collect garbage before every memory reading (``release_free_memory``), and
    with torch and its compiler stack imported each full collection walks some 300,000
    objects: 0.14 s each here, about 0.7 s of a DQN worker's start. Collected once and frozen
    (``gc.freeze``), those objects are skipped; they go back to the oldest generation before
    the first timed call, so the timed calls collect as before.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _then_calls(
    setup: Callable[[Any], Callable[[], object]], name: str, notify: Callable[[dict[str, Any]], None]
) -> Callable[[Any], Callable[[], object]]:
    """``setup``, then a progress line saying that the stage's calls (its warm-up) begin."""

    @functools.wraps(setup)  # its module still names the stage's (Stage.running)
    def wrapped(ctx: Any) -> Callable[[], object]:
        call = setup(ctx)
        notify({"progress": "calls", "stage": name})
        return call

    return wrapped


def _usage() -> dict[str, int] | None:
    """This process's page faults and involuntary context switches so far (all its threads); None where the
    platform has no ``getrusage``."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"minflt": ru.ru_minflt, "majflt": ru.ru_majflt, "nivcsw": ru.ru_nivcsw}


def _error(message: str) -> dict[str, Any]:
    return {"ok": False, "error": message.replace("\n", " ")}


def serve(requests: IO[str], replies: IO[str]) -> int:
    """Answer requests until ``exit`` or end of input; returns the exit status."""

    def send(obj: dict[str, Any]) -> None:
        replies.write(json.dumps(obj, allow_nan=False) + "\n")
        replies.flush()

    send({"protocol": PROTOCOL, "version": PROTOCOL_VERSION, "pid": os.getpid()})
    worker = Worker(notify=send)
    for line in requests:
        try:
            req = json.loads(line)
            op = req.get("op") if isinstance(req, dict) else None
        except json.JSONDecodeError:
            send(_error("a request must be one JSON object per line"))
            continue
        if op == "exit":
            send({"ok": True})
            return 0
        handler = {"setup": worker.setup, "time": worker.time, "profile": worker.profile}.get(str(op))
        if handler is None:
            send(_error(f"unknown op {op!r} (protocol version {PROTOCOL_VERSION})"))
            continue
        try:
            send(handler(req))
        except PerfgateError as exc:  # a stage that raised or exited, named by Stage.running
            send(_error(str(exc)))
        except Exception as exc:  # a stage's own error: said in one line, the traceback on stderr
            traceback.print_exc()
            send(_error(f"{type(exc).__name__}: {exc}"))
    return 0


def main() -> int:
    # the protocol keeps the real stdout; whatever the stages print goes to stderr
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    return serve(sys.stdin, replies)


if __name__ == "__main__":
    sys.exit(main())

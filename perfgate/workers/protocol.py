"""How perfgate talks to a worker process that runs once: the job in, the progress and the result out.

Every such worker (the bench worker of ``bench --processes``, the counted worker and the native
pass of ``--measure counts``) reads its job as one JSON object on standard input
(:func:`read_job`), appends each step it begins to a progress file (:func:`progress_log`), so that
the parent can name the step of a process it killed at its deadline, and writes its result whole or
not at all (:func:`write_result`). An error ends it with exit 2 and one line, the last on standard
error (:func:`run_worker`), which the parent gives as the reason it failed (:func:`last_line`).

The resident A/B worker, which answers requests for as long as it lives, speaks JSON lines over its
pipes instead (:mod:`perfgate.workers.resident`); its failures are told by :func:`last_line` too.

Internal: shared with ``ab``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from perfgate.errors import PerfgateError
from perfgate.guard import run_guarded
from perfgate.runfile import write_text_atomic

__all__ = ["last_line", "logged", "progress_log", "read_job", "run_worker", "write_result"]

T = TypeVar("T")


def read_job() -> dict[str, Any]:
    """The job on standard input: one JSON object."""
    try:
        job = json.loads(sys.stdin.read())
    except json.JSONDecodeError as exc:
        raise PerfgateError(f"worker options on standard input are not JSON: {exc}") from None
    if not isinstance(job, dict):
        raise PerfgateError(f"worker options on standard input must be one JSON object, got {type(job).__name__}")
    return job


def write_result(path: Path | str, result: object) -> None:
    """Write ``result`` as JSON to ``path``, whole or not at all."""
    write_text_atomic(Path(path), json.dumps(result, sort_keys=True))


@contextlib.contextmanager
def progress_log(path: Path | str) -> Iterator[Callable[[str], None]]:
    """A function that appends one line to the progress file ``path`` and flushes it at once."""
    with open(path, "a", encoding="utf-8") as log:

        def write(line: str) -> None:
            log.write(line + "\n")
            log.flush()

        yield write


def logged(progress: Path | str, step: Callable[[Callable[[str], None]], T]) -> T:
    """Run ``step`` with a callback that appends to the progress file (so a process that dies names
    where it was); an error of the user's stage becomes one line."""
    with progress_log(progress) as write:
        try:
            return step(write)
        except PerfgateError:
            raise
        except Exception as exc:  # the user's stage, not perfgate: say which and what
            text = " ".join(str(exc).split()) or "(no message)"
            raise PerfgateError(f"{type(exc).__name__}: {text}") from None


def last_line(text: str) -> str:
    """The line of a process's stderr that says what went wrong: a traceback's exception, else the last."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no output"
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:  # the exception line is the first unindented line after the last "Traceback"
        raised = [line for line in lines[starts[-1] + 1 :] if not line[0].isspace()]
        if raised:
            return raised[0].strip()
    return lines[-1].strip()


def run_worker(name: str, work: Callable[[], int]) -> int:
    """Run a worker's ``work`` as a perfgate command runs (:func:`perfgate.guard.run_guarded`): an error is
    one line on stderr, ``perfgate NAME: error: ...``, and exit 2; Ctrl-C exits 130 and SIGTERM 143."""
    return run_guarded(name, work)

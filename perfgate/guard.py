"""How a perfgate process ends: the error handling that every command and every worker process runs under.

An expected error (:class:`~perfgate.errors.PerfgateError`) is one line on standard error,
``perfgate NAME: error: ...``, and exit 2; a failed write of the standard streams (a full disk,
a closed pipe) is one line too; an interrupt is not an error: Ctrl-C (SIGINT) exits 130 and
SIGTERM 143, the shell's 128 + the signal's number, after the clean-up of what was made ran
(``docs/design.md`` §4); anything else is a bug, printed with its traceback, and exit 2, never 0
(pass) nor 1 (regression). The command line (:func:`perfgate.cli.guarded`) adds the masking of
its store URLs' secrets; a worker process (:func:`perfgate.workers.protocol.run_worker`) is given
no store URL.

Internal: shared with ``cli``, ``workers``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from types import FrameType

from perfgate.errors import EXIT_ERROR, PerfgateError, os_error_text
from perfgate.safe.text import one_line

__all__ = ["run_guarded"]


def _unchanged(text: str) -> str:
    return text


@contextlib.contextmanager
def _cancellation_as_interrupt() -> Iterator[list[int]]:
    """Let SIGTERM (a CI job's cancellation) unwind like Ctrl-C, so that what the process made is
    removed and its own worker processes ended; yields the signal that came (SIGINT unless noted)."""
    came: list[int] = [signal.SIGINT]
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield came  # only the main thread handles signals; an ignored SIGTERM, or a caller's handler, stays
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        came[0] = signal.SIGTERM
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield came
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stream_failed(name: str, exc: OSError) -> int:
    """An OSError that reached here: writing the standard streams failed (the files perfgate
    writes raise :class:`~perfgate.errors.OutputError` themselves)."""
    if sys.stdout is sys.__stdout__ and sys.stdout is not None:
        # what is left in the buffer cannot be written either; point fd 1 at /dev/null so
        # that the interpreter's own flush at exit does not print a second error
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        where = f" ({exc.filename})" if exc.filename else " (standard output)"
        print(f"perfgate {name}: error: cannot write{where}: {os_error_text(exc)}", file=sys.stderr)
    return EXIT_ERROR


def run_guarded(name: str, work: Callable[[], int], *, mask: Callable[[str], str] = _unchanged) -> int:
    """Run ``work`` as the perfgate process ``name`` and return its exit code (module docstring);
    ``mask`` hides secrets in what is printed of an error."""
    with _cancellation_as_interrupt() as came:
        try:
            code = work()
            sys.stdout.flush()  # a full disk or a closed pipe on stdout is an error of this process, not of exit
            return code
        except PerfgateError as exc:
            print(f"perfgate {name}: error: {mask(one_line(mask(str(exc))))}", file=sys.stderr)
            return EXIT_ERROR
        except OSError as exc:  # stdout or stderr on a full disk, a closed pipe; never a traceback
            return _stream_failed(name, exc)
        except KeyboardInterrupt:
            with contextlib.suppress(OSError, ValueError):
                print(f"perfgate {name}: interrupted ({signal.Signals(came[0]).name})", file=sys.stderr)
            return 128 + came[0]
        except Exception:  # a crash is never 0 (pass) and never 1 (regression)
            print(mask(traceback.format_exc()), end="", file=sys.stderr)  # a URL in it keeps its password hidden
            print(f"perfgate {name}: internal error (a bug in perfgate); exit code 2", file=sys.stderr)
            return EXIT_ERROR

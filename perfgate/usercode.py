"""Importing and running code that is not perfgate's: a suite's declaration, its stages module,
``--stages-module``, a stage's set-up and calls, a suite's hooks.

Such code runs whatever it likes, on import or when called, and perfgate must not take its
behaviour for its own. Three things would otherwise escape as something they are not:

* ``sys.exit(0)`` (or any :class:`SystemExit`) would end perfgate with that status: a check
  that found a regression would pass, with no output and no report;
* an exception would read as "internal error (a bug in perfgate)", with a traceback;
* a :class:`KeyboardInterrupt` the module raises itself would read as the user's Ctrl-C.

:func:`loading` (an import) and :func:`running` (a call: a stage's set-up, warm-up or timed
calls, a hook) turn each into one :class:`~perfgate.errors.PerfgateError` (exit 2) that names
the code, what it did and where (the file and line of the innermost frame of the user's code).
A real interrupt stays a :class:`KeyboardInterrupt`: while the block runs, a handler that calls
the one installed before it notes that SIGINT (Ctrl-C) or SIGTERM came (the commands turn
SIGTERM into :class:`KeyboardInterrupt` too, :func:`perfgate.cli.guarded`). Where no Python
handler was installed (the signal ignored, or the default action that kills the process) or
outside the main thread, a signal cannot raise :class:`KeyboardInterrupt` there, so one that
reaches the block is the code's own.

Code that hangs is not stopped here: worker processes have their deadlines (``perfgate ab``,
``bench --processes``, ``--measure counts``: ``docs/limits.md``), the main process has none.
``os._exit`` cannot be caught at all.

Internal: shared with ``suites``, ``bench``, ``ab`` and ``cli``; not part of the Python API (README,
"Python API").
"""

from __future__ import annotations

import importlib
import signal
import sysconfig
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FrameType, ModuleType

from perfgate.errors import InputError, PerfgateError

__all__ = ["imported", "loading", "running"]

_PERFGATE = Path(__file__).resolve().parent
_PATHS = sysconfig.get_paths()
_INSTALLED = tuple(Path(_PATHS[k]).resolve() for k in ("purelib", "platlib"))
_STDLIB = Path(_PATHS["stdlib"]).resolve()


def _theirs(filename: str) -> bool:
    """Whether a frame is the user's code: not perfgate's (a value it refused), the standard
    library's or the import machinery's (``<frozen importlib._bootstrap>``)."""
    if filename.startswith("<"):
        return False
    path = Path(filename).resolve()
    if path.is_relative_to(_PERFGATE):
        return False
    return any(path.is_relative_to(p) for p in _INSTALLED) or not path.is_relative_to(_STDLIB)


def _where(exc: BaseException) -> str:
    """`` (FILE, line N)``: the innermost frame of ``exc``'s traceback in the user's code, or nothing
    (a module that is not there was never run)."""
    frame = next((f for f in reversed(traceback.extract_tb(exc.__traceback__)) if _theirs(f.filename)), None)
    return f" ({frame.filename}, line {frame.lineno})" if frame is not None else ""


def _text(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


# the signals a command turns into KeyboardInterrupt: Ctrl-C, and a CI's cancellation (perfgate.cli.guarded)
_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _interrupts_noted() -> Iterator[list[bool]]:
    """Yield a flag that becomes true when SIGINT or SIGTERM arrives inside the block; the handler
    already installed for it still runs (and raises :class:`KeyboardInterrupt` as before)."""
    came = [False]
    if threading.current_thread() is not threading.main_thread():
        yield came  # no signal can raise KeyboardInterrupt here (see the module docstring)
        return
    noted: dict[int, tuple[object, Callable[[int, FrameType | None], object]]] = {}
    for signum in _INTERRUPTS:
        previous = signal.getsignal(signum)
        if not callable(previous):
            continue  # ignored, or the default action: it cannot raise KeyboardInterrupt

        def note(
            signum: int, frame: FrameType | None, previous: Callable[[int, FrameType | None], object] = previous
        ) -> None:
            came[0] = True
            previous(signum, frame)

        signal.signal(signum, note)
        noted[signum] = (note, previous)
    try:
        yield came
    finally:
        for number, (ours, before) in noted.items():
            if signal.getsignal(number) is ours:  # code that installed its own handler keeps it
                signal.signal(number, before)


@contextmanager
def _guarded(
    what: str,
    during: str,
    exiting: str,
    *,
    error: type[PerfgateError],
    source: str | None,
    field: str | None,
    advice: str,
    importing: bool,
) -> Iterator[None]:
    """The one guard of :func:`loading` and :func:`running`: ``what`` did something ``during``
    (`` while perfgate imported it``); ``exiting`` is what to do about an exit."""
    with _interrupts_noted() as interrupted:
        try:
            yield
        except PerfgateError:
            raise
        except SystemExit as exc:
            raise error(
                f"{what} called sys.exit({exc.code!r}){during}{_where(exc)}; {exiting}", source=source, field=field
            ) from None
        except KeyboardInterrupt as exc:
            if interrupted[0]:
                raise  # the user pressed Ctrl-C, or the job was cancelled
            raise error(
                f"{what} raised KeyboardInterrupt itself{during} (no Ctrl-C was pressed){_where(exc)}; {advice}",
                source=source,
                field=field,
            ) from None
        except BaseException as exc:  # an error of the user's code, not a bug in perfgate
            if importing and isinstance(exc, ImportError):
                message = f"{what} cannot be imported: {_text(exc)}{_where(exc)}; {advice}"
            else:
                message = f"{what} raised {_text(exc)}{during}{_where(exc)}; {advice}"
            raise error(message, source=source, field=field) from None


def loading(
    what: str,
    *,
    error: type[PerfgateError] = InputError,
    source: str | None = None,
    field: str | None = None,
    advice: str = "fix the module",
) -> AbstractContextManager[None]:
    """Run the block that imports user code ``what`` (``"stages module 'mystages'"``), turning
    whatever it raises, exits or interrupts with into ``error(message, source=, field=)``; the
    message ends with ``advice``, what to do.

    A :class:`~perfgate.errors.PerfgateError` passes through unchanged, and so does a real Ctrl-C.
    """
    return _guarded(
        what,
        " while perfgate imported it",
        'a module perfgate imports must not exit: put its script code under `if __name__ == "__main__":`',
        error=error,
        source=source,
        field=field,
        advice=advice,
        importing=True,
    )


def running(
    what: str,
    *,
    during: str = "",
    error: type[PerfgateError] = InputError,
    source: str | None = None,
    field: str | None = None,
    advice: str = "fix it",
) -> AbstractContextManager[None]:
    """Run the block that calls user code ``what`` (``"stage 'load' of suite 'mine' (module
    mystages)"``), in ``during`` (``"its set-up"``), as :func:`loading` runs an import.

    An exit is never the command's end: its status would read as the command's verdict.
    """
    return _guarded(
        f"{what}, in {during}," if during else what,
        "",
        "a stage or hook must not exit: raise an exception to fail",
        error=error,
        source=source,
        field=field,
        advice=advice,
        importing=False,
    )


def imported(name: str, what: str, *, error: type[PerfgateError] = InputError, field: str | None = None) -> ModuleType:
    """``importlib.import_module(name)`` under :func:`loading`."""
    with loading(what, error=error, field=field):
        return importlib.import_module(name)

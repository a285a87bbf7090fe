"""Importing code that is not perfgate's: a suite's declaration, its stages module, ``--stages-module``.

Such a module runs whatever it likes on import, and perfgate must not take its behaviour for
its own. Three things would otherwise escape as something they are not:

* ``sys.exit(0)`` (or any :class:`SystemExit`) would end perfgate with that status: a check
  that found a regression would pass, with no output and no report;
* an exception would read as "internal error (a bug in perfgate)", with a traceback;
* a :class:`KeyboardInterrupt` the module raises itself would read as the user's Ctrl-C.

:func:`loading` turns each into one :class:`~perfgate.errors.PerfgateError` (exit 2) that names
the module, what it did and where (the file and line of the innermost frame). A real Ctrl-C
stays a :class:`KeyboardInterrupt`: while the module loads, a SIGINT handler that calls the one
installed before it notes that the signal came. Where no Python handler was installed (SIGINT
ignored, or the default action that kills the process) or outside the main thread, a Ctrl-C
cannot raise :class:`KeyboardInterrupt` there, so one that reaches :func:`loading` is the
module's own.

A module that hangs on import is not stopped here: worker processes have their deadlines
(``perfgate ab``), the main process has none. ``os._exit`` cannot be caught at all.

Internal: shared with ``suites``, ``ab`` and ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import importlib
import signal
import sysconfig
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType

from perfgate.errors import InputError, PerfgateError

__all__ = ["imported", "loading"]

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


@contextmanager
def _sigint_noted() -> Iterator[list[bool]]:
    """Yield a flag that becomes true when a SIGINT arrives inside the block; the handler already
    installed still runs (and raises :class:`KeyboardInterrupt` as before)."""
    came = [False]
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield came  # no Ctrl-C can raise KeyboardInterrupt here (see the module docstring)
        return

    def noted(signum: int, frame: FrameType | None) -> None:
        came[0] = True
        previous(signum, frame)

    signal.signal(signal.SIGINT, noted)
    try:
        yield came
    finally:
        if signal.getsignal(signal.SIGINT) is noted:  # a module that installed its own handler keeps it
            signal.signal(signal.SIGINT, previous)


@contextmanager
def loading(
    what: str,
    *,
    error: type[PerfgateError] = InputError,
    source: str | None = None,
    field: str | None = None,
    advice: str = "fix the module",
) -> Iterator[None]:
    """Run the block that imports user code ``what`` (``"stages module 'mystages'"``), turning
    whatever it raises, exits or interrupts with into ``error(message, source=, field=)``; the
    message ends with ``advice``, what to do.

    A :class:`~perfgate.errors.PerfgateError` passes through unchanged, and so does a real Ctrl-C.
    """
    with _sigint_noted() as interrupted:
        try:
            yield
        except PerfgateError:
            raise
        except SystemExit as exc:
            raise error(
                f"{what} called sys.exit({exc.code!r}) while perfgate imported it{_where(exc)}; a module perfgate "
                'imports must not exit: put its script code under `if __name__ == "__main__":`',
                source=source,
                field=field,
            ) from None
        except KeyboardInterrupt as exc:
            if interrupted[0]:
                raise  # the user pressed Ctrl-C
            raise error(
                f"{what} raised KeyboardInterrupt itself while perfgate imported it (no Ctrl-C was pressed)"
                f"{_where(exc)}; {advice}",
                source=source,
                field=field,
            ) from None
        except ImportError as exc:
            raise error(
                f"{what} cannot be imported: {_text(exc)}{_where(exc)}; {advice}", source=source, field=field
            ) from None
        except BaseException as exc:  # an error of the user's code, not a bug in perfgate
            raise error(
                f"{what} raised {_text(exc)} while perfgate imported it{_where(exc)}; {advice}",
                source=source,
                field=field,
            ) from None


def imported(name: str, what: str, *, error: type[PerfgateError] = InputError, field: str | None = None) -> ModuleType:
    """``importlib.import_module(name)`` under :func:`loading`."""
    with loading(what, error=error, field=field):
        return importlib.import_module(name)

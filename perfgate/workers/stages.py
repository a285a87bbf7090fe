"""Loading a suite's stages: the stages modules the user names, then the named suite's own.

Every worker (the bench, counted, preparing and resident ones) registers the stages it runs this
one way, :func:`load_stages`. ``perfgate bench`` itself imports the stages modules the same way
(:func:`import_stage_modules`), and the suite's own stages once it knows the model is one of the
suite's.

Internal: shared with ``app``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.errors import InputError
from perfgate.suites import find, import_stages
from perfgate.usercode import loading

if TYPE_CHECKING:
    from perfgate.core.metrics import SuiteDeclaration

__all__ = ["import_stage_modules", "load_stages"]


def import_stage_modules(
    names: Sequence[str],
    *,
    hint: str | None = None,
    field: str | None = "--stages-module",
    on_import: Callable[[str], None] | None = None,
) -> None:
    """Import ``names`` with the working directory first on ``sys.path``, as ``python -m`` and pytest do.

    The ``perfgate`` script's own folder is what Python puts first, so without this a
    ``mystages.py`` beside the user would need ``PYTHONPATH=.``. ``hint``: what a module that
    cannot be found is told after the reason (default: where perfgate looked); ``on_import`` is
    called with each name before it is imported.
    """
    if not names:
        return
    here = str(Path.cwd())
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    for name in names:
        if on_import is not None:
            on_import(name)
        # a module that raises, exits or interrupts itself on import is an error of its own, exit 2
        with loading(f"stages module {name!r}", field="--stages-module"):
            try:
                importlib.import_module(name)
            except ImportError as exc:
                said = hint or f"perfgate looks for it in the working directory ({here}) and on PYTHONPATH"
                raise InputError(f"cannot import {name!r}: {exc}; {said}", field=field) from None


def load_stages(
    modules: Sequence[str],
    suite: str,
    *,
    hint: str | None = None,
    field: str | None = "--stages-module",
    on_import: Callable[[str], None] | None = None,
) -> SuiteDeclaration | None:
    """Import the stages ``modules`` (:func:`import_stage_modules`), then the stages of ``suite``
    when it is a declared suite (:mod:`perfgate.suites`), which registers them; the declaration,
    or ``None`` for a suite that only the modules register."""
    import_stage_modules(modules, hint=hint, field=field, on_import=on_import)
    declared = find(suite)
    if declared is not None:
        if on_import is not None:
            on_import(declared.stages_module)
        import_stages(declared)
    return declared

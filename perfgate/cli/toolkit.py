"""What a command that an installed package adds to perfgate's command line uses to behave like perfgate's own.

A package adds a command through the ``perfgate.commands`` entry point group (:mod:`perfgate.cli`):
a module with ``HELP`` (its one-line help), ``add_arguments(parser)`` and ``run(args) -> int``. These
give its flags perfgate's help texts and checks: a flag with perfgate's one help text, a removed
spelling that is an error naming the one to use, a number checked against its bounds, and the
terminal console perfgate prints tables with.
"""

from __future__ import annotations

from perfgate.app.numbers import checked_number
from perfgate.cli._flags import add_flag, add_removed_spelling
from perfgate.cli._output import console_for

__all__ = ["add_flag", "add_removed_spelling", "checked_number", "console_for"]

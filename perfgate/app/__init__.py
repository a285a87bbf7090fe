"""perfgate's use cases: what each command does, between the interface and the layers below it.

The command line (and the Python API) parses its options into a request, a frozen dataclass of
typed values, and calls the use case of ``perfgate/app/<name>.py``. The use case reads the
configuration, the run files and the store, decides, and returns a typed result; the interface
prints it and maps it to an exit code. A use case raises :class:`perfgate.errors.PerfgateError`
for what went wrong, writes to standard output only through a writer it is given, and never exits.
"""

__all__: list[str] = []

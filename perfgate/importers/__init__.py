"""Importers: results of other benchmark tools as perfgate runs (``perfgate import``).

One module per format, each with ``FORMAT`` and
``parse(data, *, source, options) -> ImportResult`` over the decoded JSON; :func:`import_file`
reads the file (``.gz`` too), picks the module lazily and adds what a format keeps beside
its results (asv's ``benchmarks.json``). Raw samples are kept wherever the format has
them; where it has only summaries, one sample is imported and the result's notes say so.
Bad input raises :class:`~perfgate.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from perfgate.errors import InputError
from perfgate.importers._common import TIME_UNITS, ImportOptions, ImportResult
from perfgate.runfile import load_json

__all__ = ["FORMATS", "TIME_UNITS", "ImportOptions", "ImportResult", "import_file", "parse_document"]

# format -> module
FORMATS: dict[str, str] = {
    "pytest-benchmark": "perfgate.importers.pytest_benchmark",
    "pyperf": "perfgate.importers.pyperf",
    "asv": "perfgate.importers.asv",
    "hyperfine": "perfgate.importers.hyperfine",
    "google-benchmark": "perfgate.importers.google_benchmark",
}


def _read(path: Path) -> object:
    return load_json(path)  # .gz too, size-capped, strict (perfgate.inputs)


def parse_document(fmt: str, data: object, *, source: str, options: ImportOptions | None = None) -> ImportResult:
    """Import an already decoded document of format ``fmt``."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}", field="format")
    module = importlib.import_module(FORMATS[fmt])
    result: ImportResult = module.parse(data, source=source, options=options or ImportOptions())
    return result


def import_file(fmt: str, path: Path | str, options: ImportOptions | None = None) -> ImportResult:
    """Read ``path``, a result file of format ``fmt`` (a key of :data:`FORMATS`), as a perfgate run.

    A format whose module has ``parse_stream`` (pytest-benchmark) is read as a stream, in
    bounded memory and within ``PERFGATE_MAX_IMPORT_MB`` (:mod:`perfgate.importers._stream`);
    the others are decoded whole within ``PERFGATE_MAX_JSON_MB``.
    """
    path = Path(path)
    options = options or ImportOptions()
    if fmt in FORMATS:
        module = importlib.import_module(FORMATS[fmt])
        if hasattr(module, "parse_stream"):
            from perfgate.importers._stream import open_stream

            with open_stream(path) as handle:
                streamed: ImportResult = module.parse_stream(handle, source=str(path), options=options)
            return streamed
    data = _read(path)
    if fmt == "asv":
        from perfgate.importers import asv

        described = asv.benchmarks_file(path)
        benchmarks = _read(described) if described.is_file() else None
        if benchmarks is not None and not isinstance(benchmarks, dict):
            raise InputError("expected a JSON object of benchmarks", source=str(described))
        return asv.parse(data, source=str(path), options=options, benchmarks=benchmarks)
    return parse_document(fmt, data, source=str(path), options=options)

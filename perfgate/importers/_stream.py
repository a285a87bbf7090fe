"""Reading a large result file as a stream of JSON events, in bounded memory.

A real suite's pytest-benchmark file holds every round of every benchmark: 300 MB for 64
benchmarks and 7 million rounds. Decoded whole it costs about four times that in Python
objects, so the importers whose files grow read them with ijson's C parser (yajl2) instead:
the file is read in 1 MiB chunks, the long arrays of samples go straight into a
:class:`~perfgate.core.reduced.SampleReducer` (8 bytes a sample, at most 16 MiB at once), and
everything else is built into small objects as :func:`perfgate.inputs.parse_json` would
(duplicate keys refused, UTF-8, a byte-order mark skipped).

The size cap stays, as a guard against a compression bomb, but at
:data:`DEFAULT_MAX_IMPORT_MB` (1 GiB) rather than the 64 MiB of a file decoded whole: what a
streamed file costs is time (about 1 s per 100 MB here), not memory. ``PERFGATE_MAX_IMPORT_MB``
changes it (``docs/limits.md``).
"""

from __future__ import annotations

import gzip
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, cast

from perfgate.core.reduced import SampleReducer
from perfgate.core.schema import MAX_SAMPLE
from perfgate.errors import InputError, os_error_text
from perfgate.inputs import limit_from_env, open_regular

__all__ = ["DEFAULT_MAX_IMPORT_MB", "MAX_IMPORT_ENV", "Samples", "max_import_bytes", "open_stream", "stream_document"]

DEFAULT_MAX_IMPORT_MB = 1024
MAX_IMPORT_ENV = "PERFGATE_MAX_IMPORT_MB"
_READ = 1 << 20
_BUFFER = 1 << 16  # events read into a buffer of samples at a time
_MAX_DEPTH = 512  # nesting a streamed file may have (a result file nests about 6 deep)


def max_import_bytes() -> int:
    """The cap on a streamed import's JSON text, in bytes (``PERFGATE_MAX_IMPORT_MB``, default 1 GiB)."""
    return limit_from_env(MAX_IMPORT_ENV, DEFAULT_MAX_IMPORT_MB)


class _Capped:
    """A binary stream that refuses to read past ``limit`` bytes (the cap on JSON text)."""

    def __init__(self, handle: BinaryIO, limit: int, *, source: str, what: str) -> None:
        self._handle = handle
        self._left = limit
        self._limit = limit
        self._source = source
        self._what = what
        self._first = True

    def read(self, size: int = -1) -> bytes:
        want = _READ if size is None or size < 0 else size
        chunk = self._handle.read(min(want, self._left + 1))
        if self._first:
            self._first = False
            if chunk.startswith(b"\xef\xbb\xbf"):  # a byte-order mark, as some Windows tools write
                chunk = chunk[3:]
                self._left -= 3
        self._left -= len(chunk)
        if self._left < 0:
            raise InputError(
                f"{self._what} is larger than the limit of {self._limit / (1 << 20):g} MiB; raise it with "
                f"{MAX_IMPORT_ENV}=<MiB> if the file is meant to be this large",
                source=self._source,
            )
        return chunk


@contextmanager
def open_stream(path: Path) -> Iterator[BinaryIO]:
    """``path`` (``.gz``: decompressed) as a capped binary stream; errors name the file."""
    source = str(path)
    limit = max_import_bytes()
    try:
        with open_regular(path) as handle:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=handle, mode="rb") as unzipped:
                    yield cast(
                        BinaryIO, _Capped(cast(BinaryIO, unzipped), limit, source=source, what="the decompressed JSON")
                    )
            else:
                yield cast(BinaryIO, _Capped(handle, limit, source=source, what="the JSON file"))
    except FileNotFoundError:
        raise InputError("file not found; check the path", source=source) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"cannot read gzip file: {exc}", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read: {os_error_text(exc)}", source=source) from None
    except ValueError as exc:  # a NUL byte in the path
        if isinstance(exc, InputError):
            raise
        raise InputError(f"cannot read: {exc}", source=source) from None


class Samples:
    """An array of samples read as a stream: its values (every one, or the order statistics of the
    bounded form, :mod:`perfgate.core.reduced`) and how many there were."""

    __slots__ = ("count", "values")

    def __init__(self, values: tuple[float, ...], count: int) -> None:
        self.values = values
        self.count = count


def _check(values: array[float], start: int, *, source: str, field: str) -> None:
    import numpy as np

    x = np.frombuffer(values, dtype=float)
    bad = ~np.isfinite(x) | (x < 0) | (x > MAX_SAMPLE)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"expected a finite number >= 0 (at most {MAX_SAMPLE:g}), got {float(x[i])!r}",
            source=source,
            field=f"{field}[{start + i}]",
        )


def _samples(events: Iterator[tuple[str, str, Any]], *, source: str, where: str) -> Samples:
    """The numbers of an array whose ``start_array`` event was just read, up to its ``end_array``.

    The hot loop of a streamed import: per sample, one event unpacked and one append (islice
    bounds the buffer without a count per sample)."""
    reducer = SampleReducer()
    while True:
        buffer = array("d")
        append = buffer.append
        event = "number"
        value: Any = None
        try:
            for _, event, value in islice(events, _BUFFER):
                if event != "number":
                    break
                append(value)
            else:
                event = "number"
        except OverflowError:  # an integer beyond a float
            raise InputError(
                "a number too large for a sample", source=source, field=f"{where}[{reducer.count + len(buffer)}]"
            ) from None
        _check(buffer, reducer.count, source=source, field=where)
        reducer.extend(buffer)
        if event == "number":
            continue  # a full buffer, or the stream ended (ijson then raises on the next read)
        if event != "end_array":
            got = f"a {event.removeprefix('start_')}" if event.startswith("start") else repr(value)
            raise InputError(f"expected a number, got {got}", source=source, field=f"{where}[{reducer.count}]")
        if reducer.count == 0:
            raise InputError("empty list; a benchmark needs at least one sample", source=source, field=where)
        return Samples(*reducer.result())


def stream_document(
    handle: BinaryIO, *, source: str, samples_at: Callable[[str], bool], field_of: Callable[[list[Any]], str]
) -> dict[str, Any]:
    """Decode the JSON object in ``handle``, every array whose prefix ``samples_at`` accepts read
    as :class:`Samples` in bounded memory, everything else as :func:`json.loads` would give it.

    ``field_of(path)`` names an array (its path of keys and indexes) in error messages.
    """
    import ijson

    root: list[Any] = []
    stack: list[Any] = [root]  # containers being built; the last is the innermost
    keys: list[Any] = []  # per open container: the pending key (a map) or the items so far (an array)
    seen: list[set[str] | None] = []

    def put(value: Any) -> None:
        container = stack[-1]
        if isinstance(container, dict):
            container[keys[-1]] = value
        else:
            container.append(value)
            if keys:
                keys[-1] += 1

    try:
        events = ijson.parse(handle, use_float=True, buf_size=_READ)
        for prefix, event, value in events:
            if event == "map_key":
                assert seen[-1] is not None
                if value in seen[-1]:
                    raise InputError(
                        f"duplicate key {value!r} in a JSON object; each key may appear once (the file is ambiguous)",
                        source=source,
                    )
                seen[-1].add(value)
                keys[-1] = value
            elif event == "start_map":
                if len(stack) > _MAX_DEPTH:
                    raise InputError("JSON nested too deeply to read; no perfgate input nests that deep", source=source)
                new: dict[str, Any] = {}
                put(new)
                stack.append(new)
                keys.append(None)
                seen.append(set())
            elif event == "start_array":
                if samples_at(prefix):
                    # the path of keys and indexes down to this array (an array's open item is its last)
                    path = [k if isinstance(c, dict) else k - 1 for c, k in zip(stack[1:], keys, strict=True)]
                    put(_samples(events, source=source, where=field_of(path)))
                    continue
                if len(stack) > _MAX_DEPTH:
                    raise InputError("JSON nested too deeply to read; no perfgate input nests that deep", source=source)
                items: list[Any] = []
                put(items)
                stack.append(items)
                keys.append(0)
                seen.append(None)
            elif event in ("end_map", "end_array"):
                stack.pop()
                keys.pop()
                seen.pop()
            else:
                put(value)
    except InputError:
        raise
    except ijson.JSONError as exc:  # IncompleteJSONError too
        text = _first_line(exc)
        if "integer overflow" in text:  # what yajl says of an integer beyond 64 bits
            raise InputError(
                "a number in the JSON is too long to read (an integer beyond 64 bits); no measurement needs it",
                source=source,
            ) from None
        raise InputError(f"invalid JSON: {text}", source=source) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte offset {exc.start}); JSON must be UTF-8", source=source) from None
    if not root or not isinstance(root[0], dict):
        kind = type(root[0]).__name__ if root else "nothing"
        raise InputError(f"expected a JSON object at the top level, got {kind}", source=source)
    result: dict[str, Any] = root[0]
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(text[0].split()) if text else type(exc).__name__

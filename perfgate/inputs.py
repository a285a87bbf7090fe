"""Reading JSON input with limits: size-capped, streamed, strict.

Every JSON file perfgate reads — run files, baselines, calibration files, the five
importers' formats, gzip-compressed or not — goes through :func:`read_json`:

- **Size cap.** At most :data:`DEFAULT_MAX_JSON_MB` MiB of JSON text (after gzip
  decompression), read in chunks, so a 2 MB gzip that expands to 2 GiB stops at the cap
  instead of filling memory. Decoding JSON costs up to ~16 times its size in Python
  objects, so the cap bounds the peak memory too. Raise it with the environment variable
  ``PERFGATE_MAX_JSON_MB`` (``docs/limits.md``).
- **Depth.** A document nested deeper than Python's recursion allows is an input error,
  not a crash.
- **Duplicate keys** in an object are an error: with "the last one wins", a second
  ``training_step_time_ms`` would silently hide the first.
- Text must be UTF-8.
- **Regular files only.** A FIFO would block until a writer came (perhaps forever),
  ``/dev/zero`` never ends, a directory is no file: each is refused before a byte is read
  (:func:`check_input_file`, which the command line applies to every input it is given).

Every failure is an :class:`~perfgate.errors.InputError` naming the file.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any, BinaryIO, cast

from perfgate.errors import ConfigError, InputError, os_error_text

__all__ = [
    "DEFAULT_MAX_JSON_MB",
    "MAX_JSON_ENV",
    "check_input_file",
    "limit_from_env",
    "max_json_bytes",
    "not_a_file",
    "open_regular",
    "parse_json",
    "read_capped",
    "read_json",
]

DEFAULT_MAX_JSON_MB = 64
MAX_JSON_ENV = "PERFGATE_MAX_JSON_MB"
_CHUNK = 1 << 20


def limit_from_env(name: str, default_mb: int) -> int:
    """A size cap in bytes: the environment variable ``name`` in MiB, else ``default_mb``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default_mb << 20
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"must be a positive number of MiB, got {text!r}", source=f"${name}")
    return int(value * (1 << 20))


def max_json_bytes() -> int:
    """The cap on JSON text, in bytes (``PERFGATE_MAX_JSON_MB``, default 64 MiB)."""
    return limit_from_env(MAX_JSON_ENV, DEFAULT_MAX_JSON_MB)


def read_capped(handle: BinaryIO, limit: int, *, source: str, what: str, env: str | None) -> bytes:
    """At most ``limit`` bytes of ``handle``, read in chunks; more is an :class:`InputError`
    (whose message names ``env``, the variable that raises the limit, if there is one)."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = handle.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        parts.append(chunk)
        if total > limit:
            how = "no such file is meant for it"
            if env:
                how = f"raise it with {env}=<MiB> if the file is meant to be this large"
            raise InputError(f"{what} is larger than the limit of {limit / (1 << 20):g} MiB; {how}", source=source)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def parse_json(raw: bytes, *, source: str) -> object:
    """Decode ``raw`` strictly: UTF-8, no duplicate keys, depth within the recursion limit."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte offset {exc.start}); JSON must be UTF-8", source=source) from None
    if text.startswith("\ufeff"):  # a byte-order mark, as some Windows tools write
        text = text[1:]
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=source) from None
    except _Duplicate as exc:
        raise InputError(
            f"duplicate key {exc.key!r} in a JSON object; each key may appear once (the file is ambiguous)",
            source=source,
        ) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read; no perfgate input nests that deep", source=source) from None
    except ValueError as exc:  # an integer of more digits than int() converts (4,300 by default)
        limit = str(exc).split(":")[0]  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise InputError(
            f"a number in the JSON is too long to read ({limit}); no measurement needs it", source=source
        ) from None


def not_a_file(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file ("a FIFO (named pipe)"); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def check_input_file(path: Path | str, *, flag: str) -> None:
    """Refuse an input that exists and is not a regular file, without opening it (opening a FIFO
    waits for its writer). A path that does not exist passes: the reader says so in its words.

    Raises:
        InputError: naming the path, the flag and what the path is.
    """
    try:
        info = Path(path).stat()
    except (OSError, ValueError):  # missing, unreadable, a NUL byte: the reader reports it
        return
    if (kind := not_a_file(info.st_mode)) is not None:
        raise InputError(f"{flag} is {kind}, not a regular file; give the path of a file", source=str(path))


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; a FIFO is not waited for (``O_NONBLOCK``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        kind = not_a_file(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(f"is {kind}, not a regular file; give the path of a JSON file", source=str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_json(path: Path | str) -> object:
    """Read and decode a JSON file (``.gz``: gzip-compressed) within the size cap."""
    p = Path(path)
    source = str(p)
    limit = max_json_bytes()
    try:
        with open_regular(p) as handle:
            if p.suffix == ".gz":
                with gzip.GzipFile(fileobj=handle, mode="rb") as unzipped:
                    stream = cast(BinaryIO, unzipped)
                    raw = read_capped(stream, limit, source=source, what="the decompressed JSON", env=MAX_JSON_ENV)
            else:
                raw = read_capped(handle, limit, source=source, what="the JSON file", env=MAX_JSON_ENV)
    except FileNotFoundError:
        raise InputError("file not found; check the path", source=source) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"cannot read gzip file: {exc}", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read: {os_error_text(exc)}", source=source) from None
    except ValueError as exc:  # a NUL byte in the path
        raise InputError(f"cannot read: {exc}", source=source) from None
    return parse_json(raw, source=source)

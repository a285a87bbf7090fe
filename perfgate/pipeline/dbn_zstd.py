"""zstd framing of ``.dbn.zst`` files: several frames, strictly decoded.

Databento compresses the whole DBN byte stream (header included) with zstd. Streaming
encoders leave the frame content size unset, some writers split the stream into several
frames, and some frames carry no checksum; all of that is valid. A stream that stops
inside a frame, a failed checksum and bytes after the last frame that are not a frame are
not: each raises :class:`perfgate.errors.DataError` naming the compressed byte offset of
the frame at fault.
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO

import zstandard

from perfgate.errors import DataError

__all__ = [
    "DEFAULT_MAX_DBN_MB",
    "MAX_DBN_ENV",
    "ZSTD_MAGIC",
    "decompress_frames",
    "decompress_stream",
    "is_skippable_frame",
    "max_decompressed_bytes",
]

#: The default cap on a decompressed DBN stream, in MiB, and the variable that raises it.
DEFAULT_MAX_DBN_MB = 1024
MAX_DBN_ENV = "PERFGATE_MAX_DBN_MB"

_READ = 1 << 20  # compressed bytes read from the file at a time
_MAX_RATIO = 1 << 15  # the most one input byte can expand to: a 4-byte RLE block header and byte -> 128 KiB
_MIN_FEED = 64
_MAX_FEED = 1 << 16

#: Magic of a zstd data frame (0xFD2FB528, little-endian).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def is_skippable_frame(head: bytes) -> bool:
    """Whether ``head`` starts with a zstd skippable-frame magic (0x184D2A50-0x184D2A5F).

    Legacy DBZ files begin with one, which is how they are told apart from DBN.
    """
    return len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50


def max_decompressed_bytes() -> int:
    """The cap on a decompressed DBN stream: ``PERFGATE_MAX_DBN_MB`` MiB (default 1024)."""
    text = os.environ.get(MAX_DBN_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_DBN_MB << 20
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise DataError(f"must be a positive number of MiB, got {text!r}", source=f"${MAX_DBN_ENV}")
    return int(value * (1 << 20))


def _too_large(limit: int, source: str) -> DataError:
    return DataError(
        f"the decompressed stream is larger than the limit of {limit / (1 << 20):g} MiB; raise it with "
        f"{MAX_DBN_ENV}=<MiB> if the file is meant to be this large (it is decompressed into memory)",
        source=source,
        field="zstd",
    )


def decompress_stream(handle: BinaryIO, *, source: str, limit: int | None = None) -> bytearray:
    """Decompress every frame read from ``handle``, at most ``limit`` bytes in all.

    One ``decompressobj`` per frame: it stops at the end of its frame and leaves the rest
    in ``unused_data``, and ``eof`` tells a complete frame from a cut one. The input is fed
    in pieces small enough that even the densest frame (a 4-byte RLE block expands to
    128 KiB) cannot overshoot what is left of the limit by more than a few MiB, so a bomb
    stops at the limit, with memory to match, and the compressed file is never held whole.
    """
    cap = max_decompressed_bytes() if limit is None else limit
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    pending = b""  # compressed bytes read but not yet fed
    consumed = 0  # compressed bytes fed to finished frames
    frame = 0
    while True:
        if not pending:
            pending = handle.read(_READ)
            if not pending:
                return out
        frame_at = consumed
        frame_start = len(out)
        frame_head = pending[:4]
        obj = dctx.decompressobj()
        while True:
            if not pending:
                pending = handle.read(_READ)
            if not pending:
                raise DataError(
                    f"the zstd stream ends inside frame {frame}, which starts at compressed byte offset {frame_at} "
                    f"({len(out) - frame_start} bytes decompressed from it); the file is truncated "
                    "(re-download or re-export it)",
                    source=source,
                    field="zstd",
                )
            room = cap - len(out)
            step = max(_MIN_FEED, min(_MAX_FEED, room // _MAX_RATIO))
            piece, pending = pending[:step], pending[step:]
            try:
                out += obj.decompress(piece)
            except zstandard.ZstdError as exc:
                what = "is corrupt" if frame == 0 or frame_head == ZSTD_MAGIC else "is not a zstd frame"
                raise DataError(
                    f"the zstd data at compressed byte offset {frame_at} (frame {frame}) {what}: {exc}; "
                    "the file is damaged (re-download or re-export it)",
                    source=source,
                    field="zstd",
                ) from None
            if len(out) > cap:
                raise _too_large(cap, source)
            if obj.eof:
                used = len(piece) - len(obj.unused_data)
                pending = obj.unused_data + pending
                consumed += used
                frame += 1
                break
            consumed += len(piece)
    raise AssertionError("unreachable")  # pragma: no cover


def decompress_frames(data: bytes, *, source: str, limit: int | None = None) -> bytearray:
    """:func:`decompress_stream` over bytes in memory."""
    return decompress_stream(io.BytesIO(data), source=source, limit=limit)

"""zstd framing of ``.dbn.zst`` files: several frames, strictly decoded.

Databento compresses the whole DBN byte stream (header included) with zstd. Streaming
encoders leave the frame content size unset, some writers split the stream into several
frames, and some frames carry no checksum; all of that is valid. A stream that stops
inside a frame, a failed checksum and bytes after the last frame that are not a frame are
not: each raises :class:`perfgate_pipeline.errors.DataError` naming the compressed byte offset of
the frame at fault.

The decompressed stream is capped (``PERFGATE_MAX_DBN_MB``, default 1024 MiB,
``docs/limits.md``) and the file is read and decompressed piece by piece, so a small file
that expands to gigabytes stops at the cap with memory to match.
"""

from __future__ import annotations

import io
import mmap
import os
from typing import Any, BinaryIO

import zstandard

from perfgate_pipeline.errors import DataError

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

_FIRST_MAP = 1 << 20

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


def _too_large(limit: int, source: str, *, compressed: bool = False) -> DataError:
    what = "the compressed file" if compressed else "the decompressed stream"
    return DataError(
        f"{what} is larger than the limit of {limit / (1 << 20):g} MiB; raise it with "
        f"{MAX_DBN_ENV}=<MiB> if the file is meant to be this large (it is decompressed into memory)",
        source=source,
        field="zstd",
    )


class _Output:
    """The decompressed bytes, in an anonymous memory map that grows without copying (Linux
    moves the pages with mremap), so the peak memory is the output's size, not twice it."""

    def __init__(self) -> None:
        self.size = 0
        self.buf = mmap.mmap(-1, _FIRST_MAP, flags=mmap.MAP_PRIVATE)  # private: mremap may grow it

    def __len__(self) -> int:
        return self.size

    def __iadd__(self, data: bytes) -> _Output:
        end = self.size + len(data)
        if end > len(self.buf):
            self.buf.resize(max(end, 2 * len(self.buf)))
        self.buf[self.size : end] = data
        self.size = end
        return self

    def result(self) -> mmap.mmap | bytes:
        if self.size == 0:
            self.buf.close()
            return b""
        self.buf.resize(self.size)
        return self.buf


def decompress_stream(handle: BinaryIO, *, source: str, limit: int | None = None) -> mmap.mmap | bytes:
    """Decompress every frame read from ``handle``, at most ``limit`` bytes in all.

    One ``decompressobj`` per frame: it stops at the end of its frame, and ``eof`` tells a
    complete frame from a cut one. The frame is fed one block at a time (each block's
    3-byte header says where it ends), and zstd regenerates at most 128 KiB from a block,
    so the output grows in small steps and a bomb stops at the limit with memory to match:
    the peak is the limit plus one block, never a whole frame's worth at once. The
    compressed file is read whole, and may not be larger than the limit either.
    """
    cap = max_decompressed_bytes() if limit is None else limit
    data = handle.read(cap + 1)
    if len(data) > cap:
        raise _too_large(cap, source, compressed=True)
    view = memoryview(data)
    size = len(data)
    dctx = zstandard.ZstdDecompressor()
    out = _Output()
    pos = 0
    frame = 0

    def truncated(frame_at: int, produced: int) -> DataError:
        return DataError(
            f"the zstd stream ends inside frame {frame}, which starts at compressed byte offset {frame_at} "
            f"({produced} bytes decompressed from it); the file is truncated (re-download or re-export it)",
            source=source,
            field="zstd",
        )

    def corrupt(frame_at: int, what: str, detail: object) -> DataError:
        return DataError(
            f"the zstd data at compressed byte offset {frame_at} (frame {frame}) {what}: {detail}; "
            "the file is damaged (re-download or re-export it)",
            source=source,
            field="zstd",
        )

    while pos < size:
        frame_at = pos
        head = bytes(view[pos : pos + 4])
        if len(head) == 4 and is_skippable_frame(head):  # skipped, as zstd itself does
            if pos + 8 > size:
                raise truncated(frame_at, 0)
            pos += 8 + int.from_bytes(view[pos + 4 : pos + 8], "little")
            if pos > size:
                raise truncated(frame_at, 0)
            frame += 1
            continue
        if head != ZSTD_MAGIC:
            raise corrupt(frame_at, "is corrupt" if frame == 0 else "is not a zstd frame", "unknown frame magic")
        start = len(out)
        obj = dctx.decompressobj()

        def feed(piece: memoryview, frame_at: int = frame_at, obj: Any = obj) -> None:
            nonlocal out
            try:
                out += obj.decompress(piece)
            except zstandard.ZstdError as exc:
                raise corrupt(frame_at, "is corrupt", exc) from None
            if len(out) > cap:
                raise _too_large(cap, source)

        try:
            header = zstandard.frame_header_size(bytes(view[pos : pos + 18]))
        except zstandard.ZstdError as exc:
            if size - pos < 18:
                raise truncated(frame_at, 0) from None
            raise corrupt(frame_at, "is corrupt", exc) from None
        if pos + header > size:
            raise truncated(frame_at, 0)
        checksum = 4 if view[pos + 4] & 0x04 else 0
        feed(view[pos : pos + header])
        pos += header
        while True:
            if pos + 3 > size:
                feed(view[pos:size])
                raise truncated(frame_at, len(out) - start)
            block = int.from_bytes(view[pos : pos + 3], "little")
            last, kind, length = block & 1, (block >> 1) & 3, block >> 3
            end = pos + 3 + (1 if kind == 1 else length)  # an RLE block holds one byte
            feed(view[pos : min(end, size)])
            if end > size:
                raise truncated(frame_at, len(out) - start)
            pos = end
            if last:
                break
        if checksum:
            feed(view[pos : min(pos + checksum, size)])
            pos += checksum
            if pos > size:
                raise truncated(frame_at, len(out) - start)
        if not obj.eof:
            raise corrupt(frame_at, "is corrupt", "the frame does not end where its last block says")
        frame += 1
    return out.result()


def decompress_frames(data: bytes, *, source: str, limit: int | None = None) -> mmap.mmap | bytes:
    """:func:`decompress_stream` over bytes in memory."""
    return decompress_stream(io.BytesIO(data), source=source, limit=limit)

"""zstd framing of ``.dbn.zst`` files: several frames, strictly decoded.

Databento compresses the whole DBN byte stream (header included) with zstd. Streaming
encoders leave the frame content size unset, some writers split the stream into several
frames, and some frames carry no checksum; all of that is valid. A stream that stops
inside a frame, a failed checksum and bytes after the last frame that are not a frame are
not: each raises :class:`perfgate.errors.DataError` naming the compressed byte offset of
the frame at fault.
"""

from __future__ import annotations

import zstandard

from perfgate.errors import DataError

__all__ = ["ZSTD_MAGIC", "decompress_frames", "is_skippable_frame"]

#: Magic of a zstd data frame (0xFD2FB528, little-endian).
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def is_skippable_frame(head: bytes) -> bool:
    """Whether ``head`` starts with a zstd skippable-frame magic (0x184D2A50-0x184D2A5F).

    Legacy DBZ files begin with one, which is how they are told apart from DBN.
    """
    return len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50


def decompress_frames(data: bytes, *, source: str) -> bytes:
    """Decompress every frame of ``data`` and return the concatenated output.

    One ``decompressobj`` per frame: it stops at the end of its frame and leaves the
    rest in ``unused_data``, and ``eof`` tells a complete frame from a cut one. A single
    frame's output is returned as is, without a second copy.
    """
    dctx = zstandard.ZstdDecompressor()
    parts: list[bytes] = []
    remaining = data
    while remaining:
        frame_at = len(data) - len(remaining)
        obj = dctx.decompressobj()
        try:
            out = obj.decompress(remaining)
        except zstandard.ZstdError as exc:
            what = "is corrupt" if frame_at == 0 or remaining[:4] == ZSTD_MAGIC else "is not a zstd frame"
            raise DataError(
                f"the zstd data at compressed byte offset {frame_at} (frame {len(parts)}) {what}: {exc}; "
                "the file is damaged (re-download or re-export it)",
                source=source,
                field="zstd",
            ) from None
        if not obj.eof:
            raise DataError(
                f"the zstd stream ends inside frame {len(parts)}, which starts at compressed byte offset {frame_at} "
                f"({len(out)} bytes decompressed from it); the file is truncated (re-download or re-export it)",
                source=source,
                field="zstd",
            )
        parts.append(out)
        remaining = obj.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)

"""Validation of the DBN record region: one vectorised pass, or a walk for mixed streams.

Bytes 0-1 of every record are its ``length`` (in 4-byte words) and its ``rtype``, so a
strided little-endian ``u16`` view over the records reads ``(rtype << 8) | length`` for
all of them at once; one comparison per allowed rtype checks the whole file. Over a
memory map this costs about as much as touching the pages, a few ms per million bars.
"""

from __future__ import annotations

import mmap

import numpy as np

from perfgate_pipeline._dbn_schemas import record_dtype, rtype_name
from perfgate_pipeline.errors import DataError

__all__ = ["check_uniform", "walk_records"]

Buffer = mmap.mmap | bytes | bytearray

# Compare in slices so the temporary boolean array stays small (64 KiB) for any file.
_CHUNK = 1 << 16


def _record_view(buf: Buffer, offset: int, count: int, dtype: np.dtype) -> np.ndarray:
    """A read-only structured view of ``count`` records at ``offset``; no copy."""
    if count == 0:
        records = np.empty(0, dtype=dtype)
    else:
        records = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    records.flags.writeable = False
    return records


def _first_mismatch(buf: Buffer, offset: int, count: int, size: int, expected: list[int]) -> int | None:
    heads = np.ndarray((count,), dtype="<u2", buffer=buf, offset=offset, strides=(size,))
    for start in range(0, count, _CHUNK):
        part = heads[start : start + _CHUNK]
        ok = part == expected[0]
        for value in expected[1:]:
            ok |= part == value
        if not ok.all():
            return start + int(np.argmin(ok))
    return None


def _record_error(
    buf: Buffer,
    at: int,
    index: int,
    *,
    allowed: tuple[int, ...],
    size: int,
    label: str,
    version: int,
    ts_out: bool,
    source: str,
    where: str,
) -> DataError:
    length, rtype = buf[at], buf[at + 1]
    here = f"record {index} at byte offset {at}{where}"
    names = " or ".join(rtype_name(r) for r in allowed)
    if rtype not in allowed:
        other = record_dtype(rtype, version, ts_out)
        if other is not None and length * 4 == other.itemsize:
            message = (
                f"{here} is a {rtype_name(rtype)} record, but {label} allows only {names}: the stream mixes "
                "record types; load it with mixed=True to group the records by rtype"
            )
        else:
            message = (
                f"{here} has {rtype_name(rtype)} where {label} needs {names}; the record region is corrupt "
                "from this offset (re-export the file)"
            )
        return DataError(message, source=source, field=f"records[{index}].rtype")
    suffix = ", ts_out included" if ts_out else ""
    return DataError(
        f"{here} has length byte {length} ({length * 4} bytes), but {label} records are {size} bytes "
        f"(length byte {size // 4}{suffix}); the record is corrupt, or the ts_out flag is wrong",
        source=source,
        field=f"records[{index}].length",
    )


def check_uniform(
    buf: Buffer,
    offset: int,
    total: int,
    *,
    allowed: tuple[int, ...],
    label: str,
    version: int,
    ts_out: bool,
    source: str,
    where: str,
) -> np.ndarray:
    """Check that ``buf[offset:total]`` is whole records of one of the ``allowed`` rtypes.

    The allowed rtypes share one layout. Returns the zero-copy structured view.

    Raises:
        DataError: naming the first record whose length or rtype is wrong, or the
            offset of a cut-off last record.
    """
    dtype = record_dtype(allowed[0], version, ts_out)
    assert dtype is not None, "every schema rtype has a layout"
    size = dtype.itemsize
    region = total - offset
    count = region // size
    context = {
        "allowed": allowed,
        "size": size,
        "label": label,
        "version": version,
        "ts_out": ts_out,
        "source": source,
        "where": where,
    }
    expected = [(rtype << 8) | (size // 4) for rtype in allowed]
    if count:
        bad = _first_mismatch(buf, offset, count, size, expected)
        if bad is not None:
            raise _record_error(buf, offset + bad * size, bad, **context)  # type: ignore[arg-type]
    tail = region - count * size
    if tail:
        at = offset + count * size
        if tail >= 2 and (buf[at] != size // 4 or buf[at + 1] not in allowed):
            raise _record_error(buf, at, count, **context)  # type: ignore[arg-type]
        raise DataError(
            f"the record region from byte offset {offset}{where} is {region} bytes, not a whole number of "
            f"{size}-byte records: the last {tail} byte(s), from byte offset {at}, are a cut-off record; "
            "the file is truncated (re-download or re-export it)",
            source=source,
            field="records",
        )
    return _record_view(buf, offset, count, dtype)


def walk_records(
    buf: Buffer, offset: int, total: int, *, version: int, ts_out: bool, source: str, where: str
) -> dict[int, np.ndarray]:
    """Split a stream of records of several types into one array per rtype.

    A stream of one type is still returned as a zero-copy view; otherwise each record's
    length byte leads to the next, and every record is checked against the layout of its
    rtype before it is copied into its group.

    Raises:
        DataError: a record of unknown type, a length that does not match its type's
            layout, or a record cut off by the end of the stream.
    """
    if total - offset >= 2:
        rtype = buf[offset + 1]
        dtype = record_dtype(rtype, version, ts_out)
        size = dtype.itemsize if dtype is not None else 0
        if dtype is not None and (total - offset) % size == 0:
            count = (total - offset) // size
            if _first_mismatch(buf, offset, count, size, [(rtype << 8) | (size // 4)]) is None:
                return {int(rtype): _record_view(buf, offset, count, dtype)}
    pieces: dict[int, list[bytes]] = {}
    pos, index = offset, 0
    while pos < total:
        here = f"record {index} at byte offset {pos}{where}"
        length = buf[pos]
        if pos + max(length, 1) * 4 > total:
            raise DataError(
                f"{here} needs {max(length, 1) * 4} bytes but only {total - pos} are left; "
                "the file is truncated (re-download or re-export it)",
                source=source,
                field="records",
            )
        rtype = buf[pos + 1]
        dtype = record_dtype(rtype, version, ts_out)
        if dtype is None:
            raise DataError(
                f"{here} has {rtype_name(rtype)}, which is not a DBN v{version} record type; "
                "the record region is corrupt from this offset",
                source=source,
                field=f"records[{index}].rtype",
            )
        if dtype.itemsize != length * 4:
            raise DataError(
                f"{here} is a {rtype_name(rtype)} record of {length * 4} bytes (length byte {length}), but that "
                f"type is {dtype.itemsize} bytes in DBN v{version}{' with ts_out' if ts_out else ''}; "
                "the record is corrupt",
                source=source,
                field=f"records[{index}].length",
            )
        pieces.setdefault(rtype, []).append(buf[pos : pos + dtype.itemsize])
        pos += dtype.itemsize
        index += 1
    groups = {}
    for rtype, chunks in pieces.items():
        dtype = record_dtype(rtype, version, ts_out)
        assert dtype is not None
        groups[int(rtype)] = _record_view(b"".join(chunks), 0, len(chunks), dtype)
    return groups

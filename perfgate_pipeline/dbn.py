"""A strict, zero-copy loader for Databento Binary Encoding (DBN) files.

A DBN stream is an 8-byte prelude, a metadata header (:mod:`.dbn_metadata`) and then
fixed-size little-endian records (:mod:`.dbn_schemas`). For a single-schema file all
records have one size, so the records are returned as a numpy structured array laid
directly over the memory-mapped file: nothing is copied, and a 1M-bar file loads in a
few milliseconds. ``.zst`` files (one or more zstd frames) are decompressed once into
memory and viewed the same way.

The official decoders are lenient: they drop truncated tails, return nothing for a cut
zstd stream and accept records of the wrong type. This loader is strict. Every record's
``length`` byte and ``rtype`` are checked against the schema, and any damage raises
:class:`perfgate_pipeline.errors.DataError` naming the file, the byte offset and what to do --
never another exception, whatever the bytes.

Prices stay int64 fixed point (1e-9 units) in the records; :func:`prices_as_float` and
:func:`ohlcv_arrays` convert them, turning the ``UNDEF_PRICE`` sentinel into NaN.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np

from perfgate_pipeline._dbn_metadata import DbnMetadata, parse_metadata
from perfgate_pipeline._dbn_records import check_uniform, walk_records
from perfgate_pipeline._dbn_schemas import (
    FIXED_PRICE_SCALE,
    OHLCV_RTYPES,
    RTYPE_NAMES,
    SCHEMA_RTYPES,
    SUPPORTED_VERSIONS,
    UNDEF_PRICE,
    record_dtype,
    rtype_name,
    stype_name,
)
from perfgate_pipeline._dbn_zstd import ZSTD_MAGIC, decompress_stream, is_skippable_frame
from perfgate_pipeline.errors import DataError

__all__ = ["OHLCV_KEYS", "RTYPE_NAMES", "DbnFile", "load_dbn", "ohlcv_arrays", "prices_as_float", "stype_name"]

_UNDEF_PRICE_AS_FLOAT = 2.0**63  # what UNDEF_PRICE (and every int64 >= 2**63 - 512) becomes as float64

#: The keys of :func:`ohlcv_arrays`, in order.
OHLCV_KEYS = ("ts_event", "open", "high", "low", "close", "volume")


# eq=False: comparing numpy arrays field by field has no single truth value; compare identity.
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DbnFile:
    """A loaded and validated DBN file.

    Attributes:
        path: the file it came from.
        version: DBN version (1-3), from the header or as given for a fragment.
        metadata: the parsed header; ``None`` for a header-less fragment.
        schema: the header's schema name; ``None`` for mixed streams and fragments.
        ts_out: whether each record ends with the 8-byte ``ts_out`` field.
        compressed: whether the file was zstd-compressed.
        records_offset: byte offset of the first record in the (decompressed) stream.
        record_count: number of records, of every type.
        records: read-only structured array of the records when they share one layout
            (zero-copy over the file for plain files); ``None`` when ``mixed=True`` found
            several types, or for a fragment without records.
        groups: rtype -> read-only structured array of that rtype's records. For a
            single-type file it holds ``records`` once.
    """

    path: str
    version: int
    metadata: DbnMetadata | None
    schema: str | None
    ts_out: bool
    compressed: bool
    records_offset: int
    record_count: int
    records: np.ndarray | None
    groups: Mapping[int, np.ndarray]

    @property
    def dataset(self) -> str | None:
        return self.metadata.dataset if self.metadata else None

    @property
    def symbols(self) -> tuple[str, ...]:
        return self.metadata.symbols if self.metadata else ()

    def ts_event_range(self) -> tuple[int, int] | None:
        """(first, last) ``ts_event`` over all records in ns, or ``None`` when empty."""
        lows, highs = [], []
        for arr in self.groups.values():
            if len(arr):
                ts = arr["ts_event"]
                lows.append(int(ts.min()))
                highs.append(int(ts.max()))
        return (min(lows), max(highs)) if lows else None


def load_dbn(
    path: str | os.PathLike[str], *, version: int | None = None, ts_out: bool = False, mixed: bool = False
) -> DbnFile:
    """Load, validate and view a DBN file (``.dbn`` or zstd-compressed ``.dbn.zst``).

    Args:
        path: the file.
        version: DBN version of a header-less fragment (records only); leave ``None``
            for a normal file, whose header says its version.
        ts_out: whether a fragment's records carry the 8-byte ``ts_out`` suffix.
        mixed: accept several record types in one stream and group them by rtype
            (copies the records); without it a second record type is an error.

    Raises:
        DataError: the file is missing, damaged, truncated, mixed (without ``mixed``)
            or not supported; the message names the file and the byte offset.
    """
    source = str(path)
    if version is not None and version not in SUPPORTED_VERSIONS:
        raise DataError(f"version={version!r}: DBN versions 1-3 are supported", source=source, field="version")
    if ts_out and version is None:
        raise DataError(
            "ts_out=True applies only to header-less fragments, together with version=; "
            "a DBN header carries its own ts_out flag",
            source=source,
            field="ts_out",
        )
    buf, compressed = _open_stream(Path(path), source)
    where = " of the decompressed stream" if compressed else ""
    with memoryview(buf) as view:
        starts_with_header = bytes(view[:3]) == b"DBN"
        meta: DbnMetadata | None = None
        if version is None:
            header = parse_metadata(view, source=source, compressed=compressed)
            meta, version, ts_out, offset = header, header.version, header.ts_out, header.length
        elif starts_with_header:
            raise DataError(
                f"the stream starts with a DBN metadata header at byte offset 0{where}; "
                "load it without version= and ts_out= (they are only for header-less fragments)",
                source=source,
                field="version",
            )
        else:
            offset = 0
        total = len(view)
    schema = meta.schema if meta else None

    def result(records: np.ndarray | None, groups: dict[int, np.ndarray]) -> DbnFile:
        return DbnFile(
            path=source,
            version=version,
            metadata=meta,
            schema=schema,
            ts_out=ts_out,
            compressed=compressed,
            records_offset=offset,
            record_count=sum(len(arr) for arr in groups.values()),
            records=records,
            groups=MappingProxyType(groups),
        )

    if mixed:
        groups = walk_records(buf, offset, total, version=version, ts_out=ts_out, source=source, where=where)
        return result(next(iter(groups.values())) if len(groups) == 1 else None, groups)
    if meta is not None and schema is None:
        raise DataError(
            f"the header at byte offset 24{where} declares several schemas (schema id 0xFFFF, a mixed or live "
            "stream); load it with mixed=True to group the records by rtype",
            source=source,
            field="schema",
        )
    if schema is not None:
        allowed = SCHEMA_RTYPES[schema]
        label = f"schema {schema}"
    elif total > offset:
        allowed = (_first_rtype(buf, offset, total, version, ts_out, source, where),)
        label = f"a fragment of {rtype_name(allowed[0])} records"
    else:  # an empty fragment: nothing to view, and nothing wrong
        return result(None, {})
    records = check_uniform(
        buf, offset, total, allowed=allowed, label=label, version=version, ts_out=ts_out, source=source, where=where
    )
    if not len(records):
        return result(records, {allowed[0]: records})
    first = int(records["rtype"][0])
    if len(allowed) == 1 or bool((records["rtype"] == first).all()):
        return result(records, {first: records})
    # TBBO may carry both of its rtypes; keep `groups` keyed by the real rtype of each record
    kinds = records["rtype"]
    return result(records, {rtype: records[kinds == rtype] for rtype in allowed if (kinds == rtype).any()})


def _open_stream(path: Path, source: str) -> tuple[mmap.mmap | bytes, bool]:
    """Map a plain file (no copy) or decompress a zstd file; refuse anything else early."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DataError("file not found; check the path", source=source) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise DataError(f"cannot read the file: {getattr(exc, 'strerror', None) or exc}", source=source) from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block or never end
        raise DataError("not a regular file; give the path of a .dbn or .dbn.zst file", source=source)
    if info.st_size == 0:
        raise DataError("the file is empty (0 bytes); expected the DBN prelude at byte offset 0", source=source)
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
            if head.startswith(ZSTD_MAGIC):
                fh.seek(0)
                return decompress_stream(fh, source=source), True
            if len(head) == 4 and is_skippable_frame(head):
                raise DataError(
                    f"legacy DBZ file: it starts with a zstd skippable frame ({head.hex(' ')}) at byte offset 0, "
                    "the pre-DBN format; convert it to DBN with the official `dbn` command-line tool",
                    source=source,
                    field="magic",
                )
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), False
    except (OSError, ValueError) as exc:  # ValueError: the file was emptied after the stat() above
        raise DataError(f"cannot read the file: {getattr(exc, 'strerror', None) or exc}", source=source) from None


def _first_rtype(
    buf: mmap.mmap | bytes, offset: int, total: int, version: int, ts_out: bool, source: str, where: str
) -> int:
    """The rtype of a fragment's first record, which then fixes the type of every record."""
    if total - offset < 2:
        raise DataError(
            f"{total - offset} byte(s) at byte offset {offset}{where} are too few for a record header; "
            "the fragment is truncated",
            source=source,
            field="records",
        )
    rtype = buf[offset + 1]
    if record_dtype(rtype, version, ts_out) is None:
        raise DataError(
            f"record 0 at byte offset {offset}{where} has {rtype_name(rtype)}, which is not a DBN v{version} record "
            "type; the fragment is corrupt, or version= is wrong",
            source=source,
            field="records[0].rtype",
        )
    return int(rtype)


def prices_as_float(prices: np.ndarray) -> np.ndarray:
    """Fixed-point int64 prices (1e-9 units) as a new float64 array, ``UNDEF_PRICE`` as NaN.

    Division (not multiplication by 1e-9) keeps each result the float nearest to the
    true price, so tick prices such as 3722.75 come out exact.
    """
    raw = np.asarray(prices)
    if raw.dtype.kind not in "iu":
        raise TypeError(f"prices_as_float needs an integer price array, not {raw.dtype}")
    out = raw.astype(np.float64)  # one pass over a strided record field, into contiguous memory
    # The int->float cast is monotonic and only ints >= 2**63 - 512 reach 2**63, so a max()
    # over the floats rules out UNDEF_PRICE cheaply; only then compare the ints exactly.
    if len(out) and out.max() >= _UNDEF_PRICE_AS_FLOAT:
        out[raw == UNDEF_PRICE] = np.nan
    out /= FIXED_PRICE_SCALE
    return out


def ohlcv_arrays(dbn: DbnFile) -> dict[str, np.ndarray]:
    """The bars of an OHLCV file as plain contiguous arrays, the feature code's input.

    Returns ``{"ts_event", "open", "high", "low", "close", "volume"}``: ``ts_event`` as
    int64 ns since the UNIX epoch (UTC, the bar's open time), the prices as float64 with
    undefined prices as NaN, and ``volume`` as float64.

    Raises:
        DataError: the file does not hold OHLCV bars.
    """
    rec = dbn.records
    if rec is None:
        rtype = None
    elif len(rec):
        rtype = int(rec["rtype"][0])  # validated: every record has this rtype
    else:
        rtype = SCHEMA_RTYPES[dbn.schema][0] if dbn.schema else None
    if rtype not in OHLCV_RTYPES:
        kind = dbn.schema or (
            "mixed records" if rec is None else rtype_name(rtype) if rtype is not None else "no records"
        )
        raise DataError(
            f"holds {kind}, not OHLCV bars; ohlcv_arrays needs an ohlcv-1s/1m/1h/1d/eod file",
            source=dbn.path,
            field="schema",
        )
    assert rec is not None
    out = {"ts_event": rec["ts_event"].astype(np.int64)}
    for name in ("open", "high", "low", "close"):
        out[name] = prices_as_float(rec[name])
    out["volume"] = rec["volume"].astype(np.float64)
    return out

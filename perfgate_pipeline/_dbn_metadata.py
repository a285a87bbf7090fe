"""The DBN metadata header: a strict, bounds-checked parser.

Layout (all integers little-endian; offsets are from the start of the stream)::

    0   3   magic "DBN"
    3   1   version: 1, 2 or 3
    4   4   u32 metadata length N: bytes after these 8; records start at 8 + N
    8   16  dataset, NUL-padded
    24  2   schema id (0xFFFF: several schemas)
    26  8   start, ns since the UNIX epoch
    34  8   end (u64::MAX: unset)
    42  8   limit (0: none)
    v1: 50 record_count u64 (ignored), 58 stype_in, 59 stype_out, 60 ts_out,
        61-107 reserved; symbol strings are 22 bytes
    v2/v3: 50 stype_in, 51 stype_out, 52 ts_out, 53 u16 symbol_cstr_len (71),
        55-107 reserved
    108 4   schema_definition_length, must be 0
    112     symbols, partial, not_found: each a u32 count then count strings;
            mappings: u32 count, then per mapping a raw symbol, a u32 interval count
            and per interval u32 start_date, u32 end_date (YYYYMMDD) and a symbol.
            v3 pads with zeros to a multiple of 8 so that records are aligned.
            Bytes left over inside the declared length are skipped, as the
            official decoder does: the length, not the content, says where
            the records start.

Every count is checked against the declared length before it is used, so no input can
make the parser read past the header or loop without making progress.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import date

from perfgate_pipeline._dbn_schemas import SCHEMA_NAMES, SUPPORTED_VERSIONS
from perfgate_pipeline.errors import DataError

__all__ = ["MIN_METADATA_LENGTH", "PRELUDE_LENGTH", "DbnMetadata", "MappingInterval", "SymbolMapping", "parse_metadata"]

PRELUDE_LENGTH = 8
#: The fixed part (100 bytes), schema_definition_length (4) and four empty counts (16).
MIN_METADATA_LENGTH = 120
_U64_MAX = 2**64 - 1
_DBZ_HINT = "convert legacy DBZ files with the official `dbn` command-line tool first"


@dataclass(frozen=True, slots=True, kw_only=True)
class MappingInterval:
    """One interval of a symbol mapping: ``symbol`` applies from start_date to end_date."""

    start_date: date
    end_date: date
    symbol: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SymbolMapping:
    """The instruments one requested (raw) symbol resolved to, interval by interval."""

    raw_symbol: str
    intervals: tuple[MappingInterval, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DbnMetadata:
    """The parsed header of a DBN stream.

    Attributes:
        version: DBN version, 1-3.
        dataset: Databento dataset code, e.g. ``GLBX.MDP3``.
        schema: schema name (``ohlcv-1m`` ...); ``None`` when the stream mixes schemas.
        start: requested start, ns since the UNIX epoch (UTC).
        end: requested end (exclusive), ns; ``None`` when unset.
        limit: requested record limit; ``None`` for no limit.
        stype_in: input symbology id; ``None`` when mixed.
        stype_out: output symbology id.
        ts_out: whether every record ends with an 8-byte gateway send time.
        symbol_cstr_len: width of every fixed-size symbol string (22 in v1, 71 after).
        symbols, partial, not_found: the requested symbols and how they resolved.
        mappings: symbol mappings from ``symbols`` to instrument ids.
        length: bytes from the start of the stream to the first record.
    """

    version: int
    dataset: str
    schema: str | None
    start: int
    end: int | None
    limit: int | None
    stype_in: int | None
    stype_out: int
    ts_out: bool
    symbol_cstr_len: int
    symbols: tuple[str, ...]
    partial: tuple[str, ...]
    not_found: tuple[str, ...]
    mappings: tuple[SymbolMapping, ...]
    length: int


class _Cursor:
    """Reads the variable part of the header, never past ``end`` (the first record)."""

    def __init__(self, buf: memoryview, pos: int, end: int, *, source: str, where: str) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end
        self.source = source
        self.where = where

    def fail(self, message: str, field: str, offset: int | None = None) -> DataError:
        at = self.pos if offset is None else offset
        return DataError(f"{message} at byte offset {at}{self.where}", source=self.source, field=field)

    def need(self, nbytes: int, field: str) -> None:
        if nbytes > self.end - self.pos:
            raise self.fail(
                f"the metadata declares {self.end - PRELUDE_LENGTH} bytes but {field} needs {nbytes} more bytes "
                f"than the {self.end - self.pos} left; the header is corrupt (re-export the file)",
                field,
            )

    def u32(self, field: str) -> int:
        self.need(4, field)
        (value,) = struct.unpack_from("<I", self.buf, self.pos)
        self.pos += 4
        return int(value)

    def text(self, width: int, field: str) -> str:
        self.need(width, field)
        raw = bytes(self.buf[self.pos : self.pos + width]).split(b"\0", 1)[0]
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{field} is not valid UTF-8 ({raw[:16]!r}...)", field) from None
        self.pos += width
        return value

    def strings(self, width: int, field: str) -> tuple[str, ...]:
        count = self.u32(field)
        self.need(count * width, field)
        return tuple(self.text(width, field) for _ in range(count))

    def day(self, field: str) -> date:
        at = self.pos
        raw = self.u32(field)
        try:
            return date(raw // 10000, raw // 100 % 100, raw % 100)
        except ValueError:
            raise self.fail(f"{field} {raw} is not a YYYYMMDD date", field, at) from None


def parse_metadata(buf: memoryview, *, source: str, compressed: bool = False) -> DbnMetadata:
    """Parse and check the DBN header at the start of ``buf``.

    Raises:
        DataError: for a wrong magic, a version outside 1-3, a metadata length that is
            impossible or runs past the end of ``buf``, an unknown schema id, or any count
            that does not fit in the declared length. The message names the byte offset
            (of the decompressed stream when ``compressed``).
    """
    where = " of the decompressed stream" if compressed else ""
    total = len(buf)
    if total < PRELUDE_LENGTH:
        raise DataError(
            f"the stream is {total} bytes, shorter than the 8-byte DBN prelude at byte offset 0{where}; "
            "the file is truncated",
            source=source,
            field="prelude",
        )
    magic = bytes(buf[:3])
    if magic != b"DBN":
        raise DataError(
            f"wrong magic {magic!r} at byte offset 0{where} (a DBN stream starts with b'DBN'); "
            "this is not a DBN file, or it is a header-less fragment (pass version=)",
            source=source,
            field="magic",
        )
    version = buf[3]
    if version not in SUPPORTED_VERSIONS:
        hint = _DBZ_HINT if version == 0 else "re-encode it as DBN v3 with the official `dbn` tool"
        raise DataError(
            f"unsupported DBN version {version} at byte offset 3{where}; this loader reads versions 1-3: {hint}",
            source=source,
            field="version",
        )
    (meta_len,) = struct.unpack_from("<I", buf, 4)
    if meta_len < MIN_METADATA_LENGTH or PRELUDE_LENGTH + meta_len > total:
        reason = (
            f"shorter than the {MIN_METADATA_LENGTH}-byte minimum"
            if meta_len < MIN_METADATA_LENGTH
            else f"past the end of the {total}-byte stream (the file is truncated)"
        )
        raise DataError(
            f"impossible metadata length {meta_len} at byte offset 4{where}: {reason}; re-export the file",
            source=source,
            field="metadata_length",
        )
    end = PRELUDE_LENGTH + meta_len
    cur = _Cursor(buf, 8, end, source=source, where=where)
    dataset = cur.text(16, "dataset")
    schema_id, start, end_ns, limit = struct.unpack_from("<HQQQ", buf, 24)
    if schema_id == 0xFFFF:
        schema = None
    elif schema_id in SCHEMA_NAMES:
        schema = SCHEMA_NAMES[schema_id]
    else:
        raise cur.fail(f"unknown schema id {schema_id} (known: 0-{max(SCHEMA_NAMES)}, 0xFFFF)", "schema", 24)
    if version == 1:
        stype_in, stype_out, ts_out_byte = struct.unpack_from("<BBB", buf, 58)
        cstr_len, ts_out_at = 22, 60
    else:
        stype_in, stype_out, ts_out_byte, cstr_len = struct.unpack_from("<BBBH", buf, 50)
        ts_out_at = 52
        if cstr_len == 0:
            raise cur.fail("symbol_cstr_len is 0; the header is corrupt", "symbol_cstr_len", 53)
    if ts_out_byte > 1:
        raise cur.fail(f"ts_out flag is {ts_out_byte}, not 0 or 1; the header is corrupt", "ts_out", ts_out_at)
    (schema_def_len,) = struct.unpack_from("<I", buf, 108)
    if schema_def_len != 0:
        raise cur.fail(
            f"schema_definition_length is {schema_def_len}; no DBN encoder writes schema definitions, "
            "so the header is corrupt",
            "schema_definition_length",
            108,
        )
    cur.pos = 112
    symbols = cur.strings(cstr_len, "symbols")
    partial = cur.strings(cstr_len, "partial")
    not_found = cur.strings(cstr_len, "not_found")
    mappings = []
    for _ in range(cur.u32("mappings")):
        raw_symbol = cur.text(cstr_len, "mappings.raw_symbol")
        n_intervals = cur.u32("mappings.intervals")
        cur.need(n_intervals * (8 + cstr_len), "mappings.intervals")
        intervals = tuple(
            MappingInterval(
                start_date=cur.day("mappings.start_date"),
                end_date=cur.day("mappings.end_date"),
                symbol=cur.text(cstr_len, "mappings.symbol"),
            )
            for _ in range(n_intervals)
        )
        mappings.append(SymbolMapping(raw_symbol=raw_symbol, intervals=intervals))
    return DbnMetadata(
        version=version,
        dataset=dataset,
        schema=schema,
        start=int(start),
        end=None if end_ns == _U64_MAX else int(end_ns),
        limit=int(limit) or None,
        stype_in=None if stype_in == 0xFF else int(stype_in),
        stype_out=int(stype_out),
        ts_out=bool(ts_out_byte),
        symbol_cstr_len=int(cstr_len),
        symbols=symbols,
        partial=partial,
        not_found=not_found,
        mappings=tuple(mappings),
        length=end,
    )

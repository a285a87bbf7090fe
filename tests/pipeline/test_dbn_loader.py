"""Golden tests: every real DBN file, loaded by perfgate and by the official decoder.

For each corpus file (tests/data/dbn, from databento/dbn's own test suite) the header is
compared field by field with ``databento_dbn``'s Metadata, and every record field by field
and byte by byte with the records ``databento_dbn.DBNDecoder`` yields (AS_IS: each file
keeps its own DBN version). Legacy DBZ files must be rejected.
"""

from __future__ import annotations

import mmap
import subprocess
import sys

import databento_dbn as dbn
import numpy as np
import pytest
import zstandard

from perfgate_pipeline._dbn_schemas import (
    RTYPE_NAMES,
    SCHEMA_IDS,
    SCHEMA_NAMES,
    STYPE_NAMES,
    UNDEF_PRICE,
    record_dtype,
)
from perfgate_pipeline.dbn import OHLCV_KEYS, DbnFile, load_dbn, ohlcv_arrays, prices_as_float
from perfgate_pipeline.errors import DataError

from .test_dbn_corpus import (
    DBN_SAMPLES,
    DBZ_SAMPLES,
    Sample,
    load_kwargs,
    mixed_stream,
    official_decode,
    ohlcv_stream,
    sample,
    zstd_frames,
)

# rtype -> official record class name, per version module (databento_dbn.v1/v2/v3)
_OFFICIAL_CLASSES = {
    0x00: "TradeMsg",
    0x01: "MBP1Msg",
    0x0A: "MBP10Msg",
    0x12: "StatusMsg",
    0x13: "InstrumentDefMsg",
    0x14: "ImbalanceMsg",
    0x15: "ErrorMsg",
    0x16: "SymbolMappingMsg",
    0x17: "SystemMsg",
    0x18: "StatMsg",
    0x20: "OHLCVMsg",
    0x21: "OHLCVMsg",
    0x22: "OHLCVMsg",
    0x23: "OHLCVMsg",
    0x24: "OHLCVMsg",
    0xA0: "MBOMsg",
    0xB1: "CMBP1Msg",
    0xC0: "CBBO1SMsg",
    0xC1: "CBBO1MMsg",
    0xC2: "TCBBOMsg",
    0xC3: "BBO1SMsg",
    0xC4: "BBO1MMsg",
    0xC5: "TBBOMsg",
}
_TRISTATE = {True: b"Y", False: b"N", None: b"~"}  # status is_* fields: the Python API maps 'Y'/'N'/'~'


def _official_value(rec: object, name: str) -> object:
    value = getattr(rec, name)
    if name.startswith("is_"):
        return _TRISTATE[value]
    value = getattr(value, "value", value)  # enums -> their char or number
    if isinstance(value, str):
        return value.encode("utf-8").rstrip(b"\0")  # numpy drops trailing NULs of S fields
    return int(value)


def _ours(value: object) -> object:
    return bytes(value) if isinstance(value, bytes) else int(value)  # type: ignore[call-overload]


def assert_records_match(records: np.ndarray, official: list[object]) -> int:
    """Every public field and every byte of every record; returns the number of fields compared."""
    assert len(records) == len(official)
    compared = 0
    for i, rec in enumerate(official):
        row = records[i]
        assert bytes(rec)[: records.dtype.itemsize] == row.tobytes(), f"record {i} bytes differ"
        for name in records.dtype.names:
            if name.startswith("_") or name == "length":  # reserved bytes and length: covered by the bytes check
                continue
            if name == "ts_out" and int(rec.ts_out) == 2**64 - 1:  # type: ignore[attr-defined]
                pytest.fail("official record has no ts_out although ours does")
            assert _ours(row[name]) == _official_value(rec, name), f"record {i} field {name}"
            compared += 1
    return compared


def assert_metadata_matches(ours: DbnFile, meta: dbn.Metadata) -> None:
    m = ours.metadata
    assert m is not None
    assert m.version == meta.version == ours.version
    assert m.dataset == meta.dataset
    assert m.schema == (meta.schema.value if meta.schema is not None else None)
    assert m.start == meta.start
    assert m.end == meta.end
    assert m.limit == meta.limit
    assert (STYPE_NAMES[m.stype_in] if m.stype_in is not None else None) == (
        meta.stype_in.value if meta.stype_in is not None else None
    )
    assert STYPE_NAMES[m.stype_out] == meta.stype_out.value
    assert m.ts_out == meta.ts_out == ours.ts_out
    assert m.symbol_cstr_len == meta.symbol_cstr_len
    assert list(m.symbols) == meta.symbols
    assert list(m.partial) == meta.partial
    assert list(m.not_found) == meta.not_found
    mine = {
        mp.raw_symbol: [
            {"start_date": iv.start_date, "end_date": iv.end_date, "symbol": iv.symbol} for iv in mp.intervals
        ]
        for mp in m.mappings
    }
    assert mine == meta.mappings


@pytest.mark.parametrize("s", DBN_SAMPLES, ids=lambda s: s.name)
def test_real_file_matches_official_decoder(s: Sample) -> None:
    ours = load_dbn(s.path, **load_kwargs(s))
    meta, official = official_decode(s)
    assert ours.record_count == len(official) == s.records
    assert ours.compressed == s.compressed
    assert ours.version == s.version
    if meta is None:
        assert ours.metadata is None and ours.schema is None
    else:
        assert_metadata_matches(ours, meta)
        assert ours.schema == s.schema
    if s.records == 0:
        assert ours.records is not None and len(ours.records) == 0
        return
    assert ours.records is not None
    assert not ours.records.flags.writeable
    assert dict(ours.groups) == {int(ours.records["rtype"][0]): ours.records}
    assert assert_records_match(ours.records, official) >= s.records * 6


@pytest.mark.parametrize("s", DBZ_SAMPLES, ids=lambda s: s.name)
def test_legacy_dbz_is_rejected(s: Sample) -> None:
    with pytest.raises(DataError, match=r"legacy DBZ.*byte offset 0") as err:
        load_dbn(s.path)
    assert str(s.path) in str(err.value)


def test_plain_file_is_a_zero_copy_view_of_the_mapped_file() -> None:
    ours = load_dbn(sample("test_data.mbo.v3.dbn").path)
    assert ours.records is not None and not ours.records.flags.owndata
    base = ours.records.base
    while not isinstance(base, mmap.mmap):  # ndarray -> memoryview -> mmap
        assert base is not None, "records are not backed by the mapped file"
        base = getattr(base, "obj", None) if isinstance(base, memoryview) else base.base
    assert ours.records_offset == 360  # v3 header padded to a multiple of 8


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("rtype", sorted(_OFFICIAL_CLASSES))
def test_record_layouts_match_official_dtypes(version: int, rtype: int) -> None:
    official = np.dtype(getattr(getattr(dbn, f"v{version}"), _OFFICIAL_CLASSES[rtype])._dtypes)
    ours = record_dtype(rtype, version)
    assert ours is not None
    assert ours.itemsize == official.itemsize
    assert ours.names == official.names
    for name in official.names:
        (odt, ooff), (mdt, moff) = official.fields[name][:2], ours.fields[name][:2]
        assert (moff, mdt.kind, mdt.itemsize) == (ooff, odt.kind, odt.itemsize), name
    with_ts_out = record_dtype(rtype, version, ts_out=True)
    assert with_ts_out is not None and with_ts_out.itemsize == official.itemsize + 8
    assert with_ts_out.names[-1] == "ts_out"


def test_name_tables_match_official_enums() -> None:
    assert {s.value: i for i, s in enumerate(dbn.Schema.variants())} == dict(SCHEMA_IDS)
    assert all(SCHEMA_NAMES[i] == name for name, i in SCHEMA_IDS.items())
    for i, name in STYPE_NAMES.items():
        assert dbn.SType.from_int(i).value == name
    assert {r.value for r in dbn.RType.variants()} == set(RTYPE_NAMES)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_ts_out_file_matches_official_decoder(tmp_path, version: int) -> None:
    raw = ohlcv_stream(n=6, ts_out=True, version=version)
    path = tmp_path / "bars.ts_out.dbn"
    path.write_bytes(raw)
    ours = load_dbn(path)
    out = dbn.DBNDecoder(upgrade_policy=dbn.VersionUpgradePolicy.AS_IS).write_and_decode(raw)
    assert ours.ts_out and ours.records is not None
    assert ours.records.dtype.itemsize == 64 and set(ours.records["length"]) == {16}
    assert_metadata_matches(ours, out[0])
    assert_records_match(ours.records, out[1:])
    # the same records as a header-less zstd fragment, told version and ts_out
    frag = tmp_path / "bars.ts_out.dbn.frag.zst"
    frag.write_bytes(zstd_frames(raw[ours.records_offset :], 2))
    loaded = load_dbn(frag, version=version, ts_out=True)
    assert loaded.metadata is None and loaded.records is not None
    assert loaded.records.tobytes() == ours.records.tobytes()


@pytest.mark.parametrize(
    ("pieces", "checksum", "content_size"),
    [(1, True, False), (1, False, True), (3, True, True), (7, False, False), (40, True, False)],
)
def test_zstd_framings_load_identically(tmp_path, pieces: int, checksum: bool, content_size: bool) -> None:
    s = sample("test_data.mbp-10.dbn")
    raw = s.path.read_bytes()
    path = tmp_path / "mbp10.dbn.zst"
    path.write_bytes(zstd_frames(raw, pieces, checksum=checksum, content_size=content_size))
    plain, packed = load_dbn(s.path), load_dbn(path)
    assert packed.compressed and packed.record_count == plain.record_count == 2
    assert packed.metadata == plain.metadata
    assert packed.records is not None and plain.records is not None
    assert packed.records.tobytes() == plain.records.tobytes()


def test_mixed_stream_is_grouped_by_rtype(tmp_path) -> None:
    raw = mixed_stream()
    path = tmp_path / "live.dbn"
    path.write_bytes(raw)
    ours = load_dbn(path, mixed=True)
    official = dbn.DBNDecoder(upgrade_policy=dbn.VersionUpgradePolicy.AS_IS).write_and_decode(raw)[1:]
    assert ours.schema is None and ours.records is None and ours.record_count == len(official) == 8
    assert {k: len(v) for k, v in ours.groups.items()} == {0x21: 3, 0x00: 2, 0xA0: 3}
    for rtype, arr in ours.groups.items():
        assert not arr.flags.writeable
        assert_records_match(arr, [r for r in official if int(r.rtype) == rtype])  # type: ignore[attr-defined]


def test_mixed_true_on_a_single_schema_file_is_still_zero_copy() -> None:
    s = sample("test_data.trades.dbn")
    plain, grouped = load_dbn(s.path), load_dbn(s.path, mixed=True)
    assert grouped.records is not None and plain.records is not None
    assert grouped.records.tobytes() == plain.records.tobytes()
    assert not grouped.records.flags.owndata
    assert list(grouped.groups) == [0x00]


def test_empty_fragment_has_no_records(tmp_path) -> None:
    path = tmp_path / "empty.dbn.frag.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b""))  # one frame holding nothing
    loaded = load_dbn(path, version=3)
    assert loaded.record_count == 0 and loaded.records is None and dict(loaded.groups) == {}


def test_prices_as_float_masks_undefined_and_is_exact_on_ticks() -> None:
    raw = np.array([3_722_750_000_000, UNDEF_PRICE, -1_250_000_000, 0, 2**63 - 512], dtype=np.int64)
    out = prices_as_float(raw)
    assert out.dtype == np.float64
    assert out[0] == 3722.75 and np.isnan(out[1]) and out[2] == -1.25 and out[3] == 0.0
    assert out[4] == (2**63 - 512) / 1e9  # as float it equals float(UNDEF_PRICE), yet it is a price
    assert not np.isnan(prices_as_float(raw[[0, 4]])).any()
    with pytest.raises(TypeError):
        prices_as_float(np.array([1.5]))


@pytest.mark.parametrize(
    "name", ["test_data.ohlcv-1m.dbn", "test_data.ohlcv-1h.v1.dbn.zst", "test_data.ohlcv-1s.v3.dbn.zst"]
)
def test_ohlcv_arrays_match_official_pretty_prices(name: str) -> None:
    s = sample(name)
    bars = ohlcv_arrays(load_dbn(s.path))
    _, official = official_decode(s)
    assert tuple(bars) == OHLCV_KEYS
    assert all(arr.flags.c_contiguous and len(arr) == len(official) for arr in bars.values())
    assert bars["ts_event"].dtype == np.int64 and bars["volume"].dtype == np.float64
    for i, rec in enumerate(official):
        assert bars["ts_event"][i] == rec.ts_event  # type: ignore[attr-defined]
        for key in ("open", "high", "low", "close"):
            assert bars[key][i] == getattr(rec, f"pretty_{key}")
        assert bars["volume"][i] == rec.volume  # type: ignore[attr-defined]


def test_ohlcv_arrays_of_an_empty_file_and_of_a_non_ohlcv_file() -> None:
    empty = ohlcv_arrays(load_dbn(sample("test_data.ohlcv-1d.dbn").path))
    assert all(len(v) == 0 for v in empty.values())
    with pytest.raises(DataError, match="trades, not OHLCV"):
        ohlcv_arrays(load_dbn(sample("test_data.trades.dbn").path))


def test_loader_keeps_the_layer_rule_and_import_perfgate_stays_light() -> None:
    code = (
        "import sys, perfgate; light = 'numpy' not in sys.modules; before = set(sys.modules); "
        "import perfgate_pipeline.dbn; "
        "bad = [m for m in set(sys.modules) - before if m.split('.')[:2] in (['perfgate','cli'], "
        "['perfgate','core'], ['perfgate','store'], ['perfgate','report'])]; print(light, bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True []"

"""Damaged DBN files, made from the real corpus files: each must raise DataError.

Where the official tools stay silent (a cut-off record is buffered, a truncated zstd
stream yields nothing, a record of the wrong type is decoded anyway), perfgate's loader
must refuse, with a message that names the file, the byte offset and what to do.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from perfgate_pipeline.dbn import load_dbn
from perfgate_pipeline.errors import DataError

from .test_dbn_corpus import mixed_stream, ohlcv_stream, sample, trade_record, zstd_frames

OHLCV = sample("test_data.ohlcv-1m.dbn")  # v2, records of 56 bytes from byte offset 353
OHLCV_V3 = ohlcv_stream(n=4)  # v3, records from byte offset 200 (padded header)
DEFINITION_V1_FRAG = sample("test_data.definition.v1.dbn.frag")


def _set(raw: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _write(tmp_path: Path, name: str, raw: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


def _expect(path: Path, pattern: str, *, offset: int | None = None, **kwargs: object) -> DataError:
    with pytest.raises(DataError) as err:
        load_dbn(path, **kwargs)  # type: ignore[arg-type]
    text = str(err.value)
    # offsets into a zstd file's decompressed stream say so; the patterns leave that out
    assert re.search(pattern, text.replace(" of the decompressed stream", "")), text
    assert str(path) in text, text
    assert err.value.source == str(path)
    assert "\n" not in text
    if offset is not None:
        assert f"byte offset {offset}" in text, text
    return err.value


# (id, build(original bytes) -> damaged bytes, message pattern, byte offset named)
_PLAIN_CASES: list[tuple[str, Callable[[bytes], bytes], str, int]] = [
    ("short-prelude", lambda raw: raw[:5], r"shorter than the 8-byte DBN prelude", 0),
    ("wrong-magic", lambda raw: b"DBX" + raw[3:], r"wrong magic b'DBX'", 0),
    ("version-0", lambda raw: _set(raw, 3, "<B", 0), r"unsupported DBN version 0.*DBZ", 3),
    ("version-4", lambda raw: _set(raw, 3, "<B", 4), r"unsupported DBN version 4", 3),
    ("version-255", lambda raw: _set(raw, 3, "<B", 255), r"unsupported DBN version 255", 3),
    ("metadata-length-too-small", lambda raw: _set(raw, 4, "<I", 99), r"impossible metadata length 99", 4),
    ("metadata-length-past-end", lambda raw: _set(raw, 4, "<I", 10_000), r"impossible metadata length 10000.*trunc", 4),
    ("metadata-length-huge", lambda raw: _set(raw, 4, "<I", 2**32 - 1), r"impossible metadata length", 4),
    ("truncated-in-metadata", lambda raw: raw[:200], r"impossible metadata length 345.*truncated", 4),
    ("unknown-schema", lambda raw: _set(raw, 24, "<H", 99), r"unknown schema id 99", 24),
    ("ts-out-flag-garbage", lambda raw: _set(raw, 52, "<B", 7), r"ts_out flag is 7", 52),
    ("schema-definition", lambda raw: _set(raw, 108, "<I", 4), r"schema_definition_length is 4", 108),
    ("symbol-count-overflow", lambda raw: _set(raw, 112, "<I", 10_000), r"symbols needs 710000 more bytes", 116),
    ("symbol-cstr-len-zero", lambda raw: _set(raw, 53, "<H", 0), r"symbol_cstr_len is 0", 53),
    # v2 mappings here: count@195, raw symbol@199, interval count@270, start_date@274
    ("interval-count-overflow", lambda raw: _set(raw, 270, "<I", 2**31), r"mappings.intervals needs", 274),
    ("bad-mapping-date", lambda raw: _set(raw, 274, "<I", 20201399), r"20201399 is not a YYYYMMDD date", 274),
    ("cut-in-second-record", lambda raw: raw[:-10], r"cut-off record.*truncated", 409),
    ("cut-in-first-record", lambda raw: raw[:360], r"last 7 byte\(s\), from byte offset 353.*truncated", 353),
    ("one-trailing-byte", lambda raw: raw + b"\x0e", r"last 1 byte\(s\).*truncated", 465),
    ("length-byte-12", lambda raw: _set(raw, 409, "<B", 12), r"record 1 at byte offset 409 has length byte 12", 409),
    ("length-byte-0", lambda raw: _set(raw, 353, "<B", 0), r"record 0 at byte offset 353 has length byte 0", 353),
    (
        "rtype-ohlcv-1s",
        lambda raw: _set(raw, 410, "<B", 0x20),
        r"record 1 at byte offset 409 is a ohlcv-1s \(0x20\) record.*mixed=True",
        409,
    ),
    (
        "rtype-trades-keeping-length",
        lambda raw: _set(raw, 354, "<B", 0x00),
        r"record 0 at byte offset 353 has trades \(0x00\) where schema ohlcv-1m needs ohlcv-1m \(0x21\).*corrupt",
        353,
    ),
    ("rtype-unknown", lambda raw: _set(raw, 410, "<B", 0x7F), r"unknown rtype 0x7F", 409),
    ("trade-appended", lambda raw: raw + trade_record(), r"record 2 at byte offset 465 is a trades.*mixed=True", 465),
    (
        "trade-spliced-in",
        lambda raw: raw[:409] + trade_record() + raw[409:],
        r"record 1 at byte offset 409 is a trades \(0x00\) record, but schema ohlcv-1m allows only",
        409,
    ),
]


@pytest.mark.parametrize(
    ("build", "pattern", "offset"), [c[1:] for c in _PLAIN_CASES], ids=[c[0] for c in _PLAIN_CASES]
)
def test_damaged_plain_file(tmp_path: Path, build: Callable[[bytes], bytes], pattern: str, offset: int) -> None:
    raw = OHLCV.path.read_bytes()
    assert len(raw) == 465 and raw[353:355] == b"\x0e\x21"  # the offsets above assume this layout
    _expect(_write(tmp_path, "bad.dbn", build(raw)), pattern, offset=offset)


@pytest.mark.parametrize(
    ("build", "pattern", "offset"), [c[1:] for c in _PLAIN_CASES], ids=[c[0] for c in _PLAIN_CASES]
)
def test_damaged_stream_inside_valid_zstd(
    tmp_path: Path, build: Callable[[bytes], bytes], pattern: str, offset: int
) -> None:
    raw = build(OHLCV.path.read_bytes())
    err = _expect(_write(tmp_path, "bad.dbn.zst", zstd_frames(raw, 2)), pattern, offset=offset)
    assert "of the decompressed stream" in str(err)


def test_v3_header_and_record_offsets(tmp_path: Path) -> None:
    assert OHLCV_V3[200:202] == b"\x0e\x21"
    _expect(_write(tmp_path, "a.dbn", OHLCV_V3[:-1]), r"from byte offset 368.*truncated", offset=368)
    _expect(_write(tmp_path, "b.dbn", _set(OHLCV_V3, 256, "<B", 16)), r"length byte 16 \(64 bytes\)", offset=256)


def test_missing_file_and_non_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found") as err:
        load_dbn(tmp_path / "nope.dbn")
    assert str(tmp_path / "nope.dbn") in str(err.value)
    with pytest.raises(DataError, match="not a regular file"):
        load_dbn(tmp_path)
    _expect(_write(tmp_path, "empty.dbn", b""), r"empty \(0 bytes\)", offset=0)


@pytest.mark.parametrize("name", ["test_data.ohlcv-1m.dbz", "test_data.trades.dbz", "test_data.definition.dbz"])
def test_legacy_dbz_and_a_skippable_frame_spliced_in_front(tmp_path: Path, name: str) -> None:
    _expect(sample(name).path, r"legacy DBZ", offset=0)
    spliced = b"\x5f\x2a\x4d\x18" + struct.pack("<I", 4) + b"junk" + OHLCV.path.read_bytes()
    _expect(_write(tmp_path, "spliced.dbn", spliced), r"legacy DBZ.*5f 2a 4d 18", offset=0)


def test_truncated_zstd_stream(tmp_path: Path) -> None:
    packed = sample("test_data.mbp-10.v3.dbn.zst").path.read_bytes()
    for cut in (len(packed) - 1, len(packed) // 2, 6):
        _expect(_write(tmp_path, f"cut{cut}.dbn.zst", packed[:cut]), r"ends inside frame 0.*truncated", offset=0)
    frames = zstd_frames(sample("test_data.mbp-10.dbn").path.read_bytes(), 3)
    first = len(zstd_frames(sample("test_data.mbp-10.dbn").path.read_bytes()[:363], 1))
    _expect(_write(tmp_path, "cut3.dbn.zst", frames[:-3]), r"ends inside frame 2", offset=None)
    assert first > 0


def test_corrupt_zstd_payload_fails_its_checksum(tmp_path: Path) -> None:
    packed = bytearray(sample("test_data.ohlcv-1m.v3.dbn.zst").path.read_bytes())
    packed[-2] ^= 0xFF  # inside the 4-byte content checksum
    _expect(_write(tmp_path, "sum.dbn.zst", bytes(packed)), r"zstd data at compressed byte offset 0.*corrupt", offset=0)


def test_garbage_after_the_last_zstd_frame(tmp_path: Path) -> None:
    packed = sample("test_data.ohlcv-1m.v3.dbn.zst").path.read_bytes()
    at = len(packed)
    _expect(_write(tmp_path, "tail.dbn.zst", packed + b"\0" * 16), r"frame 1\) is not a zstd frame", offset=at)


def test_multi_frame_fragment_with_a_frame_cut(tmp_path: Path) -> None:
    packed = sample("multi-frame.definition.v1.dbn.frag.zst").path.read_bytes()
    _expect(_write(tmp_path, "frag.zst", packed[:-5]), r"ends inside frame 7", version=1)


def test_mixed_schema_stream_needs_mixed_true(tmp_path: Path) -> None:
    path = _write(tmp_path, "live.dbn", mixed_stream())
    _expect(path, r"several schemas \(schema id 0xFFFF.*mixed=True", offset=24)


@pytest.mark.parametrize(
    ("build", "pattern", "offset"),
    [
        (lambda raw: raw[:-7], r"record 7 at byte offset 504 needs 56 bytes but only 49 are left", 504),
        (lambda raw: _set(raw, 505, "<B", 0x7F), r"record 7 at byte offset 504 has unknown rtype 0x7F", 504),
        (lambda raw: _set(raw, 504, "<B", 0), r"record 7 at byte offset 504 is a mbo \(0xA0\) record of 0 bytes", 504),
        (lambda raw: _set(raw, 504, "<B", 12), r"mbo \(0xA0\) record of 48 bytes.*56 bytes in DBN v3", 504),
    ],
    ids=["cut", "unknown-rtype", "length-0", "wrong-length"],
)
def test_damaged_mixed_stream(tmp_path: Path, build: Callable[[bytes], bytes], pattern: str, offset: int) -> None:
    raw = mixed_stream()
    assert len(raw) == 128 + 3 * 56 + 2 * 48 + 3 * 56 and raw[504:506] == b"\x0e\xa0"  # record 7: an MBO record
    _expect(_write(tmp_path, "live.dbn", build(raw)), pattern, offset=offset, mixed=True)


def test_fragment_with_the_wrong_version_or_ts_out(tmp_path: Path) -> None:
    path = DEFINITION_V1_FRAG.path
    _expect(path, r"record 0 at byte offset 0 has length byte 90 \(360 bytes\).*520 bytes", offset=0, version=3)
    _expect(
        path,
        r"length byte 90 \(360 bytes\).*368 bytes \(length byte 92, ts_out included\)",
        offset=0,
        version=1,
        ts_out=True,
    )
    _expect(path, r"wrong magic", offset=0)  # without version= it is not a DBN file
    junk = _write(tmp_path, "junk.frag", b"\x0e\x99" + bytes(54))
    _expect(junk, r"record 0 at byte offset 0 has unknown rtype 0x99.*version= is wrong", offset=0, version=2)
    _expect(_write(tmp_path, "one.frag", b"\x0e"), r"1 byte\(s\) at byte offset 0 are too few", offset=0, version=2)


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"version=4: DBN versions 1-3"):
        load_dbn(OHLCV.path, version=4)
    with pytest.raises(DataError, match=r"ts_out=True applies only to header-less fragments"):
        load_dbn(OHLCV.path, ts_out=True)
    _expect(OHLCV.path, r"starts with a DBN metadata header at byte offset 0", offset=0, version=2)


def test_every_cut_is_refused_unless_it_falls_between_records(tmp_path: Path) -> None:
    """Cut real files every few bytes: DataError, or (on a record boundary) the records before the cut.

    A cut exactly between records cannot be detected: DBN v2/v3 headers hold no record count.
    """
    for s in (sample(n) for n in ("test_data.definition.dbn", "test_data.mbp-10.dbn", "test_data.status.dbn")):
        raw = s.path.read_bytes()
        whole = load_dbn(s.path)
        assert whole.records is not None
        size, start = whole.records.dtype.itemsize, whole.records_offset
        step = 7 if len(raw) < 2000 else 37  # the 5 KB definition header needs fewer probes
        for cut in range(0, len(raw) - 1, step):
            for name, data in (
                (f"{cut}.dbn", raw[:cut]),
                (f"{cut}.dbn.zst", zstandard.ZstdCompressor().compress(raw[:cut])),
            ):
                path = _write(tmp_path, name, data)
                if cut >= start and (cut - start) % size == 0:
                    assert load_dbn(path).record_count == (cut - start) // size
                    continue
                with pytest.raises(DataError, match="byte offset"):
                    load_dbn(path)

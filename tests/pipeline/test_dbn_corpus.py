"""The DBN test corpus (tests/data/dbn) and builders shared by the DBN loader tests.

The corpus README's table is the expected value for every file: version, compression
and record count (counted upstream with the official decoder). The tests here check
that the table and the folder agree, so a file added without a row (or the reverse)
fails loudly instead of going untested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import databento_dbn as dbn
import pytest
import zstandard

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "dbn"
_ROW = re.compile(
    r"^\| `(?P<name>[^`]+)` \| (?P<schema>[^|]+) \| (?P<version>[^|]+) \| (?P<compression>[^|]+) \| "
    r"(?P<records>[^|]+) \| (?P<bytes>\d+) \|"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One corpus file and what its README row says about it."""

    path: Path
    schema: str
    version: int | None  # None for legacy DBZ
    compressed: bool
    fragment: bool
    dbz: bool
    records: int | None  # None for legacy DBZ
    size: int

    @property
    def name(self) -> str:
        return self.path.name


def corpus() -> list[Sample]:
    samples = []
    for line in (DATA_DIR / "README.md").read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if not match:
            continue
        version = re.match(r"v(\d)", match["version"].strip())
        records = match["records"].strip()
        samples.append(
            Sample(
                path=DATA_DIR / match["name"],
                schema=match["schema"].strip(),
                version=int(version.group(1)) if version else None,
                compressed=match["compression"].strip().startswith("zstd"),
                fragment="records only" in match["version"],
                dbz=match["name"].endswith(".dbz"),
                records=None if records == "n/a" else int(records),
                size=int(match["bytes"]),
            )
        )
    return samples


CORPUS = corpus()
DBN_SAMPLES = [s for s in CORPUS if not s.dbz]
DBZ_SAMPLES = [s for s in CORPUS if s.dbz]
PLAIN_SAMPLES = [s for s in DBN_SAMPLES if not s.compressed and not s.fragment]


def sample(name: str) -> Sample:
    return next(s for s in CORPUS if s.name == name)


def load_kwargs(s: Sample) -> dict[str, int]:
    """Header-less fragments must be told their version; nothing else may be."""
    return {"version": s.version} if s.fragment and s.version else {}


def official_decode(s: Sample) -> tuple[dbn.Metadata | None, list[object]]:
    """(metadata, records) from the official decoder, keeping the file's own version."""
    raw = s.path.read_bytes()
    decoder = dbn.DBNDecoder(
        has_metadata=not s.fragment,
        input_version=s.version,
        upgrade_policy=dbn.VersionUpgradePolicy.AS_IS,
        compression=dbn.Compression.ZSTD if s.compressed else dbn.Compression.NONE,
    )
    out = decoder.write_and_decode(raw)
    if s.fragment:
        return None, list(out)
    return out[0], list(out[1:])


def decompressed(s: Sample) -> bytes:
    """The file's DBN byte stream (decompressed if it is zstd)."""
    raw = s.path.read_bytes()
    if not s.compressed:
        return raw
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()


def zstd_frames(raw: bytes, pieces: int, *, checksum: bool = True, content_size: bool = False) -> bytes:
    """``raw`` compressed as ``pieces`` concatenated zstd frames (a valid .dbn.zst)."""
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=checksum, write_content_size=content_size)
    step = max(1, -(-len(raw) // pieces))
    return b"".join(cctx.compress(raw[i : i + step]) for i in range(0, len(raw), step))


def ohlcv_stream(*, n: int = 5, ts_out: bool = False, version: int = 3, header: bool = True) -> bytes:
    """A real OHLCV-1m DBN stream written with the official encoder objects."""
    meta = dbn.Metadata(
        dataset="GLBX.MDP3",
        start=1_609_160_400_000_000_000,
        stype_in=dbn.SType.RAW_SYMBOL,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=dbn.Schema.OHLCV_1M,
        symbols=["ESH1"],
        end=1_609_200_000_000_000_000,
        ts_out=ts_out,
        version=version,
    )
    recs = []
    for i in range(n):
        px = 3_722_750_000_000 + i * 250_000_000
        extra = {"ts_out": 1_609_160_400_000_000_000 + i * 60_000_000_000 + 17} if ts_out else {}
        recs.append(
            bytes(
                dbn.OHLCVMsg(
                    int(dbn.RType.OHLCV_1M),
                    1,
                    5482,
                    1_609_160_400_000_000_000 + i * 60_000_000_000,
                    px,
                    px + 500_000_000,
                    px - 250_000_000,
                    px + 250_000_000,
                    10 + i,
                    **extra,
                )
            )
        )
    body = b"".join(recs)
    return meta.encode() + body if header else body


def trade_record(*, i: int = 0, ts_out: bool = False) -> bytes:
    extra = {"ts_out": 99 + i} if ts_out else {}
    msg = dbn.TradeMsg(
        1,
        5482,
        1_609_160_400_000_000_000 + i,
        3_722_750_000_000,
        3 + i,
        dbn.Action.TRADE,
        dbn.Side.BID,
        0,
        1_609_160_400_000_000_100 + i,
        **extra,
    )
    return bytes(msg)


def mbo_record(*, i: int = 0) -> bytes:
    msg = dbn.MBOMsg(
        1,
        5482,
        1_609_160_400_000_000_000 + i,
        1000 + i,
        3_722_500_000_000,
        7,
        dbn.Action.ADD,
        dbn.Side.ASK,
        1_609_160_400_000_000_200 + i,
    )
    return bytes(msg)


def mixed_stream() -> bytes:
    """A schema-0xFFFF (live-style) stream interleaving OHLCV-1m, trade and MBO records."""
    meta = dbn.Metadata(
        dataset="GLBX.MDP3",
        start=1_609_160_400_000_000_000,
        stype_in=None,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=None,
        symbols=[],
        version=3,
    )
    bars = ohlcv_stream(n=3, header=False)
    size = len(bars) // 3
    parts = [
        bars[:size],
        trade_record(i=0),
        mbo_record(i=0),
        bars[size : 2 * size],
        trade_record(i=1),
        bars[2 * size :],
        mbo_record(i=1),
        mbo_record(i=2),
    ]
    return meta.encode() + b"".join(parts)


def test_readme_lists_every_file_once() -> None:
    on_disk = {p.name for p in DATA_DIR.iterdir() if p.suffix not in {".md", ".txt"}}
    listed = [s.name for s in CORPUS]
    assert len(listed) == len(set(listed)) == 81
    assert set(listed) == on_disk


@pytest.mark.parametrize("s", CORPUS, ids=lambda s: s.name)
def test_readme_row_matches_file(s: Sample) -> None:
    raw = s.path.read_bytes()
    assert len(raw) == s.size
    if s.dbz:
        assert raw[:4] == b"\x50\x2a\x4d\x18"
    elif s.compressed:
        assert raw[:4] == b"\x28\xb5\x2f\xfd"
    elif not s.fragment:
        assert raw[:3] == b"DBN" and raw[3] == s.version


def test_synthetic_builders_round_trip_through_the_official_decoder() -> None:
    for stream, count in ((ohlcv_stream(n=4, ts_out=True), 4), (mixed_stream(), 8)):
        out = dbn.DBNDecoder(upgrade_policy=dbn.VersionUpgradePolicy.AS_IS).write_and_decode(stream)
        assert len(out) == 1 + count

"""Synthetic DBN data: real DBN (checked with databento-dbn), deterministic, realistic.

The realism checks are statistics with thresholds that a plain Gaussian random walk
fails; ``test_realism_checks_reject_a_gaussian_walk`` runs them on one to show that
they can fail.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import databento_dbn as dbn
import numpy as np
import pytest
import zstandard

from perfgate.errors import InputError
from perfgate_pipeline import synth
from perfgate_pipeline.synth import (
    MBP1_DTYPE,
    OHLCV_DTYPE,
    SCHEMAS,
    TRADES_DTYPE,
    SynthInfo,
    synthesize_bars,
    synthesize_mbp1,
    synthesize_ohlcv,
    synthesize_trades,
    write_synthetic,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "dbn"
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
MINUTE_NS = 60_000_000_000
N = 3_000  # records per file in the file-level tests

DTYPES = {"ohlcv-1m": OHLCV_DTYPE, "trades": TRADES_DTYPE, "mbp-1": MBP1_DTYPE}
SYNTH = {"ohlcv-1m": synthesize_ohlcv, "trades": synthesize_trades, "mbp-1": synthesize_mbp1}
OFFICIAL = {"ohlcv-1m": dbn.OHLCVMsg, "trades": dbn.TradeMsg, "mbp-1": dbn.MBP1Msg}


def decode(data: bytes, *, compressed: bool = False) -> list:
    decoder = dbn.DBNDecoder(
        upgrade_policy=dbn.VersionUpgradePolicy.AS_IS,
        compression=dbn.Compression.ZSTD if compressed else dbn.Compression.NONE,
    )
    decoder.write(data)
    return decoder.decode()


def plain_bytes(data: bytes) -> bytes:
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        return reader.read()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("synth")
    out = {}
    for schema in SCHEMAS:
        for suffix in (".dbn", ".dbn.zst"):
            path = root / f"{schema}{suffix}"
            write_synthetic(path, schema=schema, records=N, seed=42)
            out[schema, suffix] = path
    return out


# ---------------------------------------------------------------------------------------
# DBN validity and byte identity


def test_record_dtypes_match_the_official_layout() -> None:
    for schema, cls in OFFICIAL.items():
        official = np.dtype(cls._dtypes)
        assert DTYPES[schema] == official, schema
        assert DTYPES[schema].itemsize == {"ohlcv-1m": 56, "trades": 48, "mbp-1": 80}[schema]


def test_record_dtype_reads_the_real_v3_ohlcv_file() -> None:
    raw = plain_bytes((DATA / "test_data.ohlcv-1m.v3.dbn.zst").read_bytes())
    official = decode(raw)
    header_len = 8 + int.from_bytes(raw[4:8], "little")
    ours = np.frombuffer(raw, dtype=OHLCV_DTYPE, offset=header_len)
    assert len(ours) == len(official) - 1 == 2
    for rec, msg in zip(ours, official[1:], strict=True):
        assert rec.tobytes() == bytes(msg)
        assert (int(rec["open"]), int(rec["close"]), int(rec["volume"])) == (msg.open, msg.close, msg.volume)


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("suffix", [".dbn", ".dbn.zst"])
def test_databento_decodes_the_file(files: dict, schema: str, suffix: str) -> None:
    path = files[schema, suffix]
    msgs = decode(path.read_bytes(), compressed=suffix.endswith(".zst"))
    meta, records = msgs[0], msgs[1:]
    assert meta.version == 3
    assert meta.schema == schema
    assert meta.dataset == "XNAS.ITCH"
    assert meta.stype_in == "raw_symbol" and meta.stype_out == "instrument_id"
    assert len(records) == N
    assert all(isinstance(r, OFFICIAL[schema]) for r in records)
    expected = SYNTH[schema](N, 42)
    assert list(meta.symbols) == ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "META", "TSLA", "SPY"]
    ids = {str(i) for i in np.unique(expected["instrument_id"])}
    assert {iv["symbol"] for ivs in meta.mappings.values() for iv in ivs} == ids
    for i in (0, 1, N // 2, N - 1):
        assert records[i].instrument_id == int(expected["instrument_id"][i])
        assert records[i].ts_event == int(expected["ts_event"][i])
    price = "close" if schema == "ohlcv-1m" else "price"
    assert [getattr(r, price) for r in records[:50]] == expected[price][:50].tolist()


@pytest.mark.parametrize("schema", SCHEMAS)
def test_bytes_equal_what_databento_encodes(files: dict, schema: str) -> None:
    """Header from databento's Metadata(...).encode(), records from its message constructors."""
    data = files[schema, ".dbn"].read_bytes()
    msgs = decode(data)
    meta, records = msgs[0], msgs[1:]
    # meta.mappings is a dict in hash order; the file lists mappings in symbol order
    mappings = [
        SimpleNamespace(raw_symbol=raw, intervals=[SimpleNamespace(**iv) for iv in meta.mappings[raw]])
        for raw in meta.symbols
    ]
    header = dbn.Metadata(
        dataset=meta.dataset,
        start=meta.start,
        end=meta.end,
        stype_in=dbn.SType.RAW_SYMBOL,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=dbn.Schema(schema),
        symbols=list(meta.symbols),
        mappings=mappings,
        ts_out=False,
        version=3,
    ).encode()
    assert data[: len(header)] == header
    assert bytes(meta.encode()) == header
    assert len(header) % 8 == 0  # v3 pads: records are 8-byte aligned

    rebuilt = b"".join(bytes(_rebuild(schema, r)) for r in records)
    assert data[len(header) :] == rebuilt
    assert data[len(header) :] == b"".join(bytes(r) for r in records)


def _rebuild(schema: str, r: Any) -> Any:
    """A fresh official record from the decoded one's public fields."""
    if schema == "ohlcv-1m":
        rtype = int(dbn.RType.OHLCV_1M)
        return dbn.OHLCVMsg(
            rtype, r.publisher_id, r.instrument_id, r.ts_event, r.open, r.high, r.low, r.close, r.volume
        )
    common = (r.publisher_id, r.instrument_id, r.ts_event, r.price, r.size, r.action, r.side)
    extra = {"flags": int(r.flags), "ts_in_delta": r.ts_in_delta, "sequence": r.sequence}
    if schema == "trades":
        return dbn.TradeMsg(*common, r.depth, r.ts_recv, **extra)
    level = dbn.BidAskPair(r.bid_px_00, r.ask_px_00, r.bid_sz_00, r.ask_sz_00, r.bid_ct_00, r.ask_ct_00)
    return dbn.MBP1Msg(*common, r.depth, r.ts_recv, **extra, levels=level)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_zst_is_the_plain_file_in_one_checksummed_frame(files: dict, schema: str) -> None:
    packed = files[schema, ".dbn.zst"].read_bytes()
    params = zstandard.get_frame_parameters(packed)
    assert params.has_checksum
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN  # as Databento's streaming writer leaves it
    assert plain_bytes(packed) == files[schema, ".dbn"].read_bytes()


# ---------------------------------------------------------------------------------------
# determinism and the writer


@pytest.mark.parametrize("suffix", [".dbn", ".dbn.zst"])
def test_same_seed_same_bytes(tmp_path: Path, suffix: str) -> None:
    for schema in SCHEMAS:
        a = write_synthetic(tmp_path / f"a{suffix}", schema=schema, records=777, seed=5)
        b = write_synthetic(tmp_path / f"b{suffix}", schema=schema, records=777, seed=5)
        c = write_synthetic(tmp_path / f"c{suffix}", schema=schema, records=777, seed=6)
        assert a.path.read_bytes() == b.path.read_bytes(), schema
        assert a.path.read_bytes() != c.path.read_bytes(), schema


def test_synth_info(tmp_path: Path) -> None:
    info = write_synthetic(tmp_path / "x.dbn", schema="ohlcv-1m", records=10, seed=0, instruments=3)
    assert info == SynthInfo(
        path=tmp_path / "x.dbn",
        schema="ohlcv-1m",
        records=10,
        symbols=("AAPL", "MSFT", "NVDA"),
        bytes_written=(tmp_path / "x.dbn").stat().st_size,
    )
    with pytest.raises(AttributeError):
        info.records = 3  # type: ignore[misc]


def test_one_record(tmp_path: Path) -> None:
    for schema in SCHEMAS:
        info = write_synthetic(tmp_path / f"{schema}.dbn", schema=schema, records=1, seed=0)
        msgs = decode(info.path.read_bytes())
        assert len(msgs) == 2 and info.symbols == ("AAPL",) and list(msgs[0].symbols) == ["AAPL"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"schema": "mbo"}, "schema"),
        ({"schema": "OHLCV-1M"}, "schema"),
        ({"records": 0}, "records"),
        ({"records": -5}, "records"),
        ({"records": True}, "records"),
        ({"records": 2.5}, "records"),
        ({"seed": -1}, "seed"),
        ({"instruments": 0}, "instruments"),
        ({"instruments": 9}, "instruments"),
    ],
)
def test_bad_arguments_raise_input_error(tmp_path: Path, kwargs: dict, field: str) -> None:
    args = {"schema": "ohlcv-1m", "records": 10, "seed": 0, **kwargs}
    with pytest.raises(InputError) as info:
        write_synthetic(tmp_path / "x.dbn", **args)
    assert info.value.field == field
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_is_an_input_error(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "x.dbn"
    with pytest.raises(InputError) as info:
        write_synthetic(target, schema="ohlcv-1m", records=10, seed=0)
    assert info.value.source == str(target)


@pytest.mark.parametrize("suffix", [".dbn", ".dbn.zst"])
@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failed_write_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, error: BaseException
) -> None:
    target = tmp_path / f"bars{suffix}"
    target.write_bytes(b"the previous file")

    def fail(fd: int) -> None:
        raise error

    monkeypatch.setattr(synth.os, "fsync", fail)
    with pytest.raises(InputError if isinstance(error, OSError) else KeyboardInterrupt):
        write_synthetic(target, schema="ohlcv-1m", records=5000, seed=0)
    assert target.read_bytes() == b"the previous file"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary left behind


def test_written_file_is_readable_by_others(tmp_path: Path) -> None:
    info = write_synthetic(tmp_path / "x.dbn", schema="trades", records=10, seed=0)
    assert info.path.stat().st_mode & 0o777 == 0o644


# ---------------------------------------------------------------------------------------
# realistic bars


def test_ohlc_is_consistent_and_on_the_tick_grid() -> None:
    rec = synthesize_ohlcv(40_000, 3)
    o, h, lo, c = (rec[k] for k in ("open", "high", "low", "close"))
    assert (lo <= np.minimum(o, c)).all()
    assert (np.maximum(o, c) <= h).all()
    assert (lo > 0).all() and (rec["volume"] >= 1).all()
    for x in (o, h, lo, c):
        assert (x % 10_000_000 == 0).all()  # $0.01 ticks in 1e-9 fixed point
    assert ((h > lo).mean()) > 0.95  # bars have range
    assert (rec["length"] == 14).all() and (rec["rtype"] == 0x21).all()


def test_open_is_the_previous_close_within_a_session() -> None:
    rec = synthesize_ohlcv(5_000, 3, instruments=1)
    same_session = np.diff(rec["ts_event"].astype(np.int64)) == MINUTE_NS
    assert same_session.mean() > 0.99
    assert (rec["open"][1:][same_session] == rec["close"][:-1][same_session]).all()
    gaps = rec["open"][1:][~same_session] != rec["close"][:-1][~same_session]
    assert gaps.mean() > 0.5  # overnight gaps


def test_bars_sit_in_new_york_sessions_on_weekdays() -> None:
    # 30,000 one-minute bars of one instrument: 77 sessions, across the March 2024 DST switch.
    rec = synthesize_ohlcv(30_000, 0, instruments=1)
    ts = rec["ts_event"].astype(np.int64)
    assert (np.diff(ts) > 0).all()
    local = [dt.datetime.fromtimestamp(t / 1e9, tz=NEW_YORK) for t in ts[::97]]
    assert all(d.weekday() < 5 for d in local)
    assert all(dt.time(9, 30) <= d.time() < dt.time(16, 0) for d in local)
    first = [dt.datetime.fromtimestamp(t / 1e9, tz=NEW_YORK) for t in ts[::390]]
    assert all(d.time() == dt.time(9, 30) for d in first)
    assert {d.utcoffset() for d in first} == {dt.timedelta(hours=-5), dt.timedelta(hours=-4)}
    assert local[0].date() == dt.date(2024, 1, 2)


def test_daylight_saving_rule_matches_the_tz_database() -> None:
    day = dt.date(2024, 1, 1)
    while day < dt.date(2031, 1, 1):
        expected = dt.datetime(day.year, day.month, day.day, 9, 30, tzinfo=NEW_YORK).utcoffset()
        assert dt.timedelta(hours=synth._us_eastern_utc_offset_hours(day)) == expected, day
        day += dt.timedelta(days=1)


def test_bars_interleave_instruments_by_time() -> None:
    rec = synthesize_ohlcv(1_003, 2)
    assert list(rec["instrument_id"][:8]) == list(range(101, 109))
    order = np.lexsort((rec["instrument_id"], rec["ts_event"]))
    assert (order == np.arange(len(rec))).all()
    assert (np.diff(rec["ts_event"].astype(np.int64)) >= 0).all()
    assert len(rec) == 1_003


def _intraday_returns(rec: np.ndarray) -> list[np.ndarray]:
    out = []
    for iid in np.unique(rec["instrument_id"]):
        bars = rec[rec["instrument_id"] == iid]
        same_session = np.diff(bars["ts_event"].astype(np.int64)) == MINUTE_NS
        out.append(np.diff(np.log(bars["close"].astype(np.float64)))[same_session])
    return out


def _excess_kurtosis(r: np.ndarray) -> float:
    z = (r - r.mean()) / r.std()
    return float((z**4).mean() - 3.0)


def _acf(x: np.ndarray, lag: int) -> float:
    x = x - x.mean()
    return float((x[:-lag] * x[lag:]).sum() / (x * x).sum())


def _is_fat_tailed(r: np.ndarray) -> bool:
    # Gaussian: excess kurtosis 0 with standard error sqrt(24 / n) = 0.01 at n = 200k.
    return _excess_kurtosis(r) > 1.0


def _clusters(r: np.ndarray) -> bool:
    # iid returns: the autocorrelation of |r| is 0 with standard error 1/sqrt(n) ~ 0.003.
    a = np.abs(r)
    return min(_acf(a, lag) for lag in (1, 2, 5, 10, 30)) > 0.05


def test_returns_are_fat_tailed_and_cluster() -> None:
    returns = _intraday_returns(synthesize_ohlcv(200_000, 8))
    for r in returns:
        assert _is_fat_tailed(r)
        assert _clusters(r)
        assert abs(_acf(r, 1)) < 0.03  # but returns themselves are not predictable


def test_realism_checks_reject_a_gaussian_walk() -> None:
    r = np.random.default_rng(0).standard_normal(200_000) * 1e-3
    assert not _is_fat_tailed(r)
    assert not _clusters(r)


def test_volume_is_u_shaped_and_rises_with_volatility() -> None:
    rec = synthesize_ohlcv(390 * 120, 4, instruments=1)  # 120 sessions
    vol = rec["volume"].astype(np.float64).reshape(120, 390)
    profile = vol.mean(axis=0)
    midday = profile[120:270].mean()
    assert profile[:30].mean() > 1.5 * midday
    assert profile[-30:].mean() > 1.3 * midday
    r = np.abs(np.diff(np.log(rec["close"].astype(np.float64))))
    assert np.corrcoef(r, rec["volume"][1:].astype(np.float64))[0, 1] > 0.2


@pytest.mark.parametrize("make", [synthesize_trades, synthesize_mbp1])
def test_tick_schemas_are_ordered_and_plausible(make) -> None:
    rec = make(20_000, 1)
    assert (np.diff(rec["ts_recv"].astype(np.int64)) >= 0).all()  # Databento's index order
    assert (rec["ts_recv"] > rec["ts_event"]).all()
    assert (rec["ts_in_delta"] > 0).all()
    assert (rec["price"] > 0).all() and (rec["price"] % 10_000_000 == 0).all()
    assert (rec["size"] >= 1).all()
    for iid in np.unique(rec["instrument_id"]):
        mine = rec[rec["instrument_id"] == iid]
        seq = np.sort(mine["sequence"])
        assert (np.diff(seq.astype(np.int64)) > 0).all()
    if make is synthesize_mbp1:
        assert (rec["bid_px_00"] < rec["ask_px_00"]).all()
        is_bid = rec["side"] == b"B"
        assert (rec["price"][is_bid] == rec["bid_px_00"][is_bid]).all()
        assert set(np.unique(rec["action"])) == {b"A", b"C", b"M", b"T"}


def test_synthesize_bars_is_the_loader_shape() -> None:
    bars = synthesize_bars(500, 2)
    assert set(bars) == {"open", "high", "low", "close", "volume", "ts_event"}
    for name in ("open", "high", "low", "close", "volume"):
        assert bars[name].dtype == np.float64 and bars[name].shape == (500,)
    assert bars["ts_event"].dtype == np.int64
    rec = synthesize_ohlcv(500, 2, instruments=1)
    assert np.array_equal(bars["close"], rec["close"] / 1e9)  # as the DBN loader converts

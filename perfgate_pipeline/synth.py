"""Realistic synthetic market data, written as real DBN files.

Benchmarks need market data of any size, and the few real DBN files we may ship hold two
records each. This module makes it: deterministic for a seed (same seed, same bytes),
vectorised numpy, about a second for 1,000,000 bars.

**Price process.** Per instrument, one-minute log returns follow a multiplicative
diurnal-times-GARCH model (Engle & Sokalska, 2012, *J. Financial Econometrics* 10(1)):

    r_t = sqrt(u(m_t)) * e_t,      e_t = sqrt(h_t) * z_t,
    h_t = omega + alpha * e_{t-1}^2 + beta * h_{t-1},       omega = s^2 (1 - alpha - beta)

with ``z_t`` Student-t with ``NU`` degrees of freedom scaled to unit variance (fat tails),
GARCH(1,1) conditional variance ``h_t`` (volatility clustering; ``alpha + beta`` close to 1
gives long-lived bursts), ``s`` the per-minute volatility implied by the instrument's annual
volatility, and ``u(m)`` a U-shaped intraday pattern of minute ``m`` of the session, scaled
to mean 1 (markets are busiest and most volatile after the open and before the close). The
first bar of each session adds an overnight gap. Prices are ``exp`` of the cumulated log
returns, put on the instrument's tick grid and stored as DBN fixed point (int64, 1e-9 units).

**Bars.** ``open`` is the previous close (plus the gap at a session's first bar); ``high``
and ``low`` extend ``max(open, close)`` and ``min(open, close)`` by ``KAPPA * sigma_t * |N|``
and are rounded outwards to the tick grid, so ``low <= min(open, close)`` and
``max(open, close) <= high`` hold exactly. Volume is the instrument's mean volume times the
U-shaped pattern, times ``sqrt(h_t / s^2)`` and ``0.6 + 0.4 |z_t|`` (volume rises with
volatility and with the size of the move), times log-normal noise, rounded, at least 1.

**Calendar.** Regular US equity sessions, 09:30-16:00 America/New_York, every weekday from
2024-01-02 (exchange holidays are not skipped), converted to UTC nanoseconds with the US
daylight-saving rule in force since 2007 (so no time-zone database is needed). One-minute
bars are sorted by time, then instrument, as Databento writes them.

**Schemas.** ``ohlcv-1m`` (the reference pipeline's input), ``trades`` and ``mbp-1`` (so
the other loader paths can be benchmarked at size: same price process per event, U-shaped
event intensity, exchange latencies, consistent top-of-book).

**File.** DBN version 3: it is what databento-dbn writes by default and, unlike v1/v2, it
pads the metadata to a multiple of 8 bytes, so the records that follow are 8-byte aligned
and a loader can lay a numpy structured view over a memory map without copying. (The
market-data records are the same in v2 and v3.) The metadata block is encoded by
databento-dbn itself; the records are numpy structured arrays with the exact C layout.
A ``.zst`` suffix writes one zstd frame with a checksum and no content size, the framing
Databento uses.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import BinaryIO

import databento_dbn as dbn
import numba
import numpy as np
import zstandard

from perfgate.errors import InputError

__all__ = [
    "MBP1_DTYPE",
    "OHLCV_DTYPE",
    "SCHEMAS",
    "TRADES_DTYPE",
    "SynthInfo",
    "session_opens_utc_ns",
    "synthesize_bars",
    "synthesize_mbp1",
    "synthesize_ohlcv",
    "synthesize_trades",
    "write_synthetic",
    "write_synthetic_to",
]

DBN_VERSION = 3
DATASET = "XNAS.ITCH"
PUBLISHER_ID = 2  # XNAS.ITCH.XNAS
PRICE_SCALE = 1_000_000_000  # DBN fixed point: 1 unit = 1e-9
TICK = 10_000_000  # $0.01 in fixed point
FIRST_DAY = dt.date(2024, 1, 2)
SESSION_MINUTES = 390  # 09:30-16:00
MINUTE_NS = 60_000_000_000
MINUTES_PER_YEAR = 252 * SESSION_MINUTES

# Model constants (see the module docstring).
NU = 5.0  # Student-t degrees of freedom: excess kurtosis 6, finite fourth moment
ALPHA, BETA = 0.06, 0.93  # GARCH(1,1); persistence 0.99 per minute
KAPPA = 0.5  # wick length in units of the bar's sigma
GAP_MINUTES = 30.0  # the overnight gap has the variance of this many minutes
TRADES_PER_DAY = 20_000  # per instrument, for trades and mbp-1

# symbol, instrument_id, start price ($), annual volatility, mean volume per minute
_INSTRUMENTS: tuple[tuple[str, int, float, float, float], ...] = (
    ("AAPL", 101, 185.0, 0.25, 45_000.0),
    ("MSFT", 102, 375.0, 0.22, 25_000.0),
    ("NVDA", 103, 495.0, 0.45, 40_000.0),
    ("AMZN", 104, 150.0, 0.30, 35_000.0),
    ("GOOGL", 105, 140.0, 0.28, 25_000.0),
    ("META", 106, 350.0, 0.35, 15_000.0),
    ("TSLA", 107, 250.0, 0.55, 90_000.0),
    ("SPY", 108, 470.0, 0.13, 60_000.0),
)
MAX_INSTRUMENTS = len(_INSTRUMENTS)

_HEADER = [("length", "u1"), ("rtype", "u1"), ("publisher_id", "<u2"), ("instrument_id", "<u4"), ("ts_event", "<u8")]
#: OHLCV record, 56 bytes: the header, then open/high/low/close i64 (1e-9) and volume u64.
OHLCV_DTYPE = np.dtype(
    [*_HEADER, ("open", "<i8"), ("high", "<i8"), ("low", "<i8"), ("close", "<i8"), ("volume", "<u8")]
)
_TRADE_BODY = [
    ("price", "<i8"),
    ("size", "<u4"),
    ("action", "S1"),
    ("side", "S1"),
    ("flags", "u1"),
    ("depth", "u1"),
    ("ts_recv", "<u8"),
    ("ts_in_delta", "<i4"),
    ("sequence", "<u4"),
]
#: Trade (MBP-0) record, 48 bytes.
TRADES_DTYPE = np.dtype([*_HEADER, *_TRADE_BODY])
#: MBP-1 record, 80 bytes: the trade layout, then one bid/ask level.
MBP1_DTYPE = np.dtype(
    [
        *_HEADER,
        *_TRADE_BODY,
        ("bid_px_00", "<i8"),
        ("ask_px_00", "<i8"),
        ("bid_sz_00", "<u4"),
        ("ask_sz_00", "<u4"),
        ("bid_ct_00", "<u4"),
        ("ask_ct_00", "<u4"),
    ]
)

_RTYPE = {"ohlcv-1m": 0x21, "trades": 0x00, "mbp-1": 0x01}
_F_LAST = 0x80


@dataclass(frozen=True, slots=True, kw_only=True)
class SynthInfo:
    """What :func:`write_synthetic` wrote.

    Attributes:
        path: the file written.
        schema: the DBN schema name (``ohlcv-1m``, ``trades`` or ``mbp-1``).
        records: number of records.
        symbols: the raw symbols in the metadata, in instrument-id order.
        bytes_written: size of the file on disk (compressed size for ``.zst``).
    """

    path: Path
    schema: str
    records: int
    symbols: tuple[str, ...]
    bytes_written: int


# ---------------------------------------------------------------------------------------
# calendar


def _us_eastern_utc_offset_hours(day: dt.date) -> int:
    """UTC offset of New York at 09:30 on ``day``: -4 in daylight saving time, else -5.

    DST runs from the second Sunday of March to the first Sunday of November (Energy Policy
    Act of 2005, in force since 2007); the switch happens at 02:00 local, before the open.
    """
    march_first = dt.date(day.year, 3, 1)
    dst_start = march_first + dt.timedelta(days=(6 - march_first.weekday()) % 7 + 7)
    november_first = dt.date(day.year, 11, 1)
    dst_end = november_first + dt.timedelta(days=(6 - november_first.weekday()) % 7)
    return -4 if dst_start <= day < dst_end else -5


def _session_days(n_days: int) -> list[dt.date]:
    days: list[dt.date] = []
    day = FIRST_DAY
    while len(days) < n_days:
        if day.weekday() < 5:
            days.append(day)
        day += dt.timedelta(days=1)
    return days


def session_opens_utc_ns(n_days: int) -> tuple[np.ndarray, list[dt.date]]:
    """UTC nanoseconds of 09:30 New York on the first ``n_days`` weekdays from 2024-01-02, and those dates."""
    days = _session_days(n_days)
    opens = [
        (
            dt.datetime(d.year, d.month, d.day, 9, 30, tzinfo=dt.UTC)
            - dt.timedelta(hours=_us_eastern_utc_offset_hours(d))
        )
        for d in days
    ]
    return np.array([int(o.timestamp()) * 1_000_000_000 for o in opens], dtype=np.int64), days


def _intraday_pattern(minute: np.ndarray) -> np.ndarray:
    """U-shaped activity of session minute 0..389, mean 1 over the session."""
    grid = np.arange(SESSION_MINUTES, dtype=np.float64)

    def shape(m: np.ndarray) -> np.ndarray:
        return 1.0 + 2.0 * np.exp(-m / 25.0) + 1.2 * np.exp(-(SESSION_MINUTES - 1 - m) / 20.0)

    return shape(minute.astype(np.float64)) / shape(grid).mean()


# ---------------------------------------------------------------------------------------
# the price process


@numba.njit(cache=True)
def _garch_variance(z: np.ndarray, omega: np.ndarray, alpha: float, beta: float, h0: np.ndarray) -> np.ndarray:
    # The recursion is inherently sequential (h_t needs h_{t-1}), and its coefficient
    # alpha * z^2 + beta varies with t, so scipy's lfilter does not apply; a compiled loop
    # over time, vectorised nowhere, is the simple exact way (~5 ms for 1M steps).
    n, k = z.shape
    h = np.empty_like(z)
    for j in range(k):
        h[0, j] = h0[j]
        for t in range(1, n):
            h[t, j] = omega[j] + (alpha * z[t - 1, j] * z[t - 1, j] + beta) * h[t - 1, j]
    return h


def _student_t(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_t(NU, size=shape) * math.sqrt((NU - 2.0) / NU)


def _returns(rng: np.random.Generator, sigma: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardised innovations ``z`` and GARCH variances ``h`` (n, k) for per-step vols ``sigma``."""
    z = _student_t(rng, (n, sigma.size))
    var = sigma**2
    h = _garch_variance(z, var * (1.0 - ALPHA - BETA), ALPHA, BETA, var)
    return z, h


def _pick(instruments: int | None, records: int) -> tuple[tuple[str, int, float, float, float], ...]:
    k = MAX_INSTRUMENTS if instruments is None else instruments
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_INSTRUMENTS:
        raise InputError(f"must be an integer from 1 to {MAX_INSTRUMENTS}, got {k!r}", field="instruments")
    return _INSTRUMENTS[: min(k, records)]


def synthesize_ohlcv(records: int, seed: int, *, instruments: int | None = None) -> np.ndarray:
    """``records`` OHLCV-1m records (:data:`OHLCV_DTYPE`), time-major, instruments interleaved.

    ``instruments`` (default 8) instruments each get ``records / instruments`` consecutive
    session minutes; the last minute may hold only the first few instruments.
    """
    _check_count(records, seed)
    table = _pick(instruments, records)
    k = len(table)
    n = -(-records // k)  # minutes
    rng = np.random.default_rng([seed, 0x21])
    start = np.array([row[2] for row in table])
    sigma = np.array([row[3] for row in table]) / math.sqrt(MINUTES_PER_YEAR)
    mean_volume = np.array([row[4] for row in table])

    minute_of_day = np.arange(n) % SESSION_MINUTES
    u = _intraday_pattern(minute_of_day)[:, None]
    z, h = _returns(rng, sigma, n)
    r = np.sqrt(h * u) * z
    gap = np.zeros_like(r)
    first = minute_of_day == 0
    first[0] = False  # the first session opens at the start price
    gap[first] = _student_t(rng, (int(first.sum()), k)) * sigma * math.sqrt(GAP_MINUTES)

    # open_t = close_{t-1} * exp(gap_t), close_t = open_t * exp(r_t), in log space so that
    # open_t equals close_{t-1} bit for bit when there is no gap.
    log_close = np.log(start) + np.cumsum(gap + r, axis=0)
    log_open = np.concatenate([np.log(start)[None, :], log_close[:-1]]) + gap
    bar_sigma = np.sqrt(h * u)
    wick_up = np.exp(KAPPA * bar_sigma * np.abs(rng.standard_normal((n, k))))
    wick_down = np.exp(-KAPPA * bar_sigma * np.abs(rng.standard_normal((n, k))))
    tick_dollars = TICK / PRICE_SCALE
    o = np.rint(np.exp(log_open) / tick_dollars)
    c = np.rint(np.exp(log_close) / tick_dollars)
    # Rounded outwards, so low <= min(open, close) and max(open, close) <= high hold exactly
    # (the clamps only make that independent of how the wick factors round).
    hi = np.maximum(np.ceil(np.maximum(o, c) * wick_up), np.maximum(o, c))
    lo = np.maximum(np.minimum(np.floor(np.minimum(o, c) * wick_down), np.minimum(o, c)), 1.0)

    noise = rng.lognormal(-0.18, 0.6, (n, k))  # mean 1
    vol = mean_volume * u * np.sqrt(h / sigma**2) * (0.6 + 0.4 * np.abs(z))
    volume = np.maximum(np.rint(vol * noise), 1.0)

    opens, _ = session_opens_utc_ns(int(n // SESSION_MINUTES) + 1)
    ts = opens[np.arange(n) // SESSION_MINUTES] + minute_of_day.astype(np.int64) * MINUTE_NS

    out = np.empty((n, k), dtype=OHLCV_DTYPE)
    out["length"] = OHLCV_DTYPE.itemsize // 4
    out["rtype"] = _RTYPE["ohlcv-1m"]
    out["publisher_id"] = PUBLISHER_ID
    out["instrument_id"] = np.array([row[1] for row in table], dtype=np.uint32)[None, :]
    out["ts_event"] = ts[:, None]
    out["open"] = o.astype(np.int64) * TICK
    out["high"] = hi.astype(np.int64) * TICK
    out["low"] = lo.astype(np.int64) * TICK
    out["close"] = c.astype(np.int64) * TICK
    out["volume"] = volume.astype(np.uint64)
    return out.reshape(-1)[:records].copy()


def synthesize_bars(records: int, seed: int) -> dict[str, np.ndarray]:
    """One instrument's bars as the DBN loader returns them: float64 prices in dollars.

    Keys ``open``, ``high``, ``low``, ``close``, ``volume`` (float64) and ``ts_event``
    (int64 ns), ``records`` consecutive one-minute bars; what the feature stage takes.
    """
    rec = synthesize_ohlcv(records, seed, instruments=1)
    bars = {name: rec[name] / PRICE_SCALE for name in ("open", "high", "low", "close")}
    bars["volume"] = rec["volume"].astype(np.float64)
    bars["ts_event"] = rec["ts_event"].astype(np.int64)
    return bars


def _event_times(rng: np.random.Generator, per_instrument: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Event times (ns) and instrument index of ``per_instrument[i]`` events each, sorted by time.

    Events arrive with the U-shaped intensity of :func:`_intraday_pattern` (inverse-CDF
    sampling), ``TRADES_PER_DAY`` per instrument per session.
    """
    n_days = max(1, -(-int(per_instrument.max()) // TRADES_PER_DAY))
    opens, _ = session_opens_utc_ns(n_days)
    cdf = np.concatenate([[0.0], np.cumsum(_intraday_pattern(np.arange(SESSION_MINUTES)))])
    cdf /= cdf[-1]
    session_ns = SESSION_MINUTES * MINUTE_NS
    times, owner = [], []
    for i, count in enumerate(per_instrument):
        u = np.sort(rng.random(count))  # position in the whole span of n_days sessions
        day = np.minimum((u * n_days).astype(np.int64), n_days - 1)
        frac = u * n_days - day
        minute = np.interp(frac, cdf, np.arange(SESSION_MINUTES + 1, dtype=np.float64))
        times.append(opens[day] + np.minimum((minute * MINUTE_NS).astype(np.int64), session_ns - 1))
        owner.append(np.full(count, i, dtype=np.int64))
    t = np.concatenate(times)
    who = np.concatenate(owner)
    order = np.argsort(t, kind="stable")
    return t[order], who[order]


def _event_records(
    records: int, seed: int, instruments: int | None, dtype: np.dtype, rtype: int
) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    """Shared part of trades and MBP-1: times, latencies, sequences and a mid-price path.

    Returns the records (in ``ts_event`` order; the caller sorts by ``ts_recv`` last), the
    mid price of each record in ticks, and the generator to draw the rest from.
    """
    _check_count(records, seed)
    table = _pick(instruments, records)
    k = len(table)
    per = np.full(k, records // k, dtype=np.int64)
    per[: records % k] += 1
    rng = np.random.default_rng([seed, rtype])
    ts_event, who = _event_times(rng, per)

    sigma = np.array([row[3] for row in table]) / math.sqrt(252.0 * TRADES_PER_DAY)
    start = np.array([row[2] for row in table])
    log_mid = np.empty(records)
    for i in range(k):
        mine = who == i
        z, h = _returns(rng, sigma[i : i + 1], int(per[i]))
        log_mid[mine] = math.log(start[i]) + np.cumsum(np.sqrt(h[:, 0]) * z[:, 0])

    out = np.zeros(records, dtype=dtype)
    out["length"] = dtype.itemsize // 4
    out["rtype"] = rtype
    out["publisher_id"] = PUBLISHER_ID
    out["instrument_id"] = np.array([row[1] for row in table], dtype=np.uint32)[who]
    # Capture-server receive time = matching-engine time + a 5-200 us network path;
    # ts_in_delta is the last leg (venue send to receive), a part of it.
    latency = np.rint(rng.lognormal(math.log(20_000.0), 0.5, records)).astype(np.int64) + 5_000
    out["ts_event"] = ts_event
    out["ts_recv"] = ts_event + latency
    out["ts_in_delta"] = (latency * 0.7).astype(np.int32)
    # Venue sequence numbers rise per instrument, with gaps for the messages not shown.
    seq = np.empty(records, dtype=np.int64)
    for i in range(k):
        mine = who == i
        seq[mine] = 1_000_000 * (i + 1) + np.cumsum(rng.integers(1, 40, int(per[i])))
    out["sequence"] = seq.astype(np.uint32)
    out["flags"] = _F_LAST
    out["depth"] = 0
    return out, np.rint(np.exp(log_mid) * PRICE_SCALE / TICK).astype(np.int64), rng


def synthesize_trades(records: int, seed: int, *, instruments: int | None = None) -> np.ndarray:
    """``records`` trade records (:data:`TRADES_DTYPE`), sorted by receive time."""
    out, mid_ticks, rng = _event_records(records, seed, instruments, TRADES_DTYPE, _RTYPE["trades"])
    side = rng.random(records) < 0.5  # aggressor: True = buyer lifts the ask
    # Buyers pay the ask, sellers hit the bid: a one-tick spread around the mid path.
    out["price"] = (mid_ticks + np.where(side, 1, 0)) * TICK
    out["size"] = _sizes(rng, records)
    out["action"] = b"T"
    out["side"] = np.where(side, b"A", b"B")
    return _by_receive_time(out)


def synthesize_mbp1(records: int, seed: int, *, instruments: int | None = None) -> np.ndarray:
    """``records`` MBP-1 (top-of-book) records (:data:`MBP1_DTYPE`), sorted by receive time."""
    out, mid_ticks, rng = _event_records(records, seed, instruments, MBP1_DTYPE, _RTYPE["mbp-1"])
    spread = rng.geometric(0.7, records)  # mostly one tick
    bid = mid_ticks
    ask = mid_ticks + spread
    is_bid = rng.random(records) < 0.5
    action = rng.choice(np.array([b"A", b"C", b"M", b"T"]), size=records, p=[0.45, 0.38, 0.07, 0.10])
    out["price"] = np.where(is_bid, bid, ask) * TICK
    out["size"] = _sizes(rng, records)
    out["action"] = action
    out["side"] = np.where(is_bid, b"B", b"A")
    out["bid_px_00"] = bid * TICK
    out["ask_px_00"] = ask * TICK
    out["bid_sz_00"] = _sizes(rng, records) * 4
    out["ask_sz_00"] = _sizes(rng, records) * 4
    out["bid_ct_00"] = 1 + rng.poisson(6.0, records)
    out["ask_ct_00"] = 1 + rng.poisson(6.0, records)
    return _by_receive_time(out)


def _by_receive_time(out: np.ndarray) -> np.ndarray:
    # Databento orders trade and book records by ts_recv, its index timestamp.
    return out[np.argsort(out["ts_recv"], kind="stable")]


def _sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    # Equity prints: a quarter are exactly one round lot, the rest heavy-tailed odd sizes.
    odd = np.maximum(np.rint(rng.lognormal(3.5, 1.2, n)), 1.0)
    return np.where(rng.random(n) < 0.25, 100.0, odd).astype(np.uint32)


_SYNTHESIZERS: dict[str, Callable[..., np.ndarray]] = {
    "ohlcv-1m": synthesize_ohlcv,
    "trades": synthesize_trades,
    "mbp-1": synthesize_mbp1,
}
SCHEMAS: tuple[str, ...] = tuple(_SYNTHESIZERS)


def _check_count(records: int, seed: int) -> None:
    if isinstance(records, bool) or not isinstance(records, int | np.integer) or records < 1:
        raise InputError(f"must be a whole number of records, at least 1; got {records!r}", field="records")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"must be a non-negative integer, got {seed!r}", field="seed")


# ---------------------------------------------------------------------------------------
# the file


def _metadata(schema: str, rec: np.ndarray) -> tuple[bytes, tuple[str, ...]]:
    """The DBN v3 metadata block for ``rec``, encoded by databento-dbn itself."""
    by_id = {row[1]: row[0] for row in _INSTRUMENTS}
    ids = [int(i) for i in np.unique(rec["instrument_id"])]
    symbols = tuple(by_id[i] for i in ids)
    if schema == "ohlcv-1m":
        start, end = int(rec["ts_event"][0]), int(rec["ts_event"][-1]) + MINUTE_NS
    else:
        start, end = int(rec["ts_recv"].min()), int(rec["ts_recv"].max()) + 1
    first = dt.datetime.fromtimestamp(start / 1e9, tz=dt.UTC).date()
    last = dt.datetime.fromtimestamp(end / 1e9, tz=dt.UTC).date() + dt.timedelta(days=1)
    mappings = [
        SimpleNamespace(raw_symbol=sym, intervals=[SimpleNamespace(start_date=first, end_date=last, symbol=str(iid))])
        for iid, sym in zip(ids, symbols, strict=True)
    ]
    meta = dbn.Metadata(
        dataset=DATASET,
        start=start,
        end=end,
        stype_in=dbn.SType.RAW_SYMBOL,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=dbn.Schema(schema),
        symbols=list(symbols),
        mappings=mappings,
        ts_out=False,
        version=DBN_VERSION,
    )
    return bytes(meta.encode()), symbols


def write_synthetic(path: Path, *, schema: str, records: int, seed: int, instruments: int | None = None) -> SynthInfo:
    """Write ``records`` synthetic records of ``schema`` to ``path`` as DBN v3.

    A ``.zst`` suffix compresses with zstd (level 3, checksum, no content size). The file
    appears atomically: it is written to a temporary file in the same directory and
    renamed over ``path``, so a failure leaves any earlier file untouched and no partial one.

    Raises:
        InputError: unknown ``schema``, ``records`` < 1, a negative ``seed``, a bad
            ``instruments`` count, or a ``path`` that cannot be written.
    """
    path = Path(path)
    if schema not in _SYNTHESIZERS:
        raise InputError(f"unknown schema {schema!r}; choose one of {', '.join(SCHEMAS)}", field="schema")
    _check_count(records, seed)
    rec = _SYNTHESIZERS[schema](records, seed, instruments=instruments)
    header, symbols = _metadata(schema, rec)
    compress = path.suffix == ".zst"
    try:
        _atomic_write(path, header, rec.view(np.uint8), compress=compress)
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot write the synthetic file: {exc.strerror or exc}", source=str(path)) from exc
    return SynthInfo(path=path, schema=schema, records=int(records), symbols=symbols, bytes_written=size)


def write_synthetic_to(
    handle: BinaryIO, *, schema: str, records: int, seed: int, compress: bool, instruments: int | None = None
) -> tuple[str, ...]:
    """Write the same bytes as :func:`write_synthetic` to an open binary ``handle``.

    For a caller that chooses where the bytes go (``perfgate data synth`` writes through
    :mod:`perfgate.output`, so a device or a pipe is written in place). Returns the symbols.
    """
    if schema not in _SYNTHESIZERS:
        raise InputError(f"unknown schema {schema!r}; choose one of {', '.join(SCHEMAS)}", field="schema")
    _check_count(records, seed)
    rec = _SYNTHESIZERS[schema](records, seed, instruments=instruments)
    header, symbols = _metadata(schema, rec)
    _write_body(handle, header, rec.view(np.uint8), compress=compress)
    return symbols


def _write_body(f: BinaryIO, header: bytes, body: np.ndarray, *, compress: bool) -> None:
    if compress:
        # Single-threaded on purpose: multi-threaded zstd output depends on the
        # worker count, and a seed must give the same bytes on every machine.
        cctx = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False)
        with cctx.stream_writer(f, closefd=False) as zf:
            zf.write(header)
            zf.write(body.data)
    else:
        f.write(header)
        f.write(body.data)


def _atomic_write(path: Path, header: bytes, body: np.ndarray, *, compress: bool) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_body(f, header, body, compress=compress)
            f.flush()
            os.fsync(f.fileno())
        tmp.chmod(0o644)  # mkstemp makes 0600; a data file is meant to be shared
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

"""The 16 technical-indicator features of the reference pipeline, computed in one pass.

Input: one instrument's bars in time order, as the DBN loader returns them: float64 arrays
``open``, ``high``, ``low``, ``close`` (dollars, > 0) and ``volume``. ``ts_event`` may be
present and is ignored: every window counts bars, and the VWAP is a rolling 20-bar VWAP
rather than one reset at each session's open, so no feature needs a calendar and the
streaming state stays O(1).

Notation: C, H, L, V the bar's close, high, low and volume; ``t`` the bar index;
``SMA_n``/``σ_n`` the mean and *population* standard deviation of the last ``n`` values;
``EMA_n`` the exponential average with ``k = 2 / (n + 1)``, seeded with the SMA of its
first ``n`` inputs; Wilder's average ``W_n(x)_t = (W_{t-1} (n - 1) + x_t) / n``, seeded
the same way. These seedings are TA-Lib's defaults, so every value agrees with TA-Lib
from the first row it defines. "First row" is the first valid bar index, which equals
the TA-Lib lookback (the number of leading rows that are not valid).

=====  ================  =====================================================  =========
 col    name              formula                                                first row
=====  ================  =====================================================  =========
  0     ``logret_1``      ln(C_t / C_{t-1})                                          1
  1     ``ret_10``        C_t / C_{t-10} - 1                                        10
  2     ``sma_ratio_20``  C_t / SMA_20(C) - 1                                       19
  3     ``ema_ratio_12``  C_t / EMA_12(C) - 1                                       11
  4     ``rsi_14``        100 G / (G + D), G = W_14(max(ΔC, 0)), D = W_14(max(-ΔC, 0));
                          50 when G + D = 0                                         14
  5     ``macd``          (EMA_12(C) - EMA_26(C)) / C_t; the fast EMA is seeded at
                          bar 25 with the SMA of C_14..C_25, as TA-Lib's MACD does  25
  6     ``macd_signal``   EMA_9(EMA_12 - EMA_26) / C_t, seeded with bars 25..33     33
  7     ``bb_pctb``       (C_t - (SMA_20 - 2σ_20)) / (4σ_20) of C; 0.5 when σ = 0    19
  8     ``bb_width``      4σ_20(C) / SMA_20(C)                                      19
  9     ``atr_14``        W_14(TR) / C_t, TR = max(H_t, C_{t-1}) - min(L_t, C_{t-1}) 14
 10     ``stoch_k``       100 (C_t - LL_14) / (HH_14 - LL_14), HH/LL the highest high
                          and lowest low of the last 14 bars; 50 when HH = LL        13
 11     ``stoch_d``       SMA_3(stoch_k)                                            15
 12     ``obv_slope``     (OBV_t - OBV_{t-20}) / Σ_20 V = Σ_20 sign(ΔC) V / Σ_20 V;
                          0 when Σ_20 V = 0                                         20
 13     ``vwap_dev``      C_t / VWAP_20 - 1, VWAP_20 = Σ_20 TP·V / Σ_20 V,
                          TP = (H + L + C) / 3; 0 when Σ_20 V = 0                   19
 14     ``vol_20``        σ_20(logret_1), per bar (not annualised)                  20
 15     ``volume_z``      (V_t - SMA_20(V)) / σ_20(V); 0 when σ = 0                  19
=====  ================  =====================================================  =========

All 16 are dimensionless: the price ones are ratios or are divided by the close, the
volume ones are ratios of volumes, so they do not change when prices or volumes are
rescaled (a property test checks it). MACD's histogram (line minus signal) and the simple
one-bar return are left out because they repeat information already present.

**Warm-up.** Rows before a feature's first row hold NaN in ``values``. Row
:data:`WARMUP` (33) is the first one where all 16 are valid: :attr:`FeatureMatrix.valid`
slices it out and :attr:`FeatureMatrix.model_input` is ``values[33:]``. The
normalisation statistics are computed over those rows only. Nothing is NaN-filled.

**Numerics.** One compiled pass over the bars (numba), about 16 arithmetic steps per
bar, with no temporaries; the normalisation sums are accumulated in the same pass. The
recursive averages (EMA, Wilder) are evaluated in TA-Lib's order of operations. Each
rolling window keeps the sums of ``x - a`` and ``(x - a)^2`` about an anchor ``a``, and
every :data:`REANCHOR` bars the anchor is reset to the window's exact mean and the sums
are recomputed from the window. Two cheaper schemes failed the 1e-9 tests. Raw running
sums of squares lose about 8 digits to cancellation when σ is much smaller than the
price. An add-one/drop-one Welford update drifted to 2e-9 relative within 1,000 bars,
because its rounding error carries over into later windows where σ is smaller. A σ
below 1e-9 of its mean counts as zero. ``vol_20`` is zero when none of its 20 log
returns is non-zero; a relative test cannot work there because the mean of log returns
is near 0. :mod:`perfgate_pipeline.features_stream` repeats all of this bar by bar.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numba
import numpy as np

from perfgate.errors import InputError

__all__ = [
    "BAR_FIELDS",
    "FEATURE_NAMES",
    "FEATURE_WARMUP",
    "N_FEATURES",
    "REANCHOR",
    "WARMUP",
    "FeatureMatrix",
    "Normalizer",
    "compute_features",
]

FEATURE_NAMES: tuple[str, ...] = (
    "logret_1",
    "ret_10",
    "sma_ratio_20",
    "ema_ratio_12",
    "rsi_14",
    "macd",
    "macd_signal",
    "bb_pctb",
    "bb_width",
    "atr_14",
    "stoch_k",
    "stoch_d",
    "obv_slope",
    "vwap_dev",
    "vol_20",
    "volume_z",
)
#: First valid row of each feature (= its number of warm-up rows), in column order.
FEATURE_WARMUP: tuple[int, ...] = (1, 10, 19, 11, 14, 25, 33, 19, 19, 14, 13, 15, 20, 19, 20, 19)
N_FEATURES = len(FEATURE_NAMES)
#: Rows before this one are not valid for every feature.
WARMUP = max(FEATURE_WARMUP)
BAR_FIELDS: tuple[str, ...] = ("open", "high", "low", "close", "volume")
#: Rolling sums are recomputed exactly from their window every this many bars.
REANCHOR = 32

# Windows and smoothing constants (TA-Lib's k = 2 / (n + 1)).
_W = 20  # SMA, Bollinger, OBV slope, VWAP, rolling volatility, volume z-score
_INV_W = 1.0 / _W
_K12, _K26, _K9 = 2.0 / 13.0, 2.0 / 27.0, 2.0 / 10.0
_FLAT = 1e-9  # a standard deviation below this fraction of its mean is zero
_INF = math.inf


# ---------------------------------------------------------------------------------------
# scalar steps shared with features_stream (numba inlines them)


@numba.njit(inline="always")
def _moments(anchor: float, s1: float, s2: float) -> tuple[float, float]:
    """Mean and population σ of a full window from the sums of ``x - anchor`` and its square.

    Sums around an anchor near the window's mean keep the digits that raw sums of squares
    lose to cancellation; the anchor is reset every :data:`REANCHOR` bars.
    """
    m = s1 * _INV_W
    var = s2 * _INV_W - m * m
    return anchor + m, math.sqrt(var) if var > 0.0 else 0.0


@numba.njit(inline="always")
def _anchor(x: np.ndarray) -> tuple[float, float, float]:
    """Exact mean of the window ``x`` (oldest first) and the sums of ``x - mean`` and its square."""
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i]
    k = total / x.shape[0]
    s1 = s2 = 0.0
    for i in range(x.shape[0]):
        d = x[i] - k
        s1 += d
        s2 += d * d
    return k, s1, s2


@numba.njit(inline="always")
def _ring_sum(ring: np.ndarray, t: int) -> float:
    """Sum of the last ``_W`` entries of a 32-slot ring whose newest entry is bar ``t``, oldest first."""
    total = 0.0
    for i in range(t - _W + 1, t + 1):
        total += ring[i & 31]
    return total


@numba.njit(inline="always")
def _signed_volume(d: float, volume: float) -> float:
    # One expression that LLVM can lower to selects: the sign of a price change is a coin
    # flip, so a branch on it would be mispredicted half the time.
    return volume if d > 0.0 else (-volume if d < 0.0 else 0.0)


@numba.njit(inline="always")
def _bad_bar(high: float, low: float, close: float, volume: float) -> bool:
    # written so that NaN fails every test
    return not (0.0 < low < _INF and 0.0 < high < _INF and 0.0 < close < _INF and 0.0 <= volume < _INF)


@numba.njit(inline="always")
def _rsi(gain: float, loss: float) -> float:
    s = gain + loss
    return 100.0 * (gain / s) if s > 0.0 else 50.0


@numba.njit(inline="always")
def _stoch(close: float, hh: float, ll: float) -> float:
    rng = hh - ll
    return 100.0 * (close - ll) / rng if rng > 0.0 else 50.0


@numba.njit(inline="always")
def _window_features(
    row: np.ndarray,
    close: float,
    volume: float,
    c_mom: tuple[float, float],
    v_mom: tuple[float, float],
    sumv: float,
    pv: float,
) -> None:
    """Columns 2, 7, 8, 13, 15: everything computed from the full 20-bar windows."""
    mc, sdc = c_mom
    row[2] = close / mc - 1.0
    if sdc > _FLAT * abs(mc):
        row[7] = (close - (mc - 2.0 * sdc)) / (4.0 * sdc)
        row[8] = 4.0 * sdc / mc
    else:
        row[7] = 0.5
        row[8] = 0.0
    row[13] = close * sumv / pv - 1.0 if sumv > 0.0 else 0.0
    mv, sdv = v_mom
    row[15] = (volume - mv) / sdv if sdv > _FLAT * abs(mv) else 0.0


@numba.njit(inline="always")
def _accumulate(out: np.ndarray, t: int, row: np.ndarray, stats: np.ndarray) -> None:
    """Store row ``t`` and add it (as stored) to the normalisation sums around row WARMUP."""
    for j in range(N_FEATURES):
        out[t, j] = row[j]
    if t >= WARMUP:
        if t == WARMUP:
            for j in range(N_FEATURES):
                stats[0, j] = out[t, j]
        for j in range(N_FEATURES):
            x = out[t, j] - stats[0, j]
            stats[1, j] += x
            stats[2, j] += x * x


# ---------------------------------------------------------------------------------------
# the batch kernel


# error_model="numpy": no zero-division checks in the loop. A bad bar is reported instead.
@numba.njit(cache=True, nogil=True, error_model="numpy")
def _kernel(h: np.ndarray, lo: np.ndarray, c: np.ndarray, v: np.ndarray, out: np.ndarray, stats: np.ndarray) -> int:
    """All 16 features of every bar into ``out``; normalisation sums into ``stats`` (3, 16).

    ``stats`` rows: the shift (row WARMUP as stored), the sum of ``x - shift`` and the
    sum of its square over rows WARMUP.. (zero-filled by the caller). Returns the index
    of the first bar with a price that is not positive and finite or a volume that is not
    non-negative and finite, or -1.
    """
    n = c.shape[0]
    bad = -1
    row = np.full(N_FEATURES, np.nan)  # features not yet defined stay NaN
    lr_ring = np.zeros(32)  # logret, signed volume, typical price * volume of the last 32 bars
    sv_ring = np.zeros(32)
    pv_ring = np.zeros(32)
    hi_ring = np.zeros((3, 8))  # rolling maxima of the high over 2, 4 and 7 bars
    lo_ring = np.zeros((3, 8))  # rolling minima of the low
    scratch = np.empty(_W)
    ema12 = fast = slow = sig = gain = loss = atr = 0.0
    kc = c[0] if n > 0 else 0.0  # anchors and anchored sums: close, volume, logret
    kv = v[0] if n > 0 else 0.0
    kr = 0.0
    c1 = c2 = v1 = v2 = r1 = r2 = 0.0
    sumv = pv = sv = 0.0
    moved = 0  # nonzero logrets in the window: an unchanged price has σ exactly 0
    k1 = k2 = 0.0
    for t in range(n):
        ct = c[t]
        vt = v[t]
        ht = h[t]
        lt = lo[t]
        if bad < 0 and _bad_bar(ht, lt, ct, vt):
            bad = t
        b = t & 31
        tpv = (ht + lt + ct) / 3.0 * vt
        pv_ring[b] = tpv
        dc = ct - kc
        dv = vt - kv
        c1 += dc
        c2 += dc * dc
        v1 += dv
        v2 += dv * dv
        sumv += vt
        pv += tpv
        if t >= _W:
            oc = c[t - _W] - kc
            ov = v[t - _W] - kv
            c1 -= oc
            c2 -= oc * oc
            v1 -= ov
            v2 -= ov * ov
            sumv -= v[t - _W]
            pv -= pv_ring[(t - _W) & 31]
        if t >= 1:
            prev = c[t - 1]
            lr = math.log(ct / prev)
            row[0] = lr
            lr_ring[b] = lr
            dr = lr - kr
            r1 += dr
            r2 += dr * dr
            moved += 1 if lr != 0.0 else 0
            d = ct - prev
            sv_ring[b] = _signed_volume(d, vt)
            sv += sv_ring[b]
            if t > _W:
                dr = lr_ring[(t - _W) & 31] - kr
                r1 -= dr
                r2 -= dr * dr
                moved -= 1 if lr_ring[(t - _W) & 31] != 0.0 else 0
                sv -= sv_ring[(t - _W) & 31]
            # Wilder averages in TA-Lib's order of operations: (prev * 13 + x) / 14
            up = max(d, 0.0)
            down = max(-d, 0.0)
            tr = max(ht, prev) - min(lt, prev)
            if t <= 14:
                gain += up
                loss += down
                atr += tr
                if t == 14:
                    gain /= 14.0
                    loss /= 14.0
                    atr /= 14.0
            else:
                gain = (gain * 13.0 + up) / 14.0
                loss = (loss * 13.0 + down) / 14.0
                atr = (atr * 13.0 + tr) / 14.0
            if t >= 14:
                row[4] = _rsi(gain, loss)
                row[9] = atr / ct
        if t % REANCHOR == 0 and t >= REANCHOR:
            first = t - _W + 1
            kc, c1, c2 = _anchor(c[first : t + 1])
            kv, v1, v2 = _anchor(v[first : t + 1])
            for i in range(_W):
                scratch[i] = lr_ring[(first + i) & 31]
            kr, r1, r2 = _anchor(scratch)
            sumv = _window_sum(v, t)
            pv = _ring_sum(pv_ring, t)
            sv = _ring_sum(sv_ring, t)
        if t >= 10:
            row[1] = ct / c[t - 10] - 1.0
        # EMA12 seeded with the SMA of the first 12 closes
        if t < 11:
            ema12 += ct
        elif t == 11:
            ema12 = (ema12 + ct) / 12.0
        else:
            ema12 = (ct - ema12) * _K12 + ema12
        if t >= 11:
            row[3] = ct / ema12 - 1.0
        # MACD: both EMAs start at bar 25; the fast one is seeded with closes 14..25
        if t < 25:
            slow += ct
        elif t == 25:
            slow = (slow + ct) / 26.0
            fast = 0.0
            for i in range(14, 26):
                fast += c[i]
            fast /= 12.0
        else:
            slow = (ct - slow) * _K26 + slow
            fast = (ct - fast) * _K12 + fast
        if t >= 25:
            macd = fast - slow
            row[5] = macd / ct
            if t < 33:
                sig += macd
            elif t == 33:
                sig = (sig + macd) / 9.0
            else:
                sig = (macd - sig) * _K9 + sig
            if t >= 33:
                row[6] = sig / ct
        if t >= _W - 1:
            _window_features(row, ct, vt, _moments(kc, c1, c2), _moments(kv, v1, v2), sumv, pv)
        if t >= _W:
            row[12] = sv / sumv if sumv > 0.0 else 0.0
            row[14] = _moments(kr, r1, r2)[1] if moved > 0 else 0.0
        # Highest high and lowest low of 14 bars from maxima over 2, 4 and 7 bars:
        # [t-1, t], [t-3, t], [t-6, t], [t-13, t]; 4 comparisons instead of 13.
        m = t & 7
        hmax = max(ht, h[t - 1]) if t >= 1 else ht
        lmin = min(lt, lo[t - 1]) if t >= 1 else lt
        hi_ring[0, m] = hmax
        lo_ring[0, m] = lmin
        hmax = max(hmax, hi_ring[0, (t - 2) & 7])
        lmin = min(lmin, lo_ring[0, (t - 2) & 7])
        hi_ring[1, m] = hmax
        lo_ring[1, m] = lmin
        hmax = max(hmax, hi_ring[1, (t - 3) & 7])
        lmin = min(lmin, lo_ring[1, (t - 3) & 7])
        hi_ring[2, m] = hmax
        lo_ring[2, m] = lmin
        if t >= 13:
            k0 = _stoch(ct, max(hmax, hi_ring[2, (t - 7) & 7]), min(lmin, lo_ring[2, (t - 7) & 7]))
            row[10] = k0
            if t >= 15:
                row[11] = (k2 + k1 + k0) / 3.0
            k2 = k1
            k1 = k0
        _accumulate(out, t, row, stats)
    return bad


@numba.njit(inline="always")
def _window_sum(x: np.ndarray, t: int) -> float:
    """Sum of ``x[t - 19 .. t]``, oldest first (the order the streaming ring sums in)."""
    total = 0.0
    for i in range(t - _W + 1, t + 1):
        total += x[i]
    return total


# ---------------------------------------------------------------------------------------
# the public values


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)  # arrays: compare by identity
class Normalizer:
    """Per-feature standardisation ``(x - mean) / std``, fitted on training rows.

    Keep it with a model and apply it unchanged at inference time. A feature with zero
    spread is only centred (its scale is taken as 1).

    Attributes:
        mean: float64 (16,), mean of each feature over the fitted rows.
        std: float64 (16,), population standard deviation of each feature.
    """

    mean: np.ndarray
    std: np.ndarray
    _scale: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("mean", "std"):
            arr = np.array(getattr(self, name), dtype=np.float64)
            if arr.shape != (N_FEATURES,):
                raise InputError(f"must have shape ({N_FEATURES},), got {arr.shape}", field=name)
            object.__setattr__(self, name, _frozen(arr))
        scale = np.where(self.std > 0.0, self.std, 1.0)
        object.__setattr__(self, "_scale", _frozen(scale))

    @classmethod
    def fit(cls, rows: np.ndarray) -> Normalizer:
        """Fit on ``rows`` (n, 16) of valid feature values (float64 accumulation)."""
        if rows.ndim != 2 or rows.shape[1] != N_FEATURES or rows.shape[0] == 0:
            raise InputError(f"need at least one row of {N_FEATURES} features to fit, got shape {rows.shape}")
        return cls(mean=rows.mean(axis=0, dtype=np.float64), std=rows.std(axis=0, dtype=np.float64))

    def normalize(self, values: np.ndarray) -> np.ndarray:
        """``(values - mean) / std`` as float32; ``values`` is (16,) or (n, 16)."""
        return ((np.asarray(values, dtype=np.float64) - self.mean) / self._scale).astype(np.float32)

    def denormalize(self, z: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`normalize` (float64)."""
        return np.asarray(z, dtype=np.float64) * self._scale + self.mean


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)  # arrays: compare by identity
class FeatureMatrix:
    """The 16 features of every bar, and what a model needs to use them.

    Attributes:
        values: (n_bars, 16), float32 unless asked otherwise; row ``t`` uses bars up to
            ``t`` only. Rows before :data:`WARMUP` hold NaN where a feature is not yet
            defined (see :data:`FEATURE_WARMUP`); use :attr:`model_input`.
        names: the 16 column names, :data:`FEATURE_NAMES`.
        warmup: number of leading rows that are not valid for every feature.
        normalizer: mean/std of each feature over the valid rows; ``None`` when there
            are none (fewer than ``warmup + 1`` bars).
    """

    values: np.ndarray
    names: tuple[str, ...] = FEATURE_NAMES
    warmup: int = WARMUP
    normalizer: Normalizer | None = None

    @property
    def valid(self) -> slice:
        """The rows valid for every feature."""
        return slice(min(self.warmup, self.values.shape[0]), None)

    @property
    def n_valid(self) -> int:
        return max(self.values.shape[0] - self.warmup, 0)

    @property
    def model_input(self) -> np.ndarray:
        """``values[valid]``: the rows a model may be trained or run on (no NaN)."""
        return self.values[self.valid]

    @property
    def mean(self) -> np.ndarray:
        return self._fitted().mean

    @property
    def std(self) -> np.ndarray:
        return self._fitted().std

    def normalize(self, values: np.ndarray) -> np.ndarray:
        """Standardise ``values`` (training rows or a live bar's 16) with these statistics."""
        return self._fitted().normalize(values)

    def denormalize(self, z: np.ndarray) -> np.ndarray:
        return self._fitted().denormalize(z)

    def _fitted(self) -> Normalizer:
        if self.normalizer is None:
            raise InputError(
                f"no normalisation statistics: {self.values.shape[0]} bars leave no row past the "
                f"{self.warmup}-bar warm-up; compute features over more bars"
            )
        return self.normalizer


def _bar_arrays(bars: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    arrays = []
    for name in BAR_FIELDS:
        if name not in bars:
            raise InputError(f"missing; bars need {', '.join(BAR_FIELDS)}", field=name)
        a = np.ascontiguousarray(bars[name], dtype=np.float64)
        if a.ndim != 1:
            raise InputError(f"must be one-dimensional, got shape {a.shape}", field=name)
        if arrays and a.shape != arrays[0].shape:
            raise InputError(f"has {a.shape[0]} values but open has {arrays[0].shape[0]}", field=name)
        arrays.append(a)
    return arrays


def compute_features(bars: Mapping[str, np.ndarray], *, dtype: type[np.floating] = np.float32) -> FeatureMatrix:
    """The 16 features (module docstring) of one instrument's bars, in time order.

    Args:
        bars: float arrays ``open``, ``high``, ``low``, ``close``, ``volume`` of equal
            length (other keys such as ``ts_event`` are ignored). Prices must be positive
            and finite (the loader's NaN for an undefined price is rejected), volumes
            non-negative and finite. ``high >= low`` is not checked.
        dtype: ``np.float32`` (the model input) or ``np.float64`` (for validation; the
            computation is float64 either way).

    Raises:
        InputError: a missing or misshapen array, a bar with a bad value (the message
            names the first), or an unsupported ``dtype``.
    """
    out_dtype = np.dtype(dtype)
    if out_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise InputError(f"must be float32 or float64, got {out_dtype}", field="dtype")
    _, h, lo, c, v = _bar_arrays(bars)  # no feature uses the open (all are close-to-close)
    n = c.shape[0]
    values = np.empty((n, N_FEATURES), dtype=out_dtype)
    stats = np.zeros((3, N_FEATURES))
    bad = _kernel(h, lo, c, v, values, stats)
    if bad >= 0:
        bar = {k: float(x[bad]) for k, x in zip(("high", "low", "close", "volume"), (h, lo, c, v), strict=True)}
        raise InputError(
            f"bar {bad} has {bar}: prices must be positive and finite, volume non-negative and finite "
            "(drop or fill undefined bars before computing features)",
            field="bars",
        )
    normalizer = None
    if n > WARMUP:
        # Summed in the kernel around row WARMUP, which is within a few σ of the mean, so
        # E[x²] - E[x]² keeps its digits; a second pass over the matrix would cost ~100 ms.
        count = n - WARMUP
        shift_mean = stats[1] / count
        var = np.maximum(stats[2] / count - shift_mean**2, 0.0)
        normalizer = Normalizer(mean=stats[0] + shift_mean, std=np.sqrt(var))
    return FeatureMatrix(values=_frozen(values), normalizer=normalizer)

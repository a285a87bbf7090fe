"""The 16 features bar by bar, for live inference: O(1) state, about a microsecond per bar.

:class:`StreamingFeatures` keeps what the indicators of :mod:`perfgate_pipeline.features`
need: their recursive averages, the anchored window sums, and rings of the last 32
closes, volumes, log returns, signed volumes and typical price times volume, plus the
2-, 4- and 7-bar high/low extremes. Each :meth:`StreamingFeatures.update` runs one
compiled step. It repeats the batch kernel's arithmetic in the same order, and it
re-anchors its sums at the same bars, so after ``n`` bars it returns row ``n - 1`` of
:func:`~perfgate_pipeline.features.compute_features` on those bars. The tests check this
to 1e-9 relative; in practice the two agree bit for bit. Before a feature's first row
(:data:`~perfgate_pipeline.features.FEATURE_WARMUP`) its value is NaN.

The whole state is one float64 array of 276 values. Calling a numba function costs about
0.1-0.2 µs for each array argument, so the state is passed as a single array and the
result is a view into it.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from perfgate.errors import InputError
from perfgate_pipeline.features import (
    _K9,
    _K12,
    _K26,
    _W,
    FEATURE_NAMES,
    N_FEATURES,
    REANCHOR,
    WARMUP,
    _anchor,
    _bad_bar,
    _moments,
    _ring_sum,
    _rsi,
    _signed_volume,
    _stoch,
    _window_features,
)

__all__ = ["StreamingFeatures"]

# Layout of the state vector: scalars, the 16 outputs, then the rings (32 slots, or 8
# for the extremes; slot = bar index & mask).
(
    _T,  # bars seen
    _PREV_C,
    _PREV_H,
    _PREV_L,
    _EMA12,
    _FAST,
    _SLOW,
    _SIG,
    _GAIN,
    _LOSS,
    _ATR,
    _KC,  # close anchor and sums
    _C1,
    _C2,
    _KV,  # volume anchor and sums
    _V1,
    _V2,
    _KR,  # logret anchor and sums
    _R1,
    _R2,
    _SUMV,
    _PV,
    _SV,
    _STOCH1,  # the two previous stoch_k
    _STOCH2,
    _MOVED,  # nonzero logrets in the window
) = range(26)
_OUT = 32
_RC = _OUT + N_FEATURES  # close
_RV = _RC + 32  # volume
_RLR = _RV + 32  # logret
_RSV = _RLR + 32  # signed volume
_RPV = _RSV + 32  # typical price * volume
_RH = _RPV + 32  # highest high over 2, 4, 7 bars: 3 rings of 8
_RL = _RH + 24  # lowest low over 2, 4, 7 bars
_SCRATCH = _RL + 24
_SIZE = _SCRATCH + _W


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _update(st: np.ndarray, high: float, low: float, close: float, volume: float) -> bool:
    """One bar into the state; False (state untouched) for a bar the batch form would reject."""
    if _bad_bar(high, low, close, volume):
        return False
    t = int(st[_T])
    row = st[_OUT : _OUT + N_FEATURES]
    b = t & 31
    if t == 0:
        st[_KC] = close
        st[_KV] = volume
    kc, c1, c2 = st[_KC], st[_C1], st[_C2]
    kv, v1, v2 = st[_KV], st[_V1], st[_V2]
    kr, r1, r2 = st[_KR], st[_R1], st[_R2]
    sumv, pv, sv = st[_SUMV], st[_PV], st[_SV]
    gain, loss, atr = st[_GAIN], st[_LOSS], st[_ATR]

    tpv = (high + low + close) / 3.0 * volume
    st[_RC + b] = close
    st[_RV + b] = volume
    st[_RPV + b] = tpv
    dc = close - kc
    dv = volume - kv
    c1 += dc
    c2 += dc * dc
    v1 += dv
    v2 += dv * dv
    sumv += volume
    pv += tpv
    if t >= _W:
        ob = (t - _W) & 31
        oc = st[_RC + ob] - kc
        ov = st[_RV + ob] - kv
        c1 -= oc
        c2 -= oc * oc
        v1 -= ov
        v2 -= ov * ov
        sumv -= st[_RV + ob]
        pv -= st[_RPV + ob]
    if t >= 1:
        prev = st[_PREV_C]
        lr = math.log(close / prev)
        row[0] = lr
        st[_RLR + b] = lr
        dr = lr - kr
        r1 += dr
        r2 += dr * dr
        if lr != 0.0:
            st[_MOVED] += 1.0
        d = close - prev
        st[_RSV + b] = _signed_volume(d, volume)
        sv += st[_RSV + b]
        if t > _W:
            dr = st[_RLR + ((t - _W) & 31)] - kr
            r1 -= dr
            r2 -= dr * dr
            if st[_RLR + ((t - _W) & 31)] != 0.0:
                st[_MOVED] -= 1.0
            sv -= st[_RSV + ((t - _W) & 31)]
        up = max(d, 0.0)
        down = max(-d, 0.0)
        tr = max(high, prev) - min(low, prev)
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
            row[9] = atr / close
    if t % REANCHOR == 0 and t >= REANCHOR:
        scratch = st[_SCRATCH : _SCRATCH + _W]
        first = t - _W + 1
        for i in range(_W):
            scratch[i] = st[_RC + ((first + i) & 31)]
        kc, c1, c2 = _anchor(scratch)
        for i in range(_W):
            scratch[i] = st[_RV + ((first + i) & 31)]
        kv, v1, v2 = _anchor(scratch)
        for i in range(_W):
            scratch[i] = st[_RLR + ((first + i) & 31)]
        kr, r1, r2 = _anchor(scratch)
        sumv = _ring_sum(st[_RV : _RV + 32], t)
        pv = _ring_sum(st[_RPV : _RPV + 32], t)
        sv = _ring_sum(st[_RSV : _RSV + 32], t)
    if t >= 10:
        row[1] = close / st[_RC + ((t - 10) & 31)] - 1.0
    ema12 = st[_EMA12]
    if t < 11:
        ema12 += close
    elif t == 11:
        ema12 = (ema12 + close) / 12.0
    else:
        ema12 = (close - ema12) * _K12 + ema12
    st[_EMA12] = ema12
    if t >= 11:
        row[3] = close / ema12 - 1.0
    fast, slow, sig = st[_FAST], st[_SLOW], st[_SIG]
    if t < 25:
        slow += close
    elif t == 25:
        slow = (slow + close) / 26.0
        fast = 0.0
        for i in range(14, 26):  # at bar 25 the ring still holds bars 0..25
            fast += st[_RC + i]
        fast /= 12.0
    else:
        slow = (close - slow) * _K26 + slow
        fast = (close - fast) * _K12 + fast
    if t >= 25:
        macd = fast - slow
        row[5] = macd / close
        if t < 33:
            sig += macd
        elif t == 33:
            sig = (sig + macd) / 9.0
        else:
            sig = (macd - sig) * _K9 + sig
        if t >= 33:
            row[6] = sig / close
    st[_FAST], st[_SLOW], st[_SIG] = fast, slow, sig
    if t >= _W - 1:
        _window_features(row, close, volume, _moments(kc, c1, c2), _moments(kv, v1, v2), sumv, pv)
    if t >= _W:
        row[12] = sv / sumv if sumv > 0.0 else 0.0
        row[14] = _moments(kr, r1, r2)[1] if st[_MOVED] > 0.0 else 0.0
    m = t & 7
    hmax = max(high, st[_PREV_H]) if t >= 1 else high
    lmin = min(low, st[_PREV_L]) if t >= 1 else low
    st[_RH + m] = hmax
    st[_RL + m] = lmin
    hmax = max(hmax, st[_RH + ((t - 2) & 7)])
    lmin = min(lmin, st[_RL + ((t - 2) & 7)])
    st[_RH + 8 + m] = hmax
    st[_RL + 8 + m] = lmin
    hmax = max(hmax, st[_RH + 8 + ((t - 3) & 7)])
    lmin = min(lmin, st[_RL + 8 + ((t - 3) & 7)])
    st[_RH + 16 + m] = hmax
    st[_RL + 16 + m] = lmin
    if t >= 13:
        k0 = _stoch(close, max(hmax, st[_RH + 16 + ((t - 7) & 7)]), min(lmin, st[_RL + 16 + ((t - 7) & 7)]))
        row[10] = k0
        if t >= 15:
            row[11] = (st[_STOCH2] + st[_STOCH1] + k0) / 3.0
        st[_STOCH2] = st[_STOCH1]
        st[_STOCH1] = k0

    st[_KC], st[_C1], st[_C2] = kc, c1, c2
    st[_KV], st[_V1], st[_V2] = kv, v1, v2
    st[_KR], st[_R1], st[_R2] = kr, r1, r2
    st[_SUMV], st[_PV], st[_SV] = sumv, pv, sv
    st[_GAIN], st[_LOSS], st[_ATR] = gain, loss, atr
    st[_PREV_C], st[_PREV_H], st[_PREV_L] = close, high, low
    st[_T] = t + 1
    return True


class StreamingFeatures:
    """The 16 features of the newest bar, updated one bar at a time.

    Example::

        live = StreamingFeatures()
        for bar in feed:
            x = live.update(bar.high, bar.low, bar.close, bar.volume)
            if live.ready:
                action = model(normalizer.normalize(x))

    The open is not an argument because none of the 16 features uses it.
    """

    __slots__ = ("_out", "_state")

    names: tuple[str, ...] = FEATURE_NAMES

    def __init__(self) -> None:
        self._state = np.zeros(_SIZE)
        self._out = self._state[_OUT : _OUT + N_FEATURES]
        self.reset()

    def reset(self) -> None:
        """Forget every bar; the next update is bar 0 again."""
        self._state[:] = 0.0
        self._state[_OUT : _OUT + N_FEATURES] = np.nan
        self._out.setflags(write=False)  # the view is read-only; the kernel writes the base

    def update(self, high: float, low: float, close: float, volume: float) -> np.ndarray:
        """Add one bar and return its 16 features (float64; NaN before each one's warm-up).

        The returned array is a read-only view that the next update overwrites: copy it
        to keep it.

        Raises:
            InputError: a price that is not positive and finite, or a volume that is not
                non-negative and finite (as in the batch form); the bar is not added.
        """
        if not _update(self._state, high, low, close, volume):
            raise InputError(
                f"bar rejected: high={high!r} low={low!r} close={close!r} volume={volume!r}; prices must be "
                "positive and finite, volume non-negative and finite",
                field="bar",
            )
        return self._out

    @property
    def values(self) -> np.ndarray:
        """The features of the last bar (the array :meth:`update` returned)."""
        return self._out

    @property
    def bars_seen(self) -> int:
        return int(self._state[_T])

    @property
    def ready(self) -> bool:
        """True once all 16 features are defined (after ``WARMUP + 1`` bars)."""
        return self._state[_T] > WARMUP

    def copy(self) -> StreamingFeatures:
        """An independent copy of the state, e.g. to branch a what-if from here."""
        other = StreamingFeatures()
        other._state[:] = self._state
        return other

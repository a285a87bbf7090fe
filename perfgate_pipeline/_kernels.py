"""Fused numba kernels for single-sample inference: the models' fast servers.

At batch 1 the arithmetic of these models is tiny (tens of thousands of multiply-adds)
and a framework's per-operation dispatch is what costs: a few µs per torch operator, ~4 µs
more per ``nn.Module`` call (measured on a 2-core runner). Each kernel here runs a
whole forward (or one streaming step) in one compiled call, reading every weight from one
flat float32 buffer ``w`` at offsets ``off`` (one per tensor, packed by
:func:`perfgate_pipeline.serve.pack` in the order of :class:`perfgate_pipeline.serve.MLPServer`,
``mamba2_tensors`` of :mod:`perfgate_pipeline.models.mamba2` or ``tft_tensors`` of
:mod:`perfgate_pipeline.models.tft`), with scratch space passed in, so a call allocates nothing
and numba's dispatch checks only a handful of arguments.

Two choices make them fast. Every matrix is stored transposed, (inputs, outputs), and
applied as a sum of scaled rows (``y += x[j] * Wᵀ[j]``), so the inner loop runs over
outputs with no horizontal reduction per output; and tanh, sigmoid, SiLU and ELU use a
rational tanh (Eigen's float32 approximation, |error| < 4e-7) that LLVM vectorises,
where a libm call per element would not be; softmax takes e^v = (1 + t)/(1 − t), t = tanh(v/2),
for its v ≤ 0. Only Mamba-2's per-head softplus and decay call ``exp``.

Arithmetic is float32, as in torch, but in another order and with that tanh; the results
agree with the torch forward to about 1e-6 (the tests require 1e-5). ``fastmath`` allows
reordering but not the no-NaN/no-inf assumptions (a softmax starts from ``-inf``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["RELU", "TANH", "mamba2_scratch_size", "mamba2_step", "mlp_forward", "tft_scratch_size", "tft_step"]

_FASTMATH = {"nsz", "arcp", "contract", "reassoc"}
_jit = numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)

RELU, TANH = 0, 1
_ALIGN = 16  # floats: 64 bytes. Every buffer and segment starts on a cache line; a misaligned
# scratch made the DQN forward 1.8x slower in some processes and not others (run-to-run noise).


@_jit
def _up(n):  # type: ignore[no-untyped-def]
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


# Eigen's ptanh_float: tanh(x) = x·P(x²)/Q(x²) on |x| ≤ 7.9053 (where float32 tanh is ±1)
_CLAMP = np.float32(7.90531110763549805)
_A1, _A3, _A5, _A7 = (
    np.float32(4.89352455891786e-03),
    np.float32(6.37261928875436e-04),
    np.float32(1.48572235717979e-05),
    np.float32(5.12229709037114e-08),
)
_A9, _A11, _A13 = np.float32(-8.60467152213735e-11), np.float32(2.00018790482477e-13), np.float32(-2.76076847742355e-16)
_B0, _B2, _B4, _B6 = (
    np.float32(4.89352518554385e-03),
    np.float32(2.26843463243900e-03),
    np.float32(1.18534705686654e-04),
    np.float32(1.19825839466702e-06),
)
_HALF, _ONE, _TWO = np.float32(0.5), np.float32(1.0), np.float32(2.0)


@_jit
def _tanh(v):  # type: ignore[no-untyped-def]
    x = min(max(v, -_CLAMP), _CLAMP)
    x2 = x * x
    p = ((((((_A13 * x2 + _A11) * x2 + _A9) * x2 + _A7) * x2 + _A5) * x2 + _A3) * x2 + _A1) * x
    q = ((_B6 * x2 + _B4) * x2 + _B2) * x2 + _B0
    return p / q


@_jit
def _sigmoid(v):  # type: ignore[no-untyped-def]
    return _HALF + _HALF * _tanh(_HALF * v)


@_jit
def _silu(v):  # type: ignore[no-untyped-def]
    return v * _sigmoid(v)


@_jit
def _elu(v):  # type: ignore[no-untyped-def]
    # expm1(v) = 2t / (1 − t) with t = tanh(v / 2): exact, and no cancellation for v ≤ 0
    t = _tanh(_HALF * v)
    return v if v > 0 else _TWO * t / (_ONE - t)


@_jit
def _exp_nonpositive(v):  # type: ignore[no-untyped-def]
    # e^v = (1 + t) / (1 − t) with t = tanh(v / 2): vectorisable; for v ≤ 0, |error| < 4e-7
    t = _tanh(_HALF * v)
    return (_ONE + t) / (_ONE - t)


@_jit
def _softplus(v):  # type: ignore[no-untyped-def]
    # torch's threshold: above 20 softplus(v) is v to float32 precision
    return v if v > 20.0 else np.float32(math.log1p(math.exp(v)))


@_jit
def _lin(w, wo, bo, x, y, n_in, n_out):  # type: ignore[no-untyped-def]
    """y = x Wᵀ + b: Wᵀ (n_in, n_out) row-major at w[wo:], b at w[bo:] (bo < 0: none); x, y 1-D views."""
    # Slices, not w[wo + j * n_out + i]: an index computed from an offset makes numba test
    # it for a negative value on every access, and then LLVM does not vectorise (20x slower).
    if bo >= 0:
        b = w[bo : bo + n_out]
        for i in range(n_out):
            y[i] = b[i]
    else:
        for i in range(n_out):
            y[i] = 0.0
    for j in range(n_in):
        xj = x[j]
        row = w[wo + j * n_out : wo + (j + 1) * n_out]
        for i in range(n_out):
            y[i] += xj * row[i]


@_jit
def _layer_norm(x, gamma, beta, y, eps):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    mean = np.float32(0.0)
    for i in range(n):
        mean += x[i]
    mean /= n
    var = np.float32(0.0)
    for i in range(n):
        var += (x[i] - mean) * (x[i] - mean)
    inv = _ONE / np.float32(math.sqrt(var / n + eps))
    for i in range(n):
        y[i] = (x[i] - mean) * inv * gamma[i] + beta[i]


@_jit
def _rms_norm(x, gamma, y, eps):  # type: ignore[no-untyped-def]
    n = x.shape[0]
    ms = np.float32(0.0)
    for i in range(n):
        ms += x[i] * x[i]
    inv = _ONE / np.float32(math.sqrt(ms / n + eps))
    for i in range(n):
        y[i] = x[i] * inv * gamma[i]


# ---------------------------------------------------------------------------------------
# DQN and PPO: a three-layer MLP (PPO's heads packed as one layer: logits, then value)


@_jit
def mlp_forward(x, w, off, dims, s, out):  # type: ignore[no-untyped-def]
    """out = act(act(x W1ᵀ + b1) W2ᵀ + b2) W3ᵀ + b3; tensors at off[0..5]; dims = (act, hidden1, hidden2).

    ``act`` is RELU or TANH; scratch ``s`` holds the two hidden layers, each from a cache line.
    """
    act, n1, n2 = dims[0], dims[1], dims[2]
    h1, h2 = s[:n1], s[_up(n1) : _up(n1) + n2]
    _lin(w, off[0], off[1], x, h1, x.shape[0], n1)
    _activate(h1, act)
    _lin(w, off[2], off[3], h1, h2, n1, n2)
    _activate(h2, act)
    _lin(w, off[4], off[5], h2, out, n2, out.shape[0])


@_jit
def _activate(h, act):  # type: ignore[no-untyped-def]
    if act == RELU:
        for i in range(h.shape[0]):
            h[i] = max(h[i], np.float32(0.0))
    else:
        for i in range(h.shape[0]):
            h[i] = _tanh(h[i])


# ---------------------------------------------------------------------------------------
# Mamba-2: one recurrent step of every layer (models/mamba2.py, Mixer.step)

_M_GLOBAL = 5  # embed Wᵀ, b; norm_f; head Wᵀ, b; then per layer, in this order:
_M_NORM, _M_IN, _M_CONV_W, _M_CONV_B, _M_DT_BIAS, _M_A, _M_D, _M_GNORM, _M_OUT = range(9)
_M_PER_LAYER = 9


def mamba2_scratch_size(d: int, d_inner: int, d_state: int, n_heads: int, headdim: int) -> int:
    z = 2 * d_inner + 2 * d_state + n_heads
    return sum(_up(n) for n in (d, d, z, d_inner + 2 * d_state, d_inner, headdim))


@_jit
def mamba2_step(x, w, off, dims, conv, ssm, s, out, eps):  # type: ignore[no-untyped-def]
    """One bar x (F,) -> logits in out; updates conv (layers, K, conv_dim) and ssm (layers, H, N, P) in place."""
    F_, d, n_layers, di, N, H, P, K = dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], dims[7]
    conv_dim = di + 2 * N
    Z = 2 * di + 2 * N + H
    o = 0
    h = s[o : o + d]
    o += _up(d)
    hn = s[o : o + d]
    o += _up(d)
    zx = s[o : o + Z]
    o += _up(Z)
    xc = s[o : o + conv_dim]
    o += _up(conv_dim)
    y = s[o : o + di]
    o += _up(di)
    xdt = s[o : o + P]
    _lin(w, off[0], off[1], x, h, F_, d)
    for layer in range(n_layers):
        k = _M_GLOBAL + layer * _M_PER_LAYER
        _rms_norm(h, w[off[k + _M_NORM] : off[k + _M_NORM] + d], hn, eps)
        _lin(w, off[k + _M_IN], -1, hn, zx, d, Z)
        # causal conv: shift the window of the last K inputs, append this one, sum tap by tap
        window = conv[layer]  # (K, conv_dim)
        for t in range(K - 1):
            dst, src = window[t], window[t + 1]
            for c in range(conv_dim):
                dst[c] = src[c]
        last = window[K - 1]
        for c in range(conv_dim):
            last[c] = zx[di + c]
        cw, cb = off[k + _M_CONV_W], off[k + _M_CONV_B]
        bias = w[cb : cb + conv_dim]
        for c in range(conv_dim):
            xc[c] = bias[c]
        for t in range(K):
            row, tap = window[t], w[cw + t * conv_dim : cw + (t + 1) * conv_dim]
            for c in range(conv_dim):
                xc[c] += row[c] * tap[c]
        for c in range(conv_dim):
            xc[c] = _silu(xc[c])
        Bv, Cv = xc[di : di + N], xc[di + N : di + 2 * N]
        dtb, ao, do_ = off[k + _M_DT_BIAS], off[k + _M_A], off[k + _M_D]
        for hh in range(H):
            dt = _softplus(zx[di + conv_dim + hh] + w[dtb + hh])
            dA = np.float32(math.exp(dt * w[ao + hh]))
            xh, yh = xc[hh * P : (hh + 1) * P], y[hh * P : (hh + 1) * P]
            for p in range(P):
                xdt[p] = xh[p] * dt
                yh[p] = 0.0
            state = ssm[layer, hh]  # (N, P): the update and the read-out both run along P
            for n in range(N):
                row, bn, cn = state[n], Bv[n], Cv[n]
                for p in range(P):
                    v = row[p] * dA + xdt[p] * bn
                    row[p] = v
                    yh[p] += v * cn
            Dh = w[do_ + hh]
            for p in range(P):
                yh[p] += Dh * xh[p]
        for i in range(di):  # gated RMSNorm: norm(y * SiLU(z))
            y[i] = y[i] * _silu(zx[i])
        g = off[k + _M_GNORM]
        _rms_norm(y, w[g : g + di], y, eps)
        _lin(w, off[k + _M_OUT], -1, y, hn, di, d)
        for i in range(d):
            h[i] += hn[i]
    _rms_norm(h, w[off[2] : off[2] + d], hn, eps)
    _lin(w, off[3], off[4], hn, out, d, out.shape[0])


# ---------------------------------------------------------------------------------------
# TFT: one streaming step (models/tft.py, TFT.step)

_LN_EPS = np.float32(1e-5)
# tensor indices of the packing (models/tft.py, tft_tensors): the selection GRN (its skip and fc1 folded
# onto x), the per-variable GRNs (first layer folded to x_v·p + q), the projection to d_model, ...
_T_SEL, _T_VAR, _T_VSN_OUT = 2, 12, 20
_T_W_IH, _T_W_HH, _T_B_IH, _T_B_HH = 22, 23, 24, 25
_T_LSTM_GLU, _T_LSTM_LN, _T_ENRICH = 26, 28, 30
_T_Q, _T_K, _T_V, _T_ATT_OUT, _T_ATT_GLU, _T_ATT_LN = 38, 40, 42, 44, 46, 48
_T_FF, _T_OUT_GLU, _T_OUT_LN, _T_HEAD = 50, 58, 60, 62


@_jit
def _glu_add(w, off, k, x, skip, s, y, n_in, n_out):  # type: ignore[no-untyped-def]
    """y = a · σ(b) + skip, [a, b] = x Wᵀ + c from off[k], off[k+1]; uses s[: 2 n_out]."""
    g = s[: 2 * n_out]
    _lin(w, off[k], off[k + 1], x, g, n_in, 2 * n_out)
    for i in range(n_out):
        y[i] = g[i] * _sigmoid(g[n_out + i]) + skip[i]


@_jit
def _grn(w, off, k, x, n_in, n_hidden, n_out, has_skip, s, y):  # type: ignore[no-untyped-def]
    """GRN from off[k]: [skip Wᵀ, b], fc1 Wᵀ, b, fc2 Wᵀ, b, glu Wᵀ, b, ln w, b; uses s[: 3 n_out + 2 n_hidden + ...]."""
    sk = s[:n_out]
    if has_skip:
        _lin(w, off[k], off[k + 1], x, sk, n_in, n_out)
        k += 2
    else:
        for i in range(n_out):
            sk[i] = x[i]
    a = s[n_out : n_out + n_hidden]
    b = s[n_out + n_hidden : n_out + 2 * n_hidden]
    pre = s[n_out + 2 * n_hidden : 2 * n_out + 2 * n_hidden]
    _lin(w, off[k], off[k + 1], x, a, n_in, n_hidden)
    for i in range(n_hidden):
        a[i] = _elu(a[i])
    _lin(w, off[k + 2], off[k + 3], a, b, n_hidden, n_hidden)
    _glu_add(w, off, k + 4, b, sk, s[2 * n_out + 2 * n_hidden :], pre, n_hidden, n_out)
    _layer_norm(pre, w[off[k + 6] : off[k + 6] + n_out], w[off[k + 7] : off[k + 7] + n_out], y, _LN_EPS)


def tft_scratch_size(V: int, dv: int, d: int, heads: int, W: int) -> int:
    """Floats of scratch :func:`tft_step` needs."""
    segments = (V * dv, V, dv, 2 * dv, d, 4 * d, 4 * d, d, d, d, d, d, d, d // heads, W, W)
    grn_room = 4 * max(V, d) + 2 * d  # the largest GRN: 4 n_out + 2 n_hidden
    return sum(_up(n) for n in segments) + max(grn_room, 2 * d, 2 * dv)


@_jit
def tft_step(x, w, off, dims, st, seen, s, out):  # type: ignore[no-untyped-def]
    """One bar x (V,) -> quantiles in out; ``seen`` bars came before it.

    State ``st`` = [h (d), c (d), keys (heads, dh, W), values (W, dh)], updated in place:
    keys lie along the ring of W slots, so a head's scores are one axpy per key channel.
    """
    V, dv, d, heads, W = dims[0], dims[1], dims[2], dims[3], dims[4]
    dh = d // heads
    hs, cs = st[:d], st[d : 2 * d]
    keys, values = st[2 * d : 2 * d + d * W], st[2 * d + d * W : 2 * d + d * W + W * dh]
    o = 0
    e = s[o : o + V * dv]
    o += _up(V * dv)
    sel = s[o : o + V]
    o += _up(V)
    mix = s[o : o + dv]
    o += _up(dv)
    pv = s[o : o + 2 * dv]  # per-variable scratch
    o += _up(2 * dv)
    vsn = s[o : o + d]
    o += _up(d)
    gates = s[o : o + 4 * d]
    o += _up(4 * d)
    tmp4 = s[o : o + 4 * d]
    o += _up(4 * d)
    phi = s[o : o + d]
    o += _up(d)
    theta = s[o : o + d]
    o += _up(d)
    q = s[o : o + d]
    o += _up(d)
    a = s[o : o + d]
    o += _up(d)
    delta = s[o : o + d]
    o += _up(d)
    psi = s[o : o + d]
    o += _up(d)
    av = s[o : o + dh]
    o += _up(dh)
    sc = s[o : o + W]
    o += _up(W)
    att = s[o : o + W]
    o += _up(W)
    tmp = s[o:]  # GRN/GLU room

    # 1. variable selection: embed, weigh, transform each variable, mix, project
    ew, eb = w[off[0] : off[0] + V * dv], w[off[1] : off[1] + V * dv]
    for v in range(V):
        for j in range(dv):
            e[v * dv + j] = x[v] * ew[v * dv + j] + eb[v * dv + j]
    _grn(w, off, _T_SEL, x, V, d, V, True, tmp, sel)  # skip and fc1 folded onto x (tft_tensors)
    m = sel[0]
    for v in range(1, V):
        m = max(m, sel[v])
    total = np.float32(0.0)
    for v in range(V):
        sel[v] = _exp_nonpositive(sel[v] - m)
        total += sel[v]
    for j in range(dv):
        mix[j] = 0.0
    h1, h2 = pv[:dv], pv[dv : 2 * dv]
    g = tmp[: 2 * dv]
    for v in range(V):
        ev = e[v * dv : (v + 1) * dv]
        p1, q1 = w[off[_T_VAR] + v * dv : off[_T_VAR] + (v + 1) * dv], w[off[_T_VAR + 1] + v * dv :]
        for j in range(dv):  # the first layer, folded: affine in x_v
            h1[j] = _elu(x[v] * p1[j] + q1[j])
        _lin(w, off[_T_VAR + 2] + v * dv * dv, off[_T_VAR + 3] + v * dv, h1, h2, dv, dv)
        _lin(w, off[_T_VAR + 4] + v * 2 * dv * dv, off[_T_VAR + 5] + v * 2 * dv, h2, g, dv, 2 * dv)
        for j in range(dv):
            h1[j] = g[j] * _sigmoid(g[dv + j]) + ev[j]
        lw, lb = off[_T_VAR + 6] + v * dv, off[_T_VAR + 7] + v * dv
        _layer_norm(h1, w[lw : lw + dv], w[lb : lb + dv], h2, _LN_EPS)
        weight = sel[v] / total
        for j in range(dv):
            mix[j] += weight * h2[j]
    _lin(w, off[_T_VSN_OUT], off[_T_VSN_OUT + 1], mix, vsn, dv, d)

    # 2. one LSTM step, gates in torch's order i, f, g, o
    _lin(w, off[_T_W_IH], off[_T_B_IH], vsn, gates, d, 4 * d)
    _lin(w, off[_T_W_HH], off[_T_B_HH], hs, tmp4, d, 4 * d)
    for i in range(4 * d):
        gates[i] += tmp4[i]
    for i in range(d):
        c = _sigmoid(gates[d + i]) * cs[i] + _sigmoid(gates[i]) * _tanh(gates[2 * d + i])
        cs[i] = c
        hs[i] = _sigmoid(gates[3 * d + i]) * _tanh(c)
    _glu_add(w, off, _T_LSTM_GLU, hs, vsn, tmp, tmp4, d, d)
    _layer_norm(tmp4[:d], w[off[_T_LSTM_LN] : off[_T_LSTM_LN] + d], w[off[_T_LSTM_LN + 1] :], phi, _LN_EPS)

    # 3. enrichment; this bar's key and value into ring slot seen % W
    _grn(w, off, _T_ENRICH, phi, d, d, d, False, tmp, theta)
    slot = seen % W
    _lin(w, off[_T_K], off[_T_K + 1], theta, tmp4, d, d)
    for i in range(d):  # key channel i = (head, t) goes to keys[head, t, slot]
        keys[i * W + slot] = tmp4[i]
    _lin(w, off[_T_V], off[_T_V + 1], theta, tmp4, d, dh)
    for t in range(dh):
        values[slot * dh + t] = tmp4[t]
    _lin(w, off[_T_Q], off[_T_Q + 1], theta, q, d, d)

    # 4. interpretable attention: a softmax per head over the filled slots, averaged over heads
    filled = min(seen + 1, W)
    scale = np.float32(1.0 / math.sqrt(dh))
    for j in range(filled):
        att[j] = 0.0
    for hh in range(heads):
        for j in range(filled):
            sc[j] = 0.0
        for t in range(dh):
            qt = q[hh * dh + t] * scale
            row = keys[(hh * dh + t) * W : (hh * dh + t) * W + filled]
            for j in range(filled):
                sc[j] += qt * row[j]
        m = sc[0]
        for j in range(1, filled):
            m = max(m, sc[j])
        total = np.float32(0.0)
        for j in range(filled):
            sc[j] = _exp_nonpositive(sc[j] - m)
            total += sc[j]
        inv = _ONE / (total * heads)
        for j in range(filled):
            att[j] += sc[j] * inv
    for t in range(dh):
        av[t] = 0.0
    for j in range(filled):
        aj, vj = att[j], values[j * dh : (j + 1) * dh]
        for t in range(dh):
            av[t] += aj * vj[t]
    _lin(w, off[_T_ATT_OUT], off[_T_ATT_OUT + 1], av, a, dh, d)
    _glu_add(w, off, _T_ATT_GLU, a, theta, tmp, tmp4, d, d)
    _layer_norm(tmp4[:d], w[off[_T_ATT_LN] : off[_T_ATT_LN] + d], w[off[_T_ATT_LN + 1] :], delta, _LN_EPS)

    # 5. position-wise GRN, the final gate back to the LSTM features, the quantile head
    _grn(w, off, _T_FF, delta, d, d, d, False, tmp, psi)
    _glu_add(w, off, _T_OUT_GLU, psi, phi, tmp, tmp4, d, d)
    _layer_norm(tmp4[:d], w[off[_T_OUT_LN] : off[_T_OUT_LN] + d], w[off[_T_OUT_LN + 1] :], a, _LN_EPS)
    _lin(w, off[_T_HEAD], off[_T_HEAD + 1], a, out, d, out.shape[0])

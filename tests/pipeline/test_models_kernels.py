"""The fast kernels' vectorisable activations against numpy, over their whole range."""

from __future__ import annotations

import numpy as np

from perfgate_pipeline import _kernels as kernels

GRID = np.linspace(-30.0, 30.0, 60_001).astype(np.float32)


def test_rational_tanh_is_within_4e_7_everywhere():
    got = np.array([kernels._tanh(v) for v in GRID[::7]], dtype=np.float64)
    exact = np.tanh(GRID[::7].astype(np.float64))
    assert np.abs(got - exact).max() < 4e-7
    assert kernels._tanh(np.float32(0.0)) == 0.0


def test_sigmoid_elu_and_exp_built_on_it():
    x = GRID[::11].astype(np.float64)
    sig = np.array([kernels._sigmoid(np.float32(v)) for v in x])
    np.testing.assert_allclose(sig, 1.0 / (1.0 + np.exp(-x)), atol=3e-7, rtol=0)
    elu = np.array([kernels._elu(np.float32(v)) for v in x])
    np.testing.assert_allclose(elu, np.where(x > 0, x, np.expm1(x)), atol=1e-6, rtol=1e-6)
    neg = x[x <= 0]
    exp = np.array([kernels._exp_nonpositive(np.float32(v)) for v in neg])
    np.testing.assert_allclose(exp, np.exp(neg), atol=4e-7, rtol=1e-6)


def test_buffers_and_packed_tensors_start_on_cache_lines():
    import torch

    from perfgate_pipeline.serve import pack, zeros

    for shape in (5, (3, 7), 129):
        assert zeros(shape).ctypes.data % 64 == 0
        assert zeros(shape).shape == ((shape,) if isinstance(shape, int) else shape)
    tensors = [torch.arange(5.0), torch.ones(2, 3), torch.full((17,), 2.0)]
    w, off = pack(tensors)
    assert w.ctypes.data % 64 == 0
    assert off.tolist() == [0, 16, 32, 49]  # each start rounded up to 16 floats; the end is the last size
    for t, start in zip(tensors, off[:-1], strict=False):
        assert w[start : start + t.numel()].tolist() == t.reshape(-1).tolist()

"""Mamba-2: the chunked scan, the full forward and the recurrent step against naive loops and each other."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from perfgate_pipeline.env import MarketData, toy_bars
from perfgate_pipeline.models import build_task, fast_server
from perfgate_pipeline.models.mamba2 import Mamba2, Mamba2Config, Mixer, segsum, ssd_chunked
from perfgate_pipeline.serve import eager_server
from perfgate_pipeline.train import Trainer

TINY = Mamba2Config(d_model=16, n_layers=2, d_state=8, headdim=8, chunk_size=8, seq_len=32, batch_size=16)
torch.set_num_threads(1)  # small ops: a second OpenMP thread only adds wake-ups on a shared machine


def _model(cfg: Mamba2Config, dtype: torch.dtype = torch.float32, seed: int = 0) -> Mamba2:
    torch.manual_seed(seed)
    model = Mamba2(cfg).to(dtype)
    with torch.no_grad():  # D, norms and biases away from their neutral start, so every term is exercised
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.3 * torch.randn_like(p))
    return model


def naive_scan(
    x: torch.Tensor, a: torch.Tensor, B: torch.Tensor, C: torch.Tensor, h0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """h_t = exp(a_t) h_{t-1} + x_t ⊗ B_t; y_t = h_t C_t, one position and one head at a time."""
    L, H = x.shape[1], x.shape[2]
    h = h0.clone()
    y = torch.zeros_like(x)
    for t in range(L):
        for k in range(H):
            h[:, k] = torch.exp(a[:, t, k])[:, None, None] * h[:, k] + x[:, t, k, :, None] * B[:, t, None, :]
            y[:, t, k] = (h[:, k] * C[:, t, None, :]).sum(-1)
    return y, h


def naive_mixer(mx: Mixer, u: torch.Tensor) -> torch.Tensor:
    """The mixer written out position by position: explicit causal conv, per-step SSM update."""
    cfg = mx.config
    Bt, L, _ = u.shape
    zxbcdt = u @ mx.in_proj.weight.T
    z, xBC, dt = zxbcdt.split([cfg.d_inner, cfg.conv_dim, cfg.n_heads], dim=-1)
    w = mx.conv1d.weight[:, 0]  # (conv_dim, K)
    conv = torch.zeros_like(xBC)
    for t in range(L):
        acc = mx.conv1d.bias.expand(Bt, -1).clone()
        for k in range(cfg.d_conv):  # tap k sees position t - (K - 1 - k)
            s = t - (cfg.d_conv - 1 - k)
            if s >= 0:
                acc = acc + xBC[:, s] * w[:, k]
        conv[:, t] = acc * torch.sigmoid(acc)
    x, Bm, Cm = conv.split([cfg.d_inner, cfg.d_state, cfg.d_state], dim=-1)
    x = x.reshape(Bt, L, cfg.n_heads, cfg.headdim)
    dt = torch.log1p(torch.exp(dt + mx.dt_bias))
    A = -torch.exp(mx.A_log)
    y, _ = naive_scan(x * dt[..., None], dt * A, Bm, Cm, x.new_zeros(Bt, cfg.n_heads, cfg.headdim, cfg.d_state))
    y = (y + x * mx.D[:, None]).reshape(Bt, L, cfg.d_inner)
    g = y * z * torch.sigmoid(z)
    g = g / torch.sqrt((g * g).mean(-1, keepdim=True) + cfg.eps) * mx.norm.weight
    return g @ mx.out_proj.weight.T


def test_shapes():
    model = _model(TINY)
    assert model(torch.zeros(3, 20, 16)).shape == (3, 20, 3)
    out, state = model.step(torch.zeros(3, 16), model.initial_state(3))
    assert out.shape == (3, 3)
    assert state[0][0].shape == (3, TINY.conv_dim, TINY.d_conv)
    assert state[0][1].shape == (3, TINY.n_heads, TINY.headdim, TINY.d_state)


def test_config_checks_heads():
    with pytest.raises(ValueError, match="multiple of headdim"):
        Mamba2Config(d_model=10, headdim=8)


def test_segsum_by_hand():
    got = segsum(torch.tensor([1.0, 2.0, 3.0]))
    inf = float("-inf")
    assert got.tolist() == [[0.0, inf, inf], [2.0, 0.0, inf], [5.0, 3.0, 0.0]]


@pytest.mark.parametrize("chunk", [4, 8, 24])
def test_chunked_scan_equals_a_sequential_loop(chunk):
    g = torch.Generator().manual_seed(chunk)
    b, L, H, P, N = 2, 24, 3, 4, 5
    x = torch.randn(b, L, H, P, generator=g, dtype=torch.float64)
    a = -torch.rand(b, L, H, generator=g, dtype=torch.float64)  # log-decays ≤ 0
    B = torch.randn(b, L, N, generator=g, dtype=torch.float64)
    C = torch.randn(b, L, N, generator=g, dtype=torch.float64)
    h0 = torch.randn(b, H, P, N, generator=g, dtype=torch.float64)
    y, final = ssd_chunked(x, a, B, C, chunk, h0)
    y_ref, final_ref = naive_scan(x, a, B, C, h0)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(final, final_ref, rtol=0, atol=1e-12)


def test_mixer_forward_equals_the_naive_mixer():
    model = _model(TINY, torch.float64)
    u = torch.randn(2, 21, TINY.d_model, dtype=torch.float64)  # 21: not a multiple of the chunk
    mx = model.layers[0].mixer
    torch.testing.assert_close(mx(u), naive_mixer(mx, u), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_recurrent_step_equals_the_full_forward(dtype, tol):
    model = _model(TINY, dtype)
    x = torch.randn(2, 37, 16, dtype=dtype)  # 37: a partial last chunk
    with torch.no_grad():
        full = model(x)
        state = model.initial_state(2)
        steps = []
        for t in range(x.shape[1]):
            out, state = model.step(x[:, t], state)
            steps.append(out)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, rtol=0, atol=tol)


def test_gradients_of_the_chunked_path():
    cfg = Mamba2Config(d_model=8, n_layers=1, d_state=4, headdim=4, chunk_size=4)
    model = _model(cfg, torch.float64)
    x = torch.randn(1, 10, 16, dtype=torch.float64)
    mx = model.layers[0].mixer

    def f(a_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(
            model, {"layers.0.mixer.A_log": a_log, "layers.0.mixer.dt_bias": dt_bias}, (x,)
        )

    inputs = tuple(p.detach().clone().requires_grad_(True) for p in (mx.A_log, mx.dt_bias))
    assert torch.autograd.gradcheck(f, inputs)


def test_overfits_one_batch():
    model = _model(TINY)
    x = torch.randn(4, 32, 16)
    y = torch.randint(0, 3, (4, 32))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(150):
        loss = F.cross_entropy(model(x).reshape(-1, 3), y.reshape(-1))
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.05 * losses[0]


@pytest.mark.slow
def test_short_training_beats_the_class_prior_on_a_later_slice():
    data = MarketData.from_bars(toy_bars(8000, phi=0.6, seed=2))
    train, held_out = data.split(0.75)
    task = build_task("mamba2", train, config=TINY, seed=0)
    Trainer(task).fit(250)
    assert task.target_fn is not None
    labels = torch.from_numpy(task.target_fn(held_out.returns))
    with torch.no_grad():
        logits = task.model.eval()(torch.from_numpy(held_out.features)[None])[0]
    learned = float(F.cross_entropy(logits, labels))
    prior = np.bincount(task.target_fn(train.returns), minlength=3) / len(train)
    trivial = float(-np.log(prior[labels.numpy()]).mean())  # the best constant prediction, fitted on training data
    assert learned < trivial - 0.03


def test_fast_step_equals_the_full_forward():
    model = _model(Mamba2Config(), seed=4)
    x = np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32)
    with torch.no_grad():
        full = model(torch.from_numpy(x)[None])[0].numpy()
    server = fast_server(model)
    got = np.stack([server(row).copy() for row in x])
    np.testing.assert_allclose(got, full, atol=1e-5, rtol=0)
    server.reset()  # a new stream starts from zero state
    np.testing.assert_allclose(server(x[0]), full[0], atol=1e-5, rtol=0)
    eager = eager_server(model)
    np.testing.assert_allclose(np.stack([eager(row).numpy()[0] for row in x[:5]]), full[:5], atol=1e-5, rtol=0)

"""TFT: parts against naive loops, streaming against the full window, overfitting, learning, serving."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from perfgate_pipeline.env import MarketData, toy_bars
from perfgate_pipeline.models import build_task, fast_server
from perfgate_pipeline.models.tft import TFT, TFTConfig, attention_mask, quantile_loss
from perfgate_pipeline.serve import eager_server
from perfgate_pipeline.train import Trainer

TINY = TFTConfig(d_model=16, d_var=4, n_heads=2, attn_window=8, seq_len=32, batch_size=16, lr=3e-3)
torch.set_num_threads(1)  # small ops: a second OpenMP thread only adds wake-ups on a shared machine


def _model(cfg: TFTConfig, dtype: torch.dtype = torch.float32, seed: int = 0) -> TFT:
    torch.manual_seed(seed)
    model = TFT(cfg).to(dtype)
    with torch.no_grad():  # biases and norms away from their neutral start, so every term is exercised
        for name, p in model.named_parameters():
            if "b" in name.rsplit(".", 1)[-1] or "ln" in name or "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    return model


def test_shapes():
    model = _model(TINY)
    assert model(torch.zeros(3, 20, 16)).shape == (3, 20, 3)
    out, state = model.step(torch.zeros(3, 16), model.initial_state(3))
    assert out.shape == (3, 3) and state[4] == 1


def test_config_checks_heads():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        TFTConfig(d_model=10, n_heads=4)


def test_quantile_loss_by_hand():
    pred = torch.tensor([[0.0, 1.0, 2.0]])
    target = torch.tensor([1.5])
    # errors 1.5, 0.5, -0.5 -> 0.1*1.5, 0.5*0.5, (0.9-1)*(-0.5)
    assert float(quantile_loss(pred, target, (0.1, 0.5, 0.9))) == pytest.approx((0.15 + 0.25 + 0.05) / 3)


def test_attention_mask_is_causal_within_the_window():
    m = attention_mask(5, 2)
    assert m.int().tolist() == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]


def test_interpretable_attention_equals_a_per_query_loop():
    model = _model(TINY, torch.float64)
    att = model.attn
    x = torch.randn(2, 12, TINY.d_model, dtype=torch.float64)
    got = att(x)
    dh, W = TINY.d_head, TINY.attn_window
    expected = torch.zeros_like(got)
    for b in range(2):
        for i in range(12):
            keys = range(max(0, i - W + 1), i + 1)
            v = torch.stack([att.v(x[b, j]) for j in keys])  # one value projection for every head
            mean = torch.zeros(dh, dtype=torch.float64)
            for h in range(TINY.n_heads):
                q = att.q(x[b, i])[h * dh : (h + 1) * dh]
                scores = torch.stack([q @ att.k(x[b, j])[h * dh : (h + 1) * dh] / math.sqrt(dh) for j in keys])
                mean += torch.softmax(scores, 0) @ v / TINY.n_heads
            expected[b, i] = att.out(mean)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_variable_grns_equal_one_grn_per_variable():
    model = _model(TINY, torch.float64)
    pv = model.vsn.per_var
    e = torch.randn(16, 7, TINY.d_var, dtype=torch.float64)  # (V, N, dv)
    got = pv(e)
    for v in range(16):
        h = F.elu(e[v] @ pv.w1[v] + pv.b1[v])
        h = h @ pv.w2[v] + pv.b2[v]
        a, b = (h @ pv.wg[v] + pv.bg[v]).chunk(2, -1)
        y = e[v] + a * torch.sigmoid(b)
        y = (y - y.mean(-1, keepdim=True)) / torch.sqrt(y.var(-1, unbiased=False, keepdim=True) + 1e-5)
        torch.testing.assert_close(got[v], y * pv.ln_w[v] + pv.ln_b[v], rtol=0, atol=1e-12)


def test_variable_selection_weights_each_feature():
    model = _model(TINY, torch.float64)
    vsn = model.vsn
    x = torch.randn(5, 16, dtype=torch.float64)
    e = x.T[..., None] * vsn.emb_w + vsn.emb_b  # (V, N, dv)
    weights = torch.softmax(vsn.select(e.transpose(0, 1).reshape(5, -1)), -1)
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, dtype=torch.float64))
    mixed = sum(weights[:, v, None] * vsn.per_var(e)[v] for v in range(16))
    torch.testing.assert_close(vsn(x), vsn.out(mixed), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_streaming_step_equals_the_full_window(dtype, tol):
    model = _model(TINY, dtype)
    x = torch.randn(2, 30, 16, dtype=dtype)  # longer than the attention window: the ring buffer wraps
    with torch.no_grad():
        full = model(x)
        state = model.initial_state(2)
        steps = []
        for t in range(x.shape[1]):
            out, state = model.step(x[:, t], state)
            steps.append(out)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, rtol=0, atol=tol)


def test_overfits_one_batch():
    model = _model(TINY)
    x = torch.randn(4, 16, 16)
    y = torch.randn(4, 16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(200):
        loss = quantile_loss(model(x), y, TINY.quantiles)
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.1 * losses[0]


@pytest.mark.slow
def test_short_training_beats_unconditional_quantiles_on_a_later_slice():
    data = MarketData.from_bars(toy_bars(8000, phi=0.6, seed=2))
    train, held_out = data.split(0.75)
    task = build_task("tft", train, config=TINY, seed=0)
    Trainer(task).fit(250)
    assert task.target_fn is not None
    y_train = task.target_fn(train.returns)
    y = torch.from_numpy(task.target_fn(held_out.returns))
    with torch.no_grad():
        pred = task.model.eval()(torch.from_numpy(held_out.features)[None])[0]
    learned = float(quantile_loss(pred, y, TINY.quantiles))
    constant = torch.tensor(np.quantile(y_train, TINY.quantiles), dtype=torch.float32).expand_as(pred)
    trivial = float(quantile_loss(constant, y, TINY.quantiles))  # the best constant quantiles of the training data
    assert learned < 0.95 * trivial


def test_fast_streaming_step_equals_the_full_window():
    model = _model(TFTConfig(), seed=4)
    x = np.random.default_rng(0).standard_normal((90, 16)).astype(np.float32)  # past the 64-bar window
    with torch.no_grad():
        full = model(torch.from_numpy(x)[None])[0].numpy()
    server = fast_server(model)
    got = np.stack([server(row).copy() for row in x])
    np.testing.assert_allclose(got, full, atol=1e-5, rtol=0)
    server.reset()
    np.testing.assert_allclose(server(x[0]), full[0], atol=1e-5, rtol=0)
    eager = eager_server(model)
    np.testing.assert_allclose(np.stack([eager(row).numpy()[0] for row in x[:5]]), full[:5], atol=1e-5, rtol=0)

"""DQN: shapes, the Double-DQN loss against a per-sample loop, overfitting, learning, serving."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from perfgate_pipeline.env import MarketData, evaluate_policy, toy_bars
from perfgate_pipeline.models import build_task, fast_server
from perfgate_pipeline.models.dqn import DQNConfig, QNetwork, double_dqn_loss
from perfgate_pipeline.serve import OrtServer, eager_server
from perfgate_pipeline.train import Trainer

SMALL = DQNConfig(window=2, hidden=32)
torch.set_num_threads(1)  # tiny ops: a second OpenMP thread only adds wake-ups on a shared machine


def test_shapes():
    q = QNetwork(SMALL)(torch.zeros(5, SMALL.obs_dim))
    assert q.shape == (5, 3)
    assert SMALL.obs_dim == 2 * 16 + 1


def test_double_dqn_loss_matches_a_per_sample_loop():
    torch.manual_seed(0)
    online, target = QNetwork(SMALL), QNetwork(SMALL)
    B = 12
    obs, next_obs = torch.randn(B, SMALL.obs_dim), torch.randn(B, SMALL.obs_dim)
    action = torch.randint(0, 3, (B,))
    reward = torch.randn(B)
    done = (torch.rand(B) < 0.3).float()
    got = double_dqn_loss(online, target, obs, action, reward, next_obs, done, gamma=0.9, huber_delta=0.7)
    total = 0.0
    with torch.no_grad():
        for i in range(B):
            q = online(obs[i : i + 1])[0, action[i]]
            best = int(online(next_obs[i : i + 1])[0].argmax())  # chosen by the online network ...
            value = target(next_obs[i : i + 1])[0, best]  # ... valued by the target network
            y = reward[i] + (0.0 if done[i] else 0.9 * value)
            err = abs(float(q - y))
            total += 0.5 * err**2 / 0.7 if err < 0.7 else err - 0.35
    assert float(got.detach()) == pytest.approx(total / B, rel=1e-5)


def test_double_dqn_differs_from_plain_max_when_the_networks_disagree():
    torch.manual_seed(1)
    online, target = QNetwork(SMALL), QNetwork(SMALL)
    obs = torch.randn(64, SMALL.obs_dim)
    action, reward, done = torch.zeros(64, dtype=torch.long), torch.zeros(64), torch.zeros(64)
    double = double_dqn_loss(online, target, obs, action, reward, obs, done, gamma=0.9)
    with torch.no_grad():
        plain_y = 0.9 * target(obs).max(dim=1).values
    plain = F.smooth_l1_loss(online(obs)[:, 0], plain_y)
    assert float(double.detach()) != pytest.approx(float(plain.detach()))


def test_overfits_one_batch():
    torch.manual_seed(0)
    online, target = QNetwork(SMALL), QNetwork(SMALL)
    B = 32
    obs, next_obs = torch.randn(B, SMALL.obs_dim), torch.randn(B, SMALL.obs_dim)
    action, reward = torch.randint(0, 3, (B,)), torch.randn(B)
    done = torch.ones(B)  # terminal: the targets are the rewards, a fixed regression
    opt = torch.optim.Adam(online.parameters(), lr=1e-2)
    first = None
    for _ in range(300):
        loss = double_dqn_loss(online, target, obs, action, reward, next_obs, done, gamma=0.9)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 1e-3 * first


@pytest.mark.slow
def test_short_training_beats_trivial_policies_on_a_later_slice():
    data = MarketData.from_bars(toy_bars(6000, phi=0.5, seed=1))
    train, held_out = data.split(0.7)
    cfg = DQNConfig(
        window=2, hidden=32, buffer_size=5000, batch_size=64, eps_decay=800, gamma=0.5, lr=2e-3, target_every=100
    )
    task = build_task("dqn", train, config=cfg, seed=0)
    Trainer(task).fit(1200)
    model = task.model.eval()
    with torch.no_grad():
        learned = evaluate_policy(held_out, lambda o: int(model(torch.from_numpy(o)).argmax()), window=cfg.window)
    trivial = [evaluate_policy(held_out, lambda o, a=a: a, window=cfg.window) for a in (0, 1, 2)]  # short/flat/long
    assert learned > max(trivial) + 0.5  # basis points per bar


def test_fast_server_equals_the_torch_forward():
    torch.manual_seed(2)
    model = QNetwork(DQNConfig())
    server = fast_server(model)
    obs = np.random.default_rng(0).standard_normal((20, model.config.obs_dim)).astype(np.float32)
    with torch.no_grad():
        ref = model(torch.from_numpy(obs)).numpy()
    got = np.stack([server(o).copy() for o in obs])
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)
    eager = eager_server(model)
    np.testing.assert_allclose(eager(obs[3]).numpy()[0], ref[3], atol=1e-6, rtol=0)


def test_onnx_runtime_server_equals_the_torch_forward():
    pytest.importorskip("onnxruntime")
    torch.manual_seed(3)
    model = QNetwork(SMALL)
    server = OrtServer(model)
    obs = np.random.default_rng(1).standard_normal((5, SMALL.obs_dim)).astype(np.float32)
    with torch.no_grad():
        ref = model(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(np.stack([server(o).copy() for o in obs]), ref, atol=1e-5, rtol=0)

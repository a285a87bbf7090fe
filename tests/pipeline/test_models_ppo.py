"""PPO: shapes, GAE and the clipped loss against explicit loops, overfitting, learning, serving."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from perfgate_pipeline.env import MarketData, evaluate_policy, toy_bars
from perfgate_pipeline.models import build_task, fast_server
from perfgate_pipeline.models.ppo import ActorCritic, PPOConfig, gae, ppo_loss
from perfgate_pipeline.serve import OrtServer, eager_server
from perfgate_pipeline.train import Trainer

SMALL = PPOConfig(window=2, hidden=32)
torch.set_num_threads(1)  # tiny ops: a second OpenMP thread only adds wake-ups on a shared machine


def test_shapes():
    logits, value = ActorCritic(SMALL)(torch.zeros(7, SMALL.obs_dim))
    assert logits.shape == (7, 3) and value.shape == (7,)


def test_gae_matches_the_discounted_sum_of_td_errors():
    rng = np.random.default_rng(0)
    T, N, gamma, lam = 9, 3, 0.9, 0.8
    rewards = rng.standard_normal((T, N)).astype(np.float32)
    values = rng.standard_normal((T, N)).astype(np.float32)
    dones = rng.random((T, N)) < 0.25
    last = rng.standard_normal(N).astype(np.float32)
    adv, ret = gae(rewards, values, dones, last, gamma=gamma, lam=lam)
    for n in range(N):
        for t in range(T):
            # A_t = Σ_l (γλ)^l δ_{t+l}, stopping after the step that ends the episode
            total, discount = 0.0, 1.0
            for k in range(t, T):
                nxt = last[n] if k == T - 1 else values[k + 1, n]
                alive = 0.0 if dones[k, n] else 1.0
                total += discount * (rewards[k, n] + gamma * nxt * alive - values[k, n])
                if dones[k, n]:
                    break
                discount *= gamma * lam
            assert adv[t, n] == pytest.approx(total, rel=1e-4, abs=1e-5)
    np.testing.assert_allclose(ret, adv + values, rtol=1e-6)


def test_ppo_loss_matches_the_per_sample_formula():
    torch.manual_seed(0)
    model = ActorCritic(SMALL)
    B = 16
    obs = torch.randn(B, SMALL.obs_dim)
    action = torch.randint(0, 3, (B,))
    old_logp = torch.log(torch.rand(B) * 0.8 + 0.1)  # ratios far from 1: both sides of the clip
    advantage, returns = torch.randn(B), torch.randn(B)
    loss, parts = ppo_loss(model, obs, action, old_logp, advantage, returns, clip=0.2, vf_coef=0.5, ent_coef=0.01)
    with torch.no_grad():
        logits, value = model(obs)
        adv = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        surrogate, entropy = 0.0, 0.0
        for i in range(B):
            p = torch.softmax(logits[i], -1)
            ratio = float(p[action[i]]) / math.exp(float(old_logp[i]))
            a = float(adv[i])
            surrogate += min(ratio * a, min(max(ratio, 0.8), 1.2) * a)
            entropy += -float((p * p.log()).sum())
        value_loss = float(((value - returns) ** 2).mean())
    expected = -surrogate / B + 0.5 * value_loss - 0.01 * entropy / B
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert parts["value"] == pytest.approx(value_loss, rel=1e-5)


def test_overfits_one_batch():
    torch.manual_seed(0)
    model = ActorCritic(SMALL)
    B = 64
    obs = torch.randn(B, SMALL.obs_dim)
    action = torch.randint(0, 3, (B,))
    with torch.no_grad():
        old_logp = torch.log_softmax(model(obs)[0], -1).gather(1, action[:, None]).squeeze(1)
    advantage, returns = torch.randn(B), torch.randn(B)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    history = []
    for _ in range(300):
        loss, parts = ppo_loss(model, obs, action, old_logp, advantage, returns, clip=0.2, vf_coef=0.5, ent_coef=0.0)
        history.append(parts)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert history[-1]["value"] < 0.02 * history[0]["value"]
    # the surrogate can only gain until every ratio sits at its clip bound: −mean(|A|)·0.2 below the start
    assert history[-1]["policy"] < history[0]["policy"] - 0.1


@pytest.mark.slow
def test_short_training_beats_trivial_policies_on_a_later_slice():
    data = MarketData.from_bars(toy_bars(6000, phi=0.5, seed=1))
    train, held_out = data.split(0.7)
    cfg = PPOConfig(window=2, hidden=32, n_envs=16, n_steps=128, minibatch=128, epochs=4, lr=3e-3, gamma=0.5)
    task = build_task("ppo", train, config=cfg, seed=0)
    Trainer(task).fit(640)  # 10 rollouts
    model = task.model.eval()
    with torch.no_grad():
        learned = evaluate_policy(held_out, lambda o: int(model(torch.from_numpy(o))[0].argmax()), window=cfg.window)
    trivial = [evaluate_policy(held_out, lambda o, a=a: a, window=cfg.window) for a in (0, 1, 2)]
    assert learned > max(trivial) + 0.5  # basis points per bar


def test_fast_server_equals_the_torch_forward():
    torch.manual_seed(2)
    model = ActorCritic(PPOConfig())
    server = fast_server(model)
    obs = np.random.default_rng(0).standard_normal((20, model.config.obs_dim)).astype(np.float32)
    with torch.no_grad():
        logits, value = model(torch.from_numpy(obs))
    ref = torch.cat([logits, value[:, None]], dim=1).numpy()  # the server's layout: logits, then value
    got = np.stack([server(o).copy() for o in obs])
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)
    np.testing.assert_allclose(eager_server(model)(obs[0]).numpy()[0], ref[0, :3], atol=1e-6, rtol=0)


def test_onnx_runtime_server_equals_the_torch_forward():
    pytest.importorskip("onnxruntime")
    torch.manual_seed(3)
    model = ActorCritic(SMALL)
    server = OrtServer(model)
    obs = np.random.default_rng(1).standard_normal((5, SMALL.obs_dim)).astype(np.float32)
    with torch.no_grad():
        logits, value = model(torch.from_numpy(obs))
    ref = torch.cat([logits, value[:, None]], dim=1).numpy()
    np.testing.assert_allclose(np.stack([server(o).copy() for o in obs]), ref, atol=1e-5, rtol=0)

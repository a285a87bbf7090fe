"""The trading environment, the replay buffer and the model-agnostic trainer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from perfgate_pipeline.env import BPS, MarketData, TradingEnv, evaluate_policy, toy_bars
from perfgate_pipeline.features import N_FEATURES
from perfgate_pipeline.models import build_task, default_config
from perfgate_pipeline.models.dqn import DQNConfig, ReplayBuffer
from perfgate_pipeline.models.ppo import PPOConfig, PPOTask
from perfgate_pipeline.train import SequenceTask, Trainer, return_classes


def _data(n: int = 400, seed: int = 0) -> MarketData:
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, N_FEATURES)).astype(np.float32)
    returns = (rng.standard_normal(n) * 1e-3).astype(np.float32)
    return MarketData(features=features, returns=returns)


def test_market_data_from_bars_aligns_next_returns():
    bars = toy_bars(300, seed=3)
    data = MarketData.from_bars(bars)
    close = bars["close"]
    warmup = len(close) - len(data) - 1  # one row dropped at the end: no next return
    assert warmup == 33
    assert data.features.dtype == np.float32 and not np.isnan(data.features).any()
    t = 10
    assert data.returns[t] == pytest.approx(np.log(close[warmup + t + 1] / close[warmup + t]), rel=1e-5)
    train, test = data.split(0.75)
    assert len(train) + len(test) == len(data)
    assert np.array_equal(test.returns[:3], data.returns[len(train) : len(train) + 3])


def test_market_data_validates_shapes():
    with pytest.raises(ValueError, match="features"):
        MarketData(features=np.zeros((5, 3), np.float32), returns=np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="returns"):
        MarketData(features=np.zeros((5, N_FEATURES), np.float32), returns=np.zeros(4, np.float32))


def test_env_observation_reward_and_reset_by_hand():
    data = _data()
    env = TradingEnv(data, window=3, n_envs=2, episode_len=4, cost_bps=0.5, seed=1)
    obs = env.reset()
    t0 = env.t.copy()
    assert obs.shape == (2, 3 * N_FEATURES + 1)
    # oldest bar first, current position last
    np.testing.assert_array_equal(obs[0, :-1], data.features[t0[0] - 2 : t0[0] + 1].reshape(-1))
    assert obs[0, -1] == 0.0
    obs, reward, done = env.step(np.array([2, 0]))  # long, short
    r = data.returns[t0] * BPS
    np.testing.assert_allclose(reward, [r[0] - 0.5, -r[1] - 0.5], rtol=1e-5)
    assert obs[:, -1].tolist() == [1.0, -1.0] and not done.any()
    _, reward, _ = env.step(np.array([2, 1]))  # hold long: no cost; go flat: cost 0.5
    r = data.returns[t0 + 1] * BPS
    np.testing.assert_allclose(reward, [r[0], -0.5], rtol=1e-5)
    for _ in range(2):
        obs, _, done = env.step(np.array([1, 1]))
    assert done.all()  # episode_len steps: a new episode has started
    assert obs[:, -1].tolist() == [0.0, 0.0]
    assert (env.steps == 0).all()


def test_env_rejects_too_little_data():
    with pytest.raises(ValueError, match="too few"):
        TradingEnv(_data(50), window=8, episode_len=64)


def test_evaluate_policy_of_fixed_positions():
    data = _data(200)
    r = data.returns.astype(np.float64) * BPS
    window = 4
    long = evaluate_policy(data, lambda obs: 2, window=window, cost_bps=1.0)
    # one entry cost, then the return of every bar from window - 1 on
    expected = (r[window - 1 :].sum() - 1.0) / (len(data) - window + 1)
    assert long == pytest.approx(expected, rel=1e-6)
    assert evaluate_policy(data, lambda obs: 1, window=window) == 0.0


def test_replay_buffer_is_a_ring():
    buf = ReplayBuffer.empty(5, 2)
    for k in range(3):
        obs = np.full((2, 2), k, np.float32)
        buf.add(obs, np.array([k, k]), np.array([k, k], np.float32), obs + 1, np.zeros(2, np.float32))
    assert buf.size == 5
    assert buf.cursor == 1  # six written into five slots: the first was overwritten
    assert sorted(buf.action.tolist()) == [0, 1, 1, 2, 2]
    obs, action, _, next_obs, _ = buf.sample(np.random.default_rng(0), 50)
    np.testing.assert_array_equal(obs[:, 0], action.astype(np.float32))
    np.testing.assert_array_equal(next_obs, obs + 1)


def test_return_classes_split_at_edges():
    r = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    assert return_classes(r, (-0.5, 0.5)).tolist() == [0, 0, 1, 2, 2]


def test_trainer_step_updates_and_counts():
    torch.manual_seed(0)
    model = torch.nn.Linear(N_FEATURES, 1)
    data = _data(300)
    targets = data.features @ np.arange(N_FEATURES, dtype=np.float32) / 10  # a linear function of the input

    def mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mean((out[..., 0] - y) ** 2)

    task = SequenceTask(model, data.features, targets, mse, seq_len=16, batch_size=8, lr=0.05)
    trainer = Trainer(task)
    losses = trainer.fit(300)
    assert trainer.steps == 300
    assert np.mean(losses[-20:]) < 0.01 * np.mean(losses[:5])


def test_sequence_batches_align_targets_with_rows():
    data = _data(100)
    targets = np.arange(100, dtype=np.float32)
    task = SequenceTask(
        torch.nn.Linear(16, 1), data.features, targets, lambda o, y: o.sum(), seq_len=10, batch_size=4, lr=0.1
    )
    x, y = task.batch()
    assert x.shape == (4, 10, N_FEATURES) and y.shape == (4, 10)
    start = int(y[0, 0])
    np.testing.assert_array_equal(x[0].numpy(), data.features[start : start + 10])
    assert y[0].tolist() == list(range(start, start + 10))


def test_ppo_task_uses_every_minibatch_of_a_rollout_then_collects_again():
    cfg = PPOConfig(window=2, hidden=8, n_envs=4, n_steps=16, minibatch=16, epochs=2, episode_len=8)
    task = build_task("ppo", _data(), config=cfg)
    assert isinstance(task, PPOTask)
    trainer = Trainer(task)
    per_rollout = cfg.epochs * cfg.n_envs * cfg.n_steps // cfg.minibatch  # 8
    trainer.fit(per_rollout)
    assert task.rollouts == 1
    trainer.step()
    assert task.rollouts == 2
    assert np.isfinite(task.value_buf).all() and set(np.unique(task.action_buf)) <= {0, 1, 2}


def test_dqn_task_fills_its_buffer_and_copies_the_target():
    cfg = DQNConfig(window=2, hidden=8, buffer_size=64, batch_size=8, n_envs=4, target_every=3, episode_len=8)
    task = build_task("dqn", _data(), config=cfg)
    assert task.buffer.size == 64
    trainer = Trainer(task)
    trainer.fit(2)
    differs = any(not torch.equal(a, b) for a, b in zip(task.model.parameters(), task.target.parameters(), strict=True))
    assert differs  # trained twice, not copied yet
    trainer.step()
    for a, b in zip(task.model.parameters(), task.target.parameters(), strict=True):
        assert torch.equal(a, b)
    assert task.epsilon() < cfg.eps_start


def test_build_task_rejects_unknown_models():
    with pytest.raises(ValueError, match="unknown model"):
        build_task("gpt", _data())
    with pytest.raises(ValueError, match="unknown model"):
        default_config("gpt")


def _rollout_bytes(task: PPOTask) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """Everything collect() makes or moves, as dtype, shape and bytes."""
    env = task.env
    arrays = {name: getattr(task, name) for name in PPOTask._SAVED}
    arrays.update({f"flat_{k}": v.numpy() for k, v in task._flat.items()})
    arrays.update(queue=np.stack(task._queue), env_t=env.t, env_steps=env.steps, env_position=env.position)
    arrays.update(env_obs=env.obs, generator=task.generator.get_state().numpy())
    arrays.update(rng=task.rng.integers(0, 2**62, 8), env_rng=env.rng.integers(0, 2**62, 8))  # draws: same state
    return {k: (str(a.dtype), a.shape, np.ascontiguousarray(a).tobytes()) for k, a in arrays.items()}


def test_a_loaded_ppo_rollout_is_byte_for_byte_the_one_the_task_collects(tmp_path):
    """--measure counts collects PPO's first rollout natively and every counted process loads it:
    it must be the rollout that process would have collected (same random seed, same weights)."""
    cfg = PPOConfig(window=2, hidden=8, n_envs=4, n_steps=16, minibatch=16, epochs=2, episode_len=8)
    collected = build_task("ppo", _data(), config=cfg, seed=3)
    collected.prepare()
    collected.save_prepared(tmp_path / "rollout")
    loaded = build_task("ppo", _data(), config=cfg, seed=3)
    loaded.load_prepared(tmp_path / "rollout")
    assert loaded.rollouts == collected.rollouts == 1
    assert all(getattr(loaded, name).flags.writeable for name in PPOTask._SAVED)
    collected_state, loaded_state = _rollout_bytes(collected), _rollout_bytes(loaded)
    assert collected_state.keys() == loaded_state.keys()
    for name in collected_state:
        assert loaded_state[name] == collected_state[name], name
    # every minibatch of the rollout, then the next rollout: the same losses to the bit, the same buffers
    fresh = build_task("ppo", _data(), config=cfg, seed=3)
    per_rollout = cfg.epochs * cfg.n_envs * cfg.n_steps // cfg.minibatch
    steps = per_rollout + 3
    loaded = build_task("ppo", _data(), config=cfg, seed=3)
    loaded.load_prepared(tmp_path / "rollout")
    assert Trainer(loaded).fit(steps) == Trainer(fresh).fit(steps)
    assert loaded.rollouts == fresh.rollouts == 2
    assert loaded.obs_buf.tobytes() == fresh.obs_buf.tobytes()
    assert loaded.logp_buf.tobytes() == fresh.logp_buf.tobytes()


def test_a_ppo_rollout_of_other_weights_or_another_config_is_refused(tmp_path):
    cfg = PPOConfig(window=2, hidden=8, n_envs=4, n_steps=16, minibatch=16, epochs=2, episode_len=8)
    task = build_task("ppo", _data(), config=cfg, seed=3)
    task.prepare()
    task.save_prepared(tmp_path / "rollout")
    with pytest.raises(ValueError, match="other weights"):
        build_task("ppo", _data(), config=cfg, seed=4).load_prepared(tmp_path / "rollout")
    with pytest.raises(ValueError, match="another config"):
        other = PPOConfig(window=2, hidden=8, n_envs=4, n_steps=16, minibatch=16, epochs=3, episode_len=8)
        build_task("ppo", _data(), config=other, seed=3).load_prepared(tmp_path / "rollout")


def test_a_loaded_ppo_rollout_brings_the_weights_it_was_collected_with(tmp_path):
    """Under valgrind the orthogonal initialisation rounds differently in the last bits than natively
    (another BLAS code path): the weights are accepted, and replaced by the rollout's own."""
    cfg = PPOConfig(window=2, hidden=8, n_envs=4, n_steps=16, minibatch=16, epochs=2, episode_len=8)
    collected = build_task("ppo", _data(), config=cfg, seed=3)
    collected.prepare()
    collected.save_prepared(tmp_path / "rollout")
    loaded = build_task("ppo", _data(), config=cfg, seed=3)
    with torch.no_grad():
        weight = loaded.model.pi.weight
        weight.copy_(torch.nextafter(weight, torch.full_like(weight, 1.0)))  # one unit in the last place off
    assert not torch.equal(loaded.model.pi.weight, collected.model.pi.weight)
    loaded.load_prepared(tmp_path / "rollout")
    for name, tensor in collected.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor), name

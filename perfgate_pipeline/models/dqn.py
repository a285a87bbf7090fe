"""DQN: a Q-network over a window of the 16 features, trained with Double-DQN targets.

The network maps one observation of :class:`~perfgate_pipeline.env.TradingEnv` (the
last ``window`` bars' features flattened, then the current position) to the value of
each action (short, flat, long). :class:`DQNTask` trains it with
:class:`perfgate_pipeline.train.Trainer`: replay, ε-greedy collection and the target
network's copies; the loss is :func:`double_dqn_loss`. It is served by the fused MLP
kernel (:class:`perfgate_pipeline.serve.MLPServer`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline.env import MarketData, TradingEnv
from perfgate_pipeline.models.spec import ModelSpec
from perfgate_pipeline.serve import MLPServer

__all__ = ["SPEC", "DQNConfig", "DQNTask", "QNetwork", "ReplayBuffer", "double_dqn_loss"]


@dataclass
class DQNConfig:
    window: int = 8  # bars of features per observation
    n_features: int = 16  # features per bar
    hidden: int = 128  # width of both hidden layers
    n_actions: int = 3  # short, flat, long
    gamma: float = 0.97  # discount per bar
    huber_delta: float = 1.0  # the Huber loss is quadratic below this TD error
    lr: float = 5e-4  # Adam learning rate
    batch_size: int = 128  # transitions per update
    buffer_size: int = 96_000  # replay capacity in transitions; most of the training memory
    n_envs: int = 16  # environment steps collected per update
    target_every: int = 250  # updates between copies of the online network to the target
    eps_start: float = 1.0  # ε-greedy exploration, decayed linearly ...
    eps_end: float = 0.05  # ... to this ...
    eps_decay: int = 4_000  # ... over this many updates
    episode_len: int = 256  # bars per episode
    cost_bps: float = 0.5  # trading cost per unit of position change, basis points

    @property
    def obs_dim(self) -> int:
        return self.window * self.n_features + 1


class QNetwork(nn.Module):
    """obs (B, window*16 + 1) -> Q values (B, n_actions): two ReLU layers."""

    def __init__(self, config: DQNConfig) -> None:
        super().__init__()
        self.config = config
        self.fc1 = nn.Linear(config.obs_dim, config.hidden)
        self.fc2 = nn.Linear(config.hidden, config.hidden)
        self.head = nn.Linear(config.hidden, config.n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(obs))  # (B, hidden)
        h = F.relu(self.fc2(h))
        return self.head(h)  # (B, n_actions)


def double_dqn_loss(
    online: QNetwork,
    target: QNetwork,
    obs: torch.Tensor,
    action: torch.Tensor,
    reward: torch.Tensor,
    next_obs: torch.Tensor,
    done: torch.Tensor,
    *,
    gamma: float,
    huber_delta: float = 1.0,
) -> torch.Tensor:
    """Huber loss of Q(s, a) against r + γ (1 − done) Q_target(s', argmax_a' Q_online(s', a')).

    The online network picks the next action and the target network values it (van Hasselt
    et al., 2016), which removes the max operator's upward bias of plain DQN.
    """
    q = online(obs).gather(1, action[:, None]).squeeze(1)  # (B,)
    with torch.no_grad():
        next_action = online(next_obs).argmax(dim=1, keepdim=True)  # (B, 1)
        next_q = target(next_obs).gather(1, next_action).squeeze(1)
        y = reward + gamma * (1.0 - done) * next_q
    return F.smooth_l1_loss(q, y, beta=huber_delta)


@dataclass(slots=True)
class ReplayBuffer:
    """A ring of the last ``capacity`` transitions, as preallocated numpy arrays."""

    obs: np.ndarray  # (capacity, obs_dim) float32
    next_obs: np.ndarray
    action: np.ndarray  # (capacity,) int64
    reward: np.ndarray  # float32
    done: np.ndarray  # float32
    size: int = 0
    cursor: int = 0

    @classmethod
    def empty(cls, capacity: int, obs_dim: int) -> ReplayBuffer:
        return cls(
            obs=np.zeros((capacity, obs_dim), dtype=np.float32),
            next_obs=np.zeros((capacity, obs_dim), dtype=np.float32),
            action=np.zeros(capacity, dtype=np.int64),
            reward=np.zeros(capacity, dtype=np.float32),
            done=np.zeros(capacity, dtype=np.float32),
        )

    def add(
        self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray, done: np.ndarray
    ) -> None:
        n = len(action)
        idx = (self.cursor + np.arange(n)) % len(self.action)
        self.obs[idx], self.next_obs[idx], self.action[idx] = obs, next_obs, action
        self.reward[idx], self.done[idx] = reward, done
        self.cursor = int(idx[-1] + 1) % len(self.action)
        self.size = min(self.size + n, len(self.action))

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
        idx = rng.integers(0, self.size, n)
        return self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.done[idx]


class DQNTask:
    """Double DQN on the trading environment; one loss = one env step of every episode + one minibatch.

    The replay buffer is filled to capacity with uniformly random actions before the first
    update (so memory is at its working size from the start, and early updates do not
    overfit a few hundred transitions).
    """

    def __init__(self, config: DQNConfig, data: MarketData, *, device: str = "cpu", seed: int = 0) -> None:
        self.config = cfg = config
        torch.manual_seed(seed)
        self.model = QNetwork(cfg).to(device)
        self.target = copy.deepcopy(self.model).requires_grad_(False)
        self.lr, self.batch_size = cfg.lr, cfg.batch_size
        self.device = device
        self.rng = np.random.default_rng(seed)
        self.env = TradingEnv(
            data,
            window=cfg.window,
            n_envs=cfg.n_envs,
            episode_len=cfg.episode_len,
            cost_bps=cfg.cost_bps,
            seed=seed,
        )
        self.buffer = ReplayBuffer.empty(cfg.buffer_size, cfg.obs_dim)
        self.obs = self.env.reset()
        self.updates = 0
        while self.buffer.size < cfg.buffer_size:
            self._collect(epsilon=1.0)

    def epsilon(self) -> float:
        cfg = self.config
        frac = min(self.updates / max(cfg.eps_decay, 1), 1.0)
        return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)

    @torch.no_grad()
    def act(self, obs: np.ndarray, epsilon: float) -> np.ndarray:
        """ε-greedy actions for a batch of observations."""
        greedy = self.model(torch.from_numpy(obs).to(self.device)).argmax(dim=1).cpu().numpy()
        explore = self.rng.random(len(obs)) < epsilon
        return np.where(explore, self.rng.integers(0, self.config.n_actions, len(obs)), greedy)

    def _collect(self, epsilon: float) -> None:
        action = self.act(self.obs, epsilon) if epsilon < 1.0 else self.rng.integers(0, 3, self.env.n_envs)
        next_obs, reward, done = self.env.step(action)
        self.buffer.add(self.obs, action, reward, next_obs, done.astype(np.float32))
        self.obs = next_obs

    def loss(self) -> torch.Tensor:
        self._collect(self.epsilon())
        obs, action, reward, next_obs, done = (
            torch.from_numpy(a).to(self.device) for a in self.buffer.sample(self.rng, self.batch_size)
        )
        cfg = self.config
        return double_dqn_loss(
            self.model, self.target, obs, action, reward, next_obs, done, gamma=cfg.gamma, huber_delta=cfg.huber_delta
        )

    def after_step(self) -> None:
        self.updates += 1
        if self.updates % self.config.target_every == 0:
            self.target.load_state_dict(self.model.state_dict())


def _task(config: DQNConfig, data: MarketData, *, device: str = "cpu", seed: int = 0) -> DQNTask:
    return DQNTask(config, data, device=device, seed=seed)


def _server(model: QNetwork) -> MLPServer:
    return MLPServer(model.fc1, model.fc2, model.head.weight, model.head.bias, activation="relu")


# a small network: one step is bound by the per-call overhead of torch eager (many small kernels)
SPEC = ModelSpec(name="dqn", config=DQNConfig, model=QNetwork, task=_task, server=_server, kind="interpreter")

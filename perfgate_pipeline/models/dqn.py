"""DQN: a Q-network over a window of the 16 features, trained with Double-DQN targets.

The network maps one observation of :class:`~perfgate_pipeline.env.TradingEnv` (the
last ``window`` bars' features flattened, then the current position) to the value of
each action (short, flat, long). Replay, ε-greedy collection and the target network's
copies are the trainer's (:class:`perfgate_pipeline.train.DQNTask`); the loss is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline.models import ModelSpec

__all__ = ["SPEC", "DQNConfig", "QNetwork", "double_dqn_loss"]


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


def _task(config: DQNConfig, data: Any, *, device: str = "cpu", seed: int = 0) -> Any:
    from perfgate_pipeline.train import DQNTask

    return DQNTask(config, data, device=device, seed=seed)


def _server(model: QNetwork) -> Any:
    from perfgate_pipeline.serve import MLPServer

    return MLPServer(model)


# a small network: one step is bound by the per-call overhead of torch eager (many small kernels)
SPEC = ModelSpec(name="dqn", config=DQNConfig, model=QNetwork, task=_task, server=_server, kind="interpreter")

"""PPO: an actor-critic over a window of the 16 features, with GAE and the clipped objective.

One tanh trunk feeds two heads: the policy's logits over (short, flat, long) and the
state value. Rollouts and minibatch epochs are the trainer's
(:class:`perfgate_pipeline.train.PPOTask`); the advantage estimate and the loss are here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline.models import ModelSpec

__all__ = ["SPEC", "ActorCritic", "PPOConfig", "gae", "ppo_loss"]


@dataclass
class PPOConfig:
    window: int = 8  # bars of features per observation
    n_features: int = 16  # features per bar
    hidden: int = 128  # width of both trunk layers
    n_actions: int = 3  # short, flat, long
    gamma: float = 0.97  # discount per bar
    lam: float = 0.95  # GAE λ: bias/variance trade-off of the advantage
    clip: float = 0.2  # the policy ratio is clipped to [1 − clip, 1 + clip]
    vf_coef: float = 0.5  # weight of the value loss
    ent_coef: float = 0.01  # weight of the entropy bonus
    lr: float = 3e-4  # Adam learning rate
    n_envs: int = 128  # episodes collected side by side
    n_steps: int = 1024  # steps per episode per rollout; rollout = n_envs * n_steps transitions
    minibatch: int = 256  # transitions per update
    epochs: int = 4  # passes over each rollout
    episode_len: int = 256  # bars per episode
    cost_bps: float = 0.5  # trading cost per unit of position change, basis points

    @property
    def obs_dim(self) -> int:
        return self.window * self.n_features + 1


class ActorCritic(nn.Module):
    """obs (B, window*16 + 1) -> (logits (B, n_actions), value (B,))."""

    def __init__(self, config: PPOConfig) -> None:
        super().__init__()
        self.config = config
        self.fc1 = nn.Linear(config.obs_dim, config.hidden)
        self.fc2 = nn.Linear(config.hidden, config.hidden)
        self.pi = nn.Linear(config.hidden, config.n_actions)
        self.v = nn.Linear(config.hidden, 1)
        # small policy weights start the policy near uniform, as in the PPO reference code
        nn.init.orthogonal_(self.pi.weight, gain=0.01)
        nn.init.zeros_(self.pi.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.fc1(obs))  # (B, hidden)
        h = torch.tanh(self.fc2(h))
        return self.pi(h), self.v(h).squeeze(-1)


def gae(
    rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_value: np.ndarray, *, gamma: float, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates (Schulman et al., 2016) and the value targets.

    Arrays are (T, N): step t of env n; ``dones[t]`` ends the episode after step t, so no
    value flows back across it; ``last_value`` (N,) is V of the state after the last step.
    Returns (advantages, returns = advantages + values), float32.
    """
    T = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float32)
    running = np.zeros(rewards.shape[1], dtype=np.float32)
    next_value = last_value.astype(np.float32)
    for t in range(T - 1, -1, -1):
        alive = 1.0 - dones[t].astype(np.float32)
        delta = rewards[t] + gamma * next_value * alive - values[t]
        running = delta + gamma * lam * alive * running
        adv[t] = running
        next_value = values[t]
    return adv, (adv + values).astype(np.float32)


def ppo_loss(
    model: ActorCritic,
    obs: torch.Tensor,
    action: torch.Tensor,
    old_logp: torch.Tensor,
    advantage: torch.Tensor,
    returns: torch.Tensor,
    *,
    clip: float,
    vf_coef: float,
    ent_coef: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate objective (Schulman et al., 2017) as a loss, with value and entropy terms.

    Advantages are standardised per minibatch. Returns (loss, detached parts for logging).
    """
    logits, value = model(obs)
    logp_all = F.log_softmax(logits, dim=-1)  # (B, n_actions)
    logp = logp_all.gather(1, action[:, None]).squeeze(1)
    ratio = torch.exp(logp - old_logp)
    adv = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv).mean()
    value_loss = F.mse_loss(value, returns)
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    parts = {
        "policy": float(policy_loss.detach()),
        "value": float(value_loss.detach()),
        "entropy": float(entropy.detach()),
    }
    return loss, parts


def _task(config: PPOConfig, data: Any, *, device: str = "cpu", seed: int = 0) -> Any:
    from perfgate_pipeline.train import PPOTask

    return PPOTask(config, data, device=device, seed=seed)


def _server(model: ActorCritic) -> Any:
    from perfgate_pipeline.serve import MLPServer

    return MLPServer(model)


# one training step is one minibatch; like DQN's, bound by torch eager's per-call overhead
SPEC = ModelSpec(
    name="ppo",
    config=PPOConfig,
    model=ActorCritic,
    task=_task,
    server=_server,
    kind="interpreter",
    items_per_call=lambda config: int(config.minibatch),
    # the first rollout (131,072 transitions: about 1 s natively, 4 minutes under valgrind) is
    # collected once natively for --measure counts; the counted calls are minibatch updates
    prepares=True,
)

"""PPO: an actor-critic over a window of the 16 features, with GAE and the clipped objective.

One tanh trunk feeds two heads: the policy's logits over (short, flat, long) and the
state value. :class:`PPOTask` trains it with :class:`perfgate_pipeline.train.Trainer`:
rollouts, then minibatch epochs; the advantage estimate is :func:`gae` and the loss
:func:`ppo_loss`. It is served by the fused MLP kernel
(:class:`perfgate_pipeline.serve.MLPServer`), its two heads packed as one layer: the
logits, then the value.

The first rollout can be saved and loaded (:meth:`PPOTask.save_rollout`,
:meth:`PPOTask.load_rollout`): a counted benchmark collects it once natively instead of in
every process under valgrind.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline.env import MarketData, TradingEnv
from perfgate_pipeline.models.spec import ModelSpec
from perfgate_pipeline.serve import MLPServer

__all__ = ["SPEC", "ActorCritic", "PPOConfig", "PPOTask", "gae", "ppo_loss"]


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


class PPOTask:
    """PPO on the trading environment; one loss = one minibatch of the current rollout."""

    def __init__(self, config: PPOConfig, data: MarketData, *, device: str = "cpu", seed: int = 0) -> None:
        self.config = cfg = config
        torch.manual_seed(seed)
        self.model = ActorCritic(cfg).to(device)
        self.lr, self.batch_size = cfg.lr, cfg.minibatch
        self.device = device
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.env = TradingEnv(
            data, window=cfg.window, n_envs=cfg.n_envs, episode_len=cfg.episode_len, cost_bps=cfg.cost_bps, seed=seed
        )
        T, N = cfg.n_steps, cfg.n_envs
        self.obs_buf = np.zeros((T, N, cfg.obs_dim), dtype=np.float32)
        self.action_buf = np.zeros((T, N), dtype=np.int64)
        self.logp_buf = np.zeros((T, N), dtype=np.float32)
        self.value_buf = np.zeros((T, N), dtype=np.float32)
        self.reward_buf = np.zeros((T, N), dtype=np.float32)
        self.done_buf = np.zeros((T, N), dtype=bool)
        self.obs = self.env.reset()
        self.rollouts = 0
        self._queue: list[np.ndarray] = []
        self._flat: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def collect(self) -> None:
        """Run the current policy for ``n_steps`` in every episode; compute advantages; queue the minibatches."""
        cfg = self.config
        for t in range(cfg.n_steps):
            logits, value = self.model(torch.from_numpy(self.obs).to(self.device))
            logp_all = F.log_softmax(logits, dim=-1)
            action = torch.multinomial(logp_all.exp().cpu(), 1, generator=self.generator).squeeze(1)
            self.obs_buf[t] = self.obs
            self.action_buf[t] = action.numpy()
            self.logp_buf[t] = logp_all.cpu().gather(1, action[:, None]).squeeze(1).numpy()
            self.value_buf[t] = value.cpu().numpy()
            self.obs, self.reward_buf[t], self.done_buf[t] = self.env.step(self.action_buf[t])
        last_value = self.model(torch.from_numpy(self.obs).to(self.device))[1].cpu().numpy()
        adv, ret = gae(self.reward_buf, self.value_buf, self.done_buf, last_value, gamma=cfg.gamma, lam=cfg.lam)
        self._flatten(adv, ret)
        n = cfg.n_steps * cfg.n_envs
        per_epoch = n // cfg.minibatch
        self._queue = [
            chunk
            for _ in range(cfg.epochs)
            for chunk in np.split(self.rng.permutation(n)[: per_epoch * cfg.minibatch], per_epoch)
        ]
        self._queue.reverse()  # pop() from the end takes them in order
        self.rollouts += 1

    def _flatten(self, adv: np.ndarray, ret: np.ndarray) -> None:
        cfg = self.config
        parts = {
            "obs": self.obs_buf.reshape(-1, cfg.obs_dim),
            "action": self.action_buf.reshape(-1),
            "logp": self.logp_buf.reshape(-1),
            "adv": adv.reshape(-1),
            "ret": ret.reshape(-1),
        }
        self._flat = {k: torch.from_numpy(v).to(self.device) for k, v in parts.items()}

    def prepare(self) -> None:
        """Collect the first rollout now, unless one is queued (the first :meth:`loss` would)."""
        if not self._queue:
            self.collect()

    _SAVED = ("obs_buf", "action_buf", "logp_buf", "value_buf", "reward_buf", "done_buf", "obs")

    def save_rollout(self, path: Path) -> None:
        """Write the current rollout to the new folder ``path``: everything :meth:`collect` made or
        moved (buffers, advantages, the minibatch queue, the environments' and the random
        generators' states), and the config and the weights it was collected with."""
        if not self._flat:
            raise ValueError("no rollout to save: collect() first")
        path.mkdir(parents=True)
        env = self.env
        queue = np.stack(self._queue) if self._queue else np.zeros((0, self.config.minibatch), dtype=np.int64)
        arrays = {name: getattr(self, name) for name in self._SAVED}
        arrays.update(
            adv=self._flat["adv"].cpu().numpy(),
            ret=self._flat["ret"].cpu().numpy(),
            queue=queue,
            env_t=env.t,
            env_steps=env.steps,
            env_position=env.position,
            env_obs=env.obs,
            generator=self.generator.get_state().numpy(),
        )
        np.savez(path / "rollout.npz", **arrays)
        weights = {k: v.detach().cpu().numpy() for k, v in self.model.state_dict().items()}
        np.savez(path / "weights.npz", **weights)
        state = {
            "config": asdict(self.config),
            "rollouts": self.rollouts,
            "rng": self.rng.bit_generator.state,
            "env_rng": env.rng.bit_generator.state,
        }
        (path / "state.json").write_text(json.dumps(state, sort_keys=True), encoding="utf-8")

    def load_rollout(self, path: Path) -> None:
        """Restore what :meth:`save_rollout` wrote, as if :meth:`collect` had just run here.

        The model takes the weights the rollout was collected with. They are this task's own
        initial weights, up to the last bits of floating-point rounding: the orthogonal
        initialisation's QR runs another code path of the BLAS natively than under valgrind
        (docs/design.md §12). Raises ValueError when they are not (another random seed), or the
        config differs: it would not be the rollout this task collects.
        """
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        if state["config"] != json.loads(json.dumps(asdict(self.config))):
            raise ValueError(f"the rollout in {path} was collected with another config")
        own = self.model.state_dict()
        with np.load(path / "weights.npz") as saved:
            weights = {k: torch.from_numpy(saved[k]) for k in saved.files}
        if weights.keys() != own.keys() or not all(
            torch.allclose(weights[k], own[k].detach().cpu(), rtol=1e-4, atol=1e-6) for k in own
        ):
            raise ValueError(f"the rollout in {path} was collected with other weights (another random seed?)")
        self.model.load_state_dict(weights)
        env = self.env
        with np.load(path / "rollout.npz") as saved:
            for name in self._SAVED:
                setattr(self, name, saved[name])  # a new array each time it is read
            adv, ret = saved["adv"], saved["ret"]
            self._queue = list(saved["queue"])
            env.t[:], env.steps[:] = saved["env_t"], saved["env_steps"]
            env.position = saved["env_position"]
            env.obs[:] = saved["env_obs"]
            self.generator.set_state(torch.from_numpy(saved["generator"]))
        self._flatten(adv, ret)
        self.rng.bit_generator.state = state["rng"]
        env.rng.bit_generator.state = state["env_rng"]
        self.rollouts = int(state["rollouts"])

    save_prepared = save_rollout  # ModelSpec.prepares: what the benchmark's native pass saves
    load_prepared = load_rollout

    def loss(self) -> torch.Tensor:
        if not self._queue:
            self.collect()
        idx = torch.from_numpy(self._queue.pop()).to(self.device)
        f = self._flat
        cfg = self.config
        loss, _ = ppo_loss(
            self.model,
            f["obs"][idx],
            f["action"][idx],
            f["logp"][idx],
            f["adv"][idx],
            f["ret"][idx],
            clip=cfg.clip,
            vf_coef=cfg.vf_coef,
            ent_coef=cfg.ent_coef,
        )
        return loss

    def after_step(self) -> None:
        pass


def _task(config: PPOConfig, data: MarketData, *, device: str = "cpu", seed: int = 0) -> PPOTask:
    return PPOTask(config, data, device=device, seed=seed)


def _server(model: ActorCritic) -> MLPServer:
    head_weight = torch.cat([model.pi.weight, model.v.weight])
    head_bias = torch.cat([model.pi.bias, model.v.bias])
    return MLPServer(model.fc1, model.fc2, head_weight, head_bias, activation="tanh")


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

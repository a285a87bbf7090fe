"""The training loop, shared by the four models, and the tasks that feed it.

:class:`Trainer` knows nothing about models (minGPT's trainer): it asks its task for a
loss, back-propagates, clips the gradient norm, steps AdamW and tells the task. A task
owns the model, draws its own data and defines the loss:

* :class:`SequenceTask` (Mamba-2, TFT): random windows of the feature series, targets
  aligned per position (class of the next return, or the next return itself);
* :class:`DQNTask`: ε-greedy steps in :class:`~perfgate_pipeline.env.TradingEnv` into a
  replay buffer, a Double-DQN update per step, the target network copied every
  ``target_every`` updates;
* :class:`PPOTask`: a rollout of ``n_envs × n_steps`` transitions, GAE, then ``epochs``
  passes of shuffled minibatches; one :meth:`Trainer.step` is one minibatch, and the next
  rollout is collected when the last minibatch of the current one is used up. The first
  rollout can be saved and loaded (:meth:`PPOTask.save_rollout`, :meth:`PPOTask.load_rollout`):
  a counted benchmark collects it once natively instead of in every process under valgrind.

:func:`build_task` makes the task of a model by name, with its default (or a given)
config, from the model registry (:mod:`perfgate_pipeline.models`); the benchmark and the
tests both start there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfgate_pipeline import models
from perfgate_pipeline.env import MarketData, TradingEnv
from perfgate_pipeline.models.dqn import DQNConfig, QNetwork, double_dqn_loss
from perfgate_pipeline.models.ppo import ActorCritic, PPOConfig, gae, ppo_loss

__all__ = [
    "DQNTask",
    "PPOTask",
    "ReplayBuffer",
    "SequenceTask",
    "Task",
    "Trainer",
    "build_task",
    "default_config",
    "return_classes",
    "sequence_task",
]


class Task(Protocol):
    """What :class:`Trainer` needs: the model, a loss on the next batch, a hook after each update."""

    model: nn.Module
    lr: float
    batch_size: int

    def loss(self) -> torch.Tensor: ...

    def after_step(self) -> None: ...


class Trainer:
    """AdamW on ``task.loss()`` with gradient-norm clipping; one :meth:`step` is one update."""

    def __init__(self, task: Task, *, weight_decay: float = 0.0, grad_clip: float | None = 1.0) -> None:
        self.task = task
        self.grad_clip = grad_clip
        self.optimizer = torch.optim.AdamW(task.model.parameters(), lr=task.lr, weight_decay=weight_decay)
        self.steps = 0

    def step(self) -> torch.Tensor:
        """One update; returns the loss before it (detached, on the model's device)."""
        loss = self.task.loss()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip is not None:
            nn.utils.clip_grad_norm_(self.task.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.task.after_step()
        self.steps += 1
        return loss.detach()

    def fit(self, steps: int) -> list[float]:
        """``steps`` updates; the loss of each."""
        return [float(self.step()) for _ in range(steps)]


def return_classes(returns: np.ndarray, edges: tuple[float, float]) -> np.ndarray:
    """0 (down), 1 (flat), 2 (up): where each return falls against the two edges."""
    return np.searchsorted(np.asarray(edges, dtype=np.float64), returns.astype(np.float64)).astype(np.int64)


class SequenceTask:
    """Windows of ``seq_len`` bars, from random starts; the model predicts each position's target.

    Args:
        model: (B, T, 16) -> (B, T, outputs).
        features: (n, 16) float32; targets: (n,), the target of row t (about bar t + 1).
        loss_fn: (model output, targets (B, T)) -> scalar loss.
    """

    def __init__(
        self,
        model: nn.Module,
        features: np.ndarray,
        targets: np.ndarray,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        target_fn: Callable[[np.ndarray], np.ndarray] | None = None,
        seq_len: int,
        batch_size: int,
        lr: float,
        seed: int = 0,
    ) -> None:
        if len(features) <= seq_len:
            raise ValueError(f"need more than seq_len = {seq_len} rows, got {len(features)}")
        self.model = model
        device = next(model.parameters()).device
        self.features = torch.as_tensor(features, device=device)
        self.targets = torch.as_tensor(targets, device=device)
        self.loss_fn = loss_fn
        self.target_fn = target_fn  # returns -> targets, to score other data the same way
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.lr = lr
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self._offsets = torch.arange(seq_len, device=device)

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.features) - self.seq_len, (self.batch_size,), generator=self.generator)
        idx = starts.to(self._offsets.device)[:, None] + self._offsets  # (B, T)
        return self.features[idx], self.targets[idx]

    def loss(self) -> torch.Tensor:
        x, y = self.batch()
        return self.loss_fn(self.model(x), y)

    def after_step(self) -> None:
        pass


def sequence_task(
    model: nn.Module,
    data: MarketData,
    config: Any,
    *,
    target_fn: Callable[[np.ndarray], np.ndarray],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    seed: int = 0,
) -> SequenceTask:
    """The :class:`SequenceTask` of a sequence model on ``data``: targets ``target_fn(data.returns)``,
    window, batch and learning rate from the model's ``config``."""
    return SequenceTask(
        model,
        data.features,
        target_fn(data.returns),
        loss_fn,
        target_fn=target_fn,
        seq_len=config.seq_len,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=seed,
    )


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


def default_config(name: str) -> Any:
    """The benchmark's config of a model (the dataclass defaults)."""
    return models.spec(name).config()


def build_task(name: str, data: MarketData, *, config: Any = None, device: str = "cpu", seed: int = 0) -> Task:
    """The training task of model ``name`` on ``data`` (the config's defaults unless one is given).

    What the task is comes from the model's :class:`~perfgate_pipeline.models.ModelSpec`:
    for the sequence models the targets are built from ``data.returns`` (Mamba-2 classifies
    the next return into terciles of the series' returns; the TFT predicts it in units of
    its standard deviation, so quantiles are comparable across instruments).
    """
    spec = models.spec(name)
    cfg = config if config is not None else spec.config()
    task: Task = spec.task(cfg, data, device=device, seed=seed)
    return task

"""The training loop, shared by the four models, and the generic parts of their tasks.

:class:`Trainer` knows nothing about models (minGPT's trainer): it asks its task for a
loss, back-propagates, clips the gradient norm, steps AdamW and tells the task. A task
owns the model, draws its own data and defines the loss. This module has what more than
one model's task uses; a model's own task lives in its module:

* :class:`SequenceTask` (Mamba-2, TFT, made by :func:`sequence_task`): random windows of
  the feature series, targets aligned per position (class of the next return, or the next
  return itself);
* :class:`perfgate_pipeline.models.dqn.DQNTask`: ε-greedy steps in
  :class:`~perfgate_pipeline.env.TradingEnv` into a replay buffer, a Double-DQN update per
  step, the target network copied every ``target_every`` updates;
* :class:`perfgate_pipeline.models.ppo.PPOTask`: rollouts of ``n_envs × n_steps``
  transitions, GAE, then ``epochs`` passes of shuffled minibatches, one per
  :meth:`Trainer.step`.

The model modules import this one, never the other way round: the task of a model by name
comes from the model registry (:func:`perfgate_pipeline.models.build_task`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from perfgate_pipeline.env import MarketData

__all__ = [
    "SequenceTask",
    "Task",
    "Trainer",
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

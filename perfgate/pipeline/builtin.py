"""A small built-in model for the training-step and inference stages, in numpy.

It stands in for the PyTorch models (DQN, PPO, Mamba-2, TFT) so that ``perfgate bench``
measures a real forward/backward/update and a real single-sample prediction on every
machine, with sizes that differ per model. A two-layer tanh MLP over a window of the 16
features predicting the next bar's return, trained with plain SGD on squared error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MLP", "MLPConfig", "config_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MLPConfig:
    window: int = 32  # bars of history per sample
    features: int = 16  # features per bar
    hidden: int = 128  # width of the hidden layer
    batch: int = 256  # samples per training step
    lr: float = 1e-3  # SGD learning rate


_SIZES = {"dqn": 128, "ppo": 192, "mamba2": 256, "tft": 512}


def config_for(model: str) -> MLPConfig:
    return MLPConfig(hidden=_SIZES.get(model, 128))


class MLP:
    """y = w2 · tanh(W1 x + b1) + b2, float32."""

    def __init__(self, config: MLPConfig, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        d_in = config.window * config.features
        self.config = config
        self.w1 = (rng.standard_normal((d_in, config.hidden)) / np.sqrt(d_in)).astype(np.float32)
        self.b1 = np.zeros(config.hidden, dtype=np.float32)
        self.w2 = (rng.standard_normal(config.hidden) / np.sqrt(config.hidden)).astype(np.float32)
        self.b2 = np.float32(0.0)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """x: (B, window*features) or (window*features,) -> (B,) or scalar."""
        return np.tanh(x @ self.w1 + self.b1) @ self.w2 + self.b2

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One SGD step on mean squared error; returns the loss before the update."""
        B = x.shape[0]
        h = np.tanh(x @ self.w1 + self.b1)  # (B, hidden)
        err = h @ self.w2 + self.b2 - y  # (B,)
        loss = float(np.mean(err**2))
        g_out = (2.0 / B) * err  # (B,)
        g_w2 = h.T @ g_out  # (hidden,)
        g_h = np.outer(g_out, self.w2) * (1.0 - h**2)  # (B, hidden)
        g_w1 = x.T @ g_h  # (d_in, hidden)
        lr = np.float32(self.config.lr)
        self.w1 -= lr * g_w1.astype(np.float32)
        self.b1 -= lr * g_h.sum(axis=0).astype(np.float32)
        self.w2 -= lr * g_w2.astype(np.float32)
        self.b2 -= lr * np.float32(g_out.sum())
        return loss

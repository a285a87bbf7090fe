"""Market data for the models, and the trading environment the RL agents act in.

:class:`MarketData` pairs the standardised 16 features of every bar with the log return
from that bar to the next, which is what every model is trained on: the sequence models
(Mamba-2, TFT) predict the next return from the features up to now; the agents (DQN, PPO)
hold a position over it.

:class:`TradingEnv` is a vectorised environment of ``n_envs`` independent episodes over
one series of bars. At bar ``t`` an agent sees the last ``window`` feature rows and its
current position, and picks an action: 0 short, 1 flat, 2 long (position ``action - 1``).
It then earns ``position × r_t − cost × |position − previous position|``, with ``r_t`` the
log return from bar ``t`` to ``t + 1`` in basis points. Episodes last ``episode_len`` bars
from a random start; the end of one counts as terminal (the agent cannot bootstrap
through it) and the environment starts the next one at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from perfgate_pipeline.features import N_FEATURES, FeatureMatrix, compute_features

__all__ = ["BPS", "MarketData", "TradingEnv", "evaluate_policy", "toy_bars"]

#: Log returns are scaled to basis points for rewards.
BPS = 1e4


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketData:
    """Features and next-bar returns of one instrument, aligned row by row.

    Attributes:
        features: float32 (n, 16), standardised, no NaN: the bars past the feature warm-up.
        returns: float32 (n,), ``ln(close[t+1] / close[t])`` for row ``t``.
    """

    features: np.ndarray
    returns: np.ndarray

    def __post_init__(self) -> None:
        if self.features.ndim != 2 or self.features.shape[1] != N_FEATURES:
            raise ValueError(f"features must be (n, {N_FEATURES}), got {self.features.shape}")
        if self.returns.shape != (self.features.shape[0],):
            raise ValueError(f"returns must be ({self.features.shape[0]},), got {self.returns.shape}")

    def __len__(self) -> int:
        return int(self.features.shape[0])

    @classmethod
    def from_bars(cls, bars: Mapping[str, np.ndarray]) -> MarketData:
        """Compute the features of ``bars`` and align them with the next-bar returns."""
        return cls.from_features(compute_features(bars), np.asarray(bars["close"], dtype=np.float64))

    @classmethod
    def from_features(cls, feats: FeatureMatrix, close: np.ndarray) -> MarketData:
        """From the features of some bars and their closes; the last bar has no next return and is dropped."""
        c = np.asarray(close, dtype=np.float64)[feats.warmup :]
        if len(c) < 2:
            raise ValueError(f"need at least {feats.warmup + 2} bars, got {len(close)}")
        z = feats.normalize(feats.model_input)  # standardised with the statistics of these bars
        ret = np.log(c[1:] / c[:-1]).astype(np.float32)
        return cls(features=np.ascontiguousarray(z[:-1], dtype=np.float32), returns=ret)

    def split(self, train_fraction: float) -> tuple[MarketData, MarketData]:
        """(earlier rows, later rows): a held-out slice that lies after the training one."""
        cut = int(len(self) * train_fraction)
        return (
            MarketData(features=self.features[:cut], returns=self.returns[:cut]),
            MarketData(features=self.features[cut:], returns=self.returns[cut:]),
        )


class TradingEnv:
    """``n_envs`` trading episodes stepped together (module docstring).

    Observations are float32 ``(n_envs, window * 16 + 1)``: the feature window flattened
    oldest first, then the current position.
    """

    def __init__(
        self,
        data: MarketData,
        *,
        window: int,
        n_envs: int = 1,
        episode_len: int = 256,
        cost_bps: float = 0.5,
        seed: int = 0,
    ) -> None:
        if len(data) < window + episode_len + 1:
            raise ValueError(f"{len(data)} rows are too few for window {window} and episodes of {episode_len}")
        self.data = data
        self.window = window
        self.n_envs = n_envs
        self.episode_len = episode_len
        self.cost_bps = cost_bps
        self.obs_dim = window * N_FEATURES + 1
        self.rng = np.random.default_rng(seed)
        self._returns_bps = data.returns.astype(np.float32) * np.float32(BPS)
        self._lags = np.arange(-window + 1, 1)  # oldest first
        self.t = np.zeros(n_envs, dtype=np.int64)  # current bar of each episode
        self.steps = np.zeros(n_envs, dtype=np.int64)
        self.position = np.zeros(n_envs, dtype=np.float32)
        self.obs = np.zeros((n_envs, self.obs_dim), dtype=np.float32)

    def _start(self, which: np.ndarray) -> None:
        hi = len(self.data) - self.episode_len  # the episode's last bar still has a next return
        self.t[which] = self.rng.integers(self.window - 1, hi, size=int(which.sum()))
        self.steps[which] = 0
        self.position[which] = 0.0

    def _observe(self) -> np.ndarray:
        rows = self.data.features[self.t[:, None] + self._lags]  # (n_envs, window, 16)
        self.obs[:, :-1] = rows.reshape(self.n_envs, -1)
        self.obs[:, -1] = self.position
        return self.obs.copy()

    def reset(self) -> np.ndarray:
        self._start(np.ones(self.n_envs, dtype=bool))
        return self._observe()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Act in every episode: (next observations, rewards, done), all ``(n_envs, …)``.

        Where ``done`` is set the observation is already the first one of a new episode.
        """
        new = np.asarray(actions, dtype=np.float32) - 1.0
        reward = new * self._returns_bps[self.t] - np.float32(self.cost_bps) * np.abs(new - self.position)
        self.position = new
        self.t += 1
        self.steps += 1
        done = self.steps >= self.episode_len
        if done.any():
            self._start(done)
        return self._observe(), reward.astype(np.float32), done


def evaluate_policy(data: MarketData, policy: object, *, window: int, cost_bps: float = 0.5) -> float:
    """Mean reward per bar of ``policy(obs (1, D)) -> action`` run once through ``data`` in order."""
    z = data.features
    r = data.returns.astype(np.float64) * BPS
    pos = 0.0
    total = 0.0
    obs = np.zeros((1, window * N_FEATURES + 1), dtype=np.float32)
    for t in range(window - 1, len(data)):
        obs[0, :-1] = z[t - window + 1 : t + 1].reshape(-1)
        obs[0, -1] = pos
        new = float(policy(obs)) - 1.0  # type: ignore[operator]
        total += new * r[t] - cost_bps * abs(new - pos)
        pos = new
    return total / (len(data) - window + 1)


def toy_bars(n: int, *, phi: float = 0.4, sigma: float = 1e-3, seed: int = 0) -> dict[str, np.ndarray]:
    """Bars whose log returns follow an AR(1) with coefficient ``phi``: a series a model can learn.

    The benchmark's synthetic data (:mod:`perfgate_pipeline.synth`) is a random walk with
    no predictable part; the learning tests use this one, where the last return predicts
    the next and a trained model must beat a trivial baseline on a later slice.
    """
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal(n) * sigma
    r = np.empty(n)
    r[0] = eps[0]
    for t in range(1, n):
        r[t] = phi * r[t - 1] + eps[t]
    close = 100.0 * np.exp(np.cumsum(r))
    open_ = np.concatenate([[100.0], close[:-1]])
    wick = np.abs(rng.standard_normal((2, n))) * sigma * 0.5
    high = np.maximum(open_, close) * np.exp(wick[0])
    low = np.minimum(open_, close) * np.exp(-wick[1])
    volume = np.round(rng.lognormal(8.0, 0.5, n))
    return {"open": open_, "high": high, "low": low, "close": close, "volume": volume}

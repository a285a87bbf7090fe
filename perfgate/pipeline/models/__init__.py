"""The four models of the reference pipeline, one file each (nanoGPT style).

Each module has a ``@dataclass`` config with commented defaults and small ``nn.Module``
blocks whose ``forward`` only computes; the losses sit next to the model they train, and
the training loop is :mod:`perfgate.pipeline.train`'s, shared by all four.
"""

from __future__ import annotations

__all__ = ["MODELS"]

#: The model names ``perfgate bench --model`` accepts, in the order ``all`` runs them.
MODELS = ("dqn", "ppo", "mamba2", "tft")

"""What names a run: the key of its model, and the id of a run file that has none."""

from __future__ import annotations

import hashlib

from perfgate.core.codec import dumps
from perfgate.core.schema import Run, normalize_model

__all__ = ["content_run_id", "model_key"]


def content_run_id(run: Run) -> str:
    """A stable id for a run file that has none (flat-format files): hash of its content."""
    return hashlib.sha256(dumps(run).encode()).hexdigest()[:32]


def model_key(name: str) -> str:
    """The model's key, as runs and stores name it: lower case, letters and digits only."""
    return normalize_model(name)

"""perfgate: a performance-regression gate for ML training pipelines."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]

"""Text and URLs made safe to show or send: control characters escaped, secrets masked, outgoing URLs checked.

A leaf that every layer may import (like :mod:`perfgate.errors`): it imports nothing of perfgate
but the errors.
"""

__all__: list[str] = []

"""The notifier protocol, its errors, bounded retries and secret masking.

A :class:`Notifier` sends one :class:`~perfgate.notify._message.Summary` to one target and
raises :class:`NotifyError` when it could not. Its :attr:`~Notifier.target` is what may be
printed: never a URL or credential (a Slack webhook URL *is* the secret), only the channel
and the environment variable it came from.

Retries (:func:`retrying`) are bounded: at most ``attempts`` tries, waiting
``backoff × 2^k`` seconds between them, and only for failures that may pass (a 5xx answer,
a refused connection, a timeout). A 4xx answer means the request itself is wrong and is
never repeated, so a misconfigured hook cannot become a retry storm.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from perfgate.errors import PerfgateError
from perfgate.safe import redact

if TYPE_CHECKING:
    from perfgate.notify._message import Summary

__all__ = ["MASK", "Notifier", "NotifyError", "RetryPolicy", "mask", "retrying"]

MASK = "***"
T = TypeVar("T")


class NotifyError(PerfgateError):
    """A notification could not be delivered. ``retriable``: trying again might succeed."""

    def __init__(self, message: str, *, retriable: bool = False, attempts: int = 1):
        self.retriable = retriable
        self.attempts = attempts
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How hard to try: ``attempts`` in all (1–5), ``timeout`` seconds per try, ``backoff`` before the 2nd."""

    attempts: int = 3
    timeout: float = 10.0
    backoff: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.attempts <= 5:
            raise ValueError(f"notify attempts must be between 1 and 5, got {self.attempts}")
        if not 0 < self.timeout <= 120:
            raise ValueError(f"notify timeout must be in (0, 120] seconds, got {self.timeout}")
        if not 0 <= self.backoff <= 60:
            raise ValueError(f"notify backoff must be in [0, 60] seconds, got {self.backoff}")


class Notifier(Protocol):
    """One notification target."""

    @property
    def target(self) -> str:
        """A printable description of the target, free of secrets (``Slack webhook ($PERFGATE_SLACK_WEBHOOK)``)."""
        ...

    def send(self, summary: Summary) -> int:
        """Deliver ``summary``; return the number of attempts it took. Raises :class:`NotifyError`."""
        ...


def retrying(
    action: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Run ``action`` until it succeeds, fails for good, or ``policy.attempts`` are spent.

    ``action`` raises :class:`NotifyError` with ``retriable`` set for failures worth another
    try. Returns the result and the number of attempts; the final error carries ``attempts``.
    """
    for attempt in range(1, policy.attempts + 1):
        try:
            return action(), attempt
        except NotifyError as exc:
            if not exc.retriable or attempt == policy.attempts:
                exc.attempts = attempt
                raise
            sleep(policy.backoff * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # pragma: no cover


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by :data:`MASK` (:func:`perfgate.safe.redact.mask`)."""
    return redact.mask(text, secrets)

"""Notifications after a check: Slack-compatible webhooks, generic JSON webhooks, e-mail.

One module per channel (:mod:`~perfgate.notify.slack`, :mod:`~perfgate.notify.webhook`,
:mod:`~perfgate.notify.smtp`) behind the :class:`~perfgate.notify.base.Notifier` protocol.
:func:`notify_check` decides whether the check's events (regression, inconclusive,
improvement) are ones the configuration asks for, builds the targets from configuration
plus environment, sends, and reports each delivery through ``log`` — with every secret
masked. It never raises: a notification that fails is reported and changes nothing about
the check, least of all its exit code.
"""

from __future__ import annotations

from typing import Any

from perfgate.notify.base import Notifier, NotifyError, RetryPolicy
from perfgate.notify.settings import EVENTS, NotifyConfig, parse_notify

__all__ = [
    "EVENTS",
    "Delivery",
    "Notifier",
    "NotifyConfig",
    "NotifyError",
    "RetryPolicy",
    "build_targets",
    "notify_check",
    "parse_notify",
    "run_url",
]

_LAZY = {"Delivery", "build_targets", "notify_check", "run_url"}


def __getattr__(name: str) -> Any:
    # the dispatcher needs the comparison code (scipy); configuration parsing must not pay for it
    if name in _LAZY:
        from perfgate.notify import dispatch

        return getattr(dispatch, name)
    raise AttributeError(f"module 'perfgate.notify' has no attribute {name!r}")

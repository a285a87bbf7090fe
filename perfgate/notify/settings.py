"""``[tool.perfgate.notify]``: when to notify and where, with secrets named, never stored.

Example::

    [tool.perfgate.notify]
    on = ["regression"]                          # also "improvement", "inconclusive"
    slack_webhook_env = "PERFGATE_SLACK_WEBHOOK" # the variable holding the Slack webhook URL
    webhook_url_env = "PERFGATE_WEBHOOK_URL"     # a generic JSON webhook
    smtp_host = "smtp.example.com"
    smtp_port = 587                              # STARTTLS, then login
    smtp_user_env = "PERFGATE_SMTP_USER"
    smtp_password_env = "PERFGATE_SMTP_PASSWORD"
    email_from = "perfgate@example.com"
    email_to = ["team@example.com"]
    timeout = 10.0                               # seconds per attempt
    attempts = 3                                 # in all, 1–5

A channel is a target when its keys are present. Values that would be secrets (URLs,
user names, passwords) can only be given as the *name* of an environment variable: a
key such as ``slack_webhook_url`` is refused, so that no secret is committed by mistake.

Internal: shared with ``config``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfgate.errors import ConfigError
from perfgate.notify.base import RetryPolicy

__all__ = ["EVENTS", "NotifyConfig", "parse_notify"]

EVENTS = ("regression", "improvement", "inconclusive")

_STR_KEYS = (
    "slack_webhook_env",
    "webhook_url_env",
    "smtp_host",
    "smtp_user_env",
    "smtp_password_env",
    "email_from",
    "smtp_cafile",
)
_KNOWN = {*_STR_KEYS, "on", "enabled", "smtp_port", "smtp_starttls", "email_to", "timeout", "attempts", "backoff"}
_SECRET_KEYS = {"slack_webhook_url", "slack_webhook", "webhook_url", "smtp_user", "smtp_password", "password"}


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyConfig:
    """Where and when to send notifications; every secret is the name of an environment variable."""

    enabled: bool = False  # send on every ``perfgate check`` (else only with --notify)
    on: tuple[str, ...] = ("regression",)
    slack_webhook_env: str | None = None
    webhook_url_env: str | None = None
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_starttls: bool = True
    smtp_user_env: str | None = None
    smtp_password_env: str | None = None
    smtp_cafile: str | None = None  # a CA bundle to trust instead of the system's (a private relay)
    email_from: str | None = None
    email_to: tuple[str, ...] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def has_targets(self) -> bool:
        return bool(self.slack_webhook_env or self.webhook_url_env or (self.smtp_host and self.email_to))


def parse_notify(table: object, *, source: str) -> NotifyConfig:
    """Validate a ``[tool.perfgate.notify]`` table (``None``: nothing configured)."""
    if table is None:
        return NotifyConfig()
    if not isinstance(table, Mapping):
        raise ConfigError("expected a table", source=source, field="notify")
    secret = sorted(set(table) & _SECRET_KEYS)
    if secret:
        raise ConfigError(
            "secrets never live in configuration files; name the environment variable that holds it "
            '(e.g. slack_webhook_env = "PERFGATE_SLACK_WEBHOOK", smtp_password_env = "PERFGATE_SMTP_PASSWORD")',
            source=source,
            field=f"notify.{secret[0]}",
        )
    unknown = sorted(set(table) - _KNOWN)
    if unknown:
        raise ConfigError(f"unknown keys {unknown}; known: {sorted(_KNOWN)}", source=source, field="notify")
    kwargs: dict[str, Any] = {}
    for key in _STR_KEYS:
        if key in table:
            value = table[key]
            if not isinstance(value, str) or not value.strip():
                raise ConfigError("expected a non-empty string", source=source, field=f"notify.{key}")
            kwargs[key] = value.strip()
    for key in ("enabled", "smtp_starttls"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError("expected true or false", source=source, field=f"notify.{key}")
            kwargs[key] = table[key]
    if "on" in table:
        on = table["on"]
        if isinstance(on, str):
            on = [on]
        if not isinstance(on, list) or not all(isinstance(e, str) and e in EVENTS for e in on):
            raise ConfigError(f"expected a list of events from {list(EVENTS)}", source=source, field="notify.on")
        kwargs["on"] = tuple(dict.fromkeys(on))
    if "smtp_port" in table:
        port = table["smtp_port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError("expected a port number", source=source, field="notify.smtp_port")
        kwargs["smtp_port"] = port
    if "email_to" in table:
        to = table["email_to"]
        if isinstance(to, str):
            to = [to]
        if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
            raise ConfigError("expected a list of e-mail addresses", source=source, field="notify.email_to")
        kwargs["email_to"] = tuple(to)
    if bool(kwargs.get("smtp_host")) != bool(kwargs.get("email_to")):
        raise ConfigError("e-mail needs both smtp_host and email_to", source=source, field="notify.smtp_host")
    retry: dict[str, Any] = {}
    for key in ("timeout", "attempts", "backoff"):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError("expected a number", source=source, field=f"notify.{key}")
            retry[key] = int(value) if key == "attempts" else float(value)
    try:
        kwargs["retry"] = RetryPolicy(**retry)
    except ValueError as exc:
        raise ConfigError(str(exc), source=source, field="notify") from None
    return NotifyConfig(**kwargs)

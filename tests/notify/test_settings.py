"""``[tool.perfgate.notify]``: validation, and secrets only as names of environment variables."""

from __future__ import annotations

import pytest

from perfgate.config import parse_config
from perfgate.errors import ConfigError
from perfgate.notify.base import RetryPolicy, mask
from perfgate.notify.settings import NotifyConfig, parse_notify


def test_full_table():
    config = parse_notify(
        {
            "on": ["regression", "inconclusive"],
            "enabled": True,
            "slack_webhook_env": "PERFGATE_SLACK_WEBHOOK",
            "webhook_url_env": "PERFGATE_WEBHOOK_URL",
            "smtp_host": "smtp.example.com",
            "smtp_port": 2525,
            "smtp_user_env": "U",
            "smtp_password_env": "P",
            "email_from": "perfgate@example.com",
            "email_to": "team@example.com",
            "timeout": 3,
            "attempts": 2,
            "backoff": 0.5,
        },
        source="pyproject.toml",
    )
    assert config.on == ("regression", "inconclusive") and config.enabled
    assert config.email_to == ("team@example.com",) and config.smtp_port == 2525
    assert config.retry == RetryPolicy(attempts=2, timeout=3.0, backoff=0.5)
    assert config.has_targets


def test_defaults():
    config = parse_notify(None, source="x")
    assert config == NotifyConfig() and not config.has_targets and not config.enabled
    assert config.on == ("regression",) and config.retry.attempts == 3


@pytest.mark.parametrize("key", ["slack_webhook_url", "webhook_url", "smtp_password", "smtp_user"])
def test_secrets_in_the_file_are_refused(key):
    with pytest.raises(ConfigError, match="secrets never live in configuration files") as info:
        parse_notify({key: "https://hooks.slack.com/services/T/B/SECRET"}, source="pyproject.toml")
    assert "SECRET" not in str(info.value)
    assert info.value.field == f"notify.{key}"


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"on": ["regresion"]}, "notify.on"),
        ({"on": "always"}, "notify.on"),
        ({"smtp_host": "h"}, "notify.smtp_host"),
        ({"email_to": ["not-an-address"], "smtp_host": "h"}, "notify.email_to"),
        ({"smtp_port": 0}, "notify.smtp_port"),
        ({"attempts": 50}, "notify"),
        ({"timeout": 0}, "notify"),
        ({"timeout": "fast"}, "notify.timeout"),
        ({"enabled": "yes"}, "notify.enabled"),
        ({"slack_webhook_env": ""}, "notify.slack_webhook_env"),
        ({"slack": True}, "notify"),
    ],
)
def test_invalid(table, field):
    with pytest.raises(ConfigError) as info:
        parse_notify(table, source="pyproject.toml")
    assert info.value.field == field


def test_through_the_main_configuration():
    config = parse_config({"threshold": 5.0, "notify": {"webhook_url_env": "HOOK"}}, source="perfgate.toml")
    assert config.notify.webhook_url_env == "HOOK"
    with pytest.raises(ConfigError):
        parse_config({"notify": []}, source="perfgate.toml")


def test_mask():
    assert mask("posting to https://h/x/SECRET1 failed", ["SECRET1", "", "ab"]) == "posting to https://h/x/*** failed"

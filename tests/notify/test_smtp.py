"""E-mail against a local SMTP server (aiosmtpd) that requires STARTTLS and AUTH."""

from __future__ import annotations

import email
import email.policy

import pytest

from perfgate.notify._message import events_of, summarize_check
from perfgate.notify.base import NotifyError, RetryPolicy
from perfgate.notify.dispatch import notify_check
from perfgate.notify.settings import NotifyConfig
from perfgate.notify.smtp import SmtpNotifier
from tests.notify.conftest import SMTP_PASSWORD, SMTP_USER, make_result

FAST = RetryPolicy(attempts=3, timeout=5.0, backoff=0.0)


def _summary():
    result = make_result()
    return summarize_check(result, events_of(result))


def _notifier(box, **kwargs) -> SmtpNotifier:
    defaults = {
        "host": box.host,
        "port": box.port,
        "sender": "perfgate@example.com",
        "recipients": ("team@example.com", "lead@example.com"),
        "policy": FAST,
        "user": SMTP_USER,
        "password": SMTP_PASSWORD,
        "cafile": str(box.cafile),
    }
    return SmtpNotifier(**{**defaults, **kwargs})


def test_starttls_login_and_message(smtp_server):
    attempts = _notifier(smtp_server).send(_summary())
    assert attempts == 1
    assert smtp_server.logins == [(SMTP_USER, SMTP_PASSWORD)]
    (received,) = smtp_server.messages
    assert received["tls"] is True
    assert received["from"] == "perfgate@example.com"
    assert received["to"] == ["team@example.com", "lead@example.com"]
    msg = email.message_from_string(received["data"], policy=email.policy.default)
    assert msg["Subject"] == "perfgate: performance regression in dqn (6 failing) at def4567890ab"
    text = msg.get_content()
    assert "REGRESSED    training_step_time_ms: +30.0% (10.00 → 13.00 ms)" in text
    assert "Branch: feature/<b>x</b>" in text  # plain text: nothing to interpret
    # a metric name with a new line cannot forge a line (or a header) of its own
    assert "line break & ampersand:" in text
    assert not any(line.startswith("break") for line in text.splitlines())


def test_wrong_password_is_not_retried(smtp_server):
    with pytest.raises(NotifyError, match=r"535 .*not retried") as info:
        _notifier(smtp_server, password="wrong-password-123").send(_summary())
    assert info.value.attempts == 1
    assert len(smtp_server.logins) <= 2  # one attempt: smtplib tries AUTH PLAIN, then AUTH LOGIN
    assert "wrong-password-123" not in str(info.value) and SMTP_USER not in str(info.value)
    assert smtp_server.messages == []


def test_certificate_is_verified(smtp_server):
    """Without the test CA the self-signed certificate is refused: verification is never off."""
    with pytest.raises(NotifyError, match="TLS failed") as info:
        _notifier(smtp_server, cafile=None).send(_summary())
    assert info.value.attempts == 1
    assert smtp_server.logins == [] and smtp_server.messages == []


def test_transient_4xx_is_retried(smtp_server):
    smtp_server.rcpt_status = ["451 4.3.0 try again later"]
    attempts = _notifier(smtp_server, recipients=("team@example.com",)).send(_summary())
    assert attempts == 2
    assert len(smtp_server.messages) == 1 and len(smtp_server.logins) == 2


def test_no_credentials_without_starttls(smtp_server):
    with pytest.raises(NotifyError, match="without STARTTLS"):
        _notifier(smtp_server, starttls=False).send(_summary())
    assert smtp_server.logins == []


def test_connection_refused_is_bounded(closed_port_url):
    port = int(closed_port_url.split(":")[2].split("/")[0])
    notifier = SmtpNotifier(
        host="127.0.0.1", port=port, sender="a@b.c", recipients=("x@y.z",), policy=FAST, user=None, password=None
    )
    with pytest.raises(NotifyError, match="connection failed") as info:
        notifier.send(_summary())
    assert info.value.attempts == 3


def test_through_notify_check_with_secrets_from_the_environment(smtp_server):
    config = NotifyConfig(
        smtp_host=smtp_server.host,
        smtp_port=smtp_server.port,
        smtp_user_env="SMTP_U",
        smtp_password_env="SMTP_P",
        smtp_cafile=str(smtp_server.cafile),
        email_to=("team@example.com",),
        retry=FAST,
    )
    lines: list[str] = []
    env = {"SMTP_U": SMTP_USER, "SMTP_P": SMTP_PASSWORD}
    (delivery,) = notify_check(make_result(), config, env, log=lines.append)
    assert delivery.status == "sent"
    assert lines == [f"perfgate notify: e-mail via 127.0.0.1:{smtp_server.port} to 1 recipient(s) sent"]
    (received,) = smtp_server.messages
    assert received["from"] == SMTP_USER  # no email_from: the login is the sender
    lines.clear()
    (delivery,) = notify_check(make_result(), config, {"SMTP_U": SMTP_USER}, log=lines.append)
    assert delivery.status == "skipped" and "$SMTP_P is not set" in lines[0]

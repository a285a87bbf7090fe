"""E-mail over SMTP: STARTTLS, then login, then one plain-text message.

The standard library's :mod:`smtplib` and :mod:`email` do all of it, so e-mail adds no
dependency. TLS verifies the server's certificate against the system's CAs, or against
``smtp_cafile`` for a relay with a private CA; there is no switch to turn verification
off. Credentials are sent only after STARTTLS succeeded. Transient failures (a refused
connection, a timeout, an SMTP 4xx reply) are retried; permanent ones (a 5xx reply, such
as 535 authentication failed) are not. Error messages carry the SMTP code and the
server's text, never the user name or password.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from perfgate.notify._message import Summary
from perfgate.notify.base import NotifyError, RetryPolicy, retrying

__all__ = ["SmtpNotifier", "body", "message"]

_KIND = {"regressed": "REGRESSED", "over_budget": "OVER BUDGET", "improved": "improved", "inconclusive": "inconclusive"}


def _plain(text: str) -> str:
    """One line of printable text: control characters (new lines included) become spaces."""
    return "".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text)


def body(summary: Summary) -> str:
    """The plain-text body."""
    lines = [_plain(summary.headline), ""]
    lines.append(f"Model:  {_plain(summary.model)}")
    if summary.branch:
        lines.append(f"Branch: {_plain(summary.branch)}")
    if summary.commit:
        lines.append(f"Commit: {_plain(summary.commit)}")
    if summary.baseline_source:
        lines.append(f"Baseline: {_plain(summary.baseline_source)}")
    lines.append(f"Exit code of perfgate check: {summary.exit_code}")
    lines.append("")
    for row in summary.rows:
        lines.append(f"  {_KIND.get(row.kind, row.kind):<12} {_plain(row.metric)}: {_plain(row.text)}")
    if summary.more:
        lines.append(f"  … and {summary.more} more")
    if summary.url:
        lines += ["", f"Full report: {_plain(summary.url)}"]
    return "\n".join(lines) + "\n"


def message(summary: Summary, *, sender: str, recipients: tuple[str, ...]) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = _plain(summary.headline)[:200]
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    msg.set_content(body(summary))
    return msg


@dataclass(frozen=True, slots=True)
class SmtpNotifier:
    """Send to ``recipients`` through ``host``:``port``."""

    host: str
    port: int
    sender: str
    recipients: tuple[str, ...]
    policy: RetryPolicy
    user: str | None = None
    password: str | None = None
    starttls: bool = True
    cafile: str | None = None
    sleep: Callable[[float], None] | None = None

    @property
    def target(self) -> str:
        return f"e-mail via {self.host}:{self.port} to {len(self.recipients)} recipient(s)"

    def _tls(self) -> ssl.SSLContext:
        try:
            return ssl.create_default_context(cafile=self.cafile)
        except (OSError, ssl.SSLError) as exc:
            raise NotifyError(f"cannot read smtp_cafile: {exc.strerror or type(exc).__name__}") from None

    def _send_once(self, msg: EmailMessage) -> None:
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.policy.timeout) as client:
                client.ehlo()
                if self.starttls:
                    client.starttls(context=self._tls())
                    client.ehlo()
                if self.user is not None:
                    if not self.starttls:
                        raise NotifyError("refusing to send SMTP credentials without STARTTLS (smtp_starttls = false)")
                    client.login(self.user, self.password or "")
                client.send_message(msg)
        except smtplib.SMTPResponseException as exc:
            text = (
                exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
            )
            transient = 400 <= exc.smtp_code < 500
            raise NotifyError(
                f"the SMTP server answered {exc.smtp_code} {_plain(text)[:200]}"
                + ("" if transient else "; not retried"),
                retriable=transient,
            ) from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            transient = all(400 <= code < 500 for code in codes)
            raise NotifyError(
                f"the SMTP server refused {len(exc.recipients)} recipient(s) ({', '.join(map(str, codes))})"
                + ("" if transient else "; not retried"),
                retriable=transient,
            ) from None
        except smtplib.SMTPNotSupportedError:
            raise NotifyError("the SMTP server does not offer STARTTLS or AUTH; not retried") from None
        except ssl.SSLError as exc:
            raise NotifyError(f"TLS failed: {exc.reason or type(exc).__name__}; not retried") from None
        except TimeoutError:
            raise NotifyError(f"no answer within {self.policy.timeout:g} s", retriable=True) from None
        except smtplib.SMTPServerDisconnected:
            raise NotifyError("the SMTP server closed the connection", retriable=True) from None
        except smtplib.SMTPException as exc:
            raise NotifyError(f"SMTP failed: {type(exc).__name__}; not retried") from None
        except OSError as exc:
            raise NotifyError(f"connection failed: {exc.strerror or type(exc).__name__}", retriable=True) from None

    def send(self, summary: Summary) -> int:
        msg = message(summary, sender=self.sender, recipients=self.recipients)
        kwargs = {} if self.sleep is None else {"sleep": self.sleep}
        _, attempts = retrying(lambda: self._send_once(msg), self.policy, **kwargs)
        return attempts

"""POSTing JSON to a webhook, with a timeout, bounded retries and no secret in any message.

The standard library's :mod:`urllib.request` is enough for one JSON POST per target, so
notifications add no dependency. Redirects are not followed (a webhook that redirects is
misconfigured, and following would resend the payload elsewhere); only ``http`` and
``https`` URLs are accepted (``urllib`` would otherwise read ``file:`` URLs). A user and
password in the URL (``https://hook:TOKEN@host/path``) are sent as Basic authentication
and taken out of the URL opened, which ``urllib`` would hand to the name resolver as part
of the host (:mod:`perfgate.safe.urls`). Error messages name the status or the
socket error, never the URL: a Slack webhook URL is itself the credential.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from perfgate.errors import InputError
from perfgate.notify.base import NotifyError, RetryPolicy, retrying
from perfgate.safe.urls import OutgoingURL, parse_outgoing_url

if TYPE_CHECKING:
    from perfgate.notify._message import Summary

__all__ = ["USER_AGENT", "JSONPostNotifier", "post_json"]

USER_AGENT = "perfgate-notify/1"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None  # urllib then raises HTTPError with the 3xx status


_OPENER = urllib.request.build_opener(_NoRedirect)


def _post_once(target: OutgoingURL, body: bytes, timeout: float) -> int:
    headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT}
    if target.authorization is not None:
        headers["Authorization"] = target.authorization
    try:
        request = urllib.request.Request(target.url, data=body, method="POST", headers=headers)
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65536)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
        exc.close()
        if status >= 500:
            raise NotifyError(f"the server answered HTTP {status}", retriable=True) from None
        raise NotifyError(f"the server answered HTTP {status}; not retried", retriable=False) from None
    except TimeoutError:
        raise NotifyError(f"no answer within {timeout:g} s", retriable=True) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise NotifyError(f"no answer within {timeout:g} s", retriable=True) from None
        what = reason.strerror if isinstance(reason, OSError) and reason.strerror else type(reason).__name__
        raise NotifyError(f"connection failed: {what}", retriable=True) from None
    except (ConnectionError, OSError) as exc:  # reset mid-answer, broken pipe
        raise NotifyError(f"connection failed: {exc.strerror or type(exc).__name__}", retriable=True) from None
    except (http.client.HTTPException, ValueError) as exc:  # a URL http.client refuses: its text may hold it
        raise NotifyError(f"the request could not be sent: {type(exc).__name__}", retriable=False) from None


def post_json(
    url: str,
    payload: Any,
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] | None = None,
    what: str = "the webhook URL",
) -> int:
    """POST ``payload`` as JSON to ``url``; return the number of attempts. Raises :class:`NotifyError`.

    ``what`` names the URL in the message when it is refused (``$PERFGATE_WEBHOOK_URL``);
    the message never shows the URL itself.
    """
    try:
        target = parse_outgoing_url(url, what=what)
    except InputError as exc:
        raise NotifyError(f"{what}: {exc.message}") from None
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
    kwargs = {} if sleep is None else {"sleep": sleep}
    _, attempts = retrying(lambda: _post_once(target, body, policy.timeout), policy, **kwargs)
    return attempts


@dataclass(frozen=True, slots=True)
class JSONPostNotifier:
    """A notifier that POSTs a JSON body made from the summary to the URL held in environment
    variable ``env_name``. A channel sets :attr:`label` and :meth:`body` (Slack, the generic
    webhook); the posting, the retries and the target's name are this class's."""

    url: str
    env_name: str
    policy: RetryPolicy
    sleep: Callable[[float], None] | None = None

    label: ClassVar[str] = "JSON webhook"

    @property
    def target(self) -> str:
        return f"{self.label} (${self.env_name})"

    def body(self, summary: Summary) -> Any:
        """The JSON value to post for ``summary``."""
        raise NotImplementedError

    def send(self, summary: Summary) -> int:
        return post_json(self.url, self.body(summary), self.policy, sleep=self.sleep, what=f"${self.env_name}")

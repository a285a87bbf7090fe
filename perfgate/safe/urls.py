"""The URLs perfgate sends data to (a Pushgateway, a webhook), parsed before anything is sent.

A user name and password written into such a URL (``http://pg:pw@gateway:9091``) are taken
out of it and sent as HTTP Basic authentication (RFC 7617), percent-decoded. The URL that
is opened never holds them: :mod:`urllib` keeps the userinfo in the host name, so
``pg:pw@gateway`` would go to the name resolver as a host, and a DNS query would carry the
password off the machine.

A URL that cannot be read one way only is refused with an :class:`~perfgate.errors.InputError`
that names the flag or variable, shows the URL masked and says how to write it. The parser
is strict where :func:`urllib.parse.urlsplit` guesses: a raw ``#``, ``?`` or ``/`` in a
password ends the host early (RFC 3986 §3.2), so any ``@`` after the host is refused rather
than taken for a path, and every ``%`` must start a ``%XX`` escape.

The query stays in the URL (a receiver may take its token there); the fragment is dropped,
as a client never sends it.

Internal: shared with ``cli``, ``export``, ``notify``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import base64
import ipaddress
import re
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from perfgate.errors import InputError
from perfgate.safe.redact import MASK, mask_url, url_secrets

__all__ = ["OutgoingURL", "parse_outgoing_url"]

_SCHEMES = ("http", "https")
_HAS_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PORT = re.compile(r"[0-9]{1,5}")
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_\-]*[A-Za-z0-9_])?")
# characters left as they are when the path and query are made ASCII (RFC 3986 reserved, and %)
_KEEP = "!#$%&'()*+,/:;=?@[]~"
_HOW = (
    "write it as http(s)://USER:PASSWORD@HOST:PORT/PATH, with @ : / ? # % in the user or password "
    "percent-encoded (%40 %3A %2F %3F %23 %25)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingURL:
    """A checked ``http(s)`` URL without its credentials, and the credentials apart.

    ``url`` holds scheme, host, port, path and query, never a user or password; ``user``
    and ``password`` are percent-decoded (``None``: the URL had no userinfo; a user alone,
    ``http://TOKEN@host``, has the password ``""``). ``shown`` is the URL as given, masked,
    for messages.
    """

    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    shown: str = ""
    secrets: tuple[str, ...] = field(default=(), repr=False)  # every form of them, for mask()

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header value, ``Basic base64(user:password)``, or ``None``."""
        if self.user is None:
            return None
        token = base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode("ascii")
        return f"Basic {token}"


def _printable(text: str) -> str:
    # a URL shown in a message: white space and control characters as %XX, so that
    # mask_url sees one URL (it stops at white space) and the message stays on one line
    return "".join(
        quote(ch, safe="") if ch.isspace() or unicodedata.category(ch).startswith("C") else ch for ch in text
    )


def _decode(part: str) -> str:
    """A percent-decoded user or password; raises ValueError when that is not possible."""
    if _ESCAPE.search(part):
        raise ValueError("a % in the user or password is not a %XX escape")
    try:
        return unquote(part, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("the user or password is not UTF-8 once percent-decoded") from None


def _host(text: str) -> str:
    """The host as it goes into the URL opened (IDNA for a name); raises ValueError."""
    if not text:
        raise ValueError("expected an http:// or https:// URL with a host")
    if text.startswith("["):
        address = text[1:-1].replace("%25", "%")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise ValueError("the host is not a valid IPv6 address in [ ]") from None
        return text
    try:
        ascii_name = text.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError("the host is not a valid host name") from None
    if not all(_LABEL.fullmatch(label) for label in ascii_name.rstrip(".").split(".")):
        raise ValueError("the host is not a valid host name")
    return ascii_name


def _split(text: str) -> OutgoingURL:
    """The parse; raises ValueError with the reason (never holding the URL)."""
    if any(ch.isspace() or unicodedata.category(ch).startswith("C") for ch in text):
        raise ValueError("the URL holds white space or a control character")
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ValueError("expected an http:// or https:// URL")
    scheme = scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError("expected an http:// or https:// URL")
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in tail:
        raise ValueError("an @ after the host: a raw / ? or # in the password ends the host early")
    user: str | None = None
    password: str | None = None
    userinfo, at, hostport = authority.rpartition("@")
    if at:
        raw_user, _, raw_password = userinfo.partition(":")
        user, password = _decode(raw_user), _decode(raw_password)
        if ":" in user:
            raise ValueError("a : in the user name (Basic authentication cannot carry it)")
        if not user and not password:
            user = password = None  # "http://@host": no credentials
    if hostport.startswith("["):
        close = hostport.find("]")
        host_text, port_text = hostport[: close + 1], hostport[close + 1 :]
        if close < 0 or (port_text and not port_text.startswith(":")):
            raise ValueError("the host is not a valid IPv6 address in [ ]")
        port_text = port_text[1:]
    else:
        host_text, _, port_text = hostport.partition(":")
        if ":" in port_text:
            raise ValueError("an IPv6 address must be written in [ ]")
    if port_text and not (_PORT.fullmatch(port_text) and 1 <= int(port_text) <= 65535):
        raise ValueError("the port is not a number from 1 to 65535")
    host = _host(host_text)
    tail = tail.partition("#")[0]
    url = f"{scheme}://{host}{':' + port_text if port_text else ''}{quote(tail, safe=_KEEP)}"
    return OutgoingURL(url=url, user=user, password=password)


def parse_outgoing_url(text: str, *, what: str, default_scheme: str | None = None) -> OutgoingURL:
    """Check ``text``, an ``http(s)`` URL that data will be sent to, and take its credentials out.

    ``what`` names where the URL came from (``--push``, ``$PERFGATE_WEBHOOK_URL``);
    ``default_scheme`` is put in front of a URL without one (prometheus_client's
    ``127.0.0.1:9091``).

    Raises:
        InputError: not an ``http(s)`` URL with a host, a port from 1 to 65535 and userinfo
            that reads one way only; the message shows the URL masked, never a password.
    """
    if default_scheme is not None and not _HAS_SCHEME.match(text):
        text = f"{default_scheme}://{text}"
    shown = mask_url(_printable(text))
    try:
        parsed = _split(text)
    except ValueError as exc:
        raise InputError(f"{exc}; {_HOW}", source=_hide_rest(shown), field=what) from None
    secrets = url_secrets(text)
    if parsed.password:
        secrets += [parsed.password]
    elif parsed.user:
        secrets += [parsed.user]  # a user alone is a token
    return OutgoingURL(url=parsed.url, user=parsed.user, password=parsed.password, shown=shown, secrets=tuple(secrets))


def _hide_rest(shown: str) -> str:
    # a URL that did not parse may hold a password where mask_url does not look for one
    # (after a raw # or /, with no @ to end it; in place of the port): show the scheme,
    # the user and the host only
    scheme, sep, rest = shown.partition("://")
    if not sep or not _HAS_SCHEME.match(shown):
        return MASK
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, hostport = authority.rpartition("@")
    if at:
        name, colon, _ = userinfo.partition(":")
        userinfo = f"{name}:{MASK}@" if colon else f"{MASK}@"
    if not hostport.startswith("[") and ":" in hostport:
        host, _, port = hostport.partition(":")
        hostport = f"{host}:{port if _PORT.fullmatch(port) else MASK}"
    path = rest[len(authority) :]
    return f"{scheme}://{userinfo}{hostport}{path if path in ('', '/') else '/' + MASK}"

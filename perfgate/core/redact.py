"""The one secret masker: every message that may carry a URL or a credential goes through here.

Two tools, used together:

- :func:`mask_url` hides the password of a URL (``postgresql://ci:***@db/perf``) without
  parsing it with :func:`urllib.parse.urlsplit`, which raises on a malformed IPv6 host
  and stops the userinfo at a raw ``#``, ``/`` or ``?`` inside a password. The userinfo is
  everything between ``://`` and the *last* ``@``; what follows its first ``:`` is hidden.
  Hiding too much (an ``@`` in a query string) is allowed; hiding too little is not.
  In an ``http(s)`` URL a user without a password (``https://TOKEN@host``) is a token and
  is hidden whole; so is the value of a query or fragment parameter whose name ends in
  token, key, secret, sig, signature, password, auth, credential or session
  (``?access_token=***``, ``#api_key=***``), as are ``password=`` values in libpq strings.
- :func:`url_secrets` and :func:`smtp_secrets` list the strings that must never appear in
  output (a password as written and percent-decoded, the base64 forms an SMTP server may
  echo back); :func:`mask` replaces each of them wherever it appears, whatever its length.

Internal: shared with ``cli``, ``export``, ``notify``, ``store``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote

__all__ = ["MASK", "mask", "mask_url", "smtp_secrets", "url_secrets"]

MASK = "***"
_SHORT = 4

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# a value masked already, followed by the punctuation of the message around it: left as it is,
# so that masking twice does not eat the ": " after a URL
_MASKED = r"\*\*\*(?=[:;,.]?(?:\s|$))"
# password=... in libpq keyword strings and in query strings (quoted or not)
_KEYWORD_PASSWORD = re.compile(rf"(password\s*=\s*)('(?:[^'\\]|\\.)*'|{_MASKED}|[^\s&]+)", re.IGNORECASE)
# ?access_token=..., &api_key=..., #sig=...: a query or fragment parameter named like a secret
_SECRET_PARAMETER = re.compile(
    r"((?<=[?&;#])[A-Za-z0-9_.\-]*(?:token|key|secret|sig|signature|password|passwd|pwd|pass|auth|authorization"
    rf"|credentials?|session|sessionid)=)({_MASKED}|[^&#\s]+)",
    re.IGNORECASE,
)
_TOKEN_SCHEMES = ("http://", "https://")  # where a user without a password is a token


def _userinfo_spans(text: str, *, one_url: bool = False) -> Iterable[tuple[int, int]]:
    """(start, end) of each password in ``text``: after ``scheme://user:``, up to the last ``@``
    before the next white space (for ``http(s)``, a user without a password as well).
    ``one_url``: ``text`` is a single URL, white space included (a raw space in a password)."""
    for match in _SCHEME.finditer(text):
        start = match.end()
        end_of_url = len(text)
        space = None if one_url else re.search(r"\s", text[start:])
        if space is not None:
            end_of_url = start + space.start()
        at = text.rfind("@", start, end_of_url)
        if at < 0:
            continue
        colon = text.find(":", start, at)
        if colon < 0:
            user = text[start:at]
            if match.group().lower() in _TOKEN_SCHEMES and user and not any(c in user for c in "/?#[]"):
                yield start, at
            continue
        user = text[start:colon]
        if any(c in user for c in "/?#[]"):  # not a user name: a host, path or IPv6 literal came first
            continue
        yield colon + 1, at


def mask_url(text: str) -> str:
    """``text`` (a URL, or a message holding URLs) with every password replaced by :data:`MASK`."""
    spans = list(_userinfo_spans(text))
    for start, end in reversed(spans):
        if text[start:end] != MASK:
            text = text[:start] + MASK + text[end:]
    text = _SECRET_PARAMETER.sub(lambda m: m.group(1) + MASK, text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)


def url_secrets(url: str | None) -> list[str]:
    """The passwords of ``url``, as written and percent-decoded (a driver may echo either),
    and their pieces between URL delimiters: a driver that reads ``pa#ss/w?rd`` as a host,
    a path and a query echoes ``rd@host`` in its error."""
    if not url:
        return []
    found: list[str] = []
    for start, end in _userinfo_spans(url, one_url=True):
        found.append(url[start:end])
    for match in _KEYWORD_PASSWORD.finditer(url):
        value = match.group(2)
        found.append(value[1:-1] if value.startswith("'") and value.endswith("'") else value)
    found += [match.group(2) for match in _SECRET_PARAMETER.finditer(url)]
    out = []
    for secret in found:
        out += [secret, unquote(secret), *re.split(r"[#/?@:&=\[\]]", secret)]
    return [s for s in out if s]


def smtp_secrets(user: str | None, password: str | None) -> list[str]:
    """The password and what an SMTP server may echo of the login: the base64 of AUTH PLAIN
    (``\\0user\\0password``) and of AUTH LOGIN (the user, the password), and CRAM-MD5's user."""
    if not password:
        return []
    name = user or ""
    plain = base64.b64encode(f"\0{name}\0{password}".encode()).decode("ascii")
    login = base64.b64encode(password.encode()).decode("ascii")
    return [password, plain, plain.rstrip("="), login, login.rstrip("=")]


def mask(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret replaced by :data:`MASK`, the longest first, and URL
    passwords masked as by :func:`mask_url`.

    Every non-empty secret is masked, however short. One of fewer than :data:`_SHORT`
    characters is masked where it stands on its own (not inside a longer word), so that a
    two-letter password hides ``"pw"`` without turning "password" into "***ssword".
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= _SHORT:
            text = text.replace(secret, MASK)
        else:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", MASK, text)
    return mask_url(text)

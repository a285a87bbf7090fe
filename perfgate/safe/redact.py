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
- :func:`mask_one_url` masks a string known to be one URL (a store URL as given), white
  space included: ``postgresql://ci:my secret pw@db/perf`` is one URL whose password holds
  spaces, where a message is cut at white space.

Internal: shared with ``cli``, ``export``, ``notify``, ``store``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote

from perfgate.safe.text import one_line, plain

__all__ = ["MASK", "mask", "mask_one_url", "mask_url", "smtp_secrets", "url_secrets"]

MASK = "***"
_SHORT = 4

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# a value masked already, followed by the punctuation of the message around it: left as it is,
# so that masking twice does not eat the ": " after a URL
_MASKED = r"\*\*\*(?=[:;,.]?(?:\s|$))"
# password=... in libpq keyword strings and in query strings (quoted or not)
_KEYWORD_PASSWORD = re.compile(rf"(password\s*=\s*)('(?:[^'\\]|\\.)*'|{_MASKED}|[^\s&]+)", re.IGNORECASE)
# ?access_token=..., &api_key=..., #sig=...: a query or fragment parameter named like a secret
_SECRET_NAME = (
    r"((?<=[?&;#])[A-Za-z0-9_.\-]*(?:token|key|secret|sig|signature|password|passwd|pwd|pass|auth|authorization"
    r"|credentials?|session|sessionid)=)"
)
_SECRET_PARAMETER = re.compile(rf"{_SECRET_NAME}({_MASKED}|[^&#\s]+)", re.IGNORECASE)
_TOKEN_SCHEMES = ("http://", "https://")  # where a user without a password is a token
# in one URL (white space included), a password= or secret parameter's value runs to the next '&'
_WHOLE_PASSWORD = re.compile(r"(password\s*=\s*)([^&]+)", re.IGNORECASE)
_WHOLE_SECRET_PARAMETER = re.compile(rf"{_SECRET_NAME}([^&]+)", re.IGNORECASE)


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
        if "@" in user and _WHOLE_SECRET_PARAMETER.search(text, colon, at):
            # ci@host/db?password=p@ss: the last '@' is the query's, whose password= is masked as such
            continue
        yield colon + 1, at


def mask_url(text: str, *, one_url: bool = False) -> str:
    """``text`` (a URL, or a message holding URLs) with every password replaced by :data:`MASK`.

    ``one_url``: ``text`` is a single URL, white space included (see :func:`mask_one_url`)."""
    spans = list(_userinfo_spans(text, one_url=one_url))
    for start, end in reversed(spans):
        if text[start:end] != MASK:
            text = text[:start] + MASK + text[end:]
    if not one_url:
        text = _SECRET_PARAMETER.sub(lambda m: m.group(1) + MASK, text)
        return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    text = _WHOLE_SECRET_PARAMETER.sub(lambda m: m.group(1) + MASK, text)
    for start, end in reversed(list(_password_values(text))):
        text = text[:start] + MASK + text[end:]
    return text


def _password_values(url: str) -> Iterable[tuple[int, int]]:
    """(start, end) of each ``password=`` value of one URL: up to the next ``&``, white space
    included; in a libpq keyword string (no ``://``), a quoted value up to its closing quote."""
    for match in _WHOLE_PASSWORD.finditer(url):
        quoted = _KEYWORD_PASSWORD.match(url, match.start()) if "://" not in url else None
        if quoted is not None and len(quoted.group(2)) > 1 and quoted.group(2)[0] == quoted.group(2)[-1] == "'":
            yield quoted.start(2), quoted.end(2)
        elif match.group(2) != MASK:
            yield match.start(2), match.end(2)


def mask_one_url(url: str) -> str:
    """``url``, one URL however odd its characters (a store URL as the user gave it), with
    its passwords masked: the user information up to the last ``@``, ``password=`` and
    secret parameters up to the next ``&``, and every other place :func:`url_secrets` of
    ``url`` appears (a path or host that a raw ``/`` or ``@`` in the password made)."""
    return mask(mask_url(url, one_url=True), url_secrets(url))


def _forms(secret: str) -> list[str]:
    """``secret`` as a message may show it: as written, percent-decoded, and each of those on
    one line (white space runs as one space, control characters escaped) as perfgate prints
    messages; then its pieces between URL delimiters and, of at least :data:`_SHORT`
    characters, between white space (a driver that stops at a space echoes the rest)."""
    whole = [secret, unquote(secret)]
    whole += [form for w in list(whole) for form in (" ".join(w.split()), plain(w), one_line(w))]
    pieces = [p for w in whole for p in re.split(r"[#/?@:&=\[\]]", w)]
    pieces += [word for p in pieces for word in p.split() if len(word) >= _SHORT]
    return list(dict.fromkeys(s for s in whole + pieces if s and s.strip()))


def url_secrets(url: str | None) -> list[str]:
    """The passwords of ``url`` (one URL, white space included), in every form of
    :func:`_forms`: as written and percent-decoded (a driver may echo either), on one line,
    and their pieces between URL delimiters: a driver that reads ``pa#ss/w?rd`` as a host,
    a path and a query echoes ``rd@host`` in its error. A ``password=`` value (of a query or a
    libpq keyword string) runs to the next ``&``, spaces included."""
    if not url:
        return []
    found: list[str] = []
    for start, end in _userinfo_spans(url, one_url=True):
        found.append(url[start:end])
    for start, end in _password_values(url):
        value = url[start:end]
        found.append(value)
        if "://" not in url and len(value) > 1 and value[0] == value[-1] == "'":  # libpq: password='a b'
            found.append(re.sub(r"\\(.)", r"\1", value[1:-1]))
    found += [match.group(2) for match in _WHOLE_SECRET_PARAMETER.finditer(url)]
    return [form for secret in found if secret != MASK for form in _forms(secret)]


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

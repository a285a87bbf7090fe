"""The secrets of the store URLs this process was given, masked in every message the command line prints.

A store URL comes from ``--store``, ``PERFGATE_STORE`` or the configuration's ``store``, and
its password may hold any character, white space included. The store names its URL with the
password masked (:func:`perfgate.store.mask_url`); a message that quotes the URL or its
password some other way (a driver's text, a traceback) is masked here, against every form of
the password that :func:`perfgate.safe.redact.url_secrets` lists, before it is printed.
"""

from __future__ import annotations

from perfgate.safe.redact import mask, url_secrets

__all__ = ["forget", "remember_store_url", "scrub"]

_SECRETS: set[str] = set()


def forget() -> None:
    """Start a command with no secret remembered (``cli.main`` run again in one process)."""
    _SECRETS.clear()


def remember_store_url(url: str) -> str:
    """Keep the passwords of ``url`` for :func:`scrub`; return ``url``."""
    _SECRETS.update(url_secrets(url))
    return url


def scrub(text: str) -> str:
    """``text`` with every remembered secret, and every URL password, masked."""
    return mask(text, _SECRETS)

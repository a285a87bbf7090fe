"""The one Markdown escaper: data in a report renders as the text it is, never as markup.

Metric names, notes, commits, branches, fingerprints and paths come from files anyone can
write, and the report is posted as a pull-request comment, where GitHub renders Markdown
with a subset of raw HTML. Every piece of data goes through one of:

- :func:`md_text` for running text, headings, bullets and table cells: control characters
  are shown as escapes (:func:`perfgate.safe.text.plain`), so a new line cannot start a
  heading, a list or a fence, and data never begins a line. Then the characters that
  mean something inside a line are backslash-escaped, which CommonMark makes literal:
  ``\\ ` * [ ] < > ! & | ~ $`` always, ``_`` where it could open or close emphasis (not
  inside ``training_step_time_ms``). So ``<img …>``, ``<!-- perfgate-report -->``,
  ``[x](javascript:…)``, ``![](http://…)``, code spans, emphasis, strike-through, table
  pipes, entity references (``&amp;``) and GitHub's ``$math$`` all stay text.
  GitHub's own autolinks are defused with a zero-width space: ``@team`` in a metric name
  must not notify a team, ``https://…`` and ``www.…`` must not become links.
- :func:`md_prose` for perfgate's own sentences that quote data in backticks (``file
  `dqn_baseline.json```): the quoted parts become code spans, the rest text.
- :func:`md_code` for an inline code span (a fingerprint, a flag): a fence of backticks
  longer than any run inside, so the span cannot be closed early.
- :func:`md_link_url` for the target of a link perfgate itself writes: only ``http`` and
  ``https``, with the characters that could end the link percent-encoded.
- :func:`md_html` for data inside a raw HTML line perfgate writes (a comment's
  ``<summary>``), where Markdown is not parsed: HTML-escaped, on one line, autolinks defused.

The test renders reports through a CommonMark renderer with raw HTML allowed and checks
that no element appears that perfgate did not write (``tests/safety/test_markdown.py``).

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import html
import re

from perfgate.errors import InputError
from perfgate.safe.text import plain

__all__ = ["Markdown", "md_cell", "md_code", "md_html", "md_link_url", "md_prose", "md_text"]

# inline syntax; "_" only at a word's edge, where it can delimit emphasis (CommonMark §6.2)
_SPECIAL = re.compile(r"""([\\`*\[\]<>!&|~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))""")


class Markdown(str):
    """Text that is Markdown already, written by perfgate (a code span, a link): kept as it is."""

    __slots__ = ()


# GitHub turns some plain text into links after rendering: @mentions (which notify people),
# bare URLs and www. addresses. A zero-width space after "@", in "://" or after "www" stops it.
_GITHUB_LINKS = re.compile(r"(?i)(@)(?=[a-z0-9])|(:)(?=//)|(www)(?=\.)")


def md_text(text: object) -> str:
    """``text`` as literal Markdown text, on one line."""
    escaped = _SPECIAL.sub(r"\\\1", plain(text))
    return _GITHUB_LINKS.sub(lambda m: m.group(0) + "\u200b", escaped)


def md_html(text: object) -> str:
    """``text`` inside a raw HTML line (``<summary>…</summary>``): HTML-escaped, control characters
    shown as escapes (so it stays on its line), GitHub's autolinks defused as in :func:`md_text`."""
    escaped = html.escape(plain(text), quote=True)
    return _GITHUB_LINKS.sub(lambda m: m.group(0) + "\u200b", escaped)


def md_cell(cell: object) -> str:
    """A table cell: :class:`Markdown` as written, anything else through :func:`md_text`."""
    return cell if isinstance(cell, Markdown) else md_text(cell)


def md_code(text: object) -> str:
    """``text`` as an inline code span (control characters escaped, any backticks inside kept)."""
    value = plain(text)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def md_prose(text: object) -> str:
    """perfgate's text with data quoted in backticks: each `quoted` part as a code span."""
    parts = plain(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: all of it is text
        return md_text(text)
    return "".join(md_code(part) if i % 2 else md_text(part) for i, part in enumerate(parts))


_URL_UNSAFE = re.compile(r"[\x00-\x20<>()\[\]\\`\"'\x7f-\U0010ffff]")


def md_link_url(url: str, *, field: str) -> str:
    """``url`` as a link target: ``http(s)`` only, anything that could end the link percent-encoded.

    Raises:
        InputError: another scheme (``javascript:``, ``data:``), naming ``field``.
    """
    if not re.match(r"(?i)https?://", url):
        raise InputError(f"must be an http:// or https:// URL, got {plain(url)!r}", field=field)
    return _URL_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), url)

"""Data shown as plain text: control characters escaped, messages on one line.

Metric names, benchmark names, commits and branches come from files that anyone may
write. A terminal, a CI log or an e-mail subject must show them as they are, never act
on them: an ANSI escape would recolour or rewrite the screen, a new line would forge a
second line of output. :func:`plain` shows such characters as Python escapes
(``\\x1b``, ``\\n``), so nothing is hidden either.

Internal: shared with ``cli``, ``config``, ``report``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import unicodedata

__all__ = ["one_line", "plain"]

# categories shown escaped: control (Cc), format (Cf: bidi overrides, zero-width joiners),
# line and paragraph separators (Zl, Zp), surrogates and unassigned code points
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def plain(text: object) -> str:
    """``text`` with every control, format and separator character shown as an escape."""
    value = str(text)
    if value.isprintable():  # the common case, and fast
        return value
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch for ch in value)


def one_line(text: object) -> str:
    """A message on one line: runs of white space (new lines included) become one space,
    other control characters are escaped."""
    return plain(" ".join(str(text).split()))

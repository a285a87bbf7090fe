"""Slack (or a Slack-compatible service: Mattermost, Rocket.Chat) incoming webhooks.

The payload has a plain ``text`` fallback and one ``mrkdwn`` section. Every piece of data
(model, branch, metric names) is escaped as Slack requires — ``&``, ``<`` and ``>``
become entities — so a metric called ``<!channel>`` cannot ping a channel and
``<http://evil|click>`` cannot become a link; metric names are also set in code spans,
where ``*bold*`` or ``_italics_`` stay literal.
"""

from __future__ import annotations

from typing import Any

from perfgate.notify._http import JSONPostNotifier
from perfgate.notify._message import Summary

__all__ = ["SlackNotifier", "escape", "payload"]

_ICON = {"regression": ":x:", "inconclusive": ":grey_question:", "improvement": ":white_check_mark:"}
_KIND = {"regressed": "regressed", "over_budget": "over budget", "improved": "improved", "inconclusive": "inconclusive"}
_MAX_SECTION = 2900  # Slack refuses a section text over 3000 characters


def escape(text: str) -> str:
    """Slack's escaping of user data: ``&`` ``<`` ``>`` as entities, control characters as spaces."""
    text = "".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    # a backtick would close the code span early
    return "`" + escape(text).replace("`", "'") + "`"


def payload(summary: Summary) -> dict[str, Any]:
    """The JSON body for an incoming webhook."""
    head = f"{_ICON[summary.status]} *{escape(summary.headline)}*"
    where = [f"model {_code(summary.model)}"]
    if summary.branch:
        where.append(f"branch {_code(summary.branch)}")
    if summary.commit:
        where.append(f"commit {_code(summary.commit[:12])}")
    lines = [head, ", ".join(where)]
    for row in summary.rows:
        lines.append(f"• {_KIND.get(row.kind, row.kind)}: {_code(row.metric)} {escape(row.text)}")
    if summary.more:
        lines.append(f"… and {summary.more} more")
    if summary.url:
        lines.append(f"<{escape(summary.url)}|Full report>")
    text = "\n".join(lines)
    if len(text) > _MAX_SECTION:
        text = text[: _MAX_SECTION - 2].rsplit("\n", 1)[0] + "\n…"
    return {
        "text": escape(summary.headline),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        "unfurl_links": False,
        "unfurl_media": False,
    }


class SlackNotifier(JSONPostNotifier):
    """Post :func:`payload` to the Slack webhook URL held in environment variable ``env_name``."""

    __slots__ = ()
    label = "Slack webhook"

    def body(self, summary: Summary) -> dict[str, Any]:
        return payload(summary)

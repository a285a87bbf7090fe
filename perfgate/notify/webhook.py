"""A generic JSON webhook: the check's summary as data, for any receiver.

The body (``"schema": "perfgate.notification/1"``) carries the verdict, the model and
commit, counts per verdict and up to :data:`~perfgate.notify._message.MAX_ROWS` rows. Metric
names are passed verbatim as JSON strings: JSON escaping makes them safe to transport, and
a receiver that renders them into HTML or Markdown must escape them there.
"""

from __future__ import annotations

import math
from typing import Any

from perfgate.notify._http import JSONPostNotifier
from perfgate.notify._message import Summary

__all__ = ["SCHEMA", "WebhookNotifier", "payload"]

SCHEMA = "perfgate.notification/1"


def _finite(value: float | None) -> float | None:
    # JSON has no NaN or infinity; a change from a zero baseline is infinite
    return value if value is not None and math.isfinite(value) else None


def payload(summary: Summary) -> dict[str, Any]:
    """The JSON body."""
    return {
        "schema": SCHEMA,
        "status": summary.status,
        "events": list(summary.events),
        "headline": summary.headline,
        "model": summary.model,
        "commit": summary.commit,
        "branch": summary.branch,
        "exit_code": summary.exit_code,
        "counts": dict(summary.counts),
        "baseline_source": summary.baseline_source,
        "url": summary.url,
        "rows": [
            {
                "kind": r.kind,
                "metric": r.metric,
                "statistic": r.statistic,
                "unit": r.unit,
                "baseline": _finite(r.baseline),
                "current": _finite(r.current),
                "change": _finite(r.change),
                "limit": _finite(r.limit),
            }
            for r in summary.rows
        ],
        "rows_omitted": summary.more,
    }


class WebhookNotifier(JSONPostNotifier):
    """Post :func:`payload` to the URL held in environment variable ``env_name``."""

    __slots__ = ()
    label = "webhook"

    def body(self, summary: Summary) -> dict[str, Any]:
        return payload(summary)

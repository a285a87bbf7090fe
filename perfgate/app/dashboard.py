"""``perfgate dashboard``: the Grafana dashboard of perfgate's Prometheus metrics, as JSON."""

from __future__ import annotations

from perfgate.app.export import require_extra

__all__ = ["dashboard"]


def dashboard() -> str:
    """The dashboard's JSON, to import in Grafana.

    Raises:
        ConfigError: the ``export`` extra (grafana_foundation_sdk) is not installed.
    """
    from perfgate.export.grafana import dashboard_json

    require_extra("grafana_foundation_sdk", "perfgate dashboard")
    return dashboard_json()

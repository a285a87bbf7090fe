"""Exports for dashboards: Prometheus metrics (:mod:`.prometheus`) and the Grafana dashboard (:mod:`.grafana`).

prometheus_client and grafana-foundation-sdk (the ``export`` extra and ``dev``) are
imported only inside these modules, so ``import perfgate`` never needs them.
"""

__all__: list[str] = []
